"""The 0.7 view: the AHP 1.0 wire JSON projected into what a 0.7.0 client expects,
and a 0.7 client's messages translated into 1.0.

Layer: protocol (pure: no I/O, no asyncio). Input and output are the JSON
builtins ``msgspec.json.decode`` gives; nothing here decodes into structs.

Contract of every function:

* **pure** — inputs are never mutated; a changed value is a fresh (shallow)
  copy along the changed path only;
* **identity when unchanged** — when the 0.7 shape equals the 1.0 shape the
  function returns *the input object itself*, so a caller can test
  ``out is value`` and reuse the bytes it already encoded. Per action type,
  :data:`IDENTITY_ACTIONS` says ahead of time that the projection is always the
  identity (the per-delta path: ``chat/delta``, ``chat/reasoning``,
  ``chat/usage`` … never need to call :func:`action`);
* **total** — peer data never makes a function raise; a value of the wrong
  shape, an unknown key, an unknown union variant or an unknown action type
  passes through unchanged (the 0.7 rule "peers ignore unknown keys"; the
  host's own validation decides what to refuse).

"One table per version": :data:`OUTBOUND` maps each 1.0 ``$def`` name whose
0.7 form differs to its projection; the named tables :data:`ACTIONS` (every
one of the 106 1.0 action types → projection), :data:`NOTIFICATIONS`,
:data:`RESULTS` and, inbound, :data:`INBOUND_ACTIONS` and
:data:`INBOUND_PARAMS` are built from the same pieces. The projections recurse
through the tables; the public functions below are thin entry points.

Outbound rules (1.0 → 0.7), each checked against both schema sets
(``shared/spec-1.0/SCHEMA-DIFF-0.7-to-1.0.md``):

* ``StateAction``: the 21 types ACTIONS.md tags newer than 0.7.0 are dropped
  (``None``, :data:`DROPPED_ACTIONS`).
* ``ChatErrorAction``: ``part`` (ErrorResponsePart) → ``error`` =
  ``part.error``; ``resumable`` is lost.
* ``ChatResponsePartAction``: dropped when ``part.kind`` is ``error`` (the 1.0
  reducer ignores it too, REDUCER-CHANGES 9); otherwise ``part`` projected.
* ``Turn``: state ``error`` and the last response part an error part → that
  part is removed and becomes ``turn.error``.
* ``ResponsePart``: ``error`` parts removed everywhere else (0.7 has no such
  kind); ``toolCall`` parts project their ``ToolCallState``.
  ``ResourceResponsePart`` is only a rename (kind ``contentRef`` on both
  sides): unchanged.
* ``ToolInput`` (every tool-call state, ``chat/toolCallReady``): an inline
  string is kept; a ``ContentRef`` is *omitted* (``toolInput`` is optional at
  0.7; see the choices below).
* ``ChatToolCallDeltaAction``: ``content`` absent → ``""`` (required at 0.7).
* ``ChatToolCallReadyAction``: ``contributor`` and ``intention`` removed.
* ``MessageKind``: ``automation`` → ``systemNotification`` (wherever a
  ``Message`` appears: turns, pending messages, draft, ``userSuggestion``).
* ``ChatState``: ``backgroundWork``, ``canvases``, ``changes``,
  ``changesets``, ``movable`` removed; ``primaryWorkingDirectory`` =
  ``workingDirectories[0]`` when there is one.
* ``ChatSummary`` (``SessionState.chats``, ``session/chatAdded``):
  ``changes``, ``movable`` removed; ``primaryWorkingDirectory`` as for
  ``ChatState``.
* ``SessionChatUpdatedAction``: ``changes`` as ``ChatSummary``
  (``primaryWorkingDirectory`` only when ``changes.workingDirectories`` is
  given); the action is dropped when nothing is left in ``changes``.
* ``SessionState``: ``origin`` removed; ``lifecycle`` ``failed`` →
  ``creationFailed``; chats, customizations, active clients, config schema and
  input-needed tool calls projected.
* ``SessionSummary`` (``listSessions``, ``root/sessionAdded``): ``chats``,
  ``defaultChat``, ``origin`` removed.
* ``SessionSummaryChangedParams``: ``changes`` as ``SessionSummary``; the
  notification is dropped when nothing is left in ``changes``.
* ``PluginCustomization``, ``ClientPluginCustomization``,
  ``McpServerCustomization`` (top level and children, in root, session and
  active-client state and in the customization actions): the ``enablement``
  list → boolean ``enabled`` = the effective value (``enablement[0].enabled``,
  ``true`` when absent or empty; REDUCER-CHANGES 3); ``childEnablement``
  removed.
* ``SessionCustomizationToggledAction``: ``enablement`` → ``enabled``, the
  effective value by the same rule.
* ``McpServerStartingState``: ``blocking`` removed.
* ``ConfigPropertySchema``, ``SessionConfigPropertySchema`` (root config,
  model config schemas, session config, ``resolveSessionConfig``):
  ``minItems``/``maxItems`` removed, at every depth.
* ``MultipleWorkingDirectoriesCapability``: ``requiresPrimary`` =
  ``immutablePrimary or primaryReplacement``; both removed.
* ``TerminalState``, ``TerminalInfo``: ``lifecycle`` removed; ``exitCode`` =
  ``lifecycle.exitCode`` when ``exited`` with a code, else absent.
* ``TerminalSessionClaim``: ``chat`` removed.
* ``Annotation``: ``origin`` removed; ``turnId`` = ``origin.turnId``, ``""``
  when the origin names no turn (required at 0.7).
* ``AnnotationsUpdatedAction``: ``origin`` removed; when it was given,
  ``turnId`` = ``origin.turnId`` or ``""`` (as the state then shows it).
* ``ChangesetStatus``: ``recomputing`` → ``computing``.
* ``AuthRequiredParams``: ``resource`` (ProtectedResourceMetadata) → its
  ``resource`` string.
* ``InitializeResult``: ``_meta`` and ``automations`` removed; snapshots
  projected.
* ``Snapshot``: ``state`` projected by the channel kind of ``resource``.
* ``ActionEnvelope``: ``action`` projected; the envelope is dropped with it.
* ``ReconnectResult``: replayed envelopes projected (dropped ones left out),
  snapshots projected.
* Params of host → client requests: ``_meta`` removed
  (:func:`server_request_params`).
* ``SessionToolClientExecutionRequest``: ``toolCall`` (narrowed to a running
  state at 1.0) is a valid 0.7 ``ToolCallState``, projected like any tool call.
* ``AhpErrorCode``: unchanged outbound. A 1.0 host never sends -32006;
  -32011 ``Conflict`` is in 0.7's ``errors.ts`` (WIRE-SUMMARY §8) though not in
  the 0.7 schema enum.

Everything else is identical and passes through by identity: ``SessionStatus``
(bitset, unknown bits kept), ``FileEdit``/``edits`` (named models, same JSON),
``ProtectedResourceMetadata`` (1.0 only dropped two optional fields),
``ChangesetContentChangedAction`` (1.0 only dropped ``error``), the fields
1.0 made optional (``Turn.usage``, ``ActionEnvelope.origin`` … were
``T | undefined`` at 0.7 too; see WIRE-SUMMARY §13), ``ReconnectResult`` as a
name, every notification not in :data:`NOTIFICATIONS` and every command result
not in :data:`RESULTS` (``fetchTurns`` is ``{}`` on both sides: its turns
arrive as ``chat/turnsLoaded``).

Inbound rules (0.7 → 1.0; :func:`inbound_action`, :func:`inbound_params`):

* ``session/customizationToggled`` ``enabled: b`` → ``enablement:
  [{"kind": "global", "enabled": b}]`` (1.0: "a client publishes … its global
  decision"). The list *replaces* every decision, so a 0.7 toggle clears
  session/workspace decisions;
* customizations a 0.7 client publishes (``session/activeClientSet``,
  ``createSession.activeClient``): each plugin's and MCP server's ``enabled``
  → ``enablement`` the same way;
* ``primaryWorkingDirectory`` (``createSession``, ``createChat``, chat
  summaries) → moved to index 0 of ``workingDirectories`` (no duplicate). When
  ``workingDirectories`` is absent: ``createSession`` gets ``[primary]`` (0.7
  requires the primary to be one of them); a chat keeps inheriting the
  session's set and the designation is dropped (narrowing the chat to one
  directory would be worse);
* ``createSession.fork`` → removed from the 1.0 ``createSession``; 1.0 has only
  chat forks (``createChat`` with ``source: {kind: "fork", chat, turnId}``, the
  source chat in the session the chat is created in) and atomic ``moveChat``
  to a host-allocated session. :func:`fork_source` gives what the 0.7 request
  forks (session, turn) and :func:`fork_request` the 1.0 ``createChat`` fork
  request once the host has resolved the chat that holds that turn. The new
  chat's URI is derived from the 0.7 session URI (``ahp-session:/<id>`` →
  ``ahp-chat:/<id>``). Whether the host then also moves it into a new session
  at the 0.7 ``channel`` URI (so the 0.7 client finds the session it asked
  for) or refuses with -32602 is the host's decision, not the view's;
* ``TerminalSessionClaim`` (``createTerminal``, ``terminal/claimed``) gets the
  ``chat`` 1.0 requires from the ``chat_of(session, turnId)`` lookup the host
  passes; without an answer ``chat`` stays absent and 1.0 validation refuses it;
* ``annotations/set``/``annotations/updated`` ``turnId`` → ``origin: {session,
  chat?, turnId?}``: the session from the annotations channel URI, the chat
  from ``chat_of``; ``turnId: ""`` (what the outbound rule sends for "no
  turn") becomes an origin without a turn;
* 0.7 shapes of server-only actions are translated too (``chat/error``
  ``error`` → ``part``, ``Turn.error`` → trailing error part, ``exitCode`` →
  ``lifecycle``, ``requiresPrimary`` → ``immutablePrimary``,
  ``changeset/contentChanged.error`` removed …) so every 0.7 action has a 1.0
  form; the dispatch rules still refuse them from a client;
* an action type that exists only at 1.0 (:data:`DROPPED_ACTIONS`) is not a 0.7
  action: :func:`inbound_action` (and :func:`inbound_params` for
  ``dispatchAction``) returns ``None`` and the host refuses it — even the ones
  a 1.0 client may dispatch (``chat/turnResume``, ``chat/isReadChanged`` …):
  their echo is never sent to a 0.7 client, which would wait for it forever;
  :data:`METHODS_NOT_IN_0_7` are the commands a 0.7 client cannot call
  (the host answers -32601);
* optional 0.7 keys 1.0 dropped (``ProtectedResourceMetadata.resource_encryption_*``,
  only in host-sent shapes) pass through: 1.0 ignores unknown keys;
* ``_meta`` on params: the 0.7 schemas declare none but forbid no extra key
  (no ``additionalProperties: false`` anywhere in either set), and 1.0 accepts
  ``_meta``, so a 0.7 client's ``_meta`` passes through;
* error responses a 0.7 client sends to a server-initiated request:
  ``-32006`` ``ContentNotFound`` (reserved and unassigned at 1.0) →
  ``-32008`` ``NotFound`` (:func:`inbound_error`).

A 1.0 client on a 0.7 connection (the Python client, ``ahp_server/client``,
holds 1.0 states whatever it negotiated) uses the same pieces the other way
round: :func:`lift_snapshot`, :func:`lift_state`, :func:`lift_envelope`,
:func:`lift_notification` and :func:`lift_result` lift what a 0.7 host sends
(the inverse of :func:`snapshot`, :func:`envelope`, :func:`notification` and
:func:`command_result`; ``auth/required``'s resource string becomes a
``ProtectedResourceMetadata``), and :func:`client_params` projects the
commands it sends (``dispatchAction``'s action by :func:`action` — ``None``
for a 1.0-only type, which the client then refuses itself —, published
customizations, a terminal session claim's ``chat``).

Choices where the spec is silent (what a careful 0.7 client author expects):

* **1.0-only fields are stripped**, not passed through: the 0.7 schemas would
  accept them (no ``additionalProperties: false``), but the view is the 0.7
  shape, and a field a 0.7 client cannot interpret consistently (``movable``
  without ``moveChat``, ``origin`` with automation URIs, ``enablement`` next to
  ``enabled``) is noise at best. Keys neither schema knows pass through.
  :data:`REMOVED_FIELDS` lists every stripped key per type;
* a ``ContentRef`` tool input is **omitted**, not replaced by its URI: 0.7
  ``toolInput`` is the raw input text, which a client shows, forwards and
  edits; a URI there would be shown as the tool's arguments, and an edited
  URI sent back as ``editedToolInput`` would be written into the referenced
  resource by a 1.0 host (ToolCallParameterFields). Absent input is a state
  every 0.7 client already handles;
* ``automation`` messages are shown as ``systemNotification`` ("a
  system-generated notification rather than a direct user message"): never as
  ``user``, which would attribute them to the person;
* ``recomputing`` changesets are ``computing``: their result is about to be
  replaced, which is what ``computing`` tells a 0.7 client;
* a terminal that exited without an exit code has no ``exitCode`` — exactly
  what a 0.7 host produced for ``terminal/exited`` without a code (0.7 cannot
  tell it from a running terminal; that is why 1.0 added ``lifecycle``);
* ``primaryWorkingDirectory`` is reported whenever a chat has a directory,
  whatever its agent advertises: the view has no capabilities at hand,
  SCHEMA-DIFF calls index 0 the primary, and for an agent without one the
  read-only field is merely informational;
* ``requiresPrimary`` is true when either 1.0 capability is: both mean index 0
  is a protected primary, which a 0.7 client designates with
  ``primaryWorkingDirectory`` (mapped back to index 0 on the way in);
* an annotation whose origin has no turn gets ``turnId: ""`` (0.7 requires the
  key; ``""`` matches no turn, so the annotation reads as not turn-anchored);
* ``ClientPluginCustomization.childEnablement`` is stripped without being
  applied to the children: each child carries its own ``enabled`` (or
  ``enablement`` for MCP servers, projected) which the reducer maintains;
* the projected actions keep the projected state consistent: for every kept
  action, reducing the 0.7 view of the state with the 0.7 view of the action
  gives the 0.7 view of the reduced 1.0 state (``chat/error`` and the trailing
  error part, ``customizationToggled`` and the effective value,
  ``chatUpdated`` and index 0 …). Where 1.0 adds behaviour 0.7 cannot express
  (``chat/turnResume``, ``session/workingDirectoryReplaced`` …) the 0.7 client's
  state drifts from the view until it subscribes again; those are listed in
  "what a 0.7 client does not see" in docs/protocol.md. Smaller drifts, by
  the same token: a ``chatUpdated`` that empties ``workingDirectories`` cannot
  clear a 0.7 summary's ``primaryWorkingDirectory`` (a shallow merge cannot
  delete a key), a ``chat/workingDirectorySet``/``Removed`` that changes a
  chat's index 0 leaves its 0.7 ``primaryWorkingDirectory`` as it was, and a
  ``toolCallDelta`` without ``content`` leaves ``partialInput: ""`` where the
  view has none. Where the 1.0 reducers behave differently on an action both
  versions have (a ``toolClientExecution`` input request, ``toolCallReady``
  keeping an input or refining its contributor, an edit of a non-inline
  input, ``changeset/contentChanged`` keeping the error), the 0.7 client
  computes the 0.7 result. ``tests/protocol/test_views_cross_check.py`` keeps
  the complete list (``KNOWN_DRIFTS``) and checks everything else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, TypeAlias

from ahp_server.protocol.uris import CHAT_SCHEME, SESSION_SCHEME, parse_channel, quote_segment

__all__ = [
    "ACTIONS",
    "CLIENT_PARAMS",
    "DROPPED_ACTIONS",
    "IDENTITY_ACTIONS",
    "INBOUND_ACTIONS",
    "INBOUND_PARAMS",
    "LIFTED_NOTIFICATIONS",
    "LIFTED_RESULTS",
    "METHODS_NOT_IN_0_7",
    "NOTIFICATIONS",
    "OUTBOUND",
    "REMOVED_FIELDS",
    "RESULTS",
    "STATE_KINDS",
    "TRANSFORMED_ACTIONS",
    "ChatOf",
    "Json",
    "action",
    "client_params",
    "command_result",
    "envelope",
    "fork_request",
    "fork_source",
    "inbound_action",
    "inbound_error",
    "inbound_params",
    "lift_envelope",
    "lift_notification",
    "lift_result",
    "lift_snapshot",
    "lift_state",
    "notification",
    "project",
    "server_request_params",
    "session_summary",
    "snapshot",
    "state",
]

#: A JSON value as ``msgspec.json.decode`` gives it.
Json: TypeAlias = Any
#: ``(value, *context) -> value``; returns its input itself when nothing changes,
#: or :data:`_DROP` when the value has no 0.7 (or 1.0) form at all.
Transform: TypeAlias = Callable[..., Any]
#: The host's read-only catalogue lookup for inbound translation: the chat of
#: ``session`` that holds turn ``turn_id`` (its default chat when ``turn_id``
#: is ``None``), or ``None`` when unknown.
ChatOf: TypeAlias = Callable[[str, str | None], str | None]


class _Drop:
    """Marks a value, list item or whole message that the other side must not get."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<dropped>"


_DROP: Final = _Drop()


# -- combinators: each returns its input itself when nothing changed ----------------------------


def _identity(value: Json, *context: Any) -> Json:
    return value


def _drop(value: Json, *context: Any) -> Json:
    return _DROP


def _ref(name: str, table: Callable[[], Mapping[str, Transform]]) -> Transform:
    """A late-bound table entry (the tables are recursive)."""

    def project(value: Json, *context: Any) -> Json:
        return table()[name](value, *context)

    return project


def _list_of(item: Transform) -> Transform:
    """``T[]``: each item projected; items that project to :data:`_DROP` are left out."""

    def project(value: Json, *context: Any) -> Json:
        if not isinstance(value, list | tuple):
            return value
        out: list[Any] | None = None
        for index, old in enumerate(value):
            new = item(old, *context)
            if out is None:
                if new is old:
                    continue
                out = list(value[:index])
            if new is not _DROP:
                out.append(new)
        return value if out is None else out

    return project


def _values_of(item: Transform) -> Transform:
    """``Record<string, T>``: each value projected."""

    def project(value: Json, *context: Any) -> Json:
        if not isinstance(value, dict):
            return value
        out: dict[str, Any] | None = None
        for key, old in value.items():
            new = item(old, *context)
            if new is old:
                continue
            if out is None:
                out = dict(value)
            if new is _DROP:
                del out[key]
            else:
                out[key] = new
        return value if out is None else out

    return project


#: ``then(result, original, *context)``: a last step that may read the original.
_Then: TypeAlias = Callable[..., Any]


def _object(
    fields: Mapping[str, Transform] | None = None,
    *,
    drop: Iterable[str] = (),
    then: _Then | None = None,
) -> Transform:
    """An object type: ``drop`` keys removed, ``fields`` projected, then ``then``."""
    field_items = tuple((fields or {}).items())
    dropped = tuple(drop)

    def project(value: Json, *context: Any) -> Json:
        if not isinstance(value, dict):
            return value
        out: dict[str, Any] | None = None
        for key in dropped:
            if key in value:
                if out is None:
                    out = dict(value)
                del out[key]
        for key, transform in field_items:
            if key in value:
                old = value[key]
                new = transform(old, *context)
                if new is old:
                    continue
                if out is None:
                    out = dict(value)
                if new is _DROP:
                    out.pop(key, None)
                else:
                    out[key] = new
        result = value if out is None else out
        return result if then is None else then(result, value, *context)

    return project


def _union(key: str, variants: Mapping[str, Transform]) -> Transform:
    """A discriminated union: the variant named by ``value[key]``; unknown ones pass."""

    def project(value: Json, *context: Any) -> Json:
        if not isinstance(value, dict):
            return value
        tag = value.get(key)
        if not isinstance(tag, str):
            return value
        transform = variants.get(tag)
        return value if transform is None else transform(value, *context)

    return project


def _enum(renamed: Mapping[str, str]) -> Transform:
    """A string enum whose values ``renamed`` maps; every other value passes."""

    def project(value: Json, *context: Any) -> Json:
        if isinstance(value, str):
            return renamed.get(value, value)
        return value

    return project


def _writable(result: dict[str, Any], original: dict[str, Any]) -> dict[str, Any]:
    """``result`` if it is already a copy, else a copy (never write into an input)."""
    return dict(result) if result is original else result


# -- 1.0-only keys, per type (the single source the projections are built from) ----------------

#: Every key a 1.0 type has and its 0.7 form does not, removed by the projection
#: of that type (renamed keys included: the 0.7 key is written from them).
REMOVED_FIELDS: Final[Mapping[str, frozenset[str]]] = {
    "Annotation": frozenset({"origin"}),  # → turnId
    "AnnotationsUpdatedAction": frozenset({"origin"}),  # → turnId
    "ChatErrorAction": frozenset({"part"}),  # → error
    "ChatState": frozenset({"backgroundWork", "canvases", "changes", "changesets", "movable"}),
    "ChatSummary": frozenset({"changes", "movable"}),
    "ChatToolCallReadyAction": frozenset({"contributor", "intention"}),
    "ClientPluginCustomization": frozenset({"enablement", "childEnablement"}),  # → enabled
    "ConfigPropertySchema": frozenset({"minItems", "maxItems"}),
    "InitializeResult": frozenset({"_meta", "automations"}),
    "McpServerCustomization": frozenset({"enablement"}),  # → enabled
    "McpServerStartingState": frozenset({"blocking"}),
    # → requiresPrimary
    "MultipleWorkingDirectoriesCapability": frozenset({"immutablePrimary", "primaryReplacement"}),
    "PluginCustomization": frozenset({"enablement"}),  # → enabled
    "SessionConfigPropertySchema": frozenset({"minItems", "maxItems"}),
    "SessionCustomizationToggledAction": frozenset({"enablement"}),  # → enabled
    "SessionState": frozenset({"origin"}),
    "SessionSummary": frozenset({"chats", "defaultChat", "origin"}),
    "TerminalInfo": frozenset({"lifecycle"}),  # → exitCode
    "TerminalSessionClaim": frozenset({"chat"}),
    "TerminalState": frozenset({"lifecycle"}),  # → exitCode
}


def _removed(name: str) -> frozenset[str]:
    return REMOVED_FIELDS[name]


# -- outbound: shared pieces --------------------------------------------------------------------


def _out(name: str) -> Transform:
    return _ref(name, lambda: OUTBOUND)


def _primary_from_index_0(result: Json, original: Json) -> Json:
    """0.7 ``primaryWorkingDirectory``: index 0 of ``workingDirectories``, when there is one."""
    directories = result.get("workingDirectories")
    if not isinstance(directories, list | tuple) or not directories:
        return result
    primary = directories[0]
    if not isinstance(primary, str) or result.get("primaryWorkingDirectory") == primary:
        return result
    out = _writable(result, original)
    out["primaryWorkingDirectory"] = primary
    return out


#: The ``CustomizationEnablement`` kinds 1.0 defines.
_ENABLEMENT_KINDS: Final = frozenset({"global", "session", "workspace"})


def _effective_enabled(enablement: Json) -> bool:
    """REDUCER-CHANGES 3: ``enablement[0].enabled``, ``true`` when absent or empty.

    A first decision of a kind 1.0 does not define counts as enabled, whatever it
    carries: the 1.0 reducer writes that value into directories and child
    customizations (docs/protocol.md), and a plugin must not read otherwise.
    """
    if isinstance(enablement, list | tuple) and enablement:
        first = enablement[0]
        if isinstance(first, dict) and first.get("kind") in _ENABLEMENT_KINDS:
            enabled = first.get("enabled")
            if isinstance(enabled, bool):
                return enabled
    return True


def _enabled_from_enablement(result: Json, original: Json) -> Json:
    if "enablement" not in original and isinstance(original.get("enabled"), bool):
        return result  # already the 0.7 shape
    enabled = _effective_enabled(original.get("enablement"))
    if result.get("enabled") is enabled:
        return result
    out = _writable(result, original)
    out["enabled"] = enabled
    return out


def _tool_input(value: Json) -> Json:
    """``ToolInput``: a ``ContentRef`` has no 0.7 form (module docstring: omitted)."""
    return _DROP if isinstance(value, dict) else value


def _trailing_error(turn: dict[str, Any]) -> Json:
    """The ``ErrorInfo`` of a finished ``error`` turn's last (error) part, else ``None``."""
    if turn.get("state") != "error":
        return None
    parts = turn.get("responseParts")
    if not isinstance(parts, list | tuple) or not parts:
        return None
    last = parts[-1]
    if isinstance(last, dict) and last.get("kind") == "error":
        error = last.get("error")
        if isinstance(error, dict):
            return error
    return None


def _exit_code(result: Json, original: Json) -> Json:
    lifecycle = original.get("lifecycle")
    if not isinstance(lifecycle, dict) or lifecycle.get("status") != "exited":
        return result
    code = lifecycle.get("exitCode")
    if not isinstance(code, int | float) or isinstance(code, bool):
        return result
    out = _writable(result, original)
    out["exitCode"] = code
    return out


def _turn_id_from_origin(result: Json, original: Json) -> Json:
    if "origin" not in original:
        return result
    origin = original["origin"]
    turn = origin.get("turnId") if isinstance(origin, dict) else None
    out = _writable(result, original)
    out["turnId"] = turn if isinstance(turn, str) else ""
    return out


def _requires_primary(value: Json) -> Json:
    if not isinstance(value, dict):
        return value
    if "immutablePrimary" not in value and "primaryReplacement" not in value:
        return value
    removed = _removed("MultipleWorkingDirectoriesCapability")
    out = {key: item for key, item in value.items() if key not in removed}
    out["requiresPrimary"] = (
        value.get("immutablePrimary") is True or value.get("primaryReplacement") is True
    )
    return out


def _resource_identifier(value: Json) -> Json:
    """``ProtectedResourceMetadata`` → its ``resource`` (RFC 9728 resource identifier)."""
    if isinstance(value, dict):
        resource = value.get("resource")
        if isinstance(resource, str):
            return resource
    return value


def _turn(value: Json) -> Json:
    if not isinstance(value, dict):
        return value
    projected = _TURN_FIELDS(value)
    error = _trailing_error(value)
    if error is None:
        return projected
    out = _writable(projected, value)
    out["error"] = error
    return out


# -- outbound: the types -------------------------------------------------------------------------

_message_kind = _enum({"automation": "systemNotification"})
_message_origin = _object({"kind": _message_kind})
_message = _object({"origin": _message_origin})
_pending_message = _object({"message": _message})
_tool_call = _object({"toolInput": _tool_input, "userSuggestion": _message})
_response_part = _union(
    "kind",
    {"toolCall": _object({"toolCall": _tool_call}), "error": _drop},
)
_response_parts = _list_of(_response_part)
_TURN_FIELDS = _object({"message": _message, "responseParts": _response_parts})
_active_turn = _object({"message": _message, "responseParts": _response_parts})

_chat_summary = _object(drop=_removed("ChatSummary"), then=_primary_from_index_0)
_chat_state = _object(
    {
        "turns": _list_of(_turn),
        "activeTurn": _active_turn,
        "steeringMessage": _pending_message,
        "queuedMessages": _list_of(_pending_message),
        "draft": _message,
    },
    drop=_removed("ChatState"),
    then=_primary_from_index_0,
)

_mcp_server_state = _union("kind", {"starting": _object(drop=_removed("McpServerStartingState"))})
_mcp_server = _object(
    {"state": _mcp_server_state},
    drop=_removed("McpServerCustomization"),
    then=_enabled_from_enablement,
)
_child_customization = _union("type", {"mcpServer": _mcp_server})
_plugin = _object(
    {"children": _list_of(_child_customization)},
    drop=_removed("ClientPluginCustomization"),  # ⊇ PluginCustomization's
    then=_enabled_from_enablement,
)
_directory = _object({"children": _list_of(_child_customization)})
_customization = _union(
    "type", {"plugin": _plugin, "directory": _directory, "mcpServer": _mcp_server}
)
_active_client = _object({"customizations": _list_of(_plugin)})

_config_property = _object(
    {
        "items": _out("ConfigPropertySchema"),
        "properties": _values_of(_out("ConfigPropertySchema")),
        "additionalProperties": _out("ConfigPropertySchema"),
    },
    drop=_removed("ConfigPropertySchema"),
)
_config_schema = _object({"properties": _values_of(_config_property)})
_config_state = _object({"schema": _config_schema})
_model = _object({"configSchema": _config_schema})
_agent_capabilities = _object({"multipleWorkingDirectories": _requires_primary})
_agent = _object(
    {
        "models": _list_of(_model),
        "customizations": _list_of(_customization),
        "capabilities": _agent_capabilities,
    }
)

_terminal_claim = _union("kind", {"session": _object(drop=_removed("TerminalSessionClaim"))})
_terminal = _object({"claim": _terminal_claim}, drop=_removed("TerminalState"), then=_exit_code)
_root_state = _object(
    {
        "agents": _list_of(_agent),
        "terminals": _list_of(_terminal),
        "config": _config_state,
    }
)

_tool_call_request = _object({"toolCall": _tool_call})
_input_request = _union(
    "kind",
    {
        "toolConfirmation": _tool_call_request,
        "toolClientExecution": _tool_call_request,
        "toolAuthentication": _tool_call_request,
    },
)
_session_lifecycle = _enum({"failed": "creationFailed"})
_session_state = _object(
    {
        "lifecycle": _session_lifecycle,
        "chats": _list_of(_chat_summary),
        "customizations": _list_of(_customization),
        "activeClients": _list_of(_active_client),
        "config": _config_state,
        "inputNeeded": _list_of(_input_request),
    },
    drop=_removed("SessionState"),
)
_session_summary = _object(drop=_removed("SessionSummary"))

_annotation = _object(drop=_removed("Annotation"), then=_turn_id_from_origin)
_annotations_state = _object({"annotations": _list_of(_annotation)})
_changeset_status = _enum({"recomputing": "computing"})
_changeset_state = _object({"status": _changeset_status})

#: Snapshot state projection per channel kind (``state(kind, …)``).
_STATES: Final[Mapping[str, Transform]] = {
    "root": _root_state,
    "session": _session_state,
    "chat": _chat_state,
    "terminal": _terminal,
    "changeset": _changeset_state,
    "annotations": _annotations_state,
    "resourceWatch": _identity,
}

#: The channel kinds :func:`state` knows, by :func:`~ahp_server.protocol.uris.parse_channel`
#: kind (``watch`` is ``resourceWatch``).
STATE_KINDS: Final[Mapping[str, str]] = {
    "root": "root",
    "session": "session",
    "chat": "chat",
    "terminal": "terminal",
    "changeset": "changeset",
    "annotations": "annotations",
    "watch": "resourceWatch",
    "resourceWatch": "resourceWatch",
}


def _snapshot(value: Json) -> Json:
    if not isinstance(value, dict):
        return value
    resource = value.get("resource")
    if not isinstance(resource, str) or "state" not in value:
        return value
    kind = STATE_KINDS.get(parse_channel(resource).kind)
    if kind is None:
        return value  # a channel 0.7 has no kind for: a 0.7 client never subscribes to one
    old = value["state"]
    new = _STATES[kind](old)
    if new is old:
        return value
    return {**value, "state": new}


# -- outbound: actions ----------------------------------------------------------------------------


def _chat_error(value: Json) -> Json:
    part = value.get("part")
    if not isinstance(part, dict) or "error" not in part:
        return value
    out = {key: item for key, item in value.items() if key not in _removed("ChatErrorAction")}
    out["error"] = part["error"]
    return out


_response_part_fields = _object({"part": _response_part})


def _chat_response_part(value: Json) -> Json:
    part = value.get("part")
    if isinstance(part, dict) and part.get("kind") == "error":
        return _DROP  # a no-op at 1.0 (REDUCER-CHANGES 9); no such kind at 0.7
    return _response_part_fields(value)


def _tool_call_delta(value: Json) -> Json:
    if "content" in value:
        return value
    return {**value, "content": ""}


_chat_changes = _object(drop=_removed("ChatSummary"), then=_primary_from_index_0)
_chat_updated_fields = _object({"changes": _chat_changes})


def _chat_updated(value: Json) -> Json:
    projected = _chat_updated_fields(value)
    changes = value.get("changes")
    emptied = isinstance(changes, dict) and changes and not projected.get("changes")
    if projected is not value and emptied:
        return _DROP  # only 1.0-only summary fields changed: nothing to say at 0.7
    return projected


def _customization_toggled(value: Json) -> Json:
    if "enablement" not in value:
        return value
    removed = _removed("SessionCustomizationToggledAction")
    out = {key: item for key, item in value.items() if key not in removed}
    out["enabled"] = _effective_enabled(value["enablement"])
    return out


#: The action types ACTIONS.md tags newer than 0.7.0: never sent to a 0.7 client.
DROPPED_ACTIONS: Final[frozenset[str]] = frozenset(
    {
        "session/chatsReordered",
        "chat/turnResume",
        "chat/backgroundWorkSet",
        "chat/backgroundWorkRemoved",
        "chat/movableChanged",
        "chat/changesetsChanged",
        "chat/canvasesChanged",
        "canvas/stateChanged",
        "session/workingDirectoryReplaced",
        "chat/isReadChanged",
        "chat/isArchivedChanged",
        "session/mcpServerBackgroundRequested",
        "automation/createRequested",
        "automation/updateRequested",
        "automation/set",
        "automation/removed",
        "automationRun/lifecycleChanged",
        "automationRun/sessionSet",
        "automationRun/sessionRemoved",
        "automationRun/primarySessionChanged",
        "automationRun/cancelRequested",
    }
)

_TRANSFORMED: Final[Mapping[str, Transform]] = {
    "root/agentsChanged": _object({"agents": _list_of(_agent)}),
    "root/terminalsChanged": _object({"terminals": _list_of(_terminal)}),
    "session/chatAdded": _object({"summary": _chat_summary}),
    "session/chatUpdated": _chat_updated,
    "session/activeClientSet": _object({"activeClient": _active_client}),
    "session/inputNeededSet": _object({"request": _input_request}),
    "session/customizationsChanged": _object({"customizations": _list_of(_customization)}),
    "session/customizationToggled": _customization_toggled,
    "session/customizationUpdated": _object({"customization": _customization}),
    "session/mcpServerStateChanged": _object({"state": _mcp_server_state}),
    "chat/turnStarted": _object({"message": _message}),
    "chat/responsePart": _chat_response_part,
    "chat/toolCallDelta": _tool_call_delta,
    "chat/toolCallReady": _object(
        {"toolInput": _tool_input}, drop=_removed("ChatToolCallReadyAction")
    ),
    "chat/toolCallConfirmed": _object({"userSuggestion": _message}),
    "chat/error": _chat_error,
    "chat/pendingMessageSet": _object({"message": _message}),
    "chat/draftChanged": _object({"draft": _message}),
    "chat/turnsLoaded": _object({"turns": _list_of(_turn)}),
    "changeset/statusChanged": _object({"status": _changeset_status}),
    "annotations/set": _object({"annotation": _annotation}),
    "annotations/updated": _object(
        drop=_removed("AnnotationsUpdatedAction"), then=_turn_id_from_origin
    ),
    "terminal/claimed": _object({"claim": _terminal_claim}),
}

#: The 0.7 action types whose 0.7 and 1.0 shapes are equal: :func:`action`
#: always returns its input itself for them (the host may skip the call).
IDENTITY_ACTIONS: Final[frozenset[str]] = frozenset(
    {
        "root/activeSessionsChanged",
        "root/configChanged",
        "session/ready",
        "session/creationFailed",
        "session/chatRemoved",
        "session/defaultChatChanged",
        "session/titleChanged",
        "session/serverToolsChanged",
        "session/activeClientRemoved",
        "session/workingDirectorySet",
        "session/workingDirectoryRemoved",
        "session/inputNeededRemoved",
        "session/customizationRemoved",
        "session/mcpServerStartRequested",
        "session/mcpServerStopRequested",
        "session/isReadChanged",
        "session/isArchivedChanged",
        "session/activityChanged",
        "session/changesetsChanged",
        "session/configChanged",
        "session/metaChanged",
        "chat/delta",
        "chat/toolCallStart",
        "chat/toolCallComplete",
        "chat/toolCallResultConfirmed",
        "chat/toolCallContentChanged",
        "chat/toolCallAuthRequired",
        "chat/toolCallAuthResolved",
        "chat/turnComplete",
        "chat/turnCancelled",
        "chat/activityChanged",
        "chat/workingDirectorySet",
        "chat/workingDirectoryRemoved",
        "chat/usage",
        "chat/reasoning",
        "chat/pendingMessageRemoved",
        "chat/queuedMessagesReordered",
        "chat/inputRequested",
        "chat/inputAnswerChanged",
        "chat/inputCompleted",
        "chat/truncated",
        "changeset/fileSet",
        "changeset/fileRemoved",
        "changeset/filesReviewChanged",
        "changeset/contentChanged",
        "changeset/operationsChanged",
        "changeset/operationStatusChanged",
        "changeset/cleared",
        "annotations/removed",
        "annotations/entrySet",
        "annotations/entryRemoved",
        "terminal/data",
        "terminal/input",
        "terminal/resized",
        "terminal/titleChanged",
        "terminal/cwdChanged",
        "terminal/exited",
        "terminal/cleared",
        "terminal/commandDetectionAvailable",
        "terminal/commandExecuted",
        "terminal/commandFinished",
        "resourceWatch/changed",
    }
)

#: The 0.7 action types whose projection depends on the value (may copy, may drop).
TRANSFORMED_ACTIONS: Final[frozenset[str]] = frozenset(_TRANSFORMED)

#: Every 1.0 action type → its 0.7 projection (:data:`_DROP` for the dropped ones).
ACTIONS: Final[Mapping[str, Transform]] = {
    **dict.fromkeys(IDENTITY_ACTIONS, _identity),
    **_TRANSFORMED,
    **dict.fromkeys(DROPPED_ACTIONS, _drop),
}


def _action(value: Json) -> Json:
    if not isinstance(value, dict):
        return value
    kind = value.get("type")
    if not isinstance(kind, str):
        return value
    transform = ACTIONS.get(kind)
    return value if transform is None else transform(value)


def _with_action(value: dict[str, Any], new: Json) -> Json:
    """``value`` (an envelope or ``dispatchAction`` params) with its action ``new``:
    itself when unchanged, :data:`_DROP` when the action is dropped."""
    if new is value.get("action"):
        return value
    if new is _DROP:
        return _DROP
    return {**value, "action": new}


def _envelope(value: Json) -> Json:
    """An envelope (or ``dispatchAction`` params) with its action projected to 0.7."""
    if not isinstance(value, dict) or "action" not in value:
        return value
    return _with_action(value, _action(value["action"]))


def _summary_changed(value: Json) -> Json:
    if not isinstance(value, dict):
        return value
    changes = value.get("changes")
    new = _session_summary(changes)
    if new is changes:
        return value
    if isinstance(changes, dict) and changes and not new:
        return _DROP  # only 1.0-only summary fields changed
    return {**value, "changes": new}


#: Server → client notification method → projection of its params.
NOTIFICATIONS: Final[Mapping[str, Transform]] = {
    "action": _envelope,
    "root/sessionAdded": _object({"summary": _session_summary}),
    "root/sessionSummaryChanged": _summary_changed,
    "auth/required": _object({"resource": _resource_identifier}),
}

#: Command → projection of its result (the commands whose result type changed).
RESULTS: Final[Mapping[str, Transform]] = {
    "initialize": _object({"snapshots": _list_of(_snapshot)}, drop=_removed("InitializeResult")),
    "reconnect": _union(
        "type",
        {
            "replay": _object({"actions": _list_of(_envelope)}),
            "snapshot": _object({"snapshots": _list_of(_snapshot)}),
        },
    ),
    "subscribe": _object({"snapshot": _snapshot}),
    "listSessions": _object({"items": _list_of(_session_summary)}),
    "resolveSessionConfig": _object({"schema": _config_schema}),
}

#: 1.0 ``$def`` name → its 0.7 projection: every type the host sends whose 0.7
#: form differs (or that contains one that does). The version's one table.
OUTBOUND: Final[Mapping[str, Transform]] = {
    # chat
    "MessageKind": _message_kind,
    "MessageOrigin": _message_origin,
    "Message": _message,
    "PendingMessage": _pending_message,
    "ToolInput": _tool_input,
    "ToolCallState": _tool_call,
    "ToolCallPendingConfirmationState": _tool_call,
    "ToolCallRunningState": _tool_call,
    "ToolCallAuthRequiredState": _tool_call,
    "ToolCallPendingResultConfirmationState": _tool_call,
    "ToolCallCompletedState": _tool_call,
    "ToolCallCancelledState": _tool_call,
    "ToolCallConfirmationState": _tool_call,
    "ToolCallResponsePart": _object({"toolCall": _tool_call}),
    "ErrorResponsePart": _drop,
    "ResponsePart": _response_part,
    "Turn": _turn,
    "ActiveTurn": _active_turn,
    "ChatState": _chat_state,
    "ChatSummary": _chat_summary,
    # session
    "SessionLifecycle": _session_lifecycle,
    "SessionState": _session_state,
    "SessionSummary": _session_summary,
    "Customization": _customization,
    "ChildCustomization": _child_customization,
    "PluginCustomization": _plugin,
    "ClientPluginCustomization": _plugin,
    "DirectoryCustomization": _directory,
    "McpServerCustomization": _mcp_server,
    "McpServerState": _mcp_server_state,
    "McpServerStartingState": _object(drop=_removed("McpServerStartingState")),
    "SessionActiveClient": _active_client,
    "SessionInputRequest": _input_request,
    "SessionToolConfirmationRequest": _tool_call_request,
    "SessionToolClientExecutionRequest": _tool_call_request,
    "SessionToolAuthenticationRequest": _tool_call_request,
    "SessionConfigState": _config_state,
    "SessionConfigSchema": _config_schema,
    "SessionConfigPropertySchema": _config_property,
    # root
    "RootState": _root_state,
    "AgentInfo": _agent,
    "AgentCapabilities": _agent_capabilities,
    "MultipleWorkingDirectoriesCapability": _requires_primary,
    "SessionModelInfo": _model,
    "RootConfigState": _config_state,
    "ConfigSchema": _config_schema,
    "ConfigPropertySchema": _config_property,
    # terminal, changeset, annotations
    "TerminalState": _terminal,
    "TerminalInfo": _terminal,
    "TerminalClaim": _terminal_claim,
    "TerminalSessionClaim": _object(drop=_removed("TerminalSessionClaim")),
    "ChangesetStatus": _changeset_status,
    "ChangesetState": _changeset_state,
    "Annotation": _annotation,
    "AnnotationsState": _annotations_state,
    # envelopes, notifications, results
    "StateAction": _action,
    "ActionEnvelope": _envelope,
    "Snapshot": _snapshot,
    "SessionAddedParams": NOTIFICATIONS["root/sessionAdded"],
    "SessionSummaryChangedParams": _summary_changed,
    "AuthRequiredParams": NOTIFICATIONS["auth/required"],
    "InitializeResult": RESULTS["initialize"],
    "ReconnectResult": RESULTS["reconnect"],
    "ReconnectReplayResult": RESULTS["reconnect"],
    "ReconnectSnapshotResult": RESULTS["reconnect"],
    "SubscribeResult": RESULTS["subscribe"],
    "ListSessionsResult": RESULTS["listSessions"],
    "ResolveSessionConfigResult": RESULTS["resolveSessionConfig"],
}


# -- outbound: entry points ----------------------------------------------------------------------


def _public(value: Json) -> Json:
    return None if value is _DROP else value


def project(type_name: str, value: Json) -> Json:
    """The 0.7 form of a value of 1.0 ``$def`` ``type_name``; ``None`` when it has none.

    A type not in :data:`OUTBOUND` is identical at 0.7: ``value`` itself.
    """
    transform = OUTBOUND.get(type_name)
    return value if transform is None else _public(transform(value))


def state(kind: str, value: Json) -> Json:
    """The 0.7 form of a snapshot state of channel ``kind``.

    ``kind`` is ``root``, ``session``, ``chat``, ``terminal``, ``changeset``,
    ``annotations`` or ``resourceWatch`` (``watch`` too, as
    :func:`~ahp_server.protocol.uris.parse_channel` names it); any other kind
    (canvas, automation channels: 1.0 only) passes through.
    """
    canonical = STATE_KINDS.get(kind)
    return value if canonical is None else _STATES[canonical](value)


def snapshot(value: Json) -> Json:
    """A ``Snapshot``: its ``state`` projected by the channel kind of its ``resource``."""
    return _snapshot(value)


def action(value: Json) -> Json | None:
    """The 0.7 form of a 1.0 action, or ``None`` when a 0.7 client must not receive it.

    ``None`` for every type in :data:`DROPPED_ACTIONS`, for ``chat/responsePart``
    carrying an error part and for ``session/chatUpdated`` whose changes were
    all 1.0-only. Never ``None`` for an action a 0.7 client can dispatch, so
    the echo that acknowledges its write is never lost. The input itself for
    every type in :data:`IDENTITY_ACTIONS` and whenever nothing changed.
    """
    return _public(_action(value))


def envelope(value: Json) -> Json | None:
    """An ``ActionEnvelope`` with its action projected; ``None`` when the action is dropped."""
    return _public(_envelope(value))


def session_summary(value: Json) -> Json:
    """A ``SessionSummary`` (``listSessions`` item, ``root/sessionAdded``)."""
    return _session_summary(value)


def notification(method: str, params: Json) -> Json | None:
    """The 0.7 params of server notification ``method``; ``None``: do not send it.

    ``action`` (an envelope), ``root/sessionAdded``,
    ``root/sessionSummaryChanged`` (``None`` when only 1.0-only fields changed)
    and ``auth/required`` change; every other method passes through.
    """
    transform = NOTIFICATIONS.get(method)
    return params if transform is None else _public(transform(params))


def command_result(method: str, result: Json) -> Json:
    """The 0.7 result of command ``method``.

    ``initialize``, ``reconnect``, ``subscribe``, ``listSessions`` and
    ``resolveSessionConfig`` change; the others (``fetchTurns`` ``{}``,
    ``createSession`` ``null`` …) are identical. The turns ``fetchTurns``
    loads arrive as ``chat/turnsLoaded``, projected by :func:`action`.
    """
    transform = RESULTS.get(method)
    if transform is None:
        return result
    out = transform(result)
    return result if out is _DROP else out


def server_request_params(method: str, params: Json) -> Json:
    """Params of a request the host sends a 0.7 client (``resource*``,
    ``createResourceWatch``): the 1.0 ``_meta`` removed (0.7 params have none)."""
    if isinstance(params, dict) and "_meta" in params:
        return {key: item for key, item in params.items() if key != "_meta"}
    return params


# -- inbound: 0.7 → 1.0 ---------------------------------------------------------------------------


class _Context:
    """What inbound translation may read besides the message: the channel it came
    on and the host's read-only chat lookup."""

    __slots__ = ("_chat_of", "channel")

    def __init__(self, channel: str | None, chat_of: ChatOf | None) -> None:
        self.channel = channel
        self._chat_of = chat_of

    @property
    def annotations_session(self) -> str | None:
        if not isinstance(self.channel, str):
            return None
        ref = parse_channel(self.channel)
        return ref.session if ref.kind == "annotations" else None

    def chat(self, session: str, turn_id: str | None) -> str | None:
        if self._chat_of is None:
            return None
        chat = self._chat_of(session, turn_id)
        return chat if isinstance(chat, str) else None


def _primary_first(*, create_session: bool) -> _Then:
    """0.7 ``primaryWorkingDirectory`` → index 0 of 1.0 ``workingDirectories``."""

    def then(result: Json, original: Json, *context: Any) -> Json:
        if "primaryWorkingDirectory" not in original:
            return result
        out = _writable(result, original)
        primary = out.pop("primaryWorkingDirectory", None)
        if not isinstance(primary, str):
            return out
        directories = original.get("workingDirectories")
        if isinstance(directories, list | tuple):
            out["workingDirectories"] = [primary, *(d for d in directories if d != primary)]
        elif create_session:
            out["workingDirectories"] = [primary]
        return out

    return then


def _global_enablement(result: Json, original: Json, *context: Any) -> Json:
    if "enablement" in original or not isinstance(original.get("enabled"), bool):
        return result
    out = _writable(result, original)
    enabled = out.pop("enabled")
    out["enablement"] = [{"kind": "global", "enabled": enabled}]
    return out


def _in_terminal_claim(value: Json, context: _Context) -> Json:
    if not isinstance(value, dict) or value.get("kind") != "session" or "chat" in value:
        return value
    session = value.get("session")
    if not isinstance(session, str):
        return value
    turn = value.get("turnId")
    chat = context.chat(session, turn if isinstance(turn, str) else None)
    return value if chat is None else {**value, "chat": chat}


def _in_lifecycle(result: Json, original: Json, *context: Any) -> Json:
    if "lifecycle" in original:
        return result
    out = _writable(result, original)
    code = out.pop("exitCode", None)
    if isinstance(code, int | float) and not isinstance(code, bool):
        out["lifecycle"] = {"status": "exited", "exitCode": code}
    else:
        out["lifecycle"] = {"status": "running"}
    return out


def _origin_from_turn_id(result: Json, original: Json, context: _Context) -> Json:
    if "turnId" not in original or "origin" in original:
        return result
    out = _writable(result, original)
    turn = out.pop("turnId")
    session = context.annotations_session
    if session is None:
        return out  # no session to name: 1.0 validation refuses the action
    origin: dict[str, Any] = {"session": session}
    if isinstance(turn, str) and turn:
        chat = context.chat(session, turn)
        if chat:  # "" is a lookup's "unknown" (the client's): no chat named
            origin["chat"] = chat
        origin["turnId"] = turn
    out["origin"] = origin
    return out


def _in_turn(value: Json, *context: Any) -> Json:
    if not isinstance(value, dict) or "error" not in value:
        return value
    out = dict(value)
    error = out.pop("error")
    parts = value.get("responseParts")
    if (
        isinstance(error, dict)
        and value.get("state") == "error"
        and isinstance(parts, list | tuple)
    ):
        out["responseParts"] = [*parts, {"kind": "error", "error": error}]
    return out


def _in_chat_error(value: Json, *context: Any) -> Json:
    if "error" not in value or "part" in value:
        return value
    out = {key: item for key, item in value.items() if key != "error"}
    out["part"] = {"kind": "error", "error": value["error"]}
    return out


def _in_customization_toggled(value: Json, *context: Any) -> Json:
    enabled = value.get("enabled")
    if "enablement" in value or not isinstance(enabled, bool):
        return value
    out = {key: item for key, item in value.items() if key != "enabled"}
    out["enablement"] = [{"kind": "global", "enabled": enabled}]
    return out


def _in_requires_primary(value: Json, *context: Any) -> Json:
    if not isinstance(value, dict) or "requiresPrimary" not in value:
        return value
    out = {key: item for key, item in value.items() if key != "requiresPrimary"}
    if value["requiresPrimary"] is True:
        out["immutablePrimary"] = True
    return out


_in_mcp_server = _object(then=_global_enablement)
_in_child = _union("type", {"mcpServer": _in_mcp_server})
_in_plugin = _object({"children": _list_of(_in_child)}, then=_global_enablement)
_in_customization = _union(
    "type",
    {
        "plugin": _in_plugin,
        "directory": _object({"children": _list_of(_in_child)}),
        "mcpServer": _in_mcp_server,
    },
)
_in_active_client = _object({"customizations": _list_of(_in_plugin)})
_in_agent = _object(
    {
        "customizations": _list_of(_in_customization),
        "capabilities": _object({"multipleWorkingDirectories": _in_requires_primary}),
    }
)
_in_chat_summary = _object(then=_primary_first(create_session=False))
_in_terminal_info = _object({"claim": _in_terminal_claim}, then=_in_lifecycle)

#: 0.7 action type → its 1.0 form (every other 0.7 type is identical; the
#: 1.0-only types are not 0.7 actions and translate to ``None``).
INBOUND_ACTIONS: Final[Mapping[str, Transform]] = {
    "root/agentsChanged": _object({"agents": _list_of(_in_agent)}),
    "root/terminalsChanged": _object({"terminals": _list_of(_in_terminal_info)}),
    "session/chatAdded": _object({"summary": _in_chat_summary}),
    "session/chatUpdated": _object({"changes": _in_chat_summary}),
    "session/activeClientSet": _object({"activeClient": _in_active_client}),
    "session/customizationsChanged": _object({"customizations": _list_of(_in_customization)}),
    "session/customizationUpdated": _object({"customization": _in_customization}),
    "session/customizationToggled": _in_customization_toggled,
    "chat/error": _in_chat_error,
    "chat/turnsLoaded": _object({"turns": _list_of(_in_turn)}),
    "changeset/contentChanged": _object(drop=("error",)),
    "annotations/set": _object({"annotation": _object(then=_origin_from_turn_id)}),
    "annotations/updated": _object(then=_origin_from_turn_id),
    "terminal/claimed": _object({"claim": _in_terminal_claim}),
    **dict.fromkeys(DROPPED_ACTIONS, _drop),
}


def _in_action(value: Json, context: _Context) -> Json:
    if not isinstance(value, dict):
        return value
    kind = value.get("type")
    if not isinstance(kind, str):
        return value
    transform = INBOUND_ACTIONS.get(kind)
    return value if transform is None else transform(value, context)


def _in_dispatch(value: Json, context: _Context) -> Json:
    channel = value.get("channel")
    inner = _Context(channel if isinstance(channel, str) else None, context._chat_of)
    return _with_action(value, _in_action(value.get("action"), inner))


#: 0.7 command → its 1.0 params (every other command's params are identical).
INBOUND_PARAMS: Final[Mapping[str, Transform]] = {
    "createSession": _object(
        {"activeClient": _in_active_client},
        drop=("fork",),
        then=_primary_first(create_session=True),
    ),
    "createChat": _object(then=_primary_first(create_session=False)),
    "createTerminal": _object({"claim": _in_terminal_claim}),
    "dispatchAction": _in_dispatch,
}

#: Commands that exist only at 1.0: a 0.7 client cannot call them (-32601).
METHODS_NOT_IN_0_7: Final[frozenset[str]] = frozenset(
    {"moveChat", "listAutomationTriggerDefinitions", "runAutomation", "fetchAutomationRuns"}
)


def inbound_action(
    value: Json, *, channel: str | None = None, chat_of: ChatOf | None = None
) -> Json | None:
    """The 1.0 form of an action a 0.7 client sent on ``channel``; ``None`` when
    it is a 1.0-only type (not a 0.7 action: refuse it).

    ``channel`` names the annotations session for ``annotations/*``;
    ``chat_of`` resolves the chat a session claim or an annotation belongs to.
    Identity when the shapes agree.
    """
    return _public(_in_action(value, _Context(channel, chat_of)))


def inbound_params(method: str, params: Json, *, chat_of: ChatOf | None = None) -> Json | None:
    """The 1.0 params of a 0.7 client's command ``method`` (same method), or
    ``None`` when the message is not a 0.7 message and must be refused.

    ``dispatchAction`` translates its action; ``None`` when that action is a
    1.0-only type (refuse it with ``rejectionReason``: several of those are
    client-dispatchable at 1.0, but their echo would never reach a 0.7 client,
    which would wait for it forever). ``createSession`` loses ``fork``: see
    :func:`fork_source`.
    """
    transform = INBOUND_PARAMS.get(method)
    if transform is None or not isinstance(params, dict):
        return params
    return _public(transform(params, _Context(None, chat_of)))


def fork_source(params: Json) -> tuple[str, str] | None:
    """``(session, turnId)`` a 0.7 ``createSession`` forks from, or ``None``."""
    if not isinstance(params, dict):
        return None
    fork = params.get("fork")
    if not isinstance(fork, dict):
        return None
    session, turn = fork.get("session"), fork.get("turnId")
    if isinstance(session, str) and isinstance(turn, str):
        return session, turn
    return None


def fork_request(params: Json, source_chat: str) -> Json | None:
    """The 1.0 chat fork a 0.7 session fork asks for, once the host has resolved
    ``source_chat``: the chat of the forked session that holds the forked turn.

    ``createChat`` params ``{channel: <source session>, chat: <new chat>,
    source: {kind: "fork", chat: source_chat, turnId}}``; the new chat's URI is
    the 0.7 session URI with the chat scheme (``ahp-session:/<id>`` →
    ``ahp-chat:/<id>``, any other URI percent-encoded as one segment).
    ``None`` when ``params`` fork nothing.
    """
    source = fork_source(params)
    channel = params.get("channel") if isinstance(params, dict) else None
    if source is None or not isinstance(channel, str):
        return None
    session, turn = source
    if channel.startswith(SESSION_SCHEME):
        chat = CHAT_SCHEME + channel.removeprefix(SESSION_SCHEME)
    else:
        chat = CHAT_SCHEME + quote_segment(channel)
    return {
        "channel": session,
        "chat": chat,
        "source": {"kind": "fork", "chat": source_chat, "turnId": turn},
    }


def inbound_error(error: Json) -> Json:
    """A JSON-RPC error object a 0.7 client sent (answering a host request) in 1.0
    terms: ``-32006`` ``ContentNotFound`` is ``-32008`` ``NotFound``."""
    if isinstance(error, dict) and error.get("code") == -32006:
        return {**error, "code": -32008}
    return error


# -- lifting stored 0.7 values: what a database written before 1.0 holds ---------------------------

_in_session_state = _object(
    {
        "lifecycle": _enum({"creationFailed": "failed"}),
        "chats": _list_of(_in_chat_summary),
        "customizations": _list_of(_in_customization),
        "activeClients": _list_of(_in_active_client),
    }
)
_in_chat_state = _object({"turns": _list_of(_in_turn)}, then=_primary_first(create_session=False))


def _in_envelope(value: Json, context: _Context) -> Json:
    if not isinstance(value, dict):
        return value
    channel = value.get("channel")
    inner = _Context(channel if isinstance(channel, str) else None, context._chat_of)
    old = value.get("action")
    new = _in_action(old, inner)
    if new is old or new is _DROP:
        return value
    return {**value, "action": new}


#: Stored 0.7 type → its 1.0 form: the states, turns and envelopes a host
#: before 1.0 wrote (``lift``). Catalogue entries (``SessionSummary``) and the
#: other channel kinds' states need no change or are lifted by their parts.
INBOUND_STORED: Final[Mapping[str, Transform]] = {
    "ChatState": _in_chat_state,
    "ChatSummary": _in_chat_summary,
    "SessionState": _in_session_state,
    "Turn": _in_turn,
    "ActionEnvelope": _in_envelope,
    "StateAction": _in_action,
    "TerminalState": _object({"claim": _in_terminal_claim}, then=_in_lifecycle),
    "TerminalInfo": _in_terminal_info,
    "ChangesetState": _identity,
    "AnnotationsState": _object({"annotations": _list_of(_object(then=_origin_from_turn_id))}),
}


def lift(
    type_name: str, value: Json, *, channel: str | None = None, chat_of: ChatOf | None = None
) -> Json:
    """A stored 0.7 value of ``type_name`` in its 1.0 form (identity when equal).

    For a database written before the host's state moved to 1.0: the inverse
    of :func:`project` on everything a 0.7 host stores, so the 0.7 view of a
    lifted value is the stored value (``tests/store/test_release_db_lift.py``).
    ``channel`` names an annotations channel's session; ``chat_of`` resolves a
    session terminal claim's chat.
    """
    transform = INBOUND_STORED.get(type_name)
    if transform is None:
        return value
    out = transform(value, _Context(channel, chat_of))
    return value if out is _DROP else out


# -- a 1.0 client on a 0.7 connection: what a 0.7 host sends, lifted; what it sends, projected ----
#
# The Python client (ahp_server/client) holds 1.0 states whatever it negotiated.
# On a 0.7 connection it lifts every snapshot, envelope, notification and command
# result with the functions below (the inverse of the outbound view, built from
# the same inbound pieces as ``lift``) and projects what it sends with
# :func:`action` and :func:`client_params`.

_in_root_state = _object({"agents": _list_of(_in_agent), "terminals": _list_of(_in_terminal_info)})

#: Channel kind (``STATE_KINDS`` values) → the 1.0 form of a 0.7 snapshot state.
_IN_STATES: Final[Mapping[str, Transform]] = {
    "root": _in_root_state,
    "session": _in_session_state,
    "chat": _in_chat_state,
    "terminal": INBOUND_STORED["TerminalState"],
    "changeset": _identity,
    "annotations": INBOUND_STORED["AnnotationsState"],
    "resourceWatch": _identity,
}


def _in_snapshot(value: Json, context: _Context) -> Json:
    if not isinstance(value, dict):
        return value
    resource = value.get("resource")
    if not isinstance(resource, str) or "state" not in value:
        return value
    kind = STATE_KINDS.get(parse_channel(resource).kind)
    if kind is None:
        return value
    old = value["state"]
    new = _IN_STATES[kind](old, _Context(resource, context._chat_of))
    return value if new is old else {**value, "state": new}


def _in_protected_resource(value: Json, *context: Any) -> Json:
    """0.7 ``auth/required.resource`` (the RFC 9728 identifier) → 1.0 metadata."""
    return {"resource": value} if isinstance(value, str) else value


#: 0.7 server notification → its 1.0 params (every other method is identical).
LIFTED_NOTIFICATIONS: Final[Mapping[str, Transform]] = {
    "action": _in_envelope,
    "auth/required": _object({"resource": _in_protected_resource}),
}

#: 0.7 command result → its 1.0 form (every other result is identical).
LIFTED_RESULTS: Final[Mapping[str, Transform]] = {
    "initialize": _object({"snapshots": _list_of(_in_snapshot)}),
    "reconnect": _union(
        "type",
        {
            "replay": _object({"actions": _list_of(_in_envelope)}),
            "snapshot": _object({"snapshots": _list_of(_in_snapshot)}),
        },
    ),
    "subscribe": _object({"snapshot": _in_snapshot}),
}


def lift_state(kind: str, value: Json, *, chat_of: ChatOf | None = None) -> Json:
    """The 1.0 form of a 0.7 snapshot state of channel ``kind`` (as :func:`state`
    names kinds); any other kind passes through. The inverse of :func:`state`."""
    canonical = STATE_KINDS.get(kind)
    if canonical is None:
        return value
    return _IN_STATES[canonical](value, _Context(None, chat_of))


def lift_snapshot(value: Json, *, chat_of: ChatOf | None = None) -> Json:
    """A 0.7 ``Snapshot`` with its state lifted by the channel kind of its ``resource``."""
    return _in_snapshot(value, _Context(None, chat_of))


def lift_envelope(value: Json, *, chat_of: ChatOf | None = None) -> Json:
    """A 0.7 ``ActionEnvelope`` a host sent, its action in the 1.0 form."""
    return _in_envelope(value, _Context(None, chat_of))


def lift_notification(method: str, params: Json, *, chat_of: ChatOf | None = None) -> Json:
    """The 1.0 params of 0.7 server notification ``method`` (identity when equal).

    ``action`` lifts its envelope; ``auth/required`` wraps the resource
    identifier into ``ProtectedResourceMetadata``; ``root/sessionAdded`` and
    ``root/sessionSummaryChanged`` carry 0.7 summaries, which are valid 1.0
    ones, unchanged.
    """
    transform = LIFTED_NOTIFICATIONS.get(method)
    if transform is None:
        return params
    return transform(params, _Context(None, chat_of))


def lift_result(method: str, result: Json, *, chat_of: ChatOf | None = None) -> Json:
    """The 1.0 form of the result a 0.7 host gave for command ``method``.

    ``initialize``, ``reconnect`` and ``subscribe`` lift their snapshots and
    envelopes; every other result (``listSessions``: a 0.7 summary is a valid
    1.0 one) is identical.
    """
    transform = LIFTED_RESULTS.get(method)
    if transform is None:
        return result
    return transform(result, _Context(None, chat_of))


#: 1.0 client command → the 0.7 params (every other command's params are identical).
CLIENT_PARAMS: Final[Mapping[str, Transform]] = {
    "createSession": _object({"activeClient": _active_client}),
    "createTerminal": _object({"claim": _terminal_claim}),
    "dispatchAction": _envelope,
}


def client_params(method: str, params: Json) -> Json | None:
    """The 0.7 params of a 1.0 client's command ``method``, for a 0.7 host.

    ``dispatchAction`` projects its action with :func:`action` (``None``: a
    1.0-only action type, which a 0.7 host does not know — do not send it);
    ``createSession`` projects the ``activeClient`` customizations
    (``enablement`` → ``enabled``); ``createTerminal`` drops a session claim's
    ``chat``. ``workingDirectories`` pass unchanged: a 0.7 host that is given
    no ``primaryWorkingDirectory`` keeps their order, so index 0 stays first.
    """
    transform = CLIENT_PARAMS.get(method)
    if transform is None or not isinstance(params, dict):
        return params
    return _public(transform(params))
