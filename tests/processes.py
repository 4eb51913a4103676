"""Processes as the tests see them in ``/proc``, and a daemon that tries to get away.

:data:`DAEMONIZE` (``tests/daemonize.sh``) starts a process that leaves its
session (``setsid``) and a grandchild whose parent has exited (a double
fork), both ignoring SIGHUP and SIGTERM: what a process group or session kill
misses. The terminal tests type it into a shell; the scripted ACP agent runs it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

#: ``sh DAEMONIZE DIR`` writes ``DIR/setsid.pid`` and ``DIR/double.pid``.
DAEMONIZE = Path(__file__).parent / "daemonize.sh"
TIMEOUT = 10.0


def alive(pid: int) -> bool:
    """Running (a zombie counts as gone: it has ended, its parent just has not reaped it)."""
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def parent_of(pid: int) -> int:
    stat = _stat(pid)
    assert stat is not None, f"no process {pid}"
    return int(stat[1])


def session_of(pid: int) -> int:
    stat = _stat(pid)
    assert stat is not None, f"no process {pid}"
    return int(stat[3])


async def daemon_pids(directory: Path) -> tuple[int, int]:
    """The pids :data:`DAEMONIZE` wrote to ``directory`` (waits for both files)."""
    files = (directory / "setsid.pid", directory / "double.pid")
    async with asyncio.timeout(TIMEOUT):
        while not all(f.exists() for f in files):  # noqa: ASYNC110 - files: nothing to await
            await asyncio.sleep(0.02)
    leader, grandchild = (int(f.read_text()) for f in files)
    return leader, grandchild


async def until_gone(*pids: int) -> None:
    """Wait (bounded) until none of ``pids`` runs."""
    async with asyncio.timeout(TIMEOUT):
        while any(alive(pid) for pid in pids):  # noqa: ASYNC110 - processes: nothing to await
            await asyncio.sleep(0.02)
