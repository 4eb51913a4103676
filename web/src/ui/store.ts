/**
 * The page's controller: one AhpClient, what the user has selected, and the
 * commands the components call. Components read the client's optimistic views
 * (`client.view(uri)`) and re-render on `subscribe`.
 *
 * Selection lives in the URL fragment (`#session=…&chat=…`), so a reload or a
 * second tab opens the same chat.
 */
import { uuid } from '../ids';
import { AhpClient, ConnectionLost, RemoteError, ROOT, SEMANTICS } from '../protocol/client';
import type { PendingAction } from '../protocol/reconcile';
import type { Json } from '../protocol/reducers';
import { socketUrl } from '../token';
import { backgroundTerminals, chatChangesetUri } from './changes';
import { isRead, type Anchor } from './chats';
import { fileUri } from './folders';
import { folderUri, pathOf, rememberFolder } from './sessions';

export interface Notice {
  id: number;
  text: string;
  kind: 'error' | 'info';
}

/** Where the recent folders are kept (`localStorage`). */
const RECENT_FOLDERS = 'ahp-server.recentFolders';

/** How often the page asks `/readyz` while it is open. */
const READY_POLL_MS = 5000;

export class Store {
  readonly client: AhpClient;
  session: string | undefined;
  chat: string | undefined;
  notices: Notice[] = [];
  /** Text given back to the composer, per chat (a message the host never got). */
  readonly restored = new Map<string, string>();
  /** Turns this page has seen start, by id: when (our clock) — for `duration` on cancel. */
  private readonly turnSeenAt = new Map<string, number>();
  /** Client-tool calls already answered. */
  private readonly answeredTools = new Set<string>();
  /** Chats this page marked read, with the state of their turns it marked (`readKey`). */
  private readonly readMarked = new Map<string, string>();
  private readonly listeners = new Set<() => void>();
  private scheduled = false;
  private noticeId = 0;
  /** The chat whose Changes view is open (1.0): its changeset is subscribed while it is. */
  changesOf: string | undefined;
  /** Background terminals whose output is open (1.0): subscribed, read-only, while they are. */
  readonly openTerminals = new Set<string>();
  /** Changeset and terminal channels the host refused: not asked again until reopened. */
  private readonly refused = new Set<string>();
  /** Completed turns a chat subscription asks for (`subscribe.view.turns`); older ones page in. */
  readonly turnsWindow: number;

  constructor(params: URLSearchParams) {
    this.session = params.get('session') ?? undefined;
    this.chat = params.get('chat') ?? undefined;
    const window_ = Number(params.get('turns'));
    this.turnsWindow = Number.isInteger(window_) && window_ > 0 ? window_ : 50;
    this.client = new AhpClient({
      url: socketUrl,
      clientId: uuid(),
      clientInfo: { name: 'ahp-server-web' },
      onChange: () => this.changed(),
      onDropped: (actions) => this.dropped(actions),
      onRejected: (action, reason) =>
        this.notify(`The host refused ${describe(action.action)}: ${reason}`, 'error'),
      // Up and accepting, yet the upgrade failed: a token or origin refusal. A host
      // that is up but not ready (its store failed, it is stopping: /readyz 503)
      // refuses every upgrade for now; it is tried again, not taken as a refusal.
      // Without /readyz (a proxy that does not pass it: 404), the page itself.
      probe: async () => {
        const ready = await fetch('/readyz', { method: 'GET', cache: 'no-store' });
        if (ready.status !== 404) return ready.ok;
        return (await fetch('/', { method: 'GET', cache: 'no-store' })).ok;
      },
    });
  }

  start(): void {
    // A tab the user comes back to marks the chat it shows read (`markRead`).
    document.addEventListener('visibilitychange', () => this.changed());
    this.client.start();
    void this.checkReady();
    setInterval(() => void this.checkReady(), READY_POLL_MS);
  }

  /**
   * What the host's `/readyz` said last (plain HTTP on the page's origin, no
   * token needed): `ok`, or its answer ("not ready", "failed: the store
   * failed: …"), or that nothing answered. Asked every few seconds and
   * whenever the connection's status changes, so a recovery clears the
   * banner as soon as the page is connected again.
   */
  readiness: { ok: boolean; text: string } | undefined;
  private lastStatus: string | undefined;
  private checking = false;

  private again = false;

  private async checkReady(): Promise<void> {
    if (this.checking) {
      this.again = true; // asked while a check runs: one more after it, with what is true now
      return;
    }
    this.checking = true;
    do {
      this.again = false;
      let next: { ok: boolean; text: string };
      try {
        const answer = await fetch('/readyz', { method: 'GET', cache: 'no-store' });
        const text = (await answer.text()).trim();
        // 404: a host (or a proxy in front) without the endpoint, which says nothing about health.
        const ok = answer.ok || answer.status === 404;
        next = ok ? { ok: true, text } : { ok: false, text: text || `HTTP ${answer.status}` };
      } catch {
        next = { ok: false, text: 'no answer' };
      }
      if (this.readiness?.ok !== next.ok || this.readiness?.text !== next.text) {
        this.readiness = next;
        this.changed();
      }
    } while (this.again);
    this.checking = false;
  }

  /**
   * Whether the host is healthy as this page sees it, and if not why: the
   * connection lost (with the host's close reason when it gave one), or
   * `/readyz` not ready. `undefined` when all is well (or still starting).
   */
  get health(): { kind: 'unreachable' | 'not-ready'; text: string } | undefined {
    const client = this.client;
    if (client.status === 'reconnecting') {
      const why = client.lastError ? `: ${client.lastError}` : '';
      return { kind: 'unreachable', text: `The connection to the host is lost${why}. Reconnecting…` };
    }
    if (this.readiness && !this.readiness.ok) {
      return { kind: 'not-ready', text: `The host is not ready (/readyz: ${this.readiness.text}).` };
    }
    return undefined;
  }

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Coalesce a burst of envelopes into one render per frame. A hidden tab gets
   * no animation frames, so a timer runs it too: its subscriptions and client
   * tools are kept up while nobody looks.
   */
  changed(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    const run = () => {
      if (!this.scheduled) return;
      this.scheduled = false;
      if (this.client.status !== this.lastStatus) {
        this.lastStatus = this.client.status;
        void this.checkReady();
      }
      this.sync();
      for (const listener of this.listeners) listener();
    };
    requestAnimationFrame(run);
    setTimeout(run, 250);
  }

  notify(text: string, kind: Notice['kind'] = 'info'): void {
    this.notices = [...this.notices.slice(-4), { id: ++this.noticeId, text, kind }];
    this.changed();
  }

  dismiss(id: number): void {
    this.notices = this.notices.filter((n) => n.id !== id);
    this.changed();
  }

  // -- what the page shows ---------------------------------------------------------------

  get root(): Json {
    return this.client.view(ROOT);
  }

  get sessionState(): Json {
    return this.session ? this.client.view(this.session) : undefined;
  }

  get chatState(): Json {
    return this.chat ? this.client.view(this.chat) : undefined;
  }

  agentOf(provider: string | undefined): Json {
    return (this.root?.agents ?? []).find((a: Json) => a.provider === provider);
  }

  /**
   * Whether the connection speaks 1.0 (1.0.0, or 0.9.0 with the same
   * semantics): read and archived flags, moving chats and resuming a failed
   * turn are offered only then. A 0.7 host has none of them.
   */
  get modern(): boolean {
    const version = this.client.protocolVersion;
    return version !== undefined && SEMANTICS[version] === '1.0';
  }

  /** Runs after every change: subscriptions follow the selection; our client tools get answered. */
  private sync(): void {
    const client = this.client;
    if (!client.ready) return;
    if (this.session && !client.state.subscriptions.includes(this.session)) {
      this.follow(this.session);
    }
    const session = this.sessionState;
    if (session && !this.chat && session.defaultChat) this.chat = session.defaultChat;
    if (this.chat && session && !(session.chats ?? []).some((c: Json) => c.resource === this.chat)) {
      if (session.lifecycle === 'ready' && session.defaultChat !== this.chat) {
        this.chat = session.defaultChat; // the chat was removed
      }
    }
    if (this.chat && !client.state.subscriptions.includes(this.chat)) this.follow(this.chat);
    const extra = this.extraChannels();
    for (const uri of extra) {
      if (!client.state.subscriptions.includes(uri) && !this.refused.has(uri)) this.follow(uri);
    }
    for (const uri of client.state.subscriptions) {
      if (uri !== ROOT && uri !== this.session && uri !== this.chat && !extra.includes(uri)) {
        client.unsubscribe(uri);
        this.readMarked.delete(uri);
      }
    }
    this.writeLocation();
    this.answerClientTools();
    this.markRead();
  }

  /**
   * The read-only channels the chat on screen shows at 1.0: its own changeset
   * while its Changes view is open, and the terminals of its background work
   * whose output is open. Each is unsubscribed once it is not shown (closed,
   * the entry gone, another chat on screen).
   */
  private extraChannels(): string[] {
    const chat = this.chatState;
    if (!this.modern || !chat || !this.chat) return [];
    const extra: string[] = [];
    const changeset = this.changesOf === this.chat ? chatChangesetUri(chat) : undefined;
    if (changeset) extra.push(changeset);
    for (const terminal of backgroundTerminals(chat)) if (this.openTerminals.has(terminal)) extra.push(terminal);
    return extra;
  }

  /**
   * The chat on screen is read once its turn has ended: `chat/isReadChanged
   * {isRead: true}`, once per state of its turns (a rejection is not retried
   * until something changes), only while the tab is visible. A turn starting
   * clears the flag (the reducer), so the next end is marked again.
   */
  private markRead(): void {
    const chat = this.chat;
    const state = this.chatState;
    if (!chat || !state || !this.modern || document.visibilityState !== 'visible') return;
    if (state.activeTurn || isRead(state.status)) return;
    const turns: Json[] = state.turns ?? [];
    const last = turns[turns.length - 1];
    const key = `${turns.length}:${last?.id ?? ''}:${last?.state ?? ''}`;
    if (this.readMarked.get(chat) === key) return;
    this.readMarked.set(chat, key);
    this.act(chat, { type: 'chat/isReadChanged', isRead: true });
  }

  private following = new Set<string>();

  private follow(uri: string): void {
    if (this.following.has(uri)) return;
    this.following.add(uri);
    const view = uri.startsWith('ahp-chat:') ? { turns: this.turnsWindow } : undefined;
    this.client
      .subscribe(uri, view)
      .catch((error) => {
        if (error instanceof RemoteError && !uri.startsWith('ahp-chat:') && !uri.startsWith('ahp-session:')) {
          this.refused.add(uri); // not asked again until the view is reopened
          this.notify(`Cannot open ${uri}: ${error.message}`, 'error');
        } else if (error instanceof RemoteError) {
          this.notify(`Cannot open ${uri}: ${error.message}`, 'error');
          if (uri === this.session) this.session = this.chat = undefined;
          if (uri === this.chat) this.chat = undefined;
        }
      })
      .finally(() => {
        this.following.delete(uri);
        this.changed();
      });
  }

  private writeLocation(): void {
    const params = new URLSearchParams();
    if (this.session) params.set('session', this.session);
    if (this.chat) params.set('chat', this.chat);
    if (this.turnsWindow !== 50) params.set('turns', String(this.turnsWindow));
    const hash = params.toString() ? `#${params}` : '';
    if (window.location.hash !== hash) {
      window.history.replaceState(window.history.state, '', window.location.pathname + hash);
    }
  }

  /** A client-provided tool assigned to this page: we provide none, so we deny it (spec §11.5). */
  private answerClientTools(): void {
    for (const uri of this.client.state.subscriptions) {
      const turn = uri.startsWith('ahp-chat:') ? this.client.view(uri)?.activeTurn : undefined;
      for (const part of turn?.responseParts ?? []) {
        const call = part.kind === 'toolCall' ? part.toolCall : undefined;
        if (
          call?.status !== 'running' ||
          call.contributor?.kind !== 'client' ||
          call.contributor.clientId !== this.client.clientId ||
          this.answeredTools.has(call.toolCallId)
        ) {
          continue;
        }
        this.answeredTools.add(call.toolCallId);
        this.act(uri, {
          type: 'chat/toolCallComplete',
          turnId: turn.id,
          toolCallId: call.toolCallId,
          result: {
            success: false,
            pastTenseMessage: `Not run: this page provides no tool "${call.toolName}"`,
            error: { message: `the browser client does not implement ${call.toolName}` },
          },
        });
      }
    }
  }

  // -- commands ----------------------------------------------------------------------------

  selectSession(uri: string): void {
    this.session = uri;
    this.chat = undefined;
    this.changed();
  }

  selectChat(uri: string): void {
    this.chat = uri;
    this.changed();
  }

  /** Archive or restore the chat on screen (`chat/isArchivedChanged`, write-ahead). */
  archiveChat(archived: boolean): void {
    if (this.chat) this.act(this.chat, { type: 'chat/isArchivedChanged', isArchived: archived });
  }

  /** Archive or restore the session on screen (`session/isArchivedChanged`, write-ahead). */
  archiveSession(archived: boolean): void {
    if (this.session) this.act(this.session, { type: 'session/isArchivedChanged', isArchived: archived });
  }

  /**
   * `moveChat`: within the session on screen (a new place in its order,
   * published as `session/chatsReordered`) or to another session, after
   * `anchor.after` or first. A chat moved away is followed to its new session.
   * The host's refusal (a running turn, another agent…) is a notice.
   */
  async moveChat(chat: string, session: string, anchor: Anchor): Promise<void> {
    const result = await this.call(
      'moveChat',
      { channel: chat, destination: { kind: 'session', session, ...anchor } },
      'Could not move the chat',
    );
    const owner: string = typeof result?.session === 'string' ? result.session : session;
    if (owner !== this.session) {
      this.session = owner;
      this.chat = chat;
      this.changed();
    }
  }

  /**
   * `moveChat` to a new session (`destination: {kind: "newSession"}`): the
   * host makes one of the same agent, with the chat as its default chat, and
   * names it in the result; the page follows the chat there.
   */
  async moveChatToNewSession(chat: string): Promise<void> {
    const result = await this.call('moveChat', { channel: chat, destination: { kind: 'newSession' } }, 'Could not move the chat');
    if (typeof result?.session === 'string') {
      this.session = result.session;
      this.chat = chat;
      this.changed();
    }
  }

  /** Open or close the Changes view of the chat on screen (its changeset subscribed while open). */
  toggleChanges(): void {
    this.changesOf = this.changesOf === this.chat ? undefined : this.chat;
    this.refused.clear();
    this.changed();
  }

  /** Show or hide a background command's output (its terminal subscribed, read-only, while shown). */
  toggleTerminal(uri: string): void {
    if (this.openTerminals.has(uri)) this.openTerminals.delete(uri);
    else this.openTerminals.add(uri);
    this.refused.delete(uri);
    this.changed();
  }

  /** Continue the latest turn from its resumable error (`chat/turnResume`, write-ahead). */
  resume(turnId: string): void {
    if (this.chat) this.act(this.chat, { type: 'chat/turnResume', turnId });
  }

  /** Rename the session on screen (`session/titleChanged`, write-ahead; the host's refusal rolls it back). */
  renameSession(title: string): boolean {
    const clean = title.trim();
    if (!this.session || !clean) return false;
    return this.act(this.session, { type: 'session/titleChanged', title: clean });
  }

  /**
   * Delete the session on screen with all its chats (`disposeSession`): the
   * host stops its agent and forgets it, and tells every client
   * (`root/sessionRemoved`). The page leaves it at once; a refusal is a notice.
   */
  async deleteSession(): Promise<void> {
    const session = this.session;
    if (!session) return;
    await this.call('disposeSession', { channel: session }, 'Could not delete the session');
    this.client.sessions.delete(session);
    if (this.session === session) {
      this.session = this.chat = undefined;
      this.changesOf = undefined;
      this.openTerminals.clear();
    }
    this.changed();
  }

  /**
   * `createSession {provider}`, in `folder` (a path or `file:` URI; none: the
   * host gives the session a folder of its own). A folder the host accepted
   * becomes the first of the recent folders; its refusal (outside the
   * roots…) is a notice, and nothing is created.
   */
  async newSession(provider: string, folder = ''): Promise<void> {
    const { uri: directory, error } = folderUri(folder);
    if (error) {
      this.notify(error, 'error');
      throw new Error(error);
    }
    const uri = `ahp-session:/${uuid()}`;
    const params: Json = { channel: uri, provider };
    if (directory) params.workingDirectories = [directory];
    await this.call('createSession', params, 'Could not create the session');
    if (directory) this.rememberFolder(pathOf(directory));
    this.selectSession(uri);
  }

  /** Folders this browser chose for new sessions, newest first (`localStorage`, this origin only). */
  get recentFolders(): string[] {
    try {
      const value: unknown = JSON.parse(localStorage.getItem(RECENT_FOLDERS) ?? '[]');
      return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
    } catch {
      return [];
    }
  }

  /**
   * `resourceList` of the folder `path` (the folder browser's): the host's
   * answer, or its refusal (outside the roots, too many entries, not allowed)
   * as the error the browser shows in place — never a page notice.
   */
  listFolder(path: string): Promise<Json> {
    return this.client.request('resourceList', { channel: ROOT, uri: fileUri(path) });
  }

  private rememberFolder(path: string): void {
    try {
      localStorage.setItem(RECENT_FOLDERS, JSON.stringify(rememberFolder(this.recentFolders, path)));
    } catch {
      // storage full or disabled: the picker just offers the roots
    }
  }

  async newChat(source?: Json): Promise<void> {
    if (!this.session) return;
    const chat = `ahp-chat:/${uuid()}`;
    await this.call('createChat', source ? { channel: this.session, chat, source } : { channel: this.session, chat });
    this.selectChat(chat);
  }

  async loadOlder(): Promise<void> {
    const chat = this.chat;
    const cursor = chat ? this.client.view(chat)?.turnsNextCursor : undefined;
    if (chat && cursor) await this.call('fetchTurns', { channel: chat, cursor });
  }

  /** Send `text` as a new turn, or queue it / steer with it while a turn runs. */
  send(text: string, mode: 'send' | 'queue' | 'steer'): boolean {
    const chat = this.chat;
    if (!chat || !text.trim()) return false;
    const message = { text, origin: { kind: 'user' } };
    if (mode === 'send') {
      const turnId = uuid();
      this.turnSeenAt.set(turnId, performance.now());
      return this.act(chat, {
        type: 'chat/turnStarted',
        turnId,
        startedAt: new Date().toISOString(),
        message,
      });
    }
    const kind = mode === 'steer' ? 'steering' : 'queued';
    return this.act(chat, { type: 'chat/pendingMessageSet', kind, id: uuid(), message });
  }

  cancel(): void {
    const chat = this.chat;
    const turn = this.chatState?.activeTurn;
    if (!chat || !turn) return;
    const seen = this.turnSeenAt.get(turn.id);
    // The producer's own measure (spec: never derived from another clock's timestamps).
    const duration = seen === undefined ? 0 : Math.round(performance.now() - seen);
    this.act(chat, { type: 'chat/turnCancelled', turnId: turn.id, duration });
  }

  removePending(kind: 'steering' | 'queued', id: string): void {
    if (this.chat) this.act(this.chat, { type: 'chat/pendingMessageRemoved', kind, id });
  }

  confirmTool(turnId: string, call: Json, approve: boolean, optionId?: string): void {
    if (!this.chat) return;
    const base = { type: 'chat/toolCallConfirmed', turnId, toolCallId: call.toolCallId };
    const option = optionId ? { selectedOptionId: optionId } : {};
    this.act(
      this.chat,
      approve
        ? { ...base, approved: true, confirmed: 'user-action', ...option }
        : { ...base, approved: false, reason: 'denied', ...option },
    );
  }

  answerInput(requestId: string, response: 'accept' | 'decline' | 'cancel', answers?: Json): void {
    if (!this.chat) return;
    const action: Json = { type: 'chat/inputCompleted', requestId, response };
    if (answers && Object.keys(answers).length > 0) action.answers = answers;
    this.act(this.chat, action);
  }

  /** Note when this page first saw a turn (for the `duration` of a cancel). */
  sawTurn(turnId: string): void {
    if (!this.turnSeenAt.has(turnId)) this.turnSeenAt.set(turnId, performance.now());
  }

  private act(channel: string, action: Json): boolean {
    try {
      this.client.dispatch(channel, action);
      return true;
    } catch (error) {
      this.notify(error instanceof ConnectionLost ? 'Not connected: try again in a moment.' : String(error), 'error');
      return false;
    }
  }

  private async call(method: string, params: Json, failure = `${method} failed`): Promise<Json> {
    try {
      return await this.client.request(method, params);
    } catch (error) {
      this.notify(`${failure}: ${error instanceof Error ? error.message : String(error)}`, 'error');
      throw error;
    }
  }

  private dropped(actions: PendingAction[]): void {
    for (const { channel, action } of actions) {
      if (action?.type === 'chat/isReadChanged') this.readMarked.delete(channel); // mark it again
      const text = action?.message?.text;
      if (
        typeof text === 'string' &&
        (action.type === 'chat/turnStarted' || action.type === 'chat/pendingMessageSet')
      ) {
        const before = this.restored.get(channel);
        this.restored.set(channel, before ? `${before}\n${text}` : text);
        this.notify('The connection dropped before the host got your message: it is back in the message box.', 'error');
      }
    }
  }
}

function describe(action: Json): string {
  const names: Record<string, string> = {
    'chat/turnStarted': 'the message',
    'chat/turnCancelled': 'the cancel',
    'chat/toolCallConfirmed': 'the tool decision',
    'chat/inputCompleted': 'the answers',
    'chat/pendingMessageSet': 'the queued message',
    'chat/pendingMessageRemoved': 'the removal',
    'chat/turnResume': 'continuing the answer',
    'chat/isReadChanged': 'the read mark',
    'session/titleChanged': 'the new title',
  };
  if (action?.type === 'chat/isArchivedChanged') return action.isArchived ? 'archiving the chat' : 'restoring the chat';
  if (action?.type === 'session/isArchivedChanged') {
    return action.isArchived ? 'archiving the session' : 'restoring the session';
  }
  return names[action?.type] ?? String(action?.type ?? 'the action');
}
