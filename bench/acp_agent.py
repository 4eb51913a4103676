"""A minimal ACP agent for ``bench/acp.py``: the prompt ``"N SIZE"`` streams N chunks of SIZE bytes.

Written with the official SDK's agent side (as a real agent would be) and run
as a child process, either by the host's ACP bridge or directly by the SDK's
client side (the floor).
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from acp import PROTOCOL_VERSION, Agent, run_agent
from acp.helpers import update_agent_message_text
from acp.schema import AgentCapabilities, InitializeResponse, NewSessionResponse, PromptResponse


class StreamingAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.sessions = 0

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION, agent_capabilities=AgentCapabilities()
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        self.sessions += 1
        return NewSessionResponse(session_id=f"bench-{self.sessions}")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        count, size = (int(word) for word in getattr(prompt[-1], "text", "1 16").split())
        chunk = ("x" * size)[:size]
        for _ in range(count):
            await self.conn.session_update(session_id, update_agent_message_text(chunk))
        return PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    # The SDK calls only the methods an agent has (the rest answer "method not
    # found"); its Agent protocol lists every optional one too.
    asyncio.run(run_agent(cast("Agent", StreamingAgent())))
