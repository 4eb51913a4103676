/**
 * Runs one browser scenario against a running host, in headless Chromium.
 *
 *   node web/browser/run.mjs SCENARIO PAGE_URL [SCREENSHOT_DIR]
 *
 * tests/browser/test_page.py starts the host (a real `python -m ahp_server
 * serve` process), runs this script per scenario, and answers its requests on
 * stdin: the script prints `{"ask": {...}}` lines (restart the host, cut the
 * network, read the host's state) and reads one JSON line back for each. The
 * last line is `{"result": {...}}`; any failure exits non-zero with the reason
 * on stderr.
 *
 * The browser is Debian's /usr/bin/chromium (or $AHP_CHROMIUM) driven by
 * playwright-core: nothing is downloaded. Each run gets a fresh profile.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import readline from 'node:readline';
import { chromium } from 'playwright-core';
import { scenarios } from './scenarios.mjs';

const [name, pageUrl, screenshots] = process.argv.slice(2);
const scenario = scenarios[name];
if (!scenario || !pageUrl) {
  console.error(`usage: run.mjs (${Object.keys(scenarios).join('|')}) PAGE_URL [SCREENSHOT_DIR]`);
  process.exit(2);
}

const input = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();

/** Ask the test driving us to do something outside the browser; returns its JSON answer. */
async function ask(request) {
  process.stdout.write(`${JSON.stringify({ ask: request })}\n`);
  const { value, done } = await input.next();
  if (done) throw new Error(`no answer to ${JSON.stringify(request)}`);
  const answer = JSON.parse(value);
  if (answer.error) throw new Error(`the test could not ${request.do}: ${answer.error}`);
  return answer;
}

const profile = mkdtempSync(join(tmpdir(), 'ahp-chromium-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.AHP_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
  viewport: { width: 1280, height: 820 },
});

/** What every page did that a test must see: dialogs, script errors, CSP reports. */
const trouble = { dialogs: [], errors: [], csp: [] };
function watch(page) {
  page.on('dialog', (dialog) => {
    trouble.dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  page.on('pageerror', (error) => trouble.errors.push(String(error)));
  page.on('console', (message) => {
    const text = message.text();
    if (/Content Security Policy|Refused to/i.test(text)) trouble.csp.push(text);
  });
  return page;
}
context.on('page', watch);

let code = 0;
try {
  const result = await scenario({
    context,
    url: pageUrl,
    ask,
    trouble,
    newPage: async () => context.newPage(),
    screenshot: async (page, file) => {
      if (screenshots) await page.screenshot({ path: join(screenshots, file) });
    },
  });
  if (trouble.errors.length > 0) throw new Error(`script errors in the page: ${trouble.errors.join(' | ')}`);
  process.stdout.write(`${JSON.stringify({ result: result ?? {} })}\n`);
} catch (error) {
  console.error(error?.stack ?? String(error));
  code = 1;
} finally {
  await context.close().catch(() => undefined);
  rmSync(profile, { recursive: true, force: true });
}
process.exit(code);
