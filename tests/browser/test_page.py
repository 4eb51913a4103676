"""The browser client in a real browser, against a real host process.

Each test starts ``python -m ahp_server serve`` (a subprocess on a loopback
port, like a user would) and runs one scenario of ``web/browser/scenarios.mjs``
in headless Chromium (Debian's ``/usr/bin/chromium`` driven by Node's
``playwright-core``; nothing is downloaded). The scenario clicks and types like
a person; this side restarts the host or cuts the network when the scenario
asks, then checks what the page showed against what the host holds.

Needs Node, ``web/node_modules`` (``npm ci`` in ``web/``), Chromium and the
built page (``ahp_server/web/static``); ``.ci/run`` provides all four. Without
them the module is skipped locally, and fails under ``CI=true``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from msgspec import UNSET, UnsetType

from ahp_server.agents.echo import markdown_answer
from ahp_server.client import AhpClient
from ahp_server.protocol.types import (
    ActiveTurn,
    BackgroundShellWork,
    ChangesetFile,
    ChangesetState,
    ChangesSummary,
    ChatState,
    MarkdownResponsePart,
    SessionState,
    ToolCallPendingConfirmationState,
    ToolCallResponsePart,
)
from tests.agents.test_acp import SCRIPT
from tests.e2e import test_store_failure as store_failure
from tests.e2e.helpers import Daemon
from tests.proxy import Proxy

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "web"
RUNNER = WEB / "browser" / "run.mjs"
CHROMIUM = os.environ.get("AHP_CHROMIUM", "/usr/bin/chromium")
NODE = shutil.which("node")
#: Where the scenarios save screenshots: a temporary folder, or the docs with
#: ``AHP_WEB_SCREENSHOTS=docs`` (how docs/web-page.png and web-narrow.png are made).
SCREENSHOTS_ENV = "AHP_WEB_SCREENSHOTS"
SCENARIO_TIMEOUT = 180.0

_missing = [
    what
    for what, present in (
        ("node", NODE is not None),
        ("web/node_modules (npm ci in web/)", (WEB / "node_modules" / "playwright-core").is_dir()),
        (f"chromium at {CHROMIUM}", Path(CHROMIUM).exists()),
        (
            "the built page (npm run build in web/)",
            (ROOT / "ahp_server/web/static/index.html").is_file(),
        ),
    )
    if not present
]
if _missing:
    if os.environ.get("CI"):
        raise RuntimeError(f"browser tests need {', '.join(_missing)}: .ci/run provides them")
    pytest.skip(f"browser tests need {', '.join(_missing)}", allow_module_level=True)


class Host:
    """A host process on a fixed loopback port: restartable on the same port (same origin)."""

    def __init__(
        self,
        data_dir: Path,
        *extra: str,
        env: dict[str, str] | None = None,
        roots: list[str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.extra = extra
        self.env = env
        self.roots = roots
        self.daemon: Daemon | None = None
        self.port = 0

    async def start(self) -> str:
        extra = (*self.extra, "--port", str(self.port)) if self.port else self.extra
        daemon = Daemon(self.data_dir, *extra, env=self.env, roots=self.roots)
        url = await daemon.start()
        self.daemon = daemon
        self.port = int(url.rsplit(":", 1)[1])
        return url

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    async def restart(self) -> None:
        """SIGKILL, then the same data and port: a crash and a supervisor bringing it back."""
        assert self.daemon is not None
        await self.daemon.kill()
        await self.start_again()

    async def stop(self) -> None:
        """SIGTERM: the host closes its connections (1001, with a reason) and exits."""
        assert self.daemon is not None
        await self.daemon.terminate()
        await self.daemon.close()

    async def start_again(self) -> None:
        """The same data and port again, after :meth:`stop` or a kill."""
        for _ in range(50):  # the port is free at once after a kill; retry if not
            try:
                await self.start()
                return
            except AssertionError:
                await asyncio.sleep(0.1)
        raise AssertionError("the host did not come back on its port")

    async def close(self) -> None:
        if self.daemon is not None:
            await self.daemon.close()


async def run_scenario(
    name: str,
    page_url: str,
    answer: Any = None,
    env: dict[str, str] | None = None,
    screenshots: Path | None = None,
) -> dict[str, Any]:
    """Run a scenario; ``answer(request)`` handles its ``ask`` lines. Returns its result."""
    assert NODE is not None
    folder = os.environ.get(SCREENSHOTS_ENV)
    shots = (ROOT / folder) if folder else screenshots
    process = await asyncio.create_subprocess_exec(
        NODE,
        str(RUNNER),
        name,
        page_url,
        *([str(shots)] if shots else []),
        cwd=WEB,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    assert process.stdin
    assert process.stdout
    assert process.stderr
    result: dict[str, Any] | None = None
    try:
        async with asyncio.timeout(SCENARIO_TIMEOUT):
            while line := await process.stdout.readline():
                message = json.loads(line)
                if "ask" in message:
                    try:
                        reply = await answer(message["ask"])
                    except Exception as error:  # noqa: BLE001 (handed to the scenario, which fails on it)
                        reply = {"error": repr(error)}
                    process.stdin.write((json.dumps(reply or {"ok": True}) + "\n").encode())
                    await process.stdin.drain()
                elif "result" in message:
                    result = message["result"]
            stderr = (await process.stderr.read()).decode()
            code = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert code == 0, f"scenario {name} failed:\n{stderr}"
    assert result is not None, stderr
    return result


@pytest.fixture
async def host(tmp_path: Path) -> AsyncIterator[Host]:
    running = Host(tmp_path / "data")
    await running.start()
    try:
        yield running
    finally:
        await running.close()


def page_url(host: Host) -> str:
    return f"http://127.0.0.1:{host.port}/"


async def host_chat(host: Host, chat: str) -> ChatState:
    """The chat as the host holds it, read by a separate protocol client."""
    async with AhpClient.connect(host.ws_url) as client:
        await client.subscribe(chat)  # no view: every retained turn
        return client.confirmed(chat, ChatState)


IS_READ = 32
IS_ARCHIVED = 64
ACTIVITY = {1: "idle", 2: "error", 8: "working", 24: "needs input"}


async def host_session(host: Host, session: str) -> SessionState:
    """The session as the host holds it, read by a separate protocol client."""
    async with AhpClient.connect(host.ws_url) as client:
        await client.subscribe(session)
        return client.confirmed(session, SessionState)


def flags_of(state: SessionState) -> dict[str, dict[str, Any]]:
    """The session's own read/archived flags, and each chat's from its catalogue entry."""
    flags: dict[str, dict[str, Any]] = {
        "session": {
            "read": bool(state.status & IS_READ),
            "archived": bool(state.status & IS_ARCHIVED),
        }
    }
    for chat in state.chats:
        flags[chat.resource] = {
            "read": bool(chat.status & IS_READ),
            "archived": bool(chat.status & IS_ARCHIVED),
            "activity": ACTIVITY.get(chat.status & 0b11111, "?"),
        }
    return flags


async def archive_as_another_client(host: Host, chat: str) -> None:
    """Another 1.0 client archives ``chat`` and sees the host accept it."""
    async with AhpClient.connect(host.ws_url) as client:
        await client.subscribe(chat)
        await client.dispatch(chat, {"type": "chat/isArchivedChanged", "isArchived": True})
        await client.wait_for(
            lambda c: (
                not c.state.pending(chat)
                and bool(c.confirmed(chat, ChatState).status & IS_ARCHIVED)
            )
        )


async def confirm_as_another_client(host: Host, chat: str) -> None:
    """Another client allows the tool call ``chat``'s running turn waits on."""
    async with AhpClient.connect(host.ws_url) as client:
        await client.subscribe(chat)
        turn = client.confirmed(chat, ChatState).active_turn
        assert isinstance(turn, ActiveTurn), "no turn runs in the chat"
        (call,) = [
            p.tool_call
            for p in turn.response_parts
            if isinstance(p, ToolCallResponsePart)
            and isinstance(p.tool_call, ToolCallPendingConfirmationState)
        ]
        await client.dispatch(
            chat,
            {
                "type": "chat/toolCallConfirmed",
                "turnId": turn.id,
                "toolCallId": call.tool_call_id,
                "approved": True,
                "confirmed": "user-action",
            },
        )
        await client.wait_for(lambda c: not c.state.pending(chat))


def answers_of(state: ChatState) -> list[str]:
    return [
        "".join(p.content for p in turn.response_parts if isinstance(p, MarkdownResponsePart))
        for turn in state.turns
    ]


async def test_a_reply_streams_in_and_the_layout_narrows(host: Host, tmp_path: Path) -> None:
    result = await run_scenario("stream", page_url(host), screenshots=tmp_path)
    # The page offered 1.0.0 first; this host speaks it, so the page runs at 1.0.
    assert result["protocolVersion"] == "1.0.0"
    state = await host_chat(host, result["chat"])
    assert next(t.message.text for t in state.turns) == "Hello **browser**\nsecond line"
    if not os.environ.get(SCREENSHOTS_ENV):
        assert (tmp_path / "web-page.png").stat().st_size > 10_000
        assert (tmp_path / "web-narrow.png").stat().st_size > 5_000


async def test_a_tool_call_is_confirmed_and_an_input_request_answered(host: Host) -> None:
    result = await run_scenario("tool_and_input", page_url(host))
    state = await host_chat(host, result["chat"])
    assert [t.state for t in state.turns] == ["complete", "complete"]


async def test_cancel_steer_and_queue(host: Host) -> None:
    result = await run_scenario("cancel_steer_queue", page_url(host))
    state = await host_chat(host, result["chat"])
    assert [t.state for t in state.turns] == ["cancelled", "complete", "complete"]
    assert "steered: go left" in answers_of(state)[1]


async def test_hostile_markdown_is_rendered_inert(host: Host) -> None:
    result = await run_scenario("hostile", page_url(host))
    # The scenario proved nothing ran and nothing dangerous reached the DOM. The
    # host's Content-Security-Policy is in force as well: Chromium reports the
    # inline handlers it refused to compile when DOMPurify parsed the payload in
    # its inert document (a report at parse time, not an attempt to run).
    assert any("Content Security Policy" in line for line in result["csp"])


async def test_tables_are_tables_and_code_is_highlighted_and_copied(host: Host) -> None:
    result = await run_scenario("markdown_render", page_url(host))
    # The scenario checked the table's styling, the highlighting and the copy
    # button in the page; here, that what it showed is the answer the host holds.
    state = await host_chat(host, result["chat"])
    assert answers_of(state) == [result["message"]]
    assert result["headers"] == ["tool", "runs", "note"]
    assert result["rows"] == [["ruff", "12", "fast"], ["mypy", "3", "strict"]]
    assert result["copied"] == 'def greet(name):\n    return f"hello {name}"  # say it'
    assert f"```python\n{result['copied']}\n```" in answers_of(state)[0]


#: The big answer's size; 5 MB is the answer of issue 30.
BIG_MARKDOWN_KB = int(os.environ.get("AHP_BIG_MARKDOWN_KB", "5000"))


async def test_a_5_mb_answer_renders_completely_holding_little_dom(host: Host) -> None:
    result = await run_scenario(
        "big_markdown", page_url(host), env={"AHP_BIG_MARKDOWN_KB": str(BIG_MARKDOWN_KB)}
    )
    _, sections = markdown_answer(BIG_MARKDOWN_KB)
    rendered, held = result["rendered"], result["held"]
    seconds, long_tasks = result["seconds"], result["longTasks"]
    print(
        f"{BIG_MARKDOWN_KB} KB rendered in {seconds:.1f} s; long tasks (ms): {long_tasks}; "
        f"held {held['elements']} of {rendered['elements']} elements, "
        f"{held['parked']} of {held['groups']} groups parked"
    )
    # The long tasks (PerformanceObserver "longtask": over 50 ms) are printed above, not
    # asserted: how long a task takes is this machine's speed, not the page's behaviour
    # (none in 4 runs of 4 on 2026-12-06; 53-70 ms in 2 of 3 runs on the slower machine of
    # 2026-12-07, docs/web.md "Answers: tables, code, long answers"). What the page does
    # so that a task stays short is asserted: it holds little DOM (far groups parked).
    # Because the page held little DOM: the groups far from the view parked as
    # text (web/src/streamed.ts), a tenth of the answer's elements at most.
    assert held["parked"] > held["groups"] / 2
    assert held["elements"] * 10 < rendered["elements"]
    # Scrolled back to the top, the first group was rendered again; and a
    # parked group in the middle when find-in-page matched in it.
    assert result["firstHeading"] == "Section 0"
    assert result["found"] == held["groups"] // 2
    # Before printing every group was rendered, each block as the echo agent
    # wrote it.
    assert rendered["parked"] == 0
    assert rendered["marker"] == f"END OF MARKDOWN {sections}"
    assert rendered["lastHeading"] == f"Section {sections - 1}"
    assert rendered["headings"] == sections
    assert rendered["tables"] == sections
    assert rendered["tableRows"] == 3 * sections
    assert rendered["listItems"] == 3 * sections
    assert rendered["code"] == rendered["highlighted"] == rendered["copyButtons"] == sections
    assert rendered["python"] == (sections + 1) // 2
    assert rendered["typescript"] == sections // 2


async def test_two_tabs_stay_in_sync(host: Host) -> None:
    result = await run_scenario("two_tabs", page_url(host))
    state = await host_chat(host, result["chat"])
    assert answers_of(state)[1] == "from tab b"


async def test_a_1_0_tab_and_a_0_7_tab_show_one_chat_alike(host: Host) -> None:
    result = await run_scenario("protocol_versions", page_url(host))
    assert result["protocols"] == ["1.0.0", "0.7.0"]
    # Both tabs showed the chat's primary working directory (0.7 names it, 1.0 has it first).
    assert len(result["directory"]) == 1
    assert result["directory"][0].startswith("In /")
    assert result["error"].startswith("Error: The echo agent was asked to fail")
    state = await host_chat(host, result["chat"])
    assert [t.state for t in state.turns] == ["error", "complete", "complete"]
    assert [a.strip() for a in result["answers"]] == [a.strip() for a in answers_of(state)]


async def test_older_turns_page_in_and_fork_and_side_chat_open(host: Host) -> None:
    await run_scenario("paging_and_chats", page_url(host))


async def test_the_page_recovers_from_a_host_restart_mid_stream(host: Host) -> None:
    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        assert request["do"] == "restart"
        await host.restart()
        return {"ok": True}

    result = await run_scenario("restart", page_url(host), answer)
    state = await host_chat(host, result["chat"])
    # What the page shows is what the host kept: every word once, none lost, none doubled.
    assert [a.strip() for a in result["answers"]] == [a.strip() for a in answers_of(state)]
    assert [t.state for t in state.turns] == ["complete", "error", "complete"]
    interrupted = result["interrupted"].split()
    assert interrupted == [f"w{i + 1}" for i in range(len(interrupted))]
    assert len(interrupted) >= 3


async def test_the_page_replays_what_it_missed_while_the_network_was_down(host: Host) -> None:
    proxy = Proxy(host.port)
    port = await proxy.start()
    try:

        async def answer(request: dict[str, Any]) -> dict[str, Any]:
            assert request["do"] == "cut"
            await proxy.cut(int(request["ms"]))
            return {"ok": True}

        result = await run_scenario("network_drop", f"http://127.0.0.1:{port}/", answer)
    finally:
        await proxy.close()
    assert result["answer"].split() == result["words"].split()
    state = await host_chat(host, result["chat"])
    assert answers_of(state)[0].split() == result["words"].split()


async def test_a_host_with_a_token_asks_for_it(tmp_path: Path) -> None:
    token = "browser-test-token"
    running = Host(tmp_path / "data", env={"AHP_SERVER_TOKEN": token})
    await running.start()
    try:
        await run_scenario("token", page_url(running), env={"AHP_TEST_TOKEN": token})
    finally:
        await running.close()


async def test_unread_markers_and_archived_chats_and_sessions(host: Host) -> None:
    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        if request["do"] == "flags":
            return {"flags": flags_of(await host_session(host, request["session"]))}
        if request["do"] == "confirm":
            await confirm_as_another_client(host, request["chat"])
        else:
            assert request["do"] == "archive"
            await archive_as_another_client(host, request["chat"])
        return {"ok": True}

    result = await run_scenario("archive_and_unread", page_url(host), answer)
    # The scenario waited for the host to hold each flag the page showed; at the
    # end everything is restored and both chats read.
    flags = flags_of(await host_session(host, result["session"]))
    assert flags == result["final"]
    assert flags["session"]["archived"] is False
    for chat in (result["main"], result["side"]):
        assert flags[chat]["read"] is True
        assert flags[chat]["archived"] is False


async def test_chats_are_reordered_and_moved_to_another_session(host: Host) -> None:
    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        assert request["do"] == "order"
        state = await host_session(host, request["session"])
        return {"order": [chat.resource for chat in state.chats]}

    result = await run_scenario("move_and_reorder", page_url(host), answer)
    source = await host_session(host, result["source"])
    target = await host_session(host, result["target"])
    assert [c.resource for c in source.chats] == result["order"]
    assert target.chats[0].resource == result["moved"]
    # The moved chat answered in its new session; the refused one stayed put.
    state = await host_chat(host, result["moved"])
    assert answers_of(state)[-1].strip() == "in its new home"
    assert "cancel it or wait" in result["refusal"]


async def test_continue_resumes_a_failed_answer(host: Host) -> None:
    result = await run_scenario("resume", page_url(host))
    state = await host_chat(host, result["chat"])
    # The resumed turn is the same turn, complete, with what the page showed.
    assert state.turns[0].id == result["turnId"]
    assert [t.state for t in state.turns] == ["complete", "error"]
    assert "".join(answers_of(state)[0].split()) == "".join(result["answer"].split())


async def test_a_continue_the_host_refuses_is_a_notice(host: Host) -> None:
    result = await run_scenario("resume_refused", page_url(host))
    assert result["notice"].startswith("The host refused continuing the answer:")
    # The host holds those errors not resumable: the turns are still the failed ones.
    state = await host_chat(host, result["chat"])
    assert [t.state for t in state.turns] == ["error", "error"]


@pytest.fixture
async def scripted_host(tmp_path: Path) -> AsyncIterator[Host]:
    """A host whose agents include the scripted ACP agent (tests/agents/scripted_agent.py)."""
    config = tmp_path / "host.toml"
    config.write_text(
        "[[agents]]\n"
        'name = "scripted"\n'
        'display_name = "Scripted"\n'
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(SCRIPT)}]\n",
        encoding="utf-8",
    )
    running = Host(tmp_path / "data", "--config", str(config))
    await running.start()
    try:
        yield running
    finally:
        await running.close()


def write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def diff_stats(file: ChangesetFile) -> tuple[int, int]:
    diff = file.edit.diff
    if isinstance(diff, UnsetType):
        return 0, 0
    added = 0 if isinstance(diff.added, UnsetType) else int(diff.added)
    removed = 0 if isinstance(diff.removed, UnsetType) else int(diff.removed)
    return added, removed


async def test_a_chat_shows_its_changes(scripted_host: Host, tmp_path: Path) -> None:
    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        assert request["do"] == "file"
        write(Path(request["path"]), request["text"])
        return {"ok": True}

    result = await run_scenario("changes", page_url(scripted_host), answer)
    chat, session = result["chat"], result["session"]
    async with AhpClient.connect(scripted_host.ws_url) as client:
        await client.subscribe(chat)
        changesets = client.confirmed(chat, ChatState).changesets
        assert isinstance(changesets, tuple)
        (uri,) = [c.uri_template for c in changesets if c.change_kind == "chat"]
        state = await client.subscribe(uri)
        assert isinstance(state, ChangesetState)
        await client.subscribe(session)
        (entry,) = [c for c in client.confirmed(session, SessionState).chats if c.resource == chat]
    # The page subscribed to the chat's own changeset and listed its files as the host has them.
    assert result["changeset"] == uri
    host_rows = []
    for file in state.files:
        added, removed = diff_stats(file)
        created = isinstance(file.edit.before, UnsetType)
        host_rows.append(
            {
                "id": file.id,
                "path": unquote(urlsplit(file.id).path),
                "kind": "created" if created else "modified",
                "added": added,
                "removed": removed,
            }
        )
    assert result["rows"] == host_rows
    assert [Path(r["path"]).name for r in result["rows"]] == ["notes.txt", "fresh.txt"]
    # The tab showed the counts of the chat's catalogue entry.
    changes = entry.changes
    assert isinstance(changes, ChangesSummary)
    assert changes.files == 2
    assert result["label"] == f"2 files +{changes.additions} \u2212{changes.deletions}"
    added = sum(int(r["added"]) for r in host_rows)
    removed = sum(int(r["removed"]) for r in host_rows)
    assert (changes.additions, changes.deletions) == (added, removed)


async def test_a_confirmation_card_shows_the_command_and_the_diff(scripted_host: Host) -> None:
    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        assert request["do"] == "file"
        write(Path(request["path"]), request["text"])
        return {"ok": True}

    result = await run_scenario("approvals", page_url(scripted_host), answer)
    assert result["command"] == "ls -la build"  # the invocation message's code block
    assert json.loads(result["input"]) == {"command": "ls -la build"}
    assert result["path"] == result["notes"]
    assert result["diff"] == ["same alpha", "removed beta", "added BETA"]
    # After approval, one card per turn: the call the agent ran, completed.
    assert result["afterRun"] == ["completed"]
    assert result["afterWrite"] == ["completed"]
    state = await host_chat(scripted_host, result["chat"])
    for turn in state.turns:
        calls = [p.tool_call for p in turn.response_parts if isinstance(p, ToolCallResponsePart)]
        assert [c.status for c in calls] == ["completed"]
    assert read(Path(result["notes"])) == "alpha\nBETA\n"


async def test_background_work_is_listed_until_its_command_exits(
    scripted_host: Host, tmp_path: Path
) -> None:
    flag = tmp_path / "stop"
    script = tmp_path / "wait.sh"
    script.write_text(
        f'echo "waiting for the flag"\nwhile [ ! -f "{flag}" ]; do sleep 0.05; done\necho done\n',
        encoding="utf-8",
    )

    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        if request["do"] == "script":
            return {"script": str(script)}
        if request["do"] == "background":
            state = await host_chat(scripted_host, request["chat"])
            listed = state.background_work
            work = [
                {
                    "id": w.id,
                    "label": w.label,
                    "startedAt": w.started_at,
                    "terminal": str(w.terminal),
                }
                for w in (listed if isinstance(listed, tuple) else ())
                if isinstance(w, BackgroundShellWork)
            ]
            return {"work": work}
        assert request["do"] == "stop"
        write(flag, "done")
        return {"ok": True}

    try:
        result = await run_scenario("background", page_url(scripted_host), answer)
    finally:
        write(flag, "done")  # the command ends whatever happened
    # While it ran, the page listed what the host listed; then the host took it off.
    (work,) = result["host"]
    (shown,) = result["listed"]
    assert shown == {
        "id": work["id"],
        "kind": "shell",
        "label": work["label"],
        "startedAt": work["startedAt"],
    }
    assert result["terminal"] == work["terminal"]
    state = await host_chat(scripted_host, result["chat"])
    assert state.background_work in ((), UNSET)


async def test_a_chat_moves_to_a_new_session(host: Host) -> None:
    result = await run_scenario("move_new_session", page_url(host))
    source = await host_session(host, result["source"])
    target = await host_session(host, result["session"])
    assert result["moved"] not in [c.resource for c in source.chats]
    assert target.default_chat == result["moved"]
    assert [c.resource for c in target.chats] == [result["moved"]]
    assert target.provider == source.provider
    state = await host_chat(host, result["moved"])
    assert [t.message.text for t in state.turns] == ["before the move", "in a new session"]


#: An agent name far wider than the sidebar.
LONG_NAME = "Scripted agent with a display name much longer than any sidebar is wide (v2.3.1)"


@pytest.fixture
async def configured_host(tmp_path: Path) -> AsyncIterator[Host]:
    """A host whose default agent is the scripted one (a long name); ``broken`` cannot start."""
    config = tmp_path / "host.toml"
    config.write_text(
        "[providers]\n"
        'default = "scripted"\n'
        "[[agents]]\n"
        'name = "scripted"\n'
        f"display_name = {json.dumps(LONG_NAME)}\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(SCRIPT)}]\n"
        "[[agents]]\n"
        'name = "broken"\n'
        'display_name = "Broken"\n'
        f"command = {json.dumps(sys.executable)}\n"
        'args = ["-c", "import sys; sys.exit(3)"]\n',
        encoding="utf-8",
    )
    running = Host(tmp_path / "data", "--config", str(config))
    await running.start()
    try:
        yield running
    finally:
        await running.close()


async def test_the_default_agent_is_preselected_and_long_names_keep_the_sidebar_whole(
    configured_host: Host,
) -> None:
    result = await run_scenario("default_agent", page_url(configured_host))
    # The host's providers.default, first in the picker and chosen.
    assert result["options"][0] == {"value": "scripted", "text": LONG_NAME}
    assert "echo" in [o["value"] for o in result["options"]]
    assert result["preselected"] == "scripted"
    # Nothing in the sidebar is cut or pushed out by the long name, before and after a session.
    for layout in (result["layout"], result["after"]):
        assert layout["button"] == {"text": "New session", "whole": True, "inside": True}
        assert layout["heading"] == {"text": "Sessions", "whole": True, "inside": True}
        assert layout["select"] == {"inside": True, "title": LONG_NAME}
        assert layout["sidebarScrolls"] is False
    # The session went to the default agent; the list shows it, cut with an ellipsis,
    # whole in the tooltip.
    state = await host_session(configured_host, result["session"])
    assert state.provider == "scripted"
    agent = result["agent"]
    assert agent["text"] == LONG_NAME
    assert agent["title"] == LONG_NAME
    assert agent["cut"] is True
    assert agent["ellipsis"] is True
    assert agent["inside"] is True
    assert agent["state"] == "idle"
    assert agent["stateVisible"] is True
    assert result["header"] == LONG_NAME


async def test_a_session_whose_agent_failed_to_start_shows_as_failed(
    configured_host: Host,
) -> None:
    result = await run_scenario("failed_start", page_url(configured_host))
    state = await host_session(configured_host, result["session"])
    assert state.lifecycle == "failed"
    error = state.creation_error
    assert not isinstance(error, UnsetType)
    assert result["state"] == "failed"
    assert result["detail"] == f"Failed to start: {error.message}"
    assert result["tooltip"] == result["detail"]
    assert result["main"] == f"Failed to start: {error.message}"


async def test_a_session_is_renamed_filtered_and_deleted(host: Host) -> None:
    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        assert request["do"] == "title"
        return {"title": (await host_session(host, request["session"])).title}

    result = await run_scenario("rename_delete_filter", page_url(host), answer)
    # The host holds the title as typed; the page shows its text.
    assert result["host"] == "**Fix** the `bug`"
    assert result["shown"] == {
        "sidebar": "Fix the bug",
        "tooltip": "Fix the bug",
        "header": "Fix the bug",
    }
    assert result["filtered"] == [result["first"]]
    assert result["none"] == "No session matches."
    assert result["left"] == [result["first"]]
    async with AhpClient.connect(host.ws_url) as client:
        listed = await client.list_sessions()
    assert [s.resource for s in listed.items] == [result["first"]]


async def test_a_banner_says_when_the_host_is_gone_and_goes_when_it_is_back(host: Host) -> None:
    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        if request["do"] == "stop":
            await host.stop()
        else:
            assert request["do"] == "start"
            await host.start_again()
        return {"ok": True}

    result = await run_scenario("health", page_url(host), answer)
    # The host's close reason (SIGTERM: 1001 "server shutting down"), as an alert.
    assert result["role"] == "alert"
    assert "The connection to the host is lost" in result["down"]
    assert "server shutting down" in result["down"]


async def test_a_folder_is_picked_for_a_new_session_and_remembered(tmp_path: Path) -> None:
    root = (tmp_path / "root").resolve()
    project = root / "project"
    project.mkdir(parents=True)
    outside = (tmp_path / "elsewhere").resolve()
    outside.mkdir()
    running = Host(tmp_path / "data", roots=[str(root)])  # AHP_SERVER_WORKSPACE_ROOTS
    await running.start()

    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        assert request["do"] == "paths"
        return {"root": str(root), "project": str(project), "outside": str(outside)}

    try:
        result = await run_scenario("folder_picker", page_url(running), answer)
        # The host's roots were offered; a folder outside them was refused, naming the setting.
        assert result["offered"] == [str(root)]
        assert result["refusal"].startswith("Could not create the session:")
        assert "workspace.roots" in result["refusal"]
        # The one inside is the session's working directory on the host, and shown.
        state = await host_session(running, result["session"])
        assert state.working_directories == (project.as_uri(),)
        assert result["directory"] == project.as_uri()
        # After a reload it is the first suggestion, before the root.
        assert result["after"] == [str(project), str(root)]
    finally:
        await running.close()


async def test_a_folder_is_browsed_in_the_roots_and_chosen_for_a_new_session(
    tmp_path: Path,
) -> None:
    root = (tmp_path / "root").resolve()
    (root / "a" / "b").mkdir(parents=True)
    (root / "c").mkdir()
    (root / "notes.txt").write_text("not a folder")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "out").symlink_to(elsewhere, target_is_directory=True)  # leads out: not a folder here
    # The host's data folder inside the root: listed, never served (docs/workspace.md "Roots").
    running = Host(root / "data", roots=[str(root)])
    await running.start()

    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        if request["do"] == "remove":
            shutil.rmtree(root / request["name"])
            return {"ok": True}
        assert request["do"] == "paths"
        return {"root": str(root)}

    try:
        result = await run_scenario("folder_browser", page_url(running), answer)
        # The root's folders, sorted; its file and the link out counted, not listed; no way up.
        assert result["atRoot"] == {
            "folders": ["a", "c", "data"],
            "up": [],
            "crumbs": [str(root)],
            "summary": "3 folders · 2 files not shown",
        }
        # The host's refusals, in the dialog: its data folder (-32009), a folder gone (-32008).
        assert result["denied"].startswith("Could not open data: ")
        assert "never serves" in result["denied"]
        assert result["gone"].startswith("Could not open c: ")
        assert "does not exist" in result["gone"]
        assert result["inA"] == {
            "folders": ["b"],
            "up": [f"Up to {root}"],
            "crumbs": [str(root), "a"],
            "summary": "1 folder",
        }
        assert result["focused"] == f"Up to {root}"  # the keyboard starts on the new listing
        assert result["inB"] == {
            "folders": [],
            "up": [f"Up to {root / 'a'}"],
            "crumbs": [str(root), "a", "b"],
            "summary": "No folders here",
        }
        assert result["chosen"] == str(root / "a")
        # The chosen folder is the session's working directory on the host, and shown.
        state = await host_session(running, result["session"])
        assert state.working_directories == ((root / "a").as_uri(),)
        assert result["directory"] == (root / "a").as_uri()
    finally:
        await running.close()


#: A 6 MiB tmpfs (tests/e2e/test_store_failure.py; skipped without the right to mount).
small_disk = store_failure.small_disk


async def test_a_banner_names_a_failed_store_and_goes_after_a_restart_with_room(
    small_disk: Path, tmp_path: Path
) -> None:
    running = Host(small_disk / "data")
    await running.start()

    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        if request["do"] == "fill":
            # Another client fills the disk until the host closes every connection (1012).
            async with AhpClient.connect(running.ws_url) as client:
                chat = await client.open_chat()
                await store_failure.talk_until_closed(client, chat)
                store_failure.assert_full_disk_close(client)
            return {"ok": True}
        assert request["do"] == "restart"
        assert running.daemon is not None
        await running.daemon.exited()  # it stops itself (status 1) after the failure
        roomy = tmp_path / "roomy"
        await asyncio.to_thread(shutil.copytree, small_disk / "data", roomy)
        running.data_dir = roomy  # the same files on a disk with space, the same port
        await running.start_again()
        return {"ok": True}

    try:
        result = await run_scenario("store_failure", page_url(running), answer)
    finally:
        await running.close()
    # The host's close reason, as it gave it.
    assert "The connection to the host is lost" in result["down"]
    assert "the host closed the connection: the store failed: " in result["down"]
