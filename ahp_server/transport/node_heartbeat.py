"""A sharded node's heartbeat on the bus: its load told to the others, and proof it is heard.

Layer: transport (nats-py and the signed messages of ``relay_format.py``; no
host or protocol types). Issue 32, docs/scale-out.md "Failure cases": *a
node renews its lease only while it hears its own heartbeat on the bus*.

A node cut off from NATS but still on PostgreSQL would otherwise keep
renewing its node lease and keep its sessions, while no other node can reach
it: their clients' requests to it time out and its commits reach the others
only by repair. :class:`NodeHeartbeat` publishes a signed beat on
``ahp.<cluster>.hb.<node>`` every ``period`` seconds and listens to every
node's; :meth:`NodeHeartbeat.heard_within` says whether its *own* beat came
back recently — the round trip through the bus. ``store/membership.py`` takes
that as its gate: no renewal and no takeover without it, so a partitioned
node's lease runs out and the others take its sessions over (fencing its
commits by epoch).

A beat is ``{"node", "n", "sessions", "turns", "seq", "incarnation", "leaving"}``
(JSON): its number in this process and the process's random ``incarnation`` (an
own beat counts only if it is this process's and its number is above the last
one heard, so a replayed beat cannot keep a cut-off node renewing), the load
placement reads and the node's delivered watermark. What does not verify, does not
parse, or names another node than its subject is dropped (counted in
:attr:`NodeHeartbeat.dropped`). At most :data:`MAX_PEERS` nodes are
remembered, the oldest forgotten first.

**Leaving** (docs/scale-out.md "A graceful stop announced"). A node
stopping gracefully sends one last beat with ``leaving`` (:meth:`NodeHeartbeat.leave`,
after its lease was drained), so the others take it for gone at once instead of
after a lease of silence (:meth:`NodeHeartbeat.left`; ``on_leaving`` is told).
Like every beat it counts only if it verifies: a forged one evicts nobody. The
incarnation that left is remembered (:data:`MAX_DEPARTED`): its beats, replayed
later, are dropped, so a captured leaving beat cannot evict the node's next
process, and a replayed older beat cannot bring a node that left back. A node
restarted under the same name beats under a new incarnation, which undoes the
leaving with its first beat (before its ``hello`` notice, ``transport/notices.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import structlog
from nats.errors import Error as NatsError

from ahp_server.transport.relay import BusWarnings, send, unsealed
from ahp_server.transport.relay_format import Signer

__all__ = ["MAX_PEERS", "Beat", "NodeHeartbeat", "fitting_roots", "heartbeat_subject"]

log = structlog.get_logger(__name__)

_Nats = Any  # nats.aio.client.Client
_Msg = Any

#: Nodes a heartbeat remembers (a cluster is far smaller; the bound keeps memory fixed).
MAX_PEERS = 1_024
#: The largest beat accepted: a node name, a few numbers and its roots
#: (:data:`MAX_BEAT_ROOTS_BYTES`) fit in it.
MAX_BEAT_BYTES = 16_384
#: The most a beat's ``roots`` may take (their JSON): a node with more, or longer,
#: declares the first that fit (the folder suggestions are suggestions).
MAX_BEAT_ROOTS_BYTES = 12_288
#: Incarnations that left (node, incarnation) remembered, the oldest forgotten first.
MAX_DEPARTED = 4 * MAX_PEERS


class Beat(msgspec.Struct, frozen=True):
    """One node's heartbeat: its name, its load, its delivered watermark; the process
    (``incarnation``) that sent it, whether it is that process's last (``leaving``), and
    the workspace roots it serves (absolute paths; :func:`fitting_roots`)."""

    node: str
    n: int = 0
    sessions: int = 0
    turns: int = 0
    seq: int = 0
    incarnation: str = ""
    leaving: bool = False
    roots: tuple[str, ...] = ()


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(Beat).decode


def fitting_roots(roots: Sequence[str]) -> tuple[str, ...]:
    """The first of ``roots`` whose JSON fits :data:`MAX_BEAT_ROOTS_BYTES`, in order."""
    kept: list[str] = []
    size = 2
    for root in roots:
        size += len(_encode(root)) + 1
        if size > MAX_BEAT_ROOTS_BYTES:
            break
        kept.append(root)
    return tuple(kept)


def heartbeat_subject(cluster: str, node: str) -> str:
    return f"ahp.{cluster}.hb.{node}"


class NodeHeartbeat:
    """Publishes this node's beat every ``period`` seconds; hears everyone's.

    ``beat()`` makes the beat to send (the node's load at that moment).
    ``on_leaving(node)`` is told when another node says it leaves.
    ``clock`` is monotonic seconds (injected for tests of the arithmetic).
    """

    def __init__(
        self,
        nats: _Nats,
        cluster: str,
        node: str,
        signer: Signer | None,
        *,
        period: float,
        beat: Callable[[], Beat] | None = None,
        on_leaving: Callable[[str], None] = lambda node: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if period <= 0:
            raise ValueError("period must be positive")
        self._nc = nats
        self._cluster = cluster
        self.node = node
        self._subject = heartbeat_subject(cluster, node)
        self._signer = signer
        self.period = period
        self._beat = beat or (lambda: Beat(node=node))
        self._on_leaving = on_leaving
        #: This process's life under the node's name: its beats carry it.
        self.incarnation = secrets.token_hex(8)
        #: Incarnations that said they left: their beats count for nothing.
        self._departed: OrderedDict[tuple[str, str], None] = OrderedDict()
        #: The number of the last beat sent, and of the last own beat heard back.
        self._n = 0
        self._own_n = 0
        self._clock = clock
        #: When this node last heard its own beat back (monotonic), ``None``: never.
        self.own_heard_at: float | None = None
        #: Every other node heard: its last beat and when (least recently heard first).
        self.peers: OrderedDict[str, tuple[Beat, float]] = OrderedDict()
        #: Beats sent, and messages dropped (unsigned, malformed, misnamed).
        self.sent = 0
        self.dropped = 0
        self._warnings = BusWarnings()
        self._sub: Any = None
        self._task: asyncio.Task[None] | None = None

    def heard_within(self, seconds: float) -> bool:
        """Whether this node's own beat came back through the bus in the last ``seconds``."""
        heard = self.own_heard_at
        return heard is not None and self._clock() - heard <= seconds

    def live_peers(self, within: float) -> dict[str, Beat]:
        """The other nodes heard in the last ``within`` seconds, with their last beat;
        not those whose last beat said they leave."""
        now = self._clock()
        return {
            name: beat
            for name, (beat, at) in self.peers.items()
            if now - at <= within and not beat.leaving
        }

    def left(self, node: str) -> bool:
        """Whether ``node``'s last beat heard said it leaves (and none came since)."""
        heard = self.peers.get(node)
        return heard is not None and heard[0].leaving

    async def start(self) -> None:
        """Listen to every node's beats, then beat every ``period`` (the first at once)."""
        self._sub = await self._nc.subscribe(
            heartbeat_subject(self._cluster, "*"), cb=self._on_message
        )
        self._task = asyncio.get_running_loop().create_task(self._run(), name="ahp-heartbeat")

    async def leave(self) -> None:
        """Stop beating and send this process's last beat, ``leaving``: the others take
        this node for gone at once (a graceful stop, once its lease is drained)."""
        await self._stop_beating()
        self._n += 1
        last = msgspec.structs.replace(
            self._beat(), node=self.node, n=self._n, incarnation=self.incarnation, leaving=True
        )
        try:
            await send(self._nc, self._subject, _encode(last), self._signer)
            await self._nc.flush(timeout=max(self.period, 1.0))
        except (NatsError, TimeoutError) as error:  # the others find it silent after a lease
            self._warnings.warn("leaving beat not sent", error=str(error))

    async def aclose(self) -> None:
        await self._stop_beating()
        sub, self._sub = self._sub, None
        if sub is not None:
            with contextlib.suppress(Exception):  # the connection may be closed already
                await sub.unsubscribe()

    async def _stop_beating(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            try:
                self._n += 1
                beat = msgspec.structs.replace(
                    self._beat(), node=self.node, n=self._n, incarnation=self.incarnation
                )
                await send(self._nc, self._subject, _encode(beat), self._signer)
                self.sent += 1
            except NatsError as error:  # the bus is away: it reconnects by itself
                self._warnings.warn("heartbeat not sent", error=str(error))
            await asyncio.sleep(self.period)

    async def _on_message(self, msg: _Msg) -> None:
        subject: str = msg.subject
        data = unsealed(self._signer, self._warnings, subject, msg.data)
        if data is None or len(data) > MAX_BEAT_BYTES:
            self.dropped += 1
            return
        try:
            beat = _decode(data)
        except msgspec.DecodeError:
            self.dropped += 1
            return
        if heartbeat_subject(self._cluster, beat.node) != subject:
            self.dropped += 1  # a beat for one node replayed on another's subject
            return
        now = self._clock()
        if beat.node == self.node:
            # Another process's beat, or an older one (replayed, or late), proves nothing now.
            if beat.incarnation == self.incarnation and beat.n > self._own_n:
                self._own_n = beat.n
                self.own_heard_at = now
            return
        process = (beat.node, beat.incarnation)
        if process in self._departed:
            self.dropped += 1  # a process that left: its beats, replayed, count for nothing
            return
        if beat.leaving:
            self._departed[process] = None
            while len(self._departed) > MAX_DEPARTED:
                self._departed.popitem(last=False)
        self.peers.pop(beat.node, None)
        self.peers[beat.node] = (beat, now)
        while len(self.peers) > MAX_PEERS:
            self.peers.popitem(last=False)
        if beat.leaving:
            log.info("node leaving", node=beat.node)
            try:
                self._on_leaving(beat.node)
            except Exception:
                log.exception("on_leaving failed", node=beat.node)
