"""The daemon as users run it: ``python -m ahp_server serve`` in a subprocess."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ahp_server.cli.chat import TOOL_OUTPUT_LINES, tool_result_lines
from ahp_server.client import AhpClient, ConnectionClosedError
from ahp_server.protocol.types import (
    ActiveTurn,
    ChatState,
    MarkdownResponsePart,
    RootState,
    ToolCallError,
    ToolCallResult,
    ToolResultTextContent,
)
from tests.e2e.helpers import TIMEOUT, Daemon, http_get


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    process = Daemon(tmp_path / "data")
    try:
        url = await process.start()
        assert process.process is not None
        yield process.process, url
    finally:
        await process.close()


async def test_serve_answers_clients_and_lists_the_echo_agent(
    daemon: tuple[asyncio.subprocess.Process, str],
) -> None:
    _, url = daemon
    async with AhpClient.connect(url, subscriptions=["ahp-root://"]) as client:
        assert client.confirmed("ahp-root://", RootState).agents[0].provider == "echo"
        chat = await client.open_chat()
        assert await client.ask(chat, "hello", timeout=TIMEOUT) == "hello"


async def test_sigterm_during_a_streamed_turn_closes_1001_and_exits_0(
    daemon: tuple[asyncio.subprocess.Process, str],
) -> None:
    process, url = daemon
    async with AhpClient.connect(url) as client:
        chat = await client.open_chat()
        await client.send_message(chat, "/slow 50 " + "word " * 200)

        def streaming(c: AhpClient) -> bool:
            turn = c.confirmed(chat, ChatState).active_turn
            return isinstance(turn, ActiveTurn) and any(
                isinstance(p, MarkdownResponsePart) for p in turn.response_parts
            )

        await client.wait_for(streaming, timeout=TIMEOUT)
        process.send_signal(signal.SIGTERM)
        with pytest.raises(ConnectionClosedError):
            await client.wait_for(lambda c: False, timeout=TIMEOUT)
        assert client.close_code == 1001
    async with asyncio.timeout(TIMEOUT):
        assert await process.wait() == 0


SCRIPTED = Path(__file__).resolve().parents[1] / "agents" / "scripted_agent.py"


async def run_cli(
    url: str, *args: str, stdin: str = "", cwd: Path | None = None
) -> tuple[int, str, str]:
    """``python -m ahp_server ARGS --url URL`` (run in ``cwd``): exit status, stdout, stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "ahp_server",
        *args,
        "--url",
        url,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd,
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate(stdin.encode())
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def run_chat(
    url: str, *args: str, stdin: str = "", cwd: Path | None = None
) -> tuple[int, str, str]:
    """``ahp-server chat ARGS --url URL``."""
    return await run_cli(url, "chat", *args, stdin=stdin, cwd=cwd)


@pytest.fixture
async def agent_daemon(tmp_path: Path) -> AsyncIterator[str]:
    config = tmp_path / "ahp-server.toml"
    config.write_text(
        "[[agents]]\n"
        'name = "scripted"\n'
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(SCRIPTED))}]\n",
        encoding="utf-8",
    )
    process = Daemon(tmp_path / "data", "--config", str(config))
    try:
        yield await process.start()
    finally:
        await process.close()


@pytest.mark.parametrize(
    ("answer", "said", "outcome"),
    [("2\n", "allowed", "allow-always"), ("3\n", "denied", "reject-once"), ("", "denied", "")],
    ids=["always-allow", "reject", "no-answer"],
)
async def test_chat_with_a_chosen_agent_answers_its_confirmation_at_the_terminal(
    agent_daemon: str, answer: str, said: str, outcome: str
) -> None:
    code, out, err = await run_chat(
        agent_daemon, "--agent", "scripted", "/permission", stdin=answer
    )
    assert code == 0, err
    assert f"connected to {agent_daemon} (AHP 1.0.0)" in err  # the client speaks 1.0
    assert "[confirm] Allow Delete a file?" in out
    assert "1. Allow once" in out
    assert "4. Never" in out
    assert said in out
    # No answer denies: the agent is told its first reject option.
    assert f"permission: {outcome or 'reject-once'}" in out


async def test_chat_shows_the_command_a_confirmation_asks_to_run(agent_daemon: str) -> None:
    code, out, err = await run_chat(
        agent_daemon, "--agent", "scripted", "/ask-run rm -rf build", stdin="1\n"
    )
    assert code == 0, err
    assert "[confirm] Allow execute?" in out
    assert "  ```sh\n  rm -rf build\n  ```" in out
    assert "allowed" in out
    # What it did, and its output, once it ran.
    assert "\n[tool] " in out
    assert "\n  ran: rm -rf build\n" in out


async def test_chat_shows_the_file_and_diff_a_confirmation_asks_to_write(
    agent_daemon: str, tmp_path: Path
) -> None:
    target = tmp_path / "notes.txt"
    code, out, err = await run_chat(
        agent_daemon, "--agent", "scripted", f"/ask-write {target} hello", stdin="2\n"
    )
    assert code == 0, err
    assert "[confirm] Allow write_text_file?" in out
    assert f"  write_text_file ({target})" in out
    assert f"  --- /dev/null\n  +++ {target}\n  @@ -0,0 +1 @@\n  +hello" in out
    assert '  input: {"path": ' in out
    assert "denied" in out
    assert not target.exists()


async def test_chat_reports_a_failed_turns_error(
    daemon: tuple[asyncio.subprocess.Process, str],
) -> None:
    _, url = daemon
    code, _, err = await run_chat(url, "/error")
    assert code == 1
    assert "(AHP 1.0.0)" in err
    # 1.0: the turn's last response part, of kind error, carries the message.
    assert "ended error: The echo agent was asked to fail (/error)." in err


async def test_chat_with_an_unknown_agent_says_so(agent_daemon: str) -> None:
    code, _, err = await run_chat(agent_daemon, "--agent", "nobody", "hello")
    assert code == 2  # the host refused: exit status 2, its words
    assert "ahp-server chat: unknown provider 'nobody'" in err


def log_events(daemon: Daemon, event: str) -> list[dict[str, object]]:
    """The daemon's JSON log lines of ``event`` so far."""
    lines = (json.loads(line) for line in daemon.stderr if line.startswith("{"))
    return [line for line in lines if line.get("event") == event]


async def test_serve_logs_the_pages_url_and_warns_of_a_missing_agent_program(
    tmp_path: Path,
) -> None:
    config = tmp_path / "ahp-server.toml"
    config.write_text(
        '[[agents]]\nname = "later"\ncommand = "later-agent-not-installed"\n', encoding="utf-8"
    )
    daemon = Daemon(tmp_path / "data", "--config", str(config))
    try:
        url = await daemon.start()
        # An agent installed later is not fatal: the host serves, and said which key.
        (warning,) = log_events(daemon, "agent program not found")
        assert warning["key"] == "agents[0].command"
        assert warning["problem"] == "'later-agent-not-installed' is not on PATH"
        (listening,) = log_events(daemon, "listening")
        assert listening["url"] == url
        page = str(listening["page"])
        assert page == "http" + url.removeprefix("ws") + "/"
        status, content_type, body = await http_get(page)
        assert status == 200
        assert content_type.startswith("text/html")
        assert "<html" in body.lower()
    finally:
        await daemon.close()


async def test_serve_without_the_web_ui_logs_no_page(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path / "data", env={"AHP_SERVER_WEB_UI": "false"})
    try:
        await daemon.start()
        (listening,) = log_events(daemon, "listening")
        assert "page" not in listening
    finally:
        await daemon.close()


@pytest.mark.parametrize(
    ("env", "loop"),
    [({}, "uvloop"), ({"AHP_SERVER_EVENT_LOOP": "asyncio"}, "asyncio")],
    ids=["default", "asyncio"],
)
async def test_the_daemon_streams_on_the_event_loop_its_setting_names(
    tmp_path: Path, env: dict[str, str], loop: str
) -> None:
    daemon = Daemon(tmp_path / "data", env=env)
    try:
        url = await daemon.start()
        (listening,) = log_events(daemon, "listening")
        assert listening["loop"] == loop
        async with AhpClient.connect(url) as client:
            chat = await client.open_chat()
            words = " ".join(f"w{i}" for i in range(40))
            assert await client.ask(chat, f"/slow 1 {words}", timeout=TIMEOUT) == words
    finally:
        await daemon.close()


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback on this machine")
async def test_an_ipv6_listener_logs_urls_that_work_as_they_are(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path / "data", "--host", "::1")
    try:
        url = await daemon.start()
        (listening,) = log_events(daemon, "listening")
        assert url.startswith("ws://[::1]:")  # RFC 3986 §3.2.2: the address in brackets
        status, _, body = await http_get(str(listening["page"]))
        assert status == 200
        assert "<html" in body.lower()
        async with AhpClient.connect(url) as client:
            await client.ping(timeout=TIMEOUT)
    finally:
        await daemon.close()


async def test_a_host_on_every_interface_logs_a_page_url_a_browser_opens(tmp_path: Path) -> None:
    token = "t" * 32
    daemon = Daemon(tmp_path / "data", "--host", "0.0.0.0", env={"AHP_SERVER_TOKEN": token})
    try:
        url = await daemon.start()
        assert url.startswith("ws://0.0.0.0:")
        (listening,) = log_events(daemon, "listening")
        page = str(listening["page"])
        assert page == "http://127.0.0.1:" + url.removeprefix("ws://0.0.0.0:") + "/"
        status, _, body = await http_get(page)
        assert status == 200
        assert "<html" in body.lower()
    finally:
        await daemon.close()


def test_a_tools_output_is_shown_in_its_first_lines_and_a_failure_names_its_error() -> None:
    many = "\n".join(f"line {i}" for i in range(TOOL_OUTPUT_LINES + 3))
    ran = ToolCallResult(
        success=True, past_tense_message="Ran `ls`", content=(ToolResultTextContent(text=many),)
    )
    lines = tool_result_lines(ran)
    assert lines[0] == "[tool] Ran `ls`"
    assert lines[1:-1] == [f"  line {i}" for i in range(TOOL_OUTPUT_LINES)]
    assert lines[-1] == "  … 3 more lines"
    failed = ToolCallResult(
        success=False, past_tense_message="Could not run `ls`", error=ToolCallError(message="boom")
    )
    assert tool_result_lines(failed) == ["[tool failed] Could not run `ls`: boom"]
