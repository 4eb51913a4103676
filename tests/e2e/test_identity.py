"""Identity and ownership over real sockets (issue 16): acknowledgements to every
sender, one live connection per client id, active clients released after a grace.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import pytest
from msgspec import UNSET

from ahp_server.client import AhpClient
from ahp_server.config import Settings
from ahp_server.host.core.fanout import ConnState
from ahp_server.protocol.types import (
    ActionEnvelope,
    ChatInputAnswered,
    ChatInputCompletedAction,
    ChatInputTextAnswerValue,
    ChatToolCallApprovedAction,
    ChatToolCallCompleteAction,
    InputRequestResponsePart,
    SessionActiveClient,
    SessionActiveClientRemovedAction,
    SessionActiveClientSetAction,
    SessionState,
    ToolCallCompletedState,
    ToolCallPendingConfirmationState,
    ToolCallResponsePart,
    ToolCallResult,
    ToolCallRunningState,
    Turn,
)
from tests.conftest import RunningHost, start_host
from tests.e2e.helpers import TIMEOUT, chat_state, session_of, turn_done
from tests.e2e.test_turns import active, markdown, tool_call


def answer_to(client: AhpClient, seq: int) -> ActionEnvelope | None:
    """The envelope echoing ``client``'s dispatch number ``seq`` (accepted or rejected)."""
    for envelope in client.envelopes:
        origin = envelope.origin
        if getattr(origin, "client_id", None) == client.client_id and (
            getattr(origin, "client_seq", None) == seq
        ):
            return envelope
    return None


async def echoed(client: AhpClient, seq: int) -> ActionEnvelope:
    await client.wait_for(lambda c: answer_to(c, seq) is not None, timeout=TIMEOUT)
    envelope = answer_to(client, seq)
    assert envelope is not None
    return envelope


# -- finding (a): every dispatch is answered, subscribed or not ---------------------------------


async def test_a_client_confirming_a_tool_call_without_subscribing_gets_its_echo(
    running_host: RunningHost,
) -> None:
    """WIRE-SUMMARY §10.6: a client may answer without subscribing; §7.2: it is acknowledged."""
    async with (
        AhpClient.connect(running_host.url) as alice,
        AhpClient.connect(running_host.url) as bob,
    ):
        chat = await alice.open_chat()
        turn_id = await alice.send_message(chat, "/tool")
        await alice.wait_for(
            lambda c: isinstance(tool_call(c, chat), ToolCallPendingConfirmationState),
            timeout=TIMEOUT,
        )
        call = tool_call(alice, chat)
        assert isinstance(call, ToolCallPendingConfirmationState)
        approve = ChatToolCallApprovedAction(
            turn_id=turn_id, tool_call_id=call.tool_call_id, confirmed="user-action"
        )
        seq = await bob.dispatch(chat, approve)
        accepted = await echoed(bob, seq)
        assert not accepted.rejection_reason
        assert accepted.channel == chat
        await alice.wait_for(lambda c: turn_done(c, chat), timeout=TIMEOUT)
        # The same confirmation again: the call is no longer pending, bob hears why.
        again = await echoed(bob, await bob.dispatch(chat, approve))
        assert again.rejection_reason
        assert chat not in bob.subscriptions  # only its own envelopes reached bob


async def test_a_client_answering_an_input_request_without_subscribing_gets_its_echo(
    running_host: RunningHost,
) -> None:
    async with (
        AhpClient.connect(running_host.url) as alice,
        AhpClient.connect(running_host.url) as bob,
    ):
        chat = await alice.open_chat()
        await alice.send_message(chat, "/input")
        await alice.wait_for(
            lambda c: (
                (turn := active(c, chat)) is not None
                and any(isinstance(p, InputRequestResponsePart) for p in turn.response_parts)
            ),
            timeout=TIMEOUT,
        )
        answer = ChatInputAnswered(state="submitted", value=ChatInputTextAnswerValue(value="Bob"))
        seq = await bob.dispatch(
            chat,
            ChatInputCompletedAction(
                request_id="echo-input", response="accept", answers={"name": answer}
            ),
        )
        assert not (await echoed(bob, seq)).rejection_reason
        await alice.wait_for(lambda c: turn_done(c, chat), timeout=TIMEOUT)
        assert "name = Bob" in markdown(chat_state(alice, chat).turns[0])


async def test_completing_another_clients_tool_without_subscribing_is_rejected_visibly(
    running_host: RunningHost,
) -> None:
    """§11.5: only the contributor completes a client tool; the other sender is told so."""
    async with (
        AhpClient.connect(running_host.url) as alice,
        AhpClient.connect(running_host.url) as bob,
    ):
        chat = await alice.open_chat()
        turn_id = await alice.send_message(chat, "/client-tool")
        await alice.wait_for(
            lambda c: isinstance(tool_call(c, chat), ToolCallRunningState), timeout=TIMEOUT
        )
        call = tool_call(alice, chat)
        assert isinstance(call, ToolCallRunningState)
        result = ToolCallResult(success=True, past_tense_message="Ran client_echo")
        complete = ChatToolCallCompleteAction(
            turn_id=turn_id, tool_call_id=call.tool_call_id, result=result
        )
        refused = await echoed(bob, await bob.dispatch(chat, complete))
        assert refused.rejection_reason
        assert isinstance(tool_call(alice, chat), ToolCallRunningState)


# -- finding (b): one live connection per client id ---------------------------------------------


async def test_a_second_connection_with_a_live_client_id_takes_over_and_closes_the_first(
    running_host: RunningHost,
) -> None:
    """docs/protocol.md "Client identity": the newer connection wins, the older gets 1008."""
    async with AhpClient.connect(running_host.url) as alice:
        chat = await alice.open_chat()
        turn_id = await alice.send_message(chat, "/client-tool")
        await alice.wait_for(
            lambda c: isinstance(tool_call(c, chat), ToolCallRunningState), timeout=TIMEOUT
        )
        async with AhpClient.connect(
            running_host.url, client_id=alice.client_id, subscriptions=[chat]
        ) as again:
            await alice.wait_closed(timeout=TIMEOUT)
            assert alice.close_code == 1008
            assert "taken over" in alice.close_reason
            host = running_host.host
            ready = [
                c
                for c in host.connections
                if c.client_id == alice.client_id and c.state is ConnState.READY
            ]
            assert ready == [host.live_clients[alice.client_id]]
            call = tool_call(again, chat)
            assert isinstance(call, ToolCallRunningState)
            result = ToolCallResult(success=True, past_tense_message="Ran client_echo")
            await again.dispatch(
                chat,
                ChatToolCallCompleteAction(
                    turn_id=turn_id, tool_call_id=call.tool_call_id, result=result
                ),
            )
            await again.wait_for(lambda c: turn_done(c, chat), timeout=TIMEOUT)
            assert "succeeded" in markdown(chat_state(again, chat).turns[0])


# -- active clients released after the grace period (§3.4) --------------------------------------


async def host_with_grace(seconds: float) -> RunningHost:
    return await start_host(dataclasses.replace(Settings(), active_client_grace=seconds))


@pytest.fixture
async def short_grace() -> AsyncIterator[RunningHost]:
    running = await host_with_grace(0.3)
    try:
        yield running
    finally:
        await running.stop()


@pytest.fixture
async def two_second_grace() -> AsyncIterator[RunningHost]:
    running = await host_with_grace(2.0)
    try:
        yield running
    finally:
        await running.stop()


def active_ids(client: AhpClient, session: str) -> set[str]:
    return {c.client_id for c in client.confirmed(session, SessionState).active_clients}


async def become_active(client: AhpClient, session: str) -> None:
    await client.subscribe(session)
    seq = await client.dispatch(
        session,
        SessionActiveClientSetAction(
            active_client=SessionActiveClient(client_id=client.client_id, tools=())
        ),
    )
    assert not (await echoed(client, seq)).rejection_reason


async def start_client_tool(running: RunningHost) -> tuple[AhpClient, AhpClient, str, str]:
    """alice (active in the session) runs /client-tool; watcher sees session and chat."""
    watcher = await AhpClient.connect(running.url)
    alice = await AhpClient.connect(running.url)
    chat = await alice.open_chat()
    session = session_of(running.host, chat)
    await become_active(alice, session)
    await watcher.subscribe(session)
    await watcher.subscribe(chat)
    await alice.send_message(chat, "/client-tool")
    await watcher.wait_for(
        lambda c: (
            isinstance(tool_call(c, chat), ToolCallRunningState)
            and alice.client_id in active_ids(c, session)
        ),
        timeout=TIMEOUT,
    )
    return watcher, alice, session, chat


async def released_and_failed(
    watcher: AhpClient, alice: AhpClient, session: str, chat: str
) -> tuple[Turn, ToolCallCompletedState]:
    """Wait until alice left the session's active clients and her tool's turn ended;
    the turn and its (failed) client-tool call."""
    await watcher.wait_for(
        lambda c: turn_done(c, chat) and alice.client_id not in active_ids(c, session),
        timeout=TIMEOUT,
    )
    turn = chat_state(watcher, chat).turns[0]
    calls = [p.tool_call for p in turn.response_parts if isinstance(p, ToolCallResponsePart)]
    assert isinstance(calls[0], ToolCallCompletedState)
    assert calls[0].success is False
    return turn, calls[0]


async def test_a_client_gone_past_the_grace_is_removed_and_its_client_tool_fails(
    short_grace: RunningHost,
) -> None:
    watcher, alice, session, chat = await start_client_tool(short_grace)
    async with watcher:
        await alice.close()
        turn, call = await released_and_failed(watcher, alice, session, chat)
        assert call.past_tense_message == "The client that runs this tool disconnected"
        assert "The client tool failed." in markdown(turn)
        removed = [
            e for e in watcher.envelopes if isinstance(e.action, SessionActiveClientRemovedAction)
        ]
        assert len(removed) == 1
        assert removed[0].origin is UNSET  # the server's own action


async def test_a_client_back_within_the_grace_keeps_its_place(
    two_second_grace: RunningHost,
) -> None:
    watcher, alice, session, chat = await start_client_tool(two_second_grace)
    async with watcher:
        await alice.close()
        async with AhpClient.connect(two_second_grace.url, client_id=alice.client_id):
            await asyncio.sleep(2.5)  # past the grace: the release was called off
            assert alice.client_id in active_ids(watcher, session)
            assert isinstance(tool_call(watcher, chat), ToolCallRunningState)


async def test_a_reconnect_that_omits_the_session_releases_the_client_there(
    running_host: RunningHost,
) -> None:
    """§3.3: reconnecting without listing a session drops the client from it at once
    (the 30 s default grace is not what removes it here)."""
    watcher, alice, session, chat = await start_client_tool(running_host)
    async with watcher, alice:
        # alice keeps the chat but no longer lists the session (forgotten on her
        # side only: an `unsubscribe` would release her by itself, see below).
        alice.state.remove_subscription(session)
        assert await alice.reconnect(timeout=TIMEOUT) == "replay"
        await watcher.wait_for(
            lambda c: turn_done(c, chat) and alice.client_id not in active_ids(c, session),
            timeout=TIMEOUT,
        )
        assert "The client tool failed." in markdown(chat_state(watcher, chat).turns[0])


async def test_a_reconnect_that_lists_the_session_keeps_the_client_there(
    running_host: RunningHost,
) -> None:
    watcher, alice, session, chat = await start_client_tool(running_host)
    async with watcher, alice:
        assert await alice.reconnect(timeout=TIMEOUT) == "replay"
        await alice.ping()
        await watcher.ping()
        assert alice.client_id in active_ids(watcher, session)
        assert isinstance(tool_call(watcher, chat), ToolCallRunningState)


async def test_unsubscribing_from_the_session_releases_the_client_there(
    running_host: RunningHost,
) -> None:
    """§14.10 / session/activeClientRemoved: "when it unsubscribes from the session
    channel" the client leaves activeClients and its running client tool fails;
    leaving only a chat of the session does not."""
    watcher, alice, session, chat = await start_client_tool(running_host)
    async with watcher, alice:
        await alice.unsubscribe(chat)
        await alice.ping()
        await watcher.ping()
        assert alice.client_id in active_ids(watcher, session)
        assert isinstance(tool_call(watcher, chat), ToolCallRunningState)
        await alice.unsubscribe(session)
        _, call = await released_and_failed(watcher, alice, session, chat)
        assert call.past_tense_message == "The client that runs this tool left the session"
        assert not alice.closed  # she stays connected: only that session let her go
