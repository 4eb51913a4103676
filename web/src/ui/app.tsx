/**
 * The page: sessions on the left, the selected session's chats and transcript
 * on the right, the composer at the bottom. Everything is rendered from the
 * client's optimistic views; agent text only ever through `Markdown`.
 *
 * The states have the shape of the negotiated protocol version (1.0/0.9 or
 * 0.7; `client.protocolVersion`, shown in the header). Where the shapes differ
 * the page reads both: a turn's error (`turnError`), the primary working
 * directory (`primaryDirectory`), the failed lifecycle, an inline or
 * referenced tool input (`toolInputText`).
 *
 * At 1.0 (and 0.9) the page also offers what 0.7 hosts do not have: archived
 * sessions and chats shown apart and restorable, unread markers, chats
 * reordered (drag, or Move left / right) and moved to another session
 * (`moveChat`, also to a new session), Continue on a failed answer the host
 * can resume, a chat's change counts and its Changes view (its own changeset),
 * and its background work with each command's output. In 0.7 mode none of
 * these is shown.
 *
 * The sidebar (new session, filter, the session list) is `sidebar.tsx`, its
 * rules `sessions.ts`; the session's header here offers Rename and Delete,
 * and a banner says when the host is unreachable or not ready (`Store.health`).
 */
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { Fragment, type ComponentChildren } from 'preact';
import { markdownOf, renderMarkdown } from '../markdown';
import { StreamedBlocks } from '../streamed';
import type { Json } from '../protocol/reducers';
import { SessionStatus } from '../protocol/reducers';
import { getToken, setToken } from '../token';
import {
  backgroundWork,
  changesLabel,
  chatChangesetUri,
  editRows,
  fileRows,
  lastLines,
  lineDiff,
  terminalText,
  type FileRow,
} from './changes';
import { dropAnchor, isArchived, isUnread, resumableTurn, stepAnchor } from './chats';
import { agentName, plainTitle } from './sessions';
import { Sidebar, UnreadDot } from './sidebar';
import type { Store } from './store';

function useStore(store: Store): void {
  const [, setVersion] = useState(0);
  useEffect(() => store.subscribe(() => setVersion((v) => v + 1)), [store]);
}

/** Sanitized Markdown (markdown.ts); re-rendered when the text grows. */
function Markdown({ text, class: className }: { text: string; class?: string }) {
  const ref = useRef<HTMLDivElement>(null);
  useLayoutEffect(() => {
    ref.current?.replaceChildren(renderMarkdown(text));
  }, [text]);
  return <div class={`markdown ${className ?? ''}`} ref={ref} />;
}

/**
 * A streamed answer (or reasoning) as Markdown, rendered incrementally and a
 * frame's slice at a time by `StreamedBlocks` (web/src/streamed.ts), which
 * owns the element's children: Preact renders the element alone.
 */
function StreamedMarkdown({ text, class: className, streaming }: { text: string; class?: string; streaming: boolean }) {
  const ref = useRef<HTMLDivElement>(null);
  const view = useRef<StreamedBlocks | null>(null);
  useLayoutEffect(() => {
    view.current ??= new StreamedBlocks(ref.current!);
    view.current.update(text, streaming);
  }, [text, streaming]);
  useEffect(() => () => view.current?.dispose(), []);
  return <div class={`markdown ${className ?? ''}`} ref={ref} />;
}

/**
 * The error a finished turn ended with: at 1.0 its last response part when
 * that is an error part (REDUCER-CHANGES 8), at 0.7 the turn's `error`.
 */
export function turnError(turn: Json): Json | undefined {
  if (turn.error) return turn.error;
  return trailingErrorPart(turn)?.error;
}

function trailingErrorPart(turn: Json): Json | undefined {
  const parts: Json[] = turn.responseParts ?? [];
  const last = parts[parts.length - 1];
  return last?.kind === 'error' ? last : undefined;
}

/** The chat's primary working directory: 0.7 names it, 1.0 has it at index 0. */
export function primaryDirectory(chat: Json, session: Json): string | undefined {
  return chat?.primaryWorkingDirectory ?? chat?.workingDirectories?.[0] ?? session?.workingDirectories?.[0];
}

/** A session whose creation failed: lifecycle `failed` (1.0) or `creationFailed` (0.7). */
function creationFailed(session: Json): boolean {
  return session.lifecycle === 'failed' || session.lifecycle === 'creationFailed';
}

/** A tool input as text: inline (a string), or at 1.0 possibly a ContentRef. */
function toolInputText(input: Json): string | undefined {
  if (input === undefined || input === null || input === '') return undefined;
  if (typeof input === 'string') return input;
  return `Attached content: ${input.uri ?? 'unknown'}${input.contentType ? ` (${input.contentType})` : ''}`;
}

/** A URI as a short label (a `file:` URI as its path). */
function directoryLabel(uri: string): string {
  try {
    const url = new URL(uri);
    return url.protocol === 'file:' ? decodeURIComponent(url.pathname) : uri;
  } catch {
    return uri;
  }
}

function activityOf(status: number | undefined): string {
  const bits = (status ?? 0) & 0b11111;
  if (bits === SessionStatus.InputNeeded) return 'needs input';
  if (bits === SessionStatus.InProgress) return 'working';
  if (bits === SessionStatus.Error) return 'error';
  return 'idle';
}

export function App({ store }: { store: Store }) {
  useStore(store);
  const client = store.client;
  return (
    <div class="app">
      <header class="top">
        <h1>AHP</h1>
        <ConnectionBadge store={store} />
        {client.serverInfo?.name && (
          <span class="server">
            {client.serverInfo.name} {client.serverInfo.version ?? ''}
          </span>
        )}
        {client.protocolVersion && (
          <span class="protocol" data-protocol-version={client.protocolVersion}>
            protocol {client.protocolVersion}
          </span>
        )}
      </header>
      {client.status === 'refused' && <TokenForm store={store} />}
      <HealthBanner store={store} />
      <Notices store={store} />
      <div class="layout">
        <Sidebar store={store} />
        <main class="main" aria-label="Chat">
          {store.session ? <SessionView store={store} /> : <Welcome store={store} />}
        </main>
      </div>
    </div>
  );
}

function ConnectionBadge({ store }: { store: Store }) {
  const labels = {
    connecting: 'Connecting…',
    open: 'Connected',
    reconnecting: 'Reconnecting…',
    refused: 'Refused',
  } as const;
  const status = store.client.status;
  return (
    <span
      class={`badge conn-${status}`}
      role="status"
      aria-live="polite"
      data-status={status}
      title={status === 'open' ? undefined : store.client.lastError}
    >
      {labels[status]}
      {status === 'reconnecting' && store.client.lastError ? ` (${store.client.lastError})` : ''}
    </span>
  );
}

/**
 * The host's health, when it is not good: the connection lost (with the
 * host's close reason) or `/readyz` not ready. Gone once both are well again.
 */
function HealthBanner({ store }: { store: Store }) {
  const health = store.health;
  if (!health) return null;
  return (
    <div class="health" role="alert" data-health={health.kind}>
      {health.text}
    </div>
  );
}

function TokenForm({ store }: { store: Store }) {
  const [value, setValue] = useState('');
  return (
    <form
      class="token"
      onSubmit={(event) => {
        event.preventDefault();
        setToken(value.trim() || null);
        store.client.retry();
      }}
    >
      <p>
        The host refused the connection: it needs a token (or this page's origin is not allowed).
        {getToken() ? ' The token this tab has was not accepted.' : ''}
      </p>
      <label for="token-input">Connection token</label>
      <input
        id="token-input"
        type="password"
        autocomplete="off"
        value={value}
        onInput={(event) => setValue(event.currentTarget.value)}
      />
      <button type="submit">Connect</button>
    </form>
  );
}

function Notices({ store }: { store: Store }) {
  if (store.notices.length === 0) return null;
  return (
    <div class="notices" role="alert">
      {store.notices.map((notice) => (
        <p key={notice.id} class={`notice ${notice.kind}`}>
          <span>{notice.text}</span>
          <button type="button" aria-label="Dismiss" onClick={() => store.dismiss(notice.id)}>
            ×
          </button>
        </p>
      ))}
    </div>
  );
}

function Welcome({ store }: { store: Store }) {
  return (
    <div class="welcome">
      <h2>Welcome</h2>
      <p>
        Pick a session on the left, or start one with an agent.
        {store.client.ready ? '' : ' (Waiting for the host…)'}
      </p>
    </div>
  );
}

function chatLabel(chat: Json, defaultChat: string | undefined): string {
  if (chat.resource === defaultChat) return 'Main';
  const origin = chat.origin?.kind;
  const title = chat.title && chat.title !== 'New chat' ? chat.title : '';
  if (origin === 'fork') return title ? `Fork: ${title}` : 'Fork';
  if (origin === 'sideChat') return title ? `Side: ${title}` : 'Side chat';
  return title || 'Chat';
}

function SessionView({ store }: { store: Store }) {
  const session = store.sessionState;
  const dragged = useRef<string | undefined>(undefined);
  const [dropAt, setDropAt] = useState<{ chat: string; after: boolean } | undefined>(undefined);
  if (!session) return <p class="loading">Opening the session…</p>;
  if (creationFailed(session)) {
    return (
      <div class="session">
        <SessionHeader key={store.session} store={store} session={session} />
        <p class="error failed-start" role="note">
          Failed to start: {session.creationError?.message ?? 'unknown error'}
        </p>
      </div>
    );
  }
  const modern = store.modern;
  const chats: Json[] = session.chats ?? [];
  // At 1.0 archived chats are listed apart; the tabs are the others, in the catalogue's order.
  const tabs = modern ? chats.filter((c) => !isArchived(c.status)) : chats;
  const archived = modern ? chats.filter((c) => isArchived(c.status)) : [];
  const order = tabs.map((c) => c.resource);
  const sessionArchived = modern && isArchived(session.status);
  const drop = (target: string, after: boolean) => {
    const moved = dragged.current;
    dragged.current = undefined;
    setDropAt(undefined);
    const anchor = moved ? dropAnchor(order, moved, target, after) : undefined;
    if (moved && anchor && store.session) void store.moveChat(moved, store.session, anchor).catch(() => undefined);
  };
  return (
    <div class="session">
      <SessionHeader key={store.session} store={store} session={session} />
      {sessionArchived && (
        <p class="archived-note" data-archived="session">
          This session is archived.
        </p>
      )}
      <div class="session-head">
        <div class="chat-tabs" role="tablist" aria-label="Chats of this session">
          {tabs.map((chat) => {
            const movable = modern && chat.movable === true;
            const marker = dropAt?.chat === chat.resource ? (dropAt?.after ? ' drop-after' : ' drop-before') : '';
            const unread = modern && chat.resource !== store.chat && isUnread(chat.status);
            return (
              <button
                key={chat.resource}
                type="button"
                role="tab"
                class={`chat-tab${marker}`}
                data-chat={chat.resource}
                data-unread={unread ? 'true' : undefined}
                aria-selected={chat.resource === store.chat}
                draggable={movable}
                onClick={() => store.selectChat(chat.resource)}
                onDragStart={(event) => {
                  if (!movable) return;
                  dragged.current = chat.resource;
                  event.dataTransfer?.setData('text/plain', chat.resource);
                  if (event.dataTransfer) event.dataTransfer.effectAllowed = 'move';
                }}
                onDragEnd={() => {
                  dragged.current = undefined;
                  setDropAt(undefined);
                }}
                onDragOver={(event) => {
                  if (!dragged.current) return;
                  event.preventDefault();
                  const box = event.currentTarget.getBoundingClientRect();
                  const after = event.clientX > box.left + box.width / 2;
                  if (dropAt?.chat !== chat.resource || dropAt?.after !== after) setDropAt({ chat: chat.resource, after });
                }}
                onDragLeave={() => setDropAt(undefined)}
                onDrop={(event) => {
                  event.preventDefault();
                  const box = event.currentTarget.getBoundingClientRect();
                  drop(chat.resource, event.clientX > box.left + box.width / 2);
                }}
              >
                {chatLabel(chat, session.defaultChat)}
                {modern && changesLabel(chat.changes) && (
                  <span class="tab-changes" data-changes={changesLabel(chat.changes)}>
                    {changesLabel(chat.changes)}
                  </span>
                )}
                {(chat.status & 0b11111) !== SessionStatus.Idle && (
                  <span class="dot" aria-label={activityOf(chat.status)} />
                )}
                {unread && <UnreadDot />}
              </button>
            );
          })}
          <button
            type="button"
            class="new-chat"
            disabled={!store.client.ready || session.lifecycle !== 'ready'}
            onClick={() => void store.newChat().catch(() => undefined)}
          >
            New chat
          </button>
        </div>
        {archived.length > 0 && (
          <details class="archived-chats">
            <summary>Archived chats ({archived.length})</summary>
            <ul>
              {archived.map((chat) => (
                <li key={chat.resource}>
                  <button
                    type="button"
                    class="link"
                    data-chat={chat.resource}
                    aria-current={chat.resource === store.chat ? 'true' : undefined}
                    onClick={() => store.selectChat(chat.resource)}
                  >
                    {chatLabel(chat, session.defaultChat)}
                  </button>
                </li>
              ))}
            </ul>
          </details>
        )}
        {modern && (
          <button
            type="button"
            class="session-archive"
            disabled={!store.client.ready}
            onClick={() => store.archiveSession(!sessionArchived)}
          >
            {sessionArchived ? 'Restore session' : 'Archive session'}
          </button>
        )}
      </div>
      {session.lifecycle === 'creating' && <p class="loading">The agent is starting…</p>}
      {store.chatState ? <ChatView store={store} order={order} /> : store.chat && <p class="loading">Opening the chat…</p>}
    </div>
  );
}

/**
 * The session's title (plain text, the Markdown's text), its agent, and
 * **Rename** (`session/titleChanged`, write-ahead) and **Delete**
 * (`disposeSession`, asked first on the page: the session and all its chats).
 */
function SessionHeader({ store, session }: { store: Store; session: Json }) {
  const [editing, setEditing] = useState<string | undefined>(undefined);
  const [confirming, setConfirming] = useState(false);
  const title = plainTitle(session.title) || 'Untitled';
  const agent = agentName(store.root, session.provider);
  const ready = store.client.ready;
  if (editing !== undefined) {
    return (
      <form
        class="session-title rename"
        onSubmit={(event) => {
          event.preventDefault();
          if (store.renameSession(editing)) setEditing(undefined);
        }}
      >
        <label for="session-title-input">Session title</label>
        <input
          id="session-title-input"
          type="text"
          value={editing}
          onInput={(event) => setEditing(event.currentTarget.value)}
          onKeyDown={(event) => {
            if (event.key === 'Escape') setEditing(undefined);
          }}
        />
        <button type="submit" class="primary" disabled={!ready || !editing.trim()}>
          Save
        </button>
        <button type="button" onClick={() => setEditing(undefined)}>
          Cancel
        </button>
      </form>
    );
  }
  return (
    <div class="session-title">
      <h2 title={title}>{title}</h2>
      <span class="agent muted" title={agent}>
        {agent}
      </span>
      {confirming ? (
        <span class="confirm-delete" role="group" aria-label="Delete this session">
          <span>Delete this session and all its chats?</span>
          <button
            type="button"
            class="deny"
            disabled={!ready}
            onClick={() => {
              setConfirming(false);
              void store.deleteSession().catch(() => undefined);
            }}
          >
            Delete session
          </button>
          <button type="button" onClick={() => setConfirming(false)}>
            Keep
          </button>
        </span>
      ) : (
        <span class="session-title-actions">
          <button type="button" disabled={!ready} onClick={() => setEditing(session.title ?? '')}>
            Rename
          </button>
          <button type="button" class="deny" disabled={!ready} onClick={() => setConfirming(true)}>
            Delete
          </button>
        </span>
      )}
    </div>
  );
}

/**
 * What can be done with the chat on screen at 1.0: Move left / right (the
 * keyboard's way to reorder; dragging a tab does the same), move it to
 * another session of the same agent, archive or restore it. A session's
 * default chat is never movable and is archived with its session (Archive
 * session); archived some other way, it is restored here like any chat.
 */
/** The move menu's value for "New session" (`moveChat` with `destination: {kind: "newSession"}`). */
const NEW_SESSION = 'new-session';

function ChatActions({ store, order }: { store: Store; order: string[] }) {
  const [target, setTarget] = useState('');
  const session = store.sessionState;
  const chat = store.chatState;
  const uri = store.chat;
  if (!store.modern || !session || !chat || !uri) return null;
  const entry = (session.chats ?? []).find((c: Json) => c.resource === uri);
  const movable = (entry?.movable ?? chat.movable) === true;
  const archived = isArchived(chat.status);
  const isDefault = uri === session.defaultChat;
  const ready = store.client.ready;
  const destinations = [...store.client.sessions.values()].filter(
    (s) => s.resource !== store.session && s.provider === session.provider && !isArchived(s.status),
  );
  const chosen =
    target === NEW_SESSION || destinations.some((s) => s.resource === target)
      ? target
      : destinations[0]?.resource ?? NEW_SESSION;
  const step = (direction: -1 | 1) => (order.includes(uri) ? stepAnchor(order, uri, direction) : undefined);
  const move = (destination: string, anchor: { after?: string } | undefined) => {
    if (anchor) void store.moveChat(uri, destination, anchor).catch(() => undefined);
  };
  if (isDefault && !archived) return null;
  return (
    <div class="chat-actions" role="toolbar" aria-label="Chat actions">
      {archived && (
        <span class="archived-note" data-archived="chat">
          This chat is archived.
        </span>
      )}
      {movable && !archived && (
        <>
          <button type="button" disabled={!ready || !step(-1)} onClick={() => move(store.session ?? '', step(-1))}>
            Move left
          </button>
          <button type="button" disabled={!ready || !step(1)} onClick={() => move(store.session ?? '', step(1))}>
            Move right
          </button>
        </>
      )}
      {movable && (
        <form
          class="move-to"
          onSubmit={(event) => {
            event.preventDefault();
            if (chosen === NEW_SESSION) void store.moveChatToNewSession(uri).catch(() => undefined);
            else if (chosen) move(chosen, {});
          }}
        >
          <label for="move-target">Move to session</label>
          <select id="move-target" value={chosen} onChange={(event) => setTarget(event.currentTarget.value)}>
            {destinations.map((s) => (
              <option key={s.resource} value={s.resource}>
                {s.title || 'Untitled'}
              </option>
            ))}
            <option value={NEW_SESSION}>New session</option>
          </select>
          <button type="submit" disabled={!ready || !chosen}>
            Move
          </button>
        </form>
      )}
      <button type="button" disabled={!ready} onClick={() => store.archiveChat(!archived)}>
        {archived ? 'Restore chat' : 'Archive chat'}
      </button>
    </div>
  );
}

function ChatView({ store, order }: { store: Store; order: string[] }) {
  const chat = store.chatState;
  const session = store.sessionState;
  const caps = store.agentOf(session?.provider)?.capabilities?.multipleChats ?? {};
  const log = useRef<HTMLDivElement>(null);
  const stick = useRef(true);
  const turns: Json[] = chat.turns ?? [];
  const active = chat.activeTurn;
  if (active) store.sawTurn(active.id);
  useLayoutEffect(() => {
    const el = log.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  });
  const directory = primaryDirectory(chat, session);
  const resumable = store.modern ? resumableTurn(chat) : undefined;
  return (
    <section class="chat" aria-label={chat.title || 'Chat'}>
      <ChatActions store={store} order={order} />
      <ChatChanges store={store} />
      <BackgroundWork store={store} chat={chat} />
      {directory && (
        <p class="directory muted" title={directory}>
          In {directoryLabel(directory)}
        </p>
      )}
      {chat.origin?.kind === 'sideChat' && chat.origin.selection?.text && (
        <blockquote class="selection">{chat.origin.selection.text}</blockquote>
      )}
      <div
        class="transcript"
        role="log"
        aria-live="polite"
        ref={log}
        onScroll={(event) => {
          const el = event.currentTarget;
          stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
        }}
      >
        {chat.turnsNextCursor && (
          <button type="button" class="older" onClick={() => void store.loadOlder().catch(() => undefined)}>
            Load older turns
          </button>
        )}
        {turns.map((turn) => (
          <TurnView key={turn.id} store={store} turn={turn} caps={caps} resumable={turn.id === resumable} />
        ))}
        {active && <TurnView key={active.id} store={store} turn={active} caps={caps} active />}
      </div>
      <Pending store={store} chat={chat} />
      <Composer store={store} chat={chat} key={store.chat} />
    </section>
  );
}

/**
 * 1.0: the chat's change counts (its catalogue entry's `changes`) and the
 * Changes view: the files of its own changeset (the `chat` entry of its
 * `changesets`), subscribed while the view is open.
 */
function ChatChanges({ store }: { store: Store }) {
  const chat = store.chatState;
  const uri = chatChangesetUri(chat);
  if (!store.modern || !uri || !store.chat) return null;
  const entry = (store.sessionState?.chats ?? []).find((c: Json) => c.resource === store.chat);
  const label = changesLabel(entry?.changes);
  const open = store.changesOf === store.chat;
  return (
    <div class="chat-changes">
      <button
        type="button"
        class="changes-toggle"
        aria-expanded={open}
        aria-controls="changes-view"
        onClick={() => store.toggleChanges()}
      >
        Changes{label ? ` · ${label}` : ''}
      </button>
      {open && <ChangesView store={store} uri={uri} />}
    </div>
  );
}

function ChangesView({ store, uri }: { store: Store; uri: string }) {
  const state = store.client.view(uri);
  if (!state) {
    return (
      <p id="changes-view" class="loading">
        Opening the changes…
      </p>
    );
  }
  const rows = fileRows(state);
  return (
    <section id="changes-view" class="changes" aria-label="Changes" data-changeset={uri} data-status={state.status}>
      {state.status === 'error' && <p class="error">{state.error?.message ?? 'The changes could not be listed in full.'}</p>}
      {rows.length === 0 ? (
        <p class="muted">No changed files.</p>
      ) : (
        <ul class="change-files">
          {rows.map((row) => (
            <li key={row.id} class="change-file" data-file={row.id} data-kind={row.kind}>
              <details>
                <summary>
                  <FileHead row={row} />
                </summary>
                <FileDiff row={row} />
              </details>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

/** A changed file's path, kind (unless modified) and line counts. */
function FileHead({ row }: { row: FileRow }) {
  return (
    <>
      <span class="path">{row.path}</span>
      {row.kind !== 'modified' && <span class={`file-kind ${row.kind}`}>{row.kind}</span>}
      <span class="added">+{row.added}</span>
      <span class="removed">{'\u2212'}{row.removed}</span>
    </>
  );
}

/** A file's before and after as a line diff (text only: nothing in it is rendered as markup). */
function FileDiff({ row }: { row: FileRow }) {
  if (row.omitted || (row.kind !== 'created' && row.before === undefined) || (row.kind !== 'deleted' && row.after === undefined)) {
    return <p class="muted">The content is not shown (too large, or not text).</p>;
  }
  const lines = lineDiff(row.before, row.after);
  if (!lines) return <p class="muted">Too long to compare here.</p>;
  const sign = { same: ' ', added: '+', removed: '-' } as const;
  return (
    <pre class="diff" aria-label={`Changes to ${row.path}`}>
      {lines.map((line, index) => (
        <span key={index} class={`diff-line ${line.kind}`} data-line={line.kind}>
          {sign[line.kind]} {line.text}
          {'\n'}
        </span>
      ))}
    </pre>
  );
}

function startedLabel(startedAt: unknown): string {
  const time = typeof startedAt === 'string' ? new Date(startedAt) : undefined;
  return time && !Number.isNaN(time.getTime()) ? time.toLocaleTimeString() : String(startedAt ?? '');
}

/**
 * 1.0: the chat's background work (`ChatState.backgroundWork`): each entry's
 * label, command and start, and for a shell with a terminal, its output on
 * demand (the terminal subscribed read-only while shown: its last lines).
 * An entry goes when the host removes it.
 */
function BackgroundWork({ store, chat }: { store: Store; chat: Json }) {
  const work = backgroundWork(chat);
  if (!store.modern || work.length === 0) return null;
  return (
    <section class="background-work" aria-label="Background work">
      <h3>Running in the background</h3>
      <ul>
        {work.map((entry) => {
          const terminal: string | undefined = typeof entry.terminal === 'string' ? entry.terminal : undefined;
          const open = terminal !== undefined && store.openTerminals.has(terminal);
          return (
            <li key={entry.id} class="background-item" data-background={entry.id} data-kind={entry.kind}>
              <div class="background-head">
                <span class="label">{entry.label}</span>
                {entry.kind === 'shell' && entry.command && entry.command !== entry.label && (
                  <code class="command">{entry.command}</code>
                )}
                <time class="muted" dateTime={entry.startedAt}>
                  started {startedLabel(entry.startedAt)}
                </time>
                {terminal && (
                  <button type="button" class="link" aria-expanded={open} onClick={() => store.toggleTerminal(terminal)}>
                    {open ? 'Hide output' : 'Show output'}
                  </button>
                )}
              </div>
              {open && terminal && <TerminalTail store={store} uri={terminal} />}
            </li>
          );
        })}
      </ul>
    </section>
  );
}

function TerminalTail({ store, uri }: { store: Store; uri: string }) {
  const state = store.client.view(uri);
  if (!state) return <p class="loading">Opening the output…</p>;
  const text = lastLines(terminalText(state), 20);
  const exited = state.lifecycle?.status === 'exited';
  return (
    <div class="terminal-tail" data-terminal={uri}>
      <pre aria-label="Output">{text || ' '}</pre>
      {exited && <p class="muted">Exited{state.lifecycle.exitCode !== undefined ? ` with code ${state.lifecycle.exitCode}` : ''}.</p>}
    </div>
  );
}

function TurnView({
  store,
  turn,
  caps,
  active = false,
  resumable = false,
}: {
  store: Store;
  turn: Json;
  caps: Json;
  active?: boolean;
  /** The latest turn, failed with an error the host can resume: offer Continue. */
  resumable?: boolean;
}) {
  const all: Json[] = turn.responseParts ?? [];
  // A finished error turn shows its error in the footer, not twice.
  const footerPart = !active && turn.state === 'error' ? trailingErrorPart(turn) : undefined;
  const parts = footerPart ? all.slice(0, -1) : all;
  return (
    <article class={`turn ${active ? 'active' : turn.state}`} data-turn={turn.id} data-state={active ? 'active' : turn.state}>
      <div class="user-message">
        <span class="who">You</span>
        <p class="text">{turn.message?.text}</p>
      </div>
      <div class="response">
        {parts.map((part, index) => (
          <PartView key={part.id ?? part.toolCall?.toolCallId ?? part.request?.id ?? index} store={store} turn={turn} part={part} active={active} />
        ))}
        {active && parts.length === 0 && <p class="thinking">Working…</p>}
      </div>
      <footer class="turn-footer">
        {turn.state === 'cancelled' && <span class="turn-state">Cancelled</span>}
        {turn.state === 'error' && (
          <span class="turn-state error">Error: {turnError(turn)?.message ?? 'the turn failed'}</span>
        )}
        {resumable && (
          <button
            type="button"
            class="approve resume"
            disabled={!store.client.ready}
            onClick={() => store.resume(turn.id)}
          >
            Continue
          </button>
        )}
        {turn.usage && <Usage usage={turn.usage} />}
        {!active && caps.fork && (
          <button
            type="button"
            class="link"
            onClick={() => void store.newChat({ kind: 'fork', chat: store.chat, turnId: turn.id }).catch(() => undefined)}
          >
            Fork from here
          </button>
        )}
        {caps.sideChat && (
          <button
            type="button"
            class="link"
            onClick={() => void store.newChat({ kind: 'sideChat', chat: store.chat, turnId: turn.id }).catch(() => undefined)}
          >
            Side chat
          </button>
        )}
      </footer>
    </article>
  );
}

function Usage({ usage }: { usage: Json }) {
  const pieces: string[] = [];
  if (usage.inputTokens !== undefined) pieces.push(`${usage.inputTokens} in`);
  if (usage.outputTokens !== undefined) pieces.push(`${usage.outputTokens} out`);
  if (usage.cacheReadTokens !== undefined) pieces.push(`${usage.cacheReadTokens} cached`);
  return (
    <span class="usage" title={usage.model ?? ''}>
      {pieces.join(' · ')} tokens{usage.model ? ` (${usage.model})` : ''}
    </span>
  );
}

function PartView({ store, turn, part, active }: { store: Store; turn: Json; part: Json; active: boolean }) {
  switch (part.kind) {
    case 'markdown':
      return <StreamedMarkdown text={part.content ?? ''} class="answer" streaming={active} />;
    case 'reasoning':
      return (
        <details class="reasoning">
          <summary>Reasoning</summary>
          <StreamedMarkdown text={part.content ?? ''} streaming={active} />
        </details>
      );
    case 'toolCall':
      return <ToolCall store={store} turn={turn} call={part.toolCall} active={active} />;
    case 'inputRequest':
      return <InputRequest store={store} part={part} active={active} />;
    case 'systemNotification':
      return (
        <div class="system-note" role="note">
          <Markdown text={markdownOf(part.content)} />
        </div>
      );
    case 'contentRef':
      return <p class="content-ref">Attached content: {part.contentType ?? 'unknown type'}</p>;
    case 'error': // 1.0: an error the turn went on from (resumed), REDUCER-CHANGES 10
      return (
        <p class="part-error error" role="note">
          Error: {part.error?.message ?? 'unknown'}
        </p>
      );
    default:
      return null;
  }
}

const TOOL_STATUS: Record<string, string> = {
  streaming: 'preparing',
  'pending-confirmation': 'waiting for you',
  running: 'running',
  'auth-required': 'needs authentication',
  'pending-result-confirmation': 'result to review',
  completed: 'done',
  cancelled: 'cancelled',
};

function ToolCall({ store, turn, call, active }: { store: Store; turn: Json; call: Json; active: boolean }) {
  const status: string = call.status;
  const failed = status === 'completed' && call.success === false;
  const options: Json[] = call.options ?? [];
  const heading = call.confirmationTitle ? markdownOf(call.confirmationTitle) : '';
  return (
    <div class={`tool-call ${status}${failed ? ' failed' : ''}`} data-tool-call={call.toolCallId} data-status={status}>
      <div class="tool-head">
        <span class="tool-name">{call.displayName || call.toolName}</span>
        <span class="tool-status">{failed ? 'failed' : TOOL_STATUS[status] ?? status}</span>
      </div>
      {status === 'completed' && call.pastTenseMessage ? (
        <Markdown text={markdownOf(call.pastTenseMessage)} class="tool-message" />
      ) : (
        call.invocationMessage && <Markdown text={markdownOf(call.invocationMessage)} class="tool-message" />
      )}
      {toolInputText(call.toolInput) && (
        <details class="tool-input" open={status === 'pending-confirmation'}>
          <summary>Input</summary>
          <pre>{toolInputText(call.toolInput)}</pre>
        </details>
      )}
      {status === 'pending-confirmation' && <ToolEdits edits={call.edits} />}
      {(call.content ?? []).map((content: Json, index: number) =>
        content.type === 'text' ? (
          <pre key={index} class="tool-output">
            {content.text}
          </pre>
        ) : null,
      )}
      {call.error?.message && <p class="error">{call.error.message}</p>}
      {status === 'cancelled' && call.reason && <p class="muted">Reason: {call.reason}</p>}
      {status === 'pending-confirmation' && active && (
        <div class="confirm" role="group" aria-label={`Confirm ${call.displayName || call.toolName}`}>
          {heading && <Markdown text={heading} class="confirm-title" />}
          {options.length > 0 ? (
            options.map((option) => (
              <button
                key={option.id}
                type="button"
                class={option.kind === 'deny' ? 'deny' : 'approve'}
                onClick={() => store.confirmTool(turn.id, call, option.kind !== 'deny', option.id)}
              >
                {option.label}
              </button>
            ))
          ) : (
            <>
              <button type="button" class="approve" onClick={() => store.confirmTool(turn.id, call, true)}>
                Allow
              </button>
              <button type="button" class="deny" onClick={() => store.confirmTool(turn.id, call, false)}>
                Deny
              </button>
            </>
          )}
        </div>
      )}
    </div>
  );
}

/** The file edits a call waiting for confirmation will make: each file's path and line diff. */
function ToolEdits({ edits }: { edits: Json }) {
  const rows = editRows(edits);
  if (rows.length === 0) return null;
  return (
    <ul class="tool-edits" aria-label="File edits">
      {rows.map((row) => (
        <li key={row.id} class="change-file" data-file={row.id} data-kind={row.kind}>
          <div class="tool-edit-head">
            <FileHead row={row} />
          </div>
          <FileDiff row={row} />
        </li>
      ))}
    </ul>
  );
}

type Draft = Record<string, unknown>;

function initialDraft(questions: Json[]): Draft {
  const draft: Draft = {};
  for (const q of questions) {
    if (q.kind === 'boolean') draft[q.id] = q.defaultValue ?? false;
    else if (q.kind === 'single-select')
      draft[q.id] = (q.options ?? []).find((o: Json) => o.recommended)?.id ?? '';
    else if (q.kind === 'multi-select') draft[q.id] = [];
    else draft[q.id] = q.defaultValue ?? '';
  }
  return draft;
}

function answersOf(questions: Json[], draft: Draft): Json {
  const answers: Json = {};
  for (const q of questions) {
    const value = draft[q.id];
    let answer: Json | undefined;
    if (q.kind === 'boolean') answer = { kind: 'boolean', value: Boolean(value) };
    else if (q.kind === 'single-select' && value) answer = { kind: 'selected', value };
    else if (q.kind === 'multi-select' && Array.isArray(value) && value.length > 0)
      answer = { kind: 'selected-many', value };
    else if ((q.kind === 'number' || q.kind === 'integer') && value !== '')
      answer = { kind: 'number', value: Number(value) };
    else if (q.kind === 'text' && value !== '') answer = { kind: 'text', value: String(value) };
    if (answer) answers[q.id] = { state: 'submitted', value: answer };
  }
  return answers;
}

function describeAnswer(answer: Json): string {
  if (!answer) return '—';
  if (answer.state === 'skipped') return 'skipped';
  const value = answer.value?.value;
  return Array.isArray(value) ? value.join(', ') : String(value);
}

function InputRequest({ store, part, active }: { store: Store; part: Json; active: boolean }) {
  const request = part.request;
  const questions: Json[] = request.questions ?? [];
  const [draft, setDraft] = useState<Draft>(() => initialDraft(questions));
  const formId = `input-${request.id}`;
  if (part.response || !active) {
    return (
      <div class="input-request resolved" data-request={request.id}>
        {request.message && <p>{request.message}</p>}
        <p class="muted">{part.response ? `Answered: ${part.response}` : 'Not answered'}</p>
        <dl>
          {questions.map((q) => (
            <Fragment key={q.id}>
              <dt>{q.title || q.message}</dt>
              <dd>{describeAnswer(request.answers?.[q.id])}</dd>
            </Fragment>
          ))}
        </dl>
      </div>
    );
  }
  const set = (id: string, value: unknown) => setDraft({ ...draft, [id]: value });
  return (
    <form
      class="input-request"
      data-request={request.id}
      aria-label={request.message || 'Input request'}
      onSubmit={(event) => {
        event.preventDefault();
        store.answerInput(request.id, 'accept', answersOf(questions, draft));
      }}
    >
      {request.message && <p class="prompt">{request.message}</p>}
      {request.url && <p class="muted">Review: {request.url}</p>}
      {questions.map((q) => {
        const id = `${formId}-${q.id}`;
        if (q.kind === 'boolean') {
          return (
            <div class="field checkbox" key={q.id}>
              <input id={id} type="checkbox" checked={Boolean(draft[q.id])} onChange={(e) => set(q.id, e.currentTarget.checked)} />
              <label for={id}>{q.message}</label>
            </div>
          );
        }
        if (q.kind === 'single-select' || q.kind === 'multi-select') {
          const many = q.kind === 'multi-select';
          const chosen = draft[q.id];
          return (
            <fieldset class="field" key={q.id}>
              <legend>
                {q.message}
                {q.required ? ' *' : ''}
              </legend>
              {(q.options ?? []).map((option: Json) => {
                const optionId = `${id}-${option.id}`;
                const checked = many ? (chosen as string[]).includes(option.id) : chosen === option.id;
                return (
                  <div class="choice" key={option.id}>
                    <input
                      id={optionId}
                      type={many ? 'checkbox' : 'radio'}
                      name={id}
                      checked={checked}
                      onChange={(e) => {
                        if (!many) set(q.id, option.id);
                        else {
                          const list = (chosen as string[]).filter((x) => x !== option.id);
                          set(q.id, e.currentTarget.checked ? [...list, option.id] : list);
                        }
                      }}
                    />
                    <label for={optionId}>{option.label}</label>
                  </div>
                );
              })}
            </fieldset>
          );
        }
        return (
          <div class="field" key={q.id}>
            <label for={id}>
              {q.message}
              {q.required ? ' *' : ''}
            </label>
            {q.kind === 'number' || q.kind === 'integer' ? (
              <input
                id={id}
                type="number"
                required={Boolean(q.required)}
                value={String(draft[q.id] ?? '')}
                onInput={(e) => set(q.id, e.currentTarget.value)}
              />
            ) : (
              <input
                id={id}
                type="text"
                required={Boolean(q.required)}
                value={String(draft[q.id] ?? '')}
                onInput={(e) => set(q.id, e.currentTarget.value)}
              />
            )}
          </div>
        );
      })}
      <div class="actions">
        <button type="submit" class="approve">
          Submit
        </button>
        <button type="button" class="deny" onClick={() => store.answerInput(request.id, 'decline')}>
          Decline
        </button>
      </div>
    </form>
  );
}

function Pending({ store, chat }: { store: Store; chat: Json }) {
  const steering = chat.steeringMessage;
  const queued: Json[] = chat.queuedMessages ?? [];
  if (!steering && queued.length === 0) return null;
  const item = (kind: 'steering' | 'queued', entry: Json, label: string): ComponentChildren => (
    <li key={`${kind}-${entry.id}`} class={`pending-item ${kind}`} data-pending={kind}>
      <span class="kind">{label}</span>
      <span class="text">{entry.message?.text}</span>
      <button type="button" class="link" aria-label={`Remove ${label.toLowerCase()} message`} onClick={() => store.removePending(kind, entry.id)}>
        Remove
      </button>
    </li>
  );
  return (
    <ul class="pending" aria-label="Waiting messages">
      {steering && item('steering', steering, 'Steering')}
      {queued.map((entry) => item('queued', entry, 'Queued'))}
    </ul>
  );
}

function Composer({ store, chat }: { store: Store; chat: Json }) {
  const uri = store.chat ?? '';
  const [text, setText] = useState(() => store.restored.get(uri) ?? '');
  const restored = store.restored.get(uri);
  useEffect(() => {
    if (restored !== undefined) {
      setText((current) => (current ? `${current}\n${restored}` : restored));
      store.restored.delete(uri);
    }
  }, [restored, uri, store]);
  const busy = Boolean(chat.activeTurn);
  const ready = store.client.ready;
  const submit = (mode: 'send' | 'queue' | 'steer') => {
    if (store.send(text, mode)) setText('');
  };
  return (
    <form
      class="composer"
      onSubmit={(event) => {
        event.preventDefault();
        submit(busy ? 'queue' : 'send');
      }}
    >
      <label for="message-input" class="visually-hidden">
        Message
      </label>
      <textarea
        id="message-input"
        rows={3}
        placeholder={busy ? 'Queue a message, or steer the running turn…' : 'Message (Enter sends, Shift+Enter for a new line)'}
        value={text}
        onInput={(event) => setText(event.currentTarget.value)}
        onKeyDown={(event) => {
          if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
            event.preventDefault();
            if (ready) submit(busy ? 'queue' : 'send');
          }
        }}
      />
      <div class="composer-actions">
        <button type="submit" class="primary" disabled={!ready || !text.trim()}>
          {busy ? 'Queue' : 'Send'}
        </button>
        {busy && (
          <button type="button" disabled={!ready || !text.trim()} onClick={() => submit('steer')}>
            Steer
          </button>
        )}
        {busy && (
          <button type="button" class="deny" disabled={!ready} onClick={() => store.cancel()}>
            Cancel turn
          </button>
        )}
      </div>
    </form>
  );
}
