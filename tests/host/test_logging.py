"""Logging: nothing per streamed delta at INFO, and no message bodies or tokens."""

from __future__ import annotations

from ahp_server.client import AhpClient
from ahp_server.config import Settings
from tests.conftest import captured_logs, start_host

TOKEN = "tok-do-not-log"


async def info_lines_for(words: int) -> list[dict[str, object]]:
    running = await start_host(Settings(token=TOKEN))
    with captured_logs() as entries:
        try:
            async with AhpClient.connect(running.url, token=TOKEN) as client:
                chat = await client.open_chat()
                await client.ask(chat, " ".join(f"secret{i}" for i in range(words)), timeout=30)
        finally:
            await running.stop()
    return [e for e in entries if e.get("log_level") != "debug"]


async def test_log_volume_does_not_grow_with_the_stream() -> None:
    short = await info_lines_for(3)
    long = await info_lines_for(600)
    assert len(long) == len(short)
    text = repr(long)
    assert "secret1" not in text  # no message bodies
    assert TOKEN not in text  # no tokens
    assert any("client_id" in entry for entry in long)  # connection context is bound
