"""A Python AHP client: WebSocket + JSON-RPC, with write-ahead reconciliation.

Layer: client (I/O layer on top of protocol). It imports
:mod:`ahp_server.protocol` (wire types, codec, JSON-RPC framing, reducers,
views) and nothing from the host, so it works against any spec-conformant AHP
server.

It speaks AHP 1.0: it offers ``1.0.0``, ``0.9.0`` and ``0.7.0`` and always
holds 1.0 states (:mod:`ahp_server.protocol.types`, the 1.0 reducers); on a
0.7 connection it lifts what arrives and projects what it sends with the pure
:mod:`ahp_server.protocol.views.v0_7` (see :mod:`~ahp_server.client.connection`).

* :mod:`~ahp_server.client.state` — pure reconciliation model (confirmed
  state, pending actions, optimistic view; WIRE-SUMMARY §7).
* :mod:`~ahp_server.client.connection` — :class:`AhpClient`, the asyncio
  client (requests, subscriptions, dispatch, reconnect, listeners, waiting).
* :mod:`~ahp_server.client.errors` — the :class:`ClientError` family.

Typical use::

    async with AhpClient.connect("ws://127.0.0.1:8765", subscriptions=["ahp-root://"]) as c:
        session = await c.create_session("echo", subscribe=True)
        await c.wait_for(lambda c: c.view(session, SessionState).lifecycle == "ready")
"""

from ahp_server.client.connection import (
    CLIENT_NAME,
    DEFAULT_PROTOCOL_VERSIONS,
    AhpClient,
    EnvelopeListener,
    NotificationListener,
    Params,
    ReconnectPath,
    RequestHandler,
    ServerNotification,
    directory_uri,
    is_resumable,
    turn_error,
)
from ahp_server.client.errors import (
    ActionRejectedError,
    ClientError,
    ClientTimeoutError,
    ConnectionClosedError,
    PendingOverflowError,
    ProtocolViolationError,
    RemoteError,
    TurnFailedError,
    UnknownChannelError,
)
from ahp_server.client.state import (
    ROOT_CHANNEL,
    ChannelKind,
    ChannelState,
    ClientState,
    EnvelopeOutcome,
    EnvelopeResult,
    PendingAction,
    channel_kind,
    wall_clock_ms,
)

__all__ = [
    "CLIENT_NAME",
    "DEFAULT_PROTOCOL_VERSIONS",
    "ROOT_CHANNEL",
    "ActionRejectedError",
    "AhpClient",
    "ChannelKind",
    "ChannelState",
    "ClientError",
    "ClientState",
    "ClientTimeoutError",
    "ConnectionClosedError",
    "EnvelopeListener",
    "EnvelopeOutcome",
    "EnvelopeResult",
    "NotificationListener",
    "Params",
    "PendingAction",
    "PendingOverflowError",
    "ProtocolViolationError",
    "ReconnectPath",
    "RemoteError",
    "RequestHandler",
    "ServerNotification",
    "TurnFailedError",
    "UnknownChannelError",
    "channel_kind",
    "directory_uri",
    "is_resumable",
    "turn_error",
    "wall_clock_ms",
]
