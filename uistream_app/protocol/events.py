"""The neutral source events: what a source says, before any wire exists.

A source is anything that produces an assistant message: a model stream, a
tool loop (model, tools, model again), a stored turn being replayed, or an
agent written by hand. Each speaks in these frozen dataclasses; the encoder
(``protocol.ui.encoder``) folds them into UI message chunks and keeps the
chunk stream well formed whatever order they arrive in.

The vocabulary, in the order a tool-loop step usually produces it:

* model output: ``ReasoningDelta``/``ReasoningEnd``, ``TextDelta``/``TextEnd``,
  ``ToolCallStart`` → ``ToolCallDelta``… → ``ToolCall`` (the call complete,
  its arguments as the raw text the model sent), ``Usage``, ``Finish``
  (the model call ended, with its reason);
* what the loop adds: ``ToolResult`` (content, is_error; ``preliminary``
  for a streaming tool's progress), ``ToolInputError`` (arguments that did
  not parse or fit), ``ToolApprovalRequest``, ``ToolApprovalResponse`` (an
  approval policy decided on its own), ``ToolDenied``, ``StepFinished``,
  ``SteeringMessage`` (a person's message taken into the run between two
  steps), ``Done`` (the message is over);
* extras any source may carry: ``SourceUrl``, ``SourceDocument``, ``File``,
  ``Data``, ``MessageMetadata``, ``Custom`` (a provider's own part, ai@7's
  ``custom`` chunk).

Provider metadata (``provider_metadata``: ``{provider: {...}}``) rides on
the events ai@7 gives it a place for: ``TextEnd`` (with the text's
``citations``), ``ReasoningEnd``, ``ToolCallStart`` / ``ToolCall`` (the
call's, ``callProviderMetadata``), ``ToolResult`` (the result's,
``resultProviderMetadata``), the sources, ``File`` and ``Custom``. It is
what a provider wants back on the next request (an item id, a signature,
encrypted content, the citations), so it is stored with the part.

A source that fails raises; it does not send an "error event". The stream
adapters (``protocol.ui.stream``) turn the exception into a masked ``error``
chunk and log the detail.

Events serialise to plain JSON objects with ``event_to_dict`` and back with
``event_from_dict``, tagged by ``type`` (the fixtures' ``events.jsonl`` and
any log of a source use that form).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

__all__ = [
    "FINISH_REASONS",
    "Custom",
    "Data",
    "Done",
    "Event",
    "EventFormatError",
    "File",
    "Finish",
    "FinishReason",
    "MessageMetadata",
    "ReasoningDelta",
    "ReasoningEnd",
    "SourceDocument",
    "SourceUrl",
    "SteeringMessage",
    "StepFinished",
    "TextDelta",
    "TextEnd",
    "ToolApprovalRequest",
    "ToolApprovalResponse",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallStart",
    "ToolDenied",
    "ToolInputError",
    "ToolResult",
    "Usage",
    "event_from_dict",
    "event_to_dict",
]

FinishReason: TypeAlias = Literal["stop", "length", "content-filter", "tool-calls", "error", "interrupted", "other"]
#: The finish reasons of the ai@7 vocabulary; anything else a provider says
#: is ``other`` (see ``normalize_finish_reason`` in the encoder).
FINISH_REASONS: Final = frozenset(("stop", "length", "content-filter", "tool-calls", "error", "interrupted", "other"))

JSONValue: TypeAlias = Any
ProviderMetadata: TypeAlias = "dict[str, dict[str, Any]]"


# -- model output -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A run of answer text. Consecutive deltas grow one text part."""

    text: str


@dataclass(frozen=True, slots=True)
class TextEnd:
    """The model closed its text block; the next text opens a new part.
    ``citations``: what the text cites, as ai@7's text-end ``citations``
    (``[{"source": {"type": "source", "sourceType": "url"|"document", …},
    "citedText"?, "startIndex"?, "endIndex"?}]``); ``provider_metadata``
    replaces the part's (the provider's item id, its raw citations)."""

    provider_metadata: ProviderMetadata | None = None
    citations: list[JSONValue] | None = None


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A run of reasoning ("thinking") text."""

    text: str


@dataclass(frozen=True, slots=True)
class ReasoningEnd:
    """The model closed its reasoning block (it may carry a signature)."""

    provider_metadata: ProviderMetadata | None = None


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """The model began a tool call; argument fragments follow."""

    tool_call_id: str
    tool_name: str
    provider_executed: bool | None = None
    dynamic: bool | None = None
    title: str | None = None
    provider_metadata: ProviderMetadata | None = None


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of a started call's argument text (not necessarily valid
    JSON on its own: fragments split anywhere)."""

    tool_call_id: str
    delta: str


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A complete tool call. ``input`` is the argument text exactly as the
    model sent it; the encoder parses it (an unparseable one becomes a
    ``tool-input-error``)."""

    tool_call_id: str
    tool_name: str
    input: str
    provider_executed: bool | None = None
    dynamic: bool | None = None
    title: str | None = None
    provider_metadata: ProviderMetadata | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts for one model call. Not on the UI wire: the encoder
    totals them for the recorder."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_input_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Finish:
    """One model call ended. In a tool loop the message goes on (tools run,
    the model is called again); the reason is remembered for ``finish``."""

    reason: str = "stop"


# -- what a tool loop adds ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool ran. ``content`` that is a string is sent as JSON where it
    parses and as a JSON string where it does not; any other value is sent
    as it is. ``is_error`` makes it a ``tool-output-error`` whose text is
    ``content``. ``preliminary``: a progress value of a tool that streams
    (an async generator, an MCP server's progress notifications); the
    call's final output follows without it."""

    tool_call_id: str
    content: JSONValue
    is_error: bool = False
    tool_name: str | None = None
    preliminary: bool | None = None
    dynamic: bool | None = None
    provider_executed: bool | None = None
    provider_metadata: ProviderMetadata | None = None


@dataclass(frozen=True, slots=True)
class ToolInputError:
    """The call's arguments were not JSON, or did not fit the tool's schema;
    the tool was not run."""

    tool_call_id: str
    tool_name: str
    input: JSONValue
    error_text: str
    dynamic: bool | None = None


@dataclass(frozen=True, slots=True)
class ToolApprovalRequest:
    """The call needs a person's approval before it runs; with
    ``is_automatic`` an approval policy decides it at once (a
    ``ToolApprovalResponse`` follows), as ai@7's ``toolApproval`` does."""

    approval_id: str
    tool_call_id: str
    reason: str | None = None
    is_automatic: bool | None = None


@dataclass(frozen=True, slots=True)
class ToolApprovalResponse:
    """The server's own answer to an approval request: an approval policy
    approved or denied the call (a person's answer comes in the next
    request instead)."""

    approval_id: str
    approved: bool
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class ToolDenied:
    """A person denied the call; it did not run."""

    tool_call_id: str


@dataclass(frozen=True, slots=True)
class StepFinished:
    """The loop's step ``step`` is over (model call plus its tools)."""

    step: int = 0


@dataclass(frozen=True, slots=True)
class SteeringMessage:
    """A user message sent to the run while it ran (steering), taken in at
    a step boundary: the next step's model call sees it. ``parts`` are the
    message's text and file parts (UI parts, as the ``steering-message``
    chunk carries them); ``id`` is the steering message's id."""

    id: str
    parts: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Done:
    """The message is over. ``reason`` overrides the last model ``Finish``
    (a loop that hit its step limit says so here)."""

    reason: str | None = None


# -- extras --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SourceUrl:
    """A web source the answer cites (``source-url``)."""

    source_id: str
    url: str
    title: str | None = None
    provider_metadata: ProviderMetadata | None = None


@dataclass(frozen=True, slots=True)
class SourceDocument:
    """A document the answer cites (``source-document``)."""

    source_id: str
    media_type: str
    title: str
    filename: str | None = None
    provider_metadata: ProviderMetadata | None = None


@dataclass(frozen=True, slots=True)
class File:
    """A file the model produced (``file``), by URL."""

    url: str
    media_type: str
    provider_metadata: ProviderMetadata | None = None


@dataclass(frozen=True, slots=True)
class Data:
    """A ``data-NAME`` part. A later one with the same name and id replaces
    the earlier part's data; a transient one reaches ``onData`` only and is
    never stored."""

    name: str
    data: JSONValue
    id: str | None = None
    transient: bool | None = None


@dataclass(frozen=True, slots=True)
class Custom:
    """A provider's own part (ai@7's ``custom`` chunk and part), named by
    ``kind`` (``"anthropic.message_start"``, ``"openai.compaction"``…);
    what it holds is in ``provider_metadata``."""

    kind: str
    provider_metadata: ProviderMetadata | None = None


@dataclass(frozen=True, slots=True)
class MessageMetadata:
    """Metadata merged into the message's ``metadata``."""

    metadata: JSONValue


Event: TypeAlias = (
    TextDelta
    | TextEnd
    | ReasoningDelta
    | ReasoningEnd
    | ToolCallStart
    | ToolCallDelta
    | ToolCall
    | Usage
    | Finish
    | ToolResult
    | ToolInputError
    | ToolApprovalRequest
    | ToolApprovalResponse
    | ToolDenied
    | StepFinished
    | SteeringMessage
    | Done
    | SourceUrl
    | SourceDocument
    | File
    | Data
    | MessageMetadata
    | Custom
)

_TAGS: Final[dict[type, str]] = {
    TextDelta: "text-delta",
    TextEnd: "text-end",
    ReasoningDelta: "reasoning-delta",
    ReasoningEnd: "reasoning-end",
    ToolCallStart: "tool-call-start",
    ToolCallDelta: "tool-call-delta",
    ToolCall: "tool-call",
    Usage: "usage",
    Finish: "finish",
    ToolResult: "tool-result",
    ToolInputError: "tool-input-error",
    ToolApprovalRequest: "tool-approval-request",
    ToolApprovalResponse: "tool-approval-response",
    ToolDenied: "tool-denied",
    StepFinished: "step-finished",
    SteeringMessage: "steering-message",
    Done: "done",
    SourceUrl: "source-url",
    SourceDocument: "source-document",
    File: "file",
    Data: "data",
    MessageMetadata: "message-metadata",
    Custom: "custom",
}
_BY_TAG: Final[dict[str, type]] = {tag: cls for cls, tag in _TAGS.items()}
_FIELDS: Final[dict[type, tuple[str, ...]]] = {cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in _TAGS}


def event_to_dict(event: Event) -> dict[str, Any]:
    """The event as a JSON object: ``type`` first, fields that hold their
    default (``None``) left out."""
    out: dict[str, Any] = {"type": _TAGS[type(event)]}
    for name in _FIELDS[type(event)]:
        value = getattr(event, name)
        if value is not None:
            out[name] = value
    return out


class EventFormatError(ValueError):
    """A JSON object that is not a source event."""


def event_from_dict(obj: dict[str, Any]) -> Event:
    """The event ``event_to_dict`` made. Raises ``EventFormatError`` naming
    the problem for an unknown type or unknown or missing fields."""
    if not isinstance(obj, dict):
        raise EventFormatError(f"an event is a JSON object, not {type(obj).__name__}")
    tag = obj.get("type")
    cls = _BY_TAG.get(tag) if isinstance(tag, str) else None
    if cls is None:
        raise EventFormatError(f"unknown event type {tag!r}")
    fields = {k: v for k, v in obj.items() if k != "type"}
    unknown = set(fields) - set(_FIELDS[cls])
    if unknown:
        raise EventFormatError(f"{tag}: unknown fields {sorted(unknown)}")
    try:
        event: Event = cls(**fields)
    except TypeError as exc:
        raise EventFormatError(f"{tag}: {exc}") from None
    return event
