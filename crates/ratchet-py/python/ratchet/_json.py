"""JSON for payloads: orjson when installed (much faster), else the standard library."""

from typing import Any

try:
    import orjson as _orjson

    def dumps(value: Any) -> str:
        return _orjson.dumps(value).decode()

    loads = _orjson.loads
    FAST = True
except ImportError:  # pragma: no cover - depends on what is installed
    import json as _json

    def dumps(value: Any) -> str:
        return _json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)

    loads = _json.loads
    FAST = False


def encode(value: Any, what: str) -> str:
    """`value` as JSON text; a value JSON cannot hold raises InvalidInput naming `what`."""
    from ._ratchet import InvalidInput

    try:
        return dumps(value)
    except (TypeError, ValueError) as e:
        raise InvalidInput(f"{what} is not JSON-serializable: {e}") from None
