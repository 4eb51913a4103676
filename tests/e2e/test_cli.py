"""The daemon as users run it: ``python -m ahp_server serve`` in a subprocess."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ahp_server.client import AhpClient, ConnectionClosedError
from ahp_server.protocol.types import ActiveTurn, ChatState, MarkdownResponsePart, RootState
from tests.e2e.helpers import TIMEOUT, Daemon


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    process = Daemon(tmp_path / "data")
    try:
        url = await process.start()
        assert process.process is not None
        yield process.process, url
    finally:
        await process.close()


async def test_serve_answers_clients_and_lists_the_echo_agent(
    daemon: tuple[asyncio.subprocess.Process, str],
) -> None:
    _, url = daemon
    async with AhpClient.connect(url, subscriptions=["ahp-root://"]) as client:
        assert client.confirmed("ahp-root://", RootState).agents[0].provider == "echo"
        chat = await client.open_chat()
        assert await client.ask(chat, "hello", timeout=TIMEOUT) == "hello"


async def test_sigterm_during_a_streamed_turn_closes_1001_and_exits_0(
    daemon: tuple[asyncio.subprocess.Process, str],
) -> None:
    process, url = daemon
    async with AhpClient.connect(url) as client:
        chat = await client.open_chat()
        await client.send_message(chat, "/slow 50 " + "word " * 200)

        def streaming(c: AhpClient) -> bool:
            turn = c.confirmed(chat, ChatState).active_turn
            return isinstance(turn, ActiveTurn) and any(
                isinstance(p, MarkdownResponsePart) for p in turn.response_parts
            )

        await client.wait_for(streaming, timeout=TIMEOUT)
        process.send_signal(signal.SIGTERM)
        with pytest.raises(ConnectionClosedError):
            await client.wait_for(lambda c: False, timeout=TIMEOUT)
        assert client.close_code == 1001
    async with asyncio.timeout(TIMEOUT):
        assert await process.wait() == 0
