"""The model port: what the tool loop needs from a model, and nothing more.

A model is any object with a ``stream(messages, tools, options)`` method
that returns an async iterator of source events (``protocol.events``):
``ReasoningDelta``/``ReasoningEnd``, ``TextDelta``/``TextEnd``,
``ToolCallStart`` → ``ToolCallDelta``… → ``ToolCall``, ``Usage`` and, last,
``Finish(reason)``. An async generator method fits.

The contract every implementation keeps:

1. Lazy: nothing is sent until the first item is pulled, and one item is
   produced per item pulled (no read-ahead beyond the network read that
   holds the next event).
2. Closing the iterator (``aclose()``, or cancelling the task that pulls
   it) closes the provider's response at once: no orphaned request.
3. Every started tool call is completed by a ``ToolCall`` before
   ``Finish``; ``ToolCall.input`` is the raw argument text.
4. Failure raises a ``runs.errors.ModelError`` subclass; nothing after it.

``ChatModel`` is a ``typing.Protocol``: implementations need not inherit
from it. A ``name`` attribute, where present, is what a run records as its
model (``model_name``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol, TypeAlias, runtime_checkable

from ..protocol.events import (
    Finish,
    ReasoningDelta,
    ReasoningEnd,
    TextDelta,
    TextEnd,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from .messages import ModelMessage, ModelOptions, ToolSpec

__all__ = ["ChatModel", "ModelEvent", "model_name"]

#: The events a model call produces (a subset of ``protocol.events.Event``).
ModelEvent: TypeAlias = (
    TextDelta | TextEnd | ReasoningDelta | ReasoningEnd | ToolCallStart | ToolCallDelta | ToolCall | Usage | Finish
)


@runtime_checkable
class ChatModel(Protocol):
    """A streaming chat model (see the module docstring for the contract)."""

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
