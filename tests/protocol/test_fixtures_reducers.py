"""Reducer conformance: fold each fixture's actions over its initial state.

Fixtures: ``<AHP_FIXTURES_DIR>/reducers/*.json`` (default ``../shared/fixtures``),
one test per file, run as ``fixtures/README.md`` prescribes: reducer from the
``reducer`` field, clock frozen at 9999 ms, JSON ``null`` in ``initial`` and
``expected`` means absent, unknown actions are no-ops. Each case also checks
that the reducer left its input untouched.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ahp_server.protocol import codec
from ahp_server.protocol.v0_7.reducers import reduce_chat, reduce_root, reduce_session
from ahp_server.protocol.v0_7.reducers.annotations import reduce_annotations
from ahp_server.protocol.v0_7.reducers.changeset import reduce_changeset
from ahp_server.protocol.v0_7.reducers.resource_watch import reduce_resource_watch
from ahp_server.protocol.v0_7.reducers.terminal import reduce_terminal
from ahp_server.protocol.v0_7.types import (
    AnnotationsState,
    ChangesetState,
    ChatState,
    ResourceWatchState,
    RootState,
    SessionState,
    StateAction,
    TerminalState,
)
from tests.fixtures_path import fixture_files, load

FILES = fixture_files("reducers")
FROZEN_MS = 9999.0

REDUCERS: dict[str, tuple[type[Any], Any]] = {
    "root": (RootState, reduce_root),
    "session": (SessionState, reduce_session),
    "chat": (ChatState, reduce_chat),
    "changeset": (ChangesetState, reduce_changeset),
    "terminal": (TerminalState, reduce_terminal),
    "annotations": (AnnotationsState, reduce_annotations),
    "resourceWatch": (ResourceWatchState, reduce_resource_watch),
}


def drop_nulls(value: Any) -> Any:
    """Recursively drop null-valued keys (fixtures/README.md step 5)."""
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value]
    return value


def clock() -> float:
    return FROZEN_MS


def run_case(
    case: dict[str, Any],
    reducers: dict[str, tuple[type[Any], Any]] = REDUCERS,
    action_type: Any = StateAction,
) -> tuple[Any, Any]:
    """Fold the case's actions (decoded as ``action_type``) with its named reducer."""
    name = case.get("reducer")
    if name not in reducers:
        pytest.fail(
            f"fixture names reducer {name!r}, which this runner does not know "
            f"(known: {', '.join(sorted(reducers))})",
            pytrace=False,
        )
    state_type, reducer = reducers[name]
    state = codec.convert(drop_nulls(case["initial"]), state_type)
    before = codec.encode(state)
    result = state
    for raw_action in case["actions"]:
        action = codec.convert(raw_action, action_type)
        result = reducer(result, action, clock)
    assert codec.encode(state) == before, "the reducer mutated its input state"
    return drop_nulls(json.loads(codec.encode(result))), drop_nulls(case["expected"])


def test_corpus_is_not_empty() -> None:
    assert FILES, "no reducer fixtures found"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_fixtures_reducer(path: Path) -> None:
    actual, expected = run_case(load(path))
    assert actual == expected
