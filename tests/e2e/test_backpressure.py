"""A slow consumer is disconnected (1013) while a fast one keeps streaming."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from ahp_server.agents.base import StatelessProvider, TurnIO, TurnRequest
from ahp_server.agents.echo import EchoAgent
from ahp_server.client import AhpClient
from ahp_server.config import Settings
from ahp_server.host.core.fanout import ConnState
from ahp_server.protocol.types import AgentInfo, ChatState, UsageInfo
from tests.conftest import start_host
from tests.e2e.helpers import TIMEOUT, assert_mirrors_host

CHUNK = "x" * 8192
CHUNKS = 1200  # ~10 MiB: more than the socket buffers plus the outbox limit
PACE = 0.002  # seconds between reports: fast for a model, slow enough for a reader


class FloodAgent(StatelessProvider):
    """Streams large usage reports as fast as the host takes them.

    (Usage reports replace each other, so a client applies each in O(1); a
    growing Markdown part would make the *client* the bottleneck.)
    """

    @property
    def info(self) -> AgentInfo:
        return AgentInfo(provider="flood", display_name="Flood", description="test", models=())

    async def run_turn(self, request: TurnRequest, io: TurnIO) -> None:
        for i in range(CHUNKS):
            await io.usage(UsageInfo(output_tokens=i, meta={"pad": CHUNK}))
            await asyncio.sleep(PACE)
        await io.text("done")


@pytest.fixture
async def flood_host():  # type: ignore[no-untyped-def]
    settings = Settings(outbox_max_frames=100_000, outbox_max_bytes=512 * 1024)
    running = await start_host(settings, providers=[FloodAgent(), EchoAgent()])
    try:
        yield running
    finally:
        await running.stop()


async def test_a_slow_consumer_is_cut_off_and_a_fast_one_keeps_streaming(flood_host) -> None:  # type: ignore[no-untyped-def]
    host = flood_host.host
    async with AhpClient.connect(flood_host.url, max_frame_size=None) as fast:
        chat = await fast.open_chat("flood")
        # The slow consumer: a tiny receive buffer, subscribes, then never reads again.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        host_port = flood_host.url.removeprefix("ws://").split(":")
        sock.connect((host_port[0], int(host_port[1])))
        sock.setblocking(False)
        slow = await connect(flood_host.url, sock=sock, max_queue=1, max_size=None)
        await slow.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "channel": "ahp-root://",
                        "protocolVersions": ["0.7.0"],
                        "clientId": "slow",
                        "initialSubscriptions": [chat],
                    },
                }
            )
        )
        async with asyncio.timeout(TIMEOUT):
            json.loads(await slow.recv())  # the initialize answer
        assert await fast.ask(chat, "go", timeout=60) == "done"
        usage = fast.confirmed(chat, ChatState).turns[0].usage
        assert isinstance(usage, UsageInfo)
        assert usage.output_tokens == CHUNKS - 1  # every report arrived
        await assert_mirrors_host(fast, host, chat)

        # The slow one was disconnected with 1013 and can find out by reading.
        async def drain() -> None:
            async with asyncio.timeout(TIMEOUT):
                while True:
                    await slow.recv()

        with pytest.raises(ConnectionClosed):
            await drain()
        assert slow.close_code == 1013
        # Nothing more is queued for it (it may still be finishing its close handshake).
        for connection in host.connections:
            if connection.client_id == "slow":
                assert connection.state is ConnState.CLOSING
                assert connection.queued_frames == 0
