"""Task workers: `@ratchet.task` handlers run by a :class:`Worker`. The Rust runtime claims,
heartbeats and completes tasks in batches; this side takes claimed tasks a batch at a time
and hands the results back a batch at a time."""

from __future__ import annotations

import asyncio
import inspect
import logging
import signal
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional

from . import _ratchet
from ._json import dumps, loads
from .client import Client, _check_int
from .workflow import _ACTIVITIES, _WORKFLOWS, _entry

log = logging.getLogger("ratchet.worker")

#: Handlers registered with :func:`task`, by name.
_TASKS: Dict[str, "_Handler"] = {}


@dataclass(frozen=True)
class TaskInfo:
    """What a handler that takes two arguments gets first."""

    id: int
    name: str
    attempt: int


@dataclass(frozen=True)
class _Handler:
    fn: Callable[..., Any]
    is_async: bool
    wants_info: bool


def _handler(fn: Callable[..., Any]) -> _Handler:
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return _Handler(fn, inspect.iscoroutinefunction(fn), len(params) >= 2)


def task(name: Optional[str] = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Registers a task handler under `name` (default: the function's name). The handler
    takes the input, or `(info, input)`; it may be `async def` or plain (plain ones run in
    the worker's thread pool). Raising fails the attempt; it is retried as its options say."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        _TASKS[name or fn.__name__] = _handler(fn)
        return fn

    if callable(name):  # used bare: @ratchet.task
        fn, name = name, None
        return register(fn)  # type: ignore[return-value]
    return register


class Worker:
    """Runs the registered workflows, activities and task handlers; tasks from `queues`, each
    a name to its concurrency (tasks at once here) or to `(concurrency, prefetch)`, where
    `prefetch` is how many are claimed ahead (default a quarter of the concurrency).

    `batch` is the most tasks handed to Python at once; `threads` the thread pool for plain
    (not async) handlers.

    With an ``http://`` or ``https://`` address (and `token` when the server asks for one),
    the worker needs no database: it claims and reports through `ratchet server`, with the
    same leases, retries and cancellation. Workflows run only where the database is."""

    def __init__(self, url: str, *, schema: Optional[str] = None,
                 queues: Optional[Mapping[str, Any]] = None,
                 tasks: Optional[Mapping[str, Callable[..., Any]]] = None,
                 activities: Optional[Mapping[str, Callable[..., Any]]] = None,
                 workflows: Optional[Mapping[str, Callable[..., Any]]] = None,
                 batch: int = 512, threads: int = 8, label: Optional[str] = None,
                 lease: Optional[float] = None, token: Optional[str] = None) -> None:
        self.url = url
        self.token = token
        self._remote_mode = isinstance(url, str) and url.startswith(("http://", "https://"))
        self.schema = schema
        self.queues = dict(queues or {"default": 64})
        explicit = tasks is not None or activities is not None or workflows is not None
        self.handlers = ({n: _handler(f) for n, f in (tasks or {}).items()} if explicit
                         else dict(_TASKS))
        self.activities = ({n: _handler(f) for n, f in (activities or {}).items()} if explicit
                           else {n: _handler(f) for n, f in _ACTIVITIES.items()})
        self.workflows = dict(workflows or {}) if explicit else dict(_WORKFLOWS)
        if not (self.handlers or self.activities or self.workflows):
            raise _ratchet.InvalidInput(
                "nothing to run: register tasks, activities or workflows with @ratchet.task, "
                "@ratchet.activity or @ratchet.workflow")
        if self._remote_mode and self.workflows:
            raise _ratchet.InvalidInput(
                "workflows run where the database is: a worker on a server's address runs "
                "tasks and activities only")
        self.lease = lease
        self._queue_list = self._queue_configs()
        self.batch = _check_int(batch, "batch", 1, _ratchet.MAX_PER_WORKER)
        self.threads = max(1, int(threads))
        self.label = label
        self._native: Optional[_ratchet.NativeWorker] = None
        self._stopping = asyncio.Event()
        self.completed = 0

    async def start(self) -> None:
        """Starts claiming (returns at once; :meth:`run` runs until stopped)."""
        self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="ratchet-task")
        if self._remote_mode:
            from .remote import RemoteWorker
            self._native = RemoteWorker(self.url, self.token, self._queue_list, self.handlers,
                                        self.activities, self.lease or 30.0, self.label,
                                        self._one)
            self._running = {}
            await self._native.start()
            return
        self._native = await _ratchet.start_worker(
            self.url, list(self.handlers), self._queue_list, self.schema, self.label,
            list(self.activities), [(n, _entry(f)) for n, f in self.workflows.items()], dumps,
            self.lease)
        self._running: dict = {}
        self._results: list = []
        self._flush_scheduled = False
        self._intake_done = False
        self._intake = asyncio.ensure_future(self._take(self._native))

    def _queue_configs(self) -> list:
        configs = []
        for name, config in self.queues.items():
            concurrency, prefetch = config if isinstance(config, tuple) else (config, None)
            most = _ratchet.MAX_PER_WORKER
            concurrency = _check_int(concurrency, f"queue {name!r}: concurrency", 1, most)
            if prefetch is not None:
                prefetch = _check_int(prefetch, f"queue {name!r}: prefetch", 0, most)
            configs.append((name, concurrency, prefetch))
        return configs

    @property
    def client(self) -> "Client":
        """A client on this worker's runtime (once started): what it starts runs here first,
        handed over in memory, and its waits are woken in memory."""
        if self._native is None:
            raise _ratchet.Closed("the worker is not running")
        if self._remote_mode:
            return self._native.client()  # type: ignore[return-value]
        return Client(self._native.client())

    async def run(self) -> None:
        """Runs until :meth:`stop`, SIGTERM or SIGINT, then shuts down gracefully."""
        if self._native is None:
            await self.start()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._stopping.set)
            except (NotImplementedError, RuntimeError):  # not the main thread
                pass
        await self._stopping.wait()
        await self._shutdown()

    async def stop(self) -> None:
        """Stops claiming, finishes what runs, and shuts down."""
        self._stopping.set()
        await self._shutdown()

    async def _shutdown(self) -> None:
        native, self._native = self._native, None
        if native is None:
            return
        if self._remote_mode:
            await native.shutdown()
            self.completed = native.completed
            self._executor.shutdown(wait=False)
            return
        # The runtime stops claiming and waits for what runs, whose answers come from the
        # intake, which goes on until then; then the intake stops (within its wait for the
        # next batch: not cancelled, since the native wait must finish while Python runs).
        await native.shutdown()
        self._intake_done = True
        await asyncio.gather(self._intake, return_exceptions=True)
        self._executor.shutdown(wait=False)

    async def __aenter__(self) -> "Worker":
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    async def _take(self, native: _ratchet.NativeWorker) -> None:
        """Takes claimed tasks a batch at a time and starts each handler at once."""
        while not self._intake_done:
            try:
                batch, cancelled = await native.next_batch(self.batch, 0.25)
            except _ratchet.Closed:
                return
            for item in batch:
                running = asyncio.ensure_future(self._one(item))
                self._running[item[1]] = running
                running.add_done_callback(
                    lambda t, id=item[1], native=native: self._done(t, id, native))
            for task_id in cancelled:
                # CancelledError at the handler's next await (a plain handler runs on).
                running = self._running.get(task_id)
                if running is not None:
                    running.cancel()

    def _done(self, running: "asyncio.Future[tuple]", task_id: int,
              native: _ratchet.NativeWorker) -> None:
        """Collects a result; the results of one turn of the event loop go back together."""
        if self._running.get(task_id) is running:
            del self._running[task_id]
        if running.cancelled():
            return  # the task ended as cancelled already
        self._results.append(running.result())
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush, native)

    def _flush(self, native: _ratchet.NativeWorker) -> None:
        self._flush_scheduled = False
        results, self._results = self._results, []
        native.complete(results)
        self.completed += len(results)

    async def _one(self, item: tuple) -> tuple:
        key, task_id, name, attempt, input_json = item
        handler = self.handlers.get(name) or self.activities[name]
        try:
            value = loads(input_json)
            args = (TaskInfo(task_id, name, attempt), value) if handler.wants_info else (value,)
            if handler.is_async:
                output = await handler.fn(*args)
            else:
                output = await asyncio.get_running_loop().run_in_executor(
                    self._executor, handler.fn, *args)
            return (key, True, dumps(output))
        except Exception as e:  # a failed attempt, retried as the task's options say
            log.warning("task %s %d attempt %d failed: %r", name, task_id, attempt, e)
            return (key, False, dumps({"kind": type(e).__name__, "message": str(e)}))
