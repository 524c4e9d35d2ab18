"""Workflows written in Python, replayed by the Rust core: fan-out, timers, signals, races,
failures, cancellation, continue-as-new, nondeterminism, and a worker killed mid-workflow."""

import asyncio
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import ratchet
from conftest import serve


async def double(x):
    return x * 2


def count(text):  # a plain activity: runs in the worker's thread pool
    return len(text)


async def fan_out(ctx, n):
    ctx.set_custom_status("fanning out")
    doubled = await ratchet.gather(*(ctx.activity("double", i) for i in range(n)))
    length = await ctx.activity("count", "abc")
    await ctx.sleep(0.01)
    payload = await ctx.signal("go", timeout=10)
    index, first = await ratchet.race(ctx.signal("never"), ctx.sleep(0.01))
    return {"sum": sum(doubled), "length": length, "signal": payload, "race": index,
            "uuid": len(ctx.uuid()), "random": 0 <= ctx.random() < 1, "now": ctx.now() > 0}


async def failing(ctx, _input):
    try:
        await ctx.activity("broken", 1, max_attempts=2, retry_delay=0.01)
    except ratchet.ActivityFailed as e:
        raise LookupError(f"gave up: {e}")


async def broken(_x):
    raise ValueError("always")


async def waiting(ctx, _input):
    try:
        await ctx.signal("never")
    except ratchet.Cancelled:
        await ctx.activity("double", 21)  # clean-up still runs
        raise


async def impure(ctx, _input):
    await asyncio.sleep(0.01)  # not a step: no event loop runs workflow code


class Foreign:
    def __await__(self):
        yield "something else"


async def foreign(ctx, _input):
    await Foreign()


async def counting(ctx, n):
    if n < 3:
        ctx.continue_as_new(n + 1)
    return n


async def gather_after_await(ctx, n):
    """The issue's case: a gather of steps one of which was awaited before."""
    steps = [ctx.activity("double", i) for i in range(n)]
    first = await steps[0]
    return {"first": first, "all": await ratchet.gather(*steps)}


async def awaited_again(ctx, _input):
    """Steps awaited more than once, alone, in gather and in race: each answers its own
    outcome every time, and a race's loser runs on."""
    a, b = ctx.activity("double", 1), ctx.activity("double", 2)
    first = await a
    both = await ratchet.gather(a, b)  # a was awaited already
    twice = await ratchet.gather(b, b)
    late, fast = ctx.signal("late"), ctx.sleep(0.01)
    index, _ = await ratchet.race(late, fast)
    ctx.set_custom_status("raced")
    payload = await late  # the loser, awaited after the race
    after = await ratchet.gather(fast, late)
    ok, bad = ctx.activity("double", 5), ctx.activity("broken", 1, max_attempts=1)
    try:
        await ratchet.gather(ok, bad)
        failed = None
    except ratchet.ActivityFailed:
        failed = "ActivityFailed"
    done_first = await ratchet.race(ctx.signal("never"), ok)  # ok finished already
    return {"first": first, "both": both, "twice": twice, "race": index, "late": payload,
            "after": after, "failed": failed, "ok": await ok, "done_first": done_first}


async def out_of_range(ctx, what):
    """A workflow that gives a step a duration out of range: it fails, naming it."""
    if what == "sleep":
        await ctx.sleep(1e20)
    elif what == "timeout":
        await ctx.activity("double", 1, timeout=float("inf"))
    elif what == "signal":
        await ctx.signal("go", timeout=1e300)
    elif what == "max_attempts":
        await ctx.activity("double", 1, max_attempts=2**40)


def worker(url, schema, **kwargs):
    return ratchet.Worker(url, schema=schema, tasks={},
                          activities={"double": double, "count": count, "broken": broken},
                          workflows={"fan_out": fan_out, "failing": failing, "waiting": waiting,
                                     "counting": counting, "impure": impure,
                                     "foreign": foreign, "awaited_again": awaited_again,
                                     "gather_after_await": gather_after_await,
                                     "out_of_range": out_of_range}, **kwargs)


def test_fan_out_timers_signals_and_races(url, schema):
    async def main():
        client = await ratchet.connect(url, schema=schema)
        async with worker(url, schema):
            id = await client.start("fan_out", 5)
            for _ in range(200):
                if (await client.status(id))["custom_status"] == "fanning out":
                    break
                await asyncio.sleep(0.02)
            await client.signal(id, "go", {"ok": True})
            output = await client.result(id, timeout=30)
        assert output == {"sum": 20, "length": 3, "signal": {"ok": True}, "race": 1,
                          "uuid": 36, "random": True, "now": True}
        kinds = [h["event"]["type"] for h in await client.history(id)]
        assert kinds.count("ActivityScheduled") == 6

    asyncio.run(main())


def test_a_step_awaited_again_answers_its_outcome_again(url, schema):
    async def main():
        client = await ratchet.connect(url, schema=schema)
        async with worker(url, schema):
            gathered = await client.result(await client.start("gather_after_await", 3), 30)
            assert gathered == {"first": 0, "all": [0, 2, 4]}, "every step's result, in order"
            id = await client.start("awaited_again", None)
            for _ in range(500):
                status = await client.status(id)
                if status["custom_status"] == "raced" or status["status"] == "Failed":
                    break
                await asyncio.sleep(0.02)
            await client.signal(id, "late", {"x": 1})
            output = await client.result(id, timeout=30)
        assert output == {"first": 2, "both": [2, 4], "twice": [4, 4], "race": 1,
                          "late": {"x": 1}, "after": [None, {"x": 1}],
                          "failed": "ActivityFailed", "ok": 10, "done_first": [1, 10]}

    asyncio.run(main())


def test_a_step_out_of_range_fails_its_workflow_naming_it(url, schema, capfd):
    async def main():
        client = await ratchet.connect(url, schema=schema)
        async with worker(url, schema):
            for what, field in [("sleep", "sleep"), ("timeout", "timeout"),
                                ("signal", "timeout"), ("max_attempts", "max_attempts")]:
                id = await client.start("out_of_range", what)
                outcome = await client.wait(id, 30)
                assert outcome["status"] == "Failed", outcome
                assert outcome["error"]["kind"] == "InvalidInput", outcome
                assert field in outcome["error"]["message"], outcome
            # The worker is still up and running workflows.
            assert (await client.result(await client.start("counting", 3), timeout=30)) == 3

    asyncio.run(main())
    assert "panicked" not in capfd.readouterr().err


def test_failures_cancellation_and_continue_as_new(url, schema):
    async def main():
        client = await ratchet.connect(url, schema=schema)
        async with worker(url, schema):
            failed = await client.start("failing", None)
            outcome = await client.wait(failed, 30)
            assert outcome["status"] == "Failed"
            assert outcome["error"]["kind"] == "LookupError"
            assert "gave up" in outcome["error"]["message"]

            waiting = await client.start("waiting", None)
            await asyncio.sleep(0.3)
            await client.cancel(waiting, "not needed")
            outcome = await client.wait(waiting, 30)
            assert outcome["status"] == "Cancelled", outcome
            kinds = [h["event"]["type"] for h in await client.history(waiting)]
            assert "ActivityScheduled" in kinds, "the clean-up ran"

            for name, kind in [("impure", "RuntimeError"), ("foreign", "TypeError")]:
                outcome = await client.wait(await client.start(name, None), 30)
                assert outcome["status"] == "Failed", outcome
                assert outcome["error"]["kind"] == kind, outcome
            assert "something else" in outcome["error"]["message"]

            counted = await client.start("counting", 0)
            assert await client.result(counted, 30) == 3
            assert (await client.status(counted))["execution"] == 3

    asyncio.run(main())


def test_a_changed_workflow_fails_replay_with_a_named_mismatch(url, schema):
    async def first(ctx, _input):
        await ctx.activity("double", 1)
        await ctx.signal("go")
        return "done"

    async def changed(ctx, _input):
        await ctx.activity("count", "x")  # not what history says ran first
        await ctx.signal("go")
        return "done"

    async def main():
        client = await ratchet.connect(url, schema=schema)
        acts = {"double": double, "count": count}
        async with ratchet.Worker(url, schema=schema, activities=acts,
                                  workflows={"flow": first}):
            id = await client.start("flow", None)
            for _ in range(200):
                kinds = [h["event"]["type"] for h in await client.history(id)]
                if "ActivityCompleted" in kinds:
                    break
                await asyncio.sleep(0.02)
        # A new process (nothing cached) with different code replays the history.
        async with ratchet.Worker(url, schema=schema, activities=acts,
                                  workflows={"flow": changed}):
            await client.signal(id, "go", None)
            outcome = await client.wait(id, 30)
        assert outcome["status"] == "Failed", outcome
        assert outcome["error"]["kind"] == "Nondeterminism", outcome
        assert "double" in outcome["error"]["message"] and "count" in outcome["error"]["message"]

    asyncio.run(main())


WORKER_SCRIPT = textwrap.dedent("""
    import asyncio, os, sys, ratchet

    url, schema, marks = sys.argv[1], sys.argv[2] or None, sys.argv[3]

    @ratchet.activity
    def step(name):
        with open(os.path.join(marks, name), "a") as f:
            f.write("ran\\n")
        return name

    @ratchet.activity
    async def slow(_):
        if os.environ.get("SLOW") == "1":
            await asyncio.sleep(60)
        return "slow"

    @ratchet.workflow
    async def durable(ctx, _):
        a = await ctx.activity("step", "one")
        ctx.set_custom_status("slow")
        b = await ctx.activity("slow", None)
        c = await ctx.activity("step", "two")
        return [a, b, c]

    async def main():
        await ratchet.Worker(url, schema=schema, lease=1.0).run()

    asyncio.run(main())
""")


def test_a_killed_worker_resumes_in_another(url, schema, tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER_SCRIPT)
    marks = tmp_path / "marks"
    marks.mkdir()

    def spawn(slow):
        env = dict(os.environ, SLOW="1" if slow else "0")
        return subprocess.Popen([sys.executable, str(script), url, schema or "", str(marks)],
                                env=env)

    async def main():
        client = await ratchet.connect(url, schema=schema)
        first = spawn(slow=True)
        try:
            id = await client.start("durable", None)
            for _ in range(500):
                if (await client.status(id))["custom_status"] == "slow":
                    break
                await asyncio.sleep(0.02)
            else:
                pytest.fail("the first worker never reached the slow step")
            await asyncio.sleep(0.2)  # the slow activity is running
            first.send_signal(signal.SIGKILL)
            first.wait(10)
        finally:
            first.kill()
        second = spawn(slow=False)
        try:
            assert await client.result(id, timeout=60) == ["one", "slow", "two"]
        finally:
            second.send_signal(signal.SIGTERM)
            assert second.wait(20) == 0, "SIGTERM stops the worker gracefully"
        assert (marks / "one").read_text() == "ran\n", "the step before the kill ran once"
        assert (marks / "two").read_text() == "ran\n"

    asyncio.run(main())


DECLARATIVE = """
document: {dsl: '1.0.0', namespace: py, name: doubling, version: '1.0.0'}
do:
  - twice:
      call: twice
      with: {n: 21}
"""


async def twice(x):
    return x["n"] * 2


def test_declarative_workflows_are_applied_and_started_from_python(url, schema):
    async def main():
        client = await ratchet.connect(url, schema=schema)
        applied = await client.apply_workflow(DECLARATIVE)
        assert (applied["name"], applied["revision"], applied["created"]) == ("py/doubling", 1, True)
        assert (await client.apply_workflow(DECLARATIVE))["created"] is False
        with pytest.raises(ratchet.Refused):
            await client.apply_workflow(DECLARATIVE.replace("n: 21", "n: 22"))
        with pytest.raises(ratchet.InvalidInput, match=r"(?s)4 errors.*\n  2:17: task `x`: `wait`"):
            await client.apply_workflow("document: {dsl: '1.0.0'}\ndo: [{x: {wait: nope}}]\n")
        async with ratchet.Worker(url, schema=schema, activities={"twice": twice}):
            id = await client.start("py/doubling", {})
            assert await client.result(id, timeout=30) == 42

    asyncio.run(main())


def test_an_http_worker_runs_the_activities_of_a_servers_workflow(url, schema):
    """A server runs the declarative workflow; its activity runs in a Python worker that has
    only the server's address. The server accepts the definition once the worker's first
    claim made `twice` known."""
    for base in serve(url, schema):
        async def main():
            client = await ratchet.connect(base)
            async with ratchet.Worker(base, activities={"twice": twice}):
                deadline = time.monotonic() + 10
                while True:
                    try:
                        applied = await client.apply_workflow(DECLARATIVE)
                        break
                    except ratchet.InvalidInput as e:
                        assert "no activity named `twice`" in str(e)
                        assert time.monotonic() < deadline, "the worker's name never became known"
                        await asyncio.sleep(0.2)
                assert applied["name"] == "py/doubling"
                id = await client.start("py/doubling", {})
                assert await client.result(id, timeout=30) == 42

        asyncio.run(main())
