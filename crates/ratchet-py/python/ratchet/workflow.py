"""Workflows written in Python: `@ratchet.workflow async def f(ctx, input)`, replayed by the
Rust core. A workflow reaches the outside world only through its context: activities,
timers, signals, children, and the recorded time, UUIDs and random numbers. Each call on the
context schedules its step at once; awaiting it (alone, or with :func:`gather` or
:func:`race`) lets the Rust core run it and resume the workflow with its result, now or after
a crash, in another process, from history."""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Dict, Generator, List, Optional, Tuple

from . import _ratchet
from ._json import encode, loads
from .client import _check_int

#: Workflows registered with :func:`workflow`, by name.
_WORKFLOWS: Dict[str, Callable[..., Any]] = {}
#: Activities registered with :func:`activity`, by name (run like tasks).
_ACTIVITIES: Dict[str, Callable[..., Any]] = {}


class Step:
    """A scheduled step: await it for its result. A step may be awaited again, alone or in
    :func:`gather` or :func:`race`: it answers the same result, or raises the same error."""

    __slots__ = ("_handle", "_done", "_value", "_error")

    def __init__(self, handle: int) -> None:
        self._handle = handle
        self._done = False
        self._value: Any = None
        self._error: Optional[BaseException] = None

    def _settle(self, outcome: Any) -> None:
        """Keeps what the Rust core sent for this step: its result as JSON text, or the
        exception it failed with."""
        self._done = True
        if isinstance(outcome, BaseException):
            self._error = outcome
        else:
            self._value = loads(outcome)

    def _outcome(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value

    def __await__(self) -> Generator[Any, Any, Any]:
        if not self._done:
            self._settle((yield ("ratchet.one", self._handle)))
        return self._outcome()


def _waiting(steps: Tuple[Step, ...]) -> List[Step]:
    """The steps not finished yet, each once, in order."""
    seen: set = set()
    waiting = []
    for step in steps:
        if not step._done and id(step) not in seen:
            seen.add(id(step))
            waiting.append(step)
    return waiting


class _All:
    __slots__ = ("_steps",)

    def __init__(self, steps: Tuple[Step, ...]) -> None:
        self._steps = steps

    def __await__(self) -> Generator[Any, Any, List[Any]]:
        waiting = _waiting(self._steps)
        if waiting:
            outcomes = yield ("ratchet.all", [s._handle for s in waiting])
            for step, outcome in zip(waiting, outcomes):
                step._settle(outcome)
        return [step._outcome() for step in self._steps]


class _Any:
    __slots__ = ("_steps",)

    def __init__(self, steps: Tuple[Step, ...]) -> None:
        self._steps = steps

    def __await__(self) -> Generator[Any, Any, Tuple[int, Any]]:
        if not self._steps:
            raise TypeError("race() of no steps")
        for index, step in enumerate(self._steps):
            if step._done:  # finished already: the first such wins at once
                return index, step._outcome()
        waiting = _waiting(self._steps)
        index, outcome = yield ("ratchet.any", [s._handle for s in waiting])
        winner = waiting[index]
        winner._settle(outcome)
        return self._steps.index(winner), winner._outcome()


def _steps(steps: Tuple[Any, ...], what: str) -> Tuple[Step, ...]:
    for step in steps:
        if not isinstance(step, Step):
            raise TypeError(f"{what}() takes the context's steps, not {step!r}")
    return steps


def gather(*steps: Step) -> Awaitable[List[Any]]:
    """Awaits every step (scheduled together: a fan-out); their results in order. The first
    failure in order is raised; every step keeps its own outcome for a later await."""
    return _All(_steps(steps, "gather"))


def race(*steps: Step) -> Awaitable[Tuple[int, Any]]:
    """Awaits the first step to finish (listed first when several are): `(its index, its
    result)`, or its error raised. The others run on and can be awaited later; a step that
    finished before the race wins it at once."""
    return _Any(_steps(steps, "race"))


class WorkflowContext:
    """What a workflow may do. Deterministic: in replay every call returns what it returned
    the first time."""

    __slots__ = ("_native",)

    def __init__(self, native: _ratchet.NativeContext) -> None:
        self._native = native

    @property
    def instance_id(self) -> str:
        return self._native.instance_id()

    @property
    def is_replaying(self) -> bool:
        return self._native.is_replaying()

    def activity(self, name: str, input: Any = None, *, max_attempts: Optional[int] = None,
                 retry_delay: Optional[float] = None, timeout: Optional[float] = None) -> Step:
        """Schedules the activity `name`; retried as the options say. Raises
        :class:`ratchet.ActivityFailed` when awaited if it fails for good."""
        if max_attempts is not None:
            max_attempts = _check_int(max_attempts, "max_attempts", 1, 2**32 - 1)
        return Step(self._native.activity(name, encode(input, "activity input"), max_attempts,
                                          retry_delay, timeout))

    def sleep(self, seconds: float) -> Step:
        """A durable timer."""
        return Step(self._native.sleep(float(seconds)))

    def signal(self, name: str, timeout: Optional[float] = None) -> Step:
        """The next signal `name`'s payload; with `timeout` (seconds), None when it runs out."""
        return Step(self._native.signal(name, None if timeout is None else float(timeout)))

    def child(self, name: str, input: Any = None, *, id: Optional[str] = None) -> Step:
        """Starts a child workflow and awaits its output (:class:`ratchet.ChildFailed`)."""
        return Step(self._native.child(name, encode(input, "child input"), id))

    def now(self) -> float:
        """The recorded time, in seconds since the Unix epoch."""
        return self._native.now() / 1000.0

    def uuid(self) -> str:
        return self._native.uuid()

    def random(self) -> float:
        return self._native.random()

    def is_patched(self, name: str) -> bool:
        """Whether the code change `name` applies to this instance (recorded on first use)."""
        return self._native.is_patched(name)

    def set_custom_status(self, status: Any) -> None:
        self._native.set_custom_status(encode(status, "custom status"))

    def continue_as_new(self, input: Any = None) -> "ContinueAsNewNever":
        """Ends this execution and starts the workflow afresh with `input` (a new history).
        Use as `raise ctx.continue_as_new(...)` or just call it: it raises."""
        error = _ratchet.ContinueAsNew("continue as new")
        error.input = encode(input, "continue-as-new input")
        raise error


#: `continue_as_new` never returns.
ContinueAsNewNever = Any


def workflow(name: Optional[str] = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Registers `async def f(ctx, input)` as the workflow `name` (default: its name)."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        _WORKFLOWS[name or fn.__name__] = fn
        return fn

    if callable(name):
        fn, name = name, None
        return register(fn)  # type: ignore[return-value]
    return register


def activity(name: Optional[str] = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Registers an activity handler (async or plain, like a task's)."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        _ACTIVITIES[name or fn.__name__] = fn
        return fn

    if callable(name):
        fn, name = name, None
        return register(fn)  # type: ignore[return-value]
    return register


def _entry(fn: Callable[..., Any]) -> Callable[[_ratchet.NativeContext, str], Any]:
    """What the Rust core calls: the workflow's coroutine on a wrapped context and input."""

    def start(native: _ratchet.NativeContext, input_json: str) -> Any:
        return fn(WorkflowContext(native), loads(input_json))

    return start
