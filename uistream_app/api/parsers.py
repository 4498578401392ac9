"""The API's JSON bodies, read with the chat body's limits: at most
``max_body_bytes()`` bytes (413 ``too_large``) and ``MAX_DEPTH`` levels
(400 ``too_deep``), parsed as the chat body is (``protocol.jsonbody``:
orjson's rules, no ``NaN``, no recursion however deep the text nests).

DRF's own ``JSONParser`` reads with the standard library: a body nested
10,000 deep is a ``RecursionError`` (a 500), and one nested 990 deep is
stored, to be rendered by every page that shows it. Django's
``DATA_UPLOAD_MAX_MEMORY_SIZE`` stays in force here (an API body carries
no files, unlike the chat body, whose view reads past it), and
``RequestDataTooBig`` is answered as the same 413 by
``BaseAPIView.handle_exception``.

The refusals are DRF exceptions carrying the house's codes
(``errors.Codes``), as every other refusal of the API is: the body is the
project's ``EXCEPTION_HANDLER``'s (DRF's ``{"detail": ...}`` by default).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings as django_settings
from rest_framework import status
from rest_framework.exceptions import APIException, ParseError
from rest_framework.parsers import JSONParser

from ..conf import settings as uistream_settings
from ..errors import Codes
from ..protocol.jsonbody import MAX_DEPTH, NestingError, depth_ok, parse_json

__all__ = ["BodyTooDeep", "BodyTooLarge", "JSONBodyParser", "body_too_large", "max_body_bytes"]


class BodyTooLarge(APIException):
    """413: the body is over ``max_body_bytes()``."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "the request body is too large"
    default_code = Codes.TOO_LARGE


class BodyTooDeep(APIException):
    """400: the body nests deeper than ``MAX_DEPTH`` levels."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_detail = f"the request body is nested deeper than {MAX_DEPTH} levels"
    default_code = Codes.TOO_DEEP


def max_body_bytes() -> int:
    """The largest API body: ``UISTREAM["MAX_REQUEST_BYTES"]``, or Django's
    ``DATA_UPLOAD_MAX_MEMORY_SIZE`` where that is smaller (2.5 MiB by
    default; None lifts it)."""
    limit = uistream_settings.MAX_REQUEST_BYTES
    django_limit = django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return limit if django_limit is None else min(limit, int(django_limit))


def body_too_large() -> BodyTooLarge:
    """The one answer to an API body over its limit, naming the limit."""
    return BodyTooLarge(f"the request body is larger than {max_body_bytes()} bytes")


class JSONBodyParser(JSONParser):
    """DRF's ``JSONParser`` with the chat body's limits (see the module
    docstring). A subclass may set ``max_depth``."""

    max_depth: int = MAX_DEPTH

    def parse(
        self, stream: IO[Any], media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        limit = max_body_bytes()
        body = stream.read(limit + 1)
        if len(body) > limit:
            raise body_too_large()
        too_deep = BodyTooDeep(f"the request body is nested deeper than {self.max_depth} levels")
        try:
            data = parse_json(body)
        except NestingError:
            raise too_deep from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        if not depth_ok(data, self.max_depth):
            raise too_deep
        return data
