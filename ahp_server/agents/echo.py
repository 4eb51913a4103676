"""The built-in echo agent: offline, deterministic, and able to demo every client feature.

Layer: agents.

Plain text is echoed back as Markdown in several chunks, after a short
reasoning note, followed by a usage report. A directive at the start of the
message selects a demo (documented in the README):

``/slow <ms> <text>``
    Echo ``text`` one word every ``ms`` milliseconds (watch a stream, cancel it):
    word k is due at start + k × ``ms``, so a late wake-up delays no later word.
    A steering message sent meanwhile is acknowledged in the stream.
``/tool``
    A tool call that waits for the user's confirmation, then "runs".
``/client-tool``
    A tool call that the client which sent the message must execute
    (``contributor: {kind: "client", clientId}``); the agent waits for its result.
``/input``
    An input request with a text, a boolean and a single-select question.
``/error``
    The turn ends with ``chat/error``.
``/flaky [<ms> <text>]``
    A turn that fails half-way with a *resumable* error (``chat/error`` with
    ``resumable: true``), and completes when resumed (``chat/turnResume``):
    the resumed run says how much of the answer it was given back, then
    streams ``text`` (one word every ``ms`` milliseconds, like ``/slow``).
    Deterministic: the first run always fails, a resumed one never does.
``/markdown <kb>``
    Streams about ``kb`` KB of mixed Markdown (headings, paragraphs, lists,
    fenced code, tables), cut into many deltas of about 1 KB at arbitrary
    points, ending with the line ``END OF MARKDOWN <sections>``: a load test
    for a client's rendering (``markdown_answer`` is the text).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TypeVar

from ahp_server.agents.base import AgentError, StatelessProvider, TurnIO, TurnRequest
from ahp_server.protocol.types import (
    AgentCapabilities,
    AgentInfo,
    ChatInputAnswered,
    ChatInputBooleanQuestion,
    ChatInputOption,
    ChatInputRequest,
    ChatInputSingleSelectQuestion,
    ChatInputTextQuestion,
    MarkdownResponsePart,
    MarkdownString,
    MultipleChatsCapability,
    MultipleWorkingDirectoriesCapability,
    SessionModelInfo,
    ToolCallResult,
    ToolResultTextContent,
    UsageInfo,
)

__all__ = ["ECHO_PROVIDER", "EchoAgent"]

T = TypeVar("T")

ECHO_PROVIDER = "echo"
_CHUNK_WORDS = 3
_SLOW = re.compile(r"^/slow\s+(\d+)\s*(.*)$", re.S)
_FLAKY = re.compile(r"^/flaky(?:\s+(\d+)\s*(.*))?$", re.S)
_MARKDOWN = re.compile(r"^/markdown\s+(\d+)\s*$")
#: The size of one ``/markdown`` delta; deltas are cut without regard to lines.
_MARKDOWN_DELTA = 1000
#: ``/markdown`` streams at most this many KB (50 MB).
_MARKDOWN_MAX_KB = 50_000


def markdown_section(index: int) -> str:
    """Section ``index`` of a ``/markdown`` answer: a heading, a paragraph, a list,
    a code fence (Python or TypeScript, alternating) and a three-row table."""
    language = "python" if index % 2 == 0 else "typescript"
    code = (
        f"def section_{index}(x: int) -> int:\n    return x * {index}  # section {index}\n"
        if language == "python"
        else f"export function section{index}(x: number): number {{\n"
        f"  return x * {index}; // section {index}\n}}\n"
    )
    return (
        f"## Section {index}\n\n"
        f"Paragraph {index} has **bold**, *italic* and `inline code`, and a sentence that "
        f"goes on for a while so that the section has some weight to it, "
        f"as answers do.\n\n"
        f"- item {index}.1\n- item {index}.2 with `code`\n- item {index}.3\n\n"
        f"```{language}\n{code}```\n\n"
        f"| key | value | note |\n|---|---:|---|\n"
        f"| a{index} | {index} | first |\n| b{index} | {index * 2} | second |\n"
        f"| c{index} | {index * 3} | third |\n\n"
    )


def markdown_answer(kb: int) -> tuple[str, int]:
    """The whole ``/markdown`` answer of about ``kb`` KB, and how many sections it has."""
    target = max(1, kb) * 1000
    sections: list[str] = []
    size = 0
    while size < target:
        section = markdown_section(len(sections))
        sections.append(section)
        size += len(section)
    sections.append(f"END OF MARKDOWN {len(sections)}\n")
    return "".join(sections), len(sections) - 1


def _chunks(text: str, words: int = _CHUNK_WORDS) -> list[str]:
    """Split ``text`` into chunks of a few words, keeping every character.

    A piece is a word and the whitespace after it (or leading whitespace); a
    chunk is up to ``words`` consecutive pieces — one regex pass, no joining.
    """
    return re.findall(rf"(?:\S+\s*|\s+){{1,{words}}}", text) or [""]


async def _paced(
    items: Iterable[T],
    interval: float,
    *,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], Awaitable[object]] | None = None,
) -> AsyncIterator[T]:
    """Yield item k at start + k × ``interval``, on an absolute clock.

    A late wake-up (or a slow consumer) delays that one item, not every later
    one: behind schedule, the next item goes at once. So a stream paced at a
    model's rate measures the host, not this agent's timer drift.

    ``clock`` and ``sleep`` (seconds) replace the loop's in tests. The loop's
    own are used directly: a timer at the due time and a future, as
    ``asyncio.sleep`` would make, without its call for the running loop (a
    system call on Python 3.11) on every item of every stream.
    """
    loop = asyncio.get_running_loop()
    now = clock if clock is not None else loop.time
    start = now()
    for k, item in enumerate(items):
        if k:
            due = start + k * interval
            if sleep is not None:
                await sleep(max(due - now(), 0.0))
            elif due > now():
                woken: asyncio.Future[None] = loop.create_future()
                timer = loop.call_at(due, _wake, woken)
                try:
                    await woken
                finally:
                    timer.cancel()
            else:
                # Behind schedule (or an interval of 0): still one pass of the event
                # loop, so each item is its own delta (``/slow 0`` in the benchmarks).
                await asyncio.sleep(0)
        yield item


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():  # cancelled meanwhile: the stream was stopped
        future.set_result(None)


class EchoAgent(StatelessProvider):
    """The default provider: repeats what it is told, and demos the protocol.

    It keeps nothing per session: its session hooks are StatelessProvider's,
    which do nothing.
    """

    def __init__(self, *, clock_tick: float = 0.0) -> None:
        # A pause between plain chunks (0 by default: fast and deterministic).
        self._tick = clock_tick

    @property
    def info(self) -> AgentInfo:
        return AgentInfo(
            provider=ECHO_PROVIDER,
            display_name="Echo",
            description="Built-in offline agent: echoes messages and demos every protocol feature.",
            models=(SessionModelInfo(id="echo-1", provider=ECHO_PROVIDER, name="Echo 1"),),
            capabilities=AgentCapabilities(
                multiple_chats=MultipleChatsCapability(fork=True, side_chat=True),
                multiple_working_directories=MultipleWorkingDirectoriesCapability(
                    immutable_primary=False
                ),
            ),
        )

    async def run_turn(self, request: TurnRequest, io: TurnIO) -> None:
        text = request.message.text
        stripped = text.strip()
        if slow := _SLOW.match(stripped):
            await self._slow(io, int(slow.group(1)), slow.group(2))
        elif flaky := _FLAKY.match(stripped):
            await self._flaky(io, request, int(flaky.group(1) or 0), flaky.group(2) or "")
        elif big := _MARKDOWN.match(stripped):
            await self._markdown(io, min(int(big.group(1)), _MARKDOWN_MAX_KB))
        elif stripped.startswith("/tool"):
            await self._tool(io)
        elif stripped.startswith("/client-tool"):
            await self._client_tool(io, request)
        elif stripped.startswith("/input"):
            await self._input(io)
        elif stripped.startswith("/error"):
            await io.text("About to fail, as asked.")
            raise AgentError("The echo agent was asked to fail (/error).", error_type="echoError")
        else:
            await self._echo(io, text)
        words = len(text.split())
        await io.usage(UsageInfo(input_tokens=words, output_tokens=words, model="echo-1"))

    async def _echo(self, io: TurnIO, text: str) -> None:
        await io.reasoning(f"The user said {len(text)} characters; echoing them back.")
        for chunk in _chunks(text):
            await io.text(chunk)
            if self._tick:
                await asyncio.sleep(self._tick)

    async def _slow(self, io: TurnIO, interval_ms: int, text: str) -> None:
        await io.activity("typing slowly")
        words = _chunks(text or "slow stream of words", words=1)
        async for word in _paced(words, interval_ms / 1000):
            await io.text(word)
            steering = await io.take_steering()
            if steering is not None:
                await io.text(f"\n\n*(steered: {steering.text})*\n\n")
        await io.activity(None)

    async def _flaky(self, io: TurnIO, request: TurnRequest, interval_ms: int, text: str) -> None:
        if not request.resumed:
            await io.text("The first half, ")
            raise AgentError(
                "The echo agent stumbled on purpose (/flaky): resume the turn to finish it.",
                error_type="echoFlaky",
                resumable=True,
            )
        given = "".join(p.content for p in request.partial if isinstance(p, MarkdownResponsePart))
        await io.text(f"resumed after {given!r}: the second half.")
        async for word in _paced(_chunks(text, words=1) if text else (), interval_ms / 1000):
            await io.text(word)

    async def _markdown(self, io: TurnIO, kb: int) -> None:
        text, _ = markdown_answer(kb)
        for start in range(0, len(text), _MARKDOWN_DELTA):
            await io.text(text[start : start + _MARKDOWN_DELTA])

    async def _tool(self, io: TurnIO) -> None:
        call = await io.start_tool_call(
            tool_name="echo_write_file",
            display_name="Write file",
            invocation_message="Write `hello.txt` with a greeting",
            tool_input='{"path": "hello.txt", "content": "hello"}',
            confirm=True,
            confirmation_title=MarkdownString(
                markdown="Allow the echo agent to write `hello.txt`?"
            ),
        )
        decision = await call.decision()
        if not decision.approved:
            await io.text(f"Fine, I will not write the file ({decision.reason or 'denied'}).")
            return
        await call.set_content((ToolResultTextContent(text="writing hello.txt…"),))
        await call.complete(
            ToolCallResult(
                success=True,
                past_tense_message="Wrote `hello.txt`",
                content=(ToolResultTextContent(text="hello"),),
            )
        )
        await io.text("Done: the (pretend) file is written.")

    async def _client_tool(self, io: TurnIO, request: TurnRequest) -> None:
        if request.client_id is None:
            await io.text("No client started this turn, so no client can run the tool.")
            return
        call = await io.start_tool_call(
            tool_name="client_echo",
            display_name="Client echo",
            invocation_message="Ask your client to run `client_echo`",
            tool_input='{"text": "ping"}',
            client_id=request.client_id,
        )
        result = await call.client_result()
        outcome = "succeeded" if result.success else "failed"
        await io.text(f"The client tool {outcome}.")

    async def _input(self, io: TurnIO) -> None:
        answer = await io.request_input(
            ChatInputRequest(
                id="echo-input",
                message="The echo agent has a few questions.",
                questions=(
                    ChatInputTextQuestion(id="name", message="What is your name?", required=True),
                    ChatInputBooleanQuestion(id="tea", message="Tea?", default_value=True),
                    ChatInputSingleSelectQuestion(
                        id="color",
                        message="Pick a color",
                        options=(
                            ChatInputOption(id="red", label="Red"),
                            ChatInputOption(id="blue", label="Blue", recommended=True),
                        ),
                    ),
                ),
            )
        )
        if answer.response != "accept":
            await io.text(f"No answers ({answer.response}).")
            return
        parts = []
        for question_id, value in sorted(answer.answers.items()):
            if isinstance(value, ChatInputAnswered):
                parts.append(f"{question_id} = {getattr(value.value, 'value', '?')}")
        await io.text("You answered: " + (", ".join(parts) or "nothing"))
