"""The WebSocket transport: a writer batch leaves as one socket write."""

from __future__ import annotations

from typing import Any

from ahp_server.client import AhpClient
from ahp_server.protocol.types import ChatDeltaAction
from tests.conftest import RunningHost

TIMEOUT = 30.0


async def test_a_batch_of_frames_is_one_write(running_host: RunningHost) -> None:
    async with AhpClient.connect(running_host.url) as client:
        chat = await client.open_chat()
        (connection,) = running_host.host.connections
        socket_transport: Any = connection.transport._ws.transport  # type: ignore[attr-defined]
        writes: list[int] = []
        write = socket_transport.write

        def counting(data: bytes) -> None:
            writes.append(len(data))
            write(data)

        socket_transport.write = counting
        deltas: list[object] = []
        client.on_envelope(
            lambda e: deltas.append(e) if isinstance(e.action, ChatDeltaAction) else None
        )
        text = " ".join(f"word{i}" for i in range(3000))  # the echo sends ~1,000 deltas
        await client.ask(chat, text, timeout=TIMEOUT)
        assert len(deltas) > 900
        # The writer takes what queued up while it was writing: many frames a
        # batch, each batch one write (websockets alone would write every frame).
        assert len(writes) < len(deltas) / 2
