"""A ``UIMessage``'s parts, prepared for the chat templates.

``part_views(parts)`` turns each part into a ``PartView``: a ``kind`` the
template switches on (``text``, ``reasoning``, ``tool``, ``source-url``,
``source-document``, ``file``, ``data``, ``step``, ``custom``,
``steering``, ``other``) and plain strings to show. Nothing here is marked
safe: the templates escape every value, so a model answer holding
``<script>`` or ``</textarea>`` is shown as text. Links are only made for
``http``/``https`` URLs (a ``javascript:`` source URL stays text), and only
a ``data:`` URL of a raster image is shown as a picture.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Final

from ..protocol.jsonbody import MAX_DEPTH, depth_ok
from ..protocol.ui.parts import is_tool_type

__all__ = ["PartView", "part_views", "pretty_json", "safe_href"]

#: Characters of one JSON value shown before it is cut.
MAX_JSON: Final = 10_000
#: Levels of one JSON value shown: what the API and the chat body let in
#: (``jsonbody.MAX_DEPTH``). A row stored before those limits may nest far
#: deeper, which ``json.dumps(indent=...)`` renders by recursion: 990 levels
#: took 34 s, and a few more exhaust the stack.
MAX_JSON_DEPTH: Final = MAX_DEPTH
#: What stands for a container past ``MAX_JSON_DEPTH``.
CUT_DEEPER: Final = "… (nested deeper)"
_IMAGE_DATA_URL: Final = re.compile(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=]+")


def _cut_deeper(value: Any, levels: int) -> Any:
    """``value`` with each container past ``levels`` levels replaced by
    ``CUT_DEEPER`` (recursing at most ``levels`` deep)."""
    if isinstance(value, dict):
        return {k: _cut_deeper(v, levels - 1) for k, v in value.items()} if levels > 0 else CUT_DEEPER
    if isinstance(value, list):
        return [_cut_deeper(v, levels - 1) for v in value] if levels > 0 else CUT_DEEPER
    return value


def pretty_json(value: Any, limit: int = MAX_JSON) -> str:
    """``value`` as indented JSON, cut after ``limit`` characters and below
    ``MAX_JSON_DEPTH`` levels."""
    if not depth_ok(value, MAX_JSON_DEPTH):
        value = _cut_deeper(value, MAX_JSON_DEPTH)
    try:
        text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)
    except ValueError:  # a circular structure cannot come from JSON, but be safe
        text = repr(value)
    if len(text) > limit:
        text = f"{text[:limit]}\n… ({len(text) - limit} more characters)"
    return text


def safe_href(url: Any) -> str | None:
    """``url`` when it is an http(s) URL a link may point to, else None."""
    if isinstance(url, str) and url.lower().startswith(("http://", "https://")):
        return url
    return None


@dataclass
class PartView:
    """One message part as the templates show it: plain strings, JSON values already indented and cut."""

    kind: str
    type: str
    text: str = ""
    title: str = ""
    state: str = ""
    name: str = ""
    call_id: str = ""
    input: str | None = None
    output: str | None = None
    error: str = ""
    approval: str | None = None
    url: str = ""
    href: str | None = None
    image: str | None = None
    media_type: str = ""
    filename: str = ""
    data: str | None = None
    number: int = 0
    details: list[tuple[str, str]] = field(default_factory=list)
    children: list[PartView] = field(default_factory=list)


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def _tool(part: dict[str, Any], part_type: str) -> PartView:
    dynamic = part_type == "dynamic-tool"
    view = PartView(
        kind="tool",
        type=part_type,
        name=_str(part.get("toolName")) if dynamic else part_type[len("tool-") :],
        call_id=_str(part.get("toolCallId")),
        state=_str(part.get("state")),
        title=_str(part.get("title")),
        error=_str(part.get("errorText")),
    )
    if "input" in part:
        view.input = pretty_json(part["input"])
    elif isinstance(part.get("rawInput"), str):
        view.input = part["rawInput"]
    if "output" in part:
        view.output = pretty_json(part["output"])
    if isinstance(part.get("approval"), dict):
        view.approval = pretty_json(part["approval"])
    if dynamic:
        view.details.append(("dynamic", "yes"))
    if part.get("providerExecuted"):
        view.details.append(("provider-executed", "yes"))
    if part.get("preliminary"):
        view.details.append(("preliminary", "yes"))
    return view


def _one(part: Any, steps: list[int]) -> PartView:
    if not isinstance(part, dict) or not isinstance(part.get("type"), str):
        return PartView(kind="other", type="?", data=pretty_json(part))
    t: str = part["type"]
    if t == "text":
        return PartView(kind="text", type=t, text=_str(part.get("text")), state=_str(part.get("state")))
    if t == "reasoning":
        return PartView(kind="reasoning", type=t, text=_str(part.get("text")), state=_str(part.get("state")))
    if t == "step-start":
        steps[0] += 1
        return PartView(kind="step", type=t, number=steps[0])
    if is_tool_type(t):
        return _tool(part, t)
    if t == "source-url":
        url = _str(part.get("url"))
        return PartView(kind="source-url", type=t, url=url, href=safe_href(url), title=_str(part.get("title")))
    if t == "source-document":
        return PartView(
            kind="source-document",
            type=t,
            title=_str(part.get("title")),
            media_type=_str(part.get("mediaType")),
            filename=_str(part.get("filename")),
        )
    if t in ("file", "reasoning-file"):
        url = _str(part.get("url"))
        image = url if _IMAGE_DATA_URL.fullmatch(url) else None
        shown = url if len(url) <= 200 else f"{url[:200]}… ({len(url)} characters)"
        return PartView(
            kind="file",
            type=t,
            url=shown,
            href=safe_href(url),
            image=image,
            media_type=_str(part.get("mediaType")),
            filename=_str(part.get("filename")),
        )
    if t.startswith("data-"):
        return PartView(
            kind="data",
            type=t,
            name=t[len("data-") :],
            call_id=_str(part.get("id")),
            data=pretty_json(part.get("data")),
        )
    if t == "custom":
        return PartView(kind="custom", type=t, name=_str(part.get("kind")), data=pretty_json(part))
    if t == "steering-message":
        inner = part.get("parts")
        return PartView(kind="steering", type=t, children=part_views(inner if isinstance(inner, list) else []))
    return PartView(kind="other", type=t, data=pretty_json(part))


def part_views(parts: Any) -> list[PartView]:
    """The parts of one message, in order, ready for ``uistream_app/parts.html``."""
    if not isinstance(parts, list):
        return [PartView(kind="other", type="?", data=pretty_json(parts))]
    steps = [0]
    return [_one(part, steps) for part in parts]
