"""The WebSocket chat transport's frames (ai@7's ``WebSocketChatTransport``):
the client's frames checked, the server's written. Pure: no I/O.

The rules, numbered as the consumer follows them, are in
docs/protocols.md, "WebSocket chat transport"; ``uistream_app.consumers``
serves them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Final, Literal, NotRequired, TypedDict

import orjson

from .jsonbody import NestingError, parse_json, refuse_json_constant
from .ui.chunks import Chunk
from .ui.render import chunk_json

__all__ = [
    "CLOSE_MESSAGE_TOO_BIG",
    "CLOSE_POLICY_VIOLATION",
    "PRIVATE_CLOSE_BASE",
    "AbortFrame",
    "ChatFrameRenderer",
    "FrameError",
    "ResumeFrame",
    "SendFrame",
    "SteerFrame",
    "check_frame",
    "decode_json_text",
]

#: RFC 6455 close codes the consumer uses.
CLOSE_POLICY_VIOLATION: Final = 1008
CLOSE_MESSAGE_TOO_BIG: Final = 1009
#: Where a server refuses 1008/1009 from an application (daphne: autobahn
#: accepts only 1000 and 3000-4999), the consumer closes with 4008/4009.
PRIVATE_CLOSE_BASE: Final = 4000

MAX_REQUEST_ID_LENGTH: Final = 256
MAX_SEQUENCE: Final = 2**53 - 1  # Number.isSafeInteger
TRIGGERS: Final = ("submit-message", "regenerate-message")
ROLES: Final = ("system", "user", "assistant")

# -- the wire: client → server -------------------------------------------------------


class SendFrame(TypedDict):
    type: Literal["send"]
    requestId: str
    id: str
    trigger: Literal["submit-message", "regenerate-message"]
    messageId: NotRequired[str]
    messages: list[dict[str, Any]]
    headers: dict[str, str]
    body: dict[str, Any]
    metadata: NotRequired[Any]


class ResumeFrame(TypedDict):
    type: Literal["resume"]
    requestId: str
    id: str
    lastSequence: NotRequired[int]
    headers: dict[str, str]
    body: dict[str, Any]
    metadata: NotRequired[Any]


class AbortFrame(TypedDict):
    type: Literal["abort"]
    requestId: str


class SteerFrame(TypedDict):
    """Ours, not the transport's (rule 8): a message for the chat's running
    answer, as ``POST chat/<id>/steer`` (or ``queue``) sends it."""

    type: Literal["steer", "queue"]
    requestId: str
    id: str
    steeringId: NotRequired[str]
    message: dict[str, Any]


# -- the wire: server → client (what ChatFrameRenderer writes) ----------------------


class StartFrame(TypedDict):
    type: Literal["start"]
    requestId: str


class ChunkFrame(TypedDict):
    type: Literal["chunk"]
    requestId: str
    sequence: int
    chunk: Chunk


class EndFrame(TypedDict):
    type: Literal["end"]
    requestId: str


class ErrorFrame(TypedDict):
    type: Literal["error"]
    requestId: str
    errorText: str


class NoActiveFrame(TypedDict):
    type: Literal["no-active"]
    requestId: str


class SteeringOutcomeFrame(TypedDict):
    type: Literal["steering-outcome"]
    requestId: str
    outcome: dict[str, Any]


class FrameError(ValueError):
    """A client frame the protocol refuses (rule 1): the socket closes with
    ``code``."""

    def __init__(self, message: str, code: int = CLOSE_POLICY_VIOLATION) -> None:
        super().__init__(message)
        self.code = code


def _is_sequence(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_SEQUENCE


def check_frame(frame: object) -> SendFrame | ResumeFrame | AbortFrame | SteerFrame:
    """``frame`` (decoded JSON) as a request frame, or ``FrameError`` (rule 1)."""
    if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
        raise FrameError("a frame is a JSON object with a string type")
    kind = frame["type"]
    if kind not in ("send", "resume", "abort", "steer", "queue"):
        raise FrameError(f"unknown frame type {kind[:40]!r}")
    request_id = frame.get("requestId")
    if not isinstance(request_id, str):
        raise FrameError(f"{kind}: requestId must be a string")
    if len(request_id) > MAX_REQUEST_ID_LENGTH:
        raise FrameError(f"{kind}: requestId is longer than {MAX_REQUEST_ID_LENGTH} characters")
    if kind == "abort":
        return frame  # type: ignore[return-value]
    if kind in ("steer", "queue"):
        # What the message says is checked as on HTTP, answered with an
        # ``error`` frame (rule 8); only the frame's shape closes the socket.
        if not isinstance(frame.get("id"), str) or not isinstance(frame.get("message"), dict):
            raise FrameError(f"{kind}: id must be a string and message an object")
        if "steeringId" in frame and not isinstance(frame["steeringId"], str):
            raise FrameError(f"{kind}: steeringId must be a string when present")
        return frame  # type: ignore[return-value]
    headers = frame.get("headers")
    if (
        not isinstance(frame.get("id"), str)
        or not isinstance(headers, dict)
        or not all(isinstance(v, str) for v in headers.values())
        or not isinstance(frame.get("body"), dict)
    ):
        raise FrameError(f"{kind}: id must be a string, headers an object of strings and body an object")
    if kind == "resume":
        if "lastSequence" in frame and not _is_sequence(frame["lastSequence"]):
            raise FrameError("resume: lastSequence must be a non-negative integer")
        return frame  # type: ignore[return-value]
    if frame.get("trigger") not in TRIGGERS:
        raise FrameError(f"send: trigger must be one of {', '.join(TRIGGERS)}")
    if "messageId" in frame and not isinstance(frame["messageId"], str):
        raise FrameError("send: messageId must be a string when present")
    messages = frame.get("messages")
    if not isinstance(messages, list):
        raise FrameError("send: messages must be a list of UI messages")
    for i, message in enumerate(messages):
        if (
            not isinstance(message, dict)
            or not isinstance(message.get("id"), str)
            or message.get("role") not in ROLES
            or not isinstance(message.get("parts"), list)
        ):
            raise FrameError(f"send: messages[{i}] must be a UI message (string id, role, parts list)")
    return frame  # type: ignore[return-value]


# -- rendering --------------------------------------------------------------------


def _json(value: str) -> str:
    return orjson.dumps(value).decode()


def decode_json_text(text: str) -> Any:
    """JSON text as ``JSON.parse`` reads it. ``parse_json`` first; the standard
    library for what only it refuses (a lone surrogate escape, which
    ``JSON.stringify`` writes): such a frame is well formed, and what it
    says is refused later, with an ``error`` frame. Text nested past what
    ``parse_json`` reads is refused at once (rule 1), as on HTTP."""
    try:
        return parse_json(text)
    except NestingError:
        raise FrameError("a frame is nested deeper than 1024 levels") from None
    except ValueError:
        pass
    try:
        return json.loads(text, parse_constant=refuse_json_constant)
    except (ValueError, RecursionError):  # nested past the interpreter's limit: orjson refused it too
        raise FrameError("a frame is JSON") from None


class ChatFrameRenderer:
    """The server frames of one request, as JSON text. Pure: no I/O.

    A chunk's JSON is the ai@7 SSE renderer's (``render.chunk_json``), so
    both wires carry the same bytes for the same chunk, including what
    orjson refuses and the renderer still writes.
    """

    __slots__ = ("_chunk_head", "request_id")

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self._chunk_head = '{"type":"chunk","requestId":' + _json(request_id) + ',"sequence":'

    def _simple(self, kind: str) -> str:
        return '{"type":"' + kind + '","requestId":' + _json(self.request_id) + "}"

    def start(self) -> str:
        return self._simple("start")

    def end(self) -> str:
        return self._simple("end")

    def no_active(self) -> str:
        return self._simple("no-active")

    def steering_outcome(self, outcome: dict[str, Any]) -> str:
        """The answer to a ``steer`` or ``queue`` frame: its outcome, in
        the shape the HTTP endpoints answer."""
        return (
            '{"type":"steering-outcome","requestId":'
            + _json(self.request_id)
            + ',"outcome":'
            + orjson.dumps(outcome).decode()
            + "}"
        )

    def error(self, error_text: str, code: str | None = None) -> str:
        """An ``error`` frame; ``code`` is the one the HTTP endpoints answer
        the same refusal with (the transport reads only ``errorText``)."""
        head = '{"type":"error","requestId":' + _json(self.request_id)
        tail = ',"errorText":' + _json(error_text) + "}"
        return head + (',"code":' + _json(code) if code is not None else "") + tail

    def chunks(self, first_seq: int, chunks: Iterable[Chunk]) -> list[str]:
        """One ``chunk`` frame per chunk, numbered from ``first_seq``."""
        head = self._chunk_head
        # One encode per chunk: the SSE event's payload, no framing to cut off.
        return [
            head + str(seq) + ',"chunk":' + chunk_json(chunk).decode() + "}"
            for seq, chunk in enumerate(chunks, first_seq)
        ]
