"""The store interface the host depends on, and the in-memory store.

Layer: store (I/O side). It stores bytes: the host hands it encoded JSON, so
the store needs no protocol types.

Contract (docs/durability.md):

* Writes are *queued* from the event loop and never block it. They are
  committed in the order they were queued.
* :meth:`Store.append_envelope` takes an ``on_commit`` callback (and its
  arguments, like ``loop.call_soon``: no closure per envelope). The store
  calls it on the event loop, after the envelope is durable, in ``serverSeq``
  order. The host delivers the envelope to clients only from that callback, so
  no client ever sees an envelope that a crash could lose.
* The ``serverSeq`` high-water mark is committed in the same transaction as
  the envelopes, so numbering resumes above every number ever sent.
* A commit that cannot be written (a full disk, an I/O error, a lost
  database connection) stops the store for good: nothing of it is delivered,
  later writes raise :class:`StoreError`, and :attr:`Store.failed` is
  resolved with the error — the one place the host learns it
  (``Host.failure``; docs/deploy.md "When the store fails").

:class:`MemoryStore` keeps nothing and commits instantly (``on_commit`` runs
inside the call): the ephemeral mode for tests and ``--data-dir :memory:``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "ChannelRow",
    "CommitWindow",
    "LoadedChannel",
    "MemoryStore",
    "Store",
    "StoreError",
    "newest_within",
    "spliced",
]

#: The commit window groups writes while two chats have written within this
#: many seconds of each other (their streams run at once); otherwise a lone
#: stream's writes commit at once ...
CONCURRENT_FOR = 0.1
#: ... unless it commits this many times within one window: a stream that fast
#: (tokens as fast as the loop turns, not a model's 40 a second, nor a client's
#: turns one after another) is grouped too, until it pauses for a window.
BURST = 16


class CommitWindow:
    """How long the next commit may wait (``storage.commit_window_ms``).

    The window exists to group concurrent streams into one commit. A lone
    stream — one turn, nothing else writing — gains nothing from it and would
    only wait: so it applies while envelopes of two chats have been queued
    within :data:`CONCURRENT_FOR` of each other, and not otherwise. Channels
    other than chats (a session's, the root) do not count: one turn writes
    its chat and its session. A lone stream that commits :data:`BURST` times
    within one window is held too (a commit per delta would cost it far more
    than the window's wait), until a window passes without a commit.
    """

    __slots__ = ("_burst", "_burst_from", "_chat", "_fast", "_mixed_at", "last_commit", "window")

    def __init__(self, window: float) -> None:
        self.window = window
        #: When the last commit started (the event loop's clock).
        self.last_commit = 0.0
        self._chat: str | None = None
        self._mixed_at = -CONCURRENT_FOR
        #: Commits counted since ``_burst_from`` (a window's span), and whether
        #: the stream is a fast one (held until it pauses).
        self._burst = 0
        self._burst_from = 0.0
        self._fast = False

    def wrote(self, channel: str, now: Callable[[], float]) -> None:
        """An envelope of ``channel`` was queued (the hot path: a compare, mostly)."""
        if channel != self._chat and channel.startswith("ahp-chat:"):  # protocol/uris.py
            if self._chat is not None:
                self._mixed_at = now()
            self._chat = channel

    def concurrent(self, now: float) -> bool:
        """Whether envelopes of two chats were queued within :data:`CONCURRENT_FOR`."""
        return now - self._mixed_at < CONCURRENT_FOR

    def delay(self, now: float) -> float:
        """Seconds the commit of a write queued ``now`` waits (0: at once).

        Called once per commit, by the first write after the last one.
        """
        window = self.window
        if now - self.last_commit >= window:  # a pause: whatever came before is over
            self._fast = False
            self._burst, self._burst_from = 1, now
        elif not self._fast:
            if now - self._burst_from >= window:
                self._burst, self._burst_from = 0, now
            self._burst += 1
            self._fast = self._burst >= BURST
        if not (self._fast or self.concurrent(now)):
            return 0.0
        return self.last_commit + window - now


class StoreError(Exception):
    """The store cannot be used (unreadable file, newer schema, failed commit)."""


@dataclass(frozen=True, slots=True)
class ChannelRow:
    """A stored session or chat, as listed without loading it."""

    uri: str
    kind: str  # "session" | "chat"
    session: str | None
    created_at: str
    #: JSON of the session's SessionSummary (sessions only).
    summary: bytes | None
    #: What the channel was in the middle of when last seen, to recover at
    #: start: a chat's running turn id, or ``"creating"`` for a session whose
    #: agent was still being opened. ``None`` when it was at rest.
    unfinished: str | None


@dataclass(slots=True)
class LoadedChannel:
    """What it takes to rebuild a channel: a snapshot and the log after it."""

    snapshot: bytes | None
    snapshot_seq: int
    #: Chats: how many completed turns the snapshot had (turns live in their own table).
    turn_count: int
    #: (serverSeq, clock ms, envelope JSON) after the snapshot, in order.
    envelopes: list[tuple[int, float, bytes]] = field(default_factory=list)
    #: The highest serverSeq of this channel no longer in the log.
    log_floor: int = 0
    #: The newest retained completed turns (JSON), oldest first, and the
    #: position of the first of them.
    turns: list[bytes] = field(default_factory=list)
    first_turn_position: int = 0
    #: What the chat's agent asked the host to keep for it (opaque), if anything.
    agent_state: str | None = None


class Store:
    """Base class and in-memory implementation: nothing is kept."""

    durable = False
    #: Whether the commit takes the ``serverSeq``s (sharded mode, ``store/sharded.py``):
    #: envelopes are then queued with :meth:`append_unnumbered`, never
    #: :meth:`append_envelope`.
    numbers_at_commit = False
    #: The error that stopped the store (a failed commit), once one did.
    _failure: BaseException | None = None
    _failed_future: asyncio.Future[BaseException] | None = None

    @property
    def path(self) -> str:
        return ":memory:"

    @property
    def failed(self) -> asyncio.Future[BaseException]:
        """Resolved (never raised into) with the error once a failed commit stopped the store.

        For the store's owner to stop without polling (``Host.failure``; a
        cluster node, ``cluster.py``). Pending while the store works, and after
        a clean :meth:`close`. Created on first use; call from the event loop.
        """
        future = self._failed_future
        if future is None:
            future = self._failed_future = asyncio.get_running_loop().create_future()
            if self._failure is not None:
                future.set_result(self._failure)
        return future

    def _stopped_by(self, error: BaseException) -> None:
        """On the loop: ``error`` stopped the store; tell whoever watches :attr:`failed`."""
        if self._failure is None:
            self._failure = error
        future = self._failed_future
        if future is not None and not future.done():
            future.set_result(self._failure)

    def open(self) -> int:
        """Open (and migrate) the store; returns the stored ``serverSeq`` high-water mark."""
        return 0

    async def start(self) -> int:
        """:meth:`open` from the event loop: what the host calls.

        A store whose driver is asynchronous (PostgreSQL) opens here; the
        others open synchronously, as before.
        """
        return self.open()

    async def close(self) -> None:
        """Commit everything queued and release the store."""

    # -- writes (queued, in order) -------------------------------------------------------

    @property
    def backlog(self) -> int:
        """Writes queued but not yet committed."""
        return 0

    @property
    def has_room(self) -> bool:
        """Whether :meth:`wait_for_room` would return at once."""
        return True

    async def wait_for_room(self) -> None:
        """Wait while the write queue is over its high-water mark (backpressure)."""

    async def flush(self) -> None:
        """Wait until everything queued so far is committed."""

    def commit_soon(self) -> None:
        """Commit what is queued at the next opportunity: a client waits for it.

        A store may hold commits back for a short window to group them
        (``storage.commit_window_ms``); a client's own action is not held.
        """

    def append_envelope(
        self,
        seq: int,
        channel: str,
        at_ms: float,
        envelope: bytes,
        on_commit: Callable[..., None],
        *args: object,
    ) -> None:
        """Queue one envelope; ``on_commit(*args)`` runs once it is durable (in order)."""
        on_commit(*args)

    def append_unnumbered(
        self,
        channel: str,
        at_ms: float,
        body: bytes,
        on_commit: Callable[..., None],
        *args: object,
    ) -> None:
        """Queue one envelope without its number (``numbers_at_commit`` stores only).

        ``body`` is the envelope without ``serverSeq``; the commit numbers it and
        ``on_commit(seq, *args)`` runs once it is durable, in number order.
        """
        raise StoreError("this store numbers envelopes before the commit (append_envelope)")

    def after_queued(self, callback: Callable[..., None], *args: object) -> None:
        """Run ``callback(*args)`` once everything queued so far is durable.

        In order with the ``on_commit`` callbacks of :meth:`append_envelope`:
        after those of the envelopes queued before it, before those of the
        envelopes queued after it. Writes nothing. (A refused dispatch's echo
        waits here so that it never overtakes the echo of the same client's
        earlier action, which waits for its commit: ``Hub.reject``.)
        """
        callback(*args)

    def put_channel(
        self, uri: str, kind: str, session: str | None, created_at: str, summary: bytes | None
    ) -> None:
        """Create or update a channel row (a session's summary changes often)."""

    def set_unfinished(self, uri: str, marker: str | None) -> None:
        """Record what a channel is in the middle of (``ChannelRow.unfinished``), or ``None``."""

    def set_channel_session(self, uri: str, session: str) -> None:
        """Record that a chat now belongs to ``session`` (``moveChat``; ``ChannelRow.session``)."""

    def put_agent_state(self, uri: str, state: str | None) -> None:
        """Keep what a chat's agent needs across restarts (``LoadedChannel.agent_state``)."""

    def put_snapshot(self, uri: str, seq: int, state: bytes, turn_count: int) -> None:
        """Replace a channel's snapshot and prune its log before the previous one."""

    def put_turn(self, chat: str, position: int, turn_id: str, turn: bytes) -> None:
        """Store one completed turn of a chat (append-only history)."""

    def truncate_turns(self, chat: str, keep: int) -> None:
        """Drop a chat's stored turns from position ``keep`` on."""

    def put_client(
        self,
        client_id: str,
        version: str,
        user: str | None = None,
        forget: Sequence[str] = (),
    ) -> None:
        """Remember a client id (now its most recently seen), its protocol version and its
        user; forget the ids in ``forget``.

        ``user``: the multi-user mode user that first claimed the id (``None``
        otherwise), so another user cannot claim it after a restart
        (docs/protocol.md, "Client identity"). Which ids to forget is the
        host's decision (``Host.remember_client``: per user, never a live id);
        the store forgets exactly those.
        """

    def delete_channel(self, uri: str) -> None:
        """Forget a channel: its row, snapshot, log and turns."""

    # -- reads ---------------------------------------------------------------------------------

    async def clients(self) -> list[tuple[str, str, str | None]]:
        """Remembered (client id, protocol version, user), least recently seen first."""
        return []

    async def channels(self) -> list[ChannelRow]:
        return []

    async def load(self, uri: str, *, retained_turns: int) -> LoadedChannel | None:
        return None

    async def turn_position(self, chat: str, turn_id: str) -> int | None:
        """The stored position of a chat's turn, if it is stored."""
        return None

    async def turns(self, chat: str, before: int, limit: int) -> list[bytes]:
        """Stored turns with ``before - limit <= position < before``, oldest first."""
        return []

    # Bounded in bytes as well as in count (docs/durability.md "History"). These
    # defaults read by count and then drop the oldest over the budget; a store
    # that can stop reading at the budget overrides them (SqliteStore).

    async def load_chat(
        self, uri: str, *, retained_turns: int, retained_bytes: int
    ) -> LoadedChannel | None:
        """:meth:`load` with the newest turns that fit in ``retained_bytes``."""
        loaded = await self.load(uri, retained_turns=retained_turns)
        if loaded is not None:
            drop = len(loaded.turns) - newest_within([len(t) for t in loaded.turns], retained_bytes)
            if drop:
                del loaded.turns[:drop]
                loaded.first_turn_position += drop
        return loaded

    async def turns_within(self, chat: str, before: int, limit: int, max_bytes: int) -> list[bytes]:
        """:meth:`turns`, only the newest of them that fit in ``max_bytes``."""
        rows = await self.turns(chat, before, limit)
        return rows[len(rows) - newest_within([len(r) for r in rows], max_bytes) :]


MemoryStore = Store


def newest_within(sizes: list[int], budget: int) -> int:
    """How many of the last ``sizes`` fit in ``budget`` bytes — at least one.

    The newest always counts, even alone over the budget: a page of no turns
    could never be paged past (docs/protocol.md, "Chat history is bounded in bytes").
    """
    total = count = 0
    for size in reversed(sizes):
        if count and total + size > budget:
            break
        total += size
        count += 1
    return count


def spliced(seq: int, body: bytes) -> bytes:
    """An envelope stored or carried without ``serverSeq`` (sharded mode), as sent:
    ``serverSeq`` first, then the body's fields (docs/scale-out.md "One ``serverSeq``")."""
    return b'{"serverSeq":%d,%s' % (seq, body[1:])
