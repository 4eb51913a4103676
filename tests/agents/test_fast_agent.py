"""A real third-party ACP agent through the bridge: fast-agent (``fast-agent-mcp`` on PyPI).

It runs offline with its ``passthrough`` model, which answers with the user's
own words, and whose ``***CALL_TOOL <tool> <json>`` form makes it call a tool:
here its shell tool (``--shell``), which it runs through the host's ACP
``terminal/*`` — after asking permission, which the user grants over AHP.

fast-agent needs Python >= 3.12, so it lives in its own virtual environment,
``.venv-agents`` (``.ci/run`` creates it with Python 3.13), and runs as the
external process it is. ``AHP_TEST_FAST_AGENT`` points elsewhere.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import pytest
from msgspec import UnsetType

from ahp_server.client import AhpClient, turn_error
from ahp_server.config import AgentConfig
from ahp_server.protocol.edits import side_text
from ahp_server.protocol.types import (
    MarkdownString,
    ToolCallCompletedState,
)
from tests.agents.test_acp import (
    TIMEOUT,
    Bench,
    approve_and_finish,
    approved,
    asked,
    children,
    last_turn,
    only_call,
    open_chat,
    pending_confirmation,
    start,
    tools,
    until_no_children,
)
from tests.conftest import captured_logs, start_host
from tests.docs_recipes import load_recipe, recipe
from tests.test_config import run_cli

ROOT = Path(__file__).resolve().parents[2]
FAST_AGENT = os.environ.get("AHP_TEST_FAST_AGENT") or str(
    ROOT / ".venv-agents" / "bin" / "fast-agent"
)

if not shutil.which(FAST_AGENT):
    if os.environ.get("CI"):
        raise RuntimeError(f"{FAST_AGENT} is missing: .ci/run installs it")
    pytest.skip(f"fast-agent is not installed at {FAST_AGENT}", allow_module_level=True)


def fast_agent(*extra: str) -> AgentConfig:
    return AgentConfig(
        name="fast-agent",
        display_name="fast-agent",
        command=FAST_AGENT,
        args=("serve", "--transport", "acp", "--model", "passthrough", *extra),
    )


async def test_fast_agent_answers_a_turn_through_the_host(tmp_path: Path) -> None:
    before = children()
    started = await start(tmp_path, fast_agent(), session_open_timeout=120.0)
    try:
        async with AhpClient.connect(started.url) as client:
            chat = await open_chat(client, started.work, provider="fast-agent")
            answer = await client.ask(chat, "hello from an AHP client", timeout=TIMEOUT)
            assert answer == "hello from an AHP client"
            assert await client.ask(chat, "and again", timeout=TIMEOUT) == "and again"
    finally:
        await started.running.stop()
    assert await until_no_children(before) == set()


async def test_the_documented_fast_agent_recipe_answers_a_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/agents.md "Recipes", fast-agent: the block as written, but the offline model."""
    text = recipe("fast-agent", {'"sonnet"': '"passthrough"'})
    program = Path(str(shutil.which(FAST_AGENT)))
    assert program.name == "fast-agent"
    # The recipe's command is found on the host's PATH, as the page says to arrange.
    monkeypatch.setenv("PATH", f"{program.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    settings, path = load_recipe(text, tmp_path)
    checked = run_cli("check-config", "--config", str(path))
    assert checked.returncode == 0, checked.stderr
    assert "configuration ok" in checked.stdout
    work = tmp_path / "work"
    work.mkdir()
    before = children()
    running = await start_host(dataclasses.replace(settings, session_open_timeout=120.0))
    try:
        async with AhpClient.connect(running.url) as client:
            chat = await open_chat(client, work, provider="fast-agent")
            answer = await client.ask(chat, "hello from the recipe", timeout=TIMEOUT)
            assert answer == "hello from the recipe"
            assert last_turn(client, chat).state == "complete"
    finally:
        await running.stop()
    assert await until_no_children(before) == set()


async def test_fast_agent_runs_a_tool_through_the_hosts_terminal(tmp_path: Path) -> None:
    started = await start(tmp_path, fast_agent("--shell"), session_open_timeout=120.0)
    try:
        with captured_logs() as logs:
            async with AhpClient.connect(started.url) as client:
                await run_the_tool(client, started)
        # The command ran as the host's terminal (terminal/create), not in fast-agent.
        terminals = [e for e in logs if e["event"] == "terminal started"]
        assert len(terminals) == 1
        assert terminals[0]["cwd"] == str(started.work.resolve())
    finally:
        await started.running.stop()


async def run_the_tool(client: AhpClient, started: Bench) -> None:
    """Ask for the shell tool, grant the permission, check what it printed."""
    chat = await open_chat(client, started.work, provider="fast-agent")
    command = '***CALL_TOOL execute {"command": "echo from-the-host; pwd"}'
    turn_id = await client.send_message(chat, command)
    call = await pending_confirmation(client, chat)
    await approve_and_finish(client, chat, turn_id, call.tool_call_id, "allow_once")
    turn = last_turn(client, chat)
    assert turn.state == "complete", turn_error(turn)
    shown = [
        c.text
        for call in tools(turn)
        if isinstance(call, ToolCallCompletedState)
        for c in call.content or ()
    ]
    output = "\n".join(shown)
    assert "from-the-host" in output
    assert str(started.work.resolve()) in output  # it ran in the working directory


async def test_fast_agent_asks_to_run_a_command_and_the_confirmation_shows_it(
    tmp_path: Path,
) -> None:
    started = await start(tmp_path, fast_agent("--shell"), session_open_timeout=120.0)
    try:
        async with AhpClient.connect(started.url) as client:
            chat = await open_chat(client, started.work, provider="fast-agent")
            command = "echo shown-before; pwd"
            message = "***CALL_TOOL execute " + json.dumps({"command": command})
            turn_id, call = await asked(client, chat, message)
            assert isinstance(call.tool_input, str)
            assert json.loads(call.tool_input) == {"command": command}
            assert isinstance(call.invocation_message, MarkdownString)
            assert f"```sh\n{command}\n```" in call.invocation_message.markdown
            turn = await approved(client, chat, turn_id, call, "allow_once")
            # fast-agent asked under the id "pending", then ran the call under
            # its own id: one call in the chat, completed, nothing "skipped".
            done = only_call(turn)
            assert done.tool_call_id == call.tool_call_id
            assert "shown-before" in "\n".join(getattr(c, "text", "") for c in done.content or ())
    finally:
        await started.running.stop()


async def test_fast_agent_asks_to_write_a_file_and_the_confirmation_shows_the_diff(
    tmp_path: Path,
) -> None:
    started = await start(tmp_path, fast_agent(), session_open_timeout=120.0)
    target = started.work / "notes.txt"
    target.write_text("keep\nold\n")
    try:
        async with AhpClient.connect(started.url) as client:
            chat = await open_chat(client, started.work, provider="fast-agent")
            arguments = {"path": str(target), "content": "keep\nnew\n"}
            message = "***CALL_TOOL write_text_file " + json.dumps(arguments)
            turn_id, call = await asked(client, chat, message)
            assert not isinstance(call.edits, UnsetType)
            (edit,) = call.edits.items
            assert side_text(edit.before) == "keep\nold\n"  # the file as it is now
            assert side_text(edit.after) == "keep\nnew\n"
            assert not isinstance(edit.after, UnsetType)
            assert edit.after.uri == target.as_uri()
            assert str(target) in str(call.invocation_message)
            turn = await approved(client, chat, turn_id, call, "allow_once")
            assert only_call(turn).tool_call_id == call.tool_call_id
        assert target.read_text() == "keep\nnew\n"
    finally:
        await started.running.stop()
