// A typed roncho client in TypeScript. The types come from proto/
// (`proto-loader-gen-types`, see run-example.sh); the calls go through
// @grpc/grpc-js. It stores a short conversation, searches it, waits for
// the deriver, and asks the dialectic about a peer.
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import type { ProtoGrpcType as Ingest } from "./generated/ingest.js";
import type { ProtoGrpcType as Recall } from "./generated/recall.js";
import type { ProtoGrpcType as Dialectic } from "./generated/dialectic.js";
import type { ProtoGrpcType as Deriver } from "./generated/deriver.js";

const address = process.env.RONCHO_ADDRESS ?? "127.0.0.1:50051";
const protoDir = process.env.RONCHO_PROTO_DIR ?? "../../proto";
const options = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true, includeDirs: [protoDir] };
const files = ["ingest", "recall", "dialectic", "deriver"].map((name) => `roncho/v1/${name}.proto`);
const definition = protoLoader.loadSync(files, options);
const roncho = (grpc.loadPackageDefinition(definition) as unknown as Ingest & Recall & Dialectic & Deriver).roncho.v1;

const credentials = grpc.credentials.createInsecure();
const ingest = new roncho.IngestService(address, credentials);
const recall = new roncho.RecallService(address, credentials);
const dialectic = new roncho.DialecticService(address, credentials);
const deriver = new roncho.DeriverService(address, credentials);

/** Calls a unary method as a promise. */
function call<Req, Res>(method: (request: Req, callback: grpc.requestCallback<Res>) => unknown, request: Req): Promise<Res> {
  return new Promise((resolve, reject) =>
    method(request, (error, response) => (error ? reject(error) : resolve(response as Res))),
  );
}

/** Failures after which a write may or may not have landed, or that pass. */
const RETRYABLE = new Set([grpc.status.DEADLINE_EXCEEDED, grpc.status.CANCELLED, grpc.status.UNAVAILABLE, grpc.status.RESOURCE_EXHAUSTED]);

/** Runs a write, retrying what may not have landed. Safe for writes that
 * carry an idempotency key (one per request, the same for each retry): a
 * retry of a call that landed returns its result and stores nothing twice. */
async function withRetries<Res>(write: () => Promise<Res>, attempts = 5): Promise<Res> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await write();
    } catch (error) {
      if (attempt >= attempts || !RETRYABLE.has((error as grpc.ServiceError).code)) throw error;
      await new Promise((resolve) => setTimeout(resolve, 200 * 2 ** attempt));
    }
  }
}

const workspace_id = `ts-${Date.now()}`;
await call(ingest.GetOrCreateWorkspace.bind(ingest), { id: workspace_id });
const conversation = {
  workspace_id,
  idempotency_key: crypto.randomUUID(),
  session_id: "chat",
  messages: [
    { peer_id: "alice", content: "I adopted a grey cat named Mochi." },
    { peer_id: "bob", content: "What does Mochi eat?" },
    { peer_id: "alice", content: "Mochi only eats salmon." },
  ],
};
const created = await withRetries(() => call(ingest.CreateMessages.bind(ingest), conversation));
console.log(`stored ${created.messages.length} messages`);

const found = await call(recall.SearchMessages.bind(recall), { workspace_id, query: "salmon", limit: 5 });
console.log(`search (${found.mode}): ${found.messages.map((m) => `${m.peer_id}: ${m.content}`).join(" | ")}`);
if (!found.messages.some((m) => m.content.includes("salmon"))) throw new Error("search missed the salmon message");

// Wait for the deriver to turn the messages into observations.
for (let tries = 0; ; tries++) {
  const status = await call(deriver.GetQueueStatus.bind(deriver), { workspace_id });
  if (Number(status.pending_work_units) === 0 && Number(status.in_progress_work_units) === 0) {
    console.log(`derived (${status.observation_mode}): ${status.completed_work_units} work units done`);
    break;
  }
  if (tries > 100) throw new Error("the queue did not drain");
  await new Promise((resolve) => setTimeout(resolve, 100));
}

const answer = await call(dialectic.Chat.bind(dialectic), {
  workspace_id,
  peer_id: "alice",
  query: "What does my cat eat?",
  reasoning_level: "low",
});
console.log(`dialectic: ${answer.content}`);
if (!answer.content?.includes("[id:")) throw new Error("the answer cites no observation");
for (const client of [ingest, recall, dialectic, deriver]) client.close();
