// The console at /ui, driven in a real headless Chromium through what a
// newcomer does: find a fact, see why it is believed, erase its source and
// see it gone everywhere, chat with the evidence shown; then a server with
// keys (the page asks for one and keeps it to the tab), and a message that
// carries markup (shown as text, never run). Every page is checked for
// console errors and with axe-core (labels, names, contrast, landmarks),
// and the main journey is walked with the keyboard.
//
//   node console.mjs path/to/roncho path/to/chromium [model-dir]
//
// Prints each page's load time as the console measures it (for the
// benchmark in docs/benchmarks.md, not asserted here).

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { chromium } from 'playwright-core';
import { startRoncho as start } from './serve.mjs';

const [roncho, chromiumPath, modelDir] = process.argv.slice(2);
// A fresh database and NATS for the journeys on Postgres + NATS; unset: embedded only.
const postgresUrl = process.env.RONCHO_CONSOLE_DATABASE_URL;
const natsUrl = process.env.RONCHO_CONSOLE_NATS_URL;
const require = createRequire(import.meta.url);
const AXE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

const failures = [];
function check(held, what, detail = '') {
  console.log(`${held ? 'ok  ' : 'FAIL'} ${what}${held || !detail ? '' : `: ${detail}`}`);
  if (!held) failures.push(what);
}

function startRoncho(args = [], env = {}) {
  const model = modelDir ? { RONCHO_EMBEDDING_MODEL_DIR: modelDir } : { RONCHO_EMBEDDING_PROVIDER: 'none' };
  return start(roncho, { args, env: { ...model, ...env } });
}

/** A call from a client that is not a browser. */
async function api(base, method, route, body, key) {
  const headers = { 'content-type': 'application/json' };
  if (key) headers.authorization = `Bearer ${key}`;
  const reply = await fetch(`${base}${route}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await reply.text();
  return { status: reply.status, json: text ? JSON.parse(text) : null };
}

/** A user's conversation, written as a client would; waits for its derivation. */
async function seed(base, key) {
  await api(base, 'POST', '/v3/workspaces', { id: 'demo' }, key);
  await api(base, 'POST', '/v3/workspaces/demo/sessions', { id: 'morning', peers: { alice: {}, assistant: {} } }, key);
  const written = await api(base, 'POST', '/v3/workspaces/demo/sessions/morning/messages', {
    messages: [
      { peer_id: 'alice', content: 'I moved to Lisbon last spring and I work as a marine biologist.' },
      { peer_id: 'assistant', content: 'Lisbon is lovely. What do you study?' },
      { peer_id: 'alice', content: 'My favourite tea is genmaicha.' },
      { peer_id: 'alice', content: 'Mostly octopus cognition, in the lab by the river.' },
      { peer_id: 'alice', content: '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script> is what I typed' },
    ],
  }, key);
  if (written.status !== 201 && written.status !== 200) throw new Error(`seeding: ${written.status} ${JSON.stringify(written.json)}`);
  for (let i = 0; i < 600; i++) {
    const queue = await api(base, 'GET', '/v3/workspaces/demo/queue/status', undefined, key);
    const learned = await api(base, 'POST', '/v3/workspaces/demo/conclusions/list', { filters: { observed_id: 'alice' } }, key);
    const tea = learned.json.items.some((conclusion) => conclusion.content.includes('genmaicha'));
    if (queue.json.pending_work_units === 0 && queue.json.in_progress_work_units === 0 && tea) return written.json;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('derivation did not finish');
}

/** A page of the console: its errors, and what it measured. */
function watch(page, errors) {
  page.on('pageerror', (error) => errors.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    // A refused or missing API call is logged by the browser itself; the
    // page shows it. Any other error (a script's, a file's) is the console's.
    const refusedCall = message.text().startsWith('Failed to load resource') && message.location().url.includes('/v3/');
    if (message.type() === 'error' && !refusedCall) errors.push(`console error: ${message.text()} at ${message.location().url}`);
  });
  page.on('dialog', (dialog) => {
    if (dialog.type() === 'confirm') dialog.accept();
    else {
      errors.push(`unexpected ${dialog.type()}: ${dialog.message()}`);
      dialog.dismiss();
    }
  });
}

const timings = [];

/** Waits for the console to render, then checks the page with axe-core. */
async function settled(page, label) {
  // The page of the address now in the bar, not the one before it.
  await page.waitForFunction(
    () => document.body.dataset.rendered === location.hash && document.getElementById('status').textContent.startsWith('Loaded in'),
  );
  const loaded = await page.evaluate(() => document.getElementById('status').textContent);
  timings.push(`${label}: ${loaded}`);
  await page.evaluate(AXE);
  const violations = await page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ['violations'] });
    return result.violations.map((violation) => `${violation.id} (${violation.impact}): ${violation.nodes.length} nodes, e.g. ${violation.nodes[0].html}`);
  });
  check(violations.length === 0, `${label}: no accessibility violations`, violations.join('; '));
}

async function text(page) {
  return page.evaluate(() => document.getElementById('main').innerText);
}

/**
 * The main journeys on `server` (seeded already): find a fact, see why it
 * is believed, erase its source and see it gone everywhere, the timeline
 * and the queue, chat with evidence; every check named after `label`.
 */
async function journeys(server, label) {
  const ok = (held, what, detail) => check(held, `${label}${what}`, detail);
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [];
  watch(page, errors);

  // Find a fact: from the workspaces, search by the keyboard.
  await page.goto(`${server.base}/ui`);
  await settled(page, `${label}workspaces`);
  ok(!(await page.getByLabel('API key').isVisible()), 'a server without keys asks for none');
  await page.getByRole('link', { name: 'demo', exact: true }).click();
  await settled(page, `${label}workspace`);
  await page.getByLabel('Search messages').focus();
  await page.keyboard.type('genmaicha');
  await page.keyboard.press('Enter');
  await settled(page, `${label}search`);
  const found = await text(page);
  ok(found.includes('My favourite tea is genmaicha.'), 'search finds the message');

  // See why it is believed: the message, what was learned from it, the conclusion and its sources.
  await page.locator('main table a').first().click();
  await settled(page, `${label}message`);
  const message = await text(page);
  ok(/Learned from it\n+[1-9]\d* conclusions/.test(message), 'the message shows what was learned from it', message);
  await page.getByRole('link', { name: /genmaicha/ }).first().click();
  await settled(page, `${label}conclusion`);
  const why = await text(page);
  ok(why.includes('Why this is believed') && why.includes('Learned from 1 messages'), 'the conclusion names its source', why);
  ok(await page.locator('main svg[role=group] a').count() >= 2, 'the graph links the conclusion and its source');
  const conclusionUrl = page.url();

  // Every page of the journey, by keyboard: Tab reaches the links and the erase button.
  await page.getByRole('link', { name: /My favourite tea is genmaicha/ }).first().click();
  await settled(page, `${label}message again`);
  let reached = false;
  for (let i = 0; i < 40 && !reached; i++) {
    await page.keyboard.press('Tab');
    reached = await page.evaluate(() => document.activeElement && document.activeElement.textContent === 'Erase this message');
  }
  ok(reached, 'the erase button is reached with Tab');

  // Erase its source and see the receipt.
  await page.keyboard.press('Enter');
  await page.waitForSelector('#receipt strong:text("Erasure complete")', { timeout: 60_000 });
  ok(await page.evaluate(() => document.activeElement && document.activeElement.id === 'receipt'), 'the receipt takes the focus');
  const receipt = await page.locator('#receipt').innerText();
  ok(/Removed: .*conclusion/.test(receipt), 'the receipt names the conclusions erased with the message', receipt);

  // Gone everywhere: the conclusion, the search, the peer's page, the API.
  await page.goto(conclusionUrl);
  await settled(page, `${label}erased conclusion`);
  ok((await text(page)).includes('404'), 'the conclusion is gone', await text(page));
  await page.goto(`${server.base}/ui#/w/demo/search?q=genmaicha`);
  await settled(page, `${label}search after erasure`);
  ok(!(await text(page)).includes('My favourite tea'), 'search no longer finds it', await text(page));
  await page.goto(`${server.base}/ui#/w/demo/p/alice`);
  await settled(page, `${label}peer`);
  const peer = await text(page);
  ok(peer.includes('Conclusions about alice') && !peer.includes('genmaicha'), "alice's page holds nothing of it", peer);
  const left = await api(server.base, 'POST', '/v3/workspaces/demo/conclusions/list', {});
  ok(!JSON.stringify(left.json).includes('genmaicha'), 'the API holds no conclusion of it');

  // Ids that are path steps address nothing: no call, no erase button.
  for (const id of ['..', '.', '%2E%2E']) {
    await page.goto(`${server.base}/ui#/w/demo/p/${id}`);
    await settled(page, `${label}peer ${id}`);
    const refused = await text(page);
    ok(refused.includes('is not an id the console can address') && (await page.getByRole('button', { name: /Erase/ }).count()) === 0, `the id ${id} is refused before any call`, refused);
  }
  // The skip link moves the focus and stays on the page.
  await page.goto(`${server.base}/ui#/w/demo/s/morning`);
  await settled(page, `${label}session before the skip link`);
  await page.locator('a.skip').focus();
  await page.keyboard.press('Enter');
  ok(page.url().endsWith('#/w/demo/s/morning') && (await page.evaluate(() => document.activeElement.id)) === 'main', 'the skip link moves the focus to the content and stays on the page');

  // The session's timeline, the queue.
  await page.goto(`${server.base}/ui#/w/demo/s/morning`);
  await settled(page, `${label}session`);
  ok(await page.locator('main svg[role=group] circle').count() === 4, 'the timeline draws the four messages left');
  const markup = await text(page);
  ok(markup.includes('<img src=x onerror='), 'markup in a message is shown as text');
  ok(await page.evaluate(() => window.__pwned === undefined), 'markup in a message never runs');
  await page.goto(`${server.base}/ui#/w/demo/queue`);
  await settled(page, `${label}queue`);
  ok((await text(page)).includes('pending work units'), 'the queue page shows the queue');
  const charts = await page.locator('main figure figcaption').allInnerTexts();
  ok(charts.length === 2 && /peak [1-9]/.test(charts[0]) && /median per minute\): peak \d+ ms/.test(charts[1]), 'the last hour shows the work waiting and how long deriving took', charts.join(' | '));
  ok(await page.getByRole('button', { name: 'Run dead work again' }).isDisabled(), 'with no dead work there is nothing to run again');

  // Chat with the evidence shown.
  await page.goto(`${server.base}/ui#/w/demo/chat/alice`);
  await settled(page, `${label}chat`);
  await page.getByLabel('Question').fill('Where does alice live?');
  await page.getByRole('button', { name: 'Ask' }).click();
  await page.waitForSelector('#answer', { timeout: 120_000 });
  const answer = await text(page);
  ok(/Evidence: [1-9]\d* conclusions/.test(answer), 'the answer shows its evidence', answer);
  ok(await page.getByRole('link', { name: /Lisbon/ }).count() > 0, 'the evidence links the conclusions it read');

  ok(errors.length === 0, 'no console errors on any page', errors.join('; '));
  const stored = await page.evaluate(() => [localStorage.length, document.cookie]);
  ok(stored[0] === 0 && stored[1] === '', 'nothing is kept in local storage or cookies');
  await context.close();
}

const browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
let server;
try {
  // ------------------------------------------------ the zero-setup server
  server = await startRoncho();
  await seed(server.base);
  await journeys(server, '');
  server.stop();
  // The same journeys on Postgres and NATS, when the suite is given them.
  if (postgresUrl && natsUrl) {
    server = await startRoncho(['--database-url', postgresUrl, '--nats-url', natsUrl], {
      RONCHO_NATS_PREFIX: `console${process.pid}`,
    });
    await seed(server.base);
    await journeys(server, 'Postgres + NATS: ');
    server.stop();
  }

  // ------------------------------------------------ a server with keys
  server = await startRoncho(['--local-key']);
  const admin = readFileSync(path.join(server.data, 'auth', 'admin.key'), 'utf8').trim();
  await seed(server.base, admin);
  const keyed = await browser.newContext();
  const keyPage = await keyed.newPage();
  const keyErrors = [];
  watch(keyPage, keyErrors);
  await keyPage.goto(`${server.base}/ui`);
  await settled(keyPage, 'workspaces without a key');
  check(await keyPage.getByLabel('API key').isVisible(), 'the page asks for a key');
  check((await text(keyPage)).includes('401'), 'and says why');
  await keyPage.getByLabel('API key').fill(admin);
  await keyPage.getByRole('button', { name: 'Use key' }).click();
  await settled(keyPage, 'workspaces with the key');
  check((await text(keyPage)).includes('demo'), 'with the key, the workspaces are listed');
  check(!keyPage.url().includes(admin) && !(await keyPage.content()).includes(admin), 'the key is in neither the address nor the page');
  const minted = await api(server.base, 'POST', '/v3/keys?workspace_id=demo&peer_id=alice', undefined, admin);
  const other = await keyed.newPage();
  watch(other, keyErrors);
  await other.goto(`${server.base}/ui`);
  await settled(other, 'a new tab');
  check(await other.getByLabel('API key').isVisible(), 'another tab has no key: it is kept to its tab');
  await other.getByLabel('API key').fill(minted.json.key);
  await other.getByRole('button', { name: 'Use key' }).click();
  await settled(other, 'a peer key');
  check(other.url().endsWith('#/w/demo/p/alice'), "a peer key starts on its peer's page", other.url());
  check(!(await other.getByLabel('API key').isVisible()), 'an accepted key is not asked for again');
  await other.goto(`${server.base}/ui#/w/demo/p/alice`);
  await settled(other, "a peer key on its peer's page");
  const own = await text(other);
  check(own.includes('Lisbon'), "a peer key reads its peer's representation", own);
  check(/Conclusions about alice\n+The server answered 401/.test(own), "and is refused the workspace's conclusion list, in its section", own);
  await other.goto(`${server.base}/ui#/w/demo/s/morning`);
  await settled(other, "a peer key on its session");
  const session = await text(other);
  check(session.includes('octopus cognition') && /Learned in this session\n+The server answered 401/.test(session), 'a peer key reads its session and is refused the rest', session);
  await other.goto(`${server.base}/ui#/w/demo/p/assistant`);
  await settled(other, "a peer key on another peer's page");
  check(!(await text(other)).includes('What do you study'), "a peer key sees nothing of another peer's memory");
  check(keyErrors.length === 0, 'no console errors', keyErrors.join('; '));
  await keyed.close();
} catch (error) {
  check(false, 'the journeys ran', error.stack || String(error));
} finally {
  if (server) server.stop();
  await browser.close();
}

console.log(`\npage loads (as the console measured them):\n  ${timings.join('\n  ')}`);
if (failures.length) {
  console.log(`\n${failures.length} failed`);
  process.exit(1);
}
console.log('\nthe console journeys hold');
