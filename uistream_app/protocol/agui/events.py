"""The AG-UI 1.0 event vocabulary, written down once.

An event *is* its wire object: a ``dict`` with a ``type`` tag and AG-UI's
camelCase keys, typed here as ``TypedDict``\\ s, as the UI chunks are
(``protocol.ui.chunks``) and for the same reason: the renderer, the emit
handles, the verifier and the canonical log all want exactly this JSON
object, and a dataclass per event would cost a construction and a
``to_wire`` copy per event on the hot path. Read off ``@ag-ui/core`` 1.0.0
(``src/generated/schemas.ts``) and PyPI ``ag-ui-protocol`` 1.0.0.

Every producer in ``protocol.agui`` keeps the AG-UI event wire rules of
docs/protocols.md (absent, never ``None``; integer timestamps; only the
fields ``EVENT_FIELDS`` lists). ``validate_event`` checks one object against
them and the field table (including the nested shapes a client validates:
outcomes, content parts, JSON Patch operations, usage, messages) and raises
``AGUIEventFormatError`` naming the event type and the field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any, Final, Literal, NotRequired, TypeAlias, TypedDict

__all__ = [
    "ATTRIBUTABLE",
    "EVENT_FIELDS",
    "MAX_SAFE_INTEGER",
    "AGUIEventFormatError",
    "Event",
    "EventType",
    "validate_content_parts",
    "validate_event",
    "validate_message",
    "validate_patch_shape",
]

#: ``Number.MAX_SAFE_INTEGER``: the bound of ``timestamp`` and token counts.
MAX_SAFE_INTEGER: Final = 9007199254740991


class EventType(StrEnum):
    """The 31 event types of AG-UI 1.0 (the ``THINKING_*`` events left the
    protocol in 1.0; the TypeScript client still translates them inbound)."""

    TEXT_MESSAGE_START = "TEXT_MESSAGE_START"
    TEXT_MESSAGE_CONTENT = "TEXT_MESSAGE_CONTENT"
    TEXT_MESSAGE_END = "TEXT_MESSAGE_END"
    TEXT_MESSAGE_CHUNK = "TEXT_MESSAGE_CHUNK"
    TOOL_CALL_START = "TOOL_CALL_START"
    TOOL_CALL_ARGS = "TOOL_CALL_ARGS"
    TOOL_CALL_END = "TOOL_CALL_END"
    TOOL_CALL_CHUNK = "TOOL_CALL_CHUNK"
    TOOL_CALL_RESULT = "TOOL_CALL_RESULT"
    STATE_SNAPSHOT = "STATE_SNAPSHOT"
    STATE_DELTA = "STATE_DELTA"
    MESSAGES_SNAPSHOT = "MESSAGES_SNAPSHOT"
    ACTIVITY_SNAPSHOT = "ACTIVITY_SNAPSHOT"
    ACTIVITY_DELTA = "ACTIVITY_DELTA"
    RAW = "RAW"
    CUSTOM = "CUSTOM"
    RUN_STARTED = "RUN_STARTED"
    RUN_FINISHED = "RUN_FINISHED"
    RUN_ERROR = "RUN_ERROR"
    STEP_STARTED = "STEP_STARTED"
    STEP_FINISHED = "STEP_FINISHED"
    REASONING_START = "REASONING_START"
    REASONING_MESSAGE_START = "REASONING_MESSAGE_START"
    REASONING_MESSAGE_CONTENT = "REASONING_MESSAGE_CONTENT"
    REASONING_MESSAGE_END = "REASONING_MESSAGE_END"
    REASONING_MESSAGE_CHUNK = "REASONING_MESSAGE_CHUNK"
    REASONING_END = "REASONING_END"
    REASONING_ENCRYPTED_VALUE = "REASONING_ENCRYPTED_VALUE"
    SUBAGENT_STARTED = "SUBAGENT_STARTED"
    SUBAGENT_FINISHED = "SUBAGENT_FINISHED"
    SUBAGENT_ERROR = "SUBAGENT_ERROR"


# -- the wire shapes mypy sees (the run-time table is EVENT_FIELDS) ----------


class _Base(TypedDict):
    timestamp: NotRequired[int]
    rawEvent: NotRequired[Any]
    metadata: NotRequired[dict[str, Any]]


class _Attributable(_Base):
    subagentRunId: NotRequired[str]


class RunStartedEvent(_Base):
    type: Literal["RUN_STARTED"]
    threadId: str
    runId: str
    protocolVersion: NotRequired[str]
    parentRunId: NotRequired[str]
    input: NotRequired[dict[str, Any]]


class RunFinishedEvent(_Base):
    type: Literal["RUN_FINISHED"]
    threadId: str
    runId: str
    result: NotRequired[Any]
    outcome: NotRequired[dict[str, Any]]
    usage: NotRequired[list[dict[str, Any]]]


class RunErrorEvent(_Base):
    type: Literal["RUN_ERROR"]
    message: str
    code: NotRequired[str]
    usage: NotRequired[list[dict[str, Any]]]


class StepEvent(_Attributable):
    type: Literal["STEP_STARTED", "STEP_FINISHED"]
    stepName: str


class TextMessageStartEvent(_Attributable):
    type: Literal["TEXT_MESSAGE_START"]
    messageId: str
    role: NotRequired[Literal["developer", "system", "assistant", "user"]]
    name: NotRequired[str]


class DeltaEvent(_Attributable):
    type: Literal["TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT"]
    messageId: str
    delta: str


class MessageIdEvent(_Attributable):
    type: Literal["TEXT_MESSAGE_END", "REASONING_START", "REASONING_MESSAGE_END", "REASONING_END"]
    messageId: str


class ReasoningMessageStartEvent(_Attributable):
    type: Literal["REASONING_MESSAGE_START"]
    messageId: str
    role: Literal["reasoning"]


class ToolCallStartEvent(_Attributable):
    type: Literal["TOOL_CALL_START"]
    toolCallId: str
    toolCallName: str
    parentMessageId: NotRequired[str]


class ToolCallArgsEvent(_Attributable):
    type: Literal["TOOL_CALL_ARGS"]
    toolCallId: str
    delta: str


class ToolCallEndEvent(_Attributable):
    type: Literal["TOOL_CALL_END"]
    toolCallId: str


class ToolCallResultEvent(_Attributable):
    type: Literal["TOOL_CALL_RESULT"]
    messageId: str
    toolCallId: str
    content: str | list[dict[str, Any]]
    role: NotRequired[Literal["tool"]]


class CustomEvent(_Attributable):
    type: Literal["CUSTOM"]
    name: str
    value: Any


class StateSnapshotEvent(_Attributable):
    type: Literal["STATE_SNAPSHOT"]
    snapshot: Any


class StateDeltaEvent(_Attributable):
    type: Literal["STATE_DELTA"]
    delta: list[dict[str, Any]]


class SubagentStartedEvent(_Base):
    type: Literal["SUBAGENT_STARTED"]
    subagentRunId: str
    name: str
    description: NotRequired[str]
    parentSubagentRunId: NotRequired[str]
    parentToolCallId: NotRequired[str]
    parentMessageId: NotRequired[str]


class SubagentFinishedEvent(_Base):
    type: Literal["SUBAGENT_FINISHED"]
    subagentRunId: str
    result: NotRequired[Any]
    outcome: NotRequired[dict[str, Any]]


class SubagentErrorEvent(_Base):
    type: Literal["SUBAGENT_ERROR"]
    subagentRunId: str
    message: str
    code: NotRequired[str]


#: Every event is one of the shapes above (``dict`` at run time).
Event: TypeAlias = dict[str, Any]


class AGUIEventFormatError(ValueError):
    """An object that is not a valid AG-UI 1.0 event (what the client's
    schemas would reject or strip)."""

    def __init__(self, message: str, *, event_type: str = "", field: str = "") -> None:
        super().__init__(message)
        self.event_type = event_type
        self.field = field


# -- value checks ---------------------------------------------------------------

_Check: TypeAlias = Callable[[Any, str], "str | None"]  # value, path -> problem or None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _string(value: Any, path: str) -> str | None:
    return None if isinstance(value, str) else "must be a string"


def _boolean(value: Any, path: str) -> str | None:
    return None if isinstance(value, bool) else "must be a boolean"


def _object(value: Any, path: str) -> str | None:
    return None if isinstance(value, dict) else "must be an object"


def _json(value: Any, path: str) -> str | None:
    return None  # any JSON value; ``null`` decided by the caller


def _timestamp(value: Any, path: str) -> str | None:
    if not _is_int(value) or not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return "must be an integer (milliseconds) within the safe integer range"
    return None


def _one_of(*choices: str) -> _Check:
    def check(value: Any, path: str) -> str | None:
        return None if value in choices else f"must be one of {', '.join(map(repr, choices))}"

    return check


def _strings(value: Any, path: str) -> str | None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return "must be an array of strings"
    return None


def _fields(value: Any, path: str, required: Mapping[str, _Check], optional: Mapping[str, _Check] = {}) -> str | None:
    """An object with these fields (unknown keys allowed: nested objects are
    loose in the 1.0 schemas)."""
    if not isinstance(value, dict):
        return "must be an object"
    for name, check in required.items():
        if name not in value:
            return f"needs {name!r}"
        problem = check(value[name], f"{path}.{name}")
        if problem:
            return f"{name!r} {problem}"
    for name, check in optional.items():
        if name in value:
            if value[name] is None:
                return f"{name!r} is null: leave it out"
            problem = check(value[name], f"{path}.{name}")
            if problem:
                return f"{name!r} {problem}"
    return None


def _usage(value: Any, path: str) -> str | None:
    if not isinstance(value, list):
        return "must be an array of token usage objects"
    counts = ("inputTokens", "outputTokens", "totalTokens", "reasoningTokens", "cachedInputTokens")
    for i, entry in enumerate(value):
        if not isinstance(entry, dict):
            return f"[{i}] must be an object"
        for name in (*counts, "cacheWriteInputTokens"):
            if name in entry and (not _is_int(entry[name]) or not 0 <= entry[name] <= MAX_SAFE_INTEGER):
                return f"[{i}].{name} must be a non-negative integer"
        for name in ("provider", "model"):
            if name in entry and not isinstance(entry[name], str):
                return f"[{i}].{name} must be a string"
    return None


_INTERRUPT_OPTIONAL: Final[dict[str, _Check]] = {
    "subagentRunId": _string,
    "message": _string,
    "toolCallId": _string,
    "responseSchema": _object,
    "expiresAt": _string,
    "metadata": _object,
}


def _run_outcome(value: Any, path: str) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "success":
        return _fields(value, path, {}, {"pendingToolCallIds": _strings})
    if kind == "cancelled":
        return _fields(value, path, {})
    if kind == "interrupt":
        interrupts = value.get("interrupts")
        if not isinstance(interrupts, list) or not interrupts:
            return "'interrupts' must be a non-empty array"
        for i, item in enumerate(interrupts):
            problem = _fields(item, path, {"id": _string, "reason": _string}, _INTERRUPT_OPTIONAL)
            if problem:
                return f"interrupts[{i}] {problem}"
        return None
    return "must be {type: 'success' | 'interrupt' | 'cancelled', ...}"


def _subagent_outcome(value: Any, path: str) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "success":
        return _fields(value, path, {})
    if kind == "suspended":
        return _fields(value, path, {}, {"interruptIds": _strings})
    return "must be {type: 'success' | 'suspended', ...}"


_MEDIA_PARTS: Final = frozenset(("image", "audio", "video", "document"))


def _part_source(value: Any, path: str) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "data":
        return _fields(value, path, {"value": _string, "mimeType": _string})
    if kind == "url":
        return _fields(value, path, {"value": _string}, {"mimeType": _string})
    if kind == "file":
        return _fields(value, path, {"value": _string}, {"provider": _string, "mimeType": _string})
    return "must be a source {type: 'data' | 'url' | 'file', value, ...}"


def validate_content_parts(value: Any, path: str = "content") -> str | None:
    """The problem with a list of 1.0 content parts (text, image, audio,
    video, document), or None."""
    if not isinstance(value, list):
        return "must be a string or an array of content parts"
    for i, part in enumerate(value):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            problem = _fields(part, path, {"text": _string}, {"id": _string, "metadata": _json})
        elif kind in _MEDIA_PARTS:
            problem = _fields(part, path, {"source": _part_source}, {"id": _string, "metadata": _json})
        else:
            problem = "must be a content part of type text, image, audio, video or document"
        if problem:
            return f"[{i}] {problem}"
    return None


def _content(value: Any, path: str) -> str | None:
    return None if isinstance(value, str) else validate_content_parts(value, path)


_POINTER: Final = re.compile(r"(/([^/~]|~[01])*)*")
_PATCH_OPS: Final = frozenset(("add", "remove", "replace", "move", "copy", "test"))


def validate_patch_shape(value: Any) -> str | None:
    """The problem with an RFC 6902 JSON Patch document, or None."""
    if not isinstance(value, list):
        return "must be a JSON Patch: an array of operations"
    for i, op in enumerate(value):
        if not isinstance(op, dict):
            return f"[{i}] must be an object"
        kind = op.get("op")
        if kind not in _PATCH_OPS:
            return f"[{i}].op must be one of add, remove, replace, move, copy, test"
        path = op.get("path")
        if not isinstance(path, str) or not _POINTER.fullmatch(path):
            return f"[{i}].path must be a JSON Pointer"
        if kind in ("add", "replace", "test") and "value" not in op:
            return f"[{i}] ({kind}) needs 'value'"
        if kind in ("move", "copy"):
            source = op.get("from")
            if not isinstance(source, str) or not _POINTER.fullmatch(source):
                return f"[{i}] ({kind}) needs 'from', a JSON Pointer"
    return None


def _patch(value: Any, path: str) -> str | None:
    return validate_patch_shape(value)


# -- messages (MESSAGES_SNAPSHOT, RunAgentInput.messages) --------------------------

_FUNCTION_CALL: Final[dict[str, _Check]] = {"name": _string, "arguments": _string}


def _tool_calls(value: Any, path: str) -> str | None:
    if not isinstance(value, list):
        return "must be an array of tool calls"
    for i, call in enumerate(value):
        problem = _fields(
            call,
            path,
            {"id": _string, "type": _one_of("function"), "function": _function},
            {"encryptedValue": _string, "metadata": _object},
        )
        if problem:
            return f"[{i}] {problem}"
    return None


def _function(value: Any, path: str) -> str | None:
    return _fields(value, path, _FUNCTION_CALL)


_MESSAGE_COMMON: Final[dict[str, _Check]] = {"subagentRunId": _string, "metadata": _object}
_NAMED: Final[dict[str, _Check]] = {**_MESSAGE_COMMON, "name": _string, "encryptedValue": _string}

#: role -> (required, optional) fields besides ``id`` and ``role``.
MESSAGE_FIELDS: Final[dict[str, tuple[dict[str, _Check], dict[str, _Check]]]] = {
    "developer": ({"content": _string}, _NAMED),
    "system": ({"content": _string}, _NAMED),
    "assistant": ({}, {**_NAMED, "content": _string, "toolCalls": _tool_calls}),
    "user": ({"content": _content}, _NAMED),
    "tool": (
        {"content": _content, "toolCallId": _string},
        {**_MESSAGE_COMMON, "error": _string, "encryptedValue": _string},
    ),
    "activity": ({"activityType": _string, "content": _object}, _MESSAGE_COMMON),
    "reasoning": ({"content": _string}, {**_MESSAGE_COMMON, "encryptedValue": _string}),
}


def validate_message(value: Any, path: str = "message", *, default_role: str | None = None) -> str | None:
    """The problem with one 1.0 message, or None. With ``default_role`` a
    missing or ``null`` role reads as that role (the caller fills it in)."""
    if not isinstance(value, dict):
        return "must be an object"
    role = value.get("role")
    if role is None and default_role is not None:
        role = default_role
    spec = MESSAGE_FIELDS.get(role) if isinstance(role, str) else None
    if spec is None:
        return f"'role' must be one of {', '.join(MESSAGE_FIELDS)}"
    if not isinstance(value.get("id"), str):
        return "'id' must be a string"
    required, optional = spec
    return _fields(value, path, required, optional)


def _messages(value: Any, path: str) -> str | None:
    if not isinstance(value, list):
        return "must be an array of messages"
    for i, message in enumerate(value):
        problem = validate_message(message, f"{path}[{i}]")
        if problem:
            return f"[{i}] {problem}"
    return None


# -- the table -------------------------------------------------------------------

_BASE: Final[dict[str, _Check]] = {"timestamp": _timestamp, "rawEvent": _json, "metadata": _object}
_ATTR: Final[dict[str, _Check]] = {**_BASE, "subagentRunId": _string}
_MID: Final[dict[str, _Check]] = {"messageId": _string}
_TEXT_ROLE: Final = _one_of("developer", "system", "assistant", "user")

#: type -> (required fields, optional fields), each with its check. The base
#: fields (``timestamp``, ``rawEvent``, ``metadata``) and, on attributable
#: events, ``subagentRunId`` are among the optional ones.
EVENT_FIELDS: Final[dict[str, tuple[dict[str, _Check], dict[str, _Check]]]] = {
    "TEXT_MESSAGE_START": (_MID, {**_ATTR, "role": _TEXT_ROLE, "name": _string}),
    "TEXT_MESSAGE_CONTENT": ({**_MID, "delta": _string}, _ATTR),
    "TEXT_MESSAGE_END": (_MID, _ATTR),
    "TEXT_MESSAGE_CHUNK": ({}, {**_ATTR, **_MID, "role": _TEXT_ROLE, "delta": _string, "name": _string}),
    "TOOL_CALL_START": ({"toolCallId": _string, "toolCallName": _string}, {**_ATTR, "parentMessageId": _string}),
    "TOOL_CALL_ARGS": ({"toolCallId": _string, "delta": _string}, _ATTR),
    "TOOL_CALL_END": ({"toolCallId": _string}, _ATTR),
    "TOOL_CALL_CHUNK": (
        {},
        {**_ATTR, "toolCallId": _string, "toolCallName": _string, "parentMessageId": _string, "delta": _string},
    ),
    "TOOL_CALL_RESULT": (
        {**_MID, "toolCallId": _string, "content": _content},
        {**_ATTR, "role": _one_of("tool")},
    ),
    "STATE_SNAPSHOT": ({"snapshot": _json}, _ATTR),
    "STATE_DELTA": ({"delta": _patch}, _ATTR),
    "MESSAGES_SNAPSHOT": ({"messages": _messages}, _BASE),
    "ACTIVITY_SNAPSHOT": (
        {**_MID, "activityType": _string, "content": _object},
        {**_ATTR, "replace": _boolean},
    ),
    "ACTIVITY_DELTA": ({**_MID, "activityType": _string, "patch": _patch}, _ATTR),
    "RAW": ({"event": _json}, {**_ATTR, "source": _string}),
    "CUSTOM": ({"name": _string, "value": _json}, _ATTR),
    "RUN_STARTED": (
        {"threadId": _string, "runId": _string},
        {**_BASE, "protocolVersion": _string, "parentRunId": _string, "input": _object},
    ),
    "RUN_FINISHED": (
        {"threadId": _string, "runId": _string},
        {**_BASE, "result": _json, "outcome": _run_outcome, "usage": _usage},
    ),
    "RUN_ERROR": ({"message": _string}, {**_BASE, "code": _string, "usage": _usage}),
    "STEP_STARTED": ({"stepName": _string}, _ATTR),
    "STEP_FINISHED": ({"stepName": _string}, _ATTR),
    "REASONING_START": (_MID, _ATTR),
    "REASONING_MESSAGE_START": ({**_MID, "role": _one_of("reasoning")}, _ATTR),
    "REASONING_MESSAGE_CONTENT": ({**_MID, "delta": _string}, _ATTR),
    "REASONING_MESSAGE_END": (_MID, _ATTR),
    "REASONING_MESSAGE_CHUNK": ({}, {**_ATTR, **_MID, "delta": _string}),
    "REASONING_END": (_MID, _ATTR),
    "REASONING_ENCRYPTED_VALUE": (
        {"subtype": _one_of("tool-call", "message"), "entityId": _string, "encryptedValue": _string},
        _ATTR,
    ),
    "SUBAGENT_STARTED": (
        {"subagentRunId": _string, "name": _string},
        {
            **_BASE,
            "description": _string,
            "parentSubagentRunId": _string,
            "parentToolCallId": _string,
            "parentMessageId": _string,
        },
    ),
    "SUBAGENT_FINISHED": ({"subagentRunId": _string}, {**_BASE, "result": _json, "outcome": _subagent_outcome}),
    "SUBAGENT_ERROR": ({"subagentRunId": _string, "message": _string}, {**_BASE, "code": _string}),
}

#: Events that carry an optional ``subagentRunId`` attribution tag.
ATTRIBUTABLE: Final = frozenset(t for t, (_req, opt) in EVENT_FIELDS.items() if "subagentRunId" in opt)

#: Required fields whose value may be ``null`` ("any JSON value").
_NULLABLE: Final = frozenset((("CUSTOM", "value"), ("RAW", "event"), ("STATE_SNAPSHOT", "snapshot")))


def validate_event(obj: Any) -> Event:
    """Check ``obj`` against the AG-UI 1.0 schema and the AG-UI event wire
    rules and return it. Raises ``AGUIEventFormatError`` naming the event type
    and the field: a missing or mistyped field, ``null`` in an optional
    field, a key the type does not list."""
    if not isinstance(obj, dict):
        raise AGUIEventFormatError(f"an event is a JSON object, not {type(obj).__name__}")
    event_type = obj.get("type")
    if not isinstance(event_type, str):
        raise AGUIEventFormatError("an event needs a string 'type'", field="type")
    spec = EVENT_FIELDS.get(event_type)
    if spec is None:
        raise AGUIEventFormatError(f"unknown event type {event_type!r}", event_type=event_type, field="type")
    required, optional = spec
    for name, check in required.items():
        if name not in obj:
            raise AGUIEventFormatError(f"{event_type}: missing {name!r}", event_type=event_type, field=name)
        value = obj[name]
        if value is None and (event_type, name) in _NULLABLE:
            continue
        problem = check(value, name)
        if problem:
            raise AGUIEventFormatError(f"{event_type}: {name!r} {problem}", event_type=event_type, field=name)
    for name, value in obj.items():
        if name == "type" or name in required:
            continue
        opt_check = optional.get(name)
        if opt_check is None:
            raise AGUIEventFormatError(
                f"{event_type}: unknown field {name!r} (the client strips it)", event_type=event_type, field=name
            )
        if value is None:
            raise AGUIEventFormatError(
                f"{event_type}: {name!r} is null: leave an absent field out", event_type=event_type, field=name
            )
        problem = opt_check(value, name)
        if problem:
            raise AGUIEventFormatError(f"{event_type}: {name!r} {problem}", event_type=event_type, field=name)
    return obj
