/**
 * Browser scenarios for the session list and the host's health (issue 30):
 * the host's default agent preselected, long names cut without breaking the
 * sidebar, a session that failed to start, rename, delete and the filter,
 * the folder picker and browser, and the banner when the host goes away. Each returns what the Python side
 * (tests/browser/test_page.py) checks against the host.
 */
import assert from 'node:assert/strict';
import { TIMEOUT, connected, openPage, rendered, sessionOf } from './helpers.mjs';

/** Click New session and wait until the page shows that new session, ready. */
async function freshSession(page) {
  const before = await sessionOf(page);
  await page.getByRole('button', { name: 'New session', exact: true }).click();
  await page.waitForFunction(
    (old) => {
      const now = new URLSearchParams(window.location.hash.slice(1)).get('session');
      return now && now !== old;
    },
    before,
  );
  await page.getByRole('tab', { name: /Main/ }).waitFor();
  await page.getByRole('textbox', { name: 'Message', exact: true }).waitFor();
  return sessionOf(page);
}

/** Whether each thing in the sidebar is whole and inside it (nothing cut, nothing pushed out). */
function sidebarLayout() {
  const sidebar = document.querySelector('.sidebar');
  const nav = sidebar.getBoundingClientRect();
  const inside = (el) => {
    const box = el.getBoundingClientRect();
    return box.left >= nav.left - 0.5 && box.right <= nav.right + 0.5;
  };
  const whole = (el) => el.scrollWidth <= el.clientWidth + 1;
  const button = document.querySelector('.new-session button[type="submit"]');
  const heading = document.querySelector('.sidebar h2');
  const select = document.querySelector('#agent-select');
  return {
    button: { text: button.textContent.trim(), whole: whole(button), inside: inside(button) },
    heading: { text: heading.textContent.trim(), whole: whole(heading), inside: inside(heading) },
    select: { inside: inside(select), title: select.title },
    sidebarScrolls: sidebar.scrollWidth > sidebar.clientWidth + 1,
    width: nav.width,
  };
}

/** A session item's agent, as shown: its text, its tooltip, whether it is cut, whether it stays inside. */
function itemAgent(item) {
  const agent = item.querySelector('.agent');
  const nav = document.querySelector('.sidebar').getBoundingClientRect();
  const box = agent.getBoundingClientRect();
  const style = getComputedStyle(agent);
  return {
    text: agent.textContent,
    title: agent.title,
    cut: agent.scrollWidth > agent.clientWidth,
    ellipsis: style.textOverflow === 'ellipsis',
    inside: box.right <= nav.right + 0.5,
    state: item.querySelector('.state').textContent,
    stateVisible: item.querySelector('.state').getBoundingClientRect().right <= nav.right + 0.5,
  };
}

export const sessionScenarios = {
  /** The host's default agent is preselected and first; a long agent name keeps the sidebar whole. */
  async default_agent({ newPage, url }) {
    const page = await openPage(newPage, url);
    await page.waitForFunction(() => document.querySelectorAll('#agent-select option').length >= 2);
    const options = await page
      .locator('#agent-select option')
      .evaluateAll((all) => all.map((o) => ({ value: o.value, text: o.textContent })));
    const preselected = await page.locator('#agent-select').inputValue();
    const layout = await page.evaluate(sidebarLayout);
    const session = await freshSession(page);
    const item = page.locator(`.session-item[data-session="${session}"]`);
    await item.waitFor();
    const agent = await item.evaluate(itemAgent);
    const after = await page.evaluate(sidebarLayout);
    const header = await page.locator('.session-title .agent').getAttribute('title');
    return { options, preselected, layout, after, agent, header, session };
  },

  /** A session whose agent fails to start is listed as failed, with the cause, and says so when opened. */
  async failed_start({ newPage, url }) {
    const page = await openPage(newPage, url);
    await page.waitForFunction(() =>
      [...document.querySelectorAll('#agent-select option')].some((o) => o.value === 'broken'),
    );
    await page.locator('#agent-select').selectOption('broken');
    await page.getByRole('button', { name: 'New session', exact: true }).click();
    const item = page.locator('.session-item[aria-current="page"][data-state="failed"]');
    await item.waitFor();
    await item.locator('.detail').waitFor();
    await page.locator('.failed-start').waitFor();
    return {
      session: await sessionOf(page),
      state: (await item.locator('.state').innerText()).trim(),
      detail: (await item.locator('.detail').innerText()).trim(),
      tooltip: await item.locator('.detail').getAttribute('title'),
      main: (await page.locator('.failed-start').innerText()).trim(),
    };
  },

  /** Rename a session to Markdown (shown as plain text), filter the list, delete a session. */
  async rename_delete_filter({ newPage, url, ask }) {
    const page = await openPage(newPage, url);
    const first = await freshSession(page);
    const second = await freshSession(page);
    const items = page.locator('.sidebar > .sessions .session-item');
    await page.waitForFunction(() => document.querySelectorAll('.sidebar > .sessions .session-item').length === 2);

    // Rename the first one, with Markdown in the new title.
    await page.locator(`.session-item[data-session="${first}"]`).click();
    await page.waitForFunction((s) => new URLSearchParams(window.location.hash.slice(1)).get('session') === s, first);
    await page.getByRole('button', { name: 'Rename', exact: true }).click();
    const input = page.getByRole('textbox', { name: 'Session title' });
    await input.fill('**Fix** the `bug`');
    await input.press('Enter');
    const title = page.locator(`.session-item[data-session="${first}"] .title`);
    await page.waitForFunction(
      (s) => document.querySelector(`.session-item[data-session="${s}"] .title`)?.textContent === 'Fix the bug',
      first,
    );
    const shown = {
      sidebar: await title.innerText(),
      tooltip: await title.getAttribute('title'),
      header: await page.locator('.session-title h2').innerText(),
    };
    let host;
    for (let i = 0; i < 200; i++) {
      ({ title: host } = await ask({ do: 'title', session: first }));
      if (host === '**Fix** the `bug`') break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }

    // The filter: by the plain title, then nothing, then everything again.
    const filter = page.getByRole('searchbox', { name: 'Filter sessions' });
    await filter.fill('fix bug');
    await page.waitForFunction(() => document.querySelectorAll('.sidebar > .sessions .session-item').length === 1);
    const filtered = await items.evaluateAll((all) => all.map((b) => b.getAttribute('data-session')));
    await filter.fill('nothing like this');
    await page.locator('.sidebar > .sessions .empty').waitFor();
    const none = (await page.locator('.sidebar > .sessions .empty').innerText()).trim();
    await filter.fill('');
    await page.waitForFunction(() => document.querySelectorAll('.sidebar > .sessions .session-item').length === 2);

    // Delete the second one: asked first; Keep keeps it.
    await page.locator(`.session-item[data-session="${second}"]`).click();
    await page.waitForFunction((s) => new URLSearchParams(window.location.hash.slice(1)).get('session') === s, second);
    await page.getByRole('button', { name: 'Delete', exact: true }).click();
    await page.getByRole('button', { name: 'Keep' }).click();
    assert.equal(await page.locator(`.session-item[data-session="${second}"]`).count(), 1);
    await page.getByRole('button', { name: 'Delete', exact: true }).click();
    await page.getByRole('button', { name: 'Delete session' }).click();
    await page.locator(`.session-item[data-session="${second}"]`).waitFor({ state: 'detached' });
    await page.locator('.welcome').waitFor();
    const left = await items.evaluateAll((all) => all.map((b) => b.getAttribute('data-session')));
    return { first, second, shown, host, filtered, none, left };
  },

  /** A folder refused outside the roots, one inside taken, then offered as a recent folder. */
  async folder_picker({ newPage, url, ask }) {
    const { root, project, outside } = await ask({ do: 'paths' });
    const page = await openPage(newPage, url);
    const options = () => page.locator('#folder-options option').evaluateAll((all) => all.map((o) => o.value));
    await page.waitForFunction((r) => [...document.querySelectorAll('#folder-options option')].some((o) => o.value === r), root);
    const offered = await options();
    const folder = page.getByLabel('Folder', { exact: true });
    await folder.fill(outside);
    await page.getByRole('button', { name: 'New session', exact: true }).click();
    const notice = page.locator('.notice.error');
    await notice.waitFor();
    const refusal = (await notice.innerText()).trim();
    assert.equal(await page.locator('.sidebar > .sessions .session-item').count(), 0, 'nothing was created');
    assert.equal(await folder.inputValue(), outside, 'the refused folder stays to be corrected');
    await folder.fill(project);
    const session = await freshSession(page);
    const directory = await page.locator('.chat .directory').getAttribute('title');
    assert.equal(await folder.inputValue(), '');
    await page.reload();
    await connected(page);
    await page.waitForFunction((p) => document.querySelector('#folder-options option')?.value === p, project);
    return { offered, refusal, session, directory, after: await options() };
  },

  /**
   * Browse…: the root's folders (files only counted), two refusals shown in the
   * dialog (the host's data folder, a folder gone since it was listed), then
   * root → a (the keyboard) → b → Up, Choose this folder; Escape closes; the
   * session is created in the chosen folder.
   */
  async folder_browser({ newPage, url, ask }) {
    const { root } = await ask({ do: 'paths' });
    const page = await openPage(newPage, url);
    const browse = page.getByRole('button', { name: 'Browse…', exact: true });
    await page.waitForFunction(() => {
      const button = [...document.querySelectorAll('.new-session button')].find((b) => b.textContent === 'Browse…');
      return button && !button.disabled;
    });
    await browse.click();
    const dialog = page.getByRole('dialog', { name: 'Choose a folder' });
    const at = async (path) => {
      await page.waitForFunction(
        (p) => {
          const d = document.querySelector('dialog.folder-browser');
          return d?.open && d.getAttribute('data-place') === p && !d.hasAttribute('data-loading');
        },
        path,
      );
      await rendered(page);
    };
    const shown = async () => ({
      folders: await dialog.locator('.folder-list button[data-folder]').evaluateAll((all) => all.map((b) => b.textContent)),
      up: await dialog.locator('.folder-list .up').evaluateAll((all) => all.map((b) => b.getAttribute('aria-label'))),
      crumbs: await dialog.locator('.crumbs button').evaluateAll((all) => all.map((b) => b.textContent)),
      summary: (await dialog.locator('.folder-summary').innerText()).trim(),
    });
    const refusal = async (name) => {
      await dialog.getByRole('button', { name, exact: true }).click();
      await page.waitForFunction(
        (n) => document.querySelector('dialog.folder-browser .notice.error')?.textContent?.startsWith(`Could not open ${n}:`),
        name,
      );
      await at(root);
      const text = (await dialog.locator('.notice.error').innerText()).trim();
      await dialog.getByRole('button', { name: 'Dismiss' }).click();
      await dialog.locator('.notice.error').waitFor({ state: 'detached' });
      return text;
    };

    // One root: the dialog opens in it.
    await at(root);
    const atRoot = await shown();
    // The host's data folder is listed as a folder, and refused when opened; the dialog stays.
    const denied = await refusal('data');
    // A folder removed since it was listed: the host's "not found", the dialog stays.
    await ask({ do: 'remove', name: 'c' });
    const gone = await refusal('c');
    assert.equal(await page.locator('.notices .notice').count(), 0, 'the refusals are no page notices');

    // The keyboard opens a; a click opens b.
    await dialog.getByRole('button', { name: 'a', exact: true }).focus();
    await page.keyboard.press('Enter');
    await at(`${root}/a`);
    const inA = await shown();
    const focused = await page.evaluate(() => document.activeElement?.getAttribute('aria-label') ?? document.activeElement?.textContent);
    await dialog.getByRole('button', { name: 'b', exact: true }).click();
    await at(`${root}/a/b`);
    const inB = await shown();
    await dialog.getByRole('button', { name: `Up to ${root}/a`, exact: true }).click();
    await at(`${root}/a`);
    await dialog.getByRole('button', { name: 'Choose this folder', exact: true }).click();
    await dialog.waitFor({ state: 'detached' });
    const folder = page.getByLabel('Folder', { exact: true });
    const chosen = await folder.inputValue();

    // Opened again, it starts in the folder typed; Escape closes it and changes nothing.
    await browse.click();
    await at(`${root}/a`);
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
    assert.equal(await folder.inputValue(), chosen);

    const session = await freshSession(page);
    const directory = await page.locator('.chat .directory').getAttribute('title');
    return { atRoot, denied, gone, inA, focused, inB, chosen, session, directory };
  },

  /** The host's store fails (a full disk): the banner names it; restarted with room, it goes. */
  async store_failure({ newPage, url, ask }) {
    const page = await openPage(newPage, url);
    await page.waitForFunction(() => document.querySelector('.top [data-protocol-version]'));
    assert.equal(await page.locator('.health').count(), 0, 'no banner while the host is well');
    await ask({ do: 'fill' });
    const banner = page.locator('.health[data-health]');
    await page.waitForFunction(() => document.querySelector('.health')?.textContent?.includes('the store failed'));
    const down = (await banner.innerText()).trim();
    await ask({ do: 'restart' });
    await connected(page);
    await page.locator('.health').waitFor({ state: 'detached', timeout: TIMEOUT });
    return { down };
  },

  /** The host stopped: a banner with its close reason; back: the banner goes. */
  async health({ newPage, url, ask }) {
    const page = await openPage(newPage, url);
    await page.waitForFunction(() => document.querySelector('.top [data-protocol-version]'));
    assert.equal(await page.locator('.health').count(), 0, 'no banner while the host is well');
    await ask({ do: 'stop' });
    const banner = page.locator('.health[data-health="unreachable"]');
    await banner.waitFor({ timeout: TIMEOUT });
    const down = (await banner.innerText()).trim();
    const role = await banner.getAttribute('role');
    await ask({ do: 'start' });
    await connected(page);
    await page.locator('.health').waitFor({ state: 'detached', timeout: TIMEOUT });
    return { down, role };
  },
};
