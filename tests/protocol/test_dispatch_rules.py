"""Unit tests for :mod:`ahp_server.protocol.dispatch_rules` (WIRE-SUMMARY §7).

Two tables drive most of the tests:

* ``REJECTIONS``: one or more cases per :class:`RejectionCode`, each asserting the
  exact code, a human-readable reason and the ids the reason must name. A
  meta-test fails when a ``RejectionCode`` member has no case.
* ``ACCEPTS``: a valid situation for every client-dispatchable root, session and
  chat action type. A meta-test fails when such a type has no accept case.

Every case also checks that ``check_dispatch`` neither raises nor mutates its
inputs. The remaining tests check the key rules one by one.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from ahp_server.protocol import codec
from ahp_server.protocol._base import UnknownVariant
from ahp_server.protocol.dispatch_rules import (
    CLIENT_DISPATCHABLE,
    Rejection,
    RejectionCode,
    check_dispatch,
    is_client_dispatchable,
)
from ahp_server.protocol.types import ActionType, ChatState, RootState, SessionState
from tests.protocol import builders as b
from tests.protocol.builders import (
    CHAT,
    DIR_A,
    DIR_B,
    DIR_OUTSIDE,
    ME,
    NOW,
    OTHER_CLIENT,
    action,
)

Code = RejectionCode

# -- shared pieces ----------------------------------------------------------------------------


def turn_started(kind: str = "user", turn_id: str = "turn-2") -> Any:
    return action(
        "chat/turnStarted", turnId=turn_id, startedAt=NOW, message=b.message_json(kind=kind)
    )


def pending_set(kind: str = "queued", origin: str = "user", pid: str = "pm-1") -> Any:
    return action(
        "chat/pendingMessageSet", kind=kind, id=pid, message=b.message_json("later", origin)
    )


def draft_changed(origin: str = "user") -> Any:
    return action("chat/draftChanged", draft=b.message_json("typing", origin))


def approve(tool_call_id: str = "tc-1", turn_id: str = "turn-1") -> Any:
    return action(
        "chat/toolCallConfirmed",
        turnId=turn_id,
        toolCallId=tool_call_id,
        approved=True,
        confirmed="user-action",
    )


def deny(tool_call_id: str = "tc-1", turn_id: str = "turn-1") -> Any:
    return action(
        "chat/toolCallConfirmed",
        turnId=turn_id,
        toolCallId=tool_call_id,
        approved=False,
        reason="denied",
    )


def complete(tool_call_id: str = "tc-1", turn_id: str = "turn-1") -> Any:
    return action(
        "chat/toolCallComplete",
        turnId=turn_id,
        toolCallId=tool_call_id,
        result={"success": True, "pastTenseMessage": "Read a file"},
    )


def content_changed(tool_call_id: str = "tc-1", turn_id: str = "turn-1") -> Any:
    return action(
        "chat/toolCallContentChanged",
        turnId=turn_id,
        toolCallId=tool_call_id,
        content=[{"type": "text", "text": "partial"}],
    )


def result_confirmed(tool_call_id: str = "tc-1", turn_id: str = "turn-1") -> Any:
    return action(
        "chat/toolCallResultConfirmed", turnId=turn_id, toolCallId=tool_call_id, approved=True
    )


def cancel(turn_id: str = "turn-1") -> Any:
    return action("chat/turnCancelled", turnId=turn_id, duration=12)


def answer_changed(question_id: str, answer: dict[str, Any] | None, request_id: str = "req-1") -> Any:
    fields: dict[str, Any] = {"requestId": request_id, "questionId": question_id}
    if answer is not None:
        fields["answer"] = answer
    return action("chat/inputAnswerChanged", **fields)


def input_completed(
    response: str = "accept", answers: dict[str, Any] | None = None, request_id: str = "req-1"
) -> Any:
    fields: dict[str, Any] = {"requestId": request_id, "response": response}
    if answers is not None:
        fields["answers"] = answers
    return action("chat/inputCompleted", **fields)


def text(value: str = "Ada") -> dict[str, Any]:
    return {"kind": "text", "value": value}


def number(value: float) -> dict[str, Any]:
    return {"kind": "number", "value": value}


def boolean(value: bool = True) -> dict[str, Any]:
    return {"kind": "boolean", "value": value}


def selected(value: str) -> dict[str, Any]:
    return {"kind": "selected", "value": value}


def selected_many(*values: str) -> dict[str, Any]:
    return {"kind": "selected-many", "value": list(values)}


def submitted(value: dict[str, Any]) -> dict[str, Any]:
    return b.answered_json(value, "submitted")


def chat_with_tool(tool: dict[str, Any], **fields: Any) -> ChatState:
    return b.chat_with_turn([b.tool_part_json(tool)], **fields)


def owned_running() -> ChatState:
    return chat_with_tool(b.running_tool_json("tc-1", b.client_contributor_json(ME)))


ALL_QUESTIONS = [
    b.text_question_json("q-text"),
    b.number_question_json("q-num"),
    b.number_question_json("q-int", kind="integer"),
    b.boolean_question_json("q-bool"),
    b.single_select_question_json("q-one"),
    b.single_select_question_json("q-one-free", freeform=True),
    b.multi_select_question_json("q-many"),
    b.multi_select_question_json("q-many-free", freeform=True),
]


def chat_asking(
    questions: list[dict[str, Any]] | None = None,
    *,
    answers: dict[str, Any] | None = None,
    response: str | None = None,
) -> ChatState:
    """A chat whose active turn holds input request ``req-1``."""
    part = b.input_part_json(
        "req-1", ALL_QUESTIONS if questions is None else questions, answers=answers, response=response
    )
    return b.chat_with_turn([part])


REQUIRED_QUESTIONS = [
    b.text_question_json("q-name", required=True),
    b.boolean_question_json("q-ok", required=True),
    b.text_question_json("q-note", required=False),
]


@dataclass(frozen=True)
class Case:
    id: str
    state: RootState | SessionState | ChatState
    action: Any
    code: RejectionCode | None = None
    mentions: tuple[str, ...] = ()
    client_id: str = ME
    session: SessionState | None = field(default=None)

    def run(self) -> Rejection | None:
        return check_dispatch(self.state, self.action, self.client_id, session=self.session)


def reject(
    id: str,
    state: Any,
    act: Any,
    code: RejectionCode,
    *mentions: str,
    client_id: str = ME,
    session: SessionState | None = None,
) -> Case:
    return Case(id, state, act, code, tuple(mentions), client_id, session)


def accept(
    id: str, state: Any, act: Any, *, client_id: str = ME, session: SessionState | None = None
) -> Case:
    return Case(id, state, act, None, (), client_id, session)


# -- rejection table --------------------------------------------------------------------------

REJECTIONS: list[Case] = [
    # UnknownAction
    reject(
        "unknown-action/unknown-variant-on-chat",
        b.chat(),
        action("future/somethingNew", x=1),
        Code.UnknownAction,
        "future/somethingNew",
    ),
    reject(
        "unknown-action/unknown-chat-type",
        b.chat(),
        action("chat/somethingNew"),
        Code.UnknownAction,
        "chat/somethingNew",
    ),
    reject(
        "unknown-action/unknown-root-type",
        b.root(),
        UnknownVariant({"type": "root/somethingNew"}),
        Code.UnknownAction,
        "root/somethingNew",
    ),
    reject(
        "unknown-action/no-type-at-all",
        b.session(),
        UnknownVariant({"title": "no type"}),
        Code.UnknownAction,
    ),
    reject(
        "unknown-action/unknown-variant-even-with-dispatchable-type",
        b.chat(),
        UnknownVariant({"type": "chat/turnStarted"}),
        Code.UnknownAction,
        "chat/turnStarted",
    ),
    # WrongChannel
    reject(
        "wrong-channel/session-title-on-chat",
        b.chat(),
        action("session/titleChanged", title="x"),
        Code.WrongChannel,
        "session/titleChanged",
    ),
    reject(
        "wrong-channel/turn-started-on-session",
        b.session(),
        turn_started(),
        Code.WrongChannel,
        "chat/turnStarted",
    ),
    reject(
        "wrong-channel/root-config-on-session",
        b.session(),
        action("root/configChanged", config={"theme": "light"}),
        Code.WrongChannel,
        "root/configChanged",
    ),
    reject(
        "wrong-channel/session-config-on-root",
        b.root(),
        action("session/configChanged", config={"mode": "plan"}),
        Code.WrongChannel,
        "session/configChanged",
    ),
    reject(
        "wrong-channel/server-only-of-other-family",
        b.session(),
        action("chat/delta", turnId="turn-1", partId="p", content="x"),
        Code.WrongChannel,
        "chat/delta",
    ),
    # ServerOnly
    reject(
        "server-only/chat-delta",
        b.chat_with_turn(),
        action("chat/delta", turnId="turn-1", partId="p", content="x"),
        Code.ServerOnly,
        "chat/delta",
    ),
    reject(
        "server-only/chat-turn-complete",
        b.chat_with_turn(),
        action("chat/turnComplete", turnId="turn-1", duration=5),
        Code.ServerOnly,
        "chat/turnComplete",
    ),
    reject(
        "server-only/session-default-chat-changed",
        b.session(),
        action("session/defaultChatChanged", defaultChat=CHAT),
        Code.ServerOnly,
        "session/defaultChatChanged",
    ),
    reject(
        "server-only/root-agents-changed",
        b.root(),
        action("root/agentsChanged", agents=[]),
        Code.ServerOnly,
        "root/agentsChanged",
    ),
    # NotUserMessage
    reject(
        "not-user-message/turn-started-agent",
        b.chat(),
        turn_started("agent"),
        Code.NotUserMessage,
        "agent",
    ),
    reject(
        "not-user-message/pending-set-tool",
        b.chat(),
        pending_set("queued", "tool"),
        Code.NotUserMessage,
        "tool",
    ),
    reject(
        "not-user-message/draft-system-notification",
        b.chat(),
        draft_changed("systemNotification"),
        Code.NotUserMessage,
        "systemNotification",
    ),
    # NotInteractive
    reject(
        "not-interactive/read-only-turn-started",
        b.chat(interactivity="read-only"),
        turn_started(),
        Code.NotInteractive,
        "read-only",
    ),
    reject(
        "not-interactive/hidden-pending-set",
        b.chat(interactivity="hidden"),
        pending_set("steering"),
        Code.NotInteractive,
        "hidden",
    ),
    # TurnInProgress
    reject(
        "turn-in-progress/turn-started-while-active",
        b.chat_with_turn(),
        turn_started(),
        Code.TurnInProgress,
    ),
    # NoActiveTurn
    reject("no-active-turn/turn-cancelled", b.chat(), cancel(), Code.NoActiveTurn),
    reject("no-active-turn/tool-call-confirmed", b.chat(), approve(), Code.NoActiveTurn),
    reject("no-active-turn/tool-call-complete", b.chat(), complete(), Code.NoActiveTurn),
    reject(
        "no-active-turn/tool-call-result-confirmed", b.chat(), result_confirmed(), Code.NoActiveTurn
    ),
    reject(
        "no-active-turn/tool-call-content-changed", b.chat(), content_changed(), Code.NoActiveTurn
    ),
    # UnknownTurn
    reject(
        "unknown-turn/turn-cancelled-other-turn",
        b.chat_with_turn(),
        cancel("turn-9"),
        Code.UnknownTurn,
        "turn-9",
    ),
    reject(
        "unknown-turn/tool-call-confirmed-other-turn",
        chat_with_tool(b.pending_confirmation_tool_json("tc-1")),
        approve("tc-1", turn_id="turn-9"),
        Code.UnknownTurn,
        "turn-9",
    ),
    reject(
        "unknown-turn/tool-call-complete-other-turn",
        owned_running(),
        complete("tc-1", turn_id="turn-9"),
        Code.UnknownTurn,
        "turn-9",
    ),
    reject(
        "unknown-turn/truncated",
        b.chat(turns=[b.turn_json("turn-a"), b.turn_json("turn-b")]),
        action("chat/truncated", turnId="turn-9"),
        Code.UnknownTurn,
        "turn-9",
    ),
    reject(
        "unknown-turn/truncated-to-the-active-turn",
        b.chat_with_turn(turns=[b.turn_json("turn-a")]),
        action("chat/truncated", turnId="turn-1"),
        Code.UnknownTurn,
        "turn-1",
    ),
    # UnknownToolCall
    reject(
        "unknown-tool-call/confirmed",
        chat_with_tool(b.pending_confirmation_tool_json("tc-1")),
        approve("tc-404"),
        Code.UnknownToolCall,
        "tc-404",
    ),
    reject(
        "unknown-tool-call/complete",
        owned_running(),
        complete("tc-404"),
        Code.UnknownToolCall,
        "tc-404",
    ),
    reject(
        "unknown-tool-call/result-confirmed-turn-without-tools",
        b.chat_with_turn([{"kind": "markdown", "id": "md-1", "content": "hi"}]),
        result_confirmed("tc-404"),
        Code.UnknownToolCall,
        "tc-404",
    ),
    # ToolCallState
    reject(
        "tool-call-state/confirmed-while-running",
        chat_with_tool(b.running_tool_json("tc-1")),
        approve("tc-1"),
        Code.ToolCallState,
        "tc-1",
        "running",
        "pending-confirmation",
    ),
    reject(
        "tool-call-state/denied-after-completion",
        chat_with_tool(b.completed_tool_json("tc-1")),
        deny("tc-1"),
        Code.ToolCallState,
        "tc-1",
        "completed",
    ),
    reject(
        "tool-call-state/result-confirmed-while-running",
        chat_with_tool(b.running_tool_json("tc-1")),
        result_confirmed("tc-1"),
        Code.ToolCallState,
        "tc-1",
        "pending-result-confirmation",
    ),
    reject(
        "tool-call-state/complete-after-completion",
        chat_with_tool(b.completed_tool_json("tc-1", b.client_contributor_json(ME))),
        complete("tc-1"),
        Code.ToolCallState,
        "tc-1",
        "completed",
    ),
    reject(
        "tool-call-state/content-changed-pending-result",
        chat_with_tool(b.pending_result_tool_json("tc-1", b.client_contributor_json(ME))),
        content_changed("tc-1"),
        Code.ToolCallState,
        "tc-1",
    ),
    reject(
        "tool-call-state/confirmed-unknown-status",
        chat_with_tool({"toolCallId": "tc-1", "status": "teleporting"}),
        approve("tc-1"),
        Code.ToolCallState,
        "tc-1",
        "teleporting",
    ),
    # NotToolOwner
    reject(
        "not-tool-owner/complete-by-other-client",
        owned_running(),
        complete("tc-1"),
        Code.NotToolOwner,
        "tc-1",
        client_id=OTHER_CLIENT,
    ),
    reject(
        "not-tool-owner/content-changed-by-other-client",
        owned_running(),
        content_changed("tc-1"),
        Code.NotToolOwner,
        "tc-1",
        client_id=OTHER_CLIENT,
    ),
    reject(
        "not-tool-owner/complete-mcp-tool",
        chat_with_tool(b.running_tool_json("tc-1", b.mcp_contributor_json())),
        complete("tc-1"),
        Code.NotToolOwner,
        "tc-1",
    ),
    reject(
        "not-tool-owner/content-changed-server-tool",
        chat_with_tool(b.running_tool_json("tc-1")),
        content_changed("tc-1"),
        Code.NotToolOwner,
        "tc-1",
    ),
    # DirectoryNotInSession
    reject(
        "directory-not-in-session/outside",
        b.chat(),
        action("chat/workingDirectorySet", directory=DIR_OUTSIDE),
        Code.DirectoryNotInSession,
        DIR_OUTSIDE,
        session=b.session(),
    ),
    reject(
        "directory-not-in-session/no-session-given",
        b.chat(),
        action("chat/workingDirectorySet", directory=DIR_A),
        Code.DirectoryNotInSession,
        DIR_A,
    ),
    reject(
        "directory-not-in-session/session-without-directories",
        b.chat(),
        action("chat/workingDirectorySet", directory=DIR_A),
        Code.DirectoryNotInSession,
        DIR_A,
        session=b.session(workingDirectories=None),
    ),
    # PrimaryDirectory
    reject(
        "primary-directory/chat-removes-its-primary",
        b.chat(workingDirectories=[DIR_A, DIR_B], primaryWorkingDirectory=DIR_A),
        action("chat/workingDirectoryRemoved", directory=DIR_A),
        Code.PrimaryDirectory,
        DIR_A,
    ),
    reject(
        "primary-directory/session-removes-a-chat-primary",
        b.session(),
        action("session/workingDirectoryRemoved", directory=DIR_A),
        Code.PrimaryDirectory,
        DIR_A,
        CHAT,
    ),
    # UnknownPendingMessage
    reject(
        "unknown-pending-message/no-steering",
        b.chat(),
        action("chat/pendingMessageRemoved", kind="steering", id="pm-1"),
        Code.UnknownPendingMessage,
        "pm-1",
    ),
    reject(
        "unknown-pending-message/other-steering-id",
        b.chat(steeringMessage={"id": "pm-1", "message": b.message_json()}),
        action("chat/pendingMessageRemoved", kind="steering", id="pm-2"),
        Code.UnknownPendingMessage,
        "pm-2",
    ),
    reject(
        "unknown-pending-message/no-queue",
        b.chat(),
        action("chat/pendingMessageRemoved", kind="queued", id="pm-1"),
        Code.UnknownPendingMessage,
        "pm-1",
    ),
    reject(
        "unknown-pending-message/not-in-queue",
        b.chat(queuedMessages=[{"id": "pm-1", "message": b.message_json()}]),
        action("chat/pendingMessageRemoved", kind="queued", id="pm-2"),
        Code.UnknownPendingMessage,
        "pm-2",
    ),
    reject(
        "unknown-pending-message/queued-id-is-the-steering-one",
        b.chat(steeringMessage={"id": "pm-1", "message": b.message_json()}),
        action("chat/pendingMessageRemoved", kind="queued", id="pm-1"),
        Code.UnknownPendingMessage,
        "pm-1",
    ),
    # UnknownInputRequest
    reject(
        "unknown-input-request/no-active-turn",
        b.chat(),
        answer_changed("q-text", submitted(text())),
        Code.UnknownInputRequest,
        "req-1",
    ),
    reject(
        "unknown-input-request/other-id",
        chat_asking(),
        answer_changed("q-text", submitted(text()), request_id="req-9"),
        Code.UnknownInputRequest,
        "req-9",
    ),
    reject(
        "unknown-input-request/already-resolved",
        chat_asking(response="accept"),
        input_completed("accept"),
        Code.UnknownInputRequest,
        "req-1",
    ),
    reject(
        "unknown-input-request/completed-other-id",
        chat_asking(),
        input_completed("cancel", request_id="req-9"),
        Code.UnknownInputRequest,
        "req-9",
    ),
    # UnknownQuestion
    reject(
        "unknown-question/answer-changed",
        chat_asking(),
        answer_changed("q-nope", submitted(text())),
        Code.UnknownQuestion,
        "q-nope",
    ),
    reject(
        "unknown-question/skipped-answer-still-needs-a-question",
        chat_asking(),
        answer_changed("q-nope", {"state": "skipped"}),
        Code.UnknownQuestion,
        "q-nope",
    ),
    reject(
        "unknown-question/request-without-questions",
        b.chat_with_turn([b.input_part_json("req-1")]),
        answer_changed("q-text", submitted(text())),
        Code.UnknownQuestion,
        "q-text",
    ),
    reject(
        "unknown-question/completed-answers",
        chat_asking(),
        input_completed("accept", {"q-nope": submitted(text())}),
        Code.UnknownQuestion,
        "q-nope",
    ),
    # AnswerMismatch
    reject(
        "answer-mismatch/text-for-boolean",
        chat_asking(),
        answer_changed("q-bool", submitted(text("yes"))),
        Code.AnswerMismatch,
        "q-bool",
    ),
    reject(
        "answer-mismatch/fraction-for-integer",
        chat_asking(),
        answer_changed("q-int", submitted(number(2.5))),
        Code.AnswerMismatch,
        "q-int",
    ),
    reject(
        "answer-mismatch/unknown-option-single-select",
        chat_asking(),
        answer_changed("q-one", submitted(selected("green"))),
        Code.AnswerMismatch,
        "q-one",
        "green",
    ),
    reject(
        "answer-mismatch/in-completed-decline",
        chat_asking(),
        input_completed("decline", {"q-num": submitted(text("many"))}),
        Code.AnswerMismatch,
        "q-num",
    ),
    # MissingRequiredAnswer
    reject(
        "missing-required-answer/nothing-answered",
        chat_asking(REQUIRED_QUESTIONS),
        input_completed("accept"),
        Code.MissingRequiredAnswer,
        "q-name",
    ),
    reject(
        "missing-required-answer/one-left",
        chat_asking(REQUIRED_QUESTIONS, answers={"q-name": submitted(text())}),
        input_completed("accept"),
        Code.MissingRequiredAnswer,
        "q-ok",
    ),
    reject(
        "missing-required-answer/draft-is-not-submitted",
        chat_asking(REQUIRED_QUESTIONS, answers={"q-ok": submitted(boolean())}),
        input_completed("accept", {"q-name": b.answered_json(text(), "draft")}),
        Code.MissingRequiredAnswer,
        "q-name",
    ),
    reject(
        "missing-required-answer/skipped-is-not-submitted",
        chat_asking(REQUIRED_QUESTIONS),
        input_completed("accept", {"q-name": {"state": "skipped"}, "q-ok": submitted(boolean())}),
        Code.MissingRequiredAnswer,
        "q-name",
    ),
    reject(
        "missing-required-answer/completion-overrides-a-submitted-answer",
        chat_asking(
            REQUIRED_QUESTIONS,
            answers={"q-name": submitted(text()), "q-ok": submitted(boolean())},
        ),
        input_completed("accept", {"q-ok": b.answered_json(boolean(), "draft")}),
        Code.MissingRequiredAnswer,
        "q-ok",
    ),
    # NotOwnClient
    reject(
        "not-own-client/active-client-set",
        b.session(),
        action("session/activeClientSet", activeClient={"clientId": OTHER_CLIENT, "tools": []}),
        Code.NotOwnClient,
    ),
    reject(
        "not-own-client/active-client-removed",
        b.session(activeClients=[{"clientId": OTHER_CLIENT, "tools": []}]),
        action("session/activeClientRemoved", clientId=OTHER_CLIENT),
        Code.NotOwnClient,
    ),
    # ConfigNotAvailable
    reject(
        "config-not-available/root",
        b.root(config=None),
        action("root/configChanged", config={"theme": "light"}),
        Code.ConfigNotAvailable,
    ),
    reject(
        "config-not-available/session",
        b.session(config=None),
        action("session/configChanged", config={"mode": "plan"}),
        Code.ConfigNotAvailable,
    ),
    # ConfigNotMutable
    reject(
        "config-not-mutable/root-unknown-key",
        b.root(),
        action("root/configChanged", config={"nope": 1}),
        Code.ConfigNotMutable,
        "nope",
    ),
    reject(
        "config-not-mutable/root-read-only-key",
        b.root(),
        action("root/configChanged", config={"theme": "light", "version": "2.0"}),
        Code.ConfigNotMutable,
        "version",
    ),
    reject(
        "config-not-mutable/session-key-without-session-mutable",
        b.session(),
        action("session/configChanged", config={"model": "m-2"}),
        Code.ConfigNotMutable,
        "model",
    ),
    reject(
        "config-not-mutable/session-mutable-false",
        b.session(),
        action("session/configChanged", config={"mode": "plan", "sandbox": False}),
        Code.ConfigNotMutable,
        "sandbox",
    ),
    reject(
        "config-not-mutable/session-unknown-key",
        b.session(),
        action("session/configChanged", config={"nope": 1}),
        Code.ConfigNotMutable,
        "nope",
    ),
]
