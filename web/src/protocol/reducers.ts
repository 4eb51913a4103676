/**
 * The pure reducers of the root, session and chat channels, for the protocol
 * version a connection negotiated.
 *
 * One module, two semantics: `'1.0'` (AHP 1.0.0 and 0.9.0 connections) and
 * `'0.7'` (0.7.0 connections). They differ only where
 * `shared/spec-1.0/REDUCER-CHANGES.md` says behaviour changed; each such place
 * switches on the semantics and cites the item ("RC 8" is item 8). Actions
 * new in 1.0 (`NEW_IN_1_0`) are unknown, hence no-ops, under 0.7.
 *
 * Reference implementations: `ahp_server/protocol/reducers/` (1.0) and
 * `ahp_server/protocol/v0_7/reducers/` (0.7). Checked against the conformance
 * fixtures (`reducers.test.ts`): the 0.7 corpus in `../shared/fixtures/reducers`
 * under `'0.7'`, the 1.0 corpus in `../tests/data/fixtures-1.0/reducers` under
 * `'1.0'`. Every client and the host compute the same states with them, so a
 * page that reduces the envelopes it receives shows exactly what the host holds.
 *
 * Rules worth knowing before editing:
 *
 * - States are plain JSON objects and are never mutated: every change builds
 *   new objects along the path to it, unchanged branches are shared, and an
 *   action that changes nothing returns the very same state object.
 * - `null` and `undefined` both mean "absent" (fixtures use `null`); states
 *   this module builds never carry `undefined` values (`clean`). `""`, `[]`
 *   and `false` are values.
 * - Actions keyed by `turnId` are no-ops unless `activeTurn.id` matches.
 * - Tool-call actions update **every** part with the matching `toolCallId`;
 *   `chat/delta` and `chat/reasoning` stop at the **first** part with that id,
 *   even if it is of another kind (then nothing is appended).
 * - `modifiedAt` of a chat: under 1.0 it comes from the action data only
 *   (`turnStarted`'s `startedAt`; at turn end `startedAt` plus the clamped
 *   duration; RC 11, 12), so the 1.0 reducers read no clock. Under 0.7 the
 *   injected clock (milliseconds since the epoch) stamps it on `turnStarted`,
 *   turn end, `truncated` and the `input*` actions.
 * - Unknown action types return the state unchanged.
 */

/** States and actions are open JSON; the reducers check what they use. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;
export type Clock = () => number;

/**
 * Which behaviour the reducers follow: `'1.0'` for connections that
 * negotiated 1.0.0 or 0.9.0 (0.9 has the 1.0 reducer semantics; only newer
 * action types are missing from it, and a host never sends those), `'0.7'`
 * for 0.7.0.
 */
export type Semantics = '1.0' | '0.7';

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

// ISO-8601 date-times as the host's reference (Python's `datetime.fromisoformat`)
// reads them: extended or basic date; any one separator character; time
// `HH[:MM[:SS[.fff…]]]` (or basic `HHMMSS`); offset `Z` or `±HH[:MM[:SS[.ffffff]]]`.
const ISO_DATE_TIME =
  /^(\d{4})-?(\d{2})-?(\d{2})(?:.(\d{2})(?::?(\d{2})(?::?(\d{2})(?:[.,](\d+))?)?)?(Z|[+-]\d{2}(?::?\d{2}(?::?\d{2}(?:\.\d{1,6})?)?)?)?)?$/u;

/**
 * `timestamp` (ms since the epoch) and its sub-millisecond microseconds, or
 * `undefined` when it is not a valid date-time. Without an offset it is UTC,
 * as on the host (JavaScript would read it in the *local* zone, which a page
 * cannot share with the host; docs/protocol.md).
 */
function parseTimestamp(timestamp: unknown): number | undefined {
  if (typeof timestamp !== 'string') return undefined;
  const match = ISO_DATE_TIME.exec(timestamp);
  if (!match) return undefined;
  const [, y, mo, d, h = '0', mi = '0', s = '0', fraction = '', zone] = match;
  const [year, month, day, hour, minute, second] = [y, mo, d, h, mi, s].map(Number);
  if (year < 1 || month < 1 || month > 12 || hour > 23 || minute > 59 || second > 59) return undefined;
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day); // not Date.UTC: it maps years 0–99 to 19xx
  if (date.getUTCDate() !== day || date.getUTCMonth() !== month - 1) return undefined;
  date.setUTCHours(hour, minute, second, 0);
  let seconds = date.getTime() / 1000;
  let micros = Number(fraction.slice(0, 6).padEnd(6, '0'));
  if (zone && zone !== 'Z') {
    const sign = zone[0] === '-' ? -1 : 1;
    const [oh, om = '0', os = '0', of = ''] = zone.slice(1).match(/^(\d{2}):?(\d{2})?(?::?(\d{2}))?(?:\.(\d+))?$/u)!.slice(1);
    if (Number(oh) > 23 || Number(om) > 59 || Number(os) > 59) return undefined;
    seconds -= sign * (Number(oh) * 3600 + Number(om) * 60 + Number(os));
    micros -= sign * Number(of.padEnd(6, '0'));
    if (micros < 0) {
      micros += 1_000_000;
      seconds -= 1;
    } else if (micros >= 1_000_000) {
      micros -= 1_000_000;
      seconds += 1;
    }
  }
  return seconds * 1000 + Math.floor(micros / 1000);
}

/** The largest time a JavaScript `Date` holds, in ms either side of the epoch. */
const DATE_LIMIT = 8.64e15;

/**
 * `new Date(Date.parse(timestamp) + duration).toISOString()`, or `undefined`
 * (then the caller keeps its value): `timestamp` with any offset, plus
 * `duration` ms, printed in UTC with three fractional digits and `Z`
 * (RC 11). Sub-millisecond digits are dropped and the sum truncated toward
 * zero, as `Date` does. Unparseable text or a result outside years 1–9999
 * gives `undefined`, as the host's `add_milliseconds` does.
 */
export function addMilliseconds(timestamp: unknown, duration: number): string | undefined {
  const base = parseTimestamp(timestamp);
  if (base === undefined) return undefined;
  const total = Math.trunc(base + duration);
  if (!(Math.abs(total) <= DATE_LIMIT)) return undefined;
  const date = new Date(total);
  const year = date.getUTCFullYear();
  return year >= 1 && year <= 9999 ? date.toISOString() : undefined;
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

/**
 * Root, session and chat actions that 1.0 added (RC 5–7, 10, 13–16). A 0.7
 * reducer does not know them: under `'0.7'` they are no-ops, like any other
 * unknown action.
 */
const NEW_IN_1_0 = new Set([
  'session/workingDirectoryReplaced',
  'session/chatsReordered',
  'session/mcpServerBackgroundRequested',
  'chat/turnResume',
  'chat/backgroundWorkSet',
  'chat/backgroundWorkRemoved',
  'chat/movableChanged',
  'chat/changesetsChanged',
  'chat/canvasesChanged',
  'chat/isReadChanged',
  'chat/isArchivedChanged',
]);

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

/**
 * Whether the session's queued input requests make it InputNeeded. RC 2: under
 * 1.0 only requests that wait on the user count (every kind but
 * `toolClientExecution`); under 0.7 any request does.
 */
function blocksOnUser(requests: Json[], v: Semantics): boolean {
  if (v === '0.7') return requests.length > 0;
  return requests.some((request) => request?.kind !== 'toolClientExecution');
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

/**
 * Apply `update` to the MCP server `id`: top level first (a match that is no
 * MCP server is a no-op), else the first matching child of every container.
 * `update` returns its argument to say "not applicable".
 */
function updateMcp(state: Json, id: string, update: (entry: Json) => Json): Json {
  const entries: Json[] = state.customizations ?? [];
  const index = entries.findIndex((e) => entryId(e) === id);
  if (index >= 0) {
    if (entries[index].type !== 'mcpServer') return state;
    const updated = update(entries[index]);
    if (updated === entries[index]) return state;
    return { ...state, customizations: replaceAt(entries, index, updated) };
  }
  const edits = new Map<number, Json[]>();
  for (const [i, position] of childHits(entries, id)) {
    const children: Json[] = entries[i].children;
    if (children[position].type === 'mcpServer') {
      const updated = update(children[position]);
      if (updated !== children[position]) edits.set(i, replaceAt(children, position, updated));
    }
  }
  return withChildren(state, entries, edits);
}

/**
 * The boolean a directory or child customization shows for a decision list
 * (RC 3): the first (most specific) decision, or enabled when there is none;
 * a decision of a kind this page does not know counts as enabled.
 */
function effectiveEnabled(enablement: Json[]): boolean {
  const first = enablement[0];
  if (first === undefined || !['global', 'workspace', 'session'].includes(first?.kind)) return true;
  return first.enabled;
}

/**
 * The toggled entry. 0.7: `enabled` is set. 1.0 (RC 3): the complete decision
 * list replaces the old one; plugins and MCP servers store it as `enablement`,
 * every other customization stores its effect as `enabled`.
 */
function toggled(entry: Json, action: Json, v: Semantics): Json {
  if (v === '0.7') return { ...entry, enabled: action.enabled };
  const enablement: Json[] = action.enablement ?? [];
  if (entry.type === 'plugin' || entry.type === 'mcpServer') return { ...entry, enablement };
  return { ...entry, enabled: effectiveEnabled(enablement) };
}

/** The first top-level match, else the first child match of the first container. */
function toggleCustomization(state: Json, action: Json, v: Semantics): Json {
  const entries: Json[] = state.customizations ?? [];
  const index = entries.findIndex((e) => entryId(e) === action.id);
  if (index >= 0) {
    return { ...state, customizations: replaceAt(entries, index, toggled(entries[index], action, v)) };
  }
  const [hit] = childHits(entries, action.id);
  if (hit === undefined) return state;
  const [i, position] = hit;
  const children: Json[] = entries[i].children;
  const child = toggled(children[position], action, v);
  return withChildren(state, entries, new Map([[i, replaceAt(children, position, child)]]));
}

/**
 * RC 5: replace `directory` in place; an earlier copy of `replacement` wins
 * (then `directory` just goes), a later copy is removed, so there is never a
 * duplicate and no later entry moves into the primary slot (index 0).
 */
function replaceDirectory(state: Json, action: Json): Json {
  const dirs: string[] = state.workingDirectories ?? [];
  const index = dirs.indexOf(action.directory);
  if (index < 0) return state;
  if (dirs.slice(0, index).includes(action.replacement)) {
    return { ...state, workingDirectories: without(dirs, index) };
  }
  const later = dirs.slice(index + 1).filter((d) => d !== action.replacement);
  return { ...state, workingDirectories: [...dirs.slice(0, index), action.replacement, ...later] };
}

/** RC 6: only a complete permutation of the chats that changes their order applies. */
function reorderChats(state: Json, action: Json): Json {
  const chats: Json[] = state.chats ?? [];
  const current = chats.map((c) => c.resource);
  const order: unknown[] = Array.isArray(action.chats) ? action.chats : [];
  const known = new Set(current);
  if (
    order.length !== current.length ||
    new Set(order).size !== order.length ||
    !order.every((uri) => known.has(uri)) ||
    order.every((uri, i) => uri === current[i])
  ) {
    return state;
  }
  const byUri = new Map(chats.map((c) => [c.resource, c]));
  return { ...state, chats: order.map((uri) => byUri.get(uri)) };
}

/** RC 7: a blocking start stops blocking; any other state is left alone. */
function backgroundMcp(entry: Json): Json {
  const starting = entry.state;
  if (starting?.kind !== 'starting' || starting.blocking !== true) return entry;
  return { ...entry, state: { ...starting, blocking: false } };
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

export function reduceSession(state: Json, action: Json, v: Semantics): Json {
  if (v === '0.7' && NEW_IN_1_0.has(action.type)) return state;
  switch (action.type) {
    case 'session/ready':
      return { ...state, lifecycle: 'ready' };
    case 'session/creationFailed':
      // RC 1: the lifecycle value is `failed` at 1.0 (0.7: `creationFailed`).
      return { ...state, lifecycle: v === '0.7' ? 'creationFailed' : 'failed', creationError: action.error };
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
    case 'session/workingDirectoryReplaced':
      return replaceDirectory(state, action);
    case 'session/chatsReordered':
      return reorderChats(state, action);
    case 'session/mcpServerBackgroundRequested':
      return updateMcp(state, action.id, backgroundMcp);
    case 'session/inputNeededSet': {
      const requests = upsert(state.inputNeeded ?? [], entryId, action.request);
      const status = withInputNeeded(state.status, blocksOnUser(requests, v));
      return { ...state, inputNeeded: requests, status };
    }
    case 'session/inputNeededRemoved': {
      const open: Json[] = state.inputNeeded ?? [];
      const index = open.findIndex((r) => entryId(r) === action.id);
      if (index < 0) return state;
      const remaining = without(open, index);
      return clean({
        ...state,
        inputNeeded: remaining.length > 0 ? remaining : undefined,
        status: withInputNeeded(state.status, blocksOnUser(remaining, v)),
      });
    }
    case 'session/customizationsChanged':
      return { ...state, customizations: action.customizations };
    case 'session/customizationToggled':
      return toggleCustomization(state, action, v);
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
const KNOWN_PART_KINDS_0_7 = new Set([
  'markdown',
  'contentRef',
  'toolCall',
  'reasoning',
  'systemNotification',
  'inputRequest',
]);
/** 1.0 adds the error part (RC 8). */
const KNOWN_PART_KINDS_1_0 = new Set([...KNOWN_PART_KINDS_0_7, 'error']);

/** What a chat reducer needs besides state and action. */
interface Ctx {
  readonly v: Semantics;
  readonly now: Clock;
}

/**
 * `truncated` and the `input*` actions: under 0.7 they stamp `modifiedAt` with
 * the clock; under 1.0 they leave it alone (RC 11).
 */
function stamped(state: Json, ctx: Ctx): Json {
  return ctx.v === '0.7' ? { ...state, modifiedAt: isoTimestamp(ctx.now()) } : state;
}

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

/**
 * A late contributor on `toolCallReady` (RC 17): client ownership is fixed at
 * `toolCallStart`; only the same client refines a client's call, a late client
 * contributor never takes over another's, any other contributor replaces.
 */
function refinedContributor(current: Json, late: Json): Json {
  if (absent(late)) return current;
  if (current?.kind === 'client') {
    return late.kind === 'client' && late.clientId === current.clientId ? late : current;
  }
  return late.kind === 'client' ? current : late;
}

const toolCallTransitions: Record<string, (action: Json, v: Semantics) => ToolUpdate> = {
  'chat/toolCallDelta': (action) => (tc) => {
    if (tc.status !== 'streaming') return tc;
    return clean({
      ...tc,
      _meta: coalesce(action._meta, tc._meta),
      // Optional at 1.0 (RC 19): without content the partial input stays as it
      // is. (0.7 requires it; a 0.7 action without one appends nothing either.)
      partialInput: absent(action.content)
        ? tc.partialInput
        : (tc.partialInput ?? '') + action.content,
      invocationMessage: coalesce(action.invocationMessage, tc.invocationMessage),
    });
  },
  'chat/toolCallContentChanged': (action) => (tc) => {
    if (tc.status !== 'running') return tc;
    return clean({ ...tc, _meta: coalesce(action._meta, tc._meta), content: action.content });
  },
  'chat/toolCallReady': (action, v) => (tc) => {
    if (!['streaming', 'running', 'pending-confirmation'].includes(tc.status)) return tc;
    const pending = tc.status === 'pending-confirmation' ? tc : {};
    let base = toolCallBase(tc, action._meta);
    let toolInput: Json;
    if (v === '0.7') {
      // The auto-confirmed path takes the input from the action only; the
      // pending path keeps the input of a call that was already pending.
      toolInput = truthy(action.confirmed)
        ? action.toolInput
        : coalesce(action.toolInput, pending.toolInput);
    } else {
      // RC 17: `contributor` and `intention` may be refined; an omitted input
      // keeps the call's own on both paths (a streaming call has none).
      base = clean({
        ...base,
        contributor: refinedContributor(tc.contributor, action.contributor),
        intention: coalesce(action.intention, tc.intention),
      });
      toolInput = coalesce(action.toolInput, tc.status === 'streaming' ? undefined : tc.toolInput);
    }
    if (truthy(action.confirmed)) {
      return clean({
        ...base,
        invocationMessage: action.invocationMessage,
        toolInput,
        confirmed: action.confirmed,
        status: 'running',
      });
    }
    return clean({
      ...base,
      invocationMessage: action.invocationMessage,
      toolInput,
      status: 'pending-confirmation',
      confirmationTitle: coalesce(action.confirmationTitle, pending.confirmationTitle),
      riskAssessment: coalesce(action.riskAssessment, pending.riskAssessment),
      edits: coalesce(action.edits, pending.edits),
      editable: coalesce(action.editable, pending.editable),
      options: coalesce(action.options, pending.options),
    });
  },
  'chat/toolCallConfirmed': (action, v) => (tc) => {
    if (tc.status !== 'pending-confirmation') return tc;
    const base = toolCallBase(tc, action._meta);
    const selectedOption = resolveOption(tc.options, action.selectedOptionId);
    if (action.approved === true) {
      // RC 18: at 1.0 an edited input replaces only an inline (string) input;
      // a ContentRef input stays (the host rewrites the referenced resource).
      const editable = v === '0.7' || typeof tc.toolInput === 'string';
      return clean({
        ...base,
        invocationMessage: tc.invocationMessage,
        toolInput: editable ? coalesce(action.editedToolInput, tc.toolInput) : tc.toolInput,
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

/**
 * The id `chat/delta` and `chat/reasoning` match on (a tool call's is its
 * toolCallId; a part of a kind the version does not know is matched by `id`).
 */
export function partIdOf(part: Json, v: Semantics): unknown {
  if (part.kind === 'markdown' || part.kind === 'reasoning') return part.id;
  if (part.kind === 'toolCall') return part.toolCall?.toolCallId;
  const known = v === '0.7' ? KNOWN_PART_KINDS_0_7 : KNOWN_PART_KINDS_1_0;
  if (!known.has(part.kind)) return part.id;
  return undefined;
}

function appendText(state: Json, action: Json, kind: 'markdown' | 'reasoning', v: Semantics): Json {
  const turn = activeTurnFor(state, action.turnId);
  if (!turn) return state;
  const parts: Json[] = turn.responseParts;
  const index = parts.findIndex((part) => partIdOf(part, v) === action.partId);
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

/**
 * `turnComplete` / `turnCancelled` / `error`: the active turn moves into
 * `turns`, its unfinished tool calls cancelled, its duration clamped at 0
 * (RC 12). `chat/error` under 1.0 appends its `part` as the turn's last
 * response part and writes no `error` field (RC 8); under 0.7 the turn keeps
 * the action's `error`. `modifiedAt`: 1.0 `startedAt` plus the duration
 * (RC 11), 0.7 the clock.
 */
function endTurn(
  state: Json,
  action: Json,
  turnState: 'complete' | 'cancelled' | 'error',
  ctx: Ctx,
): Json {
  const turn = activeTurnFor(state, action.turnId);
  if (!turn) return state;
  const v1 = ctx.v === '1.0';
  const duration = Math.max(0, action.duration);
  let parts: Json[] = (turn.responseParts as Json[]).map(cancelUnfinished);
  if (v1 && turnState === 'error' && !absent(action.part)) parts = [...parts, action.part];
  const finished = clean({
    id: turn.id,
    startedAt: turn.startedAt,
    duration,
    message: turn.message,
    responseParts: parts,
    usage: turn.usage,
    state: turnState,
    error: !v1 && turnState === 'error' ? action.error : undefined,
  });
  const modifiedAt = v1
    ? (addMilliseconds(turn.startedAt, duration) ?? state.modifiedAt)
    : isoTimestamp(ctx.now());
  const ended: Json = clean({ ...state, turns: [...(state.turns ?? []), finished], modifiedAt });
  delete ended.activeTurn;
  const terminal = turnState === 'error' ? SessionStatus.Error : undefined;
  return { ...ended, status: summaryStatus(ended, terminal) };
}

function turnStarted(state: Json, action: Json, ctx: Ctx): Json {
  let started: Json = clean({
    ...state,
    activeTurn: {
      id: action.turnId,
      startedAt: action.startedAt,
      message: action.message,
      responseParts: [],
    },
    // RC 11: 1.0 takes the action's own `startedAt`; 0.7 stamps the clock.
    modifiedAt: ctx.v === '1.0' ? action.startedAt : isoTimestamp(ctx.now()),
  });
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

function truncated(state: Json, action: Json, ctx: Ctx): Json {
  let kept: Json;
  if (absent(action.turnId)) {
    kept = { ...state, turns: [] };
    delete kept.turnsNextCursor;
  } else {
    const index = (state.turns as Json[]).findIndex((t) => t.id === action.turnId);
    if (index < 0) return state;
    kept = { ...state, turns: state.turns.slice(0, index + 1) };
  }
  const cut: Json = { ...stamped(kept, ctx) };
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

function inputRequested(state: Json, action: Json, ctx: Ctx): Json {
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
  const updated = stamped(withParts(state, turn, parts), ctx);
  return { ...updated, status: summaryStatus(updated) & ~SessionStatus.IsRead };
}

function withRequest(state: Json, turn: Json, index: number, part: Json, ctx: Ctx): Json {
  return stamped(withParts(state, turn, replaceAt(turn.responseParts, index, part)), ctx);
}

function answersOrAbsent(answers: Record<string, Json>): Record<string, Json> | undefined {
  return Object.keys(answers).length > 0 ? answers : undefined;
}

function inputAnswerChanged(state: Json, action: Json, ctx: Ctx): Json {
  const turn = state.activeTurn;
  if (!turn) return state;
  const index = openRequestIndex(turn, action.requestId);
  if (index < 0) return state;
  const part = turn.responseParts[index];
  const answers: Record<string, Json> = { ...(part.request.answers ?? {}) };
  if (absent(action.answer)) delete answers[action.questionId];
  else answers[action.questionId] = action.answer;
  const request = clean({ ...part.request, answers: answersOrAbsent(answers) });
  return withRequest(state, turn, index, { ...part, request }, ctx);
}

function inputCompleted(state: Json, action: Json, ctx: Ctx): Json {
  const turn = state.activeTurn;
  if (!turn) return state;
  const index = openRequestIndex(turn, action.requestId);
  if (index < 0) return state;
  const part = turn.responseParts[index];
  const answers = { ...(part.request.answers ?? {}), ...(action.answers ?? {}) };
  const request = clean({ ...part.request, answers: answersOrAbsent(answers) });
  const updated = withRequest(state, turn, index, { ...part, request, response: action.response }, ctx);
  return { ...updated, status: summaryStatus(updated) };
}

/**
 * RC 10: reopen the latest turn when it ended in a resumable error: no active
 * turn, the last finished turn has that id, state `error`, and its last
 * response part is an error part with `resumable: true`. It becomes the
 * active turn again (the error part stays); `startedAt` falls back to the
 * chat's `modifiedAt`; status from the active turn, IsRead cleared;
 * `modifiedAt` untouched.
 */
function turnResume(state: Json, action: Json): Json {
  const turns: Json[] = state.turns ?? [];
  if (!absent(state.activeTurn) || turns.length === 0) return state;
  const turn = turns[turns.length - 1];
  const parts: Json[] = turn.responseParts ?? [];
  const last = parts[parts.length - 1];
  if (
    turn.id !== action.turnId ||
    turn.state !== 'error' ||
    last?.kind !== 'error' ||
    last.resumable !== true
  ) {
    return state;
  }
  const reopened = {
    ...state,
    turns: turns.slice(0, -1),
    activeTurn: clean({
      id: turn.id,
      startedAt: coalesce(turn.startedAt, state.modifiedAt),
      message: turn.message,
      responseParts: parts,
      usage: turn.usage,
    }),
  };
  return { ...reopened, status: summaryStatus(reopened) & ~SessionStatus.IsRead };
}

/** RC 13: upsert by `id` (in place, else appended; the list is created if absent). */
function backgroundWorkSet(state: Json, work: Json): Json {
  return { ...state, backgroundWork: upsert(state.backgroundWork ?? [], entryId, work) };
}

/** RC 13: remove that entry (the list stays, possibly empty); no-op if absent. */
function backgroundWorkRemoved(state: Json, id: unknown): Json {
  const present: Json[] = state.backgroundWork ?? [];
  const index = present.findIndex((w) => entryId(w) === id);
  return index < 0 ? state : { ...state, backgroundWork: without(present, index) };
}

/**
 * Apply one chat action. `now` is read only under 0.7 (1.0 takes `modifiedAt`
 * from the action data, RC 11).
 */
export function reduceChat(state: Json, action: Json, now: Clock, v: Semantics): Json {
  if (v === '0.7' && NEW_IN_1_0.has(action.type)) return state;
  const ctx: Ctx = { v, now };
  const transition = toolCallTransitions[action.type];
  if (transition !== undefined) {
    const updated = updateToolCall(state, action.turnId, action.toolCallId, transition(action, v));
    return REFRESHING.has(action.type) ? refreshStatus(updated) : updated;
  }
  switch (action.type) {
    case 'chat/turnStarted':
      return turnStarted(state, action, ctx);
    case 'chat/delta':
      return appendText(state, action, 'markdown', v);
    case 'chat/reasoning':
      return appendText(state, action, 'reasoning', v);
    case 'chat/responsePart': {
      const turn = activeTurnFor(state, action.turnId);
      if (!turn) return state;
      // RC 9: at 1.0 error parts enter a turn only through chat/error.
      if (v === '1.0' && action.part?.kind === 'error') return state;
      return withParts(state, turn, [...turn.responseParts, action.part]);
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
      return endTurn(state, action, 'complete', ctx);
    case 'chat/turnCancelled':
      return endTurn(state, action, 'cancelled', ctx);
    case 'chat/error':
      return endTurn(state, action, 'error', ctx);
    case 'chat/turnResume':
      return turnResume(state, action);
    case 'chat/backgroundWorkSet':
      return backgroundWorkSet(state, action.work);
    case 'chat/backgroundWorkRemoved':
      return backgroundWorkRemoved(state, action.id);
    case 'chat/movableChanged':
      return clean({ ...state, movable: action.movable });
    case 'chat/changesetsChanged': // RC 15: an absent list deletes the key
      return clean({ ...state, changesets: action.changesets });
    case 'chat/canvasesChanged':
      return clean({ ...state, canvases: action.canvases });
    case 'chat/isReadChanged': // RC 16: the chat's own flag bits, activity kept
      return { ...state, status: withFlag(state.status, SessionStatus.IsRead, action.isRead) };
    case 'chat/isArchivedChanged':
      return {
        ...state,
        status: withFlag(state.status, SessionStatus.IsArchived, action.isArchived),
      };
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
      return truncated(state, action, ctx);
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
      return inputRequested(state, action, ctx);
    case 'chat/inputAnswerChanged':
      return inputAnswerChanged(state, action, ctx);
    case 'chat/inputCompleted':
      return inputCompleted(state, action, ctx);
    default:
      return state;
  }
}

// -- changeset -------------------------------------------------------------------------
//
// Ported from `ahp_server/protocol/reducers/changeset.py` (upstream
// `types/channels-changeset/reducer.ts`): `fileSet` upserts by id (the first
// match replaced in place, else appended); `fileRemoved` drops the first match
// only; `filesReviewChanged` sets `reviewed` on every listed file whose value
// differs (absent differs from `false`); a status other than `error` drops
// `error`; `contentChanged` replaces `files`, and `operations` only when given,
// leaving `status` and `error` (1.0); `operationsChanged` without operations
// removes the list; `cleared` empties `files` only, a no-op when already empty.
// No changeset action is time-stamped.

function changesetFileSet(state: Json, file: Json): Json {
  const files: Json[] = state.files ?? [];
  const index = files.findIndex((f) => f.id === file.id);
  return { ...state, files: index < 0 ? [...files, file] : replaceAt(files, index, file) };
}

function changesetFileRemoved(state: Json, fileId: unknown): Json {
  const files: Json[] = state.files ?? [];
  const index = files.findIndex((f) => f.id === fileId);
  return index < 0 ? state : { ...state, files: without(files, index) };
}

function changesetFilesReviewChanged(state: Json, action: Json): Json {
  const ids = new Set<unknown>(action.files ?? []);
  let changed = false;
  const files = (state.files ?? []).map((file: Json) => {
    if (!ids.has(file.id) || file.reviewed === action.reviewed) return file;
    changed = true;
    return clean({ ...file, reviewed: action.reviewed });
  });
  return changed ? { ...state, files } : state;
}

function changesetOperationStatusChanged(state: Json, action: Json): Json {
  const operations: Json[] | undefined = state.operations ?? undefined;
  if (!operations) return state;
  const index = operations.findIndex((op) => op.id === action.operationId);
  if (index < 0) return state;
  const error = action.status === 'error' ? action.error : undefined;
  const updated = clean({ ...operations[index], status: action.status, error });
  return { ...state, operations: replaceAt(operations, index, updated) };
}

export function reduceChangeset(state: Json, action: Json): Json {
  switch (action.type) {
    case 'changeset/statusChanged': // a recovered changeset never keeps a stale error
      return clean({ ...state, status: action.status, error: action.status === 'error' ? action.error : undefined });
    case 'changeset/fileSet':
      return changesetFileSet(state, action.file);
    case 'changeset/fileRemoved':
      return changesetFileRemoved(state, action.fileId);
    case 'changeset/filesReviewChanged':
      return changesetFilesReviewChanged(state, action);
    case 'changeset/contentChanged':
      return clean({ ...state, files: action.files, operations: absent(action.operations) ? state.operations : action.operations });
    case 'changeset/operationsChanged': // absent (or a peer's `null`) removes the list
      return clean({ ...state, operations: action.operations });
    case 'changeset/operationStatusChanged':
      return changesetOperationStatusChanged(state, action);
    case 'changeset/cleared':
      return (state.files ?? []).length > 0 ? { ...state, files: [] } : state;
    default:
      return state;
  }
}

// -- terminal --------------------------------------------------------------------------
//
// Ported from `ahp_server/protocol/reducers/terminal.py` (1.0: an explicit
// `lifecycle`). `terminal/data` grows the tail only: a running `command` part's
// `output`, an `unclassified` part's `value`, else a new `unclassified` part.
// `terminal/input` is side-effect-only. `terminal/exited` makes the lifecycle
// `exited` with the action's `exitCode` (absent stays absent).
// `commandFinished` writes `exitCode` and `durationMs` (absent clears) on every
// `command` part with that id; `commandExecuted` appends a running `command`
// part and, like `commandDetectionAvailable`, sets `supportsCommandDetection`.
// `cleared` resets `content` only.

function terminalData(state: Json, data: string): Json {
  const content: Json[] = state.content ?? [];
  const tail = content[content.length - 1];
  if (tail?.type === 'command' && !tail.isComplete) {
    return { ...state, content: replaceAt(content, content.length - 1, { ...tail, output: (tail.output ?? '') + data }) };
  }
  if (tail?.type === 'unclassified') {
    return { ...state, content: replaceAt(content, content.length - 1, { ...tail, value: (tail.value ?? '') + data }) };
  }
  return { ...state, content: [...content, { type: 'unclassified', value: data }] };
}

export function reduceTerminal(state: Json, action: Json): Json {
  switch (action.type) {
    case 'terminal/data':
      return terminalData(state, action.data ?? '');
    case 'terminal/input':
      return state; // forwarded to the pty; output comes back as terminal/data
    case 'terminal/resized':
      return clean({ ...state, cols: action.cols, rows: action.rows });
    case 'terminal/claimed':
      return clean({ ...state, claim: action.claim });
    case 'terminal/titleChanged':
      return clean({ ...state, title: action.title });
    case 'terminal/cwdChanged':
      return clean({ ...state, cwd: action.cwd });
    case 'terminal/exited':
      return { ...state, lifecycle: clean({ status: 'exited', exitCode: action.exitCode }) };
    case 'terminal/cleared':
      return { ...state, content: [] };
    case 'terminal/commandDetectionAvailable':
      return { ...state, supportsCommandDetection: true };
    case 'terminal/commandExecuted': {
      const part = clean({
        type: 'command',
        commandId: action.commandId,
        commandLine: action.commandLine,
        output: '',
        timestamp: action.timestamp,
        isComplete: false,
      });
      return { ...state, content: [...(state.content ?? []), part], supportsCommandDetection: true };
    }
    case 'terminal/commandFinished':
      return {
        ...state,
        content: (state.content ?? []).map((part: Json) =>
          part.type === 'command' && part.commandId === action.commandId
            ? clean({ ...part, isComplete: true, exitCode: action.exitCode, durationMs: action.durationMs })
            : part,
        ),
      };
    default:
      return state;
  }
}

export type ChannelKind = 'root' | 'session' | 'chat' | 'changeset' | 'terminal';

/**
 * Which reducer a channel uses; `ahp-session:/<id>/annotations` is not a
 * session. Changesets (`ahp-changeset:…`, an expanded `uriTemplate`) and
 * terminals (`ahp-terminal:…`) are read-only mirrors the page subscribes to at
 * 1.0 only (a chat's Changes view, its background work).
 */
export function channelKind(uri: string): ChannelKind | undefined {
  const colon = uri.indexOf(':');
  if (colon < 0) return undefined;
  const scheme = uri.slice(0, colon);
  const rest = uri.slice(colon + 1).replace(/^\/+|\/+$/g, '');
  if (scheme === 'ahp-root') return 'root';
  if (scheme === 'ahp-chat') return 'chat';
  if (scheme === 'ahp-session') return rest && !rest.includes('/') ? 'session' : undefined;
  if (scheme === 'ahp-changeset') return 'changeset';
  if (scheme === 'ahp-terminal') return 'terminal';
  return undefined;
}

/** Apply `action` with the reducer of channel `kind`, under semantics `v`. */
export function reduce(kind: ChannelKind, state: Json, action: Json, now: Clock, v: Semantics): Json {
  if (kind === 'root') return reduceRoot(state, action);
  if (kind === 'session') return reduceSession(state, action, v);
  if (kind === 'changeset') return reduceChangeset(state, action);
  if (kind === 'terminal') return reduceTerminal(state, action);
  return reduceChat(state, action, now, v);
}
