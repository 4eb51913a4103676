"""Process trees that end whole: everything a process the host started also started.

Layer: workspace (the OS; no protocol, no host). Every process the host
starts — a terminal's shell (``workspace/pty.py``), an agent's command
(``workspace/terminals.py``), an ACP agent (``agents/acp.py``) — is the *root*
of a :class:`Tree`: started with :attr:`Tree.argv`, ended with :meth:`Tree.end`.

Why process groups and sessions are not enough: a program can leave both
(``setsid``, a daemon's double fork), and its parent's death hands it to
``init``, out of the host's reach. So (Linux; elsewhere only the groups and
sessions the callers signal are reached):

* **Every root is a child subreaper.** The root's command line runs a few
  lines of Python first (:data:`SHIM`) that set ``PR_SET_CHILD_SUBREAPER``
  (kept across ``exec``) and then ``exec`` the program: the program itself is
  the root (same pid, reaped by asyncio). While a root runs, a descendant
  whose parent dies is re-parented to the root, not to ``init``, so the
  root's tree — read from ``/proc/<pid>/task/*/children`` — holds every
  process it started, ``setsid`` and double forks included.
* **The host is a child subreaper too** (from the first :class:`Tree`): what
  a root leaves behind when it dies comes to the host. Such an *orphan* is
  told from the host's other children (asyncio's, a test's in the same
  process) and from other trees' orphans by :data:`MARK`, which the shim puts
  in the program's environment (``<host pid>.<tree number>``) and every
  descendant inherits; a process once seen in a tree (:meth:`Tree.note`) is
  known by its pid and start time as well.
* **Ending** (:meth:`Tree.end`): the root's tree and the tree of each of its
  orphans are stopped (``SIGSTOP``: nothing stopped can fork) and read again,
  until a reading finds nothing new (at most :data:`MAX_ROUNDS`), then all are
  ``SIGKILL``\\ ed together. The root stays asyncio's to reap; every other
  process killed that becomes the host's zombie is reaped here by its own pid
  (``waitpid(pid, WNOHANG)``, never ``waitpid(-1)``, which would take the exit
  status of a child asyncio waits for). :meth:`Tree.settle` waits (bounded)
  until all of them are gone.

Limits: an orphan that cleared its environment and was never seen in its
tree is not found, nor is one that had already ended when its root died
without the tree having been read (it stays the host's zombie); a process
that made itself another user's (``setuid``) cannot be signalled.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import itertools
import os
import signal
import sys
from collections.abc import Sequence

import structlog

__all__ = ["MARK", "SHIM", "Tree", "descendants", "reap"]

log = structlog.get_logger(__name__)

#: The environment variable the shim sets to the tree's mark: how an orphan
#: re-parented to the host is known to be a given tree's.
MARK = "AHP_SERVER_TREE"
#: Readings of the trees while stopping them, at most (a fork bomb is stopped
#: a generation per reading).
MAX_ROUNDS = 256
#: Seconds :meth:`Tree.settle` waits for what was killed to be gone.
SETTLE = 5.0
_PR_SET_CHILD_SUBREAPER = 36

#: Runs before the program: become a child subreaper (kept across exec), give
#: every signal its default disposition and an empty mask (an ignored signal
#: survives exec: Python itself ignores SIGPIPE, a host started by ``nohup``
#: ignores SIGHUP), mark the environment (argv[2]), take the terminal (stdin)
#: as controlling terminal when asked to (argv[1] == "tty"), then become the
#: program (argv[3:]).
SHIM = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    f"    ctypes.CDLL(None, use_errno=True).prctl({_PR_SET_CHILD_SUBREAPER}, 1, 0, 0, 0)\n"
    "except (OSError, AttributeError):\n"
    "    pass\n"
    "for number in range(1, signal.NSIG):\n"
    "    try:\n"
    "        signal.signal(number, signal.SIG_DFL)\n"
    "    except (OSError, ValueError):\n"
    "        pass\n"
    "signal.pthread_sigmask(signal.SIG_SETMASK, [])\n"
    f"os.environ[{MARK!r}] = sys.argv[2]\n"
    "if sys.argv[1] == 'tty':\n"
    "    import fcntl, termios\n"
    "    try:\n"
    "        fcntl.ioctl(0, termios.TIOCSCTTY, 0)\n"
    "    except OSError:\n"
    "        pass\n"
    "try:\n"
    "    os.execvp(sys.argv[3], sys.argv[3:])\n"
    "except OSError as error:\n"
    "    sys.stderr.write(f'cannot run {sys.argv[3]}: {error.strerror}\\r\\n')\n"
    "    sys.exit(127)\n"
)


_adopted = False
_numbers = itertools.count(1)
#: Processes killed here, by pid, with their start time, until they are gone.
_doomed: dict[int, int] = {}
#: Processes seen in a tree (pid → start time and the tree's mark), so one that
#: cleared its environment is still known once re-parented to the host.
_seen: dict[int, tuple[int, str]] = {}
_MAX_SEEN = 65_536


def _adopt() -> None:
    """Make this process a child subreaper (once; Linux only)."""
    global _adopted
    if _adopted:
        return
    _adopted = True
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            log.warning("cannot become a child subreaper", errno=ctypes.get_errno())
    except (OSError, AttributeError):
        log.warning("cannot become a child subreaper")


def _stat(pid: int) -> tuple[str, int, int] | None:
    """A process's state, parent and start time; ``None`` when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        # state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
        # utime stime cutime cstime priority nice num_threads itrealvalue starttime
        return fields[0].decode(), int(fields[1]), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as children:
                found.extend(int(child) for child in children.read().split())
        except (OSError, ValueError):
            continue
    return found


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (zombies included)."""
    found: list[int] = []
    queue = _children(pid)
    known: set[int] = set()
    while queue:
        child = queue.pop()
        if child in known:
            continue
        known.add(child)
        found.append(child)
        queue.extend(_children(child))
    return found


def _mark_of(pid: int) -> str | None:
    """The :data:`MARK` in ``pid``'s environment (as it was exec'd), if any."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            entries = environ.read().split(b"\0")
    except OSError:
        return None
    prefix = f"{MARK}=".encode()
    for entry in entries:
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode("ascii", "replace")
    return None


class Tree:
    """One root process and everything it starts (see the module docstring).

    Start the root with :attr:`argv` (in a new session), then call
    :meth:`started` with its pid; :meth:`end` it when it must go.
    """

    def __init__(self, argv: Sequence[str], *, tty: bool = False) -> None:
        """``tty``: the program's stdin is a terminal it takes as its controlling
        terminal. A program that cannot be run makes the root exit with 127 after
        a line on stderr (``cannot run …``)."""
        _adopt()
        #: This tree's :data:`MARK`.
        self.mark = f"{os.getpid()}.{next(_numbers)}"
        #: The command line that runs the program as this tree's root.
        self.argv = [sys.executable, "-I", "-S", "-c", SHIM, "tty" if tty else "-", self.mark]
        self.argv += argv
        self._pid: int | None = None
        self._started = -1
        #: What :meth:`end` killed besides the root (pid → start time).
        self._killed: dict[int, int] = {}

    def started(self, pid: int) -> None:
        """The root runs as ``pid`` (asyncio's child: reaped there, never here)."""
        stat = _stat(pid)
        self._pid = pid
        self._started = -1 if stat is None else stat[2]

    def _root(self) -> int | None:
        """The root's pid while it is still that process (running or not yet reaped)."""
        pid = self._pid
        if pid is None:
            return None
        stat = _stat(pid)
        return pid if stat is not None and stat[2] == self._started else None

    def _orphans(self) -> list[int]:
        """The host's children that are this tree's (re-parented to the host)."""
        found: list[int] = []
        for pid in _children(os.getpid()):
            stat = _stat(pid)
            if stat is None or pid == self._root():
                continue
            seen = _seen.get(pid)
            if (seen is not None and seen == (stat[2], self.mark)) or _mark_of(pid) == self.mark:
                found.append(pid)
        return found

    def members(self) -> list[int]:
        """The root (while it is that process), everything below it and this tree's
        orphans with everything below them; remembered (:data:`_seen`)."""
        root = self._root()
        found = [] if root is None else [root, *descendants(root)]
        for orphan in self._orphans():
            found.append(orphan)
            found.extend(descendants(orphan))
        if len(_seen) > _MAX_SEEN:
            _seen.clear()
        for pid in found:
            stat = _stat(pid)
            if stat is not None and pid != root:
                _seen[pid] = (stat[2], self.mark)
        return found

    def signal(self, signum: int) -> None:
        """Send ``signum`` to every member (:meth:`members`)."""
        for pid in self.members():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)

    def end(self) -> int:
        """SIGKILL every member, all stopped first; how many there were.

        Synchronous and bounded. The root is left to asyncio to reap; the
        others are reaped as they become the host's zombies (:func:`reap`,
        :meth:`settle`).
        """
        root = self._root()
        stopped: dict[int, int] = {}
        for _ in range(MAX_ROUNDS):
            new = False
            for pid in self.members():
                stat = _stat(pid)
                if pid in stopped or stat is None:
                    continue
                stopped[pid] = stat[2]
                new = True
                if stat[0] != "Z":
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGSTOP)
            if not new:
                break
        else:
            log.warning("process tree still growing after stopping it", rounds=MAX_ROUNDS)
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for pid, started in stopped.items():
            if pid != root:
                _doomed[pid] = started
                self._killed[pid] = started
        reap()
        return len(stopped)

    async def settle(self) -> None:
        """Wait until everything :meth:`end` killed is gone (reaped), at most
        :data:`SETTLE` seconds (then logged: a process in uninterruptible sleep dies
        when it wakes, and is reaped by a later :func:`reap`)."""
        delay = 0.005
        try:
            async with asyncio.timeout(SETTLE):
                while True:
                    reap()
                    killed = self._killed
                    for pid in [p for p in killed if _doomed.get(p) != killed[p]]:
                        del killed[pid]
                    if not killed:
                        return
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 0.05)
        except TimeoutError:
            log.warning("killed processes not gone yet", left=sorted(self._killed))

    async def ended(self) -> None:
        """:meth:`end`, then :meth:`settle`."""
        self.end()
        await self.settle()


def reap() -> int:
    """Reap what :meth:`Tree.end` killed that is now the host's zombie (of every
    tree); how many are still to go."""
    me = os.getpid()
    for pid, started in list(_doomed.items()):
        stat = _stat(pid)
        if stat is not None and stat[2] == started and stat[1] == me and stat[0] == "Z":
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            stat = _stat(pid)
        if stat is None or stat[2] != started:  # gone: reaped by its parent, or here
            del _doomed[pid]
            _seen.pop(pid, None)
    return len(_doomed)
