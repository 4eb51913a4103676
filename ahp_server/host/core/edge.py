"""The edge: what a connection sees of the canonical 1.0 frames, in its negotiated view.

Layer: host. The host keeps one canonical state and log in the 1.0 shape
(``ahp_server.protocol.types`` and ``reducers``); a connection that negotiated an older version
gets a *view* of every frame, projected here, at send time, by the pure
functions of :mod:`ahp_server.protocol.views` — never a second copy of the
state. Inbound, that connection's params and actions are translated to 1.0
before anything else reads them.

Only the 0.7 view differs in shape: a 1.0 connection gets the canonical
frames, and a 0.9 one the same frames minus the action types it does not know
(``Connection.blocked_actions``). The per-delta path stays free of projection
work: an action type whose shape is the same at 0.7 and 1.0
(``v0_7.IDENTITY_ACTIONS``, ``chat/delta`` among them) is sent as the bytes
already encoded, and a projected envelope is computed once per delivery, not
once per subscriber (docs/protocol.md "Protocol 1.0").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from ahp_server.protocol import codec
from ahp_server.protocol.versions import View
from ahp_server.protocol.views import v0_7

__all__ = [
    "IDENTITY_ACTIONS",
    "LegacyEnvelope",
    "inbound_action",
    "inbound_params",
    "is_legacy",
    "notification",
    "project_envelope",
    "result",
]

#: Action types whose 0.7 and 1.0 envelopes are the same bytes.
IDENTITY_ACTIONS = v0_7.IDENTITY_ACTIONS

ChatOf = Callable[[str, str | None], str | None]

_decode = msgspec.json.Decoder()
_encode = msgspec.json.Encoder()


def is_legacy(view: View) -> bool:
    """Does a connection with ``view`` see projected (0.7) frames?"""
    return view is View.V0_7


def project_envelope(envelope: bytes) -> bytes | None:
    """An encoded canonical envelope as a 0.7 client gets it; ``None``: not sent."""
    value = _decode.decode(envelope)
    out = v0_7.envelope(value)
    if out is None:
        return None
    return envelope if out is value else _encode.encode(out)


class LegacyEnvelope:
    """One delivery's 0.7 form, computed on first use and shared by its subscribers."""

    __slots__ = ("_done", "_envelope", "_value")

    def __init__(self, envelope: bytes) -> None:
        self._envelope = envelope
        self._value: bytes | None = None
        self._done = False

    def get(self) -> bytes | None:
        if not self._done:
            self._value = project_envelope(self._envelope)
            self._done = True
        return self._value


def notification(method: str, params: object) -> bytes | None:
    """The encoded 0.7 params of a server notification; ``None``: not sent."""
    value = codec.to_builtins(params)
    out = v0_7.notification(method, value)
    return None if out is None else _encode.encode(out)


def result(method: str, encoded: bytes) -> bytes:
    """An encoded command result as a 0.7 client gets it."""
    if method not in v0_7.RESULTS:
        return encoded
    value = _decode.decode(encoded)
    out = v0_7.command_result(method, value)
    return encoded if out is value else _encode.encode(out)


def inbound_params(
    method: str, raw: msgspec.Raw, chat_of: ChatOf | None
) -> tuple[msgspec.Raw, Any] | None:
    """A 0.7 client's params in 1.0, and the raw JSON they came from; ``None``:
    not a 0.7 message (refuse it). Identity when the shapes agree."""
    if method not in v0_7.INBOUND_PARAMS:
        return raw, None
    value = _decode.decode(raw)
    out = v0_7.inbound_params(method, value, chat_of=chat_of)
    if out is None:
        return None
    return (raw if out is value else msgspec.Raw(_encode.encode(out))), value


def inbound_action(raw: msgspec.Raw, channel: str, chat_of: ChatOf | None) -> msgspec.Raw | None:
    """A 0.7 client's action in 1.0; ``None``: a 1.0-only type (refuse it)."""
    value = _decode.decode(raw)
    out = v0_7.inbound_action(value, channel=channel, chat_of=chat_of)
    if out is None:
        return None
    return raw if out is value else msgspec.Raw(_encode.encode(out))
