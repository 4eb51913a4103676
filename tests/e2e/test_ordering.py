"""One global serverSeq: strictly increasing on every connection, no gaps for a full subscriber."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

from ahp_server.client import AhpClient
from ahp_server.config import Settings
from ahp_server.protocol.types import SessionState
from tests.conftest import RunningHost, start_host
from tests.e2e.helpers import TIMEOUT, assert_mirrors_host, session_of, turn_done

ROOT = "ahp-root://"
CHATS = 24


async def test_many_chats_streaming_at_once_arrive_in_sequence_order(
    running_host: RunningHost,
) -> None:
    host = running_host.host
    async with AhpClient.connect(running_host.url, subscriptions=[ROOT], history=100_000) as client:
        first_chat = await client.open_chat()
        session = session_of(host, first_chat)
        chats = [first_chat]
        for _ in range(CHATS - 1):
            chats.append(await client.create_chat(session, subscribe=True))
        await client.wait_for(
            lambda c: len(c.confirmed(session, SessionState).chats) == CHATS, timeout=TIMEOUT
        )
        start = len(client.envelopes)
        # Every chat streams at the same time.
        await asyncio.gather(
            *(
                client.send_message(chat, f"/slow 1 {i} " + "word " * 30)
                for i, chat in enumerate(chats)
            )
        )
        await client.wait_for(
            lambda c: all(turn_done(c, chat) for chat in chats), timeout=TIMEOUT * 3
        )
        await client.wait_for(lambda c: c.server_seq >= host.hub.server_seq, timeout=TIMEOUT)
        seqs = [e.server_seq for e in list(client.envelopes)[start:]]
        assert len(seqs) > CHATS * 30
        assert all(a < b for a, b in itertools.pairwise(seqs)), "out of order"
        # Subscribed to every channel that exists: no gaps at all.
        assert seqs == list(range(seqs[0], seqs[-1] + 1))
        await assert_mirrors_host(client, host, ROOT, session, *chats)


async def test_server_seq_is_strictly_increasing_across_clients(running_host: RunningHost) -> None:
    host = running_host.host
    async with (
        AhpClient.connect(running_host.url) as alice,
        AhpClient.connect(running_host.url) as bob,
    ):
        chat_a = await alice.open_chat()
        chat_b = await bob.open_chat()
        await asyncio.gather(alice.ask(chat_a, "a " * 50), bob.ask(chat_b, "b " * 50))
        seqs_a = [e.server_seq for e in alice.envelopes]
        seqs_b = [e.server_seq for e in bob.envelopes]
        for seqs in (seqs_a, seqs_b):
            assert all(a < b for a, b in itertools.pairwise(seqs))
        assert set(seqs_a).isdisjoint(seqs_b)  # different channels, one counter
        assert max(seqs_a + seqs_b) <= host.hub.server_seq


async def test_ordering_and_gaplessness_hold_with_persistence_on(tmp_path: Path) -> None:
    running = await start_host(Settings(data_dir=str(tmp_path)))
    try:
        host = running.host
        async with AhpClient.connect(running.url, subscriptions=[ROOT], history=100_000) as client:
            first_chat = await client.open_chat()
            session = session_of(host, first_chat)
            chats = [first_chat]
            for _ in range(CHATS - 1):
                chats.append(await client.create_chat(session, subscribe=True))
            start = len(client.envelopes)
            await asyncio.gather(*(client.send_message(chat, "w " * 40) for chat in chats))
            await client.wait_for(
                lambda c: all(turn_done(c, chat) for chat in chats), timeout=TIMEOUT * 3
            )
            await client.wait_for(lambda c: c.server_seq >= host.hub.delivered_seq, timeout=TIMEOUT)
            seqs = [e.server_seq for e in list(client.envelopes)[start:]]
            assert seqs == list(range(seqs[0], seqs[-1] + 1))
            assert host.store.durable
            await assert_mirrors_host(client, host, ROOT, session, *chats)
    finally:
        await running.stop()
