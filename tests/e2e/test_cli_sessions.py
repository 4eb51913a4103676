"""``ahp-server sessions`` and ``ahp-server chat --chat/--continue`` as users run them
(issue 28, item 7: the CLI part).

Layer: tests (end to end). A real host (in this process, so its state can be
read) serves the CLI run as a real subprocess (``python -m ahp_server``) over
a real WebSocket; the bundled client sets the scene. The scripted ACP agent
(``tests/agents/scripted_agent.py``, a configured ``[[agents]]`` entry)
changes a file and leaves a command running in the background; the echo
agent's ``/flaky`` fails resumably once, ``/error`` for good.
README.md "Talk to it" documents the commands.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ahp_server.client import AhpClient
from ahp_server.protocol.types import (
    ChatIsArchivedChangedAction,
    ChatState,
    SessionState,
    SessionStatus,
)
from tests.agents.test_acp import open_chat
from tests.conftest import RunningHost, start_host
from tests.e2e.helpers import TIMEOUT, default_chat_of, host_state, session_of
from tests.e2e.test_background_work import background
from tests.e2e.test_changesets import Bench, open_bench, turn_of
from tests.e2e.test_cli import run_cli

READ, ARCHIVED = int(SessionStatus.IsRead), int(SessionStatus.IsArchived)


async def listing(url: str, *extra: str) -> dict[str, Any]:
    code, out, err = await run_cli(url, "sessions", "--json", *extra)
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def chat_entry(listed: dict[str, Any], chat: str) -> dict[str, Any] | None:
    for session in listed["sessions"]:
        for entry in session["chats"]:
            if entry["resource"] == chat:
                return dict(entry)
    return None


def status_of(running: RunningHost, channel: str) -> int:
    return int(host_state(running.host, channel).status)


@pytest.fixture
async def echo_host() -> AsyncIterator[RunningHost]:
    running = await start_host()
    try:
        yield running
    finally:
        await running.stop()


@pytest.fixture
async def bench(tmp_path: Path) -> AsyncIterator[Bench]:
    opened = await open_bench(tmp_path)
    try:
        yield opened
    finally:
        await opened.running.stop()


# -- sessions: the listing ------------------------------------------------------------------


async def test_the_listing_shows_unread_archived_changes_and_background_work(
    bench: Bench, tmp_path: Path
) -> None:
    flag = tmp_path / "stop"
    script = tmp_path / "wait.sh"
    script.write_text(f'while [ ! -f "{flag}" ]; do sleep 0.05; done\n')
    written = bench.work / "notes.txt"
    try:
        async with AhpClient.connect(bench.url) as client:
            chat = await open_chat(client, bench.work)
            session = session_of(bench.running.host, chat)
            other = await client.create_chat(session, subscribe=True, timeout=TIMEOUT)
            await client.dispatch(other, ChatIsArchivedChangedAction(is_archived=True))
            await client.wait_for(
                lambda c: c.confirmed(other, ChatState).status & ARCHIVED != 0, timeout=TIMEOUT
            )
            assert (await turn_of(client, chat, f"/write {written} one\ntwo\n"))[0] == "written"
            await turn_of(client, chat, f"/background sh {script}")
            await client.wait_for(lambda c: bool(background(c, chat)), timeout=TIMEOUT)

            listed = await listing(bench.url)
            entry = chat_entry(listed, chat)
            assert entry is not None
            assert entry["unread"] is True  # turns ended, nobody marked them read
            assert entry["changes"] == {"files": 1, "additions": 2, "deletions": 0}
            (work,) = entry["background"]
            assert work["command"].endswith("sh")
            assert chat_entry(listed, other) is None  # archived: not listed by default
            assert listed["hidden"] == {"sessions": 0, "chats": 1}

            everything = await listing(bench.url, "--archived")
            archived = chat_entry(everything, other)
            assert archived is not None
            assert archived["archived"] is True
            assert archived["unread"] is False  # no turn yet: nothing to read

            code, out, err = await run_cli(bench.url, "sessions", "--archived")
            assert code == 0, err
            line = next(ln for ln in out.splitlines() if chat in ln)
            assert "[unread]" in line
            assert "[1 file +2 -0]" in line
            assert "[archived]" in next(ln for ln in out.splitlines() if other in ln)
            assert re.search(r"^    background: \S*sh$", out, re.M), out

            code, out, err = await run_cli(bench.url, "sessions", "read", chat)
            assert code == 0, err
            assert status_of(bench.running, chat) & READ
            entry = chat_entry(await listing(bench.url), chat)
            assert entry is not None
            assert entry["unread"] is False
            await run_cli(bench.url, "sessions", "unread", chat)
            assert not status_of(bench.running, chat) & READ

            code, out, err = await run_cli(bench.url, "sessions", "changes", chat)
            assert code == 0, err
            assert re.search(rf"^added +\+2 -0 +{re.escape(str(written))}$", out, re.M), out
            assert "1 file, +2 -0" in out
    finally:
        flag.write_text("done")  # the background command ends


# -- sessions: archive, move ----------------------------------------------------------------


async def test_archive_and_unarchive_round_trip_in_the_host_state(echo_host: RunningHost) -> None:
    url = echo_host.url
    async with AhpClient.connect(url) as client:
        chat = await client.open_chat()
        session = session_of(echo_host.host, chat)
        side = await client.create_chat(session, subscribe=True, timeout=TIMEOUT)

        code, out, err = await run_cli(url, "sessions", "archive", side)
        assert code == 0, err
        assert out.strip() == f"archived {side}"
        assert status_of(echo_host, side) & ARCHIVED
        assert not status_of(echo_host, session) & ARCHIVED  # a side chat is its own
        code, _, err = await run_cli(url, "sessions", "unarchive", side)
        assert code == 0, err
        assert not status_of(echo_host, side) & ARCHIVED

        # A session, named by the start of its id.
        short = session.removeprefix("ahp-session:/")[:8]
        code, out, err = await run_cli(url, "sessions", "archive", short)
        assert code == 0, err
        assert out.strip() == f"archived {session}"
        assert status_of(echo_host, session) & ARCHIVED
        assert (await listing(url))["hidden"]["sessions"] == 1
        code, _, err = await run_cli(url, "sessions", "unarchive", session)
        assert code == 0, err
        assert not status_of(echo_host, session) & ARCHIVED

        code, _, err = await run_cli(url, "sessions", "archive", "no-such-thing")
        assert code == 2
        assert "no session or chat matches 'no-such-thing'" in err


async def test_move_a_chat_to_another_session_and_to_a_new_one(echo_host: RunningHost) -> None:
    url = echo_host.url
    async with AhpClient.connect(url) as client:
        first = session_of(echo_host.host, await client.open_chat())
        second = session_of(echo_host.host, await client.open_chat())
        chat = await client.create_chat(first, subscribe=True, timeout=TIMEOUT)
        default = await default_chat_of(client, second)

        code, out, err = await run_cli(
            url, "sessions", "move", chat, "--to", second, "--after", default
        )
        assert code == 0, err
        assert out.strip() == f"moved {chat} to {second}"
        assert session_of(echo_host.host, chat) == second
        state = host_state(echo_host.host, second)
        assert isinstance(state, SessionState)
        assert [c.resource for c in state.chats] == [default, chat]

        code, out, err = await run_cli(url, "sessions", "move", chat, "--to", "new")
        assert code == 0, err
        made = out.strip().removeprefix(f"moved {chat} to ")
        assert made not in (first, second)
        assert session_of(echo_host.host, chat) == made

        # The host's refusal, in its words; nothing moved.
        code, _, err = await run_cli(url, "sessions", "move", default, "--to", first)
        assert code == 2
        assert "is not movable (a session's default chat never is)" in err
        assert session_of(echo_host.host, default) == second
        code, _, err = await run_cli(url, "sessions", "move", chat, "--to", "new", "--after", chat)
        assert code == 2


# -- chat --chat, --continue ----------------------------------------------------------------


def resume_hint(err: str) -> str:
    found = re.search(r"resume it: ahp-server chat --chat (\S+) --continue", err)
    assert found, err
    return found.group(1)


async def test_continue_resumes_a_flaky_answer_to_its_end(echo_host: RunningHost) -> None:
    url = echo_host.url
    code, out, err = await run_cli(url, "chat", "/flaky")
    assert code == 1
    assert "The first half," in out
    chat = resume_hint(err)  # the failed turn says how to resume it

    code, out, err = await run_cli(url, "chat", "--chat", chat, "--continue")
    assert code == 0, err
    assert "resumed after 'The first half, ': the second half." in out
    state = host_state(echo_host.host, chat)
    assert isinstance(state, ChatState)
    assert [t.state for t in state.turns] == ["complete"]  # the same turn, ended
    assert state.status & READ  # the CLI showed its end: read

    # Talk on in the same chat.
    code, out, err = await run_cli(url, "chat", "--chat", chat, "and more")
    assert code == 0, err
    assert out.strip() == "and more"
    state = host_state(echo_host.host, chat)
    assert len(state.turns) == 2
    assert state.status & READ


async def test_continue_refuses_what_cannot_be_resumed(echo_host: RunningHost) -> None:
    url = echo_host.url
    code, _, err = await run_cli(url, "chat", "/error")
    assert code == 1
    assert "resume it" not in err
    async with AhpClient.connect(url) as client:
        (summary,) = (await client.list_sessions(timeout=TIMEOUT)).items
    chat = summary.default_chat
    assert isinstance(chat, str)

    code, _, err = await run_cli(url, "chat", "--chat", chat, "--continue")
    assert code == 2
    assert "failed for good (its error is not resumable)" in err
    state = host_state(echo_host.host, chat)
    assert [t.state for t in state.turns] == ["error"]  # nothing was dispatched

    code, _, err = await run_cli(url, "chat", "--chat", chat, "fine now")
    assert code == 0, err
    code, _, err = await run_cli(url, "chat", "--chat", chat, "--continue")
    assert code == 2
    assert "did not fail (it is complete): nothing to continue" in err

    code, _, err = await run_cli(url, "chat", "--continue")
    assert code == 2
    assert "--continue needs --chat CHAT" in err
