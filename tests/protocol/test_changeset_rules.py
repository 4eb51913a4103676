"""``check_dispatch`` on changeset and resource-watch channels (changeset.md; WIRE-SUMMARY §7, §12).

The rejection cases with a code of their own are in ``test_dispatch_rules.py``'s table.
"""

from __future__ import annotations

import pytest

from ahp_server.protocol import codec
from ahp_server.protocol.dispatch_rules import RejectionCode, check_dispatch
from ahp_server.protocol.types import ChangesetState, ResourceWatchState
from tests.protocol.builders import ME, action

CHANGESET = codec.convert(
    {
        "status": "ready",
        "files": [{"id": "file:///w/a", "edit": {}}, {"id": "file:///w/b", "edit": {}}],
    },
    ChangesetState,
)
WATCH = codec.convert({"root": "file:///w", "recursive": True}, ResourceWatchState)


@pytest.mark.parametrize(
    "files",
    [["file:///w/a"], ["file:///w/a", "file:///w/b"], ["file:///w/gone", "file:///w/b"]],
)
def test_a_client_may_review_files_of_the_changeset(files: list[str]) -> None:
    for reviewed in (True, False):
        review = action("changeset/filesReviewChanged", files=files, reviewed=reviewed)
        assert check_dispatch(CHANGESET, review, ME) is None


@pytest.mark.parametrize(
    "kind",
    [
        "changeset/statusChanged",
        "changeset/fileRemoved",
        "changeset/contentChanged",
        "changeset/operationsChanged",
        "changeset/operationStatusChanged",
        "changeset/cleared",
    ],
)
def test_every_other_changeset_action_is_server_only(kind: str) -> None:
    fields = {
        "changeset/statusChanged": {"status": "ready"},
        "changeset/fileRemoved": {"fileId": "file:///w/a"},
        "changeset/contentChanged": {"files": []},
        "changeset/operationStatusChanged": {"operationId": "x", "status": "idle"},
    }.get(kind, {})
    rejection = check_dispatch(CHANGESET, action(kind, **fields), ME)
    assert rejection is not None
    assert rejection.code is RejectionCode.ServerOnly


def test_actions_of_other_channels_are_refused_on_changesets_and_watches() -> None:
    review = action("changeset/filesReviewChanged", files=["file:///w/a"], reviewed=True)
    on_watch = check_dispatch(WATCH, review, ME)
    assert on_watch is not None
    assert on_watch.code is RejectionCode.WrongChannel
    draft = action("chat/draftChanged")
    on_changeset = check_dispatch(CHANGESET, draft, ME)
    assert on_changeset is not None
    assert on_changeset.code is RejectionCode.WrongChannel
