"""useChat's request body, parsed strictly (``parse_chat_request``), and
what it asks of the stored conversation (``chat_turn``).

Nothing here touches the database: a request that fails here writes
nothing. The rules are docs/protocols.md, "useChat requests" (rule N
below is theirs); a refusal is a ``BadRequest`` naming the problem and
where it is (``field`` is a path such as ``messages[2].parts[0].text``).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import BadRequest, Codes, from_status, not_found
from ..lifecycle.steering_messages import SteeringSubmission
from ..lifecycle.store import AnswerReader, ToolAnswer, Turn
from ..models import Conversation, Message
from ..protocol.jsonbody import MAX_DEPTH, JSONBodyError, depth_ok, load_json_object
from ..protocol.ui.parts import is_tool_part, tool_parts

__all__ = [
    "MAX_DEPTH",
    "BadRequest",
    "ChatRequest",
    "chat_turn",
    "check_chat_request",
    "check_steering_request",
    "parse_chat_request",
    "parse_steering_request",
    "valid_id",
]

MAX_MESSAGES: Final = 10_000
ID_RE: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")
TRIGGERS: Final = ("submit-message", "regenerate-message")


@dataclass(frozen=True)
class ChatRequest:
    #: ``""``: the body named no chat (``WorkflowChatTransport`` sends no
    #: ``id``); the view chooses one (``ChatView.get_chat_id``).
    chat_id: str
    messages: list[dict[str, Any]]
    trigger: str = "submit-message"
    message_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

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
            "system messages come from the server, not the client", code=Codes.FORBIDDEN_ROLE, field=f"{where}.role"
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


def _check_history_message(message: object, where: str) -> None:
    """An earlier message of the client's history: the server reads none of
    it (the stored conversation is the truth), so only its shape is checked."""
    if (
        not isinstance(message, dict)
        or not valid_id(message.get("id"))
        or message.get("role") not in ("user", "assistant")
        or not isinstance(message.get("parts"), list)
    ):
        _check_message(message, where)  # the precise error


def parse_chat_request(body: bytes | str, *, max_bytes: int, require_id: bool = True) -> ChatRequest:
    """Rules 1-6 of docs/protocols.md, "useChat requests". Only the last
    message (the one the server takes) and the extra keys are checked part
    by part and for depth; the history before it only for its shape.

    ``require_id=False``: a body without ``id`` is accepted, its
    ``chat_id`` left ``""`` (the HTTP POST; a WebSocket frame must name
    its chat). An ``id`` that is there is checked all the same."""
    try:
        data = load_json_object(body, max_bytes=max_bytes, expected="useChat's JSON body", max_depth=None)
    except JSONBodyError as exc:
        raise from_status(exc.message, code=exc.code, status=exc.status) from None
    return check_chat_request(data, require_id=require_id)


def check_chat_request(data: dict[str, Any], *, require_id: bool = True) -> ChatRequest:
    """``parse_chat_request`` of a body already decoded (a WebSocket
    frame's): rules 2-6."""
    chat_id = "" if not require_id and "id" not in data else _check_id(data.get("id"), "id")
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
    last = len(messages) - 1
    for i in range(last):
        _check_history_message(messages[i], f"messages[{i}]")
    if messages:
        _check_message(messages[last], f"messages[{last}]")
    extra = {k: v for k, v in data.items() if k not in ("id", "messages", "trigger", "messageId")}
    if not depth_ok({**extra, "messages": messages[last:]}, MAX_DEPTH):
        raise BadRequest(f"the request body is nested deeper than {MAX_DEPTH} levels", code=Codes.TOO_DEEP)
    return ChatRequest(chat_id, messages, trigger, message_id, extra)


def parse_steering_request(body: bytes | str, *, kind: str, max_bytes: int) -> SteeringSubmission:
    """The body of ``POST chat/<id>/steer`` (or ``queue``):
    ``{"id"?: str, "message": <a useChat user message>}`` (docs/protocols.md,
    "Steering requests")."""
    try:
        data = load_json_object(body, max_bytes=max_bytes, expected="a steering request's JSON body", max_depth=None)
    except JSONBodyError as exc:
        raise from_status(exc.message, code=exc.code, status=exc.status) from None
    return check_steering_request(data, kind=kind)


def check_steering_request(data: dict[str, Any], *, kind: str, where: str = "") -> SteeringSubmission:
    """``parse_steering_request`` of a body already decoded (a WebSocket
    frame's, whose fields are ``where``-prefixed in errors): the id as a
    message id is checked (one of ours when absent, as the SDK makes one),
    the message as the last message of a chat request is, and it must be
    the user's; nested no deeper than a chat request."""
    steering_id = data.get("id")
    if steering_id is None:
        steering_id = "steer-" + secrets.token_urlsafe(18)
    _check_id(steering_id, f"{where}id")
    message = _check_message(data.get("message"), f"{where}message")
    if message["role"] != "user":
        raise BadRequest("a steering message is the user's: role must be 'user'", field=f"{where}message.role")
    if not message["parts"]:
        raise BadRequest("a steering message says something: parts is empty", field=f"{where}message.parts")
    for i, part in enumerate(message["parts"]):
        if part["type"] not in ("text", "file"):
            # The steering-message chunk carries text and files only.
            at = f"{where}message.parts[{i}].type"
            raise BadRequest(f"a steering message holds text and files, not {part['type']!r}", field=at)
    if not depth_ok(message, MAX_DEPTH):
        raise BadRequest(f"the request body is nested deeper than {MAX_DEPTH} levels", code=Codes.TOO_DEEP)
    return SteeringSubmission(kind, steering_id, message)  # type: ignore[arg-type]


def chat_turn(chat: ChatRequest) -> Turn:
    """What a useChat request asks of the stored conversation. A submit
    whose last message is the assistant's continues it (the browser
    answered an approval or ran a client-side tool)."""
    last = chat.last_message
    if chat.trigger == "regenerate-message":
        return Turn(chat.chat_id, "regenerate", edit_of=chat.message_id, extra=chat.extra)
    if last is None:
        raise BadRequest("submit-message needs the new user message in messages", field="messages")
    if chat.is_continuation:
        if chat.message_id not in (None, last["id"]):
            raise BadRequest("a continuation names the assistant message it continues", field="messageId")
        where = f"messages[{len(chat.messages) - 1}]"
        return Turn(chat.chat_id, "continue", answers=resent_message_answers(last, where), extra=chat.extra)
    # useChat sends the whole history: a lone message is likely a new chat's first.
    opens_chat = len(chat.messages) == 1 and chat.message_id is None
    return Turn(chat.chat_id, "submit", message=last, edit_of=chat.message_id, extra=chat.extra, opens_chat=opens_chat)


def resent_message_answers(claimed: dict[str, Any], where: str = "messages[-1]") -> AnswerReader:
    """useChat's continuation: the browser sends the whole assistant message
    back, and what it says new about each tool call (a state that differs
    from the stored one) is an answer. The message must be the stored last
    message (404 otherwise, as for any message that is not the owner's).
    An approval whose part carries another ``input`` than the stored call
    approves the call with those arguments (the store checks the tool
    allows it); ``where`` is the message's place in the body, for errors."""

    def read(target: Message | None, conversation: Conversation) -> list[ToolAnswer]:
        if target is None or target.role != "assistant" or target.ui_id != claimed["id"]:
            raise not_found()
        stored = {p["toolCallId"]: p for p in tool_parts(target.parts)}
        answers: list[ToolAnswer] = []
        for i, claim in enumerate(claimed["parts"]):
            if not is_tool_part(claim):
                continue
            call_id, claimed_state = str(claim["toolCallId"]), claim.get("state")
            known = stored.get(call_id)
            if known is not None and claimed_state == known.get("state"):
                continue  # nothing new said about this call
            if claimed_state == "approval-responded":
                said: dict[str, Any] = claim.get("approval") if isinstance(claim.get("approval"), dict) else {}  # type: ignore[assignment]
                reason = said.get("reason") if isinstance(said.get("reason"), str) else None
                edit: dict[str, Any] = {}
                if known is not None and "input" in claim and claim["input"] != known.get("input"):
                    edit = {"edited_input": claim["input"], "edit_field": f"{where}.parts[{i}].input"}
                answers.append(
                    ToolAnswer(
                        call_id, "approval", str(said.get("id", "")), said.get("approved"), reason=reason, **edit
                    )
                )
            elif claimed_state in ("output-available", "output-error"):
                is_error = claimed_state == "output-error"
                output = claim.get("errorText") if is_error else claim.get("output")
                answers.append(ToolAnswer(call_id, "result", output=output, is_error=is_error))
            else:
                answers.append(ToolAnswer(call_id, "other"))
        return answers

    return read
