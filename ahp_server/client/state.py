"""Write-ahead reconciliation: confirmed state, pending actions and the optimistic view.

Layer: client (pure — no I/O, no asyncio), on top of :mod:`ahp_server.protocol`.
:class:`~ahp_server.client.connection.AhpClient` feeds it what arrives on the
wire; tests drive it directly.

Everything here is protocol 1.0: the states are
:mod:`ahp_server.protocol.types` structs reduced with the 1.0 reducers
(:mod:`ahp_server.protocol.reducers`), the pending actions are 1.0 actions.
Whatever version the connection negotiated, the owner hands it 1.0 values: on a
0.7 connection :class:`~ahp_server.client.connection.AhpClient` lifts what it
receives first (``protocol/views/v0_7.py``).

The model is WIRE-SUMMARY §7 and ``docs/guide/reconciliation.md``. For every
subscribed root, session or chat channel we mirror:

* a **confirmed** state: the channel's snapshot, then every received
  :class:`~ahp_server.protocol.types.ActionEnvelope` for that channel reduced
  into it with the protocol's own reducers — except envelopes carrying
  ``rejectionReason``, which nobody applies;
* the **pending** actions this client dispatched (``clientSeq`` + action) and
  has not yet seen echoed;
* the **optimistic view**: confirmed state with the pending actions re-applied
  on top (computed lazily and cached until something changes).

An envelope whose ``origin.clientId`` is ours removes the pending entry with
its ``clientSeq``: an accepted one is then applied to the confirmed state from
the envelope itself (server wins), a rejected one is simply dropped, which
reverts its optimistic effect.

Sequence numbers: ``serverSeq`` is one global counter (§3.3). We keep
``last_seen_server_seq`` — the largest value seen in an envelope, a snapshot's
``fromSeq`` or ``initialize``'s ``serverSeq`` — for ``reconnect``; and per
channel the ``serverSeq`` its confirmed state already includes, so an envelope
at or below it (already part of a snapshot, or replayed twice) is not applied
twice (§3.2: later actions have ``serverSeq > fromSeq``).

Channels are recognised by URI scheme (``ahp-root:``, ``ahp-session:/<id>``,
``ahp-chat:``). Other channels (terminals, changesets, annotations,
``ahp-session:/<id>/annotations``, stateless ones) can be subscribed and are
remembered for reconnect, but no state is mirrored and their envelopes are
ignored.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Literal, TypeAlias, TypeVar, overload

from msgspec import UNSET

from ahp_server.client.errors import PendingOverflowError, UnknownChannelError
from ahp_server.protocol.reducers import Clock, reduce
from ahp_server.protocol.types import (
    ActionEnvelope,
    ActionOrigin,
    ChatState,
    RootState,
    SessionState,
    Snapshot,
    StateAction,
)

__all__ = [
    "ROOT_CHANNEL",
    "ChannelKind",
    "ChannelState",
    "ClientState",
    "EnvelopeOutcome",
    "EnvelopeResult",
    "PendingAction",
    "channel_kind",
    "wall_clock_ms",
]

#: The root channel URI; connection-level commands use it as ``params.channel``.
ROOT_CHANNEL: Final = "ahp-root://"

ChannelKind: TypeAlias = Literal["root", "session", "chat"]
#: The state types this client mirrors (and can reduce).
ChannelState: TypeAlias = RootState | SessionState | ChatState
S = TypeVar("S", RootState, SessionState, ChatState)

_STATE_TYPES: Final[dict[ChannelKind, type[ChannelState]]] = {
    "root": RootState,
    "session": SessionState,
    "chat": ChatState,
}

#: Default cap on actions awaiting their echo, across all channels.
DEFAULT_MAX_PENDING: Final = 1024


def wall_clock_ms() -> float:
    """The default reducer clock: wall-clock milliseconds since the Unix epoch."""
    return time.time() * 1000.0


def channel_kind(uri: str) -> ChannelKind | None:
    """Which reducer a channel URI uses, or ``None`` for channels we do not mirror.

    ``ahp-session:/<id>`` is a session, but ``ahp-session:/<id>/annotations``
    (the annotations channel, §2) is not.
    """
    scheme, sep, rest = uri.partition(":")
    if not sep:
        return None
    if scheme == "ahp-root":
        return "root"
    if scheme == "ahp-chat":
        return "chat"
    if scheme == "ahp-session":
        path = rest.strip("/")
        return "session" if path and "/" not in path else None
    return None


@dataclass(frozen=True, slots=True)
class PendingAction:
    """An action this client dispatched and applied optimistically, awaiting its echo."""

    client_seq: int
    channel: str
    action: StateAction


class EnvelopeOutcome(StrEnum):
    """What :meth:`ClientState.apply_envelope` did with an envelope."""

    APPLIED = "applied"
    """Reduced into the channel's confirmed state."""
    REJECTED = "rejected"
    """Carried ``rejectionReason``; applied nowhere."""
    DUPLICATE = "duplicate"
    """Its ``serverSeq`` is already included in the confirmed state; skipped."""
    UNTRACKED = "untracked"
    """No state is mirrored for its channel; ignored (``serverSeq`` still noted)."""


@dataclass(frozen=True, slots=True)
class EnvelopeResult:
    """The outcome of one envelope, and which of our pending actions it answered."""

    outcome: EnvelopeOutcome
    acknowledged: PendingAction | None = None


class _Mirror:
    """One mirrored channel: confirmed state, its ``serverSeq``, pending actions, view cache."""

    __slots__ = ("confirmed", "kind", "pending", "seq", "view")

    def __init__(self, kind: ChannelKind, state: ChannelState, seq: int) -> None:
        self.kind: ChannelKind = kind
        self.confirmed: ChannelState = state
        self.seq = seq
        self.pending: list[PendingAction] = []
        self.view: ChannelState | None = state


class ClientState:
    """The reconciliation model of one client (one ``clientId``) across its channels.

    Not thread-safe and not async: the owner calls it from one place (the
    :class:`~ahp_server.client.connection.AhpClient` reader, or a test).

    ``clock`` is the reducers' clock in milliseconds since the epoch (default:
    the wall clock). ``max_pending`` bounds the pending actions across all
    channels; beyond it :meth:`dispatch` refuses with
    :class:`~ahp_server.client.errors.PendingOverflowError` (the server is
    not echoing — re-sync with reconnect instead of queueing without end).
    """

    def __init__(
        self,
        client_id: str,
        *,
        clock: Clock = wall_clock_ms,
        max_pending: int = DEFAULT_MAX_PENDING,
    ) -> None:
        self.client_id: Final = client_id
        self.clock: Final = clock
        self.max_pending: Final = max_pending
        self._mirrors: dict[str, _Mirror] = {}
        # Subscribed URIs in subscription order -> whether the server sent a snapshot.
        self._subscriptions: dict[str, bool] = {}
        self._last_seen = 0
        self._next_client_seq = 1
        self._pending_count = 0

    # -- reading ---------------------------------------------------------------------------

    @property
    def last_seen_server_seq(self) -> int:
        """The largest ``serverSeq`` received (envelope, snapshot ``fromSeq``, initialize)."""
        return self._last_seen

    @property
    def subscriptions(self) -> tuple[str, ...]:
        """Every subscribed channel, in subscription order (what ``reconnect`` lists)."""
        return tuple(self._subscriptions)

    @property
    def channels(self) -> tuple[str, ...]:
        """The channels whose state is mirrored (root, session and chat subscriptions)."""
        return tuple(self._mirrors)

    def is_subscribed(self, channel: str) -> bool:
        """Whether ``channel`` is subscribed (mirrored or not)."""
        return channel in self._subscriptions

    def has_state(self, channel: str) -> bool:
        """Whether a confirmed state is mirrored for ``channel``."""
        return channel in self._mirrors

    @overload
    def confirmed(self, channel: str) -> ChannelState: ...
    @overload
    def confirmed(self, channel: str, expected: type[S]) -> S: ...
    def confirmed(self, channel: str, expected: type[S] | None = None) -> ChannelState:
        """The server-confirmed state of ``channel``.

        With ``expected`` (e.g. ``ChatState``) the type is checked, which also
        gives type checkers the precise type. Raises
        :class:`~ahp_server.client.errors.UnknownChannelError` when no state is
        mirrored for the channel.
        """
        return _checked(channel, self._mirror(channel).confirmed, expected)

    @overload
    def view(self, channel: str) -> ChannelState: ...
    @overload
    def view(self, channel: str, expected: type[S]) -> S: ...
    def view(self, channel: str, expected: type[S] | None = None) -> ChannelState:
        """The optimistic state of ``channel``: confirmed + pending actions re-applied."""
        mirror = self._mirror(channel)
        if mirror.view is None:
            state = mirror.confirmed
            for entry in mirror.pending:
                state = reduce(state, entry.action, self.clock)
            mirror.view = state
        return _checked(channel, mirror.view, expected)

    def pending(self, channel: str | None = None) -> tuple[PendingAction, ...]:
        """Pending actions of one channel, or of every channel, in dispatch order."""
        if channel is not None:
            mirror = self._mirrors.get(channel)
            return tuple(mirror.pending) if mirror is not None else ()
        everything = [entry for mirror in self._mirrors.values() for entry in mirror.pending]
        return tuple(sorted(everything, key=lambda entry: entry.client_seq))

    # -- subscriptions ---------------------------------------------------------------------

    def load_snapshot(self, snapshot: Snapshot) -> bool:
        """Subscribe ``snapshot.resource`` with the snapshot as its confirmed state.

        Returns whether the state is mirrored (a root, session or chat state on
        a channel of that kind). Pending actions of an already mirrored channel
        are kept: they may still be echoed on this connection.
        """
        uri = snapshot.resource
        self._subscriptions[uri] = True
        self._observe(snapshot.from_seq)
        kind = channel_kind(uri)
        if kind is None or not isinstance(snapshot.state, _STATE_TYPES[kind]):
            self._drop_mirror(uri)
            return False
        previous = self._mirrors.get(uri)
        mirror = _Mirror(kind, snapshot.state, snapshot.from_seq)
        if previous is not None:
            mirror.pending = previous.pending
            mirror.view = None if mirror.pending else mirror.confirmed
        self._mirrors[uri] = mirror
        return True

    def add_subscription(self, channel: str) -> None:
        """Record a subscription that came without a snapshot (a stateless channel)."""
        self._subscriptions.setdefault(channel, False)

    def remove_subscription(self, channel: str) -> None:
        """Forget ``channel``: its subscription, mirrored state and pending actions."""
        self._subscriptions.pop(channel, None)
        self._drop_mirror(channel)

    # -- dispatching -----------------------------------------------------------------------

    def dispatch(self, channel: str, action: StateAction) -> PendingAction:
        """Allocate the next ``clientSeq`` for ``action`` and apply it optimistically.

        On a mirrored channel the action joins the pending list (and the view);
        on any other channel (e.g. answering ``inputNeeded`` on a chat we are
        not subscribed to, §10.6) only a ``clientSeq`` is allocated, since no
        echo is guaranteed to reach us there.
        """
        mirror = self._mirrors.get(channel)
        if mirror is not None and self._pending_count >= self.max_pending:
            raise PendingOverflowError(
                f"{self._pending_count} dispatched actions are still awaiting their echo"
            )
        entry = PendingAction(self._next_client_seq, channel, action)
        self._next_client_seq += 1
        if mirror is not None:
            mirror.pending.append(entry)
            self._pending_count += 1
            if mirror.view is not None:
                mirror.view = reduce(mirror.view, action, self.clock)
        return entry

    def forget_pending(self, channel: str, client_seq: int) -> PendingAction | None:
        """Drop a pending action that never reached the server (e.g. its send failed)."""
        return self._take_pending(channel, client_seq)

    # -- receiving -------------------------------------------------------------------------

    def apply_envelope(self, envelope: ActionEnvelope) -> EnvelopeResult:
        """Reconcile one received envelope (WIRE-SUMMARY §7, reconciliation.md)."""
        self._observe(envelope.server_seq)
        acknowledged: PendingAction | None = None
        origin = envelope.origin
        if isinstance(origin, ActionOrigin) and origin.client_id == self.client_id:
            acknowledged = self._take_pending(envelope.channel, origin.client_seq)
        if envelope.rejection_reason is not UNSET:
            return EnvelopeResult(EnvelopeOutcome.REJECTED, acknowledged)
        mirror = self._mirrors.get(envelope.channel)
        if mirror is None:
            return EnvelopeResult(EnvelopeOutcome.UNTRACKED, acknowledged)
        if envelope.server_seq <= mirror.seq:
            return EnvelopeResult(EnvelopeOutcome.DUPLICATE, acknowledged)
        mirror.confirmed = reduce(mirror.confirmed, envelope.action, self.clock)
        mirror.seq = envelope.server_seq
        mirror.view = mirror.confirmed if not mirror.pending else None
        return EnvelopeResult(EnvelopeOutcome.APPLIED, acknowledged)

    # -- resets (initialize / reconnect) ---------------------------------------------------

    def reset_from_initialize(
        self, server_seq: int, snapshots: Iterable[Snapshot], subscriptions: Iterable[str] = ()
    ) -> tuple[PendingAction, ...]:
        """Start over from an ``initialize`` result (a fresh handshake).

        Everything is replaced: ``last_seen_server_seq`` becomes the server's
        ``serverSeq`` (a restarted server may count from scratch), the mirrored
        states become ``snapshots``, and the subscriptions are the requested
        ``subscriptions`` plus every snapshot's channel. Returns the pending
        actions that were dropped.
        """
        dropped = self._clear_pending()
        self._mirrors.clear()
        self._subscriptions.clear()
        self._last_seen = server_seq
        for uri in subscriptions:
            self._subscriptions[uri] = False
        for snapshot in snapshots:
            self.load_snapshot(snapshot)
        return dropped

    def reset_from_replay(
        self, actions: Iterable[ActionEnvelope], missing: Iterable[str]
    ) -> tuple[PendingAction, ...]:
        """Apply a ``reconnect`` replay result: clear pending, drop ``missing``, replay ``actions``.

        Returns the pending actions that were dropped; those that reached the
        server come back inside ``actions`` and are applied from there.
        """
        dropped = self.reset_for_replay(missing)
        for envelope in actions:
            self.apply_envelope(envelope)
        return dropped

    def reset_for_replay(self, missing: Iterable[str]) -> tuple[PendingAction, ...]:
        """The first half of :meth:`reset_from_replay`: clear pending, drop ``missing``.

        For callers that feed the replayed envelopes through
        :meth:`apply_envelope` one by one themselves (to observe each).
        """
        dropped = self._clear_pending()
        for uri in missing:
            self.remove_subscription(uri)
        return dropped

    def reset_from_snapshots(self, snapshots: Iterable[Snapshot]) -> tuple[PendingAction, ...]:
        """Apply a ``reconnect`` snapshot result: fresh states, pending cleared.

        A state-bearing subscription absent from ``snapshots`` is gone, like in
        the reference client. Subscriptions that never had a snapshot
        (stateless channels) are kept: there is nothing to send for them.
        Returns the pending actions that were dropped.
        """
        dropped = self._clear_pending()
        fresh = list(snapshots)
        present = {snapshot.resource for snapshot in fresh}
        for uri, had_snapshot in list(self._subscriptions.items()):
            if had_snapshot and uri not in present:
                self.remove_subscription(uri)
        for snapshot in fresh:
            self.load_snapshot(snapshot)
        return dropped

    # -- internals -------------------------------------------------------------------------

    def _observe(self, server_seq: int) -> None:
        self._last_seen = max(self._last_seen, server_seq)

    def _mirror(self, channel: str) -> _Mirror:
        try:
            return self._mirrors[channel]
        except KeyError:
            raise UnknownChannelError(channel) from None

    def _drop_mirror(self, channel: str) -> None:
        mirror = self._mirrors.pop(channel, None)
        if mirror is not None:
            self._pending_count -= len(mirror.pending)

    def _take_pending(self, channel: str, client_seq: int) -> PendingAction | None:
        mirror = self._mirrors.get(channel)
        if mirror is None:
            return None
        for index, entry in enumerate(mirror.pending):
            if entry.client_seq == client_seq:
                del mirror.pending[index]
                self._pending_count -= 1
                mirror.view = None if mirror.pending else mirror.confirmed
                return entry
        return None

    def _clear_pending(self) -> tuple[PendingAction, ...]:
        dropped = self.pending()
        for mirror in self._mirrors.values():
            mirror.pending.clear()
            mirror.view = mirror.confirmed
        self._pending_count = 0
        return dropped


def _checked(channel: str, state: ChannelState, expected: type[S] | None) -> ChannelState:
    if expected is not None and not isinstance(state, expected):
        raise TypeError(
            f"channel {channel!r} holds a {type(state).__name__}, not a {expected.__name__}"
        )
    return state
