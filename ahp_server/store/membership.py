"""A sharded node's membership: its node lease kept, dead nodes' sessions taken over.

Layer: store (asyncio and PostgreSQL through ``store/ownership.py``; no host
types). Issue 32, docs/scale-out.md "Ownership: a node lease, an owner row per
session, epochs": the loop that keeps a node in the cluster and the
:class:`~ahp_server.store.sharded.ShardedStore`'s ``held`` map in step with the
owner rows.

:class:`Membership` joins (the sessions still owned under the node's name come
back at raised epochs, fencing a previous process out), then every
``interval`` (a third of the lease's TTL):

* **renews** the node lease with its load (sessions held, turns running: what
  placement reads) and its delivered watermark (what log compaction keeps
  for it, ``store/sharded.py``). A renewal that finds the row another incarnation's
  (:class:`~ahp_server.store.lease.LeaseLost`) means another process took the
  name: ``on_lease_lost`` is called once and the loop ends — the node must
  stop, its commits are fenced anyway. A renewal PostgreSQL does not answer
  is tried again next round; meanwhile the lease runs out and the others
  take the sessions over, which fences this node's commits.
* renews **only while the bus hears the node** (``bus_ok``: its own
  heartbeat came back, ``transport/node_heartbeat.py``): a node cut off from
  NATS but not from PostgreSQL lets its lease run out, so the others take its
  sessions over — nobody could reach them through it — and it takes over
  nothing meanwhile. A renewal after such a gap (or after renewals failed)
  first reads the owner rows again: sessions taken over meanwhile leave the
  store's ``held`` map and go to the store's ``on_lost``, as a refused commit
  would have told.
* **takes over** from every node whose lease expired (or that drained) — at
  once, not at the next round, when :meth:`Membership.wake` is called (another
  node said it leaves: its drain expired its lease already), and again at once
  while a round so woken takes something: at
  most its *fair share* per dead node and round, ``ceil(sessions left / live
  nodes)``, so survivors taking over at once split the sessions (rows another
  survivor is taking are skipped, ``FOR UPDATE SKIP LOCKED``). Sessions taken
  are held in the store at their new epochs, then handed to ``on_taken``,
  which loads them (their running turns end as after a restart).

:meth:`claim` owns a new session (epoch 1) and holds it in the store in one
step; :meth:`stop` ends the loop and, gracefully, drains: the node stops
being placed on and the others take its sessions over at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable

import structlog

from ahp_server.store.base import StoreError
from ahp_server.store.lease import LeaseLost
from ahp_server.store.ownership import Load, Ownership
from ahp_server.store.sharded import ShardedStore

__all__ = ["Membership"]

log = structlog.get_logger(__name__)


class Membership:
    """One node's lease and takeovers, kept in step with its store's ``held`` map."""

    def __init__(
        self,
        ownership: Ownership,
        store: ShardedStore,
        *,
        interval: float,
        turns: Callable[[], int] = lambda: 0,
        delivered: Callable[[], int] = lambda: 0,
        on_taken: Callable[[dict[str, int]], None] = lambda taken: None,
        on_lease_lost: Callable[[str], None] = lambda why: None,
        bus_ok: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.ownership = ownership
        self.store = store
        self.interval = interval
        self._turns = turns
        self._delivered = delivered
        self._on_taken = on_taken
        self._on_lease_lost = on_lease_lost
        self._bus_ok = bus_ok
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        #: Set to run the next round now (:meth:`wake`).
        self._woken = asyncio.Event()
        #: Sessions taken over by this node since it joined, and lease renewals.
        self.taken = 0
        self.renewals = 0
        #: Rounds that did not renew because the bus did not hear this node.
        self.withheld = 0
        #: Sessions found taken over by another node when renewing after a gap.
        self.reconciled_lost = 0
        #: When the lease was last renewed (monotonic seconds; joining counts).
        self._renewed_at = clock()

    def load(self) -> Load:
        return Load(sessions=len(self.store.held), turns=self._turns(), delivered=self._delivered())

    async def join(self) -> dict[str, int]:
        """Join the cluster and hold what the node's name still owns; start the loop."""
        held = await self.ownership.join(self.load())
        for session, epoch in held.items():
            self.store.hold(session, epoch)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="ahp-membership")
        return held

    async def claim(self, session: str, directory: str | None = None) -> int | None:
        """Own a new session (epoch 1) and hold it; ``None`` if it already has an owner.
        ``directory``: its working directory's path (who may take it over)."""
        epoch = await self.ownership.claim(session, directory)
        if epoch is not None:
            self.store.hold(session, epoch)
        return epoch

    async def take_over_round(self) -> dict[str, int]:
        """One round: this node's fair share of every dead node's sessions, held."""
        me = self.ownership.node
        taken: dict[str, int] = {}
        dead = [node for node in await self.ownership.expired_nodes() if node != me]
        if not dead:
            return taken
        live = max(1, len(await self.ownership.live_nodes()))
        for node in dead:
            left = await self.ownership.count(node)
            if left == 0:
                continue
            got = await self.ownership.take_over(node, math.ceil(left / live))
            for session, epoch in got.items():
                self.store.hold(session, epoch)
            if got:
                log.info("sessions taken over", node=me, dead=node, sessions=len(got))
            taken.update(got)
        if taken:
            self.taken += len(taken)
            try:
                self._on_taken(taken)
            except Exception:
                log.exception("on_taken failed")
        return taken

    async def reconcile(self) -> frozenset[str]:
        """Read this node's owner rows again: sessions held in the store that another
        node owns now (or at another epoch) are released and told to ``on_lost``."""
        # Only what was held before the read: a session claimed while it runs has its
        # row written before it is held, so it is in ``rows`` or not in ``before``.
        before = dict(self.store.held)
        rows = await self.ownership.held()
        lost = frozenset(
            session
            for session, epoch in before.items()
            if rows.get(session) != epoch and self.store.held.get(session) == epoch
        )
        for session in lost:
            self.store.release(session)
        if lost:
            self.reconciled_lost += len(lost)
            log.warning("sessions taken over while this node was away", sessions=len(lost))
            try:
                self.store.on_lost(lost)
            except Exception:
                log.exception("on_lost failed")
        return lost

    def wake(self) -> None:
        """Run the next round now rather than after ``interval`` (a node said it leaves:
        its drained sessions are taken over at once, docs/scale-out.md)."""
        self._woken.set()

    async def stop(self, *, drain: bool = True) -> None:
        """End the loop; ``drain``: expire the lease now so the others take over at once."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if drain:
            with contextlib.suppress(StoreError):
                await self.ownership.drain()

    async def _run(self) -> None:
        gap = False  # a round without a renewal since the last one
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval):
                    await self._woken.wait()
            woken = self._woken.is_set()
            self._woken.clear()
            if not self._bus_ok():
                # Cut off from the bus: let the lease run out (docs/scale-out.md,
                # "Failure cases", partitioned owner), and take nothing over.
                if not gap:
                    log.warning("the bus does not hear this node: lease renewal withheld")
                self.withheld += 1
                gap = True
                continue
            # Two intervals without a renewal: the lease may have expired meanwhile.
            gap = gap or self._clock() - self._renewed_at >= 2 * self.interval
            try:
                await self.ownership.renew(self.load())
                self.renewals += 1
                self._renewed_at = self._clock()
                if gap:
                    await self.reconcile()
                    gap = False
            except LeaseLost as lost:
                log.error("node lease lost: this node must stop", error=str(lost))
                self._on_lease_lost(str(lost))
                return
            except StoreError as error:
                log.warning("node lease renewal failed; trying again", error=str(error))
                gap = True
                continue
            try:
                if await self.take_over_round() and woken:
                    self._woken.set()  # the next fair share at once, until none is left
            except StoreError as error:
                log.warning("takeover round failed; trying again", error=str(error))
