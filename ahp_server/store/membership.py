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
  placement reads). A renewal that finds the row another incarnation's
  (:class:`~ahp_server.store.lease.LeaseLost`) means another process took the
  name: ``on_lease_lost`` is called once and the loop ends — the node must
  stop, its commits are fenced anyway. A renewal PostgreSQL does not answer
  is tried again next round; meanwhile the lease runs out and the others
  take the sessions over, which fences this node's commits.
* **takes over** from every node whose lease expired (or that drained): at
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
        on_taken: Callable[[dict[str, int]], None] = lambda taken: None,
        on_lease_lost: Callable[[str], None] = lambda why: None,
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.ownership = ownership
        self.store = store
        self.interval = interval
        self._turns = turns
        self._on_taken = on_taken
        self._on_lease_lost = on_lease_lost
        self._task: asyncio.Task[None] | None = None
        #: Sessions taken over by this node since it joined, and lease renewals.
        self.taken = 0
        self.renewals = 0

    def load(self) -> Load:
        return Load(sessions=len(self.store.held), turns=self._turns())

    async def join(self) -> dict[str, int]:
        """Join the cluster and hold what the node's name still owns; start the loop."""
        held = await self.ownership.join(self.load())
        for session, epoch in held.items():
            self.store.hold(session, epoch)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="ahp-membership")
        return held

    async def claim(self, session: str) -> int | None:
        """Own a new session (epoch 1) and hold it; ``None`` if it already has an owner."""
        epoch = await self.ownership.claim(session)
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
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.ownership.renew(self.load())
                self.renewals += 1
            except LeaseLost as lost:
                log.error("node lease lost: this node must stop", error=str(lost))
                self._on_lease_lost(str(lost))
                return
            except StoreError as error:
                log.warning("node lease renewal failed; trying again", error=str(error))
                continue
            try:
                await self.take_over_round()
            except StoreError as error:
                log.warning("takeover round failed; trying again", error=str(error))
