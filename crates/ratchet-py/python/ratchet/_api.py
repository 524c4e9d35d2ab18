"""The client, written once over Ratchet's API: every method is an API operation (its
OpenAPI `operationId`), sent through a transport, in process on the database (the native
module answers each operation as a server does) or over HTTP to `ratchet server`. Both give
the same objects: the API's, with its times (RFC 3339) as timezone-aware `datetime`."""

from __future__ import annotations

import asyncio
import datetime
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _ratchet
from ._json import encode, loads

#: A task to enqueue: `(name, input)` or `(name, input, options)`.
TaskSpec = Union[Sequence[Any], Mapping[str, Any]]

#: The ranges of the integers the API takes (ids and positions, counts).
_I64 = (-(2**63), 2**63 - 1)
_U32 = (0, 2**32 - 1)

_TASK_OPTIONS = (
    "queue", "priority", "delay", "run_at", "max_attempts", "retry_delay", "timeout",
    "unique_key", "metadata",
)

_SCHEDULE_FIELDS = ("workflow", "task", "input", "options", "time_zone", "overlap", "catch_up",
                    "jitter", "paused", "start_at", "end_at", "remaining_actions")

#: The fields the API gives as times (RFC 3339), returned as `datetime`.
_TIMES = frozenset((
    "created_at", "updated_at", "finished_at", "run_at", "recorded_at", "started_at",
    "seen_at", "lease_until", "start_at", "end_at", "last_tick", "next_fire_at", "buffered",
    "settled_through", "tick", "fired_at", "oldest_available",
))

#: The fields that hold what a user gave (inputs, outputs, payloads): never converted.
_USER_DATA = frozenset((
    "input", "output", "payload", "metadata", "event", "error", "custom_status", "action",
    "details", "data",
))


def _check_str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise _ratchet.InvalidInput(f"{what} must be a str, not {type(value).__name__}")
    return value


def _check_int(value: Any, what: str, lo: int, hi: int) -> int:
    """`value` as an int from `lo` to `hi`, else InvalidInput naming it."""
    import operator

    try:
        if isinstance(value, bool):
            raise TypeError
        number = operator.index(value)
    except TypeError:
        raise _ratchet.InvalidInput(f"{what} must be an int, not {type(value).__name__}") from None
    if not lo <= number <= hi:
        raise _ratchet.InvalidInput(f"{what} must be from {lo} to {hi}, got {number}")
    return number


def _check_numbers(values: Mapping[str, Any], what: str) -> None:
    """Refuses the numbers among `values` that JSON would not carry as given, naming them:
    integers past 64 bits and NaN or infinities."""
    import math

    for key, value in values.items():
        if isinstance(value, int) and not isinstance(value, bool):
            _check_int(value, f"{what} {key}", *_I64)
        elif isinstance(value, float) and not math.isfinite(value):
            raise _ratchet.InvalidInput(f"{what} {key}: expected a finite number, got {value}")


def _iso(seconds: Any, field: str) -> Any:
    """A Unix time in seconds (or a `datetime`) as RFC 3339, refused outside the calendar."""
    if seconds is None:
        return None
    if isinstance(seconds, datetime.datetime):
        seconds = seconds.timestamp()
    seconds = _ratchet.check_unix_time(field, seconds)
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat()


def _duration_ms(seconds: Any, field: str) -> int:
    """Seconds (or a `timedelta`) as whole milliseconds, refused out of range."""
    if isinstance(seconds, datetime.timedelta):
        seconds = seconds.total_seconds()
    return int(_ratchet.check_seconds(field, seconds) * 1000)


def _time(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value


def _objects(value: Any) -> Any:
    """An API answer as Python objects: its times as `datetime`, what users gave untouched."""
    if isinstance(value, list):
        return [_objects(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, v in value.items():
        if key in _USER_DATA:
            out[key] = v
        elif key in _TIMES:
            out[key] = _time(v)
        elif key == "upcoming" and isinstance(v, list):
            out[key] = [_time(t) for t in v]
        else:
            out[key] = _objects(v)
    return out


def _task_specs(tasks: Iterable[TaskSpec]) -> Iterable[tuple]:
    """Each task as `(index, (name, input, options))`, from `(name, input)`,
    `(name, input, options)` or `{name, input, options}`."""
    for i, spec in enumerate(tasks):
        if isinstance(spec, Mapping):
            yield i, (spec.get("name"), spec.get("input"), spec.get("options") or {})
        elif len(spec) == 2:
            yield i, (spec[0], spec[1], {})
        elif len(spec) == 3:
            yield i, (spec[0], spec[1], spec[2] or {})
        else:
            raise _ratchet.InvalidInput(f"task {i}: expected (name, input[, options])")


def _task_options(options: Mapping[str, Any]) -> dict:
    """Task options as the API takes them."""
    unknown = sorted(set(options) - set(_TASK_OPTIONS))
    if unknown:
        raise _ratchet.InvalidInput(
            f"unknown task option {unknown[0]!r} (known: {', '.join(_TASK_OPTIONS)})"
        )
    _check_numbers(options, "task option")
    out: dict = {}
    retry: dict = {}
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
    if retry:
        out["retry"] = retry
    return out


def _schedule_input(name: str, spec: str, definition: Mapping[str, Any]) -> dict:
    """A schedule's definition as the API takes it."""
    unknown = sorted(set(definition) - set(_SCHEDULE_FIELDS))
    if unknown:
        raise _ratchet.InvalidInput(f"unknown schedule field(s): {', '.join(unknown)}")
    _check_numbers(definition, "schedule")
    if isinstance(definition.get("options"), Mapping):
        _check_numbers(definition["options"], "task option")
    out = {"name": _check_str(name, "name"), "spec": _check_str(spec, "spec")}
    for key in ("workflow", "task", "input", "time_zone", "overlap", "catch_up",
                "remaining_actions"):
        if definition.get(key) is not None:
            out[key] = definition[key]
    if definition.get("options") is not None:
        out["options"] = _task_options(definition["options"])
    if definition.get("jitter") is not None:
        out["jitter_ms"] = _duration_ms(definition["jitter"], "schedule jitter")
    if definition.get("paused") is not None:
        out["paused"], out["note"] = True, definition["paused"]
    for key in ("start_at", "end_at"):
        if definition.get(key) is not None:
            out[key] = _iso(definition[key], f"schedule {key}")
    return out


class Native:
    """The transport in process: the native module answers each operation as a server
    does, on the database."""

    def __init__(self, native: Any) -> None:
        self.native = native

    async def call(self, operation: str, segments: List[str], query: Optional[dict],
                   body: Any, timeout: float) -> Any:
        query_text = None if query is None else encode(query, "query")
        body_text = None if body is None else encode(body, "request")
        return loads(await self.native.call(operation, segments, query_text, body_text))


#: Every operation's method and path, from the API's own route table.
_ROUTES = {op: (method.upper(), path) for op, method, path in _ratchet.routes()}


class Http:
    """The transport to `ratchet server`: each operation by its route, a request on a thread
    of its own (the standard library's `urllib`) so the event loop never blocks; problems
    are raised as the native client raises them."""

    def __init__(self, url: str, token: Optional[str], timeout: float = 60.0) -> None:
        self.base = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def request(self, operation: str, segments: List[str], query: Optional[dict], body: Any,
                timeout: Optional[float]) -> Any:
        method, path = _ROUTES[operation]
        for segment in segments:
            start, end = path.index("{"), path.index("}")
            path = path[:start] + urllib.parse.quote(segment, safe="") + path[end + 1:]
        url = self.base + path
        if query:
            query = {k: (str(v).lower() if isinstance(v, bool) else v)
                     for k, v in query.items() if v is not None and v != ""}
            if query:
                url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else encode(body, "request").encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as response:
                text = response.read()
                kind = response.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            _ratchet.raise_problem(e.code, e.read().decode(errors="replace"))
            raise  # pragma: no cover - raise_problem always raises
        except urllib.error.URLError as e:
            raise _ratchet.StoreError(f"{method} {url}: {e.reason}") from None
        if not text:
            return None
        if not kind.startswith("application/json"):
            return text.decode(errors="replace")
        return loads(text)

    async def call(self, operation: str, segments: List[str], query: Optional[dict],
                   body: Any, timeout: float) -> Any:
        return await asyncio.to_thread(self.request, operation, segments, query, body, timeout)


class ApiClient:
    """Ratchet's client: every method a coroutine, the same over either transport."""

    def __init__(self, transport: Union[Native, Http]) -> None:
        self._transport = transport

    async def _op(self, operation: str, *segments: str, query: Optional[dict] = None,
                  body: Any = None, timeout: float = 60.0, raw: bool = False) -> Any:
        answer = await self._transport.call(operation, list(segments), query, body, timeout)
        return answer if raw else _objects(answer)

    # Instances ---------------------------------------------------------------------------

    async def start(self, name: str, input: Any = None, *, id: Optional[str] = None,
                    if_exists: str = "fail", allow_unknown: bool = False) -> str:
        """Starts an instance of the orchestration `name`; returns its id."""
        body = {"name": _check_str(name, "name"), "input": input, "id": id,
                "if_exists": if_exists}
        query = {"allow_unknown": True} if allow_unknown else None
        return (await self._op("instances_start", query=query, body=body))["id"]

    async def signal(self, id: str, name: str, payload: Any = None, *,
                     dedup_id: Optional[str] = None) -> bool:
        """Raises a signal; with `dedup_id`, at most once. Returns False for a repeat."""
        body = {"name": _check_str(name, "name"), "payload": payload, "dedup_id": dedup_id}
        answer = await self._op("instances_signal", _check_str(id, "id"), body=body)
        return bool(answer["raised"])

    async def cancel(self, id: str, reason: str = "cancelled") -> None:
        """Asks the instance to cancel: its pending steps fail with Cancelled."""
        await self._op("instances_cancel", _check_str(id, "id"), body={"reason": reason})

    async def terminate(self, id: str, reason: str = "terminated") -> None:
        """Stops the instance at once."""
        await self._op("instances_terminate", _check_str(id, "id"), body={"reason": reason})

    async def status(self, id: str) -> dict:
        """The instance: status, input, output, error, custom status, times."""
        return await self._op("instances_show", _check_str(id, "id"))

    async def wait(self, id: str, timeout: float = 60.0) -> dict:
        """Waits for the instance to finish: `{id, status, output, error}`. Raises
        :class:`ratchet.Timeout` after `timeout` seconds."""
        _check_str(id, "id")
        left_ms = _duration_ms(timeout, "timeout")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + left_ms / 1000
        while True:
            answer = await self._op("instances_wait", id, query={"timeout_ms": left_ms},
                                    timeout=left_ms / 1000 + 30)
            if answer.get("finished"):
                return {k: answer.get(k) for k in ("id", "status", "output", "error")}
            left_ms = int((deadline - loop.time()) * 1000)
            if left_ms <= 0:
                raise _ratchet.Timeout(f"timed out waiting for instance {id!r}")

    async def list(self, *, status: Union[str, Iterable[str], None] = None,
                   name: Optional[str] = None, id_prefix: Optional[str] = None,
                   limit: int = 100) -> list:
        """Instances, newest first."""
        statuses = [status] if isinstance(status, str) else list(status or [])
        page = await self._op("instances_list", query={
            "status": ",".join(statuses), "name": name, "id_prefix": id_prefix,
            "limit": _check_int(limit, "limit", *_U32)})
        return page["items"]

    async def history(self, id: str) -> list:
        """Every event of the instance's history: `{execution, seq, event}`."""
        _check_str(id, "id")
        items, after = [], None
        while True:
            page = await self._op("instances_history", id,
                                  query={"after": after, "limit": 1000})
            items.extend(page["items"])
            after = page.get("next")
            if not after:
                return items

    # Tasks -------------------------------------------------------------------------------

    async def enqueue(self, name: str, input: Any = None, **options: Any) -> int:
        """Enqueues a task; returns its id. Options: queue, priority, delay (s), run_at (Unix
        s or datetime), max_attempts, retry_delay (s), timeout (s), unique_key, metadata."""
        (task_id,) = await self.enqueue_many([(name, input, options)])
        return task_id

    async def enqueue_many(self, tasks: Iterable[TaskSpec], *,
                           allow_unknown: bool = False) -> list:
        """Enqueues many tasks in one round trip, all or nothing; returns their ids."""
        items = [{"name": _check_str(name, f"task {i}: name"),
                  "input": _checked_json(input, f"task {i}: input"),
                  "options": _task_options(options)}
                 for i, (name, input, options) in _task_specs(tasks)]
        if not items:
            return []
        query = {"allow_unknown": True} if allow_unknown else None
        answer = await self._op("tasks_enqueue_batch", query=query, body={"tasks": items})
        return [t["id"] for t in answer]

    async def tasks(self, *, queue: Optional[str] = None,
                    state: Union[str, Iterable[str], None] = None, name: Optional[str] = None,
                    limit: int = 100, before: Optional[int] = None) -> list:
        """Standalone tasks, newest first; `before` (the last id of a page) for the next."""
        states = [state] if isinstance(state, str) else list(state or [])
        return await self._op("tasks_list", query={
            "queue": queue, "state": ",".join(states), "name": name,
            "limit": _check_int(limit, "limit", *_U32),
            "before": None if before is None else _check_int(before, "before", *_I64)})

    async def task(self, id: int) -> dict:
        """The task: state, attempts, input, output, error, times."""
        return await self._op("tasks_show", str(_check_int(id, "id", *_I64)))

    async def task_wait(self, id: int, timeout: float = 60.0) -> dict:
        """Waits for the task to finish; the task (as it stands, at the timeout)."""
        task_id = str(_check_int(id, "id", *_I64))
        left_ms = _duration_ms(timeout, "timeout")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + left_ms / 1000
        while True:
            task = await self._op("tasks_wait", task_id, query={"timeout_ms": left_ms},
                                  timeout=left_ms / 1000 + 30)
            left_ms = int((deadline - loop.time()) * 1000)
            if task["state"] in ("Completed", "Dead", "Cancelled") or left_ms <= 0:
                return task

    async def task_cancel(self, id: int) -> None:
        await self._op("tasks_cancel", str(_check_int(id, "id", *_I64)))

    async def task_retry(self, id: int) -> None:
        await self._op("tasks_retry", str(_check_int(id, "id", *_I64)))

    async def task_discard(self, id: int) -> None:
        await self._op("tasks_discard", str(_check_int(id, "id", *_I64)))

    async def apply_workflow(self, source: str) -> dict:
        """Stores a declarative workflow (the Serverless Workflow DSL, YAML or JSON) as the
        next revision of `namespace/name`; start it by that name. Raises InvalidInput with
        every compile error (each with its line and column), and Refused for a stored
        version with other content; nothing is stored. `{name, version, revision, created,
        schedule}`."""
        return await self._op("workflows_apply", body={"source": _check_str(source, "source")})

    # Schedules ---------------------------------------------------------------------------

    async def schedule_create(self, name: str, spec: str, **definition: Any) -> dict:
        """Creates a schedule: `spec` is a cron expression (`0 9 * * MON-FRI`, six fields
        for seconds) or `every 30s`. Give `workflow=` (start it) or `task=` (enqueue it,
        with `options=` as :meth:`enqueue` takes them), and optionally `input`, `time_zone`
        (IANA, default UTC), `overlap` (skip, buffer_one, allow_all, cancel_previous,
        terminate_previous), `catch_up` (`last 1`, `last 3`, `within 10m`, skip), `jitter`
        (seconds), `paused` (a note), `start_at` and `end_at` (Unix seconds or datetime),
        `remaining_actions`. Each tick fires once, whichever workers run."""
        return await self._op("schedules_create", body=_schedule_input(name, spec, definition))

    async def schedule_update(self, name: str, spec: str, **definition: Any) -> dict:
        """Replaces a schedule's spec, action and policies, keeping its progress."""
        body = _schedule_input(name, spec, definition)
        return await self._op("schedules_update", name, body=body)

    async def schedule_pause(self, name: str, note: str = "") -> dict:
        """Pauses a schedule: nothing fires until it is resumed."""
        return await self._op("schedules_pause", _check_str(name, "name"), body={"note": note})

    async def schedule_resume(self, name: str) -> dict:
        """Resumes a schedule from its next tick (the ticks of the pause count as missed)."""
        return await self._op("schedules_resume", _check_str(name, "name"))

    async def schedule_trigger(self, name: str) -> dict:
        """Fires one run now, whatever the spec, pause or overlap policy say: the fire."""
        return await self._op("schedules_trigger", _check_str(name, "name"))

    async def schedule_backfill(self, name: str, start: Any, end: Any) -> list:
        """Fires each tick between `start` and `end` (Unix seconds or datetime) that the
        schedule has passed and that started no run yet, once: the fires."""
        body = {"from": _iso(start, "backfill start"), "to": _iso(end, "backfill end")}
        return await self._op("schedules_backfill", _check_str(name, "name"), body=body)

    async def schedule_delete(self, name: str) -> None:
        """Deletes a schedule and its fire records; runs it started go on."""
        await self._op("schedules_delete", _check_str(name, "name"))

    async def schedules(self) -> list:
        """Every schedule, by name."""
        return await self._op("schedules_list")

    async def schedule(self, name: str, *, upcoming: int = 5, recent: int = 10) -> dict:
        """A schedule with its next ticks and its latest fires and their runs' status:
        `{schedule, upcoming, recent}`."""
        query = {"upcoming": _check_int(upcoming, "upcoming", *_U32),
                 "recent": _check_int(recent, "recent", *_U32)}
        return await self._op("schedules_describe", _check_str(name, "name"), query=query)

    # Events ------------------------------------------------------------------------------

    async def append(self, events: Iterable[Mapping[str, Any]], *,
                     condition: Optional[Mapping[str, Any]] = None,
                     idempotency_key: Optional[str] = None) -> Tuple[int, int]:
        """Appends events (each `{type, tags, payload}`), all or none; returns the first and
        last positions. With `condition` (`{fail_if_events_match, after}`, as
        :meth:`project` returns it) raises :class:`ratchet.AppendConflict` when a matching
        event was appended after `after`."""
        body = {"events": list(events), "condition": condition,
                "idempotency_key": idempotency_key}
        answer = await self._op("events_append", body=body)
        return answer["first"], answer["last"]

    async def read(self, types: Iterable[str] = (), tags: Iterable[str] = (), *,
                   after: Optional[int] = None, limit: int = 100,
                   backward: bool = False) -> dict:
        """A page of events matching any of `types` and all of `tags`: `{events, head}`."""
        body = {"query": [{"types": list(types), "tags": list(tags)}],
                "after": None if after is None else _check_int(after, "after", *_I64),
                "limit": _check_int(limit, "limit", *_U32),
                "direction": "backward" if backward else "forward"}
        page = await self._op("events_query", body=body)
        return {"events": page["events"], "head": page["head"]}

    # Built on the calls ------------------------------------------------------------------

    async def result(self, id: str, timeout: float = 60.0) -> Any:
        """Waits and returns the output; raises :class:`ratchet.Failed` unless it completed."""
        outcome = await self.wait(id, timeout)
        if outcome["status"] != "Completed":
            error = outcome.get("error") or {}
            raise _ratchet.Failed(
                f"instance {id!r} ended {outcome['status']}"
                + (f": {error.get('kind')}: {error.get('message')}" if error else "")
            )
        return outcome["output"]

    async def project(self, types: Iterable[str] = (), tags: Iterable[str] = ()) -> tuple:
        """Every event matching the query, and the condition that an append deciding on
        them passes to :meth:`append`: `(events, condition)`."""
        types, tags = list(types), list(tags)
        events, after = [], None
        while True:
            page = await self.read(types, tags, after=after, limit=1000)
            events.extend(page["events"])
            if len(page["events"]) < 1000:
                head = page["head"]
                break
            after = page["events"][-1]["position"]
        condition = {"fail_if_events_match": [{"types": types, "tags": tags}],
                     "after": head or None}
        return events, condition

    async def subscribe(self, types: Iterable[str] = (), tags: Iterable[str] = (), *,
                        after: Optional[int] = None, poll: float = 0.2):
        """Every matching event after `after`, then each new one as it is appended: an
        async iterator that never ends by itself."""
        types, tags = list(types), list(tags)
        while True:
            page = await self.read(types, tags, after=after, limit=1000)
            for event in page["events"]:
                after = event["position"]
                yield event
            if not page["events"]:
                await asyncio.sleep(poll)


def _checked_json(value: Any, what: str) -> Any:
    """`value`, refused with InvalidInput naming `what` when JSON cannot hold it."""
    encode(value, what)
    return value
