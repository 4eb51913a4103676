"""The pure 1.0 reducer of annotations channels (``ahp-session:/<uuid>/annotations``).

Layer: protocol (pure). Spec ``docs/reference/annotations.md`` and WIRE-SUMMARY
§12; semantics of upstream ``types/channels-annotations/reducer.ts`` at 0.7.0,
with the 1.0 ``origin`` (CHANGELOG 0.9.0 Changed) in place of ``turnId``.
Every ``annotations/*`` action is client-dispatchable, so this same function is
the write-ahead reducer on clients and the authoritative one on the host.

Rules worth knowing before editing (each is what every client computes):

* ``set`` upserts an annotation by id and ``entrySet`` an entry by id within
  its annotation: the **first** match is replaced whole, in place, otherwise
  the new one is appended (dispatch order is kept).
* ``removed`` / ``entryRemoved`` drop the **first** match; unknown ids (of the
  annotation or of the entry) are no-ops, as is ``entrySet``/``updated`` on an
  unknown annotation.
* ``updated`` writes only the fields present on the action (``turnId``,
  ``resource``, ``range``, ``resolved``; ``false`` is a value). It never touches
  ``entries``, ``id`` or ``_meta`` and cannot clear ``range``.
* The "at least one entry" rule is the producer's job: ``entryRemoved`` of the
  last entry leaves an annotation with ``entries: []``, as upstream does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from msgspec import UNSET
from msgspec.structs import replace

from ahp_server.protocol.reducers._common import Clock
from ahp_server.protocol.types import (
    Annotation,
    AnnotationsEntryRemovedAction,
    AnnotationsEntrySetAction,
    AnnotationsRemovedAction,
    AnnotationsSetAction,
    AnnotationsState,
    AnnotationsUpdatedAction,
)

__all__ = ["reduce_annotations"]


class _HasId(Protocol):
    """Annotations and their entries: both are keyed by ``id``."""

    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=_HasId)

#: The fields ``annotations/updated`` may write (same names on action and annotation);
#: at 1.0 ``origin`` (replaced whole) takes the place of ``turnId``.
_UPDATABLE = ("origin", "resource", "range", "resolved")


def _index(items: tuple[T, ...], item_id: str) -> int | None:
    """Index of the first item whose ``id`` is ``item_id``."""
    return next((i for i, item in enumerate(items) if item.id == item_id), None)


def _upsert(items: tuple[T, ...], item: T) -> tuple[T, ...]:
    index = _index(items, item.id)
    if index is None:
        return (*items, item)
    return (*items[:index], item, *items[index + 1 :])


def _update_annotation(
    state: AnnotationsState,
    annotation_id: str,
    update: Callable[[Annotation], Annotation | None],
) -> AnnotationsState:
    """Apply ``update`` to the first annotation with that id; ``None`` means no-op."""
    annotations = state.annotations
    index = _index(annotations, annotation_id)
    if index is None:
        return state
    updated = update(annotations[index])
    if updated is None:
        return state
    return replace(state, annotations=(*annotations[:index], updated, *annotations[index + 1 :]))


def _updated(annotation: Annotation, action: AnnotationsUpdatedAction) -> Annotation:
    changes: dict[str, Any] = {}
    for field in _UPDATABLE:
        value = getattr(action, field)
        if value is not UNSET:
            changes[field] = value
    # Upstream always builds a new annotation; with nothing to write the result
    # equals the input, so the input object is returned instead.
    return replace(annotation, **changes) if changes else annotation


def _entry_removed(annotation: Annotation, entry_id: str) -> Annotation | None:
    entries = annotation.entries
    index = _index(entries, entry_id)
    if index is None:
        return None
    return replace(annotation, entries=(*entries[:index], *entries[index + 1 :]))


def reduce_annotations(state: AnnotationsState, action: object, now: Clock) -> AnnotationsState:
    """Apply one action to an annotations state; unknown actions return ``state`` itself."""
    del now  # no annotations action is time-stamped
    match action:
        case AnnotationsSetAction(annotation=annotation):
            return replace(state, annotations=_upsert(state.annotations, annotation))
        case AnnotationsUpdatedAction(annotation_id=annotation_id):
            return _update_annotation(state, annotation_id, lambda a: _updated(a, action))
        case AnnotationsRemovedAction(annotation_id=annotation_id):
            annotations = state.annotations
            index = _index(annotations, annotation_id)
            if index is None:
                return state
            return replace(state, annotations=(*annotations[:index], *annotations[index + 1 :]))
        case AnnotationsEntrySetAction(annotation_id=annotation_id, entry=entry):
            return _update_annotation(
                state,
                annotation_id,
                lambda a: replace(a, entries=_upsert(a.entries, entry)),
            )
        case AnnotationsEntryRemovedAction(annotation_id=annotation_id, entry_id=entry_id):
            return _update_annotation(state, annotation_id, lambda a: _entry_removed(a, entry_id))
        case _:
            return state
