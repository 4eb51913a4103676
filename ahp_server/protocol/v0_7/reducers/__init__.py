"""The pure 0.7 reducers of every channel type: what a 0.7 peer computes.

Layer: protocol (pure). Each reducer is ``(state, action, now) -> state``:

* deterministic — time comes only from the injected clock ``now``;
* pure — input states and actions are never mutated (structs are frozen,
  sequences are tuples, and dict-valued fields are copied before merging);
* total — an unknown or inapplicable action returns the input state object
  itself, and no peer data makes a reducer raise.

They are the definition the 0.7 fixtures check (``../shared/fixtures/reducers``)
and what our Python client runs while it speaks 0.7; the host's own actors run
the 1.0 reducers (:mod:`ahp_server.protocol.reducers`), and the cross-check
(``tests/protocol/test_views_cross_check.py``) holds the two paths together.
"""

from __future__ import annotations

from typing import Literal, TypeAlias, TypeVar, overload

from ahp_server.protocol.reducers._common import Clock, iso_timestamp
from ahp_server.protocol.v0_7.reducers.annotations import reduce_annotations
from ahp_server.protocol.v0_7.reducers.changeset import reduce_changeset
from ahp_server.protocol.v0_7.reducers.chat import reduce_chat
from ahp_server.protocol.v0_7.reducers.resource_watch import reduce_resource_watch
from ahp_server.protocol.v0_7.reducers.root import reduce_root
from ahp_server.protocol.v0_7.reducers.session import reduce_session
from ahp_server.protocol.v0_7.reducers.terminal import reduce_terminal
from ahp_server.protocol.v0_7.types import ChatState, RootState, SessionState

__all__ = [
    "ChannelKind",
    "Clock",
    "iso_timestamp",
    "reduce",
    "reduce_annotations",
    "reduce_changeset",
    "reduce_chat",
    "reduce_resource_watch",
    "reduce_root",
    "reduce_session",
    "reduce_terminal",
]

ChannelKind: TypeAlias = Literal["root", "session", "chat"]
S = TypeVar("S", RootState, SessionState, ChatState)


@overload
def reduce(state: RootState, action: object, now: Clock) -> RootState: ...
@overload
def reduce(state: SessionState, action: object, now: Clock) -> SessionState: ...
@overload
def reduce(state: ChatState, action: object, now: Clock) -> ChatState: ...
def reduce(
    state: RootState | SessionState | ChatState, action: object, now: Clock
) -> RootState | SessionState | ChatState:
    """Apply ``action`` with the reducer that matches the state's channel type."""
    if isinstance(state, ChatState):
        return reduce_chat(state, action, now)
    if isinstance(state, SessionState):
        return reduce_session(state, action, now)
    return reduce_root(state, action, now)
