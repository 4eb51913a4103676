"""1.0 reducer conformance: each fixture's actions folded by the 1.0 reducers.

Fixtures: ``<AHP_FIXTURES_1_0_DIR>/reducers/*.json`` (default
``tests/data/fixtures-1.0``), the layout and rules of the 0.7 corpus
(``../shared/fixtures/README.md``): one test per file, the reducer named by the
file, JSON ``null`` in ``initial``/``expected`` means absent, unknown actions
are no-ops, and the input state must come back untouched. The clock is frozen
at 9999 ms as there, though at 1.0 the chat reducer reads none (a fixture that
expects ``1970-01-01T00:00:09.999Z`` would show a clock leaking back in).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ahp_server.protocol.reducers import (
    reduce_annotations,
    reduce_changeset,
    reduce_chat,
    reduce_resource_watch,
    reduce_root,
    reduce_session,
    reduce_terminal,
)
from ahp_server.protocol.types import (
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
from tests.protocol.test_fixtures_reducers import run_case

FILES = fixture_files("reducers", version="1.0")

REDUCERS: dict[str, tuple[type[Any], Any]] = {
    "root": (RootState, reduce_root),
    "session": (SessionState, reduce_session),
    "chat": (ChatState, reduce_chat),
    "changeset": (ChangesetState, reduce_changeset),
    "terminal": (TerminalState, reduce_terminal),
    "annotations": (AnnotationsState, reduce_annotations),
    "resourceWatch": (ResourceWatchState, reduce_resource_watch),
}


def test_corpus_is_not_empty() -> None:
    assert FILES, "no 1.0 reducer fixtures found"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_fixtures_reducer_1_0(path: Path) -> None:
    actual, expected = run_case(load(path), REDUCERS, StateAction)
    assert actual == expected
