"""Schedules from Python, on both backends and over HTTP: a schedule every second fires a
Python task worker's task, each tick once; pause, trigger, describe and backfill; bad
definitions refused naming the field, nothing written."""

import asyncio
import datetime
import time

import pytest

import ratchet


def test_a_schedule_fires_a_python_task_each_tick_once(url, schema):
    ran = []

    @ratchet.task
    async def tick(ctx, n):
        ran.append(ctx.id)
        return n

    async def main():
        client = await ratchet.connect(url, schema=schema)
        created = await client.schedule_create(
            "ticker", "every 1s", task="tick", input=7, overlap="allow_all",
            options={"queue": "default"}, time_zone="Europe/Paris")
        assert created["spec"] == "every 1s" and created["version"] == 1
        async with ratchet.Worker(url, schema=schema, tasks={"tick": tick}):
            for _ in range(100):
                if len(ran) >= 2:
                    break
                await asyncio.sleep(0.05)
            await client.schedule_pause("ticker", "enough")
        described = await client.schedule("ticker", upcoming=3, recent=50)
        assert described["schedule"]["paused"] is True
        assert described["schedule"]["note"] == "enough"
        assert described["upcoming"] == [], "no next ticks while paused"
        fires = [f for f in described["recent"] if f["kind"] == "scheduled"]
        ticks = [f["tick"] for f in fires]
        assert len(ticks) >= 2 and len(ticks) == len(set(ticks)), "each tick once"
        assert all(f["fired_at"] >= f["tick"] for f in fires)
        assert all(isinstance(f["tick"], datetime.datetime) for f in fires)
        assert {f["run"] for f in fires} >= {str(i) for i in ran}
        manual = await client.schedule_trigger("ticker")
        assert manual["kind"] == "manual"
        task = await client.task(int(manual["run"]))
        assert task["metadata"]["ratchet_schedule"]["schedule"] == "ticker"
        # Backfill the minute before the schedule was made: nothing it has passed is before
        # its creation but the ticks since, which already ran; a second backfill adds none.
        now = time.time()
        first = await client.schedule_backfill("ticker", now - 60, now)
        again = await client.schedule_backfill("ticker", now - 60, now)
        assert again == [] and all(f["kind"] == "backfill" for f in first)
        assert [s["name"] for s in await client.schedules()] == ["ticker"]
        await client.schedule_delete("ticker")
        with pytest.raises(ratchet.NotFound):
            await client.schedule("ticker")

    asyncio.run(main())


def test_bad_schedules_are_refused_naming_the_field(url, schema):
    async def main():
        client = await ratchet.connect(url, schema=schema)
        for spec, extra, field in [
            ("every 0s", {"workflow": "w"}, "spec"),
            ("every 1m", {"workflow": "w", "time_zone": "Mars/Base"}, "time_zone"),
            ("every 1m", {"workflow": "w", "overlap": "sometimes"}, "overlap"),
            ("every 1m", {"workflow": "w", "catch_up": "all of them"}, "catch_up"),
            ("every 1m", {"workflow": "w", "start_at": 2000, "end_at": 1000}, "end"),
            # 9999-12-31T23:30:00Z: no tick before the calendar ends.
            ("every 1h", {"workflow": "w", "start_at": 253_402_299_000}, "start_at"),
            ("every 1m", {"workflow": "w", "jitter": 1e20}, "jitter"),
            ("every 1m", {"task": "t", "options": {"delay": 1e20}}, "task option delay"),
        ]:
            with pytest.raises(ratchet.InvalidInput, match=field):
                await client.schedule_create("bad", spec, **extra)
        with pytest.raises(ratchet.InvalidInput, match="either `workflow` or `task`"):
            await client.schedule_create("bad", "every 1m")
        with pytest.raises(ratchet.InvalidInput, match="colour"):
            await client.schedule_create("bad", "every 1m", workflow="w", colour="red")
        assert await client.schedules() == []
        await client.schedule_create("good", "0 3 * * *", workflow="w")
        with pytest.raises(ratchet.AlreadyExists):
            await client.schedule_create("good", "0 3 * * *", workflow="w")

    asyncio.run(main())
