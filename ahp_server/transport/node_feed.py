"""One sharded node's delivery: its own commits and every other owner's, in ``serverSeq`` order.

Layer: transport (asyncio; wires the store, the feed and the hub together).
docs/scale-out.md "Sharded mode (design)", "One ``serverSeq``: the commit
counter": every owner numbers its commits with the one counter, publishes
each committed batch on the feed, and every node delivers *all* numbers, once
each, in order — its own batches through the same ordered path as the
others', without the bus hop, so its own clients see the order everyone sees.

:class:`NodeFeed` takes over the :class:`~ahp_server.store.sharded.ShardedStore`'s
delivery (``on_batch``, ``on_after``): a committed batch is published
(:class:`~ahp_server.transport.feed.FeedPublisher`) and handed to the node's
:class:`~ahp_server.transport.feed.FeedReader` as local items; the reader
delivers each number once, in order — a local one by its callback
(``Hub._deliver_numbered``: its actor is told, its sender acknowledged),
another owner's by :meth:`Hub.deliver_remote <ahp_server.host.core.sequencer.Hub.deliver_remote>`.
Callbacks queued after this node's envelopes (``Store.after_queued``: a
refused dispatch's echo) run once every number this node committed before
them is delivered, so they never overtake the echo they follow.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable
from typing import Any

import structlog

from ahp_server.host.core.sequencer import Hub
from ahp_server.host.host import MetricFamily
from ahp_server.store.group import Callback
from ahp_server.store.ownership import LogReader
from ahp_server.store.sharded import Local, ShardedStore
from ahp_server.transport.feed import FeedPublisher, FeedReader
from ahp_server.transport.relay_format import Signer

__all__ = ["NodeFeed"]

log = structlog.get_logger(__name__)


class NodeFeed:
    """The feed of one sharded node: publish what it commits, deliver everything in order."""

    def __init__(
        self,
        hub: Hub,
        store: ShardedStore,
        nats: Any,
        log_reader: LogReader,
        cluster: str,
        signer: Signer | None,
        *,
        next_seq: int,
        grace: float = 0.05,
        stall: float = 5.0,
        poll_interval: float = 1.0,
        on_stall: Callable[[], None] = lambda: None,
    ) -> None:
        self.hub = hub
        self.store = store
        self.publisher = FeedPublisher(nats, cluster, signer)
        self.reader = FeedReader(
            nats,
            log_reader,
            cluster,
            signer,
            next_seq,
            self._deliver,
            grace=grace,
            stall=stall,
            poll_interval=poll_interval,
            on_stall=on_stall,
        )
        #: The highest number this node committed (0: none yet).
        self._mine = 0
        #: Callbacks waiting for this node's numbers up to the first element.
        self._waiting: deque[tuple[int, list[Callback]]] = deque()
        #: ``when``'s callbacks, by the number they wait for (a heap).
        self._when: list[tuple[int, int, Callable[[], None]]] = []
        self._order = itertools.count()
        store.on_batch = self._committed
        store.on_after = self._after_mine

    async def start(self) -> None:
        await self.reader.start()

    async def aclose(self) -> None:
        self.store.on_batch = None
        self.store.on_after = None
        await self.reader.aclose()
        await self.publisher.aclose()

    @property
    def next_seq(self) -> int:
        """The next number to deliver: the node's watermark is one less."""
        return self.reader.next_seq

    @property
    def delivered(self) -> int:
        """The node's watermark: every number up to it is delivered."""
        return self.reader.next_seq - 1

    def metrics(self) -> list[MetricFamily]:
        """The feed's counts for ``/metrics`` (docs/deploy.md "Sharded mode")."""
        stats = self.reader.stats
        return [
            (
                "ahp_feed_records_total",
                "counter",
                "Feed records heard that verified and decoded (other nodes' and this one's echo).",
                [("", stats.records)],
            ),
            (
                "ahp_feed_rejected_total",
                "counter",
                "Feed messages dropped: not signed with the cluster's key, or not a record.",
                [("", stats.rejected)],
            ),
            (
                "ahp_feed_delivered_total",
                "counter",
                "serverSeq numbers delivered in order, and of those read from the log "
                "(missing on the bus past cluster.feed_grace).",
                [('{via="any"}', stats.delivered), ('{via="log"}', stats.repaired)],
            ),
            (
                "ahp_feed_log_reads_total",
                "counter",
                "Range reads of the log to fill gaps, by outcome.",
                [('{outcome="ok"}', stats.repairs), ('{outcome="failed"}', stats.repair_failures)],
            ),
            (
                "ahp_feed_stalls_total",
                "counter",
                "Times delivery stayed blocked past cluster.feed_stall (clients closed with 1012).",
                [("", stats.stalls)],
            ),
            (
                "ahp_feed_delivered_seq",
                "gauge",
                "The node's watermark: every serverSeq up to it is delivered.",
                [("", self.delivered)],
            ),
        ]

    def when(self, seq: int, callback: Callable[[], None]) -> None:
        """Call ``callback`` once every number up to ``seq`` is delivered (now, if it is)."""
        if seq <= self.delivered:
            callback()
        else:
            heapq.heappush(self._when, (seq, next(self._order), callback))

    def _committed(self, first: int, batch: list[Local]) -> None:
        """On the loop, after a commit: publish it, and deliver it in order with the rest."""
        self.publisher.publish(first, [local.body for local in batch])
        self._mine = first + len(batch) - 1
        self.reader.local(first, batch)

    def _after_mine(self, callbacks: list[Callback]) -> None:
        if self.reader.next_seq > self._mine:
            _run(callbacks)
        else:
            self._waiting.append((self._mine, callbacks))

    def _deliver(self, seq: int, item: Any) -> None:
        if isinstance(item, Local):
            item.deliver(seq)
        else:
            self.hub.deliver_remote(seq, item)
        waiting = self._waiting
        while waiting and waiting[0][0] <= seq:
            _run(waiting.popleft()[1])
        when = self._when
        while when and when[0][0] <= seq:
            _run([(heapq.heappop(when)[2], ())])


def _run(callbacks: list[Callback]) -> None:
    for fn, args in callbacks:
        try:
            fn(*args)
        except Exception:  # one caller's bug does not stop delivery
            log.exception("callback after delivery failed")
