"""The model port: what the tool loop needs from a model, and nothing more.

``ChatModel`` is a ``typing.Protocol`` (``stream(messages, tools, options)``
→ source events); the contract every implementation keeps (lazy, closable,
complete tool calls, typed failures) is in docs/operations.md ("The model
port").
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol, TypeAlias, runtime_checkable

from ..protocol.events import (
    Custom,
    Finish,
    ReasoningDelta,
    ReasoningEnd,
    SourceDocument,
    SourceUrl,
    TextDelta,
    TextEnd,
    ToolApprovalRequest,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolResult,
    Usage,
)
from .messages import ModelMessage, ModelOptions, ToolSpec

__all__ = ["ChatModel", "ModelEvent", "model_name"]

#: The events a model call produces (a subset of ``protocol.events.Event``).
#: ``ToolResult``, the sources and ``ToolApprovalRequest`` come only from
#: providers that run tools themselves (web search, code execution, remote
#: MCP tools): the result of a call marked ``provider_executed``, the pages
#: it cites, a remote tool's request for approval; ``Custom`` a provider's
#: own part (ai@7's ``custom``).
ModelEvent: TypeAlias = (
    TextDelta
    | TextEnd
    | ReasoningDelta
    | ReasoningEnd
    | ToolCallStart
    | ToolCallDelta
    | ToolCall
    | ToolResult
    | SourceUrl
    | SourceDocument
    | ToolApprovalRequest
    | Custom
    | Usage
    | Finish
)


@runtime_checkable
class ChatModel(Protocol):
    """A streaming chat model (its contract: docs/operations.md, "The model port")."""

    def stream(
        self,
        messages: Sequence[ModelMessage],
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> AsyncIterator[ModelEvent]: ...


def model_name(model: object) -> str:
    """The name a run records for ``model``: its ``name`` attribute, else
    its class name."""
    name = getattr(model, "name", None)
    return name if isinstance(name, str) and name else type(model).__name__
