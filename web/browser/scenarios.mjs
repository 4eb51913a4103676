/**
 * The browser scenarios: what a person does with the page, and what must be
 * true after. Each takes `{context, url, ask, trouble, newPage, screenshot}`
 * (run.mjs) and returns data for the Python side to check against the host.
 *
 * Locators go by role and label, the way a person (or a screen reader) finds
 * things, with a few data attributes for state the eye reads from style.
 */
import assert from 'node:assert/strict';
import { createWriteStream } from 'node:fs';
import {
  TIMEOUT,
  answerText,
  chatOf,
  connected,
  lastTurn,
  newSession,
  openPage,
  rendered,
  send,
  sessionOf,
  turnEnded,
  turns,
  waitUntil,
} from './helpers.mjs';
import { sessionScenarios } from './sessions.mjs';

/** Record every connection status the page shows from now on (a short one too). */
async function recordStatuses(page) {
  await page.evaluate(() => {
    const badge = document.querySelector('[data-status]');
    window.__statuses = [badge.getAttribute('data-status')];
    new MutationObserver(() => window.__statuses.push(badge.getAttribute('data-status'))).observe(badge, {
      attributes: true,
      attributeFilter: ['data-status'],
    });
  });
}

async function statusesSeen(page) {
  return page.evaluate(() => window.__statuses);
}

export const scenarios = {
  ...sessionScenarios,
  /** Create a session, watch a reply stream in, keyboard use, usage, reasoning folded, screenshots. */
  async stream({ newPage, url, screenshot }) {
    const page = await openPage(newPage, url);
    // The page offers 1.0.0, 0.9.0 and 0.7.0; this host picks 1.0.0, and the header says so.
    const protocol = page.locator('.top [data-protocol-version]');
    const protocolVersion = await protocol.getAttribute('data-protocol-version');
    assert.equal(protocolVersion, '1.0.0');
    assert.equal((await protocol.innerText()).trim(), 'protocol 1.0.0');
    await newSession(page);
    // Shift+Enter makes a new line; Enter sends.
    const box = page.getByRole('textbox', { name: 'Message', exact: true });
    await box.click();
    await box.type('Hello **browser**');
    await box.press('Shift+Enter');
    await box.type('second line');
    assert.equal(await box.inputValue(), 'Hello **browser**\nsecond line');
    await box.press('Enter');
    await turnEnded(page, 'complete', 1);
    const first = turns(page).nth(0);
    assert.equal(await first.locator('.user-message .text').innerText(), 'Hello **browser**\nsecond line');
    assert.equal(await first.locator('.markdown.answer strong').innerText(), 'browser');
    const reasoning = first.locator('details.reasoning');
    assert.equal(await reasoning.getAttribute('open'), null, 'reasoning starts folded');
    assert.match(await first.locator('.usage').innerText(), /tokens/);

    // A slow stream: the answer grows while the turn runs.
    await send(page, '/slow 120 one two three four five six seven eight');
    const growing = turns(page).nth(1);
    await page.waitForFunction(() => document.querySelector('.transcript article.turn:last-child')?.getAttribute('data-state') === 'active');
    const seen = new Set();
    for (let i = 0; i < 60 && seen.size < 3; i++) {
      const text = await answerText(growing);
      if (text) seen.add(text);
      await page.waitForTimeout(50);
    }
    assert.ok(seen.size >= 3, `the answer grew in steps (saw ${[...seen].join(' | ')})`);
    await turnEnded(page, 'complete', 2);
    assert.equal((await answerText(growing)).trim(), 'one two three four five six seven eight');
    await reasoning.locator('summary').click();
    await screenshot(page, 'web-page.png');
    await page.setViewportSize({ width: 390, height: 800 });
    await page.getByRole('textbox', { name: 'Message', exact: true }).waitFor();
    await screenshot(page, 'web-narrow.png');
    // The narrow layout stacks the sessions above the chat.
    const nav = await page.getByRole('navigation', { name: 'Sessions' }).boundingBox();
    const main = await page.getByRole('main').boundingBox();
    assert.ok(nav && main && nav.y + nav.height <= main.y + 1, 'sessions above the chat');
    return { session: await sessionOf(page), chat: await chatOf(page), protocolVersion };
  },

  /** `/tool`: confirm the call; `/input`: answer the form. */
  async tool_and_input({ newPage, url }) {
    const page = await openPage(newPage, url);
    await newSession(page);
    await send(page, '/tool');
    const call = page.locator('.tool-call[data-status="pending-confirmation"]');
    await call.waitFor();
    assert.match(await call.innerText(), /Allow the echo agent to write/);
    await call.getByRole('button', { name: 'Allow' }).click();
    await page.locator('.tool-call[data-status="completed"]').waitFor();
    await turnEnded(page, 'complete', 1);
    assert.match(await answerText(lastTurn(page)), /the \(pretend\) file is written/);

    await send(page, '/input');
    const form = page.locator('form.input-request');
    await form.waitFor();
    await form.getByLabel('What is your name?').fill('Ada');
    await form.getByLabel('Red').check();
    await form.getByRole('button', { name: 'Submit' }).click();
    await turnEnded(page, 'complete', 2);
    const answer = await answerText(lastTurn(page));
    assert.match(answer, /name = Ada/);
    assert.match(answer, /color = red/);
    assert.match(await lastTurn(page).locator('.input-request.resolved').innerText(), /Answered: accept/);
    return { chat: await chatOf(page) };
  },

  /** Cancel a running turn; steer one; queue a message that runs after it. */
  async cancel_steer_queue({ newPage, url }) {
    const page = await openPage(newPage, url);
    await newSession(page);
    await send(page, '/slow 250 alpha beta gamma delta epsilon zeta eta theta iota kappa');
    await page.waitForFunction(() => document.querySelector('.transcript article.turn:last-child .markdown.answer')?.textContent?.includes('alpha'));
    await page.getByRole('button', { name: 'Cancel turn' }).click();
    await turnEnded(page, 'cancelled', 1);
    assert.match(await lastTurn(page).innerText(), /Cancelled/);
    assert.ok(!(await answerText(lastTurn(page))).includes('kappa'), 'the stream stopped');

    await send(page, '/slow 150 one two three four five six seven eight nine ten');
    await page.waitForFunction(() => document.querySelector('.transcript article.turn:last-child .markdown.answer')?.textContent?.includes('one'));
    await page.getByRole('textbox', { name: 'Message', exact: true }).fill('go left');
    await page.getByRole('button', { name: 'Steer' }).click();
    await send(page, 'queued after'); // Enter while a turn runs queues
    await page.locator('[data-pending="queued"]').waitFor();
    await turnEnded(page, 'complete', 3); // the queued message became the third turn
    await page.waitForFunction(() => document.querySelector('.transcript article.turn:nth-of-type(2) .markdown.answer')?.textContent?.includes('steered: go left'));
    assert.equal(await lastTurn(page).locator('.user-message .text').innerText(), 'queued after');
    assert.equal(await page.locator('[data-pending]').count(), 0);
    return { chat: await chatOf(page) };
  },

  /** Agent output that tries to run script is shown inert. */
  async hostile({ newPage, url, trouble }) {
    const page = await openPage(newPage, url);
    await newSession(page);
    const payload = [
      '<img src=x onerror="window.__pwned=1;alert(1)">',
      '<script>window.__pwned=2;alert(2)</script>',
      '[click me](javascript:window.__pwned=3;alert(3))',
      '<a href="javascript:alert(4)" onclick="alert(5)">link</a>',
      '<svg onload="alert(6)"><circle r=1 /></svg>',
      '<iframe src="javascript:alert(7)"></iframe>',
      '<div style="position:fixed;inset:0" onmouseover="alert(8)">cover</div>',
      '<form action="javascript:alert(9)"><button>go</button></form>',
      '**bold survives**',
    ].join('\n\n');
    await send(page, payload);
    await turnEnded(page, 'complete', 1);
    const answer = lastTurn(page).locator('.response');
    assert.match(await answer.innerText(), /bold survives/);
    await answer.locator('.markdown').getByText('click me', { exact: true }).click();
    await answer.locator('.markdown').getByText('cover', { exact: true }).hover();
    await page.waitForTimeout(300);
    const found = await page.evaluate(() => {
      const root = document.querySelector('.transcript');
      const all = [...root.querySelectorAll('*')];
      return {
        pwned: window.__pwned ?? null,
        scripts: root.querySelectorAll('script, iframe, svg, form, object, embed').length,
        handlers: all.flatMap((el) => [...el.attributes].filter((a) => a.name.toLowerCase().startsWith('on')).map((a) => `${el.tagName}.${a.name}`)),
        jsLinks: all.filter((el) => /^\s*javascript:/i.test(el.getAttribute('href') ?? el.getAttribute('src') ?? '')).length,
        styled: root.querySelectorAll('.response [style]').length,
      };
    });
    assert.deepEqual(found, { pwned: null, scripts: 0, handlers: [], jsLinks: 0, styled: 0 });
    assert.deepEqual(trouble.dialogs, [], 'no dialog opened');
    return { csp: trouble.csp };
  },

  /** Two tabs on one chat stay in sync, each acting on the other's turn. */
  async two_tabs({ newPage, url }) {
    const a = await openPage(newPage, url);
    await newSession(a);
    await a.waitForFunction(() => window.location.hash.includes('chat='));
    const b = await openPage(newPage, a.url());
    await b.getByRole('textbox', { name: 'Message', exact: true }).waitFor();
    await send(a, '/tool');
    const onB = b.locator('.tool-call[data-status="pending-confirmation"]');
    await onB.waitFor();
    await onB.getByRole('button', { name: 'Allow' }).click();
    await a.locator('.tool-call[data-status="completed"]').waitFor();
    await turnEnded(a, 'complete', 1);
    await turnEnded(b, 'complete', 1);
    await send(b, 'from tab b');
    await turnEnded(a, 'complete', 2);
    assert.equal((await answerText(lastTurn(a))).trim(), 'from tab b');
    // The session list of both shows the same session.
    const session = await sessionOf(a);
    await b.locator(`[data-session="${session}"]`).waitFor();
    const texts = async (p) => (await rendered(p), await p.locator('.transcript').innerText()).replace(/\s+/g, ' ');
    assert.equal(await texts(a), await texts(b));
    return { chat: await chatOf(a) };
  },

  /**
   * One chat seen by a 1.0 tab and a 0.7 tab (its `initialize` offer rewritten
   * in flight to 0.7.0 only, so the host serves it the 0.7 shapes): a failed
   * turn (1.0: a trailing error part; 0.7: `turn.error`), a confirmed tool call
   * and a plain reply read the same in both.
   */
  async protocol_versions({ newPage, url }) {
    const modern = await openPage(newPage, url);
    assert.equal(await protocolOf(modern), '1.0.0');
    await newSession(modern);
    await modern.waitForFunction(() => window.location.hash.includes('chat='));
    await send(modern, '/error');
    await turnEnded(modern, 'error', 1);

    const legacy = await newPage();
    legacy.setDefaultTimeout(TIMEOUT);
    await offerOnly(legacy, ['0.7.0']);
    await legacy.goto(modern.url());
    await connected(legacy);
    assert.equal(await protocolOf(legacy), '0.7.0');
    await turnEnded(legacy, 'error', 1);
    await send(legacy, '/tool');
    const onModern = modern.locator('.tool-call[data-status="pending-confirmation"]');
    await onModern.waitFor();
    await onModern.getByRole('button', { name: 'Allow' }).click();
    await legacy.locator('.tool-call[data-status="completed"]').waitFor();
    await turnEnded(legacy, 'complete', 2);
    await send(modern, 'plain words');
    await turnEnded(legacy, 'complete', 3);
    await turnEnded(modern, 'complete', 3);

    const failure = async (p) => (await turns(p).nth(0).locator('.turn-state.error').innerText()).trim();
    const shown = await failure(modern);
    assert.match(shown, /^Error: The echo agent was asked to fail/);
    assert.equal(await failure(legacy), shown);
    // A finished turn's error shows once, in its footer (not also as a part).
    assert.equal(await modern.locator('.part-error').count(), 0);
    const texts = async (p) => (await rendered(p), await p.locator('.transcript').innerText()).replace(/\s+/g, ' ');
    assert.equal(await texts(legacy), await texts(modern));
    const directory = async (p) => p.locator('.chat .directory').allInnerTexts();
    assert.deepEqual(await directory(legacy), await directory(modern));
    return {
      chat: await chatOf(modern),
      protocols: [await protocolOf(modern), await protocolOf(legacy)],
      error: shown,
      directory: await directory(modern),
      answers: await Promise.all((await turns(modern).all()).map(answerText)),
    };
  },

  /** Older turns page in; fork and side chat open new chats. */
  async paging_and_chats({ newPage, url }) {
    const page = await openPage(newPage, url);
    await newSession(page);
    for (let i = 1; i <= 4; i++) {
      await send(page, `message ${i}`);
      await turnEnded(page, 'complete', i);
    }
    const chatUrl = page.url().replace(/#/, '#turns=2&');
    await page.goto('about:blank');
    await page.goto(chatUrl);
    await connected(page);
    await page.getByRole('button', { name: 'Load older turns' }).waitFor();
    assert.equal(await turns(page).count(), 2);
    await page.getByRole('button', { name: 'Load older turns' }).click();
    await page.waitForFunction(() => document.querySelectorAll('.transcript article.turn').length === 4);
    const order = await page.locator('.transcript .user-message .text').allInnerTexts();
    assert.deepEqual(order, ['message 1', 'message 2', 'message 3', 'message 4']);

    await turns(page).nth(1).getByRole('button', { name: 'Fork from here' }).click();
    await page.getByRole('tab', { name: /Fork/, selected: true }).waitFor();
    await page.waitForFunction(() => document.querySelectorAll('.transcript article.turn').length === 2);
    await send(page, 'in the fork');
    await turnEnded(page, 'complete', 3);

    // Back on the main chat: subscribed afresh, with the same window of 2 turns.
    await page.getByRole('tab', { name: 'Main' }).click();
    await page.getByRole('button', { name: 'Load older turns' }).waitFor();
    assert.equal(await lastTurn(page).locator('.user-message .text').innerText(), 'message 4');
    await lastTurn(page).getByRole('button', { name: 'Side chat' }).click();
    await page.getByRole('tab', { name: /Side/, selected: true }).waitFor();
    assert.equal(await turns(page).count(), 0);
    await page.getByRole('button', { name: 'New chat' }).click();
    await page.waitForFunction(() => document.querySelectorAll('[role="tab"]').length === 4);
    return {};
  },

  /** The host dies mid-stream and comes back on the same port: the page recovers. */
  async restart({ newPage, url, ask }) {
    const page = await openPage(newPage, url);
    await newSession(page);
    await send(page, 'before the restart');
    await turnEnded(page, 'complete', 1);
    const words = Array.from({ length: 40 }, (_, i) => `w${i + 1}`).join(' ');
    await send(page, `/slow 150 ${words}`);
    await page.waitForFunction(() => document.querySelector('.transcript article.turn:last-child .markdown.answer')?.textContent?.includes('w3'));
    await recordStatuses(page);
    await ask({ do: 'restart' });
    await connected(page);
    await turnEnded(page, 'error', 2);
    assert.ok((await statusesSeen(page)).includes('reconnecting'), 'the page saw the host go');
    const interrupted = await answerText(lastTurn(page));
    await send(page, 'after the restart');
    await turnEnded(page, 'complete', 3);
    assert.equal((await answerText(lastTurn(page))).trim(), 'after the restart');
    return {
      chat: await chatOf(page),
      answers: await Promise.all((await turns(page).all()).map(answerText)),
      interrupted,
    };
  },

  /** The network drops while a turn streams: reconnect replays what was missed. */
  async network_drop({ newPage, url, ask }) {
    const page = await openPage(newPage, url);
    await newSession(page);
    const words = Array.from({ length: 30 }, (_, i) => `n${i + 1}`).join(' ');
    await send(page, `/slow 100 ${words}`);
    await page.waitForFunction(() => document.querySelector('.transcript article.turn:last-child .markdown.answer')?.textContent?.includes('n2'));
    await recordStatuses(page);
    await ask({ do: 'cut', ms: 1200 });
    await connected(page);
    await turnEnded(page, 'complete', 1);
    assert.ok((await statusesSeen(page)).includes('reconnecting'), 'the page saw the network go');
    return { chat: await chatOf(page), answer: await answerText(lastTurn(page)), words };
  },

  /**
   * 1.0: unread markers and archiving. A turn that ends in a chat nobody
   * looks at leaves it unread (a dot on its tab and on its session); viewing
   * it marks it read. A chat and a session are archived (shown apart) and
   * restored; a default chat archived by another client archives its session.
   * The test reads the flags the host holds at each step (`ask`).
   */
  async archive_and_unread({ newPage, url, ask }) {
    const page = await openPage(newPage, url);
    await newSession(page);
    const session = await sessionOf(page);
    await send(page, 'hello');
    await turnEnded(page, 'complete', 1);
    const main = await chatOf(page);
    await page.getByRole('button', { name: 'New chat' }).click();
    await page.waitForFunction((m) => {
      const chat = new URLSearchParams(window.location.hash.slice(1)).get('chat');
      return chat && chat !== m;
    }, main);
    const side = await chatOf(page);
    const sideTab = page.locator(`[role="tab"][data-chat="${side}"]`);
    const sessionItem = page.locator(`.session-item[data-session="${session}"]`);
    // The main chat was seen to its end: read, on the host too.
    await waitForHost(ask, session, (flags) => flags[main]?.read === true);

    // A turn in the side chat ends while the user looks at the main chat: unread.
    // (It waits on a tool confirmation, which another client gives once the user has left.)
    await send(page, '/tool');
    await page.locator('.tool-call[data-status="pending-confirmation"]').waitFor();
    await page.getByRole('tab', { name: 'Main' }).click();
    await page.locator(`[role="tab"][data-chat="${main}"][aria-selected="true"]`).waitFor();
    await ask({ do: 'confirm', chat: side });
    await page.locator(`[role="tab"][data-chat="${side}"][data-unread="true"]`).waitFor();
    await sideTab.getByRole('img', { name: 'unread' }).waitFor();
    await page.locator(`.session-item[data-session="${session}"][data-unread="true"]`).waitFor();
    const unread = await waitForHost(ask, session, (flags) => flags[side]?.activity === 'idle');
    assert.equal(unread[side].read, false, 'the host holds the side chat unread');
    assert.equal(unread[main].read, true);
    // Looking at it marks it read: the dots go, the host has it read.
    await sideTab.click();
    await turnEnded(page, 'complete', 1);
    await page.waitForFunction((s) => !document.querySelector(`.session-item[data-session="${s}"]`)?.hasAttribute('data-unread'), session);
    assert.equal(await sideTab.getAttribute('data-unread'), null);
    await waitForHost(ask, session, (flags) => flags[side]?.read === true);

    // Archive the side chat: it leaves the tabs for the archived list; restore it.
    await page.getByRole('button', { name: 'Archive chat' }).click();
    await sideTab.waitFor({ state: 'detached' });
    const archivedChats = page.locator('details.archived-chats');
    await archivedChats.locator('summary').click();
    await archivedChats.locator(`[data-chat="${side}"]`).waitFor();
    await page.locator('[data-archived="chat"]').waitFor();
    await waitForHost(ask, session, (flags) => flags[side]?.archived === true);
    await page.getByRole('button', { name: 'Restore chat' }).click();
    await sideTab.waitFor();
    await archivedChats.waitFor({ state: 'detached' });
    await waitForHost(ask, session, (flags) => flags[side]?.archived === false);

    // Archive the session: it leaves the session list for the archived group; restore it.
    await page.getByRole('button', { name: 'Archive session' }).click();
    const archivedSessions = page.locator('details.archived-sessions');
    await archivedSessions.locator(`[data-session="${session}"]`).waitFor({ state: 'attached' });
    assert.equal(await page.locator(`.sidebar > .sessions [data-session="${session}"]`).count(), 0);
    await page.locator('[data-archived="session"]').waitFor();
    await waitForHost(ask, session, (flags) => flags.session.archived === true);
    await page.getByRole('button', { name: 'Restore session' }).click();
    await page.locator(`.sidebar > .sessions [data-session="${session}"]`).waitFor();
    await archivedSessions.waitFor({ state: 'detached' });
    await waitForHost(ask, session, (flags) => flags.session.archived === false);

    // Another client archives the default chat: the host archives the session with it.
    await ask({ do: 'archive', chat: main });
    await archivedSessions.locator(`[data-session="${session}"]`).waitFor({ state: 'attached' });
    await page.locator('[data-archived="session"]').waitFor();
    await archivedChats.locator(`[data-chat="${main}"]`).waitFor({ state: 'attached' });
    await page.getByRole('button', { name: 'Restore session' }).click();
    await page.locator(`.sidebar > .sessions [data-session="${session}"]`).waitFor();
    await archivedChats.locator('summary').click();
    await archivedChats.locator(`[data-chat="${main}"]`).click();
    await page.getByRole('button', { name: 'Restore chat' }).click();
    await page.getByRole('tab', { name: 'Main' }).waitFor();
    const final = await waitForHost(ask, session, (flags) => !flags.session.archived && !flags[main].archived);
    return { session, main, side, final };
  },

  /**
   * 1.0: chats reordered by dragging a tab and with Move left / right, one
   * moved to another session (the page follows it), a move the host refuses
   * (a turn running) shown as a notice, and a 0.7 tab that shows none of it.
   */
  async move_and_reorder({ newPage, url, ask }) {
    const page = await openPage(newPage, url);
    await newSession(page);
    const target = await sessionOf(page);
    await page.getByRole('button', { name: 'New session', exact: true }).click();
    await page.waitForFunction((t) => {
      const hash = new URLSearchParams(window.location.hash.slice(1));
      const chat = hash.get('chat');
      return hash.get('session') !== t && chat && document.querySelector(`[role="tab"][aria-selected="true"][data-chat="${chat}"]`);
    }, target);
    await page.getByRole('textbox', { name: 'Message', exact: true }).waitFor();
    const source = await sessionOf(page);
    const main = await chatOf(page);
    const added = [];
    for (let i = 0; i < 3; i++) {
      const before = await page.locator('[role="tab"]').count();
      await page.getByRole('button', { name: 'New chat' }).click();
      await page.waitForFunction((n) => document.querySelectorAll('[role="tab"]').length === n + 1, before);
      await page.waitForFunction((known) => {
        const chat = new URLSearchParams(window.location.hash.slice(1)).get('chat');
        return chat && !known.includes(chat);
      }, [main, ...added]);
      added.push(await chatOf(page));
    }
    const [c1, c2, c3] = added;
    const tabOrder = () => page.locator('[role="tab"]').evaluateAll((tabs) => tabs.map((t) => t.getAttribute('data-chat')));
    const orderIs = (expected) =>
      page.waitForFunction((want) => JSON.stringify([...document.querySelectorAll('[role="tab"]')].map((t) => t.getAttribute('data-chat'))) === JSON.stringify(want), expected);
    assert.deepEqual(await tabOrder(), [main, c1, c2, c3]);
    // The default chat is not movable; the others are (dragged by their tabs).
    assert.equal(await page.locator(`[role="tab"][data-chat="${main}"]`).getAttribute('draggable'), 'false');
    assert.equal(await page.locator(`[role="tab"][data-chat="${c3}"]`).getAttribute('draggable'), 'true');

    // Drag c3 onto the right half of Main: it lands after Main.
    const mainTab = page.locator(`[role="tab"][data-chat="${main}"]`);
    const box = await mainTab.boundingBox();
    await page.locator(`[role="tab"][data-chat="${c3}"]`).dragTo(mainTab, {
      targetPosition: { x: box.width - 4, y: box.height / 2 },
    });
    await orderIs([main, c3, c1, c2]);
    assert.deepEqual(await hostOrder(ask, source), [main, c3, c1, c2]);

    // The keyboard way: c2 one place left.
    await page.locator(`[role="tab"][data-chat="${c2}"]`).click();
    const left = page.getByRole('button', { name: 'Move left' });
    await left.click();
    await orderIs([main, c3, c2, c1]);
    await left.click();
    await orderIs([main, c2, c3, c1]);
    await left.click();
    await orderIs([c2, main, c3, c1]); // first: moveChat without an anchor
    assert.ok(await left.isDisabled(), 'nothing left of the first chat');
    await page.getByRole('button', { name: 'Move right' }).click();
    await orderIs([main, c2, c3, c1]);
    assert.deepEqual(await hostOrder(ask, source), [main, c2, c3, c1]);

    // Move c1 to the other session: the page follows it there.
    await page.locator(`[role="tab"][data-chat="${c1}"]`).click();
    await page.getByLabel('Move to session').selectOption(target);
    await page.getByRole('button', { name: 'Move', exact: true }).click();
    await page.locator(`.session-item[data-session="${target}"][aria-current="page"]`).waitFor();
    await page.locator(`[role="tab"][data-chat="${c1}"][aria-selected="true"]`).waitFor();
    assert.equal(await chatOf(page), c1);
    const targetOrder = await hostOrder(ask, target);
    assert.deepEqual(targetOrder.slice(0, 1), [c1], 'placed first in its new session');
    assert.deepEqual(await hostOrder(ask, source), [main, c2, c3]);
    await send(page, 'in its new home');
    await turnEnded(page, 'complete', 1);

    // A chat with a turn running cannot move: the host says why, in a notice.
    await page.locator(`.session-item[data-session="${source}"]`).click();
    await page.getByRole('tab', { name: 'Main' }).waitFor();
    await page.locator(`[role="tab"][data-chat="${c3}"]`).click();
    // The tab is on screen before the message goes: else it may go to the chat before.
    await page.locator(`[role="tab"][data-chat="${c3}"][aria-selected="true"]`).waitFor();
    await send(page, '/tool'); // runs until the tool is confirmed: it never is
    await page.locator('.tool-call[data-status="pending-confirmation"]').waitFor();
    await page.getByLabel('Move to session').selectOption(target);
    await page.getByRole('button', { name: 'Move', exact: true }).click();
    const notice = page.locator('.notice.error', { hasText: 'Could not move the chat' });
    await notice.waitFor();
    const refusal = (await notice.innerText()).trim();
    await page.getByRole('button', { name: 'Cancel turn' }).click();
    await turnEnded(page, 'cancelled', 1);
    assert.deepEqual(await hostOrder(ask, source), [main, c2, c3]);

    // A 0.7 tab on the same session: none of the 1.0 controls.
    const legacy = await newPage();
    legacy.setDefaultTimeout(TIMEOUT);
    await offerOnly(legacy, ['0.7.0']);
    await legacy.goto(page.url());
    await connected(legacy);
    assert.equal(await protocolOf(legacy), '0.7.0');
    await turnEnded(legacy, 'cancelled', 1);
    const controls = async (p) =>
      p.evaluate(() => ({
        toolbar: document.querySelectorAll('.chat-actions').length,
        archive: document.querySelectorAll('.session-archive').length,
        draggable: document.querySelectorAll('[role="tab"][draggable="true"]').length,
        unread: document.querySelectorAll('.unread, [data-unread]').length,
        archived: document.querySelectorAll('.archived-chats, .archived-sessions').length,
      }));
    const modernControls = await controls(page);
    assert.ok(modernControls.toolbar === 1 && modernControls.archive === 1 && modernControls.draggable === 2, JSON.stringify(modernControls));
    assert.deepEqual(await controls(legacy), { toolbar: 0, archive: 0, draggable: 0, unread: 0, archived: 0 });
    return { source, target, main, moved: c1, order: [main, c2, c3], refusal };
  },

  /**
   * 1.0: Continue on a failed answer. `/flaky` fails half-way with a
   * resumable error: Continue on it dispatches `chat/turnResume`, the same
   * turn goes on and completes, its first half and the error kept. A later
   * failed turn that is not resumable (`/error`) offers nothing.
   */
  async resume({ newPage, url }) {
    const page = await openPage(newPage, url);
    await newSession(page);
    await send(page, '/flaky 20 and the rest');
    await turnEnded(page, 'error', 1);
    const cont = page.getByRole('button', { name: 'Continue' });
    await cont.waitFor();
    const first = turns(page).nth(0);
    const turnId = await first.getAttribute('data-turn');
    await cont.click();
    await turnEnded(page, 'complete', 1);
    assert.equal(await turns(page).count(), 1, 'the same turn went on');
    assert.equal(await first.getAttribute('data-turn'), turnId);
    assert.equal(await cont.count(), 0, 'nothing to continue once it completed');
    const answer = await answerText(first);
    assert.match(answer, /^The first half,\s*resumed after .*: the second half\.\s*and the rest\s*$/);
    assert.match(await first.locator('.part-error').innerText(), /stumbled on purpose/);
    await send(page, '/error');
    await turnEnded(page, 'error', 2);
    assert.equal(await cont.count(), 0, 'no Continue for an error that is not resumable');
    return { chat: await chatOf(page), turnId, answer };
  },

  /**
   * 1.0: a Continue the host refuses. Two failed `/error` turns (not
   * resumable: no Continue). A tab whose host messages are rewritten in
   * flight to call those errors resumable shows Continue on the latest turn
   * only; the host, which holds them not resumable, refuses the
   * `chat/turnResume`: the refusal is a notice and the turn is back as it
   * was, Continue with it.
   */
  async resume_refused({ newPage, url }) {
    const page = await openPage(newPage, url);
    await newSession(page);
    await send(page, '/error');
    await turnEnded(page, 'error', 1);
    await send(page, '/error');
    await turnEnded(page, 'error', 2);
    assert.equal(await page.getByRole('button', { name: 'Continue' }).count(), 0, 'no Continue for an error that is not resumable');

    const resumable = await newPage();
    resumable.setDefaultTimeout(TIMEOUT);
    await markErrorsResumable(resumable);
    await resumable.goto(page.url());
    await connected(resumable);
    await turnEnded(resumable, 'error', 2);
    const cont = resumable.getByRole('button', { name: 'Continue' });
    await cont.waitFor();
    assert.equal(await cont.count(), 1, 'Continue on the latest turn only');
    assert.equal(await turns(resumable).nth(1).getByRole('button', { name: 'Continue' }).count(), 1);
    await rendered(resumable);
    const before = (await resumable.locator('.transcript').innerText()).replace(/\s+/g, ' ');
    await cont.click();
    const notice = resumable.locator('.notice.error', { hasText: 'refused continuing the answer' });
    await notice.waitFor();
    await turnEnded(resumable, 'error', 2);
    await cont.waitFor();
    await rendered(resumable);
    assert.equal((await resumable.locator('.transcript').innerText()).replace(/\s+/g, ' '), before, 'the turn is as it was');
    return { chat: await chatOf(page), notice: (await notice.innerText()).trim() };
  },

  /**
   * 1.0, the scripted ACP agent: the agent changes a file that was there and
   * creates another (`/write`); the chat's tab shows the counts of its
   * catalogue entry, the Changes view lists both files of the chat's own
   * changeset with the diff of the changed one, and closing the view
   * unsubscribes from the changeset. A 0.7 tab shows none of it.
   */
  async changes({ newPage, url, ask }) {
    const { page, sent } = await openRecorded(newPage, url);
    await page.getByLabel('Agent').selectOption('scripted');
    await newSession(page);
    const dir = await workingDirectory(page);
    const notes = `${dir}/notes.txt`;
    const fresh = `${dir}/fresh.txt`;
    await ask({ do: 'file', path: notes, text: 'alpha\nbeta\n' });
    await send(page, `/write ${notes} alpha\nBETA\ngamma\n`);
    await turnEnded(page, 'complete', 1);
    assert.equal((await answerText(lastTurn(page))).trim(), 'written');
    await send(page, `/write ${fresh} hello`);
    await turnEnded(page, 'complete', 2);
    const chat = await chatOf(page);
    const counts = page.locator(`[role="tab"][data-chat="${chat}"] .tab-changes`);
    await page.waitForFunction((c) => document.querySelector(`[role="tab"][data-chat="${c}"] .tab-changes`)?.textContent?.startsWith('2 files'), chat);
    const label = (await counts.innerText()).trim();

    const toggle = page.getByRole('button', { name: /^Changes/ });
    assert.equal(await toggle.getAttribute('aria-expanded'), 'false');
    await toggle.click();
    const view = page.getByRole('region', { name: 'Changes' });
    await view.waitFor();
    await page.waitForFunction(() => document.querySelectorAll('.change-file').length === 2);
    const changeset = await view.getAttribute('data-changeset');
    const rows = await view.locator('.change-file').evaluateAll((items) =>
      items.map((item) => ({
        id: item.getAttribute('data-file'),
        path: item.querySelector('.path').textContent,
        kind: item.getAttribute('data-kind'),
        added: Number(item.querySelector('.added').textContent.slice(1)),
        removed: Number(item.querySelector('.removed').textContent.slice(1)),
      })),
    );
    const notesRow = view.locator('.change-file', { hasText: 'notes.txt' });
    await notesRow.locator('summary').click();
    const diff = await notesRow.locator('.diff-line').evaluateAll((lines) =>
      lines.map((line) => `${line.getAttribute('data-line')} ${line.textContent.slice(2).replace(/\n$/, '')}`),
    );
    assert.deepEqual(diff, ['same alpha', 'removed beta', 'added BETA', 'added gamma']);
    const freshRow = view.locator('.change-file', { hasText: 'fresh.txt' });
    assert.equal(await freshRow.getAttribute('data-kind'), 'created');
    assert.match(await freshRow.locator('summary').innerText(), /created/i);

    // Closed: the page unsubscribes from the changeset.
    await toggle.click();
    await view.waitFor({ state: 'detached' });
    await waitUntil(() => sent.some((m) => m.method === 'unsubscribe' && m.params?.channel === changeset), 'the unsubscribe');
    assert.ok(sent.some((m) => m.method === 'subscribe' && m.params?.channel === changeset), 'it had subscribed');

    // A 0.7 tab on the same chat: no counts, no Changes view.
    const legacy = await newPage();
    legacy.setDefaultTimeout(TIMEOUT);
    await offerOnly(legacy, ['0.7.0']);
    await legacy.goto(page.url());
    await connected(legacy);
    await turnEnded(legacy, 'complete', 2);
    assert.equal(await legacy.locator('.tab-changes, .chat-changes, .changes').count(), 0);
    return { chat, session: await sessionOf(page), label, rows, changeset, notes, fresh };
  },

  /**
   * 1.0, the scripted ACP agent asking permission as fast-agent does: the
   * card waiting for the user shows the command as a code block, then the
   * file and its diff as a line diff; once allowed, each turn holds one tool
   * call, completed (no second, "cancelled" card).
   */
  async approvals({ newPage, url, ask }) {
    const page = await openPage(newPage, url);
    await page.getByLabel('Agent').selectOption('scripted');
    await newSession(page);
    const dir = await workingDirectory(page);
    const notes = `${dir}/notes.txt`;
    await ask({ do: 'file', path: notes, text: 'alpha\nbeta\n' });

    await send(page, '/ask-run ls -la build');
    const pending = lastTurn(page).locator('.tool-call[data-status="pending-confirmation"]');
    await pending.waitFor();
    const command = (await pending.locator('.tool-message pre').innerText()).trim();
    const input = await pending.locator('.tool-input pre').innerText();
    await pending.getByRole('button', { name: 'Allow Once' }).click();
    await turnEnded(page, 'complete', 1);
    const afterRun = await lastTurn(page).locator('.tool-call').evaluateAll((calls) => calls.map((c) => c.getAttribute('data-status')));

    await send(page, `/ask-write ${notes} alpha\nBETA\n`);
    const write = lastTurn(page).locator('.tool-call[data-status="pending-confirmation"]');
    await write.waitFor();
    const edit = write.locator('.tool-edits .change-file');
    const path = await edit.locator('.path').innerText();
    const diff = await edit.locator('.diff-line').evaluateAll((lines) =>
      lines.map((line) => `${line.getAttribute('data-line')} ${line.textContent.slice(2).replace(/\n$/, '')}`),
    );
    await write.getByRole('button', { name: 'Allow Once' }).click();
    await turnEnded(page, 'complete', 2);
    const afterWrite = await lastTurn(page).locator('.tool-call').evaluateAll((calls) => calls.map((c) => c.getAttribute('data-status')));
    return { chat: await chatOf(page), notes, command, input, afterRun, path, diff, afterWrite };
  },

  /**
   * 1.0, the scripted ACP agent: `/background` leaves a command running (it
   * waits for a file the test writes). The chat lists it with its command and
   * start; its output opens (the terminal, read-only); when the command
   * exits the entry goes and its terminal is unsubscribed. A 0.7 tab shows
   * none of it.
   */
  async background({ newPage, url, ask }) {
    const { page, sent } = await openRecorded(newPage, url);
    await page.getByLabel('Agent').selectOption('scripted');
    await newSession(page);
    const { script } = await ask({ do: 'script' });
    await send(page, `/background sh ${script}`);
    await turnEnded(page, 'complete', 1);
    const item = page.locator('.background-item');
    await item.waitFor();
    const listed = await item.evaluateAll((items) =>
      items.map((el) => ({
        id: el.getAttribute('data-background'),
        kind: el.getAttribute('data-kind'),
        label: el.querySelector('.label').textContent,
        startedAt: el.querySelector('time').getAttribute('datetime'),
      })),
    );
    assert.equal(listed.length, 1);
    assert.match(await item.innerText(), /started /);
    const output = item.getByRole('button', { name: 'Show output' });
    await output.click();
    const tail = item.locator('.terminal-tail');
    await page.waitForFunction(() => document.querySelector('.terminal-tail pre')?.textContent?.includes('waiting for the flag'));
    const terminal = await tail.getAttribute('data-terminal');
    const host = await ask({ do: 'background', chat: await chatOf(page) });

    // A 0.7 tab on the same chat: no background work shown.
    const legacy = await newPage();
    legacy.setDefaultTimeout(TIMEOUT);
    await offerOnly(legacy, ['0.7.0']);
    await legacy.goto(page.url());
    await connected(legacy);
    await turnEnded(legacy, 'complete', 1);
    assert.equal(await legacy.locator('.background-work').count(), 0);
    await legacy.close();

    await ask({ do: 'stop' });
    await item.waitFor({ state: 'detached' });
    assert.equal(await page.locator('.background-work').count(), 0);
    await waitUntil(() => sent.some((m) => m.method === 'unsubscribe' && m.params?.channel === terminal), 'the terminal unsubscribed');
    return { chat: await chatOf(page), listed, terminal, host: host.work };
  },

  /**
   * 1.0: a chat moved to a new session (`moveChat` with `destination: {kind:
   * "newSession"}`) from the move menu: the page follows it into the session
   * the host made, where it is the default chat, and it answers there.
   */
  async move_new_session({ newPage, url }) {
    const page = await openPage(newPage, url);
    await newSession(page);
    const source = await sessionOf(page);
    const main = await chatOf(page);
    await page.getByRole('button', { name: 'New chat' }).click();
    await page.waitForFunction((m) => {
      const chat = new URLSearchParams(window.location.hash.slice(1)).get('chat');
      return chat && chat !== m && document.querySelector(`[role="tab"][aria-selected="true"][data-chat="${chat}"]`);
    }, main);
    const moved = await chatOf(page);
    await send(page, 'before the move');
    await turnEnded(page, 'complete', 1);
    await page.getByLabel('Move to session').selectOption({ label: 'New session' });
    await page.getByRole('button', { name: 'Move', exact: true }).click();
    await page.waitForFunction(
      ({ source, moved }) => {
        const hash = new URLSearchParams(window.location.hash.slice(1));
        const session = hash.get('session');
        return (
          session &&
          session !== source &&
          hash.get('chat') === moved &&
          document.querySelector(`.session-item[data-session="${session}"][aria-current="page"]`) &&
          document.querySelector(`[role="tab"][aria-selected="true"][data-chat="${moved}"]`)
        );
      },
      { source, moved },
    );
    const session = await sessionOf(page);
    // There it is the default chat: "Main", and not movable.
    await page.getByRole('tab', { name: /Main/, selected: true }).waitFor();
    assert.equal(await page.locator(`[role="tab"][data-chat="${moved}"]`).getAttribute('draggable'), 'false');
    assert.equal(await turns(page).count(), 1, 'its turns came with it');
    await send(page, 'in a new session');
    await turnEnded(page, 'complete', 2);
    return { source, main, moved, session };
  },

  /**
   * Answer rendering: a GFM table is a table (header, cells, alignment, styled
   * borders); a fenced code block with a known language is highlighted, one
   * without is plain; Copy puts the raw code on the clipboard, and its label
   * is not part of the transcript's text.
   */
  async markdown_render({ context, newPage, url }) {
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: new URL(url).origin });
    const page = await openPage(newPage, url);
    await newSession(page);
    const code = 'def greet(name):\n    return f"hello {name}"  # say it';
    const message = [
      '| tool | runs | note |',
      '|---|--:|:-:|',
      '| ruff | 12 | fast |',
      '| mypy | 3 | strict |',
      '',
      '```python',
      code,
      '```',
      '',
      '```',
      'plain <b>text</b>',
      '```',
    ].join('\n');
    await send(page, message);
    await turnEnded(page, 'complete', 1);
    const answer = lastTurn(page).locator('.markdown.answer');
    const table = answer.locator('table');
    const headers = await table.locator('thead th').allInnerTexts();
    const rows = await table.locator('tbody tr').evaluateAll((trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
    const align = await table.locator('tbody td').evaluateAll((tds) => tds.map((td) => td.getAttribute('align')));
    assert.deepEqual(align, [null, 'right', 'center', null, 'right', 'center']);
    const border = await table.locator('td').first().evaluate((td) => getComputedStyle(td).borderTopStyle);
    assert.equal(border, 'solid', 'table cells are drawn with borders');

    const python = answer.locator('pre code.language-python');
    assert.equal(await python.textContent(), code);
    assert.match((await python.getAttribute('class')) ?? '', /\bhljs\b/);
    const keywords = await python.locator('.hljs-keyword').allInnerTexts();
    assert.ok(keywords.includes('def') && keywords.includes('return'), `keywords highlighted: ${keywords}`);
    assert.match((await python.locator('.hljs-comment').allInnerTexts()).join(), /# say it/);
    const keywordColour = await python.locator('.hljs-keyword').first().evaluate((el) => getComputedStyle(el).color);
    const plainColour = await python.evaluate((el) => getComputedStyle(el).color);
    assert.notEqual(keywordColour, plainColour, 'a keyword is coloured');
    const plain = answer.locator('pre code').nth(1);
    assert.equal(await plain.textContent(), 'plain <b>text</b>');
    assert.equal(await plain.locator('span, b').count(), 0, 'a block without a language is plain text');

    const buttons = answer.getByRole('button', { name: 'Copy code' });
    assert.equal(await buttons.count(), 2);
    await buttons.first().click();
    await answer.locator('.copy-code[data-copied="yes"]').waitFor();
    const copied = await page.evaluate(() => navigator.clipboard.readText());
    assert.equal(copied, code);
    await buttons.nth(1).click();
    await page.waitForFunction(async () => (await navigator.clipboard.readText()) === 'plain <b>text</b>');
    assert.ok(!(await answer.innerText()).includes('Copy'), 'the button label is not in the answer text');
    return { chat: await chatOf(page), message, headers, rows, copied };
  },

  /**
   * A big answer streamed (`/markdown KB` of the echo agent, in ~1 KB deltas):
   * how long the main thread was blocked, from a PerformanceObserver for long
   * tasks (each is a task over 50 ms); how much DOM the page held once far
   * groups were parked; a parked group rendered again when scrolled to and
   * when find-in-page matches in it; and every block rendered before printing.
   */
  async big_markdown({ newPage, url }) {
    const kb = Number(process.env.AHP_BIG_MARKDOWN_KB ?? '5000');
    const page = await openPage(newPage, url);
    await newSession(page);
    await page.evaluate(() => {
      window.__longTasks = [];
      window.__longTaskObserver = new PerformanceObserver((list) => {
        for (const entry of list.getEntries()) window.__longTasks.push(Math.round(entry.duration));
      });
      window.__longTaskObserver.observe({ type: 'longtask' });
    });
    // AHP_BIG_MARKDOWN_TRACE=FILE: a Chromium trace of the run (timeline, GC,
    // JS samples), to tell what a long task was (docs/web.md "Long answers").
    const trace = process.env.AHP_BIG_MARKDOWN_TRACE ? await startTrace(page) : undefined;
    const started = Date.now();
    await send(page, `/markdown ${kb}`);
    // Done: the turn is over, and the answer says every block of it is in the
    // DOM (data-rendered, web/src/streamed.ts). Checked in O(1) every 500 ms:
    // walking the whole answer here would itself block the page's main thread
    // (a querySelectorAll of a 5 MB answer takes tens of ms) inside the window
    // the long tasks are counted in. The DOM is counted after that window.
    await page.waitForFunction(
      () => {
        const turn = document.querySelector('.transcript article.turn:last-child');
        if (turn?.getAttribute('data-state') !== 'complete') return false;
        return turn.querySelector('.markdown.answer')?.getAttribute('data-rendered') === 'complete';
      },
      null,
      { polling: 500, timeout: 170_000 },
    );
    const seconds = (Date.now() - started) / 1000;
    await page.waitForTimeout(500); // a long task ending now is reported a moment later
    const longTasks = await page.evaluate(() => {
      window.__longTaskObserver.disconnect();
      return window.__longTasks;
    });
    // What the page holds: far groups parked as text (web/src/streamed.ts).
    const held = await page.evaluate(() => {
      const answer = document.querySelector('.transcript article.turn:last-child .markdown.answer');
      return {
        elements: answer.querySelectorAll('*').length,
        groups: answer.querySelectorAll(':scope > .md-group').length,
        parked: answer.querySelectorAll(':scope > .md-group[hidden="until-found"]').length,
      };
    });
    // Scrolled to the top, the first group is rendered again.
    await page.evaluate(() => {
      document.querySelector('.transcript').scrollTop = 0;
    });
    await page.waitForFunction(() => {
      const first = document.querySelector('.transcript article.turn:last-child .markdown.answer > .md-group');
      return !first.hasAttribute('hidden') && first.querySelector('h2') !== null;
    }, null, { timeout: 30_000 });
    const firstHeading = await page.evaluate(
      () => document.querySelector('.transcript article.turn:last-child .markdown.answer h2').textContent,
    );
    // Find-in-page matching inside a parked group (the browser fires
    // `beforematch` on it, then shows it): the group is rendered.
    const found = await page.evaluate(() => {
      const groups = document.querySelectorAll('.transcript article.turn:last-child .markdown.answer > .md-group');
      const group = groups[Math.floor(groups.length / 2)];
      if (group.getAttribute('hidden') !== 'until-found') return undefined;
      group.dataset.found = 'yes';
      group.dispatchEvent(new Event('beforematch', { bubbles: true }));
      return Math.floor(groups.length / 2);
    });
    await page.waitForFunction(() => {
      const group = document.querySelector('.md-group[data-found="yes"]');
      return !group.hasAttribute('hidden') && group.querySelector('h2') !== null;
    }, null, { timeout: 30_000 });
    // Before printing every group is rendered (the answer on paper is whole):
    // the DOM is then counted, block by block.
    await page.evaluate(() => window.dispatchEvent(new Event('beforeprint')));
    const rendered = await page.evaluate(() => {
      const turn = document.querySelector('.transcript article.turn:last-child');
      const answer = turn.querySelector('.markdown.answer');
      const count = (selector) => answer.querySelectorAll(selector).length;
      return {
        parked: count(':scope > .md-group[hidden]'),
        elements: count('*'),
        marker: answer.lastElementChild.textContent.trim(),
        headings: count('h2'),
        tables: count('table'),
        tableRows: count('table tbody tr'),
        listItems: count('li'),
        code: count('pre code'),
        highlighted: count('pre code.hljs'),
        python: count('pre code.language-python'),
        typescript: count('pre code.language-typescript'),
        copyButtons: count('.code-block > button.copy-code'),
        lastHeading: [...answer.querySelectorAll('h2')].pop()?.textContent ?? '',
      };
    });
    // After printing, far groups are parked again.
    await page.evaluate(() => window.dispatchEvent(new Event('afterprint')));
    await page.waitForFunction(
      (before) => document.querySelectorAll('.transcript article.turn:last-child .markdown.answer > .md-group[hidden]').length >= before / 2,
      held.parked,
      { timeout: 30_000 },
    );
    if (trace) await trace.end(process.env.AHP_BIG_MARKDOWN_TRACE);
    return { chat: await chatOf(page), kb, seconds, rendered, longTasks, held, firstHeading, found };
  },

  /** A host with a token: the page asks for it, or takes it from the fragment. */
  async token({ newPage, url }) {
    const token = process.env.AHP_TEST_TOKEN;
    assert.ok(token, 'AHP_TEST_TOKEN is set by the test');
    const page = await newPage();
    page.setDefaultTimeout(TIMEOUT);
    await page.goto(url);
    const field = page.getByLabel('Connection token');
    await field.waitFor(); // refused without a token: the page asks
    await field.fill('wrong');
    await page.getByRole('button', { name: 'Connect' }).click();
    await page.getByText('The token this tab has was not accepted').waitFor();
    await field.fill(token);
    await page.getByRole('button', { name: 'Connect' }).click();
    await connected(page);

    const sockets = [];
    const linked = await newPage();
    linked.setDefaultTimeout(TIMEOUT);
    linked.on('websocket', (ws) => sockets.push(ws.url()));
    await linked.goto(`${url}#token=${encodeURIComponent(token)}`);
    await connected(linked);
    assert.ok(!linked.url().includes('token='), 'the token left the address bar');
    assert.equal(await linked.evaluate(() => sessionStorage.getItem('ahp-server.token')), token);
    const origin = new URL(url);
    assert.ok(sockets.length > 0);
    for (const socket of sockets) assert.equal(new URL(socket).host, origin.host, 'the token only goes to this origin');
    await newSession(linked);
    return {};
  },
};

/** A page whose sent WebSocket messages are recorded (`sent`, parsed), opened and connected. */
async function openRecorded(newPage, url) {
  const page = await newPage();
  page.setDefaultTimeout(TIMEOUT);
  const sent = [];
  page.on('websocket', (ws) =>
    ws.on('framesent', ({ payload }) => {
      try {
        sent.push(JSON.parse(String(payload)));
      } catch {
        // not JSON: not ours to check
      }
    }),
  );
  await page.goto(url);
  await connected(page);
  return { page, sent };
}

/** The chat's primary working directory as a path (its `file:` URI is the line's title). */
async function workingDirectory(page) {
  const line = page.locator('.chat .directory');
  await line.waitFor();
  return decodeURIComponent(new URL(await line.getAttribute('title')).pathname).replace(/\/$/, '');
}

/** The protocol version the page shows it negotiated. */
async function protocolOf(page) {
  return page.locator('.top [data-protocol-version]').getAttribute('data-protocol-version');
}

/**
 * Make `page` offer only `versions` in `initialize`, as an older client would:
 * its WebSocket goes through Playwright, which rewrites that one message.
 */
async function offerOnly(page, versions) {
  await page.routeWebSocket(/./, (socket) => {
    const host = socket.connectToServer();
    socket.onMessage((message) => {
      const data = JSON.parse(String(message));
      if (data.method === 'initialize') data.params.protocolVersions = versions;
      host.send(JSON.stringify(data));
    });
  });
}

/**
 * Make the host's echo-agent errors resumable on their way to `page` (its
 * WebSocket goes through Playwright, which rewrites the host's messages): an
 * error part of type `echoError` gets `resumable: true`, as a host that can
 * resume would send it.
 */
async function markErrorsResumable(page) {
  const mark = (value) => {
    if (Array.isArray(value)) value.forEach(mark);
    else if (value && typeof value === 'object') {
      if (value.kind === 'error' && value.error?.errorType === 'echoError') value.resumable = true;
      Object.values(value).forEach(mark);
    }
  };
  await page.routeWebSocket(/./, (socket) => {
    const host = socket.connectToServer();
    host.onMessage((message) => {
      const data = JSON.parse(String(message));
      mark(data);
      socket.send(JSON.stringify(data));
    });
  });
}

/**
 * The read and archived flags the host holds for `session` and its chats,
 * asked until `ready(flags)` holds (the host applies a dispatched action a
 * moment after the page shows it).
 */
async function waitForHost(ask, session, ready) {
  let flags;
  for (let i = 0; i < 600; i++) {
    ({ flags } = await ask({ do: 'flags', session }));
    if (ready(flags)) return flags;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`the host never held what the page showed: ${JSON.stringify(flags)}`);
}

/** The host's order of `session`'s chats. */
async function hostOrder(ask, session) {
  return (await ask({ do: 'order', session })).order;
}


/**
 * Start a Chromium trace of `page` (through CDP): its main thread's tasks,
 * style, layout, paint, both garbage collectors and sampled JavaScript.
 * `end(file)` stops it and writes the JSON trace (chrome://tracing, Perfetto).
 */
async function startTrace(page) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Tracing.start', {
    transferMode: 'ReturnAsStream',
    traceConfig: {
      includedCategories: [
        'toplevel', 'devtools.timeline', 'disabled-by-default-devtools.timeline', 'blink', 'v8', 'v8.gc',
        'disabled-by-default-v8.gc', 'cppgc', 'disabled-by-default-cppgc', 'disabled-by-default-v8.cpu_profiler',
      ],
    },
  });
  return {
    async end(file) {
      const done = new Promise((resolve) => cdp.once('Tracing.tracingComplete', resolve));
      await cdp.send('Tracing.end');
      const { stream } = await done;
      const out = createWriteStream(file);
      for (;;) {
        const { data, eof, base64Encoded } = await cdp.send('IO.read', { handle: stream, size: 1 << 20 });
        out.write(base64Encoded ? Buffer.from(data, 'base64') : data);
        if (eof) break;
      }
      await new Promise((resolve) => out.end(resolve));
      await cdp.detach();
    },
  };
}
