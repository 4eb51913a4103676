"""``moveChat``: a chat repositioned in its session's catalogue, or moved to another session.

Layer: host (asyncio), above the ``Host`` registry and the actors, below the
gateway, which builds one :class:`ChatMoves` beside the command dispatcher and
lets it register ``moveChat`` (``Commands.register``). 1.0 only: a 0.7 client
cannot call it (``views/v0_7.METHODS_NOT_IN_0_7``) and sees a moved chat as
removed from one session and added to the other.

``MoveChatParams`` (commands.schema.json) and docs/protocol.md "Moving and
reordering chats" decide what follows:

* the source must exist, be the caller's, and advertise ``movable: true`` —
  every chat ``createChat`` makes does, a session's default chat never does;
* a ``session`` destination that is the chat's own session moves only its
  catalogue entry (``session/chatsReordered``); another session takes the
  chat: it keeps its URI, state and origin, and it is refused (``-32602``,
  nothing changed) while a turn of it runs, when the destination is not
  ready, has another agent, or is full; an ``after`` anchor must be another
  chat of the destination. The chat keeps those of its working directories
  the destination has, or takes the destination's when it has none of them
  (:func:`directories_in`);
* a ``newSession`` destination makes a session of the same agent in the
  chat's working directories, owned by the caller, with the chat as its
  default chat (``movable: false`` from then on); the agent opens it as it
  opens any new session.

Sharded mode (docs/scale-out.md "Routing"): ``moveChat`` is routed to
the node owning the chat's session (``host/core/routing.py`` ``ROUTED``),
which moves it as here. A chat moves only between sessions of that node: a
``session`` destination another node owns is refused (``-32602``, nothing
changed: the spec lets a host reject a destination it does not support), and
a ``newSession`` destination is claimed by that node (its owner row) before
the chat joins it.

The chat changes session inside its own actor (the one writer of a chat), so
no turn can start between the check and the move. The ownership row is
written before either catalogue changes; a session that loads with a
catalogue out of step with the ownership rows (a crash between the two) is
mended when it loads (``Host._load_session``).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from msgspec import UnsetType
from msgspec.structs import replace

from ahp_server.host.actors import ChatActor, SessionActor, chat_summary
from ahp_server.host.core.fanout import Connection
from ahp_server.host.host import Host
from ahp_server.host.sessions import new_session_actor
from ahp_server.protocol import codec
from ahp_server.protocol.errors import AhpErrorCode, InternalError, InvalidParams, ProtocolError
from ahp_server.protocol.types import (
    ActiveTurn,
    ChatMovableChangedAction,
    ChatMoveToNewSessionDestination,
    ChatMoveToSessionDestination,
    ChatWorkingDirectoryRemovedAction,
    ChatWorkingDirectorySetAction,
    MoveChatParams,
    MoveChatResult,
    SessionChatAddedAction,
    SessionChatRemovedAction,
    SessionChatsReorderedAction,
)
from ahp_server.protocol.uris import SESSION_SCHEME
from ahp_server.workspace.paths import directory_path

__all__ = ["ChatMoves", "directories_in", "placed"]

log = structlog.get_logger(__name__)

Register = Callable[[str, Callable[[Connection, Any], Awaitable[bytes]], type[Any] | None], None]


def placed(order: tuple[str, ...], chat: str, after: str | None) -> tuple[str, ...]:
    """``order`` with ``chat`` right after ``after`` (first when ``None``), once."""
    rest = tuple(uri for uri in order if uri != chat)
    if after is None:
        return (chat, *rest)
    at = rest.index(after) + 1
    return (*rest[:at], chat, *rest[at:])


def directories_in(
    mine: tuple[str, ...] | UnsetType, target: SessionActor
) -> list[ChatWorkingDirectorySetAction | ChatWorkingDirectoryRemovedAction]:
    """The actions that leave a chat with only working directories of ``target``:
    those it has that ``target`` lacks removed, or, when none would remain,
    ``target``'s own in their order (its primary first)."""
    if isinstance(mine, UnsetType):
        return []
    held = target.state.working_directories
    held = () if isinstance(held, UnsetType) else held
    missing = [d for d in mine if d not in held]
    removed = [ChatWorkingDirectoryRemovedAction(directory=d) for d in missing]
    if len(missing) < len(mine) or not held:
        return list(removed)
    return [*(ChatWorkingDirectorySetAction(directory=d) for d in held), *removed]


class ChatMoves:
    """The ``moveChat`` command."""

    def __init__(self, host: Host) -> None:
        self.host = host

    def register(self, register: Register) -> None:
        register("moveChat", self.move_chat, MoveChatParams)

    async def move_chat(self, connection: Connection, params: MoveChatParams) -> bytes:
        host = self.host
        chat = await host.accessible_chat(connection, params.channel)
        destination = params.destination
        if chat.state.movable is not True:
            raise InvalidParams(
                f"chat {chat.uri} is not movable (a session's default chat never is)"
            )
        if isinstance(destination, ChatMoveToNewSessionDestination):
            made = await self._to_new_session(connection, chat)
            log.info("chat moved", chat=chat.uri, session=made, client_id=connection.client_id)
            return codec.encode(MoveChatResult(session=made))
        if not isinstance(destination, ChatMoveToSessionDestination):
            kind = getattr(destination, "kind", None) or "unknown"
            raise InvalidParams(f"destination kind {kind!r} is not supported by this host")
        await self._check_here(connection, destination.session)
        target = await host.session(destination.session)
        if target is None:
            raise ProtocolError(
                f"no session {destination.session}", code=AhpErrorCode.SessionNotFound
            )
        host.check_access(connection, target.uri)
        after = None if isinstance(destination.after, UnsetType) else destination.after
        if after == chat.uri:
            raise InvalidParams("a chat cannot be placed after itself")
        if after is not None and after not in {c.resource for c in target.state.chats}:
            raise InvalidParams(f"{after} is not a chat of {target.uri}")
        if target is chat.session:
            order = tuple(c.resource for c in target.state.chats)
            wanted = placed(order, chat.uri, after)
            await target.apply_server(SessionChatsReorderedAction(chats=wanted))
        else:
            await self._transfer(chat, target, after)
        log.info("chat moved", chat=chat.uri, session=target.uri, client_id=connection.client_id)
        return codec.encode(MoveChatResult(session=target.uri))

    async def _check_here(self, connection: Connection, session: str) -> None:
        """Sharded mode: refuse (``-32602``) a destination ``session`` this node does not own.
        Its chats, its catalogue and its agent are its owner's (docs/scale-out.md "Sharded
        mode"): loaded here, they would have two writers. A session no node knows is left
        to the caller (``-32001``); another user's is ``-32009``, as on one host."""
        host = self.host
        router = host.router
        if router is None or host.owns(session):
            return
        node = await router.owner("moveChat", session)  # reads the catalogue for it
        if session not in host.session_index:
            return  # no such session
        host.check_access(connection, session)  # its creator is in the catalogue's row
        where = "another node" if node is None else f"node {node}"
        # MoveChatParams: the host "MAY reject unsupported destinations", and a
        # rejection leaves ownership, catalogues and chat state unchanged.
        raise InvalidParams(
            f"session {session} lives on {where} of this cluster: a chat moves only between "
            "sessions of the node that owns it (or to a newSession destination)"
        )

    async def _transfer(self, chat: ChatActor, target: SessionActor, after: str | None) -> None:
        """Move ``chat`` into ``target``: checked and rebound inside the chat's actor."""
        host = self.host
        self._check_destination(chat, target)
        source = chat.session

        async def rebind() -> None:
            if isinstance(chat.state.active_turn, ActiveTurn):
                raise InvalidParams(
                    f"chat {chat.uri} has a turn running: cancel it or wait for its end, "
                    "then move the chat"
                )
            self._check_destination(chat, target)  # again: the target may have changed
            for action in directories_in(chat.state.working_directories, target):
                chat.apply(action)
            chat.session = target
            source.chats.pop(chat.uri, None)
            target.chats[chat.uri] = chat
            host.chat_index[chat.uri] = target.uri
            host.hub.store.set_channel_session(chat.uri, target.uri)

        entry = next((c for c in source.state.chats if c.resource == chat.uri), None)
        await chat.call(rebind)
        await source.apply_server(SessionChatRemovedAction(chat=chat.uri))
        await source.forget_chat(chat.uri)
        summary = chat_summary(chat.state)
        if entry is not None and not isinstance(entry.changes, UnsetType):
            # The counts of its own changeset (host/channels/changesets.py) go with it.
            summary = replace(summary, changes=entry.changes)
        await target.apply_server(SessionChatAddedAction(summary=summary))
        order = tuple(c.resource for c in target.state.chats)
        wanted = placed(order, chat.uri, after)
        if wanted != order:
            await target.apply_server(SessionChatsReorderedAction(chats=wanted))

    async def _to_new_session(self, connection: Connection, chat: ChatActor) -> str:
        """A ``newSession`` destination: a session of the same agent, in the chat's own
        working directories, made with the chat as its non-movable default chat."""
        host = self.host
        source = chat.session
        uri = f"{SESSION_SCHEME}{uuid.uuid4()}"
        mine = chat.state.working_directories
        directories = () if isinstance(mine, UnsetType) else mine

        async def rebind() -> SessionActor:
            if isinstance(chat.state.active_turn, ActiveTurn):
                raise InvalidParams(
                    f"chat {chat.uri} has a turn running: cancel it or wait for its end, "
                    "then move the chat"
                )
            claim = host.claim_session
            if claim is not None and not await claim(
                uri, directory_path(directories[0] if directories else None)
            ):
                # Sharded mode: this node owns the new session from its first write.
                raise InternalError(f"session {uri} could not be claimed: try again")
            made = new_session_actor(host, uri, source.state.provider, directories, connection.user)
            host.add_session(made)  # creating: its agent opens it below
            chat.session = made
            source.chats.pop(chat.uri, None)
            made.chats[chat.uri] = chat
            host.chat_index[chat.uri] = uri
            host.hub.store.set_channel_session(chat.uri, uri)
            # "makes the requested chat that session's non-movable default chat"
            chat.apply(ChatMovableChangedAction(movable=False))
            return made

        made = await chat.call(rebind)
        await source.apply_server(SessionChatRemovedAction(chat=chat.uri))
        await source.forget_chat(chat.uri)
        # The agent opens it; its only chat joins the catalogue as the default one
        # (host/sessions.py AgentSessions.initialize), then session/ready.
        host.announce_session(made)
        return uri

    def _check_destination(self, chat: ChatActor, target: SessionActor) -> None:
        """Why ``target`` cannot take ``chat`` (``InvalidParams``), if it cannot."""
        if target.state.lifecycle != "ready":
            raise InvalidParams(f"session {target.uri} is {target.state.lifecycle}, not ready")
        if target.state.provider != chat.session.state.provider:
            # The agent's own history of the chat is that agent's.
            raise InvalidParams(
                f"session {target.uri} runs another agent ({target.state.provider}): "
                "a chat moves only between sessions of one agent"
            )
        limit = self.host.settings.max_chats_per_session
        if len(self.host.chats_of(target.uri)) >= limit:
            raise InvalidParams(f"session {target.uri} already has {limit} chats (the limit)")
