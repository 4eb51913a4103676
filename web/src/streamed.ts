/**
 * A streamed answer (or reasoning) rendered into an element, incrementally,
 * without blocking the page.
 *
 * The text is cut into top-level blocks (`BlockSplitter`, blocks.ts). A closed
 * block is parsed and sanitised once, into a `.md-block` element that is never
 * touched again (unless a later link reference definition changes how blocks
 * parse: then every block is rendered again, in place). Closed blocks go into
 * groups of `GROUP` (`.md-group`, `content-visibility: auto` in styles.css:
 * a group off screen is not styled, laid out or painted). The last, open block
 * is rendered again when the text has grown, and only once every closed block
 * before it is shown; while it is large and still streaming its code is not
 * highlighted (it is once it closes or the answer ends).
 *
 * All the rendering happens in animation frames, at most about `SLICE_MS` of
 * it per frame for every answer on the page together, in batches sized to
 * the time left (`bytesPerMs`), so a burst — a long answer opened at once, a
 * fast stream — is spread over frames and a frame stays well under a 50 ms
 * long task with its own style, layout and paint. The DOM is built here, not
 * by Preact: a frame appends a few elements; nothing diffs thousands of
 * children.
 *
 * The element's `data-rendered` is `complete` once every block of a finished
 * answer is in the DOM, `partial` before (still streaming, or blocks still to
 * come); tests wait on it instead of walking the answer.
 */
import { BlockSplitter } from './blocks';
import { renderMarkdownBlocks } from './markdown';

/** Closed blocks per `.md-group`. */
const GROUP = 64;
/** Block rendering per animation frame, all answers together (ms). */
const SLICE_MS = 6;
/** The most Markdown rendered (parsed, then sanitised together) in one batch. */
const BATCH_MAX = 32_000;
/** An open block at least this long is not highlighted while it streams. */
const HIGHLIGHT_OPEN_BELOW = 16_000;

/**
 * Markdown rendered per ms, as measured over the last batches: a batch is
 * what should fit in the time left in the frame's slice. It starts low (the
 * first blocks run cold: unoptimised code, highlight.js compiling a
 * language's grammar on its first use) and follows the machine.
 */
let bytesPerMs = 50;

function measured(bytes: number, ms: number): void {
  bytesPerMs = Math.min(5_000, Math.max(10, (bytesPerMs + bytes / Math.max(ms, 0.05)) / 2));
}

/** Answers with rendering to do, served in turn, each frame. */
const waiting = new Set<StreamedBlocks>();
let frame = 0;

function schedule(view: StreamedBlocks): void {
  waiting.add(view);
  if (!frame) frame = requestAnimationFrame(renderFrame);
}

function renderFrame(): void {
  frame = 0;
  const deadline = performance.now() + SLICE_MS;
  for (const view of [...waiting]) {
    if (performance.now() >= deadline) break;
    waiting.delete(view);
    // Not done: back at the end of the queue, so answers take turns.
    if (!view.render(deadline)) waiting.add(view);
  }
  if (waiting.size > 0) frame = requestAnimationFrame(renderFrame);
}

/**
 * Where a batch of `blocks` from `start` ends: what should render by
 * `deadline`, at least one block, at most up to `end`.
 */
function batchEnd(blocks: readonly string[], start: number, end: number, deadline: number): number {
  const budget = Math.min(BATCH_MAX, (deadline - performance.now()) * bytesPerMs);
  let bytes = blocks[start]!.length;
  let next = start + 1;
  while (next < end && bytes + blocks[next]!.length <= budget) bytes += blocks[next++]!.length;
  return next;
}

export class StreamedBlocks {
  private readonly splitter = new BlockSplitter();
  private streaming = false;
  /** The splitter's list of closed blocks shown (a new list after a reset). */
  private closed: string[] = [];
  /**
   * How many closed blocks are shown: block i is child i % GROUP of the
   * root's child ⌊i / GROUP⌋ (no list of the elements here: held from
   * script, thousands of them cost the garbage collector).
   */
  private shown = 0;
  /** Blocks before this index are rendered with `definitions`; those after, up to `shown`, again. */
  private current = 0;
  private definitions = '';
  private group: HTMLElement | undefined;
  private readonly openBlock: HTMLElement;
  private openShown: { text: string; highlight: boolean; definitions: string } | undefined;

  constructor(private readonly root: HTMLElement) {
    this.openBlock = root.ownerDocument.createElement('div');
    this.openBlock.className = 'md-block';
    this.openBlock.hidden = true;
    root.replaceChildren(this.openBlock);
    root.setAttribute('data-rendered', 'partial');
  }

  /** Take the text as it is now; it is rendered in the next frames. */
  update(text: string, streaming: boolean): void {
    this.splitter.update(text);
    this.streaming = streaming;
    this.root.setAttribute('data-rendered', 'partial');
    schedule(this);
  }

  /** Stop: the element is leaving the page. */
  dispose(): void {
    waiting.delete(this);
  }

  /**
   * Render until `deadline` (at least one block). True when all is shown,
   * false when there is more to do.
   */
  render(deadline: number): boolean {
    const { splitter } = this;
    if (splitter.closed !== this.closed) {
      // The text was replaced, not extended: start over.
      this.closed = splitter.closed;
      this.shown = 0;
      this.current = 0;
      this.group = undefined;
      this.root.replaceChildren(this.openBlock);
    }
    if (splitter.definitions !== this.definitions) {
      this.definitions = splitter.definitions;
      this.current = 0;
    }
    const closed = this.closed;
    if (closed.length > this.shown) this.showOpen(undefined); // shown again once caught up
    let progress = false;
    const due = () => progress && performance.now() >= deadline;
    // Blocks rendered before a definition they use had come: again, in place.
    while (this.current < this.shown) {
      if (due()) return false;
      const start = this.current;
      this.current = batchEnd(closed, start, this.shown, deadline);
      this.markdown(closed.slice(start, this.current)).forEach((block, k) => {
        const i = start + k;
        block.className = 'md-block';
        this.root.children[Math.floor(i / GROUP)]!.children[i % GROUP]!.replaceWith(block);
      });
      progress = true;
    }
    while (this.shown < closed.length) {
      if (due()) return false;
      const start = this.shown;
      for (const block of this.markdown(closed.slice(start, batchEnd(closed, start, closed.length, deadline)))) this.append(block);
      this.current = this.shown;
      progress = true;
    }
    const open = splitter.open;
    this.showOpen(open ? { text: open, highlight: !this.streaming || open.length < HIGHLIGHT_OPEN_BELOW, definitions: this.definitions } : undefined);
    this.root.setAttribute('data-rendered', this.streaming ? 'partial' : 'complete');
    return true;
  }

  /** Closed blocks (or the open one) rendered, timed for `bytesPerMs`. */
  private markdown(texts: string[], highlight = true): HTMLDivElement[] {
    const definitions = this.definitions;
    const started = performance.now();
    const blocks = renderMarkdownBlocks(definitions ? texts.map((text) => `${text}\n\n${definitions}`) : texts, { highlight });
    measured(texts.reduce((sum, text) => sum + text.length, 0), performance.now() - started);
    return blocks;
  }

  private append(block: HTMLElement): void {
    block.className = 'md-block';
    if (!this.group || this.group.childElementCount >= GROUP) {
      this.group = this.root.ownerDocument.createElement('div');
      this.group.className = 'md-group';
      this.root.insertBefore(this.group, this.openBlock);
    }
    this.group.append(block);
    this.shown++;
  }

  private showOpen(open: { text: string; highlight: boolean; definitions: string } | undefined): void {
    const shown = this.openShown;
    if (open?.text === shown?.text && open?.highlight === shown?.highlight && open?.definitions === shown?.definitions) return;
    this.openShown = open;
    if (open) this.openBlock.replaceChildren(...this.markdown([open.text], open.highlight)[0]!.childNodes);
    else this.openBlock.replaceChildren();
    this.openBlock.hidden = !open;
  }
}
