"""Model messages: the conversation as a model port reads it, independent
of any provider's JSON and of the browser's UI messages.

Invariant: every ``ToolCallRequest`` of an ``AssistantMessage`` is answered
by exactly one ``ToolMessage`` before the next assistant or user message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

__all__ = [
    "AssistantMessage",
    "FilePart",
    "ModelMessage",
    "ModelOptions",
    "ReasoningPart",
    "SystemMessage",
    "ToolCallRequest",
    "ToolMessage",
    "ToolSpec",
    "UserMessage",
]


@dataclass(frozen=True, slots=True)
class SystemMessage:
    """Instructions for the model."""

    content: str


@dataclass(frozen=True, slots=True)
class FilePart:
    """A file of a person's turn. ``url`` is where the stored part points (a
    ``data:`` URL, an ``https:`` URL, or the app's ``/api/files/<id>``);
    ``load`` reads the bytes when a provider needs them (set by the Django
    side from storage, or for a ``data:`` URL by ``data``), None when the
    port has only the URL. ``size``: the bytes' count when known."""

    media_type: str
    url: str = ""
    filename: str | None = None
    size: int | None = None
    load: Callable[[], bytes] | None = field(default=None, compare=False, repr=False)

    def data(self) -> bytes | None:
        """The bytes, read now (None: only the URL is known)."""
        return self.load() if self.load is not None else None


@dataclass(frozen=True, slots=True)
class UserMessage:
    """A person's turn: its text and its files. ``parts``: the text pieces
    and files in the order the message holds them (what a provider sends,
    in order); empty means ``content`` then ``files``."""

    content: str
    files: tuple[FilePart, ...] = ()
    parts: tuple[str | FilePart, ...] = ()

    def ordered(self) -> tuple[str | FilePart, ...]:
        """The text pieces and files in order (see ``parts``)."""
        if self.parts:
            return self.parts
        return ((self.content,) if self.content else ()) + self.files


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """One tool call the model made. ``arguments`` is the argument text
    exactly as the model sent it (usually a JSON object)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ReasoningPart:
    """One reasoning part of a step that a provider wants back on the next
    call: its text and the provider metadata it streamed with it, as the
    stored part keeps it (``{"anthropic": {"signature": …}}`` or
    ``{"anthropic": {"redactedData": …}}`` for a thinking block,
    ``{"openai": {"itemId": …, "reasoningEncryptedContent": …}}`` for a
    Responses reasoning item)."""

    text: str
    provider_metadata: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """One model call's output: its text, its reasoning (kept for the
    record; chat-completions servers are not sent it back) and its tool
    calls. ``reasoning_parts`` are the reasoning parts that came with
    provider metadata, in order: what the native providers send back
    (Anthropic thinking with its signature, Responses reasoning items)."""

    content: str = ""
    tool_calls: tuple[ToolCallRequest, ...] = ()
    reasoning: str = ""
    reasoning_parts: tuple[ReasoningPart, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolMessage:
    """The result of the call ``tool_call_id``, as text for the model.
    ``is_error`` marks a failed call (the text says why)."""

    tool_call_id: str
    content: str
    is_error: bool = False
    tool_name: str | None = None


ModelMessage: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolMessage


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model is told about a tool: its name, what it is for, and
    the JSON Schema of its arguments (an object schema)."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ModelOptions:
    """Per-call options. ``extra`` goes into the provider's request as it
    is (provider-specific fields such as ``max_completion_tokens``)."""

    temperature: float | None = None
    max_tokens: int | None = None
    tool_choice: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
