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
    args = parser.parse_args()
    asyncio.run(drain(args.url, args.schema, args.count, args.concurrency, args.batch))


if __name__ == "__main__":
    main()
