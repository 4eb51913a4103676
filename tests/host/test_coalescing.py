"""Delta coalescing: fewer frames, the same text and the same final state."""

from __future__ import annotations

import pytest

from ahp_server.client import AhpClient
from ahp_server.config import Settings
from ahp_server.protocol import codec
from tests.conftest import start_host
from tests.e2e.helpers import TIMEOUT, comparable

TEXT = " ".join(f"word{i}" for i in range(300))


async def stream(settings: Settings) -> tuple[str, int, object]:
    running = await start_host(settings)
    try:
        async with AhpClient.connect(running.url) as client:
            chat = await client.open_chat()
            answer = await client.ask(chat, f"/slow 1 {TEXT}", timeout=TIMEOUT * 3)
            deltas = sum(
                1 for e in client.envelopes if getattr(e.action, "type", "") == "chat/delta"
            )
            state = comparable(client.confirmed(chat))
            assert comparable(running.host.chats[chat].visible) == state
            return answer, deltas, state
    finally:
        await running.stop()


async def test_coalescing_merges_deltas_without_changing_the_result() -> None:
    plain_text, plain_deltas, plain_state = await stream(Settings())
    merged_text, merged_deltas, merged_state = await stream(Settings(coalesce_ms=50.0))
    assert merged_text == plain_text
    assert plain_deltas >= 250  # one per word
    assert merged_deltas < plain_deltas / 4  # words arriving within 50 ms share a delta
    turns_plain = plain_state["turns"]  # type: ignore[index]
    turns_merged = merged_state["turns"]  # type: ignore[index]
    assert [t["state"] for t in turns_merged] == [t["state"] for t in turns_plain]


@pytest.mark.parametrize("window", [0.0, 5.0])
async def test_coalesced_text_is_sent_before_the_turn_ends(window: float) -> None:
    text, _, state = await stream(Settings(coalesce_ms=window))
    assert text == TEXT
    assert codec.encode(state)  # the final state is complete and valid
