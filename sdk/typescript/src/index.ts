/**
 * Ratchet from TypeScript. `connect` gives a client on `ratchet server` typed from the
 * server's OpenAPI document (every route, with its request and answer types), with shortcuts
 * for the common calls; `Worker` runs task and activity handlers through the server's worker
 * routes, so a worker needs only the server's address and a token.
 */

import createClient from "openapi-fetch";

import type { components, paths } from "./api.js";

export type { components, paths } from "./api.js";

/** A task as the API shows it. */
export type Task = components["schemas"]["TaskView"];

/** An error the server answered with (an RFC 9457 problem). */
export class RatchetError extends Error {
  /** The HTTP status. */
  readonly status: number;
  /** The problem's stable type, such as `urn:ratchet:problem:not-found`. */
  readonly type: string;
  /** The part of the request at fault, when the server names one. */
  readonly field?: string;

  constructor(status: number, problem: { type?: string; detail?: string; title?: string; field?: string }) {
    const field = problem.field ? `${problem.field}: ` : "";
    super(`${field}${problem.detail ?? problem.title ?? `HTTP ${status}`}`);
    this.name = "RatchetError";
    this.status = status;
    this.type = problem.type ?? "";
    this.field = problem.field;
  }
}

/** Where a client or worker reaches the server. */
export interface ConnectOptions {
  /** A token from `ratchet tokens create`, when the server asks for one. */
  token?: string;
}

/** Options of a task to enqueue, as the API takes them. */
export type TaskOptions = NonNullable<components["schemas"]["EnqueueRequest"]["options"]>;

/** A client on `ratchet server` at `url`. */
export class Client {
  /** Every route, typed: `client.api.GET("/v1/queues")`. */
  readonly api: ReturnType<typeof createClient<paths>>;

  constructor(url: string, options: ConnectOptions = {}) {
    this.api = createClient<paths>({
      baseUrl: url.replace(/\/+$/, ""),
      headers: options.token ? { Authorization: `Bearer ${options.token}` } : {},
    });
  }

  /** Starts an instance of orchestration `name`; answers its id. */
  async start(name: string, input?: unknown, id?: string): Promise<string> {
    const { data, error, response } = await this.api.POST("/v1/instances", {
      body: { name, input, id },
    });
    return answer(data, error, response).id;
  }

  /** Waits until an instance finishes (or `timeoutMs` passes): its status and output. */
  async wait(id: string, timeoutMs = 30_000) {
    const { data, error, response } = await this.api.GET("/v1/instances/{id}/wait", {
      params: { path: { id }, query: { timeout_ms: timeoutMs } },
    });
    return answer(data, error, response);
  }

  /** Enqueues a task; answers its id. `allowUnknown` accepts a name no worker runs yet. */
  async enqueue(name: string, input?: unknown, options?: TaskOptions, allowUnknown = false): Promise<number> {
    const { data, error, response } = await this.api.POST("/v1/tasks", {
      params: { query: { allow_unknown: allowUnknown } },
      body: { name, input, options },
    });
    return answer(data, error, response).id;
  }

  /** Enqueues many tasks in one request, all or none; answers their ids. */
  async enqueueMany(
    tasks: { name: string; input?: unknown; options?: TaskOptions }[],
    allowUnknown = false,
  ): Promise<number[]> {
    const { data, error, response } = await this.api.POST("/v1/tasks/batch", {
      params: { query: { allow_unknown: allowUnknown } },
      body: { tasks },
    });
    return answer(data, error, response).map((o) => o.id);
  }

  /** A task, running or finished. */
  async task(id: number): Promise<Task> {
    const { data, error, response } = await this.api.GET("/v1/tasks/{id}", {
      params: { path: { id } },
    });
    return answer(data, error, response);
  }

  /** Waits until a task finishes (or `timeoutMs` passes): the task as it stands. */
  async taskWait(id: number, timeoutMs = 30_000): Promise<Task> {
    const { data, error, response } = await this.api.GET("/v1/tasks/{id}/wait", {
      params: { path: { id }, query: { timeout_ms: timeoutMs } },
    });
    return answer(data, error, response);
  }

  /** Cancels a task: `done`, or `requested` for a running one (its worker is told). */
  async taskCancel(id: number): Promise<string> {
    const { data, error, response } = await this.api.POST("/v1/tasks/{id}/cancel", {
      params: { path: { id } },
    });
    return answer(data, error, response).outcome;
  }
}

/** A client on `ratchet server` at `url`. */
export function connect(url: string, options: ConnectOptions = {}): Client {
  return new Client(url, options);
}

function answer<T>(data: T | undefined, error: unknown, response: Response): T {
  if (data === undefined || !response.ok) {
    throw new RatchetError(response.status, (error ?? {}) as { type?: string; detail?: string });
  }
  return data;
}

/** What a handler gets besides its input. */
export interface TaskInfo {
  id: number;
  name: string;
  queue: string;
  attempt: number;
  maxAttempts: number;
  metadata: unknown;
  /** For an activity, the orchestration step it serves. */
  activity?: { instance: string; execution: number; step: number };
  /** Aborted when a client cancels the task, its lease is lost, or its timeout passes. */
  signal: AbortSignal;
}

/** A task or activity handler: its result is the attempt's output; a throw fails it. */
export type Handler = (input: any, info: TaskInfo) => unknown | Promise<unknown>;

/** Thrown by a handler to end its task without another attempt. */
export class NonRetryableError extends Error {
  constructor(message: string, readonly kind = "NonRetryable") {
    super(message);
    this.name = kind;
  }
}

/** Thrown by a handler to run the task again after `delayMs` without spending an attempt. */
export class Snooze extends Error {
  constructor(readonly delayMs: number) {
    super(`snoozed for ${delayMs} ms`);
    this.name = "Snooze";
  }
}

/** How a worker runs. */
export interface WorkerOptions extends ConnectOptions {
  /** Standalone task handlers, by name. */
  tasks?: Record<string, Handler>;
  /** Activity handlers of orchestrations, by name. */
  activities?: Record<string, Handler>;
  /** Queues to take tasks from, each with its concurrency (default `{ default: 64 }`). */
  queues?: Record<string, number>;
  /** Activity attempts at once (default 64, when it runs activities). */
  activityConcurrency?: number;
  /** How long a lease lasts unless renewed, in ms (default 30,000). */
  leaseMs?: number;
  /** This worker's name in leases and `GET /v1/workers` (default: generated). */
  name?: string;
}

type Attempt = components["schemas"]["AttemptView"];
type Result = components["schemas"]["ResultBody"];

/** An attempt running here. Its abort controller is made when first needed (the handler
 * reads its signal, or it answers with a promise): a handler that answers at once costs no
 * controller, listener or timer. */
interface Running {
  fence: number;
  queue: string;
  abort?: AbortController;
  cancelled: boolean;
  done: Promise<void>;
}

function abortOf(r: Running): AbortController {
  r.abort ??= new AbortController();
  return r.abort;
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return typeof (v as { then?: unknown } | null)?.then === "function";
}

const ACTIVITIES = "$activities";
const MAX_CLAIM = 1_000;
const CLAIM_WAIT_MS = 2_000;

/**
 * Runs handlers for the attempts the server hands out: claims (long-polling when none is
 * ready) up to each queue's free concurrency, renews leases while handlers run, and reports
 * ends in batches. `stop()` stops claiming, lets running handlers finish and reports them.
 */
export class Worker {
  readonly name: string;
  /** Attempts reported since the start. */
  completed = 0;
  private readonly client: Client;
  private readonly handlers: Record<string, Handler>;
  private readonly queues: Record<string, number>;
  private readonly activityConcurrency: number;
  private readonly leaseMs: number;
  private readonly names: string[];
  private readonly running = new Map<number, Running>();
  /** Attempts asked for by claims under way, by queue: room they may fill. */
  private readonly asked = new Map<string, number>();
  private results: Result[] = [];
  private flushing: Promise<void> | undefined;
  private stopping = false;
  /** Claim loops waiting for a free slot. */
  private waiting: (() => void)[] = [];
  private loops: Promise<void>[] = [];
  private beat: ReturnType<typeof setInterval> | undefined;

  constructor(url: string, options: WorkerOptions) {
    this.client = new Client(url, options);
    const tasks = options.tasks ?? {};
    const activities = options.activities ?? {};
    this.handlers = { ...tasks, ...activities };
    this.names = Object.keys(this.handlers).sort();
    if (this.names.length === 0) {
      throw new Error("nothing to run: give tasks or activities");
    }
    this.queues = Object.keys(tasks).length > 0 ? { ...(options.queues ?? { default: 64 }) } : {};
    for (const [queue, n] of Object.entries(this.queues)) {
      if (!Number.isInteger(n) || n < 1) {
        throw new Error(`queue ${queue}: concurrency must be a whole number from 1, got ${n}`);
      }
    }
    this.activityConcurrency = Object.keys(activities).length > 0 ? (options.activityConcurrency ?? 64) : 0;
    this.leaseMs = options.leaseMs ?? 30_000;
    this.name = options.name ?? `node-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
  }

  /** Starts claiming; returns at once. */
  start(): void {
    this.loops.push(this.claimLoop());
    this.beat = setInterval(() => void this.heartbeat(), Math.max(200, this.leaseMs / 3));
  }

  /** Stops claiming, lets running handlers finish, reports them. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wake();
    await Promise.allSettled(this.loops);
    await Promise.allSettled([...this.running.values()].map((r) => r.done));
    while (this.flushing) {
      await this.flushing;
    }
    clearInterval(this.beat);
  }

  private room(): { queues: { queue: string; limit: number }[]; activities: number } {
    const busy = new Map<string, number>();
    for (const r of this.running.values()) {
      busy.set(r.queue, (busy.get(r.queue) ?? 0) + 1);
    }
    for (const [queue, n] of this.asked) {
      busy.set(queue, (busy.get(queue) ?? 0) + n);
    }
    let left = MAX_CLAIM;
    const queues = [];
    for (const [queue, n] of Object.entries(this.queues)) {
      const limit = Math.min(n - (busy.get(queue) ?? 0), left);
      if (limit > 0) {
        queues.push({ queue, limit });
        left -= limit;
      }
    }
    const activities = Math.min(Math.max(0, this.activityConcurrency - (busy.get(ACTIVITIES) ?? 0)), left);
    return { queues, activities };
  }

  private async claimLoop(): Promise<void> {
    let backoff = 100;
    while (!this.stopping) {
      const { queues, activities } = this.room();
      if (queues.length === 0 && activities === 0) {
        await new Promise<void>((resolve) => this.waiting.push(resolve));
        continue;
      }
      let claimed: Attempt[];
      const asking: [string, number][] = queues.map((q) => [q.queue, q.limit]);
      if (activities > 0) {
        asking.push([ACTIVITIES, activities]);
      }
      for (const [queue, n] of asking) {
        this.asked.set(queue, (this.asked.get(queue) ?? 0) + n);
      }
      const answered = () => {
        for (const [queue, n] of asking) {
          this.asked.set(queue, (this.asked.get(queue) ?? 0) - n);
        }
      };
      try {
        const { data, error, response } = await this.client.api.POST("/v1/workers/{worker}/claim", {
          params: { path: { worker: this.name } },
          body: { queues, activities, names: this.names, lease_ms: this.leaseMs, wait_ms: CLAIM_WAIT_MS },
        });
        claimed = answer(data, error, response).tasks;
        backoff = 100;
      } catch (e) {
        answered();
        if (e instanceof RatchetError && e.status === 422) {
          throw e;
        }
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 5_000);
        continue;
      }
      answered();
      for (const attempt of claimed) {
        if (this.stopping) {
          // Claimed as the stop began: given back, no attempt spent.
          await this.client.api.POST("/v1/workers/{worker}/release", {
            params: { path: { worker: this.name } },
            body: { tasks: [{ id: attempt.id, fence: attempt.fence }] },
          });
          continue;
        }
        this.run(attempt);
      }
    }
  }

  private run(attempt: Attempt): void {
    const entry: Running = { fence: attempt.fence, queue: attempt.queue, cancelled: false, done: Promise.resolve() };
    this.running.set(attempt.id, entry);
    let answered: unknown;
    try {
      const handler = this.handlers[attempt.name];
      if (!handler) {
        throw new NonRetryableError(`no handler named ${attempt.name}`, "UnknownTask");
      }
      const info: TaskInfo = {
        id: attempt.id,
        name: attempt.name,
        queue: attempt.queue,
        attempt: attempt.attempt,
        maxAttempts: attempt.max_attempts,
        metadata: attempt.metadata,
        activity: attempt.activity ?? undefined,
        get signal() {
          return abortOf(entry).signal;
        },
      };
      answered = handler(attempt.input, info);
    } catch (e) {
      this.ended(attempt, entry, this.failure(attempt, entry, e));
      return;
    }
    if (!isThenable(answered)) {
      this.ended(attempt, entry, this.completion(attempt, answered));
      return;
    }
    const abort = abortOf(entry);
    const timeout = setTimeout(() => abort.abort(new Error("timeout")), attempt.timeout_ms);
    entry.done = (async () => {
      let result: Result;
      try {
        const output = await Promise.race([
          answered,
          new Promise<never>((_, reject) => abort.signal.addEventListener("abort", () => reject(abort.signal.reason), { once: true })),
        ]);
        result = this.completion(attempt, output);
      } catch (e) {
        result = this.failure(attempt, entry, e);
      } finally {
        clearTimeout(timeout);
      }
      this.ended(attempt, entry, result);
    })();
  }

  private completion(attempt: Attempt, output: unknown): Result {
    return { id: attempt.id, fence: attempt.fence, outcome: "completed", output: output === undefined ? null : output };
  }

  private failure(attempt: Attempt, entry: Running, e: unknown): Result {
    const key = { id: attempt.id, fence: attempt.fence };
    if (entry.cancelled) {
      return { ...key, outcome: "cancelled" };
    }
    if (e instanceof Snooze) {
      return { ...key, outcome: "snoozed", delay_ms: e.delayMs };
    }
    const error = e instanceof Error ? e : new Error(String(e));
    const kind = error instanceof NonRetryableError ? error.kind : entry.abort?.signal.aborted ? "Timeout" : error.name || "Error";
    return { ...key, outcome: "failed", error: { kind, message: error.message }, retryable: !(error instanceof NonRetryableError) };
  }

  /** An attempt's end: its slot freed, its result queued for the next report. */
  private ended(attempt: Attempt, entry: Running, result: Result): void {
    if (this.running.get(attempt.id) === entry) {
      this.running.delete(attempt.id);
    }
    this.wake();
    if (entry.abort?.signal.reason === LOST) {
      return; // another worker has it; a report would be refused
    }
    this.results.push(result);
    if (!this.flushing) {
      this.flushing = this.flush().finally(() => (this.flushing = undefined));
    }
  }

  /** Reports the ends gathered meanwhile, a batch per request. */
  private async flush(): Promise<void> {
    await Promise.resolve(); // the ends of this turn of the event loop go together
    while (this.results.length > 0) {
      const results = this.results.splice(0, MAX_CLAIM);
      for (let attempt = 0; attempt < 5; attempt++) {
        try {
          const { data, error, response } = await this.client.api.POST("/v1/workers/{worker}/complete", {
            params: { path: { worker: this.name } },
            body: { results },
          });
          answer(data, error, response);
          this.completed += results.length;
          break;
        } catch (e) {
          if (e instanceof RatchetError && e.status < 500) {
            break; // refused: retrying would not help
          }
          await sleep(200 * (attempt + 1));
        }
      }
    }
  }

  /** Wakes the claim loops that wait for a free slot. */
  private wake(): void {
    for (const resolve of this.waiting.splice(0)) {
      resolve();
    }
  }

  private async heartbeat(): Promise<void> {
    if (this.running.size === 0) {
      return;
    }
    const held = [...this.running.entries()].map(([id, r]) => ({ id, fence: r.fence }));
    try {
      for (let i = 0; i < held.length; i += MAX_CLAIM) {
        const { data, error, response } = await this.client.api.POST("/v1/workers/{worker}/heartbeat", {
          params: { path: { worker: this.name } },
          body: { tasks: held.slice(i, i + MAX_CLAIM), lease_ms: this.leaseMs },
        });
        for (const lease of answer(data, error, response).tasks) {
          const r = this.running.get(lease.id);
          if (!r || r.fence !== lease.fence) {
            continue;
          }
          if (lease.lease === "cancel") {
            r.cancelled = true;
            abortOf(r).abort(new Error("cancelled"));
          } else if (lease.lease === "lost") {
            abortOf(r).abort(LOST);
          }
        }
      }
    } catch {
      // Out of reach: the next heartbeat tries again, well within the lease.
    }
  }
}

const LOST = new Error("the lease was lost");

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
