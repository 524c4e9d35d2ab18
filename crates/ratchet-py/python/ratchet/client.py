"""The client: start and steer instances, enqueue and steer tasks, append and read events."""

from __future__ import annotations

import asyncio
import math
import operator
import threading
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from . import _ratchet
from ._json import encode, loads

#: A task to enqueue: `(name, input)` or `(name, input, options)`.
TaskSpec = Union[Sequence[Any], Mapping[str, Any]]

_TASK_OPTIONS = (
    "queue", "priority", "delay", "run_at", "max_attempts", "retry_delay", "timeout",
    "unique_key", "metadata",
)


def _options(options: Mapping[str, Any]) -> str:
    unknown = sorted(set(options) - set(_TASK_OPTIONS))
    if unknown:
        raise _ratchet.InvalidInput(
            f"unknown task option {unknown[0]!r} (known: {', '.join(_TASK_OPTIONS)})"
        )
    _check_numbers(options, "task option")
    return encode(dict(options), "task options")


def _check_str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise _ratchet.InvalidInput(f"{what} must be a str, not {type(value).__name__}")
    return value


#: The ranges of the integers the native module takes (ids and positions, counts).
_I64 = (-(2**63), 2**63 - 1)
_U32 = (0, 2**32 - 1)


def _check_int(value: Any, what: str, lo: int, hi: int) -> int:
    """`value` as an int from `lo` to `hi`, else InvalidInput naming it (never Python's
    OverflowError from the native side)."""
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
    """Refuses the numbers among `values` (options, a schedule's fields) that JSON would not
    carry as given, naming them: integers past 64 bits (which the encoder refuses without
    naming them) and NaN or infinities (which orjson writes as null)."""
    for key, value in values.items():
        if isinstance(value, int) and not isinstance(value, bool):
            _check_int(value, f"{what} {key}", *_I64)
        elif isinstance(value, float) and not math.isfinite(value):
            raise _ratchet.InvalidInput(f"{what} {key}: expected a finite number, got {value}")


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


_SCHEDULE_FIELDS = ("workflow", "task", "input", "options", "time_zone", "overlap", "catch_up",
                    "jitter", "paused", "start_at", "end_at", "remaining_actions")


def _schedule_body(spec: str, definition: Mapping[str, Any]) -> dict:
    unknown = sorted(set(definition) - set(_SCHEDULE_FIELDS))
    if unknown:
        raise _ratchet.InvalidInput(f"unknown schedule field(s): {', '.join(unknown)}")
    _check_numbers(definition, "schedule")
    if isinstance(definition.get("options"), Mapping):
        _check_numbers(definition["options"], "task option")
    return {"spec": _check_str(spec, "spec"), **definition}


class _Shared:
    """What a client does on top of its own calls, the same over any transport."""

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

    async def enqueue(self, name: str, input: Any = None, **options: Any) -> int:
        """Enqueues a task; returns its id. Options: queue, priority, delay (s), run_at (Unix
        s), max_attempts, retry_delay (s), timeout (s), unique_key, metadata."""
        (task_id,) = await self.enqueue_many([(name, input, options)])
        return task_id

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


class Client(_Shared):
    """A client on one store. Make one with :func:`ratchet.connect`; every method is a
    coroutine, and none holds the GIL while it waits on the database."""

    def __init__(self, native: _ratchet.NativeClient) -> None:
        self._native = native

    # Instances ---------------------------------------------------------------------------

    async def start(self, name: str, input: Any = None, *, id: Optional[str] = None,
                    if_exists: str = "fail") -> str:
        """Starts an instance of the orchestration `name`; returns its id."""
        _check_str(name, "name")
        return await self._native.start(name, encode(input, "input"), id, if_exists)

    async def signal(self, id: str, name: str, payload: Any = None, *,
                     dedup_id: Optional[str] = None) -> bool:
        """Raises a signal; with `dedup_id`, at most once. Returns False for a repeat."""
        return await self._native.signal(_check_str(id, "id"), _check_str(name, "name"),
                                         encode(payload, "payload"), dedup_id)

    async def cancel(self, id: str, reason: str = "cancelled") -> None:
        """Asks the instance to cancel: its pending steps fail with Cancelled."""
        await self._native.cancel(_check_str(id, "id"), reason)

    async def terminate(self, id: str, reason: str = "terminated") -> None:
        """Stops the instance at once."""
        await self._native.terminate(_check_str(id, "id"), reason)

    async def status(self, id: str) -> dict:
        """The instance: status, input, output, error, custom status, times (ms)."""
        return loads(await self._native.status(_check_str(id, "id")))

    async def wait(self, id: str, timeout: float = 60.0) -> dict:
        """Waits for the instance to finish: `{id, status, output, error}`. Raises
        :class:`ratchet.Timeout` after `timeout` seconds."""
        return loads(await self._native.wait(_check_str(id, "id"), float(timeout)))

    async def list(self, *, status: Union[str, Iterable[str], None] = None,
                   name: Optional[str] = None, id_prefix: Optional[str] = None,
                   limit: int = 100) -> list:
        """Instances, newest first."""
        statuses = [status] if isinstance(status, str) else list(status or [])
        return loads(await self._native.list(statuses, name, id_prefix,
                                             _check_int(limit, "limit", *_U32)))

    async def history(self, id: str) -> list:
        """Every event of the instance's history: `{execution, seq, event}`."""
        return loads(await self._native.history(_check_str(id, "id")))

    # Tasks -------------------------------------------------------------------------------

    async def enqueue_many(self, tasks: Iterable[TaskSpec]) -> list:
        """Enqueues many tasks in one round trip, all or nothing; returns their ids."""
        specs = [(_check_str(name, f"task {i}: name"), encode(input, f"task {i}: input"),
                  _options(options)) for i, (name, input, options) in _task_specs(tasks)]
        if not specs:
            return []
        outcomes = await self._native.enqueue_many(specs)
        return [task_id for task_id, _duplicate in outcomes]

    async def tasks(self, *, queue: Optional[str] = None,
                    state: Union[str, Iterable[str], None] = None, name: Optional[str] = None,
                    limit: int = 100, before: Optional[int] = None) -> list:
        """Standalone tasks, newest first; `before` (the last id of a page) for the next."""
        states = [state] if isinstance(state, str) else list(state or [])
        limit = _check_int(limit, "limit", *_U32)
        before = None if before is None else _check_int(before, "before", *_I64)
        return loads(await self._native.tasks(queue, states, name, limit, before))

    async def task(self, id: int) -> dict:
        """The task: state, attempts, input, output, error, times (ms)."""
        return loads(await self._native.task(_check_int(id, "id", *_I64)))

    async def task_wait(self, id: int, timeout: float = 60.0) -> dict:
        """Waits for the task to finish; the task."""
        return loads(await self._native.task_wait(_check_int(id, "id", *_I64), float(timeout)))

    async def task_cancel(self, id: int) -> None:
        await self._native.task_act(_check_int(id, "id", *_I64), "cancel")

    async def task_retry(self, id: int) -> None:
        await self._native.task_act(_check_int(id, "id", *_I64), "retry")

    async def task_discard(self, id: int) -> None:
        await self._native.task_act(_check_int(id, "id", *_I64), "discard")

    async def apply_workflow(self, source: str) -> dict:
        """Stores a declarative workflow (the Serverless Workflow DSL, YAML or JSON) as the
        next revision of `namespace/name`; start it by that name. Workers run it within
        seconds. Raises InvalidInput with every compile error (each with its line and
        column), and Refused for a stored version with other content; nothing is stored."""
        name, revision, created = await self._native.apply_workflow(_check_str(source, "source"))
        return {"name": name, "revision": revision, "created": created}

    # Schedules ---------------------------------------------------------------------------

    async def schedule_create(self, name: str, spec: str, **definition: Any) -> dict:
        """Creates a schedule: `spec` is a cron expression (`0 9 * * MON-FRI`, six fields
        for seconds) or `every 30s` / `after 5m`. Give `workflow=` (start it) or `task=`
        (enqueue it, with `options=` as :meth:`enqueue` takes them), and optionally `input`,
        `time_zone` (IANA, default UTC), `overlap` (skip, buffer_one, allow_all,
        cancel_previous, terminate_previous), `catch_up` (`last 1`, `last 3`, `within 10m`,
        skip), `jitter` (seconds), `paused` (a note), `start_at` and `end_at` (Unix seconds),
        `remaining_actions`. Each tick fires once, whichever workers run. Raises
        InvalidInput naming the field at fault, AlreadyExists for a taken name."""
        return await self._schedule("create", name, _schedule_body(spec, definition))

    async def schedule_update(self, name: str, spec: str, **definition: Any) -> dict:
        """Replaces a schedule's spec, action and policies (as :meth:`schedule_create`
        takes them), keeping its progress."""
        return await self._schedule("update", name, _schedule_body(spec, definition))

    async def schedule_pause(self, name: str, note: str = "") -> dict:
        """Pauses a schedule: nothing fires until it is resumed."""
        return await self._schedule("pause", name, note)

    async def schedule_resume(self, name: str) -> dict:
        """Resumes a schedule from its next tick (the ticks of the pause count as missed)."""
        return await self._schedule("resume", name)

    async def schedule_trigger(self, name: str) -> dict:
        """Fires one run now, whatever the spec, pause or overlap policy say: the fire."""
        return await self._schedule("trigger", name)

    async def schedule_backfill(self, name: str, start: float, end: float) -> list:
        """Fires each tick between `start` and `end` (Unix seconds) that the schedule has
        passed and that started no run yet, once: the fires."""
        return await self._schedule("backfill", name, [float(start), float(end)])

    async def schedule_delete(self, name: str) -> None:
        """Deletes a schedule and its fire records; runs it started go on."""
        await self._schedule("delete", name)

    async def schedules(self) -> list:
        """Every schedule, by name."""
        return await self._schedule("list", None)

    async def schedule(self, name: str, *, upcoming: int = 5, recent: int = 10) -> dict:
        """A schedule with its next ticks and its latest fires and their runs' status:
        `{schedule, upcoming, recent}` (times in ms)."""
        return await self._schedule("describe", name, [_check_int(upcoming, "upcoming", *_U32),
                                                       _check_int(recent, "recent", *_U32)])

    async def _schedule(self, verb: str, name: Optional[str], body: Any = None) -> Any:
        if name is not None:
            _check_str(name, "name")
        return loads(await self._native.schedule(verb, name, encode(body, "the schedule")))

    # Events ------------------------------------------------------------------------------

    async def append(self, events: Iterable[Mapping[str, Any]], *,
                     condition: Optional[Mapping[str, Any]] = None,
                     idempotency_key: Optional[str] = None) -> tuple:
        """Appends events (each `{type, tags, payload}`), all or none; returns the first and
        last positions. With `condition` (`{fail_if_events_match, after}`, as
        :meth:`project` returns it) raises :class:`ratchet.AppendConflict` when a matching
        event was appended after `after`."""
        body = {"events": list(events), "condition": condition,
                "idempotency_key": idempotency_key}
        return tuple(await self._native.append(encode(body, "append")))

    async def read(self, types: Iterable[str] = (), tags: Iterable[str] = (), *,
                   after: Optional[int] = None, limit: int = 100,
                   backward: bool = False) -> dict:
        """A page of events matching any of `types` and all of `tags`: `{events, head}`."""
        body = {"query": [{"types": list(types), "tags": list(tags)}],
                "after": None if after is None else _check_int(after, "after", *_I64),
                "before": None, "limit": _check_int(limit, "limit", *_U32),
                "direction": "backward" if backward else "forward"}
        return loads(await self._native.read(encode(body, "read")))



async def connect(url: str, *, schema: Optional[str] = None,
                  token: Optional[str] = None) -> Any:
    """Opens the store at `url`, creating or upgrading its tables: a `postgres://` or
    `postgresql://` URL (in `schema`, default `ratchet`), or a SQLite file, as a `sqlite:`
    URL (`sqlite:app.db`, `sqlite:///var/lib/app.db`) or a path (`app.db`, relative to the
    working directory, created when missing). An `http://` or `https://` URL is a
    `ratchet server` instead (with `token` when it asks for one): an
    :class:`ratchet.http.HttpClient` with the same methods. Any other `scheme://` raises
    InvalidInput, whose message never shows a password."""
    _check_str(url, "url")
    if url.startswith(("http://", "https://")):
        from .http import HttpClient

        return HttpClient(url, token)
    return Client(await _ratchet.connect(url, schema))


class _Loop:
    """An event loop on a thread of its own, for the synchronous facade."""

    _lock = threading.Lock()
    _loop: Optional[asyncio.AbstractEventLoop] = None

    @classmethod
    def run(cls, coro: Any) -> Any:
        with cls._lock:
            if cls._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="ratchet-sync", daemon=True).start()
                cls._loop = loop
        return asyncio.run_coroutine_threadsafe(coro, cls._loop).result()


class SyncClient:
    """The client for scripts: the same methods as :class:`Client`, each blocking until done."""

    def __init__(self, url: str, *, schema: Optional[str] = None) -> None:
        self._client: Client = _Loop.run(connect(url, schema=schema))

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if name in ("subscribe",) or not callable(method):
            raise AttributeError(f"SyncClient has no {name}")

        def call(*args: Any, **kwargs: Any) -> Any:
            return _Loop.run(method(*args, **kwargs))

        call.__doc__ = method.__doc__
        return call
