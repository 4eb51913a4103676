"""Streaming a turn to several clients over real sockets; echo and rejection rules."""

from __future__ import annotations

from ahp_server.client import AhpClient
from ahp_server.protocol.types import (
    ActionEnvelope,
    ChatDraftChangedAction,
    ChatState,
    MarkdownResponsePart,
    Message,
    MessageOrigin,
    RootState,
)
from tests.conftest import RunningHost
from tests.e2e.helpers import TIMEOUT, assert_mirrors_host, session_of, turn_done

ROOT = "ahp-root://"


async def test_root_lists_the_echo_agent(running_host: RunningHost) -> None:
    async with AhpClient.connect(running_host.url, subscriptions=[ROOT]) as client:
        root = client.confirmed(ROOT, RootState)
        assert [agent.provider for agent in root.agents] == ["echo"]


async def test_two_clients_see_identical_state_after_a_streamed_turn(
    running_host: RunningHost,
) -> None:
    host = running_host.host
    async with (
        AhpClient.connect(running_host.url, subscriptions=[ROOT]) as alice,
        AhpClient.connect(running_host.url, subscriptions=[ROOT]) as bob,
    ):
        chat = await alice.open_chat()
        session = session_of(host, chat)
        await bob.subscribe(session)
        await bob.subscribe(chat)
        text = "The quick brown fox jumps over the lazy dog, " * 20
        answer = await alice.ask(chat, text, timeout=TIMEOUT)
        assert answer == text
        await bob.wait_for(lambda c: turn_done(c, chat), timeout=TIMEOUT)
        # Several deltas were streamed, not one blob.
        deltas = [e for e in bob.envelopes if getattr(e.action, "type", "") == "chat/delta"]
        assert len(deltas) > 10
        for client in (alice, bob):
            await assert_mirrors_host(client, host, ROOT, session, chat)
        parts = alice.confirmed(chat, ChatState).turns[0].response_parts
        assert any(isinstance(p, MarkdownResponsePart) for p in parts)


async def test_own_action_is_echoed_with_its_origin(running_host: RunningHost) -> None:
    host = running_host.host
    async with (
        AhpClient.connect(running_host.url) as alice,
        AhpClient.connect(running_host.url) as bob,
    ):
        chat = await alice.open_chat()
        await bob.subscribe(chat)
        draft = Message(text="draft…", origin=MessageOrigin(kind="user"))
        seq = await alice.dispatch(chat, ChatDraftChangedAction(draft=draft))

        def echoed(client: AhpClient) -> list[ActionEnvelope]:
            return [
                e
                for e in client.envelopes
                if getattr(e.origin, "client_id", None) == alice.client_id
                and getattr(e.origin, "client_seq", None) == seq
            ]

        await alice.wait_for(lambda c: bool(echoed(c)), timeout=TIMEOUT)
        await bob.wait_for(lambda c: bool(echoed(c)), timeout=TIMEOUT)
        assert echoed(alice)[0].server_seq == echoed(bob)[0].server_seq
        assert alice.confirmed(chat, ChatState).draft == draft
        await assert_mirrors_host(bob, host, chat)


async def test_forbidden_action_is_rejected_to_its_sender_only_and_burns_no_seq(
    running_host: RunningHost,
) -> None:
    host = running_host.host
    async with (
        AhpClient.connect(running_host.url) as alice,
        AhpClient.connect(running_host.url) as bob,
    ):
        chat = await alice.open_chat()
        await bob.subscribe(chat)
        before = host.hub.server_seq
        forbidden = {
            "type": "chat/delta",  # server-only
            "turnId": "t",
            "partId": "p",
            "content": "sneaky",
        }
        bad_seq = await alice.dispatch(chat, forbidden)

        def rejection(client: AhpClient) -> ActionEnvelope | None:
            return next(
                (
                    e
                    for e in client.envelopes
                    if getattr(e.origin, "client_seq", None) == bad_seq
                    and getattr(e.origin, "client_id", None) == alice.client_id
                ),
                None,
            )

        await alice.wait_for(lambda c: rejection(c) is not None, timeout=TIMEOUT)
        envelope = rejection(alice)
        assert envelope is not None
        assert "server-only" in str(envelope.rejection_reason)
        assert host.hub.server_seq == before  # no serverSeq consumed
        # The next accepted action takes the very next number, and bob saw only it.
        draft = Message(text="ok", origin=MessageOrigin(kind="user"))
        good_seq = await alice.dispatch(chat, ChatDraftChangedAction(draft=draft))
        await bob.wait_for(
            lambda c: any(getattr(e.origin, "client_seq", None) == good_seq for e in c.envelopes),
            timeout=TIMEOUT,
        )
        accepted = [e for e in bob.envelopes if getattr(e.origin, "client_seq", None) == good_seq]
        assert accepted[0].server_seq == before + 1
        assert all(isinstance(e.rejection_reason, type(e.rejection_reason)) for e in bob.envelopes)
        assert not any(
            getattr(e.origin, "client_seq", None) == bad_seq
            and getattr(e.origin, "client_id", None) == alice.client_id
            for e in bob.envelopes
        )
        # Nothing was applied: alice's optimistic delta is gone from her view.
        assert alice.view(chat, ChatState) == alice.confirmed(chat, ChatState)
        await assert_mirrors_host(alice, host, chat)
