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
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from ahp_server.protocol import codec
from ahp_server.protocol._base import UnknownVariant
from ahp_server.protocol.dispatch_rules import (
    CLIENT_DISPATCHABLE,
    CLIENT_DISPATCHABLE_0_7,
    Rejection,
    RejectionCode,
    check_dispatch,
    is_client_dispatchable,
)
from ahp_server.protocol.reducers import reduce_chat
from ahp_server.protocol.types import (
    ActionType,
    ActiveTurn,
    ChangesetState,
    ChatState,
    ResourceWatchState,
    RootState,
    SessionState,
    Turn,
)
from ahp_server.protocol.versions import blocked_action_types
from ahp_server.protocol.views import v0_7
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
from tests.wire_schema import SPEC_1_0, definition

Code = RejectionCode

# -- shared pieces -------------------------------------------------------------------------


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


def answer_changed(
    question_id: str, answer: dict[str, Any] | None, request_id: str = "req-1"
) -> Any:
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


def resume(turn_id: str) -> Any:
    return action("chat/turnResume", turnId=turn_id)


_UNSET_PART: Any = object()


def errored_chat(
    *,
    turn_id: str = "turn-1",
    state: str = "error",
    resumable: bool | None = True,
    last: dict[str, Any] | Any | None = _UNSET_PART,
    earlier: tuple[str, ...] = (),
    later: str | None = None,
    active: str | None = None,
    **fields: Any,
) -> ChatState:
    """A chat (1.0 shape) whose latest turn ``turn_id`` ended ``state``, after some text.

    An errored turn ends with an error part (``resumable`` as given; ``None``:
    absent); ``last`` replaces that final part (``None``: no extra part).
    ``earlier`` turns come before it, ``later`` one after it; ``active`` runs now.
    """
    error: dict[str, Any] = {
        "kind": "error",
        "error": {"errorType": "streamInterrupted", "message": "cut off"},
    }
    if resumable is not None:
        error["resumable"] = resumable
    parts: list[dict[str, Any]] = [{"kind": "markdown", "id": "md-1", "content": "Half an"}]
    if state == "error":
        parts.append(error)
        if last is not _UNSET_PART and last is not None:
            parts.append(last)
    turns = [codec.convert(b.turn_json(t), Turn) for t in earlier]
    turns.append(
        codec.convert(
            {
                "id": turn_id,
                "message": b.message_json("do it"),
                "responseParts": parts,
                "state": state,
            },
            Turn,
        )
    )
    if later is not None:
        turns.append(codec.convert(b.turn_json(later), Turn))
    chat = b.chat(**fields) if active is None else b.chat_with_turn(**fields)
    if active is not None:
        chat = msgspec.structs.replace(
            chat, active_turn=codec.convert(b.active_turn_json(active), ActiveTurn)
        )
    return msgspec.structs.replace(chat, turns=tuple(turns))


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
        "req-1",
        ALL_QUESTIONS if questions is None else questions,
        answers=answers,
        response=response,
    )
    return b.chat_with_turn([part])


REQUIRED_QUESTIONS = [
    b.text_question_json("q-name", required=True),
    b.boolean_question_json("q-ok", required=True),
    b.text_question_json("q-note", required=False),
]


def _outside_srv(directory: str) -> str | None:
    """The host's roots, as a session's ``session/workingDirectorySet`` sees them: here
    every directory is allowed but those under ``file:///srv`` (docs/workspace.md "Roots")."""
    return (
        f"{directory} is outside the workspace roots"
        if directory.startswith("file:///srv")
        else None
    )


@dataclass(frozen=True)
class Case:
    id: str
    state: RootState | SessionState | ChatState
    action: Any
    code: RejectionCode | None = None
    mentions: tuple[str, ...] = ()
    client_id: str = ME
    session: SessionState | None = None

    def run(self) -> Rejection | None:
        result = check_dispatch(
            self.state,
            self.action,
            self.client_id,
            session=self.session,
            directory_refusal=_outside_srv,
        )
        if isinstance(self.state, ChatState):
            # The host's form — the turns' ids handed over as a set — decides alike.
            ids = {turn.id for turn in self.state.turns}
            assert (
                check_dispatch(
                    self.state, self.action, self.client_id, session=self.session, turn_ids=ids
                )
                == result
            )
        return result


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


def terminal(**fields: Any) -> Any:
    """A ``TerminalState`` (wire keys), claimed by ``ME`` unless ``claim`` says otherwise."""
    from ahp_server.protocol.types import TerminalState

    wire = {"title": "sh", "content": [], "claim": {"kind": "client", "clientId": ME}, **fields}
    # A 0.7 session claim names no chat: the session's chat, as the host lifts it.
    lifted = v0_7.lift("TerminalState", wire, chat_of=lambda session, turn: f"{session}#chat")
    return codec.convert(lifted, TerminalState)


def changeset() -> Any:
    """A ``ChangesetState`` with one file, ``file:///w/a``."""
    wire = {"status": "ready", "files": [{"id": "file:///w/a", "edit": {}}]}
    return codec.convert(wire, ChangesetState)


# -- rejection table -----------------------------------------------------------------------

REJECTIONS: list[Case] = [
    # terminal channels (more in test_terminal_rules.py)
    reject(
        "terminal/data-is-server-only",
        terminal(),
        action("terminal/data", data="forged"),
        Code.ServerOnly,
        "terminal/data",
    ),
    reject(
        "terminal/claimed-held-by-another-client",
        terminal(claim={"kind": "client", "clientId": OTHER_CLIENT}),
        action("terminal/claimed", claim={"kind": "client", "clientId": ME}),
        Code.NotClaimHolder,
        OTHER_CLIENT,
    ),
    reject(
        # Issue 26: a client claim names the dispatcher's own client id, even the holder's.
        "terminal/claimed-for-another-client",
        terminal(),
        action("terminal/claimed", claim={"kind": "client", "clientId": OTHER_CLIENT}),
        Code.NotOwnClient,
        "own clientId",
    ),
    reject(
        "terminal/resized-to-nothing",
        terminal(),
        action("terminal/resized", cols=0, rows=24),
        Code.InvalidSize,
        "cols and rows",
    ),
    reject(
        "terminal/input-after-exit",
        terminal(exitCode=3),
        action("terminal/input", data="ls\r"),
        Code.TerminalUnavailable,
        "ended",
    ),
    # changeset and resource-watch channels (more in test_changeset_rules.py)
    reject(
        "changeset/fileSet-is-server-only",
        changeset(),
        action("changeset/fileSet", file={"id": "file:///w/a", "edit": {}}),
        Code.ServerOnly,
        "changeset/fileSet",
    ),
    reject(
        "changeset/review-of-unknown-files",
        changeset(),
        action("changeset/filesReviewChanged", files=["file:///w/zzz"], reviewed=True),
        Code.UnknownFile,
        "none of these files",
    ),
    reject(
        "resourceWatch/changed-is-server-only",
        codec.convert({"root": "file:///w", "recursive": False}, ResourceWatchState),
        action("resourceWatch/changed", changes={"items": []}),
        Code.ServerOnly,
        "resourceWatch/changed",
    ),
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
    # NotResumable (chat/turnResume: REDUCER-CHANGES 10's preconditions)
    reject(
        "not-resumable/turn-complete",
        errored_chat(state="complete", last=None),
        resume("turn-1"),
        Code.NotResumable,
        "turn-1",
        "complete",
    ),
    reject(
        "not-resumable/turn-cancelled",
        errored_chat(state="cancelled", last=None),
        resume("turn-1"),
        Code.NotResumable,
        "cancelled",
    ),
    reject(
        "not-resumable/error-without-resumable",
        errored_chat(resumable=None),
        resume("turn-1"),
        Code.NotResumable,
        "cannot be resumed",
    ),
    reject(
        "not-resumable/resumable-false",
        errored_chat(resumable=False),
        resume("turn-1"),
        Code.NotResumable,
        "cannot be resumed",
    ),
    reject(
        "not-resumable/error-part-not-last",
        errored_chat(last={"kind": "markdown", "id": "md-after", "content": "later"}),
        resume("turn-1"),
        Code.NotResumable,
        "cannot be resumed",
    ),
    # turnResume: not the latest turn, or a turn running (UnknownTurn, TurnInProgress)
    reject(
        "unknown-turn/resume-an-older-turn",
        errored_chat(turn_id="turn-1", later="turn-2"),
        resume("turn-1"),
        Code.UnknownTurn,
        "turn-1",
        "latest",
    ),
    reject(
        "unknown-turn/resume-with-no-turns",
        b.chat(),
        resume("turn-1"),
        Code.UnknownTurn,
        "turn-1",
    ),
    reject(
        "turn-in-progress/resume-while-a-turn-runs",
        errored_chat(active="turn-2"),
        resume("turn-1"),
        Code.TurnInProgress,
        "in progress",
    ),
    reject(
        "not-interactive/resume-in-a-read-only-chat",
        errored_chat(interactivity="read-only"),
        resume("turn-1"),
        Code.NotInteractive,
        "read-only",
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
    # DuplicateTurn
    reject(
        "duplicate-turn/turn-started-with-a-completed-turns-id",
        b.chat(turns=[b.turn_json("turn-1"), b.turn_json("turn-2")]),
        turn_started(turn_id="turn-1"),
        Code.DuplicateTurn,
        "turn-1",
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
    # OutsideRoots (the host's configured roots, handed to the pure rules)
    reject(
        "outside-roots/session-working-directory-set",
        b.session(),
        action("session/workingDirectorySet", directory="file:///srv/elsewhere"),
        Code.OutsideRoots,
        "file:///srv/elsewhere",
        "workspace roots",
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

# -- accept table --------------------------------------------------------------------------

ACCEPTS: list[Case] = [
    # root
    accept("root/configChanged", b.root(), action("root/configChanged", config={"theme": "light"})),
    accept(
        "root/configChanged-explicitly-not-read-only",
        b.root(),
        action("root/configChanged", config={"telemetry": True}),
    ),
    # session
    accept("session/titleChanged", b.session(), action("session/titleChanged", title="Renamed")),
    accept(
        "session/activeClientSet",
        b.session(),
        action("session/activeClientSet", activeClient={"clientId": ME, "tools": []}),
    ),
    accept(
        "session/activeClientRemoved",
        b.session(activeClients=[{"clientId": ME, "tools": []}]),
        action("session/activeClientRemoved", clientId=ME),
    ),
    accept(
        "session/workingDirectorySet",
        b.session(),
        action("session/workingDirectorySet", directory=DIR_OUTSIDE),
    ),
    accept(
        "session/workingDirectoryRemoved",
        b.session(),
        action("session/workingDirectoryRemoved", directory=DIR_B),
    ),
    accept(
        "session/customizationToggled",
        b.session(),
        action("session/customizationToggled", id="cust-1", enabled=False),
    ),
    accept(
        "session/mcpServerStartRequested",
        b.session(),
        action("session/mcpServerStartRequested", id="mcp-1"),
    ),
    accept(
        "session/mcpServerStopRequested",
        b.session(),
        action("session/mcpServerStopRequested", id="mcp-1"),
    ),
    accept(
        "session/mcpServerBackgroundRequested",
        b.session(),
        action("session/mcpServerBackgroundRequested", id="mcp-1"),
    ),
    accept("session/isReadChanged", b.session(), action("session/isReadChanged", isRead=True)),
    accept(
        "session/isArchivedChanged",
        b.session(),
        action("session/isArchivedChanged", isArchived=True),
    ),
    accept("chat/isReadChanged", b.chat(), action("chat/isReadChanged", isRead=True)),
    accept("chat/isArchivedChanged", b.chat(), action("chat/isArchivedChanged", isArchived=False)),
    accept(
        "session/configChanged",
        b.session(),
        action("session/configChanged", config={"mode": "plan"}),
    ),
    # chat: turns
    accept("chat/turnStarted", b.chat(), turn_started()),
    accept("chat/turnStarted-explicitly-full", b.chat(interactivity="full"), turn_started()),
    accept(
        "chat/turnStarted-after-completed-turns",
        b.chat(turns=[b.turn_json("turn-a")]),
        turn_started(),
    ),
    accept("chat/turnCancelled", b.chat_with_turn(), cancel("turn-1")),
    accept("chat/turnResume", errored_chat(), resume("turn-1")),
    accept(
        "chat/turnResume-after-earlier-turns",
        errored_chat(turn_id="turn-3", earlier=("turn-1", "turn-2")),
        resume("turn-3"),
    ),
    # chat: tool calls
    accept(
        "chat/toolCallConfirmed-approved",
        chat_with_tool(b.pending_confirmation_tool_json("tc-1")),
        approve("tc-1"),
    ),
    accept(
        "chat/toolCallConfirmed-denied",
        chat_with_tool(b.pending_confirmation_tool_json("tc-1")),
        deny("tc-1"),
    ),
    accept(
        "chat/toolCallConfirmed-client-tool-by-any-client",
        chat_with_tool(b.pending_confirmation_tool_json("tc-1", b.client_contributor_json(ME))),
        approve("tc-1"),
        client_id=OTHER_CLIENT,
    ),
    accept("chat/toolCallComplete", owned_running(), complete("tc-1")),
    accept(
        "chat/toolCallComplete-among-other-parts",
        b.chat_with_turn(
            [
                {"kind": "markdown", "id": "md-1", "content": "working"},
                b.tool_part_json(b.completed_tool_json("tc-0")),
                {"kind": "futurePart", "x": 1},
                b.tool_part_json(b.running_tool_json("tc-1", b.client_contributor_json(ME))),
            ]
        ),
        complete("tc-1"),
    ),
    accept("chat/toolCallContentChanged", owned_running(), content_changed("tc-1")),
    accept(
        "chat/toolCallResultConfirmed",
        chat_with_tool(b.pending_result_tool_json("tc-1")),
        result_confirmed("tc-1"),
    ),
    # chat: working directories
    accept(
        "chat/workingDirectorySet",
        b.chat(workingDirectories=[DIR_A], primaryWorkingDirectory=DIR_A),
        action("chat/workingDirectorySet", directory=DIR_B),
        session=b.session(),
    ),
    accept(
        "chat/workingDirectoryRemoved",
        b.chat(workingDirectories=[DIR_A, DIR_B], primaryWorkingDirectory=DIR_A),
        action("chat/workingDirectoryRemoved", directory=DIR_B),
    ),
    # chat: pending messages and drafts
    accept("chat/pendingMessageSet-queued", b.chat(), pending_set("queued")),
    accept("chat/pendingMessageSet-steering", b.chat_with_turn(), pending_set("steering")),
    accept(
        "chat/pendingMessageRemoved-steering",
        b.chat(steeringMessage={"id": "pm-1", "message": b.message_json()}),
        action("chat/pendingMessageRemoved", kind="steering", id="pm-1"),
    ),
    accept(
        "chat/pendingMessageRemoved-queued",
        b.chat(
            queuedMessages=[
                {"id": "pm-1", "message": b.message_json()},
                {"id": "pm-2", "message": b.message_json()},
            ]
        ),
        action("chat/pendingMessageRemoved", kind="queued", id="pm-2"),
    ),
    accept(
        "chat/queuedMessagesReordered",
        b.chat(queuedMessages=[{"id": "pm-1", "message": b.message_json()}]),
        action("chat/queuedMessagesReordered", order=["pm-1", "pm-unknown"]),
    ),
    accept("chat/draftChanged", b.chat(), draft_changed()),
    accept("chat/draftChanged-cleared", b.chat(), action("chat/draftChanged")),
    accept("chat/draftChanged-null", b.chat(), action("chat/draftChanged", draft=None)),
    # chat: input requests
    accept("chat/inputAnswerChanged", chat_asking(), answer_changed("q-text", submitted(text()))),
    accept(
        "chat/inputAnswerChanged-draft",
        chat_asking(),
        answer_changed("q-num", b.answered_json(number(1.5), "draft")),
    ),
    accept("chat/inputAnswerChanged-cleared", chat_asking(), answer_changed("q-text", None)),
    accept(
        "chat/inputAnswerChanged-skipped",
        chat_asking(),
        answer_changed("q-bool", {"state": "skipped", "freeformValues": ["later"]}),
    ),
    accept(
        "chat/inputCompleted-accept-all-required-submitted",
        chat_asking(REQUIRED_QUESTIONS),
        input_completed("accept", {"q-name": submitted(text()), "q-ok": submitted(boolean(False))}),
    ),
    accept(
        "chat/inputCompleted-accept-required-already-submitted",
        chat_asking(
            REQUIRED_QUESTIONS,
            answers={"q-name": submitted(text()), "q-ok": submitted(boolean())},
        ),
        input_completed("accept"),
    ),
    accept(
        "chat/inputCompleted-decline-without-answers",
        chat_asking(REQUIRED_QUESTIONS),
        input_completed("decline"),
    ),
    accept(
        "chat/inputCompleted-cancel-without-answers",
        chat_asking(REQUIRED_QUESTIONS),
        input_completed("cancel"),
    ),
    # chat: history
    accept(
        "chat/truncated-to-turn",
        b.chat(turns=[b.turn_json("turn-a"), b.turn_json("turn-b")]),
        action("chat/truncated", turnId="turn-a"),
    ),
    accept(
        "chat/truncated-everything",
        b.chat_with_turn(turns=[b.turn_json("turn-a")]),
        action("chat/truncated"),
    ),
    accept("chat/truncated-empty-chat", b.chat(), action("chat/truncated")),
    # forward compatibility: unknown variants inside known structures pass
    accept(
        "chat/inputAnswerChanged-unknown-question-kind",
        chat_asking([{"kind": "colour-picker", "id": "q-colour", "message": "Colour?"}]),
        answer_changed("q-colour", submitted(text("red"))),
    ),
    accept(
        "chat/inputAnswerChanged-unknown-value-kind",
        chat_asking(),
        answer_changed("q-text", submitted({"kind": "hologram", "value": 1})),
    ),
    accept(
        "chat/inputAnswerChanged-unknown-answer-state",
        chat_asking(),
        answer_changed("q-bool", {"state": "pondering"}),
    ),
]

CASES = REJECTIONS + ACCEPTS


def _type_of(act: Any) -> str:
    return act.data["type"] if isinstance(act, UnknownVariant) else act.type


# -- the tables ----------------------------------------------------------------------------


@pytest.mark.parametrize("case", REJECTIONS, ids=lambda c: c.id)
def test_rejection(case: Case) -> None:
    result = case.run()
    assert isinstance(result, Rejection), f"expected {case.code}, got {result!r}"
    assert result.code is case.code
    assert isinstance(result.reason, str)
    assert result.reason.strip() == result.reason
    assert len(result.reason) > 8
    assert " " in result.reason  # a sentence, not a bare code
    assert result.reason != result.code.value
    for needle in case.mentions:
        assert needle in result.reason, f"{needle!r} not in {result.reason!r}"


@pytest.mark.parametrize("case", ACCEPTS, ids=lambda c: c.id)
def test_accept(case: Case) -> None:
    assert case.run() is None


def test_every_rejection_code_has_a_case() -> None:
    covered = {case.code for case in REJECTIONS}
    missing = set(RejectionCode) - covered
    assert not missing, f"RejectionCode members without a test case: {sorted(missing)}"


def test_case_ids_are_unique() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids))


def test_every_client_dispatchable_root_session_chat_type_has_an_accept_case() -> None:
    wanted = {t for t in CLIENT_DISPATCHABLE if t.startswith(("root/", "session/", "chat/"))}
    covered = {_type_of(case.action) for case in ACCEPTS}
    assert wanted - covered == set(), f"no accept case for {sorted(wanted - covered)}"
    assert covered <= wanted


def _snapshot(value: Any) -> tuple[bytes, Any]:
    return codec.encode(value), copy.deepcopy(codec.to_builtins(value))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_check_dispatch_is_pure(case: Case) -> None:
    inputs = (case.state, case.action, case.session)
    before = [_snapshot(v) for v in inputs]
    first = case.run()  # must not raise
    second = case.run()
    assert first == second, "check_dispatch is not deterministic"
    assert [_snapshot(v) for v in inputs] == before, "check_dispatch mutated its inputs"


# -- the action-type lists -----------------------------------------------------------------

#: WIRE-SUMMARY §7, "Client-dispatchable actions", copied from the spec.
SPEC_CLIENT_DISPATCHABLE = {
    "root/configChanged",
    "session/titleChanged",
    "session/activeClientSet",
    "session/activeClientRemoved",
    "session/workingDirectorySet",
    "session/workingDirectoryRemoved",
    "session/customizationToggled",
    "session/mcpServerStartRequested",
    "session/mcpServerStopRequested",
    "session/isReadChanged",
    "session/isArchivedChanged",
    "session/configChanged",
    "chat/turnStarted",
    "chat/toolCallConfirmed",
    "chat/toolCallComplete",
    "chat/toolCallResultConfirmed",
    "chat/toolCallContentChanged",
    "chat/turnCancelled",
    "chat/workingDirectorySet",
    "chat/workingDirectoryRemoved",
    "chat/pendingMessageSet",
    "chat/pendingMessageRemoved",
    "chat/queuedMessagesReordered",
    "chat/draftChanged",
    "chat/inputAnswerChanged",
    "chat/inputCompleted",
    "chat/truncated",
    "terminal/input",
    "terminal/resized",
    "terminal/claimed",
    "terminal/titleChanged",
    "terminal/cleared",
    "changeset/filesReviewChanged",
    "annotations/set",
    "annotations/updated",
    "annotations/removed",
    "annotations/entrySet",
    "annotations/entryRemoved",
}


#: The 1.0 action types the host lets clients dispatch beyond 0.7's: those their
#: schema texts say a client dispatches, and the host serves (docs/protocol.md).
SERVED_1_0_CLIENT_ACTIONS = {
    "chat/isReadChanged",
    "chat/isArchivedChanged",
    "session/mcpServerBackgroundRequested",
    "chat/turnResume",
}


def test_client_dispatchable_matches_the_spec() -> None:
    assert set(CLIENT_DISPATCHABLE_0_7) == SPEC_CLIENT_DISPATCHABLE
    assert set(CLIENT_DISPATCHABLE) == SPEC_CLIENT_DISPATCHABLE | SERVED_1_0_CLIENT_ACTIONS
    assert set(CLIENT_DISPATCHABLE) <= {t.value for t in ActionType}
    for name in ("ChatIsReadChangedAction", "ChatIsArchivedChangedAction"):
        assert "Dispatched by a client" in definition(SPEC_1_0, name)["description"]
    assert (
        "Requests that the host background"
        in (definition(SPEC_1_0, "SessionMcpServerBackgroundRequestedAction")["description"])
    )


STATE_FOR_PREFIX: dict[str, Any] = {
    "root/": b.root(),
    "session/": b.session(),
    "chat/": b.chat_with_turn(),
}

SERVER_ONLY = sorted(
    t.value
    for t in ActionType
    if t.value.startswith(tuple(STATE_FOR_PREFIX))
    and t.value not in CLIENT_DISPATCHABLE
    # The 0.7 spec's list (the types 0.7 has): WIRE-SUMMARY §7.
    and t.value not in blocked_action_types("0.7.0")
)


def _stand_in(type_: str) -> SimpleNamespace:
    """An object with only a ``type``: enough for the channel and server-only gates."""
    return SimpleNamespace(type=type_)


@pytest.mark.parametrize("type_", SERVER_ONLY)
def test_every_server_only_type_is_rejected_as_server_only(type_: str) -> None:
    state = next(s for p, s in STATE_FOR_PREFIX.items() if type_.startswith(p))
    result = check_dispatch(state, _stand_in(type_), ME)
    assert result is not None
    assert result.code is Code.ServerOnly
    assert type_ in result.reason


def test_server_only_list_matches_the_spec() -> None:
    # WIRE-SUMMARY §7 "Server-only" names 3 root, 16 session and 14 chat types.
    assert len([t for t in SERVER_ONLY if t.startswith("root/")]) == 3
    assert len([t for t in SERVER_ONLY if t.startswith("session/")]) == 16
    assert len([t for t in SERVER_ONLY if t.startswith("chat/")]) == 14
    assert "session/defaultChatChanged" in SERVER_ONLY
    assert "chat/inputRequested" in SERVER_ONLY


@pytest.mark.parametrize("prefix", list(STATE_FOR_PREFIX))
def test_every_action_of_another_family_is_wrong_channel(prefix: str) -> None:
    state = STATE_FOR_PREFIX[prefix]
    others = [t.value for t in ActionType if not t.value.startswith(prefix)]
    assert others
    for type_ in others:
        result = check_dispatch(state, _stand_in(type_), ME)
        assert result is not None, type_
        assert result.code is Code.WrongChannel, type_
        assert type_ in result.reason


def test_is_client_dispatchable() -> None:
    assert is_client_dispatchable(turn_started())
    assert is_client_dispatchable(approve())
    assert is_client_dispatchable(deny())
    assert not is_client_dispatchable(action("chat/delta", turnId="t", partId="p", content="x"))
    assert not is_client_dispatchable(action("session/defaultChatChanged", defaultChat=CHAT))
    assert not is_client_dispatchable(action("root/agentsChanged", agents=[]))
    assert not is_client_dispatchable(action("chat/somethingNew"))
    # an unknown variant is never dispatchable, whatever its type claims
    assert not is_client_dispatchable(UnknownVariant({"type": "chat/turnStarted"}))
    assert not is_client_dispatchable(object())


# -- key rules, one by one -----------------------------------------------------------------


@pytest.mark.parametrize("origin", ["agent", "tool", "systemNotification"])
@pytest.mark.parametrize(
    "make",
    [
        pytest.param(turn_started, id="turnStarted"),
        pytest.param(lambda kind: pending_set("queued", kind), id="pendingMessageSet-queued"),
        pytest.param(lambda kind: pending_set("steering", kind), id="pendingMessageSet-steering"),
        pytest.param(draft_changed, id="draftChanged"),
    ],
)
def test_clients_may_only_send_user_messages(make: Any, origin: str) -> None:
    rejected = check_dispatch(b.chat(), make(origin), ME)
    assert rejected is not None
    assert rejected.code is Code.NotUserMessage
    assert origin in rejected.reason
    assert check_dispatch(b.chat(), make("user"), ME) is None


@pytest.mark.parametrize(
    "make", [pytest.param(complete, id="complete"), pytest.param(content_changed, id="content")]
)
@pytest.mark.parametrize(
    ("contributor", "sender"),
    [
        pytest.param(b.client_contributor_json(ME), OTHER_CLIENT, id="other-client"),
        pytest.param(b.mcp_contributor_json(), ME, id="mcp-tool"),
        pytest.param(None, ME, id="server-tool"),
    ],
)
def test_only_the_owning_client_completes_a_client_tool(
    make: Any, contributor: dict[str, Any] | None, sender: str
) -> None:
    state = chat_with_tool(b.running_tool_json("tc-1", contributor))
    result = check_dispatch(state, make("tc-1"), sender)
    assert result is not None
    assert result.code is Code.NotToolOwner
    assert "tc-1" in result.reason
    # ... and the owner may
    assert check_dispatch(owned_running(), make("tc-1"), ME) is None


def test_owner_check_comes_before_the_state_check() -> None:
    # a non-owner learns nothing about the call's state
    state = chat_with_tool(b.completed_tool_json("tc-1", b.client_contributor_json(ME)))
    result = check_dispatch(state, complete("tc-1"), OTHER_CLIENT)
    assert result is not None
    assert result.code is Code.NotToolOwner


def test_turn_started_while_a_turn_is_active() -> None:
    result = check_dispatch(b.chat_with_turn(), turn_started(turn_id="turn-2"), ME)
    assert result is not None
    assert result.code is Code.TurnInProgress
    # the same message is fine once the chat is idle
    assert check_dispatch(b.chat(), turn_started(turn_id="turn-2"), ME) is None


def test_turn_cancelled_needs_an_active_turn() -> None:
    result = check_dispatch(b.chat(turns=[b.turn_json("turn-1")]), cancel("turn-1"), ME)
    assert result is not None
    assert result.code is Code.NoActiveTurn
    assert check_dispatch(b.chat_with_turn(), cancel("turn-1"), ME) is None


@pytest.mark.parametrize("interactivity", ["read-only", "hidden"])
def test_read_only_and_hidden_chats_take_no_messages_but_drafts(interactivity: str) -> None:
    state = b.chat(interactivity=interactivity)
    for act in (turn_started(), pending_set("queued"), pending_set("steering")):
        result = check_dispatch(state, act, ME)
        assert result is not None, act
        assert result.code is Code.NotInteractive
        assert interactivity in result.reason
    assert check_dispatch(state, draft_changed(), ME) is None
    assert check_dispatch(state, action("chat/draftChanged"), ME) is None


def test_not_interactive_wins_over_turn_in_progress() -> None:
    result = check_dispatch(b.chat_with_turn(interactivity="read-only"), turn_started(), ME)
    assert result is not None
    assert result.code is Code.NotInteractive


@pytest.mark.parametrize(
    ("question_id", "value"),
    [
        pytest.param("q-bool", text("yes"), id="text-for-boolean"),
        pytest.param("q-bool", number(1), id="number-for-boolean"),
        pytest.param("q-text", boolean(), id="boolean-for-text"),
        pytest.param("q-text", selected("red"), id="selected-for-text"),
        pytest.param("q-num", text("3"), id="text-for-number"),
        pytest.param("q-int", number(2.5), id="fraction-for-integer"),
        pytest.param("q-int", number(-0.001), id="small-fraction-for-integer"),
        pytest.param("q-one", selected("green"), id="unknown-option-single"),
        pytest.param("q-one", selected_many("red"), id="many-for-single"),
        pytest.param("q-many", selected("a"), id="single-for-many"),
        pytest.param("q-many", selected_many("a", "zzz"), id="unknown-option-many"),
    ],
)
def test_answer_must_fit_its_question(question_id: str, value: dict[str, Any]) -> None:
    for state in ("draft", "submitted"):
        act = answer_changed(question_id, b.answered_json(value, state))
        result = check_dispatch(chat_asking(), act, ME)
        assert result is not None, state
        assert result.code is Code.AnswerMismatch
        assert question_id in result.reason
    # the same check applies to the answers carried by chat/inputCompleted
    completed = input_completed("accept", {question_id: submitted(value)})
    result = check_dispatch(chat_asking(), completed, ME)
    assert result is not None
    assert result.code is Code.AnswerMismatch


@pytest.mark.parametrize(
    ("question_id", "value"),
    [
        pytest.param("q-text", text(""), id="text"),
        pytest.param("q-num", number(2.5), id="fraction-for-number"),
        pytest.param("q-num", number(3), id="int-for-number"),
        pytest.param("q-int", number(3), id="int-for-integer"),
        pytest.param("q-int", number(3.0), id="integral-float-for-integer"),
        pytest.param("q-bool", boolean(False), id="boolean"),
        pytest.param("q-one", selected("blue"), id="known-option-single"),
        pytest.param("q-one-free", selected("teal"), id="freeform-single"),
        pytest.param("q-one-free", selected(""), id="empty-freeform-single"),
        pytest.param("q-many", selected_many("a", "b"), id="known-options-many"),
        pytest.param("q-many", selected_many(), id="nothing-selected-many"),
        pytest.param("q-many-free", selected_many("a", "other"), id="freeform-many"),
    ],
)
def test_fitting_answers_are_accepted(question_id: str, value: dict[str, Any]) -> None:
    assert check_dispatch(chat_asking(), answer_changed(question_id, submitted(value)), ME) is None


def test_answer_to_a_resolved_request_is_rejected() -> None:
    state = chat_asking(response="decline")
    result = check_dispatch(state, answer_changed("q-text", submitted(text())), ME)
    assert result is not None
    assert result.code is Code.UnknownInputRequest


def test_input_request_of_a_finished_turn_is_not_open() -> None:
    # §7 table: the request must be in the *active* turn
    finished = {
        **b.turn_json("turn-a"),
        "responseParts": [b.input_part_json("req-1", ALL_QUESTIONS)],
    }
    state = b.chat(turns=[finished])
    result = check_dispatch(state, input_completed("cancel"), ME)
    assert result is not None
    assert result.code is Code.UnknownInputRequest


def test_never_raises_on_odd_but_decodable_inputs() -> None:
    odd_chat = b.chat_with_turn(
        [
            {"kind": "futurePart"},
            b.tool_part_json({"status": "teleporting"}),  # no toolCallId at all
            b.input_part_json("req-1"),  # no questions
        ]
    )
    actions = [
        approve("tc-1"),
        deny("tc-1"),
        complete("tc-1"),
        content_changed("tc-1"),
        result_confirmed("tc-1"),
        answer_changed("q", submitted(text())),
        input_completed("accept"),
        input_completed("accept", {"q": {"state": "skipped"}}),
        action("chat/truncated", turnId="nope"),
        action("chat/pendingMessageRemoved", kind="mystery", id="x"),
        action("chat/workingDirectorySet", directory=DIR_A),
        action("chat/workingDirectoryRemoved", directory=DIR_A),
        UnknownVariant({}),
        UnknownVariant({"type": 42}),
        object(),
    ]
    for act in actions:
        result = check_dispatch(odd_chat, act, ME)
        assert result is None or isinstance(result, Rejection)
    # a request with no questions and no answers can be accepted
    assert check_dispatch(odd_chat, input_completed("accept"), ME) is None


# -- regressions: replace:true config changes, empty selections, bad responses ------------


def test_session_config_replace_may_not_drop_immutable_values() -> None:
    act = action("session/configChanged", config={"mode": "plan"}, replace=True)
    result = check_dispatch(b.session(), act, ME)
    assert result is not None
    assert result.code is Code.ConfigNotMutable


def test_root_config_replace_may_not_drop_read_only_values() -> None:
    act = action("root/configChanged", config={"theme": "light"}, replace=True)
    result = check_dispatch(b.root(), act, ME)
    assert result is not None
    assert result.code is Code.ConfigNotMutable


def test_empty_selection_needs_freeform_input() -> None:
    result = check_dispatch(chat_asking(), answer_changed("q-one", submitted(selected(""))), ME)
    assert result is not None
    assert result.code is Code.AnswerMismatch


def test_input_completed_response_must_be_a_known_kind() -> None:
    result = check_dispatch(chat_asking(), input_completed(response="maybe"), ME)
    assert result is not None
    assert result.code is Code.AnswerMismatch
    assert "maybe" in result.reason


RESUME_CASES = [c for c in CASES if getattr(c.action, "type", None) == "chat/turnResume"]


@pytest.mark.parametrize("case", RESUME_CASES, ids=lambda c: c.id)
def test_turn_resume_is_accepted_exactly_when_the_reducer_reopens_the_turn(case: Case) -> None:
    """The checks mirror REDUCER-CHANGES 10: an accepted resume always reopens the
    turn, and every refusal but the host's own (a read-only chat) is a no-op there."""
    after = reduce_chat(case.state, case.action, lambda: 0.0)
    if case.code is None:
        assert isinstance(after.active_turn, ActiveTurn)
        assert after.active_turn.id == case.action.turn_id
        assert len(after.turns) == len(case.state.turns) - 1
    elif case.code is not Code.NotInteractive:
        assert after is case.state
