// The TypeScript worker against a real `ratchet server` (RATCHET_BIN, or the workspace's
// debug build), on a fresh SQLite file and, with DATABASE_URL, on a fresh PostgreSQL schema:
// the scenarios the in-process workers pass (completion, retries, dead letters, a queue's
// concurrency, cancellation, heartbeats, a graceful stop, a killed worker's attempt taken over),
// and the activities of a workflow a server runs.

import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { connect, NonRetryableError, Worker, type TaskInfo } from "../src/index.js";

const here = fileURLToPath(new URL(".", import.meta.url));
const binary = process.env.RATCHET_BIN ?? resolve(here, "../../../../target/debug/ratchet");

/** A server on `store`: one that runs nothing itself, unless `ownWorker` (then it runs
 * workflows, whose activities workers over HTTP may run). */
async function serve(store: string[], ownWorker = false): Promise<{ url: string; child: ChildProcess }> {
  const migrated = spawnSync(binary, [...store, "migrate"], { encoding: "utf8" });
  assert.equal(migrated.status, 0, migrated.stderr);
  const args = [...store, "server", "--listen", "127.0.0.1:0", "--poll-ms", "200"];
  const child = spawn(binary, ownWorker ? args : [...args, "--no-worker"], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines = createInterface({ input: child.stdout! });
  for await (const line of lines) {
    const url = line.split(/\s+/).find((w) => w.startsWith("http://"));
    if (url) {
      return { url, child };
    }
  }
  throw new Error("the server never said where it serves");
}

// The SQLite files' directories, removed when the tests end.
const scratch: string[] = [];
after(() => {
  for (const dir of scratch) {
    rmSync(dir, { recursive: true, force: true });
  }
});
function sqliteFile(): string {
  const dir = mkdtempSync(join(tmpdir(), "ratchet-ts-"));
  scratch.push(dir);
  return join(dir, "ratchet.db");
}

const backends: [string, () => string[]][] = [["sqlite", () => ["--db", sqliteFile()]]];
if (process.env.DATABASE_URL) {
  backends.push([
    "postgres",
    () => ["--database-url", process.env.DATABASE_URL!, "--schema", `ts_${Math.random().toString(36).slice(2, 12)}`],
  ]);
} else if (process.env.RATCHET_REQUIRE_POSTGRES === "1") {
  throw new Error("RATCHET_REQUIRE_POSTGRES=1 but DATABASE_URL is not set");
}

if (!existsSync(binary)) {
  throw new Error(`no ratchet binary at ${binary}: build it with cargo build -p ratchet-cli, or set RATCHET_BIN`);
}

for (const [backend, store] of backends) {
  describe(`the worker on ${backend}`, async () => {
    const { url, child } = await serve(store());
    after(() => child.kill());
    const client = connect(url);
    const options = { queue: "ts", retry: { max_attempts: 3, initial_interval_ms: 1, max_interval_ms: 1 } };

    test("runs tasks, retries failures, and makes dead letters", async () => {
      let flakyRuns = 0;
      const worker = new Worker(url, {
        queues: { ts: 8 },
        tasks: {
          double: (n: number) => n * 2,
          info: async (_: unknown, info: TaskInfo) => ({ attempt: info.attempt, name: info.name, queue: info.queue }),
          flaky: () => {
            flakyRuns += 1;
            if (flakyRuns < 2) {
              throw new Error("first attempt fails");
            }
            return "ok";
          },
          broken: () => {
            throw new NonRetryableError("no", "Broken");
          },
        },
      });
      const [double, info, flaky, broken] = await client.enqueueMany(
        ["double", "info", "flaky", "broken"].map((name) => ({ name, input: 21, options })),
        true,
      );
      worker.start();
      try {
        const done = await client.taskWait(double!, 20_000);
        assert.equal(done.state, "Completed");
        assert.equal(done.output, 42);
        assert.deepEqual((await client.taskWait(info!, 20_000)).output, { attempt: 1, name: "info", queue: "ts" });
        const retried = await client.taskWait(flaky!, 20_000);
        assert.deepEqual([retried.state, retried.attempt, retried.output], ["Completed", 2, "ok"]);
        const dead = await client.taskWait(broken!, 20_000);
        assert.deepEqual([dead.state, dead.attempt], ["Dead", 1]);
        assert.equal((dead.error as { kind?: string }).kind, "Broken");
      } finally {
        await worker.stop();
      }
    });

    test("a queue runs at most its concurrency at once", async () => {
      let running = 0;
      let peak = 0;
      const worker = new Worker(url, {
        queues: { narrow: 2 },
        tasks: {
          gate: async (n: number) => {
            running += 1;
            peak = Math.max(peak, running);
            await new Promise((r) => setTimeout(r, 100));
            running -= 1;
            return n;
          },
        },
      });
      const ids = await client.enqueueMany(
        [1, 2, 3, 4, 5, 6].map((n) => ({ name: "gate", input: n, options: { queue: "narrow" } })),
        true,
      );
      worker.start();
      try {
        for (const id of ids) {
          assert.equal((await client.taskWait(id, 20_000)).state, "Completed");
        }
        assert.equal(peak, 2, "two at once, never more");
      } finally {
        await worker.stop();
      }
    });

    test("a cancelled task aborts its handler's signal", async () => {
      let started!: () => void;
      const running = new Promise<void>((r) => (started = r));
      let aborted = false;
      const worker = new Worker(url, {
        queues: { ts: 2 },
        leaseMs: 1_000,
        tasks: {
          long: async (_: unknown, info: TaskInfo) => {
            started();
            await new Promise<void>((resolve) => {
              const timer = setTimeout(resolve, 60_000);
              info.signal.addEventListener("abort", () => {
                aborted = true;
                clearTimeout(timer);
                resolve();
              });
            });
          },
        },
      });
      const id = await client.enqueue("long", null, options, true);
      worker.start();
      try {
        await running;
        assert.equal(await client.taskCancel(id), "requested");
        const done = await client.taskWait(id, 20_000);
        assert.equal(done.state, "Cancelled");
        assert.ok(aborted, "the handler saw the abort");
      } finally {
        await worker.stop();
      }
    });

    test("heartbeats keep a task longer than its lease, and a stop waits for it", async () => {
      let started!: () => void;
      const running = new Promise<void>((r) => (started = r));
      let runs = 0;
      const worker = new Worker(url, {
        queues: { ts: 2 },
        leaseMs: 1_000,
        tasks: {
          slow: async (n: number) => {
            runs += 1;
            started();
            await new Promise((r) => setTimeout(r, 2_500));
            return n + 1;
          },
        },
      });
      const id = await client.enqueue("slow", 1, options, true);
      worker.start();
      await running;
      await worker.stop();
      const done = await client.task(id);
      assert.deepEqual([done.state, done.output, done.attempt], ["Completed", 2, 1]);
      assert.equal(runs, 1, "one attempt, never taken over");
    });

    test("a killed worker's attempt is taken over when its lease runs out", async () => {
      const id = await client.enqueue("echo", "x", options, true);
      // A worker that claims and dies: nothing renews its lease of a second.
      const { response } = await client.api.POST("/v1/workers/{worker}/claim", {
        params: { path: { worker: "killed" } },
        body: { queues: [{ queue: "ts", limit: 1 }], names: ["echo"], lease_ms: 1_000 },
      });
      assert.equal(response.status, 200);
      const worker = new Worker(url, { queues: { ts: 2 }, tasks: { echo: (s: string, info: TaskInfo) => `${s}${info.attempt}` } });
      worker.start();
      try {
        const done = await client.taskWait(id, 20_000);
        assert.deepEqual([done.state, done.output, done.attempt], ["Completed", "x2", 2]);
      } finally {
        await worker.stop();
      }
    });

    test("runs the activities of a workflow the server runs", async () => {
      const server = await serve(store(), true);
      try {
        const remote = connect(server.url);
        const worker = new Worker(server.url, {
          activities: { "ts.twice": (x: { n: number }) => x.n * 2 },
        });
        worker.start();
        try {
          const source =
            "document: {dsl: '1.0.0', namespace: ts, name: doubling, version: '1.0.0'}\n" +
            "do:\n  - twice:\n      call: ts.twice\n      with: {n: 21}\n";
          // The worker's first claim makes `ts.twice` known to the server.
          let applied = 0;
          for (let tries = 0; tries < 50 && applied === 0; tries++) {
            const { response } = await remote.api.POST("/v1/workflows", { body: { source } });
            if (response.status === 201) {
              applied = 201;
            } else {
              assert.equal(response.status, 422);
              await new Promise((r) => setTimeout(r, 200));
            }
          }
          assert.equal(applied, 201, "the worker's activity became known");
          const id = await remote.start("ts/doubling", {});
          const done = await remote.wait(id, 20_000);
          assert.deepEqual([done.status, done.output], ["Completed", 42]);
        } finally {
          await worker.stop();
        }
      } finally {
        server.child.kill();
      }
    });
  });
}
