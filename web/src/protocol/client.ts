/**
 * An AHP client over a browser WebSocket: JSON-RPC 2.0, the handshake,
 * subscriptions, write-ahead dispatch (`reconcile.ts`), the session catalogue,
 * and reconnection with replay.
 *
 * Versions: `initialize` offers `PROTOCOL_VERSIONS` (1.0.0, 0.9.0, 0.7.0, most
 * preferred first; versioning.md "Negotiation"). The host answers the one it
 * picked in `protocolVersion`; an answer that is not one of the offers fails
 * the handshake. The connection then reduces every channel with that
 * version's semantics (`SEMANTICS`: 1.0.0 and 0.9.0 the 1.0 reducers, 0.7.0
 * the 0.7 ones); `protocolVersion` says which, for the page to show.
 *
 * It talks to any AHP host; nothing here knows ahp-server. One JSON-RPC
 * message per text frame. Requests the host sends us (`resource*`,
 * `createResourceWatch`) are answered with "method not found": this page
 * serves no files.
 *
 * Reconnection (WIRE-SUMMARY §3.3): after a drop the client opens a new socket
 * and sends `reconnect {clientId, lastSeenServerSeq, subscriptions}` as its
 * first message. A replay result is applied envelope by envelope (an envelope
 * the state already holds is skipped, so nothing is doubled), a snapshot
 * result replaces the states; an error falls back to a fresh `initialize`
 * with the same subscriptions. Envelopes that arrive while a handshake or a
 * `subscribe` is in flight are held and applied after its result, in order.
 * Then pending actions are cleared as the spec says; the ones never echoed are
 * reported (`onDropped`) so the page can give the user's words back. Session
 * notifications are not replayed: the catalogue is fetched again.
 */
import { ClientState, type Envelope, type PendingAction, type Snapshot } from './reconcile';
import type { Json, Semantics } from './reducers';

export const ROOT = 'ahp-root://';

/** The versions `initialize` offers, most preferred first. */
export const PROTOCOL_VERSIONS: readonly string[] = ['1.0.0', '0.9.0', '0.7.0'];

/**
 * The reducer semantics of each offered version. 0.9 states and actions are
 * the 1.0 ones minus what 1.0 added (a host never sends those to 0.9), with
 * the same reducer behaviour (REDUCER-CHANGES.md: every behaviour change is
 * 0.8 or 0.9 except the new 1.0 actions).
 */
export const SEMANTICS: Readonly<Record<string, Semantics>> = {
  '1.0.0': '1.0',
  '0.9.0': '1.0',
  '0.7.0': '0.7',
};

/** The host answered `initialize` with a version this page did not offer. */
export class VersionMismatch extends Error {}

export type Status =
  | 'connecting' // first connection under way
  | 'open' // handshake done, state in sync
  | 'reconnecting' // the socket dropped; trying again with back-off
  | 'refused'; // the host refused the upgrade (token or origin): waiting for the user

export class RemoteError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

export class ConnectionLost extends Error {}

export interface ClientOptions {
  /** The WebSocket URL to open (called for every attempt: the token may change). */
  url: () => string;
  clientId: string;
  clientInfo?: { name: string; version?: string };
  /** Called on any change of state, status or catalogue (coalesce renders yourself). */
  onChange: () => void;
  /** Our actions the host never received (the connection dropped first). */
  onDropped?: (actions: PendingAction[]) => void;
  /** An action of ours the host rejected. */
  onRejected?: (action: PendingAction, reason: string) => void;
  /** Whether the host is up, asked when a socket closes before opening (token or origin?). */
  probe?: () => Promise<boolean>;
  WebSocket?: typeof WebSocket;
  clock?: () => number;
}

interface Waiting {
  resolve: (value: Json) => void;
  reject: (error: Error) => void;
}

const BACKOFF_MS = [250, 500, 1000, 2000, 4000];

export class AhpClient {
  readonly state: ClientState;
  status: Status = 'connecting';
  /** The session catalogue: `listSessions`, then `root/session*` notifications. */
  readonly sessions = new Map<string, Json>();
  serverInfo: Json = undefined;
  /** The version the host picked in the last `initialize` (undefined before the first). */
  protocolVersion: string | undefined;
  /** The last error the page should show (cleared when the next thing works). */
  lastError: string | undefined;

  private socket: WebSocket | undefined;
  private nextId = 1;
  private readonly waiting = new Map<number, Waiting>();
  private initialized = false;
  private handshaking = false;
  private readonly held: Envelope[] = [];
  private readonly subscribing = new Map<string, Envelope[]>();
  private attempt = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;
  private readonly WS: typeof WebSocket;

  constructor(private readonly options: ClientOptions) {
    this.state = new ClientState(options.clientId, options.clock ?? (() => Date.now()));
    this.WS = options.WebSocket ?? WebSocket;
  }

  get clientId(): string {
    return this.state.clientId;
  }

  start(): void {
    this.stopped = false;
    this.open();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.socket?.close(1000, 'page closed');
  }

  /** Try again now (after the user gave a token, or pressed "retry"). */
  retry(): void {
    clearTimeout(this.timer);
    this.attempt = 0;
    const current = this.socket;
    if (current && current.readyState === 1) return; // connected: nothing to retry
    if (current) {
      // An attempt still under way was made with the old token: drop it (its
      // onclose sees it is no longer the current socket) and try with the new.
      this.socket = undefined;
      current.onopen = null;
      current.onmessage = null;
      current.close();
    }
    this.open();
  }

  view(channel: string): Json | undefined {
    return this.state.view(channel);
  }

  // -- requests ------------------------------------------------------------------------

  request(method: string, params: Json): Promise<Json> {
    const socket = this.socket;
    if (!socket || socket.readyState !== 1) {
      return Promise.reject(new ConnectionLost('not connected'));
    }
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      socket.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    });
  }

  private notify(method: string, params: Json): void {
    this.socket?.send(JSON.stringify({ jsonrpc: '2.0', method, params }));
  }

  get ready(): boolean {
    return this.status === 'open';
  }

  async subscribe(uri: string, view?: Json): Promise<void> {
    if (this.state.subscriptions.includes(uri)) return;
    this.subscribing.set(uri, []);
    try {
      const result = await this.request('subscribe', view ? { channel: uri, view } : { channel: uri });
      this.state.addSubscription(uri, result?.snapshot as Snapshot | undefined);
      for (const envelope of this.subscribing.get(uri) ?? []) this.applyEnvelope(envelope);
    } finally {
      this.subscribing.delete(uri);
      this.options.onChange();
    }
  }

  unsubscribe(uri: string): void {
    if (!this.state.subscriptions.includes(uri)) return;
    const dropped = this.state.unsubscribe(uri);
    if (dropped.length > 0) this.options.onDropped?.(dropped);
    if (this.ready) this.notify('unsubscribe', { channel: uri });
    this.options.onChange();
  }

  /** Write-ahead: apply `action` to the view at once, then send it. */
  dispatch(channel: string, action: Json): PendingAction {
    if (!this.ready) throw new ConnectionLost('not connected');
    const entry = this.state.dispatch(channel, action);
    this.notify('dispatchAction', { channel, clientSeq: entry.clientSeq, action });
    this.options.onChange();
    return entry;
  }

  /** Every page of `listSessions` (bounded), newest first, into the catalogue. */
  async refreshSessions(): Promise<void> {
    const fresh = new Map<string, Json>();
    let cursor: string | undefined;
    for (let page = 0; page < 50; page++) {
      const result = await this.request(
        'listSessions',
        cursor ? { channel: ROOT, limit: 200, cursor } : { channel: ROOT, limit: 200 },
      );
      for (const item of result?.items ?? []) fresh.set(item.resource, item);
      cursor = result?.nextCursor;
      if (!cursor) break;
    }
    this.sessions.clear();
    for (const [uri, summary] of fresh) this.sessions.set(uri, summary);
    this.options.onChange();
  }

  // -- the socket ----------------------------------------------------------------------

  private open(): void {
    if (this.stopped) return;
    let opened = false;
    let socket: WebSocket;
    try {
      socket = new this.WS(this.options.url());
    } catch (error) {
      this.lastError = String(error);
      this.scheduleReconnect();
      return;
    }
    this.socket = socket;
    socket.onopen = () => {
      opened = true;
      this.attempt = 0;
      void this.handshake();
    };
    socket.onmessage = (event) => this.receive(String(event.data));
    socket.onclose = (event) => {
      if (this.socket !== socket) return;
      this.socket = undefined;
      // The host says why it closed (a failed store, a slow reader): shown on the
      // badge until the next handshake. A reason of the page's own closes keeps
      // the error that made it close.
      if (event.reason && this.lastError === undefined) {
        this.lastError = `the host closed the connection: ${event.reason}`;
      }
      this.connectionLost();
      if (this.stopped) return;
      if (!opened) void this.closedBeforeOpen();
      else this.scheduleReconnect();
    };
  }

  private async closedBeforeOpen(): Promise<void> {
    // A browser does not tell why an upgrade failed. If the host answers
    // plain HTTP, it is up and refused us: a token is missing or wrong, or
    // this origin is not allowed. Wait for the user instead of hammering it.
    const up = this.options.probe ? await this.options.probe().catch(() => false) : false;
    if (this.socket !== undefined || this.stopped) return; // a newer attempt is under way
    if (up && this.attempt >= 1) {
      this.status = 'refused';
      this.options.onChange();
      return;
    }
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.stopped) return;
    if (this.status !== 'connecting') this.status = 'reconnecting';
    const delay = BACKOFF_MS[Math.min(this.attempt, BACKOFF_MS.length - 1)];
    this.attempt += 1;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.open(), delay);
    this.options.onChange();
  }

  private connectionLost(): void {
    for (const waiting of this.waiting.values()) waiting.reject(new ConnectionLost('connection lost'));
    this.waiting.clear();
    this.held.length = 0;
    this.subscribing.clear();
    if (this.status === 'open') this.status = 'reconnecting';
    this.options.onChange();
  }

  private async handshake(): Promise<void> {
    this.handshaking = true;
    try {
      let dropped: PendingAction[] = [];
      let resumed = false;
      if (this.initialized) {
        try {
          const result = await this.request('reconnect', {
            channel: ROOT,
            clientId: this.clientId,
            lastSeenServerSeq: this.state.lastSeenServerSeq,
            subscriptions: this.state.subscriptions,
          });
          this.state.applyReconnect(result);
          resumed = true;
        } catch (error) {
          if (!(error instanceof RemoteError)) throw error;
          // The host does not know us (or cannot resume): start afresh below.
        }
      }
      if (!resumed) {
        const subscriptions = this.state.subscriptions;
        dropped = this.state.clearPending();
        await this.initialize();
        // One by one: a channel the host no longer has fails alone and is dropped.
        for (const uri of subscriptions) {
          if (uri === ROOT) continue;
          try {
            const result = await this.request('subscribe', { channel: uri });
            this.state.addSubscription(uri, result?.snapshot as Snapshot | undefined);
          } catch (error) {
            if (!(error instanceof RemoteError)) throw error;
          }
        }
      }
      this.handshaking = false;
      // Envelopes that arrived before the result: the state skips what it holds.
      for (const envelope of this.held.splice(0)) this.applyEnvelope(envelope);
      dropped.push(...this.state.clearPending());
      if (dropped.length > 0) this.options.onDropped?.(dropped);
      this.initialized = true;
      this.status = 'open';
      this.lastError = undefined;
      this.options.onChange();
      await this.refreshSessions();
    } catch (error) {
      this.handshaking = false;
      if (error instanceof ConnectionLost) return; // onclose schedules the next attempt
      this.lastError = error instanceof Error ? error.message : String(error);
      this.socket?.close(4000, 'handshake failed');
    }
  }

  private async initialize(): Promise<void> {
    const result = await this.request('initialize', {
      channel: ROOT,
      protocolVersions: PROTOCOL_VERSIONS,
      clientId: this.clientId,
      clientInfo: this.options.clientInfo ?? { name: 'ahp-web' },
      initialSubscriptions: [ROOT],
    });
    const version = result?.protocolVersion;
    const semantics = typeof version === 'string' && PROTOCOL_VERSIONS.includes(version)
      ? SEMANTICS[version]
      : undefined;
    if (semantics === undefined) {
      // versioning.md "Negotiation" 2.: the host returns one of the offered strings.
      throw new VersionMismatch(
        `the host answered protocol version ${JSON.stringify(version)}, ` +
          `which this page did not offer (${PROTOCOL_VERSIONS.join(', ')})`,
      );
    }
    this.protocolVersion = version;
    this.serverInfo = result?.serverInfo;
    this.state.reset(result?.serverSeq ?? 0, semantics);
    for (const snapshot of result?.snapshots ?? []) {
      this.state.addSubscription(snapshot.resource, snapshot);
    }
  }

  // -- incoming ------------------------------------------------------------------------

  private receive(text: string): void {
    let message: Json;
    try {
      message = JSON.parse(text);
    } catch {
      return; // not JSON: nothing a peer can act on
    }
    if (message === null || typeof message !== 'object' || Array.isArray(message)) return;
    if ('id' in message && ('result' in message || 'error' in message) && !('method' in message)) {
      const waiting = this.waiting.get(message.id);
      if (!waiting) return;
      this.waiting.delete(message.id);
      if (message.error) {
        const { code, message: text_, data } = message.error;
        waiting.reject(new RemoteError(code, text_, data));
      } else {
        waiting.resolve(message.result);
      }
      return;
    }
    if (typeof message.method !== 'string') return;
    if ('id' in message && message.id !== null && message.id !== undefined) {
      // A request from the host (resource*, createResourceWatch): we serve none.
      this.socket?.send(
        JSON.stringify({
          jsonrpc: '2.0',
          id: message.id,
          error: { code: -32601, message: `this client does not implement ${message.method}` },
        }),
      );
      return;
    }
    this.notification(message.method, message.params ?? {});
  }

  private notification(method: string, params: Json): void {
    switch (method) {
      case 'action': {
        const envelope = params as Envelope;
        if (this.handshaking) this.held.push(envelope);
        else if (this.subscribing.has(envelope.channel))
          this.subscribing.get(envelope.channel)?.push(envelope);
        else this.applyEnvelope(envelope);
        return;
      }
      case 'root/sessionAdded':
        this.sessions.set(params.summary.resource, params.summary);
        break;
      case 'root/sessionRemoved':
        this.sessions.delete(params.session);
        break;
      case 'root/sessionSummaryChanged': {
        const current = this.sessions.get(params.session);
        if (current) this.sessions.set(params.session, { ...current, ...params.changes });
        break;
      }
      default:
        return; // progress, auth, telemetry: not shown by this page
    }
    this.options.onChange();
  }

  private applyEnvelope(envelope: Envelope): void {
    const result = this.state.applyEnvelope(envelope);
    if (result.outcome === 'rejected') {
      this.reportRejection(result.acknowledged, envelope.rejectionReason);
    }
    this.options.onChange();
  }

  private reportRejection(entry: PendingAction | undefined, reason: string | undefined): void {
    if (entry && reason !== undefined) this.options.onRejected?.(entry, reason);
  }
}
