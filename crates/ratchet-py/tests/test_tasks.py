"""Tasks from Python: enqueue, workers with async and plain handlers, retries, dead letters,
and bad input refused with nothing written."""

import asyncio

import pytest

import ratchet


def run(coro):
    return asyncio.run(coro)


def test_enqueue_and_work_async_and_plain_handlers(url, schema, worker_url):
    async def main():
        client = await ratchet.connect(url, schema=schema)

        async def double(x):
            return x * 2

        def shout(info, text):  # plain: runs in the thread pool, with the task's info
            return {"text": text.upper(), "attempt": info.attempt, "name": info.name}

        ids = await client.enqueue_many([("double", 21), ("shout", "hi"),
                                         {"name": "double", "input": 5, "options": {"priority": -1}}])
        assert len(ids) == 3 and len(set(ids)) == 3
        worker = ratchet.Worker(worker_url, schema=schema, tasks={"double": double, "shout": shout})
        async with worker:
            done = [await client.task_wait(i, 20) for i in ids]
        assert [t["state"] for t in done] == ["Completed"] * 3
        assert done[0]["output"] == 42
        assert done[1]["output"] == {"text": "HI", "attempt": 1, "name": "shout"}
        assert done[2]["output"] == 10 and done[2]["priority"] == -1
        listed = await client.tasks(state="Completed")
        assert sorted(t["id"] for t in listed) == sorted(ids)

    run(main())


def test_a_failing_handler_is_retried_then_dead_with_its_error(url, schema, worker_url):
    async def main():
        client = await ratchet.connect(url, schema=schema)
        attempts = []

        async def flaky(x):
            attempts.append(x)
            if len(attempts) < 2:
                raise ConnectionError("first attempt fails")
            return "ok"

        async def broken(x):
            raise ValueError(f"bad {x}")

        retried = await client.enqueue("flaky", 1, max_attempts=3, retry_delay=0.01)
        dead = await client.enqueue("broken", 7, max_attempts=2, retry_delay=0.01)
        async with ratchet.Worker(worker_url, schema=schema,
                                  tasks={"flaky": flaky, "broken": broken}):
            ok = await client.task_wait(retried, 20)
            gone = await client.task_wait(dead, 20)
        assert ok["state"] == "Completed" and ok["attempt"] == 2 and ok["output"] == "ok"
        assert gone["state"] == "Dead" and gone["attempt"] == 2
        assert gone["error"]["kind"] == "ValueError"
        assert gone["error"]["message"] == "bad 7"
        await client.task_retry(dead)
        assert (await client.task(dead))["state"] == "Available"
        await client.task_cancel(dead)
        assert (await client.task(dead))["state"] == "Cancelled"

    run(main())


def test_unique_keys_delays_and_paging(url, schema):
    async def main():
        client = await ratchet.connect(url, schema=schema)
        first = await client.enqueue("job", 1, unique_key="only-one", delay=60)
        again = await client.enqueue("job", 2, unique_key="only-one")
        assert again == first, "a duplicate answers the unfinished task's id"
        t = await client.task(first)
        assert t["state"] == "Scheduled" and t["input"] == 1
        ids = await client.enqueue_many([("job", n, {"queue": "paged"}) for n in range(5)])
        page1 = await client.tasks(queue="paged", limit=3)
        page2 = await client.tasks(queue="paged", limit=3, before=page1[-1]["id"])
        assert [t["id"] for t in page1 + page2] == sorted(ids, reverse=True)

    run(main())


@pytest.mark.parametrize("bad, message", [
    (lambda c: c.enqueue("job", {1, 2}), "not JSON-serializable"),
    (lambda c: c.enqueue("job", 1, colour="red"), "unknown task option 'colour'"),
    (lambda c: c.enqueue("job", 1, priority=100000), "priority"),
    (lambda c: c.enqueue("job", 1, max_attempts=0), "max_attempts"),
    (lambda c: c.enqueue("job", 1, delay=-1), "delay"),
    (lambda c: c.enqueue("job", 1, delay=1e20), "task option delay"),
    (lambda c: c.enqueue("job", 1, delay=260_000_000_000), "task option delay"),
    (lambda c: c.enqueue("job", 1, run_at=1e15), "task option run_at"),
    (lambda c: c.enqueue("job", 1, retry_delay=1e12), "task option retry_delay"),
    (lambda c: c.enqueue("job", 1, queue=5), "queue"),
    (lambda c: c.enqueue(42, 1), "name must be a str"),
    (lambda c: c.enqueue("job", "x" * (2 << 20)), "over the limit"),
    (lambda c: c.enqueue_many([("job", 1), ("job", b"bytes")]), "not JSON"),
    (lambda c: c.enqueue_many([("job", 1), ("job",)]), "expected (name, input"),
])
def test_bad_input_is_refused_and_nothing_is_written(url, schema, bad, message):
    async def main():
        client = await ratchet.connect(url, schema=schema)
        with pytest.raises(ratchet.InvalidInput, match=None) as raised:
            await bad(client)
        assert message in str(raised.value), str(raised.value)
        assert await client.tasks() == []

    run(main())


def test_queues_run_with_their_concurrency_and_bad_ones_are_refused(url, schema, worker_url):
    async def main():
        client = await ratchet.connect(url, schema=schema)
        running, most = 0, 0

        async def slow(_):
            nonlocal running, most
            running += 1
            most = max(most, running)
            await asyncio.sleep(0.05)
            running -= 1

        ids = await client.enqueue_many([("slow", n, {"queue": "narrow"}) for n in range(8)])
        async with ratchet.Worker(worker_url, schema=schema, queues={"narrow": (2, 0)},
                                  tasks={"slow": slow}):
            for i in ids:
                assert (await client.task_wait(i, 20))["state"] == "Completed"
        assert most == 2, "two at once, as the queue says"
        for bad in ({"q": 0}, {"q": "many"}, {"q": (2, -1)}):
            with pytest.raises(ratchet.InvalidInput):
                await ratchet.Worker(url, schema=schema, queues=bad, tasks={"slow": slow}).start()

    run(main())


def test_a_cancelled_task_raises_in_its_handler(url, schema, worker_url):
    async def main():
        client = await ratchet.connect(url, schema=schema)
        started, seen = asyncio.Event(), []

        async def long(_):
            started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

        task_id = await client.enqueue("long", None)
        async with ratchet.Worker(worker_url, schema=schema, tasks={"long": long}, lease=1.5):
            await asyncio.wait_for(started.wait(), 20)
            await client.task_cancel(task_id)
            done = await client.task_wait(task_id, 20)
            for _ in range(100):
                if seen:
                    break
                await asyncio.sleep(0.05)
        assert done["state"] == "Cancelled", done
        assert seen == ["cancelled"]

    run(main())


def test_heartbeats_keep_a_long_task_and_a_stop_waits_for_it(url, schema, worker_url):
    async def main():
        client = await ratchet.connect(url, schema=schema)
        started, runs = asyncio.Event(), []

        async def long(x):
            runs.append(x)
            started.set()
            await asyncio.sleep(2.5)  # longer than its lease: only heartbeats keep it
            return x + 1

        task_id = await client.enqueue("long", 1)
        worker = ratchet.Worker(worker_url, schema=schema, tasks={"long": long}, lease=1.0)
        await worker.start()
        await asyncio.wait_for(started.wait(), 20)
        await worker.stop()  # graceful: the running attempt finishes and is reported
        done = await client.task(task_id)
        assert (done["state"], done["output"], done["attempt"]) == ("Completed", 2, 1), done
        assert runs == [1], "one attempt, never taken over"

    run(main())


def test_the_sync_client_blocks_until_done(url, schema):
    client = ratchet.SyncClient(url, schema=schema)
    task_id = client.enqueue("job", {"n": 1}, queue="sync")
    assert client.task(task_id)["queue"] == "sync"
    with pytest.raises(ratchet.NotFound):
        client.task(task_id + 1000)
