"""Opening a path beneath a directory descriptor without ever following a link.

Layer: workspace (blocking system calls, no asyncio). ``workspace/paths.py``
decides *which* path may be touched (resolved, inside the roots); this module
makes sure the object opened is the one at that path *now*: every component
is walked from a directory descriptor and none may be a symbolic link, so a
directory swapped for a link between the check and the use makes the open
fail (``ELOOP``) instead of leading elsewhere (docs/workspace.md, "How paths
are resolved").

Two walkers, one behaviour:

* ``openat2`` — ``openat2(2)`` (Linux 5.6+, syscall 437 on x86_64 and
  aarch64, called through ``ctypes``) with ``RESOLVE_BENEATH |
  RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS``: the kernel does the walk.
* ``walk`` — where the kernel has no ``openat2`` (``ENOSYS``, or a seccomp
  filter's ``EPERM``), or on another architecture: one ``openat`` per
  component, ``O_NOFOLLOW | O_DIRECTORY`` (``O_PATH``) for the directories and
  ``O_NOFOLLOW`` for the last, each relative to the descriptor of the one
  before.

Which is used is decided once, when the module is imported (:data:`WALKER`):
``openat2`` when the kernel answers a probe, else ``walk``. The environment
variable ``AHP_SERVER_PATH_WALKER=walk`` forces the fallback (tests run every
race against both walkers this way; an operator can use it to rule the
kernel's walk out). Any other value, or none, means "the best the kernel has".

A relative path here is already normalized (``paths.py`` resolves ``..``
first): a ``..`` component is refused (``EXDEV``, as ``RESOLVE_BENEATH``
does), so nothing climbs above the starting directory.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat

__all__ = ["FORCE_ENV", "WALKER", "open_beneath"]

#: Set to ``walk`` to force the component-by-component walk (read at import).
FORCE_ENV = "AHP_SERVER_PATH_WALKER"

_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_RESOLVE = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS
_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437, "arm64": 437}.get(platform.machine())
#: ``openat2`` answers EAGAIN when a rename raced its walk; tries before giving up (ELOOP).
_AGAIN_TRIES = 8
_DIRECTORY_STEP = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long


def _openat2(dir_fd: int, relative: str, flags: int, mode: int) -> int:
    assert _SYS_OPENAT2 is not None
    how = _OpenHow(flags | os.O_CLOEXEC, mode if flags & os.O_CREAT else 0, _RESOLVE)
    name = os.fsencode(relative)
    for _ in range(_AGAIN_TRIES):
        fd = _syscall(
            ctypes.c_long(_SYS_OPENAT2),
            ctypes.c_int(dir_fd),
            ctypes.c_char_p(name),
            ctypes.byref(how),
            ctypes.c_size_t(ctypes.sizeof(how)),
        )
        if fd >= 0:
            return int(fd)
        code = ctypes.get_errno()
        if code != errno.EAGAIN:
            raise OSError(code, os.strerror(code), relative)
    raise OSError(errno.ELOOP, "the path kept changing while it was walked", relative)


def _step(dir_fd: int, name: str, flags: int, mode: int) -> int:
    """One component, never a link: ``ELOOP`` if it is one (``O_PATH | O_NOFOLLOW`` would
    open the link itself, so what was opened is checked). ``O_DIRECTORY | O_NOFOLLOW`` on a
    link fails ``ENOTDIR``: said ``ELOOP`` here, as ``openat2`` says it, when the name is a
    link — or a directory again, swapped back since."""
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except NotADirectoryError:
        if flags & os.O_DIRECTORY and _link_or_directory(dir_fd, name):
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name) from None
        raise
    if stat.S_ISLNK(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name)
    return fd


def _link_or_directory(dir_fd: int, name: str) -> bool:
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return False
    return stat.S_ISLNK(mode) or stat.S_ISDIR(mode)


def _walk(dir_fd: int, relative: str, flags: int, mode: int) -> int:
    parts = [part for part in relative.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise OSError(errno.EXDEV, "a '..' component would leave the directory", relative)
    if not parts:
        return _step(dir_fd, ".", flags, mode)
    current = dir_fd
    try:
        for part in parts[:-1]:
            following = _step(current, part, _DIRECTORY_STEP, 0)
            if not stat.S_ISDIR(os.fstat(following).st_mode):
                os.close(following)
                raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), part)
            if current != dir_fd:
                os.close(current)
            current = following
        return _step(current, parts[-1], flags, mode)
    finally:
        if current != dir_fd:
            os.close(current)


def _kernel_walker() -> str:
    if os.environ.get(FORCE_ENV) == "walk" or _SYS_OPENAT2 is None:
        return "walk"
    try:
        root = os.open("/", _DIRECTORY_STEP)
    except OSError:
        return "walk"
    try:
        os.close(_openat2(root, ".", _DIRECTORY_STEP, 0))
    except OSError as error:
        if error.errno in (errno.ENOSYS, errno.EPERM, errno.EINVAL):
            return "walk"
        raise
    finally:
        os.close(root)
    return "openat2"


#: ``"openat2"`` or ``"walk"``: how :func:`open_beneath` walks (decided at import).
WALKER = _kernel_walker()


def open_beneath(dir_fd: int, relative: str, flags: int, mode: int = 0o600) -> int:
    """A descriptor of ``relative`` beneath the directory ``dir_fd``, no component a link.

    ``relative`` is normalized (no ``..``); ``""`` or ``"."`` opens ``dir_fd``'s
    directory again with ``flags``. A symbolic link met anywhere, the last
    component included, is ``OSError(ELOOP)``; a ``..`` is ``EXDEV``; other
    errors are the system's (``ENOENT``, ``ENOTDIR``, ``EEXIST`` with
    ``O_CREAT | O_EXCL``, …). ``O_CLOEXEC`` is always added.
    """
    relative = relative.strip("/") or "."
    if WALKER == "openat2":
        return _openat2(dir_fd, relative, flags, mode)
    return _walk(dir_fd, relative, flags, mode)
