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
 */
import DOMPurify, { type Config } from 'dompurify';
import { Marked } from 'marked';

const markdown = new Marked({ gfm: true, breaks: false, async: false });

const purify = DOMPurify(window);

// Links leave the page in a new tab, without a referrer or a handle on us.
purify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A' && node.hasAttribute('href')) {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer nofollow');
  }
});

const CONFIG: Config & { RETURN_DOM_FRAGMENT: true } = {
  USE_PROFILES: { html: true },
  // Markup that could pass for the page's own controls, or fetch and embed.
  FORBID_TAGS: [
    'style', 'form', 'input', 'button', 'select', 'textarea', 'option', 'iframe', 'frame',
    'object', 'embed', 'video', 'audio', 'source', 'track', 'dialog', 'template', 'svg', 'math',
  ],
  FORBID_ATTR: ['style', 'srcset', 'formaction', 'action', 'ping', 'id', 'name'],
  ALLOW_DATA_ATTR: false,
  RETURN_DOM_FRAGMENT: true,
};

/** Sanitized DOM for `text` (Markdown). */
export function renderMarkdown(text: string): DocumentFragment {
  const html = markdown.parse(text) as string;
  return purify.sanitize(html, CONFIG);
}

/** Text of a `StringOrMarkdown` value (`string` or `{ markdown }`). */
export function markdownOf(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object' && 'markdown' in value) {
    return String((value as { markdown: unknown }).markdown);
  }
  return '';
}
