"""The 0.7 view (``ahp_server.protocol.views.v0_7``): one test per rule.

Every sample is built in the 1.0 wire shape and validated against the 1.0
schema ``$defs`` (``shared/spec-1.0/schema``, all five files merged); every
projection is validated against the 0.7 ``$defs`` (``shared/spec/schema``)
made *strict*: each object schema that lists ``properties`` gets
``additionalProperties: false``, so a 1.0-only key left in a projection fails
(the real schemas allow any extra key). Inbound translations are checked the
same way against a strict 1.0. Two known defects of the 0.7 files are patched
(see :func:`_patched_0_7`).
"""

from __future__ import annotations

import copy
import functools
import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ahp_server.protocol import codec
from ahp_server.protocol import types as types_1_0
from ahp_server.protocol.reducers import reduce_chat as reduce_chat_1_0
from ahp_server.protocol.reducers import reduce_session as reduce_session_1_0
from ahp_server.protocol.uris import session_changeset
from ahp_server.protocol.v0_7 import types
from ahp_server.protocol.v0_7.reducers import reduce_chat as reduce_chat_0_7
from ahp_server.protocol.v0_7.reducers import reduce_session as reduce_session_0_7
from ahp_server.protocol.versions import ACTION_INTRODUCED_IN, parse_version
from ahp_server.protocol.views import v0_7 as view

SHARED = Path(__file__).resolve().parents[3] / "shared"
SCHEMA_0_7 = SHARED / "spec" / "schema"
SCHEMA_1_0 = SHARED / "spec-1.0" / "schema"

# -- schemas ----------------------------------------------------------------------------------


def _merged_defs(folder: Path) -> dict[str, Any]:
    defs: dict[str, Any] = {}
    for path in sorted(folder.glob("*.schema.json")):
        for name, schema in json.loads(path.read_text(encoding="utf-8"))["$defs"].items():
            defs.setdefault(name, schema)
    return defs


#: WIRE-SUMMARY §13 / SCHEMA-DIFF item 4: the 0.7 files list ``T | undefined``
#: members as required; the TypeScript (and the wire) never did.
_NOT_REALLY_REQUIRED = {
    "ActionEnvelope": "origin",
    "Turn": "usage",
    "ActiveTurn": "usage",
    "MessageChatAttachment": "endTurn",
    "SessionActivityChangedAction": "activity",
    "SessionChangesetsChangedAction": "changesets",
    "SessionMetaChangedAction": "_meta",
    "ChangesetOperationsChangedAction": "operations",
}


def _patched_0_7(defs: dict[str, Any]) -> dict[str, Any]:
    """The 0.7 set with its two defects fixed: the required lists above, and the
    ``{"$ref": "#/$defs/"}`` member ``commands.schema.json``'s copy of
    ``StateAction`` carries (an unresolvable reference)."""
    defs = copy.deepcopy(defs)
    for name, key in _NOT_REALLY_REQUIRED.items():
        defs[name]["required"] = [k for k in defs[name]["required"] if k != key]
    members = defs["StateAction"]["oneOf"]
    defs["StateAction"]["oneOf"] = [m for m in members if m.get("$ref") != "#/$defs/"]
    return defs


def _strict(node: Any) -> Any:
    """Every object schema with ``properties`` closed to other keys."""
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("properties", "$defs"):
            out[key] = {name: _strict(sub) for name, sub in value.items()}
        else:
            out[key] = _strict(value)
    if "properties" in node and "additionalProperties" not in node:
        out["additionalProperties"] = False
    return out


DEFS_0_7 = _patched_0_7(_merged_defs(SCHEMA_0_7))
DEFS_1_0 = _merged_defs(SCHEMA_1_0)
STRICT = {"0.7": _strict(DEFS_0_7), "1.0": _strict(DEFS_1_0)}
LOOSE = {"0.7": DEFS_0_7, "1.0": DEFS_1_0}


@functools.cache
def _validator(version: str, name: str, strict: bool) -> jsonschema.Draft202012Validator:
    defs = (STRICT if strict else LOOSE)[version]
    assert name in defs, f"no $def {name} at {version}"
    return jsonschema.Draft202012Validator({"$defs": defs, "$ref": f"#/$defs/{name}"})


def assert_valid(version: str, name: str, value: Any, *, strict: bool = True) -> None:
    errors = list(_validator(version, name, strict).iter_errors(value))
    if errors:
        best = jsonschema.exceptions.best_match(errors)
        pytest.fail(
            f"not a valid {version} {name}: {best.message} at {list(best.absolute_path)}\n"
            f"{json.dumps(value, indent=1)[:3000]}",
            pytrace=False,
        )


def projected(name: str, value: Any) -> Any:
    """``value`` checked as a 1.0 ``name``, projected, and the result checked at 0.7."""
    assert_valid("1.0", name, value)
    before = copy.deepcopy(value)
    out = view.project(name, value)
    assert value == before, "the projection mutated its input"
    assert out is not None
    assert_valid("0.7", name, out)
    return out


def action_def(version: str, value: Any) -> str:
    """The ``$def`` to validate action ``value`` against: its own (validating against
    the ~100-member ``StateAction`` union costs ten times as much), else the union."""
    defs = LOOSE[version]
    wire = value.get("type") if isinstance(value, dict) else None
    names = [
        name
        for name in LEAF_ACTIONS[version]
        if defs[name]["properties"]["type"].get("const") == wire
    ]
    if len(names) == 1:
        return names[0]
    return "ChatToolCallConfirmedAction" if wire == "chat/toolCallConfirmed" else "StateAction"


def projected_action(value: dict[str, Any]) -> Any:
    assert_valid("1.0", action_def("1.0", value), value)
    before = copy.deepcopy(value)
    out = view.action(value)
    assert value == before, "the projection mutated its input"
    if out is not None:
        assert_valid("0.7", action_def("0.7", out), out)
    return out


# -- 1.0 builders -------------------------------------------------------------------------------

SESSION = "ahp-session:/33333333-3333-3333-3333-333333333333"
CHAT = "ahp-chat:/11111111-1111-1111-1111-111111111111"
OTHER_CHAT = "ahp-chat:/22222222-2222-2222-2222-222222222222"
ANNOTATIONS = SESSION + "/annotations"
TERMINAL = "ahp-terminal:/t1"
DIR_A = "file:///work/a"
DIR_B = "file:///work/b"
NOW = "2026-01-01T00:00:00.000Z"
ERROR = {"errorType": "boom", "message": "it broke"}
CONTENT_REF = {"uri": "ahp-content:/input/1", "contentType": "application/json"}


def message(kind: str = "user", text: str = "hi") -> dict[str, Any]:
    return {"text": text, "origin": {"kind": kind}}


def markdown(part_id: str = "p1", content: str = "hello") -> dict[str, Any]:
    return {"kind": "markdown", "id": part_id, "content": content}


def error_part(resumable: bool | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"kind": "error", "error": ERROR}
    if resumable is not None:
        part["resumable"] = resumable
    return part


def running_tool(tool_input: Any = None, **extra: Any) -> dict[str, Any]:
    tool = {
        "toolCallId": "tc-1",
        "toolName": "read_file",
        "displayName": "Read file",
        "invocationMessage": "Reading",
        "confirmed": "not-needed",
        "status": "running",
        **extra,
    }
    if tool_input is not None:
        tool["toolInput"] = tool_input
    return tool


def turn(parts: list[Any], state: str = "complete", **extra: Any) -> dict[str, Any]:
    return {"id": "t1", "message": message(), "responseParts": parts, "state": state, **extra}


def chat_state(**extra: Any) -> dict[str, Any]:
    return {
        "resource": CHAT,
        "title": "Chat",
        "status": 1,
        "modifiedAt": NOW,
        "turns": [],
        **extra,
    }


def chat_summary(**extra: Any) -> dict[str, Any]:
    return {"resource": CHAT, "title": "Chat", "status": 1, "modifiedAt": NOW, **extra}


def session_state(**extra: Any) -> dict[str, Any]:
    return {
        "provider": "echo",
        "title": "Session",
        "status": 1,
        "lifecycle": "ready",
        "activeClients": [],
        "chats": [],
        **extra,
    }


def session_summary(**extra: Any) -> dict[str, Any]:
    return {
        "provider": "echo",
        "title": "Session",
        "status": 1,
        "resource": SESSION,
        "createdAt": NOW,
        "modifiedAt": NOW,
        **extra,
    }


def agent(**extra: Any) -> dict[str, Any]:
    return {"provider": "echo", "displayName": "Echo", "description": "", "models": [], **extra}


def plugin(**extra: Any) -> dict[str, Any]:
    return {"id": "plug", "uri": "file:///p", "name": "Plugin", "type": "plugin", **extra}


def mcp_server(**extra: Any) -> dict[str, Any]:
    return {
        "id": "mcp",
        "uri": "file:///m",
        "name": "Server",
        "type": "mcpServer",
        "state": {"kind": "ready"},
        **extra,
    }


def session_claim(**extra: Any) -> dict[str, Any]:
    return {"kind": "session", "session": SESSION, "chat": CHAT, **extra}


def terminal_state(lifecycle: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "title": "bash",
        "content": [],
        "lifecycle": lifecycle,
        "claim": {"kind": "client", "clientId": "me"},
        **extra,
    }


def annotation_0_7(turn_id: str) -> dict[str, Any]:
    """A 0.7 ``Annotation``: a ``turnId`` where 1.0 has an ``origin``."""
    value = {**annotation({}), "turnId": turn_id}
    del value["origin"]
    return value


def annotation(origin: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "a1",
        "origin": origin,
        "resource": "file:///work/a/x.py",
        "resolved": False,
        "entries": [{"id": "e1", "text": "why?"}],
    }


# -- sample generation from the schemas ---------------------------------------------------------

_DEPTH = 5


def generate(defs: dict[str, Any], node: Any, rng: random.Random, depth: int, full: bool) -> Any:
    """A value of schema ``node``: required keys always, optional ones at random when
    ``full`` (to ``_DEPTH`` references deep), one ``oneOf`` member at random."""
    if not isinstance(node, dict) or not node:
        return None
    if "$ref" in node:
        return generate(defs, defs[node["$ref"].rsplit("/", 1)[1]], rng, depth + 1, full)
    if "const" in node:
        return node["const"]
    if "enum" in node:
        return rng.choice(node["enum"])
    if "oneOf" in node:
        return generate(defs, rng.choice(node["oneOf"]), rng, depth, full)
    if "allOf" in node and "type" not in node:
        merged: dict[str, Any] = {}
        for member in node["allOf"]:
            merged.update(generate(defs, member, rng, depth, full))
        return merged
    kind = node.get("type")
    if kind == "object" or "properties" in node:
        required = set(node.get("required", ()))
        out = {}
        for name, sub in node.get("properties", {}).items():
            if name in required or (full and depth < _DEPTH and rng.random() < 0.7):
                out[name] = generate(defs, sub, rng, depth + 1, full)
        return out
    if kind == "array":
        if full and depth < _DEPTH and rng.random() < 0.8:
            return [generate(defs, node.get("items", {}), rng, depth + 1, full)]
        return []
    if kind == "string":
        return "s"
    if kind in ("number", "integer"):
        return 1
    if kind == "boolean":
        return rng.random() < 0.5
    return None


def members(defs: dict[str, Any], union: str) -> list[str]:
    return [m["$ref"].rsplit("/", 1)[1] for m in defs[union]["oneOf"]]


ACTION_DEFS_1_0 = members(DEFS_1_0, "StateAction")
ACTION_DEFS_0_7 = members(DEFS_0_7, "StateAction")


def action_type(defs: dict[str, Any], name: str) -> str:
    return str(defs[name]["properties"]["type"]["const"])


def leaf_action_defs(defs: dict[str, Any], names: list[str]) -> list[str]:
    """Union members resolved to their object defs (``ChatToolCallConfirmedAction``
    is itself a union of approved/denied)."""
    out: list[str] = []
    for name in names:
        if "oneOf" in defs[name]:
            out.extend(leaf_action_defs(defs, members(defs, name)))
        else:
            out.append(name)
    return out


LEAF_ACTIONS_1_0 = leaf_action_defs(DEFS_1_0, ACTION_DEFS_1_0)
LEAF_ACTIONS_0_7 = leaf_action_defs(DEFS_0_7, ACTION_DEFS_0_7)
LEAF_ACTIONS = {"0.7": LEAF_ACTIONS_0_7, "1.0": LEAF_ACTIONS_1_0}
SEEDS = range(6)


def samples(version: str, name: str, *, full: bool = True) -> Iterator[Any]:
    defs = LOOSE[version]
    yield generate(defs, defs[name], random.Random(f"{name}-min"), 0, False)
    if full:
        for seed in SEEDS:
            yield generate(defs, defs[name], random.Random(f"{name}-{seed}"), 0, True)


UNKNOWN_SESSION = "ahp-session:/unknown"


def chat_of(session: str, turn_id: str | None) -> str | None:
    """The host's lookup, as tests see it: every session but one has ``CHAT``."""
    return None if session == UNKNOWN_SESSION else CHAT


# ==============================================================================================
# The tables
# ==============================================================================================


def test_actions_table_covers_every_1_0_action_type_once() -> None:
    wire_types = {action_type(DEFS_1_0, name) for name in LEAF_ACTIONS_1_0}
    assert set(view.ACTIONS) == wire_types == set(ACTION_INTRODUCED_IN)
    parts = (view.IDENTITY_ACTIONS, view.TRANSFORMED_ACTIONS, view.DROPPED_ACTIONS)
    assert sum(len(p) for p in parts) == len(view.ACTIONS) == 106
    assert set().union(*parts) == set(view.ACTIONS)


def test_dropped_actions_are_exactly_those_introduced_after_0_7_0() -> None:
    newer = {t for t, tag in ACTION_INTRODUCED_IN.items() if parse_version(tag) > (0, 7, 0)}
    assert newer == view.DROPPED_ACTIONS
    in_0_7 = {action_type(DEFS_0_7, name) for name in LEAF_ACTIONS_0_7}
    assert in_0_7 == set(view.ACTIONS) - view.DROPPED_ACTIONS


#: 1.0 defs that differ from 0.7 but whose every 1.0 value is already a valid 0.7 value.
_SAME_OUTBOUND_JSON = {
    "FileEdit": "named models FileEditSide/FileEditDiffStats, same JSON (1.0.0 Changed)",
    "ToolResultFileEditContent": "same as FileEdit",
    "ProtectedResourceMetadata": "1.0 only dropped two optional RFC 9728 fields",
    "ChangesetContentChangedAction": "1.0 only dropped the optional `error`",
    "FileEditSide": "the FileEdit `before`/`after` object, now named",
    "FileEditDiffStats": "the FileEdit `diff` object, now named",
    "FileEditCollection": "the preview `edits` object, now named",
}


def _dirty_types() -> set[str]:
    """1.0 types that differ from their 0.7 def, are new, or contain such a type."""

    def refs(node: Any, acc: set[str]) -> set[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "$ref":
                    acc.add(value.rsplit("/", 1)[1])
                elif key not in ("description",) or not isinstance(value, str):
                    refs(value, acc)
        elif isinstance(node, list):
            for item in node:
                refs(item, acc)
        return acc

    def bare(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: bare(v)
                for k, v in node.items()
                if not (k == "description" and isinstance(v, str))
            }
        if isinstance(node, list):
            return [bare(v) for v in node]
        return node

    old = _merged_defs(SCHEMA_0_7)
    dirty = {n for n in DEFS_1_0 if n not in old or bare(DEFS_1_0[n]) != bare(old[n])}
    dirty -= set(_SAME_OUTBOUND_JSON)
    # Only a required list relaxed (T | undefined, identical on the wire) is no difference.
    for name, key in _NOT_REALLY_REQUIRED.items():
        relaxed = copy.deepcopy(bare(old[name]))
        relaxed["required"] = [k for k in relaxed["required"] if k != key]
        if relaxed == bare(DEFS_1_0[name]):
            dirty.discard(name)
    graph = {name: refs(schema, set()) for name, schema in DEFS_1_0.items()}
    while True:
        grown = {n for n, r in graph.items() if r & dirty and n not in dirty}
        if not grown:
            return dirty
        dirty |= grown


def test_identity_actions_are_the_0_7_action_types_whose_schema_is_unchanged() -> None:
    dirty = _dirty_types()
    in_both = [name for name in LEAF_ACTIONS_1_0 if name in DEFS_0_7]
    changed = {action_type(DEFS_1_0, name) for name in in_both if name in dirty}
    unchanged = {action_type(DEFS_1_0, name) for name in in_both} - changed
    assert unchanged == view.IDENTITY_ACTIONS


#: Types the host sends whose 1.0 def differs but that need no entry of their own,
#: each with the reason.
_NO_ENTRY_NEEDED = {
    "AhpErrorCode": "enum: -32006 is never sent by a 1.0 host, -32011 is in 0.7 errors.ts",
    "AhpErrorDetailsMap": "documentation map; its members' JSON is unchanged",
    "ContainerCustomizationBase": "abstract base of the plugin/directory entries",
    "PermissionDeniedErrorData": "echoes the client's own ResourceRequestParams",
    "ProtocolNotification": "a union of params: NOTIFICATIONS has each method",
    "SessionMetadata": "inlined into SessionState and SessionSummary",
    "ToolCallParameterFields": "abstract base of the tool-call states",
}


def test_every_changed_type_the_host_sends_has_a_table_entry() -> None:
    dirty = _dirty_types() & set(DEFS_0_7)  # types 0.7 has: the rest a 0.7 client never gets
    host_sends = {
        name
        for name in dirty
        if not (name.endswith("Params") and name not in view.OUTBOUND)  # client → host
        and not name.endswith("Action")  # ACTIONS, by wire type
    }
    assert host_sends - set(view.OUTBOUND) == set(_NO_ENTRY_NEEDED)


def test_removed_fields_are_exactly_the_1_0_only_keys_of_each_type() -> None:
    for name, removed in view.REMOVED_FIELDS.items():
        added = set(DEFS_1_0[name].get("properties", {})) - set(
            DEFS_0_7[name].get("properties", {})
        )
        assert removed == added, name


def test_every_type_the_host_sends_with_new_keys_removes_them() -> None:
    host_sends = set(view.OUTBOUND) | {name for name in LEAF_ACTIONS_1_0 if name in DEFS_0_7}
    for name in sorted(host_sends & set(DEFS_0_7)):
        added = set(DEFS_1_0[name].get("properties", {})) - set(
            DEFS_0_7[name].get("properties", {})
        )
        if name.endswith("Params") or not added:
            continue
        assert added <= view.REMOVED_FIELDS.get(name, set()), name


# ==============================================================================================
# Every action, generated from the schemas
# ==============================================================================================


@pytest.mark.parametrize("name", LEAF_ACTIONS_1_0)
def test_every_1_0_action_projects_to_none_or_a_valid_0_7_action(name: str) -> None:
    wire = action_type(DEFS_1_0, name)
    minimal = next(samples("1.0", name, full=False))
    assert_valid("1.0", "StateAction", minimal)
    out = view.action(minimal)
    assert out is None or not list(_validator("0.7", "StateAction", True).iter_errors(out))
    for sample in samples("1.0", name):
        out = projected_action(sample)
        if wire in view.DROPPED_ACTIONS:
            assert out is None
        elif wire in view.IDENTITY_ACTIONS:
            assert out is sample
        else:
            assert out is not None or wire in {"chat/responsePart", "session/chatUpdated"}


@pytest.mark.parametrize("name", LEAF_ACTIONS_1_0)
def test_envelopes_carry_the_projected_action(name: str) -> None:
    sample = next(samples("1.0", name, full=False))
    envelope = {"channel": CHAT, "action": sample, "serverSeq": 7}
    out = view.envelope(envelope)
    if action_type(DEFS_1_0, name) in view.DROPPED_ACTIONS:
        assert out is None
        assert view.notification("action", envelope) is None
    else:
        assert out is not None
        assert_valid("0.7", "ActionEnvelope", out)
        assert out["action"] == view.action(sample)
        assert (out is envelope) == (view.action(sample) is sample)


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("root", "RootState"),
        ("session", "SessionState"),
        ("chat", "ChatState"),
        ("terminal", "TerminalState"),
        ("changeset", "ChangesetState"),
        ("annotations", "AnnotationsState"),
        ("resourceWatch", "ResourceWatchState"),
    ],
)
def test_every_state_kind_projects_to_a_valid_0_7_state(kind: str, name: str) -> None:
    for sample in samples("1.0", name):
        assert_valid("1.0", name, sample)
        before = copy.deepcopy(sample)
        out = view.state(kind, sample)
        assert sample == before
        assert_valid("0.7", name, out)


@pytest.mark.parametrize(
    "name",
    [
        "SessionSummary",
        "ListSessionsResult",
        "SessionAddedParams",
        "AuthRequiredParams",
        "ResolveSessionConfigResult",
        "SessionInputRequest",
        "Customization",
        "AgentInfo",
        "TerminalInfo",
    ],
)
def test_generated_values_of_other_sent_types_project_to_valid_0_7(name: str) -> None:
    for sample in samples("1.0", name):
        projected(name, sample)


# ==============================================================================================
# Identity, purity, totality
# ==============================================================================================


def test_an_unchanged_action_is_returned_itself() -> None:
    delta = {"type": "chat/delta", "turnId": "t1", "partId": "p1", "content": "more"}
    assert projected_action(delta) is delta
    part = {"type": "chat/responsePart", "turnId": "t1", "part": markdown()}
    assert projected_action(part) is part
    assert "chat/delta" in view.IDENTITY_ACTIONS
    assert "chat/responsePart" not in view.IDENTITY_ACTIONS  # depends on the part


def test_an_unchanged_state_and_result_are_returned_themselves() -> None:
    chat = chat_state(turns=[turn([markdown()])])
    assert projected("ChatState", chat) is chat
    summary = session_summary()
    assert view.session_summary(summary) is summary
    result = {"items": [summary]}
    assert view.command_result("listSessions", result) is result
    fetched: dict[str, Any] = {}
    assert view.command_result("fetchTurns", fetched) is fetched


@pytest.mark.parametrize(
    "value",
    [None, 3, "x", [], {}, {"type": 5}, {"type": "x-vendor/thing", "payload": [1]}],
)
def test_unknown_or_malformed_actions_pass_through(value: Any) -> None:
    assert view.action(value) is value
    assert view.inbound_action(value) is value


def test_unknown_keys_and_variants_pass_through() -> None:
    part = {"kind": "x-future", "data": 1}
    active = {"id": "t1", "startedAt": NOW, "message": message(), "responseParts": [part]}
    chat = chat_state(activeTurn=active, **{"x-extension": True})
    out = view.state("chat", chat)
    assert out is chat
    custom = {"id": "c", "uri": "u", "name": "n", "type": "x-new"}
    assert view.project("Customization", custom) is custom
    assert view.state("canvas", {"anything": 1}) == {"anything": 1}
    assert view.notification("x-vendor/ping", {"a": 1}) == {"a": 1}
    assert view.command_result("x-vendor/cmd", [1]) == [1]


def test_malformed_values_never_raise() -> None:
    rng = random.Random(0)
    junk: list[Any] = [None, 1, "s", [], {}, [None], {"kind": None}, {"type": []}]
    for name in view.OUTBOUND:
        for value in junk:
            view.project(name, value)
        for value in samples("1.0", name, full=False) if name in DEFS_1_0 else ():
            if isinstance(value, dict):
                for key in list(value):
                    broken = dict(value)
                    broken[key] = rng.choice(junk)
                    view.project(name, broken)


def test_malformed_inbound_messages_never_raise() -> None:
    rng = random.Random(1)
    junk: list[Any] = [None, 1, "s", [], {}, [None], {"kind": None}, {"type": []}, [{}]]

    def odd_lookup(session: str, turn_id: str | None) -> Any:
        return 42  # a lookup that answers nonsense is ignored

    for name in LEAF_ACTIONS_0_7:
        for value in samples("0.7", name):
            for key in [k for k in value if k != "type"]:
                broken = {**value, key: rng.choice(junk)}
                for channel in (None, ANNOTATIONS, CHAT, 7):
                    view.inbound_action(broken, channel=channel, chat_of=odd_lookup)
                    view.inbound_action(broken, channel=channel, chat_of=chat_of)
    for method in view.INBOUND_PARAMS:
        for value in junk:
            view.inbound_params(method, value, chat_of=chat_of)
            view.inbound_params(method, {"channel": value, "action": value, "claim": value})
    for value in junk:
        view.fork_source({"fork": value})
        view.fork_request({"channel": value, "fork": {"session": "s", "turnId": "t"}}, CHAT)
        view.inbound_error(value)


# ==============================================================================================
# Chat: errors, response parts, tool calls, messages
# ==============================================================================================


@pytest.mark.parametrize("resumable", [None, True, False])
def test_chat_error_action_carries_the_error_info_not_the_part(resumable: bool | None) -> None:
    action = {"type": "chat/error", "turnId": "t1", "duration": 5, "part": error_part(resumable)}
    out = projected_action(action)
    assert out == {"type": "chat/error", "turnId": "t1", "duration": 5, "error": ERROR}


def test_a_finished_error_turn_moves_its_trailing_error_part_to_turn_error() -> None:
    failed = turn([markdown(), error_part(resumable=True)], state="error")
    out = projected("Turn", failed)
    assert out["error"] == ERROR
    assert out["responseParts"] == [markdown()]


@pytest.mark.parametrize(
    ("parts", "state"),
    [
        ([error_part(), markdown()], "error"),  # not the last part
        ([markdown(), error_part()], "complete"),  # not an error turn (resumed, completed)
        ([error_part()], "cancelled"),
    ],
)
def test_other_error_parts_are_dropped(parts: list[Any], state: str) -> None:
    out = projected("Turn", turn(parts, state=state))
    assert "error" not in out
    assert out["responseParts"] == [markdown()] * (len(parts) - 1)


def test_error_parts_in_the_active_turn_are_dropped() -> None:
    active = {
        "id": "t1",
        "startedAt": NOW,
        "message": message(),
        "responseParts": [markdown(), error_part(resumable=True), markdown("p2")],
    }
    out = projected("ChatState", chat_state(activeTurn=active))
    assert out["activeTurn"]["responseParts"] == [markdown(), markdown("p2")]


def test_a_response_part_action_with_an_error_part_is_not_sent() -> None:
    action = {"type": "chat/responsePart", "turnId": "t1", "part": error_part()}
    assert projected_action(action) is None


def test_turns_loaded_projects_each_turn() -> None:
    action = {"type": "chat/turnsLoaded", "turns": [turn([error_part()], state="error")]}
    out = projected_action(action)
    assert out["turns"][0]["error"] == ERROR


def test_resource_response_part_is_only_a_rename() -> None:
    part = {"kind": "contentRef", "uri": "ahp-content:/x", "contentType": "text/plain"}
    action = {"type": "chat/responsePart", "turnId": "t1", "part": part}
    assert projected_action(action) is action


@pytest.mark.parametrize(
    "status_fields",
    [
        {"status": "running", "confirmed": "not-needed"},
        {"status": "pending-confirmation"},
        {
            "status": "completed",
            "confirmed": "not-needed",
            "success": True,
            "pastTenseMessage": "Read",
        },
        {"status": "cancelled", "reason": "skipped"},
    ],
)
def test_a_content_ref_tool_input_is_omitted_and_a_string_kept(
    status_fields: dict[str, Any],
) -> None:
    base = {
        "toolCallId": "tc-1",
        "toolName": "read_file",
        "displayName": "Read file",
        "invocationMessage": "Reading",
        **status_fields,
    }
    by_ref = projected("ToolCallState", {**base, "toolInput": CONTENT_REF})
    assert "toolInput" not in by_ref
    inline = {**base, "toolInput": '{"path": "a"}'}
    assert projected("ToolCallState", inline) is inline


def test_tool_input_refs_are_omitted_wherever_tool_calls_appear() -> None:
    part = {"kind": "toolCall", "toolCall": running_tool(CONTENT_REF)}
    out = projected("ChatState", chat_state(turns=[turn([part])]))
    assert "toolInput" not in out["turns"][0]["responseParts"][0]["toolCall"]
    request = {
        "id": "r1",
        "chat": CHAT,
        "kind": "toolClientExecution",
        "turnId": "t1",
        "clientId": "me",
        "toolCall": running_tool(CONTENT_REF),
    }
    out = projected("SessionState", session_state(inputNeeded=[request]))
    assert "toolInput" not in out["inputNeeded"][0]["toolCall"]
    ready = {
        "type": "chat/toolCallReady",
        "turnId": "t1",
        "toolCallId": "tc-1",
        "invocationMessage": "Reading",
        "toolInput": CONTENT_REF,
    }
    assert "toolInput" not in projected_action(ready)


def test_tool_call_ready_loses_contributor_and_intention() -> None:
    ready = {
        "type": "chat/toolCallReady",
        "turnId": "t1",
        "toolCallId": "tc-1",
        "invocationMessage": "Reading",
        "toolInput": "{}",
        "contributor": {"kind": "mcp", "customizationId": "mcp"},
        "intention": "look",
    }
    out = projected_action(ready)
    assert out == {k: v for k, v in ready.items() if k not in ("contributor", "intention")}


def test_tool_call_delta_without_content_gets_an_empty_one() -> None:
    delta = {"type": "chat/toolCallDelta", "turnId": "t1", "toolCallId": "tc-1"}
    assert projected_action({**delta, "invocationMessage": "x"})["content"] == ""
    with_content = {**delta, "content": "{"}
    assert projected_action(with_content) is with_content


@pytest.mark.parametrize(
    ("wrap", "path"),
    [
        (
            lambda m: {"type": "chat/turnStarted", "turnId": "t", "startedAt": NOW, "message": m},
            ("message",),
        ),
        (
            lambda m: {"type": "chat/pendingMessageSet", "kind": "queued", "id": "q", "message": m},
            ("message",),
        ),
        (lambda m: {"type": "chat/draftChanged", "draft": m}, ("draft",)),
        (
            lambda m: {
                "type": "chat/toolCallConfirmed",
                "turnId": "t",
                "toolCallId": "tc",
                "approved": False,
                "reason": "denied",
                "userSuggestion": m,
            },
            ("userSuggestion",),
        ),
    ],
)
def test_automation_messages_are_system_notifications(
    wrap: Callable[[dict[str, Any]], dict[str, Any]], path: tuple[str, ...]
) -> None:
    out = projected_action(wrap(message("automation")))
    for key in path:
        out = out[key]
    assert out["origin"] == {"kind": "systemNotification"}
    user = wrap(message("user"))
    assert view.action(user) is user


def test_automation_messages_in_chat_state_are_system_notifications() -> None:
    queued = {"id": "q", "message": message("automation")}
    chat = chat_state(
        turns=[{**turn([]), "message": message("automation")}],
        queuedMessages=[queued],
        draft=message("automation"),
    )
    out = projected("ChatState", chat)
    assert out["turns"][0]["message"]["origin"]["kind"] == "systemNotification"
    assert out["queuedMessages"][0]["message"]["origin"]["kind"] == "systemNotification"
    assert out["draft"]["origin"]["kind"] == "systemNotification"


# ==============================================================================================
# Chat and session: summaries, working directories, 1.0-only fields
# ==============================================================================================

_CHAT_1_0_ONLY = {
    "movable": True,
    "changes": {"files": 1, "additions": 2, "deletions": 0},
    "changesets": [],
    "backgroundWork": [],
    "canvases": [],
}


def test_chat_state_loses_1_0_only_fields() -> None:
    out = projected("ChatState", chat_state(**_CHAT_1_0_ONLY))
    assert out == chat_state()


@pytest.mark.parametrize(
    ("directories", "primary"),
    [([DIR_A, DIR_B], DIR_A), ([DIR_B], DIR_B), ([], None), (None, None)],
)
def test_primary_working_directory_is_index_0(directories: Any, primary: Any) -> None:
    extra = {} if directories is None else {"workingDirectories": directories}
    for name, value in (("ChatState", chat_state(**extra)), ("ChatSummary", chat_summary(**extra))):
        out = projected(name, value)
        assert out.get("primaryWorkingDirectory") == primary
        assert out.get("workingDirectories") == directories


def test_chat_summaries_in_session_state_and_chat_added() -> None:
    summary = chat_summary(workingDirectories=[DIR_B, DIR_A], movable=False)
    out = projected("SessionState", session_state(chats=[summary]))
    assert out["chats"] == [
        chat_summary(workingDirectories=[DIR_B, DIR_A], primaryWorkingDirectory=DIR_B)
    ]
    added = projected_action({"type": "session/chatAdded", "summary": summary})
    assert added["summary"] == out["chats"][0]


def test_chat_updated_projects_its_changes() -> None:
    action = {
        "type": "session/chatUpdated",
        "chat": CHAT,
        "changes": {"workingDirectories": [DIR_A], "movable": True, "status": 8},
    }
    out = projected_action(action)
    assert out["changes"] == {
        "workingDirectories": [DIR_A],
        "primaryWorkingDirectory": DIR_A,
        "status": 8,
    }
    title = {"type": "session/chatUpdated", "chat": CHAT, "changes": {"title": "T"}}
    assert projected_action(title) is title


@pytest.mark.parametrize(
    "changes", [{"movable": False}, {"changes": {"files": 1, "additions": 1, "deletions": 1}}]
)
def test_chat_updated_with_only_1_0_only_changes_is_not_sent(changes: dict[str, Any]) -> None:
    action = {"type": "session/chatUpdated", "chat": CHAT, "changes": changes}
    assert projected_action(action) is None


def test_session_state_loses_origin_and_renames_failed() -> None:
    origin = {"kind": "automation", "automation": "ahp-automations://a", "run": "ahp-run:/r"}
    failed = session_state(lifecycle="failed", creationError=ERROR, origin=origin)
    out = projected("SessionState", failed)
    assert out == session_state(lifecycle="creationFailed", creationError=ERROR)
    assert projected("SessionLifecycle", "ready") == "ready"


_SUMMARY_1_0_ONLY = {
    "chats": [{"resource": CHAT, "title": "Chat"}],
    "defaultChat": CHAT,
    "origin": {"kind": "automation", "automation": "ahp-automations://a", "run": "ahp-run:/r"},
}


def test_session_summary_loses_chats_default_chat_and_origin() -> None:
    summary = session_summary(**_SUMMARY_1_0_ONLY)
    assert_valid("1.0", "SessionSummary", summary)
    assert view.session_summary(summary) == session_summary()
    listed = view.command_result("listSessions", {"items": [summary], "nextCursor": "c"})
    assert listed == {"items": [session_summary()], "nextCursor": "c"}
    assert_valid("0.7", "ListSessionsResult", listed)
    added = view.notification("root/sessionAdded", {"channel": "ahp-root://", "summary": summary})
    assert added == {"channel": "ahp-root://", "summary": session_summary()}
    assert_valid("0.7", "SessionAddedParams", added)


def test_session_summary_changed_drops_1_0_only_changes_and_empty_notifications() -> None:
    params = {
        "channel": "ahp-root://",
        "session": SESSION,
        "changes": {"title": "New", **_SUMMARY_1_0_ONLY},
    }
    assert_valid("1.0", "SessionSummaryChangedParams", params)
    out = view.notification("root/sessionSummaryChanged", params)
    assert out == {**params, "changes": {"title": "New"}}
    assert_valid("0.7", "SessionSummaryChangedParams", out)
    only_new = {**params, "changes": {"defaultChat": OTHER_CHAT}}
    assert view.notification("root/sessionSummaryChanged", only_new) is None
    plain = {**params, "changes": {"status": 8}}
    assert view.notification("root/sessionSummaryChanged", plain) is plain


# ==============================================================================================
# Customizations
# ==============================================================================================


@pytest.mark.parametrize(
    ("enablement", "enabled"),
    [
        (None, True),
        ([], True),
        ([{"kind": "global", "enabled": False}], False),
        ([{"kind": "session", "enabled": True}, {"kind": "global", "enabled": False}], True),
        ([{"kind": "workspace", "uri": DIR_A, "enabled": False}], False),
    ],
)
def test_enablement_becomes_the_effective_enabled(enablement: Any, enabled: bool) -> None:
    extra = {} if enablement is None else {"enablement": enablement}
    for value in (plugin(**extra), mcp_server(**extra)):
        out = projected("Customization", value)
        assert out["enabled"] is enabled
        assert "enablement" not in out
    toggled = {"type": "session/customizationToggled", "id": "plug", "enablement": enablement or []}
    assert projected_action(toggled) == {
        "type": "session/customizationToggled",
        "id": "plug",
        "enabled": enabled,
    }


def test_a_first_decision_of_an_unknown_kind_is_enabled_as_the_1_0_reducer_has_it() -> None:
    """Regression (found by test_views_cross_check): the 1.0 reducer writes ``true``
    into a toggled directory or child when the first decision is of a kind it does not
    know (docs/protocol.md); the view read that decision's own ``enabled: false``, so
    the 0.7 client of a toggled directory disagreed with the 1.0 state. Not
    schema-checked: an unknown kind is not a valid 1.0 value, only a tolerated one."""
    future = [{"kind": "futureScope", "enabled": False}, {"kind": "global", "enabled": False}]
    for value in (plugin(enablement=future), mcp_server(enablement=future)):
        assert view.project("Customization", value)["enabled"] is True
    toggled = {"type": "session/customizationToggled", "id": "dir", "enablement": future}
    assert view.action(toggled) == {
        "type": "session/customizationToggled",
        "id": "dir",
        "enabled": True,
    }
    directory = {
        "id": "dir",
        "uri": "file:///d",
        "name": "Dir",
        "type": "directory",
        "enabled": True,
        "contents": "",
        "writable": True,
    }
    _commutes(
        "session",
        session_state(customizations=[directory]),
        toggled,
        (reduce_session_1_0, reduce_session_0_7),
        (types_1_0.SessionState, types.SessionState),
    )


def test_container_children_and_child_enablement() -> None:
    child_server = mcp_server(id="child", enablement=[{"kind": "global", "enabled": False}])
    skill = {"id": "sk", "uri": "file:///s", "name": "Skill", "type": "skill", "enabled": False}
    client_plugin = plugin(
        nonce="n1",
        children=[child_server, skill],
        childEnablement={"Server": [{"kind": "global", "enabled": True}]},
    )
    out = projected("ClientPluginCustomization", client_plugin)
    assert "childEnablement" not in out
    assert out["enabled"] is True
    assert out["children"][0]["enabled"] is False
    assert out["children"][1] is skill
    directory = {
        "id": "d",
        "uri": "file:///d",
        "name": "Dir",
        "type": "directory",
        "enabled": False,
        "contents": "skill",
        "writable": True,
        "children": [skill],
    }
    assert projected("Customization", directory) is directory


def test_customizations_are_projected_wherever_they_appear() -> None:
    server = mcp_server(enablement=[{"kind": "global", "enabled": False}])
    root = projected("RootState", {"agents": [agent(customizations=[server])]})
    assert root["agents"][0]["customizations"][0]["enabled"] is False
    session = projected(
        "SessionState",
        session_state(
            customizations=[server],
            activeClients=[{"clientId": "me", "tools": [], "customizations": [plugin()]}],
        ),
    )
    assert session["customizations"][0]["enabled"] is False
    assert session["activeClients"][0]["customizations"][0]["enabled"] is True
    for action in (
        {"type": "session/customizationsChanged", "customizations": [server]},
        {"type": "session/customizationUpdated", "customization": server},
        {
            "type": "session/activeClientSet",
            "activeClient": {"clientId": "me", "tools": [], "customizations": [plugin()]},
        },
        {"type": "root/agentsChanged", "agents": [agent(customizations=[server])]},
    ):
        assert projected_action(action) != action


def test_mcp_server_starting_state_loses_blocking() -> None:
    starting = {"kind": "starting", "blocking": True}
    action = {"type": "session/mcpServerStateChanged", "id": "mcp", "state": starting}
    assert projected_action(action)["state"] == {"kind": "starting"}
    out = projected("Customization", mcp_server(state=starting))
    assert out["state"] == {"kind": "starting"}


def test_config_schemas_lose_min_and_max_items_at_every_depth() -> None:
    prop = {
        "type": "array",
        "title": "Dirs",
        "minItems": 1,
        "maxItems": 3,
        "items": {
            "type": "object",
            "title": "Dir",
            "properties": {
                "tags": {"type": "array", "title": "Tags", "minItems": 0},
            },
        },
    }
    schema = {"type": "object", "properties": {"dirs": prop}}
    model = {"id": "m", "provider": "echo", "name": "M", "configSchema": schema}
    root = projected(
        "RootState",
        {"agents": [agent(models=[model])], "config": {"schema": schema, "values": {}}},
    )
    for out_schema in (root["config"]["schema"], root["agents"][0]["models"][0]["configSchema"]):
        dirs = out_schema["properties"]["dirs"]
        assert "minItems" not in dirs
        assert "maxItems" not in dirs
        assert "minItems" not in dirs["items"]["properties"]["tags"]
    resolved = view.command_result("resolveSessionConfig", {"schema": schema, "values": {}})
    assert_valid("0.7", "ResolveSessionConfigResult", resolved)
    assert "minItems" not in resolved["schema"]["properties"]["dirs"]


@pytest.mark.parametrize(
    ("capability", "expected"),
    [
        ({"immutablePrimary": True}, {"requiresPrimary": True}),
        ({"immutablePrimary": False}, {"requiresPrimary": False}),
        ({"primaryReplacement": True}, {"requiresPrimary": True}),
        ({"immutablePrimary": True, "primaryReplacement": True}, {"requiresPrimary": True}),
        ({}, {}),
    ],
)
def test_immutable_primary_becomes_requires_primary(
    capability: dict[str, Any], expected: dict[str, Any]
) -> None:
    info = agent(capabilities={"multipleWorkingDirectories": capability})
    out = projected("AgentInfo", info)
    assert out["capabilities"]["multipleWorkingDirectories"] == expected


# ==============================================================================================
# Terminals, annotations, changesets, auth, results
# ==============================================================================================


@pytest.mark.parametrize(
    ("lifecycle", "exit_code"),
    [
        ({"status": "running"}, None),
        ({"status": "exited", "exitCode": 0}, 0),
        ({"status": "exited", "exitCode": 137}, 137),
        ({"status": "exited"}, None),  # killed by a signal: 0.7 cannot say it
    ],
)
def test_terminal_lifecycle_becomes_exit_code(lifecycle: dict[str, Any], exit_code: Any) -> None:
    out = projected("TerminalState", terminal_state(lifecycle))
    assert "lifecycle" not in out
    assert out.get("exitCode") == exit_code
    info = {"resource": TERMINAL, "title": "bash", "claim": session_claim(), "lifecycle": lifecycle}
    root = projected("RootState", {"agents": [], "terminals": [info]})
    assert root["terminals"][0].get("exitCode") == exit_code
    changed = projected_action({"type": "root/terminalsChanged", "terminals": [info]})
    assert changed["terminals"] == root["terminals"]


def test_terminal_session_claims_lose_their_chat() -> None:
    claim = session_claim(turnId="t1", toolCallId="tc-1")
    expected = {"kind": "session", "session": SESSION, "turnId": "t1", "toolCallId": "tc-1"}
    assert projected_action({"type": "terminal/claimed", "claim": claim})["claim"] == expected
    state = projected("TerminalState", terminal_state({"status": "running"}, claim=claim))
    assert state["claim"] == expected
    client = {"type": "terminal/claimed", "claim": {"kind": "client", "clientId": "me"}}
    assert projected_action(client) is client


@pytest.mark.parametrize(
    ("origin", "turn_id"),
    [
        ({"session": SESSION, "chat": CHAT, "turnId": "t1"}, "t1"),
        ({"session": SESSION, "chat": CHAT}, ""),
        ({"session": SESSION}, ""),
    ],
)
def test_annotation_origin_becomes_turn_id(origin: dict[str, Any], turn_id: str) -> None:
    value = annotation(origin)
    out = projected("AnnotationsState", {"annotations": [value]})["annotations"][0]
    assert out == {**{k: v for k, v in value.items() if k != "origin"}, "turnId": turn_id}
    assert projected_action({"type": "annotations/set", "annotation": value})["annotation"] == out
    updated = {"type": "annotations/updated", "annotationId": "a1", "origin": origin}
    assert projected_action(updated) == {
        "type": "annotations/updated",
        "annotationId": "a1",
        "turnId": turn_id,
    }


def test_annotations_updated_without_origin_is_unchanged() -> None:
    updated = {"type": "annotations/updated", "annotationId": "a1", "resolved": True}
    assert projected_action(updated) is updated


def test_recomputing_changesets_are_computing() -> None:
    action = {"type": "changeset/statusChanged", "status": "recomputing"}
    assert projected_action(action) == {"type": "changeset/statusChanged", "status": "computing"}
    out = view.state("changeset", {"status": "recomputing", "files": []})
    assert out == {"status": "computing", "files": []}
    ready = {"type": "changeset/statusChanged", "status": "ready"}
    assert projected_action(ready) is ready


def test_auth_required_carries_the_resource_identifier() -> None:
    metadata = {"resource": "https://api.example.com", "scopes_supported": ["read"]}
    params = {"channel": "ahp-root://", "resource": metadata, "reason": "expired"}
    assert_valid("1.0", "AuthRequiredParams", params)
    out = view.notification("auth/required", params)
    assert out == {
        "channel": "ahp-root://",
        "resource": "https://api.example.com",
        "reason": "expired",
    }
    assert_valid("0.7", "AuthRequiredParams", out)


def test_initialize_result_loses_meta_and_automations_and_projects_snapshots() -> None:
    snapshot = {"resource": CHAT, "state": chat_state(movable=True), "fromSeq": 3}
    result = {
        "protocolVersion": "0.7.0",
        "serverSeq": 3,
        "snapshots": [snapshot],
        "_meta": {"x": 1},
        "automations": {},
    }
    assert_valid("1.0", "InitializeResult", result)
    out = view.command_result("initialize", result)
    assert out == {
        "protocolVersion": "0.7.0",
        "serverSeq": 3,
        "snapshots": [{"resource": CHAT, "state": chat_state(), "fromSeq": 3}],
    }
    assert_valid("0.7", "InitializeResult", out)


@pytest.mark.parametrize(
    ("resource", "state", "expected"),
    [
        (
            "ahp-root://",
            {
                "agents": [],
                "terminals": [
                    {
                        "resource": TERMINAL,
                        "title": "t",
                        "claim": {"kind": "client", "clientId": "me"},
                        "lifecycle": {"status": "running"},
                    }
                ],
            },
            {
                "agents": [],
                "terminals": [
                    {
                        "resource": TERMINAL,
                        "title": "t",
                        "claim": {"kind": "client", "clientId": "me"},
                    }
                ],
            },
        ),
        (SESSION, session_state(lifecycle="failed"), session_state(lifecycle="creationFailed")),
        (CHAT, chat_state(movable=True), chat_state()),
        (
            TERMINAL,
            terminal_state({"status": "exited", "exitCode": 1}),
            {k: v for k, v in terminal_state({}).items() if k != "lifecycle"} | {"exitCode": 1},
        ),
        (
            session_changeset(SESSION),
            {"status": "recomputing", "files": []},
            {"status": "computing", "files": []},
        ),
        (
            ANNOTATIONS,
            {"annotations": [annotation({"session": SESSION})]},
            {"annotations": [{**annotation({}), "turnId": ""}]},
        ),
    ],
)
def test_snapshots_project_by_the_kind_of_their_channel(
    resource: str, state: Any, expected: Any
) -> None:
    if "origin" in expected.get("annotations", [{}])[0]:
        del expected["annotations"][0]["origin"]
    snapshot = {"resource": resource, "state": state, "fromSeq": 1}
    assert_valid("1.0", "Snapshot", snapshot)
    out = view.command_result("subscribe", {"snapshot": snapshot})
    assert out == {"snapshot": {"resource": resource, "state": expected, "fromSeq": 1}}
    assert_valid("0.7", "SubscribeResult", out)


def test_reconnect_replay_leaves_out_dropped_envelopes() -> None:
    kept = {
        "channel": CHAT,
        "serverSeq": 2,
        "action": {"type": "chat/error", "turnId": "t1", "duration": 1, "part": error_part()},
    }
    dropped = {
        "channel": CHAT,
        "serverSeq": 3,
        "action": {"type": "chat/turnResume", "turnId": "t1"},
    }
    same = {
        "channel": CHAT,
        "serverSeq": 4,
        "action": {
            "type": "chat/usage",
            "turnId": "t1",
            "usage": {"inputTokens": 1, "outputTokens": 2},
        },
    }
    result = {"type": "replay", "actions": [kept, dropped, same], "missing": []}
    assert_valid("1.0", "ReconnectResult", result)
    out = view.command_result("reconnect", result)
    assert_valid("0.7", "ReconnectReplayResult", out)
    assert [e["serverSeq"] for e in out["actions"]] == [2, 4]
    assert out["actions"][0]["action"]["error"] == ERROR
    assert out["actions"][1] is same
    fallback = {
        "type": "snapshot",
        "snapshots": [{"resource": CHAT, "state": chat_state(canvases=[]), "fromSeq": 1}],
    }
    out = view.command_result("reconnect", fallback)
    assert out["snapshots"][0]["state"] == chat_state()


def test_host_requests_to_a_0_7_client_lose_meta() -> None:
    params = {"channel": "ahp-root://", "uri": "file:///x", "_meta": {"trace": "1"}}
    assert view.server_request_params("resourceRead", params) == {
        "channel": "ahp-root://",
        "uri": "file:///x",
    }
    plain = {"channel": "ahp-root://", "uri": "file:///x"}
    assert view.server_request_params("resourceRead", plain) is plain


def test_the_commands_0_7_lacks_are_listed() -> None:
    params_1_0 = {n.removesuffix("Params") for n in DEFS_1_0 if n.endswith("Params")}
    params_0_7 = {n.removesuffix("Params") for n in DEFS_0_7 if n.endswith("Params")}
    new = {name[0].lower() + name[1:] for name in params_1_0 - params_0_7}
    assert new == view.METHODS_NOT_IN_0_7


# ==============================================================================================
# The projection keeps reducers in step: view(reduce_1_0(s, a)) == reduce_0_7(view(s), view(a))
# ==============================================================================================


def _clock() -> float:
    return 9999.0


def _commutes(
    kind: str,
    state_1_0: dict[str, Any],
    action_1_0: dict[str, Any],
    reducers: tuple[Callable[..., Any], Callable[..., Any]],
    state_types: tuple[type[Any], type[Any]],
) -> None:
    reduce_new, reduce_old = reducers
    type_new, type_old = state_types
    after = reduce_new(
        codec.convert(state_1_0, type_new), codec.convert(action_1_0, types_1_0.StateAction), _clock
    )
    expected = view.state(kind, codec.to_builtins(after))
    projected_state = view.state(kind, state_1_0)
    projected_action_ = view.action(action_1_0)
    got = reduce_old(
        codec.convert(projected_state, type_old),
        codec.convert(projected_action_, types.StateAction),
        _clock,
    )

    def comparable(value: Any) -> Any:
        value = json.loads(codec.encode(value))
        value = {k: v for k, v in value.items() if k != "modifiedAt"}
        if "chats" in value:
            value["chats"] = [
                {k: v for k, v in c.items() if k != "modifiedAt"} for c in value["chats"]
            ]
        return value

    assert comparable(got) == comparable(expected)


def test_chat_error_commutes_with_the_reducers() -> None:
    active = {"id": "t1", "startedAt": NOW, "message": message(), "responseParts": [markdown()]}
    action = {"type": "chat/error", "turnId": "t1", "duration": 10, "part": error_part(True)}
    _commutes(
        "chat",
        chat_state(activeTurn=active, status=8),
        action,
        (reduce_chat_1_0, reduce_chat_0_7),
        (types_1_0.ChatState, types.ChatState),
    )


@pytest.mark.parametrize("enabled", [True, False])
def test_customization_toggled_commutes_with_the_reducers(enabled: bool) -> None:
    state = session_state(customizations=[plugin(), mcp_server()])
    for target in ("plug", "mcp"):
        action = {
            "type": "session/customizationToggled",
            "id": target,
            "enablement": [{"kind": "session", "enabled": enabled}],
        }
        _commutes(
            "session",
            state,
            action,
            (reduce_session_1_0, reduce_session_0_7),
            (types_1_0.SessionState, types.SessionState),
        )


def test_chat_updated_working_directories_commute_with_the_reducers() -> None:
    state = session_state(chats=[chat_summary(workingDirectories=[DIR_A])])
    action = {
        "type": "session/chatUpdated",
        "chat": CHAT,
        "changes": {"workingDirectories": [DIR_B, DIR_A]},
    }
    _commutes(
        "session",
        state,
        action,
        (reduce_session_1_0, reduce_session_0_7),
        (types_1_0.SessionState, types.SessionState),
    )


def test_creation_failed_commutes_with_the_reducers() -> None:
    action = {"type": "session/creationFailed", "error": ERROR}
    _commutes(
        "session",
        session_state(lifecycle="creating"),
        action,
        (reduce_session_1_0, reduce_session_0_7),
        (types_1_0.SessionState, types.SessionState),
    )


# ==============================================================================================
# Inbound: 0.7 → 1.0
# ==============================================================================================


#: Optional 0.7 keys 1.0 dropped, which inbound translation leaves in (1.0 ignores them).
_LEFT_IN = {"resource_encryption_alg_values_supported", "resource_encryption_enc_values_supported"}


def _without(value: Any, keys: set[str]) -> Any:
    if isinstance(value, dict):
        return {k: _without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_without(v, keys) for v in value]
    return value


def inbound(value: dict[str, Any], channel: str | None = CHAT) -> Any:
    """``value`` checked as a 0.7 action, translated, the result checked at 1.0."""
    assert_valid("0.7", action_def("0.7", value), value)
    before = copy.deepcopy(value)
    out = view.inbound_action(value, channel=channel, chat_of=chat_of)
    assert value == before, "the translation mutated its input"
    assert out is not None
    assert_valid("1.0", action_def("1.0", out), _without(out, _LEFT_IN))
    return out


@pytest.mark.parametrize("enabled", [True, False])
def test_inbound_customization_toggled_becomes_a_global_decision(enabled: bool) -> None:
    out = inbound({"type": "session/customizationToggled", "id": "plug", "enabled": enabled})
    assert out == {
        "type": "session/customizationToggled",
        "id": "plug",
        "enablement": [{"kind": "global", "enabled": enabled}],
    }


def _client_plugin_0_7(enabled: bool) -> dict[str, Any]:
    child = {
        "id": "child",
        "uri": "file:///m",
        "name": "Server",
        "type": "mcpServer",
        "enabled": not enabled,
        "state": {"kind": "stopped"},
    }
    return {**plugin(nonce="n"), "enabled": enabled, "children": [child]}


def test_inbound_published_customizations_carry_global_enablement() -> None:
    client = {"clientId": "me", "tools": [], "customizations": [_client_plugin_0_7(False)]}
    out = inbound({"type": "session/activeClientSet", "activeClient": client}, SESSION)
    published = out["activeClient"]["customizations"][0]
    assert published["enablement"] == [{"kind": "global", "enabled": False}]
    assert published["children"][0]["enablement"] == [{"kind": "global", "enabled": True}]
    params = {"channel": SESSION, "activeClient": client}
    assert_valid("0.7", "CreateSessionParams", params)
    translated = view.inbound_params("createSession", params)
    assert_valid("1.0", "CreateSessionParams", translated)
    assert translated["activeClient"] == out["activeClient"]


@pytest.mark.parametrize(
    ("directories", "primary", "expected"),
    [
        ([DIR_A, DIR_B], DIR_B, [DIR_B, DIR_A]),
        ([DIR_A, DIR_B], DIR_A, [DIR_A, DIR_B]),
        (None, DIR_A, [DIR_A]),
        ([DIR_A], None, [DIR_A]),
    ],
)
def test_inbound_create_session_puts_the_primary_first(
    directories: Any, primary: Any, expected: Any
) -> None:
    params: dict[str, Any] = {"channel": SESSION, "provider": "echo"}
    if directories is not None:
        params["workingDirectories"] = directories
    if primary is not None:
        params["primaryWorkingDirectory"] = primary
    assert_valid("0.7", "CreateSessionParams", params)
    out = view.inbound_params("createSession", params)
    assert_valid("1.0", "CreateSessionParams", out)
    assert out["workingDirectories"] == expected
    assert (out is params) == (primary is None)


@pytest.mark.parametrize(
    ("directories", "expected"),
    [([DIR_A, DIR_B], [DIR_B, DIR_A]), (None, None)],
)
def test_inbound_create_chat_puts_the_primary_first_or_inherits(
    directories: Any, expected: Any
) -> None:
    params: dict[str, Any] = {"channel": SESSION, "chat": CHAT, "primaryWorkingDirectory": DIR_B}
    if directories is not None:
        params["workingDirectories"] = directories
    assert_valid("0.7", "CreateChatParams", params)
    out = view.inbound_params("createChat", params)
    assert_valid("1.0", "CreateChatParams", out)
    assert out.get("workingDirectories") == expected


def test_inbound_create_session_fork_becomes_a_chat_fork_request() -> None:
    new_session = "ahp-session:/44444444-4444-4444-4444-444444444444"
    params = {"channel": new_session, "fork": {"session": SESSION, "turnId": "t3"}}
    assert_valid("0.7", "CreateSessionParams", params)
    created = view.inbound_params("createSession", params)
    assert created == {"channel": new_session}
    assert_valid("1.0", "CreateSessionParams", created)
    assert view.fork_source(params) == (SESSION, "t3")
    request = view.fork_request(params, CHAT)
    assert request == {
        "channel": SESSION,
        "chat": "ahp-chat:/44444444-4444-4444-4444-444444444444",
        "source": {"kind": "fork", "chat": CHAT, "turnId": "t3"},
    }
    assert_valid("1.0", "CreateChatParams", request)
    assert view.fork_source({"channel": new_session}) is None
    assert view.fork_request({"channel": new_session}, CHAT) is None


def test_inbound_terminal_session_claims_get_their_chat() -> None:
    claim = {"kind": "session", "session": SESSION, "turnId": "t1"}
    params = {"channel": TERMINAL, "claim": claim}
    assert_valid("0.7", "CreateTerminalParams", params)
    out = view.inbound_params("createTerminal", params, chat_of=chat_of)
    assert out["claim"] == {**claim, "chat": CHAT}
    assert_valid("1.0", "CreateTerminalParams", out)
    unresolved = view.inbound_params("createTerminal", params)
    assert unresolved is params  # no lookup: 1.0 validation refuses the missing chat
    dispatched = view.inbound_params(
        "dispatchAction",
        {
            "channel": TERMINAL,
            "clientSeq": 1,
            "action": {"type": "terminal/claimed", "claim": claim},
        },
        chat_of=chat_of,
    )
    assert dispatched["action"]["claim"]["chat"] == CHAT
    assert_valid("1.0", "DispatchActionParams", dispatched)


@pytest.mark.parametrize(
    ("turn_id", "origin"),
    [
        ("t1", {"session": SESSION, "chat": CHAT, "turnId": "t1"}),
        ("", {"session": SESSION}),
    ],
)
def test_inbound_annotations_get_an_origin(turn_id: str, origin: dict[str, Any]) -> None:
    value = annotation_0_7(turn_id)
    out = inbound({"type": "annotations/set", "annotation": value}, ANNOTATIONS)
    assert out["annotation"]["origin"] == origin
    assert "turnId" not in out["annotation"]
    updated = {"type": "annotations/updated", "annotationId": "a1", "turnId": turn_id}
    assert inbound(updated, ANNOTATIONS) == {
        "type": "annotations/updated",
        "annotationId": "a1",
        "origin": origin,
    }


def test_inbound_chat_error_and_turn_error_become_error_parts() -> None:
    out = inbound({"type": "chat/error", "turnId": "t1", "duration": 1, "error": ERROR})
    assert out["part"] == {"kind": "error", "error": ERROR}
    failed = {**turn([markdown()], state="error"), "usage": {"inputTokens": 1, "outputTokens": 1}}
    loaded = inbound({"type": "chat/turnsLoaded", "turns": [{**failed, "error": ERROR}]})
    assert loaded["turns"][0]["responseParts"] == [markdown(), {"kind": "error", "error": ERROR}]


def test_inbound_server_only_shapes_are_translated_too() -> None:
    content = inbound({"type": "changeset/contentChanged", "files": [], "error": ERROR})
    assert "error" not in content
    info = {"resource": TERMINAL, "title": "t", "claim": {"kind": "client", "clientId": "me"}}
    terminals = inbound(
        {"type": "root/terminalsChanged", "terminals": [info, {**info, "exitCode": 2}]},
        "ahp-root://",
    )
    assert [t["lifecycle"] for t in terminals["terminals"]] == [
        {"status": "running"},
        {"status": "exited", "exitCode": 2},
    ]
    agents = inbound(
        {
            "type": "root/agentsChanged",
            "agents": [
                agent(capabilities={"multipleWorkingDirectories": {"requiresPrimary": True}})
            ],
        },
        "ahp-root://",
    )
    assert agents["agents"][0]["capabilities"]["multipleWorkingDirectories"] == {
        "immutablePrimary": True
    }


@pytest.mark.parametrize("wire", sorted(view.DROPPED_ACTIONS))
def test_inbound_1_0_only_action_types_are_not_0_7_actions(wire: str) -> None:
    assert view.inbound_action({"type": wire}) is None
    params = {"channel": CHAT, "clientSeq": 1, "action": {"type": wire}}
    assert view.inbound_params("dispatchAction", params) is None


@pytest.mark.parametrize("name", LEAF_ACTIONS_0_7)
def test_every_0_7_action_translates_to_a_valid_1_0_action(name: str) -> None:
    wire = action_type(DEFS_0_7, name)
    channel = ANNOTATIONS if wire.startswith("annotations/") else CHAT
    for sample in samples("0.7", name):
        if wire == "session/inputNeededSet" and sample["request"].get("kind") in (
            "toolClientExecution",
        ):
            continue  # 1.0 narrowed it to a running tool call; the host sends it, never a client
        if wire == "chat/turnsLoaded" and any("error" in t for t in sample["turns"]):
            for t in sample["turns"]:
                t["state"] = "error"
        out = inbound(sample, channel)
        if wire not in view.INBOUND_ACTIONS:
            assert out is sample


#: Actions a 0.7 client may dispatch (WIRE-SUMMARY §7), as it would send them.
CLIENT_ACTIONS_0_7: list[tuple[str, dict[str, Any]]] = [
    (CHAT, {"type": "chat/turnStarted", "turnId": "t", "startedAt": NOW, "message": message()}),
    (SESSION, {"type": "session/customizationToggled", "id": "plug", "enabled": False}),
    (SESSION, {"type": "session/customizationToggled", "id": "plug", "enabled": True}),
    (
        SESSION,
        {
            "type": "session/activeClientSet",
            "activeClient": {
                "clientId": "me",
                "tools": [],
                "customizations": [_client_plugin_0_7(True)],
            },
        },
    ),
    (SESSION, {"type": "session/workingDirectorySet", "directory": DIR_A}),
    (TERMINAL, {"type": "terminal/claimed", "claim": {"kind": "session", "session": SESSION}}),
    (TERMINAL, {"type": "terminal/claimed", "claim": {"kind": "client", "clientId": "me"}}),
    (ANNOTATIONS, {"type": "annotations/set", "annotation": annotation_0_7("t1")}),
    (ANNOTATIONS, {"type": "annotations/set", "annotation": annotation_0_7("")}),
    (ANNOTATIONS, {"type": "annotations/updated", "annotationId": "a1", "turnId": "t2"}),
    (ANNOTATIONS, {"type": "annotations/updated", "annotationId": "a1", "resolved": True}),
    (
        CHAT,
        {
            "type": "chat/toolCallConfirmed",
            "turnId": "t",
            "toolCallId": "tc",
            "approved": True,
            "confirmed": "user-action",
            "editedToolInput": "{}",
        },
    ),
    (CHAT, {"type": "chat/draftChanged", "draft": message()}),
]


@pytest.mark.parametrize(("channel", "sent"), CLIENT_ACTIONS_0_7)
def test_a_0_7_client_gets_back_exactly_what_it_dispatched(
    channel: str, sent: dict[str, Any]
) -> None:
    translated = inbound(sent, channel)
    echoed = view.action(translated)
    assert echoed == sent
    assert_valid("0.7", "StateAction", echoed)


def test_inbound_identity_and_error_codes() -> None:
    delta = {"type": "chat/turnCancelled", "turnId": "t", "duration": 1}
    assert view.inbound_action(delta) is delta
    params = {"channel": "ahp-root://", "protocolVersions": ["0.7.0"], "clientId": "c"}
    assert view.inbound_params("initialize", params) is params
    assert view.inbound_error({"code": -32006, "message": "gone"}) == {
        "code": -32008,
        "message": "gone",
    }
    other = {"code": -32011, "message": "etag"}
    assert view.inbound_error(other) is other


#: 0.7 action types whose round trip may lose what 1.0 cannot hold: ``error`` on
#: ``changeset/contentChanged``, a primary without working directories,
#: ``Turn.error`` on a turn whose state is not ``error``, ``requiresPrimary: false``.
_LOSSY_ROUND_TRIP = {
    "changeset/contentChanged",
    "session/chatAdded",
    "session/chatUpdated",
    "chat/turnsLoaded",
    "root/agentsChanged",
}


@pytest.mark.parametrize("name", LEAF_ACTIONS_0_7)
def test_every_0_7_action_survives_the_round_trip(name: str) -> None:
    wire = action_type(DEFS_0_7, name)
    channel = ANNOTATIONS if wire.startswith("annotations/") else CHAT
    for sample in samples("0.7", name):
        translated = view.inbound_action(sample, channel=channel, chat_of=chat_of)
        back = view.action(translated)
        assert back is not None
        assert_valid("0.7", action_def("0.7", back), back)
        if wire not in _LOSSY_ROUND_TRIP:
            assert back == sample


def test_dispatched_annotations_take_their_session_from_the_channel() -> None:
    params = {
        "channel": ANNOTATIONS,
        "clientSeq": 4,
        "action": {"type": "annotations/set", "annotation": annotation_0_7("t1")},
    }
    assert_valid("0.7", "DispatchActionParams", params)
    out = view.inbound_params("dispatchAction", params, chat_of=chat_of)
    assert_valid("1.0", "DispatchActionParams", out)
    assert out["action"]["annotation"]["origin"] == {
        "session": SESSION,
        "chat": CHAT,
        "turnId": "t1",
    }
    elsewhere = view.inbound_action(params["action"], channel=CHAT)
    assert "origin" not in elsewhere["annotation"]  # no session to name: 1.0 refuses it


def test_entry_points_for_snapshots_states_and_named_types() -> None:
    snapshot = {"resource": CHAT, "state": chat_state(movable=True), "fromSeq": 1}
    assert view.snapshot(snapshot) == {**snapshot, "state": chat_state()}
    watch = {"root": "file:///w", "recursive": True}
    assert view.state("watch", watch) is watch
    assert view.state("resourceWatch", watch) is watch
    other = {"resource": "ahp-canvas:/c", "state": {"x": 1}, "fromSeq": 1}
    assert view.snapshot(other) is other
    assert view.project("NotAType", {"a": 1}) == {"a": 1}
    assert view.project("ErrorResponsePart", error_part()) is None


# ==============================================================================================
# A 1.0 client on a 0.7 connection: lifting what a 0.7 host sends, projecting what it sends
# ==============================================================================================

#: Channel kind → (a channel of that kind, its state's ``$def``).
_CHANNELS = {
    "root": ("ahp-root://", "RootState"),
    "session": (SESSION, "SessionState"),
    "chat": (CHAT, "ChatState"),
    "terminal": (TERMINAL, "TerminalState"),
    "changeset": (session_changeset(SESSION), "ChangesetState"),
    "annotations": (ANNOTATIONS, "AnnotationsState"),
}


@pytest.mark.parametrize("kind", sorted(_CHANNELS))
def test_every_lifted_0_7_snapshot_is_a_valid_1_0_snapshot(kind: str) -> None:
    resource, name = _CHANNELS[kind]
    for state in samples("0.7", name):
        if name == "ChatState":  # a 0.7 Turn.error belongs to a failed turn
            for t in state.get("turns", []):
                if "error" in t:
                    t["state"] = "error"
        snapshot = {"resource": resource, "state": state, "fromSeq": 3}
        assert_valid("0.7", "Snapshot", snapshot, strict=False)
        before = copy.deepcopy(snapshot)
        out = view.lift_snapshot(snapshot, chat_of=chat_of)
        assert snapshot == before, "lifting mutated its input"
        assert_valid("1.0", name, _without(out["state"], _LEFT_IN))
        assert out["resource"] == resource
        assert out["fromSeq"] == 3


def test_lifting_a_state_undoes_its_0_7_view() -> None:
    failed = turn([markdown(), error_part()], state="error")
    chat = chat_state(turns=[failed], workingDirectories=[DIR_B, DIR_A])
    session = session_state(lifecycle="failed", creationError=ERROR)
    capabilities = {"multipleWorkingDirectories": {"immutablePrimary": True}}
    terminal = {**terminal_state({"status": "exited", "exitCode": 2}), "resource": TERMINAL}
    root = {"agents": [agent(capabilities=capabilities)], "terminals": [terminal]}
    for kind, state in (("chat", chat), ("session", session), ("root", root)):
        legacy = view.state(kind, state)
        assert legacy != state  # each has something the 0.7 view changes
        assert view.lift_state(kind, legacy, chat_of=chat_of) == state
    # The claim a 0.7 host sends names no chat: the client's lookup supplies it.
    claimed = {**root, "terminals": [{**terminal, "claim": session_claim()}]}
    assert view.lift_state("root", view.state("root", claimed), chat_of=chat_of) == claimed
    assert view.lift_state("canvas", {"x": 1}) == {"x": 1}


def test_lifting_envelopes_notifications_and_results() -> None:
    error = {"type": "chat/error", "turnId": "t1", "duration": 1, "part": error_part()}
    envelope = {"channel": CHAT, "action": error, "serverSeq": 5}
    legacy = view.envelope(envelope)
    assert legacy is not None
    assert view.lift_envelope(legacy) == envelope
    assert view.lift_notification("action", legacy) == envelope
    delta = {"channel": CHAT, "action": {"type": "chat/delta"}, "serverSeq": 6}
    assert view.lift_envelope(delta) is delta

    auth = {"channel": "ahp-root://", "resource": "https://api.example.com", "reason": "expired"}
    lifted = view.lift_notification("auth/required", auth)
    assert lifted == {**auth, "resource": {"resource": "https://api.example.com"}}
    assert_valid("1.0", "AuthRequiredParams", lifted)
    added = {"channel": "ahp-root://", "summary": session_summary()}
    assert view.lift_notification("root/sessionAdded", added) is added

    chat = chat_state(turns=[turn([markdown(), error_part()], state="error")])
    snapshot = {"resource": CHAT, "state": chat, "fromSeq": 2}
    legacy_snapshot = view.snapshot(snapshot)
    init = {"protocolVersion": "0.7.0", "serverSeq": 2, "snapshots": [legacy_snapshot]}
    assert view.lift_result("initialize", init)["snapshots"] == [snapshot]
    subscribed = view.lift_result("subscribe", {"snapshot": legacy_snapshot})
    assert subscribed == {"snapshot": snapshot}
    replay = {"type": "replay", "actions": [legacy], "missing": []}
    assert view.lift_result("reconnect", replay)["actions"] == [envelope]
    fresh = {"type": "snapshot", "snapshots": [legacy_snapshot]}
    assert view.lift_result("reconnect", fresh)["snapshots"] == [snapshot]
    listing = {"items": [session_summary()]}
    assert view.lift_result("listSessions", listing) is listing


def test_a_1_0_clients_commands_in_their_0_7_form() -> None:
    toggled = {
        "channel": SESSION,
        "clientSeq": 1,
        "action": {
            "type": "session/customizationToggled",
            "id": "plug",
            "enablement": [{"kind": "global", "enabled": False}],
        },
    }
    out = view.client_params("dispatchAction", toggled)
    assert out == {
        **toggled,
        "action": {"type": "session/customizationToggled", "id": "plug", "enabled": False},
    }
    assert_valid("0.7", "DispatchActionParams", out)
    # A 1.0-only action has no 0.7 form: the client must not send it.
    read = {
        "channel": CHAT,
        "clientSeq": 2,
        "action": {"type": "chat/isReadChanged", "isRead": True},
    }
    assert view.client_params("dispatchAction", read) is None
    started = {
        "channel": CHAT,
        "clientSeq": 3,
        "action": {
            "type": "chat/turnStarted",
            "turnId": "t",
            "startedAt": NOW,
            "message": message(),
        },
    }
    assert view.client_params("dispatchAction", started) is started

    published = {
        "clientId": "me",
        "tools": [],
        "customizations": [
            {**plugin(nonce="n"), "enablement": [{"kind": "global", "enabled": True}]}
        ],
    }
    create = {"channel": SESSION, "workingDirectories": [DIR_A, DIR_B], "activeClient": published}
    projected_create = view.client_params("createSession", create)
    assert projected_create["activeClient"]["customizations"][0]["enabled"] is True
    assert "enablement" not in projected_create["activeClient"]["customizations"][0]
    assert projected_create["workingDirectories"] == [DIR_A, DIR_B]
    assert_valid("0.7", "CreateSessionParams", projected_create)
    # ... and the host's inbound translation gives back what the client meant.
    assert view.inbound_params("createSession", projected_create) == create

    terminal = {"channel": TERMINAL, "claim": session_claim()}
    projected_terminal = view.client_params("createTerminal", terminal)
    assert projected_terminal == {
        "channel": TERMINAL,
        "claim": {"kind": "session", "session": SESSION},
    }
    assert view.inbound_params("createTerminal", projected_terminal, chat_of=chat_of) == terminal
    plain = {"channel": SESSION, "chat": CHAT}
    assert view.client_params("createChat", plain) is plain


def test_a_lookup_that_cannot_tell_names_no_annotation_chat() -> None:
    """``""`` is the client's "unknown" (its mirrored states do not tell): an
    annotation's origin then names no chat; a terminal claim, which must, names ``""``."""
    updated = {"type": "annotations/updated", "annotationId": "a1", "turnId": "t2"}
    out = view.inbound_action(updated, channel=ANNOTATIONS, chat_of=lambda s, t: "")
    assert out["origin"] == {"session": SESSION, "turnId": "t2"}
    claimed = {"type": "terminal/claimed", "claim": {"kind": "session", "session": SESSION}}
    out = view.inbound_action(claimed, channel=TERMINAL, chat_of=lambda s, t: "")
    assert out["claim"] == {"kind": "session", "session": SESSION, "chat": ""}
