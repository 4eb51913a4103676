"""Active/passive cluster mode: one node of several sharing PostgreSQL and NATS (docs/scale-out.md).

Layer: cluster (above ``app``, which it builds on; only ``cli`` imports it).

Every node listens for clients. One node at a time is the **primary**: it
holds the lease in PostgreSQL (``store/lease.py``), owns every session and
chat, runs their agents and commits; its store is *fenced* with the lease
epoch, so a primary that lost its lease (paused, partitioned) can never
commit again. The other nodes are **edges**: they relay each client's frames
to the primary over NATS and its frames back (``transport/relay.py``); a
client sees one host whichever node it reached. ``serverSeq`` is the
primary's one counter, and a new primary numbers above everything committed
(it opens the store after taking the lease), so it stays one increasing
sequence across failovers and a client replays from it on any node.

A node starts as an edge and campaigns: it tries to take the lease at once
and then every third of ``cluster.lease_ttl``. Winning, it closes its relayed
clients with 1012 (they reconnect — to it, now), opens the store fenced with
its epoch, recovers (interrupted turns end with ``chat/error``, as after a
restart), starts answering relayed clients and heartbeating. While primary it
renews the lease every third of the TTL; if a renewal finds the lease taken,
or the store fails (a fenced commit among them), the node stops at once
without committing anything more: :meth:`ClusterNode.wait` returns the
reason and the process exits non-zero for its supervisor to restart it, as
an edge. A graceful stop (SIGTERM) releases the lease, so a standby takes
over without waiting for it to expire.

On the bus a node authenticates twice: to NATS with ``cluster.bus_user`` and
``cluster.bus_password`` (or the URL's credentials) — credentials NATS
refuses stop the node at start with an error naming them — and to the other
nodes by signing everything it publishes with a key derived from
``cluster.secret`` (``transport/relay_format.py``): what does not verify is
dropped, so a client of the NATS server without the secret can forge, alter
or replay nothing a node acts on. Neither credential is ever logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import structlog

from ahp_server.agents.base import Provider
from ahp_server.app import App
from ahp_server.cluster.bus import (
    CLOSE_SERVICE_RESTART,
    cluster_identity,
    connect_bus,
    masked_bus,
)
from ahp_server.config import Settings
from ahp_server.host.host import wall_clock_ms
from ahp_server.store.base import StoreError
from ahp_server.store.lease import Lease, LeaseLost
from ahp_server.store.postgres import PostgresStore

if TYPE_CHECKING:  # the relay needs nats-py, imported when a node starts
    from ahp_server.transport.relay import EdgeRelay, PrimaryRelay, Signer, Subjects

__all__ = ["LEASE", "ClusterNode"]

log = structlog.get_logger(__name__)

LEASE = "primary"


class ClusterNode:
    """One cluster node: an edge that becomes the primary when it takes the lease."""

    def __init__(
        self,
        settings: Settings,
        *,
        providers: Sequence[Provider] | None = None,
        clock: Callable[[], float] = wall_clock_ms,
    ) -> None:
        store, self.node_id = cluster_identity(settings)
        self.settings = settings
        self.store = PostgresStore(
            store,
            commit_window=settings.commit_window_ms / 1000,
            commit_timeout=settings.commit_timeout,
        )
        self.app = App(settings, providers=providers, clock=clock, store=self.store)
        self.lease = Lease(store, self.node_id, ttl=settings.lease_ttl, name=LEASE)
        self._nc: Any = None
        self._signer: Signer | None = None
        self.subjects: Subjects | None = None
        self.edge: EdgeRelay | None = None
        self.primary: PrimaryRelay | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._failed: asyncio.Future[str] | None = None
        #: When this node became the primary (monotonic seconds), for the figures.
        self.primary_since: float | None = None

    @property
    def is_primary(self) -> bool:
        return self.primary is not None

    @property
    def urls(self) -> list[str]:
        return self.app.urls

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the bus, listen as an edge, and campaign for the lease."""
        from ahp_server.transport.relay import EdgeRelay, Signer, Subjects

        settings = self.settings
        loop = asyncio.get_running_loop()
        self._failed = loop.create_future()
        bus = str(settings.bus)
        self._nc = await self._connect(bus)
        await self.lease.open()
        heartbeat = settings.heartbeat
        self.subjects = Subjects(settings.cluster_name)
        assert settings.cluster_secret is not None
        self._signer = Signer(settings.cluster_secret.encode(), settings.cluster_name)
        self.edge = EdgeRelay(
            self._nc,
            self.subjects,
            self.node_id,
            heartbeat=heartbeat,
            primary_timeout=3 * heartbeat,
            max_frames=settings.outbox_max_frames,
            max_bytes=settings.outbox_max_bytes,
            budget=self.app.host.outbox_budget,
            signer=self._signer,
        )
        await self.edge.start()
        await self.app.listen(edge=self.edge)
        log.info("cluster node started", node=self.node_id, bus=masked_bus(bus))
        if settings.bus_user is None and "@" not in urlsplit(bus).netloc:
            log.warning(
                "the bus has no credentials: anyone who reaches NATS can disrupt the cluster "
                "(set cluster.bus_user and cluster.bus_password)",
                node=self.node_id,
            )
        if not await self._try_promote():
            self._spawn(self._campaign(), "campaign")

    async def wait(self, stop: asyncio.Event) -> str | None:
        """Run until ``stop`` is set (``None``) or this node fails (the reason)."""
        assert self._failed is not None, "start() first"
        stopping = asyncio.ensure_future(stop.wait())
        waits: list[asyncio.Future[Any]] = [stopping, self._failed]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        return self._failed.result() if self._failed.done() else None

    async def stop(self, *, close_timeout: float = 5.0) -> None:
        """Graceful stop: as a primary, close clients with 1001, commit, release the lease."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if self.primary is not None:
            await self.app.stop(close_timeout=close_timeout)
            await self.primary.stop()
            await self.lease.release()
        else:
            await self.app.close_listener()
        if self.edge is not None:
            await self.edge.stop(CLOSE_SERVICE_RESTART, "node stopping: reconnect")
        await self._close_bus()
        await self.lease.close()
        log.info("cluster node stopped", node=self.node_id)

    async def abort(self) -> None:
        """After a failure: stop serving at once, commit nothing, end child processes."""
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        await self.app.abort()
        if self.edge is not None:
            await self.edge.stop(CLOSE_SERVICE_RESTART, "node failed: reconnect")
        await self._close_bus()
        with contextlib.suppress(StoreError, OSError):
            await self.lease.close()

    async def _connect(self, bus: str) -> Any:
        return await connect_bus(
            self.settings,
            self.node_id,
            on_error=self._bus_error,
            on_disconnected=self._bus_disconnected,
            on_reconnected=self._bus_reconnected,
        )

    async def _close_bus(self) -> None:
        import nats

        if self._nc is not None:
            with contextlib.suppress(nats.errors.Error):  # already closed, or the server is gone
                await self._nc.close()
            self._nc = None

    def _spawn(self, coro: Any, name: str) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(coro, name=name))

    def _fail(self, reason: str) -> None:
        log.critical("cluster node failing", node=self.node_id, reason=reason)
        if self._failed is not None and not self._failed.done():
            self._failed.set_result(reason)

    # -- the lease ----------------------------------------------------------------------------

    async def _campaign(self) -> None:
        """As an edge: try for the lease every third of its TTL until it is ours."""
        interval = self.settings.lease_ttl / 3
        while True:
            await asyncio.sleep(interval)
            try:
                if await self._try_promote():
                    return
            except StoreError:
                log.warning("lease campaign failed; trying again", exc_info=True)

    async def _try_promote(self) -> bool:
        from ahp_server.transport.relay import PrimaryRelay

        epoch = await self.lease.try_acquire()
        if epoch is None:
            return False
        started = time.monotonic()
        assert self.edge is not None
        assert self._nc is not None
        assert self.subjects is not None
        log.info("lease taken: becoming the primary", node=self.node_id, epoch=epoch)
        # Not an edge any more: its relayed clients reconnect (to this node, now).
        await self.edge.stop(CLOSE_SERVICE_RESTART, "this node is the primary now: reconnect")
        self.store.set_fence((LEASE, epoch))
        # Renew from now on: recovering many sessions may take longer than the TTL.
        self._spawn(self._renew(), "lease-renewal")
        try:
            await self.app.host.start()
        except StoreError as error:
            self._fail(f"cannot open the store as primary: {error}")
            return True
        self.store.failed.add_done_callback(self._store_failed)
        self.primary = PrimaryRelay(
            self._nc,
            self.subjects,
            self.node_id,
            epoch,
            self.app.gateway,
            heartbeat=self.settings.heartbeat,
            edge_timeout=3 * self.settings.heartbeat,
            inbox=self.settings.relay_inbox,
            max_message_bytes=self.settings.max_message_bytes,
            signer=self._signer,
            # Multi-user mode: a relayed client is one of this node's users, or nobody.
            users={user.name: user.admin for user in self.settings.users} or None,
        )
        await self.primary.start()
        self.primary_since = time.monotonic()
        log.info(
            "primary ready",
            node=self.node_id,
            epoch=epoch,
            recovery_ms=round((self.primary_since - started) * 1000, 1),
        )
        return True

    def _store_failed(self, future: asyncio.Future[BaseException]) -> None:
        if not future.cancelled():
            self._fail(f"the store failed: {future.result()}")

    async def _renew(self) -> None:
        interval = self.settings.lease_ttl / 3
        while True:
            await asyncio.sleep(interval)
            try:
                await self.lease.renew()
            except LeaseLost:
                self._fail("the lease was taken by another node")
                return
            except StoreError:
                # PostgreSQL unreachable: keep trying; commits are fenced anyway,
                # and without renewals the lease expires and another node takes it.
                log.warning("lease renewal failed", exc_info=True)

    # -- the bus ------------------------------------------------------------------------------

    async def _bus_error(self, error: Exception) -> None:
        log.warning("bus error", error=str(error))

    async def _bus_disconnected(self) -> None:
        log.warning("bus disconnected", node=self.node_id)
        if self.edge is not None:
            self.edge.bus_lost()

    async def _bus_reconnected(self) -> None:
        log.info("bus reconnected", node=self.node_id)
        if self.edge is not None and self.edge.active:
            # Messages may have been lost while the bus was away (what nats-py
            # buffered is sent on reconnect, possibly before the other side has
            # subscribed again): relayed clients start over rather than wait on
            # a lost answer until their own timeout.
            self.edge.drop_all(CLOSE_SERVICE_RESTART, "bus reconnected: reconnect")
            self.edge.bus_reconnected()
