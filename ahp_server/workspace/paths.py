"""Path confinement: a path an agent or a client names must stay inside the working directories.

Layer: workspace (below agents and host; no asyncio). The one place that
decides whether a path is inside a chat's (or a session's) working
directories — the ACP bridge's ``fs/*`` and ``terminal/create`` use it, and so
will the resource commands.

The rule (docs/agents.md, "What the host serves to the agent"):

* the path must be absolute (ACP requires it; a relative path is refused, not
  guessed at);
* it is resolved the way the operating system would open it — ``..`` folded,
  every symbolic link followed, including one in the last component — and the
  result must lie inside one of the roots, themselves resolved the same way;
* a path that exists must be a regular file (or, where asked, a directory):
  devices, FIFOs and sockets are refused, so a read can never block on
  ``/dev/zero`` or a named pipe.

Anything else raises :class:`PathRefused` with a message safe to show.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

__all__ = ["PathRefused", "confine", "confine_directory"]


class PathRefused(Exception):
    """A path outside the working directories, relative, or not a regular file."""


def _roots(roots: Iterable[str]) -> list[Path]:
    resolved = [Path(os.path.realpath(root)) for root in roots if root]
    if not resolved:
        raise PathRefused("this chat has no working directory: no file can be reached")
    return resolved


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def _resolve(path: str, roots: Iterable[str]) -> Path:
    if not path:
        raise PathRefused("the path is empty")
    if "\x00" in path:
        raise PathRefused("the path contains a NUL character")
    if not os.path.isabs(path):
        raise PathRefused(f"{path!r} is not an absolute path")
    allowed = _roots(roots)
    resolved = Path(os.path.realpath(path))
    if not _inside(resolved, allowed):
        shown = ", ".join(str(r) for r in allowed)
        raise PathRefused(f"{path!r} is outside the working directories ({shown})")
    return resolved


def confine(path: str, roots: Iterable[str], *, must_exist: bool = False) -> Path:
    """The resolved path of a *file* ``path`` inside ``roots``, or :class:`PathRefused`.

    A path that does not exist yet is allowed (a write creates it) unless
    ``must_exist``; its parent directories must resolve inside ``roots`` too.
    """
    resolved = _resolve(path, roots)
    try:
        mode = os.stat(resolved).st_mode
    except FileNotFoundError:
        if must_exist:
            raise PathRefused(f"{path!r} does not exist") from None
        return resolved
    except OSError as error:
        raise PathRefused(f"{path!r} cannot be read: {error.strerror}") from None
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise PathRefused(f"{path!r} is {kind}")
    return resolved


def confine_directory(path: str, roots: Iterable[str]) -> Path:
    """The resolved path of an existing *directory* inside ``roots``, or :class:`PathRefused`."""
    resolved = _resolve(path, roots)
    if not resolved.is_dir():
        raise PathRefused(f"{path!r} is not a directory")
    return resolved
