"""Shared fixtures: a real host on a free loopback port, and quiet logging."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from websockets.asyncio.server import Server

from ahp_server.config import Settings
from ahp_server.host.host import Host
from ahp_server.logging import configure_logging
from ahp_server.transport.websocket import start_server

configure_logging("warning", "console")


@dataclass
class RunningHost:
    host: Host
    server: Server
    url: str

    async def stop(self) -> None:
        self.server.close(close_connections=False)
        await self.host.stop(close_timeout=1.0)
        await self.server.wait_closed()


async def start_host(settings: Settings | None = None, **kwargs: object) -> RunningHost:
    """Start a host on 127.0.0.1 and a free port."""
    loopback = dataclasses.replace(settings or Settings(), host="127.0.0.1", port=0)
    host = Host(loopback, **kwargs)  # type: ignore[arg-type]
    await host.start()
    server = await start_server(host)
    port = server.sockets[0].getsockname()[1]
    return RunningHost(host, server, f"ws://127.0.0.1:{port}")


@pytest.fixture
async def running_host(request: pytest.FixtureRequest) -> AsyncIterator[RunningHost]:
    """A host with the echo agent; parametrize indirectly with :class:`Settings` for limits."""
    running = await start_host(getattr(request, "param", None))
    try:
        yield running
    finally:
        await running.stop()
