"""Pure reducers for every channel type: root, session and chat (the host runs
these), plus changeset, terminal, annotations and resource-watch.

Layer: protocol (pure). Each reducer is ``(state, action, now) -> state``:

* deterministic — time comes only from the injected clock ``now``;
* pure — input states and actions are never mutated (structs are frozen,
  sequences are tuples, and dict-valued fields are copied before merging);
* total — an unknown or inapplicable action returns the input state object
  itself, and no peer data makes a reducer raise.

They are the definition the fixtures check (``../shared/fixtures/reducers``) and
the same functions every host actor and the Python client run.
"""

from __future__ import annotations

from typing import Literal, TypeAlias, TypeVar, overload

from ahp_server.protocol.reducers._common import Clock, iso_timestamp
from ahp_server.protocol.reducers.annotations import reduce_annotations
from ahp_server.protocol.reducers.changeset import reduce_changeset
from ahp_server.protocol.reducers.chat import reduce_chat
from ahp_server.protocol.reducers.resource_watch import reduce_resource_watch
from ahp_server.protocol.reducers.root import reduce_root
from ahp_server.protocol.reducers.session import reduce_session
from ahp_server.protocol.reducers.terminal import reduce_terminal
from ahp_server.protocol.types import ChatState, RootState, SessionState

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
