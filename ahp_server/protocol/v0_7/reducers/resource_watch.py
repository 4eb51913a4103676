"""The pure reducer of resource-watch channels (``ahp-resource-watch:/<id>``).

Layer: protocol (pure). Spec ``docs/specification/resource-watch-channel.md`` and
WIRE-SUMMARY §12; semantics of upstream
``types/channels-resource-watch/reducer.ts`` at 0.7.0.

A watch is an event pass-through: ``resourceWatch/changed`` batches travel on
the action stream and the reducer keeps no history of them. The state is the
watch descriptor captured at ``createResourceWatch`` time and never changes,
so every action, known or not, returns the input state object itself.
"""

from __future__ import annotations

from ahp_server.protocol.reducers._common import Clock
from ahp_server.protocol.v0_7.types import ResourceWatchChangedAction, ResourceWatchState

__all__ = ["reduce_resource_watch"]


def reduce_resource_watch(
    state: ResourceWatchState, action: object, now: Clock
) -> ResourceWatchState:
    """Apply one action to a resource-watch state: always ``state`` itself."""
    del now  # nothing here is time-stamped
    match action:
        case ResourceWatchChangedAction():
            return state  # delivered to subscribers; no history is kept
        case _:
            return state
