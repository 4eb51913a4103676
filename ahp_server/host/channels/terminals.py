"""Terminal channels (``ahp-terminal:/<id>``): shells on a pty, and the commands agents run.

Layer: host (asyncio), above the ``Host`` registry and below the gateway, which
builds one :class:`TerminalService` beside the command dispatcher and lets it
register ``createTerminal`` and ``disposeTerminal``
(``Commands.register``). The host knows the service only as a
:class:`~ahp_server.host.host.WorkspaceService` (start, session disposal, stop)
and through ``Host.agent_terminals``. The pty itself is ``workspace/pty.py``.

Specification: ``docs/specification/terminal-channel.md``,
``docs/reference/terminal.md``, ``docs/guide/terminals.md``; WIRE-SUMMARY §7
and §12. What this host decides where the spec leaves it open
(docs/workspace.md, "Terminals"):

* **URIs** are client-chosen and must start with ``ahp-terminal:/``; a URI in
  use (by any channel) is refused with ``AlreadyExists``.
* **Claims**: a client claim — in ``createTerminal`` and in ``terminal/claimed``
  alike, in every mode — must name the creating (dispatching) connection's own
  client id (``dispatch_rules``: a client cannot hand a terminal to another
  client, nor to an id nobody holds); a session claim a session the host knows
  (and, in multi-user mode, the user may see). A client may not re-claim a
  terminal *another client* holds (``dispatch_rules``).
* **cwd** must be a directory inside the working directories — of the
  claiming session for a session claim, of any session the host knows for a
  client claim (``workspace/paths.py``). Without ``cwd`` a session claim starts
  in the session's primary working directory; a client claim needs one.
* **The process** is ``[workspace] terminal_shell`` (default ``$SHELL``, else
  ``/bin/sh``) with ``TERM=xterm-256color`` and only the inherited variables
  ``workspace/terminals.py`` passes on (never the host's token or API keys).
  No shell integration is injected, so ``supportsCommandDetection`` is never
  set and every output part is ``unclassified``.
* **Output** becomes ``terminal/data``: merged for :data:`COALESCE` seconds (or
  up to :data:`MAX_DATA_CHARS`), so a flood is a few actions per
  millisecond-window, never one per byte. While the actor's inbox is full the
  pty is not read (backpressure down to the program).
* **Scrollback** is bounded by ``[workspace] terminal_scrollback_bytes``: the
  *actor* trims ``content`` from the start (to three quarters of the cap, so
  it trims rarely) right after the pure reducer (:func:`trim_content`). The
  wire carries no trimming action — the guide lets each side trim its own
  copy ("Both sides MAY independently trim") — so a subscriber's snapshot is
  bounded, and a replay of the log (after a restart) trims identically.
* **Input typed with echo off** (``ECHO`` cleared on the pty when the input
  arrives: ``read -s``, password prompts) goes to the process, but the
  ``terminal/input`` published, replayed and stored has ``data: ""`` (the
  action and its ``origin`` stay, so the order and ``serverSeq`` do).
* **Exit**: ``terminal/exited`` with the exit code (absent when a signal ended
  the process, as the spec says). An agent's command, on exit, first has its
  claim narrowed to ``{kind: session, session}`` (guide, "Agent Runs a Command").
* **Persistence**: every envelope is stored by the hub like a chat's; each
  terminal also has a channel row (kind ``terminal``) marked ``running`` while
  its process runs, and a snapshot at creation, at exit and at host stop. At
  start the host loads every stored terminal as an *exited* one: readable,
  listed in ``RootState.terminals``, taking no input. One the host did not see
  end (a crash) gets a line saying so and ``terminal/exited`` without a code
  (one host; a node in sharded mode loads none, see :meth:`TerminalService.start`).
  ``disposeTerminal`` deletes the stored data.
* **No orphans**: the process group, the terminal's foreground group and the
  shell's whole process tree (``workspace/reaper.py``: ``setsid`` and double
  forks included) get SIGHUP + SIGTERM; what remains once the shell has ended,
  or after ``terminal_kill_grace``, is killed, and all is reaped — on
  ``disposeTerminal``, on ``disposeSession`` (its session-claimed terminals
  are disposed with it), on host stop, and when the shell exits.
* **Agents' commands** (ACP ``terminal/create``) are shown read-only
  (``isPty: false``) in a channel the host names, claimed
  ``{kind: session, session, turnId}``; input to them is rejected.
* **Multi-user mode**: a terminal is its claim's user's (``Host.may_see_claim``:
  a session's claim, that session's owner; a client's claim, that client id's
  user). Only they (and admins) see it in ``RootState.terminals`` — the root
  channel shows each connection its own view (``Host.root_view``,
  ``Hub.views``; docs/protocol.md "Terminals in multi-user mode") — or may use
  its channel; a ``terminal/claimed`` naming another user's session or client
  is rejected.
* **Limits**: at most ``[workspace] max_terminals`` terminals (running or
  exited; an agent's command beyond it runs unshown), and in multi-user mode
  at most ``max_terminals_per_user`` of one user's (a terminal is its claim's
  user's, as above), so one user cannot take every terminal.
* **Audit**: ``terminal started`` (connection and client, URI, cwd, the
  command's name; an agent's command is logged so where it is spawned,
  ``workspace/terminals.py``, and its channel as ``agent terminal shown``) and
  ``terminal ended`` (URI, exit code) — never input or output.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import shutil
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
from msgspec import UNSET, UnsetType
from msgspec.structs import replace

from ahp_server.agents.base import AgentTerminal, TurnRequest
from ahp_server.host.actors import ChannelActor
from ahp_server.host.core.fanout import Connection
from ahp_server.host.host import Host
from ahp_server.protocol import codec
from ahp_server.protocol._base import UnknownVariant
from ahp_server.protocol.dispatch_rules import (
    MAX_TERMINAL_SIZE,
    Rejection,
    RejectionCode,
    check_dispatch,
    valid_terminal_size,
)
from ahp_server.protocol.errors import AhpErrorCode, InvalidParams, ProtocolError
from ahp_server.protocol.reducers import Clock, iso_timestamp, reduce_terminal
from ahp_server.protocol.types import (
    ActionEnvelope,
    ActionOrigin,
    BackgroundShellWork,
    ChatBackgroundWorkRemovedAction,
    ChatBackgroundWorkSetAction,
    CreateTerminalParams,
    DisposeTerminalParams,
    RootTerminalsChangedAction,
    TerminalClaimedAction,
    TerminalClientClaim,
    TerminalCommandPart,
    TerminalContentPart,
    TerminalDataAction,
    TerminalExitedAction,
    TerminalInfo,
    TerminalInputAction,
    TerminalResizedAction,
    TerminalRunningLifecycleState,
    TerminalSessionClaim,
    TerminalState,
    TerminalUnclassifiedPart,
)
from ahp_server.protocol.uris import TERMINAL_SCHEME
from ahp_server.store.base import ChannelRow, LoadedChannel
from ahp_server.workspace.paths import (
    PathInvalid,
    PathOutside,
    PathRefused,
    confine_directory,
    file_uri,
    file_uri_to_path,
)
from ahp_server.workspace.pty import PtyError, PtyProcess
from ahp_server.workspace.terminals import INHERITED_ENV

__all__ = [
    "KIND",
    "TERMINAL_SCHEME",
    "TerminalActor",
    "TerminalService",
    "trim_content",
]

log = structlog.get_logger(__name__)

#: ``ChannelRow.kind`` of a stored terminal.
KIND = "terminal"
#: ``ChannelRow.unfinished`` of a terminal whose process runs.
RUNNING = "running"
#: Longest terminal URI accepted.
MAX_URI = 512
DEFAULT_COLS = 80
DEFAULT_ROWS = 24
TERM = "xterm-256color"
#: Output is merged into one ``terminal/data`` for at most this long…
COALESCE = 0.004
#: …or until this many characters are waiting.
MAX_DATA_CHARS = 64 * 1024
_LOST = "\r\n[The host stopped while this terminal ran: its process is gone.]\r\n"
_NULL = b"null"

Handler = Callable[[Connection, Any], Awaitable[bytes]]


# -- scrollback ------------------------------------------------------------------------------


def _text(part: TerminalContentPart) -> str:
    if isinstance(part, TerminalUnclassifiedPart):
        return part.value
    if isinstance(part, TerminalCommandPart):
        return part.output
    return ""


def _with_text(part: TerminalContentPart, text: str) -> TerminalContentPart:
    if isinstance(part, TerminalUnclassifiedPart):
        return replace(part, value=text)
    if isinstance(part, TerminalCommandPart):
        return replace(part, output=text)
    return part


def trim_content(state: TerminalState, cap: int) -> TerminalState:
    """``state`` with at most ``cap`` bytes (UTF-8) of output, the oldest dropped.

    Over the cap it keeps the newest three quarters of it: whole parts are
    dropped from the start, then the first kept part is cut (at a character
    boundary). Deterministic, so a replay of the log trims the same way.
    """
    parts = state.content
    if sum(len(_text(p)) for p in parts) * 4 <= cap:  # a character is at most 4 bytes
        return state
    encoded = [_text(p).encode("utf-8", "surrogatepass") for p in parts]
    total = sum(len(e) for e in encoded)
    if total <= cap:
        return state
    excess = total - cap * 3 // 4
    start = 0
    while start < len(parts) and excess >= len(encoded[start]):
        excess -= len(encoded[start])
        start += 1
    kept = list(parts[start:])
    if kept and excess > 0:
        text = encoded[start][excess:].decode("utf-8", "ignore")  # a cut character goes
        kept[0] = _with_text(kept[0], text)
    return replace(state, content=tuple(kept))


# -- the actor -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Output:
    text: str


@dataclass(slots=True)
class _Exited:
    exit_code: int | None


def _at(ms: float) -> Clock:
    """The clock an action was first applied with: a replay stamps the same times."""
    return lambda: ms


async def _nothing() -> None:
    """A barrier: what was queued before it has been handled."""


class TerminalActor(ChannelActor[TerminalState]):
    """One terminal channel: its state, and the pty (or agent command) feeding it."""

    def __init__(
        self,
        service: TerminalService,
        uri: str,
        state: TerminalState,
        *,
        created_at: str,
        agent: AgentTerminal | None = None,
    ) -> None:
        super().__init__(service.host, uri, state)
        self._service = service
        self.created_at = created_at
        self._cap = service.host.settings.terminal_scrollback_bytes
        #: The process this host runs on a pty, or the agent's command shown here.
        self.pty: PtyProcess | None = None
        self.agent = agent
        #: Its process runs (false for a terminal loaded after a restart).
        self.running = False
        #: The program's name (for the log).
        self.command = agent.command if agent is not None else ""
        #: ``terminal/exited`` has been applied.
        self.exited = asyncio.Event()
        self._pending: list[str] = []
        self._pending_chars = 0
        self._flush_at: asyncio.TimerHandle | None = None
        #: Messages waiting for room in the inbox, in order; the pty is not read meanwhile.
        self._feed: deque[_Output | _Exited] = deque()
        self._feeder: asyncio.Task[None] | None = None

    def reduce(self, state: TerminalState, action: object, now: Clock) -> TerminalState:
        return trim_content(reduce_terminal(state, action, now), self._cap)

    # -- persistence ---------------------------------------------------------------------

    def persist_new(self) -> None:
        """Store the channel row (``running`` while the process runs) and a first snapshot."""
        store = self.host.hub.store
        store.put_channel(self.uri, KIND, None, self.created_at, None)
        store.set_unfinished(self.uri, RUNNING)
        self.snapshot()

    # -- output (called on the loop by the pty or the agent's command) -----------------

    def output(self, text: str) -> None:
        """Output to show: merged for a few milliseconds into one ``terminal/data``."""
        if self.closed or not text:
            return
        self._pending.append(text)
        self._pending_chars += len(text)
        if self._pending_chars >= MAX_DATA_CHARS:
            self._flush()
        elif self._flush_at is None:
            self._flush_at = asyncio.get_running_loop().call_later(COALESCE, self._flush)

    def process_exited(self, exit_code: int | None) -> None:
        """The process ended (after its last output)."""
        self._flush()
        self._send(_Exited(exit_code))

    def _flush(self) -> None:
        if self._flush_at is not None:
            self._flush_at.cancel()
            self._flush_at = None
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending.clear()
        self._pending_chars = 0
        self._send(_Output(text))

    def _tail(self, text: str) -> str:
        # More than the scrollback keeps is dropped at once (it would be trimmed anyway).
        return text[-self._cap :] if len(text) > self._cap else text

    def _send(self, message: _Output | _Exited) -> None:
        if self.closed:
            return
        feed = self._feed
        if not feed and self.inbox.offer(message):
            return
        if (
            self.pty is None
            and len(feed) >= 2
            and isinstance(message, _Output)
            and isinstance(feed[-1], _Output)
        ):
            # An agent's command cannot be paused: merge what waits, keeping at most
            # the scrollback of it (the command's own buffer has it all). A pty is
            # paused below, so at most what was read before waits here.
            feed[-1] = _Output(self._tail(feed[-1].text + message.text))
        else:
            feed.append(message)
        if self.pty is not None:
            self.pty.pause_reading()  # backpressure: the inbox is full
        if self._feeder is None:
            self._feeder = asyncio.get_running_loop().create_task(
                self._drain_feed(), name=f"feed {self.uri}"
            )

    async def _drain_feed(self) -> None:
        feed = self._feed
        while feed and not self.closed:
            await self.inbox.put(feed[0])  # only feed[0] is never merged into
            feed.popleft()
        self._feeder = None
        if self.pty is not None and not self.closed:
            self.pty.resume_reading()

    # -- inside the actor ----------------------------------------------------------------

    def handle_now(self, message: object) -> bool:
        if type(message) is _Output:
            self.apply(TerminalDataAction(data=message.text))
            return True
        return False

    async def handle_other(self, message: object) -> None:
        if isinstance(message, _Exited):
            self._ended(message.exit_code)
            return
        await super().handle_other(message)

    def _ended(self, exit_code: int | None) -> None:
        if not self.running:
            return
        self.running = False
        claim = self.state.claim
        if (
            self.agent is not None
            and isinstance(claim, TerminalSessionClaim)
            and not (claim.turn_id is UNSET and claim.tool_call_id is UNSET)
        ):
            # The command is done with its turn: background claim (guide, "Agent Runs a Command").
            background = TerminalSessionClaim(session=claim.session, chat=claim.chat)
            self.apply(TerminalClaimedAction(claim=background))
        self.apply(TerminalExitedAction(exit_code=UNSET if exit_code is None else exit_code))
        self.host.hub.store.set_unfinished(self.uri, None)
        self.snapshot()
        self.exited.set()
        log.info("terminal ended", terminal=self.uri, exit_code=exit_code)

    async def mark_lost(self) -> None:
        """Loaded after a restart that it did not see end: say so, and mark it exited."""
        self.apply(TerminalDataAction(data=_LOST))
        self.apply(TerminalExitedAction())
        self.host.hub.store.set_unfinished(self.uri, None)
        self.snapshot()
        log.info("terminal ended", terminal=self.uri, exit_code=None, reason="host restarted")

    async def dispatch(self, action: object, origin: ActionOrigin, connection: Connection) -> None:
        if isinstance(action, TerminalClaimedAction) and not self._service.host.may_see_claim(
            connection, action.claim
        ):
            # Multi-user mode: a user may not hand a terminal to another user's
            # session or client (it would leave their catalogue for the other's;
            # docs/protocol.md "Identity and ownership"). Refused visibly (§7.3).
            self.host.counters.rejected += 1
            self.host.hub.reject(
                connection,
                self.uri,
                action,
                origin,
                "permission denied: that claim names another user's session or client",
            )
            return
        await super().dispatch(action, origin, connection)

    def check(self, action: object, client_id: str) -> Rejection | None:
        rejection = check_dispatch(self.state, action, client_id)
        if rejection is not None or not isinstance(action, TerminalInputAction):
            return rejection
        pty = self.pty
        if pty is None or not self.running or pty.finished:
            reason = (
                "this terminal shows an agent's command: it takes no input"
                if self.agent is not None
                else "the terminal's process has ended"
            )
            return Rejection(RejectionCode.TerminalUnavailable, reason)
        if not pty.can_write(len(action.data.encode("utf-8", "replace"))):
            return Rejection(
                RejectionCode.TerminalUnavailable, "the terminal's process is not reading its input"
            )
        return None

    def recorded(self, action: object) -> object:
        if isinstance(action, TerminalInputAction) and action.data and self._unechoed():
            # Typed with echo off (a password at ``read -s``, ``sudo``, ``ssh``): the
            # process gets it (after_client_action, from the dispatched action), the log,
            # the subscribers and the store get the action with empty data.
            return replace(action, data="")
        return action

    def _unechoed(self) -> bool:
        """The pty does not echo input now (what the kernel decides as the input is
        written: the same moment, with no await between, as after_client_action)."""
        pty = self.pty
        return pty is not None and not pty.echoing()

    async def after_client_action(self, action: object, client_id: str) -> None:
        # terminal/input is side-effect-only: the reducer ignores it, the pty gets it.
        pty = self.pty
        if pty is None or not self.running:
            return
        match action:
            case TerminalInputAction(data=data):
                pty.write(data.encode("utf-8", "replace"))
            case TerminalResizedAction(cols=cols, rows=rows):
                pty.resize(int(cols), int(rows))
            case _:
                pass

    def after_apply(self, action: object, before: TerminalState) -> None:
        state = self.state
        if (
            state.title != before.title
            or state.claim != before.claim
            or state.lifecycle != before.lifecycle
        ):
            self._service.catalogue_changed()

    # -- ending ------------------------------------------------------------------------------

    async def end_process(self, grace: float) -> None:
        """Kill what runs (the pty's process group, or the agent's command), wait until
        it is reaped and its exit applied."""
        if self.running:
            if self.pty is not None:
                await self.pty.terminate(grace)
            elif self.agent is not None:
                self.agent.kill()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace + 1.0):
                    await self.exited.wait()
        if not self.closed:
            await self.call(_nothing)

    async def stop(self) -> None:
        if self._flush_at is not None:
            self._flush_at.cancel()
            self._flush_at = None
        feeder = self._feeder
        await super().stop()
        if feeder is not None:
            feeder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await feeder


def _info(actor: TerminalActor) -> TerminalInfo:
    state = actor.state
    return TerminalInfo(
        resource=actor.uri, title=state.title, claim=state.claim, lifecycle=state.lifecycle
    )


def _environment() -> dict[str, str]:
    """The host's few harmless variables (never its token or keys), and ``TERM``."""
    env = {name: os.environ[name] for name in INHERITED_ENV if name in os.environ}
    env["TERM"] = TERM
    return env


# -- the service -----------------------------------------------------------------------------


def background_id(terminal: str) -> str:
    """The ``BackgroundWork.id`` of an agent command shown as ``terminal``."""
    return f"shell:{terminal}"


class TerminalService:
    """Every terminal channel of one host: commands, lifecycle, the root catalogue."""

    def __init__(self, host: Host) -> None:
        self.host = host
        #: Terminals by URI, in creation order (the catalogue's order).
        self.terminals: dict[str, TerminalActor] = {}
        #: Terminals being created (their checks await), with the user each will be of.
        self._reserved: dict[str, str | None] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = False
        host.services.append(self)
        host.agent_terminals = self.show_agent_terminal
        host.turn_ends = self.turn_ended
        host.terminals_changed = self.catalogue_changed

    def register(self, register: Callable[[str, Handler, type[Any]], None]) -> None:
        """Add the commands to the dispatcher (``Commands.register``)."""
        register("createTerminal", self.create_terminal, CreateTerminalParams)
        register("disposeTerminal", self.dispose_terminal, DisposeTerminalParams)

    # -- commands ------------------------------------------------------------------------

    async def create_terminal(self, connection: Connection, params: CreateTerminalParams) -> bytes:
        host = self.host
        uri = params.channel
        if not uri.startswith(TERMINAL_SCHEME) or uri == TERMINAL_SCHEME or len(uri) > MAX_URI:
            raise InvalidParams(
                f"a terminal URI starts with {TERMINAL_SCHEME!r} (at most {MAX_URI} characters)"
            )
        if any(c.isspace() or not c.isprintable() for c in uri):
            raise InvalidParams("a terminal URI holds no spaces or control characters")
        if host.knows(uri) or uri in self._reserved:
            raise ProtocolError(f"{uri} already exists", code=AhpErrorCode.AlreadyExists)
        user = self._user_of(params.claim)
        self._check_room(user)
        self._reserved[uri] = user  # until it is registered (checks below await)
        try:
            actor = await self._new_terminal(connection, params)
        finally:
            del self._reserved[uri]
        self._add(actor)
        assert actor.pty is not None
        log.info(
            "terminal started",
            conn=connection.id,
            client_id=connection.client_id,
            terminal=uri,
            cwd=file_uri_to_path(str(actor.state.cwd)),
            command=actor.command,
            pid=actor.pty.pid,
            claim=params.claim.kind if not isinstance(params.claim, UnknownVariant) else None,
        )
        await self.publish_catalogue()
        return _NULL

    async def _new_terminal(
        self, connection: Connection, params: CreateTerminalParams
    ) -> TerminalActor:
        """Validate ``createTerminal`` and start its process (not registered yet)."""
        host = self.host
        uri = params.channel
        claim = params.claim
        if isinstance(claim, TerminalClientClaim):
            if claim.client_id != connection.client_id:
                raise InvalidParams("a client claim must name this connection's clientId")
        elif isinstance(claim, TerminalSessionClaim):
            if claim.session not in host.session_index:
                raise ProtocolError(
                    f"no session {claim.session}", code=AhpErrorCode.SessionNotFound
                )
            host.check_access(connection, claim.session)  # multi-user mode: -32009
        else:
            raise InvalidParams("claim.kind must be 'client' or 'session'")
        cols = DEFAULT_COLS if isinstance(params.cols, UnsetType) else params.cols
        rows = DEFAULT_ROWS if isinstance(params.rows, UnsetType) else params.rows
        if not valid_terminal_size(cols, rows):
            raise InvalidParams(
                f"cols and rows must be whole numbers from 1 to {MAX_TERMINAL_SIZE}"
            )
        directory = await self._cwd(params.cwd, claim, connection)
        argv = self._command()
        command = os.path.basename(argv[0])
        title = params.name if isinstance(params.name, str) and params.name else command
        state = TerminalState(
            title=title,
            cwd=file_uri(directory),
            cols=int(cols),
            rows=int(rows),
            content=(),
            claim=claim,
            lifecycle=TerminalRunningLifecycleState(),
            is_pty=True,
        )
        actor = TerminalActor(self, uri, state, created_at=iso_timestamp(host.now()))
        actor.command = command
        spawn = asyncio.ensure_future(
            PtyProcess.spawn(
                argv,
                cwd=str(directory),
                env=_environment(),
                cols=int(cols),
                rows=int(rows),
                on_output=actor.output,
                on_exit=actor.process_exited,
            )
        )
        try:
            actor.pty = await asyncio.shield(spawn)
        except PtyError as error:
            raise ProtocolError(str(error)) from None
        except asyncio.CancelledError:  # (host stopping): never leave the process behind
            with contextlib.suppress(Exception):
                await (await spawn).terminate(0)
            raise
        actor.running = True
        return actor

    async def dispose_terminal(
        self, connection: Connection, params: DisposeTerminalParams
    ) -> bytes:
        actor = self.terminals.get(params.channel)
        if actor is None:
            raise ProtocolError(f"no terminal {params.channel}", code=AhpErrorCode.NotFound)
        self.host.check_access(connection, params.channel)  # multi-user mode: -32009
        await self._dispose(actor)
        log.info(
            "terminal disposed",
            conn=connection.id,
            client_id=connection.client_id,
            terminal=params.channel,
        )
        await self.publish_catalogue()
        return _NULL

    # -- agents' commands ----------------------------------------------------------------

    async def show_agent_terminal(self, request: TurnRequest, terminal: AgentTerminal) -> None:
        """``Host.agent_terminals``: a read-only channel mirroring an agent's command."""
        if self._stopping:
            return
        try:
            self._check_room(self.host.owner_of(request.session))
        except InvalidParams as error:
            log.info("agent terminal not shown", session=request.session, reason=str(error))
            return
        uri = f"{TERMINAL_SCHEME}{uuid.uuid4()}"
        command = os.path.basename(terminal.command) or terminal.command
        claim = TerminalSessionClaim(
            session=request.session, chat=request.chat, turn_id=request.turn_id
        )
        state = TerminalState(
            title=command,
            cwd=file_uri(terminal.cwd) if terminal.cwd.startswith("/") else UNSET,
            content=(),
            claim=claim,
            lifecycle=TerminalRunningLifecycleState(),
            is_pty=False,
        )
        actor = TerminalActor(
            self, uri, state, created_at=iso_timestamp(self.host.now()), agent=terminal
        )
        actor.running = True
        self._add(actor)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

        def on_output(chunk: bytes) -> None:
            actor.output(decoder.decode(chunk))

        def on_exit(exit_code: int | None) -> None:
            actor.output(decoder.decode(b"", final=True))
            actor.process_exited(exit_code)
            self._background_ended(actor)

        terminal.watch(on_output, on_exit)
        # The process itself was logged as "terminal started" where it was
        # spawned (workspace/terminals.py): one such line per process.
        log.info(
            "agent terminal shown",
            session=request.session,
            turn=request.turn_id,
            terminal=uri,
            cwd=terminal.cwd,
            command=command,
        )
        await self.publish_catalogue()

    # -- background work (1.0: chat/backgroundWorkSet, chat/backgroundWorkRemoved) ----------

    async def turn_ended(self, chat: str, turn_id: str) -> None:
        """``Host.turn_ends``: an agent command its turn left running is the chat's
        background work until it exits (docs/workspace.md "Background work")."""
        left = [
            actor
            for actor in self.terminals.values()
            if actor.agent is not None
            and actor.running
            and isinstance(actor.state.claim, TerminalSessionClaim)
            and actor.state.claim.chat == chat
            and actor.state.claim.turn_id == turn_id
        ]
        target = await self.host.chat(chat) if left else None
        if target is None:
            return
        for actor in left:
            work = BackgroundShellWork(
                id=background_id(actor.uri),
                label=actor.state.title,
                started_at=actor.created_at,
                command=actor.command,
                terminal=actor.uri,
            )
            await target.apply_server(ChatBackgroundWorkSetAction(work=work))
            if not actor.running:  # it exited meanwhile, before it was listed
                await target.apply_server(ChatBackgroundWorkRemovedAction(id=work.id))

    def _background_ended(self, actor: TerminalActor) -> None:
        """An agent command exited: off its chat's background work, if it was on it."""
        claim = actor.state.claim
        if isinstance(claim, TerminalSessionClaim) and isinstance(claim.chat, str):
            self._spawn(self._remove_background(claim.chat, background_id(actor.uri)))

    async def _remove_background(self, chat: str, work_id: str) -> None:
        target = await self.host.chat(chat) if chat in self.host.chat_index else None
        if target is None:
            return
        listed = target.state.background_work
        if not isinstance(listed, UnsetType) and any(
            getattr(w, "id", None) == work_id for w in listed
        ):
            await target.apply_server(ChatBackgroundWorkRemovedAction(id=work_id))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- host lifecycle (WorkspaceService) -------------------------------------------------

    async def start(self, rows: Sequence[ChannelRow]) -> None:
        """Load every stored terminal as an exited one (their processes are gone).

        In sharded mode ``rows`` holds this node's terminals only (``ShardedStore.channels``):
        another node's may still run (docs/scale-out.md "Routing").
        """
        for row in rows:
            if row.kind == KIND:
                await self._load(row)
        if self.terminals:
            await self.publish_catalogue()

    async def chat_disposed(self, chat: str) -> None:
        """``WorkspaceService``: nothing here belongs to a chat alone."""

    async def session_disposed(self, session: str) -> None:
        owned = [
            actor
            for actor in self.terminals.values()
            if isinstance(actor.state.claim, TerminalSessionClaim)
            and actor.state.claim.session == session
        ]
        for actor in owned:
            await self._dispose(actor)
            log.info("terminal disposed", terminal=actor.uri, session=session)
        if owned:
            await self.publish_catalogue()

    async def stop(self) -> None:
        """End every process (reaped, ``terminal/exited`` kept), snapshot, stop the actors."""
        self._stopping = True
        actors = list(self.terminals.values())
        grace = self.host.settings.terminal_kill_grace
        await asyncio.gather(*(actor.end_process(grace) for actor in actors))
        for actor in actors:
            actor.snapshot()
            await actor.stop()
        for task in list(self._tasks):
            task.cancel()

    # -- bookkeeping ---------------------------------------------------------------------

    def _user_of(self, claim: object) -> str | None:
        """The user a terminal so claimed is of (``Host.may_see_claim``): a session's
        owner, a client id's user."""
        if isinstance(claim, TerminalSessionClaim):
            return self.host.owner_of(claim.session)
        if isinstance(claim, TerminalClientClaim):
            return self.host.client_users.get(claim.client_id)
        return None

    def _check_room(self, user: str | None) -> None:
        """Refuse (``-32602``) a terminal over ``max_terminals``, or (multi-user mode)
        over ``max_terminals_per_user`` of ``user``'s (running or exited alike)."""
        settings = self.host.settings
        limit = settings.max_terminals
        if len(self.terminals) + len(self._reserved) >= limit:
            raise InvalidParams(
                f"this host already has {limit} terminals (the limit): dispose one first"
            )
        if not self.host.multi_user:
            return  # one user: the host's limit is theirs
        per_user = settings.max_terminals_per_user
        held = sum(1 for u in self._reserved.values() if u == user) + sum(
            1 for actor in self.terminals.values() if self._user_of(actor.state.claim) == user
        )
        if held >= per_user:
            raise InvalidParams(
                f"{'user ' + repr(user) if user else 'this user'} already has {per_user} "
                "terminals (workspace.max_terminals_per_user): dispose one first"
            )

    def _command(self) -> list[str]:
        configured = self.host.settings.terminal_shell
        argv = list(configured) if configured else [os.environ.get("SHELL") or "/bin/sh"]
        if shutil.which(argv[0]) is None:
            raise ProtocolError(f"the terminal program {argv[0]!r} is not installed on the host")
        return argv

    async def _directories(self, session: str) -> tuple[tuple[str, ...], str | None]:
        """A session's working directories and its primary one (its default chat's)."""
        actor = await self.host.session(session)
        if actor is None:
            raise ProtocolError(f"no session {session}", code=AhpErrorCode.SessionNotFound)
        directories = actor.state.working_directories
        # Only those inside the configured roots (docs/workspace.md "Roots").
        roots = (
            ()
            if isinstance(directories, UnsetType)
            else tuple(self.host.roots.usable(directories, actor.owner))
        )
        primary: str | None = None
        default = actor.state.default_chat
        chat = await self.host.chat(default) if isinstance(default, str) else None
        if chat is not None:
            chat_directories = chat.state.working_directories  # the primary is index 0
            if not isinstance(chat_directories, UnsetType) and chat_directories:
                primary = chat_directories[0] if chat_directories[0] in roots else None
        return roots, primary or (roots[0] if roots else None)

    async def _cwd(
        self,
        cwd: str | UnsetType,
        claim: TerminalClientClaim | TerminalSessionClaim,
        viewer: Connection | None = None,
    ) -> Path:
        if isinstance(claim, TerminalSessionClaim):
            roots, primary = await self._directories(claim.session)
        else:
            roots, primary = tuple(self.host.working_directories(viewer=viewer)), None
        if isinstance(cwd, UnsetType):
            if primary is None:
                raise InvalidParams(
                    "cwd is required: a client-claimed terminal (or one of a session without "
                    "a working directory) has no default directory"
                )
            cwd = primary
        try:
            path = cwd if cwd.startswith("/") else file_uri_to_path(cwd)
            return confine_directory(path, roots, self.host.roots.forbidden)
        except PathOutside as error:
            raise ProtocolError(str(error), code=AhpErrorCode.PermissionDenied) from None
        except (PathInvalid, PathRefused) as error:
            raise InvalidParams(str(error)) from None

    def _add(self, actor: TerminalActor) -> None:
        """Register, store and start a new terminal."""
        self.terminals[actor.uri] = actor
        self.host.workspace_channels[actor.uri] = actor
        actor.persist_new()
        actor.start()

    async def _dispose(self, actor: TerminalActor) -> None:
        """Kill and reap its process, stop it, drop its subscribers, delete its data."""
        if self.terminals.get(actor.uri) is not actor:
            return
        del self.terminals[actor.uri]
        await actor.end_process(self.host.settings.terminal_kill_grace)
        self.host.workspace_channels.pop(actor.uri, None)
        await actor.stop()
        self.host.hub.drop_channel(actor.uri)
        self.host.store.delete_channel(actor.uri)

    async def rebuild(
        self, uri: str, created_at: str
    ) -> tuple[TerminalActor, LoadedChannel] | None:
        """A stored terminal rebuilt from the store: its snapshot, then the log after it
        reduced (and trimmed) as the live actor does. Neither registered nor
        started (:meth:`_load` does that; the fuzzer compares it with the live one)."""
        host = self.host
        loaded = await host.store.load(uri, retained_turns=0)
        if loaded is None or loaded.snapshot is None:
            log.error("stored terminal cannot be loaded", terminal=uri)
            return None
        cap = host.settings.terminal_scrollback_bytes
        state = trim_content(codec.decode(loaded.snapshot, TerminalState), cap)
        last = loaded.snapshot_seq
        for seq, at, envelope in loaded.envelopes:
            if seq > loaded.snapshot_seq:
                action = codec.decode(envelope, ActionEnvelope).action
                state = trim_content(reduce_terminal(state, action, _at(at)), cap)
                last = seq
        actor = TerminalActor(self, uri, state, created_at=created_at)
        actor.last_seq = last
        return actor, loaded

    async def _load(self, row: ChannelRow) -> None:
        host = self.host
        rebuilt = await self.rebuild(row.uri, row.created_at)
        if rebuilt is None:
            return
        actor, loaded = rebuilt
        host.hub.seed_replay(row.uri, loaded.log_floor, ((s, e) for s, _, e in loaded.envelopes))
        self.terminals[row.uri] = actor
        host.workspace_channels[row.uri] = actor
        actor.start()
        if row.unfinished == RUNNING:
            await actor.call(actor.mark_lost)
        # Its process is gone with the last run: not its chat's background work any more
        # (the removal the exit spawned may not have landed before the host stopped).
        self._background_ended(actor)

    def catalogue_changed(self) -> None:
        """A terminal's title, claim or exit code changed: update ``RootState.terminals``."""
        if self._stopping:
            return
        self._spawn(self.publish_catalogue())

    async def publish_catalogue(self) -> None:
        """``root/terminalsChanged`` (full replacement) if the list changed; waits for delivery.

        The list is computed inside the root actor, so concurrent updates can
        never apply an older list after a newer one.
        """
        root = self.host.root
        loop = asyncio.get_running_loop()

        async def update() -> asyncio.Future[int] | None:
            # Sharded mode: every node's terminals, on the root channel's owner only.
            terminals = self.host.root_terminals(
                tuple(_info(actor) for actor in self.terminals.values())
            )
            if terminals is None:
                return None
            current = root.state.terminals
            if terminals == (() if isinstance(current, UnsetType) else current):
                return None
            done: asyncio.Future[int] = loop.create_future()
            root.apply(RootTerminalsChangedAction(terminals=terminals), done=done)
            return done

        done = await root.call(update)
        if done is not None:
            await done
