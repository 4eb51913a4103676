"""The ACP bridge end to end: an AHP client over WebSocket, the host, a real ACP agent process.

The agent is ``tests/agents/scripted_agent.py`` (the official SDK's agent
side), started by the host exactly as a configured ``[[agents]]`` entry would
be. Nothing of ours is mocked.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
from collections.abc import AsyncIterator, Collection
from pathlib import Path
from typing import Any

import pytest
from msgspec import UNSET, UnsetType

from ahp_server.agents.acp import _start_failure
from ahp_server.client import AhpClient, TurnFailedError, turn_error
from ahp_server.config import AgentConfig, Settings
from ahp_server.eventloop import run as run_loop
from ahp_server.protocol.edits import side_text
from ahp_server.protocol.types import (
    ActiveTurn,
    ChatState,
    ChatToolCallApprovedAction,
    ChatToolCallDeniedAction,
    ChatTurnCancelledAction,
    ErrorInfo,
    MarkdownResponsePart,
    MarkdownString,
    ReasoningResponsePart,
    RootState,
    SessionState,
    ToolCallCancelledState,
    ToolCallCompletedState,
    ToolCallPendingConfirmationState,
    ToolCallResponsePart,
    ToolResultTextContent,
    Turn,
)
from tests.conftest import RunningHost, captured_logs, start_host
from tests.e2e.helpers import session_of as session_of_chat
from tests.processes import alive, daemon_pids, parent_of, session_of, until_gone

TIMEOUT = 20.0
SCRIPT = str(Path(__file__).with_name("scripted_agent.py"))


def agent(*args: str, **changes: Any) -> AgentConfig:
    return AgentConfig(
        name="scripted",
        display_name="Scripted",
        command=sys.executable,
        args=(SCRIPT, *args),
        **changes,
    )


@dataclasses.dataclass
class Bench:
    running: RunningHost
    work: Path
    state: Path

    @property
    def url(self) -> str:
        return self.running.url


async def start(tmp_path: Path, config: AgentConfig, **settings: Any) -> Bench:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    state = tmp_path / "agent-state"
    state.mkdir(exist_ok=True)
    os.environ["SCRIPTED_STATE"] = str(state)  # the agent process inherits nothing else
    config = dataclasses.replace(config, pass_env=("SCRIPTED_STATE",))
    running = await start_host(dataclasses.replace(Settings(), agents=(config,), **settings))
    return Bench(running, work, state)


@pytest.fixture
async def bench(tmp_path: Path) -> AsyncIterator[Bench]:
    started = await start(tmp_path, agent())
    try:
        yield started
    finally:
        await started.running.stop()


async def open_chat(client: AhpClient, work: Path | str, provider: str = "scripted") -> str:
    """A ready session's default chat, subscribed; ``work`` (a path or a ``file:`` URI)
    its working directory."""
    session = await client.create_session(provider, [str(work)], subscribe=True)
    await client.wait_for(
        lambda c: c.confirmed(session, SessionState).lifecycle != "creating", timeout=TIMEOUT
    )
    state = client.confirmed(session, SessionState)
    assert state.lifecycle == "ready", state.creation_error
    assert isinstance(state.default_chat, str)
    await client.subscribe(state.default_chat)
    return state.default_chat


def last_turn(client: AhpClient, chat: str) -> Turn:
    return client.confirmed(chat, ChatState).turns[-1]


def error_of(turn: Turn) -> ErrorInfo:
    """A failed turn's error: at 1.0 its last response part, of kind ``error``."""
    error = turn_error(turn)
    assert error is not None, turn
    return error


def tools(turn: Turn | ActiveTurn) -> list[Any]:
    return [p.tool_call for p in turn.response_parts if isinstance(p, ToolCallResponsePart)]


def children() -> set[int]:
    """Processes whose parent is this test process (the host runs in it)."""
    me = os.getpid()
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            found.add(int(entry))
    return found


async def poll(predicate: Any) -> None:
    """Wait until ``predicate()`` holds (for what no envelope announces: processes, files)."""
    async with asyncio.timeout(TIMEOUT):
        while not predicate():  # noqa: ASYNC110 - a process or a file: nothing to await
            await asyncio.sleep(0.05)


async def until_no_children(before: set[int]) -> set[int]:
    for _ in range(100):
        left = children() - before
        if not left:
            return left
        await asyncio.sleep(0.05)
    return children() - before


# -- configuration and a plain turn ----------------------------------------------------------


async def test_the_agent_is_advertised_and_answers_with_text_reasoning_and_usage(
    bench: Bench,
) -> None:
    async with AhpClient.connect(bench.url) as client:
        await client.subscribe("ahp-root://")
        root = client.confirmed("ahp-root://", RootState)
        names = [a.provider for a in root.agents]
        assert names == ["echo", "scripted"]
        assert root.agents[1].display_name == "Scripted"
        chat = await open_chat(client, bench.work)
        assert await client.ask(chat, "hello there", timeout=TIMEOUT) == "scripted: hello there"
        turn = last_turn(client, chat)
        reasoning = [p.content for p in turn.response_parts if isinstance(p, ReasoningResponsePart)]
        assert reasoning == ["thinking"]
        assert turn.usage is not None
        assert (turn.usage.input_tokens, turn.usage.output_tokens) == (5, 7)
        # A second turn reuses the same process and ACP session.
        assert await client.ask(chat, "again", timeout=TIMEOUT) == "scripted: again"


async def test_a_tool_call_is_mapped_with_its_title_kind_input_and_content(bench: Bench) -> None:
    async with AhpClient.connect(bench.url) as client:
        chat = await open_chat(client, bench.work)
        assert await client.ask(chat, "/tool", timeout=TIMEOUT) == "listed"
        (call,) = tools(last_turn(client, chat))
        assert isinstance(call, ToolCallCompletedState)
        assert call.display_name == "List files"
        assert call.tool_name == "execute"
        assert call.tool_input == '{"cmd": "ls"}'
        assert call.success is True
        assert [c.text for c in call.content] == ["a.txt\nb.txt"]


async def test_a_plan_is_a_visible_checklist(bench: Bench) -> None:
    async with AhpClient.connect(bench.url) as client:
        chat = await open_chat(client, bench.work)
        assert await client.ask(chat, "/plan", timeout=TIMEOUT) == "planned"
        (plan,) = tools(last_turn(client, chat))
        assert plan.display_name == "Plan"
        assert [c.text for c in plan.content] == [
            "- [x] Read the code\n- [~] Change it\n- [ ] Test it"
        ]


async def test_unknown_and_placeless_updates_are_skipped_not_fatal(bench: Bench) -> None:
    async with AhpClient.connect(bench.url) as client:
        chat = await open_chat(client, bench.work)
        assert await client.ask(chat, "/unknown", timeout=TIMEOUT) == "after the unknown update"
        assert await client.ask(chat, "/extras", timeout=TIMEOUT) == "extras sent"


# -- permissions -----------------------------------------------------------------------------


async def pending_confirmation(
    client: AhpClient, chat: str, seen: Collection[str] = ()
) -> ToolCallPendingConfirmationState:
    """The first call waiting for confirmation in the running turn (not one of ``seen``)."""

    def pending(c: AhpClient) -> list[Any]:
        turn = c.confirmed(chat, ChatState).active_turn
        if not isinstance(turn, ActiveTurn):
            return []
        return [
            t
            for t in tools(turn)
            if isinstance(t, ToolCallPendingConfirmationState) and t.tool_call_id not in seen
        ]

    await client.wait_for(pending, timeout=TIMEOUT)
    return pending(client)[0]


async def approve_and_finish(
    client: AhpClient, chat: str, turn_id: str, tool_call_id: str, option: str
) -> None:
    """Approve a pending tool call with ``option``, then wait until its turn is over."""
    await client.dispatch(
        chat,
        ChatToolCallApprovedAction(
            turn_id=turn_id,
            tool_call_id=tool_call_id,
            confirmed="user-action",
            selected_option_id=option,
        ),
    )
    await turn_over(client, chat, turn_id)


async def turn_over(client: AhpClient, chat: str, turn_id: str) -> None:
    """Wait until the turn ``turn_id`` has ended (it is in the chat's turns)."""
    await client.wait_for(
        lambda c: any(t.id == turn_id for t in c.confirmed(chat, ChatState).turns),
        timeout=TIMEOUT,
    )


@pytest.mark.parametrize(
    ("option", "approved"),
    [("allow-always", True), ("allow-once", True), ("reject-once", False)],
)
async def test_a_permission_request_waits_for_the_user_and_answers_the_agent(
    bench: Bench, option: str, approved: bool
) -> None:
    async with AhpClient.connect(bench.url) as client:
        chat = await open_chat(client, bench.work)
        turn_id = await client.send_message(chat, "/permission")
        call = await pending_confirmation(client, chat)
        assert [(o.id, o.kind) for o in call.options] == [
            ("allow-once", "approve"),
            ("allow-always", "approve"),
            ("reject-once", "deny"),
            ("reject-always", "deny"),
        ]
        answer: Any = (
            ChatToolCallApprovedAction(
                turn_id=turn_id,
                tool_call_id=call.tool_call_id,
                confirmed="user-action",
                selected_option_id=option,
            )
            if approved
            else ChatToolCallDeniedAction(
                turn_id=turn_id,
                tool_call_id=call.tool_call_id,
                reason="denied",
                selected_option_id=option,
            )
        )
        await client.dispatch(chat, answer)
        await client.wait_for(
            lambda c: any(t.id == turn_id for t in c.confirmed(chat, ChatState).turns),
            timeout=TIMEOUT,
        )
        turn = last_turn(client, chat)
        text = "".join(
            p.content for p in turn.response_parts if isinstance(p, MarkdownResponsePart)
        )
        assert text == f"permission: {option}"
        (done,) = tools(turn)
        if approved:
            assert isinstance(done, ToolCallCompletedState)
            assert done.success
        else:
            assert isinstance(done, ToolCallCancelledState)  # denied by the user


async def test_a_cancelled_turn_answers_a_pending_permission_with_cancelled(bench: Bench) -> None:
    async with AhpClient.connect(bench.url) as client:
        chat = await open_chat(client, bench.work)
        turn_id = await client.send_message(chat, "/permission")
        await pending_confirmation(client, chat)
        await client.dispatch(chat, ChatTurnCancelledAction(turn_id=turn_id, duration=1))
        outcome = bench.state / "permission-outcome"
        await poll(outcome.exists)
        assert outcome.read_text() == "cancelled"
        assert last_turn(client, chat).state == "cancelled"
        assert await client.ask(chat, "next", timeout=TIMEOUT) == "scripted: next"


async def asked(
    client: AhpClient, chat: str, message: str
) -> tuple[str, ToolCallPendingConfirmationState]:
    """Send ``message``; its turn's id and the tool call it waits to confirm."""
    turn_id = await client.send_message(chat, message)
    return turn_id, await pending_confirmation(client, chat)


async def approved(
    client: AhpClient, chat: str, turn_id: str, call: ToolCallPendingConfirmationState, option: str
) -> Turn:
    """Approve ``call`` with ``option``; the turn, once it completed."""
    await approve_and_finish(client, chat, turn_id, call.tool_call_id, option)
    turn = last_turn(client, chat)
    assert turn.state == "complete", turn_error(turn)
    return turn


def only_call(turn: Turn) -> ToolCallCompletedState:
    """The turn's one tool call, completed and successful (no other card beside it)."""
    calls = tools(turn)
    assert len(calls) == 1, calls
    (call,) = calls
    assert isinstance(call, ToolCallCompletedState), call
    assert call.success
    return call


async def test_a_confirmation_shows_the_command_and_the_call_announced_after_it_is_that_call(
    bench: Bench,
) -> None:
    # The agent asks under a placeholder id ("pending", as fast-agent does) and
    # announces the call under its real id only once allowed.
    async with AhpClient.connect(bench.url) as client:
        chat = await open_chat(client, bench.work)
        turn_id, call = await asked(client, chat, "/ask-run ls -la `pwd`")
        assert isinstance(call.tool_input, str)
        assert json.loads(call.tool_input) == {"command": "ls -la `pwd`"}
        assert isinstance(call.invocation_message, MarkdownString)
        assert call.invocation_message.markdown == "execute\n\n```sh\nls -la `pwd`\n```"
        done = only_call(await approved(client, chat, turn_id, call, "allow_once"))
        assert done.tool_call_id == call.tool_call_id
        assert [c.text for c in done.content or () if isinstance(c, ToolResultTextContent)] == [
            "ran: ls -la `pwd`"
        ]


async def test_a_confirmation_shows_the_file_and_the_diff_it_will_write(bench: Bench) -> None:
    target = bench.work / "notes.txt"
    target.write_text("keep\nold\n")
    async with AhpClient.connect(bench.url) as client:
        chat = await open_chat(client, bench.work)
        turn_id, call = await asked(client, chat, f"/ask-write {target} keep\nnew\n")
        assert not isinstance(call.edits, UnsetType)
        (edit,) = call.edits.items
        # The agent gave no old text: the preview is against the file as it is.
        assert side_text(edit.before) == "keep\nold\n"
        assert side_text(edit.after) == "keep\nnew\n"
        assert not isinstance(edit.after, UnsetType)
        assert edit.after.uri == target.as_uri()
        assert (edit.diff.added, edit.diff.removed) == (1, 1)  # type: ignore[union-attr]
        assert str(target) in str(call.invocation_message)
        assert call.tool_input is not UNSET
        turn = await approved(client, chat, turn_id, call, "allow_once")
        assert only_call(turn).tool_call_id == call.tool_call_id
    assert target.read_text() == "keep\nnew\n"


async def test_each_permission_asked_under_a_reused_placeholder_id_is_a_call_of_its_own(
    bench: Bench,
) -> None:
    # Three permissions in one prompt, each under the id "pending": the first
    # denied, the others allowed and then announced under their real ids.
    async with AhpClient.connect(bench.url) as client:
        chat = await open_chat(client, bench.work)
        turn_id = await client.send_message(chat, "/ask-runs rm a | ls b | pwd")
        seen: list[str] = []
        for allow in (False, True, True):
            call = await pending_confirmation(client, chat, seen)
            seen.append(call.tool_call_id)
            answer: Any = (
                ChatToolCallApprovedAction(
                    turn_id=turn_id, tool_call_id=call.tool_call_id, confirmed="user-action"
                )
                if allow
                else ChatToolCallDeniedAction(
                    turn_id=turn_id, tool_call_id=call.tool_call_id, reason="denied"
                )
            )
            await client.dispatch(chat, answer)
        await turn_over(client, chat, turn_id)
        turn = last_turn(client, chat)
        assert turn.state == "complete", turn_error(turn)
        calls = tools(turn)
        assert [(type(c), c.tool_call_id) for c in calls] == [
            (ToolCallCancelledState, seen[0]),
            (ToolCallCompletedState, seen[1]),
            (ToolCallCompletedState, seen[2]),
        ]
        assert calls[0].reason == "denied"
        text = "".join(
            p.content for p in turn.response_parts if isinstance(p, MarkdownResponsePart)
        )
        assert text == "not allowed: rm a. done: ls b. done: pwd. "


async def test_a_diff_with_a_relative_path_is_left_out_of_the_confirmation(bench: Bench) -> None:
    async with AhpClient.connect(bench.url) as client:
        chat = await open_chat(client, bench.work)
        turn_id, call = await asked(client, chat, "/ask-write notes.txt hi")
        assert call.edits is UNSET  # no file to name: ACP paths are absolute
        await client.dispatch(
            chat,
            ChatToolCallDeniedAction(
                turn_id=turn_id, tool_call_id=call.tool_call_id, reason="denied"
            ),
        )
        await turn_over(client, chat, turn_id)
        turn = last_turn(client, chat)
        assert turn.state == "complete", turn_error(turn)


async def test_an_approved_permission_no_call_came_for_ends_allowed_not_skipped(
    bench: Bench,
) -> None:
    # "/terminal-held" asks permission for "call-h", a call it never announces.
    async with AhpClient.connect(bench.url) as client:
        chat = await open_chat(client, bench.work)
        turn_id, hold = await asked(client, chat, "/terminal-held")
        turn = await approved(client, chat, turn_id, hold, "ok")
        (held,) = [t for t in tools(turn) if t.tool_call_id == hold.tool_call_id]
        assert isinstance(held, ToolCallCompletedState), held
        assert held.success
        assert held.past_tense_message == "Allowed: Hold"
        assert not any(isinstance(t, ToolCallCancelledState) for t in tools(turn))


# -- files -----------------------------------------------------------------------------------


async def test_the_agent_reads_and_writes_inside_the_working_directory(bench: Bench) -> None:
    (bench.work / "notes.txt").write_text("inside\n")
    async with AhpClient.connect(bench.url) as client:
        chat = await open_chat(client, bench.work)
        answer = await client.ask(chat, f"/read {bench.work / 'notes.txt'}", timeout=TIMEOUT)
        assert answer == "content: inside\n"
        target = bench.work / "sub" / "new.txt"
        target.parent.mkdir()
        assert await client.ask(chat, f"/write {target} hello", timeout=TIMEOUT) == "written"
        assert target.read_text() == "hello"


@pytest.mark.parametrize(
    ("make_path", "reason"),
    [
        (lambda work, tmp: f"{work}/../secret.txt", "outside the working directories"),
        (lambda work, tmp: f"{tmp}/secret.txt", "outside the working directories"),
        (lambda work, tmp: f"{work}/escape/secret.txt", "outside the working directories"),
        (lambda work, tmp: "secret.txt", "not an absolute path"),
        (lambda work, tmp: f"{work}", "is a directory"),
    ],
    ids=["dot-dot", "absolute-outside", "symlink-escape", "relative", "directory"],
)
async def test_reads_and_writes_outside_the_working_directories_are_refused(
    bench: Bench, tmp_path: Path, make_path: Any, reason: str
) -> None:
    (tmp_path / "secret.txt").write_text("do not read")
    (bench.work / "escape").symlink_to(tmp_path, target_is_directory=True)
    path = make_path(bench.work, tmp_path)
    async with AhpClient.connect(bench.url) as client:
        chat = await open_chat(client, bench.work)
        answer = await client.ask(chat, f"/read {path}", timeout=TIMEOUT)
        assert answer.startswith("read error:")
        assert reason in answer
        assert "do not read" not in answer
        answer = await client.ask(chat, f"/write {path} overwritten", timeout=TIMEOUT)
        assert answer.startswith("write error:")
        assert (tmp_path / "secret.txt").read_text() == "do not read"


# -- terminals -------------------------------------------------------------------------------


async def test_a_command_runs_in_the_working_directory_and_shows_its_output(
    bench: Bench,
) -> None:
    async with AhpClient.connect(bench.url) as client:
        chat = await open_chat(client, bench.work)
        assert await client.ask(chat, "/terminal echo hi", timeout=TIMEOUT) == "exit 0: hi"
        assert await client.ask(chat, "/terminal false", timeout=TIMEOUT) == "exit 1: "
        answer = await client.ask(chat, "/terminal pwd", timeout=TIMEOUT)
        assert answer == f"exit 0: {bench.work.resolve()}"
        (call,) = tools(last_turn(client, chat))
        assert [c.text.strip() for c in call.content] == [str(bench.work.resolve())]
        refused = await client.ask(chat, "/terminal-in /", timeout=TIMEOUT)
        assert refused.startswith("terminal error:")
        assert "outside the working directories" in refused


async def test_a_terminal_released_before_its_last_update_is_applied_still_shows_its_output(
    bench: Bench,
) -> None:
    # The agent completes the call, then releases the terminal at once. Its
    # request is served while the completion waits to be applied (behind a
    # permission request the user answers only afterwards): the completed
    # call shows the output as it was when the agent sent it.
    async with AhpClient.connect(bench.url) as client:
        chat = await open_chat(client, bench.work)
        turn_id = await client.send_message(chat, "/terminal-held")
        hold = await pending_confirmation(client, chat)
        await poll((bench.state / "terminal-released").exists)
        await approve_and_finish(client, chat, turn_id, hold.tool_call_id, "ok")
        run = next(t for t in tools(last_turn(client, chat)) if t.tool_call_id != hold.tool_call_id)
        assert [c.text.strip() for c in run.content] == [str(bench.work.resolve())]


# -- cancel, hang, crash, garbage ----------------------------------------------------------


async def test_cancel_ends_the_turn_at_once_tells_the_agent_and_kills_its_commands(
    bench: Bench,
) -> None:
    before = children()
    async with AhpClient.connect(bench.url) as client:
        chat = await open_chat(client, bench.work)
        agent_pids = children() - before
        turn_id = await client.send_message(chat, "/sleep")
        await poll(lambda: len(children() - before) > len(agent_pids))
        sleeper = (children() - before) - agent_pids
        await client.dispatch(chat, ChatTurnCancelledAction(turn_id=turn_id, duration=1))
        await client.wait_for(lambda c: bool(c.confirmed(chat, ChatState).turns), timeout=TIMEOUT)
        assert last_turn(client, chat).state == "cancelled"
        await poll(lambda: not (children() & sleeper))  # the command it started was killed
        # The agent heard session/cancel: a slow turn it is running stops early.
        slow = await client.send_message(chat, "/slow 200")
        await asyncio.sleep(0.2)
        await client.dispatch(chat, ChatTurnCancelledAction(turn_id=slow, duration=1))
        assert await client.ask(chat, "after", timeout=TIMEOUT) == "scripted: after"


async def test_a_hung_agent_is_ended_by_cancel_and_by_the_turn_timeout(tmp_path: Path) -> None:
    started = await start(tmp_path, agent(turn_timeout=0.5))
    try:
        async with AhpClient.connect(started.url) as client:
            chat = await open_chat(client, started.work)
            with pytest.raises(TurnFailedError, match=r"within 0.5 s"):
                await client.ask(chat, "/hang", timeout=TIMEOUT)
            assert error_of(last_turn(client, chat)).error_type == "timeout"
            turn_id = await client.send_message(chat, "/hang")
            await asyncio.sleep(0.1)
            await client.dispatch(chat, ChatTurnCancelledAction(turn_id=turn_id, duration=1))
            await client.wait_for(lambda c: len(c.confirmed(chat, ChatState).turns) == 2, timeout=2)
            assert last_turn(client, chat).state == "cancelled"
    finally:
        await started.running.stop()


async def test_a_crash_mid_turn_fails_it_and_the_next_turn_starts_the_agent_again(
    bench: Bench,
) -> None:
    async with AhpClient.connect(bench.url) as client:
        chat = await open_chat(client, bench.work)
        other = await open_chat(client, bench.work, provider="echo")
        with pytest.raises(TurnFailedError) as failed:
            await client.ask(chat, "/crash", timeout=TIMEOUT)
        message = str(failed.value)
        assert "exited with code 3" in message
        assert "crashing on purpose" in message  # the tail of its stderr
        assert error_of(last_turn(client, chat)).error_type == "agentCrashed"
        assert "still fine" in await client.ask(other, "still fine", timeout=TIMEOUT)
        assert await client.ask(chat, "back", timeout=TIMEOUT) == "scripted: back"


async def test_output_that_is_not_json_rpc_fails_the_turn_clearly(bench: Bench) -> None:
    async with AhpClient.connect(bench.url) as client:
        chat = await open_chat(client, bench.work)
        with pytest.raises(TurnFailedError, match="not JSON-RPC"):
            await client.ask(chat, "/garbage", timeout=TIMEOUT)
        assert await client.ask(chat, "recovered", timeout=TIMEOUT) == "scripted: recovered"


async def test_an_agent_that_cannot_start_fails_the_session_naming_command_and_stderr(
    tmp_path: Path,
) -> None:
    started = await start(tmp_path, agent("--fail-start"))
    try:
        async with AhpClient.connect(started.url) as client:
            session = await client.create_session("scripted", subscribe=True)
            await client.wait_for(
                lambda c: c.confirmed(session, SessionState).lifecycle != "creating",
                timeout=TIMEOUT,
            )
            state = client.confirmed(session, SessionState)
            assert state.lifecycle == "failed"
            message = state.creation_error.message
            assert SCRIPT in message
            assert "boom: no API key in SCRIPTED_KEY" in message
            assert state.creation_error.error_type == "agentStartFailed"
    finally:
        await started.running.stop()


async def test_a_missing_program_fails_the_session_creation(tmp_path: Path) -> None:
    config = AgentConfig(name="scripted", command=str(tmp_path / "no-such-agent"))
    started = await start(tmp_path, config)
    try:
        async with AhpClient.connect(started.url) as client:
            session = await client.create_session("scripted", subscribe=True)
            await client.wait_for(
                lambda c: c.confirmed(session, SessionState).lifecycle != "creating",
                timeout=TIMEOUT,
            )
            error = client.confirmed(session, SessionState).creation_error
            assert "no-such-agent" in error.message
    finally:
        await started.running.stop()


@pytest.mark.parametrize("spelling", ["path", "file-uri"])
async def test_a_file_uri_and_a_plain_path_start_the_agent_in_the_same_directory(
    bench: Bench, spelling: str
) -> None:
    # Both spellings of a working directory: the process's cwd and session/new's
    # cwd are the local path (docs/agents.md "Working directories").
    directory = bench.work / "a dir with spaces"
    directory.mkdir()
    given = str(directory) if spelling == "path" else directory.as_uri()
    async with AhpClient.connect(bench.url) as client:
        chat = await open_chat(client, given)
        answer = await client.ask(chat, "/cwd", timeout=TIMEOUT)
        assert answer == f"cwd={directory} process={directory}"


async def test_a_working_directory_that_is_gone_fails_the_start_naming_it(
    tmp_path: Path,
) -> None:
    # The folder existed when the session was made and was removed before the
    # agent started (one process per chat: at the first turn): the error names
    # the directory, not the agent's command.
    started = await start(tmp_path, agent(process="chat"))
    directory = started.work / "removed"
    directory.mkdir()
    try:
        async with AhpClient.connect(started.url) as client:
            chat = await open_chat(client, directory)
            directory.rmdir()
            with pytest.raises(TurnFailedError) as failed:
                await client.ask(chat, "hello", timeout=TIMEOUT)
            message = str(failed.value)
            assert f"working directory {directory} does not exist" in message
            assert SCRIPT not in message  # the command is not blamed
            directory.mkdir()  # back: the next turn starts the agent there
            assert await client.ask(chat, "/cwd", timeout=TIMEOUT) == (
                f"cwd={directory} process={directory}"
            )
    finally:
        await started.running.stop()


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_missing_working_directory_is_named_on_either_event_loop(
    tmp_path: Path, loop: str
) -> None:
    # A real spawn into a directory that does not exist, on each loop the daemon
    # can run on (server.event_loop): asyncio's names the directory as the error's
    # file, uvloop's names none. Either way the directory is the reason given, and
    # a spawn that fails for its program still blames the program.
    missing = tmp_path / "gone"

    async def spawn(program: str, cwd: Path) -> OSError:
        try:
            process = await asyncio.create_subprocess_exec(program, "-c", "pass", cwd=str(cwd))
        except OSError as error:
            return error
        await process.wait()
        raise AssertionError(f"{program} started in {cwd}")

    error = run_loop(spawn(sys.executable, missing), loop)
    assert _start_failure(error, agent(), str(missing)) == (
        f"its working directory {missing} does not exist"
    )
    no_program = str(tmp_path / "no-such-program")
    error = run_loop(spawn(no_program, tmp_path), loop)
    why = _start_failure(error, agent(), str(tmp_path))
    assert "working directory" not in why
    assert why.startswith(sys.executable)  # the agent's command line, as configured


# -- processes are reaped ----------------------------------------------------------------------


async def test_no_agent_process_outlives_its_session_or_the_host(tmp_path: Path) -> None:
    before = children()
    started = await start(tmp_path, agent())
    stopped = False
    try:
        async with AhpClient.connect(started.url) as client:
            chat = await open_chat(client, started.work)
            kept = await open_chat(client, started.work)
            await client.ask(chat, "hi", timeout=TIMEOUT)
            await client.ask(kept, "hi", timeout=TIMEOUT)
            assert len(children() - before) == 2  # one process per session
            session = started.running.host.chats[chat].session.uri
            await client.dispose_session(session)
            assert len(children() - before) == 1
        await started.running.stop()
        stopped = True
        assert await until_no_children(before) == set()
    finally:
        if not stopped:
            await started.running.stop()


async def test_process_per_chat_starts_one_process_for_each_chat(tmp_path: Path) -> None:
    before = children()
    started = await start(tmp_path, agent(process="chat"))
    try:
        async with AhpClient.connect(started.url) as client:
            chat = await open_chat(client, started.work)
            assert children() - before == set()  # started at the chat's first turn
            session = started.running.host.chats[chat].session.uri
            second = await client.create_chat(session, subscribe=True)
            await client.ask(chat, "one", timeout=TIMEOUT)
            await client.ask(second, "two", timeout=TIMEOUT)
            assert len(children() - before) == 2
    finally:
        await started.running.stop()
    assert await until_no_children(before) == set()


# -- after a restart -----------------------------------------------------------------------------


async def test_after_a_restart_an_agent_that_can_load_its_session_does(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    started = await start(tmp_path, agent("--load"), data_dir=data)
    try:
        async with AhpClient.connect(started.url) as client:
            chat = await open_chat(client, started.work)
            assert await client.ask(chat, "first", timeout=TIMEOUT) == "scripted: first"
    finally:
        await started.running.stop()
    started = await start(tmp_path, agent("--load"), data_dir=data)
    try:
        async with AhpClient.connect(started.url) as client:
            await client.subscribe(chat)
            answer = await client.ask(chat, "second", timeout=TIMEOUT)
            assert answer == "loaded 1 scripted: second"  # its replayed history stayed hidden
            assert len(client.confirmed(chat, ChatState).turns) == 2
    finally:
        await started.running.stop()


async def test_after_a_restart_an_agent_that_cannot_load_is_told_the_conversation(
    tmp_path: Path,
) -> None:
    data = str(tmp_path / "data")
    started = await start(tmp_path, agent(), data_dir=data)
    try:
        async with AhpClient.connect(started.url) as client:
            chat = await open_chat(client, started.work)
            assert await client.ask(chat, "/context", timeout=TIMEOUT) == "blocks=1 earlier=False"
    finally:
        await started.running.stop()
    started = await start(tmp_path, agent(), data_dir=data)
    try:
        async with AhpClient.connect(started.url) as client:
            await client.subscribe(chat)
            assert await client.ask(chat, "/context", timeout=TIMEOUT) == "blocks=2 earlier=True"
    finally:
        await started.running.stop()


async def test_commands_an_agent_runs_are_killed_when_the_host_stops(tmp_path: Path) -> None:
    before = children()
    started = await start(tmp_path, agent())
    stopped = False
    try:
        async with AhpClient.connect(started.url) as client:
            chat = await open_chat(client, started.work)
            await client.send_message(chat, "/sleep")
            await poll(lambda: len(children() - before) == 2)  # the agent and its `sleep`
            await started.running.stop()
            stopped = True
        assert await until_no_children(before) == set()
    finally:
        if not stopped:
            await started.running.stop()


async def test_stopping_an_agent_ends_what_left_its_session_and_double_forked(
    bench: Bench,
) -> None:
    before = children()
    async with AhpClient.connect(bench.url) as client:
        chat = await open_chat(client, bench.work)
        (agent,) = children() - before
        assert await client.ask(chat, "/daemon", timeout=TIMEOUT) == "daemon"
        leader, grandchild = await daemon_pids(bench.state)
        assert alive(leader)
        assert alive(grandchild)
        # What a kill of the agent's process group misses: another session, and a
        # grandchild whose parent is gone.
        assert session_of(leader) == leader != session_of(agent) == agent
        assert parent_of(grandchild) != leader
        # The agent process is stopped with its session.
        await client.dispose_session(session_of_chat(bench.running.host, chat))
        await until_gone(agent, leader, grandchild)


async def test_the_agents_stderr_goes_to_the_log_with_the_agent(bench: Bench) -> None:
    with captured_logs() as logs:
        async with AhpClient.connect(bench.url) as client:
            chat = await open_chat(client, bench.work)
            with pytest.raises(TurnFailedError):
                await client.ask(chat, "/crash", timeout=TIMEOUT)
    lines = [e for e in logs if e["event"] == "agent stderr"]
    assert [e["line"] for e in lines] == [
        "scripted agent starting",
        "scripted agent: crashing on purpose",
    ]
    assert all(e["agent"] == "scripted" and e["serves"].startswith("ahp-session:/") for e in lines)


async def test_an_idle_agent_process_is_stopped_and_the_next_turn_takes_the_chat_back(
    tmp_path: Path,
) -> None:
    before = children()
    started = await start(tmp_path, agent("--load", idle_timeout=0.3))
    try:
        async with AhpClient.connect(started.url) as client:
            chat = await open_chat(client, started.work)
            assert await client.ask(chat, "first", timeout=TIMEOUT) == "scripted: first"
            (first,) = children() - before
            await poll(lambda: not (children() - before))  # idle: stopped, and reaped
            assert await client.ask(chat, "second", timeout=TIMEOUT) == "loaded 1 scripted: second"
            (second,) = children() - before
            assert second != first
    finally:
        await started.running.stop()
    assert await until_no_children(before) == set()
