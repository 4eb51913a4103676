"""Commands run for agents: bounded output, killed with what they started, always reaped."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ahp_server.workspace.terminals import TerminalLimit, Terminals
from tests.processes import DAEMONIZE, alive, daemon_pids, parent_of, session_of, until_gone


async def test_output_exit_code_and_cwd(tmp_path: Path) -> None:
    terminals = Terminals()
    terminal = await terminals.create(
        "sh", ["-c", "pwd; echo err >&2; exit 3"], cwd=str(tmp_path), env={}, output_limit=None
    )
    status = await terminal.wait()
    assert status.exit_code == 3
    assert terminal.output() == f"{tmp_path}\nerr\n"
    assert not terminal.truncated
    await terminals.close()


async def test_output_is_a_bounded_ring_cut_at_a_character(tmp_path: Path) -> None:
    terminals = Terminals()
    terminal = await terminals.create(
        "sh",
        ["-c", "printf 'aaaa'; printf 'é%.0s' $(seq 100)"],
        cwd=str(tmp_path),
        env={},
        output_limit=51,
    )
    await terminal.wait()
    assert terminal.truncated
    text = terminal.output()
    assert set(text) == {"é"}  # the half character at the cut is dropped
    assert len(text.encode()) <= 51
    await terminals.close()


async def test_the_host_environment_does_not_leak(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AHP_SERVER_TOKEN", "do-not-leak")
    terminals = Terminals()
    terminal = await terminals.create(
        "sh",
        ["-c", "echo ${AHP_SERVER_TOKEN:-none} $ASKED"],
        cwd=str(tmp_path),
        env={"ASKED": "given"},
        output_limit=None,
    )
    await terminal.wait()
    assert terminal.output() == "none given\n"
    await terminals.close()


async def test_kill_reaches_the_commands_children_and_close_reaps(tmp_path: Path) -> None:
    terminals = Terminals()
    pid_file = tmp_path / "child.pid"
    terminal = await terminals.create(
        "sh",
        ["-c", f"sleep 600 & echo $! > {pid_file}; wait"],
        cwd=str(tmp_path),
        env={},
        output_limit=None,
    )
    async with asyncio.timeout(10):
        while not pid_file.exists() or not pid_file.read_text().strip():  # noqa: ASYNC110
            await asyncio.sleep(0.02)
    child = int(pid_file.read_text())
    assert alive(child)
    terminal.kill()
    status = await terminal.wait()
    assert status.signal == "SIGKILL"
    async with asyncio.timeout(10):
        while alive(child):  # noqa: ASYNC110 - a process: nothing to await
            await asyncio.sleep(0.02)
    await terminals.close()
    assert not alive(terminal.pid)


async def test_count_is_bounded_and_closed_sets_refuse(tmp_path: Path) -> None:
    terminals = Terminals(max_terminals=2)
    first = await terminals.create("sleep", ["600"], cwd=str(tmp_path), env={}, output_limit=None)
    await terminals.create("sleep", ["600"], cwd=str(tmp_path), env={}, output_limit=None)
    with pytest.raises(TerminalLimit, match="at most 2"):
        await terminals.create("true", [], cwd=str(tmp_path), env={}, output_limit=None)
    await terminals.release(first.id)
    assert terminals.get(first.id) is None
    assert not alive(first.pid)
    await terminals.close()
    assert len(terminals) == 0
    with pytest.raises(TerminalLimit, match="closing"):
        await terminals.create("true", [], cwd=str(tmp_path), env={}, output_limit=None)
    with pytest.raises(TerminalLimit, match="cannot run"):
        await Terminals().create(
            str(tmp_path / "nothing"), [], cwd=str(tmp_path), env={}, output_limit=None
        )


async def test_release_kills_what_left_the_commands_session_and_double_forked(
    tmp_path: Path,
) -> None:
    terminals = Terminals()
    terminal = await terminals.create(
        "sh", [str(DAEMONIZE), str(tmp_path)], cwd=str(tmp_path), env={}, output_limit=None
    )
    leader, grandchild = await daemon_pids(tmp_path)
    assert alive(leader)
    assert alive(grandchild)
    assert session_of(leader) == leader != terminal.pid  # the command leads its own session
    assert parent_of(grandchild) != leader
    await terminal.wait()  # the command itself exits at once, leaving the daemon running
    assert alive(leader)
    await terminals.release(terminal.id)
    await until_gone(leader, grandchild)
    await terminals.close()
