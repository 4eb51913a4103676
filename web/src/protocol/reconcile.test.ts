/**
 * Write-ahead reconciliation (docs/guide/reconciliation.md): optimistic
 * application, the server's echo, rejection rolling back, rebasing over foreign
 * actions, duplicates never applied twice, and the reconnect results.
 */
import { describe, expect, it } from 'vitest';
import { ClientState, PendingOverflowError, type Envelope } from './reconcile';

const CHAT = 'ahp-chat:/c1';
const ME = 'client-me';
const clock = () => 9999;

function chatState(extra: object = {}) {
  return { resource: CHAT, title: 't', status: 1, modifiedAt: 'x', turns: [], ...extra };
}

function started(turnId: string, text = 'hi') {
  return {
    type: 'chat/turnStarted',
    turnId,
    startedAt: '2026-01-01T00:00:00.000Z',
    message: { text, origin: { kind: 'user' } },
  };
}

function fresh(fromSeq = 10): ClientState {
  const state = new ClientState(ME, clock);
  state.addSubscription(CHAT, { resource: CHAT, state: chatState(), fromSeq });
  return state;
}

function env(serverSeq: number, action: object, origin?: Envelope['origin'], rejectionReason?: string): Envelope {
  return { channel: CHAT, serverSeq, action, origin, rejectionReason };
}

describe('write-ahead dispatch', () => {
  it('applies an action optimistically, before any echo', () => {
    const state = fresh();
    const entry = state.dispatch(CHAT, started('t1'));
    expect(entry.clientSeq).toBe(1);
    expect(state.view(CHAT).activeTurn.id).toBe('t1');
    expect(state.confirmed(CHAT).activeTurn).toBeUndefined();
    expect(state.pending(CHAT)).toHaveLength(1);
  });

  it('confirms on its own echo and leaves nothing pending', () => {
    const state = fresh();
    const { clientSeq } = state.dispatch(CHAT, started('t1'));
    const result = state.applyEnvelope(env(11, started('t1'), { clientId: ME, clientSeq }));
    expect(result.outcome).toBe('applied');
    expect(result.acknowledged?.clientSeq).toBe(clientSeq);
    expect(state.pending()).toEqual([]);
    expect(state.confirmed(CHAT).activeTurn.id).toBe('t1');
    expect(state.view(CHAT)).toBe(state.confirmed(CHAT));
    expect(state.lastSeenServerSeq).toBe(11);
  });

  it('rolls the optimistic effect back when the host rejects it', () => {
    const state = fresh();
    const cancel = { type: 'chat/turnCancelled', turnId: 'nope', duration: 1 };
    const draft = { type: 'chat/draftChanged', draft: { text: 'd', origin: { kind: 'user' } } };
    const a = state.dispatch(CHAT, draft);
    state.dispatch(CHAT, cancel);
    const rejected = state.applyEnvelope(env(11, draft, { clientId: ME, clientSeq: a.clientSeq }, 'no'));
    expect(rejected.outcome).toBe('rejected');
    expect(rejected.acknowledged?.action).toEqual(draft);
    expect(state.view(CHAT).draft).toBeUndefined(); // rolled back
    expect(state.confirmed(CHAT).draft).toBeUndefined(); // never applied
    expect(state.pending(CHAT)).toHaveLength(1); // the other one still waits
  });

  it('rebases pending actions over foreign ones (server wins)', () => {
    const state = fresh();
    state.dispatch(CHAT, { type: 'chat/pendingMessageSet', kind: 'queued', id: 'q1', message: { text: 'mine', origin: { kind: 'user' } } });
    // Another client's turn arrives first; our queued message stays on top of it.
    state.applyEnvelope(env(11, started('other'), { clientId: 'someone-else', clientSeq: 1 }));
    const view = state.view(CHAT);
    expect(view.activeTurn.id).toBe('other');
    expect(view.queuedMessages.map((m: { id: string }) => m.id)).toEqual(['q1']);
    expect(state.confirmed(CHAT).queuedMessages).toBeUndefined();
  });

  it('takes the envelope, not the optimistic copy, as the truth', () => {
    const state = fresh();
    const { clientSeq } = state.dispatch(CHAT, started('t1', 'what I typed'));
    state.applyEnvelope(env(11, started('t1', 'what the host kept'), { clientId: ME, clientSeq }));
    expect(state.view(CHAT).activeTurn.message.text).toBe('what the host kept');
  });

  it('never applies an envelope twice, nor one a snapshot already holds', () => {
    const state = fresh(10);
    expect(state.applyEnvelope(env(9, started('old'))).outcome).toBe('duplicate');
    expect(state.applyEnvelope(env(11, started('t1'))).outcome).toBe('applied');
    const delta = { type: 'chat/responsePart', turnId: 't1', part: { kind: 'markdown', id: 'p', content: 'a' } };
    expect(state.applyEnvelope(env(12, delta)).outcome).toBe('applied');
    expect(state.applyEnvelope(env(12, delta)).outcome).toBe('duplicate');
    expect(state.confirmed(CHAT).activeTurn.responseParts).toHaveLength(1);
  });

  it('ignores channels it does not mirror, but notes their serverSeq', () => {
    const state = fresh();
    const result = state.applyEnvelope({ channel: 'ahp-chat:/other', serverSeq: 50, action: started('x') });
    expect(result.outcome).toBe('untracked');
    expect(state.lastSeenServerSeq).toBe(50);
  });

  it('bounds the pending actions', () => {
    const state = new ClientState(ME, clock, 2);
    state.addSubscription(CHAT, { resource: CHAT, state: chatState(), fromSeq: 1 });
    state.dispatch(CHAT, started('a'));
    state.dispatch(CHAT, started('b'));
    expect(() => state.dispatch(CHAT, started('c'))).toThrow(PendingOverflowError);
  });

  it('refuses to dispatch to a channel it has no state for', () => {
    expect(() => fresh().dispatch('ahp-chat:/unknown', started('a'))).toThrow();
  });
});

describe('reconnect', () => {
  it('replays missed envelopes, acknowledges echoes in them, drops missing channels', () => {
    const state = fresh(10);
    state.addSubscription('ahp-session:/gone', { resource: 'ahp-session:/gone', state: { chats: [], status: 1 }, fromSeq: 3 });
    const { clientSeq } = state.dispatch(CHAT, started('t1'));
    const lost = state.dispatch(CHAT, { type: 'chat/draftChanged', draft: { text: 'lost', origin: { kind: 'user' } } });
    const result = state.applyReconnect({
      type: 'replay',
      actions: [env(11, started('t1'), { clientId: ME, clientSeq }), env(12, { type: 'chat/turnComplete', turnId: 't1', duration: 3 })],
      missing: ['ahp-session:/gone'],
    });
    expect(result.dropped).toEqual(['ahp-session:/gone']);
    expect(result.envelopes.map((r) => r.outcome)).toEqual(['applied', 'applied']);
    expect(state.confirmed(CHAT).turns).toHaveLength(1);
    expect(state.subscriptions).toEqual([CHAT]);
    // The spec clears what was never echoed; the caller gets it back.
    expect(state.clearPending()).toEqual([lost]);
    expect(state.view(CHAT).draft).toBeUndefined();
  });

  it('replaces state from snapshots and drops subscriptions without one', () => {
    const state = fresh(10);
    state.addSubscription('ahp-root://', { resource: 'ahp-root://', state: { agents: [] }, fromSeq: 2 });
    const result = state.applyReconnect({
      type: 'snapshot',
      snapshots: [{ resource: CHAT, state: chatState({ title: 'fresh' }), fromSeq: 500 }],
    });
    expect(result.dropped).toEqual(['ahp-root://']);
    expect(state.confirmed(CHAT).title).toBe('fresh');
    expect(state.lastSeenServerSeq).toBe(500);
    // An envelope the snapshot already includes is not applied again.
    expect(state.applyEnvelope(env(499, started('old'))).outcome).toBe('duplicate');
  });

  it('reset takes the host counter as it is (a host that lost its state)', () => {
    const state = fresh(1000);
    state.reset(5);
    expect(state.lastSeenServerSeq).toBe(5);
    expect(state.subscriptions).toEqual([]);
  });
});
