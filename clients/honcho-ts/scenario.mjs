// Honcho's official TypeScript SDK (@honcho-ai/sdk, its newest release)
// against roncho's REST edge: what Honcho 3.1 and 3.2 added to the shapes
// it parses — chat evidence with its reasoning_trace_id (peer chat,
// workspace chat, a stream's), conclusions with source_ids and
// times_derived (created, listed, got, derived) — parsed unchanged, and the
// trace an answer names fetched by its id.
//
//   node scenario.mjs BASE_URL

import { Honcho } from '@honcho-ai/sdk';

const [base] = process.argv.slice(2);
const failures = [];
function check(held, what, detail = '') {
  console.log(`${held ? 'ok  ' : 'FAIL'} ${what}${held || !detail ? '' : `: ${detail}`}`);
  if (!held) failures.push(what);
}

const workspace = `ts-sdk-${process.pid}`;
const honcho = new Honcho({ baseURL: base, workspaceId: workspace, apiKey: 'not-needed-on-a-loopback-server' });
const alice = await honcho.peer('alice');
const assistant = await honcho.peer('assistant');
const session = await honcho.session('morning');
await session.addPeers([alice, assistant]);
const written = await session.addMessages([
  alice.message('My cat Mochi eats salmon every morning.'),
  assistant.message('Salmon sounds like a treat. How old is Mochi?'),
  alice.message('Mochi is three and sleeps on the piano.'),
]);
check(written.length === 3 && written.every((message) => typeof message.id === 'string'), 'messages written');

// Derivation has run once the queue is empty and something about alice is learned.
for (let i = 0; i < 600; i++) {
  const status = await (await fetch(`${base}/v3/workspaces/${workspace}/queue/status`)).json();
  const learned = await assistant.conclusionsOf(alice).list();
  if (status.pending_work_units === 0 && status.in_progress_work_units === 0 && learned.items.length) break;
  await new Promise((resolve) => setTimeout(resolve, 100));
}

// Conclusions: Honcho 3.1's fields, parsed by the SDK's classes.
const view = alice.conclusions;
const page = await view.list();
check(page.items.length > 0, 'conclusions listed', JSON.stringify(page.items));
const derived = page.items[0];
check(Array.isArray(derived.sourceIds) && derived.sourceIds.length > 0, 'a derived conclusion names its sources', JSON.stringify(derived));
check(Number.isInteger(derived.timesDerived) && derived.timesDerived >= 1, 'and how often it was derived', JSON.stringify(derived));
const [made] = await assistant.conclusionsOf(alice).create({ content: 'Mochi is a tabby', sessionId: session.id });
const got = await honcho.conclusions.get(made.id);
check(got.content === 'Mochi is a tabby' && Array.isArray(got.sourceIds) && got.timesDerived === 1, 'a conclusion made by hand is got by id', JSON.stringify(got));
const many = await honcho.conclusions.getMany([made.id, derived.id]);
check(many.length === 2, 'conclusions got by ids', JSON.stringify(many));

// Evidence (Honcho 3.1) and its reasoning_trace_id (3.2).
async function trace(id) {
  const reply = await fetch(`${base}/v3/workspaces/${workspace}/traces/${id}`);
  return reply.ok ? reply.json() : null;
}
const answered = await assistant.chat('What does Mochi eat?', { target: alice, includeEvidence: true });
check(typeof answered.content === 'string' && answered.content.length > 0, 'peer chat answers', JSON.stringify(answered));
const evidence = answered.evidence;
check(evidence && Array.isArray(evidence.messages) && evidence.messages.length > 0, 'its evidence names the messages read', JSON.stringify(evidence));
check(evidence && Array.isArray(evidence.conclusions) && evidence.conclusions.every((c) => Array.isArray(c.source_ids)), 'and the conclusions, with their sources', JSON.stringify(evidence));
check(evidence && Array.isArray(evidence.tool_calls), 'and the tool calls', JSON.stringify(evidence));
check(evidence && typeof evidence.reasoning_trace_id === 'string', 'and a reasoning_trace_id', JSON.stringify(evidence));
const fetched = evidence && (await trace(evidence.reasoning_trace_id));
check(fetched && fetched.id === evidence.reasoning_trace_id, 'whose trace is fetched by it', JSON.stringify(fetched));

const across = await honcho.chat('Who has a cat that eats salmon?', { includeEvidence: true });
check(across.evidence && typeof across.evidence.reasoning_trace_id === 'string', 'workspace chat: evidence with a reasoning_trace_id', JSON.stringify(across));

const stream = await assistant.chatStream('Where does Mochi sleep?', { target: alice, includeEvidence: true });
let text = '';
for await (const chunk of stream) text += typeof chunk === 'string' ? chunk : chunk.content ?? '';
check(text.length > 0, 'a stream answers', text);
check(stream.evidence && typeof stream.evidence.reasoning_trace_id === 'string', "a stream's evidence carries the reasoning_trace_id", JSON.stringify(stream.evidence));

if (failures.length) {
  console.log(`\n${failures.length} failed`);
  process.exit(1);
}
console.log('\nthe TypeScript SDK scenario holds');
