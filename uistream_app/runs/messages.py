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
    "AssistantPart",
    "CustomPart",
    "FilePart",
    "ModelMessage",
    "ModelOptions",
    "ProviderApproval",
    "ProviderToolCall",
    "ProviderToolResult",
    "ReasoningPart",
    "SystemMessage",
    "TextPart",
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
    exactly as the model sent it (usually a JSON object);
    ``provider_metadata`` what the provider said of the call (Anthropic's
    ``caller``, a Responses item id), sent back with it."""

    id: str
    name: str
    arguments: str
    provider_metadata: Mapping[str, Any] = field(default_factory=dict)


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
class TextPart:
    """One text part of a step with the provider metadata it ended with
    (a Responses message's ``itemId``, Anthropic's raw ``citations``)."""

    text: str
    provider_metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ProviderApproval:
    """A person's decision on a provider-executed call that asked for
    approval (a remote MCP tool of the Responses API)."""

    approval_id: str
    approved: bool
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class ProviderToolCall:
    """A call the provider ran itself (web search, code execution, a remote
    MCP tool). ``input`` is the JSON value the stream gave it;
    ``provider_metadata`` the call's (``callProviderMetadata``);
    ``approval`` the person's answer when the call asked for one."""

    id: str
    name: str
    input: Any
    provider_metadata: Mapping[str, Any] = field(default_factory=dict)
    dynamic: bool = False
    approval: ProviderApproval | None = None


@dataclass(frozen=True, slots=True)
class ProviderToolResult:
    """The result of a ``ProviderToolCall``, as the stream gave it
    (``output`` a JSON value; ``is_error`` for a failed call)."""

    tool_call_id: str
    name: str
    output: Any
    is_error: bool = False
    provider_metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CustomPart:
    """A provider's own part (ai@7's ``custom``), by ``kind``."""

    kind: str
    provider_metadata: Mapping[str, Any] = field(default_factory=dict)


#: One piece of a step in the order the model produced it.
AssistantPart: TypeAlias = (
    TextPart | ReasoningPart | ToolCallRequest | ProviderToolCall | ProviderToolResult | CustomPart
)


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """One model call's output: its text, its reasoning (kept for the
    record; chat-completions servers are not sent it back) and its tool
    calls. ``reasoning_parts`` are the reasoning parts that came with
    provider metadata, in order: what the native providers send back
    (Anthropic thinking with its signature, Responses reasoning items).

    ``parts``: the whole step in order, as the AI SDK's assistant content
    holds it: text parts with their provider metadata, reasoning parts,
    the loop's tool calls, and what only the provider understands (the
    calls it ran and their results, its custom parts). The native
    providers send it back in their API's form when it is set; empty (a
    message built by hand, or by code that predates it), they read the
    fields above."""

    content: str = ""
    tool_calls: tuple[ToolCallRequest, ...] = ()
    reasoning: str = ""
    reasoning_parts: tuple[ReasoningPart, ...] = ()
    # Not compared: it restates the fields above in order, with the
    # provider's own items; two messages are equal when a model that reads
    # the fields reads the same (tests that mean the parts compare them).
    parts: tuple[AssistantPart, ...] = field(default=(), compare=False)


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
