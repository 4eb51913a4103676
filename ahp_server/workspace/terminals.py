"""Commands an agent runs through the host (ACP ``terminal/*``): spawned, bounded, always reaped.

Layer: workspace (asyncio subprocesses; no protocol, no host).

Each command runs in its own process group (``start_new_session``) as the
root of a process tree (``workspace/reaper.py``), so a kill reaches everything
it started, in its group or not (``setsid``, double forks). Its output
(stdout and stderr, merged) is kept in a ring of at most ``output_limit``
bytes: older bytes are dropped from the start and the output reports
``truncated`` (ACP ``terminal/output``). A :class:`Terminals` set is bounded
in count and is closed — every process killed and waited for — when its owner
ends (turn cancelled, chat or session disposed, host stopping).

The environment is *not* the host's: a command gets a small inherited set
(``PATH``, ``HOME``, locale, ``TERM``…) plus what the agent asked for, so the
host's own secrets (its token, API keys of other agents) never leak into it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import structlog

from ahp_server.workspace.reaper import Tree

__all__ = ["INHERITED_ENV", "Terminal", "TerminalExit", "TerminalLimit", "Terminals"]

log = structlog.get_logger(__name__)

#: Host environment variables a command inherits (others are not passed on).
INHERITED_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "TERM", "TMPDIR")
#: Ceiling of any terminal's output ring, whatever the agent asks for.
MAX_OUTPUT_BYTES = 1024 * 1024
_READ_CHUNK = 64 * 1024


class TerminalLimit(Exception):
    """Too many terminals, or the command cannot be started."""


@dataclass(frozen=True, slots=True)
class TerminalExit:
    exit_code: int | None
    signal: str | None


class Terminal:
    """One running (or finished) command and the tail of its output.

    It implements ``agents.base.AgentTerminal``: the host may :meth:`watch`
    it to show the command as an AHP terminal channel.
    """

    def __init__(
        self,
        terminal_id: str,
        process: asyncio.subprocess.Process,
        limit: int,
        *,
        command: str = "",
        cwd: str = "",
        tree: Tree | None = None,
    ) -> None:
        self.id = terminal_id
        self.command = command
        self.cwd = cwd
        self._process = process
        self._tree = tree
        self._limit = limit
        self._buffer = bytearray()
        self.truncated = False
        self._watchers: list[Callable[[bytes], None]] = []
        self._exit_watchers: list[asyncio.Task[None]] = []
        self._reader = asyncio.get_running_loop().create_task(
            self._read(), name=f"terminal {terminal_id}"
        )

    @property
    def pid(self) -> int:
        return self._process.pid

    async def _read(self) -> None:
        stream = self._process.stdout
        assert stream is not None
        while chunk := await stream.read(_READ_CHUNK):
            self._buffer += chunk
            for watcher in self._watchers:
                watcher(chunk)
            excess = len(self._buffer) - self._limit
            if excess > 0:
                del self._buffer[:excess]
                self.truncated = True

    def output(self) -> str:
        """The kept output as text (a character cut by truncation is dropped, not mangled)."""
        data = bytes(self._buffer)
        if self.truncated:
            # Drop UTF-8 continuation bytes left at the start by the cut.
            start = 0
            while start < len(data) and start < 4 and (data[start] & 0xC0) == 0x80:
                start += 1
            data = data[start:]
        return data.decode("utf-8", errors="replace")

    def watch(
        self, on_output: Callable[[bytes], None], on_exit: Callable[[int | None], None]
    ) -> None:
        """Call ``on_output`` with the output kept so far and each chunk read after it, then
        ``on_exit`` once with the exit code (``None``: ended by a signal) after the last chunk.

        Both are called on the event loop and must not block (``AgentTerminal.watch``).
        """
        if self._buffer:
            on_output(bytes(self._buffer))
        self._watchers.append(on_output)

        async def report() -> None:
            status = await self.wait()
            on_exit(status.exit_code)

        self._exit_watchers.append(
            asyncio.get_running_loop().create_task(report(), name=f"terminal {self.id} exit")
        )

    def exit_status(self) -> TerminalExit | None:
        code = self._process.returncode
        if code is None:
            return None
        if code < 0:
            return TerminalExit(None, signal.Signals(-code).name)
        return TerminalExit(code, None)

    async def wait(self) -> TerminalExit:
        """Wait for the command to exit and its output to be read to the end."""
        await self._process.wait()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(self._reader)
        status = self.exit_status()
        assert status is not None
        return status

    def kill(self) -> None:
        """SIGKILL the command and everything it started (its tree; its process group)."""
        if self._tree is not None:
            self._tree.end()  # also what it left running after it exited
        if self._process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, signal.SIGKILL)

    async def close(self) -> None:
        """Kill (if still running) and reap; the output stays readable."""
        self.kill()
        await self._process.wait()
        if self._tree is not None:
            await self._tree.settle()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
        if self._exit_watchers:  # their exits are reported before close returns
            await asyncio.gather(*self._exit_watchers, return_exceptions=True)


def _runnable(command: str, path: str, cwd: str) -> bool:
    """Whether ``command`` names an executable (on ``path``, or relative to ``cwd``)."""
    if "/" in command:
        target = os.path.join(cwd, command)
        return os.path.isfile(target) and os.access(target, os.X_OK)
    return shutil.which(command, path=path) is not None


class Terminals:
    """The terminals of one owner (an agent session), bounded in count."""

    _ids = itertools.count(1)

    def __init__(self, *, max_terminals: int = 16) -> None:
        self._max = max_terminals
        self._terminals: dict[str, Terminal] = {}
        self.closed = False

    def __len__(self) -> int:
        return len(self._terminals)

    def get(self, terminal_id: str) -> Terminal | None:
        return self._terminals.get(terminal_id)

    async def create(
        self,
        command: str,
        args: list[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        output_limit: int | None,
    ) -> Terminal:
        if self.closed:
            raise TerminalLimit("the session is closing: no new terminal")
        if len(self._terminals) >= self._max:
            raise TerminalLimit(f"at most {self._max} terminals at once: release one first")
        environment = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
        environment.update(env)
        limit = MAX_OUTPUT_BYTES if output_limit is None else min(output_limit, MAX_OUTPUT_BYTES)
        if not _runnable(command, environment.get("PATH", os.defpath), cwd):
            raise TerminalLimit(f"cannot run {command!r}: no such program")
        tree = Tree([command, *args])
        try:
            process = await asyncio.create_subprocess_exec(
                *tree.argv,
                cwd=cwd,
                env=environment,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as error:
            raise TerminalLimit(f"cannot run {command!r}: {error.strerror or error}") from None
        tree.started(process.pid)
        terminal = Terminal(
            f"term-{next(self._ids)}", process, max(0, limit), command=command, cwd=cwd, tree=tree
        )
        self._terminals[terminal.id] = terminal
        log.info("terminal started", terminal=terminal.id, command=command, cwd=cwd)
        return terminal

    async def release(self, terminal_id: str) -> None:
        """Kill the command if it still runs and forget it (ACP ``terminal/release``)."""
        terminal = self._terminals.pop(terminal_id, None)
        if terminal is not None:
            await terminal.close()

    def kill_all(self) -> None:
        """Kill every running command now (a cancelled turn); they stay until released."""
        for terminal in self._terminals.values():
            terminal.kill()

    async def close(self) -> None:
        """Kill and reap every terminal; no new ones afterwards."""
        self.closed = True
        terminals = list(self._terminals.values())
        self._terminals.clear()
        await asyncio.gather(*(t.close() for t in terminals))
