"""The data directory's lock: one host process at a time uses a data directory.

Layer: store (blocking file I/O, stdlib only; no database, no asyncio).

Two hosts on one SQLite data directory would each replay, rotate and fold the
other's tail files (``tail.py``) and commit over each other's rows. So the
host takes an exclusive ``flock`` on ``ahp-server.lock`` in the directory
before it opens, rotates or writes anything there (``App.start``), records
its pid in the file, and holds it until it stops (the kernel drops it when
the process dies, however it dies: a ``kill -9`` leaves no stale lock). A
second host finds it held and refuses with the holder's pid, having
touched nothing — it does not even write the lock file.

The file itself is never deleted: removing it while another process waits
to lock it would let two processes hold locks on two different files.
``ahp-server backup`` takes no lock: it only reads (SQLite's online backup).

:func:`not_writable` is the one wording of "this host cannot write there",
used here and by the SQLite store's start-up checks (``sqlite.py``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from ahp_server.store.base import StoreError

__all__ = ["LOCK_FILE", "DataDirLock", "not_writable"]

LOCK_FILE = "ahp-server.lock"


def not_writable(path: Path) -> StoreError:
    """``path`` cannot be written by this process: say so, with its owner and mode."""
    try:
        status = path.stat()
        owner = f" (owned by uid {status.st_uid}, mode {status.st_mode & 0o7777:o})"
    except OSError:
        owner = ""
    return StoreError(f"{path} is not writable by uid {os.geteuid()}{owner}")


def _holder(fd: int) -> str:
    """The pid the lock file names, as text (``unknown`` while the holder has not written it)."""
    with contextlib.suppress(OSError, ValueError):
        return str(int(os.pread(fd, 32, 0).decode("ascii").strip()))
    return "unknown"


class DataDirLock:
    """An exclusive lock on a data directory, held from :meth:`acquire` to :meth:`release`."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, directory: Path) -> DataDirLock:
        """Lock ``directory`` (created if missing) for this process, or raise :class:`StoreError`.

        Refuses, without writing anything, when another process holds it
        (naming its pid) or when this process cannot write the directory.
        """
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except PermissionError:
            raise not_writable(_first_existing(directory)) from None
        if not os.access(directory, os.W_OK | os.X_OK):
            raise not_writable(directory)
        path = directory / LOCK_FILE
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except PermissionError:
            raise not_writable(path) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise StoreError(
                f"{directory} is in use by another ahp-server (pid {holder}); "
                "one host per data directory: stop it, or use another --data-dir"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        except OSError:
            os.close(fd)  # (closing releases the lock)
            raise
        return cls(path, fd)

    def release(self) -> None:
        """Release the lock (idempotent). The file stays, naming nobody."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)


def _first_existing(path: Path) -> Path:
    """The nearest existing ancestor of ``path`` (where a ``mkdir -p`` was refused)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return path
