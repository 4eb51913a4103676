"""Changesets: the files each turn changed, as ``ahp-changeset:`` channels of a session.

Layer: host (asyncio), above the ``Host`` registry and below the gateway, which
builds one :class:`Changesets` beside the command dispatcher and lets it
register ``invokeChangesetOperation`` (``Commands.register``). The host knows
the service as a :class:`~ahp_server.host.host.WorkspaceService` (start,
session disposal, stop), as a channel resolver (``Host.channel_resolvers``:
changesets are loaded, or made empty, when first asked for) and as the sink
of agents' file changes (``Host.file_changes``, fed by ``TurnIO.file_changed``
through the turn engine — the agents layer never sees this module).

Specification: ``docs/reference/changeset.md``, ``docs/guide/changesets.md``,
``SessionState.changesets`` / ``session/changesetsChanged`` in
``docs/reference/session.md``, WIRE-SUMMARY §12. What this host decides
(docs/workspace.md, "Changesets"):

* **Two catalogue entries per session**, advertised with
  ``session/changesetsChanged`` when the session's agent first changes a file
  (sessions without changes advertise none): a per-turn changeset,
  ``ahp-changeset:/<session id>/turns/{turnId}`` (``changeKind: "turn"``; the
  guide's ``{turnId}`` template, expanded with any turn of the session's
  chats), and a session-wide one, ``ahp-changeset:/<session id>/changeset/session``
  (``changeKind: "session"``, a static URI ending in ``/changeset/session``
  as the guide's migration note asks). Both advertise ``review``.
* **Files**: one ``ChangesetFile`` per changed file, ``id`` = its ``file:``
  URI. ``edit.before`` / ``edit.after`` carry the text before the turn's (the
  session's) first change and after its last as ``ContentRef`` s whose URI is
  a ``data:`` URI (RFC 2397, base64, UTF-8 text): a client decodes it itself,
  no ``resourceRead`` is needed, and it stays true after the file changes
  again. A created file has only ``after``, a deleted one only ``before``
  (FileEdit). ``edit.diff`` counts lines added and removed. ``_meta.status``
  is ``added`` / ``modified`` / ``deleted``; ``_meta.turnId`` and
  ``_meta.chat`` name the (last) turn that changed it.
* **Bounds** (``[workspace] changeset_*``): a side over
  ``changeset_content_bytes``, or content beyond ``changeset_total_bytes`` in
  one changeset, is not kept: the file is listed with an empty ``edit`` (both
  sides left out, so nothing false is implied) and ``_meta.contentOmitted``.
  Beyond ``changeset_max_files`` files, later files are left out and the
  changeset's status becomes ``error`` (``tooManyFiles``) saying so.
* **Merging**: a file changed twice in a turn keeps its first ``before`` and
  its last ``after``; created then deleted, or changed back to what it was,
  it leaves the changeset (``changeset/fileRemoved``). A changed file is
  re-emitted without ``reviewed``: review resets on change (changeset.md).
* **Operations**: none are advertised, so ``invokeChangesetOperation``
  answers ``-32602`` naming the unknown operation (``-32008`` for an unknown
  changeset). ``changeset/filesReviewChanged`` is the one client action; it
  is refused when none of its ids is in the changeset (``dispatch_rules``).
* **Persistence**: like a chat — a channel row (kind ``changeset``, its
  session), a snapshot at creation, every few hundred actions and at host
  stop, and the hub's log between. After a restart a changeset is loaded when
  first subscribed to (or changed). A turn without changes has no stored
  changeset: subscribing gives an empty ``ready`` one (made in memory, gone
  again when unused). ``disposeSession`` sends ``changeset/cleared`` to
  subscribers, unsubscribes them and deletes the stored changesets.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from msgspec import UNSET, UnsetType

from ahp_server.agents.base import FileChange, TurnRequest
from ahp_server.config import Settings
from ahp_server.host.actors import ChannelActor, SessionActor
from ahp_server.host.core.fanout import Connection
from ahp_server.host.core.runtime import Runtime
from ahp_server.host.host import Host
from ahp_server.protocol import codec
from ahp_server.protocol.edits import line_counts, side, side_text
from ahp_server.protocol.errors import AhpErrorCode, InvalidParams, ProtocolError
from ahp_server.protocol.reducers import Clock, iso_timestamp
from ahp_server.protocol.reducers.changeset import reduce_changeset
from ahp_server.protocol.types import (
    ActionEnvelope,
    ActiveTurn,
    Changeset,
    ChangesetCapabilities,
    ChangesetClearedAction,
    ChangesetFile,
    ChangesetFileRemovedAction,
    ChangesetFileSetAction,
    ChangesetState,
    ChangesetStatus,
    ChangesetStatusChangedAction,
    ChangesSummary,
    ChatChangesetsChangedAction,
    ErrorInfo,
    FileEdit,
    FileEditSide,
    InvokeChangesetOperationParams,
    PartialChatSummary,
    SessionChangesetsChangedAction,
    SessionChatUpdatedAction,
)
from ahp_server.protocol.uris import (
    CHANGESET_SCHEME,
    chat_changeset,
    parse_changeset,
    parse_chat_changeset,
    session_changeset,
    turn_changeset,
    turn_changeset_template,
)
from ahp_server.store.base import ChannelRow
from ahp_server.workspace.paths import file_uri

__all__ = [
    "CHANGESET_SCHEME",
    "ChangesetActor",
    "Changesets",
    "Limits",
    "Recorded",
    "catalogue",
    "chat_catalogue",
    "content_bytes",
    "merge",
    "parse_changeset",
    "session_changeset",
    "side_text",
    "summary_of",
    "turn_changeset",
]

log = structlog.get_logger(__name__)

Handler = Callable[[Connection, Any], Awaitable[bytes]]

#: The stored channel rows' kind.
KIND = "changeset"
#: An empty changeset made for a subscribe (or a dispatch) lives at least this
#: long without subscribers before it is dropped again.
TRANSIENT_GRACE = 30.0


# -- URIs --------------------------------------------------------------------------------------
# Built and parsed in ahp_server/protocol/uris.py, the one place channel URIs are
# read: the access check (Host.may_access) reads a changeset URI exactly as
# this service does (docs/protocol.md "Identity and ownership").


def catalogue(session: str) -> tuple[Changeset, ...]:
    """This host's ``SessionState.changesets`` entries for ``session``."""
    review = ChangesetCapabilities(review={})
    return (
        Changeset(
            label="Turn changes",
            uri_template=turn_changeset_template(session),
            description="The files the agent changed in one turn, before and after it.",
            change_kind="turn",
            capabilities=review,
        ),
        Changeset(
            label="Session changes",
            uri_template=session_changeset(session),
            description="Every file the agent changed in this session, "
            "before its first change and after its last.",
            change_kind="session",
            capabilities=review,
        ),
    )


def chat_catalogue(chat: str) -> tuple[Changeset, ...]:
    """This host's ``ChatState.changesets`` entry for ``chat`` (1.0: per-chat changesets)."""
    return (
        Changeset(
            label="Chat changes",
            uri_template=chat_changeset(chat),
            description="Every file this chat's turns changed, "
            "before its first change and after its last.",
            change_kind="chat",
            capabilities=ChangesetCapabilities(review={}),
        ),
    )


def summary_of(files: Sequence[ChangesetFile]) -> ChangesSummary:
    """``ChatSummary.changes`` of a changeset: its files and their lines added and removed."""
    added = removed = 0
    for file in files:
        diff = file.edit.diff
        if not isinstance(diff, UnsetType):
            added += 0 if isinstance(diff.added, UnsetType) else int(diff.added)
            removed += 0 if isinstance(diff.removed, UnsetType) else int(diff.removed)
    return ChangesSummary(files=len(files), additions=added, deletions=removed)


# -- files -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Recorded:
    """One file change as a changeset records it."""

    uri: str
    created: bool
    deleted: bool
    before: str | None
    after: str | None
    turn_id: str
    chat: str


@dataclass(frozen=True, slots=True)
class Limits:
    """``[workspace] changeset_*``."""

    content_bytes: int
    total_bytes: int
    max_files: int

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        return cls(
            settings.changeset_content_bytes,
            settings.changeset_total_bytes,
            settings.changeset_max_files,
        )


def _size(edit_side: FileEditSide | UnsetType) -> int:
    if isinstance(edit_side, UnsetType):
        return 0
    hint = edit_side.content.size_hint
    return 0 if isinstance(hint, UnsetType) else int(hint)


def content_bytes(files: Sequence[ChangesetFile]) -> int:
    """The text a changeset's files hold (what ``changeset_total_bytes`` bounds)."""
    return sum(_size(f.edit.before) + _size(f.edit.after) for f in files)


def merge(
    existing: ChangesetFile | None, change: Recorded, *, limits: Limits, room: int
) -> ChangesetFile | None:
    """The file entry after ``change`` (``None``: the file no longer differs).

    ``existing`` is the entry so far (its ``before`` is kept), ``room`` the
    content bytes the changeset may still take for this entry.
    """
    old_meta = existing.meta if existing is not None else UNSET
    if existing is None:
        existed = not change.created
        before = None if change.created else change.before
    else:
        existed = not (isinstance(old_meta, dict) and old_meta.get("status") == "added")
        before = side_text(existing.edit.before) if existed else None
    exists = not change.deleted
    after = change.after if exists else None
    if not existed and not exists:
        return None  # created and deleted again: nothing changed
    status = "added" if not existed else "deleted" if not exists else "modified"
    if status == "modified" and before is not None and before == after:
        return None  # changed back to what it was
    sides = [text for text, wanted in ((before, existed), (after, exists)) if wanted]
    sizes = [len(t.encode("utf-8")) if t is not None else None for t in sides]
    kept = (
        all(size is not None and size <= limits.content_bytes for size in sizes)
        and sum(size or 0 for size in sizes) <= room
    )
    meta: dict[str, Any] = {"status": status, "turnId": change.turn_id, "chat": change.chat}
    if kept:
        edit = FileEdit(
            before=side(change.uri, before) if existed and before is not None else UNSET,
            after=side(change.uri, after) if exists and after is not None else UNSET,
            diff=line_counts(before or "", after or ""),
        )
    else:
        edit = FileEdit()
        meta["contentOmitted"] = True
    return ChangesetFile(id=change.uri, edit=edit, meta=meta)


# -- the channel -------------------------------------------------------------------------------


def _at(ms: float) -> Clock:
    return lambda: ms


class ChangesetActor(ChannelActor[ChangesetState]):
    """``ahp-changeset:/…``: one changeset of one session (a turn's, or the session's)."""

    def __init__(
        self, host: Runtime, uri: str, state: ChangesetState, *, session: str, stored: bool
    ) -> None:
        super().__init__(host, uri, state)
        self.session = session
        #: Whether it has a stored row (it had a file once); an empty one made
        #: for a subscriber is kept in memory only.
        self.stored = stored

    def reduce(self, state: ChangesetState, action: object, now: Clock) -> ChangesetState:
        return reduce_changeset(state, action, now)

    def snapshot(self) -> None:
        if self.stored:
            super().snapshot()

    def persist_new(self) -> None:
        """Store this changeset: its row and a first snapshot (before its first action)."""
        created_at = iso_timestamp(self.host.now())
        self.host.hub.store.put_channel(self.uri, KIND, self.session, created_at, None)
        self.stored = True
        self.snapshot()

    def record(self, change: Recorded, limits: Limits) -> asyncio.Future[int] | None:
        """Merge one change in (inside the actor); the future resolves once it is delivered."""
        files = self.state.files
        existing = next((f for f in files if f.id == change.uri), None)
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if existing is None and len(files) >= limits.max_files:
            if self.state.status == ChangesetStatus.Error:
                return None
            action: object = ChangesetStatusChangedAction(
                status=ChangesetStatus.Error,
                error=ErrorInfo(
                    error_type="tooManyFiles",
                    message=f"Only the first {limits.max_files} changed files are listed.",
                ),
            )
        else:
            used = content_bytes(files) - (content_bytes((existing,)) if existing else 0)
            merged = merge(existing, change, limits=limits, room=limits.total_bytes - used)
            if merged is None:
                if existing is None:
                    return None
                action = ChangesetFileRemovedAction(file_id=change.uri)
            else:
                action = ChangesetFileSetAction(file=merged)
        if not self.stored:
            self.persist_new()
        self.apply(action, done=done)
        return done


# -- the service -------------------------------------------------------------------------------


class Changesets:
    """Every changeset of one host: recording, loading, the command, disposal."""

    def __init__(self, host: Host) -> None:
        self.host = host
        #: Live changeset actors by URI (also in ``host.workspace_channels``).
        self.actors: dict[str, ChangesetActor] = {}
        #: Every stored changeset (loaded or not): URI -> session.
        self._stored: dict[str, str] = {}
        self._loading: dict[str, asyncio.Future[ChangesetActor]] = {}
        #: Changes being recorded per changeset (it is not dropped meanwhile).
        self._busy: dict[str, int] = {}
        #: Sessions whose catalogue already lists this host's changesets.
        self._advertised: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._timers: set[asyncio.TimerHandle] = set()
        host.services.append(self)
        host.channel_resolvers.append(self.resolve)
        host.file_changes = self.file_changed
        host.hub.on_vacated(self._vacated)

    def register(self, register: Callable[[str, Handler, type[Any]], None]) -> None:
        """Add the command to the dispatcher (``Commands.register``)."""
        register("invokeChangesetOperation", self.invoke, InvokeChangesetOperationParams)

    # -- the command ------------------------------------------------------------------------

    async def invoke(self, connection: Connection, params: InvokeChangesetOperationParams) -> bytes:
        actor = await self.host.actor(params.channel)
        if not isinstance(actor, ChangesetActor):
            raise ProtocolError(f"no changeset {params.channel}", code=AhpErrorCode.NotFound)
        operations = actor.state.operations
        offered = () if isinstance(operations, UnsetType) else operations
        # changeset.md: "The server validates that operationId exists in the
        # changeset's current operations list". This host offers none.
        if not any(op.id == params.operation_id for op in offered):
            raise InvalidParams(
                f"changeset {params.channel} has no operation {params.operation_id!r} "
                "(this host offers no changeset operations)"
            )
        raise InvalidParams(f"operation {params.operation_id!r} cannot be run by this host")

    # -- recording ---------------------------------------------------------------------------

    async def file_changed(self, request: TurnRequest, change: FileChange) -> None:
        """``Host.file_changes``: list a file a turn changed (never raises)."""
        try:
            await self._file_changed(request, change)
        except Exception:  # task boundary: the file changed whether or not it can be listed
            log.exception("file change not recorded", chat=request.chat, turn=request.turn_id)

    async def _file_changed(self, request: TurnRequest, change: FileChange) -> None:
        if not os.path.isabs(change.path):
            log.info("file change with a relative path ignored", path=change.path)
            return
        session = await self.host.session(request.session)
        if session is None:
            return
        recorded = Recorded(
            uri=file_uri(change.path),
            created=change.created,
            deleted=change.deleted,
            before=change.before,
            after=change.after,
            turn_id=request.turn_id,
            chat=request.chat,
        )
        await self._advertise(session)
        for uri in (
            turn_changeset(request.session, request.turn_id),
            session_changeset(request.session),
        ):
            await self._record(uri, request.session, recorded)
        await self._record_in_chat(request.chat, recorded)
        log.debug(
            "file change recorded", chat=request.chat, turn=request.turn_id, file=recorded.uri
        )

    async def _record(self, uri: str, session: str, change: Recorded) -> None:
        self._busy[uri] = self._busy.get(uri, 0) + 1
        try:
            actor = await self._actor(uri, session)
            limits = Limits.of(self.host.settings)

            async def record() -> asyncio.Future[int] | None:
                future = actor.record(change, limits)
                if actor.stored:
                    self._stored[uri] = session
                return future

            done = await actor.call(record)
            if done is not None:
                await done
        finally:
            left = self._busy[uri] - 1
            if left:
                self._busy[uri] = left
            else:
                del self._busy[uri]

    async def _record_in_chat(self, uri: str, recorded: Recorded) -> None:
        """The chat's own changeset (owned by the chat, wherever it moves), its entry
        in the chat's catalogue, and its counts in the session's (``changes``)."""
        chat = await self.host.chat(uri)
        if chat is None:
            return
        ours = chat_catalogue(uri)
        if chat.state.changesets != ours:
            await chat.apply_server(ChatChangesetsChangedAction(changesets=ours))
        changeset = chat_changeset(uri)
        await self._record(changeset, uri, recorded)
        actor = self.actors.get(changeset)
        if actor is None:
            return
        summary = summary_of(actor.state.files)
        session = chat.session
        entry = next((c for c in session.state.chats if c.resource == uri), None)
        if entry is not None and entry.changes != summary:
            changes = PartialChatSummary(changes=summary)
            await session.apply_server(SessionChatUpdatedAction(chat=uri, changes=changes))

    async def _advertise(self, session: SessionActor) -> None:
        """Put this host's entries in the session's catalogue (once)."""
        if session.uri in self._advertised:
            return
        ours = catalogue(session.uri)

        async def update() -> asyncio.Future[int] | None:
            current = session.state.changesets
            listed = () if isinstance(current, UnsetType) else current
            if all(entry in listed for entry in ours):
                return None
            templates = {entry.uri_template for entry in ours}
            kept = tuple(entry for entry in listed if entry.uri_template not in templates)
            done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            session.apply(SessionChangesetsChangedAction(changesets=kept + ours), done=done)
            return done

        done = await session.call(update)
        if done is not None:
            await done
        self._advertised.add(session.uri)

    # -- channels ----------------------------------------------------------------------------

    async def resolve(self, channel: str) -> ChannelActor[Any] | None:
        """``Host.channel_resolvers``: a changeset of a known session or chat, loaded or
        made empty."""
        chat = parse_chat_changeset(channel)
        if chat is not None:
            return await self._actor(channel, chat) if chat in self.host.chat_index else None
        parsed = parse_changeset(channel)
        if parsed is None or parsed[0] not in self.host.session_index:
            return None
        session, turn = parsed
        if turn is not None and channel not in self.actors and not self._turn_known(channel, turn):
            return None  # a made-up turn gets no actor (docs/workspace.md "Changesets")
        return await self._actor(channel, session)

    def _turn_known(self, uri: str, turn: str) -> bool:
        """Whether ``turn`` is one the host knows: its changeset is stored, or a
        loaded chat holds it (the chat a client read the turn id from is loaded)."""
        if uri in self._stored:
            return True
        for chat in self.host.chats.values():
            state = chat.state
            active = state.active_turn
            if (isinstance(active, ActiveTurn) and active.id == turn) or any(
                t.id == turn for t in state.turns
            ):
                return True
        return False

    async def _actor(self, uri: str, session: str) -> ChangesetActor:
        actor = self.actors.get(uri)
        if actor is not None:
            return actor
        pending = self._loading.get(uri)
        if pending is None:
            pending = self._loading[uri] = asyncio.ensure_future(self._load(uri, session))
            pending.add_done_callback(lambda _: self._loading.pop(uri, None))
        return await asyncio.shield(pending)

    async def _load(self, uri: str, session: str) -> ChangesetActor:
        host = self.host
        state = ChangesetState(status=ChangesetStatus.Ready, files=())
        stored = uri in self._stored
        last: int | None = None
        if stored:
            loaded = await host.store.load(uri, retained_turns=0)
            if loaded is not None and loaded.snapshot is not None:
                state = codec.decode(loaded.snapshot, ChangesetState)
                last = loaded.snapshot_seq
                for seq, at, envelope in loaded.envelopes:
                    if seq > loaded.snapshot_seq:
                        action = codec.decode(envelope, ActionEnvelope).action
                        state = reduce_changeset(state, action, _at(at))
                        last = seq
                host.hub.seed_replay(
                    uri, loaded.log_floor, ((s, e) for s, _, e in loaded.envelopes)
                )
            else:
                log.error("stored changeset cannot be loaded", changeset=uri)
        actor = ChangesetActor(host, uri, state, session=session, stored=stored)
        if last is not None:
            actor.last_seq = last
        self.actors[uri] = actor
        host.workspace_channels[uri] = actor
        actor.start()
        if not stored:
            self._later(uri)
        return actor

    def _later(self, uri: str) -> None:
        def check() -> None:
            self._timers.discard(handle)
            self._drop_if_unused(uri)

        handle = asyncio.get_running_loop().call_later(TRANSIENT_GRACE, check)
        self._timers.add(handle)

    def _vacated(self, channel: str) -> None:
        """``Hub``: the last subscriber left; an empty changeset made for it goes."""
        if channel in self.actors:
            self._drop_if_unused(channel)

    def _drop_if_unused(self, uri: str) -> None:
        actor = self.actors.get(uri)
        if (
            actor is None
            or actor.stored
            or actor.state.files
            or uri in self._busy
            or self.host.hub.subscribers(uri)
        ):
            return
        # Nothing was ever published on it: a later subscriber gets an equal empty one.
        del self.actors[uri]
        self.host.workspace_channels.pop(uri, None)
        self._spawn(actor.stop())

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drop(self, uri: str) -> None:
        """Dispose a changeset: ``changeset/cleared`` to subscribers, then gone everywhere."""
        actor = self.actors.pop(uri, None)
        self.host.workspace_channels.pop(uri, None)
        self._stored.pop(uri, None)
        if actor is not None:
            if actor.state.files and self.host.hub.subscribers(uri):
                # guide "Lifecycle" 5: subscribers receive changeset/cleared, then are unsubscribed.
                await actor.apply_server(ChangesetClearedAction())
            await actor.stop()
        self.host.hub.drop_channel(uri)
        self.host.store.delete_channel(uri)

    # -- WorkspaceService ---------------------------------------------------------------------

    async def start(self, rows: Sequence[ChannelRow]) -> None:
        """Note every stored changeset (loaded on first use); drop a disposed session's."""
        for row in rows:
            if row.kind != KIND:
                continue
            chat = parse_chat_changeset(row.uri)
            if chat is not None:  # a chat's: owned by the chat
                if chat not in self.host.chat_index:
                    self.host.store.delete_channel(row.uri)  # a dispose the host did not finish
                else:
                    self._stored[row.uri] = chat
                continue
            parsed = parse_changeset(row.uri)
            session = row.session or (parsed[0] if parsed else None)
            if session is None or session not in self.host.session_index:
                self.host.store.delete_channel(row.uri)  # a dispose the host did not finish
                continue
            self._stored[row.uri] = session
            self._advertised.add(session)  # its catalogue was stored with the session

    async def chat_disposed(self, chat: str) -> None:
        """``WorkspaceService``: a disposed chat's own changeset goes with it."""
        uri = chat_changeset(chat)
        if uri in self._stored or uri in self.actors:
            await self._drop(uri)

    async def session_disposed(self, session: str) -> None:
        self._advertised.discard(session)
        uris = {uri for uri, owner in self._stored.items() if owner == session}
        uris.update(uri for uri, actor in self.actors.items() if actor.session == session)
        for uri in uris:
            await self._drop(uri)
        if uris:
            log.info("changesets disposed", session=session, count=len(uris))

    async def stop(self) -> None:
        """Snapshot every stored changeset (before the host's last commit); stop them all."""
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        actors = list(self.actors.values())
        self.actors.clear()
        for actor in actors:
            self.host.workspace_channels.pop(actor.uri, None)
            actor.snapshot()
            await actor.stop()
        for task in list(self._tasks):
            task.cancel()
