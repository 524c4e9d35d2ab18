// Drains COUNT no-op jobs with Graphile Worker on DATABASE_URL, set up as its own performance
// test sets itself up (jobs added first, 1,000 per addJobs call, several worker processes of 24 concurrent
// jobs with a local queue of 500 and completions batched); timed from the workers' start until
// the last exits with no job left. Prints one JSON line.
//
//   DATABASE_URL=postgres://... node bench/graphile.mjs 100000 [processes]
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

import pg from "pg";
import { makeWorkerUtils, runMigrations, runOnce } from "graphile-worker";

const connectionString = process.env.DATABASE_URL;
// As its performance test runs it: no log line per job.
process.env.NO_LOG_SUCCESS = "1";
const preset = {
  worker: {
    connectionString,
    concurrentJobs: 24,
    maxPoolSize: 25,
    localQueue: { size: 500, refetchDelay: { durationMs: 10 } },
    completeJobBatchDelay: 0,
    failJobBatchDelay: 0,
  },
};

if (process.argv[2] === "--child") {
  await runOnce({ preset, taskList: { noop: async () => {} } });
  process.exit(0);
}

const count = Number(process.argv[2] ?? "100000");
const processes = Number(process.argv[3] ?? "4");
await runMigrations({ connectionString });
const pool = new pg.Pool({ connectionString });
const enqueueStart = performance.now();
const utils = await makeWorkerUtils({ connectionString });
for (let i = 0; i < count; i += 1000) {
  await utils.addJobs(
    Array.from({ length: Math.min(1000, count - i) }, (_, n) => ({ identifier: "noop", payload: { id: i + n } })),
  );
}
await utils.release();
const enqueueSeconds = (performance.now() - enqueueStart) / 1000;
const start = performance.now();
await Promise.all(
  Array.from({ length: processes }, () =>
    new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [fileURLToPath(import.meta.url), "--child"], { stdio: "inherit", env: process.env });
      child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`worker exited ${code}`))));
    }),
  ),
);
const seconds = (performance.now() - start) / 1000;
const { rows } = await pool.query("select count(*)::int as left from graphile_worker.jobs");
await pool.end();
console.log(JSON.stringify({
  system: `graphile-worker (${processes} processes x 24 concurrent jobs)`,
  count,
  enqueue_per_second: Math.round(count / enqueueSeconds),
  drain_seconds: Number(seconds.toFixed(2)),
  tasks_per_second: Math.round(count / seconds),
  left_unfinished: rows[0].left,
}));
