"""The client on the database: every method an operation of Ratchet's API, answered in
process by the native module as a server answers it (see :mod:`ratchet._api`)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Optional

from . import _ratchet
from ._api import _I64, _U32, ApiClient, Native, TaskSpec, _check_int, _check_str

__all__ = ["Client", "SyncClient", "TaskSpec", "connect", "_check_int", "_I64", "_U32"]


class Client(ApiClient):
    """A client on one store. Make one with :func:`ratchet.connect`; every method is a
    coroutine, and none holds the GIL while it waits on the database. Times come back as
    timezone-aware `datetime` (the API's RFC 3339), the same as from a server."""

    def __init__(self, native: _ratchet.NativeClient) -> None:
        super().__init__(Native(native))
        self._native = native


async def connect(url: str, *, schema: Optional[str] = None,
                  token: Optional[str] = None) -> Any:
    """Opens the store at `url`, creating or upgrading its tables: a `postgres://` or
    `postgresql://` URL (in `schema`, default `ratchet`), or a SQLite file, as a `sqlite:`
    URL (`sqlite:app.db`, `sqlite:///var/lib/app.db`) or a path (`app.db`, relative to the
    working directory, created when missing). An `http://` or `https://` URL is a
    `ratchet server` instead (with `token` when it asks for one): an
    :class:`ratchet.http.HttpClient` with the same methods. Any other `scheme://` raises
    InvalidInput, whose message never shows a password."""
    _check_str(url, "url")
    if url.startswith(("http://", "https://")):
        from .http import HttpClient

        return HttpClient(url, token)
    return Client(await _ratchet.connect(url, schema))


class _Loop:
    """An event loop on a thread of its own, for the synchronous facade."""

    _lock = threading.Lock()
    _loop: Optional[asyncio.AbstractEventLoop] = None

    @classmethod
    def run(cls, coro: Any) -> Any:
        with cls._lock:
            if cls._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="ratchet-sync", daemon=True).start()
                cls._loop = loop
        return asyncio.run_coroutine_threadsafe(coro, cls._loop).result()


class SyncClient:
    """The client for scripts: the same methods as :class:`Client`, each blocking until done."""

    def __init__(self, url: str, *, schema: Optional[str] = None) -> None:
        self._client: Client = _Loop.run(connect(url, schema=schema))

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if name in ("subscribe",) or not callable(method):
            raise AttributeError(f"SyncClient has no {name}")

        def call(*args: Any, **kwargs: Any) -> Any:
            return _Loop.run(method(*args, **kwargs))

        call.__doc__ = method.__doc__
        return call
