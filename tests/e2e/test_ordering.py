"""One global serverSeq: strictly increasing on every connection, no gaps for a full subscriber."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from msgspec import UNSET

from ahp_server.client import AhpClient
from ahp_server.config import Settings
from ahp_server.protocol.types import (
    ActionOrigin,
    ChatDraftChangedAction,
    ChatTurnCancelledAction,
    ChatTurnStartedAction,
    Message,
    MessageOrigin,
    SessionState,
)
from tests.conftest import RunningHost, start_host
from tests.e2e.helpers import TIMEOUT, assert_mirrors_host, session_of, turn_done
from tests.postgres import postgres_schema

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


# -- a client's own echoes, in the order it dispatched ----------------------------------------
#
# The reconciliation guide's client pops its own echo from the *head* of its
# pending list, so a refusal must not overtake the echo of the same client's
# earlier action — which, with persistence, waits for its commit.


@contextlib.asynccontextmanager
async def host_with(storage: str, tmp_path: Path, **limits: Any) -> AsyncIterator[RunningHost]:
    """A host whose store is ``storage``: none, SQLite (normal, or full: a writer
    thread), or a fresh PostgreSQL schema."""
    async with contextlib.AsyncExitStack() as stack:
        match storage:
            case "memory":
                settings = Settings(**limits)
            case "sqlite" | "sqlite-full":
                synchronous = "full" if storage == "sqlite-full" else "normal"
                settings = Settings(data_dir=str(tmp_path), synchronous=synchronous, **limits)
            case _:
                url = await stack.enter_async_context(postgres_schema())
                settings = Settings(data_dir=str(tmp_path), store=url, **limits)
        running = await start_host(settings)
        try:
            yield running
        finally:
            await running.stop()


def own_answers(client: AhpClient, since: int) -> list[tuple[int, bool]]:
    """``(clientSeq, refused)`` of this client's echoes since envelope ``since``, as they came."""
    return [
        (e.origin.client_seq, e.rejection_reason is not UNSET)
        for e in list(client.envelopes)[since:]
        if isinstance(e.origin, ActionOrigin) and e.origin.client_id == client.client_id
    ]


def started(turn_id: str) -> ChatTurnStartedAction:
    return ChatTurnStartedAction(
        turn_id=turn_id,
        started_at="2026-12-03T00:00:00.000Z",
        message=Message(text="/slow 20 a b", origin=MessageOrigin(kind="user")),
    )


@pytest.mark.parametrize("storage", ["memory", "sqlite", "sqlite-full", "postgres"])
async def test_a_refusal_never_overtakes_the_echo_of_an_earlier_action(
    tmp_path: Path, storage: str
) -> None:
    async with (
        host_with(storage, tmp_path) as running,
        AhpClient.connect(running.url) as client,
    ):
        chat = await client.open_chat()
        since = len(client.envelopes)
        # A turn start (its commit writes more than envelopes, so it is not
        # committed in the caller's step), then a cancel of a turn that does
        # not exist (refused by the chat), back to back, three times.
        seqs = []
        for i in range(3):
            seqs.append(await client.dispatch(chat, started(f"t{i}")))
            seqs.append(
                await client.dispatch(chat, ChatTurnCancelledAction(turn_id="nope", duration=0))
            )
        await client.wait_for(lambda c: len(own_answers(c, since)) == len(seqs), timeout=TIMEOUT)
        answers = own_answers(client, since)
        assert [seq for seq, _ in answers] == seqs
        # The first start was accepted; the rest refused (a turn is running).
        assert [refused for _, refused in answers] == [False] + [True] * 5


async def test_a_refusal_at_the_door_waits_behind_the_dispatches_queued_at_the_chat(
    tmp_path: Path,
) -> None:
    async with (
        host_with("memory", tmp_path, dispatch_rate=0.001, dispatch_burst=1) as running,
        AhpClient.connect(running.url) as client,
    ):
        chat = await client.open_chat()
        actor = await running.host.actor(chat)
        assert actor is not None
        # Hold the chat's actor busy, so that what comes next queues in its inbox.
        gate = asyncio.Event()
        busy = asyncio.ensure_future(actor.call(gate.wait))
        since = len(client.envelopes)
        draft = ChatDraftChangedAction(draft=Message(text="x", origin=MessageOrigin(kind="user")))
        accepted = await client.dispatch(chat, draft)  # the burst's one token: queued
        refused = await client.dispatch(chat, draft)  # over the rate: refused at the door
        # Both reached the host: the draft waits in the inbox, and the refusal
        # either waits behind it or (the bug) has been sent already.
        async with asyncio.timeout(TIMEOUT):
            while not own_answers(client, since) and actor.inbox.qsize() < 2:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        gate.set()
        await asyncio.wait_for(busy, TIMEOUT)
        await client.wait_for(lambda c: len(own_answers(c, since)) == 2, timeout=TIMEOUT)
        assert own_answers(client, since) == [(accepted, False), (refused, True)]
