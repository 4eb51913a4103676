"""Agent sessions: when the host calls a provider's session hooks, and what a failure does.

Layer: host (asyncio), above the actors (it creates a session's default chat)
and below the ``Host`` registry, which owns one :class:`AgentSessions`.

The seam (``agents/base.py``): a provider may keep state or a process per
session. This module calls its hooks at the right moments, each at most once,
each bounded by a timeout, and turns every failure into something a client
sees — never a session stuck in ``creating``, never a turn that hangs:

===================  ========================================  ==============================
moment               hook                                      when it fails or times out
===================  ========================================  ==============================
``createSession``    ``open_session``, before ``session/ready``  ``session/creationFailed``
start after a crash  ``open_session`` again, for a session       ``session/creationFailed``
                     left in ``creating``
first turn after a   ``restore_session`` (single flight: turns   that turn ends in
restart              of several chats wait for the same call)  ``chat/error``; the next turn
                                                               tries again
``disposeSession``   ``close_session(disposed=True)``          logged; the session goes anyway
host stop            ``close_session(disposed=False)``, for    logged; the host stops anyway
                     each session opened or restored here
===================  ========================================  ==============================

A session being created has its default chat registered (and stored) from
the start, so a crash in ``creating`` loses nothing — not even a fork's copied
turns; the chat joins the catalogue (``session/chatAdded``,
``session/defaultChatChanged``) only once the agent has opened the session,
just before ``session/ready``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

import structlog
from msgspec import UNSET, UnsetType

from ahp_server.agents.base import AgentError, Provider, SessionContext
from ahp_server.host.actors import (
    DEFAULT_SESSION_TITLE,
    OWNER_META,
    ChatActor,
    SessionActor,
    chat_summary,
)
from ahp_server.host.core.runtime import Runtime
from ahp_server.protocol.errors import ProtocolError
from ahp_server.protocol.reducers import iso_timestamp
from ahp_server.protocol.types import (
    ChatOriginUser,
    ChatState,
    ErrorInfo,
    SessionActiveClient,
    SessionChatAddedAction,
    SessionCreationFailedAction,
    SessionDefaultChatChangedAction,
    SessionReadyAction,
    SessionState,
    SessionStatus,
    Turn,
)
from ahp_server.protocol.uris import default_chat

__all__ = [
    "CREATING",
    "AgentSessions",
    "SessionHost",
    "context_of",
    "new_default_chat",
    "new_session_actor",
]

log = structlog.get_logger(__name__)

#: ``ChannelRow.unfinished`` of a session whose agent is being opened.
CREATING = "creating"


class SessionHost(Runtime, Protocol):
    """The host as the agent sessions see it: the runtime plus chat registration."""

    def add_chat(self, chat: ChatActor) -> None: ...

    async def forget(self, uri: str) -> None: ...

    def chats_of(self, session: str) -> list[str]: ...

    async def chat(self, uri: str) -> ChatActor | None: ...


def context_of(session: SessionActor) -> SessionContext:
    """What the provider is told of ``session``."""
    directories = session.state.working_directories
    return SessionContext(
        session=session.uri,
        working_directories=() if isinstance(directories, UnsetType) else directories,
    )


class AgentSessions:
    """Calls the providers' session hooks for one host; tracks which sessions they hold."""

    def __init__(self, host: SessionHost) -> None:
        self._host = host
        #: Sessions a provider holds in this process (opened or restored): uri -> provider.
        self._live: dict[str, str] = {}
        #: Opens and restores under way (single flight), by session uri.
        self._pending: dict[str, asyncio.Task[ErrorInfo | None]] = {}

    # -- creation -------------------------------------------------------------------------

    async def initialize(self, session: SessionActor) -> None:
        """Bring a session from ``creating`` to ``ready`` (or ``creationFailed``).

        Its default chat is already registered: ``createSession`` does that in
        the same step as the session, so both are stored together, and a
        session a crash left in ``creating`` comes back here with it.
        """
        uri = session.uri
        provider = self._provider(session.state.provider)
        if isinstance(provider, ErrorInfo):
            await self._fail(session, provider)
            return
        task = self._start(uri, session.state.provider, provider.open_session, session, "open")
        try:
            error = await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # the host is stopping: the session stays creating, repaired at start
            return  # disposed meanwhile: dispose cancelled the open
        if session.closed:
            return
        if error is not None:
            await self._fail(session, error)
            return
        chat = await self._default_chat(session)
        await session.apply_server(SessionChatAddedAction(summary=chat_summary(chat.state)))
        await session.apply_server(SessionDefaultChatChangedAction(default_chat=chat.uri))
        await session.apply_server(SessionReadyAction())
        self._host.hub.store.set_unfinished(uri, None)
        log.info("session ready", session=uri, provider=session.state.provider)

    async def _default_chat(self, session: SessionActor) -> ChatActor:
        host = self._host
        for uri in host.chats_of(session.uri):
            chat = await host.chat(uri)
            if chat is not None:
                return chat
        # Only a database from before the default chat was stored with its
        # session can get here: make one now.
        directories = context_of(session).working_directories
        chat = new_default_chat(host, session, (), directories[0] if directories else None)
        host.add_chat(chat)
        return chat

    async def _fail(self, session: SessionActor, error: ErrorInfo) -> None:
        host = self._host
        for uri in host.chats_of(session.uri):  # the default chat never joined the catalogue
            await host.forget(uri)
        await session.apply_server(SessionCreationFailedAction(error=error))
        host.hub.store.set_unfinished(session.uri, None)
        log.warning(
            "session creation failed",
            session=session.uri,
            error_type=error.error_type,
            error=error.message,
        )

    # -- restore (before a turn) --------------------------------------------------------------

    async def ready(self, provider_name: str, session: SessionActor) -> None:
        """Return once the provider holds ``session``, restoring it once if need be.

        Raises :class:`AgentError` (the turn then fails) when it cannot. Turns
        of several chats of one session wait for the same restore; a turn
        cancelled meanwhile does not cancel it for the others.
        """
        uri = session.uri
        if uri in self._live:
            return
        task = self._pending.get(uri)
        if task is None:
            provider = self._provider(provider_name)
            if isinstance(provider, ErrorInfo):
                raise AgentError(provider.message, error_type=provider.error_type)
            task = self._start(uri, provider_name, provider.restore_session, session, "restore")
        error = await asyncio.shield(task)
        if error is not None:
            raise AgentError(
                f"The agent could not take this session back after the host restarted: "
                f"{error.message}",
                error_type=error.error_type,
            )

    # -- close ------------------------------------------------------------------------------

    async def close(self, session: SessionActor, *, disposed: bool) -> None:
        """Release ``session``: cancel an open or restore under way, then call the hook.

        On dispose the hook is called whatever the provider holds in this
        process (it may keep something elsewhere); on stop only for held sessions.
        """
        uri = session.uri
        pending = self._pending.pop(uri, None)
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pending
        held = self._live.pop(uri, None)
        if held is None and not disposed:
            return
        provider_name = held or session.state.provider
        provider = self._provider(provider_name)
        if isinstance(provider, ErrorInfo):
            return
        timeout = self._host.settings.session_close_timeout
        try:
            async with asyncio.timeout(timeout):
                await provider.close_session(context_of(session), disposed=disposed)
        except TimeoutError:
            log.warning("agent session close timed out", session=uri, timeout_s=timeout)
        except Exception:  # task boundary: provider code; the session goes regardless
            log.exception("agent session close failed", session=uri, provider=provider_name)

    async def close_all(self, sessions: Iterable[SessionActor]) -> None:
        """Host stop: cancel opens and restores under way, close every held session."""
        for task in list(self._pending.values()):
            task.cancel()
        held = [s for s in sessions if s.uri in self._live]
        await asyncio.gather(*(self.close(s, disposed=False) for s in held))

    # -- calling a hook -----------------------------------------------------------------------

    def _provider(self, name: str) -> Provider | ErrorInfo:
        try:
            return self._host.provider(name)
        except ProtocolError:
            return ErrorInfo(
                error_type="providerNotFound",
                message=f"The agent {name!r} is not configured on this host.",
            )

    def _start(
        self,
        uri: str,
        provider_name: str,
        hook: Callable[[SessionContext], Awaitable[None]],
        session: SessionActor,
        what: str,
    ) -> asyncio.Task[ErrorInfo | None]:
        """Call ``hook`` in a task of its own, registered so a dispose can cancel it."""
        task = asyncio.get_running_loop().create_task(
            self._call(uri, provider_name, hook, context_of(session), what),
            name=f"agent session {what} {uri}",
        )
        self._pending[uri] = task

        def done(finished: asyncio.Task[ErrorInfo | None]) -> None:
            if self._pending.get(uri) is finished:
                del self._pending[uri]

        task.add_done_callback(done)
        return task

    async def _call(
        self,
        uri: str,
        provider_name: str,
        hook: Callable[[SessionContext], Awaitable[None]],
        context: SessionContext,
        what: str,
    ) -> ErrorInfo | None:
        """Call ``hook`` within the open timeout; on success the session is held."""
        timeout = self._host.settings.session_open_timeout
        try:
            async with asyncio.timeout(timeout):
                await hook(context)
        except TimeoutError:
            log.warning("agent session hook timed out", hook=what, session=uri, timeout_s=timeout)
            return ErrorInfo(
                error_type="timeout",
                message=f"The agent {provider_name!r} did not {what} the session "
                f"within {timeout:g} s.",
            )
        except AgentError as error:
            log.warning("agent session hook failed", hook=what, session=uri, error=error.message)
            return ErrorInfo(error_type=error.error_type, message=error.message)
        except Exception:  # task boundary: provider code must not take the host down
            log.exception("agent session hook failed", hook=what, session=uri)
            return ErrorInfo(
                error_type="internal",
                message=f"The agent {provider_name!r} failed to {what} the session.",
            )
        self._live[uri] = provider_name
        return None


def new_session_actor(
    host: Runtime,
    uri: str,
    provider: str,
    directories: tuple[str, ...],
    user: str | None,
    active_clients: tuple[SessionActiveClient, ...] = (),
) -> SessionActor:
    """A new session in ``creating`` (not yet registered): ``createSession``'s, and the
    one ``moveChat`` allocates for a ``newSession`` destination."""
    state = SessionState(
        provider=provider,
        title=DEFAULT_SESSION_TITLE,
        status=int(SessionStatus.Idle),
        working_directories=directories if directories else UNSET,
        lifecycle="creating",
        active_clients=active_clients,
        chats=(),
        # Multi-user mode: the session is its creator's (docs/protocol.md).
        meta=UNSET if user is None else {OWNER_META: user},
    )
    return SessionActor(host, uri, state, created_at=iso_timestamp(host.now()))


def new_default_chat(
    host: Runtime, session: SessionActor, turns: tuple[Turn, ...], primary: str | None = None
) -> ChatActor:
    """A session's default chat (not yet in its catalogue): its directories, a fork's turns.

    Named :func:`~ahp_server.protocol.uris.default_chat` of the session, the
    URI VS Code derives (docs/protocol.md "VS Code's dialect")."""
    directories = session.state.working_directories
    if primary is not None and not isinstance(directories, UnsetType):
        # 1.0: the primary directory is index 0 (no field of its own).
        directories = (primary, *(d for d in directories if d != primary))
    state = ChatState(
        resource=default_chat(session.uri),
        title="Chat",
        status=int(SessionStatus.Idle),
        modified_at=iso_timestamp(host.now()),
        origin=ChatOriginUser(),
        working_directories=directories,
        turns=turns,
        movable=False,  # a session's default chat never moves (MoveChatParams)
    )
    return ChatActor(host, state.resource, state, session=session)
