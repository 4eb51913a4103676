"""The turn engine over real sockets: queue, cancel, tools, input, errors, steering."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from msgspec import UNSET

from ahp_server.client import AhpClient, TurnFailedError
from ahp_server.config import Settings
from ahp_server.protocol.types import (
    ActiveTurn,
    ChatInputAnswered,
    ChatInputCompletedAction,
    ChatInputTextAnswerValue,
    ChatPendingMessageSetAction,
    ChatToolCallApprovedAction,
    ChatToolCallCompleteAction,
    ChatToolCallDeniedAction,
    ChatTruncatedAction,
    ChatTurnCancelledAction,
    InputRequestResponsePart,
    MarkdownResponsePart,
    Message,
    MessageOrigin,
    ToolCallCompletedState,
    ToolCallPendingConfirmationState,
    ToolCallResponsePart,
    ToolCallResult,
    ToolCallRunningState,
    Turn,
)
from tests.conftest import RunningHost, start_host
from tests.e2e.helpers import TIMEOUT, assert_mirrors_host, chat_state, session_of, turn_done


def user(text: str) -> Message:
    return Message(text=text, origin=MessageOrigin(kind="user"))


def markdown(turn: Turn | ActiveTurn) -> str:
    return "".join(p.content for p in turn.response_parts if isinstance(p, MarkdownResponsePart))


def active(client: AhpClient, chat: str) -> ActiveTurn | None:
    turn = chat_state(client, chat).active_turn
    return turn if isinstance(turn, ActiveTurn) else None


def tool_call(client: AhpClient, chat: str) -> object:
    turn = active(client, chat)
    if turn is None:
        return None
    calls = [p.tool_call for p in turn.response_parts if isinstance(p, ToolCallResponsePart)]
    return calls[-1] if calls else None


async def test_a_queued_message_starts_a_turn_after_the_current_one(
    running_host: RunningHost,
) -> None:
    host = running_host.host
    async with AhpClient.connect(running_host.url) as client:
        chat = await client.open_chat()
        await client.send_message(chat, "/slow 20 one two three four")
        await client.wait_for(lambda c: active(c, chat) is not None, timeout=TIMEOUT)
        await client.dispatch(
            chat, ChatPendingMessageSetAction(kind="queued", id="q1", message=user("second"))
        )
        await client.wait_for(lambda c: turn_done(c, chat, 2), timeout=TIMEOUT)
        first, second = chat_state(client, chat).turns
        assert first.state == second.state == "complete"
        assert second.message.text == "second"
        assert markdown(second) == "second"
        assert chat_state(client, chat).queued_messages is UNSET
        await assert_mirrors_host(client, host, chat)


async def test_cancelling_a_turn_stops_the_agent(running_host: RunningHost) -> None:
    host = running_host.host
    words = " ".join(f"w{i}" for i in range(200))
    async with AhpClient.connect(running_host.url) as client:
        chat = await client.open_chat()
        turn_id = await client.send_message(chat, f"/slow 30 {words}")
        await client.wait_for(
            lambda c: (t := active(c, chat)) is not None and len(markdown(t)) > 0, timeout=TIMEOUT
        )
        runner = host.chats[chat].runner
        assert runner is not None
        await client.dispatch(chat, ChatTurnCancelledAction(turn_id=turn_id, duration=5))
        await client.wait_for(lambda c: turn_done(c, chat), timeout=TIMEOUT)
        await runner.wait()
        assert runner.closed
        assert host.chats[chat].runner is None
        (turn,) = chat_state(client, chat).turns
        assert turn.state == "cancelled"
        assert len(markdown(turn).split()) < 200
        # A later turn works and nothing of the cancelled one leaks into it.
        assert await client.ask(chat, "after") == "after"
        await assert_mirrors_host(client, host, chat)


async def test_a_tool_call_waits_for_confirmation(running_host: RunningHost) -> None:
    host = running_host.host
    async with AhpClient.connect(running_host.url) as client:
        chat = await client.open_chat()
        session = session_of(host, chat)
        turn_id = await client.send_message(chat, "/tool")
        await client.wait_for(
            lambda c: isinstance(tool_call(c, chat), ToolCallPendingConfirmationState),
            timeout=TIMEOUT,
        )
        # Waiting: the turn is still active, the chat and the session need input.
        call = tool_call(client, chat)
        assert isinstance(call, ToolCallPendingConfirmationState)
        assert chat_state(client, chat).status & 24 == 24
        await client.wait_for(
            lambda c: bool(c.confirmed(session).input_needed),  # type: ignore[union-attr]
            timeout=TIMEOUT,
        )
        await client.dispatch(
            chat,
            ChatToolCallApprovedAction(
                turn_id=turn_id, tool_call_id=call.tool_call_id, confirmed="user-action"
            ),
        )
        await client.wait_for(lambda c: turn_done(c, chat), timeout=TIMEOUT)
        (turn,) = chat_state(client, chat).turns
        calls = [p.tool_call for p in turn.response_parts if isinstance(p, ToolCallResponsePart)]
        assert isinstance(calls[0], ToolCallCompletedState)
        assert calls[0].success
        assert "written" in markdown(turn)
        await client.wait_for(
            lambda c: not c.confirmed(session).input_needed,  # type: ignore[union-attr]
            timeout=TIMEOUT,
        )
        await assert_mirrors_host(client, host, chat, session)


async def test_a_denied_tool_call_is_reported(running_host: RunningHost) -> None:
    async with AhpClient.connect(running_host.url) as client:
        chat = await client.open_chat()
        turn_id = await client.send_message(chat, "/tool")
        await client.wait_for(
            lambda c: isinstance(tool_call(c, chat), ToolCallPendingConfirmationState),
            timeout=TIMEOUT,
        )
        call = tool_call(client, chat)
        assert isinstance(call, ToolCallPendingConfirmationState)
        await client.dispatch(
            chat,
            ChatToolCallDeniedAction(
                turn_id=turn_id, tool_call_id=call.tool_call_id, reason="denied"
            ),
        )
        await client.wait_for(lambda c: turn_done(c, chat), timeout=TIMEOUT)
        assert "not write" in markdown(chat_state(client, chat).turns[0])


async def test_an_input_request_waits_for_the_answer(running_host: RunningHost) -> None:
    host = running_host.host
    async with AhpClient.connect(running_host.url) as client:
        chat = await client.open_chat()
        await client.send_message(chat, "/input")

        def request_open(c: AhpClient) -> bool:
            turn = active(c, chat)
            return turn is not None and any(
                isinstance(p, InputRequestResponsePart) for p in turn.response_parts
            )

        await client.wait_for(request_open, timeout=TIMEOUT)
        answer = ChatInputAnswered(state="submitted", value=ChatInputTextAnswerValue(value="Ada"))
        await client.dispatch(
            chat,
            ChatInputCompletedAction(
                request_id="echo-input", response="accept", answers={"name": answer}
            ),
        )
        await client.wait_for(lambda c: turn_done(c, chat), timeout=TIMEOUT)
        assert "name = Ada" in markdown(chat_state(client, chat).turns[0])
        await assert_mirrors_host(client, host, chat)


async def test_a_client_tool_is_run_by_its_client_only(running_host: RunningHost) -> None:
    host = running_host.host
    async with (
        AhpClient.connect(running_host.url) as alice,
        AhpClient.connect(running_host.url) as mallory,
    ):
        chat = await alice.open_chat()
        await mallory.subscribe(chat)
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
        stolen = await mallory.dispatch(chat, complete)
        await mallory.wait_for(
            lambda c: any(
                getattr(e.origin, "client_seq", None) == stolen
                and getattr(e.origin, "client_id", None) == mallory.client_id
                for e in c.envelopes
            ),
            timeout=TIMEOUT,
        )
        assert isinstance(tool_call(alice, chat), ToolCallRunningState)  # still waiting
        await alice.dispatch(chat, complete)
        await alice.wait_for(lambda c: turn_done(c, chat), timeout=TIMEOUT)
        assert "succeeded" in markdown(chat_state(alice, chat).turns[0])
        await assert_mirrors_host(alice, host, chat)
        await assert_mirrors_host(mallory, host, chat)


async def test_an_agent_error_ends_the_turn_with_chat_error(running_host: RunningHost) -> None:
    async with AhpClient.connect(running_host.url) as client:
        chat = await client.open_chat()
        with pytest.raises(TurnFailedError) as caught:
            await client.ask(chat, "/error")
        assert caught.value.state == "error"
        turn = chat_state(client, chat).turns[0]
        assert turn.state == "error"
        assert chat_state(client, chat).status & 0b11111 == 2  # Error


async def test_a_steering_message_reaches_the_running_agent(running_host: RunningHost) -> None:
    async with AhpClient.connect(running_host.url) as client:
        chat = await client.open_chat()
        await client.send_message(chat, "/slow 30 " + " ".join(f"w{i}" for i in range(30)))
        await client.wait_for(lambda c: active(c, chat) is not None, timeout=TIMEOUT)
        await client.dispatch(
            chat, ChatPendingMessageSetAction(kind="steering", id="s1", message=user("faster"))
        )
        await client.wait_for(lambda c: turn_done(c, chat), timeout=TIMEOUT)
        state = chat_state(client, chat)
        assert "steered: faster" in markdown(state.turns[0])
        assert state.steering_message is UNSET  # consumed by the agent


async def test_turn_started_while_a_turn_runs_is_rejected(running_host: RunningHost) -> None:
    async with AhpClient.connect(running_host.url) as client:
        chat = await client.open_chat()
        await client.send_message(chat, "/slow 30 a b c d e f")
        await client.wait_for(lambda c: active(c, chat) is not None, timeout=TIMEOUT)
        second = await client.send_message(chat, "again")
        await client.wait_for(lambda c: turn_done(c, chat), timeout=TIMEOUT)
        assert all(t.id != second for t in chat_state(client, chat).turns)


async def _start_turn(client: AhpClient, chat: str, turn_id: str) -> str | None:
    """Start a turn with ``turn_id``: the rejection's reason, or None once it ran."""
    seq = await client.dispatch(
        chat,
        {
            "type": "chat/turnStarted",
            "turnId": turn_id,
            "startedAt": "2026-12-03T00:00:00.000Z",
            "message": {"text": "again", "origin": {"kind": "user"}},
        },
    )

    def echo(c: AhpClient) -> object:
        return next((e for e in c.envelopes if getattr(e.origin, "client_seq", None) == seq), None)

    await client.wait_for(lambda c: echo(c) is not None, timeout=TIMEOUT)
    reason = getattr(echo(client), "rejection_reason", None)
    if isinstance(reason, str):
        return reason
    await client.wait_for(
        lambda c: any(t.id == turn_id for t in chat_state(c, chat).turns), timeout=TIMEOUT
    )
    return None


async def test_a_turn_started_with_a_completed_turns_id_is_rejected(
    running_host: RunningHost,
) -> None:
    async with AhpClient.connect(running_host.url) as client:
        chat = await client.open_chat()
        await client.ask(chat, "first", timeout=TIMEOUT)
        taken = chat_state(client, chat).turns[0].id
        assert "already taken" in str(await _start_turn(client, chat, taken))
        actor = running_host.host.chats[chat]
        assert [t.id for t in actor.state.turns] == [taken]  # one turn, one id
        assert [t.id for t in chat_state(client, chat).turns] == [taken]
        assert await client.ask(chat, "still works", timeout=TIMEOUT) == "still works"


async def _chat_of_three_turns(client: AhpClient) -> tuple[str, tuple[str, ...]]:
    """A new chat that has had three turns, and their ids."""
    chat = await client.open_chat()
    for text in ("one", "two", "three"):
        await client.ask(chat, text, timeout=TIMEOUT)
    return chat, tuple(t.id for t in chat_state(client, chat).turns)


async def test_a_turn_id_paged_out_of_memory_is_still_taken(tmp_path: Path) -> None:
    # A long chat keeps only its newest turns in memory (memory_turn_bytes);
    # the older ones are on disk only, and their ids stay taken.
    settings = dataclasses.replace(Settings(), data_dir=str(tmp_path), memory_turn_bytes=1)
    running = await start_host(settings)
    try:
        async with AhpClient.connect(running.url) as client:
            chat, (first, second, third) = await _chat_of_three_turns(client)
            assert [t.id for t in running.host.chats[chat].state.turns] == [third]
            for taken in (first, second, third):
                assert "already taken" in str(await _start_turn(client, chat, taken))
            assert await _start_turn(client, chat, "a-new-turn") is None
            ids = [t.id for t in chat_state(client, chat).turns]
            assert ids == [first, second, third, "a-new-turn"]
        assert running.host.counters.rejected == 3
    finally:
        await running.stop()


async def test_a_turn_id_is_taken_while_its_turn_is_kept_across_truncation_and_restart(
    tmp_path: Path,
) -> None:
    # The host looks a new turn's id up among the turns it holds (an O(1) set
    # that follows every change of them), not by scanning them.
    settings = dataclasses.replace(Settings(), data_dir=str(tmp_path))
    running = await start_host(settings)
    try:
        async with AhpClient.connect(running.url) as client:
            chat, (first, second, third) = await _chat_of_three_turns(client)
            assert "already taken" in str(await _start_turn(client, chat, third))
            await client.dispatch(chat, ChatTruncatedAction(turn_id=first))
            await client.wait_for(lambda c: len(chat_state(c, chat).turns) == 1, timeout=TIMEOUT)
            assert "already taken" in str(await _start_turn(client, chat, first))
            assert await _start_turn(client, chat, second) is None  # truncated away: free
            assert [t.id for t in chat_state(client, chat).turns] == [first, second]
    finally:
        await running.stop()
    running = await start_host(settings)  # the chat loads from disk
    try:
        async with AhpClient.connect(running.url) as client:
            await client.subscribe(chat)
            assert "already taken" in str(await _start_turn(client, chat, second))
            assert await _start_turn(client, chat, third) is None
            assert [t.id for t in chat_state(client, chat).turns] == [first, second, third]
    finally:
        await running.stop()
