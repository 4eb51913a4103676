"""Wire-shaped builders for the client tests: states, snapshots, envelopes, actions.

Every ``*_json`` helper returns the JSON a server would send (camelCase keys);
the others decode that JSON into the protocol structs with ``codec.convert``,
so the tests exercise exactly what the client decodes off the wire.
"""

from __future__ import annotations

from typing import Any

from ahp_server.protocol import codec
from ahp_server.protocol.types import ActionEnvelope, Snapshot, StateAction

NOW = "2025-03-10T18:42:03.123Z"
ROOT = "ahp-root://"
SESSION = "ahp-session:/33333333-3333-3333-3333-333333333333"
CHAT = "ahp-chat:/11111111-1111-1111-1111-111111111111"
OTHER_CHAT = "ahp-chat:/22222222-2222-2222-2222-222222222222"
TERMINAL = "ahp-terminal:/t1"
ME = "client-me"
OTHER = "client-other"


def root_json(**fields: Any) -> dict[str, Any]:
    return {"agents": [], **fields}


def session_json(**fields: Any) -> dict[str, Any]:
    return {
        "provider": "test",
        "title": "Session",
        "status": 1,
        "lifecycle": "ready",
        "activeClients": [],
        "chats": [],
        **fields,
    }


def chat_json(resource: str = CHAT, **fields: Any) -> dict[str, Any]:
    return {
        "resource": resource,
        "title": "Chat",
        "status": 1,
        "modifiedAt": NOW,
        "turns": [],
        **fields,
    }


def terminal_json() -> dict[str, Any]:
    return {
        "title": "bash",
        "content": [],
        "claim": {"kind": "client", "clientId": ME},
        "lifecycle": {"status": "running"},
    }


def snapshot_json(resource: str, state: dict[str, Any], from_seq: int) -> dict[str, Any]:
    return {"resource": resource, "state": state, "fromSeq": from_seq}


def snapshot(resource: str, state: dict[str, Any], from_seq: int = 0) -> Snapshot:
    return codec.convert(snapshot_json(resource, state, from_seq), Snapshot)


def message_json(text: str = "hello") -> dict[str, Any]:
    return {"text": text, "origin": {"kind": "user"}}


def action_json(type_: str, **fields: Any) -> dict[str, Any]:
    return {"type": type_, **fields}


def as_action(data: dict[str, Any]) -> Any:
    """The ``StateAction`` struct of a wire-shaped action (``{"type": …}``)."""
    return codec.convert(data, StateAction)


def turn_started_json(turn_id: str = "turn-1", text: str = "hello") -> dict[str, Any]:
    return action_json(
        "chat/turnStarted", turnId=turn_id, startedAt=NOW, message=message_json(text)
    )


def title_json(title: str) -> dict[str, Any]:
    return action_json("session/titleChanged", title=title)


def envelope_json(
    channel: str,
    action: dict[str, Any],
    server_seq: int,
    *,
    origin: tuple[str, int] | None = None,
    rejection: str | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {"channel": channel, "action": action, "serverSeq": server_seq}
    if origin is not None:
        data["origin"] = {"clientId": origin[0], "clientSeq": origin[1]}
    if rejection is not None:
        data["rejectionReason"] = rejection
    return data


def envelope(
    channel: str,
    action: dict[str, Any],
    server_seq: int,
    *,
    origin: tuple[str, int] | None = None,
    rejection: str | None = None,
) -> ActionEnvelope:
    data = envelope_json(channel, action, server_seq, origin=origin, rejection=rejection)
    return codec.convert(data, ActionEnvelope)
