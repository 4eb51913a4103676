"""The cluster relay's subjects and message format: pure, no I/O.

Layer: transport (a leaf: bytes in, bytes out; ``relay.py`` does the I/O).
docs/scale-out.md.

Subjects (core NATS; relayed frames are as ephemeral as socket bytes — what
must survive lives in PostgreSQL, committed before it is sent):

All subjects start ``ahp.<cluster>.`` (``cluster.name``: clusters may share a
NATS server); below, that prefix is left out.

* ``p.<epoch>.<edge>`` — edge → primary of lease epoch ``<epoch>``. A
  primary listens only on its own epoch: an edge never reaches a deposed one.
* ``e.<edge>`` — primary → edge; every message names the primary's epoch
  and an edge drops a message of any other epoch than its connection's.
* ``hb.primary`` — the primary's heartbeat (``<node> <epoch>``): how edges
  find it, and notice it is gone. ``hb.edge`` — each edge's (``<node>``):
  a primary drops the connections of an edge it has not heard from.

Message body: a header line ``<kind><conn> <n> [<epoch>]\\n``, then the
payload. Kinds:

* ``o`` open (edge → primary; payload: the user, a newline, ``1`` for an admin);
* ``t`` a text frame, ``b`` a binary frame (edge → primary);
* ``f`` frames (primary → edge; each as ``<length>\\n<bytes>``: frames may
  hold newlines);
* ``g`` the same frames for several clients of one edge (primary → edge;
  payload: ``<conn>:<n>,…\\n`` then the packed frames): a fanned-out
  envelope crosses the bus once per edge (``relay.EdgeLink``);
* ``x`` close (payload: ``<code> <reason>``; ``n`` 0: "this connection is
  unknown here", close with 1012);
* ``k`` a piece of the next message's payload: a payload over the server's
  ``max_payload`` (1 MiB by default; a client frame may be 4 MiB, a snapshot
  more) goes as ``k`` pieces and the message itself with the last piece; the
  receiver joins them, bounded (a client frame: ``server.max_message_bytes``;
  towards a client: its outbox).

``n`` numbers one connection's messages in each direction from 1: NATS
delivers in order but drops messages for a slow subscriber, so a gap closes
that connection (1011 towards the primary's gateway, 1012 to the client) —
the client reconnects and replays; nothing is silently lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "BUCKET",
    "CLOSE_INVALID_DATA",
    "CLOSE_PRIMARY_GONE",
    "CLOSE_RELAY_GAP",
    "CLOSE_TOO_BIG",
    "CLOSE_TRY_AGAIN",
    "FROM_EDGE",
    "Pieces",
    "Subjects",
    "decode",
    "encode",
    "pack_frames",
    "parse_primary",
    "same_frames",
    "sendable",
    "unpack_frames",
]

#: Close code an edge gives its relayed clients when the primary changes or
#: vanishes (RFC 6455 1012 "service restart": reconnect, possibly elsewhere).
CLOSE_PRIMARY_GONE = 1012
#: A relay lost frames of this connection (a NATS slow consumer): start over.
CLOSE_RELAY_GAP = 1011
CLOSE_TRY_AGAIN = 1013
#: RFC 6455: a text frame that is not UTF-8 (what websockets closes the door's sockets with).
CLOSE_INVALID_DATA = 1007
#: A relayed client frame over ``server.max_message_bytes``, as the door closes one.
CLOSE_TOO_BIG = 1009
#: The kinds an edge sends (a primary sends ``f``, ``g``, ``x`` and ``k``).
FROM_EDGE = frozenset("otbkx")


def sendable(code: int) -> bool:
    """A close code a close frame may carry (RFC 6455 §7.4)."""
    return code in (1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014) or (
        3000 <= code <= 4999
    )


def encode(kind: str, conn: int, n: int, payload: bytes, epoch: int | None = None) -> bytes:
    """One relay message: the header line, then ``payload``."""
    if epoch is None:
        return b"%s%d %d\n%s" % (kind.encode(), conn, n, payload)
    return b"%s%d %d %d\n%s" % (kind.encode(), conn, n, epoch, payload)


def decode(data: bytes) -> tuple[str, int, int, int | None, bytes]:
    """``(kind, conn, n, epoch, payload)``; ``ValueError`` for anything else."""
    head, sep, payload = data.partition(b"\n")
    if not sep or len(head) < 2:
        raise ValueError("not a relay message")
    parts = head[1:].split(b" ")
    if len(parts) not in (2, 3):
        raise ValueError("bad relay header")
    epoch = int(parts[2]) if len(parts) == 3 else None
    return chr(head[0]), int(parts[0]), int(parts[1]), epoch, payload


def pack_frames(frames: list[bytes]) -> bytes:
    """Frames as ``<length>\\n<bytes>`` each: frames may hold newlines (raw unknown JSON)."""
    return b"".join(b"%d\n%s" % (len(frame), frame) for frame in frames)


def unpack_frames(data: bytes) -> list[bytes]:
    frames: list[bytes] = []
    at = 0
    while at < len(data):
        end = data.index(b"\n", at)
        size = int(data[at:end])
        start = end + 1
        if size < 0 or start + size > len(data):
            raise ValueError("truncated frame")
        frames.append(data[start : start + size])
        at = start + size
    return frames


@dataclass(frozen=True, slots=True)
class Subjects:
    """The subjects of one cluster (``cluster.name``): clusters can share a NATS server."""

    cluster: str

    def primary(self, epoch: int, edge: str) -> str:
        return f"ahp.{self.cluster}.p.{epoch}.{edge}"

    def primary_all(self, epoch: int) -> str:
        return f"ahp.{self.cluster}.p.{epoch}.*"

    def edge(self, edge: str) -> str:
        return f"ahp.{self.cluster}.e.{edge}"

    @property
    def hb_primary(self) -> str:
        return f"ahp.{self.cluster}.hb.primary"

    @property
    def hb_edge(self) -> str:
        return f"ahp.{self.cluster}.hb.edge"

    @property
    def primary_key(self) -> str:
        """The key of this cluster's primary record (``<node> <epoch>``) in :data:`BUCKET`."""
        return f"{self.cluster}.primary"


#: The JetStream key-value bucket of every cluster's record of its primary.
BUCKET = "ahp"


def parse_primary(data: bytes) -> tuple[str, int] | None:
    """``<node> <epoch>`` (a heartbeat or the record), or None if it is not that."""
    try:
        node_text, epoch_text = data.decode().split(" ")
        return node_text, int(epoch_text)
    except ValueError:
        return None


@dataclass(slots=True)
class Pieces:
    """``k`` pieces received so far of one connection's next message (bounded)."""

    limit: int
    parts: list[bytes] = field(default_factory=list)
    size: int = 0

    def add(self, piece: bytes) -> bool:
        """Keep a piece; False when the message would exceed the limit."""
        self.size += len(piece)
        self.parts.append(piece)
        return self.size <= self.limit

    def join(self, last: bytes) -> bytes:
        if not self.parts:
            return last
        self.parts.append(last)
        data = b"".join(self.parts)
        self.parts, self.size = [], 0
        return data


def same_frames(a: list[bytes], b: list[bytes]) -> bool:
    """The same frames (the hub hands every subscriber the same frame object)."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
