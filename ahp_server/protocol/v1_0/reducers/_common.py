"""Helpers the 1.0 reducers add to the shared ones: time taken from action data.

Layer: protocol (pure). At 1.0 the chat reducer stamps ``modifiedAt`` from the
action's own timestamps, never from a clock (REDUCER-CHANGES 11).
"""

from __future__ import annotations

from datetime import UTC, datetime

from ahp_server.protocol.reducers._common import iso_timestamp

__all__ = ["add_milliseconds"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
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
