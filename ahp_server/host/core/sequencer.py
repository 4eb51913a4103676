"""The one global ``serverSeq``, the per-channel replay buffers, and the subscription table.

Layer: host (asyncio-free itself, but only ever called from the event loop).

Ordering (WIRE-SUMMARY §3.3, ARCHITECTURE-SKETCH "Ordering"): :meth:`Hub.publish`
takes the next sequence number, encodes the envelope **once** and queues its
commit in one synchronous step. The store commits in queue order and calls
back in that order; only then is the envelope recorded for replay and the same
bytes queued on every subscriber's outbox. So no client sees an envelope before
it is durable, every connection receives envelopes in strictly increasing
``serverSeq`` order across all channels, and a subscriber of every channel
sees no gaps. With the in-memory store the commit is immediate.

Replay buffers are per channel and bounded by count and bytes, so a chatty
chat can only evict its own history, never a quiet chat's.

Sharded mode (docs/scale-out.md "One ``serverSeq``: the commit counter"):
with a store whose commit takes the numbers (``Store.numbers_at_commit``)
the hub encodes each envelope without ``serverSeq`` (:class:`_Body`), the
store numbers it in its fenced commit and calls back with the number, and the
number is spliced in at delivery (:func:`spliced`): the envelope's fields
are the same, ``serverSeq`` first. The node's feed delivers those local
envelopes and every other owner's (:meth:`Hub.deliver_remote`) through one
ordered path, so this callback order is still ``serverSeq`` order.
"""

from __future__ import annotations

import asyncio
import itertools
import zlib
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import msgspec
from msgspec import UNSET

from ahp_server.host.core import edge
from ahp_server.host.core.fanout import Connection
from ahp_server.protocol import codec
from ahp_server.protocol._base import UnknownVariant
from ahp_server.protocol.types import ActionEnvelope, ActionOrigin
from ahp_server.store.base import Store, spliced

__all__ = [
    "DeliveryListener",
    "Hub",
    "ReplayBuffer",
    "UnnumberedEnvelope",
    "action_frame",
    "notification_frame",
    "response_frame",
]

_ACTION_PREFIX = b'{"jsonrpc":"2.0","method":"action","params":'


def action_frame(envelope_json: bytes) -> bytes:
    """The ``action`` notification frame around an encoded envelope."""
    return _ACTION_PREFIX + envelope_json + b"}"


def _notification_bytes(method: str, params_json: bytes) -> bytes:
    return b"".join(
        (
            b'{"jsonrpc":"2.0","method":',
            codec.encode(method),
            b',"params":',
            params_json,
            b"}",
        )
    )


def notification_frame(method: str, params: object) -> bytes:
    """A server notification frame (``root/sessionAdded`` …)."""
    return b"".join(
        (
            b'{"jsonrpc":"2.0","method":',
            codec.encode(method),
            b',"params":',
            codec.encode(params),
            b"}",
        )
    )


def response_frame(request_id: int | str, result_json: bytes) -> bytes:
    """A success response frame around an already-encoded result."""
    return b"".join(
        (b'{"jsonrpc":"2.0","id":', codec.encode(request_id), b',"result":', result_json, b"}")
    )


class UnnumberedEnvelope(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """An ``ActionEnvelope`` before its number: what a numbering store commits and the feed
    carries (sharded mode). ``spliced(n, encoded)`` is the envelope as sent."""

    channel: str
    action: Any
    origin: ActionOrigin | msgspec.UnsetType = UNSET


class _Type(msgspec.Struct):
    type: str = ""


class _Origin(msgspec.Struct):
    client_id: str = msgspec.field(name="clientId", default="")


class _Head(msgspec.Struct):
    """What the hub needs of another owner's envelope: its channel, action type and origin."""

    channel: str
    action: _Type = msgspec.field(default_factory=_Type)
    origin: _Origin | None = None


_HEAD = msgspec.json.Decoder(_Head)


def action_type(action: object) -> str:
    value = getattr(action, "type", None)  # every known action (the common case first)
    if isinstance(value, str):
        return value
    if isinstance(action, UnknownVariant):
        value = action.data.get("type")
        return value if isinstance(value, str) else ""
    return ""


@dataclass(slots=True, frozen=True)
class _Packed:
    """Envelopes of one finished stretch (a turn), compressed together.

    Their numbers and sizes are compressed too: as two arrays of 64-bit
    integers they would take some 16 bytes an envelope, five times what the
    compressed envelopes of a turn of one-word deltas take (docs/performance.md
    "Memory after a turn").
    """

    #: The first and last ``serverSeq`` held, and how many envelopes.
    first: int
    last: int
    count: int
    #: zlib of two arrays of ``count`` 64-bit integers: each ``serverSeq`` less the
    #: one before it (the first less 0), then each envelope's length.
    index: bytes
    #: The envelopes, concatenated and compressed (zlib).
    data: bytes
    #: Their uncompressed size: what the buffer's limits count.
    size: int

    @classmethod
    def of(cls, seqs: Sequence[int], envelopes: Sequence[bytes]) -> _Packed:
        steps = array("q", [seqs[0]])
        steps.extend(b - a for a, b in itertools.pairwise(seqs))
        lengths = array("q", map(len, envelopes))
        index = zlib.compress(steps.tobytes() + lengths.tobytes(), 1)
        data = b"".join(envelopes)
        return cls(seqs[0], seqs[-1], len(seqs), index, zlib.compress(data, 1), len(data))

    def since(self, last_seen: int) -> list[tuple[int, bytes]]:
        if self.last <= last_seen:
            return []
        numbers = array("q")
        numbers.frombytes(zlib.decompress(self.index))
        data = zlib.decompress(self.data)
        out, seq, start = [], 0, 0
        for step, length in zip(numbers[: self.count], numbers[self.count :], strict=True):
            seq += step
            end = start + length
            if seq > last_seen:
                out.append((seq, data[start:end]))
            start = end
        return out


@dataclass(slots=True)
class ReplayBuffer:
    """The newest envelopes of one channel, as encoded bytes.

    The limits count envelopes and their encoded bytes. A finished stretch —
    a turn, once it has ended — is packed: its envelopes compressed together
    (:meth:`pack`), so an idle chat does not hold its last turn's hundreds of
    deltas as they were sent (a 400-word turn: about 180 KB loose). What
    :meth:`since` returns is unchanged. Past a limit the oldest envelopes go
    first, a packed stretch as a whole.
    """

    max_envelopes: int
    max_bytes: int
    #: The newest envelopes, loose: their ``serverSeq``s and their bytes, side by
    #: side. Two deques rather than one of ``(seq, envelope)`` pairs: a pair is a
    #: new object the garbage collector tracks, one per delta, that lives as long
    #: as the turn — enough of them to make its collections long under load
    #: (docs/performance.md "Capacity"); an int and a bytes object it never scans.
    seqs: deque[int] = field(default_factory=deque)
    envelopes: deque[bytes] = field(default_factory=deque)
    #: Older stretches, packed, oldest first.
    packed: deque[_Packed] = field(default_factory=deque)
    #: Envelopes held, loose and packed, and their encoded bytes.
    count: int = 0
    size: int = 0
    #: The highest ``serverSeq`` of this channel no longer held.
    floor: int = 0

    def append(self, seq: int, envelope: bytes) -> None:
        self.seqs.append(seq)
        self.envelopes.append(envelope)
        self.count += 1
        self.size += len(envelope)
        while self.count > self.max_envelopes or self.size > self.max_bytes:
            if self.packed:
                block = self.packed.popleft()
                self.count -= block.count
                self.size -= block.size
                self.floor = block.last
            elif self.seqs:
                self.count -= 1
                self.size -= len(self.envelopes.popleft())
                self.floor = self.seqs.popleft()
            else:
                break

    def pack(self) -> None:
        """Compress the loose envelopes together (a stretch that has ended)."""
        if len(self.seqs) < PACK_AT_LEAST:
            return
        self.packed.append(_Packed.of(self.seqs, self.envelopes))
        self.seqs.clear()
        self.envelopes.clear()

    def covers(self, last_seen: int) -> bool:
        """True when every envelope after ``last_seen`` is still held."""
        return self.floor <= last_seen

    def since(self, last_seen: int) -> list[tuple[int, bytes]]:
        out = [entry for block in self.packed for entry in block.since(last_seen)]
        if self.seqs and self.seqs[-1] > last_seen:
            out.extend(
                (seq, envelope)
                for seq, envelope in zip(self.seqs, self.envelopes, strict=True)
                if seq > last_seen
            )
        return out


#: Fewer loose envelopes than this stay loose: packing them saves little.
PACK_AT_LEAST = 8


class DeliveryListener(Protocol):
    """Who publishes an action hears when it is delivered (a channel's actor)."""

    def delivered(self, seq: int, token: object, done: asyncio.Future[int] | None) -> None:
        """``seq`` is durable and sent; ``token`` and ``done`` are what was published with it."""
        ...


class Hub:
    """Sequence numbers, durable delivery, replay and subscriptions for one host."""

    def __init__(
        self,
        *,
        replay_max_envelopes: int,
        replay_max_bytes: int,
        store: Store | None = None,
        clock: Callable[[], float] = lambda: 0.0,
        start_seq: int = 0,
    ) -> None:
        #: The last number handed out.
        self.server_seq = start_seq
        #: The last number committed and delivered: what clients may have seen.
        self.delivered_seq = start_seq
        self.store = store or Store()
        self._clock = clock
        self._replay_max_envelopes = replay_max_envelopes
        self._replay_max_bytes = replay_max_bytes
        self._replay: dict[str, ReplayBuffer] = {}
        #: Channels whose buffers are to be packed, in order (:meth:`pack_replay`).
        self._to_pack: dict[str, None] = {}
        self._subscribers: dict[str, set[Connection]] = {}
        #: Told synchronously when a channel's last subscriber leaves, and when a
        #: connection is dropped (see :meth:`on_vacated`).
        self._vacated: list[Callable[[str], None]] = []
        self._dropped: list[Callable[[Connection], None]] = []
        self._base_floor = start_seq
        #: Published actions by action type, for metrics (one dict update per action).
        self.published_by_type: dict[str, int] = {}
        #: Whether a connection may see a session (set by the host; multi-user mode).
        self.visible: Callable[[Connection, str], bool] = lambda connection, session: True
        #: Per-connection views of one channel's envelopes, by channel (set by the
        #: host; multi-user mode: the root's terminal catalogue, docs/protocol.md
        #: "Identity and ownership"): the envelope as that connection may see it,
        #: with the same ``serverSeq``. Applied on delivery and on replay alike.
        self.views: dict[str, Callable[[Connection, bytes], bytes]] = {}
        self.last_envelope_size = 0
        #: Sharded mode: this node's connection of a client id, if any — the sender of
        #: another owner's envelope (its ``origin``) is acknowledged through it even
        #: when it does not subscribe to the channel, as a local sender is.
        self.remote_sender: Callable[[str], Connection | None] | None = None
        #: Sharded mode: channels whose other owners' envelopes a local actor mirrors
        #: (the root channel, on nodes that do not own it), by channel.
        self.mirrors: dict[str, Callable[[bytes], None]] = {}

    def published_by_kind(self) -> dict[str, int]:
        """Published actions by channel type (``root``/``session``/``chat``/…)."""
        families: dict[str, int] = {}
        for kind, count in self.published_by_type.items():
            family = kind.partition("/")[0]
            families[family] = families.get(family, 0) + count
        return families

    def restart_at(self, seq: int) -> None:
        """Continue numbering above ``seq`` (the store's high-water mark).

        Replay buffers start empty: what came before ``seq`` is only in the
        store (a loaded channel is seeded from it, see :meth:`seed_replay`).
        """
        self.server_seq = self.delivered_seq = self._base_floor = seq

    # -- publishing ------------------------------------------------------------------

    def publish(
        self,
        channel: str,
        action: object,
        origin: ActionOrigin | None = None,
        listener: DeliveryListener | None = None,
        token: object = None,
        done: asyncio.Future[int] | None = None,
        *,
        at_ms: float | None = None,
        sender: Connection | None = None,
    ) -> int:
        """Assign the next ``serverSeq`` to ``action``; deliver it once it is durable.

        Numbering and queueing the commit happen in one step, and the store
        commits in queue order, so deliveries (and ``listener.delivered(seq,
        token, done)``) run in ``serverSeq`` order. Returns the number — 0 with
        a store that numbers at commit (sharded mode): the number is known at
        delivery, ``done`` gets it.

        ``sender`` is the connection that dispatched the action: it gets the
        envelope (its acknowledgement, WIRE-SUMMARY §7.2) even when it is not
        subscribed to the channel — §10.6 lets a client answer a chat's request
        without subscribing to it (docs/protocol.md, "Acknowledgements").
        """
        kind = action_type(action)
        counts = self.published_by_type
        counts[kind] = counts.get(kind, 0) + 1
        at = self._clock() if at_ms is None else at_ms
        store = self.store
        if store.numbers_at_commit:
            body = codec.encode(
                UnnumberedEnvelope(
                    channel=channel, action=action, origin=UNSET if origin is None else origin
                )
            )
            self.last_envelope_size = len(body)
            store.append_unnumbered(
                channel,
                at,
                body,
                self._deliver_numbered,
                channel,
                body,
                kind,
                listener,
                token,
                done,
                sender,
            )
            return 0
        seq = self.server_seq + 1
        self.server_seq = seq
        envelope = codec.encode(
            ActionEnvelope(
                channel=channel,
                action=cast(Any, action),
                server_seq=seq,
                origin=UNSET if origin is None else origin,
            )
        )
        self.last_envelope_size = len(envelope)
        store.append_envelope(
            seq,
            channel,
            at,
            envelope,
            self._deliver,
            seq,
            channel,
            envelope,
            kind,
            listener,
            token,
            done,
            sender,
        )
        return seq

    def _deliver_numbered(
        self,
        seq: int,
        channel: str,
        body: bytes,
        kind: str,
        listener: DeliveryListener | None,
        token: object,
        done: asyncio.Future[int] | None,
        sender: Connection | None,
    ) -> None:
        """A numbering store committed this node's envelope as ``seq`` (in order)."""
        if seq > self.server_seq:
            self.server_seq = seq
        self._deliver(seq, channel, spliced(seq, body), kind, listener, token, done, sender)

    def deliver_remote(self, seq: int, body: bytes) -> None:
        """Another owner's committed envelope ``seq`` (sharded mode, in order from the feed).

        Recorded for replay and fanned out like a local one; nobody here waits for
        it. A body that is not an envelope (it was verified and committed, so a
        bug elsewhere) is skipped with its number: delivery never stops on it.
        """
        try:
            head = _HEAD.decode(body)
        except msgspec.DecodeError:
            self.delivered_seq = max(self.delivered_seq, seq)
            return
        if seq > self.server_seq:
            self.server_seq = seq
        sender = None
        if head.origin is not None and self.remote_sender is not None:
            sender = self.remote_sender(head.origin.client_id)
        envelope = spliced(seq, body)
        mirror = self.mirrors.get(head.channel)
        if mirror is not None:
            mirror(envelope)
        self._deliver(seq, head.channel, envelope, head.action.type, None, None, None, sender)

    def _deliver(
        self,
        seq: int,
        channel: str,
        envelope: bytes,
        kind: str,
        listener: DeliveryListener | None,
        token: object,
        done: asyncio.Future[int] | None,
        sender: Connection | None = None,
    ) -> None:
        """The envelope is durable: record it for replay, tell its publisher, fan it out."""
        self.delivered_seq = seq
        self._record(channel, seq, envelope)
        if listener is not None:
            listener.delivered(seq, token, done)
        subscribers = self._subscribers.get(channel)
        view = self.views.get(channel)
        # The 0.7 view of this envelope: computed once, on first need; never
        # for an action type whose shape is the same at both versions.
        legacy = None if kind in edge.IDENTITY_ACTIONS else edge.LegacyEnvelope(envelope)
        if subscribers:
            frame = action_frame(envelope)
            for connection in tuple(subscribers):
                if kind in connection.blocked_actions:
                    continue
                if view is None and (legacy is None or not connection.legacy):
                    connection.send(frame)
                    continue
                body = self._body(connection, envelope, view, legacy)
                if body is not None:
                    connection.send(action_frame(body))
        if sender is not None and (not subscribers or sender not in subscribers):
            # The unsubscribed sender's acknowledgement.
            body = self._body(sender, envelope, view, legacy)
            if body is not None:
                sender.send(action_frame(body))

    @staticmethod
    def _body(
        connection: Connection,
        envelope: bytes,
        view: Callable[[Connection, bytes], bytes] | None,
        legacy: edge.LegacyEnvelope | None,
    ) -> bytes | None:
        """The envelope as ``connection`` sees it: the channel's view, then its version's."""
        if view is not None:
            seen = view(connection, envelope)
            if legacy is None or not connection.legacy:
                return seen
            return edge.project_envelope(seen)
        if legacy is None or not connection.legacy:
            return envelope
        return legacy.get()

    def _record(self, channel: str, seq: int, envelope: bytes) -> None:
        buffer = self._replay.get(channel)
        if buffer is None:
            buffer = self._replay[channel] = ReplayBuffer(
                self._replay_max_envelopes, self._replay_max_bytes, floor=self._base_floor
            )
        buffer.append(seq, envelope)

    def seed_replay(self, channel: str, floor: int, envelopes: Iterable[tuple[int, bytes]]) -> None:
        """Refill a channel's replay buffer from the stored log (after a restart), packed."""
        buffer = ReplayBuffer(self._replay_max_envelopes, self._replay_max_bytes, floor=floor)
        for seq, envelope in envelopes:
            buffer.append(seq, envelope)
        buffer.pack()
        self._replay[channel] = buffer

    def pack_replay(self, channel: str) -> None:
        """A stretch of ``channel`` has ended (a turn): pack what its buffer holds loose.

        Soon, one channel per turn of the event loop: turns that end together (N
        chats streaming in step end in one commit) would otherwise pack in one
        callback, about 1 ms each, and hold the loop for N ms (docs/performance.md
        "Capacity"). A buffer packed later replays the same (:meth:`ReplayBuffer.since`).
        """
        if channel in self._to_pack:
            return
        self._to_pack[channel] = None
        if len(self._to_pack) == 1:
            self._pack_soon()

    def _pack_soon(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (an actor driven by plain calls): no turn to wait for
            while self._to_pack:
                self._pack_next()
            return
        loop.call_soon(self._pack_next)

    def _pack_next(self) -> None:
        channel = next(iter(self._to_pack))
        del self._to_pack[channel]
        buffer = self._replay.get(channel)
        if buffer is not None:
            buffer.pack()
        if self._to_pack:
            asyncio.get_running_loop().call_soon(self._pack_next)

    def reject(
        self,
        connection: Connection,
        channel: str,
        action: object,
        origin: ActionOrigin,
        reason: str,
    ) -> None:
        """Echo a refused client action to its sender only; it takes no ``serverSeq``.

        WIRE-SUMMARY §7.3 leaves the details open: we send it to the
        originating connection with the last *delivered* ``serverSeq`` (so a
        client never records a number it has not received) and never replay it.

        It leaves once everything published before it is delivered
        (``Store.after_queued``): the echo of the same client's earlier
        action may still wait for its commit, and the reconciliation guide's
        client pops its own echoes from the head of its pending list — a
        client sees its echoes and rejections in the order it dispatched
        (docs/protocol.md, "Host behaviour the spec leaves open").
        """
        refused = ActionEnvelope(
            channel=channel,
            action=cast(Any, action),
            server_seq=0,  # set as it leaves
            origin=origin,
            rejection_reason=reason,
        )
        self.store.after_queued(self._send_rejection, connection, refused)

    def _send_rejection(self, connection: Connection, refused: ActionEnvelope) -> None:
        envelope = codec.encode(msgspec.structs.replace(refused, server_seq=self.delivered_seq))
        if connection.legacy:
            # The 0.7 form of what it sent; an action 0.7 does not have (refused
            # for that) goes back as the client sent it: every dispatch is echoed.
            envelope = edge.project_envelope(envelope) or envelope
        connection.send(action_frame(envelope))

    def notify(
        self,
        channel: str,
        method: str,
        params: object,
        *,
        about: str | None = None,
        only: Callable[[Connection], bool] | None = None,
    ) -> None:
        """An ephemeral notification to the subscribers of ``channel`` (never replayed).

        ``about``: the session it tells of; only subscribers that may see that
        session get it (multi-user mode, :attr:`visible`); ``only``: those it accepts.
        """
        subscribers = self._subscribers.get(channel)
        if subscribers:
            frame = notification_frame(method, params)
            legacy: list[bytes | None] = []  # the 0.7 frame, once computed (None: not sent)
            for connection in tuple(subscribers):
                if (about is None or self.visible(connection, about)) and (
                    only is None or only(connection)
                ):
                    if not connection.legacy:
                        connection.send(frame)
                        continue
                    if not legacy:
                        projected = edge.notification(method, params)
                        legacy.append(
                            None if projected is None else _notification_bytes(method, projected)
                        )
                    if legacy[0] is not None:
                        connection.send(legacy[0])

    # -- subscriptions ------------------------------------------------------------------------

    def subscribe(self, connection: Connection, channel: str) -> None:
        self._subscribers.setdefault(channel, set()).add(connection)
        connection.subscriptions.add(channel)

    def unsubscribe(self, connection: Connection, channel: str) -> None:
        connection.subscriptions.discard(channel)
        subscribers = self._subscribers.get(channel)
        if subscribers is not None:
            subscribers.discard(connection)
            if not subscribers:
                del self._subscribers[channel]
                for listener in self._vacated:
                    listener(channel)

    def drop_connection(self, connection: Connection) -> None:
        for channel in tuple(connection.subscriptions):
            self.unsubscribe(connection, channel)
        for listener in self._dropped:
            listener(connection)

    def on_vacated(
        self,
        vacated: Callable[[str], None],
        dropped: Callable[[Connection], None] | None = None,
    ) -> None:
        """Call ``vacated(channel)`` when a channel's last subscriber leaves.

        That is an ``unsubscribe`` or a dropped connection, never
        :meth:`drop_channel`. ``dropped(connection)``, if given, is called
        after a connection's subscriptions are gone. Both run synchronously
        inside the hub's call: they must be quick and must not raise (spawn
        any work). What a channel holds only for its subscribers — a resource
        watch (WIRE-SUMMARY §12) — is released from here.
        """
        self._vacated.append(vacated)
        if dropped is not None:
            self._dropped.append(dropped)

    def subscribers(self, channel: str) -> frozenset[Connection]:
        return frozenset(self._subscribers.get(channel, ()))

    def drop_channel(self, channel: str) -> None:
        """Forget a disposed channel: its replay history and its subscribers."""
        self._replay.pop(channel, None)
        for connection in self._subscribers.pop(channel, set()):
            connection.subscriptions.discard(channel)

    # -- replay -------------------------------------------------------------------------------

    def replay(
        self,
        last_seen: int,
        channels: Iterable[str],
        viewer: Connection | None = None,
        max_bytes: int | None = None,
    ) -> list[bytes] | None:
        """Every envelope after ``last_seen`` on ``channels``, in ``serverSeq`` order.

        ``None`` when any channel's buffer no longer reaches back that far, or
        when the envelopes come to more than ``max_bytes`` (the caller falls back
        to snapshots). Channels with no history since then contribute nothing.
        ``viewer``: the connection it is for, seeing each envelope through
        :attr:`views` as it would have live.
        """
        entries: list[tuple[int, bytes]] = []
        size = 0
        for channel in channels:
            buffer = self._replay.get(channel)
            if buffer is None:
                if last_seen < self._base_floor:
                    return None  # history from before a restart is not in memory
                continue
            if not buffer.covers(last_seen):
                return None
            view = None if viewer is None else self.views.get(channel)
            since = buffer.since(last_seen)
            if view is not None and viewer is not None:
                since = [(seq, view(viewer, e)) for seq, e in since]
            size += sum(len(e) for _, e in since)
            if max_bytes is not None and size > max_bytes:
                return None
            entries.extend(since)
        entries.sort(key=lambda entry: entry[0])
        return [envelope for _, envelope in entries]

    def replay_each(
        self, since: dict[str, int], viewer: Connection | None = None
    ) -> list[bytes] | None:
        """Every envelope of each channel after its own number (a snapshot's ``fromSeq``),
        in ``serverSeq`` order; ``None`` when a buffer no longer reaches back that far."""
        entries: list[tuple[int, bytes]] = []
        for channel, last_seen in since.items():
            buffer = self._replay.get(channel)
            if buffer is None:
                if last_seen < self._base_floor:
                    return None
                continue
            if not buffer.covers(last_seen):
                return None
            view = None if viewer is None else self.views.get(channel)
            for seq, envelope in buffer.since(last_seen):
                seen = envelope if view is None or viewer is None else view(viewer, envelope)
                entries.append((seq, seen))
        entries.sort(key=lambda entry: entry[0])
        return [envelope for _, envelope in entries]
