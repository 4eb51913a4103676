"""The host: owns the hub, every channel actor, the providers and the known clients.

Layer: host (asyncio). Transport-independent: the WebSocket server (and tests)
hand it connections; everything protocol-level happens behind
:meth:`Host.handle_frame`.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import structlog

from ahp_server import __version__
from ahp_server.agents.base import Provider
from ahp_server.agents.echo import EchoAgent
from ahp_server.config import Settings
from ahp_server.host.actors import ROOT, ChannelActor, ChatActor, RootActor, SessionActor
from ahp_server.host.fanout import CLOSE_GOING_AWAY, Connection, Transport
from ahp_server.host.sequencer import Hub
from ahp_server.protocol.errors import AhpErrorCode, ProtocolError
from ahp_server.protocol.types import Implementation, RootActiveSessionsChangedAction, RootState

__all__ = ["Host"]

log = structlog.get_logger(__name__)


def wall_clock_ms() -> float:
    return time.time() * 1000


class Host:
    """One AHP host: sessions, chats and connections in one event loop."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        providers: Sequence[Provider] | None = None,
        clock: Callable[[], float] = wall_clock_ms,
    ) -> None:
        from ahp_server.host.gateway import Gateway  # the gateway needs the Host type

        self.settings = settings or Settings()
        self.now = clock
        self.hub = Hub(
            replay_max_envelopes=self.settings.replay_max_envelopes,
            replay_max_bytes=self.settings.replay_max_bytes,
        )
        provider_list = list(providers) if providers is not None else [EchoAgent()]
        self.providers: dict[str, Provider] = {p.info.provider: p for p in provider_list}
        self.root = RootActor(
            self, ROOT, RootState(agents=tuple(p.info for p in provider_list), active_sessions=0)
        )
        self.sessions: dict[str, SessionActor] = {}
        self.chats: dict[str, ChatActor] = {}
        #: client id -> negotiated protocol version, for ``reconnect`` (LRU-bounded).
        self.clients: OrderedDict[str, str] = OrderedDict()
        self.connections: set[Connection] = set()
        self.server_info = Implementation(name="ahp-server", version=__version__)
        self.gateway = Gateway(self)
        self.accepting = False
        self.metrics_rejected = 0
        self.metrics_reconnect_replay = 0
        self.metrics_reconnect_snapshot = 0
        self._background: set[asyncio.Task[Any]] = set()

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self.root.start()
        self.accepting = True

    async def stop(self, *, close_timeout: float = 5.0) -> None:
        """Close every connection with 1001, then stop every actor and turn."""
        self.accepting = False
        connections = list(self.connections)
        await asyncio.gather(
            *(
                c.flush_and_close(CLOSE_GOING_AWAY, "server shutting down", close_timeout)
                for c in connections
            ),
            return_exceptions=True,
        )
        for task in list(self._background):
            task.cancel()
        for chat in list(self.chats.values()):
            await chat.stop()
        for session in list(self.sessions.values()):
            await session.stop()
        await self.root.stop()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run a background coroutine owned by the host (cancelled on stop)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- connections --------------------------------------------------------------------------

    def open_connection(self, transport: Transport) -> Connection:
        connection = Connection(
            transport,
            max_frames=self.settings.outbox_max_frames,
            max_bytes=self.settings.outbox_max_bytes,
        )
        connection.start()
        self.connections.add(connection)
        return connection

    async def close_connection(self, connection: Connection) -> None:
        self.connections.discard(connection)
        self.hub.drop_connection(connection)
        await connection.stop()

    async def handle_frame(self, connection: Connection, frame: str | bytes) -> None:
        await self.gateway.handle_frame(connection, frame)

    # -- lookups ------------------------------------------------------------------------------

    def provider(self, name: str) -> Provider:
        try:
            return self.providers[name]
        except KeyError:
            raise ProtocolError(
                f"unknown provider {name!r}", code=AhpErrorCode.ProviderNotFound
            ) from None

    def actor_for(self, channel: str) -> ChannelActor[RootState] | SessionActor | ChatActor | None:
        if channel == ROOT:
            return self.root
        return self.sessions.get(channel) or self.chats.get(channel)

    def remember_client(self, client_id: str, version: str) -> None:
        self.clients[client_id] = version
        self.clients.move_to_end(client_id)
        while len(self.clients) > self.settings.known_clients:
            self.clients.popitem(last=False)

    def session_count_changed(self) -> None:
        self.spawn(
            self.root.apply_server(
                RootActiveSessionsChangedAction(active_sessions=len(self.sessions))
            )
        )
