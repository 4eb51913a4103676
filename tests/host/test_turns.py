"""The turn runner (host/turns.py) against a chat double: how coalesced text reaches
the chat when its window ends. In memory; the chat is a recording sink that takes
an action at once (``offer_from_runner``) only while told to."""

from __future__ import annotations

import asyncio
from typing import Any

from ahp_server.agents.base import TurnIO, TurnRequest
from ahp_server.host.turns import TurnRunner
from ahp_server.protocol.types import (
    ChatDeltaAction,
    ChatResponsePartAction,
    ChatTurnCompleteAction,
    Message,
    MessageOrigin,
)

TIMEOUT = 10.0


class Sink:
    """A chat that notes each action and how it came: taken at once, or submitted."""

    def __init__(self) -> None:
        self.taking = True
        self.got: list[tuple[str, object]] = []
        self.arrived = asyncio.Event()

    async def submit_from_runner(
        self, runner: TurnRunner, action: object, *, final_action: bool = False
    ) -> None:
        self.got.append(("submit", action))
        self.arrived.set()

    def offer_from_runner(self, runner: TurnRunner, action: object) -> bool:
        if not self.taking:
            return False
        self.got.append(("offer", action))
        self.arrived.set()
        return True

    def peek(self) -> Any:
        raise AssertionError("not used by this provider")

    async def save_agent_state(self, state: str | None) -> None:
        pass


class Words:
    """A provider that writes groups of words, waiting after each to be told to go on
    (so each group's window ends while the turn runs)."""

    def __init__(self, words: list[list[str]]) -> None:
        self.words = words
        self.go_on = asyncio.Event()

    async def run_turn(self, request: TurnRequest, io: TurnIO) -> None:
        for group in self.words:
            for word in group:
                await io.text(word)
            await self.go_on.wait()
            self.go_on.clear()


def runner(sink: Sink, provider: Words) -> TurnRunner:
    request = TurnRequest(
        session="ahp-session:/s",
        chat="ahp-chat:/c",
        turn_id="t1",
        message=Message(text="go", origin=MessageOrigin(kind="user")),
    )
    return TurnRunner(
        sink,
        provider,
        request,
        client_tool_timeout=TIMEOUT,
        coalesce_ms=5.0,  # type: ignore[arg-type]
    )


def texts(sink: Sink) -> list[tuple[str, str]]:
    return [
        (how, action.content) for how, action in sink.got if isinstance(action, ChatDeltaAction)
    ]


async def until_texts(sink: Sink, count: int) -> None:
    async with asyncio.timeout(TIMEOUT):
        while len(texts(sink)) < count:
            sink.arrived.clear()
            await sink.arrived.wait()


async def two_windows(sink: Sink) -> None:
    """A turn writing "first a b", then "c d", each group's window ending on its own."""
    provider = Words([["first ", "a ", "b "], ["c ", "d "]])
    turn = runner(sink, provider)
    turn.start()
    for sent in (1, 2):
        await until_texts(sink, sent)
        provider.go_on.set()
    await turn.wait()


async def test_a_window_s_text_is_taken_at_once_by_a_chat_with_room() -> None:
    sink = Sink()
    await two_windows(sink)
    assert isinstance(sink.got[0][1], ChatResponsePartAction)  # the part opens with "first "
    assert texts(sink) == [("offer", "a b "), ("offer", "c d ")]
    assert isinstance(sink.got[-1][1], ChatTurnCompleteAction)


async def test_a_window_ending_while_the_chat_is_busy_is_submitted_in_order() -> None:
    sink = Sink()
    sink.taking = False  # every offer refused: nothing may be lost or reordered
    await two_windows(sink)
    assert texts(sink) == [("submit", "a b "), ("submit", "c d ")]
    kinds = [type(action).__name__ for _, action in sink.got]
    assert kinds[-1] == "ChatTurnCompleteAction"
