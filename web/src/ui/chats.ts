/**
 * Pure rules behind the 1.0 chat features the page offers: the read and
 * archived flags of a status (`SessionStatus` bits 32 and 64 on a chat's or a
 * session's `status`, mirrored into the catalogues), what counts as unread,
 * and where a chat lands when it is dragged or moved (the `after` anchor of
 * `moveChat`).
 */
import { ACTIVITY_MASK, SessionStatus, type Json } from '../protocol/reducers';

export function isRead(status: number | undefined): boolean {
  return ((status ?? 0) & SessionStatus.IsRead) !== 0;
}

export function isArchived(status: number | undefined): boolean {
  return ((status ?? 0) & SessionStatus.IsArchived) !== 0;
}

/**
 * A chat shows as unread when its IsRead flag is clear and nothing is running
 * in it (idle or error): a turn ended that nobody has looked at since. While
 * a turn runs (or waits for input) the activity says so instead.
 */
export function isUnread(status: number | undefined): boolean {
  if (status === undefined || isRead(status)) return false;
  const activity = status & ACTIVITY_MASK;
  return activity === SessionStatus.Idle || activity === SessionStatus.Error;
}

/** A session with an unread chat that is not archived (its summary's `chats`). */
export function hasUnreadChat(summary: Json): boolean {
  const chats: Json[] = Array.isArray(summary?.chats) ? summary.chats : [];
  return chats.some((chat) => !isArchived(chat.status) && isUnread(chat.status));
}

/** The anchor of a move: `{}` places the chat first, `{after}` right after that chat. */
export interface Anchor {
  after?: string;
}

/**
 * Where `moved` goes when dropped on `target` (before it, or after it when
 * `after` is true), as the anchor `moveChat` takes: the chat that precedes it
 * in the new order, none when it becomes first. `undefined` when nothing
 * would change (dropped on itself, or where it already is) or either chat is
 * not in `order`.
 */
export function dropAnchor(order: readonly string[], moved: string, target: string, after: boolean): Anchor | undefined {
  if (moved === target || !order.includes(moved) || !order.includes(target)) return undefined;
  const rest = order.filter((uri) => uri !== moved);
  const at = rest.indexOf(target) + (after ? 1 : 0);
  const next = [...rest.slice(0, at), moved, ...rest.slice(at)];
  if (next.every((uri, i) => uri === order[i])) return undefined;
  return at === 0 ? {} : { after: next[at - 1] };
}

/** One place left (`-1`) or right (`+1`) of where `moved` is: the anchor, or `undefined` at an end. */
export function stepAnchor(order: readonly string[], moved: string, step: -1 | 1): Anchor | undefined {
  const index = order.indexOf(moved);
  const neighbour = order[index + step];
  if (index < 0 || neighbour === undefined) return undefined;
  return dropAnchor(order, moved, neighbour, step === 1);
}

/** The order `anchor` gives: what the host's `session/chatsReordered` should then say. */
export function applyAnchor(order: readonly string[], moved: string, anchor: Anchor): string[] {
  const rest = order.filter((uri) => uri !== moved);
  const at = anchor.after === undefined ? 0 : rest.indexOf(anchor.after) + 1;
  return [...rest.slice(0, at), moved, ...rest.slice(at)];
}

/**
 * A chat whose latest turn failed with an error the host can resume from
 * (its last response part an error part with `resumable: true`, and no turn
 * running): the turn to continue, else `undefined`.
 */
export function resumableTurn(chat: Json): string | undefined {
  if (!chat || chat.activeTurn) return undefined;
  const turns: Json[] = chat.turns ?? [];
  const last = turns[turns.length - 1];
  if (last?.state !== 'error') return undefined;
  const parts: Json[] = last.responseParts ?? [];
  const part = parts[parts.length - 1];
  return part?.kind === 'error' && part.resumable === true ? last.id : undefined;
}
