/**
 * Streamed Markdown cut into top-level blocks, incrementally.
 *
 * An answer grows by deltas. Re-parsing all of it on every delta costs time in
 * its length, so a long answer costs time in the square of its length. The
 * splitter cuts the text at blank lines that end a top-level block: the blocks
 * before the last are *closed* (no later text can change how they parse, as
 * far as this page renders them) and are parsed once; only the last, *open*
 * block is parsed again as the text grows. Each call to `update` scans only the
 * lines added since the previous call.
 *
 * A blank line is a cut when the next line starts in column 0 with something
 * other than a space or tab, and is not a list item continuing a list the block
 * holds (a loose list stays one block). Never inside a code fence (``` or ~~~,
 * closed by a fence of the same character at least as long) or a raw HTML block
 * that may hold blank lines (`<pre`, `<script`, `<style`, `<textarea`, `<!--`,
 * until its end). A line is judged once it is complete (ends with `\n`).
 *
 * Link reference definitions (`[x]: url`) apply to the whole document: the
 * splitter collects them (`definitions`) so that each block can be parsed with
 * them appended.
 *
 * The blocks, joined, are always the text: `closed.join('') + open === text`.
 */

const FENCE = /^[ \t]*(`{3,}|~{3,})/;
const LIST_ITEM = /^(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)/;
/** Lines scanned between two looks at the clock. */
const LINES_PER_CHECK = 64;
/** Characters compared over the closed blocks when a text comes (`extendedBy`). */
const SAMPLES = 64;
const DEFINITION = /^ {0,3}\[[^\]]+\]:[ \t]*\S/;
/** Raw HTML blocks that blank lines do not end (CommonMark HTML blocks 1 and 2), and their ends. */
const HTML_OPENERS: Array<[RegExp, RegExp]> = [
  [/^ {0,3}<(?:pre|script|style|textarea)(?:[\s>]|$)/i, /<\/(?:pre|script|style|textarea)>/i],
  [/^ {0,3}<!--/, /-->/],
];

export class BlockSplitter {
  /** The closed blocks, in order. Only ever appended to, until the text is replaced (`reset`). */
  closed: string[] = [];
  /** Link reference definition lines seen so far, each ending with `\n`. */
  definitions = '';
  private text = '';
  /** Where the open block starts. */
  private blockStart = 0;
  /** Where the next line to scan starts. */
  private pos = 0;
  private fence: { char: string; length: number } | undefined;
  private htmlEnd: RegExp | undefined;
  private sawBlank = false;
  private inList = false;

  /** The block still growing: everything after the last closed block. */
  get open(): string {
    return this.text.slice(this.blockStart);
  }

  /**
   * Take the text as it is now, and scan it until `deadline` (a
   * `performance.now()` time; by default, all of it). Text that extends the
   * previous text is scanned from where the scan stopped; anything else
   * starts over. True once every complete line is scanned; false when the
   * deadline came first (`closed` and `open` then hold what is scanned so
   * far, and a later call goes on).
   */
  update(text: string, deadline = Infinity): boolean {
    if (text !== this.text) {
      if (!this.extendedBy(text)) this.reset();
      this.text = text;
    }
    for (let lines = 1; ; lines++) {
      const end = text.indexOf('\n', this.pos);
      if (end < 0) return true;
      this.line(text.slice(this.pos, end), this.pos);
      this.pos = end + 1;
      if (lines % LINES_PER_CHECK === 0 && performance.now() >= deadline) return text.indexOf('\n', this.pos) < 0;
    }
  }

  /**
   * Whether `text` extends the text scanned so far: at least as long, the open
   * block the same, and the same characters at `SAMPLES` places spread over
   * the closed blocks. Not a comparison of the whole text: that costs time in
   * the answer's length on every delta (17 ms a delta at 3.5 MB, so seconds a
   * stream), and an answer's text only ever grows while it streams (its
   * deltas are appended); a text replaced by another differs at the samples.
   */
  private extendedBy(text: string): boolean {
    const old = this.text;
    if (text.length < old.length || !text.startsWith(old.slice(this.blockStart), this.blockStart)) return false;
    const step = this.blockStart / SAMPLES;
    for (let k = 0; k < SAMPLES; k++) {
      const at = Math.floor(k * step);
      if (text.charCodeAt(at) !== old.charCodeAt(at)) return false;
    }
    return true;
  }

  private reset(): void {
    this.closed = [];
    this.definitions = '';
    this.text = '';
    this.blockStart = 0;
    this.pos = 0;
    this.fence = undefined;
    this.htmlEnd = undefined;
    this.sawBlank = false;
    this.inList = false;
  }

  /** One complete line (without its `\n`) that starts at `start`. */
  private line(line: string, start: number): void {
    if (this.fence) {
      const close = FENCE.exec(line);
      const marker = close?.[1];
      if (marker && marker[0] === this.fence.char && marker.length >= this.fence.length && !line.slice(close[0].length).trim()) {
        this.fence = undefined;
      }
      return;
    }
    if (this.htmlEnd) {
      if (this.htmlEnd.test(line)) this.htmlEnd = undefined;
      return;
    }
    if (!line.trim()) {
      this.sawBlank = true;
      return;
    }
    const column0 = line[0] !== ' ' && line[0] !== '\t';
    const listItem = column0 && LIST_ITEM.test(line);
    if (this.sawBlank && column0 && !(listItem && this.inList) && start > this.blockStart) {
      this.closed.push(detached(this.text.slice(this.blockStart, start)));
      this.blockStart = start;
      this.inList = false;
    }
    this.sawBlank = false;
    if (listItem) this.inList = true;
    const fence = FENCE.exec(line);
    if (fence?.[1]) {
      // A backtick fence's info string has no backtick; otherwise it is inline code.
      if (fence[1][0] !== '`' || !line.slice(fence[0].length).includes('`')) {
        this.fence = { char: fence[1][0]!, length: fence[1].length };
      }
      return;
    }
    for (const [opener, end] of HTML_OPENERS) {
      if (opener.test(line)) {
        // Closed on its own first line, or open until a line that closes it.
        if (!end.test(line.slice(line.search(/</) + 1))) this.htmlEnd = end;
        break;
      }
    }
    if (DEFINITION.test(line)) this.definitions += detached(`${line}\n`);
  }
}

/**
 * A copy of `part` that keeps nothing else alive. A slice of a long string is
 * a view of it in V8 (a sliced string holds its parent), and each update's
 * text is a new string (the answer so far, flattened when first read): blocks
 * kept as slices would keep a copy of the whole answer per update they were
 * cut in — gigabytes for a 5 MB answer. Concatenating, then slicing, copies
 * the characters into a string of the block's own size.
 */
function detached(part: string): string {
  return ` ${part}`.slice(1);
}
