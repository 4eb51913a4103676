"""A process on a pseudo-terminal: spawned, read without blocking, resized, always reaped.

Layer: workspace (asyncio and the OS; no protocol, no host). The host's
terminal channels (``host/channels/terminals.py``) run each shell through one
:class:`PtyProcess`; this module knows nothing of channels or actions.

How a process is started (:meth:`PtyProcess.spawn`):

* ``os.openpty()`` gives a master/slave pair; the window size is set on it
  before the process starts (``TIOCSWINSZ``).
* The child gets the slave as stdin, stdout and stderr, starts a new session
  (``start_new_session``: its own process group, so a kill reaches what it
  started) and makes the slave its *controlling terminal* (``TIOCSCTTY``) —
  without one, Ctrl-C (``\\x03``) would signal nothing and shells would run
  without job control. ``subprocess`` cannot do that last step itself and a
  ``preexec_fn`` is unsafe in a process with threads (the store writes from
  one), so the child first runs a few lines of Python that take the terminal
  and ``exec`` the command: the command then *is* that process (same pid,
  reaped by asyncio like any subprocess). Those lines are the root shim of a
  process tree (``workspace/reaper.py``), which also makes the command a child
  subreaper: nothing it starts can get away from the terminal.
* The environment is exactly what the caller passes (the host passes a small
  inherited set, never its secrets: ``workspace/terminals.py`` ``INHERITED_ENV``).

Reading: the master is non-blocking and read with ``loop.add_reader``, at
most :data:`READ_CHUNK` bytes per loop iteration. Bytes are decoded as UTF-8
*incrementally* (``errors="replace"``), so a character split across two reads
comes out whole. The owner can :meth:`~PtyProcess.pause_reading` (its
consumer is full): then nothing is read, the kernel's pty buffer fills, and
the process blocks on its next write — backpressure all the way to the
program, memory bounded.

Exit: once the process has exited, the output still in the pty is read to
the end (EOF/``EIO``) — or for at most :data:`LINGER` seconds when a
background process it left keeps the terminal open — then ``on_exit`` is
called exactly once, after the last ``on_output``. Everything the process
started that still runs (background jobs, daemons that left the session with
``setsid`` or a double fork) is killed then (``reaper.Tree.end``): a
terminal's processes end with it. :meth:`~PtyProcess.terminate` ends a running
process: ``SIGHUP`` (what a terminal closing sends; interactive shells ignore
``SIGTERM``), ``SIGTERM`` and ``SIGCONT`` to its process group, the terminal's
foreground group, every process of its session (a shell with job control
gives each job a group of its own; on Linux the session's members are found in
``/proc``) and every process of its tree, ``SIGKILL`` to the whole tree after a
grace period (or as soon as the process itself has ended); it waits until the
process and everything killed with it are reaped.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import fcntl
import os
import signal
import struct
import termios
from collections.abc import Callable, Mapping, Sequence

import structlog

from ahp_server.workspace.reaper import Tree

__all__ = ["LINGER", "READ_CHUNK", "PtyError", "PtyProcess", "session_members"]

log = structlog.get_logger(__name__)

#: Bytes read from the master per loop iteration.
READ_CHUNK = 64 * 1024
#: How long, after the process exited, output is still read while something
#: it left behind keeps the terminal open.
LINGER = 0.25
#: Input queued for a process that does not read it (beyond: refused).
MAX_INPUT_BYTES = 1024 * 1024
#: Output read at exit, after the process ended (a leftover may still write).
_FINAL_DRAIN = 256 * 1024


class PtyError(Exception):
    """The process cannot be started (a message safe to show)."""


def session_members(session: int) -> list[int]:
    """The processes of session ``session`` (Linux ``/proc``; elsewhere none are found)."""
    members: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return members
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                # pid (comm) state ppid pgrp session …; comm may hold spaces and parentheses
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if len(fields) > 3 and fields[3] == str(session).encode() and fields[0] != b"Z":
            members.append(int(entry))
    return members


def _winsize(cols: int, rows: int) -> bytes:
    return struct.pack("HHHH", rows, cols, 0, 0)


class PtyProcess:
    """One process on its own pseudo-terminal (see the module docstring)."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        master: int,
        on_output: Callable[[str], None],
        on_exit: Callable[[int | None], None],
        tree: Tree,
    ) -> None:
        self._process = process
        self._tree = tree
        self._fd: int | None = master
        self._on_output = on_output
        self._on_exit = on_exit
        self._loop = asyncio.get_running_loop()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._out = bytearray()
        self._writing = False
        self._reading = False
        self._paused = False
        self._eof = False
        self._lingered = False
        self._linger: asyncio.TimerHandle | None = None
        self._done = asyncio.Event()
        self.exit_code: int | None = None
        #: The process has been reaped and ``on_exit`` called.
        self.finished = False
        self._resume_reading()
        self._waiter = self._loop.create_task(self._wait(), name=f"pty {process.pid}")

    # -- starting ------------------------------------------------------------------------

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        cols: int,
        rows: int,
        on_output: Callable[[str], None],
        on_exit: Callable[[int | None], None],
    ) -> PtyProcess:
        """Start ``argv`` on a new pty of ``cols`` x ``rows`` in ``cwd`` with exactly ``env``.

        ``on_output`` gets the decoded output as it is read; ``on_exit`` the
        exit code (``None``: ended by a signal) once, after the last output.
        """
        if not argv:
            raise PtyError("no command to run")
        master, slave = os.openpty()  # both non-inheritable
        try:
            fcntl.ioctl(master, termios.TIOCSWINSZ, _winsize(cols, rows))
            os.set_blocking(master, False)
            tree = Tree(argv, tty=True)
            process = await asyncio.create_subprocess_exec(
                *tree.argv,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                cwd=cwd,
                env=dict(env),
                start_new_session=True,
            )
        except OSError as error:
            os.close(master)
            raise PtyError(f"cannot start {argv[0]!r}: {error.strerror or error}") from None
        finally:
            os.close(slave)  # the child has its own copies
        tree.started(process.pid)
        return cls(process, master, on_output, on_exit, tree)

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def running(self) -> bool:
        return self._process.returncode is None

    # -- output ----------------------------------------------------------------------------

    def pause_reading(self) -> None:
        """Read nothing until :meth:`resume_reading` (the consumer is full)."""
        self._paused = True
        if self._reading and self._fd is not None:
            self._loop.remove_reader(self._fd)
            self._reading = False

    def resume_reading(self) -> None:
        self._paused = False
        self._resume_reading()

    def _resume_reading(self) -> None:
        if not self._reading and not self._paused and not self._eof and self._fd is not None:
            self._loop.add_reader(self._fd, self._readable)
            self._reading = True

    def _readable(self) -> None:
        data = self._read(READ_CHUNK)
        if data is None:
            return
        if not data:
            self._at_eof()
            return
        if self._linger is not None:  # still talking after the exit: give it more time
            self._linger.cancel()
            self._linger = self._loop.call_later(LINGER, self._linger_over)
        text = self._decoder.decode(data)
        if text:
            self._on_output(text)

    def _read(self, size: int) -> bytes | None:
        """Up to ``size`` bytes; ``b""`` at EOF (Linux: ``EIO`` once every slave fd is closed);
        ``None`` when nothing is there now."""
        if self._fd is None:
            return b""
        try:
            return os.read(self._fd, size)
        except BlockingIOError:
            return None
        except OSError:
            return b""

    def _at_eof(self) -> None:
        self._eof = True
        if self._reading and self._fd is not None:
            self._loop.remove_reader(self._fd)
            self._reading = False
        self._maybe_finish()

    # -- input -----------------------------------------------------------------------------

    def can_write(self, size: int) -> bool:
        """Whether ``size`` more bytes of input would be taken now."""
        return (
            not self.finished and self._fd is not None and len(self._out) + size <= MAX_INPUT_BYTES
        )

    def write(self, data: bytes) -> bool:
        """Queue input for the process (written as it reads it); False if refused."""
        if not self.can_write(len(data)):
            return False
        assert self._fd is not None
        if not self._out:
            try:
                written = os.write(self._fd, data)
            except BlockingIOError:
                written = 0
            except OSError:
                return False
            data = data[written:]
        if data:
            self._out += data
            if not self._writing:
                self._loop.add_writer(self._fd, self._writable)
                self._writing = True
        return True

    def _writable(self) -> None:
        if self._fd is None:
            return
        try:
            written = os.write(self._fd, self._out)
        except BlockingIOError:
            return
        except OSError:
            written = len(self._out)  # the other side is gone: drop the rest
        del self._out[:written]
        if not self._out:
            self._loop.remove_writer(self._fd)
            self._writing = False

    def echoing(self) -> bool:
        """Whether the terminal echoes input now (``ECHO`` in its local modes; Linux reads
        the program's side through the master). False when that cannot be told."""
        if self._fd is None:
            return False
        try:
            return bool(termios.tcgetattr(self._fd)[3] & termios.ECHO)
        except (OSError, termios.error):
            return False

    def resize(self, cols: int, rows: int) -> None:
        """Set the window size (the kernel sends ``SIGWINCH`` to the foreground group)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            fcntl.ioctl(self._fd, termios.TIOCSWINSZ, _winsize(cols, rows))

    # -- exit ------------------------------------------------------------------------------

    async def _wait(self) -> None:
        await self._process.wait()
        if not self._eof and not self.finished:
            self._linger = self._loop.call_later(LINGER, self._linger_over)
        self._maybe_finish()
        await self._done.wait()
        await self._tree.settle()  # what the tree's end killed is reaped

    def _linger_over(self) -> None:
        self._linger = None
        self._lingered = True
        self._maybe_finish()

    def _maybe_finish(self) -> None:
        if self.finished or self._process.returncode is None:
            return
        if not (self._eof or self._lingered):
            return
        self.finished = True
        code = self._process.returncode
        self.exit_code = code if code >= 0 else None  # negative: ended by a signal
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        # What is still in the pty (read even while paused: bounded).
        drained = bytearray()
        while not self._eof and len(drained) < _FINAL_DRAIN:
            data = self._read(READ_CHUNK)
            if not data:
                break
            drained += data
        text = self._decoder.decode(bytes(drained), final=True)
        self._close_fd()
        self._tree.end()  # whatever it left behind, in its session or not
        if text:
            self._on_output(text)
        self._on_exit(self.exit_code)
        self._done.set()

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        if self._reading:
            self._loop.remove_reader(fd)
            self._reading = False
        if self._writing:
            self._loop.remove_writer(fd)
            self._writing = False
        self._out.clear()
        os.close(fd)  # a leftover holding the slave now gets a hangup

    def _signal_all(self, signum: int) -> None:
        """Signal everything the terminal runs: its process group, its foreground group
        (a job the shell started), every other process of its session, and every
        process of its tree (``setsid`` or not)."""
        self._tree.signal(signum)  # first: its reading of the tree must see the shell alive
        leader = self._process.pid
        groups = {leader}
        if self._fd is not None:
            with contextlib.suppress(OSError):
                groups.add(os.tcgetpgrp(self._fd))
        for group in groups:
            if group > 0:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(group, signum)
        for pid in session_members(leader):  # background jobs have groups of their own
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)

    async def wait(self) -> int | None:
        """Wait until the process is reaped and ``on_exit`` was called; its exit code."""
        await self._done.wait()
        return self.exit_code

    async def terminate(self, grace: float) -> int | None:
        """End the process and its tree (SIGHUP + SIGTERM, SIGKILL after ``grace`` s or once
        the process has ended), reap them, report it."""
        if self._process.returncode is None:
            for signum in (signal.SIGHUP, signal.SIGTERM, signal.SIGCONT):
                self._signal_all(signum)
            try:
                async with asyncio.timeout(grace):
                    await self._process.wait()
            except TimeoutError:
                log.info("pty process ignored SIGHUP and SIGTERM: killed", pid=self.pid)
                self._signal_all(signal.SIGKILL)
                await self._process.wait()
        self._lingered = True  # nothing more is waited for
        self._maybe_finish()
        await self._waiter
        return await self.wait()
