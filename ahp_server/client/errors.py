"""The exceptions the AHP client raises.

Layer: client (pure: stdlib only), on top of :mod:`ahp_server.protocol`.

Every client failure is a :class:`ClientError`, so callers can catch the whole
family at once, while each subclass says exactly what went wrong:

* :class:`RemoteError` — the server answered a request with a JSON-RPC error;
* :class:`ClientTimeoutError` — a request, wait or handshake took too long
  (also a builtin :class:`TimeoutError`);
* :class:`ConnectionClosedError` — the connection is gone (carries the
  WebSocket close code and reason, e.g. 1013 for a slow consumer, 1001 for a
  server shutdown);
* :class:`ProtocolViolationError` — the server sent something the spec rules out;
* :class:`UnknownChannelError` — no state is mirrored for that channel
  (also a :class:`KeyError`);
* :class:`PendingOverflowError` — too many optimistic actions are waiting
  for their echo;
* :class:`ActionRejectedError` — the server echoed a dispatched action with a
  ``rejectionReason`` (raised by the helpers that wait for the echo).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ActionRejectedError",
    "ClientError",
    "ClientTimeoutError",
    "ConnectionClosedError",
    "PendingOverflowError",
    "ProtocolViolationError",
    "RemoteError",
    "UnknownChannelError",
]


class ClientError(Exception):
    """Base of every error raised by :mod:`ahp_server.client`."""


class RemoteError(ClientError):
    """The server answered a request with a JSON-RPC error object.

    ``code`` is the JSON-RPC/AHP error code (WIRE-SUMMARY §8, e.g. ``-32003``
    SessionAlreadyExists), ``message`` the server's text and ``data`` the
    optional structured payload (``None`` when absent).
    """

    def __init__(self, code: int, message: str, data: Any = None, *, method: str = "") -> None:
        where = f" ({method})" if method else ""
        super().__init__(f"JSON-RPC error {code}{where}: {message}")
        self.code = code
        self.message = message
        self.data = data
        self.method = method


class ClientTimeoutError(ClientError, TimeoutError):
    """A request, handshake or :meth:`~ahp_server.client.AhpClient.wait_for` timed out."""


class ConnectionClosedError(ClientError):
    """The connection to the server is closed (or was never opened).

    ``code``/``reason`` are the WebSocket close code and reason as received
    from the server (``1006`` when the connection dropped without a close
    frame), or ``None``/``""`` when no connection was ever established.
    """

    def __init__(self, code: int | None, reason: str = "", *, detail: str = "") -> None:
        text = f"connection closed (code={code}, reason={reason!r})"
        if detail:
            text = f"{detail}: {text}"
        super().__init__(text)
        self.code = code
        self.reason = reason


class ProtocolViolationError(ClientError):
    """The server sent a message the protocol does not allow (e.g. a bad result shape)."""


class UnknownChannelError(ClientError, KeyError):
    """No state is mirrored for this channel (not subscribed, or not a root/session/chat)."""

    def __init__(self, channel: str) -> None:
        super().__init__(channel)
        self.channel = channel

    def __str__(self) -> str:
        return f"no mirrored state for channel {self.channel!r}"


class PendingOverflowError(ClientError):
    """Too many client-dispatched actions are still waiting for the server's echo."""


class TurnFailedError(ClientError):
    """A turn the client waited for ended with ``chat/error`` or was cancelled."""

    def __init__(self, turn_id: str, state: str, message: str) -> None:
        super().__init__(f"turn {turn_id} ended {state}: {message}")
        self.turn_id = turn_id
        self.state = state
        self.message = message


class ActionRejectedError(ClientError):
    """The server refused a dispatched action: its echo carries ``rejectionReason``.

    ``action_type`` is the action's ``type`` (e.g. ``chat/turnResume``),
    ``channel`` where it was dispatched, ``reason`` the server's text.
    """

    def __init__(self, action_type: str, channel: str, reason: str) -> None:
        super().__init__(f"{action_type} refused on {channel}: {reason}")
        self.action_type = action_type
        self.channel = channel
        self.reason = reason
