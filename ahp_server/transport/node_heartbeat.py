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

A beat is ``{"node", "n", "sessions", "turns", "seq"}`` (JSON): its number in
this process (an own beat counts only if its number is above the last one
heard, so a replayed beat cannot keep a cut-off node renewing), the load
placement reads and the node's delivered watermark. What does not verify, does not
parse, or names another node than its subject is dropped (counted in
:attr:`NodeHeartbeat.dropped`). At most :data:`MAX_PEERS` nodes are
remembered, the oldest forgotten first.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import msgspec
import structlog
from nats.errors import Error as NatsError

from ahp_server.transport.relay import BusWarnings, send, unsealed
from ahp_server.transport.relay_format import Signer

__all__ = ["MAX_PEERS", "Beat", "NodeHeartbeat", "heartbeat_subject"]

log = structlog.get_logger(__name__)

_Nats = Any  # nats.aio.client.Client
_Msg = Any

#: Nodes a heartbeat remembers (a cluster is far smaller; the bound keeps memory fixed).
MAX_PEERS = 1_024
#: The largest beat accepted: a node name and three numbers fit in far less.
MAX_BEAT_BYTES = 1_024


class Beat(msgspec.Struct, frozen=True):
    """One node's heartbeat: its name, its load, its delivered watermark."""

    node: str
    n: int = 0
    sessions: int = 0
    turns: int = 0
    seq: int = 0


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(Beat).decode


def heartbeat_subject(cluster: str, node: str) -> str:
    return f"ahp.{cluster}.hb.{node}"


class NodeHeartbeat:
    """Publishes this node's beat every ``period`` seconds; hears everyone's.

    ``beat()`` makes the beat to send (the node's load at that moment).
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
        """The other nodes heard in the last ``within`` seconds, with their last beat."""
        now = self._clock()
        return {name: beat for name, (beat, at) in self.peers.items() if now - at <= within}

    async def start(self) -> None:
        """Listen to every node's beats, then beat every ``period`` (the first at once)."""
        self._sub = await self._nc.subscribe(
            heartbeat_subject(self._cluster, "*"), cb=self._on_message
        )
        self._task = asyncio.get_running_loop().create_task(self._run(), name="ahp-heartbeat")

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        sub, self._sub = self._sub, None
        if sub is not None:
            with contextlib.suppress(Exception):  # the connection may be closed already
                await sub.unsubscribe()

    async def _run(self) -> None:
        while True:
            try:
                self._n += 1
                beat = msgspec.structs.replace(self._beat(), node=self.node, n=self._n)
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
            if beat.n > self._own_n:  # an older beat (replayed, or late) proves nothing now
                self._own_n = beat.n
                self.own_heard_at = now
            return
        self.peers.pop(beat.node, None)
        self.peers[beat.node] = (beat, now)
        while len(self.peers) > MAX_PEERS:
            self.peers.popitem(last=False)
