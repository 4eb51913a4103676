"""Channel actors: the single writer of each root, session and chat state.

Layer: host (asyncio).

Each channel is owned by one actor task with a bounded inbox. Only the actor
changes its state, and always the same way (:meth:`ChannelActor.apply`): run
the pure reducer, take the next global ``serverSeq`` and publish the envelope —
one synchronous step, so ordering holds across actors (see ``sequencer.py``).
Actors never wait on a subscriber: publishing only appends to outboxes.

An actor knows its host only as a :class:`~ahp_server.host.core.runtime.Runtime`
(settings, hub, clock, tasks, providers): the ``Host`` registry sits above
this module and imports it, never the other way round.

Inbox policy (docs/architecture.md): producers *wait* when an actor's inbox is
full. Waits only ever go one way — connection/turn engine → chat actor →
session actor → (root notifications, which never wait) — so no cycle of full
inboxes can deadlock.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

import structlog
from msgspec import UNSET, UnsetType
from msgspec.structs import astuple, replace

from ahp_server.agents.base import InputAnswer, ToolDecision, TurnRequest
from ahp_server.host.core.fanout import Connection
from ahp_server.host.core.mailbox import Mailbox
from ahp_server.host.core.runtime import Runtime
from ahp_server.host.core.sequencer import action_type
from ahp_server.host.turns import TurnRunner
from ahp_server.protocol import codec
from ahp_server.protocol.dispatch_rules import Rejection, RejectionCode, check_dispatch
from ahp_server.protocol.reducers import (
    Clock,
    iso_timestamp,
    reduce_chat,
    reduce_root,
    reduce_session,
)
from ahp_server.protocol.reducers._common import ACTIVITY_MASK
from ahp_server.protocol.reducers.chat import part_id_of
from ahp_server.protocol.types import (
    ActionEnvelope,
    ActionOrigin,
    ActiveTurn,
    ChangesetState,
    ChatDeltaAction,
    ChatErrorAction,
    ChatInputCompletedAction,
    ChatIsReadChangedAction,
    ChatPendingMessageRemovedAction,
    ChatPendingMessageSetAction,
    ChatReasoningAction,
    ChatState,
    ChatSummary,
    ChatToolCallApprovedAction,
    ChatToolCallCompleteAction,
    ChatToolCallDeniedAction,
    ChatTruncatedAction,
    ChatTurnCancelledAction,
    ChatTurnResumeAction,
    ChatTurnsLoadedAction,
    ChatTurnStartedAction,
    ErrorInfo,
    ErrorResponsePart,
    InputRequestResponsePart,
    MarkdownResponsePart,
    Message,
    PartialChatSummary,
    PartialSessionSummary,
    PendingMessage,
    ReasoningResponsePart,
    ResourceWatchState,
    ResponsePart,
    RootState,
    SessionChatInputRequest,
    SessionChatSummary,
    SessionChatUpdatedAction,
    SessionInputNeededRemovedAction,
    SessionInputNeededSetAction,
    SessionInputRequest,
    SessionIsArchivedChangedAction,
    SessionState,
    SessionStatus,
    SessionSummary,
    SessionSummaryChangedParams,
    SessionTitleChangedAction,
    SessionToolAuthenticationRequest,
    SessionToolClientExecutionRequest,
    SessionToolConfirmationRequest,
    TerminalState,
    ToolCallAuthRequiredState,
    ToolCallClientContributor,
    ToolCallPendingConfirmationState,
    ToolCallPendingResultConfirmationState,
    ToolCallResponsePart,
    ToolCallResult,
    ToolCallRunningState,
    Turn,
)
from ahp_server.protocol.uris import CHAT_SCHEME, ROOT, SESSION_SCHEME
from ahp_server.workspace.paths import PathRefused

__all__ = [
    "CHAT_SCHEME",
    "OWNER_META",
    "ROOT",
    "SESSION_SCHEME",
    "ChannelActor",
    "ChatActor",
    "RootActor",
    "SessionActor",
    "SourceContext",
    "chat_summary",
    "turns_cursor",
]

log = structlog.get_logger(__name__)

S = TypeVar(
    "S", RootState, SessionState, ChatState, TerminalState, ChangesetState, ResourceWatchState
)
R = TypeVar("R")

#: The ``_meta`` key of a session's creator in multi-user mode (server-only:
#: ``session/metaChanged`` is not client-dispatchable). docs/protocol.md.
OWNER_META = "ahp-server/owner"
DEFAULT_SESSION_TITLE = "New Session"


# -- messages --------------------------------------------------------------------------------


@dataclass(slots=True)
class _ClientDispatch:
    action: object
    origin: ActionOrigin
    connection: Connection


@dataclass(slots=True)
class _Refusal:
    """A client's dispatch refused before it reached the actor (``ChannelActor.refuse``)."""

    action: object
    origin: ActionOrigin
    connection: Connection
    reason: str


@dataclass(slots=True)
class _ServerAction:
    action: object
    runner: TurnRunner | None = None
    final: bool = False
    done: asyncio.Future[int] | None = None


@dataclass(slots=True)
class _Call:
    fn: Callable[[], Awaitable[Any]]
    future: asyncio.Future[Any]


@dataclass(slots=True)
class _ChatChanged:
    """A chat's catalogue entry and blocking requests, for its session to mirror."""

    chat: str
    summary: ChatSummary | None
    requests: tuple[SessionInputRequest, ...]


# -- the base actor --------------------------------------------------------------------------


class ChannelActor(Generic[S]):
    """Owns one channel's state; everything that changes it goes through the inbox."""

    def __init__(self, host: Runtime, uri: str, state: S) -> None:
        self.host: Runtime = host
        self.uri: str = uri
        #: The latest state: every applied action, committed or not. Actions
        #: are validated and reduced against it.
        self.state: S = state
        #: The state as of the last *delivered* (committed) action: what a
        #: snapshot shows, consistent with ``hub.delivered_seq``.
        self.visible: S = state
        #: The ``serverSeq`` of this channel's latest action (or of its creation).
        self.last_seq = host.hub.server_seq
        self._since_snapshot = 0
        self._log_bytes = 0
        self._snapshot_bytes = 0
        #: Whether anything is kept: snapshots and stored turns are only
        #: encoded for a durable store (the in-memory store drops them).
        self._durable = host.hub.store.durable
        #: Actions applied but not yet committed. Each holds its resulting state
        #: until then, so the window is bounded (``actor_in_flight``).
        self._in_flight = 0
        #: The actor's task waits for a commit (over its in-flight limit).
        self._commit_waiter: asyncio.Future[None] | None = None
        self.inbox: Mailbox[object] = Mailbox(host.settings.actor_inbox)
        self._in_flight_limit = host.settings.actor_in_flight
        self.closed = False
        self._task: asyncio.Task[None] | None = None
        #: The actor's task waits on an empty inbox, holding nothing: a message
        #: that needs no awaiting can be handled by whoever submits it (submit()).
        self._idle = False
        #: The connection whose dispatch is being applied (only during that ``apply``).
        self._sender: Connection | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name=f"actor {self.uri}")

    async def stop(self) -> None:
        self.closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        structlog.contextvars.bind_contextvars(channel=self.uri)  # this task's log lines
        store = self.host.hub.store
        inbox = self.inbox
        limit = self._in_flight_limit
        while True:
            if inbox:
                message = inbox.get_nowait()
            else:
                self._idle = True  # parked: submit() may handle a message right away
                try:
                    message = await inbox.get()
                finally:
                    self._idle = False
            try:
                if not self.handle_now(message):
                    await self._handle(message)
                while self._in_flight > limit:  # this chat outruns the disk: slow it down
                    waiter = self._commit_waiter = asyncio.get_running_loop().create_future()
                    await waiter
                if store.backlog:
                    await store.wait_for_room()  # all chats together outrun the disk
            except Exception:  # task boundary: one bad message must not kill the channel
                log.exception("actor failed", channel=self.uri, message=type(message).__name__)

    # -- entry points (any task) --------------------------------------------------------------

    async def submit(self, message: object) -> None:
        """Queue a message; waits while the inbox is full (backpressure).

        An idle actor (its task parked on an empty inbox, under its in-flight
        limit, the store keeping up) handles a message that needs no awaiting
        (:meth:`handle_now`) at once, in the caller's task: the same as its own
        task would do next, without waking it — nothing is queued before it,
        and a synchronous handler cannot interleave with anything. That saves
        a task switch per message on the hops a turn makes (a chat's catalogue
        entry into its session).
        """
        if not self.offer(message):
            await self.inbox.put(message)

    def offer(self, message: object) -> bool:
        """:meth:`submit` without waiting: False when the inbox is full (nothing done).

        (A closed actor takes and drops everything.)
        """
        if self.closed:
            return True
        if self._idle and not self.inbox and self._may_run() and self._handle_inline(message):
            return True
        return self.inbox.offer(message)

    def _handle_inline(self, message: object) -> bool:
        """Handle ``message`` in the caller's task (the actor is idle); False: queue it."""
        self._idle = False  # re-entrant submits queue behind this message
        try:
            return self.handle_now(message)
        except Exception:  # this actor's boundary, as in _loop: the caller is not at fault
            log.exception("actor failed", channel=self.uri, message=type(message).__name__)
            return True
        finally:
            self._idle = not self.inbox

    def _may_run(self) -> bool:
        """Under the in-flight limit and the store has room (what _loop waits for)."""
        return self._in_flight <= self._in_flight_limit and self.host.hub.store.has_room

    async def dispatch(self, action: object, origin: ActionOrigin, connection: Connection) -> None:
        """A client's ``dispatchAction`` (validated, then applied or echoed as rejected)."""
        await self.submit(_ClientDispatch(action, origin, connection))

    async def refuse(
        self, action: object, origin: ActionOrigin, connection: Connection, reason: str
    ) -> None:
        """Echo a dispatch as rejected that was refused before it got here (rate, payload).

        In its turn: after the dispatches queued before it — among them the
        same client's earlier ones, whose echoes it must not overtake (see
        ``Hub.reject``). With nothing queued it is echoed at once.
        """
        if self._idle and not self.inbox:
            self.host.hub.reject(connection, self.uri, action, origin, reason)
        else:
            await self.submit(_Refusal(action, origin, connection, reason))

    async def apply_server(self, action: object) -> int:
        """Apply a server-originated action and wait until it is published."""
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        await self.submit(_ServerAction(action, done=done))
        return await done

    async def call(self, fn: Callable[[], Awaitable[R]]) -> R:
        """Run ``fn`` inside the actor (between two messages) and return its result."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        await self.submit(_Call(fn, future))
        return await future

    # -- inside the actor ---------------------------------------------------------------------

    def reduce(self, state: S, action: object, now: Clock) -> S:
        raise NotImplementedError

    def check(self, action: object, client_id: str) -> Rejection | None:
        return check_dispatch(self.state, action, client_id)

    def apply(
        self,
        action: object,
        origin: ActionOrigin | None = None,
        done: asyncio.Future[int] | None = None,
    ) -> int:
        """Reduce, sequence and publish one action — the only way state changes.

        ``visible`` (and ``done``) follow once the store has committed it.
        """
        before = self.state
        at = self.host.now()  # one clock reading: the reducer's and the log's (replays match)
        after = self.settle(action, before, self.reduce(before, action, lambda: at))
        self.state = after
        seq = self._publish(action, origin, done, at, after)
        self.after_apply(action, before)
        self._maybe_snapshot()
        if origin is not None:
            # Its sender waits for the echo: commit now — with what after_apply
            # queued (a turn's unfinished marker), so the echo is never durable
            # without it (a store failing in between would leave a turn that
            # nothing ends after a restart; docs/durability.md).
            self.host.hub.store.commit_soon()
        return seq

    def _show(self, token: Any) -> None:
        """Make the state ``token`` stands for the visible one (its envelope was delivered)."""
        self.visible = token

    def delivered(self, seq: int, token: object, done: asyncio.Future[int] | None) -> None:
        """The hub delivered one of this channel's actions (``DeliveryListener``)."""
        self._show(token)
        self._in_flight -= 1
        waiter = self._commit_waiter
        if waiter is not None:
            self._commit_waiter = None
            if not waiter.done():
                waiter.set_result(None)
        if done is not None and not done.done():
            done.set_result(seq)

    def _publish(
        self,
        action: object,
        origin: ActionOrigin | None,
        done: asyncio.Future[int] | None,
        at: float,
        token: object,
    ) -> int:
        """Publish ``action``; once delivered, ``token`` is shown (see :meth:`_show`)."""
        self._in_flight += 1
        hub = self.host.hub
        seq = hub.publish(
            self.uri, action, origin, self, token, done, at_ms=at, sender=self._sender
        )
        if seq:  # 0: numbered at commit (sharded mode); the store resolves snapshots' seq
            self.last_seq = seq
        self._since_snapshot += 1
        self._log_bytes += hub.last_envelope_size
        return seq

    def _maybe_snapshot(self) -> None:
        # Amortized: a snapshot is written only after at least as many log bytes
        # as the previous snapshot had, so snapshots never cost more than the log.
        if (
            self._durable
            and self._since_snapshot >= self.host.settings.snapshot_every
            and self._log_bytes >= self._snapshot_bytes
        ):
            self.snapshot()

    def settle(self, action: object, before: S, after: S) -> S:
        """The host's own copy of the reduced state, before it is published.

        The identity here; a chat drops old turns from memory (ChatActor).
        """
        return after

    def after_apply(self, action: object, before: S) -> None:
        """Synchronous bookkeeping right after an action is published (persistence)."""

    def snapshot(self) -> None:
        """Queue a snapshot of the latest state (the log before it can then be pruned)."""
        if self._durable:
            self._store_snapshot(codec.encode(self.state), 0)

    def _store_snapshot(self, state: bytes, turn_count: int) -> None:
        self._since_snapshot = 0
        self._log_bytes = 0
        self._snapshot_bytes = len(state)
        self.host.hub.store.put_snapshot(self.uri, self.last_seq, state, turn_count)

    async def after_client_action(self, action: object, client_id: str) -> None:
        """Side effects of an accepted client action."""

    async def after_server_action(self, message: _ServerAction) -> None:
        """Side effects of an applied server action."""

    async def handle_other(self, message: object) -> None:
        raise TypeError(f"unexpected message {message!r}")

    def handle_now(self, message: object) -> bool:
        """Handle ``message`` synchronously if it needs no awaiting (the hot path).

        True when it was handled; otherwise :meth:`_handle` takes it.
        """
        return False

    async def _handle(self, message: object) -> None:
        match message:
            case _ClientDispatch():
                if self.apply_dispatch(message):
                    await self.after_client_action(message.action, message.origin.client_id)
            case _ServerAction():
                if not self.accepts(message):
                    if message.done is not None and not message.done.done():
                        message.done.set_result(self.host.hub.delivered_seq)
                    return
                self.apply(message.action, done=message.done)
                await self.after_server_action(message)
            case _Refusal():
                hub = self.host.hub
                hub.reject(
                    message.connection, self.uri, message.action, message.origin, message.reason
                )
            case _Call():
                future = message.future
                try:
                    result = await message.fn()
                except Exception as error:  # noqa: BLE001 - handed to the caller, which raises it
                    if not future.done():
                        future.set_exception(error)
                else:
                    if not future.done():
                        future.set_result(result)
            case _:
                await self.handle_other(message)

    def apply_dispatch(self, message: _ClientDispatch) -> bool:
        """Check a client's action, then apply it or echo it as rejected; True if applied."""
        action, origin, connection = message.action, message.origin, message.connection
        rejection = self.check(action, origin.client_id)
        if rejection is not None:
            self.host.counters.rejected += 1
            log.info(
                "action rejected",
                channel=self.uri,
                client_id=origin.client_id,
                action=action_type(action),
                code=rejection.code.value,
            )
            self.host.hub.reject(connection, self.uri, action, origin, rejection.reason)
            return False
        self._sender = connection  # acknowledged even if not subscribed (§7.2)
        try:
            self.apply(self.recorded(action), origin)
        finally:
            self._sender = None
        return True

    def recorded(self, action: object) -> object:
        """An accepted client action as it is applied, published and stored; its side
        effects (:meth:`after_client_action`) get the action as dispatched. The
        identity here; a terminal drops input typed with echo off (host/channels/terminals.py)."""
        return action

    def accepts(self, message: _ServerAction) -> bool:
        return True


# -- root ------------------------------------------------------------------------------------


class RootActor(ChannelActor[RootState]):
    """``ahp-root://``: agents, active-session count, host config."""

    def reduce(self, state: RootState, action: object, now: Clock) -> RootState:
        return reduce_root(state, action, now)

    # Sharded mode (docs/scale-out.md "Root state: one view"): only the root channel's
    # owner writes it; every other node mirrors the owner's envelopes (mirror) and
    # writes nothing for it — its store would refuse the commit as a session not held.

    def check(self, action: object, client_id: str) -> Rejection | None:
        if not self.host.owns(ROOT):  # a client's action that was not forwarded
            # root/configChanged is the only client action on the root channel.
            return Rejection(
                RejectionCode.ConfigNotMutable,
                "the root channel is another node's, not writable here: try again",
            )
        return super().check(action, client_id)

    def apply(
        self,
        action: object,
        origin: ActionOrigin | None = None,
        done: asyncio.Future[int] | None = None,
    ) -> int:
        if self.host.owns(ROOT):
            return super().apply(action, origin, done)
        # A server action decided before the root moved to another node: the new
        # owner publishes its own (it recounts and relists when it takes the root).
        log.info("root action not applied: another node owns the root", action=action_type(action))
        if done is not None and not done.done():
            done.set_result(0)
        return 0

    def snapshot(self) -> None:
        if self.host.owns(ROOT):
            super().snapshot()

    def mirror(self, envelope: bytes) -> None:
        """Sharded mode, on a node that does not own the root channel: the owner's root
        envelope, delivered here from the feed, applied to what snapshots show."""
        try:
            action = codec.decode(envelope, ActionEnvelope).action
        except ValueError:
            return
        self.state = self.visible = self.reduce(self.visible, action, self.host.now)


# -- session ---------------------------------------------------------------------------------

_SUMMARY_FIELDS = (
    "title",
    "status",
    "activity",
    "modified_at",
    "origin",
    "interactivity",
    "working_directories",
    "movable",
)


def chat_summary(state: ChatState) -> ChatSummary:
    """The catalogue entry a chat's state denormalizes (WIRE-SUMMARY §10.7)."""
    return ChatSummary(
        resource=state.resource,
        title=state.title,
        status=state.status,
        activity=state.activity,
        modified_at=state.modified_at,
        origin=state.origin,
        interactivity=state.interactivity,
        working_directories=state.working_directories,
        movable=state.movable,
    )


#: (position in ChatSummary, name) of the fields a catalogue update may carry:
#: ``primaryWorkingDirectory`` is fixed at creation and never sent.
_CHANGING_FIELDS = tuple(
    (ChatSummary.__struct_fields__.index(field), field)
    for field in _SUMMARY_FIELDS
    if field != "primary_working_directory"
)


def _summary_changes(old: ChatSummary, new: ChatSummary) -> PartialChatSummary | None:
    """Only the changed fields; a cleared field is sent as ``null``."""
    before, after = astuple(old), astuple(new)  # compared by position: no getattr per field
    changes = {
        field: None if after[i] is UNSET else after[i]
        for i, field in _CHANGING_FIELDS
        if before[i] != after[i]
    }
    return PartialChatSummary(**changes) if changes else None


_IDLE = int(SessionStatus.Idle)
_ERROR = int(SessionStatus.Error)
_IS_READ = int(SessionStatus.IsRead)
_IS_ARCHIVED = int(SessionStatus.IsArchived)

#: (position, name) of a session summary's fields that change; the identity
#: fields never do (root.md).
_SESSION_CHANGING_FIELDS = tuple(
    (i, field)
    for i, field in enumerate(SessionSummary.__struct_fields__)
    if field not in ("resource", "provider", "created_at")
)


class SessionActor(ChannelActor[SessionState]):
    """``ahp-session:/<id>``: the session, its chat catalogue and its input roll-up."""

    def __init__(self, host: Runtime, uri: str, state: SessionState, *, created_at: str) -> None:
        super().__init__(host, uri, state)
        self.created_at = created_at
        self.chats: dict[str, ChatActor] = {}
        self.summary = self.compute_summary()

    def reduce(self, state: SessionState, action: object, now: Clock) -> SessionState:
        return reduce_session(state, action, now)

    @property
    def owner(self) -> str | None:
        """The user who created the session (multi-user mode), kept in its ``_meta``."""
        meta = self.state.meta
        owner = meta.get(OWNER_META) if isinstance(meta, dict) else None
        return owner if isinstance(owner, str) else None

    def check(self, action: object, client_id: str) -> Rejection | None:
        return check_dispatch(
            self.state, action, client_id, directory_refusal=self._directory_refusal
        )

    def _directory_refusal(self, directory: str) -> str | None:
        """Why ``directory`` may not be one of this session's: outside its owner's roots."""
        try:
            self.host.roots.check_directory(directory, self.owner)
        except PathRefused as error:
            return str(error)
        return None

    def after_apply(self, action: object, before: SessionState) -> None:
        self._publish_summary()

    def compute_summary(self) -> SessionSummary:
        """The catalogue entry of this session (``listSessions``, ``root/session*``)."""
        state = self.state
        default = state.default_chat
        modified = self.created_at
        source: ChatSummary | None = None  # the default chat, else the newest
        newest: ChatSummary | None = None
        failed = False
        for chat in state.chats:  # one pass (runs twice a turn)
            if chat.modified_at > modified:
                modified = chat.modified_at
            if source is None and chat.resource == default:
                source = chat
            if newest is None or chat.modified_at > newest.modified_at:
                newest = chat
            if chat.status & ACTIVITY_MASK == _ERROR:
                failed = True
        if source is None:
            source = newest
        activity = (source.status & ACTIVITY_MASK) if source else _IDLE
        if not isinstance(state.input_needed, UnsetType) and state.input_needed:
            activity = int(SessionStatus.InputNeeded)
        elif failed:
            activity = _ERROR
        activity_text = source.activity if source else UNSET
        if state.lifecycle == "failed":
            # Its agent never started: an error, and why, for a list that shows
            # only summaries (the lifecycle is on the session channel alone).
            activity = _ERROR
            error = state.creation_error
            reason = error.message if not isinstance(error, UnsetType) else "unknown error"
            activity_text = f"Failed to start: {reason}"
        status = (state.status & ~ACTIVITY_MASK) | activity
        return SessionSummary(
            provider=state.provider,
            title=state.title,
            status=status,
            activity=activity_text,
            working_directories=state.working_directories,
            resource=self.uri,
            created_at=self.created_at,
            modified_at=modified,
            meta=state.meta,
            # 1.0: the session's chat catalogue and its default chat, kept in
            # step with the session channel's (a 0.7 view leaves them out).
            chats=tuple(
                SessionChatSummary(
                    resource=chat.resource,
                    title=chat.title,
                    origin=chat.origin,
                    interactivity=chat.interactivity,
                    status=chat.status,
                    changes=chat.changes,
                )
                for chat in state.chats
            ),
            default_chat=default,
        )

    def _publish_summary(self) -> None:
        summary = self.compute_summary()
        if summary == self.summary:
            return
        before, after = astuple(self.summary), astuple(summary)
        changes = {
            field: None if after[i] is UNSET else after[i]
            for i, field in _SESSION_CHANGING_FIELDS
            if before[i] != after[i]
        }
        self.summary = summary
        self.persist_row()
        if changes:
            self.host.notify_root(
                "root/sessionSummaryChanged",
                SessionSummaryChangedParams(
                    channel=ROOT, session=self.uri, changes=PartialSessionSummary(**changes)
                ),
                session=self.uri,
                owner=self.host.owner_of(self.uri),
            )

    async def handle_other(self, message: object) -> None:
        if isinstance(message, _ChatChanged):
            self._mirror_chat(message)
            return
        await super().handle_other(message)

    def handle_now(self, message: object) -> bool:
        # A chat's catalogue entry: synchronous (two per turn, see submit()).
        if type(message) is _ChatChanged:
            assert isinstance(message, _ChatChanged)
            self._mirror_chat(message)
            return True
        return False

    def has_room(self, messages: int) -> bool:
        """Whether :meth:`offer` takes ``messages`` messages now."""
        return self.closed or self.inbox.room() >= messages

    def persist_new(self) -> None:
        """Store a new session: its catalogue row and a first snapshot."""
        self.persist_row()
        self.snapshot()

    def persist_row(self) -> None:
        """Store this session's catalogue row (``listSessions`` reads it without loading)."""
        self.host.hub.store.put_channel(
            self.uri, "session", None, self.created_at, codec.encode(self.summary)
        )

    def _archive_with_default_chat(self, chat: str, status: int) -> None:
        """Archiving the default chat "is equivalent to archiving the session"
        (``ChatIsArchivedChangedAction``): the session's IsArchived follows a
        change of the default chat's, and only a change (archiving the session
        itself leaves its chats as they are)."""
        archived = bool(status & _IS_ARCHIVED)
        if chat == self.state.default_chat and archived != bool(self.state.status & _IS_ARCHIVED):
            self.apply(SessionIsArchivedChangedAction(is_archived=archived))

    async def forget_chat(self, chat: str) -> None:
        """Drop the input-needed entries of a disposed chat."""
        await self.submit(_ChatChanged(chat, None, ()))

    def _mirror_chat(self, message: _ChatChanged) -> None:
        entry = next((c for c in self.state.chats if c.resource == message.chat), None)
        if entry is not None and message.summary is not None:
            changes = _summary_changes(entry, message.summary)
            if changes is not None:
                self.apply(SessionChatUpdatedAction(chat=message.chat, changes=changes))
            if (entry.status ^ message.summary.status) & _IS_ARCHIVED:
                self._archive_with_default_chat(message.chat, message.summary.status)
        current = {
            getattr(r, "id", ""): r
            for r in (
                () if isinstance(self.state.input_needed, UnsetType) else self.state.input_needed
            )
            if getattr(r, "chat", None) == message.chat
        }
        wanted = {getattr(r, "id", ""): r for r in message.requests}
        for request_id, request in wanted.items():
            if current.get(request_id) != request:
                self.apply(SessionInputNeededSetAction(request=request))
        for request_id in current.keys() - wanted.keys():
            self.apply(SessionInputNeededRemovedAction(id=request_id))


# -- chat ------------------------------------------------------------------------------------

#: Actions a running turn streams (never mirrored into the session).
_STREAMED = frozenset({ChatDeltaAction, ChatReasoningAction})

#: The most catalogue entries one message to a chat hands its session: one for
#: the action, one for a queued message starting the next turn.
_MIRRORS_PER_MESSAGE = 2

#: Actions after which a chat's catalogue entry or blocking requests may differ.
_MIRRORED = frozenset(
    {
        "chat/turnStarted",
        "chat/turnResume",
        "chat/turnComplete",
        "chat/turnCancelled",
        "chat/error",
        "chat/truncated",
        "chat/activityChanged",
        "chat/workingDirectorySet",
        "chat/workingDirectoryRemoved",
        "chat/toolCallReady",
        "chat/toolCallConfirmed",
        "chat/toolCallComplete",
        "chat/toolCallResultConfirmed",
        "chat/toolCallContentChanged",
        "chat/toolCallAuthRequired",
        "chat/toolCallAuthResolved",
        "chat/inputRequested",
        "chat/inputAnswerChanged",
        "chat/inputCompleted",
        # 1.0: the chat's own flags, projected into its catalogue entry.
        "chat/isReadChanged",
        "chat/isArchivedChanged",
        "chat/movableChanged",
    }
)


@dataclass(frozen=True, slots=True)
class SourceContext:
    """What a side chat's agent sees of its source (never shown in the side chat)."""

    turns: tuple[Turn, ...] = ()
    partial: tuple[ResponsePart, ...] = ()


_NO_SIZES: Mapping[str, int] = {}


class ChatActor(ChannelActor[ChatState]):
    """``ahp-chat:/<id>``: one chat, its turn engine, and its queue of pending messages."""

    _base: ChatState
    _chunks: dict[int, list[str]]
    _appended: list[int]
    _part_index: dict[object, int] | None
    _visible: ChatState
    _visible_token: _TextToken | None

    def __init__(
        self,
        host: Runtime,
        uri: str,
        state: ChatState,
        *,
        session: SessionActor,
        source: SourceContext | None = None,
        turn_sizes: Mapping[str, int] = _NO_SIZES,
    ) -> None:
        super().__init__(host, uri, state)
        self.session = session
        self.source = source or SourceContext()
        self.runner: TurnRunner | None = None
        #: Stored position of ``state.turns[0]`` (older turns stay on disk).
        self.turn_offset = 0
        #: Encoded (stored) size of each completed turn in memory, by turn id,
        #: and their sum: snapshots, pages and memory are bounded in bytes
        #: without encoding a turn twice (docs/durability.md "History").
        self.turn_sizes: dict[str, int] = {}
        self.turn_bytes = 0
        self._encoded_turn: bytes | None = None
        self._loaded_sizes: Mapping[str, int] = _NO_SIZES
        self._count_turns(state.turns, turn_sizes)  # a load knows the stored sizes
        #: What the chat's provider keeps across restarts (``TurnIO.save_agent_state``).
        self.agent_state: str | None = None
        self._message_clients: dict[str, str] = {}
        # What the session already mirrors (a chat loaded from disk may be blocked).
        self._last_summary = chat_summary(state)
        self._last_requests: tuple[SessionInputRequest, ...] = self._blocking_requests()

    # -- persistence -----------------------------------------------------------------------

    def persist_new(self, created_at: str) -> None:
        """Store a new chat: its row, any turns it starts with (a fork), a first snapshot."""
        store = self.host.hub.store
        store.put_channel(self.uri, "chat", self.session.uri, created_at, None)
        for position, turn in enumerate(self.state.turns):
            store.put_turn(self.uri, position, turn.id, codec.encode(turn))
        self.trim_memory()
        self.snapshot()

    def snapshot(self) -> None:
        # Completed turns live in their own table: the snapshot stays small.
        if not self._durable:
            return
        state = self.state
        count = self.turn_offset + len(state.turns)
        self._store_snapshot(codec.encode(replace(state, turns=())), count)

    def after_apply(self, action: object, before: ChatState) -> None:
        store = self.host.hub.store
        turns = self.state.turns
        match action:
            case ChatTurnStartedAction(turn_id=turn_id):
                store.set_unfinished(self.uri, turn_id)
            case ChatTurnResumeAction(turn_id=turn_id) if isinstance(
                self.state.active_turn, ActiveTurn
            ):
                # The latest stored turn runs again (REDUCER-CHANGES 10). Marked
                # unfinished: a crash now is recovered like any running turn
                # (Host.start → interrupt). Its row stays in the turns table until
                # the turn ends again and put_turn overwrites that same position
                # (settle measured it out of turn_bytes, turn_offset is unchanged).
                # The snapshot taken here counts one turn fewer, so a load never
                # reads that row as a completed turn: it replays the log after this
                # snapshot over the snapshot's active turn. (Without it, a load from
                # an older snapshot could read the turn's *new* version from the row
                # and replay the resume over it.) Meanwhile the row is what a
                # fetchTurns cursor naming this turn finds its position by.
                store.set_unfinished(self.uri, turn_id)
                self.snapshot()
            case ChatTruncatedAction():
                store.truncate_turns(self.uri, self.turn_offset + len(turns))
                store.set_unfinished(self.uri, None)
                self.snapshot()
            case _ if self._encoded_turn is not None:
                # A turn ended: append it to the stored history. No snapshot here:
                # a load takes the stored turns up to the snapshot's turn count and
                # replays the rest from the log (docs/durability.md), and snapshots
                # stay amortized (_maybe_snapshot) however short the turns.
                # ``settle`` encoded it (to measure it) and may have dropped old
                # turns from memory, moving ``turn_offset`` as far: the newest
                # turn's position is unchanged.
                turn = turns[-1]
                position = self.turn_offset + len(turns) - 1
                encoded, self._encoded_turn = self._encoded_turn, None
                if self._durable:
                    store.put_turn(self.uri, position, turn.id, encoded or codec.encode(turn))
                store.set_unfinished(self.uri, None)
                # Once its last envelope is recorded, its deltas are packed for replay.
                store.after_queued(self.host.hub.pack_replay, self.uri)
            case _:
                pass

    def reduce(self, state: ChatState, action: object, now: Clock) -> ChatState:
        return reduce_chat(state, action, now)

    # -- completed turns in bytes (docs/durability.md "History") -----------------------------
    #
    # Dropping old turns from memory is host-internal: it is not an action and
    # not in the log. Clients keep their own copies; what changes for them is
    # only that a later snapshot carries fewer turns and a cursor, exactly as
    # for a chat loaded from disk. A replay after a restart reduces the log
    # over the stored turns and trims the same way (Host._load_chat), so it
    # differs from the live state at most in how many old turns are in memory.

    def settle(self, action: object, before: ChatState, after: ChatState) -> ChatState:
        turns, previous = after.turns, before.turns
        if turns is previous:
            return after
        added = len(turns) - len(previous)
        if type(action) is ChatTurnsLoadedAction:
            self.turn_offset = max(0, self.turn_offset - added)
            if added >= 0 and turns[added:] == previous:
                self._count_turns(turns[:added], self._loaded_sizes)
            else:
                self.turn_sizes, self.turn_bytes = {}, 0
                self._count_turns(turns, self._loaded_sizes)
        elif (
            added > 0
            and type(action) is not ChatTruncatedAction
            and not isinstance(after.active_turn, ActiveTurn)
        ):
            # A turn ended: measure it as it will be stored (after_apply stores
            # these bytes, even when trimming leaves fewer turns than before).
            turn = turns[-1]
            self._encoded_turn = encoded = codec.encode(turn)
            self._add_size(turn.id, len(encoded))
        elif added < 0 and turns == previous[: len(turns)]:  # truncated
            for turn in previous[len(turns) :]:
                self.turn_bytes -= self.turn_sizes.pop(turn.id, 0)
        else:  # anything else: recount what is left (rare)
            self.turn_sizes, self.turn_bytes = {}, 0
            self._count_turns(turns)
        return self._trimmed(after)

    def load_turns(
        self, page: tuple[Turn, ...], sizes: Mapping[str, int], cursor: str | None
    ) -> asyncio.Future[int]:
        """Apply ``chat/turnsLoaded`` for ``page`` (§11.2), whose stored sizes are known.

        The future resolves once the envelope is delivered (committed): the
        ``fetchTurns`` reply must not overtake it.
        """
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._loaded_sizes = sizes
        try:
            action = ChatTurnsLoadedAction(turns=page, turns_next_cursor=cursor or UNSET)
            self.apply(action, done=done)
        finally:
            self._loaded_sizes = _NO_SIZES
        return done

    def trim_memory(self) -> None:
        """Drop the oldest completed turns over ``memory_turn_bytes`` (load, fork)."""
        trimmed = self._trimmed(self.state)
        if trimmed is not self.state:
            self.state = trimmed
            self.visible = trimmed

    def turn_size(self, turn: Turn) -> int:
        """A completed turn's stored size (encoded only if it was never measured)."""
        size = self.turn_sizes.get(turn.id)
        return len(codec.encode(turn)) if size is None else size

    def _add_size(self, turn_id: str, size: int) -> None:
        self.turn_bytes += size - self.turn_sizes.get(turn_id, 0)
        self.turn_sizes[turn_id] = size

    def _count_turns(self, turns: tuple[Turn, ...], known: Mapping[str, int] = _NO_SIZES) -> None:
        for turn in turns:
            size = known.get(turn.id)
            self._add_size(turn.id, len(codec.encode(turn)) if size is None else size)

    def _trimmed(self, state: ChatState) -> ChatState:
        """``state`` without its oldest completed turns over the memory budget.

        Only with a durable store (the in-memory one keeps no turns to page
        back in); the newest turn always stays.
        """
        budget = self.host.settings.memory_turn_bytes
        if self.turn_bytes <= budget or not self._durable:
            return state
        turns = state.turns
        drop = 0  # O(turns dropped), however many small turns stay
        while self.turn_bytes > budget and drop < len(turns) - 1:
            self.turn_bytes -= self.turn_sizes.pop(turns[drop].id, 0)
            drop += 1
        if drop == 0:
            return state
        self.turn_offset += drop
        kept = turns[drop:]
        return replace(state, turns=kept, turns_next_cursor=turns_cursor(kept[0].id))

    # -- streamed text in O(1) per delta ---------------------------------------------------
    #
    # ``chat/delta`` and ``chat/reasoning`` append to one part. Applied with the
    # pure reducer that is a copy of the whole part per delta (O(n²) per turn).
    # Here the appended text is kept as chunks beside the last folded state and
    # joined only when the state is read: ``state`` (any other action, a
    # snapshot) and ``visible`` (a subscriber's snapshot) fold lazily.
    # tests/host/test_streamed_text.py proves this equal to the pure reducer.

    @property
    def state(self) -> ChatState:
        if self._chunks:
            self._base = _with_texts(self._base, {i: "".join(c) for i, c in self._chunks.items()})
            self._chunks, self._appended = {}, []
        return self._base

    @state.setter
    def state(self, value: ChatState) -> None:
        self._base = value
        self._chunks, self._appended = {}, []
        self._part_index = None

    @property
    def visible(self) -> ChatState:
        token = self._visible_token
        if token is not None:
            # The first `count` appends were delivered: each part holds its
            # original text plus its share of them.
            base, chunks, appended, count = token
            taken = dict.fromkeys(chunks, 1)
            for index in appended[:count]:
                taken[index] += 1
            self._visible = _with_texts(
                base, {i: "".join(c[: taken[i]]) for i, c in chunks.items()}
            )
            self._visible_token = None
        return self._visible

    @visible.setter
    def visible(self, value: ChatState) -> None:
        self._visible = value
        self._visible_token = None

    def peek(self) -> ChatState:
        """The state without folding streamed text: for fields deltas never touch."""
        return self._base

    def apply(
        self,
        action: object,
        origin: ActionOrigin | None = None,
        done: asyncio.Future[int] | None = None,
    ) -> int:
        if type(action) is ChatDeltaAction or type(action) is ChatReasoningAction:
            index = self._text_target(action.turn_id, action.part_id, type(action))
            if index is not None:
                chunks = self._chunks.get(index)
                if chunks is None:
                    turn = self._base.active_turn
                    assert isinstance(turn, ActiveTurn)
                    part = turn.response_parts[index]
                    assert isinstance(part, (MarkdownResponsePart, ReasoningResponsePart))
                    chunks = self._chunks[index] = [part.content]
                chunks.append(action.content)
                appended = self._appended
                appended.append(index)
                # O(1): the visible state is folded from this only when read.
                token: _TextToken = (self._base, self._chunks, appended, len(appended))
                seq = self._publish(action, origin, done, self.host.now(), token)
                self._maybe_snapshot()
                return seq
        return super().apply(action, origin, done)

    def _show(self, token: Any) -> None:
        if type(token) is tuple:
            self._visible_token = token
        else:
            self.visible = token

    def _text_target(self, turn_id: str, part_id: str, kind: type) -> int | None:
        """Where the pure reducer would append: the **first** part with that id,
        if it is of the right kind, in the matching active turn (else ``None``)."""
        turn = self._base.active_turn
        if not isinstance(turn, ActiveTurn) or turn.id != turn_id:
            return None
        if self._part_index is None:
            self._part_index = {}
            for i, part in enumerate(turn.response_parts):
                self._part_index.setdefault(part_id_of(part), i)
        index = self._part_index.get(part_id)
        if index is None:
            return None
        expected = MarkdownResponsePart if kind is ChatDeltaAction else ReasoningResponsePart
        return index if isinstance(turn.response_parts[index], expected) else None

    def check(self, action: object, client_id: str) -> Rejection | None:
        # turn_sizes is keyed by the ids of exactly the turns in memory (settle,
        # _trimmed): a turn start's duplicate check is O(1), not O(turns).
        return check_dispatch(
            self.state, action, client_id, session=self.session.state, turn_ids=self.turn_sizes
        )

    def accepts(self, message: _ServerAction) -> bool:
        # Late events of an aborted turn are dropped (the actor already ended it).
        return message.runner is None or message.runner is self.runner

    def handle_now(self, message: object) -> bool:
        # The hot paths need no coroutine: everything a chat does in reaction to
        # an action is synchronous (the runner starts as a task) except handing
        # its catalogue entry to the session, which waits only while the
        # session's inbox is full — so with room for what one message can send
        # (_MIRRORS_PER_MESSAGE), the whole message is handled here.
        kind = type(message)
        if kind is _ServerAction:
            assert isinstance(message, _ServerAction)
            if message.runner is None or message.runner is not self.runner:
                return False  # the host's own actions, late events of an aborted turn
            if type(message.action) in _STREAMED:
                # Streamed text: applied in O(1), nothing to mirror, nobody waiting.
                self.apply(message.action)
                return True
            if not self.session.has_room(_MIRRORS_PER_MESSAGE):
                return False
            self.apply(message.action, done=message.done)
            self._post(self._react_to_server(message))
            return True
        if kind is _ClientDispatch:
            assert isinstance(message, _ClientDispatch)
            if not self.session.has_room(_MIRRORS_PER_MESSAGE):
                return False
            if self.apply_dispatch(message):
                self._post(self._react_to_client(message.action, message.origin.client_id))
            return True
        if kind in _STREAMED:
            # Bare: the running turn's text, from offer_from_runner, which checked
            # what the _ServerAction branch checks (never queued like this).
            self.apply(message)
            return True
        return False

    def _post(self, messages: list[_ChatChanged]) -> None:
        """Hand catalogue entries to the session, which has room for them (handle_now)."""
        for message in messages:
            accepted = self.session.offer(message)
            assert accepted, "checked with has_room()"

    async def submit_from_runner(
        self, runner: TurnRunner, action: object, *, final_action: bool = False
    ) -> None:
        await self.submit(_ServerAction(action, runner=runner, final=final_action))

    def offer_from_runner(self, runner: TurnRunner, action: object) -> bool:
        if (
            type(action) in _STREAMED
            and runner is self.runner
            and self._idle
            and not self.inbox
            and not self.closed
            and self._may_run()
        ):
            # The hot path of a streaming chat (a delta per word): the running
            # turn's text to an idle chat, handled in this call without a
            # message to carry it (handle_now takes it bare, checked here).
            return self._handle_inline(action)
        return self.offer(_ServerAction(action, runner=runner, final=False))

    async def stop(self) -> None:
        if self.runner is not None:
            self.runner.abort()
            self.runner = None
        await super().stop()

    async def fail_client_tools(self, client_id: str, message: str) -> None:
        """Fail the running tool calls that ``client_id`` was to run: it is gone.

        WIRE-SUMMARY §3.4: when a client is released after its grace period,
        its running client-tool calls complete with ``success: false`` (the
        agent gets the same result and goes on).
        """

        async def fail() -> None:
            turn = self.state.active_turn
            if not isinstance(turn, ActiveTurn):
                return
            for part in turn.response_parts:
                call = part.tool_call if isinstance(part, ToolCallResponsePart) else None
                if not (
                    isinstance(call, ToolCallRunningState)
                    and isinstance(call.contributor, ToolCallClientContributor)
                    and call.contributor.client_id == client_id
                ):
                    continue
                result = ToolCallResult(success=False, past_tense_message=message)
                action = ChatToolCallCompleteAction(
                    turn_id=turn.id, tool_call_id=call.tool_call_id, result=result
                )
                self.apply(action)
                if self.runner is not None:
                    self.runner.resolve_client_result(call.tool_call_id, result)
                await self._send_mirror(action)

        if not self.closed:
            await self.call(fail)

    async def save_agent_state(self, state: str | None) -> None:
        """``TurnSink``: keep the provider's state for this chat (in the actor: one writer)."""

        async def save() -> None:
            self.agent_state = state
            self.host.hub.store.put_agent_state(self.uri, state)

        await self.call(save)

    # -- side effects -------------------------------------------------------------------------

    async def after_client_action(self, action: object, client_id: str) -> None:
        for message in self._react_to_client(action, client_id):
            await self.session.submit(message)

    def _react_to_client(self, action: object, client_id: str) -> list[_ChatChanged]:
        """Side effects of an accepted client action; returns what the session must mirror."""
        mirrors: list[_ChatChanged] = []
        runner = self.runner
        match action:
            case ChatTurnStartedAction(turn_id=turn_id, message=message):
                self._start_runner(turn_id, message, client_id)
            case ChatTurnResumeAction():
                self._resume_runner(client_id)
            case ChatTurnCancelledAction(turn_id=turn_id):
                self._abort_runner()
                self.host.turn_ended(self.uri, turn_id)
                self._start_next(mirrors)
            case ChatToolCallApprovedAction() if runner is not None:
                edited = action.edited_tool_input
                runner.resolve_decision(
                    action.tool_call_id,
                    ToolDecision(
                        approved=True,
                        edited_input=None if isinstance(edited, UnsetType) else edited,
                        selected_option_id=_str_or_none(action.selected_option_id),
                    ),
                )
            case ChatToolCallDeniedAction() if runner is not None:
                runner.resolve_decision(
                    action.tool_call_id,
                    ToolDecision(
                        approved=False,
                        reason=action.reason,
                        selected_option_id=_str_or_none(action.selected_option_id),
                    ),
                )
            case ChatToolCallCompleteAction() if runner is not None:
                runner.resolve_client_result(action.tool_call_id, action.result)
            case ChatInputCompletedAction(request_id=request_id) if runner is not None:
                runner.resolve_input(request_id, self._input_answer(request_id, action.response))
            case ChatPendingMessageSetAction(id=message_id):
                self._message_clients[message_id] = client_id
                if not isinstance(self.state.active_turn, ActiveTurn):
                    self._start_next(mirrors)
            case ChatTruncatedAction():
                if not isinstance(self.state.active_turn, ActiveTurn):
                    self._abort_runner()
            case _:
                pass
        self._mirror(action, mirrors)
        return mirrors

    async def after_server_action(self, message: _ServerAction) -> None:
        for mirror in self._react_to_server(message):
            await self.session.submit(mirror)

    def _react_to_server(self, message: _ServerAction) -> list[_ChatChanged]:
        """Side effects of an applied server action; returns what the session must mirror."""
        mirrors: list[_ChatChanged] = []
        if message.final:
            self.runner = None
            self._unread_if_unseen()
            turn_id = getattr(message.action, "turn_id", None)
            if isinstance(turn_id, str):
                self.host.turn_ended(self.uri, turn_id)
            self._mirror(message.action, mirrors)
            self._start_next(mirrors)
        else:
            self._mirror(message.action, mirrors)
        return mirrors

    def _unread_if_unseen(self) -> None:
        """A turn that ends while nobody is subscribed leaves its chat unread.

        ``chat/turnStarted`` already clears IsRead; a client that marked the
        chat read during the turn and left before its end has not seen the
        end (docs/protocol.md "Read and archived chats").
        """
        if self.state.status & _IS_READ and not self.host.hub.subscribers(self.uri):
            self.apply(ChatIsReadChangedAction(is_read=False))

    def _input_answer(self, request_id: str, response: str) -> InputAnswer:
        turn = self.state.active_turn
        if isinstance(turn, ActiveTurn):
            for part in turn.response_parts:
                if isinstance(part, InputRequestResponsePart) and part.request.id == request_id:
                    answers = part.request.answers
                    return InputAnswer(
                        response=response,
                        answers={} if isinstance(answers, UnsetType) else dict(answers),
                    )
        return InputAnswer(response=response)

    def _abort_runner(self) -> None:
        if self.runner is not None:
            self.runner.abort()
            self.runner = None

    def _resume_runner(self, client_id: str) -> None:
        """``chat/turnResume`` was applied: run the provider again for the same turn.

        The provider gets the turn's parts so far without its error parts (the
        reducer keeps those in the turn: what the user saw stays), and the
        history before the turn. The resuming client stands in for the one that
        started the turn (its tools, should the provider call any).
        """
        turn = self.state.active_turn
        if not isinstance(turn, ActiveTurn):
            return
        partial = tuple(p for p in turn.response_parts if not isinstance(p, ErrorResponsePart))
        self._start_runner(
            turn.id,
            turn.message,
            client_id,
            resumed=True,
            partial=partial,
            elapsed_ms=_elapsed_ms(turn.started_at, self.host.now()),
        )

    def _start_runner(
        self,
        turn_id: str,
        message: Message,
        client_id: str | None,
        *,
        resumed: bool = False,
        partial: tuple[ResponsePart, ...] = (),
        elapsed_ms: int = 0,
    ) -> None:
        self._abort_runner()  # never two turns at once
        provider = self.host.provider(self.session.state.provider)
        state = self.state
        request = TurnRequest(
            session=self.session.uri,
            chat=self.uri,
            turn_id=turn_id,
            message=message,
            history=state.turns,
            source_context=self.source.turns,
            source_partial=self.source.partial,
            # Only those the configured roots still allow (docs/workspace.md "Roots").
            working_directories=()
            if isinstance(state.working_directories, UnsetType)
            else tuple(self.host.roots.usable(state.working_directories, self.session.owner)),
            # At 1.0 the primary directory is index 0 (no field of its own).
            primary_working_directory=None
            if isinstance(state.working_directories, UnsetType) or not state.working_directories
            else state.working_directories[0],
            client_id=client_id,
            client_tools=next(
                (c.tools for c in self.session.state.active_clients if c.client_id == client_id),
                (),
            ),
            agent_state=self.agent_state,
            forbidden=self.host.roots.forbidden,
            resumed=resumed,
            partial=partial,
        )
        session_uri = self.session.uri
        self.runner = TurnRunner(
            self,
            provider,
            request,
            ready=lambda: self.host.agent_session_ready(session_uri),
            client_tool_timeout=self.host.settings.client_tool_timeout,
            coalesce_ms=self.host.settings.coalesce_ms,
            terminals=self.host.agent_terminal_started,
            files=self.host.file_changed,
            elapsed_ms=elapsed_ms,
            turnstile=self.host.turnstile,
        )
        self.runner.start()
        if (
            not resumed
            and self.session.state.title == DEFAULT_SESSION_TITLE
            and message.text.strip()
        ):
            # A new session is named after its first message (server-originated).
            title = _title_from(message.text)
            self.host.spawn(self.session.apply_server(SessionTitleChangedAction(title=title)))

    async def interrupt(self) -> None:
        """End a running turn with ``chat/error`` (``interrupted``): shutdown and recovery.

        Pending tool confirmations and input requests end with it (the reducer
        cancels unfinished tool calls); nothing is re-run.
        """
        self._abort_runner()
        turn = self.state.active_turn
        if not isinstance(turn, ActiveTurn):
            return
        action = ChatErrorAction(
            turn_id=turn.id,
            duration=_elapsed_ms(turn.started_at, self.host.now()),
            part=ErrorResponsePart(
                error=ErrorInfo(
                    error_type="interrupted",
                    message="The host stopped while this turn was running.",
                )
            ),
        )
        self.apply(action)
        await self._send_mirror(action)

    async def start_turn(self, message: Message, client_id: str | None) -> str:
        """Start a turn from inside the actor (``createChat.initialMessage``)."""
        turn_id = f"turn-{uuid.uuid4()}"
        started_at = iso_timestamp(self.host.now())
        action = ChatTurnStartedAction(turn_id=turn_id, started_at=started_at, message=message)
        self.apply(action)
        self._start_runner(turn_id, message, client_id)
        await self._send_mirror(action)
        return turn_id

    def _start_next(self, mirrors: list[_ChatChanged]) -> None:
        """When idle, a leftover steering message, else the first queued one, starts a turn."""
        state = self.state
        if isinstance(state.active_turn, ActiveTurn) or self.runner is not None:
            return
        pending: PendingMessage | None = None
        kind = "queued"
        if isinstance(state.steering_message, PendingMessage):
            pending, kind = state.steering_message, "steering"
        elif not isinstance(state.queued_messages, UnsetType) and state.queued_messages:
            pending = state.queued_messages[0]
        if pending is None:
            return
        # WIRE-SUMMARY §11.4: pendingMessageRemoved, then turnStarted(queuedMessageId).
        removed = ChatPendingMessageRemovedAction(kind=kind, id=pending.id)
        self.apply(removed)
        turn_id = f"turn-{uuid.uuid4()}"
        started = ChatTurnStartedAction(
            turn_id=turn_id,
            started_at=iso_timestamp(self.host.now()),
            message=pending.message,
            queued_message_id=pending.id,
        )
        self.apply(started)
        self._start_runner(turn_id, pending.message, self._message_clients.pop(pending.id, None))
        self._mirror(started, mirrors)

    # -- mirroring into the session -----------------------------------------------------------

    def _mirror(self, action: object, mirrors: list[_ChatChanged]) -> None:
        """Add the session's copy of this chat's entry to ``mirrors`` if ``action`` changed it."""
        if action_type(action) not in _MIRRORED:
            return
        summary = chat_summary(self.state)
        requests = self._blocking_requests()
        if summary == self._last_summary and requests == self._last_requests:
            return
        self._last_summary = summary
        self._last_requests = requests
        mirrors.append(_ChatChanged(self.uri, summary, requests))

    async def _send_mirror(self, action: object) -> None:
        """Mirror ``action`` into the session, waiting while its inbox is full."""
        mirrors: list[_ChatChanged] = []
        self._mirror(action, mirrors)
        for message in mirrors:
            await self.session.submit(message)

    def _blocking_requests(self) -> tuple[SessionInputRequest, ...]:
        """Everything in the active turn that waits on a user (WIRE-SUMMARY §10.6)."""
        turn = self.state.active_turn
        if not isinstance(turn, ActiveTurn):
            return ()
        requests: list[SessionInputRequest] = []
        for part in turn.response_parts:
            if isinstance(part, InputRequestResponsePart) and part.response is UNSET:
                requests.append(
                    SessionChatInputRequest(
                        id=f"{self.uri}#input:{part.request.id}",
                        chat=self.uri,
                        request=part.request,
                    )
                )
            elif isinstance(part, ToolCallResponsePart):
                call = part.tool_call
                request_id = f"{self.uri}#tool:{getattr(call, 'tool_call_id', '')}"
                if isinstance(
                    call, (ToolCallPendingConfirmationState, ToolCallPendingResultConfirmationState)
                ):
                    requests.append(
                        SessionToolConfirmationRequest(
                            id=request_id, chat=self.uri, turn_id=turn.id, tool_call=call
                        )
                    )
                elif isinstance(call, ToolCallAuthRequiredState):
                    requests.append(
                        SessionToolAuthenticationRequest(
                            id=request_id, chat=self.uri, turn_id=turn.id, tool_call=call
                        )
                    )
                elif isinstance(call, ToolCallRunningState) and isinstance(
                    call.contributor, ToolCallClientContributor
                ):
                    requests.append(
                        SessionToolClientExecutionRequest(
                            id=request_id,
                            chat=self.uri,
                            turn_id=turn.id,
                            client_id=call.contributor.client_id,
                            tool_call=call,
                        )
                    )
        return tuple(requests)

    # -- views --------------------------------------------------------------------------------

    def snapshot_state(self, turns: int | None) -> ChatState:
        """The state a subscriber sees: at most ``turns`` newest completed turns.

        Without a view, the newest ``retained_turns``; and never more than
        ``snapshot_turn_bytes`` of them (but at least the newest, unless the
        view asks for none): snapshots stay bounded however long the chat and
        however large its turns; ``turnsNextCursor`` leads to the rest.
        """
        state = self.visible
        settings = self.host.settings
        turns = settings.retained_turns if turns is None else min(turns, settings.retained_turns)
        budget, total, fit = settings.snapshot_turn_bytes, 0, 0
        for turn in reversed(state.turns):
            if fit >= turns:
                break
            size = self.turn_size(turn)
            if fit and total + size > budget:
                break
            total += size
            fit += 1
        turns = fit
        if turns >= len(state.turns):
            return state
        kept = state.turns[len(state.turns) - turns :] if turns > 0 else ()
        cursor = turns_cursor(kept[0].id) if kept else turns_cursor(None)
        return replace(state, turns=kept, turns_next_cursor=cursor)


#: A visible state still to fold: the base state, the chunk lists by part index
#: (each starts with the part's text as of the base), the part index of every
#: append in order, and how many of those appends had been delivered. Folding
#: replaces these three containers (never mutates them back), so a token stays valid.
_TextToken = tuple[ChatState, dict[int, list[str]], list[int], int]


def _with_texts(state: ChatState, texts: dict[int, str]) -> ChatState:
    """``state`` with the given parts of its active turn holding new text."""
    if not texts:
        return state
    turn = state.active_turn
    assert isinstance(turn, ActiveTurn)
    parts = list(turn.response_parts)
    for index, text in texts.items():
        parts[index] = replace(parts[index], content=text)  # type: ignore[type-var]
    return replace(state, active_turn=replace(turn, response_parts=tuple(parts)))


def _elapsed_ms(started_at: str, now_ms: float) -> int:
    try:
        started = datetime.fromisoformat(started_at.replace("Z", "+00:00")).timestamp() * 1000
    except ValueError:
        return 0
    return max(0, int(now_ms - started))


def _title_from(text: str, limit: int = 60) -> str:
    """The first words of ``text`` (whitespace collapsed), cut to ``limit`` characters."""
    words: list[str] = []
    length = -1
    for match in _WORD.finditer(text):  # only as far as the title goes: messages can be long
        words.append(match.group())
        length += len(words[-1]) + 1
        if length > limit:
            break
    line = " ".join(words)
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


_WORD = re.compile(r"\S+")


def turns_cursor(before_turn: str | None) -> str:
    """An opaque ``turnsNextCursor``: "the turns before this one" (``None``: the newest)."""
    return f"before:{before_turn}" if before_turn is not None else "before:"


def _str_or_none(value: str | UnsetType) -> str | None:
    return None if isinstance(value, UnsetType) else value
