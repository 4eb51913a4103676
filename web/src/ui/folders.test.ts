import { describe, expect, it } from 'vitest';
import { childFolder, crumbs, fileUri, listing, normalFolder, parentFolder, rootOf, within } from './folders';
import { pathOf } from './sessions';

describe('within and rootOf', () => {
  it('counts whole segments only', () => {
    expect(within('/srv/work', '/srv/work')).toBe(true);
    expect(within('/srv/work/a/b', '/srv/work')).toBe(true);
    expect(within('/srv/workshop', '/srv/work')).toBe(false);
    expect(within('/srv', '/srv/work')).toBe(false);
    expect(within('/anything', '/')).toBe(true);
  });

  it('takes the deepest root when roots nest, none outside them', () => {
    const roots = ['/srv', '/srv/work', '/home/me'];
    expect(rootOf('/srv/work/a', roots)).toBe('/srv/work');
    expect(rootOf('/srv/other', roots)).toBe('/srv');
    expect(rootOf('/home/me', roots)).toBe('/home/me');
    expect(rootOf('/home/meow', roots)).toBeUndefined();
    expect(rootOf('/etc', roots)).toBeUndefined();
  });
});

describe('normalFolder', () => {
  it('takes an absolute path without trailing or doubled slashes', () => {
    expect(normalFolder(' /srv//work/ ')).toBe('/srv/work');
    expect(normalFolder('/')).toBe('/');
  });

  it('refuses a relative path and dot segments', () => {
    expect(normalFolder('work')).toBeUndefined();
    expect(normalFolder('')).toBeUndefined();
    expect(normalFolder('/srv/work/../etc')).toBeUndefined();
    expect(normalFolder('/srv/./work')).toBeUndefined();
  });
});

describe('parentFolder', () => {
  it('goes up one folder', () => {
    expect(parentFolder('/srv/work/a/b', '/srv/work')).toBe('/srv/work/a');
    expect(parentFolder('/srv/work/a', '/srv/work')).toBe('/srv/work');
  });

  it('never goes above the root', () => {
    expect(parentFolder('/srv/work', '/srv/work')).toBeUndefined();
    expect(parentFolder('/srv', '/srv/work')).toBeUndefined();
    expect(parentFolder('/srv/workshop/x', '/srv/work')).toBeUndefined();
    expect(parentFolder('/', '/')).toBeUndefined();
    expect(parentFolder('/a', '/')).toBe('/');
  });
});

describe('childFolder', () => {
  it('joins a name to a folder', () => {
    expect(childFolder('/srv/work', 'a b')).toBe('/srv/work/a b');
    expect(childFolder('/', 'srv')).toBe('/srv');
  });

  it('refuses what is not one entry', () => {
    for (const name of ['', '.', '..', 'a/b', 'a\0b']) expect(childFolder('/srv', name)).toBeUndefined();
  });
});

describe('fileUri', () => {
  it('percent-encodes each segment and reads back as the same path', () => {
    const path = '/srv/my work/50%/#1?/é';
    const uri = fileUri(path);
    expect(uri).toBe('file:///srv/my%20work/50%25/%231%3F/%C3%A9');
    expect(pathOf(uri)).toBe(path);
  });
});

describe('crumbs', () => {
  it('runs from the root (its whole path) down', () => {
    const pairs = crumbs('/srv/work/a/b', '/srv/work').map((crumb) => [crumb.label, crumb.path]);
    expect(pairs).toEqual([
      ['/srv/work', '/srv/work'],
      ['a', '/srv/work/a'],
      ['b', '/srv/work/a/b'],
    ]);
    expect(crumbs('/a', '/')).toEqual([
      { label: '/', path: '/' },
      { label: 'a', path: '/a' },
    ]);
  });

  it('is the root alone at the root, or outside it', () => {
    expect(crumbs('/srv/work', '/srv/work')).toEqual([{ label: '/srv/work', path: '/srv/work' }]);
    expect(crumbs('/etc', '/srv/work')).toEqual([{ label: '/srv/work', path: '/srv/work' }]);
  });
});

describe('listing', () => {
  it('keeps the folders, sorted case-insensitively, and counts the rest', () => {
    const result = {
      entries: [
        { name: 'notes.md', type: 'file' },
        { name: 'beta', type: 'directory' },
        { name: 'Alpha', type: 'directory' },
        { name: 'alpha', type: 'directory' },
        { name: '.git', type: 'directory' },
        { name: 'link-out', type: 'file' },
      ],
    };
    expect(listing(result)).toEqual({ folders: ['.git', 'Alpha', 'alpha', 'beta'], files: 2 });
  });

  it('drops names that are not one entry and reads a malformed answer as empty', () => {
    expect(listing({ entries: [{ name: '..', type: 'directory' }, { name: 'a/b', type: 'directory' }] })).toEqual({
      folders: [],
      files: 2,
    });
    expect(listing(undefined)).toEqual({ folders: [], files: 0 });
    expect(listing({ entries: 'nope' })).toEqual({ folders: [], files: 0 });
  });
});
