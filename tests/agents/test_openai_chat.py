"""The OpenAI-compatible provider end to end: AHP client → host → a real local HTTP endpoint.

The endpoint (``tests/agents/openai_server.py``) speaks the streaming wire
format over a real socket; every path the provider promises is driven
through it, from a client over WebSocket.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from msgspec import UNSET

from ahp_server.client import AhpClient, TurnFailedError, turn_error
from ahp_server.config import AgentConfig, Settings
from ahp_server.protocol.types import (
    ActiveTurn,
    ChatState,
    ChatToolCallCompleteAction,
    ChatTurnCancelledAction,
    CreateSessionParams,
    MarkdownResponsePart,
    ReasoningResponsePart,
    SessionActiveClient,
    SessionState,
    ToolCallResult,
    ToolCallRunningState,
    ToolDefinition,
    ToolResultTextContent,
    ToolSchema,
)
from tests.agents.openai_server import MODEL, OpenAIServer
from tests.agents.test_acp import last_turn, tools
from tests.conftest import RunningHost, captured_logs, start_host

TIMEOUT = 20.0
KEY = "sk-test-do-not-log"
WEATHER = ToolDefinition(
    name="get_weather",
    title="Weather",
    description="The weather in a city",
    input_schema=ToolSchema(type="object", properties={"city": {"type": "string"}}),
)


@pytest.fixture
async def server() -> AsyncIterator[OpenAIServer]:
    started = await OpenAIServer().start()
    try:
        yield started
    finally:
        await started.stop()


def model(base_url: str, **changes: Any) -> AgentConfig:
    return dataclasses.replace(
        AgentConfig(
            name="model",
            kind="openai",
            display_name="Test model",
            base_url=base_url,
            model=MODEL,
            api_key_env="TEST_OPENAI_KEY",
            system_prompt="Be brief.",
            max_retries=2,
        ),
        **changes,
    )


async def host_for(config: AgentConfig) -> RunningHost:
    os.environ["TEST_OPENAI_KEY"] = KEY
    return await start_host(dataclasses.replace(Settings(), agents=(config,)))


@pytest.fixture
async def running(server: OpenAIServer) -> AsyncIterator[RunningHost]:
    host = await host_for(model(server.base_url))
    try:
        yield host
    finally:
        await host.stop()


async def chat_with(client: AhpClient, *, with_tools: bool = False) -> str:
    session = f"ahp-session:/test-{time.monotonic_ns()}"
    active = (
        SessionActiveClient(client_id=client.client_id, tools=(WEATHER,)) if with_tools else None
    )
    params = CreateSessionParams(
        channel=session, provider="model", active_client=UNSET if active is None else active
    )
    await client.request("createSession", params)
    await client.subscribe(session)
    await client.wait_for(
        lambda c: isinstance(c.confirmed(session, SessionState).default_chat, str),
        timeout=TIMEOUT,
    )
    chat = client.confirmed(session, SessionState).default_chat
    assert isinstance(chat, str)
    await client.subscribe(chat)
    return chat


async def fails(client: AhpClient, chat: str, text: str) -> Any:
    with pytest.raises(TurnFailedError) as failed:
        await client.ask(chat, text, timeout=TIMEOUT)
    error = turn_error(last_turn(client, chat))
    assert error is not None
    assert error.message in str(failed.value)
    return error


# -- answers ---------------------------------------------------------------------------------


async def test_streamed_text_and_usage(running: RunningHost, server: OpenAIServer) -> None:
    async with AhpClient.connect(running.url) as client:
        await client.subscribe("ahp-root://")
        agents = [a.provider for a in client.confirmed("ahp-root://").agents]  # type: ignore[union-attr]
        assert agents == ["echo", "model"]
        chat = await chat_with(client)
        assert await client.ask(chat, "hello", timeout=TIMEOUT) == "Hello there"
        turn = last_turn(client, chat)
        assert turn.usage is not None
        assert (turn.usage.input_tokens, turn.usage.output_tokens) == (11, 3)
        assert turn.usage.model == MODEL
    request = server.requests[-1]
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["stream"] is True
    assert request.body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert "tools" not in request.body  # no client offered any


async def test_reasoning_is_shown_as_reasoning(running: RunningHost) -> None:
    async with AhpClient.connect(running.url) as client:
        chat = await chat_with(client)
        assert await client.ask(chat, "think", timeout=TIMEOUT) == "Done thinking."
        parts = last_turn(client, chat).response_parts
        assert [p.content for p in parts if isinstance(p, ReasoningResponsePart)] == [
            "Let me think."
        ]


async def test_history_is_sent_and_trimmed_oldest_first(server: OpenAIServer) -> None:
    roomy = await host_for(model(server.base_url))
    try:
        async with AhpClient.connect(roomy.url) as client:
            chat = await chat_with(client)
            await client.ask(chat, "one", timeout=TIMEOUT)
            await client.ask(chat, "two", timeout=TIMEOUT)
            answer = await client.ask(chat, "history", timeout=TIMEOUT)
            assert answer == "users=['one', 'two', 'history'] system=1"
            assistant = [
                m for m in server.requests[-1].body["messages"] if m["role"] == "assistant"
            ]
            assert [m["content"] for m in assistant] == ["echo: one", "echo: two"]
    finally:
        await roomy.stop()
    tight = await host_for(model(server.base_url, context_budget=8))  # ~32 characters
    try:
        async with AhpClient.connect(tight.url) as client:
            chat = await chat_with(client)
            await client.ask(chat, "one", timeout=TIMEOUT)
            await client.ask(chat, "two", timeout=TIMEOUT)
            answer = await client.ask(chat, "history", timeout=TIMEOUT)
            assert answer == "users=['two', 'history'] system=1"  # "one" went first
    finally:
        await tight.stop()


async def test_a_side_chat_sends_its_source_as_context(running: RunningHost) -> None:
    async with AhpClient.connect(running.url) as client:
        chat = await chat_with(client)
        await client.ask(chat, "one", timeout=TIMEOUT)
        source = last_turn(client, chat).id
        session = running.host.chats[chat].session.uri
        side = await client.create_chat(
            session,
            source={"kind": "sideChat", "chat": chat, "turnId": source},
            subscribe=True,
        )
        answer = await client.ask(side, "history", timeout=TIMEOUT)
        # Its own history is empty; the source turn comes as a system message.
        assert answer == "users=['history'] system=2 side=1"


# -- client tools ----------------------------------------------------------------------------


async def run_client_tools(client: AhpClient, chat: str, turn_id: str) -> None:
    """Act as the client that provides ``get_weather``: run the two calls the model makes."""
    answered: set[str] = set()

    def running_calls(c: AhpClient) -> list[ToolCallRunningState]:
        turn = c.confirmed(chat, ChatState).active_turn
        if not isinstance(turn, ActiveTurn):
            return []
        return [
            t
            for t in tools(turn)
            if isinstance(t, ToolCallRunningState) and t.tool_call_id not in answered
        ]

    await client.wait_for(lambda c: len(running_calls(c)) == 2, timeout=TIMEOUT)
    for call in running_calls(client):
        city = "Paris" if "Paris" in str(call.tool_input) else "Rome"
        weather = "sunny" if city == "Paris" else "rain"
        answered.add(call.tool_call_id)
        await client.dispatch(
            chat,
            ChatToolCallCompleteAction(
                turn_id=turn_id,
                tool_call_id=call.tool_call_id,
                result=ToolCallResult(
                    success=True,
                    past_tense_message=f"Looked up {city}",
                    content=(ToolResultTextContent(text=f"{weather} in {city}"),),
                ),
            ),
        )


async def test_parallel_tool_calls_run_on_the_client_and_go_back_to_the_model(
    running: RunningHost, server: OpenAIServer
) -> None:
    async with AhpClient.connect(running.url) as client:
        chat = await chat_with(client, with_tools=True)
        turn_id = await client.send_message(chat, "tools")
        await run_client_tools(client, chat, turn_id)
        await client.wait_for(
            lambda c: any(t.id == turn_id for t in c.confirmed(chat, ChatState).turns),
            timeout=TIMEOUT,
        )
        turn = last_turn(client, chat)
        answer = "".join(
            p.content for p in turn.response_parts if isinstance(p, MarkdownResponsePart)
        )
        assert answer == "results: sunny in Paris | rain in Rome"
        calls = tools(turn)
        assert [c.display_name for c in calls] == ["Weather", "Weather"]
        assert [c.tool_input for c in calls] == ['{"city": "Paris"}', '{"city": "Rome"}']
    first = server.requests[-2].body
    assert first["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather in a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    follow_up = server.requests[-1].body["messages"]
    assert [m["tool_call_id"] for m in follow_up if m["role"] == "tool"] == ["call_a", "call_b"]


async def test_tool_rounds_are_bounded(server: OpenAIServer) -> None:
    running = await host_for(model(server.base_url, max_tool_rounds=1))
    try:
        async with AhpClient.connect(running.url) as client:
            chat = await chat_with(client, with_tools=True)
            turn_id = await client.send_message(chat, "loop-tools")
            await run_client_tools(client, chat, turn_id)  # the one round allowed
            await client.wait_for(
                lambda c: any(t.id == turn_id for t in c.confirmed(chat, ChatState).turns),
                timeout=TIMEOUT,
            )
            error = turn_error(last_turn(client, chat))
            assert error is not None
            assert error.error_type == "toolRoundsExceeded"
    finally:
        await running.stop()


# -- faults ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "error_type", "words"),
    [
        ("401", "authenticationFailed", "TEST_OPENAI_KEY"),
        ("403", "forbidden", "403"),
        ("500", "endpointError", "503"),
        ("429-always", "rateLimited", "429"),
        ("malformed", "malformedResponse", "malformed"),
        ("cut", "streamInterrupted", "cut off"),
    ],
)
async def test_endpoint_faults_end_the_turn_with_a_clear_error(
    running: RunningHost, server: OpenAIServer, text: str, error_type: str, words: str
) -> None:
    async with AhpClient.connect(running.url) as client:
        chat = await chat_with(client)
        error = await fails(client, chat, text)
        assert error.error_type == error_type
        assert words in error.message
        # The chat goes on.
        assert await client.ask(chat, "hello", timeout=TIMEOUT) == "Hello there"
    if text in ("500", "429-always"):
        tries = [r for r in server.requests if r.body["messages"][-1]["content"] == text]
        assert len(tries) == 3  # the first and max_retries = 2 more


async def test_a_missing_model_says_so(server: OpenAIServer) -> None:
    running = await host_for(model(server.base_url, model="no-such-model"))
    try:
        async with AhpClient.connect(running.url) as client:
            chat = await chat_with(client)
            error = await fails(client, chat, "hello")
            assert error.error_type == "modelNotFound"
            assert "no-such-model" in error.message
    finally:
        await running.stop()


async def test_an_endpoint_that_is_down_says_so_after_bounded_retries() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    running = await host_for(model(f"http://127.0.0.1:{port}/v1", max_retries=1))
    try:
        async with AhpClient.connect(running.url) as client:
            chat = await chat_with(client)
            error = await fails(client, chat, "hello")
            assert error.error_type == "endpointUnreachable"
            assert str(port) in error.message
    finally:
        await running.stop()


async def test_429_and_5xx_are_retried_honouring_retry_after(
    running: RunningHost, server: OpenAIServer
) -> None:
    async with AhpClient.connect(running.url) as client:
        chat = await chat_with(client)
        assert await client.ask(chat, "429", timeout=TIMEOUT) == "after waiting"
        first, second = [r for r in server.requests if r.body["messages"][-1]["content"] == "429"]
        assert second.at - first.at >= 0.9  # Retry-After: 1
        assert await client.ask(chat, "500-once", timeout=TIMEOUT) == "recovered"


async def test_cancel_closes_the_http_stream_at_once(
    running: RunningHost, server: OpenAIServer
) -> None:
    async with AhpClient.connect(running.url) as client:
        chat = await chat_with(client)
        turn_id = await client.send_message(chat, "slow")

        def streaming(c: AhpClient) -> bool:
            turn = c.confirmed(chat, ChatState).active_turn
            return isinstance(turn, ActiveTurn) and any(
                isinstance(p, MarkdownResponsePart) for p in turn.response_parts
            )

        await client.wait_for(streaming, timeout=TIMEOUT)
        await client.dispatch(chat, ChatTurnCancelledAction(turn_id=turn_id, duration=1))
        async with asyncio.timeout(2.0):
            await server.disconnected.wait()  # the endpoint saw the client go
        assert last_turn(client, chat).state == "cancelled"


async def test_the_api_key_is_never_logged(running: RunningHost) -> None:
    with captured_logs() as logs:
        async with AhpClient.connect(running.url) as client:
            chat = await chat_with(client)
            await client.ask(chat, "hello", timeout=TIMEOUT)
            await fails(client, chat, "401")
    assert KEY not in repr(logs)
