"""Instances from Python: start, status, signals, list, history, stop, wait."""

import asyncio

import pytest

import ratchet


def test_start_signal_list_and_stop(url, schema):
    async def main():
        client = await ratchet.connect(url, schema=schema)
        # Nothing runs `order` here: the instances stay pending, which is all these need.
        a = await client.start("order", {"n": 1}, id="ord-1")
        b = await client.start("order", {"n": 2})
        assert a == "ord-1" and b != a
        with pytest.raises(ratchet.AlreadyExists):
            await client.start("order", {}, id="ord-1")
        assert await client.start("order", {}, id="ord-1", if_exists="use_existing") == "ord-1"
        st = await client.status("ord-1")
        assert st["status"] == "Pending" and st["input"] == {"n": 1} and st["name"] == "order"
        assert await client.signal("ord-1", "go", {"x": 1}, dedup_id="d1") is True
        assert await client.signal("ord-1", "go", {"x": 1}, dedup_id="d1") is False
        listed = await client.list(id_prefix="ord-")
        assert [i["id"] for i in listed] == ["ord-1"]
        assert len(await client.list(status="Pending")) == 2
        with pytest.raises(ratchet.Timeout):
            await client.wait("ord-1", timeout=0.2)
        await client.terminate("ord-1", "not needed")
        outcome = await client.wait("ord-1", timeout=10)
        assert outcome["status"] == "Terminated"
        with pytest.raises(ratchet.Failed, match="Terminated"):
            await client.result("ord-1", timeout=1)
        # It never ran (nothing runs `order` here), so its history holds no turn yet.
        history = await client.history("ord-1")
        assert all({"execution", "seq", "event"} <= set(h) for h in history)
        with pytest.raises(ratchet.NotFound):
            await client.status("nobody")
        with pytest.raises(ratchet.InvalidInput):
            await client.start("order", object())
        with pytest.raises(ratchet.InvalidInput):
            await client.start("order", {}, if_exists="sometimes")
        with pytest.raises(ratchet.InvalidInput):
            await client.list(status="Sleeping")

    asyncio.run(main())
