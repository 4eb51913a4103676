"""The provider interface: how the host drives an agent through one turn.

Layer: agents (depends on ``protocol`` types only; the host implements
:class:`TurnIO` and calls :meth:`Provider.run_turn`).

A provider never sees JSON-RPC, envelopes or subscribers. For each turn it gets
a :class:`TurnRequest` (the message and its context) and a :class:`TurnIO` to
report neutral events through — text, reasoning, usage, tool calls — and to
await what only a user can answer (a tool confirmation, an input request, a
client-side tool result). The host turns those calls into ``chat/*`` actions.

Lifecycle of a turn, as the host runs it:

* ``run_turn`` returns → the turn completes (``chat/turnComplete``);
* it raises :class:`AgentError` → the turn fails (``chat/error``) with that
  error's type and message, and ``resumable: true`` on its error part when the
  error says the turn can go on (:attr:`AgentError.resumable`); any other
  exception fails it as ``internal``, not resumable;
* a client resumes a turn that ended with a resumable error
  (``chat/turnResume``, 1.0) → ``run_turn`` is called again for the *same*
  turn id with :attr:`TurnRequest.resumed` set and the answer so far in
  :attr:`TurnRequest.partial`; what it reports now continues that turn;
* the host cancels the task (the user cancelled, the chat was disposed, the
  host is shutting down) → ``asyncio.CancelledError`` is raised inside
  ``run_turn`` at its next ``await``; the provider cleans up and lets it propagate.

Steering messages the user sends during a turn are offered through
:meth:`TurnIO.take_steering`; one the provider never takes starts the next turn.

Sessions (the seam for providers that keep state or a process per session).
The host calls, each with a timeout (``providers.session_open_timeout`` /
``providers.session_close_timeout``):

* :meth:`Provider.open_session` once, when a client creates the session and
  before it is ready. Raising (or timing out) fails the session:
  ``session/creationFailed`` with the error. A session a crash left in
  ``creating`` is opened again when the host restarts (docs/agents.md).
* :meth:`Provider.restore_session` once per host process, before the first
  turn of a session that an earlier process opened (sessions are loaded
  lazily, so a host with thousands of stored sessions restores only those in
  use). Raising (or timing out) fails that turn with ``chat/error``; the next
  turn tries again.
* :meth:`Provider.close_session` once, when the session is disposed
  (``disposed=True``; also for a session not restored in this process, so a
  provider can drop what it keeps elsewhere) or when the host stops
  (``disposed=False``; only sessions opened or restored in this process).
  Failures are logged: the session goes away regardless.

A timed-out hook is cancelled: ``asyncio.CancelledError`` is raised at its
next ``await`` and it must clean up what it started (a process, say).
Providers that keep nothing per session subclass :class:`StatelessProvider`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ahp_server.protocol.types import (
    AgentInfo,
    ChatInputAnswer,
    ChatInputRequest,
    ConfirmationOption,
    FileEdit,
    Message,
    ResponsePart,
    StringOrMarkdown,
    ToolCallResult,
    ToolDefinition,
    ToolResultContent,
    Turn,
    UsageInfo,
)

__all__ = [
    "AgentError",
    "AgentTerminal",
    "FileChange",
    "InputAnswer",
    "Provider",
    "SessionContext",
    "StatelessProvider",
    "ToolCall",
    "ToolDecision",
    "TurnIO",
    "TurnRequest",
]


class AgentError(Exception):
    """A turn failed for a reason the user should see (becomes ``chat/error``).

    ``resumable``: the provider can continue this turn where it stopped (a
    transient fault: a cut stream, an overloaded endpoint, an agent process
    that died and can be started again). The host then marks the error part
    ``resumable: true`` and serves ``chat/turnResume`` for it (spec 1.0
    ``ErrorResponsePart.resumable``); a client may offer to resume.
    """

    def __init__(
        self, message: str, *, error_type: str = "agentError", resumable: bool = False
    ) -> None:
        super().__init__(message)
        self.message = message
        self.error_type = error_type
        self.resumable = resumable


@dataclass(frozen=True, slots=True)
class SessionContext:
    """What a provider learns of a session when the host opens, restores or closes it."""

    #: The session's URI (``ahp-session:/<id>``).
    session: str
    #: The session's working directories (possibly none) and its primary one:
    #: the default chat's, the first directory when the client named none.
    working_directories: tuple[str, ...] = ()
    primary_working_directory: str | None = None


@dataclass(frozen=True, slots=True)
class TurnRequest:
    """Everything a provider gets for one turn."""

    session: str
    chat: str
    turn_id: str
    message: Message
    #: The chat's completed turns, oldest first.
    history: tuple[Turn, ...] = ()
    #: Context only the agent sees: for a side chat, the source chat's history
    #: up to the source turn, plus that turn's partial response when it was active.
    source_context: tuple[Turn, ...] = ()
    source_partial: tuple[ResponsePart, ...] = ()
    working_directories: tuple[str, ...] = ()
    primary_working_directory: str | None = None
    #: Places inside the working directories no file access may reach (the
    #: host's data, configuration and token files; ``workspace/roots.py``).
    forbidden: tuple[str, ...] = ()
    #: The client whose message started the turn, when a client did.
    client_id: str | None = None
    #: The tools the turn's client offers as an active client of the session
    #: (AHP client-provided tools): a provider may call them with
    #: ``start_tool_call(client_id=request.client_id)`` and ``client_result()``.
    client_tools: tuple[ToolDefinition, ...] = ()
    #: What the provider kept for this chat with :meth:`TurnIO.save_agent_state`
    #: (survives host restarts; ``None`` until it saves something).
    agent_state: str | None = None
    #: This call resumes ``turn_id`` after a resumable :class:`AgentError`
    #: (``chat/turnResume``): continue the answer, do not start it again.
    resumed: bool = False
    #: When resumed: the turn's response so far, oldest first, without its
    #: error parts (text, reasoning, tool calls, input requests already shown
    #: to the user). What the provider reports now is appended after them.
    partial: tuple[ResponsePart, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolDecision:
    """The user's answer to a tool confirmation (``chat/toolCallConfirmed``)."""

    approved: bool
    #: When approved: the input the user edited, if any.
    edited_input: str | None = None
    #: When denied: ``denied`` or ``skipped``.
    reason: str | None = None
    selected_option_id: str | None = None


@dataclass(frozen=True, slots=True)
class InputAnswer:
    """The user's answer to an input request (``chat/inputCompleted``)."""

    #: ``accept``, ``decline`` or ``cancel``.
    response: str
    answers: dict[str, ChatInputAnswer] = field(default_factory=dict)


class AgentTerminal(Protocol):
    """A command the agent runs through the host (ACP ``terminal/create``).

    Reported with :meth:`TurnIO.terminal_started`, the host shows it to users
    as an AHP terminal channel (``ahp-terminal:/…``, claimed by the turn's
    session): its output as ``terminal/data``, its end as ``terminal/exited``.
    ``workspace/terminals.py`` ``Terminal`` implements it.
    """

    @property
    def command(self) -> str:
        """The program run (for the title and the log; never its output)."""
        ...

    @property
    def cwd(self) -> str:
        """The directory it runs in (a path)."""
        ...

    def watch(
        self, on_output: Callable[[bytes], None], on_exit: Callable[[int | None], None]
    ) -> None:
        """Get the output so far and every later chunk, then the exit code once.

        Both callbacks run on the event loop, must not block, and ``on_exit``
        (``None``: ended by a signal) comes after the last ``on_output``.
        """
        ...

    def kill(self) -> None:
        """End the command now (a user disposed its terminal channel)."""
        ...


@dataclass(frozen=True, slots=True)
class FileChange:
    """A file the agent changed during a turn (:meth:`TurnIO.file_changed`).

    The host lists it in the turn's changeset (docs/workspace.md, "Changesets").
    ``before`` and ``after`` are the file's text on each side, ``None`` when it
    is not known (too large, not text, not read); the host keeps each side only
    up to its own size cap. ``created``: the file did not exist before (then
    ``before`` is ignored); ``deleted``: it no longer exists (``after`` ignored).
    """

    #: The file's absolute local path.
    path: str
    before: str | None = None
    after: str | None = None
    created: bool = False
    deleted: bool = False


class ToolCall(Protocol):
    """One tool call the provider started with :meth:`TurnIO.start_tool_call`."""

    @property
    def tool_call_id(self) -> str: ...

    async def decision(self) -> ToolDecision:
        """Wait for the user's confirmation (immediately approved when none was asked)."""
        ...

    async def set_content(self, content: tuple[ToolResultContent, ...]) -> None:
        """Replace the running call's partial output (``chat/toolCallContentChanged``)."""
        ...

    async def complete(self, result: ToolCallResult) -> None:
        """Report the result of a call the provider executed itself."""
        ...

    async def request_confirmation(
        self,
        *,
        invocation_message: StringOrMarkdown,
        confirmation_title: StringOrMarkdown | None = None,
        options: tuple[ConfirmationOption, ...] | None = None,
        tool_input: str | None = None,
        edits: tuple[FileEdit, ...] = (),
    ) -> ToolDecision:
        """Ask the user to confirm this call now (a running call goes back to pending).

        For agents that decide to ask only once the call is under way (ACP's
        ``session/request_permission``). ``tool_input`` and ``edits`` show what
        will run: the call's input (a command, say) and the file edits it will
        make, previewed before the user decides (``ToolCallReadyAction``; build
        them with ``protocol/edits.py``). Raises ``asyncio.CancelledError``
        when the turn ends first.
        """
        ...

    async def client_result(self) -> ToolCallResult:
        """Wait for the owning client to execute a client-provided tool and report back."""
        ...


class TurnIO(Protocol):
    """What a provider may do during a turn. Implemented by the host's turn engine.

    Every method may wait when the chat is busy (backpressure): a provider that
    streams faster than the host can persist and deliver is slowed down, never
    buffered without bound.
    """

    async def text(self, delta: str) -> None:
        """Append Markdown to the answer (a new part after a tool call or input request)."""
        ...

    async def reasoning(self, delta: str) -> None:
        """Append to the visible reasoning of this turn."""
        ...

    async def usage(self, usage: UsageInfo) -> None:
        """Report token usage so far (replaces the previous report)."""
        ...

    async def activity(self, description: str | None) -> None:
        """Say what the agent is doing right now (``None`` clears it)."""
        ...

    async def start_tool_call(
        self,
        *,
        tool_name: str,
        display_name: str,
        invocation_message: StringOrMarkdown,
        tool_input: str | None = None,
        confirm: bool = False,
        confirmation_title: StringOrMarkdown | None = None,
        options: tuple[ConfirmationOption, ...] | None = None,
        client_id: str | None = None,
    ) -> ToolCall:
        """Start a tool call.

        ``confirm`` asks the user first (the call waits in pending-confirmation).
        ``client_id`` makes it a client-provided tool that client executes.
        """
        ...

    async def request_input(self, request: ChatInputRequest) -> InputAnswer:
        """Ask the user questions and wait for the answer."""
        ...

    async def take_steering(self) -> Message | None:
        """The steering message the user sent during this turn, if any (consumes it)."""
        ...

    async def save_agent_state(self, state: str | None) -> None:
        """Keep ``state`` for this chat across host restarts (``TurnRequest.agent_state``).

        Opaque to the host, never shown to clients; an agent's own session id, say.
        """
        ...

    async def terminal_started(self, terminal: AgentTerminal) -> None:
        """The agent started a command: the host may show it as a terminal channel.

        Users can then watch it; it is claimed by this turn's session (and the
        turn). Never raises for the host's reasons: a command goes on running
        whether or not it can be shown.
        """
        ...

    async def file_changed(self, change: FileChange) -> None:
        """The agent changed a file: the host lists it in this turn's changeset.

        Returns once the change is recorded (clients subscribed to the
        changeset have it). Never raises for the host's reasons: the change
        happened whether or not it can be listed.
        """
        ...


class Provider(Protocol):
    """An agent backend. ``info`` is advertised in the root state's ``agents``."""

    @property
    def info(self) -> AgentInfo: ...

    async def run_turn(self, request: TurnRequest, io: TurnIO) -> None:
        """Run one turn to completion (see the module docstring for the outcomes)."""
        ...

    async def open_session(self, session: SessionContext) -> None:
        """Prepare a new session (start its process, say); raise to fail its creation."""
        ...

    async def restore_session(self, session: SessionContext) -> None:
        """Take back a session an earlier host process opened, before its first turn here."""
        ...

    async def close_session(self, session: SessionContext, *, disposed: bool) -> None:
        """Release a session: disposed (forever) or the host is stopping (restored later)."""
        ...


class StatelessProvider(ABC):
    """A provider that keeps nothing per session: the session hooks do nothing."""

    @property
    @abstractmethod
    def info(self) -> AgentInfo: ...

    @abstractmethod
    async def run_turn(self, request: TurnRequest, io: TurnIO) -> None: ...

    async def open_session(self, session: SessionContext) -> None:
        return None

    async def restore_session(self, session: SessionContext) -> None:
        return None

    async def close_session(self, session: SessionContext, *, disposed: bool) -> None:
        return None
