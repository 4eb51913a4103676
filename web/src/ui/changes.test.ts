import { describe, expect, it } from 'vitest';
import {
  backgroundTerminals,
  changesLabel,
  chatChangesetUri,
  decodeDataUri,
  editRows,
  fileRows,
  lastLines,
  lineDiff,
  linesOf,
  pathOf,
  terminalText,
} from './changes';

const data = (text: string) => `data:text/plain;charset=utf-8;base64,${Buffer.from(text, 'utf-8').toString('base64')}`;

describe("the chat's own changeset", () => {
  it('is the catalogue entry of kind chat, when its template has no variables', () => {
    const uri = 'ahp-changeset://chat/ahp-chat%3A%2Fc1';
    const chat = {
      changesets: [
        { label: 'Turn', changeKind: 'turn', uriTemplate: 'ahp-changeset://turn/{turnId}' },
        { label: 'Chat changes', changeKind: 'chat', uriTemplate: uri },
      ],
    };
    expect(chatChangesetUri(chat)).toBe(uri);
    expect(chatChangesetUri({ changesets: [{ changeKind: 'chat', uriTemplate: 'x/{turnId}' }] })).toBeUndefined();
    expect(chatChangesetUri({ changesets: [{ changeKind: 'session', uriTemplate: uri }] })).toBeUndefined();
    expect(chatChangesetUri({})).toBeUndefined();
    expect(chatChangesetUri(undefined)).toBeUndefined();
  });
});

describe('change counts', () => {
  it('read files, additions and deletions', () => {
    expect(changesLabel({ files: 3, additions: 12, deletions: 4 })).toBe('3 files +12 \u22124');
    expect(changesLabel({ files: 1, additions: 2 })).toBe('1 file +2 \u22120');
  });
  it('say nothing without a file', () => {
    expect(changesLabel({ files: 0, additions: 0, deletions: 0 })).toBeUndefined();
    expect(changesLabel({})).toBeUndefined();
    expect(changesLabel(undefined)).toBeUndefined();
  });
});

describe('data: URIs', () => {
  it('decode base64 and percent-encoded UTF-8', () => {
    expect(decodeDataUri(data('a\nB\u00e9\n'))).toBe('a\nB\u00e9\n');
    expect(decodeDataUri('data:text/plain,hello%20world')).toBe('hello world');
    expect(decodeDataUri('data:;base64,')).toBe('');
  });
  it('refuse what is not one, or not UTF-8', () => {
    expect(decodeDataUri('file:///x')).toBeUndefined();
    expect(decodeDataUri('data:text/plain;base64,/w==')).toBeUndefined(); // 0xff
    expect(decodeDataUri('data:text/plain;base64,!!!')).toBeUndefined();
    expect(decodeDataUri(undefined)).toBeUndefined();
  });
});

describe('the rows of the Changes view', () => {
  it('give path, counts, kind and text of each file, in order', () => {
    const rows = fileRows({
      status: 'ready',
      files: [
        {
          id: 'file:///w/a%20b.txt',
          edit: {
            before: { uri: 'file:///w/a%20b.txt', content: { uri: data('a\nb\n') } },
            after: { uri: 'file:///w/a%20b.txt', content: { uri: data('a\nB\nc\n') } },
            diff: { added: 2, removed: 1 },
          },
        },
        { id: 'file:///w/new.txt', edit: { after: { uri: 'file:///w/new.txt', content: { uri: data('x') } }, diff: { added: 1 } } },
        { id: 'file:///w/old.txt', edit: { before: { uri: 'file:///w/old.txt', content: { uri: data('y\n') } }, diff: { removed: 1 } } },
        { id: 'file:///w/big.bin', edit: {}, _meta: { contentOmitted: true } },
      ],
    });
    expect(rows).toEqual([
      { id: 'file:///w/a%20b.txt', path: '/w/a b.txt', added: 2, removed: 1, kind: 'modified', before: 'a\nb\n', after: 'a\nB\nc\n', omitted: false },
      { id: 'file:///w/new.txt', path: '/w/new.txt', added: 1, removed: 0, kind: 'created', after: 'x', omitted: false },
      { id: 'file:///w/old.txt', path: '/w/old.txt', added: 0, removed: 1, kind: 'deleted', before: 'y\n', omitted: false },
      { id: 'file:///w/big.bin', path: '/w/big.bin', added: 0, removed: 0, kind: 'modified', omitted: true },
    ]);
    expect(fileRows(undefined)).toEqual([]);
  });
  it('are also the rows of the edits a tool call will make, before it is confirmed', () => {
    const rows = editRows({
      items: [
        {
          before: { uri: 'file:///w/a.txt', content: { uri: data('old\n') } },
          after: { uri: 'file:///w/a.txt', content: { uri: data('new\n') } },
          diff: { added: 1, removed: 1 },
        },
        { after: { uri: 'file:///w/n.txt', content: { uri: data('x\n') } } },
      ],
    });
    expect(rows).toEqual([
      { id: 'file:///w/a.txt', path: '/w/a.txt', added: 1, removed: 1, kind: 'modified', before: 'old\n', after: 'new\n', omitted: false },
      { id: 'file:///w/n.txt', path: '/w/n.txt', added: 0, removed: 0, kind: 'created', after: 'x\n', omitted: false },
    ]);
    expect(editRows(undefined)).toEqual([]);
  });
  it('show a path for file: URIs only', () => {
    expect(pathOf('file:///home/u/x%23y.ts')).toBe('/home/u/x#y.ts');
    expect(pathOf('ahp-content:/a')).toBe('ahp-content:/a');
    expect(pathOf('not a uri')).toBe('not a uri');
  });
});

describe('the line diff', () => {
  it('keeps common lines and marks the others, removed before added', () => {
    expect(lineDiff('a\nb\n', 'a\nB\nc\n')).toEqual([
      { kind: 'same', text: 'a' },
      { kind: 'removed', text: 'b' },
      { kind: 'added', text: 'B' },
      { kind: 'added', text: 'c' },
    ]);
  });
  it('reads a created or a deleted file as all added or all removed', () => {
    expect(lineDiff(undefined, 'x\ny')).toEqual([
      { kind: 'added', text: 'x' },
      { kind: 'added', text: 'y' },
    ]);
    expect(lineDiff('x\n', undefined)).toEqual([{ kind: 'removed', text: 'x' }]);
  });
  it('counts what FileEdit.diff counts for a simple edit', () => {
    const lines = lineDiff('one\ntwo\nthree\nfour\n', 'one\n2\nthree\nfour\nfive\n')!;
    expect(lines.filter((l) => l.kind === 'added').length).toBe(2);
    expect(lines.filter((l) => l.kind === 'removed').length).toBe(1);
  });
  it('leaves texts over the limit alone', () => {
    expect(lineDiff('a\nb\nc', 'a', 2)).toBeUndefined();
  });
  it('splits lines as a file has them', () => {
    expect(linesOf('')).toEqual([]);
    expect(linesOf('a\n')).toEqual(['a']);
    expect(linesOf('a\n\n')).toEqual(['a', '']);
  });
});

describe('background work', () => {
  it("lists the entries' terminals", () => {
    const chat = {
      backgroundWork: [
        { kind: 'shell', id: 'shell:ahp-terminal:/t1', label: 'sh', startedAt: '2025-01-01T00:00:00Z', command: 'sh', terminal: 'ahp-terminal:/t1' },
        { kind: 'subagent', id: 'sub', label: 'helper', startedAt: '2025-01-01T00:00:00Z' },
      ],
    };
    expect(backgroundTerminals(chat)).toEqual(['ahp-terminal:/t1']);
    expect(backgroundTerminals({})).toEqual([]);
  });
  it("shows a terminal's text without escapes, and its last lines", () => {
    const terminal = {
      content: [
        { type: 'unclassified', value: '\u001b[32mready\u001b[0m\r\n' },
        { type: 'command', commandId: 'c', commandLine: 'make', output: 'one\ntwo\nthree\n', isComplete: false },
      ],
    };
    const text = terminalText(terminal);
    expect(text).toBe('ready\nmake\none\ntwo\nthree\n');
    expect(lastLines(text, 2)).toBe('two\nthree');
    expect(lastLines('', 3)).toBe('');
    expect(terminalText(undefined)).toBe('');
  });
});
