/**
 * Write-ahead reconciliation: confirmed state, pending actions, optimistic view.
 *
 * Pure (no I/O): the connection feeds it what arrives on the wire and the UI
 * reads `view(channel)`. The model is the spec's (docs/guide/reconciliation.md,
 * WIRE-SUMMARY §7). For every mirrored root, session or chat channel we keep:
 *
 * - the **confirmed** state: the channel's snapshot, then every envelope of
 *   that channel reduced into it, except envelopes carrying `rejectionReason`,
 *   which nobody applies;
 * - the **pending** actions this client dispatched and has not seen echoed;
 * - the **optimistic view**: confirmed state with the pending actions replayed
 *   on top (computed lazily, cached until something changes). The UI always
 *   renders this.
 *
 * An envelope whose `origin.clientId` is ours answers the pending entry with
 * the same `clientSeq`: accepted, it is applied to the confirmed state from
 * the envelope itself (server wins, rebasing the other pending actions);
 * rejected, it is dropped, which rolls its optimistic effect back.
 *
 * `serverSeq` is one global counter. `lastSeenServerSeq` (the largest value
 * seen in an envelope, a snapshot's `fromSeq` or `initialize`'s `serverSeq`)
 * is what `reconnect` reports. Per channel we keep the `serverSeq` already
 * included in the confirmed state, so an envelope at or below it (part of a
 * snapshot, or replayed twice) is never applied twice: nothing is doubled.
 *
 * Every state is reduced with the semantics of the protocol version the
 * connection negotiated (`semantics`: `'1.0'` for 1.0.0 and 0.9.0, `'0.7'` for
 * 0.7.0). A fresh `initialize` may negotiate another version: `reset` takes
 * the new one along with the host's counter, when every mirror is dropped.
 */
import { channelKind, reduce, type ChannelKind, type Clock, type Json, type Semantics } from './reducers';

export interface PendingAction {
  clientSeq: number;
  channel: string;
  action: Json;
}

export interface Envelope {
  channel: string;
  action: Json;
  serverSeq: number;
  origin?: { clientId: string; clientSeq: number };
  rejectionReason?: string;
}

export interface Snapshot {
  resource: string;
  state: Json;
  fromSeq: number;
}

export type Outcome = 'applied' | 'rejected' | 'duplicate' | 'untracked';

export interface EnvelopeResult {
  outcome: Outcome;
  /** Our pending action this envelope answered (accepted or rejected). */
  acknowledged?: PendingAction;
}

interface Mirror {
  kind: ChannelKind;
  confirmed: Json;
  seq: number;
  pending: PendingAction[];
  view: Json | undefined;
}

export class PendingOverflowError extends Error {}

export class ClientState {
  private readonly mirrors = new Map<string, Mirror>();
  /** Subscribed URIs, in subscription order (what `reconnect` lists). */
  private readonly subscribed = new Set<string>();
  private lastSeen = 0;
  private nextClientSeq = 1;
  private semanticsInUse: Semantics;

  constructor(
    readonly clientId: string,
    readonly clock: Clock = () => Date.now(),
    readonly maxPending = 1024,
    semantics: Semantics = '1.0',
  ) {
    this.semanticsInUse = semantics;
  }

  /** The reducer semantics of the negotiated protocol version. */
  get semantics(): Semantics {
    return this.semanticsInUse;
  }

  private reduce(kind: ChannelKind, state: Json, action: Json): Json {
    return reduce(kind, state, action, this.clock, this.semanticsInUse);
  }

  get lastSeenServerSeq(): number {
    return this.lastSeen;
  }

  get subscriptions(): string[] {
    return [...this.subscribed];
  }

  isMirrored(channel: string): boolean {
    return this.mirrors.has(channel);
  }

  noteServerSeq(seq: number): void {
    if (seq > this.lastSeen) this.lastSeen = seq;
  }

  /** Record a subscription and, for a state channel we can reduce, its snapshot. */
  addSubscription(uri: string, snapshot?: Snapshot): void {
    this.subscribed.add(uri);
    if (snapshot) this.setSnapshot(snapshot);
  }

  /** Replace a channel's confirmed state with a snapshot; its pending actions stay on top. */
  setSnapshot(snapshot: Snapshot): void {
    this.subscribed.add(snapshot.resource);
    this.noteServerSeq(snapshot.fromSeq);
    const kind = channelKind(snapshot.resource);
    if (!kind) return;
    const existing = this.mirrors.get(snapshot.resource);
    this.mirrors.set(snapshot.resource, {
      kind,
      confirmed: snapshot.state,
      seq: snapshot.fromSeq,
      pending: existing?.pending ?? [],
      view: undefined,
    });
  }

  unsubscribe(uri: string): PendingAction[] {
    this.subscribed.delete(uri);
    const mirror = this.mirrors.get(uri);
    this.mirrors.delete(uri);
    return mirror?.pending ?? [];
  }

  confirmed(channel: string): Json | undefined {
    return this.mirrors.get(channel)?.confirmed;
  }

  pending(channel?: string): PendingAction[] {
    if (channel !== undefined) return [...(this.mirrors.get(channel)?.pending ?? [])];
    return [...this.mirrors.values()].flatMap((m) => m.pending);
  }

  /** The optimistic view: confirmed state with the pending actions replayed on top. */
  view(channel: string): Json | undefined {
    const mirror = this.mirrors.get(channel);
    if (!mirror) return undefined;
    if (mirror.view === undefined) {
      let state = mirror.confirmed;
      for (const entry of mirror.pending) state = this.reduce(mirror.kind, state, entry.action);
      mirror.view = state;
    }
    return mirror.view;
  }

  /**
   * Apply `action` optimistically and return the pending entry; the caller
   * sends `dispatchAction {channel, clientSeq, action}`.
   */
  dispatch(channel: string, action: Json): PendingAction {
    const mirror = this.mirrors.get(channel);
    if (!mirror) throw new Error(`not subscribed to ${channel}`);
    if (this.pending().length >= this.maxPending) {
      throw new PendingOverflowError('too many actions await their echo');
    }
    const entry = { clientSeq: this.nextClientSeq++, channel, action };
    mirror.pending.push(entry);
    if (mirror.view !== undefined) mirror.view = this.reduce(mirror.kind, mirror.view, action);
    return entry;
  }

  /** Reconcile one `action` envelope from the host. */
  applyEnvelope(envelope: Envelope): EnvelopeResult {
    this.noteServerSeq(envelope.serverSeq);
    const mirror = this.mirrors.get(envelope.channel);
    let acknowledged: PendingAction | undefined;
    if (mirror && envelope.origin?.clientId === this.clientId) {
      const index = mirror.pending.findIndex((p) => p.clientSeq === envelope.origin?.clientSeq);
      if (index >= 0) {
        acknowledged = mirror.pending[index];
        mirror.pending.splice(index, 1);
        mirror.view = undefined;
      }
    }
    if (!mirror) return { outcome: 'untracked' };
    if (envelope.rejectionReason !== undefined) return { outcome: 'rejected', acknowledged };
    if (envelope.serverSeq <= mirror.seq) return { outcome: 'duplicate', acknowledged };
    mirror.confirmed = this.reduce(mirror.kind, mirror.confirmed, envelope.action);
    mirror.seq = envelope.serverSeq;
    mirror.view = undefined;
    return { outcome: 'applied', acknowledged };
  }

  /**
   * After a `reconnect` or a fresh `initialize`: the spec clears pending
   * actions in both cases. Returns the ones dropped (never echoed), so the UI
   * can give a user's unsent words back instead of losing them.
   */
  clearPending(): PendingAction[] {
    const dropped: PendingAction[] = [];
    for (const mirror of this.mirrors.values()) {
      dropped.push(...mirror.pending);
      mirror.pending = [];
      mirror.view = undefined;
    }
    return dropped;
  }

  /**
   * Apply a `reconnect` result. Replay: every missed envelope in order, and
   * the `missing` channels dropped. Snapshot: fresh states, and any
   * subscription without one dropped. Returns the dropped subscriptions.
   */
  applyReconnect(result: Json): { dropped: string[]; envelopes: EnvelopeResult[] } {
    const dropped: string[] = [];
    const envelopes: EnvelopeResult[] = [];
    if (result?.type === 'replay') {
      for (const envelope of result.actions ?? []) envelopes.push(this.applyEnvelope(envelope));
      for (const uri of result.missing ?? []) {
        this.unsubscribe(uri);
        dropped.push(uri);
      }
    } else if (result?.type === 'snapshot') {
      const fresh = new Set<string>();
      for (const snapshot of result.snapshots ?? []) {
        this.setSnapshot(snapshot);
        fresh.add(snapshot.resource);
      }
      for (const uri of this.subscriptions) {
        if (!fresh.has(uri)) {
          this.unsubscribe(uri);
          dropped.push(uri);
        }
      }
    } else {
      throw new Error('unknown reconnect result');
    }
    return { dropped, envelopes };
  }

  /**
   * After a fresh `initialize`: forget every channel, take the host's
   * `serverSeq` as it is (a host that lost its state may count from lower)
   * and the semantics of the version it negotiated.
   */
  reset(serverSeq: number, semantics: Semantics = this.semanticsInUse): void {
    this.mirrors.clear();
    this.subscribed.clear();
    this.lastSeen = serverSeq;
    this.semanticsInUse = semantics;
  }
}
