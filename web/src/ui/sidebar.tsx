/**
 * The sidebar: New session (the host's default agent preselected and listed
 * first; a folder picked from the recent folders and the host's workspace
 * roots, typed, or chosen with Browse… in the roots), a filter, and the
 * sessions — each with its plain-text title, its agent and its state (a
 * session whose agent failed to start says so, and why). Long names are cut
 * with an ellipsis and given whole in a tooltip.
 */
import { useState } from 'preact/hooks';
import type { Json } from '../protocol/reducers';
import { FolderBrowser } from './browse';
import { hasUnreadChat, isArchived } from './chats';
import {
  agentName,
  defaultProvider,
  folderOptions,
  matchesFilter,
  pickerAgents,
  plainTitle,
  sessionLabel,
  workspaceRoots,
} from './sessions';
import type { Store } from './store';

export function Sidebar({ store }: { store: Store }) {
  const root = store.root;
  const agents = pickerAgents(root);
  const [provider, setProvider] = useState('');
  const [filter, setFilter] = useState('');
  const [folder, setFolder] = useState('');
  const [browsing, setBrowsing] = useState(false);
  const roots = workspaceRoots(root);
  const chosen =
    (agents.some((a) => a.provider === provider) ? provider : '') || defaultProvider(root) || agents[0]?.provider || '';
  const chosenAgent = agents.find((a) => a.provider === chosen);
  const all = [...store.client.sessions.values()].sort((a, b) =>
    String(b.modifiedAt).localeCompare(String(a.modifiedAt)),
  );
  const shown = all.filter((s) => matchesFilter(s, agentName(root, s.provider), filter));
  const modern = store.modern;
  const sessions = modern ? shown.filter((s) => !isArchived(s.status)) : shown;
  const archived = modern ? shown.filter((s) => isArchived(s.status)) : [];
  return (
    <nav class="sidebar" aria-label="Sessions">
      <form
        class="new-session"
        onSubmit={(event) => {
          event.preventDefault();
          if (chosen) {
            void store
              .newSession(chosen, folder)
              .then(() => setFolder(''))
              .catch(() => undefined);
          }
        }}
      >
        <label for="agent-select">Agent</label>
        <select
          id="agent-select"
          value={chosen}
          title={chosenAgent ? agentName(root, chosenAgent.provider) : undefined}
          onChange={(event) => setProvider(event.currentTarget.value)}
        >
          {agents.map((agent) => (
            <option key={agent.provider} value={agent.provider} title={agent.description}>
              {agentName(root, agent.provider)}
            </option>
          ))}
        </select>
        <button type="submit" disabled={!store.client.ready || !chosen}>
          New session
        </button>
        <label for="folder-input">Folder</label>
        <input
          id="folder-input"
          class={roots.length > 0 ? 'with-browse' : undefined}
          type="text"
          list="folder-options"
          autocomplete="off"
          placeholder="A new folder of its own"
          title={roots.length > 0 ? `Inside ${roots.join(', ')}` : undefined}
          value={folder}
          onInput={(event) => setFolder(event.currentTarget.value)}
        />
        {roots.length > 0 && (
          <button
            type="button"
            aria-haspopup="dialog"
            title="Browse the host's workspace roots"
            disabled={!store.client.ready}
            onClick={() => setBrowsing(true)}
          >
            Browse…
          </button>
        )}
        <datalist id="folder-options">
          {folderOptions(store.recentFolders, roots).map((path) => (
            <option key={path} value={path} />
          ))}
        </datalist>
      </form>
      {browsing && (
        <FolderBrowser
          store={store}
          roots={roots}
          start={folder}
          onChoose={setFolder}
          onClose={() => setBrowsing(false)}
        />
      )}
      <h2>Sessions</h2>
      {all.length > 0 && (
        <input
          type="search"
          class="session-filter"
          aria-label="Filter sessions"
          placeholder="Filter by title or agent"
          value={filter}
          onInput={(event) => setFilter(event.currentTarget.value)}
        />
      )}
      <ul class="sessions">
        {sessions.length === 0 && (
          <li class="empty">{all.length > 0 && filter.trim() ? 'No session matches.' : 'No sessions yet.'}</li>
        )}
        {sessions.map((summary) => (
          <SessionItem key={summary.resource} store={store} summary={summary} />
        ))}
      </ul>
      {archived.length > 0 && (
        <details class="archived-sessions">
          <summary>Archived ({archived.length})</summary>
          <ul class="sessions">
            {archived.map((summary) => (
              <SessionItem key={summary.resource} store={store} summary={summary} />
            ))}
          </ul>
        </details>
      )}
    </nav>
  );
}

function SessionItem({ store, summary }: { store: Store; summary: Json }) {
  const unread = store.modern && hasUnreadChat(summary);
  const title = plainTitle(summary.title) || 'Untitled';
  const agent = agentName(store.root, summary.provider);
  const { state, detail } = sessionLabel(summary);
  const chats = (summary.chats?.length ?? 0) > 1 ? ` · ${summary.chats.length} chats` : '';
  return (
    <li>
      <button
        type="button"
        class="session-item"
        data-session={summary.resource}
        data-unread={unread ? 'true' : undefined}
        data-state={state}
        aria-current={summary.resource === store.session ? 'page' : undefined}
        onClick={() => store.selectSession(summary.resource)}
      >
        <span class="title" title={title}>
          {unread && <UnreadDot />}
          {title}
        </span>
        <span class="meta">
          <span class="agent" title={agent}>
            {agent}
          </span>
          <span class={`state ${state.replace(' ', '-')}`}>
            {state}
            {chats}
          </span>
        </span>
        {detail && (
          <span class="detail error" title={detail}>
            {detail}
          </span>
        )}
      </button>
    </li>
  );
}

export function UnreadDot() {
  return (
    <span class="unread" role="img" aria-label="unread" title="Unread">
      {' '}
    </span>
  );
}
