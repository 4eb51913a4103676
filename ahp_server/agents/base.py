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
  error's type and message; any other exception fails it as ``internal``;
* the host cancels the task (the user cancelled, the chat was disposed, the
  host is shutting down) → ``asyncio.CancelledError`` is raised inside
  ``run_turn`` at its next ``await``; the provider cleans up and lets it propagate.

Steering messages the user sends during a turn are offered through
:meth:`TurnIO.take_steering`; one the provider never takes starts the next turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ahp_server.protocol.types import (
    AgentInfo,
    ChatInputAnswer,
    ChatInputRequest,
    ConfirmationOption,
    Message,
    ResponsePart,
    StringOrMarkdown,
    ToolCallResult,
    ToolResultContent,
    Turn,
    UsageInfo,
)

__all__ = [
    "AgentError",
    "InputAnswer",
    "Provider",
    "ToolCall",
    "ToolDecision",
    "TurnIO",
    "TurnRequest",
]


class AgentError(Exception):
    """A turn failed for a reason the user should see (becomes ``chat/error``)."""

    def __init__(self, message: str, *, error_type: str = "agentError") -> None:
        super().__init__(message)
        self.message = message
        self.error_type = error_type


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
    #: The client whose message started the turn, when a client did.
    client_id: str | None = None


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


class Provider(Protocol):
    """An agent backend. ``info`` is advertised in the root state's ``agents``."""

    @property
    def info(self) -> AgentInfo: ...

    async def run_turn(self, request: TurnRequest, io: TurnIO) -> None:
        """Run one turn to completion (see the module docstring for the outcomes)."""
        ...
