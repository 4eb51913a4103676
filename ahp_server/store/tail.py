"""The log's tail: recent commits of envelopes, appended to a file beside SQLite.

Layer: store (blocking file I/O, stdlib and msgspec only; no database, no
asyncio). The SQLite store (``sqlite.py``) uses it; nothing above the store
knows it exists.

Why: a commit that holds only envelopes — every delta of a stream, every
draft a client types — is the hot path of the store. In SQLite it is a WAL
transaction: about a dozen system calls (page writes, file locks), 40–80 µs
on the VM the benchmarks run on. Here it is one ``write()`` of a record:
in the OS page cache once the call returns, so it survives the process
being killed, which is the promise of ``synchronous=NORMAL`` (a power cut
may lose the last commits; see docs/durability.md). The store *folds* the
tail into the SQLite log later, in one transaction for many commits.

The file (``<database>-tail.<generation>``)::

    header  MAGIC, nonce (16 bytes), generation (u64),
            the previous file's nonce (16 bytes) and where it ended (u64)
    record  length (u32), CRC-32 of kind + payload (u32), kind (u8), payload

Record kinds:

* :data:`SEGMENTS` — one commit of envelopes: the log rows it adds, as a
  JSON array of ``[channel, first serverSeq, last serverSeq, entries]``;
* :data:`BARRIER` — a commit of other writes (a snapshot, a turn, a
  deletion) went into SQLite directly, numbered (u64). The database
  remembers the number of the last one it holds and where the tail stood
  (``meta.tail``, :class:`Position`). A barrier numbered above it means the
  database lacks that commit — a restored backup, or a power cut that lost
  the end of SQLite's WAL but not the tail — and nothing after it may be
  applied: replay stops there, so what is applied is always a prefix of
  what was committed.

Replay (:func:`replay`) starts at the database's position, follows the
files in generation order while each continues exactly where the previous
one ended, and stops at the first torn or corrupt record, a barrier the
database lacks, or a file that does not continue the chain.
"""

from __future__ import annotations

import os
import secrets
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

__all__ = [
    "BARRIER",
    "HEADER_SIZE",
    "SEGMENTS",
    "Position",
    "Replay",
    "TailFile",
    "files",
    "replay",
]

MAGIC = b"AHPTAIL1"
_HEADER = struct.Struct("<8s16sQ16sQ")
_RECORD = struct.Struct("<IIB")
HEADER_SIZE = _HEADER.size

SEGMENTS = 1
BARRIER = 2
_BARRIER = struct.Struct("<Q")

#: A segment row: (channel, first serverSeq, last serverSeq, entries JSON).
SegmentRow = tuple[str, int, int, bytes]
_ENCODE = msgspec.json.Encoder()
_DECODE = msgspec.json.Decoder(list[tuple[str, int, int, msgspec.Raw]])


@dataclass(frozen=True)
class Position:
    """Where the database stands in the tail: all before ``offset`` of file ``generation``
    (named by its ``nonce``) is in it, and barriers up to ``barrier``."""

    generation: int
    nonce: bytes
    offset: int
    barrier: int

    def encode(self) -> str:
        return f"{self.generation} {self.nonce.hex()} {self.offset} {self.barrier}"

    @classmethod
    def decode(cls, text: str) -> Position:
        generation, nonce, offset, barrier = text.split()
        return cls(int(generation), bytes.fromhex(nonce), int(offset), int(barrier))


def path_of(database: Path, generation: int) -> Path:
    return database.with_name(f"{database.name}-tail.{generation:08d}")


def files(database: Path) -> list[tuple[int, Path]]:
    """The tail files beside ``database``, by generation."""
    prefix = f"{database.name}-tail."
    found = []
    for entry in database.parent.iterdir():
        suffix = entry.name[len(prefix) :]
        if entry.name.startswith(prefix) and suffix.isdigit():
            found.append((int(suffix), entry))
    return sorted(found)


def encode_segments(rows: list[SegmentRow]) -> bytes:
    return _ENCODE.encode([(c, f, z, msgspec.Raw(e)) for c, f, z, e in rows])


def _decode_segments(payload: bytes) -> list[SegmentRow]:
    return [(c, f, z, bytes(e)) for c, f, z, e in _DECODE.decode(payload)]


def _frame(kind: int, payload: bytes) -> bytes:
    crc = zlib.crc32(payload, zlib.crc32(bytes((kind,))))  # of kind + payload, uncopied
    return _RECORD.pack(len(payload), crc, kind) + payload


class TailFile:
    """The tail file the store appends to (one at a time; the event loop's only)."""

    def __init__(self, path: Path, generation: int, nonce: bytes, fd: int, size: int) -> None:
        self.path = path
        self.generation = generation
        self.nonce = nonce
        self._fd = fd
        #: Bytes written so far: where the next record goes.
        self.size = size

    @classmethod
    def create(
        cls, database: Path, generation: int, previous: tuple[bytes, int], *, sync: bool
    ) -> TailFile:
        """A new, empty tail file continuing ``previous`` (its nonce and where it ended).

        With ``sync``, the file and its directory entry reach the disk before
        this returns (at open, where the database is about to name it).
        """
        path = path_of(database, generation)
        nonce = secrets.token_bytes(16)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC
        fd = os.open(path, flags, 0o644)  # as SQLite creates its files (less the umask)
        tail = cls(path, generation, nonce, fd, 0)
        try:
            tail._write(_HEADER.pack(MAGIC, nonce, generation, *previous))
            if sync:
                os.fsync(fd)
                directory = os.open(path.parent, os.O_RDONLY)
                try:
                    os.fsync(directory)
                finally:
                    os.close(directory)
        except OSError:
            tail.close()
            raise
        return tail

    def position(self, barrier: int) -> Position:
        """Where a database holding all of this file so far (and barriers to ``barrier``) stands."""
        return Position(self.generation, self.nonce, self.size, barrier)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:  # a regular file takes it all but on a full disk (which raises)
            view = view[os.write(self._fd, view) :]
        self.size += len(data)

    def append_segments(self, rows: list[SegmentRow]) -> int:
        """Append one commit of envelopes; returns its size in bytes. One ``write()``."""
        record = _frame(SEGMENTS, encode_segments(rows))
        self._write(record)
        return len(record)

    def append_barrier(self, number: int) -> None:
        self._write(_frame(BARRIER, _BARRIER.pack(number)))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


@dataclass
class _Scan:
    nonce: bytes
    generation: int
    previous: tuple[bytes, int]
    #: (kind, payload, offset after the record), in file order.
    records: list[tuple[int, bytes, int]]
    #: Where the valid records end (a torn or corrupt one, or the end of the file).
    end: int
    #: The file's size.
    size: int


def _scan(path: Path) -> _Scan | None:
    """Read a tail file's valid records; ``None`` if it has no valid header."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:  # deleted since it was listed (backup beside a running host)
        return None
    if len(data) < HEADER_SIZE:
        return None
    magic, nonce, generation, prev_nonce, prev_end = _HEADER.unpack_from(data)
    if magic != MAGIC:
        return None
    records: list[tuple[int, bytes, int]] = []
    offset = HEADER_SIZE
    while offset + _RECORD.size <= len(data):
        length, crc, kind = _RECORD.unpack_from(data, offset)
        start = offset + _RECORD.size
        payload = data[start : start + length]
        if len(payload) < length or zlib.crc32(bytes((kind,)) + payload) != crc:
            break
        offset = start + length
        records.append((kind, payload, offset))
    return _Scan(nonce, generation, (prev_nonce, prev_end), records, offset, len(data))


@dataclass
class Replay:
    """What :func:`replay` found beyond the database's position."""

    #: Log rows to add, in commit order.
    rows: list[SegmentRow] = field(default_factory=list)
    #: Files the database no longer needs once the rows are in it (durably).
    consumed: list[Path] = field(default_factory=list)
    #: Files not applied to their end, and why: to be set aside, never replayed
    #: again (those that do not continue the chain, and the one replay stopped in).
    foreign: list[tuple[Path, str]] = field(default_factory=list)
    #: The highest generation seen or named (a new file takes the next).
    generation: int = 0
    #: Where the database stands once ``rows`` are in it (``None``: where it stood).
    reached: Position | None = None
    #: Why replay stopped early (a torn record, a barrier, a gap), if it did.
    stopped: str | None = None


def replay(database: Path, position: Position | None) -> Replay:
    """The commits in the tail files beside ``database`` that the database lacks.

    Reads only; the caller applies ``rows``, and deletes or sets aside files.
    """
    result = Replay()
    found = files(database)
    result.generation = max([g for g, _ in found] + [position.generation if position else 0])
    if position is None:
        # A database that never had a tail (or a backup, which drops it):
        # whatever files are here are not its own.
        result.foreign = [(p, "the database has no tail position") for _, p in found]
        return result
    # (nonce, offset) where the chain stands: the next file must say it follows there.
    reached = (position.nonce, position.offset)
    for generation, path in found:
        if generation < position.generation:
            result.consumed.append(path)  # folded before the database named a later file
            continue
        if result.stopped is not None:
            result.foreign.append((path, result.stopped))
            continue
        scan = _scan(path)
        if scan is None or scan.generation != generation:
            result.stopped = f"{path.name} has no valid header"
            result.foreign.append((path, result.stopped))
            continue
        if generation == position.generation:
            if scan.nonce != position.nonce:
                result.stopped = f"{path.name} is not the file the database names"
                result.foreign.append((path, result.stopped))
                continue
            start = position.offset
            # What the database holds may run past a torn end: a power cut can
            # lose the file's last records but not the fold of them.
            reached = (scan.nonce, max(start, scan.end))
        elif scan.previous == reached:
            start = HEADER_SIZE
            reached = (scan.nonce, scan.end)
        else:
            # (The database's own file may be gone: all of it was folded, or
            # a power cut lost a file created since. The next one still
            # continues it if it starts where the database stands.)
            result.stopped = f"{path.name} does not continue where the tail stood"
            result.foreign.append((path, result.stopped))
            continue
        applied = start
        for kind, payload, end in scan.records:
            if end <= start:
                continue
            if kind == SEGMENTS:
                result.rows.extend(_decode_segments(payload))
            elif kind == BARRIER:
                if _BARRIER.unpack(payload)[0] > position.barrier:
                    result.stopped = f"{path.name}: a later commit is missing from the database"
                    break
            else:
                result.stopped = f"{path.name}: unknown record kind {kind}"
                break
            applied = end
        else:
            if scan.end >= start and scan.end < scan.size:
                result.stopped = f"{path.name}: torn or corrupt record at byte {scan.end}"
        result.reached = Position(generation, scan.nonce, applied, position.barrier)
        if result.stopped is None:
            result.consumed.append(path)
        else:  # kept for whoever wants to look; what came before the stop is applied
            result.foreign.append((path, result.stopped))
    return result
