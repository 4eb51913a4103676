/**
 * Version negotiation in `initialize` (versioning.md "Negotiation"), over a
 * fake WebSocket the test plays the host on: the page offers 1.0.0, 0.9.0 and
 * 0.7.0 in that order, accepts each as the answer and reduces with its
 * semantics, and refuses an answer it did not offer.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { AhpClient, PROTOCOL_VERSIONS } from './client';
import type { Json } from './reducers';

/** The sockets the client opened, newest last. */
const sockets: FakeSocket[] = [];

class FakeSocket {
  readyState = 0;
  onopen: (() => void) | null = null;
  onmessage: ((event: { data: string }) => void) | null = null;
  onclose: ((event: { code: number; reason: string }) => void) | null = null;
  closed: { code?: number; reason?: string } | undefined;
  private readonly inbox: Json[] = [];
  private waiter: ((message: Json) => void) | undefined;

  constructor(readonly url: string) {
    sockets.push(this);
    queueMicrotask(() => {
      this.readyState = 1;
      this.onopen?.();
    });
  }

  send(text: string): void {
    const message = JSON.parse(text);
    if (this.waiter) {
      const waiter = this.waiter;
      this.waiter = undefined;
      waiter(message);
    } else {
      this.inbox.push(message);
    }
  }

  close(code?: number, reason?: string): void {
    if (this.readyState === 3) return;
    this.readyState = 3;
    this.closed = { code, reason };
    queueMicrotask(() => this.onclose?.({ code: code ?? 1005, reason: reason ?? '' }));
  }

  /** The host closes the connection with `code` and `reason`. */
  closedByHost(code: number, reason: string): void {
    this.readyState = 3;
    this.onclose?.({ code, reason });
  }

  /** The next message the client sends. */
  next(): Promise<Json> {
    const queued = this.inbox.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    return new Promise((resolve) => (this.waiter = resolve));
  }

  /** Answer request `id` with `result` (as the host). */
  answer(id: number, result: Json): void {
    this.onmessage?.({ data: JSON.stringify({ jsonrpc: '2.0', id, result }) });
  }
}

const ROOT_STATE = { agents: [], activeSessions: 0 };

/** A started client, and `settle()`: a promise of its next change notification. */
function startClient(): { client: AhpClient; settle: () => Promise<void> } {
  let notify: () => void = () => undefined;
  const client = new AhpClient({
    url: () => 'ws://host.test/',
    clientId: 'client-test',
    onChange: () => notify(),
    WebSocket: FakeSocket as unknown as typeof WebSocket,
    clock: () => 9999,
  });
  client.start();
  const settle = () => new Promise<void>((resolve) => (notify = resolve));
  return { client, settle };
}

let running: AhpClient | undefined;

afterEach(() => {
  running?.stop();
  running = undefined;
  sockets.length = 0;
});

/** Play the host through `initialize` answering `version`; return the client's offer. */
async function handshake(version: string): Promise<Json> {
  await Promise.resolve(); // the socket opens in a microtask
  const socket = sockets[sockets.length - 1];
  const init = await socket.next();
  expect(init.method).toBe('initialize');
  socket.answer(init.id, {
    protocolVersion: version,
    serverSeq: 7,
    serverInfo: { name: 'fake-host', version: '1' },
    snapshots: [{ resource: 'ahp-root://', state: ROOT_STATE, fromSeq: 7 }],
  });
  return init.params;
}

describe('initialize', () => {
  it('offers 1.0.0, 0.9.0 and 0.7.0, most preferred first', async () => {
    const { client } = startClient();
    running = client;
    const params = await handshake('1.0.0');
    expect(params.protocolVersions).toEqual(['1.0.0', '0.9.0', '0.7.0']);
    expect(PROTOCOL_VERSIONS).toEqual(['1.0.0', '0.9.0', '0.7.0']);
  });

  const answers: Array<[string, string]> = [
    ['1.0.0', '1.0'],
    ['0.9.0', '1.0'],
    ['0.7.0', '0.7'],
  ];
  for (const [version, semantics] of answers) {
    it(`accepts ${version} and reduces with the ${semantics} semantics`, async () => {
      const { client } = startClient();
      running = client;
      await handshake(version);
      const socket = sockets[sockets.length - 1];
      const list = await socket.next(); // after the handshake: the session catalogue
      expect(list.method).toBe('listSessions');
      expect(client.status).toBe('open');
      expect(client.protocolVersion).toBe(version);
      expect(client.state.semantics).toBe(semantics);
      expect(client.view('ahp-root://')).toEqual(ROOT_STATE);
      expect(socket.closed).toBeUndefined();
    });
  }

  it('refuses an answer it did not offer', async () => {
    const { client, settle } = startClient();
    running = client;
    await handshake('0.8.0');
    const socket = sockets[sockets.length - 1];
    while (socket.closed === undefined) await settle();
    expect(socket.closed.code).toBe(4000);
    expect(client.status).not.toBe('open');
    expect(client.protocolVersion).toBeUndefined();
    expect(client.lastError).toMatch(/"0\.8\.0", which this page did not offer/);
    expect(client.view('ahp-root://')).toBeUndefined();
  });

  it('refuses an answer without a version', async () => {
    const { client, settle } = startClient();
    running = client;
    await handshake(undefined as unknown as string);
    const socket = sockets[sockets.length - 1];
    while (socket.closed === undefined) await settle();
    expect(client.protocolVersion).toBeUndefined();
    expect(client.lastError).toMatch(/did not offer/);
  });
});

describe('closes', () => {
  it('keeps the reason the host closed with, until the next handshake', async () => {
    const { client } = startClient();
    running = client;
    await handshake('1.0.0');
    const socket = sockets[sockets.length - 1];
    await socket.next(); // listSessions
    socket.closedByHost(1012, 'the store failed: database or disk is full');
    expect(client.status).toBe('reconnecting');
    expect(client.lastError).toBe('the host closed the connection: the store failed: database or disk is full');
  });
});
