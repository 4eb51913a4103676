/**
 * The rules behind the session list (no DOM, unit-tested): titles as plain
 * text, the agents in the new-session picker with the host's default first,
 * what a summary's state is called, and the filter.
 */
import { Lexer, type Token } from 'marked';
import type { Json } from '../protocol/reducers';
import { SessionStatus } from '../protocol/reducers';
import { fileUri } from './folders';

/**
 * A title as plain text: its Markdown's text with the markup gone
 * (`**Fix** the \`bug\`` → "Fix the bug"); raw HTML tags are dropped, their
 * text kept; whitespace collapsed. Never rendered as HTML.
 */
export function plainTitle(source: string | undefined): string {
  if (!source) return '';
  const out: string[] = [];
  const walk = (tokens: Token[]): void => {
    for (const token of tokens) {
      const t = token as Json;
      if (Array.isArray(t.tokens) && t.tokens.length > 0) walk(t.tokens);
      else if (Array.isArray(t.items)) for (const item of t.items) walk([...(item.tokens ?? []), { type: 'space' } as Token]);
      else if (t.type === 'html') out.push(' ');
      else if (t.type === 'br' || t.type === 'space' || t.type === 'hr') out.push(' ');
      else if (typeof t.text === 'string') out.push(t.text);
      if (t.type === 'paragraph' || t.type === 'heading') out.push(' ');
    }
  };
  try {
    walk(Lexer.lex(source, { gfm: true }));
  } catch {
    return source.replace(/\s+/g, ' ').trim();
  }
  return out.join('').replace(/\s+/g, ' ').trim();
}

/** The host's default agent: `config.values.defaultProvider` of the root state, when it is one of the agents. */
export function defaultProvider(root: Json): string | undefined {
  const value = root?.config?.values?.defaultProvider;
  const agents: Json[] = root?.agents ?? [];
  return typeof value === 'string' && agents.some((a) => a.provider === value) ? value : undefined;
}

/** The agents as the new-session picker lists them: the default first, the rest in the host's order. */
export function pickerAgents(root: Json): Json[] {
  const agents: Json[] = root?.agents ?? [];
  const chosen = defaultProvider(root);
  if (!chosen) return agents;
  return [...agents.filter((a) => a.provider === chosen), ...agents.filter((a) => a.provider !== chosen)];
}

/** An agent's name as shown: its display name, else its provider id. */
export function agentName(root: Json, provider: string | undefined): string {
  const agent = (root?.agents ?? []).find((a: Json) => a.provider === provider);
  return agent?.displayName || provider || '';
}

export interface SessionLabel {
  /** `idle`, `working`, `needs input`, `error`, or `failed` (its agent never started). */
  state: string;
  /** What the host says about it (`SessionSummary.activity`), shown for an error or a failure. */
  detail: string | undefined;
}

/**
 * A session summary's state. A summary has no lifecycle; a session whose
 * agent failed to start is one with the Error activity and (at 1.0) an empty
 * chat catalogue — a ready session always holds its default chat. Its
 * `activity` text says why ("Failed to start: …" from ahp-server).
 */
export function sessionLabel(summary: Json): SessionLabel {
  const bits = (summary?.status ?? 0) & 0b11111;
  const detail = typeof summary?.activity === 'string' && summary.activity ? summary.activity : undefined;
  if (bits === SessionStatus.Error) {
    const failed = Array.isArray(summary.chats) && summary.chats.length === 0;
    return { state: failed ? 'failed' : 'error', detail };
  }
  if (bits === SessionStatus.InputNeeded) return { state: 'needs input', detail: undefined };
  if (bits === SessionStatus.InProgress) return { state: 'working', detail: undefined };
  return { state: 'idle', detail: undefined };
}

/** Whether a session matches the list's filter: every word in its plain title or its agent's name. */
export function matchesFilter(summary: Json, agent: string, query: string): boolean {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  if (words.length === 0) return true;
  const haystack = `${plainTitle(summary?.title)} ${agent} ${summary?.provider ?? ''}`.toLowerCase();
  return words.every((word) => haystack.includes(word));
}

/** The host's workspace roots (`config.values.workspaceRoots`, `file:` URIs) as paths. */
export function workspaceRoots(root: Json): string[] {
  const values = root?.config?.values?.workspaceRoots;
  if (!Array.isArray(values)) return [];
  return values.filter((v): v is string => typeof v === 'string').map(pathOf);
}

/** A `file:` URI's path (anything else as it is). */
export function pathOf(uri: string): string {
  try {
    const url = new URL(uri);
    return url.protocol === 'file:' ? decodeURIComponent(url.pathname) : uri;
  } catch {
    return uri;
  }
}

/**
 * A folder typed for a new session, as the `file:` URI `createSession`
 * takes: an absolute path (`/…`) or a `file:` URI; empty is none (the host
 * gives the session a folder of its own). Anything else is an error to show.
 */
export function folderUri(text: string): { uri?: string; error?: string } {
  const value = text.trim();
  if (!value) return {};
  if (value.startsWith('file:')) return { uri: value };
  if (!value.startsWith('/')) return { error: `"${value}" is not an absolute path: give one that starts with /` };
  const path = value.length > 1 ? value.replace(/\/+$/, '') : value;
  return { uri: fileUri(path) };
}

/** The recent folders after `path` was used: it first, no repeats, at most `max`. */
export function rememberFolder(recent: string[], path: string, max = 8): string[] {
  return [path, ...recent.filter((p) => p !== path)].slice(0, max);
}

/** The folder picker's suggestions: recent folders first, then the roots not among them. */
export function folderOptions(recent: string[], roots: string[]): string[] {
  return [...recent, ...roots.filter((r) => !recent.includes(r))];
}
