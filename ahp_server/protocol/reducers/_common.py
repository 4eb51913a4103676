"""Helpers shared by the reducers of every version: the injected clock,
timestamps, status bits, and the JavaScript semantics the reducers reproduce.

Layer: protocol (pure). At 1.0 the chat reducer stamps ``modifiedAt`` from the
action's own timestamps, never from a clock (REDUCER-CHANGES 11):
:func:`add_milliseconds`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import msgspec
from msgspec import UNSET, UnsetType
from msgspec.structs import replace

from ahp_server.protocol.types import SessionStatus

__all__ = [
    "ACTIVITY_MASK",
    "Clock",
    "absent_if_none",
    "add_milliseconds",
    "coalesce",
    "find_index",
    "iso_timestamp",
    "js_truthy",
    "merge_partial",
    "or_empty",
    "replace_at",
    "upsert",
    "with_activity",
    "with_flag",
    "without",
]

T = TypeVar("T")

#: Milliseconds since the Unix epoch. Reducers never read the real clock; the
#: caller passes one in (tests freeze it at 9999 ms, fixtures/README.md step 3).
Clock = Callable[[], float]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

#: Bits 0–4 hold exactly one activity state; bits 5 and up are orthogonal
#: flags (WIRE-SUMMARY §10.4).
ACTIVITY_MASK = 0b11111


def iso_timestamp(ms: float) -> str:
    """``ms`` since the epoch as JavaScript's ``Date.prototype.toISOString()`` prints it."""
    global _last_second  # a pure memo: the same input always gives the same text
    whole = int(ms)
    second, millis = divmod(whole, 1000)
    cached = _last_second
    if cached[0] == second:  # the common case: a turn stamps several times a second
        return f"{cached[1]}.{millis:03d}Z"
    m = _EPOCH + timedelta(seconds=second)
    # Formatted by hand: a quarter faster than strftime, and the year keeps its
    # four digits below 1000 as JavaScript's does (strftime's %Y drops them).
    prefix = f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}"
    _last_second = (second, prefix)  # replaced as one tuple (atomic)
    return f"{prefix}.{millis:03d}Z"


#: The last second formatted, and its text up to the seconds.
_last_second: tuple[int | None, str] = (None, "")


def with_activity(status: int, activity: SessionStatus | int) -> int:
    """Replace the activity bits of ``status``, keeping every flag bit (and unknown bits)."""
    return (status & ~ACTIVITY_MASK) | int(activity)


def with_flag(status: int, flag: int, on: bool) -> int:
    """Set or clear one orthogonal flag bit (IsRead, IsArchived)."""
    return status | flag if on else status & ~flag


# -- lists keyed by an id (tuples: the reducers never mutate) -------------------------


def find_index(items: tuple[T, ...], key: Callable[[T], object], value: object) -> int | None:
    """Index of the first item whose ``key`` equals ``value``."""
    return next((i for i, item in enumerate(items) if key(item) == value), None)


def upsert(items: tuple[T, ...], key: Callable[[T], object], item: T) -> tuple[T, ...]:
    """Replace the first item with the same key in place, else append."""
    index = find_index(items, key, key(item))
    if index is None:
        return (*items, item)
    return (*items[:index], item, *items[index + 1 :])


def without(items: tuple[T, ...], index: int) -> tuple[T, ...]:
    return (*items[:index], *items[index + 1 :])


S = TypeVar("S", bound=msgspec.Struct)


def merge_partial(entry: S, changes: msgspec.Struct, required: frozenset[str]) -> S:
    """Shallow-merge a ``Partial<T>``: present keys win, ``null`` clears.

    ``resource`` is identity and is never changed. A ``null`` for a field in
    ``required`` cannot clear it and is ignored.
    """
    updates: dict[str, Any] = {}
    for field in changes.__struct_fields__:
        if field == "resource":
            continue
        value = getattr(changes, field)
        if value is UNSET:
            continue
        if value is None:
            if field in required:
                continue
            value = UNSET
        updates[field] = value
    return replace(entry, **updates) if updates else entry


# -- JavaScript semantics the reducers of every version reproduce --------------------


def js_truthy(value: object) -> bool:
    """JavaScript truthiness for the values our wire types can hold."""
    if value is UNSET or value is None or value is False:
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value != 0
    return value != ""


def coalesce(value: T | UnsetType | None, fallback: T | UnsetType) -> T | UnsetType:
    """JavaScript ``value ?? fallback``."""
    return fallback if value is UNSET or value is None else value


def absent_if_none(value: T | UnsetType | None) -> T | UnsetType:
    """``null`` from a JavaScript peer clears a field just like absence does."""
    return UNSET if value is None else value


def or_empty(items: tuple[T, ...] | UnsetType) -> tuple[T, ...]:
    return () if isinstance(items, UnsetType) else items


def replace_at(items: tuple[T, ...], index: int, item: T) -> tuple[T, ...]:
    return (*items[:index], item, *items[index + 1 :])


#: The largest time JavaScript's ``Date`` holds, in ms either side of the epoch.
_JS_DATE_LIMIT = 8.64e15


def add_milliseconds(timestamp: str, duration: float) -> str | None:
    """``new Date(Date.parse(timestamp) + duration).toISOString()``, or ``None``.

    Upstream's ``addMillisecondsToTimestamp``: any ISO-8601 ``timestamp``
    (offsets included) plus ``duration`` ms, printed in UTC with exactly three
    fractional digits and ``Z``. Sub-millisecond digits are dropped and the sum
    is truncated toward zero, as ``Date`` does. A timestamp without an offset is
    read as UTC (JavaScript reads a date-time without one in the *local* zone,
    which a host cannot share with its clients; docs/protocol.md).

    Where JavaScript would throw (unparseable text, a time outside ``Date``'s
    range or outside years 1–9999, which it prints with six digits), this
    returns ``None`` and the caller keeps its value: reducers never raise on
    peer data.
    """
    try:
        parsed = datetime.fromisoformat(timestamp)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    delta = parsed - _EPOCH
    base_ms = (delta.days * 86_400_000_000 + delta.seconds * 1_000_000 + delta.microseconds) // 1000
    total = base_ms + duration
    if abs(total) > _JS_DATE_LIMIT:
        return None
    try:
        return iso_timestamp(int(total))  # int(): TimeClip truncates toward zero
    except (OverflowError, ValueError):
        return None
