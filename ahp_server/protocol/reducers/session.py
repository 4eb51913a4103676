"""The pure 1.0 reducer of session channels (``ahp-session:/<id>``).

Layer: protocol (pure). The 0.7 reducer (``protocol/reducers/session.py``) with
the 1.0 changes of ``shared/spec-1.0/REDUCER-CHANGES.md`` (numbers below are its
items): ``failed`` lifecycle (1), input-needed counts only requests that wait on
the user (2), ``customizationToggled`` replaces scoped ``enablement`` (3),
``chatUpdated`` merges every key but ``resource`` (4), and
``workingDirectoryReplaced`` (5), ``chatsReordered`` (6),
``mcpServerBackgroundRequested`` (7).

JavaScript-isms kept on purpose (they are what every client computes):

* assigning ``undefined``/``null`` to an optional field removes it (we store
  ``UNSET``); ``""``, ``[]`` and ``false`` are values;
* ``inputNeeded`` disappears when its last entry is removed, while
  ``workingDirectories``, container ``children``, ``chats`` and
  ``activeClients`` stay as empty lists;
* first-match vs every-match is noted on each customization action.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from msgspec import UNSET, UnsetType
from msgspec.structs import replace

from ahp_server.protocol._base import UnknownVariant
from ahp_server.protocol.reducers._common import (
    ACTIVITY_MASK,
    Clock,
    find_index,
    merge_partial,
    or_empty,
    replace_at,
    upsert,
    with_activity,
    with_flag,
    without,
)
from ahp_server.protocol.types import (
    ChatSummary,
    CustomizationEnablement,
    DirectoryCustomization,
    McpServerCustomization,
    McpServerStartingState,
    McpServerStoppedState,
    PartialChatSummary,
    PluginCustomization,
    SessionActiveClient,
    SessionActiveClientRemovedAction,
    SessionActiveClientSetAction,
    SessionActivityChangedAction,
    SessionChangesetsChangedAction,
    SessionChatAddedAction,
    SessionChatRemovedAction,
    SessionChatsReorderedAction,
    SessionChatUpdatedAction,
    SessionConfigChangedAction,
    SessionCreationFailedAction,
    SessionCustomizationRemovedAction,
    SessionCustomizationsChangedAction,
    SessionCustomizationToggledAction,
    SessionCustomizationUpdatedAction,
    SessionDefaultChatChangedAction,
    SessionInputNeededRemovedAction,
    SessionInputNeededSetAction,
    SessionIsArchivedChangedAction,
    SessionIsReadChangedAction,
    SessionMcpServerBackgroundRequestedAction,
    SessionMcpServerStartRequestedAction,
    SessionMcpServerStateChangedAction,
    SessionMcpServerStopRequestedAction,
    SessionMetaChangedAction,
    SessionReadyAction,
    SessionServerToolsChangedAction,
    SessionState,
    SessionStatus,
    SessionTitleChangedAction,
    SessionToolClientExecutionRequest,
    SessionWorkingDirectoryRemovedAction,
    SessionWorkingDirectoryReplacedAction,
    SessionWorkingDirectorySetAction,
)

__all__ = ["merge_chat_summary", "reduce_session", "with_flag", "with_input_needed"]

# InputNeeded (24) without InProgress (8): the one bit that marks "blocked".
_INPUT_NEEDED_BIT = int(SessionStatus.InputNeeded) & ~int(SessionStatus.InProgress)


def with_input_needed(status: int, requests: tuple[object, ...]) -> int:
    """The session-level input-needed roll-up (REDUCER-CHANGES 2).

    A request that waits on the user (every kind but ``toolClientExecution``)
    forces the activity bits to InputNeeded whatever they were; otherwise only
    the "blocked" bit is cleared (24 → 8, 1 stays 1), flags kept.
    """
    if any(_waits_on_user(request) for request in requests):
        return with_activity(status, SessionStatus.InputNeeded)
    return status & ~_INPUT_NEEDED_BIT


def _waits_on_user(request: object) -> bool:
    if isinstance(request, UnknownVariant):
        return request.data.get("kind") != "toolClientExecution"
    return not isinstance(request, SessionToolClientExecutionRequest)


def merge_chat_summary(summary: ChatSummary, changes: PartialChatSummary) -> ChatSummary:
    """Shallow-merge a ``Partial<ChatSummary>``: present keys win, ``null`` clears.

    ``resource`` is identity and is never changed. A ``null`` for a required
    field (title, status, modifiedAt) cannot clear it and is ignored.
    """
    return merge_partial(summary, changes, _REQUIRED_SUMMARY_FIELDS)


_REQUIRED_SUMMARY_FIELDS = frozenset({"title", "status", "modified_at"})


_Container = PluginCustomization | DirectoryCustomization


def _is_container(entry: object) -> bool:
    """Upstream's test: not an MCP server and has (truthy) ``children``."""
    return (
        isinstance(entry, (PluginCustomization, DirectoryCustomization))
        and not isinstance(entry.children, UnsetType)
        and len(entry.children) > 0
    )


def _chat_uri(chat: ChatSummary) -> str:
    return chat.resource


def _client_id(client: SessionActiveClient) -> str:
    return client.client_id


def _entry_id(entry: object) -> object:
    if isinstance(entry, UnknownVariant):
        return entry.data.get("id")
    return getattr(entry, "id", None)


_Children = tuple[object, ...]


def _child_hits(
    entries: tuple[object, ...], child_id: str
) -> Iterator[tuple[int, _Container, _Children, int]]:
    """Each container (in order) holding a child ``child_id``: index, container,
    children, and the position of its **first** such child."""
    for index, entry in enumerate(entries):
        if not _is_container(entry):
            continue
        assert isinstance(entry, (PluginCustomization, DirectoryCustomization))
        children = entry.children
        assert not isinstance(children, UnsetType)
        position = next((i for i, c in enumerate(children) if _entry_id(c) == child_id), None)
        if position is not None:
            yield index, entry, children, position


def _with_children(
    state: SessionState,
    entries: tuple[object, ...],
    edits: dict[int, _Children],
) -> SessionState:
    """Replace the children of the containers at the given indexes (no edits: no-op)."""
    if not edits:
        return state
    updated = tuple(
        replace(entry, children=edits[i]) if i in edits else entry  # type: ignore[type-var]
        for i, entry in enumerate(entries)
    )
    return replace(state, customizations=updated)


def _top_level(state: SessionState, entry_id: str) -> tuple[tuple[object, ...], int | None]:
    entries = state.customizations
    if isinstance(entries, UnsetType):
        return (), None
    index = next((i for i, e in enumerate(entries) if _entry_id(e) == entry_id), None)
    return entries, index


def _update_mcp(
    state: SessionState, mcp_id: str, update: Callable[[McpServerCustomization], object]
) -> SessionState:
    """Apply ``update`` to the MCP server ``mcp_id``: top level first, else children.

    A top-level match that is not an MCP server is a no-op (no fall-through).
    Otherwise the first matching child of **every** container is updated.
    ``update`` returns its argument to say "not applicable".
    """
    entries, index = _top_level(state, mcp_id)
    if index is not None:
        entry = entries[index]
        if not isinstance(entry, McpServerCustomization):
            return state
        updated = update(entry)
        if updated is entry:
            return state
        return replace(state, customizations=replace_at(entries, index, updated))
    edits = {}
    for i, _, children, position in _child_hits(entries, mcp_id):
        child = children[position]
        if isinstance(child, McpServerCustomization):
            updated = update(child)
            if updated is not child:
                edits[i] = replace_at(children, position, updated)
    return _with_children(state, entries, edits)


def _effective(enablement: tuple[CustomizationEnablement, ...]) -> bool:
    """The boolean a directory or child customization shows: the first (most
    specific) decision, or enabled when there is none (REDUCER-CHANGES 3)."""
    if not enablement:
        return True
    first = enablement[0]
    # A decision of a kind this version does not know counts as enabled (as
    # upstream's Go reducer has it).
    return True if isinstance(first, UnknownVariant) else first.enabled


def _toggled(entry: object, enablement: tuple[CustomizationEnablement, ...]) -> object:
    """Plugins and MCP servers store the decision list; the others their effect."""
    if isinstance(entry, (PluginCustomization, McpServerCustomization)):
        return replace(entry, enablement=enablement)
    if isinstance(entry, UnknownVariant):
        return UnknownVariant({**entry.data, "enabled": _effective(enablement)})
    return replace(entry, enabled=_effective(enablement))  # type: ignore[type-var]


def _toggle(state: SessionState, action: SessionCustomizationToggledAction) -> SessionState:
    """First top-level match, else the first child match of the first container.

    The list replaces the previous decisions, never merged (REDUCER-CHANGES 3).
    """
    entries, index = _top_level(state, action.id)
    if index is not None:
        toggled = _toggled(entries[index], action.enablement)
        return replace(state, customizations=replace_at(entries, index, toggled))
    for i, _, children, position in _child_hits(entries, action.id):
        child = _toggled(children[position], action.enablement)
        return _with_children(state, entries, {i: replace_at(children, position, child)})
    return state


def _remove_customization(state: SessionState, removed_id: str) -> SessionState:
    """A top-level match goes with its children; else the first matching child of
    every container."""
    entries, index = _top_level(state, removed_id)
    if index is not None:
        return replace(state, customizations=without(entries, index))
    edits = {
        i: without(children, position)
        for i, _, children, position in _child_hits(entries, removed_id)
    }
    return _with_children(state, entries, edits)


def _merge_config(state: SessionState, action: SessionConfigChangedAction) -> SessionState:
    if isinstance(state.config, UnsetType):
        return state  # the action never creates a config
    values = (
        dict(action.config) if action.replace is True else {**state.config.values, **action.config}
    )
    return replace(state, config=replace(state.config, values=values))


def _replace_directory(
    state: SessionState, action: SessionWorkingDirectoryReplacedAction
) -> SessionState:
    """Replace in place; never a duplicate, never a later entry into the primary
    slot (index 0). REDUCER-CHANGES 5."""
    present = or_empty(state.working_directories)
    if action.directory not in present:
        return state
    index = present.index(action.directory)
    if action.replacement in present[:index]:
        return replace(state, working_directories=without(present, index))
    later = tuple(d for d in present[index + 1 :] if d != action.replacement)
    return replace(state, working_directories=(*present[:index], action.replacement, *later))


def _reorder_chats(state: SessionState, action: SessionChatsReorderedAction) -> SessionState:
    """Only a complete permutation that changes the order applies (REDUCER-CHANGES 6)."""
    current = [chat.resource for chat in state.chats]
    order = list(action.chats)
    if len(order) != len(current) or len(set(order)) != len(order) or set(order) != set(current):
        return state
    if order == current:
        return state
    by_uri = {chat.resource: chat for chat in state.chats}
    return replace(state, chats=tuple(by_uri[uri] for uri in order))


def _background_mcp(entry: McpServerCustomization) -> McpServerCustomization:
    """A blocking start stops blocking; any other state is left alone (REDUCER-CHANGES 7)."""
    starting = entry.state
    if isinstance(starting, McpServerStartingState) and starting.blocking is True:
        return replace(entry, state=replace(starting, blocking=False))
    return entry


def reduce_session(state: SessionState, action: object, now: Clock) -> SessionState:
    """Apply one action to a session state; unknown actions return ``state`` itself."""
    del now  # no session action is time-stamped
    match action:
        case SessionReadyAction():
            # Only the lifecycle: a provisional InProgress status is kept (fixture 147).
            return replace(state, lifecycle="ready")
        case SessionCreationFailedAction(error=error):
            return replace(state, lifecycle="failed", creation_error=error)
        case SessionChatAddedAction(summary=summary):
            # Upsert by resource: a match is replaced whole, in place; else appended.
            return replace(state, chats=upsert(state.chats, _chat_uri, summary))
        case SessionChatRemovedAction(chat=uri):
            index = find_index(state.chats, _chat_uri, uri)
            if index is None:
                return state
            if state.default_chat == uri:
                return replace(state, chats=without(state.chats, index), default_chat=UNSET)
            return replace(state, chats=without(state.chats, index))
        case SessionChatUpdatedAction(chat=uri, changes=changes):
            index = find_index(state.chats, _chat_uri, uri)
            if index is None:
                return state
            merged = merge_chat_summary(state.chats[index], changes)
            return replace(state, chats=(*state.chats[:index], merged, *state.chats[index + 1 :]))
        case SessionDefaultChatChangedAction(default_chat=default_chat):
            return replace(state, default_chat=UNSET if default_chat is None else default_chat)
        case SessionTitleChangedAction(title=title):
            return replace(state, title=title)
        case SessionServerToolsChangedAction(tools=tools):
            return replace(state, server_tools=tools)
        case SessionActiveClientSetAction(active_client=client):
            return replace(state, active_clients=upsert(state.active_clients, _client_id, client))
        case SessionActiveClientRemovedAction(client_id=client_id):
            index = find_index(state.active_clients, _client_id, client_id)
            if index is None:
                return state
            return replace(state, active_clients=without(state.active_clients, index))
        case SessionWorkingDirectorySetAction(directory=directory):
            directories = or_empty(state.working_directories)
            if directory in directories:
                return state
            return replace(state, working_directories=(*directories, directory))
        case SessionWorkingDirectoryReplacedAction():
            return _replace_directory(state, action)
        case SessionChatsReorderedAction():
            return _reorder_chats(state, action)
        case SessionMcpServerBackgroundRequestedAction(id=mcp_id):
            return _update_mcp(state, mcp_id, _background_mcp)
        case SessionWorkingDirectoryRemovedAction(directory=directory):
            present = or_empty(state.working_directories)
            if directory not in present:
                return state
            return replace(state, working_directories=without(present, present.index(directory)))
        case SessionInputNeededSetAction(request=request):
            requests = upsert(or_empty(state.input_needed), _entry_id, request)
            status = with_input_needed(state.status, requests)
            return replace(state, input_needed=requests, status=status)
        case SessionInputNeededRemovedAction(id=request_id):
            open_requests = or_empty(state.input_needed)
            index = find_index(open_requests, _entry_id, request_id)
            if index is None:
                return state
            remaining = without(open_requests, index)
            status = with_input_needed(state.status, remaining)
            return replace(state, input_needed=remaining or UNSET, status=status)
        case SessionCustomizationsChangedAction(customizations=customizations):
            return replace(state, customizations=customizations)
        case SessionCustomizationToggledAction():
            return _toggle(state, action)
        case SessionCustomizationUpdatedAction(customization=customization):
            # Top level only; a match is replaced whole (children included).
            entries = upsert(or_empty(state.customizations), _entry_id, customization)
            return replace(state, customizations=entries)
        case SessionCustomizationRemovedAction(id=removed_id):
            return _remove_customization(state, removed_id)
        case SessionMcpServerStateChangedAction(id=mcp_id, state=mcp_state, channel=channel):
            return _update_mcp(
                state,
                mcp_id,
                lambda entry: replace(
                    entry, state=mcp_state, channel=UNSET if channel is None else channel
                ),
            )
        case SessionMcpServerStartRequestedAction(id=mcp_id):
            return _update_mcp(
                state,
                mcp_id,
                lambda entry: replace(entry, state=McpServerStartingState(), channel=UNSET),
            )
        case SessionMcpServerStopRequestedAction(id=mcp_id):
            return _update_mcp(
                state,
                mcp_id,
                lambda entry: replace(entry, state=McpServerStoppedState(), channel=UNSET),
            )
        case SessionIsReadChangedAction(is_read=is_read):
            return replace(
                state, status=with_flag(state.status, int(SessionStatus.IsRead), is_read)
            )
        case SessionIsArchivedChangedAction(is_archived=is_archived):
            status = with_flag(state.status, int(SessionStatus.IsArchived), is_archived)
            return replace(state, status=status)
        case SessionActivityChangedAction(activity=activity):
            return replace(state, activity=UNSET if activity is None else activity)
        case SessionChangesetsChangedAction(changesets=changesets):
            return replace(state, changesets=UNSET if changesets is None else changesets)
        case SessionConfigChangedAction():
            return _merge_config(state, action)
        case SessionMetaChangedAction(meta=meta):
            return replace(state, meta=UNSET if meta is None else meta)
        case _:
            return state


assert ACTIVITY_MASK == 0b11111  # the roll-up above relies on the 5 activity bits
