"""The pure 1.0 reducer of the root channel (``ahp-root://``).

Layer: protocol (pure). REDUCER-CHANGES.md "Root reducer": no behaviour change
from 0.7 (``TerminalInfo`` carries a ``lifecycle`` now; the reducer stores what
it is given).
"""

from __future__ import annotations

from msgspec import UNSET
from msgspec.structs import replace

from ahp_server.protocol.reducers._common import Clock
from ahp_server.protocol.types import (
    RootActiveSessionsChangedAction,
    RootAgentsChangedAction,
    RootConfigChangedAction,
    RootState,
    RootTerminalsChangedAction,
)

__all__ = ["reduce_root"]


def reduce_root(state: RootState, action: object, now: Clock) -> RootState:
    """Apply one action to the root state; unknown actions return ``state`` itself."""
    del now  # no root action is time-stamped
    match action:
        case RootAgentsChangedAction(agents=agents):
            return replace(state, agents=agents)
        case RootActiveSessionsChangedAction(active_sessions=count):
            return replace(state, active_sessions=count)
        case RootTerminalsChangedAction(terminals=terminals):
            return replace(state, terminals=terminals)
        case RootConfigChangedAction():
            # Merges into config.values (or replaces them); no-op without a config.
            if state.config is UNSET:
                return state
            values = (
                dict(action.config)
                if action.replace is True
                else {**state.config.values, **action.config}
            )
            return replace(state, config=replace(state.config, values=values))
        case _:
            return state
