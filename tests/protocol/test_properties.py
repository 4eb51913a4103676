"""Property tests of the wire model and the reducers (hypothesis).

* decode∘encode is the identity on generated states and actions (absent stays
  absent, unknown variants survive);
* random action sequences never make a reducer raise, never mutate the input,
  and always yield a state that is valid on the wire;
* unknown actions return the very same state object.

Each runs for the 0.7 reducers and types and for the 1.0 ones.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ahp_server.protocol import codec
from ahp_server.protocol import reducers as reducers_1_0
from ahp_server.protocol import types as types_1_0
from ahp_server.protocol._base import UnknownVariant
from ahp_server.protocol.v0_7.reducers import reduce_chat, reduce_root, reduce_session
from ahp_server.protocol.v0_7.types import (
    ChatAction,
    ChatState,
    RootAction,
    RootState,
    SessionAction,
    SessionState,
)
from tests.strategies import roundtrip, strategy_for

PROFILE = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

CHANNELS: list[tuple[type[Any], Any, Any]] = [
    (RootState, RootAction, reduce_root),
    (SessionState, SessionAction, reduce_session),
    (ChatState, ChatAction, reduce_chat),
    (types_1_0.RootState, types_1_0.RootAction, reducers_1_0.reduce_root),
    (types_1_0.SessionState, types_1_0.SessionAction, reducers_1_0.reduce_session),
    (types_1_0.ChatState, types_1_0.ChatAction, reducers_1_0.reduce_chat),
]
STATES = [state for state, _, _ in CHANNELS]
UNIONS = [union for _, union, _ in CHANNELS]


def clock() -> float:
    return 1_700_000_000_123.0


@pytest.mark.parametrize("state_type", STATES)
@PROFILE
@given(data=st.data())
def test_state_roundtrip_is_identity(state_type: type[Any], data: st.DataObject) -> None:
    state = data.draw(strategy_for(state_type))
    assert roundtrip(state, state_type) == state
    assert codec.encode(roundtrip(state, state_type)) == codec.encode(state)


@pytest.mark.parametrize("action_union", UNIONS)
@PROFILE
@given(data=st.data())
def test_action_roundtrip_is_identity(action_union: Any, data: st.DataObject) -> None:
    action = data.draw(strategy_for(action_union))
    assert roundtrip(action, action_union) == action


@pytest.mark.parametrize(("state_type", "action_union", "reducer"), CHANNELS)
@PROFILE
@given(data=st.data())
def test_random_sequences_never_raise_or_mutate(
    state_type: type[Any], action_union: Any, reducer: Any, data: st.DataObject
) -> None:
    state = data.draw(strategy_for(state_type))
    actions = data.draw(st.lists(strategy_for(action_union), max_size=12))
    snapshot = codec.encode(state)
    result = state
    for action in actions:
        before = codec.encode(result)
        after = reducer(result, action, clock)
        assert codec.encode(result) == before, f"{action!r} mutated its input"
        result = after
        # Every intermediate state is valid on the wire (no None where absent belongs, …).
        assert roundtrip(result, state_type) == result
    assert codec.encode(state) == snapshot


@pytest.mark.parametrize(("state_type", "reducer"), [(s, r) for s, _, r in CHANNELS])
@PROFILE
@given(data=st.data())
def test_unknown_actions_are_identity(
    state_type: type[Any], reducer: Any, data: st.DataObject
) -> None:
    state = data.draw(strategy_for(state_type))
    suffix = data.draw(st.sampled_from(["futureThing", "delta2", "x"]))
    prefix = data.draw(st.sampled_from(["root", "session", "chat", "future"]))
    unknown = UnknownVariant({"type": f"{prefix}/{suffix}", "payload": 1})
    assert reducer(state, unknown, clock) is state
