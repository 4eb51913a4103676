"""File edits as the protocol carries them: ``FileEdit`` sides whose text travels inline.

Layer: protocol (pure: no I/O, nothing of the rest of the package).

One encoding for every place the host shows a file's text on both sides of a
change: a changeset's files (``host/channels/changesets.py``) and the edits a tool call
will perform, previewed before the user confirms it (``ToolCallReadyAction.edits``,
docs/agents.md, "What a confirmation shows"). Each side's ``content`` is a
``ContentRef`` whose URI is a ``data:`` URI (RFC 2397, base64, UTF-8 text): a
client decodes it itself (:func:`side_text`), no ``resourceRead`` is needed,
and it stays true after the file changes again.
"""

from __future__ import annotations

import base64
import binascii
import difflib

from msgspec import UNSET, UnsetType

from ahp_server.protocol.types import ContentRef, FileEdit, FileEditDiffStats, FileEditSide

#: Line counts (``edit.diff``) are computed up to this many lines on both sides.
DIFF_MAX_LINES = 20_000
DATA_URI = "data:text/plain;charset=utf-8;base64,"
CONTENT_TYPE = "text/plain; charset=utf-8"


def side(uri: str, text: str) -> FileEditSide:
    """One side of an edit: the file ``uri`` holding ``text``."""
    data = text.encode("utf-8")
    content = ContentRef(
        uri=DATA_URI + base64.b64encode(data).decode("ascii"),
        size_hint=len(data),
        content_type=CONTENT_TYPE,
    )
    return FileEditSide(uri=uri, content=content)


def side_text(edit_side: FileEditSide | UnsetType) -> str | None:
    """The text a side carries in its ``data:`` URI (``None``: no side, or not ours)."""
    if isinstance(edit_side, UnsetType) or not edit_side.content.uri.startswith(DATA_URI):
        return None
    try:
        return base64.b64decode(edit_side.content.uri.removeprefix(DATA_URI)).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def line_counts(before: str, after: str) -> FileEditDiffStats | UnsetType:
    """Lines added and removed (``UNSET`` beyond :data:`DIFF_MAX_LINES`)."""
    old, new = before.splitlines(), after.splitlines()
    if len(old) + len(new) > DIFF_MAX_LINES:
        return UNSET
    added = removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new).get_opcodes():
        if tag in ("replace", "delete"):
            removed += i2 - i1
        if tag in ("replace", "insert"):
            added += j2 - j1
    return FileEditDiffStats(added=added, removed=removed)


def file_edit(uri: str, before: str | None, after: str) -> FileEdit:
    """A proposed write of ``after`` to ``uri`` (``before``: its text now, ``None``: new)."""
    return FileEdit(
        before=UNSET if before is None else side(uri, before),
        after=side(uri, after),
        diff=line_counts(before or "", after),
    )
