import { describe, expect, it } from 'vitest';
import { applyAnchor, dropAnchor, hasUnreadChat, isArchived, isRead, isUnread, resumableTurn, stepAnchor } from './chats';

const IDLE = 1;
const ERROR = 2;
const IN_PROGRESS = 8;
const INPUT_NEEDED = 24;
const READ = 32;
const ARCHIVED = 64;

describe('flags', () => {
  it('reads the IsRead and IsArchived bits, whatever the activity', () => {
    expect(isRead(IDLE | READ)).toBe(true);
    expect(isRead(IN_PROGRESS | READ | ARCHIVED)).toBe(true);
    expect(isRead(IDLE | ARCHIVED)).toBe(false);
    expect(isRead(undefined)).toBe(false);
    expect(isArchived(ERROR | ARCHIVED)).toBe(true);
    expect(isArchived(IDLE | READ)).toBe(false);
  });

  it('counts a chat unread when its flag is clear and nothing runs in it', () => {
    expect(isUnread(IDLE)).toBe(true);
    expect(isUnread(ERROR)).toBe(true);
    expect(isUnread(IDLE | ARCHIVED)).toBe(true);
    expect(isUnread(IDLE | READ)).toBe(false);
    expect(isUnread(ERROR | READ)).toBe(false);
    expect(isUnread(IN_PROGRESS)).toBe(false);
    expect(isUnread(INPUT_NEEDED)).toBe(false);
    expect(isUnread(undefined)).toBe(false);
  });

  it('marks a session whose summary has an unread chat that is not archived', () => {
    const chat = (status: number) => ({ resource: `ahp-chat:/${status}`, status });
    expect(hasUnreadChat({ chats: [chat(IDLE | READ), chat(IDLE)] })).toBe(true);
    expect(hasUnreadChat({ chats: [chat(IDLE | READ), chat(ERROR | READ)] })).toBe(false);
    expect(hasUnreadChat({ chats: [chat(IDLE | READ), chat(IDLE | ARCHIVED)] })).toBe(false);
    expect(hasUnreadChat({ chats: [chat(IN_PROGRESS)] })).toBe(false);
    expect(hasUnreadChat({})).toBe(false); // a 0.7 summary has no chats
    expect(hasUnreadChat(undefined)).toBe(false);
  });
});

describe('dropAnchor', () => {
  const order = ['a', 'b', 'c', 'd'];

  it('names the chat the dropped one lands after, none when it becomes first', () => {
    expect(dropAnchor(order, 'd', 'b', false)).toEqual({ after: 'a' });
    expect(dropAnchor(order, 'd', 'b', true)).toEqual({ after: 'b' });
    expect(dropAnchor(order, 'c', 'a', false)).toEqual({});
    expect(dropAnchor(order, 'a', 'd', true)).toEqual({ after: 'd' });
    expect(dropAnchor(order, 'a', 'c', false)).toEqual({ after: 'b' });
    expect(dropAnchor(order, 'b', 'a', false)).toEqual({});
  });

  it('is undefined when nothing would move', () => {
    expect(dropAnchor(order, 'b', 'b', true)).toBeUndefined();
    expect(dropAnchor(order, 'b', 'a', true)).toBeUndefined(); // already after a
    expect(dropAnchor(order, 'b', 'c', false)).toBeUndefined(); // already before c
    expect(dropAnchor(order, 'x', 'a', false)).toBeUndefined();
    expect(dropAnchor(order, 'a', 'x', false)).toBeUndefined();
  });

  it('gives the order the host then publishes', () => {
    for (const moved of order) {
      for (const target of order) {
        for (const after of [false, true]) {
          const anchor = dropAnchor(order, moved, target, after);
          if (!anchor) continue;
          const next = applyAnchor(order, moved, anchor);
          const at = next.indexOf(moved);
          expect(next[at + (after ? -1 : 1)]).toBe(target);
          expect([...next].sort()).toEqual(order);
        }
      }
    }
  });
});

describe('stepAnchor', () => {
  const order = ['main', 'x', 'y'];

  it('moves one place left or right, and not past an end', () => {
    expect(stepAnchor(order, 'y', -1)).toEqual({ after: 'main' });
    expect(applyAnchor(order, 'y', { after: 'main' })).toEqual(['main', 'y', 'x']);
    expect(stepAnchor(order, 'x', -1)).toEqual({});
    expect(applyAnchor(order, 'x', {})).toEqual(['x', 'main', 'y']);
    expect(stepAnchor(order, 'x', 1)).toEqual({ after: 'y' });
    expect(stepAnchor(order, 'y', 1)).toBeUndefined();
    expect(stepAnchor(order, 'main', -1)).toBeUndefined();
    expect(stepAnchor(order, 'gone', 1)).toBeUndefined();
  });
});

describe('resumableTurn', () => {
  const failed = (resumable?: boolean) => ({
    id: 't2',
    state: 'error',
    responseParts: [
      { kind: 'markdown', id: 'p', content: 'half' },
      { kind: 'error', error: { errorType: 'x', message: 'boom' }, ...(resumable === undefined ? {} : { resumable }) },
    ],
  });
  const done = { id: 't1', state: 'complete', responseParts: [] };

  it('is the latest turn when it ended in a resumable error', () => {
    expect(resumableTurn({ turns: [done, failed(true)] })).toBe('t2');
  });

  it('is undefined otherwise', () => {
    expect(resumableTurn({ turns: [done, failed(false)] })).toBeUndefined();
    expect(resumableTurn({ turns: [done, failed()] })).toBeUndefined();
    expect(resumableTurn({ turns: [failed(true), done] })).toBeUndefined(); // not the latest
    expect(resumableTurn({ turns: [failed(true)], activeTurn: { id: 't3' } })).toBeUndefined();
    expect(resumableTurn({ turns: [{ ...failed(true), state: 'cancelled' }] })).toBeUndefined();
    expect(resumableTurn({ turns: [{ ...failed(true), responseParts: [...failed(true).responseParts, { kind: 'markdown', content: 'after' }] }] })).toBeUndefined();
    expect(resumableTurn({ turns: [] })).toBeUndefined();
    expect(resumableTurn(undefined)).toBeUndefined();
  });
});
