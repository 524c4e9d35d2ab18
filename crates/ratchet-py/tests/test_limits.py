"""No input takes the process down: what `connect` takes, and values out of range (times,
durations, integers) refused with InvalidInput naming them, never a Rust panic crossing into
Python (PanicException, a backtrace on stderr) and never Python's OverflowError."""

import asyncio

import pytest

import ratchet

CENTURY = 100 * 365.25 * 86400  # the longest duration, in seconds


def run(coro):
    return asyncio.run(coro)


def echo(x):
    return x


@pytest.mark.parametrize("location", [
    "mysql://user:secretpw@db.example/app",
    "redis://:secretpw@cache.example:6379/0",
    "mongodb+srv://user:secret/pw@db.example/app?authSource=admin&password=secretpw",
    "sqlserver://user:secretpw@db.example",
    "user:secretpw@db.example:5432/app",
    "",
])
def test_connect_refuses_what_is_no_store_without_showing_a_password(location, tmp_path,
                                                                    monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)

    async def main():
        with pytest.raises(ratchet.InvalidInput) as raised:
            await ratchet.connect(location)
        assert "secret" not in str(raised.value), str(raised.value)
        assert "url" in str(raised.value)
        with pytest.raises(ratchet.InvalidInput) as raised:
            await ratchet.Worker(location, tasks={"job": lambda x: x}).start()
        assert "secret" not in str(raised.value), str(raised.value)

    run(main())
    assert list(tmp_path.iterdir()) == [], "no file was created"
    assert "secret" not in capfd.readouterr().err


def test_sqlite_files_are_paths_or_sqlite_urls(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    async def main():
        for url, made in [("app.db", tmp_path / "app.db"),
                          ("sqlite:relative.db", tmp_path / "relative.db"),
                          (f"sqlite://{tmp_path / 'absolute.db'}", tmp_path / "absolute.db"),
                          (str(tmp_path / "plain.db"), tmp_path / "plain.db")]:
            client = await ratchet.connect(url)
            await client.enqueue("job", 1)
            assert made.exists(), url
            assert len(await (await ratchet.connect(str(made))).tasks()) == 1, url
        with pytest.raises(ratchet.InvalidInput, match="empty"):
            await ratchet.connect("sqlite:")
        # A worker on a server's address runs tasks and activities; workflows need the
        # database.
        with pytest.raises(ratchet.InvalidInput, match="workflows run where the database is"):
            ratchet.Worker("http://localhost:8080", workflows={"flow": echo})

    run(main())


@pytest.mark.parametrize("options, field", [
    ({"delay": 1e20}, "delay"),
    ({"delay": CENTURY + 86400}, "delay"),
    ({"delay": float("nan")}, "delay"),
    ({"delay": float("inf")}, "delay"),
    ({"retry_delay": 1e20}, "retry_delay"),
    ({"timeout": 1e300}, "timeout"),
    ({"run_at": 1e20}, "run_at"),
    ({"run_at": 253402300800}, "run_at"),  # 10000-01-01
    ({"run_at": float("nan")}, "run_at"),
    ({"priority": 2**70}, "priority"),
    ({"max_attempts": 2**70}, "max_attempts"),
])
def test_out_of_range_task_options_are_refused_naming_them(url, schema, options, field, capfd):
    async def main():
        client = await ratchet.connect(url, schema=schema)
        with pytest.raises(ratchet.InvalidInput, match=field):
            await client.enqueue("job", 1, **options)
        assert await client.tasks() == [], "nothing was written"
        # Just inside the limits is accepted.
        await client.enqueue("job", 1, delay=CENTURY - 86400, timeout=CENTURY,
                             run_at=253402300799)

    run(main())
    assert "panicked" not in capfd.readouterr().err


def test_out_of_range_waits_schedules_and_integers_are_refused_naming_them(url, schema, capfd):
    async def main():
        client = await ratchet.connect(url, schema=schema)
        await client.schedule_create("nightly", "0 3 * * *", workflow="report")
        refused = [
            (client.wait("x", timeout=1e20), "timeout"),
            (client.task_wait(1, timeout=float("inf")), "timeout"),
            (client.schedule_create("s", "every 1m", workflow="w", jitter=1e20), "jitter"),
            (client.schedule_create("s", "every 1m", workflow="w", start_at=1e20), "start_at"),
            (client.schedule_create("s", "every 1m", workflow="w", end_at=-1e20), "end_at"),
            (client.schedule_create("s", "every 1m", workflow="w", jitter=float("nan")),
             "jitter"),
            (client.schedule_create("s", "every 1m", task="t", options={"delay": 1e20}),
             "delay"),
            (client.schedule_backfill("nightly", 0, 1e20), "end"),
            (client.list(limit=-1), "limit"),
            (client.list(limit=2**40), "limit"),
            (client.tasks(limit=-1), "limit"),
            (client.tasks(before=2**70), "before"),
            (client.task(2**70), "id"),
            (client.task_wait(-(2**70)), "id"),
            (client.task_cancel(2**64), "id"),
            (client.schedule("nightly", upcoming=-1), "upcoming"),
            (client.read(["x"], after=2**70), "after"),
            (client.read(["x"], limit=-5), "limit"),
        ]
        for call, field in refused:
            with pytest.raises(ratchet.InvalidInput, match=field):
                await call
        assert [s["name"] for s in await client.schedules()] == ["nightly"]
        for worker, field in [
            (lambda: ratchet.Worker(url, schema=schema, lease=1e20, tasks={"t": echo}), "lease"),
            (lambda: ratchet.Worker(url, schema=schema, queues={"q": 2**62}, tasks={"t": echo}),
             "concurrency"),
            (lambda: ratchet.Worker(url, schema=schema, queues={"q": 2**70}, tasks={"t": echo}),
             "concurrency"),
            (lambda: ratchet.Worker(url, schema=schema, queues={"q": (4, 2**62)},
                                    tasks={"t": echo}), "prefetch"),
            (lambda: ratchet.Worker(url, schema=schema, batch=2**70, tasks={"t": echo}), "batch"),
        ]:
            with pytest.raises(ratchet.InvalidInput, match=field):
                await worker().start()

    run(main())
    assert "panicked" not in capfd.readouterr().err


def test_the_http_client_refuses_the_same_before_it_sends_anything(capfd):
    async def main():
        # Nothing listens there: a call that got past the checks would fail with StoreError.
        client = await ratchet.connect("http://127.0.0.1:9")
        refused = [
            (client.enqueue("job", 1, delay=1e20), "delay"),
            (client.enqueue("job", 1, timeout=float("nan")), "timeout"),
            (client.enqueue("job", 1, retry_delay=-1), "retry_delay"),
            (client.enqueue("job", 1, run_at=1e20), "run_at"),
            (client.enqueue("job", 1, priority=2**70), "priority"),
            (client.wait("x", timeout=1e20), "timeout"),
            (client.task_wait(1, timeout=float("inf")), "timeout"),
            (client.task(2**70), "id"),
            (client.tasks(limit=-1), "limit"),
            (client.list(limit=2**40), "limit"),
            (client.schedule_create("s", "every 1m", workflow="w", jitter=1e20), "jitter"),
            (client.schedule_create("s", "every 1m", workflow="w", start_at=1e20), "start_at"),
            (client.schedule_backfill("s", 0, 1e20), "end"),
            (client.schedule("s", recent=-1), "recent"),
            (client.read(["x"], after=2**70), "after"),
        ]
        for call, field in refused:
            with pytest.raises(ratchet.InvalidInput, match=field):
                await call
        with pytest.raises(ratchet.StoreError):
            await client.enqueue("job", 1, delay=CENTURY - 86400, run_at=253402300799)

    run(main())
    assert "panicked" not in capfd.readouterr().err
