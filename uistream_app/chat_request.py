"""useChat's request body, parsed strictly: what a view may trust.

``parse_chat_request`` takes the raw body and returns a ``ChatRequest`` or
raises ``BadRequest`` naming the problem and where it is (``field`` is a
path such as ``messages[2].parts[0].text``). Nothing here touches the
database: a request that fails here writes nothing.

Rules (PROTOCOLS.md "useChat requests"):

1. The body is UTF-8 JSON, an object, at most ``max_bytes`` long and at
   most ``MAX_DEPTH`` containers deep.
2. ``id`` (the chat id) and every message ``id``: 1–128 characters of
   ``[A-Za-z0-9_-]`` (they become URL segments and primary keys).
3. ``trigger``: ``submit-message`` (default) or ``regenerate-message``;
   ``messageId`` optional, same shape as an id.
4. ``messages``: a list (at most ``MAX_MESSAGES``) of UIMessages whose
   ``role`` is ``user`` or ``assistant``; a client never sends ``system``
   messages (the server owns the system prompt).
5. A user message's parts are ``text`` (with a string ``text``), ``file``
   (``mediaType`` and ``url`` strings) or ``data-NAME``; assistant parts are
   taken as the client holds them (the view trusts the stored copy, not
   these).
6. Other top-level keys (useChat's ``body`` option) are kept in ``extra``
   for the view's hooks, never interpreted here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

from .protocol.jsonbody import MAX_DEPTH, JSONBodyError, load_json_object

__all__ = ["MAX_DEPTH", "BadRequest", "ChatRequest", "parse_chat_request", "valid_id"]

MAX_MESSAGES: Final = 10_000
ID_RE: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")
TRIGGERS: Final = ("submit-message", "regenerate-message")
USER_PART_TYPES: Final = frozenset(("text", "file"))


class BadRequest(Exception):
    """A request the server refuses: ``status``, a stable ``code``, a message
    for people and the ``field`` it is about."""

    def __init__(self, message: str, *, code: str = "invalid", field: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.field = field
        self.status = status

    def as_dict(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            error["field"] = self.field
        return {"error": error}


@dataclass(frozen=True)
class ChatRequest:
    chat_id: str
    messages: list[dict[str, Any]]
    trigger: str = "submit-message"
    message_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: Set by the server on a continuation (never read from the body): the
    #: decisions and client tool results it verified against the stored
    #: conversation, by tool call id.
    approvals: dict[str, Any] = field(default_factory=dict)
    client_results: dict[str, Any] = field(default_factory=dict)
    #: Set by the server (never read from the body): the id of the run this
    #: request starts, reserved with the broker before anything is written.
    run_id: str | None = None

    @property
    def is_continuation(self) -> bool:
        """A submit whose last message is the assistant's: the browser
        answered an approval or ran a client-side tool."""
        last = self.last_message
        return self.trigger == "submit-message" and last is not None and last["role"] == "assistant"

    @property
    def last_message(self) -> dict[str, Any] | None:
        return self.messages[-1] if self.messages else None


def valid_id(value: object) -> bool:
    return isinstance(value, str) and ID_RE.fullmatch(value) is not None


def _check_id(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise BadRequest(f"{where} must be a string", field=where)
    if not valid_id(value):
        raise BadRequest(f"{where} must be 1-128 characters of letters, digits, '_' or '-'", field=where)
    return value


def _check_part(part: object, where: str, role: str) -> None:
    if not isinstance(part, dict):
        raise BadRequest(f"{where} must be an object", field=where)
    kind = part.get("type")
    if not isinstance(kind, str) or not kind:
        raise BadRequest(f"{where}.type must be a non-empty string", field=f"{where}.type")
    if role != "user":
        return
    if kind == "text":
        if not isinstance(part.get("text"), str):
            raise BadRequest(f"{where}.text must be a string", field=f"{where}.text")
    elif kind == "file":
        for key in ("mediaType", "url"):
            if not isinstance(part.get(key), str):
                raise BadRequest(f"{where}.{key} must be a string", field=f"{where}.{key}")
    elif not (kind.startswith("data-") and len(kind) > 5):
        raise BadRequest(f"{where}.type {kind!r} is not allowed in a user message", field=f"{where}.type")


def _check_message(message: object, where: str) -> dict[str, Any]:
    if not isinstance(message, dict):
        raise BadRequest(f"{where} must be an object", field=where)
    _check_id(message.get("id"), f"{where}.id")
    role = message.get("role")
    if role == "system":
        raise BadRequest(
            "system messages come from the server, not the client", code="forbidden_role", field=f"{where}.role"
        )
    if role not in ("user", "assistant"):
        raise BadRequest(f"{where}.role must be 'user' or 'assistant'", field=f"{where}.role")
    parts = message.get("parts")
    if not isinstance(parts, list):
        raise BadRequest(f"{where}.parts must be a list", field=f"{where}.parts")
    for i, part in enumerate(parts):
        _check_part(part, f"{where}.parts[{i}]", role)
    metadata = message.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise BadRequest(f"{where}.metadata must be an object", field=f"{where}.metadata")
    return message


def parse_chat_request(body: bytes, *, max_bytes: int) -> ChatRequest:
    """Rules 1-6 of the module docstring."""
    try:
        data = load_json_object(body, max_bytes=max_bytes, expected="useChat's JSON body")
    except JSONBodyError as exc:
        raise BadRequest(exc.message, code=exc.code, status=exc.status) from None
    chat_id = _check_id(data.get("id"), "id")
    trigger = data.get("trigger", "submit-message")
    if trigger not in TRIGGERS:
        raise BadRequest(f"trigger must be one of {', '.join(TRIGGERS)}", field="trigger")
    message_id = data.get("messageId")
    if message_id is not None:
        _check_id(message_id, "messageId")
    messages = data.get("messages")
    if not isinstance(messages, list):
        raise BadRequest("messages must be a list of UI messages", field="messages")
    if len(messages) > MAX_MESSAGES:
        raise BadRequest(f"messages holds more than {MAX_MESSAGES} messages", field="messages")
    checked = [_check_message(m, f"messages[{i}]") for i, m in enumerate(messages)]
    extra = {k: v for k, v in data.items() if k not in ("id", "messages", "trigger", "messageId")}
    return ChatRequest(chat_id, checked, trigger, message_id, extra)
