"""The chat actor's O(1) streamed-text path computes exactly what the pure reducer does.

``ChatActor.apply`` keeps ``chat/delta`` / ``chat/reasoning`` text as chunks and
folds it lazily. For random states and action sequences (with deltas aimed at
the parts that exist), the actor's ``state`` must equal the pure reducer's
after every action, and its ``visible`` state must equal the pure state as of
the last *delivered* action while commits lag behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from ahp_server.config import Settings
from ahp_server.host.actors import ChatActor, SessionActor
from ahp_server.host.host import Host
from ahp_server.protocol import codec
from ahp_server.protocol.reducers import reduce_chat
from ahp_server.protocol.reducers.chat import part_id_of
from ahp_server.protocol.types import (
    ActiveTurn,
    ChatAction,
    ChatDeltaAction,
    ChatReasoningAction,
    ChatState,
    MarkdownResponsePart,
    Message,
    MessageOrigin,
    ReasoningResponsePart,
    SessionState,
    ToolCallResponsePart,
    ToolCallStreamingState,
)
from ahp_server.store.base import Store
from tests.strategies import strategy_for

NOW = 1_700_000_000_000.0


class LaggingStore(Store):
    """Commits only when told to, so visible state can fall behind."""

    def __init__(self) -> None:
        self.waiting: list[tuple[Callable[..., None], tuple[object, ...]]] = []

    def append_envelope(
        self,
        seq: int,
        channel: str,
        at_ms: float,
        envelope: bytes,
        on_commit: Callable[..., None],
        *args: object,
    ) -> None:
        self.waiting.append((on_commit, args))

    def commit(self, count: int) -> None:
        ready, self.waiting = self.waiting[:count], self.waiting[count:]
        for callback, args in ready:
            callback(*args)


def make_chat(state: ChatState, store: Store) -> ChatActor:
    host = Host(Settings(snapshot_every=3), clock=lambda: NOW, store=store)
    session = SessionActor(
        host,
        "ahp-session:/s",
        SessionState(
            provider="echo", title="t", status=1, lifecycle="ready", active_clients=(), chats=()
        ),
        created_at="2026-01-01T00:00:00.000Z",
    )
    return ChatActor(host, state.resource, state, session=session)


PART_IDS = ["p1", "p2", "p3"]


@st.composite
def streaming_state(draw: st.DrawFn) -> ChatState:
    """A chat in the middle of a turn whose parts reuse a few ids, of every kind."""
    base = draw(strategy_for(ChatState, depth=2))
    parts: list[Any] = []
    for _ in range(draw(st.integers(0, 5))):
        part_id = draw(st.sampled_from(PART_IDS))
        kind = draw(st.sampled_from(["markdown", "reasoning", "tool"]))
        text = draw(st.text(max_size=3))
        if kind == "markdown":
            parts.append(MarkdownResponsePart(id=part_id, content=text))
        elif kind == "reasoning":
            parts.append(ReasoningResponsePart(id=part_id, content=text))
        else:
            call = ToolCallStreamingState(tool_call_id=part_id, tool_name="t", display_name="T")
            parts.append(ToolCallResponsePart(tool_call=call))
    turn = ActiveTurn(
        id="t1",
        started_at="2026-01-01T00:00:00.000Z",
        message=Message(text="go", origin=MessageOrigin(kind="user")),
        response_parts=tuple(parts),
    )
    return replace(base, active_turn=turn)


@st.composite
def scenario(draw: st.DrawFn) -> tuple[ChatState, list[Any], list[int]]:
    initial = state = draw(st.one_of(streaming_state(), strategy_for(ChatState)))
    actions: list[Any] = []
    for _ in range(draw(st.integers(0, 25))):
        turn = state.active_turn
        if isinstance(turn, ActiveTurn) and draw(st.integers(0, 3)) > 0:
            ids = [part_id_of(p) for p in turn.response_parts] + [*PART_IDS, "missing"]
            part_id = draw(st.sampled_from([i for i in ids if isinstance(i, str)] or ["x"]))
            kind = draw(st.sampled_from([ChatDeltaAction, ChatReasoningAction]))
            turn_id = turn.id if draw(st.integers(0, 5)) else "other-turn"
            action: Any = kind(turn_id=turn_id, part_id=part_id, content=draw(st.text(max_size=4)))
        else:
            action = draw(strategy_for(ChatAction, depth=3))
        actions.append(action)
        state = reduce_chat(state, action, lambda: NOW)
    commits = draw(st.lists(st.integers(0, 4), max_size=len(actions)))
    return initial, actions, commits


def same(a: ChatState, b: ChatState) -> bool:
    return codec.encode(a) == codec.encode(b)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_actor_state_equals_the_pure_reducer(case: tuple[ChatState, list[Any], list[int]]) -> None:
    initial, actions, _ = case
    actor = make_chat(initial, Store())
    expected = initial
    for action in actions:
        actor.apply(action)
        expected = reduce_chat(expected, action, lambda: NOW)
        assert same(actor.state, expected)
        assert same(actor.visible, expected)  # the in-memory store delivers at once


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_visible_state_follows_commits_exactly(
    case: tuple[ChatState, list[Any], list[int]],
) -> None:
    initial, actions, commits = case
    store = LaggingStore()
    actor = make_chat(initial, store)
    history = [initial]
    delivered = 0
    commit_plan = iter(commits)
    for action in actions:
        actor.apply(action)
        history.append(reduce_chat(history[-1], action, lambda: NOW))
        step = next(commit_plan, 0)
        before = len(store.waiting)
        store.commit(step)
        delivered += before - len(store.waiting)
        assert same(actor.visible, history[delivered])
    store.commit(len(store.waiting))
    assert same(actor.visible, history[-1])
    assert same(actor.state, history[-1])


def _streaming(*parts: Any) -> ChatState:
    turn = ActiveTurn(
        id="t1",
        started_at="2026-01-01T00:00:00.000Z",
        message=Message(text="go", origin=MessageOrigin(kind="user")),
        response_parts=parts,
    )
    return ChatState(
        resource="ahp-chat:/c", title="", status=8, modified_at="x", turns=(), active_turn=turn
    )


def _texts(state: ChatState) -> list[str]:
    turn = state.active_turn
    assert isinstance(turn, ActiveTurn)
    return [getattr(p, "content", "") for p in turn.response_parts]


def test_visible_text_is_exactly_what_was_delivered() -> None:
    store = LaggingStore()
    actor = make_chat(_streaming(MarkdownResponsePart(id="p1", content="a")), store)
    for text in ("b", "c", "d"):
        actor.apply(ChatDeltaAction(turn_id="t1", part_id="p1", content=text))
    assert _texts(actor.visible) == ["a"]  # nothing committed yet
    store.commit(1)
    assert _texts(actor.visible) == ["ab"]  # not the undelivered "c", "d"
    store.commit(1)
    assert _texts(actor.visible) == ["abc"]
    assert _texts(actor.state) == ["abcd"]
    store.commit(1)
    assert _texts(actor.visible) == ["abcd"]


def test_text_goes_to_the_first_part_with_the_id_and_only_of_its_kind() -> None:
    state = _streaming(
        ReasoningResponsePart(id="p1", content="r"),
        MarkdownResponsePart(id="p1", content="m"),
        MarkdownResponsePart(id="p2", content="x"),
    )
    actor = make_chat(state, Store())
    actor.apply(ChatDeltaAction(turn_id="t1", part_id="p1", content="!"))  # first p1 is reasoning
    actor.apply(ChatReasoningAction(turn_id="t1", part_id="p1", content="?"))
    actor.apply(ChatDeltaAction(turn_id="t1", part_id="p2", content="y"))
    actor.apply(ChatDeltaAction(turn_id="other", part_id="p2", content="z"))
    assert _texts(actor.state) == ["r?", "m", "xy"]


async def test_a_runner_s_text_is_applied_only_for_the_chat_s_current_runner() -> None:
    """``offer_from_runner``: an idle chat applies its running turn's text in the call
    (the hot path); text from a runner the chat no longer runs (its turn was
    cancelled or replaced) is never applied, and text for a busy chat waits in
    its inbox, in order."""
    store = LaggingStore()
    actor = make_chat(_streaming(MarkdownResponsePart(id="p1", content="a")), store)
    current: Any = object()  # a runner: only its identity counts here
    stale: Any = object()
    actor.runner = current
    actor.start()
    try:
        await asyncio.sleep(0)  # the actor's task parks on its empty inbox
        seq = actor.host.hub.server_seq
        assert actor.offer_from_runner(
            current, ChatDeltaAction(turn_id="t1", part_id="p1", content="b")
        )
        assert actor.host.hub.server_seq == seq + 1
        assert _texts(actor.state) == ["ab"]
        actor.offer_from_runner(stale, ChatDeltaAction(turn_id="t1", part_id="p1", content="X"))
        for _ in range(3):
            await asyncio.sleep(0)  # the actor's task takes it from its inbox
        assert actor.host.hub.server_seq == seq + 1
        assert _texts(actor.state) == ["ab"]
        actor._idle = False  # busy (as while its task handles a message)
        actor.offer_from_runner(current, ChatDeltaAction(turn_id="t1", part_id="p1", content="c"))
        assert _texts(actor.state) == ["ab"]  # queued, not applied in the call
        assert actor.inbox
    finally:
        actor.runner = None
        await actor.stop()
