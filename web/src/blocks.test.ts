import { describe, expect, it } from 'vitest';
import { Marked } from 'marked';
import { BlockSplitter } from './blocks';

function split(text: string): { closed: string[]; open: string; definitions: string } {
  const splitter = new BlockSplitter();
  splitter.update(text);
  return { closed: [...splitter.closed], open: splitter.open, definitions: splitter.definitions };
}

/** The same text fed in pieces of `size` characters. */
function splitStreamed(text: string, size: number): { closed: string[]; open: string } {
  const splitter = new BlockSplitter();
  for (let end = size; end < text.length + size; end += size) splitter.update(text.slice(0, end));
  return { closed: [...splitter.closed], open: splitter.open };
}

const marked = new Marked({ gfm: true, breaks: false, async: false });
const html = (text: string) => marked.parse(text) as string;

const DOCUMENT = [
  '# Title\n\n',
  'A paragraph\nover two lines.\n\n',
  '- one\n\n- two, loose\n\n  still two\n- three\n\n',
  '```python\ndef f():\n\n    return 1\n\n\n```\n\n',
  '| a | b |\n|---|--:|\n| 1 | 2 |\n\n',
  '1. first\n2. second\n\n',
  '<pre>\nraw\n\nstill raw\n</pre>\n\n',
  '> quoted\n\n',
  '~~~\n```\n\nnot closed by backticks\n~~~\n\n',
  'The end.\n',
];

describe('BlockSplitter', () => {
  it('cuts a document at the blank lines that end top-level blocks', () => {
    const { closed, open } = split(DOCUMENT.join(''));
    expect(closed).toEqual(DOCUMENT.slice(0, -1));
    expect(open).toBe('The end.\n');
  });

  it('renders each block as the whole document renders', () => {
    const { closed, open } = split(DOCUMENT.join(''));
    expect([...closed, open].map(html).join('')).toBe(html(DOCUMENT.join('')));
  });

  it('cuts the same whatever the deltas, and joined the blocks are the text', () => {
    const text = DOCUMENT.join('');
    for (const size of [1, 2, 3, 7, 64, text.length]) {
      const { closed, open } = splitStreamed(text, size);
      expect(closed.join('') + open).toBe(text);
      expect(closed).toEqual(DOCUMENT.slice(0, -1));
    }
  });

  it('never cuts inside an open fence, however long', () => {
    const text = '```\na\n\nb\n\n\nc\n\n# not a heading\n';
    expect(split(text)).toMatchObject({ closed: [], open: text });
    expect(split(`${text}\`\`\`\n\nafter\n`).closed).toEqual([`${text}\`\`\`\n\n`]);
  });

  it('keeps a fence closed by a shorter fence or another character open', () => {
    const text = '````\n```\n\n~~~~\n\nstill code\n';
    expect(split(text).closed).toEqual([]);
  });

  it('does not cut before an indented line or a list item continuing a list', () => {
    expect(split('- a\n\n    code in a\n\n- b\n\nafter\n').closed).toEqual(['- a\n\n    code in a\n\n- b\n\n']);
    expect(split('para\n\n    indented code\n').closed).toEqual([]);
  });

  it('cuts before a list that follows a paragraph, and after a list before a paragraph', () => {
    expect(split('para\n\n- a\n- b\n\nnext\n').closed).toEqual(['para\n\n', '- a\n- b\n\n']);
  });

  it('judges only complete lines: a partial last line is part of the open block', () => {
    const splitter = new BlockSplitter();
    splitter.update('a\n\nb');
    expect(splitter.closed).toEqual([]);
    splitter.update('a\n\nb\n');
    expect(splitter.closed).toEqual(['a\n\n']);
    expect(splitter.open).toBe('b\n');
  });

  it('keeps the closed list when the text grows, and starts over when it is replaced', () => {
    const splitter = new BlockSplitter();
    splitter.update('a\n\nb\n\nc');
    const closed = splitter.closed;
    splitter.update('a\n\nb\n\nc\n\nd\n');
    expect(splitter.closed).toBe(closed); // appended to, in place
    expect(closed).toEqual(['a\n\n', 'b\n\n', 'c\n\n']);
    splitter.update('x\n\ny\n');
    expect(splitter.closed).toEqual(['x\n\n']);
    expect(splitter.open).toBe('y\n');
  });

  it('starts over when an earlier block changed, though the text grew', () => {
    const splitter = new BlockSplitter();
    splitter.update('a\n\nb\n\nc');
    splitter.update('a\n\nB\n\nc\n\nd\n');
    expect(splitter.closed).toEqual(['a\n\n', 'B\n\n', 'c\n\n']);
    splitter.update('a\n\nB\n\nC\n\nd\ne\n'); // the open block changed
    expect(splitter.closed).toEqual(['a\n\n', 'B\n\n', 'C\n\n']);
    expect(splitter.open).toBe('d\ne\n');
  });

  it('scans until a deadline and goes on where it stopped', () => {
    const text = Array.from({ length: 500 }, (_, k) => `para ${k}\n\n`).join('');
    const splitter = new BlockSplitter();
    expect(splitter.update(text, 0)).toBe(false); // a deadline passed: one look at the clock's worth
    const early = splitter.closed.length;
    expect(early).toBeGreaterThan(0);
    expect(early).toBeLessThan(499);
    expect(splitter.update(text)).toBe(true);
    expect(splitter.closed).toEqual(split(text).closed);
    expect(splitter.update(text + 'more\n\nend', 0)).toBe(true); // two lines: done before a look
  });

  it('keeps no copy of the whole text per update it cut a block in', () => {
    // Each update's text is a new string: a block kept as a slice of it keeps
    // it alive (V8), 2,000 updates of a 1 MB answer about 1 GB.
    const splitter = new BlockSplitter();
    const before = process.memoryUsage().heapUsed;
    let text = '';
    for (let k = 0; k < 2_000; k++) {
      text += `paragraph ${k} ${'x'.repeat(480)}\n\n`;
      splitter.update(text);
    }
    expect(splitter.closed.length).toBe(1_999);
    expect(splitter.closed.join('') + splitter.open).toBe(text);
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(256 * 2 ** 20);
  });

  it('collects link reference definitions for every block', () => {
    const { closed, definitions } = split('see [the docs][d]\n\n[d]: https://example.com/docs\n\nmore\n');
    expect(closed).toEqual(['see [the docs][d]\n\n', '[d]: https://example.com/docs\n\n']);
    expect(definitions).toBe('[d]: https://example.com/docs\n');
    expect(html(closed[0] + '\n' + definitions)).toContain('href="https://example.com/docs"');
  });

  it('ignores definitions and fences inside a fence', () => {
    const { definitions, closed } = split('~~~\n[d]: https://x\n```\n~~~\n\nafter\n');
    expect(definitions).toBe('');
    expect(closed).toEqual(['~~~\n[d]: https://x\n```\n~~~\n\n']);
  });

  it('treats a line with backticks after the fence as inline code, not a fence', () => {
    expect(split('``` not a fence ```\n\nnext\n').closed).toEqual(['``` not a fence ```\n\n']);
  });

  it('keeps an HTML comment open across blank lines until it ends', () => {
    expect(split('<!-- a\n\nb -->\n\nnext\n').closed).toEqual(['<!-- a\n\nb -->\n\n']);
    expect(split('<!-- one line -->\n\nnext\n').closed).toEqual(['<!-- one line -->\n\n']);
  });
});
