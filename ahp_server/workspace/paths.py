"""Path confinement: a path an agent or a client names must stay inside the working directories.

Layer: workspace (below agents and host; no asyncio). The one place that
decides whether a path is inside a chat's (or a session's) working
directories — the ACP bridge's ``fs/*`` and ``terminal/create`` use it, and so
do the ``resource*`` commands (``workspace/files.py``), which also turn their
``file:`` URIs into paths here (:func:`file_uri_to_path`).

The rule (docs/agents.md, "What the host serves to the agent"):

* the path must be absolute (ACP requires it; a relative path is refused, not
  guessed at);
* it is resolved the way the operating system would open it — ``..`` folded,
  every symbolic link followed, including one in the last component — and the
  result must lie inside one of the roots, themselves resolved the same way;
* a path that exists must be a regular file (or, where asked, a directory):
  devices, FIFOs and sockets are refused, so a read can never block on
  ``/dev/zero`` or a named pipe;
* it must not lie in a place never served, whatever the roots:
  :data:`SYSTEM_FORBIDDEN` and the caller's ``forbidden`` (the host's data
  directory, configuration and token files; ``workspace/roots.py``).

Working directories may be given as ``file:`` URIs (what AHP sessions carry)
or as absolute paths; anything else is not a root.

Anything else raises :class:`PathRefused` with a message safe to show: the
path as the caller named it, never where a link outside leads. Its subclasses
say why — :class:`PathInvalid` (not a usable path or URI), :class:`PathOutside`
(outside every root), :class:`PathNotFound`, :class:`PathNotRegular` — so a
caller can map them to its own errors (the resource commands map them to
``-32602``, ``-32009``, ``-32008``).

What is checked is the path as it resolves *now*; what is then opened must be
that very path. :func:`open_confined` and :func:`open_parent` open the
resolved path (which has no link left in it) from the descriptor of the root
that holds it, through ``workspace/walk.py``: ``openat2(2)`` with
``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS``, or a component-by-component
``O_NOFOLLOW`` walk. A directory swapped for a symbolic link between the
check and the open is met on the way and refused (:class:`PathOutside`, like
any path leading out), so a process that can write inside a root cannot
redirect an operation out of it. Callers act on what they opened with the
``dir_fd=`` forms of the system calls, never by path again.
"""

from __future__ import annotations

import errno
import os
import stat
import urllib.parse
from collections.abc import Iterable
from pathlib import Path

from ahp_server.workspace.walk import open_beneath

__all__ = [
    "SYSTEM_FORBIDDEN",
    "PathInvalid",
    "PathNotFound",
    "PathNotRegular",
    "PathOutside",
    "PathRefused",
    "confine",
    "confine_directory",
    "confine_entry",
    "confine_path",
    "directory_path",
    "file_uri",
    "file_uri_to_path",
    "inside",
    "open_confined",
    "open_parent",
    "root_paths",
]

#: A directory descriptor that is only walked from (never read).
DIRECTORY = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY

#: Never reached, whatever the roots: the kernel's and the devices' file systems
#: (``/proc/<pid>/environ`` holds the host's secrets). The host adds its own data
#: directory, configuration and token files (``workspace/roots.py``).
SYSTEM_FORBIDDEN = ("/proc", "/sys", "/dev")


def inside(path: str, directory: str) -> bool:
    """Whether the resolved ``path`` is ``directory`` or lies beneath it (both resolved)."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")


class PathRefused(Exception):
    """A path outside the working directories, relative, or not a regular file."""


class PathInvalid(PathRefused):
    """Not a usable path: empty, relative, with a NUL, or not a local ``file:`` URI."""


class PathOutside(PathRefused):
    """The path resolves outside every working directory (or there is none)."""


class PathNotFound(PathRefused):
    """The path had to exist and does not."""


class PathNotRegular(PathRefused):
    """A directory where a file was needed, or a device, FIFO or socket."""


def file_uri_to_path(uri: str) -> str:
    """The local path a ``file:`` URI names (RFC 8089), percent-decoded; else :class:`PathInvalid`.

    Only ``file:`` is accepted, with an empty or ``localhost`` authority
    (``file:///a/b``, ``file://localhost/a/b``, ``file:/a/b``); a query or a
    fragment is refused (a ``#`` or ``?`` in a file name must be encoded).
    Percent-escapes are decoded to bytes, so a name that is not UTF-8 comes
    back as the operating system spells it; the result is not resolved yet
    (``..`` and links are left to :func:`confine_path`).
    """
    if "\x00" in uri:
        raise PathInvalid("the URI contains a NUL character")
    scheme, colon, rest = uri.partition(":")
    if not colon or scheme.lower() != "file":
        shown = f"scheme {scheme.lower()!r}" if colon and scheme else "no scheme"
        raise PathInvalid(f"{uri!r} is not a file: URI ({shown}); only file: URIs are served")
    if "?" in rest or "#" in rest:
        raise PathInvalid(f"{uri!r} has a query or a fragment: encode '?' and '#' as %3F and %23")
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        if authority.lower() not in ("", "localhost"):
            raise PathInvalid(f"{uri!r} names another host ({authority!r}): only local files")
        path = slash + path
    else:
        path = rest
    if not path.startswith("/"):
        raise PathInvalid(f"{uri!r} is not an absolute file: URI")
    decoded = os.fsdecode(urllib.parse.unquote_to_bytes(path))
    if "\x00" in decoded:
        raise PathInvalid(f"{uri!r} contains an encoded NUL character")
    return decoded


def directory_path(uri: str | None) -> str | None:
    """A working directory's absolute path (``file:`` URI), or ``None`` when it is not one."""
    if uri is None:
        return None
    try:
        return file_uri_to_path(uri)
    except (PathInvalid, ValueError):
        return None


def file_uri(path: str | Path) -> str:
    """The ``file:`` URI of an absolute path (percent-encoded; ``file:///…``)."""
    return Path(path).as_uri()


def root_paths(directories: Iterable[str]) -> list[str]:
    """The local paths of working directories given as ``file:`` URIs or absolute paths.

    Anything else (another scheme, a relative path, a malformed URI) is not a
    root and is left out.
    """
    paths: list[str] = []
    for directory in directories:
        if not directory:
            continue
        if directory.startswith("/"):
            paths.append(directory)
            continue
        try:
            paths.append(file_uri_to_path(directory))
        except PathInvalid:
            continue
    return paths


def _roots(roots: Iterable[str]) -> list[Path]:
    resolved = list(dict.fromkeys(Path(os.path.realpath(root)) for root in root_paths(roots)))
    if not resolved:
        raise PathOutside("there is no working directory: no file can be reached")
    return resolved


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def _check_syntax(path: str) -> None:
    if not path:
        raise PathInvalid("the path is empty")
    if "\x00" in path:
        raise PathInvalid("the path contains a NUL character")
    if not os.path.isabs(path):
        raise PathInvalid(f"{path!r} is not an absolute path")


def _outside(path: str, allowed: list[Path]) -> PathOutside:
    shown = ", ".join(str(r) for r in allowed)
    return PathOutside(f"{path!r} is outside the working directories ({shown})")


def _check_forbidden(path: str, resolved: Path, forbidden: Iterable[str]) -> None:
    """:class:`PathOutside` when ``resolved`` lies in a place never served (docs/workspace.md,
    "Roots"): the system's, or ``forbidden`` (resolved already)."""
    text = str(resolved)
    for place in (*SYSTEM_FORBIDDEN, *forbidden):
        if inside(text, place):
            raise PathOutside(f"{path!r} is in a place the host never serves")


def _resolve(path: str, roots: Iterable[str], forbidden: Iterable[str]) -> Path:
    _check_syntax(path)
    allowed = _roots(roots)
    resolved = Path(os.path.realpath(path))
    if not _inside(resolved, allowed):
        raise _outside(path, allowed)
    _check_forbidden(path, resolved, forbidden)
    return resolved


def confine_path(path: str, roots: Iterable[str], forbidden: Iterable[str] = ()) -> Path:
    """The resolved ``path`` (every link followed), which must lie inside ``roots`` and
    outside ``forbidden`` (and :data:`SYSTEM_FORBIDDEN`).

    It may be anything, or not exist yet: the caller checks what it finds there.
    """
    return _resolve(path, roots, forbidden)


def confine_entry(
    path: str, roots: Iterable[str], forbidden: Iterable[str] = (), *, allow_root: bool = False
) -> Path:
    """The directory entry ``path`` names, its last component *not* followed.

    For operations on the entry itself (delete, move, ``lstat``): a symbolic
    link inside the roots is the link, wherever it points. The parent is
    resolved and must lie inside ``roots``; a working directory itself is
    refused unless ``allow_root`` (no client deletes or moves a root).
    """
    _check_syntax(path)
    allowed = _roots(roots)
    parent, name = os.path.split(path.rstrip("/") or "/")
    if name in ("", ".", ".."):
        resolved = Path(os.path.realpath(path))  # a directory, never a link
    else:
        resolved = Path(os.path.realpath(parent)) / name
    if not _inside(resolved, allowed):
        raise _outside(path, allowed)
    _check_forbidden(path, resolved, forbidden)
    if not allow_root and resolved in allowed:
        raise PathOutside(f"{path!r} is a working directory itself: it cannot be changed")
    return resolved


def confine(
    path: str, roots: Iterable[str], forbidden: Iterable[str] = (), *, must_exist: bool = False
) -> Path:
    """The resolved path of a *file* ``path`` inside ``roots``, or :class:`PathRefused`.

    A path that does not exist yet is allowed (a write creates it) unless
    ``must_exist``; its parent directories must resolve inside ``roots`` too.
    """
    resolved = _resolve(path, roots, forbidden)
    try:
        mode = os.stat(resolved).st_mode
    except FileNotFoundError:
        if must_exist:
            raise PathNotFound(f"{path!r} does not exist") from None
        return resolved
    except OSError as error:
        raise PathRefused(f"{path!r} cannot be read: {error.strerror}") from None
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise PathNotRegular(f"{path!r} is {kind}")
    return resolved


def confine_directory(path: str, roots: Iterable[str], forbidden: Iterable[str] = ()) -> Path:
    """The resolved path of an existing *directory* inside ``roots``, or :class:`PathRefused`."""
    resolved = _resolve(path, roots, forbidden)
    if not resolved.is_dir():
        raise PathNotRegular(f"{path!r} is not a directory")
    return resolved


def _changed(shown: str) -> PathOutside:
    return PathOutside(
        f"{shown!r} leads through a symbolic link (or changed while it was opened): refused"
    )


def open_confined(
    path: Path, roots: Iterable[str], flags: int, *, shown: str, mode: int = 0o600
) -> int:
    """A descriptor of the resolved ``path`` (from :func:`confine_path` and its kin), opened
    from the root that holds it without following any link (``workspace/walk.py``).

    The root itself is opened the same way from ``/`` (it is resolved: no link
    in it either). A link met anywhere — a directory swapped for one since
    ``path`` was resolved, or the last component — is :class:`PathOutside`
    naming ``shown``; other errors are the system's ``OSError``.
    """
    allowed = _roots(roots)
    holders = [root for root in allowed if path == root or path.is_relative_to(root)]
    if not holders:
        raise _outside(shown, allowed)
    root = max(holders, key=lambda r: len(r.parts))
    try:
        slash = os.open("/", DIRECTORY | os.O_CLOEXEC)
        try:
            root_fd = open_beneath(slash, str(root), DIRECTORY)
        finally:
            os.close(slash)
        try:
            return open_beneath(root_fd, str(path.relative_to(root)), flags, mode)
        finally:
            os.close(root_fd)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.EXDEV):
            raise _changed(shown) from None
        raise


def open_parent(path: Path, roots: Iterable[str], *, shown: str) -> int:
    """A directory descriptor of ``path``'s parent (:func:`open_confined`), for the
    ``dir_fd=`` forms of what is then done to ``path.name``. ``path`` is not a root."""
    return open_confined(path.parent, roots, DIRECTORY, shown=shown)
