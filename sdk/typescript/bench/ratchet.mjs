// Drains COUNT no-op tasks through `ratchet server` at URL with the TypeScript worker:
// enqueued first (batches of 1,000 over the API), then timed from the worker's start until
// every task is reported. Prints one JSON line.
//
//   node bench/ratchet.mjs http://127.0.0.1:8080 100000 [concurrency]
import { connect, Worker } from "../dist/src/index.js";

const [url, countArg = "100000", concurrencyArg = "1000"] = process.argv.slice(2);
const count = Number(countArg);
const concurrency = Number(concurrencyArg);
const client = connect(url);
const queue = `bench${Date.now()}`;

const enqueueStart = performance.now();
const batches = [];
for (let i = 0; i < count; i += 1000) {
  batches.push(Array.from({ length: Math.min(1000, count - i) }, (_, n) => ({ name: "noop", input: i + n, options: { queue } })));
}
for (let i = 0; i < batches.length; i += 4) {
  await Promise.all(batches.slice(i, i + 4).map((b) => client.enqueueMany(b, true)));
}
const enqueueSeconds = (performance.now() - enqueueStart) / 1000;

const worker = new Worker(url, { queues: { [queue]: concurrency }, tasks: { noop: () => null } });
const start = performance.now();
worker.start();
while (worker.completed < count) {
  await new Promise((r) => setTimeout(r, 5));
}
const seconds = (performance.now() - start) / 1000;
await worker.stop();
const { data: queues } = await client.api.GET("/v1/queues");
const left = queues.find((q) => q.name === queue);
console.log(JSON.stringify({
  system: "ratchet (TypeScript worker over HTTP)",
  count,
  concurrency,
  enqueue_per_second: Math.round(count / enqueueSeconds),
  drain_seconds: Number(seconds.toFixed(2)),
  tasks_per_second: Math.round(count / seconds),
  left_unfinished: left ? (left.depth ?? null) : 0,
}));
