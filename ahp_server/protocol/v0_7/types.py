"""AHP 0.7.0 wire types, generated from the protocol's JSON Schemas. Do not edit.

Layer: protocol (pure). Regenerate with ``python .ci/gen_types.py``; the
rules (optional vs nullable fields, open unions, naming) are in
:mod:`ahp_server.protocol._base` and the generator's docstring.
"""

# ruff: noqa: E501
from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import msgspec
from msgspec import UNSET, UnsetType

from ahp_server.protocol._base import ProtocolStruct, UnknownVariant, open_union, shape_union

URI: TypeAlias = str
JsonPrimitive: TypeAlias = str | int | float | bool | None


class AuthRequiredReason(StrEnum):
    Required = 'required'
    Expired = 'expired'


class ChangesetOperationScope(StrEnum):
    Changeset = 'changeset'
    Resource = 'resource'
    Range = 'range'


class ChangesetOperationStatus(StrEnum):
    Idle = 'idle'
    Running = 'running'
    Error = 'error'
    Disabled = 'disabled'


class ChangesetStatus(StrEnum):
    Computing = 'computing'
    Ready = 'ready'
    Error = 'error'


class ChatInputAnswerState(StrEnum):
    Draft = 'draft'
    Submitted = 'submitted'
    Skipped = 'skipped'


class ChatInputAnswerValueKind(StrEnum):
    Text = 'text'
    Number = 'number'
    Boolean = 'boolean'
    Selected = 'selected'
    SelectedMany = 'selected-many'


class ChatInputQuestionKind(StrEnum):
    Text = 'text'
    Number = 'number'
    Integer = 'integer'
    Boolean = 'boolean'
    SingleSelect = 'single-select'
    MultiSelect = 'multi-select'


class ChatInputResponseKind(StrEnum):
    Accept = 'accept'
    Decline = 'decline'
    Cancel = 'cancel'


class ChatInteractivity(StrEnum):
    Full = 'full'
    ReadOnly = 'read-only'
    Hidden = 'hidden'


class ChatOriginKind(StrEnum):
    User = 'user'
    Fork = 'fork'
    SideChat = 'sideChat'
    Tool = 'tool'


class CompletionItemKind(StrEnum):
    UserMessage = 'userMessage'


class ConfirmationOptionKind(StrEnum):
    Approve = 'approve'
    Deny = 'deny'


class ContentEncoding(StrEnum):
    Base64 = 'base64'
    Utf8 = 'utf-8'


class CustomizationLoadStatus(StrEnum):
    Loading = 'loading'
    Loaded = 'loaded'
    Degraded = 'degraded'
    Error = 'error'


class CustomizationType(StrEnum):
    Plugin = 'plugin'
    Directory = 'directory'
    Agent = 'agent'
    Skill = 'skill'
    Prompt = 'prompt'
    Rule = 'rule'
    Hook = 'hook'
    McpServer = 'mcpServer'


class McpAuthRequiredReason(StrEnum):
    Required = 'required'
    Expired = 'expired'
    InsufficientScope = 'insufficientScope'


class McpServerStatus(StrEnum):
    Starting = 'starting'
    Ready = 'ready'
    AuthRequired = 'authRequired'
    Error = 'error'
    Stopped = 'stopped'


class MessageAttachmentKind(StrEnum):
    Simple = 'simple'
    EmbeddedResource = 'embeddedResource'
    Resource = 'resource'
    Annotations = 'annotations'
    Chat = 'chat'


class MessageKind(StrEnum):
    User = 'user'
    Agent = 'agent'
    Tool = 'tool'
    SystemNotification = 'systemNotification'


class PendingMessageKind(StrEnum):
    Steering = 'steering'
    Queued = 'queued'


class PolicyState(StrEnum):
    Enabled = 'enabled'
    Disabled = 'disabled'
    Unconfigured = 'unconfigured'


class ResourceChangeType(StrEnum):
    Added = 'added'
    Updated = 'updated'
    Deleted = 'deleted'


class ResourceType(StrEnum):
    File = 'file'
    Directory = 'directory'
    Symlink = 'symlink'


class ResourceWriteMode(StrEnum):
    Truncate = 'truncate'
    Append = 'append'
    Insert = 'insert'


class ResponsePartKind(StrEnum):
    Markdown = 'markdown'
    ContentRef = 'contentRef'
    ToolCall = 'toolCall'
    Reasoning = 'reasoning'
    SystemNotification = 'systemNotification'
    InputRequest = 'inputRequest'


class SessionInputRequestKind(StrEnum):
    ChatInput = 'chatInput'
    ToolConfirmation = 'toolConfirmation'
    ToolClientExecution = 'toolClientExecution'
    ToolAuthentication = 'toolAuthentication'


class SessionLifecycle(StrEnum):
    Creating = 'creating'
    Ready = 'ready'
    CreationFailed = 'creationFailed'


class SessionStatus(IntEnum):
    Idle = 1
    Error = 2
    InProgress = 8
    InputNeeded = 24
    IsRead = 32
    IsArchived = 64


class TerminalClaimKind(StrEnum):
    Client = 'client'
    Session = 'session'


class ToolCallCancellationReason(StrEnum):
    Denied = 'denied'
    Skipped = 'skipped'
    ResultDenied = 'result-denied'


class ToolCallConfirmationReason(StrEnum):
    NotNeeded = 'not-needed'
    UserAction = 'user-action'
    Setting = 'setting'


class ToolCallContributorKind(StrEnum):
    Client = 'client'
    MCP = 'mcp'


class ToolCallRiskAssessmentKind(StrEnum):
    Judge = 'judge'


class ToolCallRiskAssessmentStatus(StrEnum):
    Loading = 'loading'
    Complete = 'complete'


class ToolCallStatus(StrEnum):
    Streaming = 'streaming'
    PendingConfirmation = 'pending-confirmation'
    Running = 'running'
    AuthRequired = 'auth-required'
    PendingResultConfirmation = 'pending-result-confirmation'
    Completed = 'completed'
    Cancelled = 'cancelled'


class ToolResultContentType(StrEnum):
    Text = 'text'
    EmbeddedResource = 'embeddedResource'
    Resource = 'resource'
    FileEdit = 'fileEdit'
    Terminal = 'terminal'
    Subagent = 'subagent'


class TurnState(StrEnum):
    Complete = 'complete'
    Cancelled = 'cancelled'
    Error = 'error'


class ActionType(StrEnum):
    """Discriminant values for all state actions (the `type` of each action)."""

    RootAgentsChanged = 'root/agentsChanged'
    RootActiveSessionsChanged = 'root/activeSessionsChanged'
    RootTerminalsChanged = 'root/terminalsChanged'
    RootConfigChanged = 'root/configChanged'
    SessionReady = 'session/ready'
    SessionCreationFailed = 'session/creationFailed'
    SessionChatAdded = 'session/chatAdded'
    SessionChatRemoved = 'session/chatRemoved'
    SessionChatUpdated = 'session/chatUpdated'
    SessionDefaultChatChanged = 'session/defaultChatChanged'
    SessionTitleChanged = 'session/titleChanged'
    SessionServerToolsChanged = 'session/serverToolsChanged'
    SessionActiveClientSet = 'session/activeClientSet'
    SessionActiveClientRemoved = 'session/activeClientRemoved'
    SessionWorkingDirectorySet = 'session/workingDirectorySet'
    SessionWorkingDirectoryRemoved = 'session/workingDirectoryRemoved'
    SessionInputNeededSet = 'session/inputNeededSet'
    SessionInputNeededRemoved = 'session/inputNeededRemoved'
    SessionCustomizationsChanged = 'session/customizationsChanged'
    SessionCustomizationToggled = 'session/customizationToggled'
    SessionCustomizationUpdated = 'session/customizationUpdated'
    SessionCustomizationRemoved = 'session/customizationRemoved'
    SessionMcpServerStateChanged = 'session/mcpServerStateChanged'
    SessionMcpServerStartRequested = 'session/mcpServerStartRequested'
    SessionMcpServerStopRequested = 'session/mcpServerStopRequested'
    SessionIsReadChanged = 'session/isReadChanged'
    SessionIsArchivedChanged = 'session/isArchivedChanged'
    SessionActivityChanged = 'session/activityChanged'
    SessionChangesetsChanged = 'session/changesetsChanged'
    SessionConfigChanged = 'session/configChanged'
    SessionMetaChanged = 'session/metaChanged'
    ChatTurnStarted = 'chat/turnStarted'
    ChatDelta = 'chat/delta'
    ChatResponsePart = 'chat/responsePart'
    ChatToolCallStart = 'chat/toolCallStart'
    ChatToolCallDelta = 'chat/toolCallDelta'
    ChatToolCallReady = 'chat/toolCallReady'
    ChatToolCallConfirmed = 'chat/toolCallConfirmed'
    ChatToolCallComplete = 'chat/toolCallComplete'
    ChatToolCallResultConfirmed = 'chat/toolCallResultConfirmed'
    ChatToolCallContentChanged = 'chat/toolCallContentChanged'
    ChatToolCallAuthRequired = 'chat/toolCallAuthRequired'
    ChatToolCallAuthResolved = 'chat/toolCallAuthResolved'
    ChatTurnComplete = 'chat/turnComplete'
    ChatTurnCancelled = 'chat/turnCancelled'
    ChatError = 'chat/error'
    ChatActivityChanged = 'chat/activityChanged'
    ChatWorkingDirectorySet = 'chat/workingDirectorySet'
    ChatWorkingDirectoryRemoved = 'chat/workingDirectoryRemoved'
    ChatUsage = 'chat/usage'
    ChatReasoning = 'chat/reasoning'
    ChatPendingMessageSet = 'chat/pendingMessageSet'
    ChatPendingMessageRemoved = 'chat/pendingMessageRemoved'
    ChatQueuedMessagesReordered = 'chat/queuedMessagesReordered'
    ChatDraftChanged = 'chat/draftChanged'
    ChatInputRequested = 'chat/inputRequested'
    ChatInputAnswerChanged = 'chat/inputAnswerChanged'
    ChatInputCompleted = 'chat/inputCompleted'
    ChatTruncated = 'chat/truncated'
    ChatTurnsLoaded = 'chat/turnsLoaded'
    ChangesetStatusChanged = 'changeset/statusChanged'
    ChangesetFileSet = 'changeset/fileSet'
    ChangesetFileRemoved = 'changeset/fileRemoved'
    ChangesetFilesReviewChanged = 'changeset/filesReviewChanged'
    ChangesetContentChanged = 'changeset/contentChanged'
    ChangesetOperationsChanged = 'changeset/operationsChanged'
    ChangesetOperationStatusChanged = 'changeset/operationStatusChanged'
    ChangesetCleared = 'changeset/cleared'
    AnnotationsSet = 'annotations/set'
    AnnotationsUpdated = 'annotations/updated'
    AnnotationsRemoved = 'annotations/removed'
    AnnotationsEntrySet = 'annotations/entrySet'
    AnnotationsEntryRemoved = 'annotations/entryRemoved'
    TerminalData = 'terminal/data'
    TerminalInput = 'terminal/input'
    TerminalResized = 'terminal/resized'
    TerminalClaimed = 'terminal/claimed'
    TerminalTitleChanged = 'terminal/titleChanged'
    TerminalCwdChanged = 'terminal/cwdChanged'
    TerminalExited = 'terminal/exited'
    TerminalCleared = 'terminal/cleared'
    TerminalCommandDetectionAvailable = 'terminal/commandDetectionAvailable'
    TerminalCommandExecuted = 'terminal/commandExecuted'
    TerminalCommandFinished = 'terminal/commandFinished'
    ResourceWatchChanged = 'resourceWatch/changed'


class ActionEnvelope(ProtocolStruct, kw_only=True, frozen=True):
    """Every action is wrapped in an `ActionEnvelope`."""

    #: Channel URI this action belongs to.
    channel: URI
    action: StateAction
    server_seq: int = msgspec.field(name='serverSeq')
    origin: ActionOrigin | UnsetType | None = UNSET
    rejection_reason: str | UnsetType = msgspec.field(name='rejectionReason', default=UNSET)


class ActionOrigin(ProtocolStruct, kw_only=True, frozen=True):
    """Identifies the client that originally dispatched an action."""

    client_id: str = msgspec.field(name='clientId')
    client_seq: int = msgspec.field(name='clientSeq')


class ActiveTurn(ProtocolStruct, kw_only=True, frozen=True):
    """An in-progress turn — the assistant is actively streaming."""

    #: Turn identifier
    id: str
    #: ISO 8601 timestamp when this turn started.
    started_at: str = msgspec.field(name='startedAt')
    #: The message that initiated the turn
    message: Message
    #: All response content in stream order: text, tool calls, reasoning, and content refs.
    response_parts: tuple[ResponsePart, ...] = msgspec.field(name='responseParts')
    #: Token usage info
    usage: UsageInfo | UnsetType | None = UNSET


class AgentCapabilities(ProtocolStruct, kw_only=True, frozen=True):
    """Static capabilities an AgentInfo advertises. Modelled after MCP capabilities: each field is opt-in and its presence (an empty object `{}`) signals support, while absence means the feature is unsupported and the corresponding client commands MUST NOT be used. Sub-fields carry per-capability options."""

    #: The agent can host more than one concurrent chat per session. When absent, clients MUST NOT call `createChat` to open chats beyond the default one the session starts with. An empty
    multiple_chats: MultipleChatsCapability | UnsetType = msgspec.field(name='multipleChats', default=UNSET)
    #: The session's agent can be granted tool access to more than one working directory. The directories are treated as equal peers except where the agent advertises MultipleWorkingDirec
    multiple_working_directories: MultipleWorkingDirectoriesCapability | UnsetType = msgspec.field(name='multipleWorkingDirectories', default=UNSET)


class AgentCustomization(ProtocolStruct, kw_only=True, frozen=True):
    """A custom agent contributed by a plugin or directory."""

    #: Session-unique opaque identifier. Used by every action that targets a specific customization. Minted by whoever publishes the customization (typically the agent host).
    id: str
    #: Source URI for this customization. A plugin URL, a file URI, or a directory URI.
    uri: URI
    #: Human-readable name.
    name: str
    #: Icons for UI display.
    icons: tuple[Icon, ...] | UnsetType = UNSET
    #: Optional span within `uri` when this customization is a subset of a larger file (for example, one entry in an inline `mcpServers` block of a `plugins.json` manifest). Absent when t
    range: TextRange | UnsetType = UNSET
    #: Additional provider-specific metadata for this customization.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    #: Whether this child is individually enabled. Absent means enabled, so a producer only needs to set it to surface a child that exists but is turned off on its own.
    enabled: bool | UnsetType = UNSET
    type: Literal['agent'] = 'agent'
    #: Short description of what the agent specializes in and when to invoke it. Sourced from the agent file's frontmatter `description`.
    description: str | UnsetType = UNSET
    #: Model the agent is pinned to, sourced from the agent file's frontmatter `model`. Absent means the agent inherits the session's default model.
    model: str | UnsetType = UNSET
    #: Allowlist of tool names the agent is scoped to, sourced from the agent file's frontmatter `tools`. A non-empty list restricts the agent to exactly those tools. Absent — or an empty
    tools: tuple[str, ...] | UnsetType = UNSET
    #: When `true`, the agent will not auto-delegate to this custom agent as a sub-agent; it can only be selected by the user. Absent or `false` means the agent may delegate to it.
    disable_model_invocation: bool | UnsetType = msgspec.field(name='disableModelInvocation', default=UNSET)
    #: When `true`, the user cannot select this custom agent (for example, in a picker); it remains available for the agent to auto-delegate to. Absent or `false` means the user may selec
    disable_user_invocation: bool | UnsetType = msgspec.field(name='disableUserInvocation', default=UNSET)


class AgentInfo(ProtocolStruct, kw_only=True, frozen=True):
    #: Agent provider ID (e.g. `'copilot'`)
    provider: str
    #: Human-readable name
    display_name: str = msgspec.field(name='displayName')
    #: Description string
    description: str
    #: Available models for this agent
    models: tuple[SessionModelInfo, ...]
    #: Protected resources this agent requires authentication for.
    protected_resources: tuple[ProtectedResourceMetadata, ...] | UnsetType = msgspec.field(name='protectedResources', default=UNSET)
    #: Customizations associated with this agent.
    customizations: tuple[Customization, ...] | UnsetType = UNSET
    #: Static capabilities the agent advertises about itself. Clients use these to gate features (multi-chat, fork) instead of switching on the provider id.
    capabilities: AgentCapabilities | UnsetType = UNSET


class AgentSelection(ProtocolStruct, kw_only=True, frozen=True):
    """A selected custom agent for a session."""

    #: Stable agent URI (matches an AgentCustomization.uri).
    uri: URI


class AhpMcpUiHostCapabilities(ProtocolStruct, kw_only=True, frozen=True):
    """The subset of MCP App [`HostCapabilities`](https://github.com/modelcontextprotocol/ext-apps/blob/main/specification/draft/apps.mdx) an AHP host can derive from the upstream MCP server (and from AHP's own forwarding plumbing). Advertised on McpServerCustomizationApps.capabilities so clients can pass it through into the `hostCapabilities` of the `ui/initialize` response delivered to an MCP App View."""

    #: Producer proxies the MCP `tools/*` methods to the upstream server.
    server_tools: ListChangedCapability | UnsetType = msgspec.field(name='serverTools', default=UNSET)
    #: Producer proxies the MCP `resources/*` methods to the upstream server.
    server_resources: ListChangedCapability | UnsetType = msgspec.field(name='serverResources', default=UNSET)
    #: Producer accepts `notifications/message` log entries from the App via `mcpNotification`.
    logging: dict[str, Any] | UnsetType = UNSET
    #: Producer serves `sampling/createMessage` via `mcpMethodCall`.
    sampling: AhpMcpUiHostCapabilitiesSampling | UnsetType = UNSET


class AhpMcpUiHostCapabilitiesSampling(ProtocolStruct, kw_only=True, frozen=True):
    """Producer serves `sampling/createMessage` via `mcpMethodCall`."""

    tools: dict[str, Any] | UnsetType = UNSET


class Annotation(ProtocolStruct, kw_only=True, frozen=True):
    """A conversation anchored to a specific file produced by a specific turn, optionally narrowed to a range within that file."""

    #: Stable identifier within the annotations channel. Assigned by the client that dispatches the creating AnnotationsSetAction.
    id: str
    #: Turn that produced the file versions this annotation is anchored to. Matches a Turn.id on the owning session.
    turn_id: str = msgspec.field(name='turnId')
    #: The file the annotation is anchored to.
    resource: URI
    #: Range within resource the annotation is anchored to. When omitted the annotation is anchored to the entire file.
    range: TextRange | UnsetType = UNSET
    #: Whether the annotation has been resolved. Newly created annotations are always unresolved (`false`); a client marks an annotation resolved (or re-opens it) by dispatching an Annota
    resolved: bool
    #: Entries in this annotation, in dispatch order (oldest first). MUST contain at least one entry.
    entries: tuple[AnnotationEntry, ...]
    #: Producer-defined opaque metadata, surfaced to tooling but not interpreted by the protocol.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class AnnotationEntry(ProtocolStruct, kw_only=True, frozen=True):
    """A single entry within an Annotation."""

    #: Stable identifier within the enclosing annotation. Assigned by the client that dispatches the AnnotationsEntrySetAction (or the enclosing AnnotationsSetAction) introducing the entr
    id: str
    #: Entry body. A bare `string` is rendered as plain text; pass `{ markdown: '…' }` to opt into Markdown rendering. See StringOrMarkdown.
    text: StringOrMarkdown
    #: Producer-defined opaque metadata, surfaced to tooling but not interpreted by the protocol.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class AnnotationsEntryRemovedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Remove a single AnnotationEntry from an annotation without collapsing the annotation itself. Used when more than one entry remains — to remove the last entry a client dispatches AnnotationsRemovedAction instead, since the protocol forbids empty annotations."""

    type: Literal['annotations/entryRemoved'] = 'annotations/entryRemoved'
    #: The Annotation.id the entry belongs to.
    annotation_id: str = msgspec.field(name='annotationId')
    #: The AnnotationEntry.id to remove.
    entry_id: str = msgspec.field(name='entryId')


class AnnotationsEntrySetAction(ProtocolStruct, kw_only=True, frozen=True):
    """Upsert an AnnotationEntry within an existing annotation — adds a new entry, or replaces one identified by AnnotationEntry.id. The dispatching client assigns the AnnotationEntry.id of a new entry. If annotationId does not match any current annotation the action is a no-op."""

    type: Literal['annotations/entrySet'] = 'annotations/entrySet'
    #: The Annotation.id the entry belongs to.
    annotation_id: str = msgspec.field(name='annotationId')
    #: The new or replacement entry.
    entry: AnnotationEntry


class AnnotationsRemovedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Remove an Annotation from the channel by its id."""

    type: Literal['annotations/removed'] = 'annotations/removed'
    #: The Annotation.id of the annotation to remove.
    annotation_id: str = msgspec.field(name='annotationId')


class AnnotationsSetAction(ProtocolStruct, kw_only=True, frozen=True):
    """Upsert an Annotation in the annotations channel — adds a new annotation, or replaces an existing one identified by Annotation.id."""

    type: Literal['annotations/set'] = 'annotations/set'
    #: The new or replacement annotation. MUST contain at least one entry.
    annotation: Annotation


class AnnotationsState(ProtocolStruct, kw_only=True, frozen=True):
    """Full state for a session's annotations channel, returned when a client subscribes to an `ahp-session:/<uuid>/annotations` URI."""

    #: Annotations in this channel, keyed by Annotation.id.
    annotations: tuple[Annotation, ...]


class AnnotationsSummary(ProtocolStruct, kw_only=True, frozen=True):
    """Lightweight per-session summary of the annotations channel, surfaced on SessionSummary.annotations so badge UI can render annotation / entry counts without subscribing to the channel itself."""

    #: The subscribable annotations channel URI for the owning session (typically `ahp-session:/<uuid>/annotations`). Surfaced explicitly even though it is derivable from the session URI
    resource: URI
    #: Total number of Annotation entries in the channel.
    annotation_count: int | float = msgspec.field(name='annotationCount')
    #: Total number of AnnotationEntry entries across every annotation.
    entry_count: int | float = msgspec.field(name='entryCount')


class AnnotationsUpdatedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Partially update an existing Annotation's own properties — a narrow alternative to AnnotationsSetAction for the common case of resolving / re-opening or re-anchoring an annotation without resending its entries."""

    type: Literal['annotations/updated'] = 'annotations/updated'
    #: The Annotation.id of the annotation to update.
    annotation_id: str = msgspec.field(name='annotationId')
    #: Re-anchors the annotation to the file versions this turn produced. Matches a Turn.id on the owning session. Omit to leave the current Annotation.turnId unchanged.
    turn_id: str | UnsetType = msgspec.field(name='turnId', default=UNSET)
    #: Re-anchors the annotation to this file. Omit to leave the current Annotation.resource unchanged.
    resource: URI | UnsetType = UNSET
    #: Narrows the annotation to this range within resource. Omit to leave the current Annotation.range unchanged; this action cannot clear an existing range — dispatch AnnotationsSetActi
    range: TextRange | UnsetType = UNSET
    #: Marks the annotation resolved (`true`) or re-opens it (`false`). Omit to leave the current Annotation.resolved state unchanged.
    resolved: bool | UnsetType = UNSET


class AuthRequiredErrorData(ProtocolStruct, kw_only=True, frozen=True):
    """Details carried in the `data` field of an `AuthRequired` (-32007) error."""

    #: Protected resources that require authentication.
    resources: tuple[ProtectedResourceMetadata, ...]


class AuthRequiredParams(ProtocolStruct, kw_only=True, frozen=True):
    """Sent by the server when a protected resource requires (re-)authentication."""

    #: Channel URI this notification belongs to
    channel: URI
    #: The protected resource identifier that requires authentication
    resource: str
    #: Why authentication is required
    reason: str | UnsetType = UNSET


class AuthenticateParams(ProtocolStruct, kw_only=True, frozen=True):
    """Pushes a ****** for a protected resource. The `resource` field MUST match a protected-resource identifier the client has discovered from the server — whether declared statically in `AgentInfo.protectedResources`, or discovered dynamically from a live `McpServerAuthRequiredState.resource` or `ToolCallAuthRequiredState.auth.resource` (both surfaced only once the corresponding MCP server or tool call actually challenges for auth). Servers MUST accept any `resource` value they have themselves advertised through one of these three mechanisms."""

    channel: str
    #: The protected resource identifier. MUST match a `resource` value the server has advertised — via `ProtectedResourceMetadata` in `AgentInfo.protectedResources`, or via a live `McpSe
    resource: str
    #: ***** obtained from the resource's authorization server
    token: str
    #: OAuth scopes the token grants, when known. Lets the server determine whether a specific challenge — e.g. the `requiredScopes` on a live `McpServerAuthRequiredState` or `ToolCallAut
    scopes: tuple[str, ...] | UnsetType = UNSET


class AuthenticateResult(ProtocolStruct, kw_only=True, frozen=True):
    """Result of the `authenticate` command."""

    pass


class BaseParams(ProtocolStruct, kw_only=True, frozen=True):
    """Base shape every command's params extends."""

    #: Channel URI this command targets.
    channel: URI


class ChangesSummary(ProtocolStruct, kw_only=True, frozen=True):
    """Aggregate counts describing the file changes associated with a session."""

    #: Total number of inserted lines across all changed files.
    additions: int | float | UnsetType = UNSET
    #: Total number of deleted lines across all changed files.
    deletions: int | float | UnsetType = UNSET
    #: Number of files that have changes.
    files: int | float | UnsetType = UNSET


class Changeset(ProtocolStruct, kw_only=True, frozen=True):
    """Catalogue entry describing one changeset the server can produce for a session."""

    #: Human-readable label, e.g. `'Uncommitted Changes'`.
    label: str
    #: RFC 6570 URI template. Clients parse the variables directly out of the template using the standard `{name}` syntax — they are not redeclared here.
    uri_template: str = msgspec.field(name='uriTemplate')
    #: Optional longer description.
    description: str | UnsetType = UNSET
    #: Advisory hint describing what kind of changeset this is, so clients can group, sort, or render an appropriate icon without parsing uriTemplate. Recognized values include:
    change_kind: str = msgspec.field(name='changeKind')
    #: Optional capability declarations for this changeset. Absent (or an empty object) means the changeset advertises no optional capabilities.
    capabilities: ChangesetCapabilities | UnsetType = UNSET


class ChangesetCapabilities(ProtocolStruct, kw_only=True, frozen=True):
    """Optional capabilities a changeset advertises on its catalogue Changeset entry."""

    #: The changeset supports the per-file **review** workflow. When declared, clients MAY surface a GitHub-style 'Viewed' toggle per file and dispatch `changeset/filesReviewChanged` to s
    review: dict[str, Any] | UnsetType = UNSET


class ChangesetClearedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Drop every file from the changeset."""

    type: Literal['changeset/cleared'] = 'changeset/cleared'


class ChangesetContentChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """The changeset's full content changed. Full replacement semantics: `files` replaces the previous file list, and `operations`, when present, replaces the previous operation list."""

    type: Literal['changeset/contentChanged'] = 'changeset/contentChanged'
    #: Full replacement file list.
    files: tuple[ChangesetFile, ...]
    #: Full replacement operation list. Omit when operations are unchanged.
    operations: tuple[ChangesetOperation, ...] | UnsetType = UNSET
    #: Error information, if the changeset content change failed.
    error: ErrorInfo | UnsetType = UNSET


class ChangesetFile(ProtocolStruct, kw_only=True, frozen=True):
    """One file entry within a ChangesetState."""

    #: Stable identifier within the changeset. Typically `after.uri` (or `before.uri` for deletions).
    id: str
    #: Reuses the existing FileEdit shape. Clients derive line additions, deletions, and rename/create/delete semantics from this.
    edit: FileEdit
    #: Whether a reviewer has marked this file as reviewed (the GitHub-style 'Viewed' checkbox). Absent is equivalent to `false` — clients MUST treat a missing value as not-yet-reviewed.
    reviewed: bool | UnsetType = UNSET
    #: Server-defined opaque metadata, surfaced to operations and tooling but not interpreted by the protocol.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class ChangesetFileRemovedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Remove a ChangesetFile from the changeset by its id."""

    type: Literal['changeset/fileRemoved'] = 'changeset/fileRemoved'
    #: The ChangesetFile.id of the file to remove.
    file_id: str = msgspec.field(name='fileId')


class ChangesetFileSetAction(ProtocolStruct, kw_only=True, frozen=True):
    """Upsert a ChangesetFile in the changeset — adds a new entry, or replaces an existing one identified by ChangesetFile.id."""

    type: Literal['changeset/fileSet'] = 'changeset/fileSet'
    #: The new or replacement file entry.
    file: ChangesetFile


class ChangesetFilesReviewChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Set the ChangesetFile.reviewed flag for one or more files — the GitHub-style 'Viewed' toggle, applied in a single batch."""

    type: Literal['changeset/filesReviewChanged'] = 'changeset/filesReviewChanged'
    #: The ids of the files whose review state changed.
    files: tuple[str, ...]
    #: New review state applied to every listed file: `true` once reviewed, `false` to clear it.
    reviewed: bool


class ChangesetOperation(ProtocolStruct, kw_only=True, frozen=True):
    """A server-declared invokable verb the client can run against a changeset, a file, or a range — `'stage'`, `'revert'`, `'create-pr'`, and so on."""

    #: Stable identifier, unique within this changeset.
    id: str
    #: Human-readable button/menu label.
    label: str
    #: Optional longer description shown on hover or in tooltips.
    description: str | UnsetType = UNSET
    #: Where this operation can be invoked.
    scopes: tuple[str, ...]
    #: Optional confirmation prompt to show before invoking. When present, the client MUST display this message to the user (typically in a confirmation dialog) and only invoke the operat
    confirmation: StringOrMarkdown | UnsetType = UNSET
    #: Optional generic icon hint, e.g. `'check'`, `'trash'`.
    icon: str | UnsetType = UNSET
    #: Optional group identifier, used to group related operations together.
    group: str | UnsetType = UNSET
    #: Current execution status. The server sets Running while an invocation is in flight, Error when the most recent invocation failed, and Idle otherwise.
    status: str
    #: Cause of failure. Present iff `status === ChangesetOperationStatus.Error`; otherwise omitted.
    error: ErrorInfo | UnsetType = UNSET


class ChangesetOperationFollowUp(ProtocolStruct, kw_only=True, frozen=True):
    """Optional follow-up surfaced by the server after an operation completes — a ContentRef the client can fetch and display."""

    content: ContentRef
    #: When `true`, open in an external handler rather than inline.
    external: bool | UnsetType = UNSET


class ChangesetOperationStatusChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """The ChangesetOperation.status for a single operation transitioned (e.g. `idle → running → idle`, or `running → error`). The error payload is set together with `status` whenever it transitions to Error, and cleared on any other transition."""

    type: Literal['changeset/operationStatusChanged'] = 'changeset/operationStatusChanged'
    #: The ChangesetOperation.id whose status changed.
    operation_id: str = msgspec.field(name='operationId')
    #: New execution status.
    status: str
    #: Cause when `status === ChangesetOperationStatus.Error`; otherwise omitted.
    error: ErrorInfo | UnsetType = UNSET


class ChangesetOperationTargetRange(ProtocolStruct, kw_only=True, frozen=True):
    """The `range` form of ChangesetOperationTarget."""

    kind: Literal['range'] = 'range'
    resource: URI
    side: str | UnsetType = UNSET
    range: TextRange


class ChangesetOperationTargetResource(ProtocolStruct, kw_only=True, frozen=True):
    """The `resource` form of ChangesetOperationTarget."""

    kind: Literal['resource'] = 'resource'
    resource: URI
    side: str | UnsetType = UNSET


class ChangesetOperationsChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """The set of operations available on this changeset changed. Full replacement semantics: `operations` replaces the previous list (or removes it entirely when `operations` is `undefined`)."""

    type: Literal['changeset/operationsChanged'] = 'changeset/operationsChanged'
    #: Updated operation list. Pass `undefined` to clear all operations.
    operations: tuple[ChangesetOperation, ...] | UnsetType | None = UNSET


class ChangesetState(ProtocolStruct, kw_only=True, frozen=True):
    """Full state for a single changeset, returned when a client subscribes to an expanded changeset URI."""

    #: Computation lifecycle.
    status: str
    #: Present iff `status === ChangesetStatus.Error`.
    error: ErrorInfo | UnsetType = UNSET
    #: Files in this changeset, keyed by ChangesetFile.id.
    files: tuple[ChangesetFile, ...]
    #: Operations the client may invoke against this changeset. Omit when no operations are available.
    operations: tuple[ChangesetOperation, ...] | UnsetType = UNSET


class ChangesetStatusChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """The ChangesetState.status for this changeset transitioned (e.g. `computing → ready`). The error payload is set together with `status` whenever it transitions to Error."""

    type: Literal['changeset/statusChanged'] = 'changeset/statusChanged'
    #: New computation lifecycle status.
    status: str
    #: Cause when `status === ChangesetStatus.Error`; otherwise omitted.
    error: ErrorInfo | UnsetType = UNSET


class ChatActivityChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """The activity description of this chat changed."""

    type: Literal['chat/activityChanged'] = 'chat/activityChanged'
    #: Human-readable description of current activity; omit or set `undefined` to clear
    activity: str | UnsetType | None = UNSET


class ChatDeltaAction(ProtocolStruct, kw_only=True, frozen=True):
    """Streaming text chunk from the assistant, appended to a specific response part."""

    type: Literal['chat/delta'] = 'chat/delta'
    #: Turn identifier
    turn_id: str = msgspec.field(name='turnId')
    #: Identifier of the response part to append to
    part_id: str = msgspec.field(name='partId')
    #: Text chunk
    content: str
    #: Additional provider-specific metadata for this action.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class ChatDraftChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """The chat's draft input changed."""

    type: Literal['chat/draftChanged'] = 'chat/draftChanged'
    #: New draft message, or `undefined` to clear it
    draft: Message | UnsetType | None = UNSET


class ChatErrorAction(ProtocolStruct, kw_only=True, frozen=True):
    """Error during turn processing."""

    type: Literal['chat/error'] = 'chat/error'
    #: Turn identifier
    turn_id: str = msgspec.field(name='turnId')
    #: Elapsed turn duration in milliseconds, measured by the producer's own clock. Clients MUST NOT derive this by subtracting timestamps — cross- client clocks may differ — and MUST tre
    duration: int | float
    #: Error details
    error: ErrorInfo
    #: Additional provider-specific metadata for this action.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class ChatInputAnswerChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """A client updated, submitted, skipped, or removed a single in-progress answer."""

    type: Literal['chat/inputAnswerChanged'] = 'chat/inputAnswerChanged'
    #: Input request identifier
    request_id: str = msgspec.field(name='requestId')
    #: Question identifier within the input request
    question_id: str = msgspec.field(name='questionId')
    #: Updated answer, or `undefined` to clear an answer draft
    answer: ChatInputAnswer | UnsetType = UNSET


class ChatInputAnswered(ProtocolStruct, kw_only=True, frozen=True):
    #: Answer state
    state: Literal['draft', 'submitted']
    #: Answer value
    value: ChatInputAnswerValue


class ChatInputBooleanAnswerValue(ProtocolStruct, kw_only=True, frozen=True):
    kind: Literal['boolean'] = 'boolean'
    value: bool


class ChatInputBooleanQuestion(ProtocolStruct, kw_only=True, frozen=True):
    """Boolean question within a chat input request."""

    #: Stable question identifier used as the key in `answers`
    id: str
    #: Short display title
    title: str | UnsetType = UNSET
    #: Prompt shown to the user
    message: str
    #: Whether the user must answer this question to accept the request
    required: bool | UnsetType = UNSET
    kind: Literal['boolean'] = 'boolean'
    #: Default boolean value
    default_value: bool | UnsetType = msgspec.field(name='defaultValue', default=UNSET)


class ChatInputCompletedAction(ProtocolStruct, kw_only=True, frozen=True):
    """A client submitted an accept, decline, or cancel response to an input request."""

    type: Literal['chat/inputCompleted'] = 'chat/inputCompleted'
    #: Input request identifier
    request_id: str = msgspec.field(name='requestId')
    #: Completion outcome
    response: str
    #: Optional final answer replacement, keyed by question ID
    answers: dict[str, ChatInputAnswer] | UnsetType = UNSET


class ChatInputMultiSelectQuestion(ProtocolStruct, kw_only=True, frozen=True):
    """Multi-select question within a chat input request."""

    #: Stable question identifier used as the key in `answers`
    id: str
    #: Short display title
    title: str | UnsetType = UNSET
    #: Prompt shown to the user
    message: str
    #: Whether the user must answer this question to accept the request
    required: bool | UnsetType = UNSET
    kind: Literal['multi-select'] = 'multi-select'
    #: Options the user may select from
    options: tuple[ChatInputOption, ...]
    #: Whether the user may enter text in addition to selecting options
    allow_freeform_input: bool | UnsetType = msgspec.field(name='allowFreeformInput', default=UNSET)
    #: Minimum selected item count
    min: int | float | UnsetType = UNSET
    #: Maximum selected item count
    max: int | float | UnsetType = UNSET


class ChatInputNumberAnswerValue(ProtocolStruct, kw_only=True, frozen=True):
    kind: Literal['number'] = 'number'
    value: int | float


class ChatInputNumberQuestion(ProtocolStruct, kw_only=True, frozen=True):
    """Numeric question within a chat input request."""

    #: Stable question identifier used as the key in `answers`
    id: str
    #: Short display title
    title: str | UnsetType = UNSET
    #: Prompt shown to the user
    message: str
    #: Whether the user must answer this question to accept the request
    required: bool | UnsetType = UNSET
    kind: Literal['number', 'integer']
    #: Minimum value
    min: int | float | UnsetType = UNSET
    #: Maximum value
    max: int | float | UnsetType = UNSET
    #: Default numeric value
    default_value: int | float | UnsetType = msgspec.field(name='defaultValue', default=UNSET)


class ChatInputOption(ProtocolStruct, kw_only=True, frozen=True):
    """A choice in a select-style question."""

    #: Stable option identifier; for MCP enum values this is the enum string
    id: str
    #: Display label
    label: str
    #: Optional secondary text
    description: str | UnsetType = UNSET
    #: Whether this option is the recommended/default choice
    recommended: bool | UnsetType = UNSET


class ChatInputQuestionBase(ProtocolStruct, kw_only=True, frozen=True):
    #: Stable question identifier used as the key in `answers`
    id: str
    #: Short display title
    title: str | UnsetType = UNSET
    #: Prompt shown to the user
    message: str
    #: Whether the user must answer this question to accept the request
    required: bool | UnsetType = UNSET


class ChatInputRequest(ProtocolStruct, kw_only=True, frozen=True):
    """The request payload carried by an InputRequestResponsePart."""

    #: Stable request identifier
    id: str
    #: Display message for the request as a whole
    message: str | UnsetType = UNSET
    #: URL the user should review or open, for URL-style elicitations
    url: URI | UnsetType = UNSET
    #: Ordered questions to ask the user
    questions: tuple[ChatInputQuestion, ...] | UnsetType = UNSET
    #: Current draft or submitted answers, keyed by question ID
    answers: dict[str, ChatInputAnswer] | UnsetType = UNSET


class ChatInputRequestedAction(ProtocolStruct, kw_only=True, frozen=True):
    """A session requested input from the user."""

    type: Literal['chat/inputRequested'] = 'chat/inputRequested'
    #: Input request to create or replace
    request: ChatInputRequest


class ChatInputSelectedAnswerValue(ProtocolStruct, kw_only=True, frozen=True):
    kind: Literal['selected'] = 'selected'
    value: str
    #: Free-form text entered instead of selecting an option
    freeform_values: tuple[str, ...] | UnsetType = msgspec.field(name='freeformValues', default=UNSET)


class ChatInputSelectedManyAnswerValue(ProtocolStruct, kw_only=True, frozen=True):
    kind: Literal['selected-many'] = 'selected-many'
    value: tuple[str, ...]
    #: Free-form text entered in addition to selected options
    freeform_values: tuple[str, ...] | UnsetType = msgspec.field(name='freeformValues', default=UNSET)


class ChatInputSingleSelectQuestion(ProtocolStruct, kw_only=True, frozen=True):
    """Single-select question within a chat input request."""

    #: Stable question identifier used as the key in `answers`
    id: str
    #: Short display title
    title: str | UnsetType = UNSET
    #: Prompt shown to the user
    message: str
    #: Whether the user must answer this question to accept the request
    required: bool | UnsetType = UNSET
    kind: Literal['single-select'] = 'single-select'
    #: Options the user may select from
    options: tuple[ChatInputOption, ...]
    #: Whether the user may enter text instead of selecting an option
    allow_freeform_input: bool | UnsetType = msgspec.field(name='allowFreeformInput', default=UNSET)


class ChatInputSkipped(ProtocolStruct, kw_only=True, frozen=True):
    #: Answer state
    state: Literal['skipped'] = 'skipped'
    #: Free-form reason or value captured while skipping, if any
    freeform_values: tuple[str, ...] | UnsetType = msgspec.field(name='freeformValues', default=UNSET)


class ChatInputTextAnswerValue(ProtocolStruct, kw_only=True, frozen=True):
    """Value captured for one answer."""

    kind: Literal['text'] = 'text'
    value: str


class ChatInputTextQuestion(ProtocolStruct, kw_only=True, frozen=True):
    """Text question within a chat input request."""

    #: Stable question identifier used as the key in `answers`
    id: str
    #: Short display title
    title: str | UnsetType = UNSET
    #: Prompt shown to the user
    message: str
    #: Whether the user must answer this question to accept the request
    required: bool | UnsetType = UNSET
    kind: Literal['text'] = 'text'
    #: Format hint for text questions, such as `email`, `uri`, `date`, or `date-time`
    format: str | UnsetType = UNSET
    #: Minimum string length
    min: int | float | UnsetType = UNSET
    #: Maximum string length
    max: int | float | UnsetType = UNSET
    #: Default text
    default_value: str | UnsetType = msgspec.field(name='defaultValue', default=UNSET)


class ChatOriginFork(ProtocolStruct, kw_only=True, frozen=True):
    """The `fork` form of ChatOrigin."""

    kind: Literal['fork'] = 'fork'
    chat: URI
    turn_id: str = msgspec.field(name='turnId')


class ChatOriginSideChat(ProtocolStruct, kw_only=True, frozen=True):
    """The `sideChat` form of ChatOrigin."""

    kind: Literal['sideChat'] = 'sideChat'
    chat: URI
    turn_id: str = msgspec.field(name='turnId')
    selection: SideChatSelection | UnsetType = UNSET


class ChatOriginTool(ProtocolStruct, kw_only=True, frozen=True):
    """The `tool` form of ChatOrigin."""

    kind: Literal['tool'] = 'tool'
    chat: URI
    tool_call_id: str = msgspec.field(name='toolCallId')


class ChatOriginUser(ProtocolStruct, kw_only=True, frozen=True):
    """The `user` form of ChatOrigin."""

    kind: Literal['user'] = 'user'


class ChatPendingMessageRemovedAction(ProtocolStruct, kw_only=True, frozen=True):
    """A pending message was removed (steering or queued)."""

    type: Literal['chat/pendingMessageRemoved'] = 'chat/pendingMessageRemoved'
    #: Whether this is a steering or queued message
    kind: str
    #: Identifier of the pending message to remove
    id: str


class ChatPendingMessageSetAction(ProtocolStruct, kw_only=True, frozen=True):
    """A pending message was set (upsert semantics: creates or replaces)."""

    type: Literal['chat/pendingMessageSet'] = 'chat/pendingMessageSet'
    #: Whether this is a steering or queued message
    kind: str
    #: Unique identifier for this pending message
    id: str
    #: The message content
    message: Message


class ChatQueuedMessagesReorderedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Reorder the queued messages."""

    type: Literal['chat/queuedMessagesReordered'] = 'chat/queuedMessagesReordered'
    #: Queued message IDs in the desired order
    order: tuple[str, ...]


class ChatReasoningAction(ProtocolStruct, kw_only=True, frozen=True):
    """Reasoning/thinking text from the model, appended to a specific reasoning response part."""

    type: Literal['chat/reasoning'] = 'chat/reasoning'
    #: Turn identifier
    turn_id: str = msgspec.field(name='turnId')
    #: Identifier of the reasoning response part to append to
    part_id: str = msgspec.field(name='partId')
    #: Reasoning text chunk
    content: str
    #: Additional provider-specific metadata for this action.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class ChatResponsePartAction(ProtocolStruct, kw_only=True, frozen=True):
    """Structured content appended to the response."""

    type: Literal['chat/responsePart'] = 'chat/responsePart'
    #: Turn identifier
    turn_id: str = msgspec.field(name='turnId')
    #: Response part (markdown or content ref)
    part: ResponsePart
    #: Additional provider-specific metadata for this action.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class ChatState(ProtocolStruct, kw_only=True, frozen=True):
    """Full state for a single chat, loaded when a client subscribes to the chat's URI."""

    #: Chat URI
    resource: URI
    #: Chat title
    title: str
    #: Current chat status (reuses SessionStatus shape)
    status: int
    #: Human-readable description of what the chat is currently doing
    activity: str | UnsetType = UNSET
    #: Last modification timestamp (ISO 8601, e.g. `'2025-03-10T18:42:03.123Z'`)
    modified_at: str = msgspec.field(name='modifiedAt')
    #: How this chat came into existence
    origin: ChatOrigin | UnsetType = UNSET
    #: How the user can interact with this chat. See ChatInteractivity.
    interactivity: str | UnsetType = UNSET
    #: The subset of the session's `workingDirectories` that this chat's agent has tool access to. Every entry MUST be present in the owning session's `workingDirectories`; servers MUST r
    working_directories: tuple[URI, ...] | UnsetType = msgspec.field(name='workingDirectories', default=UNSET)
    #: The chat's primary working directory — the distinguished root this chat is centered on (e.g. the agent's process root for this chat, the default location for relative paths). MUST
    primary_working_directory: URI | UnsetType = msgspec.field(name='primaryWorkingDirectory', default=UNSET)
    #: Completed turns
    turns: tuple[Turn, ...]
    #: Cursor for loading older completed turns into this chat state.
    turns_next_cursor: str | UnsetType = msgspec.field(name='turnsNextCursor', default=UNSET)
    #: Currently in-progress turn
    active_turn: ActiveTurn | UnsetType = msgspec.field(name='activeTurn', default=UNSET)
    #: Message to inject into the current turn at a convenient point
    steering_message: PendingMessage | UnsetType = msgspec.field(name='steeringMessage', default=UNSET)
    #: Messages to send automatically as new turns after the current turn finishes
    queued_messages: tuple[PendingMessage, ...] | UnsetType = msgspec.field(name='queuedMessages', default=UNSET)
    #: The user's in-progress draft input for this chat — the message they are composing but have not sent yet, including its model / agent selection and attachments.
    draft: Message | UnsetType = UNSET
    #: Additional provider-specific metadata for this chat.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class ChatSummary(ProtocolStruct, kw_only=True, frozen=True):
    """Lightweight catalog entry for a chat, carried in `SessionState.chats`. The full conversation lives in ChatState, which inlines (denormalizes) every field below."""

    #: Chat URI
    resource: URI
    #: Chat title
    title: str
    #: Current chat status (reuses SessionStatus shape)
    status: int
    #: Human-readable description of what the chat is currently doing
    activity: str | UnsetType = UNSET
    #: Last modification timestamp (ISO 8601, e.g. `'2025-03-10T18:42:03.123Z'`)
    modified_at: str = msgspec.field(name='modifiedAt')
    #: How this chat came into existence
    origin: ChatOrigin | UnsetType = UNSET
    #: How the user can interact with this chat. See ChatInteractivity.
    interactivity: str | UnsetType = UNSET
    #: The subset of the session's working directories this chat uses. See ChatState.workingDirectories for the full semantics.
    working_directories: tuple[URI, ...] | UnsetType = msgspec.field(name='workingDirectories', default=UNSET)
    #: The chat's primary working directory. See ChatState.primaryWorkingDirectory for the full semantics.
    primary_working_directory: URI | UnsetType = msgspec.field(name='primaryWorkingDirectory', default=UNSET)


class ChatToolCallApprovedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Client approves a pending tool call. The tool transitions to `running`."""

    #: Turn identifier
    turn_id: str = msgspec.field(name='turnId')
    #: Tool call identifier
    tool_call_id: str = msgspec.field(name='toolCallId')
    #: Additional provider-specific metadata for this tool call.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    type: Literal['chat/toolCallConfirmed'] = 'chat/toolCallConfirmed'
    approved: Literal[True] = True
    #: How the tool was confirmed
    confirmed: str
    #: Edited tool input parameters, if the client modified them before confirming
    edited_tool_input: str | UnsetType = msgspec.field(name='editedToolInput', default=UNSET)
    #: ID of the selected confirmation option, if the server provided options
    selected_option_id: str | UnsetType = msgspec.field(name='selectedOptionId', default=UNSET)


class ChatToolCallAuthRequiredAction(ProtocolStruct, kw_only=True, frozen=True):
    """A running tool call is paused pending MCP authentication. Transitions the tool call from `running` to `auth-required`."""

    #: Turn identifier
    turn_id: str = msgspec.field(name='turnId')
    #: Tool call identifier
    tool_call_id: str = msgspec.field(name='toolCallId')
    #: Additional provider-specific metadata for this tool call.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    type: Literal['chat/toolCallAuthRequired'] = 'chat/toolCallAuthRequired'
    #: The authentication challenge blocking this invocation.
    auth: McpAuthRequirement


class ChatToolCallAuthResolvedAction(ProtocolStruct, kw_only=True, frozen=True):
    """The authentication challenge blocking a tool call has been resolved (the client pushed a token via `authenticate` and the host validated it). Transitions the tool call from `auth-required` back to `running`, preserving the fields it had before pausing."""

    #: Turn identifier
    turn_id: str = msgspec.field(name='turnId')
    #: Tool call identifier
    tool_call_id: str = msgspec.field(name='toolCallId')
    #: Additional provider-specific metadata for this tool call.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    type: Literal['chat/toolCallAuthResolved'] = 'chat/toolCallAuthResolved'


class ChatToolCallCompleteAction(ProtocolStruct, kw_only=True, frozen=True):
    """Tool execution finished. Transitions to `completed` or `pending-result-confirmation` if `requiresResultConfirmation` is `true`."""

    #: Turn identifier
    turn_id: str = msgspec.field(name='turnId')
    #: Tool call identifier
    tool_call_id: str = msgspec.field(name='toolCallId')
    #: Additional provider-specific metadata for this tool call.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    type: Literal['chat/toolCallComplete'] = 'chat/toolCallComplete'
    #: Execution result
    result: ToolCallResult
    #: If true, the result requires client approval before finalizing
    requires_result_confirmation: bool | UnsetType = msgspec.field(name='requiresResultConfirmation', default=UNSET)


class ChatToolCallContentChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Partial content produced while a tool is still executing."""

    #: Turn identifier
    turn_id: str = msgspec.field(name='turnId')
    #: Tool call identifier
    tool_call_id: str = msgspec.field(name='toolCallId')
    #: Additional provider-specific metadata for this tool call.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    type: Literal['chat/toolCallContentChanged'] = 'chat/toolCallContentChanged'
    #: The current partial content for the running tool call
    content: tuple[ToolResultContent, ...]


class ChatToolCallDeltaAction(ProtocolStruct, kw_only=True, frozen=True):
    """Streaming partial parameters for a tool call."""

    #: Turn identifier
    turn_id: str = msgspec.field(name='turnId')
    #: Tool call identifier
    tool_call_id: str = msgspec.field(name='toolCallId')
    #: Additional provider-specific metadata for this tool call.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    type: Literal['chat/toolCallDelta'] = 'chat/toolCallDelta'
    #: Partial parameter content to append
    content: str
    #: Updated progress message
    invocation_message: StringOrMarkdown | UnsetType = msgspec.field(name='invocationMessage', default=UNSET)


class ChatToolCallDeniedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Client denies a pending tool call. The tool transitions to `cancelled`."""

    #: Turn identifier
    turn_id: str = msgspec.field(name='turnId')
    #: Tool call identifier
    tool_call_id: str = msgspec.field(name='toolCallId')
    #: Additional provider-specific metadata for this tool call.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    type: Literal['chat/toolCallConfirmed'] = 'chat/toolCallConfirmed'
    approved: Literal[False] = False
    #: Why the tool was cancelled
    reason: str
    #: What the user suggested doing instead
    user_suggestion: Message | UnsetType = msgspec.field(name='userSuggestion', default=UNSET)
    #: Optional explanation for the denial
    reason_message: StringOrMarkdown | UnsetType = msgspec.field(name='reasonMessage', default=UNSET)
    #: ID of the selected confirmation option, if the server provided options
    selected_option_id: str | UnsetType = msgspec.field(name='selectedOptionId', default=UNSET)


class ChatToolCallReadyAction(ProtocolStruct, kw_only=True, frozen=True):
    """Tool call parameters are complete, or a running tool requires re-confirmation."""

    #: Turn identifier
    turn_id: str = msgspec.field(name='turnId')
    #: Tool call identifier
    tool_call_id: str = msgspec.field(name='toolCallId')
    #: Additional provider-specific metadata for this tool call.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    type: Literal['chat/toolCallReady'] = 'chat/toolCallReady'
    #: Message describing what the tool will do or what confirmation is needed
    invocation_message: StringOrMarkdown = msgspec.field(name='invocationMessage')
    #: Raw tool input
    tool_input: str | UnsetType = msgspec.field(name='toolInput', default=UNSET)
    #: Short title for the confirmation prompt (e.g. `'Run in terminal'`, `'Write file'`)
    confirmation_title: StringOrMarkdown | UnsetType = msgspec.field(name='confirmationTitle', default=UNSET)
    #: Risk assessment that informed the confirmation requirement.
    risk_assessment: ToolCallRiskAssessment | UnsetType = msgspec.field(name='riskAssessment', default=UNSET)
    #: File edits that this tool call will perform, for preview before confirmation
    edits: ToolCallEdits | UnsetType = UNSET
    #: Whether the agent host allows the client to edit the tool's input parameters before confirming
    editable: bool | UnsetType = UNSET
    #: If set, the tool was auto-confirmed and transitions directly to `running`
    confirmed: str | UnsetType = UNSET
    #: Options the server offers for this confirmation. When present, the client SHOULD render these instead of a plain approve/deny UI. Each option belongs to a ConfirmationOptionGroup s
    options: tuple[ConfirmationOption, ...] | UnsetType = UNSET


class ChatToolCallResultConfirmedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Client approves or denies a tool's result."""

    #: Turn identifier
    turn_id: str = msgspec.field(name='turnId')
    #: Tool call identifier
    tool_call_id: str = msgspec.field(name='toolCallId')
    #: Additional provider-specific metadata for this tool call.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    type: Literal['chat/toolCallResultConfirmed'] = 'chat/toolCallResultConfirmed'
    #: Whether the result was approved
    approved: bool


class ChatToolCallStartAction(ProtocolStruct, kw_only=True, frozen=True):
    """A tool call begins — parameters are streaming from the LM."""

    #: Turn identifier
    turn_id: str = msgspec.field(name='turnId')
    #: Tool call identifier
    tool_call_id: str = msgspec.field(name='toolCallId')
    #: Additional provider-specific metadata for this tool call.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    type: Literal['chat/toolCallStart'] = 'chat/toolCallStart'
    #: Internal tool name (for debugging/logging)
    tool_name: str = msgspec.field(name='toolName')
    #: Human-readable tool name
    display_name: str = msgspec.field(name='displayName')
    #: Human-readable description of what the tool invocation intends to do
    intention: str | UnsetType = UNSET
    #: Reference to the contributor of the tool being called. Absent for server-side tools that are not contributed by a client or MCP server.
    contributor: ToolCallContributor | UnsetType = UNSET


class ChatTruncatedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Truncates a session's history. If `turnId` is provided, all turns after that turn are removed and the specified turn is kept. If `turnId` is omitted, all turns are removed."""

    type: Literal['chat/truncated'] = 'chat/truncated'
    #: Keep turns up to and including this turn. Omit to clear all turns.
    turn_id: str | UnsetType = msgspec.field(name='turnId', default=UNSET)


class ChatTurnCancelledAction(ProtocolStruct, kw_only=True, frozen=True):
    """Turn was aborted; server stops processing."""

    type: Literal['chat/turnCancelled'] = 'chat/turnCancelled'
    #: Turn identifier
    turn_id: str = msgspec.field(name='turnId')
    #: Elapsed turn duration in milliseconds, measured by the producer's own clock. Clients MUST NOT derive this by subtracting timestamps — cross- client clocks may differ — and MUST tre
    duration: int | float
    #: Additional provider-specific metadata for this action.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class ChatTurnCompleteAction(ProtocolStruct, kw_only=True, frozen=True):
    """Turn finished — the assistant is idle."""

    type: Literal['chat/turnComplete'] = 'chat/turnComplete'
    #: Turn identifier
    turn_id: str = msgspec.field(name='turnId')
    #: Elapsed turn duration in milliseconds, measured by the producer's own clock. Clients MUST NOT derive this by subtracting timestamps — cross- client clocks may differ — and MUST tre
    duration: int | float
    #: Additional provider-specific metadata for this action.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class ChatTurnStartedAction(ProtocolStruct, kw_only=True, frozen=True):
    """A new message has been sent to the agent, and a new turn starts."""

    type: Literal['chat/turnStarted'] = 'chat/turnStarted'
    #: Turn identifier
    turn_id: str = msgspec.field(name='turnId')
    #: ISO 8601 timestamp when this turn started.
    started_at: str = msgspec.field(name='startedAt')
    #: The new message
    message: Message
    #: If this turn was auto-started from a queued message, the ID of that message
    queued_message_id: str | UnsetType = msgspec.field(name='queuedMessageId', default=UNSET)
    #: Additional provider-specific metadata for this action.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class ChatTurnsLoadedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Loads older completed turns into this chat's state."""

    type: Literal['chat/turnsLoaded'] = 'chat/turnsLoaded'
    #: Older completed turns loaded into the state, ordered oldest-first.
    turns: tuple[Turn, ...]
    #: Opaque cursor for loading the next older page, if one remains.
    turns_next_cursor: str | UnsetType | None = msgspec.field(name='turnsNextCursor', default=UNSET)


class ChatUsageAction(ProtocolStruct, kw_only=True, frozen=True):
    """Token usage report for a turn."""

    type: Literal['chat/usage'] = 'chat/usage'
    #: Turn identifier
    turn_id: str = msgspec.field(name='turnId')
    #: Token usage data
    usage: UsageInfo
    #: Additional provider-specific metadata for this action.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class ChatWorkingDirectoryRemovedAction(ProtocolStruct, kw_only=True, frozen=True):
    """A working directory was removed from this chat's ChatState.workingDirectories subset."""

    type: Literal['chat/workingDirectoryRemoved'] = 'chat/workingDirectoryRemoved'
    #: The working directory to remove from this chat's subset.
    directory: URI


class ChatWorkingDirectorySetAction(ProtocolStruct, kw_only=True, frozen=True):
    """A working directory was added to this chat's ChatState.workingDirectories subset."""

    type: Literal['chat/workingDirectorySet'] = 'chat/workingDirectorySet'
    #: The working directory to add to this chat's subset.
    directory: URI


class ChildCustomizationBase(ProtocolStruct, kw_only=True, frozen=True):
    """Fields shared by the leaf child customizations that live inside a container — AgentCustomization, SkillCustomization, PromptCustomization, RuleCustomization, and HookCustomization."""

    #: Session-unique opaque identifier. Used by every action that targets a specific customization. Minted by whoever publishes the customization (typically the agent host).
    id: str
    #: Source URI for this customization. A plugin URL, a file URI, or a directory URI.
    uri: URI
    #: Human-readable name.
    name: str
    #: Icons for UI display.
    icons: tuple[Icon, ...] | UnsetType = UNSET
    #: Optional span within `uri` when this customization is a subset of a larger file (for example, one entry in an inline `mcpServers` block of a `plugins.json` manifest). Absent when t
    range: TextRange | UnsetType = UNSET
    #: Additional provider-specific metadata for this customization.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    #: Whether this child is individually enabled. Absent means enabled, so a producer only needs to set it to surface a child that exists but is turned off on its own.
    enabled: bool | UnsetType = UNSET


class ClientCapabilities(ProtocolStruct, kw_only=True, frozen=True):
    """Optional capabilities a client declares during `initialize`."""

    #: Client can render [MCP Apps](https://github.com/modelcontextprotocol/ext-apps) — i.e. it can host the View sandbox, run the `ui/*` protocol against it, and forward `mcp://`-channel
    mcp_apps: dict[str, Any] | UnsetType = msgspec.field(name='mcpApps', default=UNSET)


class ClientPluginCustomization(ProtocolStruct, kw_only=True, frozen=True):
    """A PluginCustomization as published by a client. Extends the server-facing shape with an opaque `nonce` so the host can detect when the client's view of a plugin has changed and re-parse only as needed."""

    #: Session-unique opaque identifier. Used by every action that targets a specific customization. Minted by whoever publishes the customization (typically the agent host).
    id: str
    #: Source URI for this customization. A plugin URL, a file URI, or a directory URI.
    uri: URI
    #: Human-readable name.
    name: str
    #: Icons for UI display.
    icons: tuple[Icon, ...] | UnsetType = UNSET
    #: Optional span within `uri` when this customization is a subset of a larger file (for example, one entry in an inline `mcpServers` block of a `plugins.json` manifest). Absent when t
    range: TextRange | UnsetType = UNSET
    #: Additional provider-specific metadata for this customization.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    #: Whether this container is currently enabled.
    enabled: bool
    #: `clientId` of the client that contributed this container. Absent for server-originated entries.
    client_id: str | UnsetType = msgspec.field(name='clientId', default=UNSET)
    #: Host-reported load state. Absent means the host has not yet reported a load state for this container.
    load: CustomizationLoadState | UnsetType = UNSET
    #: Children discovered inside this container.
    children: tuple[ChildCustomization, ...] | UnsetType = UNSET
    type: Literal['plugin'] = 'plugin'
    #: Version of the plugin, sourced from the [Open Plugins](https://open-plugins.com/) manifest's optional `version` field (semver, e.g. `'1.2.0'`). Absent when the manifest declares no
    version: str | UnsetType = UNSET
    #: Opaque version token used by the host to detect changes.
    nonce: str | UnsetType = UNSET


class CompletionItem(ProtocolStruct, kw_only=True, frozen=True):
    """A single completion item returned by the `completions` command."""

    #: The text inserted into the input when this item is accepted.
    insert_text: str = msgspec.field(name='insertText')
    #: If defined, the start of the range in the input's `text` that is replaced by `insertText`. The range is the half-open interval `[rangeStart, rangeEnd)` of character offsets, measur
    range_start: int | float | UnsetType = msgspec.field(name='rangeStart', default=UNSET)
    #: The end of the range in the input's `text` that is replaced by `insertText`. See rangeStart.
    range_end: int | float | UnsetType = msgspec.field(name='rangeEnd', default=UNSET)
    #: The attachment associated with this completion item.
    attachment: MessageAttachment


class CompletionsParams(ProtocolStruct, kw_only=True, frozen=True):
    """Requests completion items for a partially-typed input (e.g. a user message the user is currently composing). Used to power `@`-mention pickers, file/symbol references, and similar inline-completion experiences."""

    #: The chat URI the completion is being requested for.
    channel: URI
    #: What kind of completion is being requested.
    kind: str
    #: The complete text of the input being completed (e.g. the full user message text typed so far).
    text: str
    #: The character offset within `text` at which the completion is requested, measured in UTF-16 code units. MUST satisfy `0 <= offset <= text.length`.
    offset: int | float


class CompletionsResult(ProtocolStruct, kw_only=True, frozen=True):
    """Result of the `completions` command."""

    #: The completion items, in the order the server suggests displaying them.
    items: tuple[CompletionItem, ...]


class ConfigPropertySchema(ProtocolStruct, kw_only=True, frozen=True):
    """A JSON Schema-compatible property descriptor with display extensions."""

    #: JSON Schema: property type
    type: str
    #: JSON Schema: human-readable label for the property
    title: str
    #: JSON Schema: description / tooltip
    description: str | UnsetType = UNSET
    #: JSON Schema: default value
    default: Any | UnsetType = UNSET
    #: JSON Schema: allowed values. May be primitives of any JSON type.
    enum: tuple[JsonPrimitive, ...] | UnsetType = UNSET
    #: Display extension: human-readable label per enum value (parallel array)
    enum_labels: tuple[str, ...] | UnsetType = msgspec.field(name='enumLabels', default=UNSET)
    #: Display extension: description per enum value (parallel array)
    enum_descriptions: tuple[str, ...] | UnsetType = msgspec.field(name='enumDescriptions', default=UNSET)
    #: JSON Schema: when `true`, the property is displayed but cannot be modified by the user
    read_only: bool | UnsetType = msgspec.field(name='readOnly', default=UNSET)
    #: JSON Schema: schema for array items (used when `type` is `'array'`)
    items: ConfigPropertySchema | UnsetType = UNSET
    #: JSON Schema: property descriptors for object properties (used when `type` is `'object'`)
    properties: dict[str, ConfigPropertySchema] | UnsetType = UNSET
    #: JSON Schema: list of required property ids (used when `type` is `'object'`)
    required: tuple[str, ...] | UnsetType = UNSET
    #: JSON Schema: schema for additional properties not listed in `properties` (used when `type` is `'object'`).
    additional_properties: ConfigPropertySchema | UnsetType = msgspec.field(name='additionalProperties', default=UNSET)


class ConfigSchema(ProtocolStruct, kw_only=True, frozen=True):
    """A JSON Schema object describing available configuration properties."""

    #: JSON Schema: always `'object'`
    type: Literal['object'] = 'object'
    #: JSON Schema: property descriptors keyed by property id
    properties: dict[str, ConfigPropertySchema]
    #: JSON Schema: list of required property ids
    required: tuple[str, ...] | UnsetType = UNSET


class ConfirmationOption(ProtocolStruct, kw_only=True, frozen=True):
    """A confirmation option that the server offers for a tool call awaiting approval. Allows richer choices beyond simple approve/deny — for example, 'Approve in this Session' or 'Deny with reason.'"""

    #: Unique identifier for the option, returned in the confirmed action
    id: str
    #: Human-readable label displayed to the user
    label: str
    #: Whether this option represents an approval or denial
    kind: str
    #: Logical group number for visual categorisation.
    group: int | float | UnsetType = UNSET


class ContainerCustomizationBase(ProtocolStruct, kw_only=True, frozen=True):
    """Fields shared by container customizations."""

    #: Session-unique opaque identifier. Used by every action that targets a specific customization. Minted by whoever publishes the customization (typically the agent host).
    id: str
    #: Source URI for this customization. A plugin URL, a file URI, or a directory URI.
    uri: URI
    #: Human-readable name.
    name: str
    #: Icons for UI display.
    icons: tuple[Icon, ...] | UnsetType = UNSET
    #: Optional span within `uri` when this customization is a subset of a larger file (for example, one entry in an inline `mcpServers` block of a `plugins.json` manifest). Absent when t
    range: TextRange | UnsetType = UNSET
    #: Additional provider-specific metadata for this customization.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    #: Whether this container is currently enabled.
    enabled: bool
    #: `clientId` of the client that contributed this container. Absent for server-originated entries.
    client_id: str | UnsetType = msgspec.field(name='clientId', default=UNSET)
    #: Host-reported load state. Absent means the host has not yet reported a load state for this container.
    load: CustomizationLoadState | UnsetType = UNSET
    #: Children discovered inside this container.
    children: tuple[ChildCustomization, ...] | UnsetType = UNSET


class ContentRef(ProtocolStruct, kw_only=True, frozen=True):
    """A reference to large content stored outside the state tree."""

    #: Content URI
    uri: URI
    #: Approximate size in bytes
    size_hint: int | float | UnsetType = msgspec.field(name='sizeHint', default=UNSET)
    #: Content MIME type
    content_type: str | UnsetType = msgspec.field(name='contentType', default=UNSET)
    #: Content nonce
    nonce: str | UnsetType = UNSET


class CreateChatParams(ProtocolStruct, kw_only=True, frozen=True):
    """Creates a new chat within a session."""

    #: Session URI containing the new chat.
    channel: URI
    #: Chat URI (client-chosen, e.g. `ahp-chat:/<uuid>`).
    chat: URI
    #: Optional initial message for the new chat.
    initial_message: Message | UnsetType = msgspec.field(name='initialMessage', default=UNSET)
    #: Optional source chat and source turn.
    source: ChatSource | UnsetType = UNSET
    #: Initial working-directory subset for this chat. Every entry MUST be present in the owning session's `workingDirectories`; the server MUST reject any entry that is not. When absent,
    working_directories: tuple[URI, ...] | UnsetType = msgspec.field(name='workingDirectories', default=UNSET)
    #: The chat's primary working directory — the distinguished root this chat is centered on. When set, it MUST be one of the chat's effective working directories (workingDirectories, or
    primary_working_directory: URI | UnsetType = msgspec.field(name='primaryWorkingDirectory', default=UNSET)


class CreateResourceWatchParams(ProtocolStruct, kw_only=True, frozen=True):
    """Creates a resource watcher on the receiver's filesystem."""

    channel: str
    #: URI to watch.
    uri: URI
    #: If `true`, the receiver MUST report changes for descendants of `uri`. If `false` (default), only changes to `uri` itself — and, when `uri` is a directory, its direct children — are
    recursive: bool | UnsetType = UNSET
    #: Glob patterns or paths relative to `uri` to exclude from reporting. Wrapped in `{ items }` for forward compatibility.
    excludes: PatternList | UnsetType = UNSET
    #: Glob patterns or paths relative to `uri` to restrict reporting to. Omit to report every change under `uri` subject to `excludes`. Wrapped in `{ items }` for forward compatibility.
    includes: PatternList | UnsetType = UNSET


class CreateResourceWatchResult(ProtocolStruct, kw_only=True, frozen=True):
    """Result of the `createResourceWatch` command."""

    #: Receiver-assigned watch channel URI (`ahp-resource-watch:/<id>`). The caller subscribes to this URI to start receiving change events and unsubscribes to release the watcher.
    channel: URI


class CreateSessionParams(ProtocolStruct, kw_only=True, frozen=True):
    #: Session URI (client-chosen, e.g. `ahp-session:/<uuid>`)
    channel: URI
    #: Agent provider ID
    provider: str | UnsetType = UNSET
    #: The working directories the session's agent is granted tool access to. A session may span multiple directories; they are equal peers except when the agent advertises MultipleWorkin
    working_directories: tuple[URI, ...] | UnsetType = msgspec.field(name='workingDirectories', default=UNSET)
    #: The primary working directory for the session's **default chat**.
    primary_working_directory: URI | UnsetType = msgspec.field(name='primaryWorkingDirectory', default=UNSET)
    #: Fork from an existing session. The new session is populated with content from the source session up to and including the specified turn's response.
    fork: SessionForkSource | UnsetType = UNSET
    #: Agent-specific configuration values collected via `resolveSessionConfig`. Keys and values correspond to the schema returned by the server.
    config: dict[str, Any] | UnsetType = UNSET
    #: Eagerly claim an active client role for the new session.
    active_client: SessionActiveClient | UnsetType = msgspec.field(name='activeClient', default=UNSET)
    #: Opt-in progress token. When set, the client is offering to receive `progress` notifications (see `ProgressParams`) for any long-running work the server does to bring this session u
    progress_token: str | UnsetType = msgspec.field(name='progressToken', default=UNSET)


class CreateTerminalParams(ProtocolStruct, kw_only=True, frozen=True):
    """Creates a new terminal on the server."""

    #: Terminal URI (client-chosen).
    channel: URI
    #: Initial owner of the terminal
    claim: TerminalClaim
    #: Human-readable terminal name
    name: str | UnsetType = UNSET
    #: Initial working directory URI
    cwd: URI | UnsetType = UNSET
    #: Initial terminal width in columns
    cols: int | float | UnsetType = UNSET
    #: Initial terminal height in rows
    rows: int | float | UnsetType = UNSET


class CustomizationBase(ProtocolStruct, kw_only=True, frozen=True):
    """Fields shared by every customization variant."""

    #: Session-unique opaque identifier. Used by every action that targets a specific customization. Minted by whoever publishes the customization (typically the agent host).
    id: str
    #: Source URI for this customization. A plugin URL, a file URI, or a directory URI.
    uri: URI
    #: Human-readable name.
    name: str
    #: Icons for UI display.
    icons: tuple[Icon, ...] | UnsetType = UNSET
    #: Optional span within `uri` when this customization is a subset of a larger file (for example, one entry in an inline `mcpServers` block of a `plugins.json` manifest). Absent when t
    range: TextRange | UnsetType = UNSET
    #: Additional provider-specific metadata for this customization.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class CustomizationDegradedState(ProtocolStruct, kw_only=True, frozen=True):
    """Container partially loaded but has warnings."""

    kind: Literal['degraded'] = 'degraded'
    #: Human-readable description of the warning.
    message: str


class CustomizationErrorState(ProtocolStruct, kw_only=True, frozen=True):
    """Container failed to load."""

    kind: Literal['error'] = 'error'
    #: Human-readable error message.
    message: str


class CustomizationLoadedState(ProtocolStruct, kw_only=True, frozen=True):
    """Container loaded successfully."""

    kind: Literal['loaded'] = 'loaded'


class CustomizationLoadingState(ProtocolStruct, kw_only=True, frozen=True):
    """Container is being loaded by the host."""

    kind: Literal['loading'] = 'loading'


class DirectoryCustomization(ProtocolStruct, kw_only=True, frozen=True):
    """A directory the host watches for this session."""

    #: Session-unique opaque identifier. Used by every action that targets a specific customization. Minted by whoever publishes the customization (typically the agent host).
    id: str
    #: Source URI for this customization. A plugin URL, a file URI, or a directory URI.
    uri: URI
    #: Human-readable name.
    name: str
    #: Icons for UI display.
    icons: tuple[Icon, ...] | UnsetType = UNSET
    #: Optional span within `uri` when this customization is a subset of a larger file (for example, one entry in an inline `mcpServers` block of a `plugins.json` manifest). Absent when t
    range: TextRange | UnsetType = UNSET
    #: Additional provider-specific metadata for this customization.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    #: Whether this container is currently enabled.
    enabled: bool
    #: `clientId` of the client that contributed this container. Absent for server-originated entries.
    client_id: str | UnsetType = msgspec.field(name='clientId', default=UNSET)
    #: Host-reported load state. Absent means the host has not yet reported a load state for this container.
    load: CustomizationLoadState | UnsetType = UNSET
    #: Children discovered inside this container.
    children: tuple[ChildCustomization, ...] | UnsetType = UNSET
    type: Literal['directory'] = 'directory'
    #: Which child customization type this directory holds.
    contents: str
    #: Whether clients may write into this directory.
    writable: bool


class DirectoryEntry(ProtocolStruct, kw_only=True, frozen=True):
    """Directory entry returned by `resourceList`."""

    #: Base name of the entry
    name: str
    #: Whether the entry is a file or directory
    type: str


class DispatchActionParams(ProtocolStruct, kw_only=True, frozen=True):
    """Fire-and-forget action dispatch (write-ahead). The client applies actions optimistically to local state and the server echoes them back as an ActionEnvelope once accepted."""

    #: Channel URI this action targets
    channel: URI
    #: Client sequence number
    client_seq: int = msgspec.field(name='clientSeq')
    #: The action to dispatch
    action: StateAction


class DisposeChatParams(ProtocolStruct, kw_only=True, frozen=True):
    """Disposes a chat and cleans up server-side resources."""

    #: Channel URI this command targets.
    channel: URI


class DisposeSessionParams(ProtocolStruct, kw_only=True, frozen=True):
    """Disposes a session and cleans up server-side resources."""

    #: Channel URI this command targets.
    channel: URI


class DisposeTerminalParams(ProtocolStruct, kw_only=True, frozen=True):
    """Disposes a terminal and kills its process if still running."""

    #: Channel URI this command targets.
    channel: URI


class ErrorInfo(ProtocolStruct, kw_only=True, frozen=True):
    #: Error type identifier
    error_type: str = msgspec.field(name='errorType')
    #: Human-readable error message
    message: str
    #: Stack trace
    stack: str | UnsetType = UNSET
    #: Additional provider-specific metadata for this error. Clients MAY look for well-known optional keys here to provide enhanced UI (e.g. a structured chat fetch error for richer, loca
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class FetchTurnsParams(ProtocolStruct, kw_only=True, frozen=True):
    """Requests that the host load older historical turns into a chat state."""

    #: Chat URI
    channel: URI
    #: Opaque cursor from `ChatState.turnsNextCursor`.
    cursor: str | UnsetType = UNSET


class FetchTurnsResult(ProtocolStruct, kw_only=True, frozen=True):
    """Result of the `fetchTurns` command."""

    pass


class FileEdit(ProtocolStruct, kw_only=True, frozen=True):
    """Describes a file modification with before/after state and diff metadata."""

    #: The file state before the edit. Absent for file creations or for in-place file edits.
    before: FileEditSide | UnsetType = UNSET
    #: The file state after the edit. Absent for file deletions.
    after: FileEditSide | UnsetType = UNSET
    #: Optional diff display metadata
    diff: FileEditDiff | UnsetType = UNSET


class FileEditDiff(ProtocolStruct, kw_only=True, frozen=True):
    """Optional diff display metadata"""

    added: int | float | UnsetType = UNSET
    removed: int | float | UnsetType = UNSET


class FileEditSide(ProtocolStruct, kw_only=True, frozen=True):
    """The file state before the edit. Absent for file creations or for in-place file edits."""

    uri: URI
    content: ContentRef


class ForkChatSource(ProtocolStruct, kw_only=True, frozen=True):
    """Copies source history through a completed turn into the new chat."""

    #: Discriminant
    kind: Literal['fork'] = 'fork'
    #: URI of the existing source chat.
    chat: URI
    #: Completed turn identifier in the source chat.
    turn_id: str = msgspec.field(name='turnId')


class HookCustomization(ProtocolStruct, kw_only=True, frozen=True):
    """A hook manifest contributed by a plugin or directory."""

    #: Session-unique opaque identifier. Used by every action that targets a specific customization. Minted by whoever publishes the customization (typically the agent host).
    id: str
    #: Source URI for this customization. A plugin URL, a file URI, or a directory URI.
    uri: URI
    #: Human-readable name.
    name: str
    #: Icons for UI display.
    icons: tuple[Icon, ...] | UnsetType = UNSET
    #: Optional span within `uri` when this customization is a subset of a larger file (for example, one entry in an inline `mcpServers` block of a `plugins.json` manifest). Absent when t
    range: TextRange | UnsetType = UNSET
    #: Additional provider-specific metadata for this customization.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    #: Whether this child is individually enabled. Absent means enabled, so a producer only needs to set it to surface a child that exists but is turned off on its own.
    enabled: bool | UnsetType = UNSET
    type: Literal['hook'] = 'hook'


class Icon(ProtocolStruct, kw_only=True, frozen=True):
    """An optionally-sized icon that can be displayed in a user interface."""

    #: A standard URI pointing to an icon resource. May be an HTTP/HTTPS URL or a `data:` URI with Base64-encoded image data.
    src: URI
    #: Optional MIME type override if the source MIME type is missing or generic. For example: `'image/png'`, `'image/jpeg'`, or `'image/svg+xml'`.
    content_type: str | UnsetType = msgspec.field(name='contentType', default=UNSET)
    #: Optional array of strings that specify sizes at which the icon can be used. Each string should be in WxH format (e.g., `'48x48'`, `'96x96'`) or `'any'` for scalable formats like SV
    sizes: tuple[str, ...] | UnsetType = UNSET
    #: Optional specifier for the theme this icon is designed for. `'light'` indicates the icon is designed to be used with a light background, and `'dark'` indicates the icon is designed
    theme: str | UnsetType = UNSET


class Implementation(ProtocolStruct, kw_only=True, frozen=True):
    """Identifies a protocol implementation — the software (and build) on one end of the connection, as distinct from the agent persona it hosts. Carried as `clientInfo` on the client side and `serverInfo` on the server side, mirroring LSP's `clientInfo`/`serverInfo` and MCP's `Implementation`."""

    #: Implementation name, e.g. a product or package identifier.
    name: str
    #: Implementation version. A [SemVer](https://semver.org) string is recommended but not required.
    version: str | UnsetType = UNSET
    #: Optional human-readable display name.
    title: str | UnsetType = UNSET


class InitializeParams(ProtocolStruct, kw_only=True, frozen=True):
    """Establishes a new connection and negotiates the protocol version. This MUST be the first message sent by the client."""

    channel: str
    #: Protocol versions the client is willing to speak, ordered from most preferred to least preferred. Each entry is a [SemVer](https://semver.org) `MAJOR.MINOR.PATCH` string (e.g. `'0.
    protocol_versions: tuple[str, ...] = msgspec.field(name='protocolVersions')
    #: Unique client identifier
    client_id: str = msgspec.field(name='clientId')
    #: Optional identity of the client implementation (name and version). Informational only — see Implementation for how it may and may not be used. Distinct from `clientId`, which is an
    client_info: Implementation | UnsetType = msgspec.field(name='clientInfo', default=UNSET)
    #: URIs to subscribe to during handshake
    initial_subscriptions: tuple[URI, ...] | UnsetType = msgspec.field(name='initialSubscriptions', default=UNSET)
    #: IETF BCP 47 language tag indicating the client's preferred locale (e.g. `'en-US'`, `'ja'`). The server SHOULD use this to localise user-facing strings such as confirmation option l
    locale: str | UnsetType = UNSET
    #: Optional client capability declarations.
    capabilities: ClientCapabilities | UnsetType = UNSET


class InitializeResult(ProtocolStruct, kw_only=True, frozen=True):
    """Result of the `initialize` command."""

    #: Protocol version selected by the server. MUST be one of the entries in `InitializeParams.protocolVersions`. Formatted as a [SemVer](https://semver.org) `MAJOR.MINOR.PATCH` string (
    protocol_version: str = msgspec.field(name='protocolVersion')
    #: Current server sequence number
    server_seq: int = msgspec.field(name='serverSeq')
    #: Optional identity of the server implementation (name and version). Informational only — see Implementation for how it may and may not be used. Whereas `protocolVersion` identifies
    server_info: Implementation | UnsetType = msgspec.field(name='serverInfo', default=UNSET)
    #: Snapshots for each `initialSubscriptions` URI
    snapshots: tuple[Snapshot, ...]
    #: Suggested default directory for remote filesystem browsing
    default_directory: URI | UnsetType = msgspec.field(name='defaultDirectory', default=UNSET)
    #: Characters that, when typed in a Message input, SHOULD cause the client to issue a `completions` request with CompletionItemKind.UserMessage. Typically includes characters like `'@
    completion_trigger_characters: tuple[str, ...] | UnsetType = msgspec.field(name='completionTriggerCharacters', default=UNSET)
    #: Prefix that the host recognizes at the start of a user Message.text as a shorthand for executing the remainder as a terminal command. Currently the standardized convention is `'!'`
    terminal_command_prefix: str | UnsetType = msgspec.field(name='terminalCommandPrefix', default=UNSET)
    #: OTLP telemetry channels the host emits, if any. Each populated field is either a literal `ahp-otlp:` channel URI or an RFC 6570 URI template a client expands before subscribing (cu
    telemetry: TelemetryCapabilities | UnsetType = UNSET


class InputRequestResponsePart(ProtocolStruct, kw_only=True, frozen=True):
    """A live or resolved input request (elicitation) in the turn response stream."""

    #: Discriminant
    kind: Literal['inputRequest'] = 'inputRequest'
    #: The request, carrying its `id`, `message`, `url`, `questions`, and current draft or submitted `answers`.
    request: ChatInputRequest
    #: How the request was resolved. Absent until a client submits `accept`, `decline`, or `cancel` with `chat/inputCompleted`.
    response: str | UnsetType = UNSET


class InvokeChangesetOperationParams(ProtocolStruct, kw_only=True, frozen=True):
    """Invokes a server-defined ChangesetOperation against a changeset, a single file, or a line range."""

    #: The expanded changeset URI.
    channel: URI
    #: Matches ChangesetOperation.id from the changeset's `operations` list.
    operation_id: str = msgspec.field(name='operationId')
    #: Target of the operation. Required iff the chosen scope is `'resource'` or `'range'`. Omit for changeset-scoped operations.
    target: ChangesetOperationTarget | UnsetType = UNSET


class InvokeChangesetOperationResult(ProtocolStruct, kw_only=True, frozen=True):
    """Result of the `invokeChangesetOperation` command."""

    #: Optional human-readable message describing the result.
    message: StringOrMarkdown | UnsetType = UNSET
    #: Optional follow-up: a URI to open (e.g. a PR), a content ref, etc.
    follow_up: ChangesetOperationFollowUp | UnsetType = msgspec.field(name='followUp', default=UNSET)


class ListChangedCapability(ProtocolStruct, kw_only=True, frozen=True):
    """Producer proxies the MCP `tools/*` methods to the upstream server."""

    list_changed: bool | UnsetType = msgspec.field(name='listChanged', default=UNSET)


class ListSessionsParams(ProtocolStruct, kw_only=True, frozen=True):
    """Returns a list of session summaries. Used to populate session lists and sidebars."""

    channel: str
    #: Maximum number of entries to return in this page. The server SHOULD respect this bound but MAY return fewer entries and MAY impose its own upper cap. Omit to let the server choose
    limit: int | float | UnsetType = UNSET
    #: Opaque pagination cursor from a previous PaginatedResult.nextCursor. Omit to fetch the first page. Cursors are server-defined and MUST be treated as opaque — do not parse, modify,
    cursor: str | UnsetType = UNSET


class ListSessionsResult(ProtocolStruct, kw_only=True, frozen=True):
    """Result of the `listSessions` command."""

    #: Opaque cursor for the next page. Present when more entries exist beyond the returned page; absent signals the end of the collection. Pass it back as PaginatedParams.cursor to fetch
    next_cursor: str | UnsetType = msgspec.field(name='nextCursor', default=UNSET)
    #: The list of session summaries. The server SHOULD order them most-recently-modified first.
    items: tuple[SessionSummary, ...]


class MarkdownResponsePart(ProtocolStruct, kw_only=True, frozen=True):
    #: Discriminant
    kind: Literal['markdown'] = 'markdown'
    #: Part identifier, used by `chat/delta` to target this part for content appends
    id: str
    #: Markdown content
    content: str


class MarkdownString(ProtocolStruct, kw_only=True, frozen=True):
    """The object form of StringOrMarkdown: rendered with Markdown formatting."""

    markdown: str


class McpAuthRequirement(ProtocolStruct, kw_only=True, frozen=True):
    """Reusable MCP authentication challenge — the RFC 9728 discovery info a client needs to obtain a token and push it via the `authenticate` command. Deliberately carries **no token**: this describes what is being asked for, never the ****** itself."""

    #: Why authentication is required.
    reason: str
    #: Pre-registered OAuth client to use for authorization. When present, clients MUST use these credentials instead of dynamic client registration.
    oauth_client: McpOAuthClient | UnsetType = msgspec.field(name='oauthClient', default=UNSET)
    #: RFC 9728 Protected Resource Metadata. The `resource` field is the canonical MCP server URI per RFC 8707, used as the OAuth `resource` indicator. `authorization_servers` is REQUIRED
    resource: ProtectedResourceMetadata
    #: Scopes required for the current challenge, parsed from the `WWW-Authenticate: ******'…'` header (or `scopes_supported` fallback). Authoritative for the next authorization request —
    required_scopes: tuple[str, ...] | UnsetType = msgspec.field(name='requiredScopes', default=UNSET)
    #: Human-readable hint, typically from the OAuth `error_description`.
    description: str | UnsetType = UNSET


class McpOAuthClient(ProtocolStruct, kw_only=True, frozen=True):
    """A pre-registered OAuth client that clients use instead of dynamic client registration when resolving an MCP authentication challenge."""

    #: OAuth client identifier registered with the authorization server.
    client_id: str = msgspec.field(name='clientId')
    #: OAuth client secret for a confidential client. Absence means the client is public and uses a secretless flow such as authorization code with PKCE.
    client_secret: str | UnsetType = msgspec.field(name='clientSecret', default=UNSET)


class McpServerAuthRequiredState(ProtocolStruct, kw_only=True, frozen=True):
    """Server is reachable but cannot serve requests until the client authenticates. Mirrors the discovery flow defined by [RFC 9728](https://datatracker.ietf.org/doc/html/rfc9728) (Protected Resource Metadata) and the OAuth 2.1 / RFC 6750 challenge semantics required by the MCP authorization spec."""

    #: Why authentication is required.
    reason: str
    #: Pre-registered OAuth client to use for authorization. When present, clients MUST use these credentials instead of dynamic client registration.
    oauth_client: McpOAuthClient | UnsetType = msgspec.field(name='oauthClient', default=UNSET)
    #: RFC 9728 Protected Resource Metadata. The `resource` field is the canonical MCP server URI per RFC 8707, used as the OAuth `resource` indicator. `authorization_servers` is REQUIRED
    resource: ProtectedResourceMetadata
    #: Scopes required for the current challenge, parsed from the `WWW-Authenticate: ******'…'` header (or `scopes_supported` fallback). Authoritative for the next authorization request —
    required_scopes: tuple[str, ...] | UnsetType = msgspec.field(name='requiredScopes', default=UNSET)
    #: Human-readable hint, typically from the OAuth `error_description`.
    description: str | UnsetType = UNSET
    kind: Literal['authRequired'] = 'authRequired'


class McpServerCustomization(ProtocolStruct, kw_only=True, frozen=True):
    """An MCP server contributed by a plugin or directory."""

    #: Session-unique opaque identifier. Used by every action that targets a specific customization. Minted by whoever publishes the customization (typically the agent host).
    id: str
    #: Source URI for this customization. A plugin URL, a file URI, or a directory URI.
    uri: URI
    #: Human-readable name.
    name: str
    #: Icons for UI display.
    icons: tuple[Icon, ...] | UnsetType = UNSET
    #: Optional span within `uri` when this customization is a subset of a larger file (for example, one entry in an inline `mcpServers` block of a `plugins.json` manifest). Absent when t
    range: TextRange | UnsetType = UNSET
    #: Additional provider-specific metadata for this customization.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    type: Literal['mcpServer'] = 'mcpServer'
    #: Whether this MCP server is currently enabled.
    enabled: bool
    #: Current lifecycle state of the MCP server.
    state: McpServerState
    #: An `mcp://`-protocol channel the client uses to side-channel traffic into the upstream MCP server itself. The channel is NOT a fresh raw MCP connection: it piggybacks on the AHP tr
    channel: URI | UnsetType = UNSET
    #: MCP App support. This property SHOULD be advertised for MCP servers which support apps.
    mcp_app: McpServerCustomizationApps | UnsetType = msgspec.field(name='mcpApp', default=UNSET)


class McpServerCustomizationApps(ProtocolStruct, kw_only=True, frozen=True):
    """Information from the agent host needed to render MCP Apps served by this MCP server."""

    #: The subset of MCP App [`HostCapabilities`](https://github.com/modelcontextprotocol/ext-apps/blob/main/specification/draft/apps.mdx) the AHP host can satisfy for Views backed by thi
    capabilities: AhpMcpUiHostCapabilities


class McpServerErrorState(ProtocolStruct, kw_only=True, frozen=True):
    """Server failed to start, crashed, or otherwise transitioned to a non-recoverable error. Use McpServerStatus.AuthRequired for authentication failures."""

    kind: Literal['error'] = 'error'
    #: Error details.
    error: ErrorInfo


class McpServerReadyState(ProtocolStruct, kw_only=True, frozen=True):
    """Server is running and serving requests."""

    kind: Literal['ready'] = 'ready'


class McpServerStartingState(ProtocolStruct, kw_only=True, frozen=True):
    """Server is registered with the host but has not yet started."""

    kind: Literal['starting'] = 'starting'


class McpServerStoppedState(ProtocolStruct, kw_only=True, frozen=True):
    """Server has been shut down. The host MAY remove the server from the session entirely shortly after this state."""

    kind: Literal['stopped'] = 'stopped'


class Message(ProtocolStruct, kw_only=True, frozen=True):
    """A message that initiates or steers a turn. Messages can originate from the user, the agent, a tool, or be system-generated (see MessageOrigin)."""

    #: Message text
    text: str
    #: The origin of the message
    origin: MessageOrigin
    #: File/selection attachments
    attachments: tuple[MessageAttachment, ...] | UnsetType = UNSET
    #: The model this message was, or will be, sent with.
    model: ModelSelection | UnsetType = UNSET
    #: The custom agent this message was, or will be, sent with.
    agent: AgentSelection | UnsetType = UNSET
    #: Additional provider-specific metadata for this message.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class MessageAnnotationsAttachment(ProtocolStruct, kw_only=True, frozen=True):
    """An attachment that references annotations on a session's annotations channel (see AnnotationsState)."""

    #: A human-readable label for the attachment (e.g. the filename of a file attachment). Used for display in UI.
    label: str
    #: If defined, the range in Message.text that references this attachment. This is a text range, not a byte range.
    range: TextRange | UnsetType = UNSET
    #: Advisory display hint for clients rendering this attachment. Recognized values include:
    display_kind: str | UnsetType = msgspec.field(name='displayKind', default=UNSET)
    #: Additional implementation-defined metadata for the attachment.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    #: Discriminant
    type: Literal['annotations'] = 'annotations'
    #: The annotations channel URI (typically `ahp-session:/<uuid>/annotations`). Matches AnnotationsSummary.resource.
    resource: URI
    #: Specific annotation ids to reference. When omitted, the attachment references all annotations on the channel.
    annotation_ids: tuple[str, ...] | UnsetType = msgspec.field(name='annotationIds', default=UNSET)


class MessageAttachmentBase(ProtocolStruct, kw_only=True, frozen=True):
    """Common fields shared by all MessageAttachment variants."""

    #: A human-readable label for the attachment (e.g. the filename of a file attachment). Used for display in UI.
    label: str
    #: If defined, the range in Message.text that references this attachment. This is a text range, not a byte range.
    range: TextRange | UnsetType = UNSET
    #: Advisory display hint for clients rendering this attachment. Recognized values include:
    display_kind: str | UnsetType = msgspec.field(name='displayKind', default=UNSET)
    #: Additional implementation-defined metadata for the attachment.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class MessageChatAttachment(ProtocolStruct, kw_only=True, frozen=True):
    """An attachment that references a chat transcript through a fixed completed turn."""

    #: A human-readable label for the attachment (e.g. the filename of a file attachment). Used for display in UI.
    label: str
    #: If defined, the range in Message.text that references this attachment. This is a text range, not a byte range.
    range: TextRange | UnsetType = UNSET
    #: Advisory display hint for clients rendering this attachment. Recognized values include:
    display_kind: str | UnsetType = msgspec.field(name='displayKind', default=UNSET)
    #: Additional implementation-defined metadata for the attachment.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    #: Discriminant
    type: Literal['chat'] = 'chat'
    #: URI of the referenced chat.
    resource: URI
    #: Last completed turn included in the referenced transcript.
    end_turn: str = msgspec.field(name='endTurn')


class MessageEmbeddedResourceAttachment(ProtocolStruct, kw_only=True, frozen=True):
    """An attachment whose data is embedded inline as a base64 string."""

    #: A human-readable label for the attachment (e.g. the filename of a file attachment). Used for display in UI.
    label: str
    #: If defined, the range in Message.text that references this attachment. This is a text range, not a byte range.
    range: TextRange | UnsetType = UNSET
    #: Advisory display hint for clients rendering this attachment. Recognized values include:
    display_kind: str | UnsetType = msgspec.field(name='displayKind', default=UNSET)
    #: Additional implementation-defined metadata for the attachment.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    #: Discriminant
    type: Literal['embeddedResource'] = 'embeddedResource'
    #: Base64-encoded binary data
    data: str
    #: Content MIME type (e.g. `'image/png'`, `'application/pdf'`)
    content_type: str = msgspec.field(name='contentType')
    #: Optional selection within the attached textual resource.
    selection: TextSelection | UnsetType = UNSET


class MessageOrigin(ProtocolStruct, kw_only=True, frozen=True):
    """Identifies the origin of a Message — who produced it. For the message that initiates a turn (Turn.message), this is also the origin of the turn; for steering or queued messages it is just the origin of that message."""

    #: The kind of actor that produced the message.
    kind: str


class MessageResourceAttachment(ProtocolStruct, kw_only=True, frozen=True):
    """An attachment that references a resource by URI. The content is not delivered inline; consumers can fetch it via `resourceRead` when needed."""

    #: A human-readable label for the attachment (e.g. the filename of a file attachment). Used for display in UI.
    label: str
    #: If defined, the range in Message.text that references this attachment. This is a text range, not a byte range.
    range: TextRange | UnsetType = UNSET
    #: Advisory display hint for clients rendering this attachment. Recognized values include:
    display_kind: str | UnsetType = msgspec.field(name='displayKind', default=UNSET)
    #: Additional implementation-defined metadata for the attachment.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    #: Content URI
    uri: URI
    #: Approximate size in bytes
    size_hint: int | float | UnsetType = msgspec.field(name='sizeHint', default=UNSET)
    #: Content MIME type
    content_type: str | UnsetType = msgspec.field(name='contentType', default=UNSET)
    #: Content nonce
    nonce: str | UnsetType = UNSET
    #: Discriminant
    type: Literal['resource'] = 'resource'
    #: Optional selection within the referenced textual resource.
    selection: TextSelection | UnsetType = UNSET


class ModelSelection(ProtocolStruct, kw_only=True, frozen=True):
    """A model selection: the chosen model ID together with any model-specific configuration values whose keys correspond to the model's SessionModelInfo.configSchema."""

    #: Model identifier
    id: str
    #: Model-specific configuration values. Values are JSON primitives: most pickers produce strings, but some (e.g. a numeric context-size picker) produce numbers or booleans, which are
    config: dict[str, JsonPrimitive] | UnsetType = UNSET


class MultipleChatsCapability(ProtocolStruct, kw_only=True, frozen=True):
    """Options for the AgentCapabilities.multipleChats capability."""

    #: The agent can fork a chat from a specific turn. When absent or `false`, clients MUST NOT pass a ChatSource with `kind: 'fork'` to `createChat`. Forking always implies multi-chat su
    fork: bool | UnsetType = UNSET
    #: The agent can create a side chat from a specific turn. When absent or `false`, clients MUST NOT pass a ChatSource with `kind: 'sideChat'` to `createChat`.
    side_chat: bool | UnsetType = msgspec.field(name='sideChat', default=UNSET)


class MultipleWorkingDirectoriesCapability(ProtocolStruct, kw_only=True, frozen=True):
    """Options for the AgentCapabilities.multipleWorkingDirectories capability."""

    #: The agent requires each chat to designate one of its working directories as the **primary** — a distinguished root the chat is centered on (e.g. the agent's process root for that c
    requires_primary: bool | UnsetType = msgspec.field(name='requiresPrimary', default=UNSET)


class OtlpExportLogsParams(ProtocolStruct, kw_only=True, frozen=True):
    """Delivers a batch of OTLP log records to a client subscribed to the host's logs channel (advertised on `TelemetryCapabilities.logs`)."""

    #: Channel URI this notification belongs to (an `ahp-otlp:` URI advertised on `TelemetryCapabilities.logs`).
    channel: URI
    #: OTLP/JSON `ExportLogsServiceRequest` value. The top-level field is `resourceLogs: ResourceLogs[]`; nested shapes are defined by opentelemetry-proto and are not redeclared here.
    payload: dict[str, Any]


class OtlpExportMetricsParams(ProtocolStruct, kw_only=True, frozen=True):
    """Delivers a batch of OTLP metric data points to a client subscribed to the host's metrics channel (advertised on `TelemetryCapabilities.metrics`)."""

    #: Channel URI this notification belongs to (an `ahp-otlp:` URI advertised on `TelemetryCapabilities.metrics`).
    channel: URI
    #: OTLP/JSON `ExportMetricsServiceRequest` value. The top-level field is `resourceMetrics: ResourceMetrics[]`; nested shapes are defined by opentelemetry-proto and are not redeclared
    payload: dict[str, Any]


class OtlpExportTracesParams(ProtocolStruct, kw_only=True, frozen=True):
    """Delivers a batch of OTLP spans to a client subscribed to the host's traces channel (advertised on `TelemetryCapabilities.traces`)."""

    #: Channel URI this notification belongs to (an `ahp-otlp:` URI advertised on `TelemetryCapabilities.traces`).
    channel: URI
    #: OTLP/JSON `ExportTraceServiceRequest` value. The top-level field is `resourceSpans: ResourceSpans[]`; nested shapes are defined by opentelemetry-proto and are not redeclared here.
    payload: dict[str, Any]


class PaginatedParams(ProtocolStruct, kw_only=True, frozen=True):
    """Cursor-based pagination inputs, mixed into the params of any list command that can page a large result set (e.g. `listSessions`). The paired output is PaginatedResult."""

    #: Maximum number of entries to return in this page. The server SHOULD respect this bound but MAY return fewer entries and MAY impose its own upper cap. Omit to let the server choose
    limit: int | float | UnsetType = UNSET
    #: Opaque pagination cursor from a previous PaginatedResult.nextCursor. Omit to fetch the first page. Cursors are server-defined and MUST be treated as opaque — do not parse, modify,
    cursor: str | UnsetType = UNSET


class PaginatedResult(ProtocolStruct, kw_only=True, frozen=True):
    """Cursor-based pagination output, extended by the result of any list command that can page a large result set (e.g. `listSessions`). See PaginatedParams for the full pagination contract shared by every paginated command."""

    #: Opaque cursor for the next page. Present when more entries exist beyond the returned page; absent signals the end of the collection. Pass it back as PaginatedParams.cursor to fetch
    next_cursor: str | UnsetType = msgspec.field(name='nextCursor', default=UNSET)


class PartialChatSummary(ProtocolStruct, kw_only=True, frozen=True):
    """Mutable summary fields that changed; omitted fields are unchanged."""

    #: Chat URI
    resource: URI | UnsetType | None = UNSET
    #: Chat title
    title: str | UnsetType | None = UNSET
    #: Current chat status (reuses SessionStatus shape)
    status: int | UnsetType | None = UNSET
    #: Human-readable description of what the chat is currently doing
    activity: str | UnsetType | None = UNSET
    #: Last modification timestamp (ISO 8601, e.g. `'2025-03-10T18:42:03.123Z'`)
    modified_at: str | UnsetType | None = msgspec.field(name='modifiedAt', default=UNSET)
    #: How this chat came into existence
    origin: ChatOrigin | UnsetType | None = UNSET
    #: How the user can interact with this chat. See ChatInteractivity.
    interactivity: str | UnsetType | None = UNSET
    #: The subset of the session's working directories this chat uses. See ChatState.workingDirectories for the full semantics.
    working_directories: tuple[URI, ...] | UnsetType | None = msgspec.field(name='workingDirectories', default=UNSET)
    #: The chat's primary working directory. See ChatState.primaryWorkingDirectory for the full semantics.
    primary_working_directory: URI | UnsetType | None = msgspec.field(name='primaryWorkingDirectory', default=UNSET)


class PartialSessionSummary(ProtocolStruct, kw_only=True, frozen=True):
    """Mutable summary fields that changed; omitted fields are unchanged."""

    #: Agent provider ID
    provider: str | UnsetType | None = UNSET
    #: Session title
    title: str | UnsetType | None = UNSET
    #: Current session status
    status: int | UnsetType | None = UNSET
    #: Human-readable description of what the session is currently doing
    activity: str | UnsetType | None = UNSET
    #: Server-owned project for this session
    project: ProjectInfo | UnsetType | None = UNSET
    #: The working directories the session's agent has tool access to, as maintained by the `session/workingDirectorySet` / `session/workingDirectoryRemoved` actions. Directories are **eq
    working_directories: tuple[URI, ...] | UnsetType | None = msgspec.field(name='workingDirectories', default=UNSET)
    #: Lightweight summary of this session's inline annotations channel (`ahp-session:/<uuid>/annotations`). Surfaced so badge UI can render annotation / entry counts without subscribing.
    annotations: AnnotationsSummary | UnsetType | None = UNSET
    #: Session URI
    resource: URI | UnsetType | None = UNSET
    #: Creation timestamp (ISO 8601, e.g. `'2025-03-10T18:42:03.123Z'`)
    created_at: str | UnsetType | None = msgspec.field(name='createdAt', default=UNSET)
    #: Last modification timestamp (ISO 8601, e.g. `'2025-03-10T18:42:03.123Z'`)
    modified_at: str | UnsetType | None = msgspec.field(name='modifiedAt', default=UNSET)
    #: Aggregate summary of file changes associated with this session. Servers may populate this to give clients a quick at-a-glance view of the session's footprint (e.g., for list render
    changes: ChangesSummary | UnsetType | None = UNSET
    #: Lightweight server-defined metadata clients may use for the session presentation. The protocol does not interpret these values; producers SHOULD keep the payload small because summ
    meta: dict[str, Any] | UnsetType | None = msgspec.field(name='_meta', default=UNSET)


class PatternList(ProtocolStruct, kw_only=True, frozen=True):
    """Glob patterns or paths relative to `uri` to exclude from reporting. Wrapped in `{ items }` for forward compatibility."""

    items: tuple[str, ...]


class PendingMessage(ProtocolStruct, kw_only=True, frozen=True):
    """A message queued for future delivery to the agent."""

    #: Unique identifier for this pending message
    id: str
    #: The message that will start the next turn
    message: Message


class PermissionDeniedErrorData(ProtocolStruct, kw_only=True, frozen=True):
    """Details carried in the `data` field of a `PermissionDenied` (-32009) error."""

    #: The resource access that, if granted via `resourceRequest`, would unlock the operation. Omitted when no specific access grant would resolve the denial (for example, when the resour
    request: ResourceRequestParams | UnsetType = UNSET


class PingParams(ProtocolStruct, kw_only=True, frozen=True):
    """Verifies that the AHP connection is still alive and keeps it from being closed by idle-timeout intermediaries (proxies, load balancers, etc.)."""

    channel: str


class PluginCustomization(ProtocolStruct, kw_only=True, frozen=True):
    """An [Open Plugins](https://open-plugins.com/) plugin."""

    #: Session-unique opaque identifier. Used by every action that targets a specific customization. Minted by whoever publishes the customization (typically the agent host).
    id: str
    #: Source URI for this customization. A plugin URL, a file URI, or a directory URI.
    uri: URI
    #: Human-readable name.
    name: str
    #: Icons for UI display.
    icons: tuple[Icon, ...] | UnsetType = UNSET
    #: Optional span within `uri` when this customization is a subset of a larger file (for example, one entry in an inline `mcpServers` block of a `plugins.json` manifest). Absent when t
    range: TextRange | UnsetType = UNSET
    #: Additional provider-specific metadata for this customization.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    #: Whether this container is currently enabled.
    enabled: bool
    #: `clientId` of the client that contributed this container. Absent for server-originated entries.
    client_id: str | UnsetType = msgspec.field(name='clientId', default=UNSET)
    #: Host-reported load state. Absent means the host has not yet reported a load state for this container.
    load: CustomizationLoadState | UnsetType = UNSET
    #: Children discovered inside this container.
    children: tuple[ChildCustomization, ...] | UnsetType = UNSET
    type: Literal['plugin'] = 'plugin'
    #: Version of the plugin, sourced from the [Open Plugins](https://open-plugins.com/) manifest's optional `version` field (semver, e.g. `'1.2.0'`). Absent when the manifest declares no
    version: str | UnsetType = UNSET


class ProgressParams(ProtocolStruct, kw_only=True, frozen=True):
    """Generic progress notification for a long-running operation."""

    #: Channel URI this notification belongs to (the root channel).
    channel: URI
    #: Echoes the `progressToken` the client supplied on the originating request (e.g. the `progressToken` field of `createSession`), correlating this frame to that call. Unique across th
    progress_token: str = msgspec.field(name='progressToken')
    #: Progress so far, in operation-defined units (e.g. bytes received). Monotonically non-decreasing for a given `progressToken`.
    progress: int | float
    #: Total when known up front (e.g. from a `Content-Length`); omitted ⇒ indeterminate. The operation is complete once `progress === total`.
    total: int | float | UnsetType = UNSET
    #: Optional human-readable progress message. The client owns its own (localized) presentation derived from the originating request; generic clients that don't track the token MAY disp
    message: str | UnsetType = UNSET


class ProjectInfo(ProtocolStruct, kw_only=True, frozen=True):
    """Server-owned project metadata for a session."""

    #: Project URI
    uri: URI
    #: Human-readable project name
    display_name: str = msgspec.field(name='displayName')


class PromptCustomization(ProtocolStruct, kw_only=True, frozen=True):
    """A prompt contributed by a plugin or directory."""

    #: Session-unique opaque identifier. Used by every action that targets a specific customization. Minted by whoever publishes the customization (typically the agent host).
    id: str
    #: Source URI for this customization. A plugin URL, a file URI, or a directory URI.
    uri: URI
    #: Human-readable name.
    name: str
    #: Icons for UI display.
    icons: tuple[Icon, ...] | UnsetType = UNSET
    #: Optional span within `uri` when this customization is a subset of a larger file (for example, one entry in an inline `mcpServers` block of a `plugins.json` manifest). Absent when t
    range: TextRange | UnsetType = UNSET
    #: Additional provider-specific metadata for this customization.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    #: Whether this child is individually enabled. Absent means enabled, so a producer only needs to set it to surface a child that exists but is turned off on its own.
    enabled: bool | UnsetType = UNSET
    type: Literal['prompt'] = 'prompt'
    #: Short description of what the prompt does.
    description: str | UnsetType = UNSET


class ProtectedResourceMetadata(ProtocolStruct, kw_only=True, frozen=True):
    """Describes a protected resource's authentication requirements using [RFC 9728](https://datatracker.ietf.org/doc/html/rfc9728) (OAuth 2.0 Protected Resource Metadata) semantics."""

    #: REQUIRED. The protected resource's resource identifier, a URL using the `https` scheme with no fragment component (e.g. `'https://api.github.com'`).
    resource: str
    #: OPTIONAL. Human-readable name of the protected resource.
    resource_name: str | UnsetType = UNSET
    #: OPTIONAL. JSON array of OAuth authorization server identifier URLs.
    authorization_servers: tuple[str, ...] | UnsetType = UNSET
    #: OPTIONAL. URL of the protected resource's JWK Set document.
    jwks_uri: str | UnsetType = UNSET
    #: RECOMMENDED. JSON array of OAuth 2.0 scope values used in authorization requests.
    scopes_supported: tuple[str, ...] | UnsetType = UNSET
    #: OPTIONAL. JSON array of Bearer Token presentation methods supported.
    bearer_methods_supported: tuple[str, ...] | UnsetType = UNSET
    #: OPTIONAL. JSON array of JWS signing algorithms supported.
    resource_signing_alg_values_supported: tuple[str, ...] | UnsetType = UNSET
    #: OPTIONAL. JSON array of JWE encryption algorithms (alg) supported.
    resource_encryption_alg_values_supported: tuple[str, ...] | UnsetType = UNSET
    #: OPTIONAL. JSON array of JWE encryption algorithms (enc) supported.
    resource_encryption_enc_values_supported: tuple[str, ...] | UnsetType = UNSET
    #: OPTIONAL. URL of human-readable documentation for the resource.
    resource_documentation: str | UnsetType = UNSET
    #: OPTIONAL. URL of the resource's data-usage policy.
    resource_policy_uri: str | UnsetType = UNSET
    #: OPTIONAL. URL of the resource's terms of service.
    resource_tos_uri: str | UnsetType = UNSET
    #: AHP extension. Whether authentication is required for this resource.
    required: bool | UnsetType = UNSET


class ReasoningResponsePart(ProtocolStruct, kw_only=True, frozen=True):
    """Reasoning/thinking content from the model."""

    #: Discriminant
    kind: Literal['reasoning'] = 'reasoning'
    #: Part identifier, used by `chat/reasoning` to target this part for content appends
    id: str
    #: Accumulated reasoning text
    content: str


class ReconnectParams(ProtocolStruct, kw_only=True, frozen=True):
    """Re-establishes a dropped connection. The server replays missed actions or provides fresh snapshots."""

    channel: str
    #: Client identifier from the original connection
    client_id: str = msgspec.field(name='clientId')
    #: Last `serverSeq` the client received
    last_seen_server_seq: int = msgspec.field(name='lastSeenServerSeq')
    #: URIs the client was subscribed to
    subscriptions: tuple[URI, ...]


class ReconnectReplayResult(ProtocolStruct, kw_only=True, frozen=True):
    """Reconnect result when the server can replay from the requested sequence."""

    #: Discriminant
    type: Literal['replay'] = 'replay'
    #: Missed action envelopes since `lastSeenServerSeq`
    actions: tuple[ActionEnvelope, ...]
    #: URIs from `ReconnectParams.subscriptions` that the server cannot resume. This includes resources that no longer exist (e.g. disposed sessions or terminals) as well as resources the
    missing: tuple[URI, ...]


class ReconnectSnapshotResult(ProtocolStruct, kw_only=True, frozen=True):
    """Reconnect result when the gap exceeds the replay buffer."""

    #: Discriminant
    type: Literal['snapshot'] = 'snapshot'
    #: Fresh snapshots for each subscription
    snapshots: tuple[Snapshot, ...]


class ResolveSessionConfigParams(ProtocolStruct, kw_only=True, frozen=True):
    """Iteratively resolves the session configuration schema. The client sends the current partial session config and any user-filled metadata values. The server returns a property schema describing what additional metadata is needed, contextual to the current selections."""

    channel: str
    #: Agent provider ID
    provider: str | UnsetType = UNSET
    #: Working directory for the session
    working_directory: URI | UnsetType = msgspec.field(name='workingDirectory', default=UNSET)
    #: Current user-filled configuration values
    config: dict[str, Any] | UnsetType = UNSET


class ResolveSessionConfigResult(ProtocolStruct, kw_only=True, frozen=True):
    """Result of the `resolveSessionConfig` command."""

    #: JSON Schema describing available configuration properties given the current context
    schema: SessionConfigSchema
    #: Current configuration values (echoed back with server-resolved defaults applied)
    values: dict[str, Any]


class ResourceChange(ProtocolStruct, kw_only=True, frozen=True):
    """A single change observed by a resource watcher."""

    #: The URI of the resource that changed.
    uri: URI
    #: The kind of change observed.
    type: str


class ResourceCopyParams(ProtocolStruct, kw_only=True, frozen=True):
    """Copies a resource from one URI to another on the server's filesystem."""

    channel: str
    #: Source URI to copy from
    source: URI
    #: Destination URI to copy to
    destination: URI
    #: If `true`, the server MUST fail if the destination already exists instead of overwriting it.
    fail_if_exists: bool | UnsetType = msgspec.field(name='failIfExists', default=UNSET)


class ResourceCopyResult(ProtocolStruct, kw_only=True, frozen=True):
    """Result of the `resourceCopy` command."""

    pass


class ResourceDeleteParams(ProtocolStruct, kw_only=True, frozen=True):
    """Deletes a resource at a URI on the server's filesystem."""

    channel: str
    #: URI of the resource to delete
    uri: URI
    #: If `true` and the target is a directory, delete it and all its contents recursively. If `false` (default), deleting a non-empty directory MUST fail.
    recursive: bool | UnsetType = UNSET


class ResourceDeleteResult(ProtocolStruct, kw_only=True, frozen=True):
    """Result of the `resourceDelete` command."""

    pass


class ResourceListParams(ProtocolStruct, kw_only=True, frozen=True):
    """Lists directory entries at a file URI on the server's filesystem."""

    channel: str
    #: Directory URI on the server filesystem
    uri: URI


class ResourceListResult(ProtocolStruct, kw_only=True, frozen=True):
    """Result of the `resourceList` command."""

    #: Entries directly contained in the requested directory
    entries: tuple[DirectoryEntry, ...]


class ResourceMkdirParams(ProtocolStruct, kw_only=True, frozen=True):
    """Creates a directory on the server's filesystem with `mkdir -p` semantics."""

    channel: str
    #: Directory URI to create (parents created as needed).
    uri: URI


class ResourceMkdirResult(ProtocolStruct, kw_only=True, frozen=True):
    """Result of the `resourceMkdir` command."""

    pass


class ResourceMoveParams(ProtocolStruct, kw_only=True, frozen=True):
    """Moves (renames) a resource from one URI to another on the server's filesystem."""

    channel: str
    #: Source URI to move from
    source: URI
    #: Destination URI to move to
    destination: URI
    #: If `true`, the server MUST fail if the destination already exists instead of overwriting it.
    fail_if_exists: bool | UnsetType = msgspec.field(name='failIfExists', default=UNSET)


class ResourceMoveResult(ProtocolStruct, kw_only=True, frozen=True):
    """Result of the `resourceMove` command."""

    pass


class ResourceReadParams(ProtocolStruct, kw_only=True, frozen=True):
    """Reads the content of a resource by URI."""

    channel: str
    #: Content URI from a `ContentRef`
    uri: str
    #: Preferred encoding for the returned data (default: server-chosen)
    encoding: str | UnsetType = UNSET


class ResourceReadResult(ProtocolStruct, kw_only=True, frozen=True):
    """Result of the `resourceRead` command."""

    #: Content encoded as a string
    data: str
    #: How `data` is encoded
    encoding: str
    #: Content type (e.g. `'image/png'`, `'text/plain'`)
    content_type: str | UnsetType = msgspec.field(name='contentType', default=UNSET)


class ResourceReponsePart(ProtocolStruct, kw_only=True, frozen=True):
    """A content part that's a reference to large content stored outside the state tree."""

    #: Content URI
    uri: URI
    #: Approximate size in bytes
    size_hint: int | float | UnsetType = msgspec.field(name='sizeHint', default=UNSET)
    #: Content MIME type
    content_type: str | UnsetType = msgspec.field(name='contentType', default=UNSET)
    #: Content nonce
    nonce: str | UnsetType = UNSET
    #: Discriminant
    kind: Literal['contentRef'] = 'contentRef'


class ResourceRequestParams(ProtocolStruct, kw_only=True, frozen=True):
    """Requests permission to access a resource on the receiver's filesystem."""

    channel: str
    #: Resource URI being requested. Typically a `file:` URI on the receiver's filesystem, but any URI scheme that the receiver mediates access to is allowed.
    uri: URI
    #: Whether the caller needs read access to the resource.
    read: bool | UnsetType = UNSET
    #: Whether the caller needs write access to the resource.
    write: bool | UnsetType = UNSET


class ResourceRequestResult(ProtocolStruct, kw_only=True, frozen=True):
    """Result of the `resourceRequest` command."""

    pass


class ResourceResolveParams(ProtocolStruct, kw_only=True, frozen=True):
    """Resolves a resource — the combination of POSIX `stat` and `realpath`."""

    channel: str
    #: URI to resolve
    uri: URI
    #: When `true` (default), follow symlinks and report the metadata of the link target — and set `uri` in the result to the canonical (realpath) URI. When `false`, stat the link itself
    follow_symlinks: bool | UnsetType = msgspec.field(name='followSymlinks', default=UNSET)


class ResourceResolveResult(ProtocolStruct, kw_only=True, frozen=True):
    """Result of the `resourceResolve` command."""

    #: Canonical URI after symlink resolution. Equal to the requested URI when `followSymlinks` is `false` or the URI does not traverse a symlink.
    uri: URI
    #: Resource kind.
    type: str
    #: Size in bytes. Omitted for directories when the provider cannot cheaply compute it.
    size: int | float | UnsetType = UNSET
    #: Last-modified time in ISO 8601 format, when known.
    mtime: str | UnsetType = UNSET
    #: Creation time in ISO 8601 format, when known.
    ctime: str | UnsetType = UNSET
    #: Sniffed MIME type, when known (e.g. `'text/plain'`, `'image/png'`).
    content_type: str | UnsetType = msgspec.field(name='contentType', default=UNSET)
    #: Opaque per-provider version token. When present, pass it as ResourceWriteParams.ifMatch on a subsequent `resourceWrite` to detect concurrent modifications.
    etag: str | UnsetType = UNSET


class ResourceWatchChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """A batch of resource changes observed by the watcher."""

    type: Literal['resourceWatch/changed'] = 'resourceWatch/changed'
    #: The set of changes in this batch, wrapped for forward compatibility.
    changes: ResourceWatchChangedActionChanges


class ResourceWatchChangedActionChanges(ProtocolStruct, kw_only=True, frozen=True):
    """The set of changes in this batch, wrapped for forward compatibility."""

    items: tuple[ResourceChange, ...]


class ResourceWatchState(ProtocolStruct, kw_only=True, frozen=True):
    """Full state for a single resource watch, returned when a client subscribes to an `ahp-resource-watch:` URI."""

    #: The URI being watched. For recursive watches this is the root of the subtree; for non-recursive watches this is the single file or directory.
    root: URI
    #: `true` if the watcher reports changes for descendants of `root`; `false` if it only reports changes to `root` itself (and, when `root` is a directory, its direct children).
    recursive: bool
    #: Optional glob patterns or paths relative to `root` to exclude from change reporting.
    excludes: PatternList | UnsetType = UNSET
    #: Optional glob patterns or paths relative to `root` to restrict change reporting to. Omit to report every change under `root` subject to `excludes`.
    includes: PatternList | UnsetType = UNSET


class ResourceWriteParams(ProtocolStruct, kw_only=True, frozen=True):
    """Writes content to a file on the server's filesystem."""

    channel: str
    #: Target file URI on the server filesystem
    uri: URI
    #: Content encoded as a string
    data: str
    #: How `data` is encoded
    encoding: str
    #: Content type (e.g. `'text/plain'`, `'image/png'`)
    content_type: str | UnsetType = msgspec.field(name='contentType', default=UNSET)
    #: If `true`, the server MUST fail if the file already exists instead of overwriting it. Useful for safe creation of new files.
    create_only: bool | UnsetType = msgspec.field(name='createOnly', default=UNSET)
    #: How `data` is placed within the target file. Defaults to `'truncate'` (full overwrite) when omitted. See ResourceWriteMode for the meaning of each mode and how it interprets positi
    mode: str | UnsetType = UNSET
    #: Byte offset interpreted according to mode. Defaults to `0`. - `truncate`: offset from the start of the file at which to truncate before writing. - `append`: bytes back from EOF at
    position: int | float | UnsetType = UNSET
    #: Optimistic-concurrency token previously returned by ResourceResolveResult.etag. When set, the server MUST fail with `Conflict` if the current `etag` does not match — preventing los
    if_match: str | UnsetType = msgspec.field(name='ifMatch', default=UNSET)


class ResourceWriteResult(ProtocolStruct, kw_only=True, frozen=True):
    """Result of the `resourceWrite` command."""

    pass


class RootActiveSessionsChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Fired when the number of active sessions changes."""

    type: Literal['root/activeSessionsChanged'] = 'root/activeSessionsChanged'
    #: Current count of active sessions
    active_sessions: int | float = msgspec.field(name='activeSessions')


class RootAgentsChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Fired when available agent backends or their models change."""

    type: Literal['root/agentsChanged'] = 'root/agentsChanged'
    #: Updated agent list
    agents: tuple[AgentInfo, ...]


class RootConfigChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Fired when agent-host configuration values change."""

    type: Literal['root/configChanged'] = 'root/configChanged'
    #: Updated config values
    config: dict[str, Any]
    #: When `true`, replaces all config values instead of merging
    replace: bool | UnsetType = UNSET


class RootConfigState(ProtocolStruct, kw_only=True, frozen=True):
    """Live agent-host configuration metadata."""

    #: JSON Schema describing available configuration properties
    schema: ConfigSchema
    #: Current configuration values
    values: dict[str, Any]


class RootState(ProtocolStruct, kw_only=True, frozen=True):
    """Global state shared with every client subscribed to `ahp-root://`."""

    #: Available agent backends and their models
    agents: tuple[AgentInfo, ...]
    #: Number of active (non-disposed) sessions on the server
    active_sessions: int | float | UnsetType = msgspec.field(name='activeSessions', default=UNSET)
    #: Known terminals on the server. Subscribe to individual terminal URIs for full state.
    terminals: tuple[TerminalInfo, ...] | UnsetType = UNSET
    #: Agent host configuration schema and current values
    config: RootConfigState | UnsetType = UNSET
    #: Additional implementation-defined metadata about the agent host itself.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class RootTerminalsChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Fired when the list of known terminals changes."""

    type: Literal['root/terminalsChanged'] = 'root/terminalsChanged'
    #: Updated terminal list (full replacement)
    terminals: tuple[TerminalInfo, ...]


class RuleCustomization(ProtocolStruct, kw_only=True, frozen=True):
    """A rule contributed by a plugin or directory."""

    #: Session-unique opaque identifier. Used by every action that targets a specific customization. Minted by whoever publishes the customization (typically the agent host).
    id: str
    #: Source URI for this customization. A plugin URL, a file URI, or a directory URI.
    uri: URI
    #: Human-readable name.
    name: str
    #: Icons for UI display.
    icons: tuple[Icon, ...] | UnsetType = UNSET
    #: Optional span within `uri` when this customization is a subset of a larger file (for example, one entry in an inline `mcpServers` block of a `plugins.json` manifest). Absent when t
    range: TextRange | UnsetType = UNSET
    #: Additional provider-specific metadata for this customization.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    #: Whether this child is individually enabled. Absent means enabled, so a producer only needs to set it to surface a child that exists but is turned off on its own.
    enabled: bool | UnsetType = UNSET
    type: Literal['rule'] = 'rule'
    #: Description of what the rule enforces.
    description: str | UnsetType = UNSET
    #: When `true`, the rule is always active (subject to `globs` if any). When `false` or absent, the agent or user decides whether to apply the rule.
    always_apply: bool | UnsetType = msgspec.field(name='alwaysApply', default=UNSET)
    #: Glob patterns the rule applies to. When present, the rule is only active for matching files.
    globs: tuple[str, ...] | UnsetType = UNSET


class SessionActiveClient(ProtocolStruct, kw_only=True, frozen=True):
    """A client currently providing tools and interactive capabilities to a session."""

    #: Client identifier (matches `clientId` from `initialize`)
    client_id: str = msgspec.field(name='clientId')
    #: Human-readable client name (e.g. `'VS Code'`)
    display_name: str | UnsetType = msgspec.field(name='displayName', default=UNSET)
    #: Tools this client provides to the session
    tools: tuple[ToolDefinition, ...]
    #: Plugin customizations this client contributes to the session.
    customizations: tuple[ClientPluginCustomization, ...] | UnsetType = UNSET


class SessionActiveClientRemovedAction(ProtocolStruct, kw_only=True, frozen=True):
    """An active client was removed from this session."""

    type: Literal['session/activeClientRemoved'] = 'session/activeClientRemoved'
    #: The `clientId` of the active client to remove.
    client_id: str = msgspec.field(name='clientId')


class SessionActiveClientSetAction(ProtocolStruct, kw_only=True, frozen=True):
    """An active client for this session was added or updated."""

    type: Literal['session/activeClientSet'] = 'session/activeClientSet'
    #: The active client to add or update, matched by `clientId`.
    active_client: SessionActiveClient = msgspec.field(name='activeClient')


class SessionActivityChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """The activity description of the session changed."""

    type: Literal['session/activityChanged'] = 'session/activityChanged'
    #: Human-readable description of current activity, or `undefined` to clear
    activity: str | UnsetType | None = UNSET


class SessionAddedParams(ProtocolStruct, kw_only=True, frozen=True):
    """Broadcast to all clients subscribed to the root channel when a new session is created."""

    #: Channel URI this notification belongs to (the root channel)
    channel: URI
    #: Summary of the new session
    summary: SessionSummary


class SessionChangesetsChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """The catalogue of changesets the agent host advertises for this session changed. Replaces `state.changesets` entirely (full-replacement semantics) — set to `undefined` to clear the catalogue."""

    type: Literal['session/changesetsChanged'] = 'session/changesetsChanged'
    #: New catalogue, or `undefined` to clear it
    changesets: tuple[Changeset, ...] | UnsetType | None = UNSET


class SessionChatAddedAction(ProtocolStruct, kw_only=True, frozen=True):
    """A chat was added to this session's catalog. Upsert semantics: if a chat with the same `summary.resource` already exists, the existing entry is replaced."""

    type: Literal['session/chatAdded'] = 'session/chatAdded'
    #: The full summary of the newly added (or upserted) chat.
    summary: ChatSummary


class SessionChatInputRequest(ProtocolStruct, kw_only=True, frozen=True):
    """A user-input elicitation surfaced at the session level, mirroring the request from an unresolved InputRequestResponsePart in the owning chat."""

    #: Stable key for this entry, unique within the session's SessionState.inputNeeded list. The host derives it however it likes (for example from the chat URI plus the underlying reques
    id: str
    #: The chat the underlying request lives in. This is the channel a client dispatches its response to — it does not need to have subscribed to that chat first.
    chat: URI
    kind: Literal['chatInput'] = 'chatInput'
    #: The mirrored chat input request.
    request: ChatInputRequest


class SessionChatRemovedAction(ProtocolStruct, kw_only=True, frozen=True):
    """A chat was removed from this session's catalog. No-op when no entry matches."""

    type: Literal['session/chatRemoved'] = 'session/chatRemoved'
    #: The URI of the chat to remove.
    chat: URI


class SessionChatUpdatedAction(ProtocolStruct, kw_only=True, frozen=True):
    """One existing chat's summary fields changed."""

    type: Literal['session/chatUpdated'] = 'session/chatUpdated'
    #: The URI of the chat whose summary changed.
    chat: URI
    #: Mutable summary fields that changed; omitted fields are unchanged.
    changes: PartialChatSummary


class SessionConfigChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Client changed a mutable config value mid-session."""

    type: Literal['session/configChanged'] = 'session/configChanged'
    #: Updated config values
    config: dict[str, Any]
    #: When `true`, replaces all config values instead of merging
    replace: bool | UnsetType = UNSET


class SessionConfigCompletionsParams(ProtocolStruct, kw_only=True, frozen=True):
    """Queries the server for allowed values of a dynamic session config property."""

    channel: str
    #: Agent provider ID
    provider: str | UnsetType = UNSET
    #: Working directory for the session
    working_directory: URI | UnsetType = msgspec.field(name='workingDirectory', default=UNSET)
    #: Current user-filled configuration values (provides context for the query)
    config: dict[str, Any] | UnsetType = UNSET
    #: Property id from the schema to query values for
    property: str
    #: Search filter text (empty or omitted returns default/recent values)
    query: str | UnsetType = UNSET


class SessionConfigCompletionsResult(ProtocolStruct, kw_only=True, frozen=True):
    """Result of the `sessionConfigCompletions` command."""

    #: Matching value items
    items: tuple[SessionConfigValueItem, ...]


class SessionConfigPropertySchema(ProtocolStruct, kw_only=True, frozen=True):
    """A session configuration property descriptor."""

    #: JSON Schema: property type
    type: str
    #: JSON Schema: human-readable label for the property
    title: str
    #: JSON Schema: description / tooltip
    description: str | UnsetType = UNSET
    #: JSON Schema: default value
    default: Any | UnsetType = UNSET
    #: JSON Schema: allowed values. May be primitives of any JSON type.
    enum: tuple[JsonPrimitive, ...] | UnsetType = UNSET
    #: Display extension: human-readable label per enum value (parallel array)
    enum_labels: tuple[str, ...] | UnsetType = msgspec.field(name='enumLabels', default=UNSET)
    #: Display extension: description per enum value (parallel array)
    enum_descriptions: tuple[str, ...] | UnsetType = msgspec.field(name='enumDescriptions', default=UNSET)
    #: JSON Schema: when `true`, the property is displayed but cannot be modified by the user
    read_only: bool | UnsetType = msgspec.field(name='readOnly', default=UNSET)
    #: JSON Schema: schema for array items (used when `type` is `'array'`)
    items: ConfigPropertySchema | UnsetType = UNSET
    #: JSON Schema: property descriptors for object properties (used when `type` is `'object'`)
    properties: dict[str, ConfigPropertySchema] | UnsetType = UNSET
    #: JSON Schema: list of required property ids (used when `type` is `'object'`)
    required: tuple[str, ...] | UnsetType = UNSET
    #: JSON Schema: schema for additional properties not listed in `properties` (used when `type` is `'object'`).
    additional_properties: ConfigPropertySchema | UnsetType = msgspec.field(name='additionalProperties', default=UNSET)
    #: Display extension: when `true`, the full set of allowed values is too large to enumerate statically. The client SHOULD use `sessionConfigCompletions` to fetch matching values based
    enum_dynamic: bool | UnsetType = msgspec.field(name='enumDynamic', default=UNSET)
    #: When `true`, the user may change this property after session creation
    session_mutable: bool | UnsetType = msgspec.field(name='sessionMutable', default=UNSET)


class SessionConfigSchema(ProtocolStruct, kw_only=True, frozen=True):
    """A JSON Schema object describing available session configuration metadata."""

    #: JSON Schema: always `'object'`
    type: Literal['object'] = 'object'
    #: JSON Schema: property descriptors keyed by property id
    properties: dict[str, SessionConfigPropertySchema]
    #: JSON Schema: list of required property ids
    required: tuple[str, ...] | UnsetType = UNSET


class SessionConfigState(ProtocolStruct, kw_only=True, frozen=True):
    """Live session configuration metadata."""

    #: JSON Schema describing available configuration properties
    schema: SessionConfigSchema
    #: Current configuration values
    values: dict[str, Any]


class SessionConfigValueItem(ProtocolStruct, kw_only=True, frozen=True):
    """A single value item returned by `sessionConfigCompletions`."""

    #: The value to store in config
    value: str
    #: Human-readable display label
    label: str
    #: Optional secondary description
    description: str | UnsetType = UNSET


class SessionCreationFailedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Session backend failed to initialize."""

    type: Literal['session/creationFailed'] = 'session/creationFailed'
    #: Error details
    error: ErrorInfo


class SessionCustomizationRemovedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Removes a customization by id."""

    type: Literal['session/customizationRemoved'] = 'session/customizationRemoved'
    #: The id of the customization to remove.
    id: str


class SessionCustomizationToggledAction(ProtocolStruct, kw_only=True, frozen=True):
    """A client toggled a customization on or off."""

    type: Literal['session/customizationToggled'] = 'session/customizationToggled'
    #: The id of the container or child to toggle.
    id: str
    #: Whether to enable or disable the targeted customization.
    enabled: bool


class SessionCustomizationUpdatedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Upserts a top-level customization (plugin or directory)."""

    type: Literal['session/customizationUpdated'] = 'session/customizationUpdated'
    #: The customization to upsert (matched by `customization.id`).
    customization: Customization


class SessionCustomizationsChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """The session's customizations have changed."""

    type: Literal['session/customizationsChanged'] = 'session/customizationsChanged'
    #: Updated customization list (full replacement).
    customizations: tuple[Customization, ...]


class SessionDefaultChatChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """The default chat input-routing hint for this session changed."""

    type: Literal['session/defaultChatChanged'] = 'session/defaultChatChanged'
    #: New default chat URI, or `undefined` to clear the hint.
    default_chat: URI | UnsetType | None = msgspec.field(name='defaultChat', default=UNSET)


class SessionForkSource(ProtocolStruct, kw_only=True, frozen=True):
    """Creates a new session with the specified agent provider."""

    #: URI of the existing session to fork from
    session: URI
    #: Turn ID in the source session; content up to and including this turn's response is copied
    turn_id: str = msgspec.field(name='turnId')


class SessionInputNeededRemovedAction(ProtocolStruct, kw_only=True, frozen=True):
    """A session-level input request was removed."""

    type: Literal['session/inputNeededRemoved'] = 'session/inputNeededRemoved'
    #: The `id` of the input request to remove.
    id: str


class SessionInputNeededSetAction(ProtocolStruct, kw_only=True, frozen=True):
    """A session-level input request was added or updated."""

    type: Literal['session/inputNeededSet'] = 'session/inputNeededSet'
    #: The input request to add or update, matched by `id`.
    request: SessionInputRequest


class SessionInputRequestBase(ProtocolStruct, kw_only=True, frozen=True):
    """Fields common to every SessionInputRequest variant."""

    #: Stable key for this entry, unique within the session's SessionState.inputNeeded list. The host derives it however it likes (for example from the chat URI plus the underlying reques
    id: str
    #: The chat the underlying request lives in. This is the channel a client dispatches its response to — it does not need to have subscribed to that chat first.
    chat: URI


class SessionIsArchivedChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """The archived state of the session changed."""

    type: Literal['session/isArchivedChanged'] = 'session/isArchivedChanged'
    #: Whether the session is archived
    is_archived: bool = msgspec.field(name='isArchived')


class SessionIsReadChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """The read state of the session changed."""

    type: Literal['session/isReadChanged'] = 'session/isReadChanged'
    #: Whether the session has been read
    is_read: bool = msgspec.field(name='isRead')


class SessionMcpServerStartRequestedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Requests that the host start or restart an existing McpServerCustomization."""

    type: Literal['session/mcpServerStartRequested'] = 'session/mcpServerStartRequested'
    #: The id of the McpServerCustomization to start.
    id: str


class SessionMcpServerStateChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Updates the runtime fields of an existing McpServerCustomization — narrow alternative to SessionCustomizationUpdatedAction for the high-frequency `starting` ↔ `ready` ↔ `authRequired` transitions."""

    type: Literal['session/mcpServerStateChanged'] = 'session/mcpServerStateChanged'
    #: The id of the McpServerCustomization to update.
    id: str
    #: The new lifecycle state.
    state: McpServerState
    #: Updated `mcp://` side-channel URI. Full-replacement: omit to clear an existing channel (typical when leaving `Ready`).
    channel: URI | UnsetType | None = UNSET


class SessionMcpServerStopRequestedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Requests that the host stop an existing McpServerCustomization."""

    type: Literal['session/mcpServerStopRequested'] = 'session/mcpServerStopRequested'
    #: The id of the McpServerCustomization to stop.
    id: str


class SessionMetaChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """The session's `_meta` side-channel changed. Replaces `state._meta` entirely (full-replacement semantics). Producers SHOULD merge any keys they wish to preserve into the new value before dispatching."""

    type: Literal['session/metaChanged'] = 'session/metaChanged'
    #: New `_meta` payload, or `undefined` to clear it
    meta: dict[str, Any] | UnsetType | None = msgspec.field(name='_meta', default=UNSET)


class SessionMetadata(ProtocolStruct, kw_only=True, frozen=True):
    """Metadata shared between the full SessionState (delivered when a client subscribes to a session's URI) and the lightweight SessionSummary (carried in the root-channel session catalog)."""

    #: Agent provider ID
    provider: str
    #: Session title
    title: str
    #: Current session status
    status: int
    #: Human-readable description of what the session is currently doing
    activity: str | UnsetType = UNSET
    #: Server-owned project for this session
    project: ProjectInfo | UnsetType = UNSET
    #: The working directories the session's agent has tool access to, as maintained by the `session/workingDirectorySet` / `session/workingDirectoryRemoved` actions. Directories are **eq
    working_directories: tuple[URI, ...] | UnsetType = msgspec.field(name='workingDirectories', default=UNSET)
    #: Lightweight summary of this session's inline annotations channel (`ahp-session:/<uuid>/annotations`). Surfaced so badge UI can render annotation / entry counts without subscribing.
    annotations: AnnotationsSummary | UnsetType = UNSET


class SessionModelInfo(ProtocolStruct, kw_only=True, frozen=True):
    #: Model identifier
    id: str
    #: Provider this model belongs to
    provider: str
    #: Human-readable model name
    name: str
    #: Maximum context window size
    max_context_window: int | float | UnsetType = msgspec.field(name='maxContextWindow', default=UNSET)
    #: Maximum number of output tokens the model can generate
    max_output_tokens: int | float | UnsetType = msgspec.field(name='maxOutputTokens', default=UNSET)
    #: Maximum number of prompt (input) tokens the model accepts
    max_prompt_tokens: int | float | UnsetType = msgspec.field(name='maxPromptTokens', default=UNSET)
    #: Whether the model supports vision
    supports_vision: bool | UnsetType = msgspec.field(name='supportsVision', default=UNSET)
    #: Policy configuration state
    policy_state: str | UnsetType = msgspec.field(name='policyState', default=UNSET)
    #: Configuration schema describing model-specific options (e.g. thinking level). Clients present this as a form and pass the resolved values in ModelSelection.config when creating or
    config_schema: ConfigSchema | UnsetType = msgspec.field(name='configSchema', default=UNSET)
    #: Additional provider-specific metadata for this model.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class SessionReadyAction(ProtocolStruct, kw_only=True, frozen=True):
    """Session backend initialized successfully."""

    type: Literal['session/ready'] = 'session/ready'


class SessionRemovedParams(ProtocolStruct, kw_only=True, frozen=True):
    """Broadcast to all clients subscribed to the root channel when a session is disposed."""

    #: Channel URI this notification belongs to (the root channel)
    channel: URI
    #: URI of the removed session
    session: URI


class SessionServerToolsChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Server tools for this session have changed."""

    type: Literal['session/serverToolsChanged'] = 'session/serverToolsChanged'
    #: Updated server tools list (full replacement)
    tools: tuple[ToolDefinition, ...]


class SessionState(ProtocolStruct, kw_only=True, frozen=True):
    """Full state for a single session, loaded when a client subscribes to the session's URI."""

    #: Agent provider ID
    provider: str
    #: Session title
    title: str
    #: Current session status
    status: int
    #: Human-readable description of what the session is currently doing
    activity: str | UnsetType = UNSET
    #: Server-owned project for this session
    project: ProjectInfo | UnsetType = UNSET
    #: The working directories the session's agent has tool access to, as maintained by the `session/workingDirectorySet` / `session/workingDirectoryRemoved` actions. Directories are **eq
    working_directories: tuple[URI, ...] | UnsetType = msgspec.field(name='workingDirectories', default=UNSET)
    #: Lightweight summary of this session's inline annotations channel (`ahp-session:/<uuid>/annotations`). Surfaced so badge UI can render annotation / entry counts without subscribing.
    annotations: AnnotationsSummary | UnsetType = UNSET
    #: Session initialization state
    lifecycle: str
    #: Error details if creation failed
    creation_error: ErrorInfo | UnsetType = msgspec.field(name='creationError', default=UNSET)
    #: Tools provided by the server (agent host) for this session
    server_tools: tuple[ToolDefinition, ...] | UnsetType = msgspec.field(name='serverTools', default=UNSET)
    #: The clients currently providing tools and interactive capabilities to this session. If multiple tools or customizations are provided by the same active client, an agent host MAY de
    active_clients: tuple[SessionActiveClient, ...] = msgspec.field(name='activeClients')
    #: Catalog of chats in this session.
    chats: tuple[ChatSummary, ...]
    #: The chat that receives input when the user addresses the session without selecting a specific chat. This is a UI routing hint, not a hierarchy marker — chats remain equal peers at
    default_chat: URI | UnsetType = msgspec.field(name='defaultChat', default=UNSET)
    #: Session configuration schema and current values
    config: SessionConfigState | UnsetType = UNSET
    #: Top-level customizations active in this session.
    customizations: tuple[Customization, ...] | UnsetType = UNSET
    #: Catalogue of changesets the server can produce for this session. Each entry advertises a subscribable view of file changes (uncommitted, session-wide, per-turn, etc.) and the URI t
    changesets: tuple[Changeset, ...] | UnsetType = UNSET
    #: Outstanding input the session is blocked on, aggregated across every chat so a client can discover and answer it from the session channel alone, without subscribing to individual c
    input_needed: tuple[SessionInputRequest, ...] | UnsetType = msgspec.field(name='inputNeeded', default=UNSET)
    #: Additional provider-specific metadata for this session.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class SessionSummary(ProtocolStruct, kw_only=True, frozen=True):
    """Lightweight catalog entry summarizing one session. Surfaced via `root/listSessions` and `root/sessionAdded`/`root/sessionSummaryChanged` notifications."""

    #: Agent provider ID
    provider: str
    #: Session title
    title: str
    #: Current session status
    status: int
    #: Human-readable description of what the session is currently doing
    activity: str | UnsetType = UNSET
    #: Server-owned project for this session
    project: ProjectInfo | UnsetType = UNSET
    #: The working directories the session's agent has tool access to, as maintained by the `session/workingDirectorySet` / `session/workingDirectoryRemoved` actions. Directories are **eq
    working_directories: tuple[URI, ...] | UnsetType = msgspec.field(name='workingDirectories', default=UNSET)
    #: Lightweight summary of this session's inline annotations channel (`ahp-session:/<uuid>/annotations`). Surfaced so badge UI can render annotation / entry counts without subscribing.
    annotations: AnnotationsSummary | UnsetType = UNSET
    #: Session URI
    resource: URI
    #: Creation timestamp (ISO 8601, e.g. `'2025-03-10T18:42:03.123Z'`)
    created_at: str = msgspec.field(name='createdAt')
    #: Last modification timestamp (ISO 8601, e.g. `'2025-03-10T18:42:03.123Z'`)
    modified_at: str = msgspec.field(name='modifiedAt')
    #: Aggregate summary of file changes associated with this session. Servers may populate this to give clients a quick at-a-glance view of the session's footprint (e.g., for list render
    changes: ChangesSummary | UnsetType = UNSET
    #: Lightweight server-defined metadata clients may use for the session presentation. The protocol does not interpret these values; producers SHOULD keep the payload small because summ
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class SessionSummaryChangedParams(ProtocolStruct, kw_only=True, frozen=True):
    """Broadcast to all clients subscribed to the root channel when an existing session's summary changes (title, status, `modifiedAt`, model, working directory, read/done state, or diff statistics)."""

    #: Channel URI this notification belongs to (the root channel)
    channel: URI
    #: URI of the session whose summary changed
    session: URI
    #: Mutable summary fields that changed; omitted fields are unchanged.
    changes: PartialSessionSummary


class SessionTitleChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Session title updated. Fired by the server when the title is auto-generated from conversation, or dispatched by a client to rename a session."""

    type: Literal['session/titleChanged'] = 'session/titleChanged'
    #: New title
    title: str


class SessionToolAuthenticationRequest(ProtocolStruct, kw_only=True, frozen=True):
    """A tool call blocked on MCP authentication mid-execution, surfaced at the session level."""

    #: Stable key for this entry, unique within the session's SessionState.inputNeeded list. The host derives it however it likes (for example from the chat URI plus the underlying reques
    id: str
    #: The chat the underlying request lives in. This is the channel a client dispatches its response to — it does not need to have subscribed to that chat first.
    chat: URI
    kind: Literal['toolAuthentication'] = 'toolAuthentication'
    #: The turn the tool call belongs to.
    turn_id: str = msgspec.field(name='turnId')
    #: The tool call awaiting authentication.
    tool_call: ToolCallAuthRequiredState = msgspec.field(name='toolCall')


class SessionToolClientExecutionRequest(ProtocolStruct, kw_only=True, frozen=True):
    """A running tool whose execution is delegated to an active client. Surfaced so a client that provides the tool can pick up the work without subscribing to the owning chat."""

    #: Stable key for this entry, unique within the session's SessionState.inputNeeded list. The host derives it however it likes (for example from the chat URI plus the underlying reques
    id: str
    #: The chat the underlying request lives in. This is the channel a client dispatches its response to — it does not need to have subscribed to that chat first.
    chat: URI
    kind: Literal['toolClientExecution'] = 'toolClientExecution'
    #: The turn the tool call belongs to.
    turn_id: str = msgspec.field(name='turnId')
    #: The `clientId` expected to execute the tool. Matches the `clientId` of the tool call's client ToolCallContributor.
    client_id: str = msgspec.field(name='clientId')
    #: The running tool call the session wants the owning client to execute. The host only ever populates this with a ToolCallRunningState (i.e. a ToolCallState in `running` status).
    tool_call: ToolCallState = msgspec.field(name='toolCall')


class SessionToolConfirmationRequest(ProtocolStruct, kw_only=True, frozen=True):
    """A tool call blocked on confirmation — either parameter confirmation before execution or result confirmation after — surfaced at the session level."""

    #: Stable key for this entry, unique within the session's SessionState.inputNeeded list. The host derives it however it likes (for example from the chat URI plus the underlying reques
    id: str
    #: The chat the underlying request lives in. This is the channel a client dispatches its response to — it does not need to have subscribed to that chat first.
    chat: URI
    kind: Literal['toolConfirmation'] = 'toolConfirmation'
    #: The turn the tool call belongs to.
    turn_id: str = msgspec.field(name='turnId')
    #: The tool call awaiting confirmation.
    tool_call: ToolCallConfirmationState = msgspec.field(name='toolCall')


class SessionWorkingDirectoryRemovedAction(ProtocolStruct, kw_only=True, frozen=True):
    """A working directory was removed from the session's SessionState.workingDirectories set."""

    type: Literal['session/workingDirectoryRemoved'] = 'session/workingDirectoryRemoved'
    #: The working directory to revoke the session's agent tool access to.
    directory: URI


class SessionWorkingDirectorySetAction(ProtocolStruct, kw_only=True, frozen=True):
    """A working directory was added to the session's SessionState.workingDirectories set."""

    type: Literal['session/workingDirectorySet'] = 'session/workingDirectorySet'
    #: The working directory to grant the session's agent tool access to.
    directory: URI


class SideChatSelection(ProtocolStruct, kw_only=True, frozen=True):
    """Immutable selected-text snapshot captured when a side chat is created."""

    #: Exact selected-text snapshot captured at `createChat` acceptance.
    text: str
    #: Optional provenance for the response part that contained text when the host took the snapshot.
    response_part_id: str | UnsetType = msgspec.field(name='responsePartId', default=UNSET)


class SideChatSource(ProtocolStruct, kw_only=True, frozen=True):
    """Supplies source context to a new side chat without copying it into the side chat's visible history."""

    #: Discriminant
    kind: Literal['sideChat'] = 'sideChat'
    #: URI of the existing source chat.
    chat: URI
    #: Stable source-turn identifier in the source chat.
    turn_id: str = msgspec.field(name='turnId')
    #: Optional immutable selected-text snapshot to carry into the created side chat's origin.
    selection: SideChatSelection | UnsetType = UNSET


class SimpleMessageAttachment(ProtocolStruct, kw_only=True, frozen=True):
    """A simple, opaque attachment whose model representation is described by the producer."""

    #: A human-readable label for the attachment (e.g. the filename of a file attachment). Used for display in UI.
    label: str
    #: If defined, the range in Message.text that references this attachment. This is a text range, not a byte range.
    range: TextRange | UnsetType = UNSET
    #: Advisory display hint for clients rendering this attachment. Recognized values include:
    display_kind: str | UnsetType = msgspec.field(name='displayKind', default=UNSET)
    #: Additional implementation-defined metadata for the attachment.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    #: Discriminant
    type: Literal['simple'] = 'simple'
    #: Representation of the attachment as it should be shown to the model.
    model_representation: str | UnsetType = msgspec.field(name='modelRepresentation', default=UNSET)


class SkillCustomization(ProtocolStruct, kw_only=True, frozen=True):
    """A skill contributed by a plugin or directory."""

    #: Session-unique opaque identifier. Used by every action that targets a specific customization. Minted by whoever publishes the customization (typically the agent host).
    id: str
    #: Source URI for this customization. A plugin URL, a file URI, or a directory URI.
    uri: URI
    #: Human-readable name.
    name: str
    #: Icons for UI display.
    icons: tuple[Icon, ...] | UnsetType = UNSET
    #: Optional span within `uri` when this customization is a subset of a larger file (for example, one entry in an inline `mcpServers` block of a `plugins.json` manifest). Absent when t
    range: TextRange | UnsetType = UNSET
    #: Additional provider-specific metadata for this customization.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    #: Whether this child is individually enabled. Absent means enabled, so a producer only needs to set it to surface a child that exists but is turned off on its own.
    enabled: bool | UnsetType = UNSET
    type: Literal['skill'] = 'skill'
    #: Short description used for help text and auto-invocation matching. Sourced from the skill's frontmatter `description`.
    description: str | UnsetType = UNSET
    #: When `true`, only the user can invoke this skill — the agent will not auto-invoke it. Sourced from the command skill's frontmatter `disable-model-invocation` flag.
    disable_model_invocation: bool | UnsetType = msgspec.field(name='disableModelInvocation', default=UNSET)
    #: When `true`, the user cannot directly invoke this skill (for example, as a slash command); it remains available for the agent to auto-invoke. Absent or `false` means the user may i
    disable_user_invocation: bool | UnsetType = msgspec.field(name='disableUserInvocation', default=UNSET)


class Snapshot(ProtocolStruct, kw_only=True, frozen=True):
    """A point-in-time snapshot of a subscribed resource's state, returned by `initialize`, `reconnect`, and `subscribe`."""

    #: The subscribed channel URI (e.g. `ahp-root://`, `ahp-session:/<uuid>`, or `ahp-chat:/<uuid>`)
    resource: URI
    #: The current state of the resource
    state: SnapshotState
    #: The `serverSeq` at which this snapshot was taken. Subsequent actions will have `serverSeq > fromSeq`.
    from_seq: int = msgspec.field(name='fromSeq')


class SubscribeParams(ProtocolStruct, kw_only=True, frozen=True):
    """Subscribe to a URI-identified channel."""

    #: Channel URI this command targets.
    channel: URI
    #: Optional delivery preferences for this subscription.
    delivery: SubscriptionDeliveryOptions | UnsetType = UNSET
    #: Optional client-requested shape for the returned snapshot.
    view: SubscribeView | UnsetType = UNSET


class SubscribeResult(ProtocolStruct, kw_only=True, frozen=True):
    """Result of the `subscribe` command."""

    #: Snapshot of the subscribed channel's state (omitted for stateless channels)
    snapshot: Snapshot | UnsetType = UNSET


class SubscribeView(ProtocolStruct, kw_only=True, frozen=True):
    """Optional client-requested shape for a subscription snapshot."""

    #: Advisory number of most-recent completed turns to expose in a chat snapshot.
    turns: int | float | UnsetType = UNSET


class SubscriptionDeliveryOptions(ProtocolStruct, kw_only=True, frozen=True):
    """Advisory delivery preferences for a single subscription."""

    #: Maximum time, in milliseconds, that the server may intentionally delay delivery while buffering/coalescing updates for this subscription.
    max_latency_ms: int | float | UnsetType = msgspec.field(name='maxLatencyMs', default=UNSET)


class SystemNotificationResponsePart(ProtocolStruct, kw_only=True, frozen=True):
    """A system notification surfaced as part of the response stream."""

    #: Discriminant
    kind: Literal['systemNotification'] = 'systemNotification'
    #: The text of the system notification
    content: StringOrMarkdown
    #: Additional provider-specific metadata for this notification.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class TelemetryCapabilities(ProtocolStruct, kw_only=True, frozen=True):
    """OTLP telemetry channels the agent host emits."""

    #: Channel URI (or RFC 6570 URI template) for OTLP log records (`otlp/exportLogs` notifications).
    logs: URI | UnsetType = UNSET
    #: Channel URI for OTLP spans (`otlp/exportTraces` notifications). No template variables are defined by this protocol version.
    traces: URI | UnsetType = UNSET
    #: Channel URI for OTLP metric data points (`otlp/exportMetrics` notifications). No template variables are defined by this protocol version.
    metrics: URI | UnsetType = UNSET


class TerminalClaimedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Terminal claim changed. A client or session transfers ownership of the terminal."""

    type: Literal['terminal/claimed'] = 'terminal/claimed'
    #: The new claim
    claim: TerminalClaim


class TerminalClearedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Terminal scrollback buffer cleared."""

    type: Literal['terminal/cleared'] = 'terminal/cleared'


class TerminalClientClaim(ProtocolStruct, kw_only=True, frozen=True):
    """A terminal claimed by a connected client."""

    #: Discriminant
    kind: Literal['client'] = 'client'
    #: The `clientId` of the claiming client
    client_id: str = msgspec.field(name='clientId')


class TerminalCommandDetectionAvailableAction(ProtocolStruct, kw_only=True, frozen=True):
    """Shell integration has loaded and the terminal now supports command detection. The server dispatches this when shell integration becomes available (which may happen asynchronously after the terminal is created)."""

    type: Literal['terminal/commandDetectionAvailable'] = 'terminal/commandDetectionAvailable'


class TerminalCommandExecutedAction(ProtocolStruct, kw_only=True, frozen=True):
    """A command has been submitted to the shell and is now executing. All subsequent `terminal/data` actions (until the matching `terminal/commandFinished`) constitute this command's output."""

    type: Literal['terminal/commandExecuted'] = 'terminal/commandExecuted'
    #: Stable identifier for this command, scoped to the terminal URI. Allows correlating `commandExecuted` → `commandFinished` pairs.
    command_id: str = msgspec.field(name='commandId')
    #: The command line text that was submitted
    command_line: str = msgspec.field(name='commandLine')
    #: Unix timestamp (ms) of when the command started executing, as measured on the server.
    timestamp: int | float


class TerminalCommandFinishedAction(ProtocolStruct, kw_only=True, frozen=True):
    """A command has finished executing."""

    type: Literal['terminal/commandFinished'] = 'terminal/commandFinished'
    #: Matches the `commandId` from the corresponding `commandExecuted`
    command_id: str = msgspec.field(name='commandId')
    #: Shell exit code. `undefined` if the shell did not report one.
    exit_code: int | float | UnsetType = msgspec.field(name='exitCode', default=UNSET)
    #: Wall-clock duration of the command in milliseconds, as measured by the shell integration script on the server side.
    duration_ms: int | float | UnsetType = msgspec.field(name='durationMs', default=UNSET)


class TerminalCommandPart(ProtocolStruct, kw_only=True, frozen=True):
    """A single command: its command line and the output it produced."""

    type: Literal['command'] = 'command'
    #: Stable id matching the `commandId` on the corresponding `terminal/commandExecuted` and `terminal/commandFinished` actions.
    command_id: str = msgspec.field(name='commandId')
    #: The command line submitted to the shell.
    command_line: str = msgspec.field(name='commandLine')
    #: Accumulated VT output. Appended to by `terminal/data` while `isComplete` is false. Shell integration escape sequences are stripped by the server.
    output: str
    #: Unix timestamp (ms) when execution started, as reported by the server.
    timestamp: int | float
    #: Whether the command has finished.
    is_complete: bool = msgspec.field(name='isComplete')
    #: Shell exit code. Set at completion. `undefined` if unknown.
    exit_code: int | float | UnsetType = msgspec.field(name='exitCode', default=UNSET)
    #: Wall-clock duration in milliseconds. Set at completion.
    duration_ms: int | float | UnsetType = msgspec.field(name='durationMs', default=UNSET)


class TerminalCommandResult(ProtocolStruct, kw_only=True, frozen=True):
    """Outcome of a command run in a terminal-style tool, filled in on ToolResultTerminalContent.result once the command exits."""

    #: Exit code from the completed command, if reported by the runtime
    exit_code: int | float | UnsetType = msgspec.field(name='exitCode', default=UNSET)
    #: Preview of the command's output, for clients that are not subscribed to the terminal or that arrive after it is disposed. When `isPty` is `true` the preview may contain VT sequence
    preview: str | UnsetType = UNSET
    #: Whether `preview` is known to be incomplete or truncated
    truncated: bool | UnsetType = UNSET


class TerminalCwdChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Terminal working directory changed."""

    type: Literal['terminal/cwdChanged'] = 'terminal/cwdChanged'
    #: New working directory
    cwd: URI


class TerminalDataAction(ProtocolStruct, kw_only=True, frozen=True):
    """Terminal output data (pty → client direction)."""

    type: Literal['terminal/data'] = 'terminal/data'
    #: Output data (may contain ANSI escape sequences)
    data: str


class TerminalExitedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Terminal process exited."""

    type: Literal['terminal/exited'] = 'terminal/exited'
    #: Process exit code. `undefined` if the process was killed without an exit code.
    exit_code: int | float | UnsetType = msgspec.field(name='exitCode', default=UNSET)


class TerminalInfo(ProtocolStruct, kw_only=True, frozen=True):
    """Lightweight terminal metadata exposed on the root state."""

    #: Terminal URI (subscribable for full terminal state)
    resource: URI
    #: Human-readable terminal title
    title: str
    #: Who currently holds this terminal
    claim: TerminalClaim
    #: Process exit code, if the terminal process has exited
    exit_code: int | float | UnsetType = msgspec.field(name='exitCode', default=UNSET)


class TerminalInputAction(ProtocolStruct, kw_only=True, frozen=True):
    """Keyboard input sent to the terminal process (client → pty direction)."""

    type: Literal['terminal/input'] = 'terminal/input'
    #: Input data to send to the pty
    data: str


class TerminalResizedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Terminal dimensions changed."""

    type: Literal['terminal/resized'] = 'terminal/resized'
    #: Terminal width in columns
    cols: int | float
    #: Terminal height in rows
    rows: int | float


class TerminalSessionClaim(ProtocolStruct, kw_only=True, frozen=True):
    """A terminal claimed by a session, optionally scoped to a specific turn or tool call."""

    #: Discriminant
    kind: Literal['session'] = 'session'
    #: Session URI that claimed the terminal
    session: URI
    #: Optional turn identifier within the session
    turn_id: str | UnsetType = msgspec.field(name='turnId', default=UNSET)
    #: Optional tool call identifier within the turn
    tool_call_id: str | UnsetType = msgspec.field(name='toolCallId', default=UNSET)


class TerminalState(ProtocolStruct, kw_only=True, frozen=True):
    """Full state for a single terminal, loaded when a client subscribes to the terminal's URI."""

    #: Human-readable terminal title
    title: str
    #: Current working directory of the terminal process
    cwd: URI | UnsetType = UNSET
    #: Terminal width in columns
    cols: int | float | UnsetType = UNSET
    #: Terminal height in rows
    rows: int | float | UnsetType = UNSET
    #: Typed content parts, replacing the flat `content: string`.
    content: tuple[TerminalContentPart, ...]
    #: Process exit code, set when the terminal process exits
    exit_code: int | float | UnsetType = msgspec.field(name='exitCode', default=UNSET)
    #: Who currently holds this terminal
    claim: TerminalClaim
    #: Whether this terminal emits `terminal/commandExecuted` and `terminal/commandFinished` actions and populates `command`-typed parts.
    supports_command_detection: bool | UnsetType = msgspec.field(name='supportsCommandDetection', default=UNSET)
    #: Whether this terminal-style resource is backed by a pseudoterminal. When `false`, output is plain text and clients do not need to parse VT sequences.
    is_pty: bool | UnsetType = msgspec.field(name='isPty', default=UNSET)


class TerminalTitleChangedAction(ProtocolStruct, kw_only=True, frozen=True):
    """Terminal title changed."""

    type: Literal['terminal/titleChanged'] = 'terminal/titleChanged'
    #: New terminal title
    title: str


class TerminalUnclassifiedPart(ProtocolStruct, kw_only=True, frozen=True):
    """Unstructured terminal output — content before, between, or after commands, or from terminals that do not support command detection."""

    type: Literal['unclassified'] = 'unclassified'
    #: Accumulated VT output. Appended to by `terminal/data` when no command is executing.
    value: str


class TextPosition(ProtocolStruct, kw_only=True, frozen=True):
    """A zero-based position within a textual document."""

    #: Zero-based line number.
    line: int | float
    #: Zero-based character offset within the line.
    character: int | float


class TextRange(ProtocolStruct, kw_only=True, frozen=True):
    """A range within a textual document."""

    #: Start position of the range.
    start: TextPosition
    #: End position of the range.
    end: TextPosition


class TextSelection(ProtocolStruct, kw_only=True, frozen=True):
    """A selection within a textual resource."""

    #: The range covered by the selection.
    range: TextRange


class ToolAnnotations(ProtocolStruct, kw_only=True, frozen=True):
    """Behavioral hints about a tool. All properties are advisory and not guaranteed to faithfully describe tool behavior."""

    #: Alternate human-readable title
    title: str | UnsetType = UNSET
    #: Tool does not modify its environment (default: false)
    read_only_hint: bool | UnsetType = msgspec.field(name='readOnlyHint', default=UNSET)
    #: Tool may perform destructive updates (default: true)
    destructive_hint: bool | UnsetType = msgspec.field(name='destructiveHint', default=UNSET)
    #: Repeated calls with the same arguments have no additional effect (default: false)
    idempotent_hint: bool | UnsetType = msgspec.field(name='idempotentHint', default=UNSET)
    #: Tool may interact with external entities (default: true)
    open_world_hint: bool | UnsetType = msgspec.field(name='openWorldHint', default=UNSET)


class ToolCallActionBase(ProtocolStruct, kw_only=True, frozen=True):
    """Base interface for all tool-call-scoped actions, carrying the common turn and tool call identifiers. The owning chat URI is identified by the enclosing ActionEnvelope's `channel` field."""

    #: Turn identifier
    turn_id: str = msgspec.field(name='turnId')
    #: Tool call identifier
    tool_call_id: str = msgspec.field(name='toolCallId')
    #: Additional provider-specific metadata for this tool call.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class ToolCallAuthRequiredState(ProtocolStruct, kw_only=True, frozen=True):
    """A running tool call is paused because the MCP server backing it needs authentication — most commonly `insufficientScope` step-up auth triggered by the `tools/call` request itself. Only ever reached from ToolCallRunningState, and normally returns there once authenticated: `running` → `auth-required` → `running` → …. A client MAY instead cancel the invocation without authenticating by dispatching a `chat/toolCallComplete` with a **failed** result, always moving straight to ToolCallCompletedState — `requiresResultConfirmation` is ignored on this path, so it can never enter ToolCallPendingResultConfirmationState. A **successful** result dispatched from this state is invalid and MUST be rejected/ignored as a no-op by the reducer, since execution never resumed after the challenge."""

    #: Unique tool call identifier
    tool_call_id: str = msgspec.field(name='toolCallId')
    #: Internal tool name (for debugging/logging)
    tool_name: str = msgspec.field(name='toolName')
    #: Human-readable tool name
    display_name: str = msgspec.field(name='displayName')
    #: Human-readable description of what the tool invocation intends to do
    intention: str | UnsetType = UNSET
    #: The MCP server that contributed this tool call — always MCP, never a client tool.
    contributor: ToolCallMcpContributor
    #: Additional provider-specific metadata for this tool call.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    #: Message describing what the tool will do
    invocation_message: StringOrMarkdown = msgspec.field(name='invocationMessage')
    #: Raw tool input
    tool_input: str | UnsetType = msgspec.field(name='toolInput', default=UNSET)
    #: How the tool was confirmed for execution
    confirmed: str
    #: The confirmation option the user selected, if confirmation options were provided
    selected_option: ConfirmationOption | UnsetType = msgspec.field(name='selectedOption', default=UNSET)
    status: Literal['auth-required'] = 'auth-required'
    #: The authentication challenge blocking this invocation.
    auth: McpAuthRequirement
    #: Partial content produced before the call paused for authentication.
    content: tuple[ToolResultContent, ...] | UnsetType = UNSET


class ToolCallBase(ProtocolStruct, kw_only=True, frozen=True):
    """Metadata common to all tool call states."""

    #: Unique tool call identifier
    tool_call_id: str = msgspec.field(name='toolCallId')
    #: Internal tool name (for debugging/logging)
    tool_name: str = msgspec.field(name='toolName')
    #: Human-readable tool name
    display_name: str = msgspec.field(name='displayName')
    #: Human-readable description of what the tool invocation intends to do
    intention: str | UnsetType = UNSET
    #: Reference to the contributor of the tool being called.
    contributor: ToolCallContributor | UnsetType = UNSET
    #: Additional provider-specific metadata for this tool call.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class ToolCallCancelledState(ProtocolStruct, kw_only=True, frozen=True):
    """Tool call was cancelled before execution."""

    #: Unique tool call identifier
    tool_call_id: str = msgspec.field(name='toolCallId')
    #: Internal tool name (for debugging/logging)
    tool_name: str = msgspec.field(name='toolName')
    #: Human-readable tool name
    display_name: str = msgspec.field(name='displayName')
    #: Human-readable description of what the tool invocation intends to do
    intention: str | UnsetType = UNSET
    #: Reference to the contributor of the tool being called.
    contributor: ToolCallContributor | UnsetType = UNSET
    #: Additional provider-specific metadata for this tool call.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    #: Message describing what the tool will do
    invocation_message: StringOrMarkdown = msgspec.field(name='invocationMessage')
    #: Raw tool input
    tool_input: str | UnsetType = msgspec.field(name='toolInput', default=UNSET)
    status: Literal['cancelled'] = 'cancelled'
    #: Why the tool was cancelled
    reason: str
    #: Optional message explaining the cancellation
    reason_message: StringOrMarkdown | UnsetType = msgspec.field(name='reasonMessage', default=UNSET)
    #: What the user suggested doing instead
    user_suggestion: Message | UnsetType = msgspec.field(name='userSuggestion', default=UNSET)
    #: The confirmation option the user selected, if confirmation options were provided
    selected_option: ConfirmationOption | UnsetType = msgspec.field(name='selectedOption', default=UNSET)


class ToolCallClientContributor(ProtocolStruct, kw_only=True, frozen=True):
    kind: Literal['client'] = 'client'
    #: If this tool is provided by a client, the `clientId` of the owning client. Absent for server-side tools.
    client_id: str = msgspec.field(name='clientId')


class ToolCallCompletedState(ProtocolStruct, kw_only=True, frozen=True):
    """Tool completed successfully or with an error."""

    #: Unique tool call identifier
    tool_call_id: str = msgspec.field(name='toolCallId')
    #: Internal tool name (for debugging/logging)
    tool_name: str = msgspec.field(name='toolName')
    #: Human-readable tool name
    display_name: str = msgspec.field(name='displayName')
    #: Human-readable description of what the tool invocation intends to do
    intention: str | UnsetType = UNSET
    #: Reference to the contributor of the tool being called.
    contributor: ToolCallContributor | UnsetType = UNSET
    #: Additional provider-specific metadata for this tool call.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    #: Message describing what the tool will do
    invocation_message: StringOrMarkdown = msgspec.field(name='invocationMessage')
    #: Raw tool input
    tool_input: str | UnsetType = msgspec.field(name='toolInput', default=UNSET)
    #: Whether the tool succeeded
    success: bool
    #: Past-tense description of what the tool did
    past_tense_message: StringOrMarkdown = msgspec.field(name='pastTenseMessage')
    #: Unstructured result content blocks.
    content: tuple[ToolResultContent, ...] | UnsetType = UNSET
    #: Optional structured result object.
    structured_content: dict[str, Any] | UnsetType = msgspec.field(name='structuredContent', default=UNSET)
    #: Error details if the tool failed
    error: ToolCallError | UnsetType = UNSET
    #: How the tool was confirmed for execution
    confirmed: str
    #: The confirmation option the user selected, if confirmation options were provided
    selected_option: ConfirmationOption | UnsetType = msgspec.field(name='selectedOption', default=UNSET)
    status: Literal['completed'] = 'completed'


class ToolCallEdits(ProtocolStruct, kw_only=True, frozen=True):
    """File edits that this tool call will perform, for preview before confirmation"""

    items: tuple[FileEdit, ...]


class ToolCallError(ProtocolStruct, kw_only=True, frozen=True):
    """Error details if the tool failed"""

    message: str
    code: str | UnsetType = UNSET


class ToolCallMcpContributor(ProtocolStruct, kw_only=True, frozen=True):
    kind: Literal['mcp'] = 'mcp'
    #: Customization ID of the corresponding MCP server in SessionState.customizations.
    customization_id: str = msgspec.field(name='customizationId')


class ToolCallParameterFields(ProtocolStruct, kw_only=True, frozen=True):
    """Properties available once tool call parameters are fully received."""

    #: Message describing what the tool will do
    invocation_message: StringOrMarkdown = msgspec.field(name='invocationMessage')
    #: Raw tool input
    tool_input: str | UnsetType = msgspec.field(name='toolInput', default=UNSET)


class ToolCallPendingConfirmationState(ProtocolStruct, kw_only=True, frozen=True):
    """Parameters are complete, or a running tool requires re-confirmation (e.g. a mid-execution permission check)."""

    #: Unique tool call identifier
    tool_call_id: str = msgspec.field(name='toolCallId')
    #: Internal tool name (for debugging/logging)
    tool_name: str = msgspec.field(name='toolName')
    #: Human-readable tool name
    display_name: str = msgspec.field(name='displayName')
    #: Human-readable description of what the tool invocation intends to do
    intention: str | UnsetType = UNSET
    #: Reference to the contributor of the tool being called.
    contributor: ToolCallContributor | UnsetType = UNSET
    #: Additional provider-specific metadata for this tool call.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    #: Message describing what the tool will do
    invocation_message: StringOrMarkdown = msgspec.field(name='invocationMessage')
    #: Raw tool input
    tool_input: str | UnsetType = msgspec.field(name='toolInput', default=UNSET)
    status: Literal['pending-confirmation'] = 'pending-confirmation'
    #: Short title for the confirmation prompt (e.g. `'Run in terminal'`, `'Write file'`)
    confirmation_title: StringOrMarkdown | UnsetType = msgspec.field(name='confirmationTitle', default=UNSET)
    #: Risk assessment that informed the confirmation requirement.
    risk_assessment: ToolCallRiskAssessment | UnsetType = msgspec.field(name='riskAssessment', default=UNSET)
    #: File edits that this tool call will perform, for preview before confirmation
    edits: ToolCallEdits | UnsetType = UNSET
    #: Whether the agent host allows the client to edit the tool's input parameters before confirming
    editable: bool | UnsetType = UNSET
    #: Options the server offers for this confirmation. When present, the client SHOULD render these instead of a plain approve/deny UI. Each option belongs to a ConfirmationOptionGroup s
    options: tuple[ConfirmationOption, ...] | UnsetType = UNSET


class ToolCallPendingResultConfirmationState(ProtocolStruct, kw_only=True, frozen=True):
    """Tool finished executing, waiting for client to approve the result."""

    #: Unique tool call identifier
    tool_call_id: str = msgspec.field(name='toolCallId')
    #: Internal tool name (for debugging/logging)
    tool_name: str = msgspec.field(name='toolName')
    #: Human-readable tool name
    display_name: str = msgspec.field(name='displayName')
    #: Human-readable description of what the tool invocation intends to do
    intention: str | UnsetType = UNSET
    #: Reference to the contributor of the tool being called.
    contributor: ToolCallContributor | UnsetType = UNSET
    #: Additional provider-specific metadata for this tool call.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    #: Message describing what the tool will do
    invocation_message: StringOrMarkdown = msgspec.field(name='invocationMessage')
    #: Raw tool input
    tool_input: str | UnsetType = msgspec.field(name='toolInput', default=UNSET)
    #: Whether the tool succeeded
    success: bool
    #: Past-tense description of what the tool did
    past_tense_message: StringOrMarkdown = msgspec.field(name='pastTenseMessage')
    #: Unstructured result content blocks.
    content: tuple[ToolResultContent, ...] | UnsetType = UNSET
    #: Optional structured result object.
    structured_content: dict[str, Any] | UnsetType = msgspec.field(name='structuredContent', default=UNSET)
    #: Error details if the tool failed
    error: ToolCallError | UnsetType = UNSET
    #: How the tool was confirmed for execution
    confirmed: str
    #: The confirmation option the user selected, if confirmation options were provided
    selected_option: ConfirmationOption | UnsetType = msgspec.field(name='selectedOption', default=UNSET)
    status: Literal['pending-result-confirmation'] = 'pending-result-confirmation'


class ToolCallPostConfirmationFields(ProtocolStruct, kw_only=True, frozen=True):
    """Fields present on every tool call state that exists **after** confirmation has been resolved: ToolCallRunningState, ToolCallAuthRequiredState, ToolCallPendingResultConfirmationState, and ToolCallCompletedState. `ToolCallPendingConfirmationState` (not yet confirmed) and `ToolCallCancelledState` (the denial path — never ran) don't satisfy this invariant, so they keep their own `selectedOption` field independently rather than extending this one."""

    #: How the tool was confirmed for execution
    confirmed: str
    #: The confirmation option the user selected, if confirmation options were provided
    selected_option: ConfirmationOption | UnsetType = msgspec.field(name='selectedOption', default=UNSET)


class ToolCallResponsePart(ProtocolStruct, kw_only=True, frozen=True):
    """A tool call represented as a response part."""

    #: Discriminant
    kind: Literal['toolCall'] = 'toolCall'
    #: Full tool call lifecycle state
    tool_call: ToolCallState = msgspec.field(name='toolCall')


class ToolCallResult(ProtocolStruct, kw_only=True, frozen=True):
    """Tool execution result details, available after execution completes."""

    #: Whether the tool succeeded
    success: bool
    #: Past-tense description of what the tool did
    past_tense_message: StringOrMarkdown = msgspec.field(name='pastTenseMessage')
    #: Unstructured result content blocks.
    content: tuple[ToolResultContent, ...] | UnsetType = UNSET
    #: Optional structured result object.
    structured_content: dict[str, Any] | UnsetType = msgspec.field(name='structuredContent', default=UNSET)
    #: Error details if the tool failed
    error: ToolCallError | UnsetType = UNSET


class ToolCallRiskAssessmentBase(ProtocolStruct, kw_only=True, frozen=True):
    kind: str


class ToolCallRiskAssessmentCompleteState(ProtocolStruct, kw_only=True, frozen=True):
    """The model judge has completed its evaluation."""

    kind: str
    status: Literal['complete'] = 'complete'
    reason: StringOrMarkdown
    #: The judge's normalized safety score, where `0` is unsafe and `1` is safe.
    safety: int | float


class ToolCallRiskAssessmentLoadingState(ProtocolStruct, kw_only=True, frozen=True):
    """The model judge is still evaluating the tool call."""

    kind: str
    status: Literal['loading'] = 'loading'


class ToolCallRunningState(ProtocolStruct, kw_only=True, frozen=True):
    """Tool is actively executing."""

    #: Unique tool call identifier
    tool_call_id: str = msgspec.field(name='toolCallId')
    #: Internal tool name (for debugging/logging)
    tool_name: str = msgspec.field(name='toolName')
    #: Human-readable tool name
    display_name: str = msgspec.field(name='displayName')
    #: Human-readable description of what the tool invocation intends to do
    intention: str | UnsetType = UNSET
    #: Reference to the contributor of the tool being called.
    contributor: ToolCallContributor | UnsetType = UNSET
    #: Additional provider-specific metadata for this tool call.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    #: Message describing what the tool will do
    invocation_message: StringOrMarkdown = msgspec.field(name='invocationMessage')
    #: Raw tool input
    tool_input: str | UnsetType = msgspec.field(name='toolInput', default=UNSET)
    #: How the tool was confirmed for execution
    confirmed: str
    #: The confirmation option the user selected, if confirmation options were provided
    selected_option: ConfirmationOption | UnsetType = msgspec.field(name='selectedOption', default=UNSET)
    status: Literal['running'] = 'running'
    #: Partial content produced while the tool is still executing.
    content: tuple[ToolResultContent, ...] | UnsetType = UNSET


class ToolCallStreamingState(ProtocolStruct, kw_only=True, frozen=True):
    """LM is streaming the tool call parameters."""

    #: Unique tool call identifier
    tool_call_id: str = msgspec.field(name='toolCallId')
    #: Internal tool name (for debugging/logging)
    tool_name: str = msgspec.field(name='toolName')
    #: Human-readable tool name
    display_name: str = msgspec.field(name='displayName')
    #: Human-readable description of what the tool invocation intends to do
    intention: str | UnsetType = UNSET
    #: Reference to the contributor of the tool being called.
    contributor: ToolCallContributor | UnsetType = UNSET
    #: Additional provider-specific metadata for this tool call.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)
    status: Literal['streaming'] = 'streaming'
    #: Partial parameters accumulated so far
    partial_input: str | UnsetType = msgspec.field(name='partialInput', default=UNSET)
    #: Progress message shown while parameters are streaming
    invocation_message: StringOrMarkdown | UnsetType = msgspec.field(name='invocationMessage', default=UNSET)


class ToolDefinition(ProtocolStruct, kw_only=True, frozen=True):
    """Describes a tool available in a session, provided by either the server or the active client."""

    #: Unique tool identifier
    name: str
    #: Human-readable display name
    title: str | UnsetType = UNSET
    #: Description of what the tool does
    description: str | UnsetType = UNSET
    #: JSON Schema defining the expected input parameters.
    input_schema: ToolSchema | UnsetType = msgspec.field(name='inputSchema', default=UNSET)
    #: JSON Schema defining the structure of the tool's output.
    output_schema: ToolSchema | UnsetType = msgspec.field(name='outputSchema', default=UNSET)
    #: Behavioral hints about the tool. All properties are advisory.
    annotations: ToolAnnotations | UnsetType = UNSET
    #: Additional provider-specific metadata.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


class ToolResultEmbeddedResourceContent(ProtocolStruct, kw_only=True, frozen=True):
    """Base64-encoded binary content embedded in a tool result."""

    type: Literal['embeddedResource'] = 'embeddedResource'
    #: Base64-encoded data
    data: str
    #: Content type (e.g. `'image/png'`, `'application/pdf'`)
    content_type: str = msgspec.field(name='contentType')


class ToolResultFileEditContent(ProtocolStruct, kw_only=True, frozen=True):
    """Describes a file modification performed by a tool."""

    #: The file state before the edit. Absent for file creations or for in-place file edits.
    before: FileEditSide | UnsetType = UNSET
    #: The file state after the edit. Absent for file deletions.
    after: FileEditSide | UnsetType = UNSET
    #: Optional diff display metadata
    diff: FileEditDiff | UnsetType = UNSET
    type: Literal['fileEdit'] = 'fileEdit'


class ToolResultResourceContent(ProtocolStruct, kw_only=True, frozen=True):
    """A reference to a resource stored outside the tool result."""

    #: Content URI
    uri: URI
    #: Approximate size in bytes
    size_hint: int | float | UnsetType = msgspec.field(name='sizeHint', default=UNSET)
    #: Content MIME type
    content_type: str | UnsetType = msgspec.field(name='contentType', default=UNSET)
    #: Content nonce
    nonce: str | UnsetType = UNSET
    type: Literal['resource'] = 'resource'


class ToolResultSubagentContent(ProtocolStruct, kw_only=True, frozen=True):
    """A reference, embedded in a tool result, to a worker chat spawned by the tool call (a sub-agent delegation), referenced by a chat URI (`ahp-chat:/...`)."""

    type: Literal['subagent'] = 'subagent'
    #: Worker chat URI (subscribable for full chat state)
    resource: URI
    #: Display title for the subagent
    title: str
    #: Internal agent name
    agent_name: str | UnsetType = msgspec.field(name='agentName', default=UNSET)
    #: Human-readable description of the subagent's task
    description: str | UnsetType = UNSET


class ToolResultTerminalContent(ProtocolStruct, kw_only=True, frozen=True):
    """A reference to a terminal whose output is relevant to this tool result."""

    type: Literal['terminal'] = 'terminal'
    #: Terminal URI (subscribable for full terminal state)
    resource: URI
    #: Display title for the terminal content
    title: str
    #: Whether this terminal-style resource is backed by a pseudoterminal. When `false`, output is plain text and clients do not need to parse VT sequences.
    is_pty: bool | UnsetType = msgspec.field(name='isPty', default=UNSET)
    #: Outcome of the command, present once it has exited.
    result: TerminalCommandResult | UnsetType = UNSET


class ToolResultTextContent(ProtocolStruct, kw_only=True, frozen=True):
    """Text content in a tool result."""

    type: Literal['text'] = 'text'
    #: The text content
    text: str


class ToolSchema(ProtocolStruct, kw_only=True, frozen=True):
    """JSON Schema defining the expected input parameters."""

    type: Literal['object'] = 'object'
    properties: dict[str, dict[str, Any]] | UnsetType = UNSET
    required: tuple[str, ...] | UnsetType = UNSET


class Turn(ProtocolStruct, kw_only=True, frozen=True):
    """A completed request/response cycle."""

    #: Turn identifier
    id: str
    #: ISO 8601 timestamp when this turn started.
    started_at: str | UnsetType = msgspec.field(name='startedAt', default=UNSET)
    #: Turn duration in milliseconds.
    duration: int | float | UnsetType = UNSET
    #: The message that initiated the turn
    message: Message
    #: All response content in stream order: text, tool calls, reasoning, and content refs.
    response_parts: tuple[ResponsePart, ...] = msgspec.field(name='responseParts')
    #: Token usage info
    usage: UsageInfo | UnsetType | None = UNSET
    #: How the turn ended
    state: str
    #: Error details if state is `'error'`
    error: ErrorInfo | UnsetType = UNSET


class UnsubscribeParams(ProtocolStruct, kw_only=True, frozen=True):
    """Stop receiving updates for a channel."""

    #: Channel URI to unsubscribe from
    channel: URI


class UnsupportedProtocolVersionErrorData(ProtocolStruct, kw_only=True, frozen=True):
    """Details carried in the `data` field of an `UnsupportedProtocolVersion` (-32005) error."""

    #: Protocol versions the server is willing to speak.
    supported_versions: tuple[str, ...] = msgspec.field(name='supportedVersions')


class UsageInfo(ProtocolStruct, kw_only=True, frozen=True):
    #: Input tokens consumed
    input_tokens: int | float | UnsetType = msgspec.field(name='inputTokens', default=UNSET)
    #: Output tokens generated
    output_tokens: int | float | UnsetType = msgspec.field(name='outputTokens', default=UNSET)
    #: Model used
    model: str | UnsetType = UNSET
    #: Tokens read from cache
    cache_read_tokens: int | float | UnsetType = msgspec.field(name='cacheReadTokens', default=UNSET)
    #: Additional provider-specific metadata for this usage report. Clients MAY look for well-known optional keys here to provide enhanced UI.
    meta: dict[str, Any] | UnsetType = msgspec.field(name='_meta', default=UNSET)


StringOrMarkdown: TypeAlias = str | MarkdownString

if TYPE_CHECKING:
    AnnotationsAction: TypeAlias = (
        AnnotationsSetAction
        | AnnotationsUpdatedAction
        | AnnotationsRemovedAction
        | AnnotationsEntrySetAction
        | AnnotationsEntryRemovedAction
        | UnknownVariant
    )
    ChangesetAction: TypeAlias = (
        ChangesetStatusChangedAction
        | ChangesetFileSetAction
        | ChangesetFileRemovedAction
        | ChangesetFilesReviewChangedAction
        | ChangesetContentChangedAction
        | ChangesetOperationsChangedAction
        | ChangesetOperationStatusChangedAction
        | ChangesetClearedAction
        | UnknownVariant
    )
    ChangesetOperationTarget: TypeAlias = (
        ChangesetOperationTargetResource
        | ChangesetOperationTargetRange
        | UnknownVariant
    )
    ChatToolCallConfirmedAction: TypeAlias = (
        ChatToolCallApprovedAction
        | ChatToolCallDeniedAction
        | UnknownVariant
    )
    ChatAction: TypeAlias = (
        ChatTurnStartedAction
        | ChatDeltaAction
        | ChatResponsePartAction
        | ChatToolCallStartAction
        | ChatToolCallDeltaAction
        | ChatToolCallReadyAction
        | ChatToolCallConfirmedAction
        | ChatToolCallCompleteAction
        | ChatToolCallResultConfirmedAction
        | ChatToolCallContentChangedAction
        | ChatToolCallAuthRequiredAction
        | ChatToolCallAuthResolvedAction
        | ChatTurnCompleteAction
        | ChatTurnCancelledAction
        | ChatErrorAction
        | ChatActivityChangedAction
        | ChatWorkingDirectorySetAction
        | ChatWorkingDirectoryRemovedAction
        | ChatUsageAction
        | ChatReasoningAction
        | ChatPendingMessageSetAction
        | ChatPendingMessageRemovedAction
        | ChatQueuedMessagesReorderedAction
        | ChatDraftChangedAction
        | ChatInputRequestedAction
        | ChatInputAnswerChangedAction
        | ChatInputCompletedAction
        | ChatTruncatedAction
        | ChatTurnsLoadedAction
        | UnknownVariant
    )
    ChatInputAnswer: TypeAlias = (
        ChatInputAnswered
        | ChatInputSkipped
        | UnknownVariant
    )
    ChatInputAnswerValue: TypeAlias = (
        ChatInputTextAnswerValue
        | ChatInputNumberAnswerValue
        | ChatInputBooleanAnswerValue
        | ChatInputSelectedAnswerValue
        | ChatInputSelectedManyAnswerValue
        | UnknownVariant
    )
    ChatInputQuestion: TypeAlias = (
        ChatInputTextQuestion
        | ChatInputNumberQuestion
        | ChatInputBooleanQuestion
        | ChatInputSingleSelectQuestion
        | ChatInputMultiSelectQuestion
        | UnknownVariant
    )
    ChatOrigin: TypeAlias = (
        ChatOriginUser
        | ChatOriginFork
        | ChatOriginSideChat
        | ChatOriginTool
        | UnknownVariant
    )
    ChatSource: TypeAlias = (
        ForkChatSource
        | SideChatSource
        | UnknownVariant
    )
    ChildCustomization: TypeAlias = (
        AgentCustomization
        | SkillCustomization
        | PromptCustomization
        | RuleCustomization
        | HookCustomization
        | McpServerCustomization
        | UnknownVariant
    )
    Customization: TypeAlias = (
        PluginCustomization
        | DirectoryCustomization
        | McpServerCustomization
        | UnknownVariant
    )
    CustomizationLoadState: TypeAlias = (
        CustomizationLoadingState
        | CustomizationLoadedState
        | CustomizationDegradedState
        | CustomizationErrorState
        | UnknownVariant
    )
    McpServerState: TypeAlias = (
        McpServerStartingState
        | McpServerReadyState
        | McpServerAuthRequiredState
        | McpServerErrorState
        | McpServerStoppedState
        | UnknownVariant
    )
    MessageAttachment: TypeAlias = (
        SimpleMessageAttachment
        | MessageEmbeddedResourceAttachment
        | MessageResourceAttachment
        | MessageAnnotationsAttachment
        | MessageChatAttachment
        | UnknownVariant
    )
    ResourceWatchAction: TypeAlias = (
        ResourceWatchChangedAction
        | UnknownVariant
    )
    ResponsePart: TypeAlias = (
        MarkdownResponsePart
        | ResourceReponsePart
        | ToolCallResponsePart
        | ReasoningResponsePart
        | SystemNotificationResponsePart
        | InputRequestResponsePart
        | UnknownVariant
    )
    RootAction: TypeAlias = (
        RootAgentsChangedAction
        | RootActiveSessionsChangedAction
        | RootTerminalsChangedAction
        | RootConfigChangedAction
        | UnknownVariant
    )
    SessionAction: TypeAlias = (
        SessionReadyAction
        | SessionCreationFailedAction
        | SessionChatAddedAction
        | SessionChatRemovedAction
        | SessionChatUpdatedAction
        | SessionDefaultChatChangedAction
        | SessionTitleChangedAction
        | SessionServerToolsChangedAction
        | SessionActiveClientSetAction
        | SessionActiveClientRemovedAction
        | SessionWorkingDirectorySetAction
        | SessionWorkingDirectoryRemovedAction
        | SessionInputNeededSetAction
        | SessionInputNeededRemovedAction
        | SessionCustomizationsChangedAction
        | SessionCustomizationToggledAction
        | SessionCustomizationUpdatedAction
        | SessionCustomizationRemovedAction
        | SessionMcpServerStateChangedAction
        | SessionMcpServerStartRequestedAction
        | SessionMcpServerStopRequestedAction
        | SessionIsReadChangedAction
        | SessionIsArchivedChangedAction
        | SessionActivityChangedAction
        | SessionChangesetsChangedAction
        | SessionConfigChangedAction
        | SessionMetaChangedAction
        | UnknownVariant
    )
    SessionInputRequest: TypeAlias = (
        SessionChatInputRequest
        | SessionToolConfirmationRequest
        | SessionToolClientExecutionRequest
        | SessionToolAuthenticationRequest
        | UnknownVariant
    )
    SnapshotState: TypeAlias = (
        RootState
        | SessionState
        | TerminalState
        | ChangesetState
        | ResourceWatchState
        | AnnotationsState
        | ChatState
        | UnknownVariant
    )
    StateAction: TypeAlias = (
        RootAgentsChangedAction
        | RootActiveSessionsChangedAction
        | RootTerminalsChangedAction
        | RootConfigChangedAction
        | SessionReadyAction
        | SessionCreationFailedAction
        | SessionChatAddedAction
        | SessionChatRemovedAction
        | SessionChatUpdatedAction
        | SessionDefaultChatChangedAction
        | SessionTitleChangedAction
        | SessionServerToolsChangedAction
        | SessionActiveClientSetAction
        | SessionActiveClientRemovedAction
        | SessionWorkingDirectorySetAction
        | SessionWorkingDirectoryRemovedAction
        | SessionInputNeededSetAction
        | SessionInputNeededRemovedAction
        | SessionCustomizationsChangedAction
        | SessionCustomizationToggledAction
        | SessionCustomizationUpdatedAction
        | SessionCustomizationRemovedAction
        | SessionMcpServerStateChangedAction
        | SessionMcpServerStartRequestedAction
        | SessionMcpServerStopRequestedAction
        | SessionIsReadChangedAction
        | SessionIsArchivedChangedAction
        | SessionActivityChangedAction
        | SessionChangesetsChangedAction
        | SessionConfigChangedAction
        | SessionMetaChangedAction
        | ChatTurnStartedAction
        | ChatDeltaAction
        | ChatResponsePartAction
        | ChatToolCallStartAction
        | ChatToolCallDeltaAction
        | ChatToolCallReadyAction
        | ChatToolCallConfirmedAction
        | ChatToolCallCompleteAction
        | ChatToolCallResultConfirmedAction
        | ChatToolCallContentChangedAction
        | ChatToolCallAuthRequiredAction
        | ChatToolCallAuthResolvedAction
        | ChatTurnCompleteAction
        | ChatTurnCancelledAction
        | ChatErrorAction
        | ChatActivityChangedAction
        | ChatWorkingDirectorySetAction
        | ChatWorkingDirectoryRemovedAction
        | ChatUsageAction
        | ChatReasoningAction
        | ChatPendingMessageSetAction
        | ChatPendingMessageRemovedAction
        | ChatQueuedMessagesReorderedAction
        | ChatDraftChangedAction
        | ChatInputRequestedAction
        | ChatInputAnswerChangedAction
        | ChatInputCompletedAction
        | ChatTruncatedAction
        | ChatTurnsLoadedAction
        | ChangesetStatusChangedAction
        | ChangesetFileSetAction
        | ChangesetFileRemovedAction
        | ChangesetFilesReviewChangedAction
        | ChangesetContentChangedAction
        | ChangesetOperationsChangedAction
        | ChangesetOperationStatusChangedAction
        | ChangesetClearedAction
        | AnnotationsSetAction
        | AnnotationsUpdatedAction
        | AnnotationsRemovedAction
        | AnnotationsEntrySetAction
        | AnnotationsEntryRemovedAction
        | TerminalDataAction
        | TerminalInputAction
        | TerminalResizedAction
        | TerminalClaimedAction
        | TerminalTitleChangedAction
        | TerminalCwdChangedAction
        | TerminalExitedAction
        | TerminalClearedAction
        | TerminalCommandDetectionAvailableAction
        | TerminalCommandExecutedAction
        | TerminalCommandFinishedAction
        | ResourceWatchChangedAction
        | UnknownVariant
    )
    TerminalAction: TypeAlias = (
        TerminalDataAction
        | TerminalInputAction
        | TerminalResizedAction
        | TerminalClaimedAction
        | TerminalTitleChangedAction
        | TerminalCwdChangedAction
        | TerminalExitedAction
        | TerminalClearedAction
        | TerminalCommandDetectionAvailableAction
        | TerminalCommandExecutedAction
        | TerminalCommandFinishedAction
        | UnknownVariant
    )
    TerminalClaim: TypeAlias = (
        TerminalClientClaim
        | TerminalSessionClaim
        | UnknownVariant
    )
    TerminalContentPart: TypeAlias = (
        TerminalUnclassifiedPart
        | TerminalCommandPart
        | UnknownVariant
    )
    ToolCallConfirmationState: TypeAlias = (
        ToolCallPendingConfirmationState
        | ToolCallPendingResultConfirmationState
        | UnknownVariant
    )
    ToolCallContributor: TypeAlias = (
        ToolCallClientContributor
        | ToolCallMcpContributor
        | UnknownVariant
    )
    ToolCallRiskAssessment: TypeAlias = (
        ToolCallRiskAssessmentLoadingState
        | ToolCallRiskAssessmentCompleteState
        | UnknownVariant
    )
    ToolCallState: TypeAlias = (
        ToolCallStreamingState
        | ToolCallPendingConfirmationState
        | ToolCallRunningState
        | ToolCallAuthRequiredState
        | ToolCallPendingResultConfirmationState
        | ToolCallCompletedState
        | ToolCallCancelledState
        | UnknownVariant
    )
    ToolResultContent: TypeAlias = (
        ToolResultTextContent
        | ToolResultEmbeddedResourceContent
        | ToolResultResourceContent
        | ToolResultFileEditContent
        | ToolResultTerminalContent
        | ToolResultSubagentContent
        | UnknownVariant
    )
else:
    AnnotationsAction = open_union(
        'AnnotationsAction',
        'type',
        {
            'annotations/set': AnnotationsSetAction,
            'annotations/updated': AnnotationsUpdatedAction,
            'annotations/removed': AnnotationsRemovedAction,
            'annotations/entrySet': AnnotationsEntrySetAction,
            'annotations/entryRemoved': AnnotationsEntryRemovedAction,
        },
    )
    ChangesetAction = open_union(
        'ChangesetAction',
        'type',
        {
            'changeset/statusChanged': ChangesetStatusChangedAction,
            'changeset/fileSet': ChangesetFileSetAction,
            'changeset/fileRemoved': ChangesetFileRemovedAction,
            'changeset/filesReviewChanged': ChangesetFilesReviewChangedAction,
            'changeset/contentChanged': ChangesetContentChangedAction,
            'changeset/operationsChanged': ChangesetOperationsChangedAction,
            'changeset/operationStatusChanged': ChangesetOperationStatusChangedAction,
            'changeset/cleared': ChangesetClearedAction,
        },
    )
    ChangesetOperationTarget = open_union(
        'ChangesetOperationTarget',
        'kind',
        {
            'resource': ChangesetOperationTargetResource,
            'range': ChangesetOperationTargetRange,
        },
    )
    ChatToolCallConfirmedAction = open_union(
        'ChatToolCallConfirmedAction',
        'approved',
        {
            True: ChatToolCallApprovedAction,
            False: ChatToolCallDeniedAction,
        },
    )
    ChatAction = open_union(
        'ChatAction',
        'type',
        {
            'chat/turnStarted': ChatTurnStartedAction,
            'chat/delta': ChatDeltaAction,
            'chat/responsePart': ChatResponsePartAction,
            'chat/toolCallStart': ChatToolCallStartAction,
            'chat/toolCallDelta': ChatToolCallDeltaAction,
            'chat/toolCallReady': ChatToolCallReadyAction,
            'chat/toolCallConfirmed': ChatToolCallConfirmedAction,
            'chat/toolCallComplete': ChatToolCallCompleteAction,
            'chat/toolCallResultConfirmed': ChatToolCallResultConfirmedAction,
            'chat/toolCallContentChanged': ChatToolCallContentChangedAction,
            'chat/toolCallAuthRequired': ChatToolCallAuthRequiredAction,
            'chat/toolCallAuthResolved': ChatToolCallAuthResolvedAction,
            'chat/turnComplete': ChatTurnCompleteAction,
            'chat/turnCancelled': ChatTurnCancelledAction,
            'chat/error': ChatErrorAction,
            'chat/activityChanged': ChatActivityChangedAction,
            'chat/workingDirectorySet': ChatWorkingDirectorySetAction,
            'chat/workingDirectoryRemoved': ChatWorkingDirectoryRemovedAction,
            'chat/usage': ChatUsageAction,
            'chat/reasoning': ChatReasoningAction,
            'chat/pendingMessageSet': ChatPendingMessageSetAction,
            'chat/pendingMessageRemoved': ChatPendingMessageRemovedAction,
            'chat/queuedMessagesReordered': ChatQueuedMessagesReorderedAction,
            'chat/draftChanged': ChatDraftChangedAction,
            'chat/inputRequested': ChatInputRequestedAction,
            'chat/inputAnswerChanged': ChatInputAnswerChangedAction,
            'chat/inputCompleted': ChatInputCompletedAction,
            'chat/truncated': ChatTruncatedAction,
            'chat/turnsLoaded': ChatTurnsLoadedAction,
        },
    )
    ChatInputAnswer = open_union(
        'ChatInputAnswer',
        'state',
        {
            'draft': ChatInputAnswered,
            'submitted': ChatInputAnswered,
            'skipped': ChatInputSkipped,
        },
    )
    ChatInputAnswerValue = open_union(
        'ChatInputAnswerValue',
        'kind',
        {
            'text': ChatInputTextAnswerValue,
            'number': ChatInputNumberAnswerValue,
            'boolean': ChatInputBooleanAnswerValue,
            'selected': ChatInputSelectedAnswerValue,
            'selected-many': ChatInputSelectedManyAnswerValue,
        },
    )
    ChatInputQuestion = open_union(
        'ChatInputQuestion',
        'kind',
        {
            'text': ChatInputTextQuestion,
            'number': ChatInputNumberQuestion,
            'integer': ChatInputNumberQuestion,
            'boolean': ChatInputBooleanQuestion,
            'single-select': ChatInputSingleSelectQuestion,
            'multi-select': ChatInputMultiSelectQuestion,
        },
    )
    ChatOrigin = open_union(
        'ChatOrigin',
        'kind',
        {
            'user': ChatOriginUser,
            'fork': ChatOriginFork,
            'sideChat': ChatOriginSideChat,
            'tool': ChatOriginTool,
        },
    )
    ChatSource = open_union(
        'ChatSource',
        'kind',
        {
            'fork': ForkChatSource,
            'sideChat': SideChatSource,
        },
    )
    ChildCustomization = open_union(
        'ChildCustomization',
        'type',
        {
            'agent': AgentCustomization,
            'skill': SkillCustomization,
            'prompt': PromptCustomization,
            'rule': RuleCustomization,
            'hook': HookCustomization,
            'mcpServer': McpServerCustomization,
        },
    )
    Customization = open_union(
        'Customization',
        'type',
        {
            'plugin': PluginCustomization,
            'directory': DirectoryCustomization,
            'mcpServer': McpServerCustomization,
        },
    )
    CustomizationLoadState = open_union(
        'CustomizationLoadState',
        'kind',
        {
            'loading': CustomizationLoadingState,
            'loaded': CustomizationLoadedState,
            'degraded': CustomizationDegradedState,
            'error': CustomizationErrorState,
        },
    )
    McpServerState = open_union(
        'McpServerState',
        'kind',
        {
            'starting': McpServerStartingState,
            'ready': McpServerReadyState,
            'authRequired': McpServerAuthRequiredState,
            'error': McpServerErrorState,
            'stopped': McpServerStoppedState,
        },
    )
    MessageAttachment = open_union(
        'MessageAttachment',
        'type',
        {
            'simple': SimpleMessageAttachment,
            'embeddedResource': MessageEmbeddedResourceAttachment,
            'resource': MessageResourceAttachment,
            'annotations': MessageAnnotationsAttachment,
            'chat': MessageChatAttachment,
        },
    )
    ResourceWatchAction = open_union(
        'ResourceWatchAction',
        'type',
        {
            'resourceWatch/changed': ResourceWatchChangedAction,
        },
    )
    ResponsePart = open_union(
        'ResponsePart',
        'kind',
        {
            'markdown': MarkdownResponsePart,
            'contentRef': ResourceReponsePart,
            'toolCall': ToolCallResponsePart,
            'reasoning': ReasoningResponsePart,
            'systemNotification': SystemNotificationResponsePart,
            'inputRequest': InputRequestResponsePart,
        },
    )
    RootAction = open_union(
        'RootAction',
        'type',
        {
            'root/agentsChanged': RootAgentsChangedAction,
            'root/activeSessionsChanged': RootActiveSessionsChangedAction,
            'root/terminalsChanged': RootTerminalsChangedAction,
            'root/configChanged': RootConfigChangedAction,
        },
    )
    SessionAction = open_union(
        'SessionAction',
        'type',
        {
            'session/ready': SessionReadyAction,
            'session/creationFailed': SessionCreationFailedAction,
            'session/chatAdded': SessionChatAddedAction,
            'session/chatRemoved': SessionChatRemovedAction,
            'session/chatUpdated': SessionChatUpdatedAction,
            'session/defaultChatChanged': SessionDefaultChatChangedAction,
            'session/titleChanged': SessionTitleChangedAction,
            'session/serverToolsChanged': SessionServerToolsChangedAction,
            'session/activeClientSet': SessionActiveClientSetAction,
            'session/activeClientRemoved': SessionActiveClientRemovedAction,
            'session/workingDirectorySet': SessionWorkingDirectorySetAction,
            'session/workingDirectoryRemoved': SessionWorkingDirectoryRemovedAction,
            'session/inputNeededSet': SessionInputNeededSetAction,
            'session/inputNeededRemoved': SessionInputNeededRemovedAction,
            'session/customizationsChanged': SessionCustomizationsChangedAction,
            'session/customizationToggled': SessionCustomizationToggledAction,
            'session/customizationUpdated': SessionCustomizationUpdatedAction,
            'session/customizationRemoved': SessionCustomizationRemovedAction,
            'session/mcpServerStateChanged': SessionMcpServerStateChangedAction,
            'session/mcpServerStartRequested': SessionMcpServerStartRequestedAction,
            'session/mcpServerStopRequested': SessionMcpServerStopRequestedAction,
            'session/isReadChanged': SessionIsReadChangedAction,
            'session/isArchivedChanged': SessionIsArchivedChangedAction,
            'session/activityChanged': SessionActivityChangedAction,
            'session/changesetsChanged': SessionChangesetsChangedAction,
            'session/configChanged': SessionConfigChangedAction,
            'session/metaChanged': SessionMetaChangedAction,
        },
    )
    SessionInputRequest = open_union(
        'SessionInputRequest',
        'kind',
        {
            'chatInput': SessionChatInputRequest,
            'toolConfirmation': SessionToolConfirmationRequest,
            'toolClientExecution': SessionToolClientExecutionRequest,
            'toolAuthentication': SessionToolAuthenticationRequest,
        },
    )
    SnapshotState = shape_union(
        'SnapshotState', (('agents', RootState), ('provider', SessionState), ('content', TerminalState), ('files', ChangesetState), ('root', ResourceWatchState), ('resource', ChatState), ('annotations', AnnotationsState),)
    )
    StateAction = open_union(
        'StateAction',
        'type',
        {
            'root/agentsChanged': RootAgentsChangedAction,
            'root/activeSessionsChanged': RootActiveSessionsChangedAction,
            'root/terminalsChanged': RootTerminalsChangedAction,
            'root/configChanged': RootConfigChangedAction,
            'session/ready': SessionReadyAction,
            'session/creationFailed': SessionCreationFailedAction,
            'session/chatAdded': SessionChatAddedAction,
            'session/chatRemoved': SessionChatRemovedAction,
            'session/chatUpdated': SessionChatUpdatedAction,
            'session/defaultChatChanged': SessionDefaultChatChangedAction,
            'session/titleChanged': SessionTitleChangedAction,
            'session/serverToolsChanged': SessionServerToolsChangedAction,
            'session/activeClientSet': SessionActiveClientSetAction,
            'session/activeClientRemoved': SessionActiveClientRemovedAction,
            'session/workingDirectorySet': SessionWorkingDirectorySetAction,
            'session/workingDirectoryRemoved': SessionWorkingDirectoryRemovedAction,
            'session/inputNeededSet': SessionInputNeededSetAction,
            'session/inputNeededRemoved': SessionInputNeededRemovedAction,
            'session/customizationsChanged': SessionCustomizationsChangedAction,
            'session/customizationToggled': SessionCustomizationToggledAction,
            'session/customizationUpdated': SessionCustomizationUpdatedAction,
            'session/customizationRemoved': SessionCustomizationRemovedAction,
            'session/mcpServerStateChanged': SessionMcpServerStateChangedAction,
            'session/mcpServerStartRequested': SessionMcpServerStartRequestedAction,
            'session/mcpServerStopRequested': SessionMcpServerStopRequestedAction,
            'session/isReadChanged': SessionIsReadChangedAction,
            'session/isArchivedChanged': SessionIsArchivedChangedAction,
            'session/activityChanged': SessionActivityChangedAction,
            'session/changesetsChanged': SessionChangesetsChangedAction,
            'session/configChanged': SessionConfigChangedAction,
            'session/metaChanged': SessionMetaChangedAction,
            'chat/turnStarted': ChatTurnStartedAction,
            'chat/delta': ChatDeltaAction,
            'chat/responsePart': ChatResponsePartAction,
            'chat/toolCallStart': ChatToolCallStartAction,
            'chat/toolCallDelta': ChatToolCallDeltaAction,
            'chat/toolCallReady': ChatToolCallReadyAction,
            'chat/toolCallConfirmed': ChatToolCallConfirmedAction,
            'chat/toolCallComplete': ChatToolCallCompleteAction,
            'chat/toolCallResultConfirmed': ChatToolCallResultConfirmedAction,
            'chat/toolCallContentChanged': ChatToolCallContentChangedAction,
            'chat/toolCallAuthRequired': ChatToolCallAuthRequiredAction,
            'chat/toolCallAuthResolved': ChatToolCallAuthResolvedAction,
            'chat/turnComplete': ChatTurnCompleteAction,
            'chat/turnCancelled': ChatTurnCancelledAction,
            'chat/error': ChatErrorAction,
            'chat/activityChanged': ChatActivityChangedAction,
            'chat/workingDirectorySet': ChatWorkingDirectorySetAction,
            'chat/workingDirectoryRemoved': ChatWorkingDirectoryRemovedAction,
            'chat/usage': ChatUsageAction,
            'chat/reasoning': ChatReasoningAction,
            'chat/pendingMessageSet': ChatPendingMessageSetAction,
            'chat/pendingMessageRemoved': ChatPendingMessageRemovedAction,
            'chat/queuedMessagesReordered': ChatQueuedMessagesReorderedAction,
            'chat/draftChanged': ChatDraftChangedAction,
            'chat/inputRequested': ChatInputRequestedAction,
            'chat/inputAnswerChanged': ChatInputAnswerChangedAction,
            'chat/inputCompleted': ChatInputCompletedAction,
            'chat/truncated': ChatTruncatedAction,
            'chat/turnsLoaded': ChatTurnsLoadedAction,
            'changeset/statusChanged': ChangesetStatusChangedAction,
            'changeset/fileSet': ChangesetFileSetAction,
            'changeset/fileRemoved': ChangesetFileRemovedAction,
            'changeset/filesReviewChanged': ChangesetFilesReviewChangedAction,
            'changeset/contentChanged': ChangesetContentChangedAction,
            'changeset/operationsChanged': ChangesetOperationsChangedAction,
            'changeset/operationStatusChanged': ChangesetOperationStatusChangedAction,
            'changeset/cleared': ChangesetClearedAction,
            'annotations/set': AnnotationsSetAction,
            'annotations/updated': AnnotationsUpdatedAction,
            'annotations/removed': AnnotationsRemovedAction,
            'annotations/entrySet': AnnotationsEntrySetAction,
            'annotations/entryRemoved': AnnotationsEntryRemovedAction,
            'terminal/data': TerminalDataAction,
            'terminal/input': TerminalInputAction,
            'terminal/resized': TerminalResizedAction,
            'terminal/claimed': TerminalClaimedAction,
            'terminal/titleChanged': TerminalTitleChangedAction,
            'terminal/cwdChanged': TerminalCwdChangedAction,
            'terminal/exited': TerminalExitedAction,
            'terminal/cleared': TerminalClearedAction,
            'terminal/commandDetectionAvailable': TerminalCommandDetectionAvailableAction,
            'terminal/commandExecuted': TerminalCommandExecutedAction,
            'terminal/commandFinished': TerminalCommandFinishedAction,
            'resourceWatch/changed': ResourceWatchChangedAction,
        },
    )
    TerminalAction = open_union(
        'TerminalAction',
        'type',
        {
            'terminal/data': TerminalDataAction,
            'terminal/input': TerminalInputAction,
            'terminal/resized': TerminalResizedAction,
            'terminal/claimed': TerminalClaimedAction,
            'terminal/titleChanged': TerminalTitleChangedAction,
            'terminal/cwdChanged': TerminalCwdChangedAction,
            'terminal/exited': TerminalExitedAction,
            'terminal/cleared': TerminalClearedAction,
            'terminal/commandDetectionAvailable': TerminalCommandDetectionAvailableAction,
            'terminal/commandExecuted': TerminalCommandExecutedAction,
            'terminal/commandFinished': TerminalCommandFinishedAction,
        },
    )
    TerminalClaim = open_union(
        'TerminalClaim',
        'kind',
        {
            'client': TerminalClientClaim,
            'session': TerminalSessionClaim,
        },
    )
    TerminalContentPart = open_union(
        'TerminalContentPart',
        'type',
        {
            'unclassified': TerminalUnclassifiedPart,
            'command': TerminalCommandPart,
        },
    )
    ToolCallConfirmationState = open_union(
        'ToolCallConfirmationState',
        'status',
        {
            'pending-confirmation': ToolCallPendingConfirmationState,
            'pending-result-confirmation': ToolCallPendingResultConfirmationState,
        },
    )
    ToolCallContributor = open_union(
        'ToolCallContributor',
        'kind',
        {
            'client': ToolCallClientContributor,
            'mcp': ToolCallMcpContributor,
        },
    )
    ToolCallRiskAssessment = open_union(
        'ToolCallRiskAssessment',
        'status',
        {
            'loading': ToolCallRiskAssessmentLoadingState,
            'complete': ToolCallRiskAssessmentCompleteState,
        },
    )
    ToolCallState = open_union(
        'ToolCallState',
        'status',
        {
            'streaming': ToolCallStreamingState,
            'pending-confirmation': ToolCallPendingConfirmationState,
            'running': ToolCallRunningState,
            'auth-required': ToolCallAuthRequiredState,
            'pending-result-confirmation': ToolCallPendingResultConfirmationState,
            'completed': ToolCallCompletedState,
            'cancelled': ToolCallCancelledState,
        },
    )
    ToolResultContent = open_union(
        'ToolResultContent',
        'type',
        {
            'text': ToolResultTextContent,
            'embeddedResource': ToolResultEmbeddedResourceContent,
            'resource': ToolResultResourceContent,
            'fileEdit': ToolResultFileEditContent,
            'terminal': ToolResultTerminalContent,
            'subagent': ToolResultSubagentContent,
        },
    )


#: Every named wire type, by its spec name (enums map to their wire type).
WIRE_TYPES: dict[str, Any] = {
    'ActionEnvelope': ActionEnvelope,
    'ActionOrigin': ActionOrigin,
    'ActiveTurn': ActiveTurn,
    'AgentCapabilities': AgentCapabilities,
    'AgentCustomization': AgentCustomization,
    'AgentInfo': AgentInfo,
    'AgentSelection': AgentSelection,
    'AhpMcpUiHostCapabilities': AhpMcpUiHostCapabilities,
    'AhpMcpUiHostCapabilitiesSampling': AhpMcpUiHostCapabilitiesSampling,
    'Annotation': Annotation,
    'AnnotationEntry': AnnotationEntry,
    'AnnotationsAction': AnnotationsAction,
    'AnnotationsEntryRemovedAction': AnnotationsEntryRemovedAction,
    'AnnotationsEntrySetAction': AnnotationsEntrySetAction,
    'AnnotationsRemovedAction': AnnotationsRemovedAction,
    'AnnotationsSetAction': AnnotationsSetAction,
    'AnnotationsState': AnnotationsState,
    'AnnotationsSummary': AnnotationsSummary,
    'AnnotationsUpdatedAction': AnnotationsUpdatedAction,
    'AuthRequiredErrorData': AuthRequiredErrorData,
    'AuthRequiredParams': AuthRequiredParams,
    'AuthenticateParams': AuthenticateParams,
    'AuthenticateResult': AuthenticateResult,
    'BaseParams': BaseParams,
    'ChangesSummary': ChangesSummary,
    'Changeset': Changeset,
    'ChangesetAction': ChangesetAction,
    'ChangesetCapabilities': ChangesetCapabilities,
    'ChangesetClearedAction': ChangesetClearedAction,
    'ChangesetContentChangedAction': ChangesetContentChangedAction,
    'ChangesetFile': ChangesetFile,
    'ChangesetFileRemovedAction': ChangesetFileRemovedAction,
    'ChangesetFileSetAction': ChangesetFileSetAction,
    'ChangesetFilesReviewChangedAction': ChangesetFilesReviewChangedAction,
    'ChangesetOperation': ChangesetOperation,
    'ChangesetOperationFollowUp': ChangesetOperationFollowUp,
    'ChangesetOperationStatusChangedAction': ChangesetOperationStatusChangedAction,
    'ChangesetOperationTarget': ChangesetOperationTarget,
    'ChangesetOperationTargetRange': ChangesetOperationTargetRange,
    'ChangesetOperationTargetResource': ChangesetOperationTargetResource,
    'ChangesetOperationsChangedAction': ChangesetOperationsChangedAction,
    'ChangesetState': ChangesetState,
    'ChangesetStatusChangedAction': ChangesetStatusChangedAction,
    'ChatAction': ChatAction,
    'ChatActivityChangedAction': ChatActivityChangedAction,
    'ChatDeltaAction': ChatDeltaAction,
    'ChatDraftChangedAction': ChatDraftChangedAction,
    'ChatErrorAction': ChatErrorAction,
    'ChatInputAnswer': ChatInputAnswer,
    'ChatInputAnswerChangedAction': ChatInputAnswerChangedAction,
    'ChatInputAnswerValue': ChatInputAnswerValue,
    'ChatInputAnswered': ChatInputAnswered,
    'ChatInputBooleanAnswerValue': ChatInputBooleanAnswerValue,
    'ChatInputBooleanQuestion': ChatInputBooleanQuestion,
    'ChatInputCompletedAction': ChatInputCompletedAction,
    'ChatInputMultiSelectQuestion': ChatInputMultiSelectQuestion,
    'ChatInputNumberAnswerValue': ChatInputNumberAnswerValue,
    'ChatInputNumberQuestion': ChatInputNumberQuestion,
    'ChatInputOption': ChatInputOption,
    'ChatInputQuestion': ChatInputQuestion,
    'ChatInputQuestionBase': ChatInputQuestionBase,
    'ChatInputRequest': ChatInputRequest,
    'ChatInputRequestedAction': ChatInputRequestedAction,
    'ChatInputSelectedAnswerValue': ChatInputSelectedAnswerValue,
    'ChatInputSelectedManyAnswerValue': ChatInputSelectedManyAnswerValue,
    'ChatInputSingleSelectQuestion': ChatInputSingleSelectQuestion,
    'ChatInputSkipped': ChatInputSkipped,
    'ChatInputTextAnswerValue': ChatInputTextAnswerValue,
    'ChatInputTextQuestion': ChatInputTextQuestion,
    'ChatOrigin': ChatOrigin,
    'ChatOriginFork': ChatOriginFork,
    'ChatOriginSideChat': ChatOriginSideChat,
    'ChatOriginTool': ChatOriginTool,
    'ChatOriginUser': ChatOriginUser,
    'ChatPendingMessageRemovedAction': ChatPendingMessageRemovedAction,
    'ChatPendingMessageSetAction': ChatPendingMessageSetAction,
    'ChatQueuedMessagesReorderedAction': ChatQueuedMessagesReorderedAction,
    'ChatReasoningAction': ChatReasoningAction,
    'ChatResponsePartAction': ChatResponsePartAction,
    'ChatSource': ChatSource,
    'ChatState': ChatState,
    'ChatSummary': ChatSummary,
    'ChatToolCallApprovedAction': ChatToolCallApprovedAction,
    'ChatToolCallAuthRequiredAction': ChatToolCallAuthRequiredAction,
    'ChatToolCallAuthResolvedAction': ChatToolCallAuthResolvedAction,
    'ChatToolCallCompleteAction': ChatToolCallCompleteAction,
    'ChatToolCallConfirmedAction': ChatToolCallConfirmedAction,
    'ChatToolCallContentChangedAction': ChatToolCallContentChangedAction,
    'ChatToolCallDeltaAction': ChatToolCallDeltaAction,
    'ChatToolCallDeniedAction': ChatToolCallDeniedAction,
    'ChatToolCallReadyAction': ChatToolCallReadyAction,
    'ChatToolCallResultConfirmedAction': ChatToolCallResultConfirmedAction,
    'ChatToolCallStartAction': ChatToolCallStartAction,
    'ChatTruncatedAction': ChatTruncatedAction,
    'ChatTurnCancelledAction': ChatTurnCancelledAction,
    'ChatTurnCompleteAction': ChatTurnCompleteAction,
    'ChatTurnStartedAction': ChatTurnStartedAction,
    'ChatTurnsLoadedAction': ChatTurnsLoadedAction,
    'ChatUsageAction': ChatUsageAction,
    'ChatWorkingDirectoryRemovedAction': ChatWorkingDirectoryRemovedAction,
    'ChatWorkingDirectorySetAction': ChatWorkingDirectorySetAction,
    'ChildCustomization': ChildCustomization,
    'ChildCustomizationBase': ChildCustomizationBase,
    'ClientCapabilities': ClientCapabilities,
    'ClientPluginCustomization': ClientPluginCustomization,
    'CompletionItem': CompletionItem,
    'CompletionsParams': CompletionsParams,
    'CompletionsResult': CompletionsResult,
    'ConfigPropertySchema': ConfigPropertySchema,
    'ConfigSchema': ConfigSchema,
    'ConfirmationOption': ConfirmationOption,
    'ContainerCustomizationBase': ContainerCustomizationBase,
    'ContentRef': ContentRef,
    'CreateChatParams': CreateChatParams,
    'CreateResourceWatchParams': CreateResourceWatchParams,
    'CreateResourceWatchResult': CreateResourceWatchResult,
    'CreateSessionParams': CreateSessionParams,
    'CreateTerminalParams': CreateTerminalParams,
    'Customization': Customization,
    'CustomizationBase': CustomizationBase,
    'CustomizationDegradedState': CustomizationDegradedState,
    'CustomizationErrorState': CustomizationErrorState,
    'CustomizationLoadState': CustomizationLoadState,
    'CustomizationLoadedState': CustomizationLoadedState,
    'CustomizationLoadingState': CustomizationLoadingState,
    'DirectoryCustomization': DirectoryCustomization,
    'DirectoryEntry': DirectoryEntry,
    'DispatchActionParams': DispatchActionParams,
    'DisposeChatParams': DisposeChatParams,
    'DisposeSessionParams': DisposeSessionParams,
    'DisposeTerminalParams': DisposeTerminalParams,
    'ErrorInfo': ErrorInfo,
    'FetchTurnsParams': FetchTurnsParams,
    'FetchTurnsResult': FetchTurnsResult,
    'FileEdit': FileEdit,
    'FileEditDiff': FileEditDiff,
    'FileEditSide': FileEditSide,
    'ForkChatSource': ForkChatSource,
    'HookCustomization': HookCustomization,
    'Icon': Icon,
    'Implementation': Implementation,
    'InitializeParams': InitializeParams,
    'InitializeResult': InitializeResult,
    'InputRequestResponsePart': InputRequestResponsePart,
    'InvokeChangesetOperationParams': InvokeChangesetOperationParams,
    'InvokeChangesetOperationResult': InvokeChangesetOperationResult,
    'JsonPrimitive': JsonPrimitive,
    'ListChangedCapability': ListChangedCapability,
    'ListSessionsParams': ListSessionsParams,
    'ListSessionsResult': ListSessionsResult,
    'MarkdownResponsePart': MarkdownResponsePart,
    'MarkdownString': MarkdownString,
    'McpAuthRequirement': McpAuthRequirement,
    'McpOAuthClient': McpOAuthClient,
    'McpServerAuthRequiredState': McpServerAuthRequiredState,
    'McpServerCustomization': McpServerCustomization,
    'McpServerCustomizationApps': McpServerCustomizationApps,
    'McpServerErrorState': McpServerErrorState,
    'McpServerReadyState': McpServerReadyState,
    'McpServerStartingState': McpServerStartingState,
    'McpServerState': McpServerState,
    'McpServerStoppedState': McpServerStoppedState,
    'Message': Message,
    'MessageAnnotationsAttachment': MessageAnnotationsAttachment,
    'MessageAttachment': MessageAttachment,
    'MessageAttachmentBase': MessageAttachmentBase,
    'MessageChatAttachment': MessageChatAttachment,
    'MessageEmbeddedResourceAttachment': MessageEmbeddedResourceAttachment,
    'MessageOrigin': MessageOrigin,
    'MessageResourceAttachment': MessageResourceAttachment,
    'ModelSelection': ModelSelection,
    'MultipleChatsCapability': MultipleChatsCapability,
    'MultipleWorkingDirectoriesCapability': MultipleWorkingDirectoriesCapability,
    'OtlpExportLogsParams': OtlpExportLogsParams,
    'OtlpExportMetricsParams': OtlpExportMetricsParams,
    'OtlpExportTracesParams': OtlpExportTracesParams,
    'PaginatedParams': PaginatedParams,
    'PaginatedResult': PaginatedResult,
    'PartialChatSummary': PartialChatSummary,
    'PartialSessionSummary': PartialSessionSummary,
    'PatternList': PatternList,
    'PendingMessage': PendingMessage,
    'PermissionDeniedErrorData': PermissionDeniedErrorData,
    'PingParams': PingParams,
    'PluginCustomization': PluginCustomization,
    'ProgressParams': ProgressParams,
    'ProjectInfo': ProjectInfo,
    'PromptCustomization': PromptCustomization,
    'ProtectedResourceMetadata': ProtectedResourceMetadata,
    'ReasoningResponsePart': ReasoningResponsePart,
    'ReconnectParams': ReconnectParams,
    'ReconnectReplayResult': ReconnectReplayResult,
    'ReconnectSnapshotResult': ReconnectSnapshotResult,
    'ResolveSessionConfigParams': ResolveSessionConfigParams,
    'ResolveSessionConfigResult': ResolveSessionConfigResult,
    'ResourceChange': ResourceChange,
    'ResourceCopyParams': ResourceCopyParams,
    'ResourceCopyResult': ResourceCopyResult,
    'ResourceDeleteParams': ResourceDeleteParams,
    'ResourceDeleteResult': ResourceDeleteResult,
    'ResourceListParams': ResourceListParams,
    'ResourceListResult': ResourceListResult,
    'ResourceMkdirParams': ResourceMkdirParams,
    'ResourceMkdirResult': ResourceMkdirResult,
    'ResourceMoveParams': ResourceMoveParams,
    'ResourceMoveResult': ResourceMoveResult,
    'ResourceReadParams': ResourceReadParams,
    'ResourceReadResult': ResourceReadResult,
    'ResourceReponsePart': ResourceReponsePart,
    'ResourceRequestParams': ResourceRequestParams,
    'ResourceRequestResult': ResourceRequestResult,
    'ResourceResolveParams': ResourceResolveParams,
    'ResourceResolveResult': ResourceResolveResult,
    'ResourceWatchAction': ResourceWatchAction,
    'ResourceWatchChangedAction': ResourceWatchChangedAction,
    'ResourceWatchChangedActionChanges': ResourceWatchChangedActionChanges,
    'ResourceWatchState': ResourceWatchState,
    'ResourceWriteParams': ResourceWriteParams,
    'ResourceWriteResult': ResourceWriteResult,
    'ResponsePart': ResponsePart,
    'RootAction': RootAction,
    'RootActiveSessionsChangedAction': RootActiveSessionsChangedAction,
    'RootAgentsChangedAction': RootAgentsChangedAction,
    'RootConfigChangedAction': RootConfigChangedAction,
    'RootConfigState': RootConfigState,
    'RootState': RootState,
    'RootTerminalsChangedAction': RootTerminalsChangedAction,
    'RuleCustomization': RuleCustomization,
    'SessionAction': SessionAction,
    'SessionActiveClient': SessionActiveClient,
    'SessionActiveClientRemovedAction': SessionActiveClientRemovedAction,
    'SessionActiveClientSetAction': SessionActiveClientSetAction,
    'SessionActivityChangedAction': SessionActivityChangedAction,
    'SessionAddedParams': SessionAddedParams,
    'SessionChangesetsChangedAction': SessionChangesetsChangedAction,
    'SessionChatAddedAction': SessionChatAddedAction,
    'SessionChatInputRequest': SessionChatInputRequest,
    'SessionChatRemovedAction': SessionChatRemovedAction,
    'SessionChatUpdatedAction': SessionChatUpdatedAction,
    'SessionConfigChangedAction': SessionConfigChangedAction,
    'SessionConfigCompletionsParams': SessionConfigCompletionsParams,
    'SessionConfigCompletionsResult': SessionConfigCompletionsResult,
    'SessionConfigPropertySchema': SessionConfigPropertySchema,
    'SessionConfigSchema': SessionConfigSchema,
    'SessionConfigState': SessionConfigState,
    'SessionConfigValueItem': SessionConfigValueItem,
    'SessionCreationFailedAction': SessionCreationFailedAction,
    'SessionCustomizationRemovedAction': SessionCustomizationRemovedAction,
    'SessionCustomizationToggledAction': SessionCustomizationToggledAction,
    'SessionCustomizationUpdatedAction': SessionCustomizationUpdatedAction,
    'SessionCustomizationsChangedAction': SessionCustomizationsChangedAction,
    'SessionDefaultChatChangedAction': SessionDefaultChatChangedAction,
    'SessionForkSource': SessionForkSource,
    'SessionInputNeededRemovedAction': SessionInputNeededRemovedAction,
    'SessionInputNeededSetAction': SessionInputNeededSetAction,
    'SessionInputRequest': SessionInputRequest,
    'SessionInputRequestBase': SessionInputRequestBase,
    'SessionIsArchivedChangedAction': SessionIsArchivedChangedAction,
    'SessionIsReadChangedAction': SessionIsReadChangedAction,
    'SessionMcpServerStartRequestedAction': SessionMcpServerStartRequestedAction,
    'SessionMcpServerStateChangedAction': SessionMcpServerStateChangedAction,
    'SessionMcpServerStopRequestedAction': SessionMcpServerStopRequestedAction,
    'SessionMetaChangedAction': SessionMetaChangedAction,
    'SessionMetadata': SessionMetadata,
    'SessionModelInfo': SessionModelInfo,
    'SessionReadyAction': SessionReadyAction,
    'SessionRemovedParams': SessionRemovedParams,
    'SessionServerToolsChangedAction': SessionServerToolsChangedAction,
    'SessionState': SessionState,
    'SessionSummary': SessionSummary,
    'SessionSummaryChangedParams': SessionSummaryChangedParams,
    'SessionTitleChangedAction': SessionTitleChangedAction,
    'SessionToolAuthenticationRequest': SessionToolAuthenticationRequest,
    'SessionToolClientExecutionRequest': SessionToolClientExecutionRequest,
    'SessionToolConfirmationRequest': SessionToolConfirmationRequest,
    'SessionWorkingDirectoryRemovedAction': SessionWorkingDirectoryRemovedAction,
    'SessionWorkingDirectorySetAction': SessionWorkingDirectorySetAction,
    'SideChatSelection': SideChatSelection,
    'SideChatSource': SideChatSource,
    'SimpleMessageAttachment': SimpleMessageAttachment,
    'SkillCustomization': SkillCustomization,
    'Snapshot': Snapshot,
    'SnapshotState': SnapshotState,
    'StateAction': StateAction,
    'StringOrMarkdown': StringOrMarkdown,
    'SubscribeParams': SubscribeParams,
    'SubscribeResult': SubscribeResult,
    'SubscribeView': SubscribeView,
    'SubscriptionDeliveryOptions': SubscriptionDeliveryOptions,
    'SystemNotificationResponsePart': SystemNotificationResponsePart,
    'TelemetryCapabilities': TelemetryCapabilities,
    'TerminalAction': TerminalAction,
    'TerminalClaim': TerminalClaim,
    'TerminalClaimedAction': TerminalClaimedAction,
    'TerminalClearedAction': TerminalClearedAction,
    'TerminalClientClaim': TerminalClientClaim,
    'TerminalCommandDetectionAvailableAction': TerminalCommandDetectionAvailableAction,
    'TerminalCommandExecutedAction': TerminalCommandExecutedAction,
    'TerminalCommandFinishedAction': TerminalCommandFinishedAction,
    'TerminalCommandPart': TerminalCommandPart,
    'TerminalCommandResult': TerminalCommandResult,
    'TerminalContentPart': TerminalContentPart,
    'TerminalCwdChangedAction': TerminalCwdChangedAction,
    'TerminalDataAction': TerminalDataAction,
    'TerminalExitedAction': TerminalExitedAction,
    'TerminalInfo': TerminalInfo,
    'TerminalInputAction': TerminalInputAction,
    'TerminalResizedAction': TerminalResizedAction,
    'TerminalSessionClaim': TerminalSessionClaim,
    'TerminalState': TerminalState,
    'TerminalTitleChangedAction': TerminalTitleChangedAction,
    'TerminalUnclassifiedPart': TerminalUnclassifiedPart,
    'TextPosition': TextPosition,
    'TextRange': TextRange,
    'TextSelection': TextSelection,
    'ToolAnnotations': ToolAnnotations,
    'ToolCallActionBase': ToolCallActionBase,
    'ToolCallAuthRequiredState': ToolCallAuthRequiredState,
    'ToolCallBase': ToolCallBase,
    'ToolCallCancelledState': ToolCallCancelledState,
    'ToolCallClientContributor': ToolCallClientContributor,
    'ToolCallCompletedState': ToolCallCompletedState,
    'ToolCallConfirmationState': ToolCallConfirmationState,
    'ToolCallContributor': ToolCallContributor,
    'ToolCallEdits': ToolCallEdits,
    'ToolCallError': ToolCallError,
    'ToolCallMcpContributor': ToolCallMcpContributor,
    'ToolCallParameterFields': ToolCallParameterFields,
    'ToolCallPendingConfirmationState': ToolCallPendingConfirmationState,
    'ToolCallPendingResultConfirmationState': ToolCallPendingResultConfirmationState,
    'ToolCallPostConfirmationFields': ToolCallPostConfirmationFields,
    'ToolCallResponsePart': ToolCallResponsePart,
    'ToolCallResult': ToolCallResult,
    'ToolCallRiskAssessment': ToolCallRiskAssessment,
    'ToolCallRiskAssessmentBase': ToolCallRiskAssessmentBase,
    'ToolCallRiskAssessmentCompleteState': ToolCallRiskAssessmentCompleteState,
    'ToolCallRiskAssessmentLoadingState': ToolCallRiskAssessmentLoadingState,
    'ToolCallRunningState': ToolCallRunningState,
    'ToolCallState': ToolCallState,
    'ToolCallStreamingState': ToolCallStreamingState,
    'ToolDefinition': ToolDefinition,
    'ToolResultContent': ToolResultContent,
    'ToolResultEmbeddedResourceContent': ToolResultEmbeddedResourceContent,
    'ToolResultFileEditContent': ToolResultFileEditContent,
    'ToolResultResourceContent': ToolResultResourceContent,
    'ToolResultSubagentContent': ToolResultSubagentContent,
    'ToolResultTerminalContent': ToolResultTerminalContent,
    'ToolResultTextContent': ToolResultTextContent,
    'ToolSchema': ToolSchema,
    'Turn': Turn,
    'URI': URI,
    'UnsubscribeParams': UnsubscribeParams,
    'UnsupportedProtocolVersionErrorData': UnsupportedProtocolVersionErrorData,
    'UsageInfo': UsageInfo,
    'AuthRequiredReason': str,
    'ChangesetOperationScope': str,
    'ChangesetOperationStatus': str,
    'ChangesetStatus': str,
    'ChatInputResponseKind': str,
    'ChatInteractivity': str,
    'ChildCustomizationType': str,
    'CompletionItemKind': str,
    'ConfirmationOptionKind': str,
    'ContentEncoding': str,
    'McpAuthRequiredReason': str,
    'MessageKind': str,
    'PendingMessageKind': str,
    'PolicyState': str,
    'ResourceChangeType': str,
    'ResourceType': str,
    'ResourceWriteMode': str,
    'SessionLifecycle': str,
    'ToolCallCancellationReason': str,
    'ToolCallConfirmationReason': str,
    'ToolCallRiskAssessmentKind': str,
    'TurnState': str,
    'AhpErrorCode': int,
    'JsonRpcErrorCode': int,
    'SessionStatus': int,
}
