"""Wire-shaped builders for protocol unit tests.

Every helper returns either a JSON-like ``dict`` in wire shape (camelCase keys,
as in the spec) or a decoded struct built from one with :func:`codec.convert`,
so tests read like the wire and the structs are exactly what the host decodes.
Functions whose name ends in ``_json`` return dicts; the others return structs.

The dicts are in the 0.7 wire shape (``primaryWorkingDirectory``, ``exitCode``
…); the structs are the host's canonical 1.0 ones, lifted from them with the
0.7 view (``views.v0_7.lift``), as the host lifts what a 0.7 peer sends.
"""

from __future__ import annotations

from typing import Any

from ahp_server.protocol import codec
from ahp_server.protocol.types import ChatState, RootState, SessionState, StateAction
from ahp_server.protocol.views import v0_7

NOW = "2025-03-10T18:42:03.123Z"
CHAT = "ahp-chat:/11111111-1111-1111-1111-111111111111"
OTHER_CHAT = "ahp-chat:/22222222-2222-2222-2222-222222222222"
SESSION = "ahp-session:/33333333-3333-3333-3333-333333333333"
ME = "client-me"
OTHER_CLIENT = "client-other"
DIR_A = "file:///work/a"
DIR_B = "file:///work/b"
DIR_OUTSIDE = "file:///elsewhere"


# -- messages ------------------------------------------------------------------------------


def message_json(text: str = "hello", kind: str = "user") -> dict[str, Any]:
    """A ``Message`` whose ``origin.kind`` is ``kind``."""
    return {"text": text, "origin": {"kind": kind}}


# -- tool calls ----------------------------------------------------------------------------


def client_contributor_json(client_id: str = ME) -> dict[str, Any]:
    return {"kind": "client", "clientId": client_id}


def mcp_contributor_json(customization_id: str = "mcp-1") -> dict[str, Any]:
    return {"kind": "mcp", "customizationId": customization_id}


def _tool_base(tool_call_id: str, contributor: dict[str, Any] | None) -> dict[str, Any]:
    base: dict[str, Any] = {
        "toolCallId": tool_call_id,
        "toolName": "read_file",
        "displayName": "Read file",
        "invocationMessage": "Reading a file",
    }
    if contributor is not None:
        base["contributor"] = contributor
    return base


def running_tool_json(
    tool_call_id: str = "tc-1", contributor: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {**_tool_base(tool_call_id, contributor), "status": "running", "confirmed": "not-needed"}


def pending_confirmation_tool_json(
    tool_call_id: str = "tc-1", contributor: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {**_tool_base(tool_call_id, contributor), "status": "pending-confirmation"}


def pending_result_tool_json(
    tool_call_id: str = "tc-1", contributor: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        **_tool_base(tool_call_id, contributor),
        "status": "pending-result-confirmation",
        "success": True,
        "pastTenseMessage": "Read a file",
        "confirmed": "user-action",
    }


def completed_tool_json(
    tool_call_id: str = "tc-1", contributor: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        **_tool_base(tool_call_id, contributor),
        "status": "completed",
        "success": True,
        "pastTenseMessage": "Read a file",
        "confirmed": "not-needed",
    }


def tool_part_json(tool_call: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "toolCall", "toolCall": tool_call}


# -- input requests ------------------------------------------------------------------------


def text_question_json(qid: str = "q-text", *, required: bool = False) -> dict[str, Any]:
    return {"kind": "text", "id": qid, "message": "Name?", "required": required}


def number_question_json(
    qid: str = "q-num", *, kind: str = "number", required: bool = False
) -> dict[str, Any]:
    return {"kind": kind, "id": qid, "message": "How many?", "required": required}


def boolean_question_json(qid: str = "q-bool", *, required: bool = False) -> dict[str, Any]:
    return {"kind": "boolean", "id": qid, "message": "Proceed?", "required": required}


def single_select_question_json(
    qid: str = "q-one", *, required: bool = False, freeform: bool | None = None
) -> dict[str, Any]:
    question: dict[str, Any] = {
        "kind": "single-select",
        "id": qid,
        "message": "Pick one",
        "required": required,
        "options": [{"id": "red", "label": "Red"}, {"id": "blue", "label": "Blue"}],
    }
    if freeform is not None:
        question["allowFreeformInput"] = freeform
    return question


def multi_select_question_json(
    qid: str = "q-many", *, required: bool = False, freeform: bool | None = None
) -> dict[str, Any]:
    question: dict[str, Any] = {
        "kind": "multi-select",
        "id": qid,
        "message": "Pick some",
        "required": required,
        "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}],
    }
    if freeform is not None:
        question["allowFreeformInput"] = freeform
    return question


def answered_json(value: dict[str, Any], state: str = "submitted") -> dict[str, Any]:
    """A ``ChatInputAnswered``; ``value`` is e.g. ``{"kind": "text", "value": "x"}``."""
    return {"state": state, "value": value}


def input_part_json(
    request_id: str = "req-1",
    questions: list[dict[str, Any]] | None = None,
    *,
    answers: dict[str, Any] | None = None,
    response: str | None = None,
) -> dict[str, Any]:
    request: dict[str, Any] = {"id": request_id, "message": "Need input"}
    if questions is not None:
        request["questions"] = questions
    if answers is not None:
        request["answers"] = answers
    part: dict[str, Any] = {"kind": "inputRequest", "request": request}
    if response is not None:
        part["response"] = response
    return part


# -- turns ---------------------------------------------------------------------------------


def active_turn_json(
    turn_id: str = "turn-1", parts: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "id": turn_id,
        "startedAt": NOW,
        "message": message_json("do it"),
        "responseParts": parts or [],
    }


def turn_json(turn_id: str) -> dict[str, Any]:
    return {
        "id": turn_id,
        "message": message_json("earlier"),
        "responseParts": [],
        "state": "complete",
    }


# -- states --------------------------------------------------------------------------------
#
# The state builders take wire keys as keyword arguments; ``None`` removes a key
# (the field is then absent, i.e. ``msgspec.UNSET``).


def _merge(data: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    merged = {**data, **fields}
    return {key: value for key, value in merged.items() if value is not None}


def chat(**fields: Any) -> ChatState:
    """An idle, fully interactive chat; ``fields`` are wire keys overriding the defaults."""
    data: dict[str, Any] = {
        "resource": CHAT,
        "title": "Chat",
        "status": 1,
        "modifiedAt": NOW,
        "turns": [],
    }
    return codec.convert(v0_7.lift("ChatState", _merge(data, fields)), ChatState)


def chat_with_turn(parts: list[dict[str, Any]] | None = None, **fields: Any) -> ChatState:
    """A chat whose active turn is ``turn-1`` with the given response parts."""
    return chat(activeTurn=active_turn_json("turn-1", parts), **fields)


def chat_summary_json(resource: str = CHAT, **fields: Any) -> dict[str, Any]:
    return {"resource": resource, "title": "Chat", "status": 1, "modifiedAt": NOW, **fields}


def session_config_json() -> dict[str, Any]:
    return {
        "schema": {
            "type": "object",
            "properties": {
                "mode": {"type": "string", "title": "Mode", "sessionMutable": True},
                "model": {"type": "string", "title": "Model"},
                "sandbox": {"type": "boolean", "title": "Sandbox", "sessionMutable": False},
            },
        },
        "values": {"mode": "ask", "model": "m-1", "sandbox": True},
    }


def session(**fields: Any) -> SessionState:
    """A ready session with two working directories, one chat and a config."""
    data: dict[str, Any] = {
        "provider": "test",
        "title": "Session",
        "status": 1,
        "lifecycle": "ready",
        "workingDirectories": [DIR_A, DIR_B],
        "activeClients": [],
        # As the host writes it: the chat's directories, its primary among them.
        "chats": [
            chat_summary_json(
                CHAT, workingDirectories=[DIR_A, DIR_B], primaryWorkingDirectory=DIR_A
            )
        ],
        "config": session_config_json(),
    }
    return codec.convert(v0_7.lift("SessionState", _merge(data, fields)), SessionState)


def root_config_json() -> dict[str, Any]:
    return {
        "schema": {
            "type": "object",
            "properties": {
                "theme": {"type": "string", "title": "Theme"},
                "telemetry": {"type": "boolean", "title": "Telemetry", "readOnly": False},
                "version": {"type": "string", "title": "Version", "readOnly": True},
            },
        },
        "values": {"theme": "dark", "telemetry": False, "version": "1.0"},
    }


def root(**fields: Any) -> RootState:
    data: dict[str, Any] = {"agents": [], "config": root_config_json()}
    return codec.convert(_merge(data, fields), RootState)


# -- actions -------------------------------------------------------------------------------


def action(type_: str, **fields: Any) -> Any:
    """Decode ``{"type": type_, **fields}`` (wire keys) as a ``StateAction``."""
    lifted = v0_7.lift("StateAction", {"type": type_, **fields}, chat_of=_chat_of)
    return codec.convert(lifted, StateAction)


def _chat_of(session: str, turn_id: str | None) -> str:
    """The chat a 0.7 session claim means (the host finds its default chat)."""
    return f"{session}#chat"
