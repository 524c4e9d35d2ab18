"""`python -m ratchet bench tasks drain`: Python handlers draining a backlog of no-op tasks.

    python -m ratchet bench tasks drain --url postgres://... --count 100000
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

from . import _json, connect
from .worker import Worker


async def drain(url: str, schema: str | None, count: int, concurrency: int, batch: int) -> None:
    client = await connect(url, schema=schema)
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    chunk = 5000
    for first in range(0, count, chunk):
        n = min(chunk, count - first)
        await client.enqueue_many([("noop", None, {"queue": queue})] * n)
    enqueued = time.perf_counter() - started

    async def noop(_input: object) -> None:
        return None

    worker = Worker(url, schema=schema, queues={queue: concurrency}, tasks={"noop": noop},
                    batch=batch)
    started = time.perf_counter()
    await worker.start()
    while worker.completed < count:
        await asyncio.sleep(0.01)
    await worker.stop()
    took = time.perf_counter() - started
    print(f"enqueued {count:,} tasks in {enqueued:.2f} s ({count / enqueued:,.0f}/s)")
    print(f"drained {count:,} no-op tasks with Python handlers in {took:.2f} s: "
          f"{count / took:,.0f} tasks/s (concurrency {concurrency}, batch {batch}, "
          f"JSON by {'orjson' if _json.FAST else 'json'})")


async def fanout(url: str, schema: str | None, in_flight: int, seconds: float, warmup: float,
                 activities: int, activity_ms: int) -> None:
    from .workflow import gather

    async def fanout_step(i: int) -> int:
        await asyncio.sleep(activity_ms / 1000)
        return i

    async def fanout_py(ctx, n: int) -> int:
        return sum(await gather(*(ctx.activity("fanout_step", i) for i in range(n))))

    worker = Worker(url, schema=schema, tasks={}, activities={"fanout_step": fanout_step},
                    workflows={"fanout_py": fanout_py})
    await worker.start()
    client = worker.client
    latencies: list = []
    start = time.perf_counter()
    measure_from, deadline = start + warmup, start + warmup + seconds

    async def loop() -> None:
        while time.perf_counter() < deadline:
            began = time.perf_counter()
            id = await client.start("fanout_py", activities)
            await client.result(id, timeout=60)
            if began >= measure_from:
                latencies.append(time.perf_counter() - began)

    await asyncio.gather(*(loop() for _ in range(in_flight)))
    await worker.stop()
    latencies.sort()
    n = len(latencies)
    p = lambda q: latencies[min(n - 1, int(q * n))] * 1000  # noqa: E731
    print(f"fan-out of {activities} Python activities ({activity_ms} ms each) in a Python "
          f"workflow, {in_flight} in flight: {n / seconds:,.1f} orch/s, "
          f"p50 {p(0.5):.1f} ms, p99 {p(0.99):.1f} ms ({n} measured over {seconds:.0f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m ratchet")
    sub = parser.add_subparsers(dest="command", required=True)
    bench = sub.add_parser("bench").add_subparsers(dest="what", required=True)
    tasks = bench.add_parser("tasks").add_subparsers(dest="scenario", required=True)
    d = tasks.add_parser("drain", help="drain a backlog of no-op tasks with Python handlers")
    d.add_argument("--url", default="ratchet-bench.db",
                   help="postgres://... or a SQLite file (default ratchet-bench.db)")
    d.add_argument("--schema", default=None)
    d.add_argument("--count", type=int, default=100_000)
    d.add_argument("--concurrency", type=int, default=1024)
    d.add_argument("--batch", type=int, default=512)
    f = bench.add_parser("fanout", help="a closed loop of fan-out workflows written in Python")
    f.add_argument("--url", default="ratchet-bench.db")
    f.add_argument("--schema", default=None)
    f.add_argument("--in-flight", type=int, default=20)
    f.add_argument("--duration", type=float, default=10.0)
    f.add_argument("--warmup", type=float, default=2.0)
    f.add_argument("--activities", type=int, default=5)
    f.add_argument("--activity-ms", type=int, default=10)
    args = parser.parse_args()
    if args.what == "fanout":
        asyncio.run(fanout(args.url, args.schema, args.in_flight, args.duration, args.warmup,
                           args.activities, args.activity_ms))
    else:
        asyncio.run(drain(args.url, args.schema, args.count, args.concurrency, args.batch))


if __name__ == "__main__":
    main()
