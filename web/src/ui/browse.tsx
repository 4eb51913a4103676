/**
 * The folder browser behind **Browse…** (New session's Folder): a modal
 * dialog over the host's workspace roots. Each folder is listed with
 * `resourceList` (the host confines it to the roots); a folder opens with a
 * click or Enter, the breadcrumb and **Up** go back (never above its root),
 * **Choose this folder** hands the path to the Folder box. Files are only
 * counted. A refusal (outside the roots, too many entries, not allowed) is
 * a notice in the dialog, which stays where it was. Escape closes it.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { childFolder, crumbs, type Listing, listing, normalFolder, parentFolder, rootOf } from './folders';
import type { Store } from './store';

interface Props {
  store: Store;
  /** The host's workspace roots (paths). */
  roots: string[];
  /** Where to open: the Folder box's text when it lies in a root. */
  start: string;
  onChoose: (path: string) => void;
  onClose: () => void;
}

export function FolderBrowser({ store, roots, start, onChoose, onClose }: Props) {
  const dialog = useRef<HTMLDialogElement>(null);
  const list = useRef<HTMLUListElement>(null);
  /** The folder shown; none: the list of roots. */
  const [place, setPlace] = useState<string | undefined>(undefined);
  const [shown, setShown] = useState<Listing | undefined>(undefined);
  const [loading, setLoading] = useState<string | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const ticket = useRef(0);

  /** Show `path` (none: the roots); refused, stay where it was — or go to `fallback`, the notice kept. */
  const go = async (path: string | undefined, fallback: string | undefined | false = false, keepError = false) => {
    const mine = ++ticket.current;
    if (!keepError) setError(undefined);
    if (path === undefined) {
      setLoading(undefined);
      setPlace(undefined);
      setShown(undefined);
      return;
    }
    setLoading(path);
    try {
      const result = await store.listFolder(path);
      if (mine !== ticket.current) return;
      setPlace(path);
      setShown(listing(result));
    } catch (failure) {
      if (mine !== ticket.current) return;
      const why = failure instanceof Error ? failure.message : String(failure);
      setError(`Could not open ${nameOf(path, roots)}: ${why}`);
      if (fallback !== false && fallback !== path) void go(fallback, false, true);
    } finally {
      if (mine === ticket.current) setLoading(undefined);
    }
  };

  useEffect(() => {
    const element = dialog.current;
    if (element && !element.open) element.showModal();
    // The folder typed, when it lies in a root (else, or refused: that root, the only root, or the list).
    const typed = normalFolder(start);
    const typedRoot = typed === undefined ? undefined : rootOf(typed, roots);
    const home = typedRoot ?? (roots.length === 1 ? roots[0] : undefined);
    void go(typedRoot ? typed : home, home);
    return () => element?.close();
  }, []);

  // A new listing: the keyboard starts on its first entry.
  useEffect(() => {
    list.current?.querySelector('button')?.focus();
  }, [place, shown]);

  const root = place === undefined ? undefined : rootOf(place, roots);
  const up = place !== undefined && root !== undefined ? parentFolder(place, root) : undefined;
  const close = () => dialog.current?.close();
  return (
    <dialog
      ref={dialog}
      class="folder-browser"
      aria-labelledby="folder-browser-title"
      data-place={place ?? ''}
      data-loading={loading !== undefined ? 'true' : undefined}
      onClose={onClose}
    >
      <h2 id="folder-browser-title">Choose a folder</h2>
      <nav aria-label="Folder path">
        <ol class="crumbs">
          {roots.length > 1 && (
            <li>
              <button
                type="button"
                class="link"
                aria-current={place === undefined ? 'location' : undefined}
                onClick={() => void go(undefined)}
              >
                Workspace roots
              </button>
            </li>
          )}
          {place !== undefined &&
            root !== undefined &&
            crumbs(place, root).map((crumb) => (
              <li key={crumb.path}>
                <button
                  type="button"
                  class="link"
                  title={crumb.path}
                  aria-current={crumb.path === place ? 'location' : undefined}
                  onClick={() => void go(crumb.path)}
                >
                  {crumb.label}
                </button>
              </li>
            ))}
        </ol>
      </nav>
      {error && (
        <p class="notice error" role="alert">
          <span>{error}</span>
          <button type="button" aria-label="Dismiss" onClick={() => setError(undefined)}>
            ×
          </button>
        </p>
      )}
      <ul
        ref={list}
        class="folder-list"
        aria-label={place === undefined ? 'Workspace roots' : `Folders in ${place}`}
        aria-busy={loading !== undefined}
      >
        {up !== undefined && (
          <li>
            <button type="button" class="up" aria-label={`Up to ${up}`} title={up} onClick={() => void go(up)}>
              <span aria-hidden="true">↑ </span>Up
            </button>
          </li>
        )}
        {place === undefined
          ? roots.map((path) => (
              <li key={path}>
                <button type="button" data-folder={path} title={path} onClick={() => void go(path)}>
                  {path}
                </button>
              </li>
            ))
          : shown?.folders.map((name) => (
              <li key={name}>
                <button
                  type="button"
                  data-folder={name}
                  title={name}
                  onClick={() => void go(childFolder(place, name))}
                >
                  {name}
                </button>
              </li>
            ))}
      </ul>
      <p class="folder-summary muted" aria-live="polite">
        {loading !== undefined ? `Opening ${loading}…` : place !== undefined && shown ? summary(shown) : ''}
      </p>
      <div class="folder-browser-actions">
        <button
          type="button"
          class="primary"
          disabled={place === undefined}
          title={place}
          onClick={() => {
            if (place === undefined) return;
            onChoose(place);
            close();
          }}
        >
          Choose this folder
        </button>
        <button type="button" onClick={close}>
          Cancel
        </button>
      </div>
    </dialog>
  );
}

function summary({ folders, files }: Listing): string {
  const count = folders.length;
  const parts = [count === 0 ? 'No folders here' : count === 1 ? '1 folder' : `${count} folders`];
  if (files > 0) parts.push(files === 1 ? '1 file not shown' : `${files} files not shown`);
  return parts.join(' · ');
}

/** A folder as an error names it: a root by its whole path, any other by its name. */
function nameOf(path: string, roots: string[]): string {
  return roots.includes(path) ? path : path.slice(path.lastIndexOf('/') + 1);
}
