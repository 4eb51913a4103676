"""Reconnecting: exact replay of what was missed, snapshots when the buffer is gone."""

from __future__ import annotations

import pytest

from ahp_server.client import AhpClient
from ahp_server.config import Settings
from tests.conftest import RunningHost
from tests.e2e.helpers import TIMEOUT, assert_mirrors_host, session_of, turn_done

ROOT = "ahp-root://"


async def test_reconnect_after_a_drop_replays_exactly_the_missed_envelopes(
    running_host: RunningHost,
) -> None:
    host = running_host.host
    async with (
        AhpClient.connect(running_host.url) as alice,
        AhpClient.connect(running_host.url) as bob,
    ):
        chat = await alice.open_chat()
        session = session_of(host, chat)
        await bob.subscribe(session)
        await bob.subscribe(chat)
        await alice.ask(chat, "first turn", timeout=TIMEOUT)
        await bob.wait_for(lambda c: turn_done(c, chat), timeout=TIMEOUT)
        await bob.close()  # the drop
        last_seen = bob.server_seq  # what bob will claim on reconnect
        await alice.ask(chat, "second turn while bob is away " * 5, timeout=TIMEOUT)
        await alice.wait_for(lambda c: c.server_seq >= host.hub.server_seq, timeout=TIMEOUT)
        missed = [
            e.server_seq
            for e in alice.envelopes
            if e.server_seq > last_seen and e.channel in (session, chat)
        ]
        assert missed, "the second turn produced envelopes"

        before = len(bob.envelopes)
        path = await bob.reconnect()
        assert path == "replay"
        replayed = [e.server_seq for e in list(bob.envelopes)[before:]]
        assert replayed == missed  # exactly the missed ones, in order, nothing else
        await assert_mirrors_host(bob, host, session, chat)


@pytest.mark.parametrize("running_host", [Settings(replay_max_envelopes=4)], indirect=True)
async def test_reconnect_beyond_the_replay_buffer_gets_snapshots(
    running_host: RunningHost,
) -> None:
    host = running_host.host
    async with (
        AhpClient.connect(running_host.url) as alice,
        AhpClient.connect(running_host.url) as bob,
    ):
        chat = await alice.open_chat()
        await bob.subscribe(chat)
        await bob.close()
        await alice.ask(chat, "many words to stream so the buffer overflows " * 10, timeout=TIMEOUT)
        assert await bob.reconnect() == "snapshot"
        await assert_mirrors_host(bob, host, chat)
        assert len(bob.confirmed(chat).turns) == 1  # type: ignore[union-attr]


async def test_disposed_channels_are_reported_missing_on_replay(running_host: RunningHost) -> None:
    host = running_host.host
    async with (
        AhpClient.connect(running_host.url) as alice,
        AhpClient.connect(running_host.url) as bob,
    ):
        chat = await alice.open_chat()
        session = session_of(host, chat)
        await bob.subscribe(session)
        await bob.subscribe(chat)
        await bob.close()
        await alice.dispose_session(session)
        assert await bob.reconnect() == "replay"
        assert chat not in bob.subscriptions
        assert session not in bob.subscriptions
