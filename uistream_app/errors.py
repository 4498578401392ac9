"""The refusals a request can get, and the catalogue of their codes
(docs/architecture.md, "Bad input", holds the table users read).

One exception class per kind of refusal, in the shape of DRF's
``APIException`` family: each says its HTTP ``status_code``, its
``default_code`` and its ``default_detail``. ``BadRequest`` (400) is the
root of them all, so ``except BadRequest`` catches every refusal, and
``BadRequest(message, code=..., status=...)`` called as in the first
release still works (a project's hooks raise it). Every endpoint answers a
refusal with the same JSON body (``{"error": {"code", "message",
"field"?, ...details}}``), and the WebSocket with an ``error`` frame
carrying the same ``code``.

Every code users may rely on is a constant of ``Codes``, written here once;
``CATALOGUE`` says for each its HTTP status and when it is answered, and
every raise site names its code through ``Codes``
(``tests/test_error_catalogue.py`` holds the docs' table, the catalogue
and the raise sites to each other). This module imports nothing, so every
room, the sans-IO ``protocol/`` too, may use the codes.

``Misconfigured`` (500) is the one answer that is not the request's fault:
a setting the system checks would report (``MODEL``…) met by a request,
under a server that ran no checks (daphne and uvicorn run none).
``import_extra`` is the one way a module that needs an optional
dependency says which extra installs it (``pip install
'django-uistream[channels]'``), so every room, the pure ones too, imports
it from here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import MappingProxyType, ModuleType
from typing import Any, ClassVar, Final

__all__ = [
    "CATALOGUE",
    "NOT_FOUND_TEXT",
    "BadRequest",
    "CodeInfo",
    "Codes",
    "Conflict",
    "CsrfFailed",
    "Gone",
    "MethodNotAllowed",
    "Misconfigured",
    "MissingExtra",
    "NotAcceptable",
    "NotAuthenticated",
    "NotFound",
    "PayloadTooLarge",
    "PermissionDenied",
    "ServiceUnavailable",
    "Throttled",
    "UnsupportedMediaType",
    "from_status",
    "import_extra",
    "not_found",
]

#: One text for "missing" and "someone else's" alike: no oracle.
NOT_FOUND_TEXT = "not found: no such chat or message of yours"


class Codes:
    """The stable error codes, each written once. The value is what goes on
    the wire; ``CATALOGUE`` says what each means."""

    # 400
    INVALID: Final = "invalid"
    EMPTY: Final = "empty"
    INVALID_JSON: Final = "invalid_json"
    TOO_DEEP: Final = "too_deep"
    BAD_SDK_VERSION: Final = "bad_sdk_version"
    UNSUPPORTED_PROTOCOL_VERSION: Final = "unsupported_protocol_version"
    FORBIDDEN_ROLE: Final = "forbidden_role"
    NOTHING_TO_ANSWER: Final = "nothing_to_answer"
    UNKNOWN_TOOL_CALL: Final = "unknown_tool_call"
    NOT_EDITABLE: Final = "not_editable"
    # 401
    NOT_AUTHENTICATED: Final = "not_authenticated"
    NO_SESSION: Final = "no_session"
    # 403
    PERMISSION_DENIED: Final = "permission_denied"
    CSRF_FAILED: Final = "csrf_failed"
    # 404
    NOT_FOUND: Final = "not_found"
    # 405
    METHOD_NOT_ALLOWED: Final = "method_not_allowed"
    # 406
    NOT_ACCEPTABLE: Final = "not_acceptable"
    # 409
    CONFLICT: Final = "conflict"
    RUN_ACTIVE: Final = "run_active"
    DUPLICATE: Final = "duplicate"
    NOTHING_PENDING: Final = "nothing_pending"
    NOT_PENDING: Final = "not_pending"
    ALREADY_ANSWERED: Final = "already_answered"
    APPROVAL_MISMATCH: Final = "approval_mismatch"
    UNKNOWN_INTERRUPT: Final = "unknown_interrupt"
    STALE: Final = "stale"
    INTERRUPTS_UNANSWERED: Final = "interrupts_unanswered"
    INTERRUPTS_PENDING: Final = "interrupts_pending"
    # 410
    RUN_ENDED: Final = "run_ended"
    # 413
    TOO_LARGE: Final = "too_large"
    FILE_TOO_LARGE: Final = "file_too_large"
    # 415
    UNSUPPORTED_MEDIA_TYPE: Final = "unsupported_media_type"
    # 429
    THROTTLED: Final = "throttled"
    BUDGET_EXCEEDED: Final = "budget_exceeded"
    # 500
    MISCONFIGURED: Final = "misconfigured"
    # 503
    BROKER_UNAVAILABLE: Final = "broker_unavailable"
    # WebSocket only: error frames with no HTTP twin
    TOO_MANY_REQUESTS: Final = "too_many_requests"
    RUN_LOST: Final = "run_lost"
    INTERNAL: Final = "internal"


@dataclass(frozen=True)
class CodeInfo:
    """What a code means: its HTTP ``status`` (None: only a WebSocket
    ``error`` frame carries it) and ``when`` it is answered."""

    status: int | None
    when: str


#: Every code of ``Codes``: its status and when it is answered. The table of
#: docs/architecture.md ("Bad input") is this, row for row.
CATALOGUE: Final = MappingProxyType(
    {
        Codes.INVALID: CodeInfo(
            400, "the request is wrong in another way: a field missing, of the wrong type or value (`field` names it)"
        ),
        Codes.EMPTY: CodeInfo(400, "the request body is empty"),
        Codes.INVALID_JSON: CodeInfo(400, "the request body is not JSON, or not a JSON object"),
        Codes.TOO_DEEP: CodeInfo(400, "the request body nests deeper than 32 levels"),
        Codes.BAD_SDK_VERSION: CodeInfo(400, "`?v=` or `x-uistream-sdk-version` names no supported AI SDK version"),
        Codes.UNSUPPORTED_PROTOCOL_VERSION: CodeInfo(400, "AG-UI `protocolVersion` is not 1.x"),
        Codes.FORBIDDEN_ROLE: CodeInfo(400, "the client sent a `system` message"),
        Codes.NOTHING_TO_ANSWER: CodeInfo(400, "the turn leaves no user message to answer"),
        Codes.UNKNOWN_TOOL_CALL: CodeInfo(400, "a useChat answer names a tool call the message does not hold"),
        Codes.NOT_EDITABLE: CodeInfo(400, "an approval edits the arguments of a tool that does not allow edits"),
        Codes.NOT_AUTHENTICATED: CodeInfo(401, "a permission class refused a request nobody authenticated"),
        Codes.NO_SESSION: CodeInfo(401, "an anonymous WebSocket send from a socket that has no session"),
        Codes.PERMISSION_DENIED: CodeInfo(403, "a permission class refused an authenticated request"),
        Codes.CSRF_FAILED: CodeInfo(403, "an unsafe request authenticated by its cookie failed Django's CSRF check"),
        Codes.NOT_FOUND: CodeInfo(
            404, "no such chat, message, run or file of the requester's (missing and foreign alike)"
        ),
        Codes.METHOD_NOT_ALLOWED: CodeInfo(405, "the endpoint does not take this method (`Allow` lists those it does)"),
        Codes.NOT_ACCEPTABLE: CodeInfo(406, "an AG-UI request does not accept `text/event-stream`"),
        Codes.CONFLICT: CodeInfo(409, "`Conflict` raised without a code of its own (a project's hook)"),
        Codes.RUN_ACTIVE: CodeInfo(409, "a reply is still streaming in this chat"),
        Codes.DUPLICATE: CodeInfo(409, "the submitted message was already sent (regenerate or edit instead)"),
        Codes.NOTHING_PENDING: CodeInfo(409, "a continuation answers no pending tool call"),
        Codes.NOT_PENDING: CodeInfo(
            409, "a pending tool call is answered the wrong way (a result where an approval is awaited, or the reverse)"
        ),
        Codes.ALREADY_ANSWERED: CodeInfo(409, "a tool call or interrupt was already answered"),
        Codes.APPROVAL_MISMATCH: CodeInfo(409, "an approval id does not match the pending request"),
        Codes.UNKNOWN_INTERRUPT: CodeInfo(409, "an AG-UI `interruptId` names no interrupt of the thread"),
        Codes.STALE: CodeInfo(409, "an AG-UI `interruptId` is of a message that is no longer the last"),
        Codes.INTERRUPTS_UNANSWERED: CodeInfo(409, "an AG-UI `resume` leaves an open interrupt unanswered"),
        Codes.INTERRUPTS_PENDING: CodeInfo(409, "a new user message while the thread's interrupts are open"),
        Codes.RUN_ENDED: CodeInfo(
            410, "a reconnect by index past the end of a run that ended without finishing (tail index header)"
        ),
        Codes.TOO_LARGE: CodeInfo(
            413,
            "the request body is over `MAX_REQUEST_BYTES` (a conversations API body: also over "
            "`DATA_UPLOAD_MAX_MEMORY_SIZE`)",
        ),
        Codes.FILE_TOO_LARGE: CodeInfo(413, "an attached file is over `MAX_FILE_BYTES`"),
        Codes.UNSUPPORTED_MEDIA_TYPE: CodeInfo(
            415, "the body is not `application/json`, or a file's type is not in `ALLOWED_MEDIA_TYPES`"
        ),
        Codes.THROTTLED: CodeInfo(429, "a throttle class refused the request (`Retry-After` when known)"),
        Codes.BUDGET_EXCEEDED: CodeInfo(
            429,
            "the owner's budget for the period is spent, or a turn would pass the day's storage cap "
            "(`Retry-After`, `budget`, `resets_at`)",
        ),
        Codes.MISCONFIGURED: CodeInfo(
            500,
            "a setting the system checks report keeps the turn from starting (`MODEL`…): the check's text "
            "under `DEBUG` or `EXPOSE_ERRORS`, else masked; logged once per process",
        ),
        Codes.BROKER_UNAVAILABLE: CodeInfo(
            503,
            "the live broker (Redis, PostgreSQL) cannot be reached (`Retry-After`); on the WebSocket also mid-stream",
        ),
        Codes.TOO_MANY_REQUESTS: CodeInfo(None, "a socket already has `max_requests` requests open"),
        Codes.RUN_LOST: CodeInfo(None, "the run's stream ended without its end"),
        Codes.INTERNAL: CodeInfo(
            None, "the server failed while serving a socket's request (the text is `ERROR_TEXT`; the detail is logged)"
        ),
    }
)


class BadRequest(Exception):
    """A request the server refuses (400 ``invalid``), and the root of every
    refusal: ``status``, a stable ``code``, a message for people and the
    ``field`` it is about. ``headers`` go on the HTTP answer
    (``Retry-After`` for a throttled request), ``details`` into the JSON
    error (a budget's ``resets_at``).

    A subclass sets ``status_code``, ``default_code`` and
    ``default_detail``; the arguments override them (``status`` too, as
    the first release had it: prefer the subclass of that status)."""

    status_code: ClassVar[int] = 400
    default_code: ClassVar[str] = Codes.INVALID
    default_detail: ClassVar[str] = "the request is not valid"

    def __init__(
        self,
        message: str | None = None,
        *,
        code: str | None = None,
        field: str | None = None,
        status: int | None = None,
        headers: dict[str, str] | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        message = self.default_detail if message is None else message
        super().__init__(message)
        self.message = message
        self.code = self.default_code if code is None else code
        self.field = field
        self.status = self.status_code if status is None else status
        self.headers = headers or {}
        #: More fields of the JSON error (a budget's ``resets_at``).
        self.details = details or {}

    def as_dict(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            error["field"] = self.field
        error.update(self.details)
        return {"error": error}


class NotAuthenticated(BadRequest):
    """401: who asks is not known (a permission refused a request nobody
    authenticated, an anonymous socket without a session)."""

    status_code = 401
    default_code = Codes.NOT_AUTHENTICATED
    default_detail = "authentication is required"


class PermissionDenied(BadRequest):
    """403: who asks is known and may not do this."""

    status_code = 403
    default_code = Codes.PERMISSION_DENIED
    default_detail = "you may not use this endpoint"


class CsrfFailed(PermissionDenied):
    """403: an unsafe request a cookie authenticates failed Django's CSRF check."""

    default_code = Codes.CSRF_FAILED
    default_detail = "CSRF verification failed: send the X-CSRFToken header"


class NotFound(BadRequest):
    """404: missing and someone else's alike, with one text (no oracle)."""

    status_code = 404
    default_code = Codes.NOT_FOUND
    default_detail = NOT_FOUND_TEXT


class MethodNotAllowed(BadRequest):
    """405; give the endpoint's methods in the ``Allow`` header."""

    status_code = 405
    default_code = Codes.METHOD_NOT_ALLOWED
    default_detail = "this endpoint does not take that method"


class NotAcceptable(BadRequest):
    """406: the client accepts none of what the endpoint answers in."""

    status_code = 406
    default_code = Codes.NOT_ACCEPTABLE
    default_detail = "this endpoint cannot answer in a type the request accepts"


class Conflict(BadRequest):
    """409: the request is well formed, but the conversation's state
    refuses it (a reply streaming, an answer given twice…)."""

    status_code = 409
    default_code = Codes.CONFLICT
    default_detail = "the request conflicts with the conversation's state"


class Gone(BadRequest):
    """410: what was asked for existed and will not come back (a run that
    ended without finishing, read past its end)."""

    status_code = 410
    default_code = Codes.RUN_ENDED
    default_detail = "this run ended without finishing and has nothing more to send"


class PayloadTooLarge(BadRequest):
    """413: the body, or a file in it, is over its limit."""

    status_code = 413
    default_code = Codes.TOO_LARGE
    default_detail = "the request body is too large"


class UnsupportedMediaType(BadRequest):
    """415: the body, or a file in it, is of a type not taken here."""

    status_code = 415
    default_code = Codes.UNSUPPORTED_MEDIA_TYPE
    default_detail = "the request is of a media type not accepted here"


class Throttled(BadRequest):
    """429; give ``Retry-After`` in the headers when the wait is known."""

    status_code = 429
    default_code = Codes.THROTTLED
    default_detail = "too many requests: try again later"


class Misconfigured(BadRequest):
    """500: the server's configuration keeps the request from being served
    (a setting a system check reports, met by a server that ran no
    checks). Not the client's fault, and not worth sending again until
    the setting is fixed; the text is the check's only where the project
    exposes errors (``hooks.misconfigured`` decides)."""

    status_code = 500
    default_code = Codes.MISCONFIGURED
    default_detail = "the server is misconfigured: its log says which setting to fix (manage.py check reports it too)"


class ServiceUnavailable(BadRequest):
    """503: something the request needs (the live broker) fails; nothing
    was written, and the request may be sent again."""

    status_code = 503
    default_code = Codes.BROKER_UNAVAILABLE
    default_detail = "the live broker cannot be reached: try again shortly"


#: The class of each status: what ``from_status`` builds.
_BY_STATUS: Final[dict[int, type[BadRequest]]] = {
    cls.status_code: cls
    for cls in (
        BadRequest,
        NotAuthenticated,
        PermissionDenied,
        NotFound,
        MethodNotAllowed,
        NotAcceptable,
        Conflict,
        Gone,
        PayloadTooLarge,
        UnsupportedMediaType,
        Throttled,
        ServiceUnavailable,
    )
}


def from_status(message: str, *, status: int, code: str, field: str | None = None) -> BadRequest:
    """A refusal that arrives as a status and a code (the protocol core's
    ``JSONBodyError`` and ``AGUIInputError``, a DRF exception) as the class
    of that status."""
    cls = _BY_STATUS.get(status, BadRequest)
    return cls(message, code=code, field=field, status=status)


def not_found() -> NotFound:
    """The one answer for a chat or message that is missing or someone else's."""
    return NotFound()


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the
    extra that installs it."""


def import_extra(module: str, extra: str) -> ModuleType:
    """``importlib.import_module(module)``, or ``MissingExtra`` naming the
    pip extra that installs it: ``channels is not installed: pip install
    'django-uistream[channels]' (No module named 'channels')``. A module
    that needs an extra calls it before its own ``from module import …``
    lines, so that importing it without the extra says what to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtra(
            f"{module} is not installed: pip install 'django-uistream[{extra}]' ({exc})", name=exc.name
        ) from exc
