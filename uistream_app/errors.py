"""The one error a request can be refused with, and the answers every
endpoint shares (docs/architecture.md, "Bad input").

A ``BadRequest`` carries an HTTP status, a stable ``code``, a message for
people and the ``field`` it is about; every endpoint answers it with the
same JSON body (``{"error": {"code", "message", "field"?}}``), and the
WebSocket with an ``error`` frame carrying the same ``code``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NOT_FOUND_TEXT", "BadRequest", "not_found"]

#: One text for "missing" and "someone else's" alike: no oracle.
NOT_FOUND_TEXT = "not found: no such chat or message of yours"


class BadRequest(Exception):
    """A request the server refuses: ``status``, a stable ``code``, a message
    for people and the ``field`` it is about. ``headers`` go on the HTTP
    answer (``Retry-After`` for a throttled request)."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "invalid",
        field: str | None = None,
        status: int = 400,
        headers: dict[str, str] | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.field = field
        self.status = status
        self.headers = headers or {}
        #: More fields of the JSON error (a budget's ``resets_at``).
        self.details = details or {}

    def as_dict(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            error["field"] = self.field
        error.update(self.details)
        return {"error": error}


def not_found() -> BadRequest:
    """The one answer for a chat or message that is missing or someone else's."""
    return BadRequest(NOT_FOUND_TEXT, code="not_found", status=404)
