"""The 1.0 reducer fixtures are 1.0 wire values (a real validator, the 1.0 schema).

Every action of every fixture validates as a 1.0 ``StateAction`` and every
``initial`` / ``expected`` state (``null`` dropped: it means absent there) as
its channel's state type, against ``../shared/spec-1.0/schema``. So a fixture
cannot pass the reducers while describing a shape no 1.0 peer sends.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_path import fixture_files, load
from tests.protocol.test_fixtures_reducers import drop_nulls
from tests.wire_schema import SPEC_1_0, errors

FILES = fixture_files("reducers", version="1.0")
STATE_TYPES = {
    "root": "RootState",
    "session": "SessionState",
    "chat": "ChatState",
    "changeset": "ChangesetState",
    "terminal": "TerminalState",
    "annotations": "AnnotationsState",
    "resourceWatch": "ResourceWatchState",
}


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_fixture_is_valid_1_0(path: Path) -> None:
    case: dict[str, Any] = load(path)
    state_type = STATE_TYPES[case["reducer"]]
    problems = [
        f"{where}: {problem}"
        for where, value, type_name in [
            ("initial", drop_nulls(case["initial"]), state_type),
            ("expected", drop_nulls(case["expected"]), state_type),
            *((f"actions[{i}]", a, "StateAction") for i, a in enumerate(case["actions"])),
        ]
        for problem in errors(SPEC_1_0, type_name, value)
    ]
    assert not problems, problems[:5]


def test_the_validator_rejects_what_1_0_removed() -> None:
    """A 0.7 shape is not a 1.0 one: chat/error's bare ``error`` (0.9.0 made it ``part``)."""
    error = {"errorType": "x", "message": "m"}
    common = {"type": "chat/error", "turnId": "t", "duration": 1}
    assert errors(SPEC_1_0, "StateAction", {**common, "error": error})
    assert not errors(
        SPEC_1_0, "StateAction", {**common, "part": {"kind": "error", "error": error}}
    )
