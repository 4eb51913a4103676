"""The one global ``serverSeq``, the per-channel replay buffers, and the subscription table.

Layer: host (asyncio-free itself, but only ever called from the event loop).

Ordering (WIRE-SUMMARY §3.3, ARCHITECTURE-SKETCH "Ordering"): :meth:`Hub.publish`
takes the next sequence number, encodes the envelope **once**, records it for
replay and queues the same bytes on every subscriber's outbox in one
synchronous step. No other publish can interleave, so every connection
receives envelopes in strictly increasing ``serverSeq`` order, across all
channels, and a subscriber of every channel sees no gaps. (When persistence
lands, the step becomes "take the number and queue the commit"; delivery then
happens in sequence order as commits complete.)

Replay buffers are per channel and bounded by count and bytes, so a chatty
chat can only evict its own history, never a quiet chat's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from msgspec import UNSET

from ahp_server.host.fanout import Connection
from ahp_server.protocol import codec
from ahp_server.protocol._base import UnknownVariant
from ahp_server.protocol.types import ActionEnvelope, ActionOrigin

__all__ = ["Hub", "ReplayBuffer", "action_frame", "notification_frame", "response_frame"]

_ACTION_PREFIX = b'{"jsonrpc":"2.0","method":"action","params":'


def action_frame(envelope_json: bytes) -> bytes:
    """The ``action`` notification frame around an encoded envelope."""
    return _ACTION_PREFIX + envelope_json + b"}"


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


def action_type(action: object) -> str:
    if isinstance(action, UnknownVariant):
        value = action.data.get("type")
        return value if isinstance(value, str) else ""
    value = getattr(action, "type", "")
    return value if isinstance(value, str) else ""


@dataclass(slots=True)
class ReplayBuffer:
    """The newest envelopes of one channel, as encoded bytes."""

    max_envelopes: int
    max_bytes: int
    entries: deque[tuple[int, bytes]] = field(default_factory=deque)
    size: int = 0
    #: The highest ``serverSeq`` of this channel no longer held.
    floor: int = 0

    def append(self, seq: int, envelope: bytes) -> None:
        self.entries.append((seq, envelope))
        self.size += len(envelope)
        while self.entries and (
            len(self.entries) > self.max_envelopes or self.size > self.max_bytes
        ):
            evicted_seq, evicted = self.entries.popleft()
            self.size -= len(evicted)
            self.floor = evicted_seq

    def covers(self, last_seen: int) -> bool:
        """True when every envelope after ``last_seen`` is still held."""
        return self.floor <= last_seen

    def since(self, last_seen: int) -> list[tuple[int, bytes]]:
        return [entry for entry in self.entries if entry[0] > last_seen]


class Hub:
    """Sequence numbers, replay and subscriptions for one host."""

    def __init__(self, *, replay_max_envelopes: int, replay_max_bytes: int, start_seq: int = 0):
        self.server_seq = start_seq
        self._replay_max_envelopes = replay_max_envelopes
        self._replay_max_bytes = replay_max_bytes
        self._replay: dict[str, ReplayBuffer] = {}
        self._subscribers: dict[str, set[Connection]] = {}
        self.published = 0

    # -- publishing ---------------------------------------------------------------------------

    def publish(self, channel: str, action: object, origin: ActionOrigin | None = None) -> int:
        """Assign the next ``serverSeq`` to ``action`` and deliver it. Returns the number."""
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
        buffer = self._replay.get(channel)
        if buffer is None:
            buffer = self._replay[channel] = ReplayBuffer(
                self._replay_max_envelopes, self._replay_max_bytes
            )
        buffer.append(seq, envelope)
        subscribers = self._subscribers.get(channel)
        if subscribers:
            frame = action_frame(envelope)
            kind = action_type(action)
            for connection in tuple(subscribers):
                if kind not in connection.blocked_actions:
                    connection.send(frame)
        self.published += 1
        return seq

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
        originating connection with the current ``serverSeq`` and never replay it.
        """
        envelope = ActionEnvelope(
            channel=channel,
            action=cast(Any, action),
            server_seq=self.server_seq,
            origin=origin,
            rejection_reason=reason,
        )
        connection.send(action_frame(codec.encode(envelope)))

    def notify(self, channel: str, method: str, params: object) -> None:
        """An ephemeral notification to the subscribers of ``channel`` (never replayed)."""
        subscribers = self._subscribers.get(channel)
        if subscribers:
            frame = notification_frame(method, params)
            for connection in tuple(subscribers):
                connection.send(frame)

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

    def drop_connection(self, connection: Connection) -> None:
        for channel in tuple(connection.subscriptions):
            self.unsubscribe(connection, channel)

    def subscribers(self, channel: str) -> frozenset[Connection]:
        return frozenset(self._subscribers.get(channel, ()))

    def drop_channel(self, channel: str) -> None:
        """Forget a disposed channel: its replay history and its subscribers."""
        self._replay.pop(channel, None)
        for connection in self._subscribers.pop(channel, set()):
            connection.subscriptions.discard(channel)

    # -- replay -------------------------------------------------------------------------------

    def replay(self, last_seen: int, channels: Iterable[str]) -> list[bytes] | None:
        """Every envelope after ``last_seen`` on ``channels``, in ``serverSeq`` order.

        ``None`` when any channel's buffer no longer reaches back that far (the
        caller falls back to snapshots). Channels with no history since then
        contribute nothing.
        """
        entries: list[tuple[int, bytes]] = []
        for channel in channels:
            buffer = self._replay.get(channel)
            if buffer is None:
                continue
            if not buffer.covers(last_seen):
                return None
            entries.extend(buffer.since(last_seen))
        entries.sort(key=lambda entry: entry[0])
        return [envelope for _, envelope in entries]
