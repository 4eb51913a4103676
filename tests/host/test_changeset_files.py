"""How a changeset records and merges file changes, and its URIs (host/channels/changesets.py)."""

from __future__ import annotations

import pytest
from msgspec import UNSET

from ahp_server.host.channels.changesets import (
    Limits,
    Recorded,
    catalogue,
    content_bytes,
    merge,
    parse_changeset,
    session_changeset,
    side_text,
    turn_changeset,
)
from ahp_server.protocol.types import ChangesetFile, FileEditDiffStats, FileEditSide

URI = "file:///work/a.txt"
ROOMY = Limits(content_bytes=1024, total_bytes=4096, max_files=10)


def change(**fields: object) -> Recorded:
    values: dict[str, object] = {
        "uri": URI,
        "created": False,
        "deleted": False,
        "before": "old\n",
        "after": "new\n",
        "turn_id": "t1",
        "chat": "ahp-chat:/c",
    }
    values.update(fields)
    return Recorded(**values)  # type: ignore[arg-type]


def record(existing: ChangesetFile | None, **fields: object) -> ChangesetFile | None:
    return merge(existing, change(**fields), limits=ROOMY, room=ROOMY.total_bytes)


def test_a_modification_carries_both_sides_and_line_counts() -> None:
    file = record(None, before="a\nb\n", after="a\nB\nc\n")
    assert file is not None
    assert file.id == URI
    assert side_text(file.edit.before) == "a\nb\n"
    assert side_text(file.edit.after) == "a\nB\nc\n"
    assert file.edit.diff == FileEditDiffStats(added=2, removed=1)
    assert file.meta == {"status": "modified", "turnId": "t1", "chat": "ahp-chat:/c"}
    assert isinstance(file.edit.before, FileEditSide)
    assert file.edit.before.uri == URI
    assert file.edit.before.content.size_hint == 4


def test_a_creation_has_only_after_and_a_deletion_only_before() -> None:
    created = record(None, created=True, before="ignored", after="hi\n")
    assert created is not None
    assert created.edit.before is UNSET
    assert side_text(created.edit.after) == "hi\n"
    assert created.meta["status"] == "added"  # type: ignore[index]
    deleted = record(None, deleted=True, after="ignored")
    assert deleted is not None
    assert side_text(deleted.edit.before) == "old\n"
    assert deleted.edit.after is UNSET
    assert deleted.meta["status"] == "deleted"  # type: ignore[index]


def test_merging_keeps_the_first_before_and_the_last_after() -> None:
    first = record(None, before="v1", after="v2")
    second = record(first, before="v2", after="v3", turn_id="t2")
    assert second is not None
    assert (side_text(second.edit.before), side_text(second.edit.after)) == ("v1", "v3")
    assert second.meta["turnId"] == "t2"  # type: ignore[index]


def test_a_file_that_no_longer_differs_leaves_the_changeset() -> None:
    created = record(None, created=True, after="x")
    assert record(created, deleted=True) is None  # created, then deleted
    changed = record(None, before="same", after="other")
    assert record(changed, before="other", after="same") is None  # changed back
    assert record(None, before="same", after="same") is None  # written unchanged


def test_a_deleted_file_written_again_is_a_modification() -> None:
    deleted = record(None, deleted=True, before="v1")
    again = record(deleted, created=True, after="v2")
    assert again is not None
    assert again.meta["status"] == "modified"  # type: ignore[index]
    assert (side_text(again.edit.before), side_text(again.edit.after)) == ("v1", "v2")


@pytest.mark.parametrize(
    ("fields", "room"),
    [
        ({"after": "x" * 2000}, 4096),  # one side over the per-side cap
        ({"before": None}, 4096),  # the old text is not known
        ({}, 5),  # the changeset has no room left
    ],
)
def test_content_that_cannot_be_kept_is_left_out_entirely(
    fields: dict[str, object], room: int
) -> None:
    file = merge(None, change(**fields), limits=ROOMY, room=room)
    assert file is not None
    assert file.edit.before is UNSET
    assert file.edit.after is UNSET
    assert file.meta["contentOmitted"] is True  # type: ignore[index]
    assert file.meta["status"] == "modified"  # type: ignore[index]
    assert content_bytes([file]) == 0


def test_changeset_uris_round_trip_and_only_the_canonical_spelling_counts() -> None:
    session = "ahp-session:/1f0e-ab"
    turn = "turn-9/odd id"
    uri = turn_changeset(session, turn)
    assert uri == "ahp-changeset:/1f0e-ab/turns/turn-9%2Fodd%20id"
    assert parse_changeset(uri) == (session, turn)
    assert parse_changeset(session_changeset(session)) == (session, None)
    assert session_changeset(session).endswith("/changeset/session")
    assert parse_changeset("ahp-changeset:/1f0e-ab/turns/turn-9%2fodd%20id") is None
    assert parse_changeset("ahp-changeset:/1f0e-ab/turns/") is None
    assert parse_changeset("ahp-changeset:/1f0e-ab/other") is None
    assert parse_changeset("ahp-chat:/x") is None
    template = catalogue(session)[0].uri_template
    assert template.replace("{turnId}", "turn-9%2Fodd%20id") == uri
