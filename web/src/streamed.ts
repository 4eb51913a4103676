/**
 * A streamed answer (or reasoning) rendered into an element, incrementally,
 * without blocking the page.
 *
 * The text is cut into top-level blocks (`BlockSplitter`, blocks.ts), in the
 * frames below like the rest (text that came faster than frames is scanned
 * over several, not in the update that brought it). A closed
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
 * the time left (`msPerByte`), so a burst — a long answer opened at once, a
 * fast stream — is spread over frames and a frame stays well under a 50 ms
 * long task with its own style, layout and paint. The DOM is built here, not
 * by Preact: a frame appends a few elements; nothing diffs thousands of
 * children.
 *
 * A long answer holds less DOM: once it has `PARK_FROM` groups, a full group
 * more than `NEAR` (two heights of its scrolling box) above or below the view
 * is *parked* — its elements replaced by its Markdown as one text node in a
 * `hidden="until-found"` element of the height it had — and rendered again
 * when it comes near (an IntersectionObserver on the scrolling box), when the
 * browser's find-in-page matches inside it (`beforematch`), and before
 * printing. A million elements kept for a 5 MB answer made the garbage
 * collector's marking block the main thread for up to 600 ms (docs/web.md
 * "Long answers"); parked, the answer holds a few screens of elements.
 *
 * The element's `data-rendered` is `complete` once every block of a finished
 * answer is in the DOM (rendered or parked), `partial` before (still
 * streaming, or blocks still to come); tests wait on it instead of walking the
 * answer.
 */
import { BlockSplitter } from './blocks';
import { renderMarkdownBlocks } from './markdown';

/** Closed blocks per `.md-group`. */
const GROUP = 64;
/** Block rendering per animation frame, all answers together (ms). */
const SLICE_MS = 6;
/** The most Markdown rendered (parsed, then sanitised together) in one batch. */
const BATCH_MAX = 16_000;
/** An open block at least this long is not highlighted while it streams. */
const HIGHLIGHT_OPEN_BELOW = 16_000;
/** Groups are parked once an answer has this many (a shorter answer keeps all its elements). */
const PARK_FROM = 16;
/** How far from the view a group stays rendered: the observer's margin, in heights of the scrolling box. */
const NEAR = '200% 0px';

/**
 * What rendering costs, in ms per byte of Markdown, as measured over the last
 * batches: a batch is what should fit in the time left in the frame's slice.
 * It starts high (the first blocks run cold: unoptimised code, highlight.js
 * compiling a language's grammar on its first use) and follows the machine.
 * A cost, not a rate, is averaged: blocks differ (highlighted code costs
 * several times a list), and an average of rates leans to the fast batches,
 * which made the next slow one run several slices long.
 */
let msPerByte = 1 / 50;

function measured(bytes: number, ms: number): void {
  if (bytes < 256) return; // too little to say
  msPerByte = Math.min(1 / 10, Math.max(1 / 5_000, 0.7 * msPerByte + 0.3 * (ms / bytes)));
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
  const budget = Math.min(BATCH_MAX, (deadline - performance.now()) / msPerByte);
  let bytes = blocks[start]!.length;
  let next = start + 1;
  while (next < end && bytes + blocks[next]!.length <= budget) bytes += blocks[next++]!.length;
  return next;
}

export class StreamedBlocks {
  private readonly splitter = new BlockSplitter();
  /** The text to show: scanned by the splitter in the frames (a 5 MB answer's deltas come faster than frames). */
  private text = '';
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
  /** Parked groups, by index. */
  private readonly parked = new Set<number>();
  /** Groups being rendered again, by index: how many of their blocks are back. */
  private readonly restoring = new Map<number, number>();
  /** Watches full groups once the answer has `PARK_FROM` of them. */
  private observer: IntersectionObserver | undefined;
  private readonly beforePrint = () => this.restoreAll();
  private readonly afterPrint = () => this.watchAll();

  constructor(private readonly root: HTMLElement) {
    this.openBlock = root.ownerDocument.createElement('div');
    this.openBlock.className = 'md-block';
    this.openBlock.hidden = true;
    root.replaceChildren(this.openBlock);
    root.setAttribute('data-rendered', 'partial');
    root.addEventListener('beforematch', this.found);
  }

  /** Take the text as it is now; it is rendered in the next frames. */
  update(text: string, streaming: boolean): void {
    this.text = text;
    this.streaming = streaming;
    this.root.setAttribute('data-rendered', 'partial');
    schedule(this);
  }

  /** Stop: the element is leaving the page. */
  dispose(): void {
    waiting.delete(this);
    this.unwatch();
    this.root.removeEventListener('beforematch', this.found);
  }

  /**
   * Render until `deadline` (at least one block). True when all is shown,
   * false when there is more to do.
   */
  render(deadline: number): boolean {
    const { splitter } = this;
    const scanned = splitter.update(this.text, deadline);
    if (splitter.closed !== this.closed) {
      // The text was replaced, not extended: start over.
      this.closed = splitter.closed;
      this.shown = 0;
      this.current = 0;
      this.group = undefined;
      this.unwatch();
      this.root.replaceChildren(this.openBlock);
    }
    if (splitter.definitions !== this.definitions) {
      this.definitions = splitter.definitions;
      this.current = 0;
    }
    const closed = this.closed;
    if (!scanned || closed.length > this.shown) this.showOpen(undefined); // shown again once caught up
    let progress = !scanned;
    const due = () => progress && performance.now() >= deadline;
    // Groups coming back into view first: they are what the reader looks at.
    for (const [index, back] of this.restoring) {
      if (due()) return false;
      const group = this.root.children[index] as HTMLElement;
      const end = Math.min((index + 1) * GROUP, this.shown);
      const start = index * GROUP + back;
      const next = batchEnd(closed, start, end, deadline);
      const blocks = this.markdown(closed.slice(start, next)).map(asBlock);
      // The first batch takes the place of the parked text (shown meanwhile).
      if (back === 0) group.replaceChildren(...blocks);
      else group.append(...blocks);
      if (next < end) this.restoring.set(index, next - index * GROUP);
      else {
        this.restoring.delete(index);
        group.style.removeProperty('height');
        // Reported afresh: it may have gone far again while it came back.
        this.observer?.unobserve(group);
        this.observer?.observe(group);
      }
      progress = true;
    }
    // Blocks rendered before a definition they use had come: again, in place
    // (a parked group, or the part of one not back yet, is rendered with
    // them when it comes back).
    while (this.current < this.shown) {
      if (due()) return false;
      const start = this.current;
      const index = Math.floor(start / GROUP);
      const group = this.root.children[index]!;
      const end = Math.min((index + 1) * GROUP, this.shown, index * GROUP + group.childElementCount);
      if (this.parked.has(index) || start >= end) {
        this.current = Math.min((index + 1) * GROUP, this.shown);
        continue;
      }
      this.current = batchEnd(closed, start, end, deadline);
      this.markdown(closed.slice(start, this.current)).forEach((block, k) => {
        group.children[(start + k) % GROUP]!.replaceWith(asBlock(block));
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
    if (!scanned) return false;
    const open = splitter.open;
    this.showOpen(open ? { text: open, highlight: !this.streaming || open.length < HIGHLIGHT_OPEN_BELOW, definitions: this.definitions } : undefined);
    this.root.setAttribute('data-rendered', this.streaming ? 'partial' : 'complete');
    return true;
  }

  /** Closed blocks (or the open one) rendered, timed for `msPerByte`. */
  private markdown(texts: string[], highlight = true): HTMLDivElement[] {
    const definitions = this.definitions;
    const started = performance.now();
    const blocks = renderMarkdownBlocks(definitions ? texts.map((text) => `${text}\n\n${definitions}`) : texts, { highlight });
    measured(texts.reduce((sum, text) => sum + text.length, 0), performance.now() - started);
    return blocks;
  }

  private append(block: HTMLElement): void {
    if (!this.group || this.group.childElementCount >= GROUP) {
      if (this.group) this.watch(this.group);
      this.group = this.root.ownerDocument.createElement('div');
      this.group.className = 'md-group';
      this.root.insertBefore(this.group, this.openBlock);
    }
    this.group.append(asBlock(block));
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

  /** Watch a full group (the answer's first `PARK_FROM - 1` once it has `PARK_FROM`). */
  private watch(group: HTMLElement): void {
    if (!this.observer) {
      if (this.root.childElementCount - 1 < PARK_FROM) return;
      this.observer = new IntersectionObserver(this.moved, { root: scrollingBox(this.root), rootMargin: NEAR });
      addEventListener('beforeprint', this.beforePrint);
      addEventListener('afterprint', this.afterPrint);
      this.watchAll();
      return;
    }
    this.observer.observe(group);
  }

  /** Watch every full group again (each is reported where it is now). */
  private watchAll(): void {
    const { observer } = this;
    if (!observer) return;
    observer.disconnect();
    const full = Math.floor(this.shown / GROUP);
    for (let index = 0; index < full; index++) observer.observe(this.root.children[index]!);
  }

  private unwatch(): void {
    this.observer?.disconnect();
    this.observer = undefined;
    this.parked.clear();
    this.restoring.clear();
    removeEventListener('beforeprint', this.beforePrint);
    removeEventListener('afterprint', this.afterPrint);
  }

  private readonly moved = (entries: IntersectionObserverEntry[]): void => {
    for (const entry of entries) {
      const group = entry.target as HTMLElement;
      const index = indexOf(group);
      if (entry.isIntersecting) this.unpark(index);
      else if (!this.parked.has(index)) this.park(group, index, entry.boundingClientRect.height);
    }
  };

  /**
   * Find-in-page matched inside a parked group: the browser shows its text
   * and scrolls to the match; it is rendered in the next frames.
   */
  private readonly found = (event: Event): void => {
    const group = event.target as HTMLElement;
    if (group.parentElement === this.root) this.unpark(indexOf(group));
  };

  /**
   * Hold a group as its Markdown, at the height it had. Not one being
   * rendered again: it is near, or was a moment ago (it is parked when it
   * is next reported far).
   */
  private park(group: HTMLElement, index: number, height: number): void {
    if (this.restoring.has(index)) return;
    const start = index * GROUP;
    group.style.height = `${height}px`;
    group.replaceChildren(this.closed.slice(start, start + GROUP).join(''));
    group.setAttribute('hidden', 'until-found');
    this.parked.add(index);
  }

  private unpark(index: number): void {
    if (!this.parked.delete(index)) return;
    (this.root.children[index] as HTMLElement).removeAttribute('hidden');
    this.restoring.set(index, 0);
    schedule(this);
  }

  /** Every parked group rendered now (printing: the page is laid out for paper at once). */
  private restoreAll(): void {
    for (const index of this.parked) this.unpark(index);
    while (this.restoring.size > 0) this.render(Infinity);
  }
}

function asBlock(block: HTMLElement): HTMLElement {
  block.className = 'md-block';
  return block;
}

/** A group's index among the answer's children. */
function indexOf(group: Element): number {
  return Array.prototype.indexOf.call(group.parentElement!.children, group);
}

/** The nearest ancestor that scrolls (the transcript), or null for the page's viewport. */
function scrollingBox(element: HTMLElement): HTMLElement | null {
  for (let box = element.parentElement; box; box = box.parentElement) {
    const overflow = getComputedStyle(box).overflowY;
    if (overflow === 'auto' || overflow === 'scroll') return box;
  }
  return null;
}
