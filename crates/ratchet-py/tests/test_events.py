"""The event store from Python: append, read, conditional append, idempotency, subscribe."""

import asyncio

import pytest

import ratchet


def test_append_read_and_conditional_append(url, schema):
    async def main():
        client = await ratchet.connect(url, schema=schema)
        first, last = await client.append([
            {"type": "Enrolled", "tags": ["course:c1", "student:a"], "payload": {"n": 1}},
            {"type": "Enrolled", "tags": ["course:c2"], "payload": {"n": 2}},
        ])
        assert (first, last) == (1, 2)
        page = await client.read(["Enrolled"], ["course:c1"])
        assert [e["payload"] for e in page["events"]] == [{"n": 1}]
        assert page["head"] == 2
        # Decide on c1, then lose the race to another append in c1.
        events, condition = await client.project(["Enrolled"], ["course:c1"])
        assert len(events) == 1
        await client.append([{"type": "Enrolled", "tags": ["course:c1"]}])
        with pytest.raises(ratchet.AppendConflict):
            await client.append([{"type": "Enrolled", "tags": ["course:c1"]}], condition=condition)
        # An append elsewhere does not conflict.
        _, condition = await client.project(["Enrolled"], ["course:c1"])
        await client.append([{"type": "Enrolled", "tags": ["course:c2"]}])
        await client.append([{"type": "Enrolled", "tags": ["course:c1"]}], condition=condition)
        once = await client.append([{"type": "Paid"}], idempotency_key="k1")
        assert await client.append([{"type": "Paid"}], idempotency_key="k1") == once
        backward = await client.read(limit=2, backward=True)
        assert [e["type"] for e in backward["events"]] == ["Paid", "Enrolled"]
        with pytest.raises(ratchet.InvalidInput):
            await client.append([{"type": ""}])
        with pytest.raises(ratchet.InvalidInput):
            await client.append([{"tags": ["x:y"]}])

    asyncio.run(main())


def test_subscribe_yields_new_events(url, schema):
    async def main():
        client = await ratchet.connect(url, schema=schema)
        await client.append([{"type": "Tick", "payload": 1}])
        seen = []

        async def follow():
            async for event in client.subscribe(["Tick"], poll=0.05):
                seen.append(event["payload"])
                if len(seen) == 3:
                    return

        follower = asyncio.ensure_future(follow())
        await asyncio.sleep(0.1)
        await client.append([{"type": "Tock"}, {"type": "Tick", "payload": 2}])
        await client.append([{"type": "Tick", "payload": 3}])
        await asyncio.wait_for(follower, 10)
        assert seen == [1, 2, 3]

    asyncio.run(main())
