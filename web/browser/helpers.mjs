/**
 * What every browser scenario does: open the page, create a session, send a
 * message, wait for a turn to end, read the selection from the URL.
 */
export const TIMEOUT = 20_000;

export async function openPage(newPage, url) {
  const page = await newPage();
  page.setDefaultTimeout(TIMEOUT);
  await page.goto(url);
  await connected(page);
  return page;
}

export async function connected(page) {
  await page.locator('[data-status="open"]').waitFor({ timeout: TIMEOUT });
}

export async function newSession(page) {
  await page.getByRole('button', { name: 'New session' }).click();
  await page.getByRole('tab', { name: /Main/ }).waitFor();
  await page.getByRole('textbox', { name: 'Message', exact: true }).waitFor();
}

/** Type `text` into the composer and press Enter (the keyboard way). */
export async function send(page, text) {
  const box = page.getByRole('textbox', { name: 'Message', exact: true });
  await box.fill(text);
  await box.press('Enter');
}

export function turns(page) {
  return page.locator('.transcript article.turn');
}

export function lastTurn(page) {
  return turns(page).last();
}

export async function turnEnded(page, state = 'complete', count) {
  if (count !== undefined) await page.waitForFunction((n) => document.querySelectorAll('.transcript article.turn').length >= n, count);
  await page.waitForFunction(
    (wanted) => {
      const all = document.querySelectorAll('.transcript article.turn');
      const last = all[all.length - 1];
      return last && last.getAttribute('data-state') === wanted;
    },
    state,
    { timeout: TIMEOUT },
  );
  await rendered(page);
}

/**
 * Wait until the page has drawn a frame since now. The answer's blocks are
 * `content-visibility: auto` (styles.css): one inserted since the last frame
 * has had no layout yet, so `innerText` reads it as '' until a frame decides
 * whether it is on screen.
 */
export async function rendered(page) {
  await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
}

export async function answerText(turn) {
  await rendered(turn.page());
  return (await turn.locator('.markdown.answer').allInnerTexts()).join('');
}

/** Wait until `condition()` holds (checked every 50 ms, up to the scenario timeout). */
export async function waitUntil(condition, what) {
  const deadline = Date.now() + TIMEOUT;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`never saw ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export async function chatOf(page) {
  return new URLSearchParams(new URL(page.url()).hash.slice(1)).get('chat');
}

export async function sessionOf(page) {
  return new URLSearchParams(new URL(page.url()).hash.slice(1)).get('session');
}
