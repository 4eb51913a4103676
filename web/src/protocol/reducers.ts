/**
 * The pure reducers of the root, session and chat channels.
 *
 * Ported from the protocol's semantics (WIRE-SUMMARY §9–§11, the spec's
 * channel documents) with `ahp_server/protocol/reducers/` as the reference,
 * and checked against the conformance fixtures in `../shared/fixtures/reducers`
 * (`reducers.test.ts`). Every client and the host compute the same states with
 * them, so a page that reduces the envelopes it receives shows exactly what the
 * host holds.
 *
 * Rules worth knowing before editing:
 *
 * - States are plain JSON objects and are never mutated: every change builds
 *   new objects along the path to it, unchanged branches are shared, and an
 *   action that changes nothing returns the very same state object.
 * - `null` and `undefined` both mean "absent" (fixtures use `null`); states
 *   this module builds never carry `undefined` values (`clean`).
 * - Actions keyed by `turnId` are no-ops unless `activeTurn.id` matches.
 * - Tool-call actions update **every** part with the matching `toolCallId`;
 *   `chat/delta` and `chat/reasoning` stop at the **first** part with that id,
 *   even if it is of another kind (then nothing is appended).
 * - The clock is injected (milliseconds since the epoch): only `turnStarted`,
 *   turn end, `truncated` and the `input*` actions stamp `modifiedAt`.
 * - Unknown action types return the state unchanged.
 */

/** States and actions are open JSON; the reducers check what they use. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;
export type Clock = () => number;

export const SessionStatus = {
  Idle: 1,
  Error: 2,
  InProgress: 8,
  InputNeeded: 24,
  IsRead: 32,
  IsArchived: 64,
} as const;

/** Bits 0–4 hold exactly one activity state; bits 5 and up are flags. */
export const ACTIVITY_MASK = 0b11111;
const INPUT_NEEDED_BIT = 16;

export function withActivity(status: number, activity: number): number {
  return (status & ~ACTIVITY_MASK) | activity;
}

/** `ms` since the epoch as `Date.prototype.toISOString()` prints it. */
export function isoTimestamp(ms: number): string {
  return new Date(Math.trunc(ms)).toISOString();
}

/** A copy of `obj` without its `undefined` and `null` values (absent on the wire). */
export function clean<T extends Record<string, unknown>>(obj: T): T {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(obj)) {
    if (value !== undefined && value !== null) out[key] = value;
  }
  return out as T;
}

/** JavaScript truthiness, named for what upstream relies on (`""` is falsy). */
const truthy = (value: unknown): boolean => Boolean(value);

const absent = (value: unknown): boolean => value === undefined || value === null;

/** `value ?? fallback` that also treats `null` as absent. */
function coalesce<T>(value: T | null | undefined, fallback: T | undefined): T | undefined {
  return absent(value) ? fallback : (value as T);
}

function replaceAt<T>(items: readonly T[], index: number, item: T): T[] {
  return [...items.slice(0, index), item, ...items.slice(index + 1)];
}

function without<T>(items: readonly T[], index: number): T[] {
  return [...items.slice(0, index), ...items.slice(index + 1)];
}

function upsert<T>(items: readonly T[], key: (item: T) => unknown, item: T): T[] {
  const index = items.findIndex((existing) => key(existing) === key(item));
  return index < 0 ? [...items, item] : replaceAt(items, index, item);
}

// -- root ------------------------------------------------------------------------------

export function reduceRoot(state: Json, action: Json): Json {
  switch (action.type) {
    case 'root/agentsChanged':
      return { ...state, agents: action.agents };
    case 'root/activeSessionsChanged':
      return clean({ ...state, activeSessions: action.activeSessions });
    case 'root/terminalsChanged':
      return clean({ ...state, terminals: action.terminals });
    case 'root/configChanged':
      return mergeConfig(state, action);
    default:
      return state;
  }
}

function mergeConfig(state: Json, action: Json): Json {
  if (absent(state.config) || absent(action.config)) return state;
  const values =
    action.replace === true ? { ...action.config } : { ...state.config.values, ...action.config };
  return { ...state, config: { ...state.config, values } };
}

// -- session ---------------------------------------------------------------------------

function withFlag(status: number, flag: number, on: boolean): number {
  return on ? status | flag : status & ~flag;
}

function withInputNeeded(status: number, hasRequests: boolean): number {
  return hasRequests ? withActivity(status, SessionStatus.InputNeeded) : status & ~INPUT_NEEDED_BIT;
}

const REQUIRED_SUMMARY_FIELDS = new Set(['title', 'status', 'modifiedAt']);

/** Shallow-merge a `Partial<ChatSummary>`: `resource` never changes, `null` clears. */
export function mergeChatSummary(summary: Json, changes: Json): Json {
  const merged: Json = { ...summary };
  for (const [key, value] of Object.entries(changes ?? {})) {
    if (key === 'resource' || value === undefined) continue;
    if (value === null) {
      if (!REQUIRED_SUMMARY_FIELDS.has(key)) delete merged[key];
      continue;
    }
    merged[key] = value;
  }
  return merged;
}

const entryId = (entry: Json): unknown => entry?.id;

function isContainer(entry: Json): boolean {
  return (
    entry?.type !== 'mcpServer' && Array.isArray(entry?.children) && entry.children.length > 0
  );
}

/** Each container holding a child `childId`: index and the position of its first such child. */
function childHits(entries: Json[], childId: string): Array<[number, number]> {
  const hits: Array<[number, number]> = [];
  entries.forEach((entry, index) => {
    if (!isContainer(entry)) return;
    const position = (entry.children as Json[]).findIndex((c) => entryId(c) === childId);
    if (position >= 0) hits.push([index, position]);
  });
  return hits;
}

function withChildren(state: Json, entries: Json[], edits: Map<number, Json[]>): Json {
  if (edits.size === 0) return state;
  const updated = entries.map((entry, i) =>
    edits.has(i) ? { ...entry, children: edits.get(i) } : entry,
  );
  return { ...state, customizations: updated };
}

function updateMcp(state: Json, id: string, update: (entry: Json) => Json): Json {
  const entries: Json[] = state.customizations ?? [];
  const index = entries.findIndex((e) => entryId(e) === id);
  if (index >= 0) {
    if (entries[index].type !== 'mcpServer') return state;
    return { ...state, customizations: replaceAt(entries, index, update(entries[index])) };
  }
  const edits = new Map<number, Json[]>();
  for (const [i, position] of childHits(entries, id)) {
    const children: Json[] = entries[i].children;
    if (children[position].type === 'mcpServer') {
      edits.set(i, replaceAt(children, position, update(children[position])));
    }
  }
  return withChildren(state, entries, edits);
}

function toggleCustomization(state: Json, id: string, enabled: boolean): Json {
  const entries: Json[] = state.customizations ?? [];
  const index = entries.findIndex((e) => entryId(e) === id);
  if (index >= 0) {
    return { ...state, customizations: replaceAt(entries, index, { ...entries[index], enabled }) };
  }
  const [hit] = childHits(entries, id);
  if (hit === undefined) return state;
  const [i, position] = hit;
  const children: Json[] = entries[i].children;
  const child = { ...children[position], enabled };
  return withChildren(state, entries, new Map([[i, replaceAt(children, position, child)]]));
}

function removeCustomization(state: Json, id: string): Json {
  const entries: Json[] = state.customizations ?? [];
  const index = entries.findIndex((e) => entryId(e) === id);
  if (index >= 0) return { ...state, customizations: without(entries, index) };
  const edits = new Map<number, Json[]>();
  for (const [i, position] of childHits(entries, id)) {
    edits.set(i, without(entries[i].children, position));
  }
  return withChildren(state, entries, edits);
}

export function reduceSession(state: Json, action: Json): Json {
  switch (action.type) {
    case 'session/ready':
      return { ...state, lifecycle: 'ready' };
    case 'session/creationFailed':
      return { ...state, lifecycle: 'creationFailed', creationError: action.error };
    case 'session/chatAdded':
      return { ...state, chats: upsert(state.chats ?? [], (c: Json) => c.resource, action.summary) };
    case 'session/chatRemoved': {
      const chats: Json[] = state.chats ?? [];
      const index = chats.findIndex((c) => c.resource === action.chat);
      if (index < 0) return state;
      const next = { ...state, chats: without(chats, index) };
      if (state.defaultChat === action.chat) delete next.defaultChat;
      return next;
    }
    case 'session/chatUpdated': {
      const chats: Json[] = state.chats ?? [];
      const index = chats.findIndex((c) => c.resource === action.chat);
      if (index < 0) return state;
      return { ...state, chats: replaceAt(chats, index, mergeChatSummary(chats[index], action.changes)) };
    }
    case 'session/defaultChatChanged':
      return clean({ ...state, defaultChat: action.defaultChat });
    case 'session/titleChanged':
      return { ...state, title: action.title };
    case 'session/serverToolsChanged':
      return clean({ ...state, serverTools: action.tools });
    case 'session/activeClientSet':
      return {
        ...state,
        activeClients: upsert(state.activeClients ?? [], (c: Json) => c.clientId, action.activeClient),
      };
    case 'session/activeClientRemoved': {
      const clients: Json[] = state.activeClients ?? [];
      const index = clients.findIndex((c) => c.clientId === action.clientId);
      return index < 0 ? state : { ...state, activeClients: without(clients, index) };
    }
    case 'session/workingDirectorySet': {
      const dirs: string[] = state.workingDirectories ?? [];
      return dirs.includes(action.directory)
        ? state
        : { ...state, workingDirectories: [...dirs, action.directory] };
    }
    case 'session/workingDirectoryRemoved': {
      const dirs: string[] = state.workingDirectories ?? [];
      const index = dirs.indexOf(action.directory);
      return index < 0 ? state : { ...state, workingDirectories: without(dirs, index) };
    }
    case 'session/inputNeededSet': {
      const requests = upsert(state.inputNeeded ?? [], entryId, action.request);
      return { ...state, inputNeeded: requests, status: withInputNeeded(state.status, true) };
    }
    case 'session/inputNeededRemoved': {
      const open: Json[] = state.inputNeeded ?? [];
      const index = open.findIndex((r) => entryId(r) === action.id);
      if (index < 0) return state;
      const remaining = without(open, index);
      return clean({
        ...state,
        inputNeeded: remaining.length > 0 ? remaining : undefined,
        status: withInputNeeded(state.status, remaining.length > 0),
      });
    }
    case 'session/customizationsChanged':
      return { ...state, customizations: action.customizations };
    case 'session/customizationToggled':
      return toggleCustomization(state, action.id, action.enabled);
    case 'session/customizationUpdated':
      return {
        ...state,
        customizations: upsert(state.customizations ?? [], entryId, action.customization),
      };
    case 'session/customizationRemoved':
      return removeCustomization(state, action.id);
    case 'session/mcpServerStateChanged':
      return updateMcp(state, action.id, (entry) =>
        clean({ ...entry, state: action.state, channel: action.channel }),
      );
    case 'session/mcpServerStartRequested':
      return updateMcp(state, action.id, (entry) =>
        clean({ ...entry, state: { kind: 'starting' }, channel: undefined }),
      );
    case 'session/mcpServerStopRequested':
      return updateMcp(state, action.id, (entry) =>
        clean({ ...entry, state: { kind: 'stopped' }, channel: undefined }),
      );
    case 'session/isReadChanged':
      return { ...state, status: withFlag(state.status, SessionStatus.IsRead, action.isRead) };
    case 'session/isArchivedChanged':
      return {
        ...state,
        status: withFlag(state.status, SessionStatus.IsArchived, action.isArchived),
      };
    case 'session/activityChanged':
      return clean({ ...state, activity: action.activity });
    case 'session/changesetsChanged':
      return clean({ ...state, changesets: action.changesets });
    case 'session/configChanged':
      return mergeConfig(state, action);
    case 'session/metaChanged':
      return clean({ ...state, _meta: action._meta });
    default:
      return state;
  }
}

// -- chat ------------------------------------------------------------------------------

const BLOCKING = new Set(['pending-confirmation', 'pending-result-confirmation', 'auth-required']);
const FINISHED = new Set(['completed', 'cancelled']);
const KNOWN_TOOL_STATES = new Set([
  'streaming',
  'pending-confirmation',
  'running',
  'auth-required',
  'pending-result-confirmation',
  'completed',
  'cancelled',
]);
const KNOWN_PART_KINDS = new Set([
  'markdown',
  'contentRef',
  'toolCall',
  'reasoning',
  'systemNotification',
  'inputRequest',
]);

function hasOpenInput(turn: Json): boolean {
  return (turn.responseParts ?? []).some(
    (p: Json) => p.kind === 'inputRequest' && absent(p.response),
  );
}

function hasBlockingToolCall(turn: Json): boolean {
  return (turn.responseParts ?? []).some(
    (p: Json) => p.kind === 'toolCall' && BLOCKING.has(p.toolCall?.status),
  );
}

/** The chat's status from its active turn, flag bits kept; `terminal` (Error) overrides. */
export function summaryStatus(state: Json, terminal?: number): number {
  const turn = state.activeTurn;
  let activity: number;
  if (terminal !== undefined) activity = terminal;
  else if (turn && (hasOpenInput(turn) || hasBlockingToolCall(turn)))
    activity = SessionStatus.InputNeeded;
  else if (turn) activity = SessionStatus.InProgress;
  else activity = SessionStatus.Idle;
  return withActivity(state.status, activity);
}

function refreshStatus(state: Json): Json {
  const status = summaryStatus(state);
  return status === state.status ? state : { ...state, status };
}

function activeTurnFor(state: Json, turnId: string): Json | undefined {
  const turn = state.activeTurn;
  return turn && turn.id === turnId ? turn : undefined;
}

function withParts(state: Json, turn: Json, parts: Json[]): Json {
  return { ...state, activeTurn: { ...turn, responseParts: parts } };
}

/** The identity fields every tool-call state carries; the action's `_meta` wins. */
function toolCallBase(tc: Json, meta: unknown): Json {
  return clean({
    toolCallId: tc.toolCallId,
    toolName: tc.toolName,
    displayName: tc.displayName,
    intention: tc.intention,
    contributor: tc.contributor,
    _meta: coalesce(meta, tc._meta),
  });
}

type ToolUpdate = (tc: Json) => Json;

/** Apply `update` to every tool call `toolCallId` of the active turn (same object: no change). */
function updateToolCall(state: Json, turnId: string, toolCallId: string, update: ToolUpdate): Json {
  const turn = activeTurnFor(state, turnId);
  if (!turn) return state;
  let changed = false;
  const parts = (turn.responseParts as Json[]).map((part) => {
    if (
      part.kind !== 'toolCall' ||
      !KNOWN_TOOL_STATES.has(part.toolCall?.status) ||
      part.toolCall.toolCallId !== toolCallId
    ) {
      return part;
    }
    const updated = update(part.toolCall);
    if (updated === part.toolCall) return part;
    changed = true;
    return { ...part, toolCall: updated };
  });
  return changed ? withParts(state, turn, parts) : state;
}

function resolveOption(options: Json[] | undefined, optionId: unknown): Json | undefined {
  if (!truthy(optionId) || !Array.isArray(options)) return undefined;
  return options.find((option) => option.id === optionId);
}

const toolCallTransitions: Record<string, (action: Json) => ToolUpdate> = {
  'chat/toolCallDelta': (action) => (tc) => {
    if (tc.status !== 'streaming') return tc;
    return clean({
      ...tc,
      _meta: coalesce(action._meta, tc._meta),
      partialInput: (tc.partialInput ?? '') + action.content,
      invocationMessage: coalesce(action.invocationMessage, tc.invocationMessage),
    });
  },
  'chat/toolCallContentChanged': (action) => (tc) => {
    if (tc.status !== 'running') return tc;
    return clean({ ...tc, _meta: coalesce(action._meta, tc._meta), content: action.content });
  },
  'chat/toolCallReady': (action) => (tc) => {
    if (!['streaming', 'running', 'pending-confirmation'].includes(tc.status)) return tc;
    const base = toolCallBase(tc, action._meta);
    if (truthy(action.confirmed)) {
      return clean({
        ...base,
        invocationMessage: action.invocationMessage,
        toolInput: action.toolInput,
        confirmed: action.confirmed,
        status: 'running',
      });
    }
    const pending = tc.status === 'pending-confirmation' ? tc : {};
    return clean({
      ...base,
      invocationMessage: action.invocationMessage,
      toolInput: coalesce(action.toolInput, pending.toolInput),
      status: 'pending-confirmation',
      confirmationTitle: coalesce(action.confirmationTitle, pending.confirmationTitle),
      riskAssessment: coalesce(action.riskAssessment, pending.riskAssessment),
      edits: coalesce(action.edits, pending.edits),
      editable: coalesce(action.editable, pending.editable),
      options: coalesce(action.options, pending.options),
    });
  },
  'chat/toolCallConfirmed': (action) => (tc) => {
    if (tc.status !== 'pending-confirmation') return tc;
    const base = toolCallBase(tc, action._meta);
    const selectedOption = resolveOption(tc.options, action.selectedOptionId);
    if (action.approved === true) {
      return clean({
        ...base,
        invocationMessage: tc.invocationMessage,
        toolInput: coalesce(action.editedToolInput, tc.toolInput),
        confirmed: action.confirmed,
        selectedOption,
        status: 'running',
      });
    }
    return clean({
      ...base,
      invocationMessage: tc.invocationMessage,
      toolInput: tc.toolInput,
      status: 'cancelled',
      reason: action.reason,
      reasonMessage: action.reasonMessage,
      userSuggestion: action.userSuggestion,
      selectedOption,
    });
  },
  'chat/toolCallComplete': (action) => (tc) => {
    if (!['running', 'pending-confirmation', 'auth-required'].includes(tc.status)) return tc;
    const authRequired = tc.status === 'auth-required';
    const result = action.result ?? {};
    if (authRequired && result.success) return tc; // only a failure ends a call awaiting auth
    const pending = tc.status === 'pending-confirmation';
    const fields = clean({
      ...toolCallBase(tc, action._meta),
      invocationMessage: tc.invocationMessage,
      toolInput: tc.toolInput,
      confirmed: pending ? 'not-needed' : tc.confirmed,
      selectedOption: pending ? undefined : tc.selectedOption,
      success: result.success,
      pastTenseMessage: result.pastTenseMessage,
      content: coalesce(result.content, authRequired ? tc.content : undefined),
      structuredContent: result.structuredContent,
      error: result.error,
    });
    const confirm = truthy(action.requiresResultConfirmation) && !authRequired;
    return { ...fields, status: confirm ? 'pending-result-confirmation' : 'completed' };
  },
  'chat/toolCallResultConfirmed': (action) => (tc) => {
    if (tc.status !== 'pending-result-confirmation') return tc;
    const base = toolCallBase(tc, action._meta);
    if (action.approved) {
      return clean({
        ...base,
        invocationMessage: tc.invocationMessage,
        toolInput: tc.toolInput,
        confirmed: tc.confirmed,
        selectedOption: tc.selectedOption,
        success: tc.success,
        pastTenseMessage: tc.pastTenseMessage,
        content: tc.content,
        structuredContent: tc.structuredContent,
        error: tc.error,
        status: 'completed',
      });
    }
    return clean({
      ...base,
      invocationMessage: tc.invocationMessage,
      toolInput: tc.toolInput,
      status: 'cancelled',
      reason: 'result-denied',
      selectedOption: tc.selectedOption,
    });
  },
  'chat/toolCallAuthRequired': (action) => (tc) => {
    if (tc.status !== 'running' || tc.contributor?.kind !== 'mcp') return tc;
    return clean({
      ...toolCallBase(tc, action._meta),
      invocationMessage: tc.invocationMessage,
      toolInput: tc.toolInput,
      confirmed: tc.confirmed,
      selectedOption: tc.selectedOption,
      status: 'auth-required',
      auth: action.auth,
      content: tc.content,
    });
  },
  'chat/toolCallAuthResolved': (action) => (tc) => {
    if (tc.status !== 'auth-required') return tc;
    return clean({
      ...toolCallBase(tc, action._meta),
      invocationMessage: tc.invocationMessage,
      toolInput: tc.toolInput,
      confirmed: tc.confirmed,
      selectedOption: tc.selectedOption,
      status: 'running',
      content: tc.content,
    });
  },
};

/** Tool actions after which `status` is recomputed, even when nothing matched. */
const REFRESHING = new Set([
  'chat/toolCallReady',
  'chat/toolCallConfirmed',
  'chat/toolCallComplete',
  'chat/toolCallResultConfirmed',
  'chat/toolCallAuthRequired',
  'chat/toolCallAuthResolved',
]);

/** The id `chat/delta` and `chat/reasoning` match on (a tool call's is its toolCallId). */
export function partIdOf(part: Json): unknown {
  if (part.kind === 'markdown' || part.kind === 'reasoning') return part.id;
  if (part.kind === 'toolCall') return part.toolCall?.toolCallId;
  if (!KNOWN_PART_KINDS.has(part.kind)) return part.id;
  return undefined;
}

function appendText(state: Json, action: Json, kind: 'markdown' | 'reasoning'): Json {
  const turn = activeTurnFor(state, action.turnId);
  if (!turn) return state;
  const parts: Json[] = turn.responseParts;
  const index = parts.findIndex((part) => partIdOf(part) === action.partId);
  if (index < 0 || parts[index].kind !== kind) return state;
  const grown = { ...parts[index], content: parts[index].content + action.content };
  return withParts(state, turn, replaceAt(parts, index, grown));
}

/** At turn end, a tool call not completed or cancelled becomes cancelled ("skipped"). */
function cancelUnfinished(part: Json): Json {
  if (part.kind !== 'toolCall') return part;
  const tc = part.toolCall;
  if (FINISHED.has(tc.status) || !KNOWN_TOOL_STATES.has(tc.status)) return part;
  const streaming = tc.status === 'streaming';
  const cancelled = clean({
    ...toolCallBase(tc, undefined),
    invocationMessage: streaming ? (tc.invocationMessage ?? '') : tc.invocationMessage,
    toolInput: streaming ? undefined : tc.toolInput,
    status: 'cancelled',
    reason: 'skipped',
  });
  return { ...part, toolCall: cancelled };
}

function endTurn(
  state: Json,
  action: Json,
  turnState: 'complete' | 'cancelled' | 'error',
  now: Clock,
): Json {
  const turn = activeTurnFor(state, action.turnId);
  if (!turn) return state;
  const finished = clean({
    id: turn.id,
    startedAt: turn.startedAt,
    duration: Math.max(0, action.duration),
    message: turn.message,
    responseParts: (turn.responseParts as Json[]).map(cancelUnfinished),
    usage: turn.usage,
    state: turnState,
    error: turnState === 'error' ? action.error : undefined,
  });
  const ended: Json = {
    ...state,
    turns: [...(state.turns ?? []), finished],
    modifiedAt: isoTimestamp(now()),
  };
  delete ended.activeTurn;
  const terminal = turnState === 'error' ? SessionStatus.Error : undefined;
  return { ...ended, status: summaryStatus(ended, terminal) };
}

function turnStarted(state: Json, action: Json, now: Clock): Json {
  let started: Json = {
    ...state,
    activeTurn: {
      id: action.turnId,
      startedAt: action.startedAt,
      message: action.message,
      responseParts: [],
    },
    modifiedAt: isoTimestamp(now()),
  };
  const queuedId = action.queuedMessageId;
  if (truthy(queuedId)) {
    if (started.steeringMessage?.id === queuedId) {
      started = { ...started };
      delete started.steeringMessage;
    }
    if (Array.isArray(started.queuedMessages)) {
      const rest = (started.queuedMessages as Json[]).filter((m) => m.id !== queuedId);
      started = clean({ ...started, queuedMessages: rest.length > 0 ? rest : undefined });
    }
  }
  return { ...started, status: summaryStatus(started) & ~SessionStatus.IsRead };
}

function truncated(state: Json, action: Json, now: Clock): Json {
  let kept: Json;
  if (absent(action.turnId)) {
    kept = { ...state, turns: [] };
    delete kept.turnsNextCursor;
  } else {
    const index = (state.turns as Json[]).findIndex((t) => t.id === action.turnId);
    if (index < 0) return state;
    kept = { ...state, turns: state.turns.slice(0, index + 1) };
  }
  const cut: Json = { ...kept, modifiedAt: isoTimestamp(now()) };
  delete cut.activeTurn;
  return { ...cut, status: summaryStatus(cut) };
}

function turnsLoaded(state: Json, action: Json): Json {
  const present = new Set((state.turns as Json[]).map((t) => t.id));
  const older = (action.turns as Json[]).filter((t) => !present.has(t.id));
  return clean({
    ...state,
    turns: [...older, ...state.turns],
    turnsNextCursor: action.turnsNextCursor,
  });
}

function pendingSet(state: Json, action: Json): Json {
  const entry = { id: action.id, message: action.message };
  if (action.kind === 'steering') return { ...state, steeringMessage: entry };
  if (action.kind !== 'queued') return state;
  const queue: Json[] = state.queuedMessages ?? [];
  const index = queue.findIndex((m) => m.id === action.id);
  return {
    ...state,
    queuedMessages: index < 0 ? [...queue, entry] : replaceAt(queue, index, entry),
  };
}

function pendingRemoved(state: Json, action: Json): Json {
  if (action.kind === 'steering') {
    if (state.steeringMessage?.id !== action.id) return state;
    const next = { ...state };
    delete next.steeringMessage;
    return next;
  }
  if (action.kind !== 'queued' || !Array.isArray(state.queuedMessages)) return state;
  const rest = (state.queuedMessages as Json[]).filter((m) => m.id !== action.id);
  if (rest.length === state.queuedMessages.length) return state;
  return clean({ ...state, queuedMessages: rest.length > 0 ? rest : undefined });
}

function queuedReordered(state: Json, action: Json): Json {
  const queue: Json[] | undefined = state.queuedMessages;
  if (!Array.isArray(queue)) return state;
  const byId = new Map<string, Json>();
  for (const message of queue) if (!byId.has(message.id)) byId.set(message.id, message);
  const ordered: Json[] = [];
  const taken = new Set<string>();
  for (const id of action.order as string[]) {
    if (byId.has(id) && !taken.has(id)) {
      ordered.push(byId.get(id));
      taken.add(id);
    }
  }
  for (const message of queue) if (!taken.has(message.id)) ordered.push(message);
  return { ...state, queuedMessages: ordered };
}

/** The first **unresolved** input-request part for `requestId`. */
function openRequestIndex(turn: Json, requestId: string): number {
  return (turn.responseParts as Json[]).findIndex(
    (p) => p.kind === 'inputRequest' && absent(p.response) && p.request?.id === requestId,
  );
}

function inputRequested(state: Json, action: Json, now: Clock): Json {
  const turn = state.activeTurn;
  if (!turn) return state;
  const request = action.request;
  const index = openRequestIndex(turn, request.id);
  let parts: Json[];
  if (index < 0) {
    parts = [...turn.responseParts, { kind: 'inputRequest', request }];
  } else {
    const existing = turn.responseParts[index];
    const merged = clean({ ...request, answers: coalesce(request.answers, existing.request.answers) });
    parts = replaceAt(turn.responseParts, index, { kind: 'inputRequest', request: merged });
  }
  const updated = { ...withParts(state, turn, parts), modifiedAt: isoTimestamp(now()) };
  return { ...updated, status: summaryStatus(updated) & ~SessionStatus.IsRead };
}

function withRequest(state: Json, turn: Json, index: number, part: Json, now: Clock): Json {
  const parts = replaceAt(turn.responseParts, index, part);
  return { ...withParts(state, turn, parts), modifiedAt: isoTimestamp(now()) };
}

function answersOrAbsent(answers: Record<string, Json>): Record<string, Json> | undefined {
  return Object.keys(answers).length > 0 ? answers : undefined;
}

function inputAnswerChanged(state: Json, action: Json, now: Clock): Json {
  const turn = state.activeTurn;
  if (!turn) return state;
  const index = openRequestIndex(turn, action.requestId);
  if (index < 0) return state;
  const part = turn.responseParts[index];
  const answers: Record<string, Json> = { ...(part.request.answers ?? {}) };
  if (absent(action.answer)) delete answers[action.questionId];
  else answers[action.questionId] = action.answer;
  const request = clean({ ...part.request, answers: answersOrAbsent(answers) });
  return withRequest(state, turn, index, { ...part, request }, now);
}

function inputCompleted(state: Json, action: Json, now: Clock): Json {
  const turn = state.activeTurn;
  if (!turn) return state;
  const index = openRequestIndex(turn, action.requestId);
  if (index < 0) return state;
  const part = turn.responseParts[index];
  const answers = { ...(part.request.answers ?? {}), ...(action.answers ?? {}) };
  const request = clean({ ...part.request, answers: answersOrAbsent(answers) });
  const updated = withRequest(state, turn, index, { ...part, request, response: action.response }, now);
  return { ...updated, status: summaryStatus(updated) };
}

export function reduceChat(state: Json, action: Json, now: Clock): Json {
  const transition = toolCallTransitions[action.type];
  if (transition !== undefined) {
    const updated = updateToolCall(state, action.turnId, action.toolCallId, transition(action));
    return REFRESHING.has(action.type) ? refreshStatus(updated) : updated;
  }
  switch (action.type) {
    case 'chat/turnStarted':
      return turnStarted(state, action, now);
    case 'chat/delta':
      return appendText(state, action, 'markdown');
    case 'chat/reasoning':
      return appendText(state, action, 'reasoning');
    case 'chat/responsePart': {
      const turn = activeTurnFor(state, action.turnId);
      return turn ? withParts(state, turn, [...turn.responseParts, action.part]) : state;
    }
    case 'chat/toolCallStart': {
      const turn = activeTurnFor(state, action.turnId);
      if (!turn) return state;
      const streaming = clean({
        toolCallId: action.toolCallId,
        toolName: action.toolName,
        displayName: action.displayName,
        intention: action.intention,
        contributor: action.contributor,
        _meta: action._meta,
        status: 'streaming',
      });
      return withParts(state, turn, [...turn.responseParts, { kind: 'toolCall', toolCall: streaming }]);
    }
    case 'chat/turnComplete':
      return endTurn(state, action, 'complete', now);
    case 'chat/turnCancelled':
      return endTurn(state, action, 'cancelled', now);
    case 'chat/error':
      return endTurn(state, action, 'error', now);
    case 'chat/activityChanged':
      return clean({ ...state, activity: action.activity });
    case 'chat/workingDirectorySet': {
      const dirs: string[] = state.workingDirectories ?? [];
      return dirs.includes(action.directory)
        ? state
        : { ...state, workingDirectories: [...dirs, action.directory] };
    }
    case 'chat/workingDirectoryRemoved': {
      const dirs: string[] = state.workingDirectories ?? [];
      const index = dirs.indexOf(action.directory);
      return index < 0 ? state : { ...state, workingDirectories: without(dirs, index) };
    }
    case 'chat/usage': {
      const turn = activeTurnFor(state, action.turnId);
      return turn ? { ...state, activeTurn: { ...turn, usage: action.usage } } : state;
    }
    case 'chat/truncated':
      return truncated(state, action, now);
    case 'chat/turnsLoaded':
      return turnsLoaded(state, action);
    case 'chat/pendingMessageSet':
      return pendingSet(state, action);
    case 'chat/pendingMessageRemoved':
      return pendingRemoved(state, action);
    case 'chat/queuedMessagesReordered':
      return queuedReordered(state, action);
    case 'chat/draftChanged':
      return clean({ ...state, draft: action.draft });
    case 'chat/inputRequested':
      return inputRequested(state, action, now);
    case 'chat/inputAnswerChanged':
      return inputAnswerChanged(state, action, now);
    case 'chat/inputCompleted':
      return inputCompleted(state, action, now);
    default:
      return state;
  }
}

export type ChannelKind = 'root' | 'session' | 'chat';

/** Which reducer a channel uses; `ahp-session:/<id>/annotations` is not a session. */
export function channelKind(uri: string): ChannelKind | undefined {
  const colon = uri.indexOf(':');
  if (colon < 0) return undefined;
  const scheme = uri.slice(0, colon);
  const rest = uri.slice(colon + 1).replace(/^\/+|\/+$/g, '');
  if (scheme === 'ahp-root') return 'root';
  if (scheme === 'ahp-chat') return 'chat';
  if (scheme === 'ahp-session') return rest && !rest.includes('/') ? 'session' : undefined;
  return undefined;
}

export function reduce(kind: ChannelKind, state: Json, action: Json, now: Clock): Json {
  if (kind === 'root') return reduceRoot(state, action);
  if (kind === 'session') return reduceSession(state, action);
  return reduceChat(state, action, now);
}
