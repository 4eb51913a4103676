"""``ahp-server chat``: talk to an agent of a running host from the terminal.

Layer: cli (client side: uses :mod:`ahp_server.client` only).

Two forms share one turn runner (:class:`ChatRunner`):

* **one-shot** — ``ahp-server chat "message"`` (or the message on stdin when
  stdin is not a terminal): one turn, streamed to stdout, then exit. Tool
  confirmations are read from stdin (a number or y/n; end of input denies);
  an input request the agent makes cannot be answered there, so it is
  declined, with a line saying to run the chat interactively (exit status 1).
* **interactive** — ``ahp-server chat`` on a terminal, with no message: a
  prompt loop (readline editing, a bounded history file under the XDG state
  directory), one session kept across prompts; ``--session``/``--chat``
  continue an existing one after showing its last turns. Confirmations and
  input requests are answered at the prompt. Ctrl-C during a turn cancels it
  on the host (``chat/turnCancelled``); Ctrl-C at the prompt, a second Ctrl-C
  or Ctrl-D leaves.

Threads: the client and its asyncio loop run in a daemon thread
(:class:`ClientThread`); the main thread is the terminal, so ``input()`` has
readline and Ctrl-C arrives there as :class:`KeyboardInterrupt`. The client's
envelope listener streams the reply and posts questions and the turn's end
to a queue the main thread reads.

A client-provided tool call addressed to this client is answered at once as
failed: the CLI offers no tools of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import os
import queue
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from msgspec import UNSET, UnsetType

from ahp_server.cli.common import (
    REQUEST_TIMEOUT,
    TURN_TIMEOUT,
    Refused,
    all_sessions,
    mark_read,
    path_of,
    resolve,
)
from ahp_server.client import (
    ActionRejectedError,
    AhpClient,
    ClientError,
    ConnectionClosedError,
    TurnFailedError,
    is_resumable,
    turn_error,
)
from ahp_server.client.state import channel_kind
from ahp_server.protocol._base import UnknownVariant
from ahp_server.protocol.edits import side_text
from ahp_server.protocol.reducers import iso_timestamp
from ahp_server.protocol.types import (
    ActionEnvelope,
    ActiveTurn,
    ChatDeltaAction,
    ChatInputAnswer,
    ChatInputAnswered,
    ChatInputAnswerValue,
    ChatInputBooleanAnswerValue,
    ChatInputBooleanQuestion,
    ChatInputCompletedAction,
    ChatInputMultiSelectQuestion,
    ChatInputNumberAnswerValue,
    ChatInputNumberQuestion,
    ChatInputRequest,
    ChatInputRequestedAction,
    ChatInputSelectedAnswerValue,
    ChatInputSelectedManyAnswerValue,
    ChatInputSingleSelectQuestion,
    ChatInputSkipped,
    ChatInputTextAnswerValue,
    ChatInputTextQuestion,
    ChatResponsePartAction,
    ChatState,
    ChatToolCallApprovedAction,
    ChatToolCallCompleteAction,
    ChatToolCallDeniedAction,
    ChatToolCallReadyAction,
    ChatTurnCancelledAction,
    ChatTurnResumeAction,
    ChatTurnStartedAction,
    InputRequestResponsePart,
    MarkdownResponsePart,
    MarkdownString,
    Message,
    MessageOrigin,
    SessionState,
    ToolCallClientContributor,
    ToolCallError,
    ToolCallPendingConfirmationState,
    ToolCallResponsePart,
    ToolCallResult,
    ToolCallRunningState,
    ToolResultTextContent,
    Turn,
)

T = TypeVar("T")

#: Lines of history kept in the history file.
HISTORY_LENGTH = 1000
#: Turns shown when an existing chat is continued interactively.
RECENT_TURNS = 3
#: Characters of each message and answer shown for a recent turn.
RECENT_CHARS = 200
#: How long a cancelled turn may take to end on the host, in seconds.
CANCEL_TIMEOUT = 30.0

HELP = """\
/help               this list
/session            the session and chat this prompt talks in
/continue           go on with the latest answer, when it failed resumably
/quit, /exit        leave (Ctrl-D too); the session stays on the host
Any other line is sent to the agent, /words included (e.g. the echo agent's /input).
Ctrl-C while the agent answers cancels its turn; Ctrl-C at the prompt leaves.
Continue later: ahp-server chat --session SESSION"""


def history_file() -> Path:
    """``$XDG_STATE_HOME/ahp-server/chat_history``, else ``~/.local/state/ahp-server/…``."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "ahp-server" / "chat_history"


# -- the client's thread ---------------------------------------------------------------------


class ClientThread:
    """An asyncio loop in a daemon thread, where the client and its listeners run.

    :meth:`run` waits in the main thread for a coroutine run there; a Ctrl-C
    while waiting cancels that coroutine and raises :class:`KeyboardInterrupt`.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="ahp-client")
        self._thread.daemon = True
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result()
        except KeyboardInterrupt:
            future.cancel()
            raise

    def spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        """Run ``coroutine`` on the loop without waiting (called on the loop's thread)."""
        task = self.loop.create_task(coroutine)
        task.add_done_callback(_log_failure)

    def close(self) -> None:
        async def cancel_rest() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(cancel_rest(), self.loop).result(timeout=5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        print(f"ahp-server chat: {task.exception()}", file=sys.stderr)


# -- asking the user ---------------------------------------------------------------------------


class Asker:
    """Where answers come from: stdin, one line per answer (not a terminal)."""

    interactive = False

    def line(self, prompt: str) -> str | None:
        """One answer, stripped; ``None`` at the end of input."""
        sys.stdout.write(prompt)
        sys.stdout.flush()
        text = sys.stdin.readline()
        return text.strip() if text else None


class TerminalAsker(Asker):
    """Answers typed at the terminal, with readline editing when it is available."""

    interactive = True

    def __init__(self) -> None:
        self._readline: Any = None
        self._history: Path | None = None
        with contextlib.suppress(ImportError):
            import readline  # only a terminal needs it; absent on some builds

            self._readline = readline

    def load_history(self, path: Path) -> None:
        if self._readline is None:
            return
        self._history = path
        self._readline.set_history_length(HISTORY_LENGTH)
        with contextlib.suppress(OSError):
            self._readline.read_history_file(str(path))

    def save_history(self) -> None:
        if self._readline is None or self._history is None:
            return
        try:
            self._history.parent.mkdir(parents=True, exist_ok=True)
            self._readline.write_history_file(str(self._history))
        except OSError as error:
            print(f"ahp-server chat: history not saved: {error}", file=sys.stderr)

    def prompt(self, prompt: str) -> str | None:
        """A message line (kept in the history); ``None`` at Ctrl-D."""
        try:
            return input(prompt)
        except EOFError:
            return None

    def line(self, prompt: str) -> str | None:
        """An answer to a question: not kept in the message history."""
        try:
            text = input(prompt)
        except EOFError:
            return None
        if self._readline is not None and text:
            length = self._readline.get_current_history_length()
            if length:
                self._readline.remove_history_item(length - 1)
        return text.strip()


# -- one chat, one turn at a time ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Ended:
    """The turn ended (``error`` is what ended it badly, if anything)."""

    error: BaseException | None


@dataclass(frozen=True, slots=True)
class _Confirm:
    ready: ChatToolCallReadyAction


@dataclass(frozen=True, slots=True)
class _Input:
    request: ChatInputRequest


_Event = _Ended | _Confirm | _Input


class TurnCancelled(Exception):
    """The user cancelled the turn (Ctrl-C); it ended cancelled on the host."""


class InputDeclined(Exception):
    """The turn asked for input that could not be given here (not a terminal)."""


class ChatRunner:
    """Runs turns in one chat: streams them, asks what they ask, cancels on Ctrl-C."""

    def __init__(
        self, thread: ClientThread, client: AhpClient, session_uri: str, chat_uri: str, asker: Asker
    ) -> None:
        self.thread = thread
        self.client = client
        self.session_uri = session_uri
        self.chat_uri = chat_uri
        self.asker = asker
        self._events: queue.Queue[_Event] = queue.Queue()
        self._turn_id: str | None = None
        self._asked: set[str] = set()
        self._failed_tools: set[str] = set()
        self._declined = False
        self._remove = thread.run(self._listen())

    async def _listen(self) -> Callable[[], None]:
        return self.client.on_envelope(self._on_envelope)

    def close(self) -> None:
        self._remove()

    # -- in the client's thread ----------------------------------------------------------------

    def _on_envelope(self, envelope: ActionEnvelope) -> None:
        if envelope.channel != self.chat_uri or self._turn_id is None:
            return
        action = envelope.action
        if isinstance(action, ChatDeltaAction):
            _write(action.content)
        elif isinstance(action, ChatResponsePartAction) and isinstance(
            action.part, MarkdownResponsePart
        ):
            _write(action.part.content)
        elif isinstance(action, ChatToolCallReadyAction) and isinstance(
            action.confirmed, UnsetType
        ):
            if action.tool_call_id not in self._asked:
                self._asked.add(action.tool_call_id)
                self._events.put(_Confirm(action))
        elif isinstance(action, ChatToolCallCompleteAction) and action.turn_id == self._turn_id:
            if action.tool_call_id not in self._failed_tools:  # (our own refusal: noted already)
                _write("\n" + "\n".join(tool_result_lines(action.result)) + "\n")
        elif isinstance(action, ChatInputRequestedAction) and action.request.id not in self._asked:
            self._asked.add(action.request.id)
            self._events.put(_Input(action.request))
        self._fail_client_tools()
        if self._ended(self._turn_id):
            turn_id, self._turn_id = self._turn_id, None
            self._events.put(_Ended(self._failure(turn_id)))

    def _fail_client_tools(self) -> None:
        """A tool this client should run: the CLI has none, so it reports it failed."""
        active = self.client.confirmed(self.chat_uri, ChatState).active_turn
        if not isinstance(active, ActiveTurn):
            return
        for part in active.response_parts:
            if not isinstance(part, ToolCallResponsePart):
                continue
            call = part.tool_call
            contributor = getattr(call, "contributor", None)
            if (
                isinstance(call, ToolCallRunningState)
                and isinstance(contributor, ToolCallClientContributor)
                and contributor.client_id == self.client.client_id
                and call.tool_call_id not in self._failed_tools
            ):
                self._failed_tools.add(call.tool_call_id)
                message = f"ahp-server chat runs no client tools ({call.tool_name})"
                _note(f"the agent asked this client to run {call.tool_name}: {message}")
                result = ToolCallResult(
                    success=False,
                    past_tense_message=f"Could not run {call.tool_name}",
                    error=ToolCallError(message=message, code="unsupported"),
                )
                complete = ChatToolCallCompleteAction(
                    turn_id=active.id, tool_call_id=call.tool_call_id, result=result
                )
                self.thread.spawn(self._dispatch(complete))

    async def _dispatch(self, action: Any) -> None:
        await self.client.dispatch(self.chat_uri, action, timeout=REQUEST_TIMEOUT)

    def _ended(self, turn_id: str) -> bool:
        state = self.client.confirmed(self.chat_uri, ChatState)
        active = state.active_turn
        if isinstance(active, ActiveTurn) and active.id == turn_id:
            return False
        return any(t.id == turn_id for t in state.turns)

    def _failure(self, turn_id: str) -> TurnFailedError | None:
        turns = self.client.confirmed(self.chat_uri, ChatState).turns
        turn = next(t for t in turns if t.id == turn_id)
        if turn.state == "complete":
            return None
        error = turn_error(turn)
        return TurnFailedError(turn_id, turn.state, turn.state if error is None else error.message)

    async def _watch_connection(self) -> None:
        while not self.client.closed:
            with contextlib.suppress(TimeoutError):
                await self.client.wait_closed(timeout=3600)
        self._events.put(
            _Ended(ConnectionClosedError(self.client.close_code, self.client.close_reason))
        )

    async def _start(self, text: str | None, new_id: str) -> str:
        state = self.client.confirmed(self.chat_uri, ChatState)
        check_turnable(state, self.chat_uri, resume=text is None)
        if text is None:
            turn_id = state.turns[-1].id
            action: Any = ChatTurnResumeAction(turn_id=turn_id)
        else:
            turn_id = new_id
            action = ChatTurnStartedAction(
                turn_id=turn_id,
                started_at=iso_timestamp(time.time() * 1000),
                message=Message(text=text, origin=MessageOrigin(kind="user")),
            )
        self._turn_id = turn_id
        try:
            await self.client.dispatch_and_wait(self.chat_uri, action, timeout=REQUEST_TIMEOUT)
        except BaseException:
            self._turn_id = None
            raise
        return turn_id

    async def _cancel(self, turn_id: str, started: float) -> None:
        duration = int((time.monotonic() - started) * 1000)
        with contextlib.suppress(ActionRejectedError):  # it ended meanwhile
            await self.client.dispatch_and_wait(
                self.chat_uri,
                ChatTurnCancelledAction(turn_id=turn_id, duration=duration),
                timeout=REQUEST_TIMEOUT,
            )

    # -- in the main thread --------------------------------------------------------------------

    def turn(self, text: str | None, *, timeout: float | None = None) -> None:
        """Run one turn (``text``, or resume the failed latest one when ``None``) to its end.

        Raises :class:`TurnFailedError` when it failed, :class:`TurnCancelled`
        when the user cancelled it (Ctrl-C), :class:`InputDeclined` when it
        asked for input that could not be given, :class:`TimeoutError` when
        ``timeout`` seconds passed first (it still runs on the host). A second
        Ctrl-C while it is being cancelled raises :class:`KeyboardInterrupt`.
        """
        while not self._events.empty():
            self._events.get_nowait()
        self._declined = False
        started = time.monotonic()
        new_id = str(uuid.uuid4())
        try:
            turn_id = self.thread.run(self._start(text, new_id))
        except KeyboardInterrupt:
            # Ctrl-C before the host's echo: the start may have been sent. A cancel
            # sent after it reaches the host after it, so it ends what it began.
            if text is not None:
                with contextlib.suppress(ClientError):
                    self.thread.run(self._cancel(new_id, started))
            raise TurnCancelled(new_id) from None
        self._follow(turn_id, started, timeout)

    def attach(self) -> bool:
        """Follow the turn running in the chat now, if one is: what it said so far,
        then the rest as it comes, to its end (Ctrl-C cancels it, as in :meth:`turn`).
        False when no turn runs."""
        while not self._events.empty():
            self._events.get_nowait()
        self._declined = False
        running = self.thread.run(self._take_running())
        if running is None:
            return False
        turn, so_far = running
        _write(f"you> {_brief(turn.message.text)}\n{so_far}")
        self._follow(turn.id, time.monotonic(), None)
        return True

    async def _take_running(self) -> tuple[ActiveTurn, str] | None:
        # One step of the client's loop: no envelope comes between reading the
        # text so far and following the turn (each delta is written once).
        active = self.client.confirmed(self.chat_uri, ChatState).active_turn
        if not isinstance(active, ActiveTurn):
            return None
        self._turn_id = active.id
        so_far = "".join(
            p.content for p in active.response_parts if isinstance(p, MarkdownResponsePart)
        )
        # What it waits for already (asked before we came) is asked here too.
        for part in active.response_parts:
            if isinstance(part, ToolCallResponsePart) and isinstance(
                call := part.tool_call, ToolCallPendingConfirmationState
            ):
                self._asked.add(call.tool_call_id)
                self._events.put(_Confirm(ready_of(active.id, call)))
            elif isinstance(part, InputRequestResponsePart) and isinstance(
                part.response, UnsetType
            ):
                self._asked.add(part.request.id)
                self._events.put(_Input(part.request))
        return active, so_far

    def _follow(self, turn_id: str, started: float, timeout: float | None) -> None:
        watch = asyncio.run_coroutine_threadsafe(self._watch_connection(), self.thread.loop)
        try:
            error = self._until_end(turn_id, started, timeout)
        except KeyboardInterrupt:
            _write("\n")
            _note("cancelling the turn… (Ctrl-C again to leave at once)")
            self.thread.run(self._cancel(turn_id, started))
            self._until_end(turn_id, started, CANCEL_TIMEOUT)
            raise TurnCancelled(turn_id) from None
        finally:
            watch.cancel()
        _write("\n")
        with contextlib.suppress(ClientError):
            self.thread.run(mark_read(self.client, self.chat_uri))
        if error is not None:
            raise error
        if self._declined:
            raise InputDeclined(self.chat_uri)

    def _until_end(
        self, turn_id: str, started: float, timeout: float | None
    ) -> BaseException | None:
        deadline = None if timeout is None else started + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                event = self._events.get(timeout=left)
            except queue.Empty:
                waited = time.monotonic() - started
                raise TimeoutError(
                    f"no end of the turn after {waited:.0f} s; it still runs on the host"
                ) from None
            if isinstance(event, _Ended):
                return event.error
            if isinstance(event, _Confirm):
                self._confirm(event.ready)
            else:
                self._answer_input(event.request)

    def _confirm(self, ready: ChatToolCallReadyAction) -> None:
        options = () if isinstance(ready.options, UnsetType) else ready.options
        lines = ["", *confirmation_lines(ready)]
        if options:
            lines += [f"  {i}. {option.label}" for i, option in enumerate(options, 1)]
            prompt = f"choose 1-{len(options)}: "
        else:
            prompt = "allow? [y/N] "
        _write("\n".join(lines) + "\n")
        answer = (self.asker.line(prompt) or "").lower()
        chosen = None
        if options and answer.isdigit() and 1 <= int(answer) <= len(options):
            chosen = options[int(answer) - 1]
        approved = chosen.kind == "approve" if chosen is not None else answer in ("y", "yes")
        selected = UNSET if chosen is None else chosen.id
        action: ChatToolCallApprovedAction | ChatToolCallDeniedAction
        if approved:
            action = ChatToolCallApprovedAction(
                turn_id=ready.turn_id,
                tool_call_id=ready.tool_call_id,
                confirmed="user-action",
                selected_option_id=selected,
            )
        else:
            action = ChatToolCallDeniedAction(
                turn_id=ready.turn_id,
                tool_call_id=ready.tool_call_id,
                reason="denied",
                selected_option_id=selected,
            )
        _write("allowed\n" if approved else "denied\n")
        self.thread.run(self._dispatch(action))

    def _answer_input(self, request: ChatInputRequest) -> None:
        title = request.message if isinstance(request.message, str) else "The agent asks:"
        _write(f"\n[input] {title}\n")
        if not isinstance(request.url, UnsetType):
            _write(f"  open: {request.url}\n")
        if not self.asker.interactive:
            _note(
                "the agent asks for input, which needs an answer: declined. Run "
                f"`ahp-server chat --chat {self.chat_uri}` on a terminal to answer such questions"
            )
            self._declined = True
            completed = ChatInputCompletedAction(request_id=request.id, response="decline")
            self.thread.run(self._dispatch(completed))
            return
        _write("  (an empty answer skips an optional question; /decline declines them all)\n")
        answers: dict[str, ChatInputAnswer] = {}
        response = "accept"
        questions = () if isinstance(request.questions, UnsetType) else request.questions
        if isinstance(request.url, UnsetType) or questions:
            for question in questions:
                if isinstance(question, UnknownVariant):
                    continue  # a kind of question this client does not know: left unanswered
                answer = _ask_question(self.asker, question)
                if answer is None:
                    response = "decline"
                    break
                answers[question.id] = answer
        else:
            done = self.asker.line("done? [y/N] ")
            response = "accept" if (done or "").lower() in ("y", "yes") else "decline"
        completed = ChatInputCompletedAction(
            request_id=request.id,
            response=response,
            answers=answers if response == "accept" else UNSET,
        )
        _write("sent\n" if response == "accept" else "declined\n")
        self.thread.run(self._dispatch(completed))


def _ask_question(asker: Asker, question: Any) -> ChatInputAnswer | None:
    """Ask one question until it has a valid answer; ``None``: the user declined (or EOF)."""
    required = question.required is True
    options: tuple[Any, ...] = getattr(question, "options", ())
    _write(f"  {question.message}{'' if required else ' (optional)'}\n")
    for i, option in enumerate(options, 1):
        mark = " (recommended)" if option.recommended is True else ""
        _write(f"    {i}. {option.label}{mark}\n")
    while True:
        text = asker.line(_question_prompt(question))
        if text is None or text == "/decline":
            return None
        if not text:
            default = _default_of(question)
            if default is not None:
                return ChatInputAnswered(state="submitted", value=default)
            if not required:
                return ChatInputSkipped()
            _write("  an answer is needed (or /decline)\n")
            continue
        value, problem = _parse_answer(question, text)
        if value is not None:
            return ChatInputAnswered(state="submitted", value=value)
        _write(f"  {problem}\n")


def _question_prompt(question: Any) -> str:
    if isinstance(question, ChatInputBooleanQuestion):
        default = question.default_value
        return "  [Y/n] " if default is True else "  [y/N] " if default is False else "  [y/n] "
    if isinstance(question, ChatInputSingleSelectQuestion):
        return f"  choose 1-{len(question.options)}: "
    if isinstance(question, ChatInputMultiSelectQuestion):
        return f"  choose some of 1-{len(question.options)} (e.g. 1,3): "
    return "  > "


def _default_of(question: Any) -> ChatInputAnswerValue | None:
    if isinstance(question, ChatInputBooleanQuestion) and isinstance(question.default_value, bool):
        return ChatInputBooleanAnswerValue(value=question.default_value)
    if isinstance(question, ChatInputNumberQuestion) and not isinstance(
        question.default_value, UnsetType
    ):
        return ChatInputNumberAnswerValue(value=question.default_value)
    if isinstance(question, ChatInputSingleSelectQuestion):
        recommended = [o.id for o in question.options if o.recommended is True]
        if len(recommended) == 1:
            return ChatInputSelectedAnswerValue(value=recommended[0])
    return None


def _parse_answer(question: Any, text: str) -> tuple[ChatInputAnswerValue | None, str]:
    """The typed answer as a value, or ``None`` and what is wrong with it."""
    if isinstance(question, ChatInputBooleanQuestion):
        if text.lower() in ("y", "yes", "true"):
            return ChatInputBooleanAnswerValue(value=True), ""
        if text.lower() in ("n", "no", "false"):
            return ChatInputBooleanAnswerValue(value=False), ""
        return None, "answer y or n"
    if isinstance(question, ChatInputNumberQuestion):
        try:
            number: float = int(text) if question.kind == "integer" else float(text)
        except ValueError:
            return None, f"not {'an integer' if question.kind == 'integer' else 'a number'}"
        low, high = question.min, question.max
        if not isinstance(low, UnsetType) and number < low:
            return None, f"at least {low}"
        if not isinstance(high, UnsetType) and number > high:
            return None, f"at most {high}"
        return ChatInputNumberAnswerValue(value=number), ""
    if isinstance(question, ChatInputSingleSelectQuestion):
        ids = _chosen(question.options, text)
        if ids is not None and len(ids) == 1:
            return ChatInputSelectedAnswerValue(value=ids[0]), ""
        if question.allow_freeform_input is True:
            return ChatInputSelectedAnswerValue(value="", freeform_values=(text,)), ""
        return None, f"a number from 1 to {len(question.options)}"
    if isinstance(question, ChatInputMultiSelectQuestion):
        ids = _chosen(question.options, text)
        if ids is not None:
            return ChatInputSelectedManyAnswerValue(value=tuple(ids)), ""
        return None, f"numbers from 1 to {len(question.options)}, separated by commas"
    if isinstance(question, ChatInputTextQuestion):
        return ChatInputTextAnswerValue(value=text), ""
    return ChatInputTextAnswerValue(value=text), ""


def _chosen(options: tuple[Any, ...], text: str) -> list[str] | None:
    """Option ids for ``1,3`` (by number), or ``None`` if a part is not one."""
    ids = []
    for part in text.replace(" ", ",").split(","):
        if not part:
            continue
        if not part.isdigit() or not 1 <= int(part) <= len(options):
            return None
        ids.append(options[int(part) - 1].id)
    return ids or None


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _note(text: str) -> None:
    """A line about the chat (not the agent's words) on stderr."""
    sys.stdout.flush()
    print(f"ahp-server chat: {text}", file=sys.stderr, flush=True)


# -- confirmations ---------------------------------------------------------------------------


def check_turnable(state: ChatState, chat_uri: str, resume: bool) -> None:
    """Refuse before dispatching when the chat cannot take the turn asked for."""
    if isinstance(state.active_turn, ActiveTurn):
        raise Refused(f"a turn is running in {chat_uri}: wait for its end, or cancel it")
    if not resume:
        return
    if not state.turns:
        raise Refused(f"{chat_uri} has no answer to continue")
    latest = state.turns[-1]
    if latest.state != "error":
        raise Refused(
            f"the latest answer in {chat_uri} did not fail (it is {latest.state}): "
            "nothing to continue"
        )
    if not is_resumable(latest):
        raise Refused(
            f"the latest answer in {chat_uri} failed for good (its error is not resumable): "
            "send a new message instead"
        )


#: Lines of a tool's output shown at the terminal; the rest is counted, not shown.
TOOL_OUTPUT_LINES = 12


def tool_result_lines(result: ToolCallResult) -> list[str]:
    """What a finished tool call shows at the terminal: ``[tool]``, what it did
    (its past-tense message) or its error, then the first lines of its text output.
    """
    said = result.past_tense_message
    done = said if isinstance(said, str) else said.markdown
    if not result.success:
        error = result.error
        reason = "" if isinstance(error, UnsetType) else f": {error.message}"
        lines = [f"[tool failed] {done}{reason}"]
    else:
        lines = [f"[tool] {done}"]
    output: list[str] = []
    for block in () if isinstance(result.content, UnsetType) else result.content:
        if isinstance(block, ToolResultTextContent):
            output += block.text.splitlines()
    lines += [f"  {line}" for line in output[:TOOL_OUTPUT_LINES]]
    if len(output) > TOOL_OUTPUT_LINES:
        lines.append(f"  … {len(output) - TOOL_OUTPUT_LINES} more lines")
    return lines


def ready_of(turn_id: str, call: ToolCallPendingConfirmationState) -> ChatToolCallReadyAction:
    """The ``chat/toolCallReady`` that put ``call`` where it is (what a confirmation shows)."""
    return ChatToolCallReadyAction(
        turn_id=turn_id,
        tool_call_id=call.tool_call_id,
        contributor=call.contributor,
        intention=call.intention,
        invocation_message=call.invocation_message,
        tool_input=call.tool_input,
        confirmation_title=call.confirmation_title,
        risk_assessment=call.risk_assessment,
        edits=call.edits,
        editable=call.editable,
        options=call.options,
    )


def confirmation_lines(ready: ChatToolCallReadyAction) -> list[str]:
    """What a confirmation shows at the terminal: the question, what will run, the edits.

    ``[confirm]`` and the title (else the invocation message); then the
    invocation message when a title was given (an ACP agent's command is a
    code block there, docs/agents.md "What a confirmation shows"), the tool's
    input when the message does not already show a command, and each file
    edit as a unified diff.
    """

    def text_of(value: str | MarkdownString) -> str:
        return value if isinstance(value, str) else value.markdown

    title = ready.confirmation_title
    message = text_of(ready.invocation_message)
    lines = [f"[confirm] {message if isinstance(title, UnsetType) else text_of(title)}"]
    if not isinstance(title, UnsetType):
        lines += [f"  {line}" for line in message.splitlines()]
    if isinstance(ready.tool_input, str) and "```" not in message:
        lines.append(f"  input: {ready.tool_input}")
    edits = () if isinstance(ready.edits, UnsetType) else ready.edits.items
    for edit in edits:
        before, after = side_text(edit.before), side_text(edit.after)
        side = edit.after if not isinstance(edit.after, UnsetType) else edit.before
        path = "?" if isinstance(side, UnsetType) else path_of(side.uri)
        if before is None and after is None:
            lines.append(f"  edit {path} (content not shown)")
            continue
        diff = difflib.unified_diff(
            (before or "").splitlines(),
            (after or "").splitlines(),
            fromfile=path if before is not None else "/dev/null",
            tofile=path if after is not None else "/dev/null",
            lineterm="",
        )
        lines += [f"  {line}" for line in diff]
    return lines


# -- the command -----------------------------------------------------------------------------


def _hear_ctrl_c() -> None:
    """Ctrl-C raises :class:`KeyboardInterrupt` here, however the command was started.

    Python installs that handler only when SIGINT is not ignored at start, and
    a job a non-interactive shell starts in the background inherits it ignored:
    Ctrl-C in the chat would then do nothing, neither cancel a turn nor leave.
    On a terminal the user's Ctrl-C is meant for this command, so it is heard.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


async def _connect(url: str, token: str | None) -> AhpClient:
    return await AhpClient.connect(url, token=token)


async def _open(
    client: AhpClient, existing: str | None, agent: str | None, cwd: str | None
) -> tuple[str, str]:
    """The session and chat to talk in: ``existing`` (a chat, or a session's default
    chat), subscribed with its latest turns, or a new session's chat."""
    if existing is None:
        chat_uri = await client.open_chat(agent, cwd=cwd)
        session = next(
            uri
            for uri in client.subscriptions
            if channel_kind(uri) == "session"
            and client.confirmed(uri, SessionState).default_chat == chat_uri
        )
        return session, chat_uri
    uri = await resolve(client, existing)
    if channel_kind(uri) == "session":
        state = await client.subscribe(uri, timeout=REQUEST_TIMEOUT)
        await client.unsubscribe(uri)
        if not isinstance(state, SessionState) or not isinstance(state.default_chat, str):
            raise Refused(f"{uri} has no chat to continue")
        session = uri
        uri = state.default_chat
    elif channel_kind(uri) == "chat":
        holding = [
            summary.resource
            for summary in await all_sessions(client)
            if not isinstance(summary.chats, UnsetType)
            and any(c.resource == uri for c in summary.chats)
        ]
        if not holding:
            raise Refused(f"no session holds {uri} (ahp-server sessions --archived lists them)")
        session = holding[0]
    else:
        raise Refused(f"{uri} is neither a session nor a chat")
    await client.subscribe(uri, turns=RECENT_TURNS, timeout=REQUEST_TIMEOUT)
    return session, uri


def chat_command(
    url: str,
    token: str | None,
    message: str | None,
    *,
    agent: str | None = None,
    cwd: str | None = None,
    existing: str | None = None,
    resume: bool = False,
) -> int:
    """``ahp-server chat``: one turn (``message``, or ``resume``), else interactive.

    Interactive when there is no message, nothing to resume and stdin is a
    terminal; with no message and stdin not a terminal, the message is read
    from stdin. Returns the exit status; raises what the command's boundary
    (``run_client_command``) reports.
    """
    terminal = sys.stdin.isatty()
    if terminal:
        _hear_ctrl_c()
    interactive = message is None and not resume and terminal
    if message is None and not resume and not terminal:
        message = sys.stdin.read().strip()
        if not message:
            raise Refused("no message: say something (as an argument or on stdin)")
    asker: Asker = TerminalAsker() if terminal else Asker()
    thread = ClientThread()
    client: AhpClient | None = None
    try:
        client = thread.run(_connect(url, token))
        _note(f"connected to {url} (AHP {client.protocol_version})")
        session_uri, chat_uri = thread.run(_open(client, existing, agent, cwd))
        runner = ChatRunner(thread, client, session_uri, chat_uri, asker)
        if interactive:
            assert isinstance(asker, TerminalAsker)
            return _converse(runner, asker, continued=existing is not None)
        return _one_turn(runner, message)
    finally:
        if client is not None:
            with contextlib.suppress(Exception):
                thread.run(client.close())
        thread.close()


def _one_turn(runner: ChatRunner, message: str | None) -> int:
    try:
        runner.turn(message, timeout=TURN_TIMEOUT)
    except TurnCancelled:
        _note("cancelled")
        return 130
    except InputDeclined:
        return 1
    except TurnFailedError as failed:
        turns = runner.client.confirmed(runner.chat_uri, ChatState).turns
        if turns and is_resumable(turns[-1]):
            failed.add_note(f"resume it: ahp-server chat --chat {runner.chat_uri} --continue")
        raise
    except TimeoutError as error:
        _note(f"{error}; to go on there: ahp-server chat --chat {runner.chat_uri}")
        return 1
    return 0


def _converse(runner: ChatRunner, asker: TerminalAsker, *, continued: bool) -> int:
    """The prompt loop: one turn per line until /quit, Ctrl-D or Ctrl-C at the prompt."""
    asker.load_history(history_file())
    try:
        state = runner.client.confirmed(runner.chat_uri, ChatState)
        if continued:
            _show_recent(state.turns)
        _note(f"session {runner.session_uri}, chat {runner.chat_uri}")
        _note("/help lists the commands; Ctrl-D leaves")
        if continued:
            _turn_at_prompt(runner, None, attach=True)  # a turn running there: follow it
        while True:
            try:
                line = asker.prompt("you> ")
            except KeyboardInterrupt:
                _write("\n")
                return 0
            if line is None:
                _write("\n")
                return 0
            text = line.strip()
            if not text:
                continue
            if text in ("/quit", "/exit"):
                return 0
            if text == "/help":
                _write(HELP + "\n")
                continue
            if text == "/session":
                _write(f"session {runner.session_uri}\nchat    {runner.chat_uri}\n")
                continue
            _turn_at_prompt(runner, None if text == "/continue" else text)
    finally:
        asker.save_history()


def _turn_at_prompt(runner: ChatRunner, text: str | None, *, attach: bool = False) -> None:
    """One turn from the prompt (``attach``: the one running now, if any); what
    ends it badly is said, and the prompt comes back."""
    try:
        if attach:
            runner.attach()
        else:
            runner.turn(text)
    except TurnCancelled:
        _note("cancelled")
    except TurnFailedError as failed:
        _note(f"the turn {failed.state}: {failed.message}")
        turns = runner.client.confirmed(runner.chat_uri, ChatState).turns
        if turns and is_resumable(turns[-1]):
            _note("it can go on: /continue")
    except Refused as refused:
        _note(str(refused))
    except ActionRejectedError as error:
        _note(f"the host refused {error.action_type}: {error.reason}")


def _show_recent(turns: tuple[Turn, ...]) -> None:
    """The chat's last turns, briefly: each message and the start of its answer."""
    if not turns:
        _write("(no turns yet)\n")
    for turn in turns[-RECENT_TURNS:]:
        answer = "".join(
            p.content for p in turn.response_parts if isinstance(p, MarkdownResponsePart)
        )
        ended = "" if turn.state == "complete" else f"  [{turn.state}]"
        _write(f"you> {_brief(turn.message.text)}\n{_brief(answer)}{ended}\n")
    _write("\n")


def _brief(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= RECENT_CHARS else flat[: RECENT_CHARS - 1] + "…"
