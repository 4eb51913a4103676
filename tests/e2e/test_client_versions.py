"""``AhpClient`` speaks 1.0 whatever it negotiates: a real host, real sockets.

By default the client offers ``1.0.0, 0.9.0, 0.7.0`` and the host picks 1.0.
Restricted to ``("0.7.0",)`` it gets the host's 0.7 view and lifts every frame
back to 1.0 (``protocol/views/v0_7.py``): the chat it then holds equals what a
1.0 client of the same host holds, except for what the 0.7 view cannot carry
(docs/protocol.md, "What a 0.7 client does not see"; the view's
``REMOVED_FIELDS``). Nothing of ours is mocked.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from ahp_server.client import AhpClient, ClientError, TurnFailedError, turn_error
from ahp_server.config import Settings
from ahp_server.protocol.types import (
    ActiveTurn,
    ChatIsReadChangedAction,
    ChatState,
    ChatToolCallApprovedAction,
    CreateTerminalParams,
    MarkdownResponsePart,
    RootState,
    SessionState,
    TerminalSessionClaim,
    ToolCallCompletedState,
    ToolCallPendingConfirmationState,
    ToolCallResponsePart,
    Turn,
)
from ahp_server.protocol.views import v0_7
from tests.conftest import RunningHost, start_host
from tests.e2e.helpers import (
    TIMEOUT,
    assert_mirrors_host,
    chat_state,
    comparable,
    session_of,
    turn_done,
)

V0_7 = ("0.7.0",)
ROOT = "ahp-root://"


def markdown(turn: Turn) -> str:
    return "".join(p.content for p in turn.response_parts if isinstance(p, MarkdownResponsePart))


def pending_call(client: AhpClient, chat: str) -> ToolCallPendingConfirmationState | None:
    turn = chat_state(client, chat).active_turn
    if not isinstance(turn, ActiveTurn):
        return None
    for part in turn.response_parts:
        call = part.tool_call if isinstance(part, ToolCallResponsePart) else None
        if isinstance(call, ToolCallPendingConfirmationState):
            return call
    return None


async def tool_turn(client: AhpClient, chat: str) -> Turn:
    """``/tool`` on the echo agent: a tool call that waits for confirmation, approved."""
    turn_id = await client.send_message(chat, "/tool")
    await client.wait_for(lambda c: pending_call(c, chat) is not None, timeout=TIMEOUT)
    call = pending_call(client, chat)
    assert call is not None
    await client.dispatch(
        chat,
        ChatToolCallApprovedAction(
            turn_id=turn_id, tool_call_id=call.tool_call_id, confirmed="user-action"
        ),
    )
    await client.wait_for(lambda c: turn_done(c, chat), timeout=TIMEOUT)
    (turn,) = [t for t in chat_state(client, chat).turns if t.id == turn_id]
    return turn


def assert_completed_tool_turn(turn: Turn) -> None:
    assert turn.state == "complete"
    calls = [p.tool_call for p in turn.response_parts if isinstance(p, ToolCallResponsePart)]
    assert len(calls) == 1
    assert isinstance(calls[0], ToolCallCompletedState)
    assert calls[0].success
    assert "written" in markdown(turn)


def _without(value: Any, keys: frozenset[str]) -> Any:
    return {k: v for k, v in value.items() if k not in keys}


def seen_by_0_7(kind: str, state: Any) -> Any:
    """A 1.0 state as JSON minus the fields the 0.7 view leaves out (docs/protocol.md)."""
    data = comparable(state)
    if kind == "chat":
        return _without(data, v0_7.REMOVED_FIELDS["ChatState"])
    data = _without(data, v0_7.REMOVED_FIELDS["SessionState"])
    summary = v0_7.REMOVED_FIELDS["ChatSummary"]
    return {**data, "chats": [_without(c, summary) for c in data["chats"]]}


async def test_the_client_negotiates_1_0_and_completes_a_turn_with_a_confirmation(
    running_host: RunningHost,
) -> None:
    async with AhpClient.connect(running_host.url) as client:
        assert client.protocol_version == "1.0.0"
        assert not client.lifts_0_7
        assert client.initialize_result.protocol_version == "1.0.0"
        chat = await client.open_chat()
        assert_completed_tool_turn(await tool_turn(client, chat))
        await assert_mirrors_host(
            client, running_host.host, chat, session_of(running_host.host, chat)
        )


async def test_a_0_7_client_lifts_the_same_turn_to_what_a_1_0_client_holds(
    running_host: RunningHost,
) -> None:
    host = running_host.host
    async with (
        AhpClient.connect(running_host.url, protocol_versions=V0_7) as older,
        AhpClient.connect(running_host.url) as newer,
    ):
        assert older.protocol_version == "0.7.0"
        assert older.lifts_0_7
        chat = await older.open_chat()
        session = session_of(host, chat)
        await newer.subscribe(session)
        await newer.subscribe(chat)
        turn = await tool_turn(older, chat)
        assert_completed_tool_turn(turn)
        await newer.wait_for(lambda c: turn_done(c, chat), timeout=TIMEOUT)
        await assert_mirrors_host(newer, host, chat, session)
        # The 0.7 client's states are 1.0 structs, reduced with the 1.0 reducers
        # from the lifted envelopes: what the 1.0 client holds, but for what the
        # 0.7 view cannot carry. Even modifiedAt agrees (1.0 reads no clock).
        assert isinstance(older.confirmed(chat), ChatState)
        assert isinstance(older.confirmed(session), SessionState)

        def alike(c: AhpClient) -> bool:
            return seen_by_0_7("chat", c.confirmed(chat)) == seen_by_0_7(
                "chat", newer.confirmed(chat)
            ) and seen_by_0_7("session", c.confirmed(session)) == seen_by_0_7(
                "session", newer.confirmed(session)
            )

        try:
            await older.wait_for(alike, timeout=TIMEOUT)
        except TimeoutError:
            assert seen_by_0_7("chat", older.confirmed(chat)) == seen_by_0_7(
                "chat", newer.confirmed(chat)
            )
            assert seen_by_0_7("session", older.confirmed(session)) == seen_by_0_7(
                "session", newer.confirmed(session)
            )
        # ... and its own snapshot, taken now, lifts to the same chat.
        async with AhpClient.connect(running_host.url, protocol_versions=V0_7) as late:
            await late.subscribe(chat)
            assert seen_by_0_7("chat", late.confirmed(chat)) == seen_by_0_7(
                "chat", newer.confirmed(chat)
            )


async def test_a_0_7_client_reads_a_failed_turn_as_a_trailing_error_part(
    running_host: RunningHost,
) -> None:
    async with (
        AhpClient.connect(running_host.url, protocol_versions=V0_7) as older,
        AhpClient.connect(running_host.url) as newer,
    ):
        chat = await older.open_chat()
        await newer.subscribe(chat)
        with pytest.raises(TurnFailedError, match=r"asked to fail \(/error\)") as failed:
            await older.ask(chat, "/error", timeout=TIMEOUT)
        assert failed.value.state == "error"
        (turn,) = chat_state(older, chat).turns
        error = turn_error(turn)
        assert error is not None
        assert error.error_type == "echoError"
        await newer.wait_for(lambda c: turn_done(c, chat), timeout=TIMEOUT)
        assert comparable(chat_state(newer, chat).turns[0]) == comparable(turn)


async def test_a_0_9_client_gets_1_0_frames(running_host: RunningHost) -> None:
    async with AhpClient.connect(running_host.url, protocol_versions=("0.9.0",)) as client:
        assert client.protocol_version == "0.9.0"
        assert not client.lifts_0_7
        chat = await client.open_chat()
        assert_completed_tool_turn(await tool_turn(client, chat))
        await assert_mirrors_host(client, running_host.host, chat)


async def test_an_action_0_7_does_not_have_is_refused_before_it_is_sent(
    running_host: RunningHost,
) -> None:
    async with AhpClient.connect(running_host.url, protocol_versions=V0_7) as older:
        chat = await older.open_chat()
        before = older.state.pending()
        with pytest.raises(ClientError, match=r"chat/isReadChanged"):
            await older.dispatch(chat, ChatIsReadChangedAction(is_read=True))
        assert older.state.pending() == before
        assert await older.ask(chat, "still here", timeout=TIMEOUT) == "still here"


@pytest.mark.parametrize("offered", [None, V0_7], ids=["default", "0.7"])
async def test_reconnect_keeps_the_negotiated_version(
    running_host: RunningHost, offered: tuple[str, ...] | None
) -> None:
    host = running_host.host
    options: dict[str, Any] = {} if offered is None else {"protocol_versions": offered}
    async with AhpClient.connect(running_host.url, **options) as client:
        version = client.protocol_version
        assert version == ("1.0.0" if offered is None else "0.7.0")
        chat = await client.open_chat()
        assert await client.ask(chat, "before", timeout=TIMEOUT) == "before"
        async with AhpClient.connect(running_host.url) as other:
            await other.subscribe(chat)
            await client.close()
            assert await other.ask(chat, "meanwhile", timeout=TIMEOUT) == "meanwhile"
        assert await client.reconnect() == "replay"
        assert client.protocol_version == version
        assert client.lifts_0_7 == (offered is not None)
        assert [markdown(t) for t in chat_state(client, chat).turns] == ["before", "meanwhile"]
        assert await client.ask(chat, "after", timeout=TIMEOUT) == "after"
        if offered is None:
            await assert_mirrors_host(client, host, chat)


async def test_a_0_7_client_sees_session_claimed_terminals_in_the_root_state(
    tmp_path: Path,
) -> None:
    """0.7 names no chat in a terminal session claim; the client fills in what its
    mirrored states tell (the session's default chat), ``""`` when they do not."""
    running = await start_host(Settings(terminal_shell=("/bin/sh",)))
    try:
        async with AhpClient.connect(running.url) as newer:
            chat = await newer.open_chat()
            session = session_of(running.host, chat)
            terminal = f"ahp-terminal:/{uuid.uuid4()}"
            claim = TerminalSessionClaim(session=session, chat=chat)
            await newer.request(
                "createTerminal", CreateTerminalParams(channel=terminal, claim=claim)
            )
            async with AhpClient.connect(
                running.url, protocol_versions=V0_7, subscriptions=[ROOT]
            ) as older:
                (info,) = older.confirmed(ROOT, RootState).terminals or ()
                assert info.claim == TerminalSessionClaim(session=session, chat="")
                await older.subscribe(session)
                await older.request("disposeTerminal", {"channel": terminal}, timeout=TIMEOUT)
                await older.wait_for(
                    lambda c: not c.confirmed(ROOT, RootState).terminals, timeout=TIMEOUT
                )
                second = f"ahp-terminal:/{uuid.uuid4()}"
                await newer.request(
                    "createTerminal", CreateTerminalParams(channel=second, claim=claim)
                )
                await older.wait_for(
                    lambda c: bool(c.confirmed(ROOT, RootState).terminals), timeout=TIMEOUT
                )
                (info,) = older.confirmed(ROOT, RootState).terminals or ()
                assert info.claim == claim  # the session is mirrored: its default chat
                await newer.request("disposeTerminal", {"channel": second}, timeout=TIMEOUT)
    finally:
        await running.stop()
