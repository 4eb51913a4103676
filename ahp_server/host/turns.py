"""The turn engine: runs one provider turn and turns its calls into chat actions.

Layer: host (asyncio).

A :class:`TurnRunner` is the host's :class:`~ahp_server.agents.base.TurnIO`. It
never touches chat state: every event becomes a server action submitted to the
chat's actor (awaiting when the actor's inbox is full — backpressure on the
provider), and every answer the provider waits for (tool confirmation, input,
client tool result) is a future the actor resolves when it applies the
matching client action. Futures are registered *before* the action that asks
the question is submitted, so an answer can never arrive unseen.

Before the provider runs, the runner waits for the provider to hold the
turn's session (:meth:`~ahp_server.host.core.runtime.Runtime.agent_session_ready`:
after a host restart that restores it once); when it cannot, the turn fails
with ``chat/error`` like any provider error.

The runner knows its chat only as a :class:`TurnSink` (what the chat actor
offers a turn), so this module imports no actor.

A runner may also *resume* a turn (``chat/turnResume``, spec 1.0): the same
turn id, the provider told so in its request (``TurnRequest.resumed``,
``partial``). Its new parts get ids after those the turn already has, and
its final ``duration`` counts from the turn's ``startedAt`` (``elapsed_ms``:
what had passed when it resumed), so ``modifiedAt`` = ``startedAt`` +
``duration`` moves on rather than back (REDUCER-CHANGES 11).

A runner ends its turn with exactly one of ``chat/turnComplete``,
``chat/error`` — or nothing, when the actor aborted it (the user cancelled, the
turn was truncated away, the chat was disposed): then the actor has already
ended the turn and the runner's late submissions are dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar

import structlog
from msgspec import UNSET

from ahp_server.agents.base import (
    AgentError,
    AgentTerminal,
    FileChange,
    InputAnswer,
    Provider,
    ToolDecision,
    TurnRequest,
)
from ahp_server.host.core.turnstile import Turnstile
from ahp_server.protocol.reducers.chat import part_id_of
from ahp_server.protocol.types import (
    ChatActivityChangedAction,
    ChatDeltaAction,
    ChatErrorAction,
    ChatInputRequest,
    ChatInputRequestedAction,
    ChatPendingMessageRemovedAction,
    ChatReasoningAction,
    ChatResponsePartAction,
    ChatState,
    ChatToolCallCompleteAction,
    ChatToolCallContentChangedAction,
    ChatToolCallReadyAction,
    ChatToolCallStartAction,
    ChatTurnCompleteAction,
    ChatUsageAction,
    ConfirmationOption,
    ErrorInfo,
    ErrorResponsePart,
    FileEdit,
    FileEditCollection,
    MarkdownResponsePart,
    Message,
    PendingMessage,
    ReasoningResponsePart,
    ResponsePart,
    StringOrMarkdown,
    ToolCallClientContributor,
    ToolCallResult,
    ToolResultContent,
    UsageInfo,
)

__all__ = ["TurnRunner", "TurnSink"]

log = structlog.get_logger(__name__)
T = TypeVar("T")
#: Text being coalesced: the action type, the part, the pieces.
_Pending = tuple[type["ChatDeltaAction"] | type["ChatReasoningAction"], str, list[str]]


class TurnSink(Protocol):
    """What a turn needs from its chat: a way in, and a look at the latest state."""

    async def submit_from_runner(
        self, runner: TurnRunner, action: object, *, final_action: bool = False
    ) -> None:
        """Queue a server action of this turn (dropped once the turn was aborted)."""
        ...

    def offer_from_runner(self, runner: TurnRunner, action: object) -> bool:
        """:meth:`submit_from_runner` without waiting: False when it must wait (nothing done)."""
        ...

    def peek(self) -> ChatState:
        """The chat's latest state without folding streamed text."""
        ...

    async def save_agent_state(self, state: str | None) -> None:
        """Keep the provider's opaque state for this chat (stored with the chat)."""
        ...


class _ToolCall:
    """A tool call started by the provider (implements ``agents.base.ToolCall``)."""

    def __init__(
        self,
        runner: TurnRunner,
        tool_call_id: str,
        *,
        confirm: bool,
        client_id: str | None,
        timeout: float,
    ) -> None:
        self._runner = runner
        self._id = tool_call_id
        self._confirm = confirm
        self._client_id = client_id
        self._timeout = timeout

    @property
    def tool_call_id(self) -> str:
        return self._id

    async def decision(self) -> ToolDecision:
        if not self._confirm:
            return ToolDecision(approved=True)
        return await self._runner.decisions[self._id]

    async def set_content(self, content: tuple[ToolResultContent, ...]) -> None:
        await self._runner.emit(
            ChatToolCallContentChangedAction(
                turn_id=self._runner.turn_id, tool_call_id=self._id, content=content
            )
        )

    async def complete(self, result: ToolCallResult) -> None:
        await self._runner.emit(
            ChatToolCallCompleteAction(
                turn_id=self._runner.turn_id, tool_call_id=self._id, result=result
            )
        )

    async def request_confirmation(
        self,
        *,
        invocation_message: StringOrMarkdown,
        confirmation_title: StringOrMarkdown | None = None,
        options: tuple[ConfirmationOption, ...] | None = None,
        tool_input: str | None = None,
        edits: tuple[FileEdit, ...] = (),
    ) -> ToolDecision:
        runner = self._runner
        future: asyncio.Future[ToolDecision] = asyncio.get_running_loop().create_future()
        runner.decisions[self._id] = future  # before the question goes out
        await runner.emit(
            ChatToolCallReadyAction(
                turn_id=runner.turn_id,
                tool_call_id=self._id,
                invocation_message=invocation_message,
                tool_input=UNSET if tool_input is None else tool_input,
                confirmation_title=UNSET if confirmation_title is None else confirmation_title,
                edits=FileEditCollection(items=edits) if edits else UNSET,
                options=UNSET if options is None else options,
            )
        )
        return await future

    async def client_result(self) -> ToolCallResult:
        if self._client_id is None:
            raise RuntimeError("client_result() is only for client-provided tools")
        future = self._runner.client_results[self._id]
        try:
            async with asyncio.timeout(self._timeout):
                return await asyncio.shield(future)
        except TimeoutError:
            # WIRE-SUMMARY §11.5: the server MAY time out a client tool.
            result = ToolCallResult(
                success=False,
                past_tense_message="The client did not run the tool in time",
            )
            await self.complete(result)
            return result


class TurnRunner:
    """Drives one provider turn for one chat."""

    def __init__(
        self,
        actor: TurnSink,
        provider: Provider,
        request: TurnRequest,
        *,
        ready: Callable[[], Coroutine[Any, Any, None]] | None = None,
        client_tool_timeout: float,
        coalesce_ms: float = 0.0,
        terminals: Callable[[TurnRequest, AgentTerminal], Awaitable[None]] | None = None,
        files: Callable[[TurnRequest, FileChange], Awaitable[None]] | None = None,
        elapsed_ms: int = 0,
        turnstile: Turnstile | None = None,
    ) -> None:
        self.actor = actor
        #: Passed before each action the provider emits: N turns' actions due at once
        #: run in slices of the loop (host/core/turnstile.py).
        self._turnstile = turnstile or Turnstile()
        #: How long the turn had run before this runner (a resumed turn): its
        #: duration counts from the turn's start, not from this runner's.
        self._elapsed_ms = elapsed_ms
        #: Records a file the provider changed in the turn's changeset (the changeset service).
        self._files = files
        #: Shows a command the provider started as a terminal channel (the host's terminal service).
        self._terminals = terminals
        self.provider = provider
        self.request = request
        #: Waits until the provider holds the session (raises AgentError if it cannot).
        self._ready = ready
        self.turn_id = request.turn_id
        self.closed = False
        self.decisions: dict[str, asyncio.Future[ToolDecision]] = {}
        self.client_results: dict[str, asyncio.Future[ToolCallResult]] = {}
        self.inputs: dict[str, asyncio.Future[InputAnswer]] = {}
        self._client_tool_timeout = client_tool_timeout
        # A resumed turn keeps its parts: new ids come after theirs.
        self._counter = itertools.count(_next_part_number(request.turn_id, request.partial))
        self._markdown: str | None = None
        self._reasoning: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._send_lock = asyncio.Lock()
        self._coalesce_window = coalesce_ms / 1000
        self._pending: _Pending | None = None
        self._pending_order: list[_Pending] = []
        #: What sends the text being coalesced when its window ends: a timer, or
        #: the task it started when the send could not be done in the timer's callback.
        self._flusher: asyncio.TimerHandle | asyncio.Task[None] | None = None

    # -- lifecycle (called by the actor) ------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"turn {self.request.chat} {self.turn_id}"
        )

    def abort(self) -> None:
        """Stop the provider; the actor has ended (or dropped) the turn itself."""
        self.closed = True
        self._pending, self._pending_order = None, []
        if self._flusher is not None:
            self._flusher.cancel()
        if self._task is not None and not self._task.done():
            self._task.cancel()
        for futures in (self.decisions, self.client_results, self.inputs):
            for future in futures.values():
                future.cancel()

    async def wait(self) -> None:
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    # -- answers (called by the actor after applying a client action) -------------------------

    def resolve_decision(self, tool_call_id: str, decision: ToolDecision) -> None:
        _resolve(self.decisions.get(tool_call_id), decision)

    def resolve_client_result(self, tool_call_id: str, result: ToolCallResult) -> None:
        _resolve(self.client_results.get(tool_call_id), result)

    def resolve_input(self, request_id: str, answer: InputAnswer) -> None:
        _resolve(self.inputs.get(request_id), answer)

    # -- TurnIO -------------------------------------------------------------------------------

    def _taken(self, action: object) -> bool:
        """The hot path of :meth:`emit`, without a coroutine: no coalescing, room in
        this turn of the loop, and the chat took ``action`` at once (the usual
        case: an idle chat applies it in this call). False: nothing was done."""
        return (
            self._coalesce_window <= 0
            and not self.closed
            and not self._turnstile.closed()
            and self.actor.offer_from_runner(self, action)
        )

    async def emit(self, action: object) -> None:
        """Submit a server action for this turn (after any text still being coalesced)."""
        if self._taken(action):
            return
        if self._turnstile.closed():
            await self._turnstile.wait()
        if self._coalesce_window <= 0:  # the hot path: no buffer, no lock
            if self.closed:
                raise asyncio.CancelledError
            # Taken at once, no coroutine is made for it; else wait for room.
            if not self.actor.offer_from_runner(self, action):
                await self.actor.submit_from_runner(self, action)
            return
        await self.flush()
        await self._send(action)

    async def _send(self, action: object) -> None:
        async with self._send_lock:
            await self._submit(action)

    async def _submit(self, action: object) -> None:
        if self.closed:
            raise asyncio.CancelledError
        await self.actor.submit_from_runner(self, action)

    # -- delta coalescing ------------------------------------------------------------------
    #
    # With ``coalesce_ms`` > 0, consecutive text for the same part is merged
    # into one chat/delta (or chat/reasoning) sent at most that long after its
    # first piece, and always before any other action of the turn (a tool
    # call, usage, the end of the turn). Nothing is applied until sent, so
    # snapshots, replays and ordering are exactly as without coalescing.

    def _coalesce(
        self, kind: type[ChatDeltaAction] | type[ChatReasoningAction], part_id: str, text: str
    ) -> None:
        pending = self._pending
        if pending is not None and (pending[0], pending[1]) != (kind, part_id):
            self._pending_order.append(pending)
            pending = None
        if pending is None:
            self._pending = (kind, part_id, [text])
        else:
            pending[2].append(text)
        if self._flusher is None:
            loop = asyncio.get_running_loop()
            self._flusher = loop.call_later(self._coalesce_window, self._window_ended)

    def _window_ended(self) -> None:
        """Send the coalesced text: in this callback when the chat takes it at once
        (the usual case: one piece of text, an idle chat, room in this turn of the
        loop), else from a task that waits for its turn like any other send."""
        self._flusher = None
        pending = self._pending
        if (
            pending is not None
            and not self._pending_order
            and not self.closed
            and not self._send_lock.locked()
            and not self._turnstile.closed()  # N turns' windows ending together
        ):
            action = self._coalesced(pending)
            self._pending = None
            if self.actor.offer_from_runner(self, action):
                return
            self._pending = pending  # not taken: nothing was applied
        if self._pending is not None or self._pending_order:
            self._flusher = asyncio.get_running_loop().create_task(self._flush_later())

    async def _flush_later(self) -> None:
        if self._turnstile.closed():
            await self._turnstile.wait()
        self._flusher = None
        with contextlib.suppress(asyncio.CancelledError):
            await self.flush()

    async def flush(self) -> None:
        """Send the text being coalesced, if any (in order, before anything after it)."""
        async with self._send_lock:
            batches = [*self._pending_order, *([self._pending] if self._pending else [])]
            self._pending, self._pending_order = None, []
            for batch in batches:
                await self._submit(self._coalesced(batch))

    def _coalesced(self, pending: _Pending) -> ChatDeltaAction | ChatReasoningAction:
        """One part's coalesced pieces of text as the action that sends them."""
        kind, part_id, texts = pending
        return kind(turn_id=self.turn_id, part_id=part_id, content="".join(texts))

    def _part_id(self, kind: str) -> str:
        return f"{self.turn_id}.{kind}{next(self._counter)}"

    async def text(self, delta: str) -> None:
        if self._markdown is None:
            self._markdown = self._part_id("md")
            part = MarkdownResponsePart(id=self._markdown, content=delta)
            await self.emit(ChatResponsePartAction(turn_id=self.turn_id, part=part))
        elif delta and self._coalesce_window > 0:
            self._coalesce(ChatDeltaAction, self._markdown, delta)
        elif delta:
            # A word of a stream: one call when the chat takes it at once.
            action = ChatDeltaAction(turn_id=self.turn_id, part_id=self._markdown, content=delta)
            if not self._taken(action):
                await self.emit(action)

    async def reasoning(self, delta: str) -> None:
        if self._reasoning is None:
            self._reasoning = self._part_id("rs")
            part = ReasoningResponsePart(id=self._reasoning, content=delta)
            await self.emit(ChatResponsePartAction(turn_id=self.turn_id, part=part))
        elif delta and self._coalesce_window > 0:
            self._coalesce(ChatReasoningAction, self._reasoning, delta)
        elif delta:
            action = ChatReasoningAction(
                turn_id=self.turn_id, part_id=self._reasoning, content=delta
            )
            if not self._taken(action):
                await self.emit(action)

    async def usage(self, usage: UsageInfo) -> None:
        await self.emit(ChatUsageAction(turn_id=self.turn_id, usage=usage))

    async def activity(self, description: str | None) -> None:
        await self.emit(
            ChatActivityChangedAction(activity=UNSET if description is None else description)
        )

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
    ) -> _ToolCall:
        tool_call_id = self._part_id("tool")
        self._markdown = self._reasoning = None  # text after the call starts a new part
        loop = asyncio.get_running_loop()
        if confirm:
            self.decisions[tool_call_id] = loop.create_future()
        if client_id is not None:
            self.client_results[tool_call_id] = loop.create_future()
        await self.emit(
            ChatToolCallStartAction(
                turn_id=self.turn_id,
                tool_call_id=tool_call_id,
                tool_name=tool_name,
                display_name=display_name,
                contributor=UNSET
                if client_id is None
                else ToolCallClientContributor(client_id=client_id),
            )
        )
        await self.emit(
            ChatToolCallReadyAction(
                turn_id=self.turn_id,
                tool_call_id=tool_call_id,
                invocation_message=invocation_message,
                tool_input=UNSET if tool_input is None else tool_input,
                confirmation_title=UNSET if confirmation_title is None else confirmation_title,
                options=UNSET if options is None else options,
                confirmed=UNSET if confirm else "not-needed",
            )
        )
        return _ToolCall(
            self,
            tool_call_id,
            confirm=confirm,
            client_id=client_id,
            timeout=self._client_tool_timeout,
        )

    async def request_input(self, request: ChatInputRequest) -> InputAnswer:
        self._markdown = self._reasoning = None
        future: asyncio.Future[InputAnswer] = asyncio.get_running_loop().create_future()
        self.inputs[request.id] = future
        await self.emit(ChatInputRequestedAction(request=request))
        return await future

    async def save_agent_state(self, state: str | None) -> None:
        if self.closed:
            raise asyncio.CancelledError
        await self.actor.save_agent_state(state)

    async def terminal_started(self, terminal: AgentTerminal) -> None:
        if self._terminals is not None and not self.closed:
            await self._terminals(self.request, terminal)

    async def file_changed(self, change: FileChange) -> None:
        # Recorded even when the turn was just aborted: the file did change.
        if self._files is not None:
            await self._files(self.request, change)

    async def take_steering(self) -> Message | None:
        steering = self.actor.peek().steering_message  # no need to fold streamed text
        if not isinstance(steering, PendingMessage):
            return None
        await self.emit(ChatPendingMessageRemovedAction(kind="steering", id=steering.id))
        return steering.message

    # -- the turn -----------------------------------------------------------------------------

    def _duration(self, started: float) -> int:
        return self._elapsed_ms + _ms_since(started)

    async def _run(self) -> None:
        structlog.contextvars.bind_contextvars(channel=self.request.chat, turn=self.turn_id)
        started = time.monotonic()
        log.debug("turn started", chat=self.request.chat, turn=self.turn_id)
        final: object
        try:
            if self._ready is not None:
                await self._ready()
            await self.provider.run_turn(self.request, self)
            final = ChatTurnCompleteAction(turn_id=self.turn_id, duration=self._duration(started))
        except asyncio.CancelledError:
            if self.closed:
                return  # aborted by the actor, which already ended the turn
            raise
        except AgentError as error:
            final = _error(
                self.turn_id,
                self._duration(started),
                error.error_type,
                error.message,
                resumable=error.resumable,
            )
        except Exception:  # task boundary: a provider bug fails the turn, not the host
            log.exception("provider failed", chat=self.request.chat, turn=self.turn_id)
            final = _error(
                self.turn_id,
                self._duration(started),
                "internal",
                "The agent failed unexpectedly.",
                resumable=False,
            )
        if not self.closed:
            with contextlib.suppress(asyncio.CancelledError):
                if self._turnstile.closed():  # N turns ending together
                    await self._turnstile.wait()
                await self.flush()  # coalesced text goes before the end of the turn
            self.closed = True
            await self.actor.submit_from_runner(self, final, final_action=True)


def _ms_since(started: float) -> int:
    return max(0, round((time.monotonic() - started) * 1000))


def _error(
    turn_id: str, duration: int, error_type: str, message: str, *, resumable: bool
) -> ChatErrorAction:
    # Spec 1.0 ErrorResponsePart: "Only `true` enables resume" — any other
    # error carries no ``resumable`` at all.
    return ChatErrorAction(
        turn_id=turn_id,
        duration=duration,
        part=ErrorResponsePart(
            error=ErrorInfo(error_type=error_type, message=message),
            resumable=True if resumable else UNSET,
        ),
    )


#: The number at the end of the ids this module gives parts (``<turn>.md3``, ``<turn>.tool4``).
_PART_NUMBER = re.compile(r"\.(?:md|rs|tool)(\d+)$")


def _next_part_number(turn_id: str, parts: tuple[ResponsePart, ...]) -> int:
    """The first part number no part of ``parts`` uses (1 for a new turn)."""
    highest = 0
    for part in parts:
        part_id = part_id_of(part)
        if isinstance(part_id, str) and part_id.startswith(f"{turn_id}."):
            match = _PART_NUMBER.search(part_id)
            if match is not None:
                highest = max(highest, int(match.group(1)))
    return highest + 1


def _resolve(future: asyncio.Future[T] | None, value: T) -> None:
    if future is not None and not future.done():
        future.set_result(value)
