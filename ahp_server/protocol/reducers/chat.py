"""The pure 1.0 reducer of chat channels (``ahp-chat:/<id>``).

Layer: protocol (pure). The semantics of upstream
``types/channels-chat/reducer.ts`` at 1.0: the 0.7 reducer
(``protocol/reducers/chat.py``) with the changes of
``shared/spec-1.0/REDUCER-CHANGES.md`` (numbers below are its items):

* a turn ending in ``chat/error`` keeps the error as its last response part and
  has no ``error`` field; an error part never enters through
  ``chat/responsePart`` (8, 9); ``chat/turnResume`` reopens a resumable
  errored turn (10);
* ``modifiedAt`` comes from the action data — ``startedAt``, or ``startedAt``
  plus the clamped duration at turn end — and nothing else touches it, so this
  reducer reads no clock (11, 12);
* background work, ``movable``, the chat's changesets and canvases, and its own
  IsRead / IsArchived flags (13–16);
* ``toolCallReady`` may refine ``contributor`` and ``intention`` and keeps an
  omitted input; an edited input replaces only an inline one; a tool-call delta
  may carry no content (17–19).

Rules worth knowing before editing (each is what every client computes):

* Actions keyed by ``turnId`` are no-ops unless ``activeTurn.id`` matches.
* Tool-call actions update **every** part with the matching ``toolCallId``;
  ``chat/delta`` / ``chat/reasoning`` stop at the **first** part whose id
  matches, even when it is of the wrong kind (then nothing is appended).
* Tool-call transitions rebuild the tool call from the fields the target state
  keeps (``_tool_call_base`` plus what each case lists); only
  ``toolCallDelta`` and ``toolCallContentChanged`` keep every existing field.
* The six confirmation-related tool actions recompute ``status`` even when they
  change nothing (``_refresh_status``), exactly like upstream.
* The activity bits of ``status`` are derived from the active turn; flag bits
  (IsRead, IsArchived, unknown bits) are kept. ``turnStarted``,
  ``inputRequested`` and ``turnResume`` clear IsRead; only ``isReadChanged``
  and ``isArchivedChanged`` set a flag.
* JavaScript truthiness is reproduced where upstream relies on it: ``""`` is
  falsy for ``confirmed``/``queuedMessageId``/``selectedOptionId``; ``[]`` is
  truthy for ``options``/``content``; ``??`` keeps ``false`` and ``""``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from msgspec import UNSET, UnsetType
from msgspec.structs import replace

from ahp_server.protocol._base import UnknownVariant
from ahp_server.protocol.reducers._common import (
    Clock,
    absent_if_none,
    add_milliseconds,
    coalesce,
    js_truthy,
    or_empty,
    replace_at,
    with_activity,
    with_flag,
)
from ahp_server.protocol.types import (
    ActiveTurn,
    BackgroundWork,
    ChatActivityChangedAction,
    ChatBackgroundWorkRemovedAction,
    ChatBackgroundWorkSetAction,
    ChatCanvasesChangedAction,
    ChatChangesetsChangedAction,
    ChatDeltaAction,
    ChatDraftChangedAction,
    ChatErrorAction,
    ChatInputAnswerChangedAction,
    ChatInputCompletedAction,
    ChatInputRequest,
    ChatInputRequestedAction,
    ChatIsArchivedChangedAction,
    ChatIsReadChangedAction,
    ChatMovableChangedAction,
    ChatPendingMessageRemovedAction,
    ChatPendingMessageSetAction,
    ChatQueuedMessagesReorderedAction,
    ChatReasoningAction,
    ChatResponsePartAction,
    ChatState,
    ChatToolCallApprovedAction,
    ChatToolCallAuthRequiredAction,
    ChatToolCallAuthResolvedAction,
    ChatToolCallCompleteAction,
    ChatToolCallContentChangedAction,
    ChatToolCallDeltaAction,
    ChatToolCallDeniedAction,
    ChatToolCallReadyAction,
    ChatToolCallResultConfirmedAction,
    ChatToolCallStartAction,
    ChatTruncatedAction,
    ChatTurnCancelledAction,
    ChatTurnCompleteAction,
    ChatTurnResumeAction,
    ChatTurnsLoadedAction,
    ChatTurnStartedAction,
    ChatUsageAction,
    ChatWorkingDirectoryRemovedAction,
    ChatWorkingDirectorySetAction,
    ConfirmationOption,
    ErrorResponsePart,
    InputRequestResponsePart,
    MarkdownResponsePart,
    PendingMessage,
    ReasoningResponsePart,
    ResponsePart,
    SessionStatus,
    ToolCallAuthRequiredState,
    ToolCallCancelledState,
    ToolCallClientContributor,
    ToolCallCompletedState,
    ToolCallContributor,
    ToolCallMcpContributor,
    ToolCallPendingConfirmationState,
    ToolCallPendingResultConfirmationState,
    ToolCallResponsePart,
    ToolCallRunningState,
    ToolCallState,
    ToolCallStreamingState,
    Turn,
)

__all__ = ["part_id_of", "reduce_chat", "summary_status"]

T = TypeVar("T")

_IS_READ = int(SessionStatus.IsRead)
_IS_ARCHIVED = int(SessionStatus.IsArchived)
_BLOCKING = (
    ToolCallPendingConfirmationState,
    ToolCallPendingResultConfirmationState,
    ToolCallAuthRequiredState,
)
# Tool calls in these states are left alone when a turn ends.
_FINISHED = (ToolCallCompletedState, ToolCallCancelledState)
_KnownToolCall = (
    ToolCallStreamingState
    | ToolCallPendingConfirmationState
    | ToolCallRunningState
    | ToolCallAuthRequiredState
    | ToolCallPendingResultConfirmationState
    | ToolCallCompletedState
    | ToolCallCancelledState
)


# -- small helpers ---------------------------------------------------------------


def _has_open_input(turn: ActiveTurn) -> bool:
    return any(
        isinstance(part, InputRequestResponsePart) and part.response is UNSET
        for part in turn.response_parts
    )


def _has_blocking_tool_call(turn: ActiveTurn) -> bool:
    return any(
        isinstance(part, ToolCallResponsePart) and isinstance(part.tool_call, _BLOCKING)
        for part in turn.response_parts
    )


def summary_status(state: ChatState, terminal: SessionStatus | None = None) -> int:
    """The chat's status derived from its active turn, flag bits kept.

    ``terminal`` (only ever ``Error``) overrides the activity. Otherwise an open
    input request or a blocking tool call means InputNeeded, any other active
    turn InProgress, and no active turn Idle. Completed turns never count.
    """
    turn = state.active_turn
    if terminal is not None:
        activity = terminal
    elif isinstance(turn, ActiveTurn) and (_has_open_input(turn) or _has_blocking_tool_call(turn)):
        activity = SessionStatus.InputNeeded
    elif isinstance(turn, ActiveTurn):
        activity = SessionStatus.InProgress
    else:
        activity = SessionStatus.Idle
    return with_activity(state.status, activity)


def _refresh_status(state: ChatState) -> ChatState:
    status = summary_status(state)
    return state if status == state.status else replace(state, status=status)


def _active_turn_for(state: ChatState, turn_id: str) -> ActiveTurn | None:
    turn = state.active_turn
    if isinstance(turn, ActiveTurn) and turn.id == turn_id:
        return turn
    return None


def _with_parts(state: ChatState, turn: ActiveTurn, parts: tuple[ResponsePart, ...]) -> ChatState:
    return replace(state, active_turn=replace(turn, response_parts=parts))


# -- tool calls ----------------------------------------------------------------------


def _tool_call_id(tool_call: ToolCallState) -> object:
    if isinstance(tool_call, UnknownVariant):
        return tool_call.data.get("toolCallId")
    return tool_call.tool_call_id


def _tool_call_base(tool_call: _KnownToolCall, meta: dict[str, Any] | UnsetType) -> dict[str, Any]:
    """The identity fields every tool-call state carries; ``meta`` wins over the old one."""
    return {
        "tool_call_id": tool_call.tool_call_id,
        "tool_name": tool_call.tool_name,
        "display_name": tool_call.display_name,
        "intention": tool_call.intention,
        "contributor": tool_call.contributor,
        "meta": coalesce(meta, tool_call.meta),
    }


_Update = Callable[[_KnownToolCall], _KnownToolCall]


def _update_tool_call(
    state: ChatState,
    turn_id: str,
    tool_call_id: str,
    update: _Update,
) -> ChatState:
    """Apply ``update`` to **every** tool call with that id in the active turn.

    ``update`` returns its argument unchanged to say "not applicable".
    """
    turn = _active_turn_for(state, turn_id)
    if turn is None:
        return state
    changed = False
    parts: list[ResponsePart] = []
    for part in turn.response_parts:
        if (
            isinstance(part, ToolCallResponsePart)
            and not isinstance(part.tool_call, UnknownVariant)
            and part.tool_call.tool_call_id == tool_call_id
        ):
            updated = update(part.tool_call)
            if updated is not part.tool_call:
                part = replace(part, tool_call=updated)
                changed = True
        parts.append(part)
    return _with_parts(state, turn, tuple(parts)) if changed else state


def _resolve_option(
    options: tuple[ConfirmationOption, ...] | UnsetType, option_id: str | UnsetType
) -> ConfirmationOption | UnsetType:
    if not js_truthy(option_id) or isinstance(options, UnsetType):
        return UNSET
    return next((option for option in options if option.id == option_id), UNSET)


def _refined_contributor(
    current: ToolCallContributor | UnsetType, late: ToolCallContributor | UnsetType
) -> ToolCallContributor | UnsetType:
    """A late contributor (REDUCER-CHANGES 17): client ownership is fixed at
    ``toolCallStart``; only the same client refines a client's call, and a late
    client contributor never takes over another's."""
    if isinstance(late, UnsetType):
        return current
    if isinstance(current, ToolCallClientContributor):
        if isinstance(late, ToolCallClientContributor) and late.client_id == current.client_id:
            return late
        return current
    if isinstance(late, ToolCallClientContributor):
        return current
    return late


def _tool_call_ready(action: ChatToolCallReadyAction) -> Callable[[_KnownToolCall], _KnownToolCall]:
    def update(tc: _KnownToolCall) -> _KnownToolCall:
        if not isinstance(
            tc, (ToolCallStreamingState, ToolCallRunningState, ToolCallPendingConfirmationState)
        ):
            return tc
        base = {
            **_tool_call_base(tc, action.meta),
            "contributor": _refined_contributor(tc.contributor, action.contributor),
            "intention": coalesce(action.intention, tc.intention),
        }
        # An omitted input keeps the call's own (a streaming call has none).
        tool_input = action.tool_input
        if isinstance(tool_input, UnsetType) and not isinstance(tc, ToolCallStreamingState):
            tool_input = tc.tool_input
        if js_truthy(action.confirmed):
            assert isinstance(action.confirmed, str)
            # Auto-confirmed: straight to running; nothing merged from a pending state.
            return ToolCallRunningState(
                **base,
                invocation_message=action.invocation_message,
                tool_input=tool_input,
                confirmed=action.confirmed,
            )
        pending = tc if isinstance(tc, ToolCallPendingConfirmationState) else None

        def keep(value: Any, field: str) -> Any:
            return coalesce(value, getattr(pending, field) if pending else UNSET)

        return ToolCallPendingConfirmationState(
            **base,
            invocation_message=action.invocation_message,
            tool_input=tool_input,
            confirmation_title=keep(action.confirmation_title, "confirmation_title"),
            risk_assessment=keep(action.risk_assessment, "risk_assessment"),
            edits=keep(action.edits, "edits"),
            editable=keep(action.editable, "editable"),
            options=keep(action.options, "options"),
        )

    return update


def _tool_call_confirmed(
    action: ChatToolCallApprovedAction | ChatToolCallDeniedAction,
) -> Callable[[_KnownToolCall], _KnownToolCall]:
    def update(tc: _KnownToolCall) -> _KnownToolCall:
        if not isinstance(tc, ToolCallPendingConfirmationState):
            return tc
        base = _tool_call_base(tc, action.meta)
        selected = _resolve_option(tc.options, action.selected_option_id)
        if isinstance(action, ChatToolCallApprovedAction):
            return ToolCallRunningState(
                **base,
                invocation_message=tc.invocation_message,
                # An edited input replaces only an inline one; a ContentRef
                # stays (the host rewrites the resource; REDUCER-CHANGES 18).
                tool_input=(
                    action.edited_tool_input
                    if isinstance(tc.tool_input, str)
                    and not isinstance(action.edited_tool_input, UnsetType)
                    else tc.tool_input
                ),
                confirmed=action.confirmed,
                selected_option=selected,
            )
        return ToolCallCancelledState(
            **base,
            invocation_message=tc.invocation_message,
            tool_input=tc.tool_input,
            reason=action.reason,
            reason_message=action.reason_message,
            user_suggestion=action.user_suggestion,
            selected_option=selected,
        )

    return update


def _tool_call_complete(
    action: ChatToolCallCompleteAction,
) -> Callable[[_KnownToolCall], _KnownToolCall]:
    def update(tc: _KnownToolCall) -> _KnownToolCall:
        if not isinstance(
            tc, (ToolCallRunningState, ToolCallPendingConfirmationState, ToolCallAuthRequiredState)
        ):
            return tc
        auth_required = isinstance(tc, ToolCallAuthRequiredState)
        result = action.result
        if auth_required and result.success:
            return tc  # only a failure ends a call that waits for authentication
        if isinstance(tc, ToolCallPendingConfirmationState):
            confirmed: str = "not-needed"
            selected: ConfirmationOption | UnsetType = UNSET
        else:
            confirmed, selected = tc.confirmed, tc.selected_option
        earlier_content = tc.content if isinstance(tc, ToolCallAuthRequiredState) else UNSET
        fields: dict[str, Any] = {
            **_tool_call_base(tc, action.meta),
            "invocation_message": tc.invocation_message,
            "tool_input": tc.tool_input,
            "confirmed": confirmed,
            "selected_option": selected,
            # `...action.result` is spread last upstream: its keys win.
            "success": result.success,
            "past_tense_message": result.past_tense_message,
            "content": coalesce(result.content, earlier_content),
            "structured_content": result.structured_content,
            "error": result.error,
        }
        if js_truthy(action.requires_result_confirmation) and not auth_required:
            return ToolCallPendingResultConfirmationState(**fields)
        return ToolCallCompletedState(**fields)

    return update


def _tool_call_result_confirmed(
    action: ChatToolCallResultConfirmedAction,
) -> Callable[[_KnownToolCall], _KnownToolCall]:
    def update(tc: _KnownToolCall) -> _KnownToolCall:
        if not isinstance(tc, ToolCallPendingResultConfirmationState):
            return tc
        base = _tool_call_base(tc, action.meta)
        if action.approved:
            return ToolCallCompletedState(
                **base,
                invocation_message=tc.invocation_message,
                tool_input=tc.tool_input,
                confirmed=tc.confirmed,
                selected_option=tc.selected_option,
                success=tc.success,
                past_tense_message=tc.past_tense_message,
                content=tc.content,
                structured_content=tc.structured_content,
                error=tc.error,
            )
        return ToolCallCancelledState(
            **base,
            invocation_message=tc.invocation_message,
            tool_input=tc.tool_input,
            reason="result-denied",
            selected_option=tc.selected_option,
        )

    return update


def _tool_call_auth_required(
    action: ChatToolCallAuthRequiredAction,
) -> Callable[[_KnownToolCall], _KnownToolCall]:
    def update(tc: _KnownToolCall) -> _KnownToolCall:
        # Only a running call backed by an MCP server can pause for authentication.
        if not isinstance(tc, ToolCallRunningState) or not isinstance(
            tc.contributor, ToolCallMcpContributor
        ):
            return tc
        return ToolCallAuthRequiredState(
            **_tool_call_base(tc, action.meta),
            invocation_message=tc.invocation_message,
            tool_input=tc.tool_input,
            confirmed=tc.confirmed,
            selected_option=tc.selected_option,
            content=tc.content,
            auth=action.auth,
        )

    return update


def _tool_call_auth_resolved(
    action: ChatToolCallAuthResolvedAction,
) -> Callable[[_KnownToolCall], _KnownToolCall]:
    def update(tc: _KnownToolCall) -> _KnownToolCall:
        if not isinstance(tc, ToolCallAuthRequiredState):
            return tc
        return ToolCallRunningState(
            **_tool_call_base(tc, action.meta),
            invocation_message=tc.invocation_message,
            tool_input=tc.tool_input,
            confirmed=tc.confirmed,
            selected_option=tc.selected_option,
            content=tc.content,
        )

    return update


def _tool_call_delta(action: ChatToolCallDeltaAction) -> Callable[[_KnownToolCall], _KnownToolCall]:
    def update(tc: _KnownToolCall) -> _KnownToolCall:
        if not isinstance(tc, ToolCallStreamingState):
            return tc
        partial = tc.partial_input
        if not isinstance(action.content, UnsetType):  # optional at 1.0 (REDUCER-CHANGES 19)
            partial = ("" if isinstance(partial, UnsetType) else partial) + action.content
        return replace(
            tc,
            meta=coalesce(action.meta, tc.meta),
            partial_input=partial,
            invocation_message=coalesce(action.invocation_message, tc.invocation_message),
        )

    return update


def _tool_call_content_changed(
    action: ChatToolCallContentChangedAction,
) -> Callable[[_KnownToolCall], _KnownToolCall]:
    def update(tc: _KnownToolCall) -> _KnownToolCall:
        if not isinstance(tc, ToolCallRunningState):
            return tc
        return replace(tc, meta=coalesce(action.meta, tc.meta), content=action.content)

    return update


# -- turns ---------------------------------------------------------------------------


def part_id_of(part: ResponsePart) -> object:
    """The id ``chat/delta``/``chat/reasoning`` match on (a tool call's is its toolCallId)."""
    if isinstance(part, (MarkdownResponsePart, ReasoningResponsePart)):
        return part.id
    if isinstance(part, ToolCallResponsePart):
        return _tool_call_id(part.tool_call)
    if isinstance(part, UnknownVariant):
        return part.data.get("id")
    return None


def _append_text(
    state: ChatState,
    turn_id: str,
    part_id: str,
    text: str,
    kind: type[MarkdownResponsePart] | type[ReasoningResponsePart],
) -> ChatState:
    """Append to the **first** part with that id, if it is of ``kind``."""
    turn = _active_turn_for(state, turn_id)
    if turn is None:
        return state
    parts = turn.response_parts
    for index, part in enumerate(parts):
        if part_id_of(part) == part_id:
            if not isinstance(part, kind):
                return state
            grown = replace(part, content=part.content + text)
            return _with_parts(state, turn, replace_at(parts, index, grown))
    return state


def _cancel_unfinished(part: ResponsePart) -> ResponsePart:
    """At turn end, a tool call that is not completed/cancelled becomes cancelled (skipped)."""
    if not isinstance(part, ToolCallResponsePart):
        return part
    tc = part.tool_call
    if isinstance(tc, (*_FINISHED, UnknownVariant)):
        return part
    streaming = isinstance(tc, ToolCallStreamingState)
    invocation = coalesce(tc.invocation_message, "") if streaming else tc.invocation_message
    cancelled = ToolCallCancelledState(
        **_tool_call_base(tc, UNSET),
        invocation_message=invocation,  # type: ignore[arg-type]  # never UNSET here
        tool_input=UNSET if isinstance(tc, ToolCallStreamingState) else tc.tool_input,
        reason="skipped",
    )
    return replace(part, tool_call=cancelled)


def _end_turn(
    state: ChatState,
    turn_id: str,
    turn_state: str,
    duration: float,
    *,
    error: ErrorResponsePart | None = None,
) -> ChatState:
    """``turnComplete`` / ``turnCancelled`` / ``error``: move the active turn into ``turns``.

    ``chat/error``'s part is appended as the turn's last part (REDUCER-CHANGES 8);
    ``modifiedAt`` becomes ``startedAt`` plus the clamped duration (11, 12).
    """
    turn = _active_turn_for(state, turn_id)
    if turn is None:
        return state
    parts = tuple(_cancel_unfinished(p) for p in turn.response_parts)
    clamped = max(0, duration)  # the producer's own duration, clamped at 0
    finished = Turn(
        id=turn.id,
        started_at=turn.started_at,
        duration=clamped,
        message=turn.message,
        response_parts=parts if error is None else (*parts, error),
        usage=turn.usage,
        state=turn_state,
    )
    modified = add_milliseconds(turn.started_at, clamped)
    ended = replace(
        state,
        turns=(*state.turns, finished),
        active_turn=UNSET,
        modified_at=state.modified_at if modified is None else modified,
    )
    terminal = SessionStatus.Error if turn_state == "error" else None
    return replace(ended, status=summary_status(ended, terminal))


def _turn_started(state: ChatState, action: ChatTurnStartedAction) -> ChatState:
    # No check for a running turn: upstream replaces it (the host rejects that
    # case before it gets here, see dispatch_rules).
    started = replace(
        state,
        active_turn=ActiveTurn(
            id=action.turn_id,
            started_at=action.started_at,
            message=action.message,
            response_parts=(),
        ),
        modified_at=action.started_at,
    )
    queued_id = action.queued_message_id
    if js_truthy(queued_id):
        steering = started.steering_message
        if isinstance(steering, PendingMessage) and steering.id == queued_id:
            started = replace(started, steering_message=UNSET)
        if not isinstance(started.queued_messages, UnsetType):
            rest = tuple(m for m in started.queued_messages if m.id != queued_id)
            started = replace(started, queued_messages=rest or UNSET)
    return replace(started, status=summary_status(started) & ~_IS_READ)


def _truncated(state: ChatState, action: ChatTruncatedAction) -> ChatState:
    if isinstance(action.turn_id, UnsetType):
        kept = replace(state, turns=(), turns_next_cursor=UNSET)
    else:
        index = next((i for i, t in enumerate(state.turns) if t.id == action.turn_id), None)
        if index is None:
            return state
        kept = replace(state, turns=state.turns[: index + 1])
    truncated = replace(kept, active_turn=UNSET)
    return replace(truncated, status=summary_status(truncated))


def _turns_loaded(state: ChatState, action: ChatTurnsLoadedAction) -> ChatState:
    """Prepend older turns not already present; the loaded copy never wins."""
    present = {turn.id for turn in state.turns}
    older = tuple(turn for turn in action.turns if turn.id not in present)
    return replace(
        state,
        turns=(*older, *state.turns),
        turns_next_cursor=absent_if_none(action.turns_next_cursor),
    )


# -- pending messages ------------------------------------------------------------------


def _pending_set(state: ChatState, action: ChatPendingMessageSetAction) -> ChatState:
    entry = PendingMessage(id=action.id, message=action.message)
    if action.kind == "steering":
        return replace(state, steering_message=entry)
    if action.kind != "queued":
        return state
    queue = or_empty(state.queued_messages)
    index = next((i for i, m in enumerate(queue) if m.id == action.id), None)
    if index is None:
        return replace(state, queued_messages=(*queue, entry))
    return replace(state, queued_messages=replace_at(queue, index, entry))


def _pending_removed(state: ChatState, action: ChatPendingMessageRemovedAction) -> ChatState:
    if action.kind == "steering":
        steering = state.steering_message
        if isinstance(steering, PendingMessage) and steering.id == action.id:
            return replace(state, steering_message=UNSET)
        return state
    if action.kind != "queued" or isinstance(state.queued_messages, UnsetType):
        return state
    rest = tuple(m for m in state.queued_messages if m.id != action.id)
    if len(rest) == len(state.queued_messages):
        return state
    return replace(state, queued_messages=rest or UNSET)


def _queued_reordered(state: ChatState, action: ChatQueuedMessagesReorderedAction) -> ChatState:
    """Named ids first (unknown and repeated ids skipped), then the rest in their order."""
    queue = state.queued_messages
    if isinstance(queue, UnsetType):
        return state
    by_id: dict[str, PendingMessage] = {}
    for message in queue:
        by_id.setdefault(message.id, message)
    ordered: list[PendingMessage] = []
    taken: set[str] = set()
    for message_id in action.order:
        if message_id in by_id and message_id not in taken:
            ordered.append(by_id[message_id])
            taken.add(message_id)
    ordered.extend(m for m in queue if m.id not in taken)
    return replace(state, queued_messages=tuple(ordered))


# -- input requests ----------------------------------------------------------------------


def _open_request_index(turn: ActiveTurn, request_id: str) -> int | None:
    """The first **unresolved** input-request part for ``request_id``."""
    for index, part in enumerate(turn.response_parts):
        if (
            isinstance(part, InputRequestResponsePart)
            and part.response is UNSET
            and part.request.id == request_id
        ):
            return index
    return None


def _input_requested(state: ChatState, action: ChatInputRequestedAction) -> ChatState:
    turn = state.active_turn
    if not isinstance(turn, ActiveTurn):
        return state  # no turnId on this action: it belongs to whatever turn is active
    request = action.request
    index = _open_request_index(turn, request.id)
    if index is None:
        parts = (*turn.response_parts, InputRequestResponsePart(request=request))
    else:
        existing = turn.response_parts[index]
        assert isinstance(existing, InputRequestResponsePart)
        merged = replace(request, answers=coalesce(request.answers, existing.request.answers))
        parts = replace_at(turn.response_parts, index, InputRequestResponsePart(request=merged))
    updated = _with_parts(state, turn, parts)
    return replace(updated, status=summary_status(updated) & ~_IS_READ)


def _with_request(
    state: ChatState, turn: ActiveTurn, index: int, part: InputRequestResponsePart
) -> ChatState:
    return _with_parts(state, turn, replace_at(turn.response_parts, index, part))


def _request_at(
    state: ChatState, request_id: str
) -> tuple[ActiveTurn, int, InputRequestResponsePart] | None:
    """The active turn, index and part of the open request ``request_id``, if any."""
    turn = state.active_turn
    if not isinstance(turn, ActiveTurn):
        return None
    index = _open_request_index(turn, request_id)
    if index is None:
        return None
    part = turn.response_parts[index]
    assert isinstance(part, InputRequestResponsePart)
    return turn, index, part


def _answers_or_unset(answers: dict[str, Any]) -> dict[str, Any] | UnsetType:
    return answers if answers else UNSET


def _input_answer_changed(state: ChatState, action: ChatInputAnswerChangedAction) -> ChatState:
    found = _request_at(state, action.request_id)
    if found is None:
        return state
    turn, index, part = found
    answers = dict(_or_empty_map(part.request.answers))
    if action.answer is UNSET or action.answer is None:
        answers.pop(action.question_id, None)
    else:
        answers[action.question_id] = action.answer
    request: ChatInputRequest = replace(part.request, answers=_answers_or_unset(answers))
    return _with_request(state, turn, index, replace(part, request=request))


def _input_completed(state: ChatState, action: ChatInputCompletedAction) -> ChatState:
    found = _request_at(state, action.request_id)
    if found is None:
        return state
    turn, index, part = found
    answers = {**_or_empty_map(part.request.answers), **_or_empty_map(action.answers)}
    request: ChatInputRequest = replace(part.request, answers=_answers_or_unset(answers))
    completed = replace(part, request=request, response=action.response)
    updated = _with_request(state, turn, index, completed)
    return replace(updated, status=summary_status(updated))


def _or_empty_map(mapping: dict[str, Any] | UnsetType) -> dict[str, Any]:
    return {} if isinstance(mapping, UnsetType) else mapping


# -- the reducer ---------------------------------------------------------------------------


#: Tool-call actions: the transition each one applies to the matching tool calls,
#: and whether ``status`` is recomputed afterwards (even when nothing matched).
_TOOL_CALL_ACTIONS: dict[type, tuple[Callable[[Any], _Update], bool]] = {
    ChatToolCallDeltaAction: (_tool_call_delta, False),
    ChatToolCallContentChangedAction: (_tool_call_content_changed, False),
    ChatToolCallReadyAction: (_tool_call_ready, True),
    ChatToolCallApprovedAction: (_tool_call_confirmed, True),
    ChatToolCallDeniedAction: (_tool_call_confirmed, True),
    ChatToolCallCompleteAction: (_tool_call_complete, True),
    ChatToolCallResultConfirmedAction: (_tool_call_result_confirmed, True),
    ChatToolCallAuthRequiredAction: (_tool_call_auth_required, True),
    ChatToolCallAuthResolvedAction: (_tool_call_auth_resolved, True),
}


def _turn_resume(state: ChatState, action: ChatTurnResumeAction) -> ChatState:
    """Reopen the latest turn when it ended in a resumable error (REDUCER-CHANGES 10)."""
    if not isinstance(state.active_turn, UnsetType):
        return state
    if not state.turns:
        return state
    turn = state.turns[-1]
    last = turn.response_parts[-1] if turn.response_parts else None
    if (
        turn.id != action.turn_id
        or turn.state != "error"
        or not isinstance(last, ErrorResponsePart)
        or last.resumable is not True
    ):
        return state
    reopened = replace(
        state,
        turns=state.turns[:-1],
        active_turn=ActiveTurn(
            id=turn.id,
            started_at=(
                state.modified_at if isinstance(turn.started_at, UnsetType) else turn.started_at
            ),
            message=turn.message,
            response_parts=turn.response_parts,  # the error part stays
            usage=turn.usage,
        ),
    )
    return replace(reopened, status=summary_status(reopened) & ~_IS_READ)


def _work_id(work: BackgroundWork) -> object:
    return work.data.get("id") if isinstance(work, UnknownVariant) else work.id


def _background_work_set(state: ChatState, work: BackgroundWork) -> ChatState:
    """Upsert by id: replaced in place, else appended (REDUCER-CHANGES 13)."""
    present = or_empty(state.background_work)
    index = next((i for i, w in enumerate(present) if _work_id(w) == _work_id(work)), None)
    if index is None:
        return replace(state, background_work=(*present, work))
    return replace(state, background_work=replace_at(present, index, work))


def _background_work_removed(state: ChatState, work_id: str) -> ChatState:
    present = or_empty(state.background_work)
    index = next((i for i, w in enumerate(present) if _work_id(w) == work_id), None)
    if index is None:
        return state
    return replace(state, background_work=(*present[:index], *present[index + 1 :]))


def reduce_chat(state: ChatState, action: object, now: Clock) -> ChatState:
    """Apply one action to a chat state; unknown actions return ``state`` itself.

    ``now`` is unused at 1.0 (``modifiedAt`` comes from action data); it stays in
    the signature every reducer shares.
    """
    tool_call = _TOOL_CALL_ACTIONS.get(type(action))
    if tool_call is not None:
        transition, refresh = tool_call
        updated = _update_tool_call(
            state,
            action.turn_id,  # type: ignore[attr-defined]
            action.tool_call_id,  # type: ignore[attr-defined]
            transition(action),
        )
        return _refresh_status(updated) if refresh else updated
    match action:
        case ChatTurnStartedAction():
            return _turn_started(state, action)
        case ChatDeltaAction(turn_id=turn_id, part_id=part_id, content=text):
            return _append_text(state, turn_id, part_id, text, MarkdownResponsePart)
        case ChatReasoningAction(turn_id=turn_id, part_id=part_id, content=text):
            return _append_text(state, turn_id, part_id, text, ReasoningResponsePart)
        case ChatResponsePartAction(turn_id=turn_id, part=part):
            turn = _active_turn_for(state, turn_id)
            if turn is None or isinstance(part, ErrorResponsePart):
                return state  # error parts enter only through chat/error (REDUCER-CHANGES 9)
            return _with_parts(state, turn, (*turn.response_parts, part))
        case ChatToolCallStartAction():
            turn = _active_turn_for(state, action.turn_id)
            if turn is None:
                return state
            streaming = ToolCallStreamingState(
                tool_call_id=action.tool_call_id,
                tool_name=action.tool_name,
                display_name=action.display_name,
                intention=action.intention,
                contributor=action.contributor,
                meta=action.meta,
            )
            part = ToolCallResponsePart(tool_call=streaming)
            return _with_parts(state, turn, (*turn.response_parts, part))
        case ChatTurnCompleteAction(turn_id=turn_id, duration=duration):
            return _end_turn(state, turn_id, "complete", duration)
        case ChatTurnCancelledAction(turn_id=turn_id, duration=duration):
            return _end_turn(state, turn_id, "cancelled", duration)
        case ChatErrorAction(turn_id=turn_id, duration=duration, part=part):
            return _end_turn(state, turn_id, "error", duration, error=part)
        case ChatTurnResumeAction():
            return _turn_resume(state, action)
        case ChatBackgroundWorkSetAction(work=work):
            return _background_work_set(state, work)
        case ChatBackgroundWorkRemovedAction(id=work_id):
            return _background_work_removed(state, work_id)
        case ChatMovableChangedAction(movable=movable):
            return replace(state, movable=movable)
        case ChatChangesetsChangedAction(changesets=changesets):
            return replace(state, changesets=absent_if_none(changesets))
        case ChatCanvasesChangedAction(canvases=canvases):
            return replace(state, canvases=absent_if_none(canvases))
        case ChatIsReadChangedAction(is_read=is_read):
            # The chat's own flag bits, activity left alone (REDUCER-CHANGES 16).
            return replace(state, status=with_flag(state.status, _IS_READ, is_read))
        case ChatIsArchivedChangedAction(is_archived=is_archived):
            return replace(state, status=with_flag(state.status, _IS_ARCHIVED, is_archived))
        case ChatActivityChangedAction(activity=activity):
            return replace(state, activity=absent_if_none(activity))
        case ChatWorkingDirectorySetAction(directory=directory):
            directories = or_empty(state.working_directories)
            if directory in directories:
                return state
            return replace(state, working_directories=(*directories, directory))
        case ChatWorkingDirectoryRemovedAction(directory=directory):
            present = or_empty(state.working_directories)
            if directory not in present:
                return state
            index = present.index(directory)
            return replace(state, working_directories=(*present[:index], *present[index + 1 :]))
        case ChatUsageAction(turn_id=turn_id, usage=usage):
            turn = _active_turn_for(state, turn_id)
            if turn is None:
                return state
            return replace(state, active_turn=replace(turn, usage=usage))
        case ChatTruncatedAction():
            return _truncated(state, action)
        case ChatTurnsLoadedAction():
            return _turns_loaded(state, action)
        case ChatPendingMessageSetAction():
            return _pending_set(state, action)
        case ChatPendingMessageRemovedAction():
            return _pending_removed(state, action)
        case ChatQueuedMessagesReorderedAction():
            return _queued_reordered(state, action)
        case ChatDraftChangedAction(draft=draft):
            return replace(state, draft=absent_if_none(draft))
        case ChatInputRequestedAction():
            return _input_requested(state, action)
        case ChatInputAnswerChangedAction():
            return _input_answer_changed(state, action)
        case ChatInputCompletedAction():
            return _input_completed(state, action)
        case _:
            return state
