"""Cross-check: the 0.7 view keeps a 0.7 client in step with the 1.0 reducers.

For a 1.0 initial state and a list of 1.0 actions of one channel kind:

* **path A** folds the actions with the 1.0 reducer and takes the 0.7 view of the
  state (:func:`view.state`) — what the host serves a 0.7 client that subscribes;
* **path B** decodes, as 0.7 wire values, the 0.7 view of the initial state and of
  each action the view sends (:func:`view.action`; ``None`` is skipped), and folds
  them with the 0.7 reducer — what a 0.7 client computes from the stream.

The two are compared after **every** step (so the final states are compared too),
field by field on the JSON wire form. Nothing may differ except what the two
module-level tables allow, each entry naming the REDUCER-CHANGES / SCHEMA-DIFF item
(both under ``shared/spec-1.0``) that explains it:

* :data:`IGNORED_FIELDS`: a field the two versions compute differently at every
  step (``modifiedAt`` of a chat);
* :data:`KNOWN_DRIFTS`: a step of one action type that, under the condition the spec
  item names, may leave the 0.7 client's state different from the view in the listed
  fields only. After such a step path B is re-synced to path A's view (what a 0.7
  client gets when it subscribes again), so everything after it is still checked.

:func:`test_each_known_drift_is_a_real_difference` shows each table entry is needed (its
witness sequence produces exactly that difference), so the table stays small and
honest: an entry whose difference disappears fails there.

Generated input:

* random 1.0 states and actions of every channel kind, from a variant of
  ``tests.strategies`` that also generates optional fields (:func:`random_wire`);
* coherent chat sequences (:func:`chat_sequences`): a chat with or without an active
  turn, resumable errored turns, tool calls in every state, open input requests,
  pending messages, then turn / part / tool-call / input / pending-message actions
  whose ids are drawn from small pools, so most of them hit;
* coherent session sequences (:func:`session_sequences`): chats, customizations with
  scoped enablement and children, MCP servers starting with ``blocking``, queued
  input requests of every kind, and the actions on them;
* the shared 0.7 reducer fixtures lifted to 1.0 (states through the view's own
  inbound translation, actions through :func:`view.inbound_action`), and the 1.0
  reducer fixtures' action lists.
"""

from __future__ import annotations

import fnmatch
import functools
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeAlias

import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ahp_server.protocol import codec
from ahp_server.protocol import reducers as reducers_1_0
from ahp_server.protocol import types as types_1_0
from ahp_server.protocol._base import OpenUnion
from ahp_server.protocol.v0_7 import reducers as reducers_0_7
from ahp_server.protocol.v0_7 import types as types_0_7
from ahp_server.protocol.views import v0_7 as view
from tests import strategies
from tests.fixtures_path import fixture_files, load

Json: TypeAlias = Any

# ==============================================================================================
# The channels
# ==============================================================================================


@dataclass(frozen=True)
class Channel:
    state_1_0: type[Any]
    state_0_7: type[Any]
    reduce_1_0: Callable[[Any, object, Callable[[], float]], Any]
    reduce_0_7: Callable[[Any, object, Callable[[], float]], Any]
    actions_1_0: Any  # the 1.0 action union of the channel (for generation)


CHANNELS: Final[Mapping[str, Channel]] = {
    "root": Channel(
        types_1_0.RootState,
        types_0_7.RootState,
        reducers_1_0.reduce_root,
        reducers_0_7.reduce_root,
        types_1_0.RootAction,
    ),
    "session": Channel(
        types_1_0.SessionState,
        types_0_7.SessionState,
        reducers_1_0.reduce_session,
        reducers_0_7.reduce_session,
        types_1_0.SessionAction,
    ),
    "chat": Channel(
        types_1_0.ChatState,
        types_0_7.ChatState,
        reducers_1_0.reduce_chat,
        reducers_0_7.reduce_chat,
        types_1_0.ChatAction,
    ),
    "terminal": Channel(
        types_1_0.TerminalState,
        types_0_7.TerminalState,
        reducers_1_0.reduce_terminal,
        reducers_0_7.reduce_terminal,
        types_1_0.TerminalAction,
    ),
    "changeset": Channel(
        types_1_0.ChangesetState,
        types_0_7.ChangesetState,
        reducers_1_0.reduce_changeset,
        reducers_0_7.reduce_changeset,
        types_1_0.ChangesetAction,
    ),
    "annotations": Channel(
        types_1_0.AnnotationsState,
        types_0_7.AnnotationsState,
        reducers_1_0.reduce_annotations,
        reducers_0_7.reduce_annotations,
        types_1_0.AnnotationsAction,
    ),
    "resourceWatch": Channel(
        types_1_0.ResourceWatchState,
        types_0_7.ResourceWatchState,
        reducers_1_0.reduce_resource_watch,
        reducers_0_7.reduce_resource_watch,
        types_1_0.ResourceWatchAction,
    ),
}


def clock() -> float:
    """The 0.7 chat reducer stamps ``modifiedAt`` from a clock (the 1.0 one reads none)."""
    return 9999.0


# ==============================================================================================
# The exception table
# ==============================================================================================

#: Fields never compared, per channel kind: the versions define them differently.
IGNORED_FIELDS: Final[Mapping[tuple[str, str], str]] = {
    ("chat", "modifiedAt"): (
        "REDUCER-CHANGES 11: 1.0 takes modifiedAt from the action data (turnStarted's "
        "startedAt, startedAt + duration at turn end) and leaves it alone on "
        "input*/truncated; 0.7 stamps the client's clock on all of these"
    ),
}

#: ``(1.0 state before, 1.0 action, 1.0 state after)`` → whether the condition of a
#: known drift holds for this step.
Condition: TypeAlias = Callable[[Json, Json, Json], bool]


@dataclass(frozen=True)
class Drift:
    """A step after which the 0.7 client's state may differ from the view."""

    kind: str  #: channel kind
    action: str  #: the action type(s) of the step, ``|``-separated
    fields: tuple[str, ...]  #: the 0.7 field paths that may differ (``fnmatch`` patterns)
    reason: str  #: the spec item that explains it
    when: Condition  #: the condition the spec item names


def _always(before: Json, action: Json, after: Json) -> bool:
    return True


def _tool_calls(state: Json, action: Json) -> list[Json]:
    """The tool calls of the active turn that a tool-call action addresses."""
    turn = state.get("activeTurn")
    if not isinstance(turn, dict) or turn.get("id") != action.get("turnId"):
        return []
    return [
        part["toolCall"]
        for part in turn["responseParts"]
        if part.get("kind") == "toolCall"
        and part["toolCall"].get("toolCallId") == action.get("toolCallId")
    ]


def _ready_refines_or_keeps(before: Json, action: Json, after: Json) -> bool:
    """toolCallReady with a late contributor or intention, or without an input while
    the call it readies already has one."""
    if "contributor" in action or "intention" in action:
        return True
    return "toolInput" not in action and any(
        tc.get("status") in ("running", "pending-confirmation") and "toolInput" in tc
        for tc in _tool_calls(before, action)
    )


def _ready_by_reference_over_inline(before: Json, action: Json, after: Json) -> bool:
    """toolCallReady carrying a ContentRef input for a call pending with an inline one."""
    return isinstance(action.get("toolInput"), dict) and any(
        tc.get("status") == "pending-confirmation" and isinstance(tc.get("toolInput"), str)
        for tc in _tool_calls(before, action)
    )


def _edit_of_a_non_inline_input(before: Json, action: Json, after: Json) -> bool:
    """An approval with an edited input for a call whose input is not an inline string."""
    return (
        action.get("approved") is True
        and "editedToolInput" in action
        and any(
            tc.get("status") == "pending-confirmation" and not isinstance(tc.get("toolInput"), str)
            for tc in _tool_calls(before, action)
        )
    )


def _delta_without_content_on_empty_input(before: Json, action: Json, after: Json) -> bool:
    return "content" not in action and any(
        tc.get("status") == "streaming" and "partialInput" not in tc
        for tc in _tool_calls(before, action)
    )


def _client_execution_queued(before: Json, action: Json, after: Json) -> bool:
    return any(
        isinstance(request, dict) and request.get("kind") == "toolClientExecution"
        for request in after.get("inputNeeded") or ()
    )


def _first_directory(state: Json) -> Json:
    directories = state.get("workingDirectories") or []
    return directories[0] if directories else None


def _primary_moves(before: Json, action: Json, after: Json) -> bool:
    return bool(_first_directory(before) != _first_directory(after))


def _chat_directories_emptied(before: Json, action: Json, after: Json) -> bool:
    changes = action.get("changes")
    return (
        isinstance(changes, dict)
        and "workingDirectories" in changes
        and not changes["workingDirectories"]
    )


def _had_error(before: Json, action: Json, after: Json) -> bool:
    return "error" in before


_TOOL_CALL = "activeTurn.responseParts.*.toolCall"

#: Every step whose 0.7 result may differ from the view, and why. Keys name the
#: entries (and their witnesses below).
KNOWN_DRIFTS: Final[Mapping[str, Drift]] = {
    "turnResume": Drift(
        "chat",
        "chat/turnResume",
        ("activeTurn", "activeTurn.*", "turns", "turns.*", "status"),
        "REDUCER-CHANGES 10: chat/turnResume (1.0 only, never sent to 0.7) reopens the "
        "errored turn; the view docstring: the 0.7 state drifts",
        _always,
    ),
    "chatIsRead/ArchivedChanged": Drift(
        "chat",
        "chat/isReadChanged|chat/isArchivedChanged",
        ("status",),
        "REDUCER-CHANGES 16: the chat's own IsRead/IsArchived flags are set by 1.0-only "
        "actions a 0.7 client never gets (docs/protocol.md: it sees what "
        "session/chatUpdated mirrors)",
        _always,
    ),
    "workingDirectoryReplaced": Drift(
        "session",
        "session/workingDirectoryReplaced",
        ("workingDirectories", "workingDirectories.*"),
        "REDUCER-CHANGES 5: session/workingDirectoryReplaced is 1.0 only; the view "
        "docstring: the 0.7 directory list drifts",
        _always,
    ),
    "chatsReordered": Drift(
        "session",
        "session/chatsReordered",
        ("chats", "chats.*"),
        "REDUCER-CHANGES 6: session/chatsReordered is 1.0 only (same-session ordering)",
        _always,
    ),
    "toolCallReadyRefines": Drift(
        "chat",
        "chat/toolCallReady",
        (f"{_TOOL_CALL}.toolInput", f"{_TOOL_CALL}.contributor*", f"{_TOOL_CALL}.intention"),
        "REDUCER-CHANGES 17: toolCallReady's contributor/intention are stripped for 0.7 "
        "(SCHEMA-DIFF 6) but refine the 1.0 call; 1.0 keeps the input of a running or "
        "pending call when the action has none, 0.7 drops it (auto-confirmed) or keeps "
        "only a pending call's",
        _ready_refines_or_keeps,
    ),
    "toolCallReadyByReference": Drift(
        "chat",
        "chat/toolCallReady",
        (f"{_TOOL_CALL}.toolInput",),
        "REDUCER-CHANGES 18 / SCHEMA-DIFF 7: a ContentRef input has no 0.7 form (omitted "
        "from the action), so a 0.7 call pending with an inline input keeps it",
        _ready_by_reference_over_inline,
    ),
    "toolCallConfirmedEdit": Drift(
        "chat",
        "chat/toolCallConfirmed",
        (f"{_TOOL_CALL}.toolInput",),
        "REDUCER-CHANGES 18: at 1.0 editedToolInput replaces only an inline input (a "
        "ContentRef, or no input, stays); 0.7 always takes the edit",
        _edit_of_a_non_inline_input,
    ),
    "toolCallDeltaWithoutContent": Drift(
        "chat",
        "chat/toolCallDelta",
        (f"{_TOOL_CALL}.partialInput",),
        "REDUCER-CHANGES 19 / SCHEMA-DIFF 5: content is optional at 1.0 (no partial "
        "input); the view sends content '' (required at 0.7), which gives a 0.7 "
        "partialInput ''",
        _delta_without_content_on_empty_input,
    ),
    "inputNeededClientExecution": Drift(
        "session",
        "session/inputNeededSet|session/inputNeededRemoved",
        ("status",),
        "REDUCER-CHANGES 2: at 1.0 a toolClientExecution entry does not raise "
        "InputNeeded; at 0.7 any queued entry does",
        _client_execution_queued,
    ),
    "chatPrimaryDirectory": Drift(
        "chat",
        "chat/workingDirectorySet|chat/workingDirectoryRemoved",
        ("primaryWorkingDirectory",),
        "SCHEMA-DIFF 1: 1.0 has no primaryWorkingDirectory (the primary is index 0, "
        "which the view reports); at 0.7 it is a separate field these actions never touch",
        _primary_moves,
    ),
    "chatUpdatedEmptiesDirectories": Drift(
        "session",
        "session/chatUpdated",
        ("chats.*.primaryWorkingDirectory",),
        "SCHEMA-DIFF 1: emptying or clearing a chat's workingDirectories leaves no index "
        "0, and a shallow 0.7 merge cannot delete the summary's primaryWorkingDirectory "
        "(the view docstring)",
        _chat_directories_emptied,
    ),
    "changesetContentChanged": Drift(
        "changeset",
        "changeset/contentChanged",
        ("error",),
        "SCHEMA-DIFF ChangesetContentChangedAction (0.9.0 Removed: its error): 1.0 "
        "leaves the changeset's error alone (docs/protocol.md), 0.7 clears it when "
        "the action carries none",
        _had_error,
    ),
}


def _drifts_for(kind: str, action_type: str) -> list[tuple[str, Drift]]:
    return [
        (name, drift)
        for name, drift in KNOWN_DRIFTS.items()
        if drift.kind == kind and action_type in drift.action.split("|")
    ]


# ==============================================================================================
# The check
# ==============================================================================================


def wire(value: Any) -> Json:
    """The JSON wire form of a struct or of builtins (tuples become lists, …)."""
    return json.loads(codec.encode(value))


def diff(expected: Json, actual: Json, path: str = "") -> Iterator[str]:
    """The dotted paths (list indexes as segments) where two JSON values differ."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(set(expected) | set(actual)):
            inner = f"{path}.{key}" if path else key
            if key not in expected or key not in actual:
                yield inner
            else:
                yield from diff(expected[key], actual[key], inner)
    elif isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        for index, (left, right) in enumerate(zip(expected, actual, strict=True)):
            yield from diff(left, right, f"{path}.{index}")
    elif expected != actual or type(expected) is not type(actual):
        yield path


def _compared(kind: str, paths: Iterator[str], ignored: Mapping[tuple[str, str], str]) -> list[str]:
    return [path for path in paths if (kind, path) not in ignored]


class Unexplained(AssertionError):
    """A difference no table entry explains."""


def cross_check(
    kind: str,
    initial: Json,
    actions: Sequence[Json],
    *,
    action_view: Callable[[Json], Json | None] = view.action,
    ignored: Mapping[tuple[str, str], str] = IGNORED_FIELDS,
) -> list[str]:
    """Run both paths over ``actions`` (1.0 wire JSON); return the names of the
    :data:`KNOWN_DRIFTS` entries the steps needed, in order. Raises
    :class:`Unexplained` on any other difference.

    ``action_view`` and ``ignored`` are replaceable only to show that the check
    fails when it should."""
    channel = CHANNELS[kind]
    state_1_0 = codec.convert(initial, channel.state_1_0)
    state_0_7 = codec.convert(view.state(kind, wire(state_1_0)), channel.state_0_7)
    start = _compared(kind, diff(view.state(kind, wire(state_1_0)), wire(state_0_7)), ignored)
    if start:
        raise Unexplained(f"the 0.7 view of the initial state does not decode as 0.7: {start}")
    used: list[str] = []
    for step, action in enumerate(actions):
        before = wire(state_1_0)
        after_1_0 = channel.reduce_1_0(
            state_1_0, codec.convert(action, types_1_0.StateAction), clock
        )
        projected = action_view(action)
        after_0_7 = (
            state_0_7
            if projected is None
            else channel.reduce_0_7(
                state_0_7, codec.convert(projected, types_0_7.StateAction), clock
            )
        )
        after = wire(after_1_0)
        expected = wire(view.state(kind, after))
        differing = _compared(kind, diff(expected, wire(after_0_7)), ignored)
        if differing:
            explained = [
                (name, drift)
                for name, drift in _drifts_for(kind, action.get("type", ""))
                if drift.when(before, action, after)
            ]
            allowed = [pattern for _, drift in explained for pattern in drift.fields]
            stray = [
                path
                for path in differing
                if not any(fnmatch.fnmatchcase(path, pattern) for pattern in allowed)
            ]
            if stray:
                raise Unexplained(
                    f"{kind} step {step} ({action.get('type')}): 0.7 client and view differ "
                    f"at {stray}, which no KNOWN_DRIFTS entry explains "
                    f"(candidates: {[name for name, _ in explained]})\n"
                    f"action: {json.dumps(action)}\n"
                    f"1.0 state before: {json.dumps(before)}\n"
                    f"view of the 1.0 state after: {json.dumps(expected)}\n"
                    f"0.7 client state after: {json.dumps(wire(after_0_7))}"
                )
            used.extend(name for name, _ in explained)
            # The client drifted: re-sync it as a new subscription would.
            after_0_7 = codec.convert(expected, channel.state_0_7)
        state_1_0, state_0_7 = after_1_0, after_0_7
    return used


# ==============================================================================================
# Random wire values (optional fields included)
# ==============================================================================================

#: ``tests.strategies`` keeps a field only when ``msgspec.inspect`` reports its default
#: as ``UNSET``, but it reports ``NODEFAULT`` for ``UNSET`` defaults, so it never
#: generates an optional field. This variant does (``UNSET`` or a value); fields with
#: a real default (the ``type`` tags) keep it.
_MAX_LIST = 3


def _from_info(info: Any, depth: int) -> st.SearchStrategy[Any]:
    if isinstance(info, mi.VarTupleType | mi.ListType):
        if depth <= 0:
            return st.just(())
        return st.lists(_from_info(info.item_type, depth - 1), max_size=_MAX_LIST).map(tuple)
    if isinstance(info, mi.DictType):
        if depth <= 0:
            return st.just({})
        return st.dictionaries(
            st.sampled_from(strategies.POOL),
            _from_info(info.value_type, depth - 1),
            max_size=_MAX_LIST,
        )
    if isinstance(info, mi.UnionType):
        return st.one_of([_from_info(member, depth) for member in info.types])
    if isinstance(info, mi.StructType):
        return _struct(info.cls, depth)
    if isinstance(info, mi.CustomType) and issubclass(info.cls, OpenUnion):
        return _union(info.cls, depth)
    return strategies._from_info(info, depth)


def _union(union: type[OpenUnion], depth: int, *, nested: bool = False) -> st.SearchStrategy[Any]:
    members: list[type] = [member for _, member in union.shape] or list(
        dict.fromkeys(union.variants.values())
    )
    options = [
        _union(member, depth, nested=True)
        if OpenUnion in member.__mro__
        else _from_info(mi.type_info(member), depth)
        for member in members
    ]
    if nested or any(isinstance(tag, bool) for tag in union.variants):
        return st.one_of(options)
    return st.one_of([*options, strategies._unknown_variant(union)])


@functools.cache
def _struct(cls: type, depth: int) -> st.SearchStrategy[Any]:
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for field in info.fields:
        if field.required:
            fields[field.name] = _from_info(field.type, max(depth - 1, 0))
        elif field.default is not msgspec.NODEFAULT:
            continue  # a tag such as `type="chat/delta"`: keep its default
        elif depth > 0:
            fields[field.name] = st.one_of(
                st.just(msgspec.UNSET), _from_info(field.type, depth - 1)
            )
    return st.fixed_dictionaries(fields).map(lambda kwargs: cls(**kwargs))


def random_wire(type_: Any, depth: int = 3) -> st.SearchStrategy[Json]:
    """Random values of 1.0 ``type_``, as wire JSON a 0.7 decoder can take too."""
    if isinstance(type_, type) and OpenUnion in type_.__mro__:
        structs = _union(type_, depth)
    else:
        structs = _from_info(mi.type_info(type_), depth)
    return structs.map(wire).map(_with_end_turn)


def _with_end_turn(value: Json) -> Json:
    """Chat attachments get an ``endTurn``: optional at 1.0 (SCHEMA-DIFF 4), but the
    host's 0.7 types require it (WIRE-SUMMARY: "required at this commit"), and the
    view passes attachments through. Left alone here: see the report."""
    if isinstance(value, list):
        return [_with_end_turn(item) for item in value]
    if not isinstance(value, dict):
        return value
    out = {key: _with_end_turn(item) for key, item in value.items()}
    if out.get("type") == "chat" and "resource" in out and "label" in out:
        out.setdefault("endTurn", "t1")
    return out


# ==============================================================================================
# Coherent chat sequences
# ==============================================================================================

CHAT = "ahp-chat:/11111111-1111-1111-1111-111111111111"
OTHER_CHAT = "ahp-chat:/22222222-2222-2222-2222-222222222222"
THIRD_CHAT = "ahp-chat:/44444444-4444-4444-4444-444444444444"
NOW = "2026-01-01T00:00:00.000Z"
DIRS = ("file:///work/a", "file:///work/b", "file:///work/c")
TURNS = ("t1", "t2")
TOOL_CALLS = ("tc1", "tc2")
PARTS = ("p1", "p2", "tc1")  # a delta may name a tool call's id
REQUESTS = ("r1", "r2")
PENDING = ("q1", "q2")
CLIENTS = ("me", "other")
TIMES = (NOW, "2026-01-01T01:00:00.250+01:00", "2025-12-31T23:59:59.999Z", "not a date")
ERROR = {"errorType": "boom", "message": "it broke"}
CONTENT_REF = {"uri": "ahp-content:/input/1", "contentType": "application/json"}
OPTIONS = [
    {"id": "allow", "label": "Allow", "kind": "approve"},
    {"id": "deny", "label": "Deny", "kind": "deny"},
]
AUTH = {"reason": "login", "resource": {"resource": "https://mcp.example"}}

_status = st.sampled_from((1, 8, 24, 2, 1 | 32, 8 | 64, 24 | 32 | 64))


def _maybe(draw: st.DrawFn, key: str, values: st.SearchStrategy[Json]) -> dict[str, Json]:
    """``{key: value}`` or ``{}``: an optional field."""
    return {key: draw(values)} if draw(st.booleans()) else {}


@st.composite
def messages(draw: st.DrawFn) -> Json:
    kind = draw(st.sampled_from(("user", "agent", "tool", "systemNotification", "automation")))
    attachments = _maybe(
        draw,
        "attachments",
        st.just([{"type": "chat", "label": "c", "resource": OTHER_CHAT, "endTurn": "t1"}]),
    )
    return {"text": draw(st.sampled_from(("hi", "go on"))), "origin": {"kind": kind}, **attachments}


_contributors = st.sampled_from(
    (
        {"kind": "client", "clientId": "me"},
        {"kind": "client", "clientId": "other"},
        {"kind": "mcp", "customizationId": "mcp"},
    )
)
_tool_inputs = st.sampled_from(("{}", '{"path": "a"}', "", CONTENT_REF))
_confirmations = st.sampled_from(("not-needed", "user-action", "setting"))
_tool_content = st.just([{"type": "text", "text": "out"}])


_TOOL_STATUSES = (
    "streaming",
    "pending-confirmation",
    "running",
    "auth-required",
    "pending-result-confirmation",
    "completed",
    "cancelled",
)


@st.composite
def tool_calls(draw: st.DrawFn, tool_call_id: str) -> Json:
    status = draw(st.sampled_from(_TOOL_STATUSES))
    call: dict[str, Json] = {
        "status": status,
        "toolCallId": tool_call_id,
        "toolName": "bash",
        "displayName": "Bash",
        **_maybe(draw, "intention", st.just("look around")),
        **_maybe(draw, "contributor", _contributors),
    }
    if status == "streaming":
        call.update(_maybe(draw, "partialInput", st.sampled_from(("", '{"pa'))))
        call.update(_maybe(draw, "invocationMessage", st.just("Running")))
        return call
    call["invocationMessage"] = "Running"
    call.update(_maybe(draw, "toolInput", _tool_inputs))
    if status == "pending-confirmation":
        call.update(_maybe(draw, "options", st.just(OPTIONS)))
        call.update(_maybe(draw, "editable", st.booleans()))
        call.update(_maybe(draw, "confirmationTitle", st.just("Run it?")))
        return call
    if status == "cancelled":
        call["reason"] = draw(st.sampled_from(("denied", "skipped")))
        return call
    call["confirmed"] = draw(_confirmations)
    if status == "auth-required":
        call["contributor"] = {"kind": "mcp", "customizationId": "mcp"}
        call["auth"] = AUTH
    elif status != "running":
        call.update({"success": draw(st.booleans()), "pastTenseMessage": "Ran"})
    return call


_ANSWER = {"state": "draft", "value": {"kind": "text", "value": "x"}}


@st.composite
def input_requests(draw: st.DrawFn) -> Json:
    request: dict[str, Json] = {"id": draw(st.sampled_from(REQUESTS))}
    request.update(_maybe(draw, "message", st.just("Which one?")))
    request.update(
        _maybe(draw, "questions", st.just([{"id": "q1", "kind": "text", "message": "Name?"}]))
    )
    request.update(_maybe(draw, "answers", st.just({"q1": _ANSWER})))
    return request


@st.composite
def error_parts(draw: st.DrawFn) -> Json:
    resumable = draw(st.sampled_from((True, True, False, None)))
    part = {"kind": "error", "error": ERROR}
    return part if resumable is None else {**part, "resumable": resumable}


@st.composite
def response_parts(draw: st.DrawFn) -> Json:
    kind = draw(
        st.sampled_from(
            (
                *("markdown", "toolCall") * 3,
                *("reasoning", "inputRequest", "contentRef", "error", "future"),
            )
        )
    )
    if kind in ("markdown", "reasoning"):
        return {"kind": kind, "id": draw(st.sampled_from(PARTS)), "content": "text"}
    if kind == "toolCall":
        return {"kind": kind, "toolCall": draw(tool_calls(draw(st.sampled_from(TOOL_CALLS))))}
    if kind == "inputRequest":
        part = {"kind": kind, "request": draw(input_requests())}
        return {**part, **_maybe(draw, "response", st.sampled_from(("accept", "decline")))}
    if kind == "contentRef":
        return {"kind": kind, "uri": "ahp-content:/part/1"}
    if kind == "error":
        return draw(error_parts())
    return {"kind": "futurePart", "id": draw(st.sampled_from(PARTS))}


@st.composite
def turns(draw: st.DrawFn, turn_id: str) -> Json:
    state = draw(st.sampled_from(("complete", "cancelled", "error")))
    parts = draw(st.lists(response_parts(), max_size=3))
    if state == "error" and draw(st.booleans()):
        parts.append(draw(error_parts()))
    turn = {"id": turn_id, "message": draw(messages()), "responseParts": parts, "state": state}
    turn.update(_maybe(draw, "startedAt", st.sampled_from(TIMES)))
    turn.update(_maybe(draw, "duration", st.sampled_from((0, 1500))))
    turn.update(_maybe(draw, "usage", st.just({"inputTokens": 3})))
    return turn


@st.composite
def pending_messages(draw: st.DrawFn) -> Json:
    return {"id": draw(st.sampled_from(PENDING)), "message": draw(messages())}


@st.composite
def chat_states(draw: st.DrawFn) -> Json:
    history = [draw(turns(turn_id)) for turn_id in draw(st.lists(st.sampled_from(TURNS)))]
    state: dict[str, Json] = {
        "resource": CHAT,
        "title": "Chat",
        "status": draw(_status),
        "modifiedAt": draw(st.sampled_from(TIMES)),
        "turns": history[:3],
    }
    if draw(st.integers(0, 3)) > 0:
        state["activeTurn"] = {
            "id": draw(st.sampled_from(TURNS)),
            "startedAt": draw(st.sampled_from(TIMES)),
            "message": draw(messages()),
            "responseParts": draw(st.lists(response_parts(), min_size=1, max_size=4)),
        }
    state.update(_maybe(draw, "workingDirectories", st.lists(st.sampled_from(DIRS), unique=True)))
    state.update(_maybe(draw, "steeringMessage", pending_messages()))
    state.update(
        _maybe(
            draw,
            "queuedMessages",
            st.lists(pending_messages(), min_size=1, max_size=2, unique_by=lambda m: m["id"]),
        )
    )
    state.update(_maybe(draw, "draft", messages()))
    state.update(_maybe(draw, "movable", st.booleans()))
    state.update(_maybe(draw, "activity", st.just("thinking")))
    return state


def _pick(draw: st.DrawFn, present: Sequence[str], pool: Sequence[str]) -> str:
    """Mostly an id the state holds (so the action hits), sometimes any id of the pool."""
    if present and draw(st.integers(0, 9)) > 0:
        return draw(st.sampled_from(list(present)))
    return draw(st.sampled_from(list(pool)))


def _chat_ids(state: Json) -> dict[str, list[str]]:
    """The ids a chat state holds, by what an action may name."""
    turn = state.get("activeTurn")
    parts = turn["responseParts"] if isinstance(turn, dict) else []
    queued = [m["id"] for m in state.get("queuedMessages") or []]
    steering = state.get("steeringMessage")
    return {
        "turn": [turn["id"]] if isinstance(turn, dict) else [],
        "last": [t["id"] for t in state["turns"][-1:]],
        "turns": [t["id"] for t in state["turns"]],
        **{
            f"tools:{status}": [
                p["toolCall"]["toolCallId"]
                for p in parts
                if p.get("kind") == "toolCall" and p["toolCall"].get("status") == status
            ]
            for status in _TOOL_STATUSES
        },
        "parts": [p["id"] for p in parts if p.get("kind") in ("markdown", "reasoning")],
        "requests": [
            p["request"]["id"]
            for p in parts
            if p.get("kind") == "inputRequest" and "response" not in p
        ],
        "pending": queued + ([steering["id"]] if isinstance(steering, dict) else []),
        "resumable": [t["id"] for t in state["turns"][-1:] if _resumable(t)],
        "dirs": list(state.get("workingDirectories") or []),
    }


#: The tool-call states each tool-call action applies to (its targets are drawn
#: mostly from the calls in those states).
_TARGETS: Final[Mapping[str, tuple[str, ...]]] = {
    "toolCallDelta": ("streaming",),
    "toolCallReady": ("streaming", "running", "pending-confirmation"),
    "toolCallConfirmed": ("pending-confirmation",),
    "toolCallComplete": ("running", "pending-confirmation", "auth-required"),
    "toolCallResultConfirmed": ("pending-result-confirmation",),
    "toolCallAuthRequired": ("running",),
    "toolCallAuthResolved": ("auth-required",),
    "toolCallContentChanged": ("running",),
}


def _resumable(turn: Json) -> bool:
    parts = turn["responseParts"]
    return (
        turn["state"] == "error"
        and bool(parts)
        and parts[-1].get("kind") == "error"
        and parts[-1].get("resumable") is True
    )


@st.composite
def chat_actions(draw: st.DrawFn, state: Json) -> Json:
    """One chat action, its ids mostly taken from ``state`` (1.0 wire JSON)."""
    ids = _chat_ids(state)
    anything = draw(st.integers(0, 9)) < 3
    kind = draw(st.sampled_from(_ANY_TIME if anything else _chat_kinds(ids)))
    turn = {"turnId": _pick(draw, ids["turn"], TURNS)}
    targets = [i for status in _TARGETS.get(kind, ()) for i in ids[f"tools:{status}"]]
    tool = {**turn, "toolCallId": _pick(draw, targets, TOOL_CALLS)}
    action: dict[str, Json] = {"type": f"chat/{kind}"}
    if kind == "turnStarted":
        action.update(
            turnId=draw(st.sampled_from((*TURNS, "t3"))),
            startedAt=draw(st.sampled_from(TIMES)),
            message=draw(messages()),
        )
        action.update(_maybe(draw, "queuedMessageId", st.just(_pick(draw, ids["pending"], ("",)))))
    elif kind == "responsePart":
        action.update(turn, part=draw(response_parts()))
    elif kind in ("delta", "reasoning"):
        action.update(turn, partId=_pick(draw, ids["parts"], PARTS), content="+")
    elif kind == "toolCallStart":
        action.update(turn, toolCallId=draw(st.sampled_from(TOOL_CALLS)))
        action.update(toolName="bash", displayName="Bash")
        action.update(_maybe(draw, "intention", st.just("look")))
        action.update(_maybe(draw, "contributor", _contributors))
    elif kind == "toolCallDelta":
        action.update(tool)
        action.update(_maybe(draw, "content", st.sampled_from(("", "ls"))))
        action.update(_maybe(draw, "invocationMessage", st.just("Typing")))
    elif kind == "toolCallReady":
        action.update(tool, invocationMessage="Run ls")
        action.update(_maybe(draw, "toolInput", _tool_inputs))
        action.update(_maybe(draw, "confirmed", st.sampled_from(("", "not-needed", "setting"))))
        action.update(_maybe(draw, "contributor", _contributors))
        action.update(_maybe(draw, "intention", st.just("list files")))
        action.update(_maybe(draw, "options", st.just(OPTIONS)))
        action.update(_maybe(draw, "editable", st.booleans()))
        action.update(_maybe(draw, "confirmationTitle", st.just("Run?")))
    elif kind == "toolCallConfirmed":
        action.update(tool)
        if draw(st.booleans()):
            action.update(approved=True, confirmed=draw(_confirmations))
            action.update(_maybe(draw, "editedToolInput", st.just('{"edited": true}')))
        else:
            action.update(approved=False, reason=draw(st.sampled_from(("denied", "skipped"))))
            action.update(_maybe(draw, "userSuggestion", messages()))
            action.update(_maybe(draw, "reasonMessage", st.just("no")))
        action.update(_maybe(draw, "selectedOptionId", st.sampled_from(("allow", "nope", ""))))
    elif kind == "toolCallComplete":
        result = {"success": draw(st.booleans()), "pastTenseMessage": "Ran"}
        result.update(_maybe(draw, "content", _tool_content))
        result.update(_maybe(draw, "error", st.just({"message": "bad"})))
        action.update(tool, result=result)
        action.update(_maybe(draw, "requiresResultConfirmation", st.booleans()))
    elif kind == "toolCallResultConfirmed":
        action.update(tool, approved=draw(st.booleans()))
    elif kind == "toolCallAuthRequired":
        action.update(tool, auth=AUTH)
    elif kind == "toolCallAuthResolved":
        action.update(tool)
    elif kind == "toolCallContentChanged":
        action.update(tool, content=draw(_tool_content))
    elif kind == "usage":
        action.update(turn, usage={"inputTokens": 5, "outputTokens": 7})
    elif kind == "error":
        action.update(turn, duration=draw(st.sampled_from((-1, 0, 1500))), part=draw(error_parts()))
    elif kind in ("turnComplete", "turnCancelled"):
        action.update(turn, duration=draw(st.sampled_from((-1, 0, 1500))))
    elif kind == "turnResume":
        action.update(turnId=_pick(draw, ids["resumable"] or ids["last"], TURNS))
    elif kind == "inputRequested":
        action.update(request=draw(input_requests()))
    elif kind == "inputAnswerChanged":
        action.update(requestId=_pick(draw, ids["requests"], REQUESTS), questionId="q1")
        action.update(_maybe(draw, "answer", st.just(_ANSWER)))
    elif kind == "inputCompleted":
        action.update(requestId=_pick(draw, ids["requests"], REQUESTS))
        action.update(response=draw(st.sampled_from(("accept", "decline", "cancel"))))
        action.update(_maybe(draw, "answers", st.just({"q1": _ANSWER})))
    elif kind == "truncated":
        action.update(_maybe(draw, "turnId", st.just(_pick(draw, ids["turns"], TURNS))))
    elif kind == "turnsLoaded":
        action.update(turns=[draw(turns(turn_id)) for turn_id in ("t0", *ids["turns"][:1])])
        action.update(_maybe(draw, "turnsNextCursor", st.sampled_from(("c1", None))))
    elif kind == "pendingMessageSet":
        action.update(
            kind=draw(st.sampled_from(("steering", "queued"))), **draw(pending_messages())
        )
    elif kind == "pendingMessageRemoved":
        action.update(kind=draw(st.sampled_from(("steering", "queued"))))
        action.update(id=_pick(draw, ids["pending"], PENDING))
    elif kind == "queuedMessagesReordered":
        action.update(order=draw(st.permutations(PENDING)))
    elif kind == "workingDirectorySet":
        action.update(directory=draw(st.sampled_from(DIRS)))
    elif kind == "workingDirectoryRemoved":
        action.update(directory=_pick(draw, ids["dirs"], DIRS))
    elif kind == "activityChanged":
        action.update(_maybe(draw, "activity", st.sampled_from(("busy", None))))
    elif kind == "draftChanged":
        action.update(_maybe(draw, "draft", messages()))
    elif kind == "isReadChanged":
        action.update(isRead=draw(st.booleans()))
    elif kind == "isArchivedChanged":
        action.update(isArchived=draw(st.booleans()))
    elif kind == "movableChanged":
        action.update(movable=draw(st.booleans()))
    elif kind == "backgroundWorkSet":
        work = {"id": "w1", "label": "sh", "startedAt": NOW, "kind": "shell", "command": "make"}
        action.update(work=work)
    elif kind == "backgroundWorkRemoved":
        action.update(id="w1")
    elif kind == "changesetsChanged":
        changeset = {"label": "c", "uriTemplate": "x:/{id}", "changeKind": "session"}
        action.update(_maybe(draw, "changesets", st.just([changeset])))
    elif kind == "canvasesChanged":
        action.update(_maybe(draw, "canvases", st.just([{"resource": "ahp-canvas:/c1"}])))
    return action


#: Actions that do not depend on a turn (drawn 3 times in 10, whatever the state).
_ANY_TIME = (
    "pendingMessageSet",
    "pendingMessageRemoved",
    "queuedMessagesReordered",
    "workingDirectorySet",
    "workingDirectoryRemoved",
    "activityChanged",
    "draftChanged",
    "isReadChanged",
    "isArchivedChanged",
    "movableChanged",
    "backgroundWorkSet",
    "backgroundWorkRemoved",
    "changesetsChanged",
    "canvasesChanged",
    "truncated",
    "turnsLoaded",
    "turnResume",
    "turnStarted",
)
#: While a turn is active, always possible (even when nothing matches).
_IN_TURN = (
    *("toolCallStart", "responsePart", "inputRequested") * 3,
    *("error", "turnComplete") * 2,
    *("turnCancelled", "usage", "delta", "toolCallDelta", "toolCallReady", "toolCallConfirmed"),
)


def _chat_kinds(ids: Mapping[str, list[str]]) -> tuple[str, ...]:
    """The turn-related action types to draw from, weighted towards the ones that apply
    to the state (a tool call in a state the action transitions, a text part to grow,
    an open input request, a resumable errored turn)."""
    if not ids["turn"]:
        return ("turnStarted",) * 3 + ("turnResume",) * (4 if ids["resumable"] else 1)
    kinds = list(_IN_TURN)
    for kind, statuses in _TARGETS.items():
        if any(ids[f"tools:{status}"] for status in statuses):
            kinds += [kind] * 5
    if ids["parts"]:
        kinds += ["delta", "reasoning"] * 3
    if ids["requests"]:
        kinds += ["inputAnswerChanged", "inputCompleted"] * 3
    return tuple(kinds)


def _fold(
    kind: str,
    initial: st.SearchStrategy[Json],
    actions: Callable[[Json], st.SearchStrategy[Json]],
) -> st.SearchStrategy[tuple[Json, list[Json]]]:
    """A strategy of ``(initial, actions)``: each action drawn against the 1.0 state the
    ones before it produced."""
    channel = CHANNELS[kind]

    @st.composite
    def sequences(draw: st.DrawFn) -> tuple[Json, list[Json]]:
        start = draw(initial)
        state = codec.convert(start, channel.state_1_0)
        drawn: list[Json] = []
        for _ in range(draw(st.integers(0, 20))):
            action = draw(actions(wire(state)))
            drawn.append(action)
            state = channel.reduce_1_0(state, codec.convert(action, types_1_0.StateAction), clock)
        return start, drawn

    return sequences()


def chat_sequences() -> st.SearchStrategy[tuple[Json, list[Json]]]:
    return _fold("chat", chat_states(), chat_actions)


# ==============================================================================================
# Coherent session sequences
# ==============================================================================================

_enablements = st.sampled_from(
    (
        [],
        [{"kind": "global", "enabled": False}],
        [{"kind": "global", "enabled": True}],
        [{"kind": "session", "enabled": False}, {"kind": "global", "enabled": True}],
        [{"kind": "workspace", "uri": DIRS[0], "enabled": False}],
        [{"kind": "futureScope", "enabled": False}],  # a decision kind 1.0 does not know
    )
)
_mcp_states = st.sampled_from(
    (
        {"kind": "starting"},
        {"kind": "starting", "blocking": True},
        {"kind": "starting", "blocking": True},
        {"kind": "starting", "blocking": False},
        {"kind": "ready"},
        {"kind": "stopped"},
        {"kind": "error", "error": ERROR},
    )
)
CUSTOMIZATION_IDS = ("plug", "plug2", "dir", "mcp", "mcp2", "agent", "cmcp")


@st.composite
def mcp_servers(draw: st.DrawFn, mcp_id: str) -> Json:
    server = {
        "id": mcp_id,
        "uri": f"file:///{mcp_id}",
        "name": mcp_id,
        "type": "mcpServer",
        "state": draw(_mcp_states),
    }
    server.update(_maybe(draw, "enablement", _enablements))
    server.update(_maybe(draw, "channel", st.just("ahp-mcp:/x")))
    return server


@st.composite
def children(draw: st.DrawFn) -> Json:
    """A container's child: an MCP server or an agent (ids may repeat a top-level one)."""
    if draw(st.booleans()):
        return draw(mcp_servers(draw(st.sampled_from(("cmcp", "mcp")))))
    child_id = draw(st.sampled_from(("agent", "dir")))
    child = {"id": child_id, "uri": f"file:///{child_id}", "name": child_id, "type": "agent"}
    return {**child, **_maybe(draw, "enabled", st.booleans())}


#: Top-level ids per customization type (mostly distinct, so MCP actions find servers).
_TOP_LEVEL_IDS: Final[Mapping[str, tuple[str, ...]]] = {
    "plugin": ("plug", "plug2"),
    "directory": ("dir",),
    "mcpServer": ("mcp", "mcp2", "plug"),
}


@st.composite
def customizations(draw: st.DrawFn, *, client: bool = False) -> Json:
    kind = "plugin" if client else draw(st.sampled_from(("plugin", "directory", "mcpServer")))
    entry_id = draw(st.sampled_from(_TOP_LEVEL_IDS[kind]))
    if kind == "mcpServer":
        return draw(mcp_servers(entry_id))
    entry: dict[str, Json] = {
        "id": entry_id,
        "uri": f"file:///{entry_id}",
        "name": entry_id,
        "type": kind,
    }
    entry.update(_maybe(draw, "children", st.lists(children(), max_size=2)))
    if kind == "directory":
        entry.update(enabled=draw(st.booleans()), contents="", writable=draw(st.booleans()))
    else:
        entry.update(_maybe(draw, "enablement", _enablements))
    if client:
        entry.update(_maybe(draw, "nonce", st.just("n1")))
        entry.update(_maybe(draw, "childEnablement", st.just({"agent": [ENABLED_FALSE]})))
    return entry


ENABLED_FALSE = {"kind": "global", "enabled": False}


@st.composite
def chat_summaries(draw: st.DrawFn, resource: str) -> Json:
    summary: dict[str, Json] = {
        "resource": resource,
        "title": "Chat",
        "status": draw(_status),
        "modifiedAt": NOW,
    }
    summary.update(_maybe(draw, "workingDirectories", st.lists(st.sampled_from(DIRS), unique=True)))
    summary.update(_maybe(draw, "movable", st.booleans()))
    summary.update(_maybe(draw, "changes", st.just({"files": 2})))
    return summary


@st.composite
def session_input_requests(draw: st.DrawFn) -> Json:
    kind = draw(
        st.sampled_from(
            ("chatInput", "toolConfirmation", "toolClientExecution", "toolAuthentication")
        )
    )
    request: dict[str, Json] = {
        "id": draw(st.sampled_from(("in1", "in2"))),
        "chat": CHAT,
        "kind": kind,
    }
    if kind == "chatInput":
        return {**request, "request": draw(input_requests())}
    request["turnId"] = "t1"
    call = {
        "toolCallId": "tc1",
        "toolName": "bash",
        "displayName": "Bash",
        "invocationMessage": "x",
    }
    if kind == "toolConfirmation":
        tool_call = {
            **call,
            "status": "pending-confirmation",
            **_maybe(draw, "toolInput", _tool_inputs),
        }
    elif kind == "toolClientExecution":
        request["clientId"] = "me"
        tool_call = {**call, "status": "running", "confirmed": "not-needed"}
    else:
        contributor = {"kind": "mcp", "customizationId": "mcp"}
        tool_call = {
            **call,
            "status": "auth-required",
            "confirmed": "not-needed",
            "contributor": contributor,
            "auth": AUTH,
        }
    return {**request, "toolCall": tool_call}


@st.composite
def session_states(draw: st.DrawFn) -> Json:
    chats = draw(st.lists(st.sampled_from((CHAT, OTHER_CHAT, THIRD_CHAT)), unique=True))
    state: dict[str, Json] = {
        "provider": "echo",
        "title": "Session",
        "status": draw(_status),
        "lifecycle": draw(st.sampled_from(("creating", "ready", "failed"))),
        "activeClients": [],
        "chats": [draw(chat_summaries(chat)) for chat in chats],
    }
    state.update(_maybe(draw, "defaultChat", st.sampled_from((CHAT, OTHER_CHAT))))
    state.update(
        _maybe(draw, "workingDirectories", st.lists(st.sampled_from(DIRS), min_size=1, unique=True))
    )
    if draw(st.integers(0, 3)) > 0:
        state["customizations"] = draw(st.lists(customizations(), min_size=1, max_size=3))
    state.update(
        _maybe(
            draw,
            "inputNeeded",
            st.lists(session_input_requests(), min_size=1, max_size=2, unique_by=lambda r: r["id"]),
        )
    )
    state.update(
        _maybe(
            draw,
            "origin",
            st.just(
                {
                    "kind": "automation",
                    "automation": "ahp-automation:/a",
                    "run": "ahp-automation-run:/r",
                }
            ),
        )
    )
    return state


def _session_ids(state: Json) -> dict[str, list[str]]:
    """The ids a session state holds, by what an action may name."""
    entries = state.get("customizations") or []
    nested = [c for e in entries if isinstance(e, dict) for c in e.get("children") or []]
    return {
        "customizations": [e["id"] for e in [*entries, *nested] if isinstance(e, dict)],
        "mcp": [e["id"] for e in [*entries, *nested] if isinstance(e, dict) and "state" in e],
        "blocking": [
            e["id"]
            for e in [*entries, *nested]
            if isinstance(e, dict) and e.get("state", {}).get("blocking") is True
        ],
        "chats": [c["resource"] for c in state["chats"]],
        "inputs": [r["id"] for r in state.get("inputNeeded") or [] if isinstance(r, dict)],
        "dirs": list(state.get("workingDirectories") or []),
        "clients": [c["clientId"] for c in state["activeClients"]],
    }


_CHATS = (CHAT, OTHER_CHAT, THIRD_CHAT)


@st.composite
def session_actions(draw: st.DrawFn, state: Json) -> Json:
    """One session action, its ids mostly taken from ``state`` (1.0 wire JSON)."""
    ids = _session_ids(state)
    kind = draw(st.sampled_from(_SESSION_ACTION_TYPES))
    action: dict[str, Json] = {"type": f"session/{kind}"}
    some_id = _pick(draw, ids["customizations"], CUSTOMIZATION_IDS)
    some_chat = _pick(draw, ids["chats"], _CHATS)
    if kind == "inputNeededSet":
        request = draw(session_input_requests())
        action.update(request={**request, "id": _pick(draw, ids["inputs"], ("in1", "in2", "in3"))})
    elif kind == "inputNeededRemoved":
        action.update(id=_pick(draw, ids["inputs"], ("in1", "in2")))
    elif kind == "customizationToggled":
        action.update(id=some_id, enablement=draw(_enablements))
    elif kind == "customizationUpdated":
        action.update(customization=draw(customizations()))
    elif kind == "customizationsChanged":
        action.update(customizations=draw(st.lists(customizations(), max_size=2)))
    elif kind == "customizationRemoved":
        action.update(id=some_id)
    elif kind in ("mcpServerStartRequested", "mcpServerStopRequested"):
        action.update(id=_pick(draw, ids["mcp"], CUSTOMIZATION_IDS))
    elif kind == "mcpServerBackgroundRequested":
        action.update(id=_pick(draw, ids["blocking"] or ids["mcp"], CUSTOMIZATION_IDS))
    elif kind == "mcpServerStateChanged":
        action.update(id=_pick(draw, ids["mcp"], CUSTOMIZATION_IDS), state=draw(_mcp_states))
        action.update(_maybe(draw, "channel", st.sampled_from(("ahp-mcp:/y", None))))
    elif kind == "chatAdded":
        action.update(summary=draw(chat_summaries(draw(st.sampled_from(_CHATS)))))
    elif kind == "chatUpdated":
        changes: dict[str, Json] = {}
        changes.update(_maybe(draw, "title", st.just("Renamed")))
        changes.update(_maybe(draw, "status", _status))
        directories = st.one_of(st.none(), st.lists(st.sampled_from(DIRS), unique=True))
        changes.update(_maybe(draw, "workingDirectories", directories))
        changes.update(_maybe(draw, "movable", st.booleans()))
        changes.update(_maybe(draw, "changes", st.just({"files": 1})))
        changes.update(_maybe(draw, "activity", st.sampled_from(("busy", None))))
        action.update(chat=some_chat, changes=changes)
    elif kind == "chatRemoved":
        action.update(chat=some_chat)
    elif kind == "chatsReordered":
        action.update(chats=draw(st.permutations(ids["chats"])))
    elif kind == "defaultChatChanged":
        action.update(_maybe(draw, "defaultChat", st.sampled_from((some_chat, None))))
    elif kind == "workingDirectorySet":
        action.update(directory=draw(st.sampled_from(DIRS)))
    elif kind == "workingDirectoryRemoved":
        action.update(directory=_pick(draw, ids["dirs"], DIRS))
    elif kind == "workingDirectoryReplaced":
        action.update(
            directory=_pick(draw, ids["dirs"], DIRS),
            replacement=draw(st.sampled_from((*DIRS, "file:///work/d"))),
        )
    elif kind == "isReadChanged":
        action.update(isRead=draw(st.booleans()))
    elif kind == "isArchivedChanged":
        action.update(isArchived=draw(st.booleans()))
    elif kind == "creationFailed":
        action.update(error=ERROR)
    elif kind == "activeClientSet":
        client = {
            "clientId": draw(st.sampled_from(CLIENTS)),
            "tools": [],
            **_maybe(draw, "customizations", st.lists(customizations(client=True), max_size=2)),
        }
        action.update(activeClient=client)
    elif kind == "activeClientRemoved":
        action.update(clientId=_pick(draw, ids["clients"], CLIENTS))
    elif kind == "titleChanged":
        action.update(title="New")
    return action


_SESSION_ACTION_TYPES = (
    *("inputNeededSet", "inputNeededRemoved", "customizationToggled") * 3,
    *("chatUpdated", "mcpServerStateChanged", "mcpServerBackgroundRequested") * 2,
    "customizationUpdated",
    "customizationsChanged",
    "customizationRemoved",
    "mcpServerStartRequested",
    "mcpServerStopRequested",
    "chatAdded",
    "chatRemoved",
    "chatsReordered",
    "defaultChatChanged",
    "workingDirectorySet",
    "workingDirectoryRemoved",
    "workingDirectoryReplaced",
    "isReadChanged",
    "isArchivedChanged",
    "ready",
    "creationFailed",
    "activeClientSet",
    "activeClientRemoved",
    "titleChanged",
)


def session_sequences() -> st.SearchStrategy[tuple[Json, list[Json]]]:
    return _fold("session", session_states(), session_actions)


# ==============================================================================================
# Fixtures: the shared 0.7 corpus lifted to 1.0, and the 1.0 corpus
# ==============================================================================================


def drop_nulls(value: Json) -> Json:
    """Fixture ``null`` means absent (fixtures/README.md)."""
    if isinstance(value, dict):
        return {key: drop_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [drop_nulls(item) for item in value]
    return value


def _inbound(action_type: str, key: str, value: Json) -> Json:
    """``value`` lifted to 1.0 by the view's own inbound translation of the action that
    carries it (``{type: action_type, key: value}``)."""
    lifted = view.inbound_action({"type": action_type, key: value})
    assert lifted is not None
    return lifted[key]


def lift_state(kind: str, value: Json) -> Json:
    """A 0.7 snapshot state in 1.0 terms (what a 1.0 host would hold), or as is."""
    out = dict(value)
    if kind == "chat":
        if "turns" in out:
            out["turns"] = _inbound("chat/turnsLoaded", "turns", out["turns"])
        out = _inbound("session/chatAdded", "summary", out)
    elif kind == "session":
        if out.get("lifecycle") == "creationFailed":
            out["lifecycle"] = "failed"
        if "chats" in out:
            out["chats"] = [_inbound("session/chatAdded", "summary", c) for c in out["chats"]]
        if "customizations" in out:
            out["customizations"] = _inbound(
                "session/customizationsChanged", "customizations", out["customizations"]
            )
        out["activeClients"] = [
            _inbound("session/activeClientSet", "activeClient", client)
            for client in out.get("activeClients", [])
        ]
    elif kind == "root":
        if "agents" in out:
            out["agents"] = _inbound("root/agentsChanged", "agents", out["agents"])
        if "terminals" in out:
            out["terminals"] = _inbound("root/terminalsChanged", "terminals", out["terminals"])
    return out


FILES_0_7 = fixture_files("reducers")
FILES_1_0 = fixture_files("reducers", version="1.0")


def lifted_case(path: Path) -> tuple[str, Json, list[Json]]:
    """A 0.7 fixture as a 1.0 case; skipped when the 1.0 form does not view back to
    the fixture's initial state (the lift would then test something else)."""
    case = load(path)
    kind = case["reducer"]
    if kind not in CHANNELS:
        pytest.skip(f"no cross-check for the {kind} reducer")
    initial = drop_nulls(case["initial"])
    lifted = lift_state(kind, initial)
    try:
        codec.convert(lifted, CHANNELS[kind].state_1_0)
    except msgspec.ValidationError as error:
        pytest.skip(f"the initial state has no 1.0 form: {error}")
    differing = list(diff(wire(initial), wire(view.state(kind, lifted))))
    if differing:
        # e.g. a 0.7 chat with directories but no primary: at 1.0 index 0 is the primary
        pytest.skip(f"the lifted initial state views back differently at {differing}")
    actions: list[Json] = []
    for action in case["actions"]:
        translated = view.inbound_action(drop_nulls(action), chat_of=lambda s, t: CHAT)
        if translated is None:
            continue
        try:
            codec.convert(translated, types_1_0.StateAction)
        except msgspec.ValidationError as error:
            pytest.skip(f"{action.get('type')} has no 1.0 form: {error}")
        actions.append(translated)
    return kind, lifted, actions


# ==============================================================================================
# The tests
# ==============================================================================================

PROFILE = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("kind", sorted(CHANNELS))
@PROFILE
@given(data=st.data())
def test_random_sequences_agree(kind: str, data: st.DataObject) -> None:
    channel = CHANNELS[kind]
    initial = data.draw(random_wire(channel.state_1_0))
    actions = data.draw(st.lists(random_wire(channel.actions_1_0), max_size=8))
    cross_check(kind, initial, actions)


@settings(PROFILE, max_examples=250)
@given(sequence=chat_sequences())
def test_coherent_chat_sequences_agree(sequence: tuple[Json, list[Json]]) -> None:
    cross_check("chat", *sequence)


@settings(PROFILE, max_examples=200)
@given(sequence=session_sequences())
def test_coherent_session_sequences_agree(sequence: tuple[Json, list[Json]]) -> None:
    cross_check("session", *sequence)


@pytest.mark.parametrize("path", FILES_0_7, ids=[p.name for p in FILES_0_7])
def test_shared_0_7_fixtures_lifted_to_1_0_agree(path: Path) -> None:
    cross_check(*lifted_case(path))


@pytest.mark.parametrize("path", FILES_1_0, ids=[p.name for p in FILES_1_0])
def test_1_0_fixtures_agree(path: Path) -> None:
    case = load(path)
    cross_check(case["reducer"], drop_nulls(case["initial"]), case["actions"])


def test_most_0_7_fixtures_lift() -> None:
    """The lift is not a way of skipping the corpus."""
    lifted = 0
    for path in FILES_0_7:
        try:
            lifted_case(path)
        except pytest.skip.Exception:
            continue
        lifted += 1
    assert lifted >= 0.9 * len(FILES_0_7)


# ==============================================================================================
# Every table entry is needed, and the check is strict about everything else
# ==============================================================================================


def _chat(**extra: Json) -> Json:
    return {"resource": CHAT, "title": "Chat", "status": 1, "modifiedAt": NOW, "turns": [], **extra}


def _active(*parts: Json) -> Json:
    message = {"text": "hi", "origin": {"kind": "user"}}
    return {"id": "t1", "startedAt": NOW, "message": message, "responseParts": list(parts)}


def _call(status: str, **extra: Json) -> Json:
    call = {"toolCallId": "tc1", "toolName": "bash", "displayName": "Bash", "status": status}
    if status != "streaming":
        call["invocationMessage"] = "Running"
    if status == "running":
        call["confirmed"] = "not-needed"
    return {"kind": "toolCall", "toolCall": {**call, **extra}}


def _session(**extra: Json) -> Json:
    return {
        "provider": "echo",
        "title": "Session",
        "status": 8,
        "lifecycle": "ready",
        "activeClients": [],
        "chats": [],
        **extra,
    }


def _summary(resource: str, **extra: Json) -> Json:
    return {"resource": resource, "title": "Chat", "status": 1, "modifiedAt": NOW, **extra}


_TOOL = {"turnId": "t1", "toolCallId": "tc1"}
_READY = {"type": "chat/toolCallReady", **_TOOL, "invocationMessage": "Run"}
_FAILED_TURN = {
    "id": "t1",
    "message": {"text": "hi", "origin": {"kind": "user"}},
    "responseParts": [{"kind": "error", "error": ERROR, "resumable": True}],
    "state": "error",
}
_CLIENT_EXECUTION = {
    "id": "in1",
    "chat": CHAT,
    "kind": "toolClientExecution",
    "turnId": "t1",
    "clientId": "me",
    "toolCall": _call("running")["toolCall"],
}

#: ``(KNOWN_DRIFTS key, channel kind, 1.0 initial state, 1.0 actions)``: the smallest
#: sequence that shows each difference.
WITNESSES: Final[list[tuple[str, str, Json, list[Json]]]] = [
    (
        "turnResume",
        "chat",
        _chat(turns=[_FAILED_TURN], status=2),
        [{"type": "chat/turnResume", "turnId": "t1"}],
    ),
    (
        "chatIsRead/ArchivedChanged",
        "chat",
        _chat(),
        [{"type": "chat/isReadChanged", "isRead": True}],
    ),
    (
        "chatIsRead/ArchivedChanged",
        "chat",
        _chat(),
        [{"type": "chat/isArchivedChanged", "isArchived": True}],
    ),
    (
        "workingDirectoryReplaced",
        "session",
        _session(workingDirectories=list(DIRS[:2])),
        [
            {
                "type": "session/workingDirectoryReplaced",
                "directory": DIRS[1],
                "replacement": DIRS[2],
            }
        ],
    ),
    (
        "chatsReordered",
        "session",
        _session(chats=[_summary(CHAT), _summary(OTHER_CHAT)]),
        [{"type": "session/chatsReordered", "chats": [OTHER_CHAT, CHAT]}],
    ),
    (
        "toolCallReadyRefines",
        "chat",
        _chat(activeTurn=_active(_call("running", toolInput="ls"))),
        [{**_READY, "confirmed": "not-needed"}],  # no toolInput: 1.0 keeps "ls"
    ),
    (
        "toolCallReadyRefines",
        "chat",
        _chat(activeTurn=_active(_call("streaming"))),
        [{**_READY, "intention": "list the files"}],
    ),
    (
        "toolCallReadyRefines",
        "chat",
        _chat(activeTurn=_active(_call("streaming"))),
        [{**_READY, "contributor": {"kind": "mcp", "customizationId": "mcp"}}],
    ),
    (
        "toolCallReadyByReference",
        "chat",
        _chat(activeTurn=_active(_call("pending-confirmation", toolInput="ls"))),
        [{**_READY, "toolInput": CONTENT_REF}],
    ),
    (
        "toolCallConfirmedEdit",
        "chat",
        _chat(activeTurn=_active(_call("pending-confirmation", toolInput=CONTENT_REF))),
        [
            {
                "type": "chat/toolCallConfirmed",
                **_TOOL,
                "approved": True,
                "confirmed": "user-action",
                "editedToolInput": "x",
            }
        ],
    ),
    (
        "toolCallConfirmedEdit",
        "chat",
        _chat(activeTurn=_active(_call("pending-confirmation"))),
        [
            {
                "type": "chat/toolCallConfirmed",
                **_TOOL,
                "approved": True,
                "confirmed": "user-action",
                "editedToolInput": "x",
            }
        ],
    ),
    (
        "toolCallDeltaWithoutContent",
        "chat",
        _chat(activeTurn=_active(_call("streaming"))),
        [{"type": "chat/toolCallDelta", **_TOOL, "invocationMessage": "Typing"}],
    ),
    (
        "inputNeededClientExecution",
        "session",
        _session(),
        [{"type": "session/inputNeededSet", "request": _CLIENT_EXECUTION}],
    ),
    (
        "chatPrimaryDirectory",
        "chat",
        _chat(workingDirectories=list(DIRS[:2])),
        [{"type": "chat/workingDirectoryRemoved", "directory": DIRS[0]}],
    ),
    (
        "chatPrimaryDirectory",
        "chat",
        _chat(),
        [{"type": "chat/workingDirectorySet", "directory": DIRS[0]}],
    ),
    (
        "chatUpdatedEmptiesDirectories",
        "session",
        _session(chats=[_summary(CHAT, workingDirectories=[DIRS[0]])]),
        [{"type": "session/chatUpdated", "chat": CHAT, "changes": {"workingDirectories": []}}],
    ),
    (
        "changesetContentChanged",
        "changeset",
        {"status": "error", "error": ERROR, "files": []},
        [{"type": "changeset/contentChanged", "files": []}],
    ),
]


def test_every_known_drift_has_a_witness() -> None:
    assert {key for key, *_ in WITNESSES} == set(KNOWN_DRIFTS)


@pytest.mark.parametrize(
    ("key", "kind", "initial", "actions"),
    WITNESSES,
    ids=[f"{key}-{index}" for index, (key, *_) in enumerate(WITNESSES)],
)
def test_each_known_drift_is_a_real_difference(
    key: str, kind: str, initial: Json, actions: list[Json]
) -> None:
    """The witness needs exactly that entry (so the entry is not dead) and fails without it."""
    assert cross_check(kind, initial, actions) == [key]


def test_ignored_fields_are_needed() -> None:
    """Without the ignored ``modifiedAt`` a plain turn start already differs."""
    start = {
        "type": "chat/turnStarted",
        "turnId": "t1",
        "startedAt": NOW,
        "message": {"text": "hi", "origin": {"kind": "user"}},
    }
    assert cross_check("chat", _chat(), [start]) == []
    with pytest.raises(Unexplained, match="modifiedAt"):
        cross_check("chat", _chat(), [start], ignored={})


def test_a_difference_outside_the_table_fails() -> None:
    """A view that loses a chat/delta, or changes a field the toolCallReady entries
    do not name, is caught."""
    turn = _chat(activeTurn=_active({"kind": "markdown", "id": "p1", "content": ""}))
    delta = {"type": "chat/delta", "turnId": "t1", "partId": "p1", "content": "x"}

    def no_deltas(action: Json) -> Json | None:
        return None if action["type"] == "chat/delta" else view.action(action)

    with pytest.raises(Unexplained, match=r"activeTurn\.responseParts\.0\.content"):
        cross_check("chat", turn, [delta], action_view=no_deltas)

    def renamed(action: Json) -> Json | None:
        out: Json = view.action(action)
        return {**out, "invocationMessage": "other"} if action["type"] == _READY["type"] else out

    streaming = _chat(activeTurn=_active(_call("streaming")))
    ready = {**_READY, "intention": "list the files"}  # a known drift, but not this field
    with pytest.raises(Unexplained, match="invocationMessage"):
        cross_check("chat", streaming, [ready], action_view=renamed)


def test_a_drift_resyncs_and_the_rest_is_still_checked() -> None:
    """After a drift the 0.7 client is re-synced; a later unexplained step still fails."""
    sequence = [
        {"type": "chat/isReadChanged", "isRead": True},
        {"type": "chat/workingDirectorySet", "directory": DIRS[0]},
        {"type": "chat/movableChanged", "movable": True},
    ]
    assert cross_check("chat", _chat(workingDirectories=[DIRS[0]]), sequence) == [
        "chatIsRead/ArchivedChanged"
    ]

    def no_activity(action: Json) -> Json | None:
        return None if action["type"] == "chat/activityChanged" else view.action(action)

    with pytest.raises(Unexplained, match="step 1"):
        cross_check(
            "chat",
            _chat(),
            [sequence[0], {"type": "chat/activityChanged", "activity": "busy"}],
            action_view=no_activity,
        )


# -- regressions: differences the cross-check found and that were fixed ------------------------


@pytest.mark.parametrize("target", ["dir", "agent", "plug", "mcp"])
def test_a_first_decision_of_an_unknown_kind_counts_as_enabled_on_both_paths(
    target: str,
) -> None:
    """Found by the cross-check: the 1.0 reducer writes ``enabled: true`` into a
    directory or child for a first decision of an unknown kind; the view used to read
    that decision's own ``enabled: false`` (for the projected action and for plugins
    and MCP servers), so a 0.7 client disabled what 1.0 enabled."""
    directory = {
        "id": "dir",
        "uri": "file:///dir",
        "name": "dir",
        "type": "directory",
        "enabled": True,
        "contents": "",
        "writable": True,
        "children": [{"id": "agent", "uri": "file:///a", "name": "a", "type": "agent"}],
    }
    plugin = {"id": "plug", "uri": "file:///plug", "name": "plug", "type": "plugin"}
    mcp = {
        "id": "mcp",
        "uri": "file:///m",
        "name": "m",
        "type": "mcpServer",
        "state": {"kind": "ready"},
    }
    toggled = {
        "type": "session/customizationToggled",
        "id": target,
        "enablement": [{"kind": "futureScope", "enabled": False}],
    }
    assert (
        cross_check("session", _session(customizations=[directory, plugin, mcp]), [toggled]) == []
    )
