"""The pure reducer of changeset channels (the expanded ``Changeset.uriTemplate`` URIs).

Layer: protocol (pure). Spec ``docs/reference/changeset.md`` and WIRE-SUMMARY §12;
semantics of upstream ``types/channels-changeset/reducer.ts`` at 0.7.0, checked by
the fixtures (``*-changeset-*.json``).

Rules worth knowing before editing (each is what every client computes):

* ``fileSet`` upserts by id: the **first** file with that id is replaced in place,
  otherwise the file is appended (stable order). ``fileRemoved`` drops the
  **first** match only and is a no-op for an unknown id.
* ``filesReviewChanged`` sets ``reviewed`` on **every** file whose id is listed;
  a file already carrying exactly that value is left alone, so an absent flag
  *is* changed by ``reviewed: false`` (``undefined !== false``). When no file
  changes the input state is returned.
* ``statusChanged`` / ``operationStatusChanged`` keep ``error`` only when the new
  status is ``error`` (taking the action's, possibly absent, error) and drop it
  on any other status.
* ``contentChanged`` replaces ``files``; it replaces ``operations`` only when the
  action carries them, and sets ``error`` from the action (absent clears it).
  ``status`` is untouched.
* ``operationsChanged`` with absent or ``null`` operations removes the list.
* ``cleared`` empties ``files`` only (status, error and operations stay) and is
  a no-op on an already-empty changeset.
"""

from __future__ import annotations

from msgspec import UNSET, UnsetType
from msgspec.structs import replace

from ahp_server.protocol.reducers._common import Clock
from ahp_server.protocol.v0_7.types import (
    ChangesetClearedAction,
    ChangesetContentChangedAction,
    ChangesetFile,
    ChangesetFileRemovedAction,
    ChangesetFileSetAction,
    ChangesetFilesReviewChangedAction,
    ChangesetOperation,
    ChangesetOperationsChangedAction,
    ChangesetOperationStatus,
    ChangesetOperationStatusChangedAction,
    ChangesetState,
    ChangesetStatus,
    ChangesetStatusChangedAction,
)

__all__ = ["reduce_changeset"]


def _file_index(files: tuple[ChangesetFile, ...], file_id: str) -> int | None:
    """Index of the first file whose id is ``file_id``."""
    return next((i for i, f in enumerate(files) if f.id == file_id), None)


def _file_set(state: ChangesetState, file: ChangesetFile) -> ChangesetState:
    files = state.files
    index = _file_index(files, file.id)
    if index is None:
        return replace(state, files=(*files, file))
    return replace(state, files=(*files[:index], file, *files[index + 1 :]))


def _file_removed(state: ChangesetState, file_id: str) -> ChangesetState:
    files = state.files
    index = _file_index(files, file_id)
    if index is None:
        return state
    return replace(state, files=(*files[:index], *files[index + 1 :]))


def _files_review_changed(
    state: ChangesetState, action: ChangesetFilesReviewChangedAction
) -> ChangesetState:
    ids = set(action.files)
    changed = False
    files: list[ChangesetFile] = []
    for file in state.files:
        # `f.reviewed === action.reviewed`: an absent flag differs from `false`.
        if file.id in ids and file.reviewed != action.reviewed:
            file = replace(file, reviewed=action.reviewed)
            changed = True
        files.append(file)
    return replace(state, files=tuple(files)) if changed else state


def _content_changed(
    state: ChangesetState, action: ChangesetContentChangedAction
) -> ChangesetState:
    operations = state.operations if isinstance(action.operations, UnsetType) else action.operations
    return replace(state, files=action.files, operations=operations, error=action.error)


def _operation_status_changed(
    state: ChangesetState, action: ChangesetOperationStatusChangedAction
) -> ChangesetState:
    operations = state.operations
    if isinstance(operations, UnsetType):
        return state
    index = next((i for i, op in enumerate(operations) if op.id == action.operation_id), None)
    if index is None:
        return state
    error = action.error if action.status == ChangesetOperationStatus.Error else UNSET
    updated: ChangesetOperation = replace(operations[index], status=action.status, error=error)
    return replace(state, operations=(*operations[:index], updated, *operations[index + 1 :]))


def reduce_changeset(state: ChangesetState, action: object, now: Clock) -> ChangesetState:
    """Apply one action to a changeset state; unknown actions return ``state`` itself."""
    del now  # no changeset action is time-stamped
    match action:
        case ChangesetStatusChangedAction(status=status, error=error):
            # A recovered changeset never keeps a stale error.
            kept = error if status == ChangesetStatus.Error else UNSET
            return replace(state, status=status, error=kept)
        case ChangesetFileSetAction(file=file):
            return _file_set(state, file)
        case ChangesetFileRemovedAction(file_id=file_id):
            return _file_removed(state, file_id)
        case ChangesetFilesReviewChangedAction():
            return _files_review_changed(state, action)
        case ChangesetContentChangedAction():
            return _content_changed(state, action)
        case ChangesetOperationsChangedAction(operations=operations):
            # `undefined` clears the list; a JavaScript peer's `null` does the same.
            return replace(state, operations=UNSET if operations is None else operations)
        case ChangesetOperationStatusChangedAction():
            return _operation_status_changed(state, action)
        case ChangesetClearedAction():
            return replace(state, files=()) if state.files else state
        case _:
            return state
