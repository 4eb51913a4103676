"""The file operations behind the ``resource*`` commands (and the ACP bridge's ``fs/*``),
confined to the working directories.

Layer: workspace (blocking file I/O, no asyncio, no host; it may use protocol
types and errors). The host runs every method of :class:`Files` in a worker
thread (``host/commands/resources.py``), so the event loop never waits for a disk.

Every URI goes through ``workspace/paths.py`` — the one confinement module,
shared with the ACP bridge — before anything is opened: only ``file:`` URIs
(local, percent-decoded), resolved with every link followed, inside one of the
roots. What the spec leaves to the server is decided here and written down in
``docs/workspace.md`` ("Resources"); in short, the error codes are
(``docs/reference/error-codes.md``):

* ``-32602`` InvalidParams: not a local ``file:`` URI, a relative path, a NUL,
  a bad ``encoding``/``mode``/``position``, invalid base64, a file over a
  size cap, a directory where a file is needed (or the reverse), a non-empty
  directory deleted without ``recursive``;
* ``-32009`` PermissionDenied: outside every working directory (``..``, a
  link leading out, an absolute path elsewhere), a working directory itself
  deleted or moved, a device, FIFO or socket (never opened), the system's own
  ``EACCES``/``EPERM``/``EROFS``;
* ``-32008`` NotFound, ``-32010`` AlreadyExists (``createOnly``,
  ``failIfExists``, mkdir over a file), ``-32011`` Conflict (``ifMatch``).

A file is never read whole to learn that it is too big: it is ``stat``-ed
first, and at most ``max_read_bytes + 1`` bytes are ever read. Devices, FIFOs
and sockets are refused on ``stat`` (of an ``O_PATH`` descriptor), before any
``open`` for reading or writing (opening some devices has effects of its own);
what is then opened (``O_NOFOLLOW``, ``O_NONBLOCK``) must be the very file
that was checked.

Nothing is done by path string after the check. The resolved path is opened
from its root without following any link (``paths.open_confined`` and
``open_parent``: ``openat2(2)`` or an ``O_NOFOLLOW`` walk, ``workspace/walk.py``),
and what is done to it uses the ``dir_fd=`` forms (``os.open``, ``os.mkdir``,
``os.unlink``, ``os.rmdir``, ``os.rename``, ``os.stat(follow_symlinks=False)``);
recursive copies and deletes walk by descriptor too. A directory swapped for a
symbolic link mid-request is met and refused (-32009), never followed out.

A regular file with more than one hard link (``st_nlink > 1``) is neither read
(nor copied) nor written: another of its names may lie outside every root
(-32009). Deleting or moving such a file acts on the entry only and is
allowed; directories are not concerned (they cannot be hard-linked).

The ACP bridge's ``fs/read_text_file`` and ``fs/write_text_file``
(``agents/acp.py``) go through the same code — :meth:`Files.read_file` and
:meth:`Files.replace_file`, which take the agent's absolute path instead of
a URI — so an agent is held by the same walk and the same hard-link rule.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import errno
import hashlib
import mimetypes
import os
import re
import secrets
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from msgspec import UNSET

from ahp_server.protocol.errors import (
    AhpErrorCode,
    InternalError,
    InvalidParams,
    ProtocolError,
)
from ahp_server.protocol.reducers import iso_timestamp
from ahp_server.protocol.types import (
    DirectoryEntry,
    ResourceListResult,
    ResourceReadResult,
    ResourceResolveResult,
)
from ahp_server.workspace.paths import (
    SYSTEM_FORBIDDEN,
    PathInvalid,
    PathNotFound,
    PathNotRegular,
    PathRefused,
    confine_entry,
    confine_path,
    file_uri,
    file_uri_to_path,
    inside,
    open_confined,
    open_parent,
    root_paths,
)
from ahp_server.workspace.walk import open_beneath

__all__ = ["Change", "Files", "Limits", "Replaced", "base64_size", "etag_of"]

#: ``ContentEncoding`` values (common.md ``resourceRead``).
UTF8 = "utf-8"
BASE64 = "base64"
#: ``ResourceWriteMode`` values.
TRUNCATE, APPEND, INSERT = "truncate", "append", "insert"

_CHUNK = 1024 * 1024
_OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
#: A descriptor only to ``fstat`` (``O_PATH``: no device or FIFO is really opened).
_HANDLE = getattr(os, "O_PATH", os.O_RDONLY) | os.O_NOFOLLOW
#: A directory descriptor to list, or to act beneath.
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
#: Bytes JSON writes as a two-character escape, and the other control bytes
#: it writes as ``\\u00XX`` (six characters).
_SHORT_ESCAPES = b'"\\\b\f\n\r\t'
_LONG_ESCAPES = bytes(c for c in range(0x20) if c not in _SHORT_ESCAPES)
#: RFC 4648 base64, standard alphabet; the last group padded or not (as ``atob``
#: accepts), nothing else: no whitespace, no surplus ``=``.
_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?")


def base64_size(size: int) -> int:
    """Characters of the base64 form of ``size`` bytes."""
    return 4 * ((size + 2) // 3)


@dataclass(frozen=True, slots=True)
class Limits:
    """Size caps of the resource commands (``[workspace]`` settings)."""

    #: Largest file ``resourceRead`` returns.
    max_read_bytes: int
    #: Largest ``data`` (decoded) ``resourceWrite`` accepts.
    max_write_bytes: int
    #: Most entries ``resourceList`` returns (a larger directory is refused).
    max_list_entries: int = 100_000
    #: The setting that sets ``max_read_bytes``, named when a file is refused for its size
    #: (``None``: a fixed cap, as the ACP bridge's).
    read_setting: str | None = "workspace.max_read_bytes"


@dataclass(frozen=True, slots=True)
class Change:
    """What a mutating operation did, for the audit log (paths and sizes, never content)."""

    path: str
    size: int | None = None
    destination: str | None = None
    #: ``mkdir``: False when the directory was already there.
    created: bool = True


@dataclass(frozen=True, slots=True)
class Replaced:
    """What :meth:`Files.replace_file` replaced, for the turn's changeset."""

    #: The resolved path written.
    path: Path
    #: Whether a file was there before.
    existed: bool
    #: Its bytes before (``None``: none, or more than the ``keep`` asked).
    before: bytes | None


def etag_of(st: os.stat_result) -> str:
    """An opaque version token of a file: changes with its inode, size, mtime and ctime.

    Any write through this module changes at least one of them (a full
    overwrite renames a new file into place; the other modes change the size
    or the times). Timestamps are as fine as the file system keeps them.
    """
    key = f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
    return '"' + hashlib.blake2b(key.encode(), digest_size=12).hexdigest() + '"'


def _content_type(path: str | Path) -> str | None:
    return mimetypes.guess_type(os.fspath(path), strict=False)[0]


def _refused(error: PathRefused) -> ProtocolError:
    message = str(error)
    if isinstance(error, PathInvalid):
        return InvalidParams(message)
    if isinstance(error, PathNotFound):
        return ProtocolError(message, code=AhpErrorCode.NotFound)
    if isinstance(error, PathNotRegular) and "directory" in message:
        return InvalidParams(message)
    return ProtocolError(message, code=AhpErrorCode.PermissionDenied)


def _failure(error: OSError, uri: str) -> ProtocolError:
    """An operating-system error as the client hears it (the URI it sent, not our paths)."""
    reason = error.strerror or type(error).__name__
    code = error.errno
    if code == errno.ENOENT:
        return ProtocolError(f"{uri} does not exist", code=AhpErrorCode.NotFound)
    if code == errno.EEXIST:
        return ProtocolError(f"{uri} already exists", code=AhpErrorCode.AlreadyExists)
    if code == errno.ELOOP:
        return _denied(f"{uri} leads through a symbolic link (or changed while it was opened)")
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return ProtocolError(f"{uri}: {reason}", code=AhpErrorCode.PermissionDenied)
    if code in (errno.ENOTDIR, errno.EISDIR, errno.ENOTEMPTY, errno.ENAMETOOLONG, errno.EINVAL):
        return InvalidParams(f"{uri}: {reason}")
    return InternalError(f"{uri}: {reason}")


@contextlib.contextmanager
def _translated(uri: str) -> Iterator[None]:
    """Refusals and OS errors inside the block become the protocol errors above."""
    try:
        yield
    except PathRefused as error:
        raise _refused(error) from None
    except OSError as error:
        raise _failure(error, uri) from None


def _denied(message: str) -> ProtocolError:
    return ProtocolError(message, code=AhpErrorCode.PermissionDenied)


def _require_regular(uri: str, st: os.stat_result) -> None:
    if stat.S_ISREG(st.st_mode):
        _single_link(uri, st)
        return
    if stat.S_ISDIR(st.st_mode):
        raise InvalidParams(f"{uri} is a directory")
    if stat.S_ISLNK(st.st_mode):  # the path was resolved: a link here is a swap since
        raise _denied(f"{uri} leads through a symbolic link (or changed while it was opened)")
    raise _denied(f"{uri} is not a regular file (a device, FIFO or socket): it is never opened")


def _single_link(uri: str, st: os.stat_result) -> None:
    """-32009 for a regular file with more than one hard link: another name of it may lie
    outside every root, so its content is neither served nor changed (docs/workspace.md)."""
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise _denied(
            f"{uri} has {st.st_nlink} hard links: a file with more than one is neither read "
            "nor written (another of its names may lie outside the workspace)"
        )


def _check_opened(fd: int, path: Path, uri: str, before: os.stat_result | None) -> os.stat_result:
    """The descriptor is the regular file that was checked, at the path that was confined."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or (
        before is not None and (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino)
    ):
        raise _denied(f"{uri} changed while it was being opened")
    _single_link(uri, st)
    with contextlib.suppress(OSError):  # no /proc: the checks above stand alone
        if os.readlink(f"/proc/self/fd/{fd}") != str(path):
            raise _denied(f"{uri} changed while it was being opened")
    return st


def _pwrite_all(fd: int, data: bytes | memoryview, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _splice(fd: int, offset: int, data: bytes, size: int) -> None:
    """Insert ``data`` at ``offset``: shift the tail right chunk by chunk (bounded memory)."""
    if not data:
        return
    shift = len(data)
    end = size
    while end > offset:
        length = min(_CHUNK, end - offset)
        end -= length
        chunk = os.pread(fd, length, end)
        if len(chunk) != length:
            raise InternalError("the file shrank while data was being inserted")
        _pwrite_all(fd, chunk, end + shift)
    _pwrite_all(fd, data, offset)


def _position(value: int | float | None) -> int:
    if value is None:
        return 0
    if isinstance(value, float):
        if not value.is_integer():
            raise InvalidParams(f"position must be a whole number of bytes, not {value}")
        value = int(value)
    if value < 0:
        raise InvalidParams(f"position must not be negative, not {value}")
    return value


class Files:
    """File operations on ``roots`` (working directories: ``file:`` URIs or absolute paths).

    Each method takes the URIs as the client sent them and raises
    :class:`~ahp_server.protocol.errors.ProtocolError` (module docstring).
    """

    def __init__(self, roots: list[str], limits: Limits, forbidden: Sequence[str] = ()) -> None:
        self.roots = roots
        self.limits = limits
        #: Places refused inside the roots (``workspace/roots.py``: data, configuration, tokens).
        self.forbidden = forbidden

    # -- confinement ------------------------------------------------------------------------

    def _keep_forbidden(self, uri: str, path: Path) -> None:
        """-32009 when the tree at ``path`` holds a place never served (the host's data,
        configuration or token files: docs/workspace.md "Roots"): copying, moving or
        deleting it would reach them from inside a root."""
        text = str(path)
        for place in (*SYSTEM_FORBIDDEN, *self.forbidden):
            if inside(place, text):
                raise _denied(f"{uri} holds a place the host never serves: it is left alone")

    def _path(self, uri: str) -> Path:
        """The resolved path of ``uri`` (every link followed), inside the roots."""
        with _translated(uri):
            return confine_path(file_uri_to_path(uri), self.roots, self.forbidden)

    def _entry(self, uri: str, *, allow_root: bool = False) -> Path:
        """The directory entry ``uri`` names (its last link not followed), inside the roots."""
        with _translated(uri):
            return confine_entry(
                file_uri_to_path(uri), self.roots, self.forbidden, allow_root=allow_root
            )

    def _is_root(self, path: Path) -> bool:
        return any(path == Path(os.path.realpath(root)) for root in root_paths(self.roots))

    def _open(self, uri: str, path: Path, flags: int, mode: int = 0o600) -> int:
        """A descriptor of the resolved ``path``, walked from its root with no link followed."""
        return open_confined(path, self.roots, flags, shown=uri, mode=mode)

    def _stat(self, uri: str, path: Path) -> os.stat_result:
        """What is at the resolved ``path`` now (never a link), without opening it for I/O."""
        fd = self._open(uri, path, _HANDLE)
        try:
            return os.fstat(fd)
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _parent(
        self, uri: str, path: Path, *, hint: str = " (create it with resourceMkdir)"
    ) -> Iterator[int]:
        """The descriptor of ``path``'s directory (walked, no link followed), closed after;
        -32008 when that directory does not exist."""
        try:
            fd = open_parent(path, self.roots, shown=uri)
        except (FileNotFoundError, NotADirectoryError):
            raise ProtocolError(
                f"the directory of {uri} does not exist{hint}", code=AhpErrorCode.NotFound
            ) from None
        try:
            yield fd
        finally:
            os.close(fd)

    # -- resourceRead -----------------------------------------------------------------------

    def read(self, uri: str, encoding: str | None) -> ResourceReadResult:
        """``resourceRead``: the file's bytes, as ``utf-8`` when asked and possible, else base64.

        common.md ``ResourceReadResult``: the server SHOULD honour the asked
        encoding and MUST otherwise fall back to base64 or utf-8. Bytes that
        are not UTF-8 fall back to base64; so does UTF-8 whose JSON escapes
        (control characters) would make the answer larger than the base64 of
        the read cap. Without ``encoding``: utf-8 when the bytes are UTF-8.
        """
        if encoding not in (None, UTF8, BASE64):
            raise InvalidParams(f"encoding must be 'utf-8' or 'base64', not {encoding!r}")
        path = self._path(uri)
        with _translated(uri):
            raw = self._read_bytes(uri, path)
        content_type = _content_type(path)
        text: str | None = None
        if encoding != BASE64:
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            if text is not None and self._escaped_size(raw) > base64_size(
                self.limits.max_read_bytes
            ):
                text = None
        if text is not None:
            data, used = text, UTF8
        else:
            data, used = base64.b64encode(raw).decode("ascii"), BASE64
        return ResourceReadResult(
            data=data,
            encoding=used,
            content_type=UNSET if content_type is None else content_type,
        )

    @staticmethod
    def _escaped_size(raw: bytes) -> int:
        """An upper bound of the JSON string length of UTF-8 ``raw`` (escapes counted)."""
        short = len(raw) - len(raw.translate(None, _SHORT_ESCAPES))
        long = len(raw) - len(raw.translate(None, _LONG_ESCAPES))
        return len(raw) + short + 5 * long + 2

    def _read_bytes(self, uri: str, path: Path) -> bytes:
        cap = self.limits.max_read_bytes
        before = self._stat(uri, path)
        _require_regular(uri, before)
        if before.st_size > cap:
            raise self._too_big(uri, before.st_size)
        fd = self._open(uri, path, os.O_RDONLY | _OPEN_FLAGS)
        try:
            _check_opened(fd, path, uri, before)
            raw = _read_at_most(fd, cap + 1)
        finally:
            os.close(fd)
        if len(raw) > cap:
            raise self._too_big(uri, len(raw))  # it grew after the stat
        return raw

    def _too_big(self, uri: str, size: int) -> ProtocolError:
        cap = self.limits.max_read_bytes
        setting = self.limits.read_setting
        return InvalidParams(
            f"{uri} is {size} bytes, over this host's read limit of {cap} bytes"
            + (f" ({setting})" if setting else ""),
            data={"size": size, "limit": cap},
        )

    # -- resourceWrite ----------------------------------------------------------------------

    def decode(self, data: str, encoding: str) -> bytes:
        """``resourceWrite.data`` as bytes, checked against the write cap before decoding."""
        cap = self.limits.max_write_bytes
        if encoding == BASE64:
            if len(data) // 4 * 3 > cap + 2:
                raise self._write_too_big(len(data) // 4 * 3)
            if _BASE64.fullmatch(data) is None:
                raise InvalidParams("data is not valid base64 (RFC 4648, standard alphabet)")
            try:
                raw = base64.b64decode(data + "=" * (-len(data) % 4), validate=True)
            except (binascii.Error, ValueError) as error:
                raise InvalidParams(f"data is not valid base64: {error}") from None
        elif encoding == UTF8:
            if len(data) > cap:  # a character is at least one byte
                raise self._write_too_big(len(data))
            try:
                raw = data.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidParams("data is not valid Unicode (a lone surrogate)") from None
        else:
            raise InvalidParams(f"encoding must be 'utf-8' or 'base64', not {encoding!r}")
        if len(raw) > cap:
            raise self._write_too_big(len(raw))
        return raw

    def _write_too_big(self, size: int) -> ProtocolError:
        cap = self.limits.max_write_bytes
        return InvalidParams(
            f"data is {size} bytes, over this host's write limit of {cap} bytes "
            "(workspace.max_write_bytes)",
            data={"size": size, "limit": cap},
        )

    def write(
        self,
        uri: str,
        raw: bytes,
        *,
        mode: str | None = None,
        position: int | float | None = None,
        create_only: bool = False,
        if_match: str | None = None,
    ) -> Change:
        """``resourceWrite`` (common.md, ``ResourceWriteMode``).

        * ``truncate`` at 0 (the default) replaces the file atomically: a
          temporary file in the same directory, renamed over it (mode and, when
          allowed, owner kept). At ``position`` > 0 the file is cut there and
          ``data`` written from there.
        * ``append``: ``data`` goes ``position`` bytes before the end
          (``O_APPEND`` at 0); ``insert``: ``position`` bytes from the start.
          The bytes after it move right, a chunk at a time.
        * A position past the end is refused (-32602); the parent directory
          must exist (-32008: ``resourceMkdir`` first).
        """
        mode = TRUNCATE if mode is None else mode
        if mode not in (TRUNCATE, APPEND, INSERT):
            raise InvalidParams(f"mode must be 'truncate', 'append' or 'insert', not {mode!r}")
        offset = _position(position)
        path = self._path(uri)
        with _translated(uri), self._parent(uri, path) as parent:
            try:
                before: os.stat_result | None = os.stat(
                    path.name, dir_fd=parent, follow_symlinks=False
                )
            except FileNotFoundError:
                before = None
            if before is not None:
                _require_regular(uri, before)
                if create_only:
                    raise ProtocolError(f"{uri} already exists", code=AhpErrorCode.AlreadyExists)
            if if_match is not None and (before is None or etag_of(before) != if_match):
                # common.md ResourceWriteParams.ifMatch: MUST fail with Conflict.
                raise ProtocolError(
                    f"{uri} is not at version {if_match}: resolve it again",
                    code=AhpErrorCode.Conflict,
                )
            if before is None:
                self._create(uri, parent, path, raw, offset)
            elif mode == TRUNCATE and offset == 0:
                self._replace(parent, path.name, raw, before)
            else:
                self._in_place(uri, parent, path, raw, before, mode, offset)
        return Change(path=str(path), size=len(raw))

    def _past_end(self, offset: int, size: int) -> ProtocolError:
        return InvalidParams(f"position {offset} is past the end of the file ({size} bytes)")

    def _create(self, uri: str, parent: int, path: Path, raw: bytes, offset: int) -> None:
        if offset:
            raise self._past_end(offset, 0)
        try:
            fd = os.open(
                path.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN_FLAGS, 0o666, dir_fd=parent
            )
        except FileExistsError:
            raise ProtocolError(
                f"{uri} appeared while it was being created: write again",
                code=AhpErrorCode.Conflict,
            ) from None
        try:
            _check_opened(fd, path, uri, None)
            _write_all(fd, raw)
        finally:
            os.close(fd)

    def _replace(self, parent: int, name: str, raw: bytes, before: os.stat_result | None) -> None:
        """A new file beside the old one, renamed over it (both by ``parent``'s descriptor):
        the old one's mode and, when allowed, owner kept; with no old one (``before`` None)
        the default mode (``0666`` less the umask)."""
        fd, temporary = _temporary(parent, name, 0o600 if before is not None else 0o666)
        try:
            try:
                _write_all(fd, raw)
                if before is not None:
                    os.fchmod(fd, stat.S_IMODE(before.st_mode))
                if before is not None and (before.st_uid, before.st_gid) != (
                    os.geteuid(),
                    os.getegid(),
                ):
                    with contextlib.suppress(PermissionError):
                        os.fchown(fd, before.st_uid, before.st_gid)
            finally:
                os.close(fd)
            os.rename(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=parent)
            raise

    def _in_place(
        self,
        uri: str,
        parent: int,
        path: Path,
        raw: bytes,
        before: os.stat_result,
        mode: str,
        offset: int,
    ) -> None:
        at_end = mode == APPEND and offset == 0
        flags = os.O_WRONLY | os.O_APPEND if at_end else os.O_RDWR
        fd = os.open(path.name, flags | _OPEN_FLAGS, dir_fd=parent)
        try:
            size = _check_opened(fd, path, uri, before).st_size
            if offset > size:
                raise self._past_end(offset, size)
            if at_end:
                _write_all(fd, raw)  # O_APPEND: atomic against other appenders
            elif mode == TRUNCATE:
                os.ftruncate(fd, offset)
                _pwrite_all(fd, raw, offset)
            else:
                _splice(fd, size - offset if mode == APPEND else offset, raw, size)
        finally:
            os.close(fd)

    # -- resourceList -----------------------------------------------------------------------

    def list_directory(self, uri: str) -> ResourceListResult:
        """``resourceList``: the directory's entries, sorted by name.

        A link is listed by what it leads to — a directory only if that is a
        directory inside the roots; devices, FIFOs and sockets show as files
        (every operation that would open them refuses them).
        """
        path = self._path(uri)
        limit = self.limits.max_list_entries
        entries: list[DirectoryEntry] = []
        with _translated(uri):
            if not stat.S_ISDIR(self._stat(uri, path).st_mode):
                raise InvalidParams(f"{uri} is not a directory")
            fd = self._open(uri, path, _DIRECTORY)
            try:
                with os.scandir(fd) as scan:
                    for entry in scan:
                        if len(entries) >= limit:
                            raise InvalidParams(
                                f"{uri} holds more than {limit} entries: too many to list"
                            )
                        kind = self._kind(uri, path, entry)
                        entries.append(DirectoryEntry(name=entry.name, type=kind))
            finally:
                os.close(fd)
        entries.sort(key=lambda e: e.name)
        return ResourceListResult(entries=tuple(entries))

    def _kind(self, uri: str, directory: Path, entry: os.DirEntry[str]) -> str:
        try:
            if not entry.is_symlink():
                return "directory" if entry.is_dir(follow_symlinks=False) else "file"
            link = os.path.join(directory, entry.name)
            target = confine_path(link, self.roots, self.forbidden)
            return "directory" if stat.S_ISDIR(self._stat(uri, target).st_mode) else "file"
        except (OSError, PathRefused):
            return "file"

    # -- resourceResolve --------------------------------------------------------------------

    def resolve(self, uri: str, follow_symlinks: bool = True) -> ResourceResolveResult:
        """``resourceResolve``: ``stat`` + ``realpath`` (common.md).

        ``uri`` in the result is the canonical URI when links are followed,
        the requested one otherwise (or when nothing was resolved away).
        ``ctime`` (creation time) is left out: Linux ``st_ctime`` is the
        inode change time, not a creation time. ``etag`` is given for files.
        """
        with _translated(uri):
            if follow_symlinks:
                path = self._path(uri)
                st = self._stat(uri, path)
                canonical = uri if str(path) == file_uri_to_path(uri) else file_uri(path)
            else:
                path = self._entry(uri, allow_root=True)
                if self._is_root(path):
                    st = self._stat(uri, path)
                else:
                    with self._parent(uri, path) as parent:
                        st = os.stat(path.name, dir_fd=parent, follow_symlinks=False)
                canonical = uri
        mtime = iso_timestamp(st.st_mtime_ns / 1_000_000)
        if stat.S_ISLNK(st.st_mode) and not follow_symlinks:
            return ResourceResolveResult(
                uri=canonical, type="symlink", size=st.st_size, mtime=mtime
            )
        if stat.S_ISDIR(st.st_mode):
            return ResourceResolveResult(uri=canonical, type="directory", mtime=mtime)
        _require_regular(uri, st)
        content_type = _content_type(path)
        return ResourceResolveResult(
            uri=canonical,
            type="file",
            size=st.st_size,
            mtime=mtime,
            content_type=UNSET if content_type is None else content_type,
            etag=etag_of(st),
        )

    # -- resourceMkdir ----------------------------------------------------------------------

    def mkdir(self, uri: str) -> Change:
        """``resourceMkdir``: ``mkdir -p``; an existing directory is a success, a file -32010.

        Walked by descriptors: each missing directory is made in its parent's
        descriptor (``os.mkdir(dir_fd=)``), which was reached without a link.
        """
        path = self._path(uri)
        with _translated(uri):
            try:
                missing: list[Path] = []
                current = path
                while True:
                    try:
                        os.close(self._open(uri, current, _HANDLE | os.O_DIRECTORY))
                        break
                    except FileNotFoundError:
                        if self._is_root(current):
                            raise
                        missing.append(current)
                        current = current.parent
                for directory in reversed(missing):
                    with self._parent(uri, directory) as parent:
                        try:
                            os.mkdir(directory.name, dir_fd=parent)
                        except FileExistsError:
                            st = os.stat(directory.name, dir_fd=parent, follow_symlinks=False)
                            if not stat.S_ISDIR(st.st_mode):
                                raise NotADirectoryError(errno.ENOTDIR, "not a directory") from None
            except NotADirectoryError:
                raise ProtocolError(
                    f"{uri} (or a directory above it) exists and is not a directory",
                    code=AhpErrorCode.AlreadyExists,
                ) from None
        return Change(path=str(path), created=bool(missing))

    # -- resourceDelete ---------------------------------------------------------------------

    def delete(self, uri: str, recursive: bool = False) -> Change:
        """``resourceDelete``: the entry itself (a link, not what it leads to).

        A directory needs ``recursive`` unless it is empty (-32602 otherwise);
        the recursive delete never follows a link out of it. A working
        directory itself cannot be deleted (-32009).
        """
        path = self._entry(uri)
        self._keep_forbidden(uri, path)
        with _translated(uri), self._parent(uri, path) as parent:
            st = os.stat(path.name, dir_fd=parent, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                if recursive:
                    _remove_tree(parent, path.name)
                else:
                    try:
                        os.rmdir(path.name, dir_fd=parent)
                    except OSError as error:
                        if error.errno in (errno.ENOTEMPTY, errno.EEXIST):
                            raise InvalidParams(
                                f"{uri} is a directory that is not empty: "
                                "delete it with recursive: true"
                            ) from None
                        raise
            else:
                os.unlink(path.name, dir_fd=parent)
        return Change(path=str(path), size=None if stat.S_ISDIR(st.st_mode) else st.st_size)

    # -- resourceCopy / resourceMove --------------------------------------------------------

    @contextlib.contextmanager
    def _destination(
        self,
        uri: str,
        source: Path,
        source_st: os.stat_result,
        fail_if_exists: bool,
        *,
        clear_files: bool,
    ) -> Iterator[tuple[Path, int] | None]:
        """The destination entry and its directory's descriptor, ready to be written; None if
        it is the source itself.

        An existing destination is removed first (common.md: overwritten
        unless ``failIfExists``) when it is a directory, or when
        ``clear_files``: a copy must not write through a link it finds there.
        A rename replaces a file (or a link) atomically by itself.
        """
        target = self._entry(uri)
        with self._parent(uri, target) as parent:
            with _translated(uri):
                if target == source:
                    yield None
                    return
                tree = stat.S_ISDIR(source_st.st_mode)
                if tree and target.is_relative_to(source):
                    raise InvalidParams(f"{uri} is inside the directory it would be a copy of")
                if source.is_relative_to(target):
                    raise InvalidParams(f"{uri} holds the source: overwriting it would remove it")
                try:
                    existing = os.stat(target.name, dir_fd=parent, follow_symlinks=False)
                except FileNotFoundError:
                    existing = None
                if existing is not None:
                    if fail_if_exists:
                        raise ProtocolError(
                            f"{uri} already exists", code=AhpErrorCode.AlreadyExists
                        )
                    if stat.S_ISDIR(existing.st_mode):
                        self._keep_forbidden(uri, target)
                        _remove_tree(parent, target.name)
                    elif clear_files or tree:
                        os.unlink(target.name, dir_fd=parent)
            yield target, parent

    def copy(self, source: str, destination: str, fail_if_exists: bool = False) -> Change:
        """``resourceCopy``: a file, or a directory tree (links in it copied as links).

        The source's links are followed (its content is copied, from inside
        the roots); the destination is the entry named. A tree holding a
        device, FIFO, socket or a file with several hard links is refused
        before anything is copied. Everything is read and written by
        descriptor (the tree walked with no link followed).
        """
        origin = self._path(source)
        with contextlib.ExitStack() as stack:
            with _translated(source):
                st = self._stat(source, origin)
                if stat.S_ISDIR(st.st_mode):
                    self._keep_forbidden(source, origin)
                    fd = self._open(source, origin, _DIRECTORY)
                    stack.callback(os.close, fd)
                    _check_tree(source, fd)
                else:
                    _require_regular(source, st)
                    fd = self._open(source, origin, os.O_RDONLY | _OPEN_FLAGS)
                    stack.callback(os.close, fd)
                    _check_opened(fd, origin, source, st)
            found = stack.enter_context(
                self._destination(destination, origin, st, fail_if_exists, clear_files=True)
            )
            if found is None:
                raise InvalidParams(f"{source} cannot be copied onto itself")
            target, parent = found
            with _translated(destination):
                _copy_into(source, fd, st, parent, target.name)
        return Change(
            path=str(origin),
            destination=str(target),
            size=None if stat.S_ISDIR(st.st_mode) else st.st_size,
        )

    def move(self, source: str, destination: str, fail_if_exists: bool = False) -> Change:
        """``resourceMove``: rename the entry (a link moves as a link); across file systems, copy
        and delete. Moving onto itself does nothing; a working directory cannot be moved."""
        origin = self._entry(source)
        self._keep_forbidden(source, origin)
        with contextlib.ExitStack() as stack:
            with _translated(source):
                origin_parent = stack.enter_context(self._parent(source, origin))
                st = os.stat(origin.name, dir_fd=origin_parent, follow_symlinks=False)
            found = stack.enter_context(
                self._destination(destination, origin, st, fail_if_exists, clear_files=False)
            )
            if found is None:
                return Change(path=str(origin), destination=str(origin))
            target, parent = found
            with _translated(destination):
                try:
                    os.rename(origin.name, target.name, src_dir_fd=origin_parent, dst_dir_fd=parent)
                except OSError as error:
                    if error.errno != errno.EXDEV:
                        raise
                    _move_across(source, origin_parent, origin.name, st, parent, target.name)
        return Change(path=str(origin), destination=str(target))

    # -- the ACP bridge's fs/* (agents/acp.py) ----------------------------------------------

    def read_file(self, path: str) -> bytes:
        """``fs/read_text_file``: the bytes of the file at the absolute ``path``, at most
        ``max_read_bytes``, opened as ``resourceRead`` opens one (from its root, no link
        followed, a file with several hard links refused). Refusals are protocol errors
        naming ``path`` as the agent gave it.
        """
        with _translated(path):
            resolved = confine_path(path, self.roots, self.forbidden)
            return self._read_bytes(path, resolved)

    def replace_file(self, path: str, raw: bytes, *, keep: int) -> Replaced:
        """``fs/write_text_file``: ``raw`` becomes the file at the absolute ``path``,
        atomically — a temporary file in its directory renamed over it, both by the
        descriptor of that directory (walked from the root, no link followed), which must
        exist. An existing file must be a regular file with one link; its mode is kept, and
        its bytes (at most ``keep``) are read through the same descriptor first, so the
        "before" of the changeset is the very file replaced.
        """
        with _translated(path):
            resolved = confine_path(path, self.roots, self.forbidden)
            if self._is_root(resolved):
                raise InvalidParams(f"{path} is a directory")
            with self._parent(path, resolved, hint="") as parent:
                try:
                    before: os.stat_result | None = os.stat(
                        resolved.name, dir_fd=parent, follow_symlinks=False
                    )
                except FileNotFoundError:
                    before = None
                old: bytes | None = None
                if before is not None:
                    _require_regular(path, before)
                    old = _head(parent, resolved, path, before, keep)
                self._replace(parent, resolved.name, raw, before)
        return Replaced(resolved, before is not None, old)

    # -- resourceRequest --------------------------------------------------------------------

    def request(self, uri: str) -> Path:
        """``resourceRequest``: granted (the path) if ``uri`` lies inside the roots, else -32009.

        Every root is readable and writable to every initialized client, so
        ``read``/``write`` ask for nothing more; the URI need not exist yet.
        """
        return self._path(uri)


def _temporary(parent: int, name: str, mode: int = 0o600) -> tuple[int, str]:
    """A new empty file beside ``name`` in ``parent`` (``O_EXCL``, ``mode`` less the umask):
    fd and name."""
    while True:
        temporary = f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            return os.open(temporary, flags, mode, dir_fd=parent), temporary
        except FileExistsError:
            continue


def _read_at_most(fd: int, size: int) -> bytes:
    """Up to ``size`` bytes from ``fd`` (fewer only at its end)."""
    chunks: list[bytes] = []
    total = 0
    while total < size:
        chunk = os.read(fd, min(_CHUNK, size - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def _head(parent: int, path: Path, uri: str, before: os.stat_result, keep: int) -> bytes | None:
    """The bytes of the file ``path.name`` in ``parent`` (the one ``before`` describes), or
    ``None`` when it holds more than ``keep``."""
    fd = os.open(path.name, os.O_RDONLY | _OPEN_FLAGS, dir_fd=parent)
    try:
        _check_opened(fd, path, uri, before)
        raw = _read_at_most(fd, keep + 1)
    finally:
        os.close(fd)
    return None if len(raw) > keep else raw


def _entries(fd: int) -> list[str]:
    with os.scandir(fd) as scan:
        return [entry.name for entry in scan]


def _remove_tree(parent: int, name: str) -> None:
    """``rm -r`` of the directory ``name`` in ``parent``, by descriptors: a link met is
    removed as a link, never followed (``ELOOP`` if the directory itself became one)."""
    with _directory(parent, name) as fd:
        for entry in _entries(fd):
            st = os.stat(entry, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                _remove_tree(fd, entry)
            else:
                os.unlink(entry, dir_fd=fd)
    os.rmdir(name, dir_fd=parent)


@contextlib.contextmanager
def _directory(parent: int, name: str) -> Iterator[int]:
    """The directory ``name`` of ``parent``, opened by descriptor (no link followed)."""
    fd = open_beneath(parent, name, _DIRECTORY)
    try:
        yield fd
    finally:
        os.close(fd)


def _check_tree(uri: str, fd: int) -> None:
    """-32009 when the tree at ``fd`` holds a device, FIFO, socket, or a file with several
    hard links (walked by descriptors, links not followed)."""
    for name in _entries(fd):
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            with _directory(fd, name) as sub:
                _check_tree(uri, sub)
        elif stat.S_ISREG(st.st_mode):
            if st.st_nlink > 1:
                raise _denied(f"{uri} holds {name!r}, a file with several hard links: not copied")
        elif not stat.S_ISLNK(st.st_mode):
            raise _denied(f"{uri} holds {name!r}, a device, FIFO or socket: it is not copied")


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _copy_into(uri: str, fd: int, st: os.stat_result, parent: int, name: str) -> None:
    """Copy the file or directory open at ``fd`` (``st``) to the new entry ``name`` in
    ``parent``: content, mode and times; a tree's links as links."""
    if stat.S_ISDIR(st.st_mode):
        os.mkdir(name, 0o700, dir_fd=parent)
        with _directory(parent, name) as copy:
            for entry in _entries(fd):
                _copy_entry(uri, fd, entry, copy, entry)
            os.fchmod(copy, stat.S_IMODE(st.st_mode))
            os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns))
        return
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    out = os.open(name, flags, 0o600, dir_fd=parent)
    try:
        while chunk := os.read(fd, _CHUNK):
            _write_all(out, chunk)
        os.fchmod(out, stat.S_IMODE(st.st_mode))
        os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
    finally:
        os.close(out)


def _copy_entry(uri: str, parent: int, name: str, into: int, new: str) -> None:
    """Copy the entry ``name`` of ``parent`` to ``new`` in ``into``: a link as a link, a file or
    a directory opened (no link followed) and checked to be what was seen."""
    st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(name, dir_fd=parent), new, dir_fd=into)
        return
    if stat.S_ISDIR(st.st_mode):
        fd = open_beneath(parent, name, _DIRECTORY)
    elif stat.S_ISREG(st.st_mode):
        fd = open_beneath(parent, name, os.O_RDONLY | os.O_NONBLOCK)
    else:
        raise _denied(f"{uri} holds {name!r}, a device, FIFO or socket: it is not copied")
    try:
        opened = os.fstat(fd)
        if not _same(opened, st) or (stat.S_ISREG(st.st_mode) and opened.st_nlink > 1):
            raise _denied(f"{uri}: {name!r} changed while it was being copied")
        _copy_into(uri, fd, opened, into, new)
    finally:
        os.close(fd)


def _move_across(uri: str, parent: int, name: str, st: os.stat_result, into: int, new: str) -> None:
    """A move to another file system: copy the entry by descriptors, then delete it."""
    if stat.S_ISDIR(st.st_mode):
        with _directory(parent, name) as fd:
            _check_tree(uri, fd)
    _copy_entry(uri, parent, name, into, new)
    if stat.S_ISDIR(st.st_mode):
        _remove_tree(parent, name)
    else:
        os.unlink(name, dir_fd=parent)
