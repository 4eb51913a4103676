"""Data written before the host's state moved to protocol 1.0, lifted once when a store opens.

Layer: store. A database that ahp-server 0.1.0 wrote holds 0.7 JSON (states,
turns, the envelopes of the log); the host now keeps every state and envelope
in the 1.0 shape. Each store runs :class:`Lifter` over its rows in one
transaction at open, after its own migrations and before anything reads them,
and records :data:`MARKER` so it runs once. The translation itself is the pure
:func:`ahp_server.protocol.views.v0_7.lift`, the inverse of the 0.7 view: a
0.7 client served from the lifted database sees what the release served it
(``tests/store/test_release_db.py``, ``tests/store/test_release_db_lift.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from ahp_server.protocol.views import v0_7

__all__ = ["MARKER", "STATE_TYPES", "Lifter"]

#: ``meta`` key recording that the rows are in the 1.0 shape (value 1).
MARKER = "protocol_1_0"

#: The stored state type of each channel kind (``channels.kind``).
STATE_TYPES: Mapping[str, str] = {
    "session": "SessionState",
    "chat": "ChatState",
    "terminal": "TerminalState",
    "changeset": "ChangesetState",
    "annotations": "AnnotationsState",
}

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()
_SEGMENT = msgspec.json.Decoder(list[tuple[int, float, Any]])


class Lifter:
    """Lifts one database's rows; ``None`` from a method means "unchanged"."""

    def __init__(self, kinds: Mapping[str, str], session_states: Mapping[str, bytes]) -> None:
        #: Channel URI → kind, for every stored channel.
        self._kinds = kinds
        # A 0.7 session terminal claim names no chat: at 1.0 it is the
        # session's default chat (the one 0.7 had in mind).
        self._default_chat: dict[str, str] = {}
        for uri, state in session_states.items():
            default = _decode.decode(state).get("defaultChat")
            if isinstance(default, str):
                self._default_chat[uri] = default

    def _chat_of(self, session: str, turn_id: str | None) -> str | None:
        return self._default_chat.get(session)

    def _lift(self, type_name: str, data: bytes, channel: str | None) -> bytes | None:
        value = _decode.decode(data)
        out = v0_7.lift(type_name, value, channel=channel, chat_of=self._chat_of)
        return None if out is value else _encode.encode(out)

    def snapshot(self, channel: str, state: bytes) -> bytes | None:
        type_name = STATE_TYPES.get(self._kinds.get(channel, ""))
        return None if type_name is None else self._lift(type_name, state, channel)

    def turn(self, turn: bytes) -> bytes | None:
        return self._lift("Turn", turn, None)

    def entries(self, entries: bytes) -> bytes | None:
        """A log segment (``[[serverSeq, clock ms, envelope], …]``) with each envelope lifted."""
        segment = _SEGMENT.decode(entries)
        changed = False
        lifted: list[tuple[int, float, Any]] = []
        for seq, at_ms, envelope in segment:
            out = v0_7.lift("ActionEnvelope", envelope, chat_of=self._chat_of)
            changed = changed or out is not envelope
            lifted.append((seq, at_ms, out))
        return _encode.encode(lifted) if changed else None
