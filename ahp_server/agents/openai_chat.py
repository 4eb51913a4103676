"""A model behind any OpenAI-compatible chat-completions endpoint, as a provider.

Layer: agents. Uses the official ``openai`` SDK's ``AsyncOpenAI`` (streaming,
the SSE framing, typed chunks and errors) with its own retries off: this
module retries explicitly, bounded, honouring ``Retry-After``, and only before
anything was streamed, so a retry can never repeat text the user saw.

OpenAI, Azure-style gateways, Ollama, vLLM, llama.cpp's server and LM Studio
all speak this format. A turn is one or more ``chat.completions.create``
streams:

* the messages: the system prompt, a side chat's source context, the chat's
  history (user message and Markdown answer of each turn), the new message —
  the oldest history left out first to fit ``context_budget`` tokens
  (estimated at 4 characters a token);
* streamed ``content`` → answer text; ``reasoning_content`` (or ``reasoning``)
  → reasoning; the final usage chunk → ``chat/usage``;
* tool calls: the tools the turn's client provides (AHP client-provided
  tools) are offered as function tools; a call the model makes (its deltas
  joined by index, several at once if it likes) becomes a client tool call
  that client runs; the results go back to the model, up to
  ``max_tool_rounds`` rounds. With no client tools, no tools are offered.

Faults become ``chat/error`` with a type a client can act on and a message a
user understands (docs/agents.md); cancel closes the HTTP stream at once.
The passing ones are *resumable* (``AgentError.resumable``): a stream cut
mid-answer, 429 and 5xx once the bounded retries are spent, an endpoint out
of reach, a timeout. A resumed turn (``chat/turnResume``) sends the same
conversation plus the answer so far, then asks the model to go on (see
:func:`_resumed`).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

import openai
import structlog
from msgspec import UNSET
from openai.types.chat import ChatCompletionChunk

from ahp_server.agents.base import AgentError, StatelessProvider, TurnIO, TurnRequest
from ahp_server.config import AgentConfig
from ahp_server.protocol import codec
from ahp_server.protocol.types import (
    AgentCapabilities,
    AgentInfo,
    MarkdownResponsePart,
    MultipleChatsCapability,
    ResponsePart,
    SessionModelInfo,
    ToolCallCompletedState,
    ToolCallResponsePart,
    ToolCallResult,
    ToolDefinition,
    ToolResultTextContent,
    Turn,
    UsageInfo,
)

__all__ = ["OpenAIProvider"]

log = structlog.get_logger(__name__)

#: Characters per token, to estimate what fits the context budget.
CHARS_PER_TOKEN = 4
#: Longest wait a ``Retry-After`` may impose, and the first backoff step.
MAX_RETRY_WAIT = 30.0
FIRST_BACKOFF = 0.5


@dataclass(slots=True)
class _Call:
    """A tool call being streamed: its deltas joined by index."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class OpenAIProvider(StatelessProvider):
    """An ``[[agents]]`` entry with ``kind = "openai"``."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self._client: openai.AsyncOpenAI | None = None

    @property
    def info(self) -> AgentInfo:
        config = self.config
        return AgentInfo(
            provider=config.name,
            display_name=config.title,
            description=config.description or f"{config.model} at {config.base_url}",
            models=(SessionModelInfo(id=config.model, provider=config.name, name=config.model),),
            # Stateless: every turn sends its own history, so a fork or a side
            # chat needs nothing more than the messages the host hands over.
            capabilities=AgentCapabilities(
                multiple_chats=MultipleChatsCapability(fork=True, side_chat=True)
            ),
        )

    def _api(self) -> openai.AsyncOpenAI:
        if self._client is None:
            key = os.environ.get(self.config.api_key_env, "") if self.config.api_key_env else ""
            self._client = openai.AsyncOpenAI(
                base_url=self.config.base_url,
                api_key=key or "none",  # local servers want none, the SDK wants a string
                max_retries=0,  # retried here, bounded and visible
                timeout=openai.Timeout(connect=10.0, read=300.0, write=30.0, pool=10.0),
            )
        return self._client

    # -- a turn -------------------------------------------------------------------------------

    async def run_turn(self, request: TurnRequest, io: TurnIO) -> None:
        config = self.config
        messages = _messages(request, config)
        if request.resumed:
            messages.extend(_resumed(request.partial))
        tools = [_function(tool) for tool in request.client_tools]
        for round_number in range(config.max_tool_rounds + 1):
            calls = await self._stream(messages, tools, io)
            if not calls:
                return
            if round_number == config.max_tool_rounds:
                raise AgentError(
                    f"The model kept calling tools: stopped after {config.max_tool_rounds} rounds.",
                    error_type="toolRoundsExceeded",
                )
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": "".join(call.arguments)},
                        }
                        for call in calls
                    ],
                }
            )
            results = await self._run_tools(calls, request, io)
            messages.extend(
                {"role": "tool", "tool_call_id": call.id, "content": result}
                for call, result in zip(calls, results, strict=True)
            )

    async def _run_tools(self, calls: list[_Call], request: TurnRequest, io: TurnIO) -> list[str]:
        """Start every call the model made, then wait for all their results (in parallel)."""
        known = {tool.name: tool for tool in request.client_tools}
        started = []
        for call in calls:
            tool = known.get(call.name)
            title = tool.title if tool is not None and isinstance(tool.title, str) else call.name
            started.append(
                await io.start_tool_call(
                    tool_name=call.name,
                    display_name=title,
                    invocation_message=f"{title}",
                    tool_input="".join(call.arguments) or None,
                    client_id=request.client_id if tool is not None else None,
                )
            )
        results = [""] * len(calls)
        waiting = []
        for index, (call, handle) in enumerate(zip(calls, started, strict=True)):
            if call.name in known:
                waiting.append((index, handle))
                continue
            results[index] = f"There is no tool named {call.name!r}."
            await handle.complete(ToolCallResult(success=False, past_tense_message=results[index]))
        outcomes = await asyncio.gather(*(handle.client_result() for _, handle in waiting))
        for (index, _), outcome in zip(waiting, outcomes, strict=True):
            results[index] = _result_text(outcome)
        return results

    async def _stream(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], io: TurnIO
    ) -> list[_Call]:
        """One completion, streamed into ``io``; the tool calls the model made, if any."""
        stream = await self._create(messages, tools)
        calls: dict[int, _Call] = {}
        received = False
        finished = False
        try:
            async for chunk in stream:
                received = True
                if chunk.usage is not None:
                    usage = chunk.usage
                    details = getattr(usage, "prompt_tokens_details", None)
                    cached = getattr(details, "cached_tokens", None) if details else None
                    await io.usage(
                        UsageInfo(
                            input_tokens=usage.prompt_tokens,
                            output_tokens=usage.completion_tokens,
                            model=chunk.model or self.config.model,
                            cache_read_tokens=UNSET if cached is None else cached,
                        )
                    )
                for choice in chunk.choices:
                    finished = finished or choice.finish_reason is not None
                    delta = choice.delta
                    extra = delta.model_extra or {}
                    thought = extra.get("reasoning_content") or extra.get("reasoning")
                    if isinstance(thought, str) and thought:
                        await io.reasoning(thought)
                    if delta.content:
                        await io.text(delta.content)
                    for part in delta.tool_calls or ():
                        call = calls.setdefault(part.index, _Call())
                        if part.id:
                            call.id = part.id
                        if part.function is not None:
                            if part.function.name:
                                call.name += part.function.name
                            if part.function.arguments:
                                call.arguments.append(part.function.arguments)
        except openai.APIError as error:
            raise self._failure(error, streaming=True) from None
        except (ValueError, KeyError, TypeError) as error:  # a malformed event
            raise AgentError(
                f"The model endpoint sent a malformed stream ({type(error).__name__}: "
                f"{str(error)[:200]}).",
                error_type="malformedResponse",
            ) from None
        finally:
            await stream.close()  # at once on cancel: the endpoint sees the disconnect
        if received and not finished:
            # The body ended without a finish_reason: the connection was cut.
            raise AgentError(
                "The model's answer was cut off before it finished.",
                error_type="streamInterrupted",
                resumable=True,
            )
        if not received:
            raise AgentError(
                "The model endpoint sent an empty stream.", error_type="malformedResponse"
            )
        ordered = [calls[i] for i in sorted(calls)]
        for number, call in enumerate(ordered):
            call.id = call.id or f"call_{number}"
        return [c for c in ordered if c.name]

    async def _create(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> openai.AsyncStream[ChatCompletionChunk]:
        """Open a stream; 429, 5xx and connection failures are retried (bounded, backing off)."""
        config = self.config
        options: dict[str, Any] = {
            "model": config.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            options["tools"] = tools
        if config.temperature is not None:
            options["temperature"] = config.temperature
        if config.max_tokens is not None:
            options["max_tokens"] = config.max_tokens
        attempt = 0
        while True:
            try:
                # The SDK's low-level post: ``chat.completions.create`` first walks
                # every message through its TypedDict transform, which cost ~75 ms
                # for a 100-turn chat (docs/performance.md). The body is plain JSON
                # already; the stream, its chunks and its errors are the same.
                stream: openai.AsyncStream[ChatCompletionChunk] = await self._api().post(
                    "/chat/completions",
                    body=options,
                    cast_to=ChatCompletionChunk,
                    stream=True,
                    stream_cls=openai.AsyncStream[ChatCompletionChunk],
                )
                return stream
            except (
                openai.RateLimitError,
                openai.InternalServerError,
                openai.APIConnectionError,
            ) as error:
                if attempt >= config.max_retries:
                    raise self._failure(error, streaming=False) from None
                wait = _retry_after(error) or FIRST_BACKOFF * 2**attempt
                attempt += 1
                log.info(
                    "model endpoint busy or unreachable: retrying",
                    agent=config.name,
                    attempt=attempt,
                    wait_s=round(wait, 2),
                    reason=type(error).__name__,
                )
                await asyncio.sleep(min(wait, MAX_RETRY_WAIT))
            except openai.APIError as error:
                raise self._failure(error, streaming=False) from None

    def _failure(self, error: openai.APIError, *, streaming: bool) -> AgentError:
        """The user's view of ``error``. Resumable: what may pass by itself — a cut
        stream, a timeout, an endpoint out of reach, 429 and 5xx (already retried,
        bounded, by :meth:`_create`); not: what needs someone to change something
        (the key, the model name, a request the endpoint refuses)."""
        config = self.config
        where = config.base_url
        if isinstance(error, openai.APITimeoutError):
            return AgentError(
                f"The model endpoint {where} did not answer in time.",
                error_type="timeout",
                resumable=True,
            )
        if isinstance(error, openai.APIConnectionError):
            if streaming:
                return AgentError(
                    "The model's answer was cut off: the connection to the endpoint broke.",
                    error_type="streamInterrupted",
                    resumable=True,
                )
            return AgentError(
                f"Cannot reach the model endpoint {where}.",
                error_type="endpointUnreachable",
                resumable=True,
            )
        if isinstance(error, openai.AuthenticationError):
            key = f" (set {config.api_key_env})" if config.api_key_env else ""
            return AgentError(
                f"The model endpoint refused the API key (401){key}.",
                error_type="authenticationFailed",
            )
        if isinstance(error, openai.PermissionDeniedError):
            return AgentError(
                f"The API key may not use the model {config.model!r} (403).", error_type="forbidden"
            )
        if isinstance(error, openai.NotFoundError):
            return AgentError(
                f"The endpoint has no model {config.model!r} (404).", error_type="modelNotFound"
            )
        if isinstance(error, openai.RateLimitError):
            return AgentError(
                "The model endpoint is rate-limiting requests (429); try again shortly.",
                error_type="rateLimited",
                resumable=True,
            )
        if isinstance(error, openai.APIStatusError):
            return AgentError(
                f"The model endpoint failed ({error.status_code}): {_detail(error)}",
                error_type="endpointError",
                resumable=error.status_code >= 500,
            )
        if streaming:
            return AgentError(
                f"The model's answer was cut off: {str(error)[:200]}",
                error_type="streamInterrupted",
                resumable=True,
            )
        return AgentError(
            f"The model endpoint failed: {str(error)[:200]}", error_type="endpointError"
        )


# -- messages ---------------------------------------------------------------------------------


def _answer(turn: Turn) -> str:
    return "".join(p.content for p in turn.response_parts if isinstance(p, MarkdownResponsePart))


def _pairs(turns: tuple[Turn, ...]) -> list[list[dict[str, Any]]]:
    return [
        [
            {"role": "user", "content": turn.message.text},
            {"role": "assistant", "content": _answer(turn)},
        ]
        for turn in turns
    ]


def _messages(request: TurnRequest, config: AgentConfig) -> list[dict[str, Any]]:
    """System prompt, side-chat context, history (oldest dropped first), the new message."""
    head: list[dict[str, Any]] = []
    if config.system_prompt:
        head.append({"role": "system", "content": config.system_prompt})
    if request.source_context or request.source_partial:
        context = "\n\n".join(
            f"User: {t.message.text}\nAssistant: {_answer(t)}" for t in request.source_context
        )
        partial = "".join(
            p.content for p in request.source_partial if isinstance(p, MarkdownResponsePart)
        )
        if partial:
            context += f"\n\nAssistant (answer in progress): {partial}"
        head.append(
            {
                "role": "system",
                "content": "This is a side conversation about this earlier one:\n\n" + context,
            }
        )
    new = {"role": "user", "content": request.message.text}
    budget = config.context_budget * CHARS_PER_TOKEN - _size([*head, new])
    kept: list[list[dict[str, Any]]] = []
    for pair in reversed(_pairs(request.history)):
        budget -= _size(pair)
        if budget < 0:
            break
        kept.append(pair)
    history = [message for pair in reversed(kept) for message in pair]
    return [*head, *history, new]


#: What a resumed turn asks of the model after its answer so far (see :func:`_resumed`).
CONTINUE_PROMPT = (
    "Your answer above was cut off by a technical fault. Continue it exactly where "
    "it stops, without repeating anything already written."
)


def _resumed(partial: tuple[ResponsePart, ...]) -> list[dict[str, Any]]:
    """The messages that carry a resumed turn's answer so far, after its user message.

    What the user saw is replayed as the model produced it: the text (and the
    tool calls it made, with their results, in order) as ``assistant`` and
    ``tool`` messages. A tool call without a result (the turn ended under it)
    is left out: the model may make it again. Then, when the answer ends in
    text, a ``user`` message asks it to continue. Why not end on the
    assistant's partial text and let the model extend it ("prefill")? Only
    some OpenAI-compatible servers continue a trailing assistant message;
    others start a new reply after it, and OpenAI's API documents no
    continuation. A final user message means the same to every one of them,
    and the new text is shown after the old, as a new part of the same turn.
    When the answer so far ends in tool results, the model goes on from them,
    as in any tool round; with no answer at all (429 before anything was
    streamed) the request is the original one.
    """
    messages: list[dict[str, Any]] = []
    text: list[str] = []

    def flush_text() -> None:
        if text:
            messages.append({"role": "assistant", "content": "".join(text)})
            text.clear()

    for part in partial:
        if isinstance(part, MarkdownResponsePart):
            text.append(part.content)
        elif isinstance(part, ToolCallResponsePart) and isinstance(
            part.tool_call, ToolCallCompletedState
        ):
            call = part.tool_call
            tool_input = call.tool_input if isinstance(call.tool_input, str) else "{}"
            assistant: dict[str, Any] = {
                "role": "assistant",
                "content": "".join(text) or None,
                "tool_calls": [
                    {
                        "id": call.tool_call_id,
                        "type": "function",
                        "function": {"name": call.tool_name, "arguments": tool_input},
                    }
                ],
            }
            text.clear()
            messages.append(assistant)
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.tool_call_id,
                    "content": _completed_text(call),
                }
            )
    if text:
        flush_text()
        messages.append({"role": "user", "content": CONTINUE_PROMPT})
    return messages


def _completed_text(call: ToolCallCompletedState) -> str:
    """What the model was told a completed call returned (as :func:`_result_text`)."""
    return _result_text(
        ToolCallResult(
            success=call.success,
            past_tense_message=call.past_tense_message,
            content=call.content,
            structured_content=call.structured_content,
        )
    )


def _size(messages: list[dict[str, Any]]) -> int:
    return sum(len(str(m.get("content") or "")) for m in messages)


def _function(tool: ToolDefinition) -> dict[str, Any]:
    """An AHP tool definition as an OpenAI function tool."""
    schema: Any = {"type": "object", "properties": {}}
    if not isinstance(tool.input_schema, type(UNSET)):
        schema = json.loads(codec.encode(tool.input_schema))
    function: dict[str, Any] = {"name": tool.name, "parameters": schema}
    if isinstance(tool.description, str):
        function["description"] = tool.description
    return {"type": "function", "function": function}


def _result_text(result: ToolCallResult) -> str:
    """What the model is told a client tool returned."""
    parts = [
        c.text
        for c in (result.content if isinstance(result.content, tuple) else ())
        if isinstance(c, ToolResultTextContent)
    ]
    if isinstance(result.structured_content, dict):
        parts.append(json.dumps(result.structured_content))
    text = "\n".join(parts)
    if not result.success:
        message = result.past_tense_message
        shown = message if isinstance(message, str) else message.markdown
        return f"The tool failed: {shown}" + (f"\n{text}" if text else "")
    return text or "(no output)"


def _retry_after(error: openai.APIError) -> float | None:
    """Seconds the endpoint asked to wait (``Retry-After``: seconds or an HTTP date)."""
    response = getattr(error, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - time.time())


def _detail(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        message = body.get("message") or (body.get("error") or {}).get("message")
        if isinstance(message, str):
            return message[:200]
    return str(error)[:200]
