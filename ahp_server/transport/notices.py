"""Sharded mode: the ``root/session*`` notifications one node sends, told on every node.

Its terminals too (``node/terminals``): the root channel's owner lists every live
node's in ``root/terminalsChanged`` (``Host.root_terminals``).

Layer: transport (nats-py). docs/scale-out.md "Root state: one view".

A session lives on one node, and that node's host sends the root channel's
``root/sessionAdded``, ``root/sessionRemoved`` and ``root/sessionSummaryChanged``
to its own subscribers. Their clients on other nodes must hear them too: each
node publishes the notifications it sends on ``ahp.<cluster>.notice`` (signed
like every message between nodes), and every other node hands them to its
host (``Host.noticed``), which tells its root subscribers who may see the
session (its creator's, in multi-user mode) and keeps its catalogue in step
— and, on the root channel's owner, the count of sessions.

Notifications are ephemeral and never replayed (WIRE-SUMMARY §3.3), here as
on one host: a notice lost on the bus is a notification missed, which a
client's ``listSessions`` (read from the shared catalogue) makes good. The
sender never waits: notices queue (bounded: past ``queue``, dropped and
counted) for one sender task.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import msgspec
import structlog
from nats.errors import Error as NatsError

from ahp_server.host.host import Host
from ahp_server.protocol import codec
from ahp_server.transport.relay import BusWarnings, send, unsealed
from ahp_server.transport.relay_format import Signer

__all__ = ["RootNotices"]

log = structlog.get_logger(__name__)

#: The largest notice heard (a session summary is small; a bound for what is decoded).
MAX_NOTICE_BYTES = 256 * 1024


class _Notice(msgspec.Struct, frozen=True):
    node: str
    method: str
    session: str
    owner: str | None
    params: msgspec.Raw


_DECODE = msgspec.json.Decoder(_Notice)


class RootNotices:
    """Publishes this node's ``root/session*`` notifications; hears the other nodes'."""

    def __init__(
        self,
        nats: Any,
        cluster: str,
        node: str,
        host: Host,
        signer: Signer | None,
        *,
        queue: int = 1024,
    ) -> None:
        self._nc = nats
        self._subject = f"ahp.{cluster}.notice"
        self.node = node
        self._host = host
        self._signer = signer
        self._queue: asyncio.Queue[bytes] = asyncio.Queue(queue)
        self._warnings = BusWarnings()
        self._sub: Any = None
        self._task: asyncio.Task[None] | None = None
        #: Notices sent, heard from other nodes, and dropped (queue full, bus away,
        #: unreadable or unsigned).
        self.sent = 0
        self.heard = 0
        self.dropped = 0

    async def start(self) -> None:
        self._sub = await self._nc.subscribe(self._subject, cb=self._on_message)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="root-notices")

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        sub, self._sub = self._sub, None
        if sub is not None:
            with contextlib.suppress(NatsError):
                await sub.unsubscribe()

    def publish(self, method: str, params: object, session: str, owner: str | None) -> None:
        """Queue a notification this node sent, for the others (``Host.root_notices``)."""
        notice = _Notice(
            node=self.node,
            method=method,
            session=session,
            owner=owner,
            params=msgspec.Raw(codec.encode(params)),
        )
        try:
            self._queue.put_nowait(msgspec.json.encode(notice))
        except asyncio.QueueFull:
            self.dropped += 1
            self._warnings.warn("root notice dropped: the queue is full")

    async def _run(self) -> None:
        while True:
            data = await self._queue.get()
            try:
                await send(self._nc, self._subject, data, self._signer)
                self.sent += 1
            except NatsError as error:  # the bus is away: the notification is missed
                self.dropped += 1
                self._warnings.warn("root notice not sent", error=str(error))

    async def _on_message(self, msg: Any) -> None:
        data = unsealed(self._signer, self._warnings, msg.subject, msg.data)
        if data is None or len(data) > MAX_NOTICE_BYTES:
            self.dropped += 1
            return
        try:
            notice = _DECODE.decode(data)
        except msgspec.DecodeError:
            self.dropped += 1
            self._warnings.warn("unreadable root notice dropped")
            return
        if notice.node == self.node:
            return  # this node told its own subscribers already
        self.heard += 1
        self._host.noticed(
            notice.method, bytes(notice.params), notice.session, notice.owner, notice.node
        )
