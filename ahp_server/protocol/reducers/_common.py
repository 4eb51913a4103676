"""Helpers shared by the reducers: the injected clock, timestamps, status bits.

Layer: protocol (pure).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from msgspec import UNSET, UnsetType

from ahp_server.protocol.types import SessionStatus

__all__ = [
    "ACTIVITY_MASK",
    "Clock",
    "absent_if_none",
    "coalesce",
    "iso_timestamp",
    "js_truthy",
    "or_empty",
    "replace_at",
    "with_activity",
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
