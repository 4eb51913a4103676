"""``ahp-server chat`` and ``sessions`` on a real pseudo-terminal, against a real host.

Each test starts the host (``Daemon``: the built-in echo agent and the
scripted ACP agent, tests/agents/scripted_agent.py) and drives the CLI in a
pty with ``pexpect``, as a user at a terminal would: line editing and
history, Ctrl-C, answers typed at the prompt. What the host did is checked
from a second client. pexpect blocks, so each terminal script runs in a
worker thread while the loop keeps reading the host's log.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TypeVar

import pexpect
import pytest

from ahp_server.client import AhpClient
from ahp_server.protocol.types import (
    ActiveTurn,
    ChatState,
    SessionState,
    ToolCallPendingConfirmationState,
    ToolCallResponsePart,
)
from tests.e2e.helpers import Daemon
from tests.e2e.test_cli import SCRIPTED, run_chat, run_cli

T = TypeVar("T")

#: The bound of every expect(): generous, for a loaded machine starting Python.
EXPECT = 30.0
#: What the interactive prompt shows.
PROMPT = "you> "


@pytest.fixture
async def host(tmp_path: Path) -> AsyncIterator[str]:
    config = tmp_path / "ahp-server.toml"
    config.write_text(
        "[[agents]]\n"
        'name = "scripted"\n'
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(SCRIPTED))}]\n",
        encoding="utf-8",
    )
    daemon = Daemon(tmp_path / "data", "--config", str(config))
    try:
        yield await daemon.start()
    finally:
        await daemon.close()


def terminal(url: str, state: Path, *args: str, sigint_ignored: bool = False) -> pexpect.spawn:
    """``ahp-server ARGS --url URL`` in a pseudo-terminal; its history under ``state``.

    ``sigint_ignored``: started as a non-interactive shell starts a background
    job, with SIGINT ignored (inherited across exec).
    """
    env = {**os.environ, "XDG_STATE_HOME": str(state), "TERM": "dumb"}

    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    return pexpect.spawn(
        sys.executable,
        ["-m", "ahp_server", *args, "--url", url],
        env=env,
        encoding="utf-8",
        timeout=EXPECT,
        dimensions=(50, 250),
        preexec_fn=ignore_sigint if sigint_ignored else None,
    )


def ended(child: pexpect.spawn) -> int:
    """Wait (bounded) for the command to exit; its exit status. No traceback on the way."""
    child.expect(pexpect.EOF)
    child.close()
    assert "Traceback" not in child.before, child.before
    status = child.exitstatus if child.exitstatus is not None else 128 + child.signalstatus
    return int(status)


async def in_thread(script: Callable[[], T]) -> T:
    return await asyncio.to_thread(script)


async def only_session(url: str) -> tuple[str, str]:
    """The host's one session and its default chat."""
    async with AhpClient.connect(url) as client:
        (summary,) = (await client.list_sessions(timeout=EXPECT)).items
        state = await client.subscribe(summary.resource, timeout=EXPECT)
        assert isinstance(state, SessionState)
        assert isinstance(state.default_chat, str)
        return summary.resource, state.default_chat


async def turns_of(url: str, chat: str) -> list[tuple[str, str]]:
    """Each turn of ``chat`` on the host: its message and how it ended."""
    async with AhpClient.connect(url) as client:
        state = await client.subscribe(chat, timeout=EXPECT)
        assert isinstance(state, ChatState)
        return [(turn.message.text, turn.state) for turn in state.turns]


async def test_a_conversation_keeps_one_session_and_a_history_across_runs(
    host: str, tmp_path: Path
) -> None:
    state = tmp_path / "state"

    def converse() -> int:
        child = terminal(host, state, "chat", "--agent", "scripted")
        child.expect_exact(PROMPT)
        child.sendline("first message")
        child.expect_exact("scripted: first message")
        child.expect_exact(PROMPT)
        child.sendline("second one")
        child.expect_exact("scripted: second one")
        child.expect_exact(PROMPT)
        child.sendline("/session")
        child.expect(r"chat    ahp-chat:\S+")
        child.expect_exact(PROMPT)
        child.sendline("/quit")
        return ended(child)

    assert await in_thread(converse) == 0
    _, chat = await only_session(host)  # one session for both prompts
    assert await turns_of(host, chat) == [("first message", "complete"), ("second one", "complete")]
    history = (state / "ahp-server" / "chat_history").read_text(encoding="utf-8")
    assert "first message" in history
    assert "second one" in history

    def recall() -> int:
        child = terminal(host, state, "chat", "--agent", "scripted")
        child.expect_exact(PROMPT)
        # Up, three times: past /quit and /session to a line of the previous run,
        # edited in place (readline redraws only what changes, so only the answer
        # to the edited line is checked).
        child.send("\x1b[A\x1b[A\x1b[A")
        child.send(" again\r")
        child.expect_exact("scripted: second one again")
        child.expect_exact(PROMPT)
        child.sendeof()  # Ctrl-D leaves
        return ended(child)

    assert await in_thread(recall) == 0


async def test_session_continues_an_existing_session_after_showing_its_last_turns(
    host: str, tmp_path: Path
) -> None:
    async with AhpClient.connect(host) as client:
        chat = await client.open_chat("scripted")
        assert await client.ask(chat, "earlier words", timeout=EXPECT) == "scripted: earlier words"
    session, _ = await only_session(host)
    prefix = session.removeprefix("ahp-session:/")[:8]

    def go_on() -> int:
        child = terminal(host, tmp_path / "state", "chat", "--session", prefix)
        child.expect_exact("you> earlier words")  # the last turns, briefly
        child.expect_exact("scripted: earlier words")
        child.expect_exact(PROMPT)
        child.sendline("later words")
        child.expect_exact("scripted: later words")
        child.expect_exact(PROMPT)
        child.sendline("/exit")
        return ended(child)

    assert await in_thread(go_on) == 0
    assert await turns_of(host, chat) == [
        ("earlier words", "complete"),
        ("later words", "complete"),
    ]


async def test_session_follows_a_turn_running_there_and_ctrl_c_cancels_it(
    host: str, tmp_path: Path
) -> None:
    """``--session`` on a chat whose turn runs (started elsewhere): what it said
    so far, then the rest as it streams; Ctrl-C cancels it on the host."""
    words = " ".join(f"w{i}" for i in range(400))
    async with AhpClient.connect(host) as client:
        chat = await client.open_chat()
        await client.send_message(chat, f"/slow 100 {words}", timeout=EXPECT)

        def streamed(c: AhpClient) -> bool:
            active = c.confirmed(chat, ChatState).active_turn
            return isinstance(active, ActiveTurn) and len(active.response_parts) > 0

        await client.wait_for(streamed, timeout=EXPECT)
        session, _ = await only_session(host)

        def follow() -> int:
            child = terminal(host, tmp_path / "state", "chat", "--session", session)
            child.expect_exact("you> /slow 100 w0 w1")  # the running turn's message
            child.expect_exact("w0 ")  # what it said before we came
            child.expect_exact("w30 ")  # and what it says after
            child.sendintr()
            child.expect_exact("ahp-server chat: cancelled")
            child.expect_exact(PROMPT)
            child.sendline("/quit")
            return ended(child)

        assert await in_thread(follow) == 0
    assert await turns_of(host, chat) == [(f"/slow 100 {words}", "cancelled")]


async def test_session_asks_the_confirmation_a_running_turn_waits_for(
    host: str, tmp_path: Path
) -> None:
    """A turn that waited for a confirmation before the chat was opened: the
    confirmation is asked at the prompt, and the turn goes on with the answer."""
    async with AhpClient.connect(host) as client:
        chat = await client.open_chat("scripted")
        await client.send_message(chat, "/ask-run make clean", timeout=EXPECT)

        def waits(c: AhpClient) -> bool:
            active = c.confirmed(chat, ChatState).active_turn
            return isinstance(active, ActiveTurn) and any(
                isinstance(p, ToolCallResponsePart)
                and isinstance(p.tool_call, ToolCallPendingConfirmationState)
                for p in active.response_parts
            )

        await client.wait_for(waits, timeout=EXPECT)
        session, _ = await only_session(host)

        def confirm() -> int:
            child = terminal(host, tmp_path / "state", "chat", "--session", session)
            child.expect_exact("[confirm] Allow execute?")
            child.expect_exact("make clean")
            child.expect_exact("choose 1-")
            child.sendline("1")
            child.expect_exact("done: make clean.")
            child.expect_exact(PROMPT)
            child.sendline("/quit")
            return ended(child)

        assert await in_thread(confirm) == 0
    assert await turns_of(host, chat) == [("/ask-run make clean", "complete")]


async def test_sessions_lists_renames_and_deletes_after_asking(host: str, tmp_path: Path) -> None:
    async with AhpClient.connect(host) as client:
        chat = await client.open_chat()
        await client.ask(chat, "hello", timeout=EXPECT)
    session, _ = await only_session(host)

    code, out, err = await run_cli(host, "sessions", "rename", session, "Release notes")
    assert (code, err) == (0, "")
    code, out, _ = await run_cli(host, "sessions", "--json")
    (listed,) = json.loads(out)["sessions"]
    assert (listed["resource"], listed["title"], listed["provider"]) == (
        session,
        "Release notes",
        "echo",
    )
    assert listed["activity"] == "idle"
    assert listed["modifiedAt"]
    code, out, _ = await run_cli(host, "sessions")
    assert f"Release notes  {session}  (echo)  last active " in out

    # Not on a terminal, delete needs --yes; nothing is deleted without it.
    code, _, err = await run_cli(host, "sessions", "delete", session)
    assert code == 2
    assert "needs --yes" in err

    def delete(answer: str) -> tuple[int, str]:
        child = terminal(host, tmp_path / "state", "sessions", "delete", session)
        child.expect_exact(f"delete session 'Release notes' ({session}) and its 1 chat? [y/N] ")
        child.sendline(answer)
        child.expect(pexpect.EOF)
        output = child.before
        child.close()
        return int(child.exitstatus), output

    code, said = await in_thread(lambda: delete("n"))
    assert code == 2
    assert "not deleted" in said
    await only_session(host)  # still there
    code, said = await in_thread(lambda: delete("y"))
    assert code == 0
    assert f"deleted {session}" in said
    async with AhpClient.connect(host) as client:
        assert (await client.list_sessions(timeout=EXPECT)).items == ()

    for args in (("delete", "--yes", "nonexistent"), ("rename", "nonexistent", "Title")):
        code, _, err = await run_cli(host, "sessions", *args)
        assert code == 2
        assert "no session matches 'nonexistent'" in err


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["default", "started-ignoring"])
async def test_ctrl_c_cancels_the_turn_on_the_host_and_a_second_leaves(
    host: str, tmp_path: Path, sigint_ignored: bool
) -> None:
    """Also when started with SIGINT ignored (a background job of a script): on a
    terminal the chat hears Ctrl-C however it was started."""
    words = " ".join(f"w{i}" for i in range(400))

    def cancel() -> int:
        child = terminal(host, tmp_path / "state", "chat", sigint_ignored=sigint_ignored)
        child.expect_exact(PROMPT)
        child.sendline(f"/slow 100 {words}")
        child.expect_exact("w3 ")  # streaming
        child.sendintr()
        child.expect_exact("ahp-server chat: cancelled")
        child.expect_exact(PROMPT)
        child.sendintr()  # at the prompt: leave
        return ended(child)

    assert await in_thread(cancel) == 0
    _, chat = await only_session(host)
    assert await turns_of(host, chat) == [(f"/slow 100 {words}", "cancelled")]


async def test_an_input_request_is_answered_at_the_prompt_and_the_turn_goes_on(
    host: str, tmp_path: Path
) -> None:
    def answer() -> int:
        child = terminal(host, tmp_path / "state", "chat")
        child.expect_exact(PROMPT)
        child.sendline("/input")
        child.expect_exact("[input] The echo agent has a few questions.")
        child.expect_exact("What is your name?")
        child.expect_exact("  > ")
        child.sendline("")  # required: asked again
        child.expect_exact("an answer is needed")
        child.sendline("Ada")
        child.expect_exact("Tea? (optional)")
        child.expect_exact("[Y/n] ")
        child.sendline("n")
        child.expect_exact("2. Blue (recommended)")
        child.expect_exact("choose 1-2: ")
        child.sendline("7")  # not an option: asked again
        child.expect_exact("a number from 1 to 2")
        child.sendline("1")
        child.expect_exact("You answered: color = red, name = Ada, tea = False")
        child.expect_exact(PROMPT)
        child.sendline("/quit")
        return ended(child)

    assert await in_thread(answer) == 0
    _, chat = await only_session(host)
    assert await turns_of(host, chat) == [("/input", "complete")]


async def test_one_shot_declines_an_input_request_it_cannot_ask_and_says_so(host: str) -> None:
    code, out, err = await run_chat(host, "/input")  # stdin is no terminal
    assert code == 1
    assert "the agent asks for input, which needs an answer: declined" in err
    assert "on a terminal to answer" in err
    assert "No answers (decline)." in out  # the turn went on and ended
    _, chat = await only_session(host)
    assert await turns_of(host, chat) == [("/input", "complete")]


async def test_a_permission_is_confirmed_at_the_prompt_and_the_turn_goes_on(
    host: str, tmp_path: Path
) -> None:
    def confirm() -> int:
        child = terminal(host, tmp_path / "state", "chat", "--agent", "scripted")
        child.expect_exact(PROMPT)
        child.sendline("/ask-run make clean")
        child.expect_exact("[confirm] Allow execute?")
        child.expect_exact("make clean")  # what will run
        child.expect_exact("choose 1-")
        child.sendline("1")
        child.expect_exact("allowed")
        child.expect_exact("done: make clean.")  # the agent ran it and went on
        child.expect_exact(PROMPT)
        child.sendline("/quit")
        return ended(child)

    assert await in_thread(confirm) == 0


async def test_a_session_that_did_not_start_says_why(host: str, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"

    def start() -> tuple[int, str]:
        child = terminal(
            host, tmp_path / "state", "chat", "--agent", "scripted", "--cwd", str(missing)
        )
        child.expect_exact("did not start")
        child.expect(pexpect.EOF)
        said = child.before
        child.close()
        return int(child.exitstatus), said

    code, said = await in_thread(start)
    assert code == 2
    assert f"its working directory {missing} does not exist" in said
    assert "Traceback" not in said


async def test_an_unreachable_host_is_named_with_the_reason() -> None:
    code, _, err = await run_chat("ws://127.0.0.1:9", "hello")
    assert code == 1
    assert "cannot reach ws://127.0.0.1:9: Connection refused" in err
