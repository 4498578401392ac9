"""A request body as a JSON object, checked before anything reads it.

Shared by every endpoint that takes JSON (useChat's POST, AG-UI's
RunAgentInput): the size limit, an empty body, JSON that does not parse or
is not UTF-8, a body that is not an object, and nesting deeper than
``MAX_DEPTH`` all raise ``JSONBodyError`` with a stable ``code`` and the
HTTP status the endpoint answers with (``errors.Codes``: the codes are the
house's, and that module imports nothing).
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from ..errors import Codes

__all__ = ["MAX_DEPTH", "JSONBodyError", "depth_ok", "load_json_object"]

MAX_DEPTH: Final = 32


class JSONBodyError(ValueError):
    """A request body refused before any field is read: ``code`` and the HTTP ``status`` to answer with."""

    def __init__(self, message: str, *, code: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status


def depth_ok(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests at most ``limit`` containers deep (iterative:
    a hostile body cannot exhaust the stack)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth > limit:
                return False
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            if depth > limit:
                return False
            stack.extend((v, depth + 1) for v in item)
    return True


def load_json_object(
    body: bytes, *, max_bytes: int, expected: str, max_depth: int | None = MAX_DEPTH
) -> dict[str, Any]:
    """``body`` parsed; ``expected`` names what the client should send.
    ``max_depth`` None: the caller checks the depth of what it keeps."""
    if len(body) > max_bytes:
        raise JSONBodyError(f"the request body is larger than {max_bytes} bytes", code=Codes.TOO_LARGE, status=413)
    if not body.strip():
        raise JSONBodyError(f"the request body is empty; send {expected}", code=Codes.EMPTY)
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise JSONBodyError(f"the request body is not valid JSON: {exc}", code=Codes.INVALID_JSON) from None
    if not isinstance(data, dict):
        raise JSONBodyError("the request body must be a JSON object", code=Codes.INVALID_JSON)
    if max_depth is not None and not depth_ok(data, max_depth):
        raise JSONBodyError(f"the request body is nested deeper than {max_depth} levels", code=Codes.TOO_DEEP)
    return data
