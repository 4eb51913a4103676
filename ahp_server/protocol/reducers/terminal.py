"""The pure 1.0 reducer of terminal channels (``ahp-terminal:/<id>``).

Layer: protocol (pure). The 0.7 reducer (``protocol/reducers/terminal.py``)
with one 1.0 change (CHANGELOG 0.9.0 Changed): the state has an explicit
``lifecycle``, and ``terminal/exited`` makes it ``exited`` with the action's
code, so an exit without a code is still an exit. A session claim names its
chat (stored as given).

Rules worth knowing before editing (each is what every client computes):

* ``terminal/data`` grows the **tail** part only: a ``command`` part still
  running gets the data on its ``output``, an ``unclassified`` part on its
  ``value``; any other tail (a finished command, an unknown part kind, or no
  part at all) gets a new ``unclassified`` part after it.
* ``terminal/input`` is side-effect-only: the state object comes back as is.
* ``terminal/exited`` sets ``lifecycle`` to exited with the action's
  ``exitCode`` (absent stays absent). ``terminal/commandFinished`` writes
  ``exitCode`` and ``durationMs`` (absent clears) on **every** ``command`` part
  with that ``commandId``, finished or not (a ``map``, not a find).
* ``terminal/commandExecuted`` appends a fresh, running ``command`` part and,
  like ``terminal/commandDetectionAvailable``, sets
  ``supportsCommandDetection: true``.
* ``terminal/cleared`` resets ``content`` to ``[]`` and touches nothing else.
"""

from __future__ import annotations

from msgspec.structs import replace

from ahp_server.protocol.reducers._common import Clock
from ahp_server.protocol.types import (
    TerminalClaimedAction,
    TerminalClearedAction,
    TerminalCommandDetectionAvailableAction,
    TerminalCommandExecutedAction,
    TerminalCommandFinishedAction,
    TerminalCommandPart,
    TerminalContentPart,
    TerminalCwdChangedAction,
    TerminalDataAction,
    TerminalExitedAction,
    TerminalExitedLifecycleState,
    TerminalInputAction,
    TerminalResizedAction,
    TerminalState,
    TerminalTitleChangedAction,
    TerminalUnclassifiedPart,
)

__all__ = ["reduce_terminal"]


def _append_data(state: TerminalState, data: str) -> TerminalState:
    content = state.content
    tail = content[-1] if content else None
    grown: TerminalContentPart
    if isinstance(tail, TerminalCommandPart) and not tail.is_complete:
        grown = replace(tail, output=tail.output + data)
    elif isinstance(tail, TerminalUnclassifiedPart):
        grown = replace(tail, value=tail.value + data)
    else:
        return replace(state, content=(*content, TerminalUnclassifiedPart(value=data)))
    return replace(state, content=(*content[:-1], grown))


def _command_finished(state: TerminalState, action: TerminalCommandFinishedAction) -> TerminalState:
    def finish(part: TerminalContentPart) -> TerminalContentPart:
        if isinstance(part, TerminalCommandPart) and part.command_id == action.command_id:
            return replace(
                part,
                is_complete=True,
                exit_code=action.exit_code,
                duration_ms=action.duration_ms,
            )
        return part

    return replace(state, content=tuple(finish(part) for part in state.content))


def reduce_terminal(state: TerminalState, action: object, now: Clock) -> TerminalState:
    """Apply one action to a terminal state; unknown actions return ``state`` itself."""
    del now  # no terminal action is time-stamped
    match action:
        case TerminalDataAction(data=data):
            return _append_data(state, data)
        case TerminalInputAction():
            return state  # forwarded to the pty; output comes back as terminal/data
        case TerminalResizedAction(cols=cols, rows=rows):
            return replace(state, cols=cols, rows=rows)
        case TerminalClaimedAction(claim=claim):
            return replace(state, claim=claim)
        case TerminalTitleChangedAction(title=title):
            return replace(state, title=title)
        case TerminalCwdChangedAction(cwd=cwd):
            return replace(state, cwd=cwd)
        case TerminalExitedAction(exit_code=exit_code):
            return replace(state, lifecycle=TerminalExitedLifecycleState(exit_code=exit_code))
        case TerminalClearedAction():
            return replace(state, content=())
        case TerminalCommandDetectionAvailableAction():
            return replace(state, supports_command_detection=True)
        case TerminalCommandExecutedAction():
            part = TerminalCommandPart(
                command_id=action.command_id,
                command_line=action.command_line,
                output="",
                timestamp=action.timestamp,
                is_complete=False,
            )
            return replace(state, content=(*state.content, part), supports_command_detection=True)
        case TerminalCommandFinishedAction():
            return _command_finished(state, action)
        case _:
            return state
