import { describe, expect, it } from 'vitest';
import {
  agentName,
  defaultProvider,
  folderOptions,
  folderUri,
  matchesFilter,
  pathOf,
  pickerAgents,
  plainTitle,
  rememberFolder,
  sessionLabel,
  workspaceRoots,
} from './sessions';

const ROOT = {
  agents: [
    { provider: 'echo', displayName: 'Echo' },
    { provider: 'claude', displayName: 'Claude' },
  ],
  config: { schema: { type: 'object', properties: {} }, values: { defaultProvider: 'claude' } },
};

describe('plainTitle', () => {
  it('drops the Markdown and keeps the text', () => {
    expect(plainTitle('**Fix** the bug')).toBe('Fix the bug');
    expect(plainTitle('# Fix the `bug` in _parser_')).toBe('Fix the bug in parser');
    expect(plainTitle('see [the docs](https://example.com) now')).toBe('see the docs now');
    expect(plainTitle('<b>bold</b> & <script>x</script>')).toBe('bold & x');
    expect(plainTitle('a\\*b\\*')).toBe('a*b*');
    expect(plainTitle('- one\n- two')).toBe('one two');
    expect(plainTitle('  plain  words ')).toBe('plain words');
    expect(plainTitle(undefined)).toBe('');
  });
});

describe('the default agent', () => {
  it('is the root config value, when it names an agent', () => {
    expect(defaultProvider(ROOT)).toBe('claude');
    expect(defaultProvider({ ...ROOT, config: { values: { defaultProvider: 'gone' } } })).toBeUndefined();
    expect(defaultProvider({ agents: ROOT.agents })).toBeUndefined();
  });

  it('is listed first, the others in the host order', () => {
    expect(pickerAgents(ROOT).map((a) => a.provider)).toEqual(['claude', 'echo']);
    expect(pickerAgents({ agents: ROOT.agents }).map((a) => a.provider)).toEqual(['echo', 'claude']);
  });

  it('has a name', () => {
    expect(agentName(ROOT, 'claude')).toBe('Claude');
    expect(agentName(ROOT, 'other')).toBe('other');
  });
});

describe('sessionLabel', () => {
  it('tells a failed start from a failed turn', () => {
    const failed = { status: 2, chats: [], activity: 'Failed to start: no such agent' };
    expect(sessionLabel(failed)).toEqual({ state: 'failed', detail: 'Failed to start: no such agent' });
    expect(sessionLabel({ status: 2, chats: [{ resource: 'ahp-chat:/a' }] }).state).toBe('error');
    expect(sessionLabel({ status: 2 }).state).toBe('error'); // 0.7: no catalogue in the summary
    expect(sessionLabel({ status: 1 | 32, activity: 'thinking' })).toEqual({ state: 'idle', detail: undefined });
    expect(sessionLabel({ status: 8 }).state).toBe('working');
    expect(sessionLabel({ status: 24 }).state).toBe('needs input');
  });
});

describe('matchesFilter', () => {
  it('matches every word in the plain title or the agent', () => {
    const summary = { title: '**Fix** the parser', provider: 'claude' };
    expect(matchesFilter(summary, 'Claude', '')).toBe(true);
    expect(matchesFilter(summary, 'Claude', 'fix parser')).toBe(true);
    expect(matchesFilter(summary, 'Claude', 'fix claude')).toBe(true);
    expect(matchesFilter(summary, 'Claude', '**fix**')).toBe(false);
    expect(matchesFilter(summary, 'Claude', 'echo')).toBe(false);
  });
});

describe('the folder picker', () => {
  it('reads the roots as paths', () => {
    expect(workspaceRoots({ config: { values: { workspaceRoots: ['file:///home/ada', 'file:///srv/a%20b'] } } })).toEqual([
      '/home/ada',
      '/srv/a b',
    ]);
    expect(workspaceRoots({})).toEqual([]);
  });

  it('turns an absolute path into a file: URI, and refuses a relative one', () => {
    expect(folderUri('')).toEqual({});
    expect(folderUri(' /srv/a b/ ')).toEqual({ uri: 'file:///srv/a%20b' });
    expect(folderUri('/')).toEqual({ uri: 'file:///' });
    expect(folderUri('file:///x')).toEqual({ uri: 'file:///x' });
    expect(folderUri('src/x').error).toMatch(/not an absolute path/);
    expect(pathOf(folderUri('/srv/a#b?c').uri ?? '')).toBe('/srv/a#b?c');
  });

  it('keeps recent folders newest first, without repeats, bounded', () => {
    expect(rememberFolder(['/a', '/b'], '/b')).toEqual(['/b', '/a']);
    expect(rememberFolder(['/a', '/b'], '/c', 2)).toEqual(['/c', '/a']);
    expect(folderOptions(['/home/ada/p'], ['/home/ada', '/home/ada/p'])).toEqual(['/home/ada/p', '/home/ada']);
  });
});
