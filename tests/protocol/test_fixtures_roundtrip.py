"""Round-trip conformance: decode each fixture's input into our typed model and re-encode.

Fixtures: ``<AHP_FIXTURES_DIR>/round-trips/*.json`` (default ``../shared/fixtures``).
The result must equal ``acceptableOutputs[0]`` exactly: key order is free, key
presence is not (null stays null, absent stays absent). Group B fixtures carry
unknown keys on known types; a typed decoder drops them (``acceptableOutputs[0]``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ahp_server.protocol import codec, jsonrpc
from ahp_server.protocol.v0_7.types import WIRE_TYPES
from tests.fixtures_path import fixture_files, load

FILES = fixture_files("round-trips")


def roundtrip(type_name: str, value: Any) -> Any:
    raw = json.dumps(value).encode()
    if type_name == "JsonRpcMessage":
        decoded: Any = jsonrpc.parse_message(raw)
    else:
        if type_name not in WIRE_TYPES:
            pytest.fail(f"no wire type named {type_name!r}")
        decoded = codec.decode(raw, WIRE_TYPES[type_name])
    return json.loads(codec.encode(decoded))


def test_corpus_is_not_empty() -> None:
    assert FILES, "no round-trip fixtures found"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_fixtures_roundtrip(path: Path) -> None:
    case = load(path)
    outputs = case["acceptableOutputs"]
    assert len(outputs) == 1, "a fixture has exactly one canonical output"
    assert roundtrip(case["type"], case["input"]) == outputs[0]
