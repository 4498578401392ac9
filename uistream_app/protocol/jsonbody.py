"""A request body as a JSON object, checked before anything reads it.

Shared by every endpoint that takes JSON (useChat's POST, AG-UI's
RunAgentInput): the size limit, an empty body, JSON that does not parse or
is not UTF-8, a body that is not an object, and nesting deeper than
``MAX_DEPTH`` (also past what the parser reads at all, ``NestingError``)
all raise ``JSONBodyError`` with a stable ``code`` and the
HTTP status the endpoint answers with (``errors.Codes``: the codes are the
house's, and that module imports nothing). ``json_size`` measures a
value as JSON, for the bounds on what a process keeps; ``is_json`` says
whether a value can be stored in a ``JSONField`` as it is.
"""

from __future__ import annotations

import json
import math
from typing import Any, Final

import orjson

from ..errors import Codes

__all__ = [
    "LARGE_JSON_BYTES",
    "MAX_DEPTH",
    "JSONBodyError",
    "NestingError",
    "depth_ok",
    "has_surrogate_escape",
    "is_json",
    "json_size",
    "json_text",
    "load_json_object",
    "parse_json",
    "refuse_json_constant",
]

MAX_DEPTH: Final = 32

#: JSON text of this many bytes or more is read by the standard library's
#: parser, not orjson's: orjson holds about thirteen times a document's size
#: while it reads one (its parser's pool), the standard library about two
#: (the text and the values). A document this large is mostly a few long
#: strings (files as ``data:`` URLs, pasted text), which the standard
#: library reads as fast; orjson is faster on many small values
#: (``bench/body_memory.py`` measures a server's memory on such bodies).
LARGE_JSON_BYTES: Final = 1024 * 1024


class NestingError(ValueError):
    """JSON text nested past what ``parse_json`` reads (1,024 levels), or
    past the interpreter's recursion limit: too deep, not malformed."""


def refuse_json_constant(name: str) -> Any:
    """``parse_constant`` for ``json.loads``: ``NaN`` and ``Infinity`` are not JSON."""
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number is infinity when parsed as double: {text}")
    return value


def has_surrogate_escape(text: bytes | str) -> bool:
    """Whether JSON ``text`` holds a ``\\ud`` escape: the only way JSON text
    reaches a surrogate (paired or lone) through Unicode input."""
    if isinstance(text, bytes):
        return b"\\ud" in text or b"\\uD" in text
    return "\\ud" in text or "\\uD" in text


def json_text(body: bytes) -> bytes | str:
    """``body`` as ``parse_json`` reads it: from ``LARGE_JSON_BYTES``, the
    text it decodes to, so that a caller that lets go of the bytes before
    parsing holds one copy of a big body less while it is read; else (or
    when it is not UTF-8: ``parse_json`` says so) the bytes themselves."""
    if len(body) < LARGE_JSON_BYTES or has_surrogate_escape(body):
        return body
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body


def parse_json(text: bytes | str) -> Any:
    """JSON ``text`` read as orjson reads it, whatever its size: strict UTF-8,
    no ``NaN``/``Infinity``, no number that overflows a double, no lone
    surrogate escape, at most 1,024 levels. Raises ``ValueError``
    (``orjson.JSONDecodeError`` is one), ``NestingError`` for text nested
    deeper than that.

    Text of ``LARGE_JSON_BYTES`` or more goes to the standard library with
    those rules added, so a 30 MiB body costs about two copies while it is
    read, not thirteen; one holding a ``\\ud`` escape (a surrogate, paired
    or not) goes to orjson, which knows a pair from a lone one. Integers past
    a double stay exact (orjson rounds them to a float)."""
    if len(text) < LARGE_JSON_BYTES or has_surrogate_escape(text):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            if str(exc).startswith("depth limit exceeded"):
                raise NestingError(str(exc)) from None
            raise
    try:
        return json.loads(
            text.decode("utf-8") if isinstance(text, bytes) else text,
            parse_constant=refuse_json_constant,
            parse_float=_finite_float,
        )
    except RecursionError:
        raise NestingError("depth limit exceeded") from None


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
    body: bytes | str, *, max_bytes: int, expected: str, max_depth: int | None = MAX_DEPTH
) -> dict[str, Any]:
    """``body`` parsed; ``expected`` names what the client should send.
    ``max_depth`` None: the caller checks the depth of what it keeps (text
    nested past what the parser reads is ``too_deep`` all the same, named
    by ``MAX_DEPTH``)."""
    if len(body) > max_bytes:
        raise JSONBodyError(f"the request body is larger than {max_bytes} bytes", code=Codes.TOO_LARGE, status=413)
    if not body.strip():
        raise JSONBodyError(f"the request body is empty; send {expected}", code=Codes.EMPTY)
    try:
        data = parse_json(body)
    except NestingError:
        depth = MAX_DEPTH if max_depth is None else max_depth
        raise JSONBodyError(f"the request body is nested deeper than {depth} levels", code=Codes.TOO_DEEP) from None
    except ValueError as exc:
        raise JSONBodyError(f"the request body is not valid JSON: {exc}", code=Codes.INVALID_JSON) from None
    if not isinstance(data, dict):
        raise JSONBodyError("the request body must be a JSON object", code=Codes.INVALID_JSON)
    if max_depth is not None and not depth_ok(data, max_depth):
        raise JSONBodyError(f"the request body is nested deeper than {max_depth} levels", code=Codes.TOO_DEEP)
    return data


def json_size(value: Any) -> int:
    """The bytes of ``value`` as JSON, about what a client is sent of it:
    one ``orjson.dumps`` (under a millisecond for a 12,000-chunk run). What
    orjson refuses is measured by its ``repr``."""
    try:
        return len(orjson.dumps(value, default=repr))
    except (orjson.JSONEncodeError, RecursionError):
        return len(repr(value))


def is_json(value: Any) -> bool:
    """Whether ``json.dumps`` takes ``value`` as it is (what a
    ``JSONField`` stores without an encoder of its own). ``None`` and the
    plain scalars are answered without encoding: a turn asks this of its
    metadata and extras on every chat's path."""
    if value is None or type(value) in _SCALARS:
        return True
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


_SCALARS: Final = frozenset({str, int, float, bool})
