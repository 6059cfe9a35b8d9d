// Times every console page on a workspace written by
// loadtests/console_data.py, in headless Chromium: each page opened afresh
// (the page, its script and style fetched, then its API calls) until the
// console says it has rendered. Prints a Markdown table of p50 and max.
//
//   node pages-benchmark.mjs path/to/chromium BASE_URL WORKSPACE MESSAGE_SESSION MESSAGE_ID [RUNS]

import { chromium } from 'playwright-core';

const [chromiumPath, base, workspace, messageSession, messageId, runsText] = process.argv.slice(2);
const runs = Number(runsText || 10);

async function firstConclusion() {
  const reply = await fetch(`${base}/v3/workspaces/${workspace}/conclusions/list?page=1&size=1`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  });
  return (await reply.json()).items[0].id;
}

const conclusion = await firstConclusion();
const pages = [
  ['workspaces', '#/'],
  ['workspace (peers, sessions)', `#/w/${workspace}`],
  ['search', `#/w/${workspace}/search?q=garden%20coffee`],
  ['session (5,000 messages: page, timeline, what was learned)', `#/w/${workspace}/s/s0`],
  ['message (what was learned from it)', `#/w/${workspace}/s/${messageSession}/m/${messageId}`],
  ['conclusion (sources, graph, derived)', `#/w/${workspace}/c/${conclusion}`],
  ['peer (card, representation, conclusions)', `#/w/${workspace}/p/alice`],
  ['peer as another observer sees it', `#/w/${workspace}/p/alice?observer=bob`],
  ['queue (counts, last hour, dead work)', `#/w/${workspace}/queue`],
  ['chat (form)', `#/w/${workspace}/chat/alice`],
];

const browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
const page = await browser.newPage();
const rows = [];
for (const [name, hash] of pages) {
  const whole = [];
  const rendered = [];
  for (let run = 0; run < runs + 1; run++) {
    await page.goto('about:blank');
    const started = performance.now();
    await page.goto(`${base}/ui${hash}`);
    await page.waitForFunction(() => document.getElementById('status').textContent.startsWith('Loaded in'));
    const elapsed = performance.now() - started;
    const own = Number((await page.evaluate(() => document.getElementById('status').textContent)).match(/\d+/)[0]);
    const failed = await page.evaluate(() => document.querySelector('main .error')?.textContent);
    if (failed) throw new Error(`${name}: ${failed}`);
    if (run > 0) {
      whole.push(elapsed);
      rendered.push(own);
    }
  }
  const p50 = (values) => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) / 2)];
  rows.push(`| ${name} | ${p50(whole).toFixed(0)} | ${Math.max(...whole).toFixed(0)} | ${p50(rendered)} | ${Math.max(...rendered)} |`);
}
await browser.close();
console.log('| page | opened to rendered, p50 ms | max ms | its API calls to rendered, p50 ms | max ms |');
console.log('|---|---|---|---|---|');
console.log(rows.join('\n'));
