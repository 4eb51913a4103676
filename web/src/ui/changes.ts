/**
 * Pure rules behind a chat's changes and background work at 1.0: the chat's
 * own changeset (the `changeKind: "chat"` entry of `ChatState.changesets`),
 * its counts (`ChatSummary.changes`), the rows of its Changes view with their
 * text (`data:` URIs) and a line diff, and what a background command's
 * terminal shows (the last lines of `TerminalState.content`).
 */
import type { Json } from '../protocol/reducers';

/**
 * The URI of the chat's own changeset: its catalogue's `chat` entry, when its
 * `uriTemplate` has no template variables (then it is itself subscribable).
 */
export function chatChangesetUri(chat: Json): string | undefined {
  const entries: Json[] = Array.isArray(chat?.changesets) ? chat.changesets : [];
  const entry = entries.find((e) => e?.changeKind === 'chat' && typeof e.uriTemplate === 'string');
  return entry && !/[{}]/.test(entry.uriTemplate) ? entry.uriTemplate : undefined;
}

/** "3 files +12 −4" from a `ChangesSummary`; `undefined` when it names no file. */
export function changesLabel(changes: Json): string | undefined {
  const files = Number(changes?.files ?? 0);
  if (!Number.isFinite(files) || files <= 0) return undefined;
  const added = Number(changes.additions ?? 0);
  const removed = Number(changes.deletions ?? 0);
  return `${files} ${files === 1 ? 'file' : 'files'} +${added} \u2212${removed}`;
}

export type FileKind = 'created' | 'deleted' | 'modified';

export interface FileRow {
  id: string;
  /** The file's path (a `file:` URI's, decoded), else its URI as given. */
  path: string;
  added: number;
  removed: number;
  kind: FileKind;
  /** The text of each side, when it comes inline (`data:` URI) and decodes. */
  before?: string;
  after?: string;
  /** The host left the content out (`_meta.contentOmitted`, or an empty edit). */
  omitted: boolean;
}

/** A URI as a path: a `file:` URI's decoded path, anything else as it is. */
export function pathOf(uri: string): string {
  try {
    const url = new URL(uri);
    return url.protocol === 'file:' ? decodeURIComponent(url.pathname) : uri;
  } catch {
    return uri;
  }
}

/** The text of a `data:` URI (RFC 2397, base64 or percent-encoded, read as UTF-8); else `undefined`. */
export function decodeDataUri(uri: unknown): string | undefined {
  if (typeof uri !== 'string' || !uri.startsWith('data:')) return undefined;
  const comma = uri.indexOf(',');
  if (comma < 0) return undefined;
  const header = uri.slice(5, comma);
  const body = uri.slice(comma + 1);
  try {
    let bytes: Uint8Array;
    if (/;base64$/i.test(header)) {
      const binary = atob(body);
      bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
    } else {
      bytes = new TextEncoder().encode(decodeURIComponent(body));
    }
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

/** The rows of a changeset's Changes view, in the changeset's order. */
export function fileRows(changeset: Json): FileRow[] {
  const files: Json[] = Array.isArray(changeset?.files) ? changeset.files : [];
  return files.map((file) => rowOf(String(file.id), file.edit ?? {}, file._meta?.contentOmitted === true));
}

/**
 * The file edits a tool call will make (`edits.items`, shown before the user
 * confirms it), as rows of the same shape as the Changes view's.
 */
export function editRows(edits: Json): FileRow[] {
  const items: Json[] = Array.isArray(edits?.items) ? edits.items : [];
  return items.map((edit, index) => rowOf(String(edit?.after?.uri ?? edit?.before?.uri ?? index), edit ?? {}, false));
}

/** One `FileEdit` as a row: its path, kind, line counts and inline text. */
function rowOf(id: string, edit: Json, omitted: boolean): FileRow {
  const before = edit.before;
  const after = edit.after;
  const kind: FileKind = before && !after ? 'deleted' : after && !before ? 'created' : 'modified';
  const row: FileRow = {
    id,
    path: pathOf(String(after?.uri ?? before?.uri ?? id)),
    added: Number(edit.diff?.added ?? 0),
    removed: Number(edit.diff?.removed ?? 0),
    kind,
    omitted: omitted || (!before && !after),
  };
  const beforeText = decodeDataUri(before?.content?.uri);
  const afterText = decodeDataUri(after?.content?.uri);
  if (beforeText !== undefined) row.before = beforeText;
  if (afterText !== undefined) row.after = afterText;
  return row;
}

export interface DiffLine {
  kind: 'same' | 'added' | 'removed';
  text: string;
}

/** Lines of a text: `""` has none; a trailing newline ends the last line. */
export function linesOf(text: string | undefined): string[] {
  if (!text) return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/**
 * A line diff of `before` and `after` (a longest common subsequence; removed
 * lines before added ones where they replace each other). Texts over
 * `limit` lines on either side are not diffed: `undefined`.
 */
export function lineDiff(before: string | undefined, after: string | undefined, limit = 2000): DiffLine[] | undefined {
  const a = linesOf(before);
  const b = linesOf(after);
  if (a.length > limit || b.length > limit) return undefined;
  // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
  const lcs: number[][] = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const out: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      out.push({ kind: 'same', text: a[i] });
      i++;
      j++;
    } else if (j >= b.length || (i < a.length && lcs[i + 1][j] >= lcs[i][j + 1])) {
      out.push({ kind: 'removed', text: a[i] });
      i++;
    } else {
      out.push({ kind: 'added', text: b[j] });
      j++;
    }
  }
  return out;
}

/** The background work entries of a chat (`ChatState.backgroundWork`), `[]` when none. */
export function backgroundWork(chat: Json): Json[] {
  return Array.isArray(chat?.backgroundWork) ? chat.backgroundWork : [];
}

/** The terminals the chat's background work shows (shell entries with a `terminal`). */
export function backgroundTerminals(chat: Json): string[] {
  return backgroundWork(chat)
    .map((work) => work?.terminal)
    .filter((uri): uri is string => typeof uri === 'string' && uri.length > 0);
}

// ANSI escape sequences (CSI, OSC and two-character ones): a terminal's colours are not text.
// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)|\u001b[@-Z\\-_]/g;

/** A terminal's text: its parts in order (a command part as its command line and output), escapes removed. */
export function terminalText(terminal: Json): string {
  const parts: Json[] = Array.isArray(terminal?.content) ? terminal.content : [];
  const text = parts
    .map((part) => {
      if (part?.type === 'command') return `${part.commandLine ?? ''}\n${part.output ?? ''}`;
      if (part?.type === 'unclassified') return String(part.value ?? '');
      return '';
    })
    .join('');
  return text.replace(ANSI, '').replace(/\r\n?/g, '\n');
}

/** The last `count` lines of `text` (trailing blank lines dropped). */
export function lastLines(text: string, count: number): string {
  const lines = text.replace(/\s+$/, '').split('\n');
  return lines.slice(-count).join('\n');
}
