"""Assembles a running host: providers, the ``Host``, its ``Gateway``, the WebSocket server.

Layer: app (the outermost layer with ``cli``: it may import every layer below,
and nothing but ``cli``, the tests and the benchmarks imports it).

The layers, outermost first (``pyproject.toml`` ``[tool.importlinter]``
enforces them; docs/architecture.md draws them)::

    cli → cluster → app → transport → host → agents | store → protocol

``Host`` owns the state and knows nothing of frames; the ``Gateway`` (which
builds the command dispatcher) turns frames into work for it; the transport
feeds the gateway from sockets. Only this module knows all three.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from websockets.asyncio.server import Server

from ahp_server.agents.base import Provider
from ahp_server.agents.echo import EchoAgent
from ahp_server.config import ConfigError, Settings
from ahp_server.host.gateway import Gateway
from ahp_server.host.host import Host, wall_clock_ms
from ahp_server.store.base import Store
from ahp_server.store.lock import DataDirLock
from ahp_server.store.sqlite import SqliteStore
from ahp_server.transport.websocket import start_server

if TYPE_CHECKING:  # the relay needs nats-py: only cluster nodes import it
    from ahp_server.transport.relay import EdgeRelay

__all__ = ["App", "providers_from"]


def ws_url(sockname: tuple[str, int] | tuple[str, int, int, int]) -> str:
    """``ws://address:port`` for a listening socket's name; an IPv6 address is bracketed."""
    address, port = sockname[0], sockname[1]
    host = f"[{address}]" if ":" in address else address
    return f"ws://{host}:{port}"


def providers_from(settings: Settings) -> list[Provider]:
    """The providers a host built from ``settings`` offers: echo, then each ``[[agents]]``.

    The ACP SDK and the OpenAI client are imported only when an agent needs
    them: their pydantic models take about a second of CPU each to import,
    which a host without such agents (and every restart of one) is spared.
    """
    providers: list[Provider] = [EchoAgent()]
    for agent in settings.agents:
        if agent.kind == "openai":
            from ahp_server.agents.openai_chat import OpenAIProvider

            providers.append(OpenAIProvider(agent))
        else:
            from ahp_server.agents.acp import AcpProvider

            providers.append(AcpProvider(agent))
    return providers


class App:
    """One host process's worth of server: state, routing and the listening socket."""

    def __init__(
        self,
        settings: Settings,
        *,
        providers: Sequence[Provider] | None = None,
        clock: Callable[[], float] = wall_clock_ms,
        store: Store | None = None,
    ) -> None:
        self.settings = settings
        self.host = Host(
            settings,
            providers=providers if providers is not None else providers_from(settings),
            clock=clock,
            store=store,
        )
        self.gateway = Gateway(self.host)
        self.server: Server | None = None
        #: The data directory's lock while the SQLite store is open (store/lock.py).
        self._lock: DataDirLock | None = None

    @property
    def urls(self) -> list[str]:
        """``ws://address:port`` of every listening socket (after :meth:`start`); an IPv6
        address in brackets (RFC 3986 §3.2.2), so the URL can be used as it is."""
        if self.server is None:
            return []
        return [ws_url(sock.getsockname()) for sock in self.server.sockets]

    async def start(self) -> None:
        """Lock the data directory, open the store, recover, then listen.

        Nothing is left running, nor locked, if it fails.
        """
        store = self.host.store
        if isinstance(store, SqliteStore):
            # Before anything in the directory is opened, rotated or written.
            self._lock = DataDirLock.acquire(Path(store.path).parent)
        try:
            await self.host.start()
        except BaseException:
            self._unlock()
            raise
        try:
            self.server = await start_server(self.gateway)
        except (OSError, ConfigError):
            await self.host.stop()
            self._unlock()
            raise

    def _unlock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    async def listen(self, *, edge: EdgeRelay) -> None:
        """Listen before the host starts (cluster mode): clients are relayed meanwhile."""
        self.server = await start_server(self.gateway, edge=edge)

    async def close_listener(self) -> None:
        """Stop listening and close the sockets (a cluster edge that never served itself)."""
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def abort(self) -> None:
        """Stop at once after a failure: commit nothing more, but end every child process."""
        if self.server is not None:
            self.server.close(close_connections=False)
        await self.host.abort()
        if self.server is not None:
            await self.server.wait_closed()
        # The data directory stays locked: the store was not closed, and the
        # process is about to exit (which releases the lock).

    async def stop(self, *, close_timeout: float = 5.0) -> None:
        """Stop accepting, end turns and agent sessions, close clients with 1001, commit."""
        server = self.server
        if server is not None:
            server.close(close_connections=False)  # the host closes them with 1001
        await self.host.stop(close_timeout=close_timeout)
        if server is not None:
            await server.wait_closed()
        self._unlock()
