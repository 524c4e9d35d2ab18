"""The client over `ratchet server`'s HTTP API: the same class of client as
:class:`ratchet.Client`, for a process that has no database credentials, only the server's
URL (and a token when the server asks for one). Both send the same operations of the API and
return the same objects; errors are the same exceptions, from the server's problem types."""

from __future__ import annotations

from typing import Optional

from ._api import ApiClient, Http
from ._json import dumps


class HttpClient(ApiClient):
    """A client on `ratchet server` at `url`. Make one with
    ``ratchet.connect("http://host:8080", token=...)``."""

    def __init__(self, url: str, token: Optional[str] = None, timeout: float = 60.0) -> None:
        super().__init__(Http(url, token, timeout))


__all__ = ["HttpClient", "dumps"]
