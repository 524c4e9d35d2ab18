"""Identifiers are printable: an id or a name holding a bidi override or a zero-width
character (which make two ids look alike in a console or a terminal) is refused with
InvalidInput naming the field, and nothing is written."""

import asyncio

import pytest

import ratchet


def test_ids_and_names_with_invisible_characters_are_refused(url, schema):
    async def main():
        client = await ratchet.connect(url, schema=schema)
        for bad in ["ord\u202e-1", "ord\u200b-1", "ord\ufeff-1"]:
            with pytest.raises(ratchet.InvalidInput, match="id"):
                await client.start("order", {}, id=bad)
        with pytest.raises(ratchet.InvalidInput, match="name"):
            await client.start("ord\u2066er", {})
        with pytest.raises(ratchet.InvalidInput, match="queue"):
            await client.enqueue("work", {}, queue="mail\u200b")
        assert await client.list() == []
        # Printable text in any script is an id.
        assert await client.start("order", {}, id="Bestellung-Größe-東京") == "Bestellung-Größe-東京"

    asyncio.run(main())
