"""A chat's background work (1.0: ``chat/backgroundWorkSet`` / ``Removed``) end to end
(issue 28, item 5).

Layer: tests (end to end). The real ACP agent ``tests/agents/scripted_agent.py``
starts a command through the host and ends its turn without waiting
(``/background``); the bundled client sees the command listed in the chat's
``backgroundWork`` with its terminal, and taken off when it exits, when a user
disposes its terminal, or after a restart (its process is gone). The command
waits for a file the test writes: no timing is assumed.
docs/workspace.md "Background work".
"""

from __future__ import annotations

import sys
from pathlib import Path

from ahp_server.client import AhpClient
from ahp_server.protocol.types import (
    BackgroundShellWork,
    ChatState,
    TerminalRunningLifecycleState,
    TerminalState,
)
from tests.agents.test_acp import SCRIPT, open_chat
from tests.e2e.helpers import Daemon
from tests.e2e.test_changesets import TIMEOUT, open_bench, turn_of


def background(client: AhpClient, chat: str) -> tuple[BackgroundShellWork, ...]:
    listed = client.confirmed(chat, ChatState).background_work
    return (
        ()
        if not isinstance(listed, tuple)
        else tuple(w for w in listed if isinstance(w, BackgroundShellWork))
    )


async def test_a_command_a_turn_left_running_is_background_work_until_it_exits(
    tmp_path: Path,
) -> None:
    flag = tmp_path / "stop"
    bench = await open_bench(tmp_path)
    try:
        async with AhpClient.connect(bench.url) as client:
            chat = await open_chat(client, bench.work)
            script = tmp_path / "wait.sh"
            script.write_text(f'while [ ! -f "{flag}" ]; do sleep 0.05; done\n')
            answer, _ = await turn_of(client, chat, f"/background sh {script}")
            assert answer == "started in the background"
            await client.wait_for(lambda c: bool(background(c, chat)), timeout=TIMEOUT)
            (work,) = background(client, chat)
            assert work.command.endswith("sh")
            assert work.id == f"shell:{work.terminal}"
            terminal = await client.subscribe(str(work.terminal), timeout=TIMEOUT)
            assert isinstance(terminal, TerminalState)
            assert isinstance(terminal.lifecycle, TerminalRunningLifecycleState)
            flag.write_text("done")
            await client.wait_for(lambda c: not background(c, chat), timeout=TIMEOUT)
            assert client.confirmed(chat, ChatState).background_work == ()
    finally:
        await bench.running.stop()


async def test_disposing_its_terminal_or_a_restart_takes_it_off(tmp_path: Path) -> None:
    script = tmp_path / "wait.sh"
    script.write_text(f'while [ ! -f "{tmp_path / "never"}" ]; do sleep 0.05; done\n')
    bench = await open_bench(tmp_path, data_dir=str(tmp_path / "data"))
    try:
        async with AhpClient.connect(bench.url) as client:
            chat = await open_chat(client, bench.work)
            await turn_of(client, chat, f"/background sh {script}")
            await client.wait_for(lambda c: bool(background(c, chat)), timeout=TIMEOUT)
            (first,) = background(client, chat)
            await client.request(
                "disposeTerminal", {"channel": str(first.terminal)}, timeout=TIMEOUT
            )
            await client.wait_for(lambda c: not background(c, chat), timeout=TIMEOUT)
            await turn_of(client, chat, f"/background sh {script}")
            await client.wait_for(lambda c: bool(background(c, chat)), timeout=TIMEOUT)
    finally:
        await bench.running.stop()  # the command ends with the host
    bench = await open_bench(tmp_path, data_dir=str(tmp_path / "data"))
    try:
        async with AhpClient.connect(bench.url) as client:
            await client.subscribe(chat, timeout=TIMEOUT)
            await client.wait_for(lambda c: not background(c, chat), timeout=TIMEOUT)
    finally:
        await bench.running.stop()


async def test_after_a_crash_the_lost_command_is_taken_off(tmp_path: Path) -> None:
    """kill -9 while a command runs in the background: the stored chat still lists it,
    and the next start takes it off (its terminal comes back exited)."""
    flag = tmp_path / "stop"
    script = tmp_path / "wait.sh"
    script.write_text(f'while [ ! -f "{flag}" ]; do sleep 0.05; done\n')
    config = tmp_path / "host.toml"
    config.write_text(
        f'[[agents]]\nname = "scripted"\ncommand = "{sys.executable}"\nargs = ["{SCRIPT}"]\n',
        encoding="utf-8",
    )
    daemon = Daemon(tmp_path / "data", "--config", str(config))
    try:
        async with AhpClient.connect(await daemon.start()) as client:
            chat = await open_chat(client, tmp_path)
            await turn_of(client, chat, f"/background sh {script}")
            await client.wait_for(lambda c: bool(background(c, chat)), timeout=TIMEOUT)
            await daemon.kill()
        async with AhpClient.connect(await daemon.start()) as client:
            state = await client.subscribe(chat, timeout=TIMEOUT)
            assert isinstance(state, ChatState)
            await client.wait_for(lambda c: not background(c, chat), timeout=TIMEOUT)
    finally:
        flag.write_text("done")  # the orphaned command ends
        await daemon.close()
