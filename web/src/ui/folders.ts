/**
 * The folder browser's rules (no DOM, unit-tested): places are absolute
 * paths, each inside one of the host's workspace roots; up never leaves the
 * root; the breadcrumb runs from the root down; a listing shows its folders,
 * sorted, and only counts its files.
 */
import type { Json } from '../protocol/reducers';

/** Whether `path` is `root` or lies under it (by whole segments: `/a/bc` is not under `/a/b`). */
export function within(path: string, root: string): boolean {
  if (path === root) return true;
  return path.startsWith(root.endsWith('/') ? root : `${root}/`);
}

/** The root `path` lies in (the deepest one, when roots nest), if any. */
export function rootOf(path: string, roots: string[]): string | undefined {
  return roots.filter((root) => within(path, root)).sort((a, b) => b.length - a.length)[0];
}

/** A folder `path` typed or remembered, as the browser takes it: absolute, no trailing `/`, no `.` or `..`. */
export function normalFolder(text: string): string | undefined {
  const value = text.trim();
  if (!value.startsWith('/')) return undefined;
  const parts = value.split('/').filter(Boolean);
  if (parts.some((part) => part === '.' || part === '..')) return undefined;
  return `/${parts.join('/')}`;
}

/** The folder above `path`, or `undefined` at `root` (or outside it): never above the root. */
export function parentFolder(path: string, root: string): string | undefined {
  if (path === root || !within(path, root)) return undefined;
  const cut = path.lastIndexOf('/');
  const parent = cut <= 0 ? '/' : path.slice(0, cut);
  return within(parent, root) ? parent : undefined;
}

/** `name` inside the folder `path`; `undefined` for a name that is not one entry (`/`, `.`, `..`, empty). */
export function childFolder(path: string, name: string): string | undefined {
  if (!name || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) return undefined;
  return path === '/' ? `/${name}` : `${path}/${name}`;
}

/** The `file:` URI of an absolute path, each segment percent-encoded (`resourceList`'s `uri`). */
export function fileUri(path: string): string {
  return `file://${path.split('/').map(encodeURIComponent).join('/')}`;
}

export interface Crumb {
  /** What it shows: the root's whole path, then each folder's name. */
  label: string;
  path: string;
}

/** The breadcrumb from `root` down to `path` (just the root when `path` is not under it). */
export function crumbs(path: string, root: string): Crumb[] {
  const out: Crumb[] = [{ label: root, path: root }];
  if (path === root || !within(path, root)) return out;
  const rest = path.slice(root.endsWith('/') ? root.length : root.length + 1).split('/');
  let at = root;
  for (const name of rest) {
    at = childFolder(at, name) ?? at;
    out.push({ label: name, path: at });
  }
  return out;
}

export interface Listing {
  /** The folders' names, sorted (case-insensitively, then by code point). */
  folders: string[];
  /** How many other entries (files, and links that lead to no folder inside the roots) there are. */
  files: number;
}

/** A `resourceList` result as the browser shows it: folders only, files counted. */
export function listing(result: Json): Listing {
  const entries: Json[] = Array.isArray(result?.entries) ? result.entries : [];
  const folders: string[] = [];
  let files = 0;
  for (const entry of entries) {
    if (entry?.type === 'directory' && childFolder('/', String(entry.name ?? ''))) folders.push(String(entry.name));
    else files += 1;
  }
  folders.sort((a, b) => order(a.toLowerCase(), b.toLowerCase()) || order(a, b));
  return { folders, files };
}

function order(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
