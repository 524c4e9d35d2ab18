"""A worker over `ratchet server`'s HTTP API, for a process with the server's address (and a
token) but no database: it claims task and activity attempts (long-polling when none is
ready), renews their leases while they run, and reports how each ended, in batches. The
server keeps the leases, fences and attempt accounting of in-process workers: a worker that
dies loses its attempts to others when their leases run out, and what follows a failure is
decided by the task's own retry policy."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from typing import Any, Dict, List, Optional, Tuple

from . import _ratchet
from ._json import dumps, loads
from .http import HttpClient

log = logging.getLogger("ratchet.worker")

#: How long one claim waits on the server for work (a stop is seen within it).
_CLAIM_WAIT_MS = 2_000

#: The most attempts one claim takes (the server's limit).
_MAX_CLAIM = 1_000

#: The concurrency of activity attempts, when the worker runs activities.
_ACTIVITY_CONCURRENCY = 64


class RemoteWorker:
    """The HTTP side of :class:`ratchet.Worker` for an ``http://`` or ``https://`` address."""

    def __init__(self, url: str, token: Optional[str], queues: List[Tuple[str, int, Any]],
                 handlers: Dict[str, Any], activities: Dict[str, Any], lease: float,
                 label: Optional[str], run_one: Any) -> None:
        self._http = HttpClient(url, token=token)
        self._queues = {name: concurrency for name, concurrency, _ in queues} if handlers else {}
        self._activities = _ACTIVITY_CONCURRENCY if activities else 0
        self._names = sorted(set(handlers) | set(activities))
        self._lease_ms = int(lease * 1000)
        name = f"{label or 'python'}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.name = name
        self._run_one = run_one
        # Attempts running: id -> (fence, queue, asyncio task).
        self._running: Dict[int, Tuple[int, str, "asyncio.Task[tuple]"]] = {}
        self._cancelled: set = set()
        self._results: list = []
        self._flushing: Optional["asyncio.Task[None]"] = None
        self._slot_freed = asyncio.Event()
        self._stopping = False
        self.completed = 0

    async def start(self) -> None:
        self._claims = asyncio.ensure_future(self._claim_loop())
        self._beats = asyncio.ensure_future(self._beat_loop())

    def client(self) -> HttpClient:
        return self._http

    async def _post(self, operation: str, body: Any, timeout: float = 60.0) -> Any:
        return await self._http._op(operation, self.name, body=body, timeout=timeout, raw=True)

    def _room(self) -> Tuple[list, int]:
        busy: Dict[str, int] = {}
        for _, queue, _ in self._running.values():
            busy[queue] = busy.get(queue, 0) + 1
        queues = [{"queue": q, "limit": n - busy.get(q, 0)} for q, n in self._queues.items()
                  if n - busy.get(q, 0) > 0]
        activities = max(0, self._activities - busy.get("$activities", 0))
        # A claim takes at most _MAX_CLAIM in all.
        left = _MAX_CLAIM
        for q in queues:
            q["limit"] = min(q["limit"], left)
            left -= q["limit"]
        queues = [q for q in queues if q["limit"] > 0]
        return queues, min(activities, left)

    async def _claim_loop(self) -> None:
        backoff = 0.1
        while not self._stopping:
            queues, activities = self._room()
            if not queues and not activities:
                self._slot_freed.clear()
                await self._slot_freed.wait()
                continue
            body = {"queues": queues, "activities": activities, "names": self._names,
                    "lease_ms": self._lease_ms, "wait_ms": _CLAIM_WAIT_MS}
            try:
                claimed = await self._post("workers_claim", body, timeout=_CLAIM_WAIT_MS / 1000 + 30)
            except _ratchet.InvalidInput:
                raise
            except Exception as e:  # the server out of reach: try again, backing off
                log.warning("claim failed: %s; retrying in %.1fs", e, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            backoff = 0.1
            for item in claimed["tasks"]:
                if self._stopping:
                    # Claimed as the stop began: given back, no attempt spent.
                    await self._post("workers_release", {"tasks": [
                        {"id": item["id"], "fence": item["fence"]}]})
                    continue
                running = asyncio.ensure_future(self._one(item))
                self._running[item["id"]] = (item["fence"], item["queue"], running)
                running.add_done_callback(
                    lambda t, id=item["id"], fence=item["fence"]: self._done(t, id, fence))

    async def _one(self, item: dict) -> dict:
        key = (item["id"], item["fence"])
        _, ok, payload = await self._run_one(
            (None, item["id"], item["name"], item["attempt"], dumps(item["input"])))
        if ok:
            return {"id": key[0], "fence": key[1], "outcome": "completed",
                    "output": loads(payload)}
        return {"id": key[0], "fence": key[1], "outcome": "failed", "error": loads(payload)}

    def _done(self, running: "asyncio.Task[dict]", id: int, fence: int) -> None:
        held = self._running.get(id)
        if held is not None and held[2] is running:
            del self._running[id]
        self._slot_freed.set()
        if running.cancelled():
            if id in self._cancelled:
                self._cancelled.discard(id)
                self._results.append({"id": id, "fence": fence, "outcome": "cancelled"})
            else:
                return  # lost: another worker has it; a report would be refused
        else:
            self._results.append(running.result())
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.ensure_future(self._flush())

    async def _flush(self) -> None:
        """Reports the ends gathered meanwhile, in one request each round."""
        while self._results:
            results, self._results = self._results[:1000], self._results[1000:]
            for attempt in range(5):
                try:
                    await self._post("workers_complete", {"results": results})
                    self.completed += len(results)
                    break
                except _ratchet.InvalidInput:
                    log.error("the server refused %d results", len(results))
                    break
                except Exception as e:  # out of reach: the leases outlast a short retry
                    log.warning("reporting results failed: %s", e)
                    await asyncio.sleep(0.2 * (attempt + 1))

    async def _beat_loop(self) -> None:
        every = max(0.2, self._lease_ms / 3000)
        while True:
            await asyncio.sleep(every)
            if not self._running:
                continue
            held = [{"id": id, "fence": fence} for id, (fence, _, _) in self._running.items()]
            try:
                leases = await self._post("workers_heartbeat",
                                          {"tasks": held, "lease_ms": self._lease_ms})
            except Exception as e:
                log.warning("heartbeat failed: %s", e)
                continue
            for lease in leases["tasks"]:
                running = self._running.get(lease["id"])
                if running is None or running[0] != lease["fence"]:
                    continue
                if lease["lease"] == "cancel":
                    self._cancelled.add(lease["id"])
                    running[2].cancel()
                elif lease["lease"] == "lost":
                    log.warning("task %d: its lease was lost; stopping it", lease["id"])
                    running[2].cancel()

    async def shutdown(self) -> None:
        """Stops claiming, lets what runs finish, reports it, and stops renewing."""
        self._stopping = True
        self._slot_freed.set()
        await asyncio.gather(self._claims, return_exceptions=True)
        running = [t for _, _, t in list(self._running.values())]
        await asyncio.gather(*running, return_exceptions=True)
        while self._flushing is not None and not self._flushing.done():
            await self._flushing
        self._beats.cancel()
        await asyncio.gather(self._beats, return_exceptions=True)
