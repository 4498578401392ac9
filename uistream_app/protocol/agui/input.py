"""``RunAgentInput``, parsed strictly: what an AG-UI endpoint may trust.

``parse_run_agent_input`` takes the raw request body and returns an
``AGUIInput`` or raises ``AGUIInputError`` naming the problem and where it
is (``field`` is a path such as ``messages[2].content[0].source``). Nothing
here touches a database. Its rules are the AG-UI input rules of
docs/protocols.md ("rule N" in this module means AG-UI input rule N there).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

from ...errors import Codes
from ..jsonbody import MAX_DEPTH, JSONBodyError, load_json_object
from .events import validate_message

__all__ = [
    "DEFAULT_ROLE",
    "MAX_DEPTH",
    "MAX_MESSAGES",
    "AGUIInput",
    "AGUIInputError",
    "parse_run_agent_input",
]

MAX_MESSAGES: Final = 10_000
#: What a message without a role (or with ``"role": null``) is read as.
DEFAULT_ROLE: Final = "assistant"


class AGUIInputError(ValueError):
    """A request the endpoint refuses: ``status``, a stable ``code``, a
    message for people and the ``field`` it is about."""

    def __init__(self, message: str, *, code: str = Codes.INVALID, field: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.field = field
        self.status = status


@dataclass(frozen=True)
class AGUIInput:
    """A checked ``RunAgentInput``, snake_case. ``messages`` are the 1.0
    messages as sent, each with its ``role`` filled in (rule 3)."""

    thread_id: str
    run_id: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    context: list[dict[str, Any]] = field(default_factory=list)
    state: Any = None
    forwarded_props: Any = None
    resume: list[dict[str, Any]] = field(default_factory=list)
    parent_run_id: str | None = None
    protocol_version: str | None = None

    @property
    def last_message(self) -> dict[str, Any] | None:
        """The input's last message, where a new user message or a tool result is."""
        return self.messages[-1] if self.messages else None


def _string(data: dict[str, Any], key: str, *, required: bool) -> str | None:
    if key not in data or (data[key] is None and not required):
        if required:
            raise AGUIInputError(f"{key} is required", field=key)
        if key in data:
            raise AGUIInputError(f"{key} is null: leave it out", field=key)
        return None
    value = data[key]
    if not isinstance(value, str):
        raise AGUIInputError(f"{key} must be a string", field=key)
    return value


def _list(data: dict[str, Any], key: str) -> list[Any]:
    if key not in data:
        return []
    value = data[key]
    if not isinstance(value, list):
        raise AGUIInputError(f"{key} must be a list", field=key)
    return value


def _objects(items: list[Any], key: str, required: dict[str, type], optional: dict[str, type]) -> list[dict[str, Any]]:
    for i, item in enumerate(items):
        where = f"{key}[{i}]"
        if not isinstance(item, dict):
            raise AGUIInputError(f"{where} must be an object", field=where)
        for name, kind in required.items():
            if not isinstance(item.get(name), kind):
                raise AGUIInputError(f"{where}.{name} must be a {kind.__name__}", field=f"{where}.{name}")
        for name, kind in optional.items():
            if name in item and not isinstance(item[name], kind):
                raise AGUIInputError(f"{where}.{name} must be a {kind.__name__}", field=f"{where}.{name}")
    return items


_FIELD_IN_PROBLEM: Final = re.compile(r"(?:needs )?'(\w+)'")


def _message(message: Any, where: str) -> dict[str, Any]:
    if isinstance(message, dict) and message.get("role") is None:
        message = {**message, "role": DEFAULT_ROLE}
    problem = validate_message(message, where)
    if problem:
        named = _FIELD_IN_PROBLEM.match(problem)
        raise AGUIInputError(f"{where} {problem}", field=f"{where}.{named.group(1)}" if named else where)
    assert isinstance(message, dict)
    return message


def parse_run_agent_input(body: bytes, *, max_bytes: int) -> AGUIInput:
    """AG-UI input rules 1-6 (docs/protocols.md)."""
    try:
        data = load_json_object(body, max_bytes=max_bytes, expected="a RunAgentInput")
    except JSONBodyError as exc:
        raise AGUIInputError(exc.message, code=exc.code, status=exc.status) from None
    thread_id = _string(data, "threadId", required=True)
    run_id = _string(data, "runId", required=True)
    assert thread_id is not None
    assert run_id is not None
    parent_run_id = _string(data, "parentRunId", required=False)
    version = _string(data, "protocolVersion", required=False)
    if version is not None and version.split(".", 1)[0] != "1":
        raise AGUIInputError(
            f"protocol version {version!r} is not spoken here; use 1.x",
            code=Codes.UNSUPPORTED_PROTOCOL_VERSION,
            field="protocolVersion",
        )
    if "messages" not in data:
        raise AGUIInputError("messages is required (a list of messages)", field="messages")
    raw_messages = _list(data, "messages")
    if len(raw_messages) > MAX_MESSAGES:
        raise AGUIInputError(f"messages holds more than {MAX_MESSAGES} messages", field="messages")
    messages = [_message(m, f"messages[{i}]") for i, m in enumerate(raw_messages)]
    tools = _objects(_list(data, "tools"), "tools", {"name": str, "description": str}, {"metadata": dict})
    for i, tool in enumerate(tools):
        if "parameters" in tool and tool["parameters"] is None:
            raise AGUIInputError(f"tools[{i}].parameters is null: leave it out", field=f"tools[{i}].parameters")
    context = _objects(_list(data, "context"), "context", {"description": str, "value": str}, {})
    resume = _objects(_list(data, "resume"), "resume", {"interruptId": str}, {"metadata": dict})
    for i, entry in enumerate(resume):
        if entry.get("status") not in ("resolved", "cancelled"):
            raise AGUIInputError(f"resume[{i}].status must be 'resolved' or 'cancelled'", field=f"resume[{i}].status")
        if "payload" in entry and entry["payload"] is None:
            raise AGUIInputError(f"resume[{i}].payload is null: leave it out", field=f"resume[{i}].payload")
    if "forwardedProps" in data and data["forwardedProps"] is None:
        raise AGUIInputError("forwardedProps is null: leave it out", field="forwardedProps")
    return AGUIInput(
        thread_id=thread_id,
        run_id=run_id,
        messages=messages,
        tools=tools,
        context=context,
        state=data.get("state"),
        forwarded_props=data.get("forwardedProps"),
        resume=resume,
        parent_run_id=parent_run_id,
        protocol_version=version,
    )
