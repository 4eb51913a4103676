"""Load beside a test: a busy core, or a disk kept busy with fsyncs (issue 29).

A test that must hold on a loaded machine runs once idle and once with one of
these beside it. Each is a child process, killed and reaped when its block
ends, whatever the test did; each lets the test check that the load really
ran (a test under load that never loaded proves nothing).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

#: The fsync loop: overwrite the same 4 MiB of ``path`` and fsync it, again and
#: again, writing the count of fsyncs done into ``path.count`` after each.
_FSYNC_LOOP = """
import os, sys
path = sys.argv[1]
block = os.urandom(4 * 1024 * 1024)
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
counter = os.open(path + ".count", os.O_WRONLY | os.O_CREAT, 0o600)
done = 0
while True:
    os.pwrite(fd, block, 0)
    os.fsync(fd)
    done += 1
    os.pwrite(counter, b"%20d" % done, 0)
"""


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (``timeout`` passes it on to its child; SIGKILL would orphan it), then reap."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)


class FsyncLoop:
    """A child writing and fsyncing a file in ``directory`` without pause (same filesystem
    as what it slows down)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "fsync-loop.bin"
        self.process = subprocess.Popen(
            [sys.executable, "-c", _FSYNC_LOOP, str(self.path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )

    @property
    def fsyncs(self) -> int:
        """How many fsyncs it has completed so far."""
        try:
            return int(Path(f"{self.path}.count").read_bytes() or b"0")
        except FileNotFoundError:
            return 0

    def stop(self) -> None:
        _stop(self.process)
        for path in (self.path, Path(f"{self.path}.count")):
            path.unlink(missing_ok=True)


@contextlib.contextmanager
def fsync_loop(directory: Path) -> Iterator[FsyncLoop]:
    """An :class:`FsyncLoop` for the block; killed and reaped after it."""
    loop = FsyncLoop(directory)
    try:
        yield loop
    finally:
        loop.stop()


class BusyCore:
    """``timeout 600 yes > /dev/null``: one core kept busy (``timeout`` ends it even if
    the test process dies first)."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            ["timeout", "600", "yes"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
        )

    @property
    def cpu_seconds(self) -> float:
        """CPU time (user + system) ``timeout`` and ``yes`` have used so far (Linux ``/proc``)."""
        pid = self.process.pid
        children = Path(f"/proc/{pid}/task/{pid}/children")
        pids = [pid, *map(int, children.read_text().split())] if children.exists() else [pid]
        total = 0
        for one in pids:
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])  # utime, stime (after the name)
        return total / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        _stop(self.process)


@contextlib.contextmanager
def busy_core() -> Iterator[BusyCore]:
    """A :class:`BusyCore` for the block; stopped and reaped after it."""
    busy = BusyCore()
    try:
        yield busy
    finally:
        busy.stop()
