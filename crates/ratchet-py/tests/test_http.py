"""The same client over `ratchet server`'s HTTP API (RATCHET_BIN, or the workspace's debug
build of `ratchet`, which `cargo test` makes)."""

import asyncio
import datetime

import pytest

import ratchet

from conftest import serve


@pytest.fixture
def server(url, schema):
    yield from serve(url, schema)


def test_instances_tasks_and_events_over_http(server):
    async def main():
        client = await ratchet.connect(server)
        order = {"id": "o-1", "items": ["cup"], "amount_cents": 100, "step_ms": 1}
        id = await client.start("order", order, id="o-1")
        for _ in range(200):
            if (await client.status(id))["custom_status"] == "awaiting-delivery":
                break
            await asyncio.sleep(0.05)
        assert await client.signal(id, "delivered", "porch", dedup_id="d") is True
        output = await client.result(id, timeout=30)
        assert output["delivered"] == "porch"
        status = await client.status(id)
        assert status["status"] == "Completed" and isinstance(status["created_at"], datetime.datetime)
        assert [i["id"] for i in await client.list(id_prefix="o-")] == ["o-1"]
        assert (await client.history(id))[0]["event"]["type"] in ("TurnStarted", "ExecutionStarted")

        task_id = await client.enqueue("work", {"ms": 1}, max_attempts=2, priority=-1)
        done = await client.task_wait(task_id, 30)
        assert done["state"] == "Completed" and done["priority"] == -1
        assert any(t["id"] == task_id for t in await client.tasks(state="Completed"))

        await client.append([{"type": "Enrolled", "tags": ["course:c1"]}])
        events, condition = await client.project(["Enrolled"], ["course:c1"])
        assert len(events) == 1 and isinstance(events[0]["recorded_at"], datetime.datetime)
        await client.append([{"type": "Enrolled", "tags": ["course:c1"]}])
        with pytest.raises(ratchet.AppendConflict):
            await client.append([{"type": "Enrolled", "tags": ["course:c1"]}], condition=condition)

        with pytest.raises(ratchet.NotFound):
            await client.status("nobody")
        with pytest.raises(ratchet.UnknownName):
            await client.start("no-such-workflow", {})
        with pytest.raises(ratchet.InvalidInput):
            await client.enqueue("work", {}, colour="red")
        with pytest.raises(ratchet.InvalidInput, match="priority"):
            await client.enqueue("work", {}, priority=100000)
        with pytest.raises(ratchet.Timeout):
            await client.wait(await client.start("order", order), timeout=0.2)

    asyncio.run(main())


def test_schedules_over_http(server):
    async def main():
        client = await ratchet.connect(server)
        created = await client.schedule_create("nightly", "30 2 * * *", workflow="fanout",
                                               input={"activities": 1},
                                               time_zone="Europe/Paris", paused="not yet")
        assert created["paused"] is True and isinstance(created["created_at"], datetime.datetime)
        with pytest.raises(ratchet.InvalidInput, match="time_zone"):
            await client.schedule_create("bad", "every 1m", workflow="fanout",
                                         time_zone="Mars/Base")
        with pytest.raises(ratchet.AlreadyExists):
            await client.schedule_create("nightly", "30 2 * * *", workflow="fanout")
        fire = await client.schedule_trigger("nightly")
        assert fire["kind"] == "manual" and fire["run"].startswith("nightly@")
        assert (await client.result(fire["run"], timeout=30))[0]["i"] == 0
        described = await client.schedule("nightly", recent=5)
        assert described["recent"][0]["status"] == "Completed"
        resumed = await client.schedule_resume("nightly")
        assert resumed["paused"] is False and isinstance(resumed["next_fire_at"], datetime.datetime)
        await client.schedule_delete("nightly")
        assert await client.schedules() == []

    asyncio.run(main())
