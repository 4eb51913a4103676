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

**Signed** (``cluster.secret``): every message a node publishes — and the
primary's record in JetStream — is ``<mac><message>``, the MAC being 32
bytes of HMAC-SHA256 over the subject, a newline and the message, under a
key derived from the cluster's secret and name (:class:`Signer`). A
receiver drops what does not verify (``hmac.compare_digest``): without the
secret, a client of the NATS server can neither forge nor alter a message,
nor move one to another subject (another edge's, another epoch's). An open
also carries ``<stamp> <nonce>`` (the sender's clock in ms, 16 random bytes
in hex) and the primary refuses one older or newer than ``OPEN_MAX_AGE`` by
its own clock, or whose nonce it has seen (:class:`OpenGuard`): a captured
open cannot be replayed. Other messages need no nonce: ``n`` numbers them
per connection and a receiver drops a number it has seen (NATS never
repeats a message), and an edge numbers its connections from a random
48-bit start each time it starts, so a replayed message names a number
already seen or a connection that no longer exists: never a new command.

Message body: a header line ``<kind><conn> <n> [<epoch>]\\n``, then the
payload. Kinds:

* ``o`` open (edge → primary; payload: the user, a newline, ``1`` for an
  admin; signed, ``<stamp> <nonce>`` and a newline before them);
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

import hashlib
import heapq
import hmac
import re
from dataclasses import dataclass, field

__all__ = [
    "BUCKET",
    "CLOSE_INVALID_DATA",
    "CLOSE_POLICY",
    "CLOSE_PRIMARY_GONE",
    "CLOSE_RELAY_GAP",
    "CLOSE_TOO_BIG",
    "CLOSE_TRY_AGAIN",
    "FROM_EDGE",
    "MAC_BYTES",
    "OPEN_MAX_AGE_MS",
    "OpenGuard",
    "Pieces",
    "Signer",
    "Subjects",
    "decode",
    "encode",
    "fresh_open",
    "pack_frames",
    "parse_fresh_open",
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
#: RFC 6455 "policy violation": a relayed open the primary refuses to serve
#: (no identity, or a user it does not know, in multi-user mode).
CLOSE_POLICY = 1008
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

    def owner(self, node: str, edge: str) -> str:
        """Sharded mode: where node ``edge`` forwards its clients' requests for ``node``'s
        sessions (``transport/routing.py``)."""
        return f"ahp.{self.cluster}.o.{node}.{edge}"

    def owner_all(self, node: str) -> str:
        return f"ahp.{self.cluster}.o.{node}.*"

    def routed(self, edge: str) -> str:
        """Sharded mode: where owners answer node ``edge``'s forwarded requests."""
        return f"ahp.{self.cluster}.r.{edge}"

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

    @property
    def record(self) -> str:
        """The subject JetStream keeps the primary record under: what its MAC covers."""
        return f"$KV.{BUCKET}.{self.primary_key}"


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


#: Bytes of the MAC in front of every signed message (HMAC-SHA256).
MAC_BYTES = 32


class Signer:
    """Signs and checks bus messages: HMAC-SHA256 over the subject and the message.

    The key is derived from the cluster's secret and its name (clusters that
    share a NATS server and, wrongly, a secret still cannot talk to each
    other). HMAC as RFC 2104 defines it — the same MAC as ``hmac.digest(key,
    subject + b"\\n" + message, "sha256")`` — with its two keyed SHA-256
    states made once: a message costs two hashes, not a key set-up as well
    (half of ``hmac.digest``'s time for a small frame).
    """

    __slots__ = ("_inner", "_outer")

    def __init__(self, secret: bytes, cluster: str) -> None:
        key = hmac.digest(secret, b"ahp-server cluster bus\n" + cluster.encode(), "sha256")
        block = key.ljust(64, b"\0")  # SHA-256's block
        self._inner = hashlib.sha256(bytes(byte ^ 0x36 for byte in block))
        self._outer = hashlib.sha256(bytes(byte ^ 0x5C for byte in block))

    def __repr__(self) -> str:  # never the key
        return "Signer(...)"

    def mac(self, subject: str, message: bytes) -> bytes:
        """The 32-byte MAC of ``message`` on ``subject``."""
        inner = self._inner.copy()
        inner.update(subject.encode() + b"\n" + message)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()

    def seal(self, subject: str, message: bytes) -> bytes:
        """``message`` signed for ``subject``: the MAC, then the message."""
        return self.mac(subject, message) + message

    def unseal(self, subject: str, data: bytes) -> bytes | None:
        """The message, if ``data`` was sealed for ``subject`` with this key; else None."""
        if len(data) < MAC_BYTES:
            return None
        message = data[MAC_BYTES:]
        if hmac.compare_digest(self.mac(subject, message), data[:MAC_BYTES]):
            return message
        return None


#: How far (ms) a signed open's stamp may be from the primary's clock, either
#: way; its nonce is remembered that long. Nodes' clocks must agree that well.
OPEN_MAX_AGE_MS = 30_000
_NONCE = re.compile(rb"[0-9a-f]{32}")


def fresh_open(identity: bytes, stamp_ms: int, nonce: bytes) -> bytes:
    """A signed open's payload: ``<stamp> <nonce>``, a newline, then the identity."""
    return b"%d %s\n%s" % (stamp_ms, nonce, identity)


def parse_fresh_open(payload: bytes) -> tuple[int, bytes, bytes] | None:
    """``(stamp_ms, nonce, identity)`` of a signed open's payload, or None."""
    head, sep, identity = payload.partition(b"\n")
    stamp_text, _, nonce = head.partition(b" ")
    if not sep or not stamp_text.isdigit() or len(stamp_text) > 15 or not _NONCE.fullmatch(nonce):
        return None
    return int(stamp_text), nonce, identity


class OpenGuard:
    """Which signed opens the primary accepts: fresh, and each once.

    An open is fresh when its stamp is within ``max_age_ms`` of this node's
    clock (the highest reading so far: a clock stepped back does not let an
    old open in again). Its nonce is remembered until the stamp is too old
    to pass anyway; a nonce seen before is a replay. Memory is bounded: past
    ``capacity`` nonces the one with the oldest stamp is let go, and from
    then on no open stamped at or before it is accepted (its replay would
    no longer be recognized), so under a flood of opens the window narrows
    instead of the memory growing.
    """

    def __init__(self, max_age_ms: int = OPEN_MAX_AGE_MS, capacity: int = 100_000) -> None:
        self.max_age_ms = max_age_ms
        self.capacity = capacity
        self._seen: set[bytes] = set()
        self._stamps: list[tuple[int, bytes]] = []  # a heap: the oldest stamp first
        self._floor = -1  # stamps at or below it are refused (their nonces were let go)
        self._now = 0

    def __len__(self) -> int:
        return len(self._seen)

    def admit(self, stamp_ms: int, nonce: bytes, now_ms: int) -> str | None:
        """None if the open is accepted (and its nonce remembered), else why not."""
        now = self._now = max(self._now, now_ms)
        oldest = now - self.max_age_ms
        stamps = self._stamps
        while stamps and stamps[0][0] < oldest:
            self._seen.discard(heapq.heappop(stamps)[1])
        if stamp_ms < oldest or stamp_ms <= self._floor:
            return "stale"
        if stamp_ms > now + self.max_age_ms:
            return "from the future"
        if nonce in self._seen:
            return "replayed"
        if len(stamps) >= self.capacity:
            let_go, forgotten = heapq.heappop(stamps)
            self._seen.discard(forgotten)
            self._floor = max(self._floor, let_go)
            if stamp_ms <= self._floor:
                return "stale"
        heapq.heappush(stamps, (stamp_ms, nonce))
        self._seen.add(nonce)
        return None
