"""AG-UI messages ⇄ stored ``UIMessage``\\ s, and what a client builds.

``ui_messages_to_agui`` turns a stored conversation into the messages an
AG-UI client would hold had it streamed every turn: each stored assistant
message is replayed through ``AGUIRenderer`` and folded with
``fold_messages`` (``protocol.agui.reducer``, the twin of the client's
reducer, re-exported here), which is how a stored conversation is served in
AG-UI (a ``MESSAGES_SNAPSHOT``, or a comparison in tests).

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
from .reducer import fold_messages
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
