"""``workspace/pty.py`` with real processes on real pseudo-terminals (``/bin/sh``)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from ahp_server.workspace.pty import PtyError, PtyProcess, session_members
from tests.processes import alive

TIMEOUT = 10.0


class Shell:
    """A ``/bin/sh`` on a pty, its output collected, its exit awaited."""

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self.exit: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        self.outputs_after_exit = 0
        self.pty: PtyProcess | None = None

    def _output(self, text: str) -> None:
        if self.exit.done():
            self.outputs_after_exit += 1
        self.chunks.append(text)

    def _exited(self, code: int | None) -> None:
        assert not self.exit.done(), "on_exit called twice"
        self.exit.set_result(code)

    async def start(
        self, cwd: Path, *, env: dict[str, str] | None = None, cols: int = 80, rows: int = 24
    ) -> PtyProcess:
        self.pty = await PtyProcess.spawn(
            ["/bin/sh"],
            cwd=str(cwd),
            env=env if env is not None else {"PATH": os.environ["PATH"], "TERM": "xterm"},
            cols=cols,
            rows=rows,
            on_output=self._output,
            on_exit=self._exited,
        )
        return self.pty

    @property
    def text(self) -> str:
        return "".join(self.chunks)

    def type(self, text: str) -> None:
        assert self.pty is not None
        assert self.pty.write(text.encode())

    async def output(self, pattern: str) -> re.Match[str]:
        async with asyncio.timeout(TIMEOUT):
            while (match := re.search(pattern, self.text)) is None:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        return match

    async def exited(self) -> int | None:
        async with asyncio.timeout(TIMEOUT):
            return await self.exit


def real(path: Path) -> str:
    return str(path.resolve())


async def until(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(TIMEOUT):
        while not predicate():  # noqa: ASYNC110 - processes: nothing to await
            await asyncio.sleep(0.02)


async def test_output_input_cwd_size_and_exit_code(tmp_path: Path) -> None:
    shell = Shell()
    pty = await shell.start(tmp_path, cols=100, rows=40)
    shell.type("echo out-$((6*7)); pwd; stty size; tty; exit 3\n")
    assert await shell.exited() == 3
    assert "out-42\r\n" in shell.text
    assert real(tmp_path) in shell.text
    assert "40 100" in shell.text
    assert re.search(r"/dev/(pts/\d+|ttys\d+)", shell.text)
    assert shell.outputs_after_exit == 0  # on_exit comes after the last output
    assert pty.finished
    assert not pty.running
    assert not pty.write(b"echo nobody\n")  # nothing takes input any more


async def test_a_resize_reaches_the_program(tmp_path: Path) -> None:
    shell = Shell()
    pty = await shell.start(tmp_path)
    pty.resize(132, 43)
    shell.type("stty size\n")
    await shell.output(r"43 132")
    shell.type("exit\n")
    assert await shell.exited() == 0


@pytest.mark.parametrize("host_ignores_sigint", [False, True])
async def test_the_pty_is_the_controlling_terminal_so_ctrl_c_interrupts(
    tmp_path: Path, host_ignores_sigint: bool
) -> None:
    # A host started with SIGINT ignored (``nohup … &`` in a script) must still
    # give its shells a working Ctrl-C: ignored signals survive fork and exec.
    shell = Shell()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if host_ignores_sigint else None
    try:
        await shell.start(tmp_path)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    # The shell must be running (not still starting: a ^C then ends the
    # start-up) and sleep must have begun before the ^C.
    shell.type("echo sta''rted-$((0+1)); sleep 30; echo sl''ept\n")
    await shell.output(r"started-1")
    await asyncio.sleep(0.2)
    shell.type("\x03")  # the line discipline signals the foreground group
    shell.type("echo after-$((1+1))\n")
    await shell.output(r"after-2")
    assert "slept" not in shell.text
    shell.type("exit 0\n")
    assert await shell.exited() == 0


async def test_a_character_split_across_reads_comes_out_whole(tmp_path: Path) -> None:
    shell = Shell()
    await shell.start(tmp_path)
    shell.type("printf '\\342\\202'; sleep 0.3; printf '\\254 end-%s\\n' $((2+2)); exit\n")
    assert await shell.exited() == 0
    assert "€ end-4" in shell.text
    assert "\ufffd" not in shell.text
    # The two writes were two reads: the first two bytes waited in the decoder.
    assert any(chunk.startswith("€") for chunk in shell.chunks)


async def test_the_environment_is_exactly_what_is_passed(tmp_path: Path) -> None:
    os.environ["AHP_PTY_TEST_SECRET"] = "do-not-leak"
    try:
        shell = Shell()
        await shell.start(tmp_path, env={"PATH": os.environ["PATH"], "ONLY": "this"})
        shell.type("env; exit\n")
        assert await shell.exited() == 0
    finally:
        del os.environ["AHP_PTY_TEST_SECRET"]
    assert "ONLY=this" in shell.text
    assert "do-not-leak" not in shell.text


async def test_paused_reading_stops_the_program_and_bounds_memory(tmp_path: Path) -> None:
    shell = Shell()
    pty = await shell.start(tmp_path)
    shell.type("echo ready-$((1+1))\n")
    await shell.output(r"ready-2")
    pty.pause_reading()
    shell.type("yes | head -c 3000000; echo; echo done-$((3+3))\n")
    await asyncio.sleep(0.5)
    held = len(shell.text)
    await asyncio.sleep(0.3)
    assert len(shell.text) == held  # nothing read while paused…
    assert pty.running  # …and the program waits on its writes
    pty.resume_reading()
    await shell.output(r"done-6")
    assert shell.text.count("y\r\n") >= 3_000_000 // 2 - 1
    shell.type("exit\n")
    assert await shell.exited() == 0


async def test_terminate_ends_the_session_even_when_signals_are_ignored(tmp_path: Path) -> None:
    shell = Shell()
    pty = await shell.start(tmp_path)
    shell.type("trap '' HUP TERM; sleep 300 & echo job-$!; sleep 400\n")
    job = int((await shell.output(r"job-(\d+)")).group(1))
    assert alive(job)
    assert job in session_members(pty.pid)
    async with asyncio.timeout(TIMEOUT):
        code = await pty.terminate(0.3)
    assert code is None  # killed by a signal: no exit code
    assert await shell.exited() is None
    assert not alive(pty.pid)
    await until(lambda: not alive(job))


async def test_jobs_left_behind_at_exit_are_ended(tmp_path: Path) -> None:
    shell = Shell()
    pty = await shell.start(tmp_path)
    shell.type("sleep 300 & echo job-$!; exit 5\n")
    assert await shell.exited() == 5
    job = int((await shell.output(r"job-(\d+)")).group(1))
    await until(lambda: not alive(job))
    assert session_members(pty.pid) == []


async def test_a_missing_program_ends_with_127_and_says_why(tmp_path: Path) -> None:
    chunks: list[str] = []
    done: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
    await PtyProcess.spawn(
        ["/no/such/program"],
        cwd=str(tmp_path),
        env={},
        cols=80,
        rows=24,
        on_output=chunks.append,
        on_exit=done.set_result,
    )
    async with asyncio.timeout(TIMEOUT):
        assert await done == 127
    assert "cannot run /no/such/program" in "".join(chunks)
    with pytest.raises(PtyError):
        await PtyProcess.spawn(
            ["/bin/sh"],
            cwd=str(tmp_path / "missing"),
            env={},
            cols=80,
            rows=24,
            on_output=chunks.append,
            on_exit=done.set_result,
        )
