"""The pure 1.0 reducers of every channel kind the host serves.

Layer: protocol (pure). Same contract as :mod:`ahp_server.protocol.v0_7.reducers`
(deterministic, never mutate their input, unknown or inapplicable actions
return the input state itself, no peer data makes them raise), with the 1.0
behaviour of ``shared/spec-1.0/REDUCER-CHANGES.md``. The fixtures under
``tests/data/fixtures-1.0`` (and ``AHP_FIXTURES_1_0_DIR``) check them.
"""

from __future__ import annotations

from ahp_server.protocol.reducers._common import Clock, add_milliseconds, iso_timestamp
from ahp_server.protocol.reducers.annotations import reduce_annotations
from ahp_server.protocol.reducers.changeset import reduce_changeset
from ahp_server.protocol.reducers.chat import reduce_chat
from ahp_server.protocol.reducers.resource_watch import reduce_resource_watch
from ahp_server.protocol.reducers.root import reduce_root
from ahp_server.protocol.reducers.session import reduce_session
from ahp_server.protocol.reducers.terminal import reduce_terminal
from ahp_server.protocol.types import ChatState, RootState, SessionState

__all__ = [
    "Clock",
    "add_milliseconds",
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


def reduce(
    state: RootState | SessionState | ChatState, action: object, now: Clock
) -> RootState | SessionState | ChatState:
    """Apply ``action`` with the reducer that matches the state's channel type."""
    if isinstance(state, ChatState):
        return reduce_chat(state, action, now)
    if isinstance(state, SessionState):
        return reduce_session(state, action, now)
    return reduce_root(state, action, now)
