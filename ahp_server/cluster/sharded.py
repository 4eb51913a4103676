"""Sharded cluster mode: every node owns some sessions, runs their agents and commits for them.

Layer: cluster (above ``app``; only ``cli`` imports it). Issue 32,
docs/scale-out.md "Sharded mode (design)".

A :class:`ShardedNode` is a host whose store is the
:class:`~ahp_server.store.sharded.ShardedStore` (commits fenced per session,
numbered by the one counter), whose delivery is the node's feed
(:class:`~ahp_server.transport.node_feed.NodeFeed`: its own commits and every
other owner's, in ``serverSeq`` order), kept in the cluster by
:class:`~ahp_server.store.membership.Membership` (its node lease, renewed only
while its own heartbeat comes back through NATS,
:class:`~ahp_server.transport.node_heartbeat.NodeHeartbeat`):

* a session created here is claimed here (its owner row, epoch 1) before its
  first write, and its agent runs here;
* at start the node holds again what its name still owns (at raised epochs)
  and recovers only those sessions' interrupted turns; the first node to
  start owns the root channel;
* sessions of a node whose lease ran out are taken over by fair share: once
  this node has delivered everything committed before the takeover, they are
  adopted (:meth:`Host.adopt <ahp_server.host.host.Host.adopt>`) — their
  running turns end with ``chat/error``, as after a restart;
* a feed stalled past ``cluster.feed_stall`` (a gap it cannot fill) closes this
  node's clients with 1012, to reconnect elsewhere, rather than skip a
  number; a lease another process took, or a failed store, stops the node;
* a graceful stop drains the lease, then says so in a last heartbeat
  (``leaving``): every other node takes it for gone at once — its routes
  closed, its terminals ended, placement past it, its sessions taken over —
  rather than after a lease of silence (docs/scale-out.md "A graceful stop
  announced");
* the root channel's owner finds the sessions no node can serve — their owner
  dead, their working directory on no live node — and has every node list them
  failed until their owner, or a node serving their directory, is back
  (docs/scale-out.md "Working directories").

Requests for other nodes' sessions go over routes (``transport/routing.py``),
new sessions to the least-loaded node serving their directory, and the root
owner merges every node's part of the root state (``transport/notices.py``).
What it does not do yet: docs/scale-out.md "What it does not do yet".
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

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
from ahp_server.store.membership import Membership
from ahp_server.store.ownership import LogReader, Ownership
from ahp_server.store.sharded import ROOT, ShardedStore
from ahp_server.transport.node_feed import NodeFeed
from ahp_server.transport.node_heartbeat import MAX_PEERS, Beat, NodeHeartbeat, fitting_roots
from ahp_server.transport.notices import RootNotices
from ahp_server.transport.relay import OwnerRole, PrimaryRelay
from ahp_server.transport.relay_format import Signer, Subjects
from ahp_server.transport.routing import Routes, stamped
from ahp_server.workspace.paths import inside

__all__ = ["ShardedNode"]

log = structlog.get_logger(__name__)


class ShardedNode:
    """One node of a sharded cluster (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        *,
        providers: Sequence[Provider] | None = None,
        clock: Callable[[], float] = wall_clock_ms,
    ) -> None:
        store, self.node_id = cluster_identity(settings)
        self.settings = settings
        self.store = ShardedStore(
            store,
            self.node_id,
            commit_window=settings.sharded_commit_window_ms / 1000,
            commit_timeout=settings.commit_timeout,
        )
        self.app = App(settings, providers=providers, clock=clock, store=self.store)
        self.host = self.app.host
        self._declared_roots = fitting_roots(self.host.roots.allowed(None))
        self.host.cluster_roots = self.cluster_roots
        # The roots this node serves (every user's): where its sessions' directories
        # may lie, what placement and takeover go by (docs/scale-out.md).
        self.ownership = Ownership(
            store,
            self.node_id,
            ttl=settings.lease_ttl,
            roots=self.host.roots.allowed(None),
        )
        self.membership = Membership(
            self.ownership,
            self.store,
            interval=settings.lease_ttl / 3,
            turns=self._turns,
            delivered=self._delivered,
            on_taken=self._taken,
            on_lease_lost=self._fail,
            bus_ok=self._bus_ok,
        )
        self.feed: NodeFeed | None = None
        self.heartbeat: NodeHeartbeat | None = None
        #: When this node began hearing the bus (monotonic; ``None``: not yet).
        self._listening_since: float | None = None
        #: Nodes never heard on the bus, by when this node was first asked about them.
        self._unheard: OrderedDict[str, float] = OrderedDict()
        #: This node's routes to other nodes' sessions, and its end of theirs.
        self.routes: Routes | None = None
        self.owner_relay: PrimaryRelay | None = None
        self.notices: RootNotices | None = None
        self._log_reader: LogReader | None = None
        self._nc: Any = None
        self._failed: asyncio.Future[str] | None = None
        #: Sessions taken over and adopted by this node since it started.
        self.adopted = 0
        #: Set once the host has started: adoption waits for it.
        self._started = asyncio.Event()
        #: The root owner's look for stranded sessions: every membership interval, and
        #: at once when set (a node left, started, or the root was taken over).
        self._look_again = asyncio.Event()
        self._stranded_task: asyncio.Task[None] | None = None

    @property
    def urls(self) -> list[str]:
        return self.app.urls

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the bus and the cluster, open the host on what this node owns, listen."""
        settings = self.settings
        self._failed = asyncio.get_running_loop().create_future()
        self._nc = await connect_bus(
            settings,
            self.node_id,
            on_error=self._bus_error,
            on_disconnected=self._bus_event("bus disconnected"),
            on_reconnected=self._bus_event("bus reconnected"),
        )
        assert settings.cluster_secret is not None
        assert settings.store is not None
        signer = Signer(settings.cluster_secret.encode(), settings.cluster_name)
        try:
            seq = await self.store.start()  # migrated, and marked a counter database
            await self.ownership.open()
            self._log_reader = LogReader(settings.store)
            self.heartbeat = NodeHeartbeat(
                self._nc,
                settings.cluster_name,
                self.node_id,
                signer,
                period=settings.heartbeat,
                beat=self._beat,
                on_leaving=self._left,
            )
            await self.heartbeat.start()
            self._listening_since = time.monotonic()
            # Wired before the host's first commit: every number is delivered in order.
            self.feed = NodeFeed(
                self.host.hub,
                self.store,
                self._nc,
                self._log_reader,
                settings.cluster_name,
                signer,
                next_seq=seq + 1,
                grace=settings.feed_grace,
                stall=settings.feed_stall,
                on_stall=self._stalled,
            )
            self.host.metric_sources.append(self.feed.metrics)
            subjects = Subjects(settings.cluster_name)
            self.routes = Routes(
                self._nc,
                subjects,
                self.node_id,
                self.host,
                self.store,
                self.feed,
                self._peers,
                self._silent,
                signer=signer,
                # What comes back on a route is one frame for the client's outbox (a
                # resourceRead's base64 answer, a snapshot): bounded as the outbox is.
                max_bytes=settings.outbox_max_bytes,
                check_every=settings.heartbeat,
                # A node unheard for three heartbeats is taken for gone (cluster.heartbeat):
                # placement tries the next one (docs/scale-out.md "Placement").
                open_timeout=3 * settings.heartbeat,
                catch_up=settings.feed_stall,
                placement="local" if settings.placement == "local" else "least-loaded",
                turns=self._turns,
                nodes=self.ownership.live_nodes,
                roots=self.host.roots.allowed(None),
                declared=self.ownership.declared_roots,
            )
            self.owner_relay = PrimaryRelay(
                self._nc,
                subjects,
                self.node_id,
                0,
                self.app.gateway,
                heartbeat=settings.heartbeat,
                edge_timeout=3 * settings.heartbeat,
                inbox=settings.relay_inbox,
                max_message_bytes=settings.max_message_bytes,
                signer=signer,
                # Multi-user mode: a forwarded client is one of this node's users, or nobody.
                users={user.name: user.admin for user in settings.users} or None,
                owner=OwnerRole(
                    transport=stamped(self.feed),
                    alive=self.routes.alive,
                    check_every=settings.heartbeat,
                ),
            )
            held = await self.membership.join()
            if await self.membership.claim(ROOT) is not None:
                log.info("this node owns the root channel", node=self.node_id)
            self.host.owns = self.store.held.__contains__
            self.host.claim_session = self._claim
            self.store.on_lost = self._lost
            self.host.router = self.routes
            self.notices = RootNotices(
                self._nc, settings.cluster_name, self.node_id, self.host, signer
            )
            self.host.root_notices = self.notices.publish
            self.host.node_alive = self.routes.alive
            self.host.node_started = lambda node: self._look_again.set()
            # The root owner's envelopes keep this node's root state for its snapshots.
            self.host.hub.mirrors[ROOT] = lambda envelope: self.host.root.mirror(envelope)
            live = self.host.live_clients
            # Another owner's envelope acknowledges its sender's connection here (sharded).
            self.host.hub.remote_sender = lambda client_id: (
                c if (c := live.get(client_id)) is not None and not c.forwarded else None
            )
            await self.app.start()
            await self.feed.start()
            await self.routes.start()
            await self.owner_relay.start()
            await self.notices.start()
            # Told to the others, which tell theirs in turn: terminal requests are routed
            # to the node that reported the terminal (docs/scale-out.md "Routing").
            self.host.terminals_changed()
            self._stranded_task = asyncio.get_running_loop().create_task(
                self._watch_stranded(), name="ahp-stranded"
            )
            self._started.set()
        except BaseException:
            await self._close_parts()
            raise
        self.store.failed.add_done_callback(self._store_failed)
        log.info(
            "sharded node started",
            node=self.node_id,
            bus=masked_bus(str(settings.bus)),
            sessions=len(held),
            server_seq=seq,
        )

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
        """Graceful stop: turns end, everything commits, clients get 1001; the node
        drains, so the others take its sessions over at once."""
        await self.membership.stop(drain=False)
        await self.app.stop(close_timeout=close_timeout)
        await self._close_parts(drain=True)
        log.info("sharded node stopped", node=self.node_id)

    async def abort(self) -> None:
        """After a failure: stop serving at once, commit nothing more, end child processes.
        The lease is left to run out (the others take over after ``lease_ttl``)."""
        await self.membership.stop(drain=False)
        await self.app.abort()
        await self._close_parts()
        await self.store.abort()  # nothing more reaches the database from this node

    async def _close_parts(self, *, drain: bool = False) -> None:
        task, self._stranded_task = self._stranded_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if drain:
            with contextlib.suppress(StoreError):
                await self.ownership.drain()
            if self.heartbeat is not None:
                # After the drain: a node told of it finds the lease expired, and takes over.
                await self.heartbeat.leave()
        if self.owner_relay is not None:
            await self.owner_relay.stop()
        if self.routes is not None:
            await self.routes.aclose()
        if self.notices is not None:
            await self.notices.aclose()
        if self.feed is not None:
            await self.feed.aclose()
        if self.heartbeat is not None:
            await self.heartbeat.aclose()
        if self._log_reader is not None:
            await self._log_reader.close()
        with contextlib.suppress(StoreError, OSError):
            await self.ownership.close()
        if self._nc is not None:
            import nats

            with contextlib.suppress(nats.errors.Error):
                await self._nc.close()
            self._nc = None

    # -- ownership ----------------------------------------------------------------------------

    async def _claim(self, session: str, directory: str | None) -> bool:
        return await self.membership.claim(session, directory) is not None

    def _taken(self, taken: dict[str, int]) -> None:
        self.host.spawn(self._adopt(sorted(taken)))

    async def _adopt(self, sessions: list[str]) -> None:
        """Adopt sessions taken over, once everything committed before is delivered here:
        their log is then whole in the replay buffers and the store alike."""
        assert self.feed is not None
        assert self._log_reader is not None
        await self._started.wait()  # taken in the loop's first rounds, while starting
        deadline = time.monotonic() + self.settings.feed_stall
        target: int | None = None
        while target is None:
            try:
                target = await self._log_reader.counter()
            except StoreError as error:
                if time.monotonic() > deadline:
                    log.error("cannot adopt sessions taken over", error=str(error))
                    return
                await asyncio.sleep(0.1)
        while self.feed.next_seq <= target:
            if time.monotonic() > deadline:
                log.error("feed behind: sessions taken over not adopted", sessions=len(sessions))
                return
            await asyncio.sleep(0.02)
        await self.host.adopt([s for s in sessions if s != ROOT])
        if ROOT in sessions and self.routes is not None:
            # The root channel is this node's now: it counts every node's sessions.
            with contextlib.suppress(StoreError):
                await self.routes.catalogue()
            self.host.session_count_changed()
            self.host.terminals_changed()
            self._look_again.set()
        self.adopted += len(sessions)

    def _lost(self, sessions: frozenset[str]) -> None:
        # A commit refused, or the owner rows read again: another node owns these now.
        # Their writes were dropped, never delivered; their actors go. The root actor
        # stays: it mirrors the new root owner, and writes nothing (RootActor.apply).
        lost = sessions - {ROOT}
        if lost:
            log.warning("sessions lost to another node", sessions=len(lost))
            self.host.spawn(self.host.release(lost))

    def _turns(self) -> int:
        return sum(1 for chat in self.host.chats.values() if chat.runner is not None)

    def _delivered(self) -> int:
        return 0 if self.feed is None else self.feed.next_seq - 1

    def _beat(self) -> Beat:
        return Beat(
            node=self.node_id,
            sessions=len(self.store.held),
            turns=self._turns(),
            seq=self._delivered(),
            roots=self._declared_roots,
        )

    def cluster_roots(self) -> tuple[str, ...]:
        """The workspace roots of this node, then those of every other node heard within
        a lease (their beats), each once: the folder suggestions of the root state
        (``Host.cluster_roots``; a session in any of them is placed on a node serving
        it, and its files are routed there)."""
        seen = dict.fromkeys(self.host.roots.allowed(None))
        for beat in self._peers().values():
            # A peer's word: only absolute paths (a file: URI needs one).
            seen.update(dict.fromkeys(r for r in beat.roots if r.startswith("/")))
        return tuple(seen)

    def _peers(self) -> dict[str, Beat]:
        """The other nodes heard on the bus within a lease (``lease_ttl``: a node silent
        that long has lost its sessions anyway), with their load."""
        beat = self.heartbeat
        return {} if beat is None else beat.live_peers(self.settings.lease_ttl)

    def _silent(self, node: str) -> bool:
        """Whether ``node`` was heard on the bus once but not within a lease since, or
        its last beat said it leaves, or it was never heard for three heartbeats since
        this node first asked about it, while listening all along (docs/scale-out.md
        "Failure cases": a node cut off the bus before any other heard it — its lease in
        the database still running — is silent then, not answering routes by timeout)."""
        beat = self.heartbeat
        if beat is None:
            return False
        now = time.monotonic()
        heard = beat.peers.get(node)
        if heard is not None:
            self._unheard.pop(node, None)
            return beat.left(node) or now - heard[1] > self.settings.lease_ttl
        grace = 3 * self.settings.heartbeat  # a node starting beats at once, then each period
        since = self._listening_since
        if since is None or now - since <= grace:
            return False  # this node may not have heard anyone yet
        first = self._unheard.get(node)
        if first is None:
            self._unheard[node] = now
            while len(self._unheard) > MAX_PEERS:
                self._unheard.popitem(last=False)
            return False
        return now - first > grace

    def _left(self, node: str) -> None:
        """``node`` stopped gracefully (its last beat): gone now, not after a lease. Its
        routes close and cached owners go, its terminals leave the root (``Routes.check``);
        its sessions, drained, are taken over now."""
        if self.routes is not None:
            self.routes.check()
        self.membership.wake()
        self._look_again.set()

    # -- stranded sessions (docs/scale-out.md "Working directories") -------------------------

    async def _watch_stranded(self) -> None:
        """On the root channel's owner: every membership interval, and at once when asked,
        the stranded sessions told to every node (``Host.set_stranded``; sent every time
        while there are any, so a notice lost on the bus, or a node started since, is made
        good; and once more when the last one is served again)."""
        told: dict[str, str] | None = None  # what this node told last (None: nothing yet)
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.membership.interval):
                    await self._look_again.wait()
            self._look_again.clear()
            if ROOT not in self.store.held:
                continue  # only the root owner decides (RootActor: it writes the root)
            try:
                stranded = await self._stranded()
            except StoreError as error:
                log.warning("cannot read the stranded sessions", error=str(error))
                continue
            if stranded or stranded != told:
                self.host.set_stranded(stranded)
                told = stranded

    async def _stranded(self) -> dict[str, str]:
        """Sessions whose owner's lease expired and whose working directory no live node
        serves: nobody can take them over (session -> why, naming directory and node)."""
        roots = [root for node in await self.ownership.live_nodes() for root in node.roots]
        return {
            session: (
                f"its working directory {directory} is on no live node: it cannot move until "
                f"{owner} (or a node serving that directory) is back"
            )
            for session, owner, directory in await self.ownership.orphaned()
            if not any(inside(directory, root) for root in roots)
        }

    def _bus_ok(self) -> bool:
        beat = self.heartbeat
        return beat is not None and beat.heard_within(2 * self.settings.heartbeat)

    # -- failures -----------------------------------------------------------------------------

    def _fail(self, reason: str) -> None:
        log.critical("sharded node failing", node=self.node_id, reason=reason)
        if self._failed is not None and not self._failed.done():
            self._failed.set_result(reason)

    def _store_failed(self, future: asyncio.Future[BaseException]) -> None:
        if not future.cancelled():
            self._fail(f"the store failed: {future.result()}")

    def _stalled(self) -> None:
        """Delivery is blocked on a number this node cannot read: its clients reconnect
        to another node (they replay from their last number there), none skips one."""
        log.error("feed stalled: closing this node's clients", node=self.node_id)
        for connection in list(self.host.connections):
            connection.close(CLOSE_SERVICE_RESTART, "this node's delivery stalled: reconnect")

    async def _bus_error(self, error: Exception) -> None:
        log.warning("bus error", node=self.node_id, error=str(error))

    def _bus_event(self, event: str) -> Callable[[], Any]:
        async def told() -> None:
            log.warning(event, node=self.node_id)

        return told
