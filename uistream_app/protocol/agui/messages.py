"""AG-UI messages ⇄ stored ``UIMessage``\\ s, and what a client builds.

``fold_messages`` is the Python twin of ``@ag-ui/client`` 1.0's reducer
(``src/apply/default.ts``) for the events ``AGUIRenderer`` makes: the
message list a client holds after reading a stream. With it,
``ui_messages_to_agui`` turns a stored conversation into the messages an
AG-UI client would hold had it streamed every turn, which is how a stored
conversation is served in AG-UI (a ``MESSAGES_SNAPSHOT``, or a comparison
in tests). The reducer's rules, as far as these events go:

1. ``TEXT_MESSAGE_START`` appends ``{id, role, content: ""}`` (role
   defaults to ``assistant``) unless a message with that id exists;
   ``TEXT_MESSAGE_CONTENT`` appends to its content.
2. ``REASONING_MESSAGE_START`` appends ``{id, role: "reasoning", content:
   ""}``; ``REASONING_MESSAGE_CONTENT`` appends.
3. ``TOOL_CALL_START`` adds ``{id, type: "function", function: {name,
   arguments: ""}}`` to the ``toolCalls`` of the assistant message its
   ``parentMessageId`` names, creating ``{id: parentMessageId, role:
   "assistant", toolCalls: []}`` when there is none (keyed by the call id
   when there is no parent, or when the parent is not an assistant
   message); ``TOOL_CALL_ARGS`` appends to ``arguments``.
4. ``TOOL_CALL_RESULT`` inserts ``{id: messageId, toolCallId, role:
   "tool", content}`` right after the assistant message holding the call
   (after the results already there), else at the end.
5. A ``subagentRunId`` on an opener is copied onto the message it creates;
   event ``metadata`` merges into the message (or tool call) it builds,
   key by key.

User messages convert both ways (``ui_user_message`` /
``agui_user_message``): text parts and text content; files as media
parts (``image``/``audio``/``video`` by media type, else ``document``),
a ``data:`` URL as a ``data`` source and any other URL as a ``url``
source. A ``url`` source without ``mimeType`` and a provider ``file``
source have no UI form and are refused with ``MessageConversionError``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

from ..ui.replay import replay_message
from .events import Event
from .renderer import AGUIRenderer

__all__ = [
    "MessageConversionError",
    "agui_user_message",
    "assistant_to_agui",
    "fold_messages",
    "ui_messages_to_agui",
    "ui_user_message",
]

_DATA_URL: Final = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)
_MEDIA: Final = ("image", "audio", "video")


class MessageConversionError(ValueError):
    """A message with no form in the other vocabulary; ``field`` is where."""

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.field = field


def _merge_metadata(target: dict[str, Any], event: Event) -> None:
    metadata = event.get("metadata")
    if isinstance(metadata, dict):
        target["metadata"] = {**target.get("metadata", {}), **metadata}


def fold_messages(events: Iterable[Event], messages: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The messages a client holds after ``events`` (the module's rules),
    starting from ``messages`` (not modified)."""
    out = [dict(m) for m in messages] if messages else []
    by_id: dict[str, dict[str, Any]] = {m["id"]: m for m in out if isinstance(m.get("id"), str)}
    for event in events:
        kind = event.get("type")
        tag = event.get("subagentRunId")
        if kind in ("TEXT_MESSAGE_START", "REASONING_MESSAGE_START"):
            message = by_id.get(event["messageId"])
            if message is None:
                role = "reasoning" if kind == "REASONING_MESSAGE_START" else event.get("role", "assistant")
                message = {"id": event["messageId"], "role": role, "content": ""}
                if "name" in event:
                    message["name"] = event["name"]
                if tag is not None:
                    message["subagentRunId"] = tag
                out.append(message)
                by_id[message["id"]] = message
            _merge_metadata(message, event)
        elif kind in ("TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT"):
            message = by_id.get(event["messageId"])
            if message is not None and message.get("role") != "activity":
                content = message.get("content")
                message["content"] = (content if isinstance(content, str) else "") + event["delta"]
                _merge_metadata(message, event)
        elif kind == "TOOL_CALL_START":
            call_id = event["toolCallId"]
            parent_id = event.get("parentMessageId")
            target = by_id.get(parent_id) if parent_id is not None else None
            if target is None or target.get("role") != "assistant":
                key = call_id if parent_id is None or target is not None else parent_id
                target = {"id": key, "role": "assistant", "toolCalls": []}
                if tag is not None:
                    target["subagentRunId"] = tag
                out.append(target)
                by_id[key] = target
            call: dict[str, Any] = {"id": call_id, "type": "function", "function": {"name": event["toolCallName"]}}
            call["function"]["arguments"] = ""
            _merge_metadata(call, event)
            target.setdefault("toolCalls", []).append(call)
        elif kind == "TOOL_CALL_ARGS":
            for message in out:
                for call in message.get("toolCalls") or ():
                    if call["id"] == event["toolCallId"]:
                        call["function"]["arguments"] += event["delta"]
        elif kind == "TOOL_CALL_RESULT":
            result: dict[str, Any] = {
                "id": event["messageId"],
                "toolCallId": event["toolCallId"],
                "role": event.get("role", "tool"),
                "content": event["content"],
            }
            if tag is not None:
                result["subagentRunId"] = tag
            _merge_metadata(result, event)
            at = next(
                (
                    i
                    for i, m in enumerate(out)
                    if m.get("role") == "assistant"
                    and any(c["id"] == event["toolCallId"] for c in m.get("toolCalls") or ())
                ),
                None,
            )
            if at is None:
                out.append(result)
            else:
                at += 1
                while at < len(out) and out[at].get("role") == "tool":
                    at += 1
                out.insert(at, result)
            by_id[result["id"]] = result
    return out


# -- user messages -------------------------------------------------------------------


def _media_kind(media_type: str) -> str:
    major = media_type.split("/", 1)[0]
    return major if major in _MEDIA else "document"


def agui_user_message(message: dict[str, Any]) -> dict[str, Any]:
    """A stored user (or system) ``UIMessage`` as an AG-UI message: one text
    part as a string, anything else as content parts (data parts, which
    AG-UI has no form for, are left out)."""
    role = message.get("role", "user")
    parts = [p for p in message.get("parts", ()) if p.get("type") in ("text", "file")]
    content: str | list[dict[str, Any]]
    if role != "user" or (len(parts) == 1 and parts[0]["type"] == "text"):
        content = "".join(p.get("text", "") for p in parts if p["type"] == "text")
    else:
        content = []
        for part in parts:
            if part["type"] == "text":
                content.append({"type": "text", "text": part["text"]})
                continue
            url, media_type = part["url"], part["mediaType"]
            match = _DATA_URL.fullmatch(url)
            source = (
                {"type": "data", "value": match.group(2), "mimeType": match.group(1)}
                if match
                else {"type": "url", "value": url, "mimeType": media_type}
            )
            content.append({"type": _media_kind(media_type), "source": source})
    out: dict[str, Any] = {"id": message["id"], "role": role, "content": content}
    if isinstance(message.get("metadata"), dict):
        out["metadata"] = message["metadata"]
    return out


def ui_user_message(message: dict[str, Any], where: str = "message") -> dict[str, Any]:
    """An AG-UI user message (already schema-checked) as a ``UIMessage``.
    Raises ``MessageConversionError`` for a part with no UI form."""
    content = message["content"]
    parts: list[dict[str, Any]] = []
    if isinstance(content, str):
        parts.append({"type": "text", "text": content})
    else:
        for i, part in enumerate(content):
            if part["type"] == "text":
                parts.append({"type": "text", "text": part["text"]})
                continue
            source = part["source"]
            at = f"{where}.content[{i}].source"
            if source["type"] == "data":
                url = f"data:{source['mimeType']};base64,{source['value']}"
                parts.append({"type": "file", "mediaType": source["mimeType"], "url": url})
            elif source["type"] == "url":
                if "mimeType" not in source:
                    raise MessageConversionError(f"{at} needs a mimeType", field=f"{at}.mimeType")
                parts.append({"type": "file", "mediaType": source["mimeType"], "url": source["value"]})
            else:
                raise MessageConversionError(
                    f"{at}: provider file sources are not supported; send the data or a URL", field=f"{at}.type"
                )
    out: dict[str, Any] = {"id": message["id"], "role": "user", "parts": parts}
    if isinstance(message.get("metadata"), dict):
        out["metadata"] = message["metadata"]
    return out


# -- stored conversations ---------------------------------------------------------------


def assistant_to_agui(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A stored assistant ``UIMessage`` as the AG-UI messages a client builds
    from its rendering (reasoning messages, assistant messages with their
    tool calls, tool results)."""
    renderer = AGUIRenderer("", "", clock=lambda: 0)
    events = [e for chunk in replay_message(message) for e in renderer.events(chunk)]
    return fold_messages(events)


def ui_messages_to_agui(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """A stored conversation (``UIMessage``\\ s, oldest first) as AG-UI
    messages, for a ``MESSAGES_SNAPSHOT`` or a client's initial messages."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") == "assistant":
            out.extend(assistant_to_agui(message))
        else:
            out.append(agui_user_message(message))
    return out
