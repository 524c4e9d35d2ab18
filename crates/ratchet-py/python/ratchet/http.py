"""The client over `ratchet server`'s HTTP API: the same methods as :class:`ratchet.Client`,
for a process that has no database credentials, only the server's URL (and a token when the
server asks for one). Requests run on a thread each (the standard library's `urllib`), so
the event loop never blocks; errors are the same exceptions, from the server's problem
types. Times come back as milliseconds since the Unix epoch, as from the direct client."""

from __future__ import annotations

import asyncio
import datetime
import json as _stdjson
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Iterable, Mapping, Optional, Union

from . import _ratchet
from ._json import dumps, encode, loads
from .client import _I64, _U32, _check_int, _check_numbers, _schedule_body, _Shared, _task_specs

_PROBLEMS = {
    "not-found": _ratchet.NotFound,
    "already-exists": _ratchet.AlreadyExists,
    "invalid-input": _ratchet.InvalidInput,
    "bad-request": _ratchet.InvalidInput,
    "too-large": _ratchet.InvalidInput,
    "invalid-workflow": _ratchet.InvalidInput,
    "unknown-name": _ratchet.UnknownName,
    "append-conflict": _ratchet.AppendConflict,
    "finished": _ratchet.Refused,
    "task-state": _ratchet.Refused,
    "version-changed": _ratchet.Refused,
    "workflow-in-use": _ratchet.Refused,
    "schedule-exists": _ratchet.AlreadyExists,
}

_SCHEDULE_TIMES = ("start_at", "end_at", "last_tick", "next_fire_at", "buffered", "created_at",
                   "updated_at", "settled_through")


def _iso(seconds: Any, field: str) -> Any:
    """A Unix time in seconds as RFC 3339, refused as the direct client refuses it."""
    if seconds is None:
        return None
    seconds = _ratchet.check_unix_time(field, seconds)
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat()


def _duration_ms(seconds: Any, field: str) -> int:
    """Seconds as whole milliseconds, refused as the direct client refuses them."""
    return int(_ratchet.check_seconds(field, seconds) * 1000)


def _schedule_input(name: str, spec: str, definition: Mapping[str, Any]) -> dict:
    """The direct client's schedule definition as the API's."""
    body = dict(definition)
    out = {"name": name, "spec": spec}
    for key in ("workflow", "task", "input", "time_zone", "overlap", "catch_up",
                "remaining_actions"):
        if body.get(key) is not None:
            out[key] = body[key]
    if body.get("options") is not None:
        out["options"] = _task_options(body["options"])
    if body.get("jitter") is not None:
        out["jitter_ms"] = _duration_ms(body["jitter"], "schedule jitter")
    if body.get("paused") is not None:
        out["paused"], out["note"] = True, body["paused"]
    for key in ("start_at", "end_at"):
        if body.get(key) is not None:
            out[key] = _iso(body[key], f"schedule {key}")
    return out


def _schedule(view: dict) -> dict:
    """A schedule as the direct client answers it (times in ms)."""
    out = dict(view)
    out["remaining"] = out.pop("remaining_actions", None)
    for key in _SCHEDULE_TIMES:
        out[key] = _ms(out.get(key))
    return out


def _fire(name: str, view: dict) -> dict:
    """A fire as the direct client answers it."""
    fire = {"schedule": name, "nominal": _ms(view["tick"]), "actual": _ms(view["fired_at"]),
            "kind": view["kind"], "run": view.get("run"), "skipped": view.get("skipped")}
    if "status" in view:
        fire["status"] = view["status"]
    return fire

_TIMES = ("created_at", "updated_at", "finished_at", "run_at", "recorded_at")


def _ms(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    return int(datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)


def _times(record: Any) -> Any:
    if isinstance(record, dict):
        for key in _TIMES:
            if key in record:
                record[key] = _ms(record[key])
    return record


def _task_options(options: Mapping[str, Any]) -> dict:
    """The direct client's task options as the API's."""
    out: dict = {}
    retry: dict = {}
    _check_numbers(options, "task option")
    for key, value in options.items():
        if value is None:
            continue
        if key in ("queue", "priority", "unique_key", "metadata"):
            out[key] = value
        elif key in ("delay", "timeout"):
            out[f"{key}_ms"] = _duration_ms(value, f"task option {key}")
        elif key == "run_at":
            out["run_at"] = _iso(value, "task option run_at")
        elif key == "max_attempts":
            retry["max_attempts"] = value
        elif key == "retry_delay":
            retry["initial_interval_ms"] = _duration_ms(value, "task option retry_delay")
        else:
            raise _ratchet.InvalidInput(f"unknown task option {key!r}")
    if retry:
        out["retry"] = retry
    return out


class HttpClient(_Shared):
    """A client on `ratchet server` at `url`. Make one with
    ``ratchet.connect("http://host:8080", token=...)``."""

    def __init__(self, url: str, token: Optional[str] = None, timeout: float = 60.0) -> None:
        self._base = url.rstrip("/")
        self._token = token
        self._timeout = timeout

    def _call(self, method: str, path: str, body: Any = None, query: Optional[dict] = None,
              timeout: Optional[float] = None) -> Any:
        url = self._base + path
        if query:
            query = {k: v for k, v in query.items() if v is not None and v != ""}
            if query:
                url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else encode(body, "request").encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self._token:
            request.add_header("Authorization", f"Bearer {self._token}")
        try:
            with urllib.request.urlopen(request, timeout=timeout or self._timeout) as response:
                text = response.read()
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                problem = _stdjson.loads(raw)
            except ValueError:
                problem = {"title": f"HTTP {e.code}", "detail": raw.decode(errors="replace")}
            kind = str(problem.get("type", "")).rsplit(":", 1)[-1]
            message = problem.get("detail") or problem.get("title") or f"HTTP {e.code}"
            if problem.get("field"):
                message = f"{problem['field']}: {message}"
            raise _PROBLEMS.get(kind, _ratchet.RatchetError)(message) from None
        except urllib.error.URLError as e:
            raise _ratchet.StoreError(f"{method} {url}: {e.reason}") from None
        return loads(text) if text else None

    async def _request(self, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(self._call, *args, **kwargs)

    @staticmethod
    def _task(id: int) -> int:
        return _check_int(id, "id", *_I64)

    @staticmethod
    def _id(id: str) -> str:
        if not isinstance(id, str):
            raise _ratchet.InvalidInput(f"id must be a str, not {type(id).__name__}")
        return urllib.parse.quote(id, safe="")

    # Instances ---------------------------------------------------------------------------

    async def start(self, name: str, input: Any = None, *, id: Optional[str] = None,
                    if_exists: str = "fail") -> str:
        body = {"name": name, "input": input, "id": id, "if_exists": if_exists}
        return (await self._request("POST", "/v1/instances", body))["id"]

    async def signal(self, id: str, name: str, payload: Any = None, *,
                     dedup_id: Optional[str] = None) -> bool:
        body = {"name": name, "payload": payload, "dedup_id": dedup_id}
        answer = await self._request("POST", f"/v1/instances/{self._id(id)}/signals", body)
        return bool(answer["raised"])

    async def cancel(self, id: str, reason: str = "cancelled") -> None:
        await self._request("POST", f"/v1/instances/{self._id(id)}/cancel", {"reason": reason})

    async def terminate(self, id: str, reason: str = "terminated") -> None:
        await self._request("POST", f"/v1/instances/{self._id(id)}/terminate",
                            {"reason": reason})

    async def status(self, id: str) -> dict:
        return _times(await self._request("GET", f"/v1/instances/{self._id(id)}"))

    async def wait(self, id: str, timeout: float = 60.0) -> dict:
        answer = await self._request("GET", f"/v1/instances/{self._id(id)}/wait",
                                     query={"timeout_ms": _duration_ms(timeout, "timeout")},
                                     timeout=timeout + 30)
        if not answer.get("finished"):
            raise _ratchet.Timeout(f"timed out waiting for instance {id!r}")
        return {k: answer.get(k) for k in ("id", "status", "output", "error")}

    async def list(self, *, status: Union[str, Iterable[str], None] = None,
                   name: Optional[str] = None, id_prefix: Optional[str] = None,
                   limit: int = 100) -> list:
        statuses = [status] if isinstance(status, str) else list(status or [])
        page = await self._request("GET", "/v1/instances", query={
            "status": ",".join(statuses), "name": name, "id_prefix": id_prefix,
            "limit": _check_int(limit, "limit", *_U32)})
        return [_times(i) for i in page["items"]]

    async def history(self, id: str) -> list:
        items, after = [], None
        while True:
            page = await self._request("GET", f"/v1/instances/{self._id(id)}/history",
                                       query={"after": after, "limit": 1000})
            items.extend(page["items"])
            after = page.get("next")
            if not after:
                return items

    # Tasks -------------------------------------------------------------------------------

    async def enqueue_many(self, tasks: Iterable[Any]) -> list:
        items = [{"name": name, "input": input, "options": _task_options(options)}
                 for _, (name, input, options) in _task_specs(tasks)]
        if not items:
            return []
        answer = await self._request("POST", "/v1/tasks/batch", {"tasks": items})
        return [t["id"] for t in answer]

    async def tasks(self, *, queue: Optional[str] = None,
                    state: Union[str, Iterable[str], None] = None, name: Optional[str] = None,
                    limit: int = 100, before: Optional[int] = None) -> list:
        states = [state] if isinstance(state, str) else list(state or [])
        listed = await self._request("GET", "/v1/tasks", query={
            "queue": queue, "state": ",".join(states), "name": name,
            "limit": _check_int(limit, "limit", *_U32),
            "before": None if before is None else _check_int(before, "before", *_I64)})
        return [_times(t) for t in listed]

    async def task(self, id: int) -> dict:
        return _times(await self._request("GET", f"/v1/tasks/{self._task(id)}"))

    async def task_wait(self, id: int, timeout: float = 60.0) -> dict:
        return _times(await self._request("GET", f"/v1/tasks/{self._task(id)}/wait",
                                          query={"timeout_ms": _duration_ms(timeout, "timeout")},
                                          timeout=timeout + 30))

    async def task_cancel(self, id: int) -> None:
        await self._request("POST", f"/v1/tasks/{self._task(id)}/cancel", {})

    async def task_retry(self, id: int) -> None:
        await self._request("POST", f"/v1/tasks/{self._task(id)}/retry", {})

    async def task_discard(self, id: int) -> None:
        await self._request("POST", f"/v1/tasks/{self._task(id)}/discard", {})

    async def apply_workflow(self, source: str) -> dict:
        answer = await self._request("POST", "/v1/workflows", {"source": source})
        return {"name": answer["name"], "revision": answer["revision"],
                "created": answer["created"]}

    # Schedules ---------------------------------------------------------------------------

    def _schedule_path(self, name: str, action: str = "") -> str:
        return f"/v1/schedules/{self._id(name)}{'/' + action if action else ''}"

    async def schedule_create(self, name: str, spec: str, **definition: Any) -> dict:
        self._id(name)
        body = _schedule_input(name, spec, _schedule_body(spec, definition))
        return _schedule(await self._request("POST", "/v1/schedules", body))

    async def schedule_update(self, name: str, spec: str, **definition: Any) -> dict:
        body = _schedule_input(name, spec, _schedule_body(spec, definition))
        return _schedule(await self._request("PUT", self._schedule_path(name), body))

    async def schedule_pause(self, name: str, note: str = "") -> dict:
        return _schedule(await self._request("POST", self._schedule_path(name, "pause"),
                                             {"note": note}))

    async def schedule_resume(self, name: str) -> dict:
        return _schedule(await self._request("POST", self._schedule_path(name, "resume"), {}))

    async def schedule_trigger(self, name: str) -> dict:
        return _fire(name, await self._request("POST", self._schedule_path(name, "trigger"),
                                               {}))

    async def schedule_backfill(self, name: str, start: float, end: float) -> list:
        fires = await self._request("POST", self._schedule_path(name, "backfill"),
                                    {"from": _iso(start, "backfill start"),
                                     "to": _iso(end, "backfill end")})
        return [_fire(name, f) for f in fires]

    async def schedule_delete(self, name: str) -> None:
        await self._request("DELETE", self._schedule_path(name))

    async def schedules(self) -> list:
        return [_schedule(s) for s in await self._request("GET", "/v1/schedules")]

    async def schedule(self, name: str, *, upcoming: int = 5, recent: int = 10) -> dict:
        d = await self._request("GET", self._schedule_path(name),
                                query={"upcoming": _check_int(upcoming, "upcoming", *_U32),
                                       "recent": _check_int(recent, "recent", *_U32)})
        return {"schedule": _schedule(d["schedule"]),
                "upcoming": [_ms(t) for t in d["upcoming"]],
                "recent": [_fire(name, f) for f in d["recent"]]}

    # Events ------------------------------------------------------------------------------

    async def append(self, events: Iterable[Mapping[str, Any]], *,
                     condition: Optional[Mapping[str, Any]] = None,
                     idempotency_key: Optional[str] = None) -> tuple:
        body = {"events": list(events), "condition": condition,
                "idempotency_key": idempotency_key}
        answer = await self._request("POST", "/v1/events", body)
        return answer["first"], answer["last"]

    async def read(self, types: Iterable[str] = (), tags: Iterable[str] = (), *,
                   after: Optional[int] = None, limit: int = 100,
                   backward: bool = False) -> dict:
        page = await self._request("GET", "/v1/events", query={
            "types": ",".join(types), "tags": ",".join(tags),
            "after": None if after is None else _check_int(after, "after", *_I64),
            "limit": _check_int(limit, "limit", *_U32),
            "direction": "backward" if backward else None})
        return {"events": [_times(e) for e in page["events"]], "head": page["head"]}



__all__ = ["HttpClient", "dumps"]
