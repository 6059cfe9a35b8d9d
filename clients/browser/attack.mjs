// Pages of other origins, in headless Chromium, against a zero-setup
// `roncho serve` (no keys, loopback): what they try, and that none of it
// writes or reads. Then two controls, so the harness can tell success from
// failure: the server's own origin reads, and an origin the operator
// allowed reads too.
//
//   node attack.mjs path/to/roncho path/to/chromium

import http from 'node:http';
import { chromium } from 'playwright-core';
import { freePort, startRoncho as start } from './serve.mjs';

const [roncho, chromiumPath] = process.argv.slice(2);
const SECRET_WORKSPACE = 'secret-workspace-of-the-user';
const PLANTED = 'planted-by-a-web-page';

async function startRoncho(env = {}) {
  const server = await start(roncho, { env: { RONCHO_EMBEDDING_PROVIDER: 'none', ...env } });
  const { base } = server;
  // What the user keeps there, which no page may read.
  await api(base, 'POST', '/v3/workspaces', { id: SECRET_WORKSPACE });
  return server;
}

/** A call from a client that is not a browser (no Origin). */
async function api(base, method, route, body) {
  const reply = await fetch(`${base}${route}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await reply.text();
  return { status: reply.status, text };
}

/** What a client that is not a browser reads back: planted data, if any. */
async function planted(base) {
  const workspaces = await api(base, 'POST', '/v3/workspaces/list', {});
  const messages = await api(base, 'POST', '/v3/workspaces/w/sessions/s/messages/list', {});
  const found = [];
  if (workspaces.text.includes(PLANTED)) found.push(`workspace: ${workspaces.text}`);
  if (messages.text.includes(PLANTED)) found.push(`messages: ${messages.text}`);
  return found;
}

// What the attacking page runs, against `target` (roncho's URL, another
// origin, or its own origin once rebound). Every attempt is recorded.
const ATTACK = `
async function attack(target) {
  const results = {};
  const body = (content) => JSON.stringify({ messages: [{ peer_id: 'mallory', content }] });
  const messages = target + '/v3/workspaces/w/sessions/s/messages';
  const record = async (name, run) => {
    try { results[name] = await run(); } catch (error) { results[name] = 'blocked: ' + error; }
  };
  // Simple requests, sent without asking: text/plain, no-cors, a beacon.
  await record('text/plain write', async () => (await fetch(messages, { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: body('${PLANTED} text/plain') })).status);
  await record('no-cors write', async () => { await fetch(messages, { method: 'POST', mode: 'no-cors', body: body('${PLANTED} no-cors') }); return 'sent (opaque)'; });
  await record('no-cors workspace', async () => { await fetch(target + '/v3/workspaces', { method: 'POST', mode: 'no-cors', body: JSON.stringify({ id: '${PLANTED}' }) }); return 'sent (opaque)'; });
  await record('beacon', async () => navigator.sendBeacon(messages, body('${PLANTED} beacon')));
  // A request that needs a preflight.
  await record('json write', async () => (await fetch(target + '/v3/workspaces', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ id: '${PLANTED}' }) })).status);
  // Reads: every workspace, the docs, health.
  await record('read workspaces', async () => {
    const reply = await fetch(target + '/v3/workspaces/list', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
    return reply.status + ' ' + (await reply.text());
  });
  await record('read health', async () => { const reply = await fetch(target + '/health'); return reply.status + ' ' + (await reply.text()); });
  // A form posted into a hidden frame, its text shaped as JSON.
  await record('form write', () => new Promise((resolve) => {
    const frame = document.createElement('iframe');
    frame.name = 'sink';
    document.body.appendChild(frame);
    const form = document.createElement('form');
    form.method = 'POST';
    form.enctype = 'text/plain';
    form.action = target + '/v3/workspaces';
    form.target = 'sink';
    const input = document.createElement('input');
    input.name = '{"id": "${PLANTED}", "x": "';
    input.value = '"}';
    form.appendChild(input);
    document.body.appendChild(form);
    frame.onload = () => resolve('submitted');
    form.submit();
    setTimeout(() => resolve('submitted (no load event)'), 3000);
  }));
  return results;
}
`;

/** Serves the attacking page at `/`; with `rebindTo`, every other path is
 * passed to that server, Host header and all: what a DNS name that rebinds
 * to 127.0.0.1 makes the browser do. */
function attacker(port, rebindTo) {
  const server = http.createServer((request, response) => {
    if (request.url === '/' || !rebindTo) {
      response.writeHead(200, { 'content-type': 'text/html' });
      response.end(`<!doctype html><title>a page</title><script>${ATTACK}</script>`);
      return;
    }
    const upstream = http.request(
      { host: '127.0.0.1', port: rebindTo, method: request.method, path: request.url, headers: request.headers },
      (reply) => {
        response.writeHead(reply.statusCode, reply.headers);
        reply.pipe(response);
      },
    );
    upstream.on('error', () => response.destroy());
    request.pipe(upstream);
  });
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(server)));
}

async function runPage(browser, url, target) {
  const page = await browser.newPage();
  await page.goto(url);
  const results = await page.evaluate(`attack(${JSON.stringify(target)})`);
  await page.close();
  return results;
}

const failures = [];
function check(held, what, detail) {
  console.log(`${held ? 'held' : 'GOT THROUGH'}: ${what}${detail ? ` — ${detail}` : ''}`);
  if (!held) failures.push(what);
}

const browser = await chromium.launch({
  executablePath: chromiumPath,
  args: [
    '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
    // Both names lead to loopback, as an attacker's DNS would make them.
    '--host-resolver-rules=MAP evil.test 127.0.0.1, MAP rebind.test 127.0.0.1',
  ],
});
try {
  const target = await startRoncho();
  // 1. A page of another site calls roncho's loopback address.
  const evilPort = await freePort();
  const evil = await attacker(evilPort);
  const crossOrigin = await runPage(browser, `http://evil.test:${evilPort}/`, target.base);
  const read = crossOrigin['read workspaces'];
  check(!String(read).includes(SECRET_WORKSPACE), 'another origin reads every workspace', read);
  check(!String(crossOrigin['read health']).includes('ok'), 'another origin reads health', crossOrigin['read health']);
  // 2. The same page served under a name that rebinds to roncho: its calls are same-origin.
  const rebindPort = await freePort();
  const rebind = await attacker(rebindPort, target.rest);
  const rebound = await runPage(browser, `http://rebind.test:${rebindPort}/`, `http://rebind.test:${rebindPort}`);
  check(!String(rebound['read workspaces']).includes(SECRET_WORKSPACE), 'a rebinding name reads every workspace', rebound['read workspaces']);
  check(String(rebound['read workspaces']).startsWith('403'), 'a rebinding name is refused', rebound['read workspaces']);
  await new Promise((r) => setTimeout(r, 1000));
  const found = await planted(target.base);
  check(found.length === 0, 'pages wrote into memory (text/plain, no-cors, beacon, JSON, form; cross-origin and rebound)', found.join('; '));
  console.log(JSON.stringify({ crossOrigin, rebound }, null, 1));
  // Controls: the server's own page reads; an allowed origin reads.
  const own = await browser.newPage();
  await own.goto(`${target.base}/health`);
  const ownRead = await own.evaluate(async () => {
    const reply = await fetch('/v3/workspaces/list', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
    return reply.status + ' ' + (await reply.text());
  });
  await own.close();
  check(ownRead.includes(SECRET_WORKSPACE), 'control: the server\'s own origin reads', ownRead.slice(0, 80));
  target.stop();
  const allowing = await startRoncho({ RONCHO_ALLOWED_ORIGINS: `http://evil.test:${evilPort}` });
  const allowed = await runPage(browser, `http://evil.test:${evilPort}/`, allowing.base);
  check(String(allowed['read workspaces']).includes(SECRET_WORKSPACE), 'control: an allowed origin reads', String(allowed['read workspaces']).slice(0, 80));
  allowing.stop();
  evil.close();
  rebind.close();
} finally {
  await browser.close();
}
console.log(`browser attacks: ${failures.length ? `${failures.length} got through: ${failures.join(', ')}` : 'all held'}`);
process.exit(failures.length ? 1 : 0);
