"""The sharded feed's records: pure, no I/O.

Layer: transport (a leaf, like ``relay_format.py``; ``feed.py`` does the I/O).
docs/scale-out.md, "Sharded mode (design)", "Routing" and "One ``serverSeq``".

A **record** is one committed batch, or a contiguous part of one: the first
``serverSeq`` ``first``, the number of envelopes ``count``, and the envelopes
numbered ``first..first+count-1`` in number order, each as stored (JSON
without ``serverSeq``, spliced in at delivery: :func:`spliced`). On the wire it
is MessagePack ``[first, count, [bytes, …]]``, signed like every bus message
(``relay_format.Signer``; the MAC is ``feed.py``'s business).

:func:`decode_record` never raises: what is not a record within
:class:`RecordLimits` is ``None``, and the reader drops it. :func:`split`
cuts a batch into records that fit one NATS message; an envelope too large
for any record is left out (the readers fill it in from the log).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import msgspec

from ahp_server.store.base import spliced  # re-exported: readers splice with it

__all__ = ["RecordLimits", "decode_record", "encode_record", "record_size", "spliced", "split"]

_RECORD = msgspec.msgpack.Decoder(tuple[int, int, list[bytes]])
#: MessagePack's overhead at most: the array and two 64-bit integers; a list header.
_HEAD = 1 + 9 + 9 + 5
#: Per envelope: a ``bin 32`` header.
_ITEM = 5


@dataclass(frozen=True, slots=True)
class RecordLimits:
    """What a reader accepts: at most ``max_count`` envelopes and ``max_bytes`` in all."""

    max_count: int = 65_536
    max_bytes: int = 8 * 1024 * 1024


def encode_record(first: int, envelopes: Sequence[bytes]) -> bytes:
    """One record: numbers ``first..first+len(envelopes)-1``."""
    if first < 1 or not envelopes:
        raise ValueError("a record holds at least one envelope, numbered from 1 up")
    return msgspec.msgpack.encode((first, len(envelopes), list(envelopes)))


def record_size(envelopes: Sequence[bytes]) -> int:
    """An upper bound of :func:`encode_record`'s length for ``envelopes``."""
    return _HEAD + sum(_ITEM + len(e) for e in envelopes)


def decode_record(data: bytes, limits: RecordLimits) -> tuple[int, list[bytes]] | None:
    """``(first, envelopes)``, or ``None`` for anything that is not a record within ``limits``."""
    if len(data) > limits.max_bytes:
        return None
    try:
        first, count, envelopes = _RECORD.decode(data)
    except (msgspec.DecodeError, ValueError, RecursionError, MemoryError):
        return None
    if first < 1 or not 1 <= count <= limits.max_count or count != len(envelopes):
        return None
    return first, envelopes


def split(
    first: int, envelopes: Sequence[bytes], limits: RecordLimits
) -> Iterator[tuple[int, list[bytes]]]:
    """A batch as records of at most ``limits`` each, in number order.

    An envelope that cannot fit any record is left out (its record ends before
    it and the next starts after it): the readers repair it from the log.
    """
    start = first
    part: list[bytes] = []
    size = _HEAD
    for n, envelope in enumerate(envelopes, first):
        item = _ITEM + len(envelope)
        if part and (size + item > limits.max_bytes or len(part) >= limits.max_count):
            yield start, part
            part, size = [], _HEAD
        if _HEAD + item > limits.max_bytes:
            continue  # too large for any record
        if not part:
            start = n
        part.append(envelope)
        size += item
    if part:
        yield start, part
