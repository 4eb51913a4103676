"""May this client dispatch this action on this channel state? (pure)

Layer: protocol (pure). WIRE-SUMMARY §7 ("Client-dispatched actions") and its
mandatory validation table; ``IS_CLIENT_DISPATCHABLE`` of upstream
``types/action-origin.generated.ts`` at 0.7.0.

:func:`check_dispatch` returns ``None`` to accept, or a :class:`Rejection`
whose ``reason`` becomes the envelope's ``rejectionReason``. The host applies
an accepted action with the ordinary reducer; a rejected one is echoed to its
sender only and never applied.

Unknown channels are the host's business (it ignores them silently, §7.4);
this module only sees channels that exist.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from msgspec import UNSET, UnsetType

from ahp_server.protocol._base import UnknownVariant
from ahp_server.protocol.types import (
    ActionType,
    ActiveTurn,
    ChangesetFilesReviewChangedAction,
    ChangesetState,
    ChatDraftChangedAction,
    ChatInputAnswerChangedAction,
    ChatInputAnswered,
    ChatInputBooleanAnswerValue,
    ChatInputBooleanQuestion,
    ChatInputCompletedAction,
    ChatInputMultiSelectQuestion,
    ChatInputNumberAnswerValue,
    ChatInputNumberQuestion,
    ChatInputRequest,
    ChatInputSelectedAnswerValue,
    ChatInputSelectedManyAnswerValue,
    ChatInputSingleSelectQuestion,
    ChatInputSkipped,
    ChatInputTextAnswerValue,
    ChatInputTextQuestion,
    ChatPendingMessageRemovedAction,
    ChatPendingMessageSetAction,
    ChatState,
    ChatToolCallApprovedAction,
    ChatToolCallCompleteAction,
    ChatToolCallContentChangedAction,
    ChatToolCallDeniedAction,
    ChatToolCallResultConfirmedAction,
    ChatTruncatedAction,
    ChatTurnCancelledAction,
    ChatTurnResumeAction,
    ChatTurnStartedAction,
    ChatWorkingDirectoryRemovedAction,
    ChatWorkingDirectorySetAction,
    ErrorResponsePart,
    InputRequestResponsePart,
    Message,
    ResourceWatchState,
    RootConfigChangedAction,
    RootState,
    SessionActiveClientRemovedAction,
    SessionActiveClientSetAction,
    SessionConfigChangedAction,
    SessionState,
    SessionWorkingDirectoryRemovedAction,
    SessionWorkingDirectorySetAction,
    TerminalClaimedAction,
    TerminalClientClaim,
    TerminalExitedLifecycleState,
    TerminalInputAction,
    TerminalResizedAction,
    TerminalSessionClaim,
    TerminalState,
    ToolCallClientContributor,
    ToolCallPendingConfirmationState,
    ToolCallPendingResultConfirmationState,
    ToolCallResponsePart,
    ToolCallRunningState,
    ToolCallState,
)

__all__ = [
    "CLIENT_DISPATCHABLE",
    "CLIENT_DISPATCHABLE_0_7",
    "MAX_TERMINAL_SIZE",
    "NOT_SERVED",
    "Rejection",
    "RejectionCode",
    "check_dispatch",
    "duplicate_turn",
    "is_client_dispatchable",
    "valid_terminal_size",
]

#: Every action type a 0.7 client may dispatch (WIRE-SUMMARY §7).
CLIENT_DISPATCHABLE_0_7: frozenset[str] = frozenset(
    {
        ActionType.RootConfigChanged,
        ActionType.SessionTitleChanged,
        ActionType.SessionActiveClientSet,
        ActionType.SessionActiveClientRemoved,
        ActionType.SessionWorkingDirectorySet,
        ActionType.SessionWorkingDirectoryRemoved,
        ActionType.SessionCustomizationToggled,
        ActionType.SessionMcpServerStartRequested,
        ActionType.SessionMcpServerStopRequested,
        ActionType.SessionIsReadChanged,
        ActionType.SessionIsArchivedChanged,
        ActionType.SessionConfigChanged,
        ActionType.ChatTurnStarted,
        ActionType.ChatToolCallConfirmed,
        ActionType.ChatToolCallComplete,
        ActionType.ChatToolCallResultConfirmed,
        ActionType.ChatToolCallContentChanged,
        ActionType.ChatTurnCancelled,
        ActionType.ChatWorkingDirectorySet,
        ActionType.ChatWorkingDirectoryRemoved,
        ActionType.ChatPendingMessageSet,
        ActionType.ChatPendingMessageRemoved,
        ActionType.ChatQueuedMessagesReordered,
        ActionType.ChatDraftChanged,
        ActionType.ChatInputAnswerChanged,
        ActionType.ChatInputCompleted,
        ActionType.ChatTruncated,
        ActionType.TerminalInput,
        ActionType.TerminalResized,
        ActionType.TerminalClaimed,
        ActionType.TerminalTitleChanged,
        ActionType.TerminalCleared,
        ActionType.ChangesetFilesReviewChanged,
        ActionType.AnnotationsSet,
        ActionType.AnnotationsUpdated,
        ActionType.AnnotationsRemoved,
        ActionType.AnnotationsEntrySet,
        ActionType.AnnotationsEntryRemoved,
    }
)

#: Every action type a client may dispatch here: 0.7's, and those 1.0 adds that
#: this host serves — a chat's own read and archived flags (their schema texts:
#: "Dispatched by a client"), the request to background a blocking MCP server
#: start (accepted; this host never blocks on one, so the reducer's no-op is
#: all it does) and ``chat/turnResume`` (a resumable errored turn goes on;
#: ``ErrorResponsePart``: "a client may dispatch `chat/turnResume`").
#: Everything else, including action types this version does not know, is
#: server-only.
CLIENT_DISPATCHABLE: frozenset[str] = CLIENT_DISPATCHABLE_0_7 | {
    ActionType.ChatIsReadChanged,
    ActionType.ChatIsArchivedChanged,
    ActionType.SessionMcpServerBackgroundRequested,
    ActionType.ChatTurnResume,
}

#: 1.0 client actions on channels this host has, which it does not serve yet
#: (docs/protocol.md "Every 1.0 action": "refused"). None at present:
#: ``chat/turnResume`` was the last (issue 28). Kept so the table's test has
#: one place to read it from.
NOT_SERVED: frozenset[str] = frozenset()

_CHANNEL_PREFIX: dict[type, str] = {
    RootState: "root/",
    SessionState: "session/",
    ChatState: "chat/",
    TerminalState: "terminal/",
    ChangesetState: "changeset/",
    ResourceWatchState: "resourceWatch/",
}

#: The largest terminal a client may ask for (``terminal/resized``, ``createTerminal``).
MAX_TERMINAL_SIZE = 10_000


class RejectionCode(StrEnum):
    """Why an action was rejected (for logs, metrics and tests; the wire carries ``reason``)."""

    UnknownAction = "unknown-action"
    WrongChannel = "wrong-channel"
    ServerOnly = "server-only"
    NotUserMessage = "not-user-message"
    NotInteractive = "not-interactive"
    TurnInProgress = "turn-in-progress"
    DuplicateTurn = "duplicate-turn"
    NoActiveTurn = "no-active-turn"
    UnknownTurn = "unknown-turn"
    UnknownToolCall = "unknown-tool-call"
    ToolCallState = "tool-call-state"
    NotToolOwner = "not-tool-owner"
    DirectoryNotInSession = "directory-not-in-session"
    PrimaryDirectory = "primary-directory"
    UnknownPendingMessage = "unknown-pending-message"
    UnknownInputRequest = "unknown-input-request"
    UnknownQuestion = "unknown-question"
    AnswerMismatch = "answer-mismatch"
    MissingRequiredAnswer = "missing-required-answer"
    NotOwnClient = "not-own-client"
    ConfigNotAvailable = "config-not-available"
    ConfigNotMutable = "config-not-mutable"
    NotClaimHolder = "not-claim-holder"
    InvalidSize = "invalid-size"
    TerminalUnavailable = "terminal-unavailable"
    UnknownFile = "unknown-file"
    OutsideRoots = "outside-roots"
    NotResumable = "not-resumable"


@dataclass(frozen=True, slots=True)
class Rejection:
    """A refused client action: ``reason`` is human-readable and goes on the wire."""

    code: RejectionCode
    reason: str


def _action_type(action: object) -> str | None:
    if isinstance(action, UnknownVariant):
        value = action.data.get("type")
        return value if isinstance(value, str) else None
    value = getattr(action, "type", None)
    return value if isinstance(value, str) else None


def is_client_dispatchable(action: object) -> bool:
    """``isClientDispatchable`` upstream: unknown action types are not."""
    if isinstance(action, UnknownVariant):
        return False
    return _action_type(action) in CLIENT_DISPATCHABLE


def check_dispatch(
    state: RootState
    | SessionState
    | ChatState
    | TerminalState
    | ChangesetState
    | ResourceWatchState,
    action: object,
    client_id: str,
    *,
    session: SessionState | None = None,
    turn_ids: Container[str] | None = None,
    directory_refusal: Callable[[str], str | None] | None = None,
) -> Rejection | None:
    """Decide whether ``client_id`` may dispatch ``action`` on the channel holding ``state``.

    ``session`` is the owning session's state; chat channels need it to check
    working directories (WIRE-SUMMARY §7: "directory not in session
    workingDirectories: MUST reject"). ``turn_ids``, if given, holds exactly
    the ids of a chat's ``turns`` (the host keeps it as they change): a new
    turn's id is then looked up in O(1) instead of scanning the turns.
    ``directory_refusal``, if given, says why a directory may not become one
    of a session's working directories (``None``: it may) — the host's
    configured roots, which this pure module cannot look at itself.
    """
    action_type = _action_type(action)
    if isinstance(action, UnknownVariant) or action_type is None:
        return Rejection(RejectionCode.UnknownAction, f"unknown action type {action_type!r}")
    prefix = _CHANNEL_PREFIX[type(state)]
    if not action_type.startswith(prefix):
        return Rejection(
            RejectionCode.WrongChannel,
            f"{action_type} cannot be dispatched on a {prefix[:-1]} channel",
        )
    if action_type not in CLIENT_DISPATCHABLE:
        return Rejection(RejectionCode.ServerOnly, f"{action_type} is server-only")
    if isinstance(state, ChatState):
        return _check_chat(state, action, client_id, session, turn_ids)
    if isinstance(state, SessionState):
        return _check_session(state, action, client_id, directory_refusal)
    if isinstance(state, TerminalState):
        return _check_terminal(state, action, client_id)
    if isinstance(state, ChangesetState):
        return _check_changeset(state, action)
    if isinstance(state, ResourceWatchState):
        return None  # nothing on a watch is client-dispatchable: refused above
    return _check_root(state, action)


# -- root ----------------------------------------------------------------------------


def _config_changes(
    values: dict[str, Any], changes: dict[str, Any], replace: bool | UnsetType
) -> dict[str, tuple[object, object]]:
    """Every key whose value the action would change: ``{key: (old, new)}``.

    With ``replace`` the keys the action leaves out are dropped, so they change too.
    """
    missing = object()
    keys = set(changes) | (set(values) if replace is True else set())
    changed: dict[str, tuple[object, object]] = {}
    for key in keys:
        old = values.get(key, missing)
        new = changes.get(key, missing) if replace is True else changes[key]
        if old != new:
            changed[key] = (old, new)
    return changed


def _check_root(state: RootState, action: object) -> Rejection | None:
    if isinstance(action, RootConfigChangedAction):
        if isinstance(state.config, UnsetType):
            return Rejection(RejectionCode.ConfigNotAvailable, "the host has no configuration")
        changed = _config_changes(state.config.values, action.config, action.replace)
        for key in sorted(changed):
            prop = state.config.schema.properties.get(key)
            if prop is None:
                return Rejection(RejectionCode.ConfigNotMutable, f"unknown config key {key!r}")
            if prop.read_only is True:
                return Rejection(RejectionCode.ConfigNotMutable, f"config key {key!r} is read-only")
    return None


# -- terminal ----------------------------------------------------------------------------


def valid_terminal_size(cols: float, rows: float) -> bool:
    """Both whole numbers from 1 to :data:`MAX_TERMINAL_SIZE` (terminal sizes)."""
    return all(
        float(value).is_integer() and 1 <= value <= MAX_TERMINAL_SIZE for value in (cols, rows)
    )


def _check_terminal(state: TerminalState, action: object, client_id: str) -> Rejection | None:
    match action:
        case TerminalClaimedAction(claim=claim):
            # "The server SHOULD reject if the dispatching client does not currently
            # hold the claim" (terminal.md). A terminal another *client* holds is
            # refused; one a session holds may be taken or narrowed by a user
            # (guide "Client Detaches a Terminal").
            held = state.claim
            if isinstance(held, TerminalClientClaim) and held.client_id != client_id:
                return Rejection(
                    RejectionCode.NotClaimHolder,
                    f"the terminal is claimed by client {held.client_id!r}",
                )
            if not isinstance(claim, (TerminalClientClaim, TerminalSessionClaim)):
                return Rejection(RejectionCode.UnknownAction, "unknown terminal claim kind")
            # Our choice (issue 26): a client claim names the dispatching client, as
            # createTerminal's must — a client cannot make a terminal another
            # client's, or hand it to an id nobody holds (docs/protocol.md
            # "Identity and ownership"). Its user's session may still take it.
            if isinstance(claim, TerminalClientClaim) and claim.client_id != client_id:
                return Rejection(
                    RejectionCode.NotOwnClient,
                    "a client claim must name the dispatching client's own clientId",
                )
        case TerminalInputAction() if isinstance(state.lifecycle, TerminalExitedLifecycleState):
            # The host also refuses input its process cannot take (host/channels/terminals.py).
            return Rejection(RejectionCode.TerminalUnavailable, "the terminal's process has ended")
        case TerminalResizedAction(cols=cols, rows=rows):
            if not valid_terminal_size(cols, rows):
                return Rejection(
                    RejectionCode.InvalidSize,
                    f"cols and rows must be whole numbers from 1 to {MAX_TERMINAL_SIZE}",
                )
        case _:
            pass
    return None


# -- changeset ---------------------------------------------------------------------------


def _check_changeset(state: ChangesetState, action: object) -> Rejection | None:
    # ``changeset/filesReviewChanged`` is the one client action (changeset.md).
    # Ids that match no file would make it a no-op: refused instead, so a client
    # that raced a file's removal learns it (its optimistic flag is dropped).
    if isinstance(action, ChangesetFilesReviewChangedAction):
        present = {file.id for file in state.files}
        if not any(file_id in present for file_id in action.files):
            return Rejection(RejectionCode.UnknownFile, "none of these files is in the changeset")
    return None


# -- session -----------------------------------------------------------------------------


def _check_session(
    state: SessionState,
    action: object,
    client_id: str,
    directory_refusal: Callable[[str], str | None] | None,
) -> Rejection | None:
    match action:
        case SessionWorkingDirectorySetAction(directory=directory) if directory_refusal:
            # Working directories lie inside the host's configured roots, never
            # where a client chooses (docs/workspace.md "Roots").
            refusal = directory_refusal(directory)
            if refusal is not None:
                return Rejection(RejectionCode.OutsideRoots, refusal)
        case SessionActiveClientSetAction(active_client=active):
            if active.client_id != client_id:
                return Rejection(
                    RejectionCode.NotOwnClient, "a client may only set its own active-client entry"
                )
        case SessionActiveClientRemovedAction(client_id=removed):
            if removed != client_id:
                return Rejection(
                    RejectionCode.NotOwnClient,
                    "a client may only remove its own active-client entry",
                )
        case SessionWorkingDirectoryRemovedAction(directory=directory):
            for chat in state.chats:
                if _primary(chat.working_directories) == directory:
                    return Rejection(
                        RejectionCode.PrimaryDirectory,
                        f"{directory} is the primary working directory of {chat.resource}",
                    )
        case SessionConfigChangedAction(config=changes):
            if isinstance(state.config, UnsetType):
                return Rejection(
                    RejectionCode.ConfigNotAvailable, "the session has no configuration"
                )
            changed = _config_changes(state.config.values, changes, action.replace)
            for key in sorted(changed):
                prop = state.config.schema.properties.get(key)
                if prop is None or prop.session_mutable is not True:
                    return Rejection(
                        RejectionCode.ConfigNotMutable,
                        f"config key {key!r} cannot be changed after the session is created",
                    )
        case _:
            pass
    return None


# -- chat ------------------------------------------------------------------------------------


def _user_message(message: Message | UnsetType | None) -> Rejection | None:
    if isinstance(message, Message) and message.origin.kind != "user":
        return Rejection(
            RejectionCode.NotUserMessage,
            f"clients may only send user messages, not {message.origin.kind!r}",
        )
    return None


def _interactive(chat: ChatState) -> Rejection | None:
    if chat.interactivity in ("read-only", "hidden"):
        return Rejection(
            RejectionCode.NotInteractive, f"the chat is {chat.interactivity}: it takes no messages"
        )
    return None


def _find_tool_call(
    chat: ChatState, turn_id: str, tool_call_id: str
) -> tuple[ToolCallState | None, Rejection | None]:
    turn = chat.active_turn
    if not isinstance(turn, ActiveTurn):
        return None, Rejection(RejectionCode.NoActiveTurn, "no active turn")
    if turn.id != turn_id:
        return None, Rejection(
            RejectionCode.UnknownTurn, f"turn {turn_id!r} is not the active turn"
        )
    for part in turn.response_parts:
        if isinstance(part, ToolCallResponsePart):
            tool_call = part.tool_call
            known_id = (
                tool_call.data.get("toolCallId")
                if isinstance(tool_call, UnknownVariant)
                else tool_call.tool_call_id
            )
            if known_id == tool_call_id:
                return tool_call, None
    return None, Rejection(RejectionCode.UnknownToolCall, f"unknown tool call {tool_call_id!r}")


def _status_of(tool_call: ToolCallState) -> object:
    if isinstance(tool_call, UnknownVariant):
        return tool_call.data.get("status")
    return tool_call.status


def _check_tool_call(
    chat: ChatState,
    turn_id: str,
    tool_call_id: str,
    expected: type,
    client_id: str | None,
) -> Rejection | None:
    tool_call, problem = _find_tool_call(chat, turn_id, tool_call_id)
    if problem is not None:
        return problem
    assert tool_call is not None
    if client_id is not None:
        # §11.5: only the owning client completes or updates a client-provided tool.
        contributor = getattr(tool_call, "contributor", UNSET)
        if not (
            isinstance(contributor, ToolCallClientContributor)
            and contributor.client_id == client_id
        ):
            return Rejection(
                RejectionCode.NotToolOwner,
                f"tool call {tool_call_id!r} is not provided by this client",
            )
    if not isinstance(tool_call, expected):
        return Rejection(
            RejectionCode.ToolCallState,
            f"tool call {tool_call_id!r} is {_status_of(tool_call)}, not {_EXPECTED[expected]}",
        )
    return None


_EXPECTED: dict[type, str] = {
    ToolCallPendingConfirmationState: "pending-confirmation",
    ToolCallPendingResultConfirmationState: "pending-result-confirmation",
    ToolCallRunningState: "running",
}


def _open_request(
    chat: ChatState, request_id: str
) -> tuple[ChatInputRequest | None, Rejection | None]:
    turn = chat.active_turn
    if isinstance(turn, ActiveTurn):
        for part in turn.response_parts:
            if (
                isinstance(part, InputRequestResponsePart)
                and part.response is UNSET
                and part.request.id == request_id
            ):
                return part.request, None
    return None, Rejection(
        RejectionCode.UnknownInputRequest,
        f"no open input request {request_id!r} in the active turn",
    )


_VALUE_FOR_QUESTION: dict[type, type] = {
    ChatInputTextQuestion: ChatInputTextAnswerValue,
    ChatInputNumberQuestion: ChatInputNumberAnswerValue,
    ChatInputBooleanQuestion: ChatInputBooleanAnswerValue,
    ChatInputSingleSelectQuestion: ChatInputSelectedAnswerValue,
    ChatInputMultiSelectQuestion: ChatInputSelectedManyAnswerValue,
}


def _check_answer(request: ChatInputRequest, question_id: str, answer: object) -> Rejection | None:
    """An answer must fit its question: value kind, integer-ness, option ids."""
    questions = () if isinstance(request.questions, UnsetType) else request.questions
    question = next(
        (q for q in questions if not isinstance(q, UnknownVariant) and q.id == question_id), None
    )
    if question is None:
        if any(isinstance(q, UnknownVariant) for q in questions):
            return None  # a question kind we do not know: let it through
        return Rejection(RejectionCode.UnknownQuestion, f"unknown question {question_id!r}")
    if isinstance(answer, (ChatInputSkipped, UnknownVariant)):
        return None
    if not isinstance(answer, ChatInputAnswered):  # pragma: no cover - the union is closed
        return None
    value = answer.value
    if isinstance(value, UnknownVariant):
        return None
    expected = _VALUE_FOR_QUESTION[type(question)]
    if not isinstance(value, expected):
        return Rejection(
            RejectionCode.AnswerMismatch,
            f"question {question_id!r} is {question.kind}; the answer is {value.kind}",
        )
    if (
        isinstance(question, ChatInputNumberQuestion)
        and isinstance(value, ChatInputNumberAnswerValue)
        and question.kind == "integer"
        and not float(value.value).is_integer()
    ):
        return Rejection(RejectionCode.AnswerMismatch, f"question {question_id!r} needs an integer")
    if isinstance(question, (ChatInputSingleSelectQuestion, ChatInputMultiSelectQuestion)):
        ids = {option.id for option in question.options}
        if isinstance(value, ChatInputSelectedAnswerValue):
            chosen = [value.value]
        elif isinstance(value, ChatInputSelectedManyAnswerValue):
            chosen = list(value.value)
        else:  # pragma: no cover - excluded by the kind check above
            chosen = []
        unknown = [c for c in chosen if c not in ids]
        if unknown and question.allow_freeform_input is not True:
            return Rejection(
                RejectionCode.AnswerMismatch,
                f"question {question_id!r} has no option {unknown[0]!r}",
            )
    return None


def _required_missing(request: ChatInputRequest, answers: dict[str, Any]) -> str | None:
    questions = () if isinstance(request.questions, UnsetType) else request.questions
    for question in questions:
        if isinstance(question, UnknownVariant) or question.required is not True:
            continue
        answer = answers.get(question.id)
        if not (isinstance(answer, ChatInputAnswered) and answer.state == "submitted"):
            return question.id
    return None


def duplicate_turn(turn_id: str) -> Rejection:
    """A turn start naming a turn the chat already has.

    Turn ids name turns (fetchTurns cursors, tool calls, forks): the reducer
    would append a second turn with the same id.
    """
    return Rejection(RejectionCode.DuplicateTurn, f"turn id {turn_id!r} is already taken")


def _check_chat(
    chat: ChatState,
    action: object,
    client_id: str,
    session: SessionState | None,
    turn_ids: Container[str] | None,
) -> Rejection | None:
    match action:
        case ChatTurnStartedAction(message=message, turn_id=turn_id):
            if problem := _interactive(chat) or _user_message(message):
                return problem
            if isinstance(chat.active_turn, ActiveTurn):
                # The reducer would silently replace the running turn (WIRE-SUMMARY §7).
                return Rejection(
                    RejectionCode.TurnInProgress,
                    "a turn is already in progress: queue or steer the message instead",
                )
            if (
                turn_id in turn_ids
                if turn_ids is not None
                else any(turn.id == turn_id for turn in chat.turns)
            ):
                return duplicate_turn(turn_id)
        case ChatPendingMessageSetAction(message=message):
            return _interactive(chat) or _user_message(message)
        case ChatDraftChangedAction(draft=draft):
            return _user_message(draft)
        case ChatTurnCancelledAction(turn_id=turn_id):
            turn = chat.active_turn
            if not isinstance(turn, ActiveTurn):
                return Rejection(RejectionCode.NoActiveTurn, "no active turn to cancel")
            if turn.id != turn_id:
                return Rejection(
                    RejectionCode.UnknownTurn, f"turn {turn_id!r} is not the active turn"
                )
        case ChatToolCallApprovedAction() | ChatToolCallDeniedAction():
            return _check_tool_call(
                chat,
                action.turn_id,
                action.tool_call_id,
                ToolCallPendingConfirmationState,
                None,
            )
        case ChatToolCallResultConfirmedAction():
            return _check_tool_call(
                chat,
                action.turn_id,
                action.tool_call_id,
                ToolCallPendingResultConfirmationState,
                None,
            )
        case ChatToolCallCompleteAction() | ChatToolCallContentChangedAction():
            return _check_tool_call(
                chat, action.turn_id, action.tool_call_id, ToolCallRunningState, client_id
            )
        case ChatWorkingDirectorySetAction(directory=directory):
            allowed = (
                ()
                if session is None or isinstance(session.working_directories, UnsetType)
                else (session.working_directories)
            )
            if directory not in allowed:
                return Rejection(
                    RejectionCode.DirectoryNotInSession,
                    f"{directory} is not one of the session's working directories",
                )
        case ChatWorkingDirectoryRemovedAction(directory=directory):
            if _primary(chat.working_directories) == directory:
                return Rejection(
                    RejectionCode.PrimaryDirectory,
                    f"{directory} is the chat's primary working directory",
                )
        case ChatPendingMessageRemovedAction(kind=kind, id=message_id):
            if kind == "steering":
                steering = chat.steering_message
                if isinstance(steering, UnsetType) or steering.id != message_id:
                    return Rejection(
                        RejectionCode.UnknownPendingMessage, f"no steering message {message_id!r}"
                    )
            elif isinstance(chat.queued_messages, UnsetType) or all(
                m.id != message_id for m in chat.queued_messages
            ):
                return Rejection(
                    RejectionCode.UnknownPendingMessage, f"no {kind} message {message_id!r}"
                )
        case ChatInputAnswerChangedAction(request_id=request_id, question_id=question_id):
            request, problem = _open_request(chat, request_id)
            if problem is not None:
                return problem
            assert request is not None
            if action.answer is not None and action.answer is not UNSET:
                return _check_answer(request, question_id, action.answer)
        case ChatInputCompletedAction(request_id=request_id):
            request, problem = _open_request(chat, request_id)
            if problem is not None:
                return problem
            assert request is not None
            if action.response not in ("accept", "decline", "cancel"):
                return Rejection(
                    RejectionCode.AnswerMismatch,
                    f"response must be accept, decline or cancel, not {action.response!r}",
                )
            given = {} if isinstance(action.answers, UnsetType) else action.answers
            for question_id, answer in given.items():
                if problem := _check_answer(request, question_id, answer):
                    return problem
            if action.response == "accept":
                current = {} if isinstance(request.answers, UnsetType) else request.answers
                missing = _required_missing(request, {**current, **given})
                if missing is not None:
                    return Rejection(
                        RejectionCode.MissingRequiredAnswer,
                        f"required question {missing!r} has no submitted answer",
                    )
        case ChatTruncatedAction(turn_id=turn_id):
            if not isinstance(turn_id, UnsetType) and all(t.id != turn_id for t in chat.turns):
                return Rejection(RejectionCode.UnknownTurn, f"unknown turn {turn_id!r}")
        case ChatTurnResumeAction(turn_id=turn_id):
            return _check_resume(chat, turn_id)
        case _:
            pass
    return None


def _check_resume(chat: ChatState, turn_id: str) -> Rejection | None:
    """``chat/turnResume``: exactly the reducer's preconditions (REDUCER-CHANGES 10),
    so an accepted resume always reopens the turn, and one the reducer would
    ignore is refused with the reason — plus the chat taking messages at all."""
    if problem := _interactive(chat):
        return problem
    if isinstance(chat.active_turn, ActiveTurn):
        return Rejection(
            RejectionCode.TurnInProgress,
            "a turn is in progress: only the latest turn of an idle chat can be resumed",
        )
    latest = chat.turns[-1] if chat.turns else None  # the host keeps the newest in memory
    if latest is None or latest.id != turn_id:
        return Rejection(
            RejectionCode.UnknownTurn, f"turn {turn_id!r} is not the chat's latest turn"
        )
    if latest.state != "error":
        return Rejection(
            RejectionCode.NotResumable,
            f"turn {turn_id!r} ended {latest.state}: only a turn that ended in error resumes",
        )
    last = latest.response_parts[-1] if latest.response_parts else None
    if not isinstance(last, ErrorResponsePart) or last.resumable is not True:
        return Rejection(
            RejectionCode.NotResumable,
            f"turn {turn_id!r} ended with an error that cannot be resumed",
        )
    return None


def _primary(directories: tuple[str, ...] | UnsetType) -> str | None:
    """A chat's primary working directory: index 0 at 1.0 (SCHEMA-DIFF item 1)."""
    return directories[0] if not isinstance(directories, UnsetType) and directories else None
