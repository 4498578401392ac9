"""A stored ``UIMessage`` and its parts, typed: the one place that says
what a tool part is and what its states mean.

The shapes are ai@7's (``UIMessage``, ``ToolUIPart``, ``DynamicToolUIPart``);
docs/protocols.md has the part table. Parts stay the JSON dicts the client
holds (they are stored and sent as they are); these types name their keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal, NotRequired, TypedDict, TypeGuard

__all__ = [
    "SETTLED_TOOL_STATES",
    "Approval",
    "ToolPart",
    "ToolState",
    "UIMessage",
    "is_tool_part",
    "is_tool_type",
    "tool_name",
    "tool_parts",
]

ToolState = Literal[
    "input-streaming",
    "input-available",
    "approval-requested",
    "approval-responded",
    "output-available",
    "output-error",
    "output-denied",
]

#: States after which a call has its outcome: nothing more can answer it.
SETTLED_TOOL_STATES: Final = frozenset(("output-available", "output-error", "output-denied"))


class Approval(TypedDict):
    id: str
    approved: NotRequired[bool]
    reason: NotRequired[str]


class ToolPart(TypedDict):
    """``tool-NAME`` (a static tool) or ``dynamic-tool`` (with ``toolName``)."""

    type: str
    toolCallId: str
    state: ToolState
    toolName: NotRequired[str]
    input: NotRequired[Any]
    output: NotRequired[Any]
    errorText: NotRequired[str]
    approval: NotRequired[Approval]
    providerExecuted: NotRequired[bool]


class UIMessage(TypedDict):
    id: str
    role: Literal["system", "user", "assistant"]
    parts: list[dict[str, Any]]
    metadata: NotRequired[Any]


def is_tool_type(kind: object) -> bool:
    """Whether a part ``type`` names a tool call (``tool-NAME`` or ``dynamic-tool``)."""
    return isinstance(kind, str) and (kind.startswith("tool-") or kind == "dynamic-tool")


def is_tool_part(part: object) -> TypeGuard[ToolPart]:
    """Whether ``part`` is a tool call's part (static or dynamic) with its call id."""
    return isinstance(part, Mapping) and is_tool_type(part.get("type")) and "toolCallId" in part


def tool_name(part: Mapping[str, Any]) -> str:
    """The tool a tool part calls."""
    kind = str(part.get("type", ""))
    return str(part.get("toolName", "")) if kind == "dynamic-tool" else kind.removeprefix("tool-")


def tool_parts(parts: Iterable[object]) -> list[ToolPart]:
    """The tool parts among ``parts``, in order."""
    return [p for p in parts if is_tool_part(p)]
