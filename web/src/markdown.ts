/**
 * Agent output as safe DOM: Markdown through `marked`, then `DOMPurify`.
 *
 * Agent text is hostile input. `marked` passes raw HTML through (that is
 * Markdown), so everything it produces goes through DOMPurify, which removes
 * scripts, event-handler attributes, `javascript:` and other non-navigational
 * URLs, and anything that is not plain document markup. The result is a
 * DocumentFragment that the page appends: no HTML string ever meets
 * `innerHTML` in the live document. The host's Content-Security-Policy (no
 * inline script, images from this origin only) is a second wall behind this.
 *
 * GFM is on, so tables are `<table>` (styled in styles.css). A fenced code
 * block with a language highlight.js knows is highlighted (its core, with the
 * common languages below registered: a small bundle, no auto-detection) into
 * `<span class="hljs-…">`, which DOMPurify keeps as plain markup. After
 * sanitising, each `<pre>` gets a **Copy** button made by this page (agent
 * markup can hold no button: DOMPurify removes them) that copies the code's
 * raw text.
 */
import DOMPurify, { type Config } from 'dompurify';
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import c from 'highlight.js/lib/languages/c';
import cpp from 'highlight.js/lib/languages/cpp';
import css from 'highlight.js/lib/languages/css';
import diff from 'highlight.js/lib/languages/diff';
import go from 'highlight.js/lib/languages/go';
import java from 'highlight.js/lib/languages/java';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import markdownLanguage from 'highlight.js/lib/languages/markdown';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import shell from 'highlight.js/lib/languages/shell';
import sql from 'highlight.js/lib/languages/sql';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';
import { Marked, type Tokens } from 'marked';

for (const [name, language] of Object.entries({
  bash, c, cpp, css, diff, go, java, javascript, json, markdown: markdownLanguage, python, rust, shell, sql, typescript, xml, yaml,
})) {
  hljs.registerLanguage(name, language);
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

/** A code block's HTML: highlighted when asked and the language is known, else escaped text. */
function codeBlock({ text, lang }: Tokens.Code, highlight: boolean): string {
  const language = (lang ?? '').trim().split(/\s+/)[0]?.toLowerCase() ?? '';
  const known = language !== '' && hljs.getLanguage(language) !== undefined;
  const body = highlight && known ? hljs.highlight(text, { language, ignoreIllegals: true }).value : escapeHtml(text);
  const classes = [known && highlight ? 'hljs' : '', language ? `language-${escapeHtml(language)}` : ''].filter(Boolean);
  return `<pre><code${classes.length ? ` class="${classes.join(' ')}"` : ''}>${body}</code></pre>\n`;
}

const highlighted = new Marked({
  gfm: true,
  breaks: false,
  async: false,
  renderer: { code: (token: Tokens.Code) => codeBlock(token, true) },
});
const plain = new Marked({
  gfm: true,
  breaks: false,
  async: false,
  renderer: { code: (token: Tokens.Code) => codeBlock(token, false) },
});

const purify = DOMPurify(window);

// Links leave the page in a new tab, without a referrer or a handle on us.
purify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A' && node.hasAttribute('href')) {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer nofollow');
  }
});

const CONFIG: Config & { IN_PLACE: true } = {
  USE_PROFILES: { html: true },
  // Markup that could pass for the page's own controls, or fetch and embed.
  FORBID_TAGS: [
    'style', 'form', 'input', 'button', 'select', 'textarea', 'option', 'iframe', 'frame',
    'object', 'embed', 'video', 'audio', 'source', 'track', 'dialog', 'template', 'svg', 'math',
  ],
  FORBID_ATTR: ['style', 'srcset', 'formaction', 'action', 'ping', 'id', 'name'],
  ALLOW_DATA_ATTR: false,
  // The markup is parsed here (`inert`), and sanitised where it was parsed.
  IN_PLACE: true,
};
// Set once: given to each sanitize call, the configuration would be parsed
// again per call (a fifth of the time of rendering a long answer's blocks).
purify.setConfig(CONFIG);

/**
 * Sanitized DOM for `text` (Markdown). `highlight: false` leaves code blocks
 * plain (cheaper: for a large block that is still streaming).
 */
export function renderMarkdown(text: string, { highlight = true }: { highlight?: boolean } = {}): DocumentFragment {
  const fragment = document.createDocumentFragment();
  fragment.append(...renderMarkdownBlocks([text], { highlight })[0]!.childNodes);
  return fragment;
}

/**
 * Sanitized DOM for each of `texts` (Markdown, each parsed on its own): one
 * `div` of this document each, not in the page yet.
 *
 * The markup is parsed in a document of its own without a browsing context,
 * so nothing in it loads, runs or fires (an `<img>`'s `onerror`) before
 * DOMPurify has removed it; each text as the children of its own `div`, so
 * whatever a text's markup opens or closes stays in its `div`. DOMPurify then
 * sanitises them all in one walk, where they were parsed (`IN_PLACE`), and
 * the page adopts the result. Given a string instead, DOMPurify parses it into
 * a new document per call: a long answer's tens of thousands of blocks made as
 * many documents, half of the time of rendering them and most of the garbage
 * the page then had to collect. And a document is not reused across calls:
 * each sanitisation leaves a NodeIterator on it until the next garbage
 * collection, and Chromium visits all of a document's iterators for every
 * node that leaves it, so adopting from a long-lived one slows without bound.
 */
export function renderMarkdownBlocks(texts: readonly string[], { highlight = true }: { highlight?: boolean } = {}): HTMLDivElement[] {
  const marked = highlight ? highlighted : plain;
  const inert = document.implementation.createHTMLDocument('');
  const root = inert.createElement('div');
  const blocks = texts.map((text) => {
    const block = inert.createElement('div');
    block.innerHTML = marked.parse(text) as string;
    root.append(block);
    return block;
  });
  purify.sanitize(root); // in place (CONFIG)
  document.adoptNode(root);
  return blocks.map((block) => {
    // A bare div is kept; were one removed all the same, its block shows nothing.
    if (block.parentNode !== root) return document.createElement('div');
    for (const pre of block.querySelectorAll('pre')) addCopyButton(pre);
    return block;
  });
}

/**
 * Wrap `pre` in a `.code-block` with a Copy button before it. The button's
 * label is drawn by CSS (`::before`), so the transcript's text (innerText, a
 * selection copied) stays the agent's alone; its accessible name is
 * `aria-label`. `data-copied` says how the last copy went. One listener on the
 * document serves every button (`copyCode`): a long answer has thousands,
 * and a listener each kept as many closures and wrappers alive.
 */
function addCopyButton(pre: HTMLPreElement): void {
  const doc = pre.ownerDocument;
  const wrapper = doc.createElement('div');
  wrapper.className = 'code-block';
  const button = doc.createElement('button');
  button.type = 'button';
  button.className = 'copy-code';
  button.setAttribute('aria-label', 'Copy code');
  button.title = 'Copy code';
  pre.replaceWith(wrapper);
  wrapper.append(button, pre);
}

function copyCode(event: MouseEvent): void {
  const button = event.target instanceof Element ? event.target.closest('button.copy-code') : null;
  const pre = button?.parentElement?.classList.contains('code-block') ? button.nextElementSibling : null;
  if (!button || !(pre instanceof HTMLPreElement)) return;
  const code = pre.textContent ?? '';
  const done = (outcome: 'yes' | 'failed') => {
    button.setAttribute('data-copied', outcome);
    setTimeout(() => button.removeAttribute('data-copied'), 2000);
  };
  if (!navigator.clipboard) {
    done('failed');
    return;
  }
  navigator.clipboard.writeText(code).then(
    () => done('yes'),
    () => done('failed'),
  );
}
document.addEventListener('click', copyCode);

/** Text of a `StringOrMarkdown` value (`string` or `{ markdown }`). */
export function markdownOf(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object' && 'markdown' in value) {
    return String((value as { markdown: unknown }).markdown);
  }
  return '';
}
