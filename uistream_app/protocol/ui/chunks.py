"""The ai@7 UI message chunk vocabulary, written down once.

A chunk *is* its wire object: a ``dict`` with a ``type`` tag and the SDK's
camelCase keys, typed here as ``TypedDict``\\ s. Deliberate divergence from
the house rule that chunks are frozen dataclasses: the canonical log, the
renderers, the recorder and the database all want exactly this JSON object,
and a dataclass per chunk would cost a construction plus a ``to_wire`` copy
per chunk on the hot path, which alone is more than the whole budget the
benchmark gives the encoder (see ``docs/benchmarks.md``).

Every producer of chunks keeps the chunk wire rules of docs/protocols.md
(absent, never ``None``; only the listed fields). ``CHUNK_FIELDS`` is the
table the renderers' downgrade rules and ``validate_chunk`` read; the
``TypedDict``\\ s are the same table for mypy.
"""

from __future__ import annotations

from typing import Any, Final, Literal, NotRequired, TypeAlias, TypedDict

__all__ = [
    "CHUNK_FIELDS",
    "DATA_PREFIX",
    "TERMINAL_CHUNKS",
    "Chunk",
    "ChunkFormatError",
    "is_data_type",
    "validate_chunk",
]

ProviderMetadata: TypeAlias = dict[str, dict[str, Any]]


class StartChunk(TypedDict):
    type: Literal["start"]
    messageId: NotRequired[str]
    messageMetadata: NotRequired[Any]


class FinishChunk(TypedDict):
    type: Literal["finish"]
    finishReason: NotRequired[str]
    messageMetadata: NotRequired[Any]


class AbortChunk(TypedDict):
    type: Literal["abort"]
    reason: NotRequired[str]


class MessageMetadataChunk(TypedDict):
    type: Literal["message-metadata"]
    messageMetadata: Any


class ErrorChunk(TypedDict):
    type: Literal["error"]
    errorText: str


class StepChunk(TypedDict):
    type: Literal["start-step", "finish-step", "reset-step"]


class PartStartEndChunk(TypedDict):
    type: Literal["text-start", "text-end", "reasoning-start", "reasoning-end"]
    id: str
    providerMetadata: NotRequired[ProviderMetadata]
    citations: NotRequired[list[Any]]


class PartDeltaChunk(TypedDict):
    type: Literal["text-delta", "reasoning-delta"]
    id: str
    delta: str
    providerMetadata: NotRequired[ProviderMetadata]


class ToolInputStartChunk(TypedDict):
    type: Literal["tool-input-start"]
    toolCallId: str
    toolName: str
    inputEncoding: NotRequired[str]
    providerExecuted: NotRequired[bool]
    providerMetadata: NotRequired[ProviderMetadata]
    toolMetadata: NotRequired[dict[str, Any]]
    dynamic: NotRequired[bool]
    title: NotRequired[str]


class ToolInputDeltaChunk(TypedDict):
    type: Literal["tool-input-delta"]
    toolCallId: str
    inputTextDelta: str


class ToolInputAvailableChunk(TypedDict):
    type: Literal["tool-input-available", "tool-input-error"]
    toolCallId: str
    toolName: str
    input: Any
    errorText: NotRequired[str]
    providerExecuted: NotRequired[bool]
    providerMetadata: NotRequired[ProviderMetadata]
    toolMetadata: NotRequired[dict[str, Any]]
    dynamic: NotRequired[bool]
    title: NotRequired[str]


class ToolApprovalRequestChunk(TypedDict):
    type: Literal["tool-approval-request"]
    approvalId: str
    toolCallId: str
    reason: NotRequired[str]
    isAutomatic: NotRequired[bool]


class ToolApprovalResponseChunk(TypedDict):
    type: Literal["tool-approval-response"]
    approvalId: str
    approved: bool
    reason: NotRequired[str]


class ToolOutputChunk(TypedDict):
    type: Literal["tool-output-available", "tool-output-error", "tool-output-denied"]
    toolCallId: str
    output: NotRequired[Any]
    errorText: NotRequired[str]
    preliminary: NotRequired[bool]
    providerExecuted: NotRequired[bool]
    providerMetadata: NotRequired[ProviderMetadata]
    toolMetadata: NotRequired[dict[str, Any]]
    dynamic: NotRequired[bool]


class SourceChunk(TypedDict):
    type: Literal["source-url", "source-document"]
    sourceId: str
    url: NotRequired[str]
    mediaType: NotRequired[str]
    title: NotRequired[str]
    filename: NotRequired[str]
    providerMetadata: NotRequired[ProviderMetadata]


class FileChunk(TypedDict):
    type: Literal["file", "reasoning-file"]
    url: str
    mediaType: str
    providerMetadata: NotRequired[ProviderMetadata]


class CustomChunk(TypedDict):
    type: Literal["custom"]
    kind: str
    providerMetadata: NotRequired[ProviderMetadata]


class DataChunk(TypedDict):
    # ``data-NAME``: mypy cannot spell a prefixed literal, so ``str``.
    type: str
    data: Any
    id: NotRequired[str]
    transient: NotRequired[bool]


#: Every chunk is one of these (``dict`` at run time).
Chunk: TypeAlias = dict[str, Any]

DATA_PREFIX: Final = "data-"
#: The chunks that end a run's stream: after any other, it was cut short.
TERMINAL_CHUNKS: Final = frozenset(("finish", "error", "abort"))

_PM = "providerMetadata"
_TOOL_OPT = ("providerExecuted", _PM, "toolMetadata", "dynamic", "title")

#: type → (required fields, optional fields), read off ai@7.0.173's
#: ``uiMessageChunkSchema`` (src/ui-message-stream/ui-message-chunks.ts).
#: ``data-*`` chunks are under ``"data-*"``.
CHUNK_FIELDS: Final[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "start": ((), ("messageId", "messageMetadata")),
    "finish": ((), ("finishReason", "messageMetadata")),
    "abort": ((), ("reason",)),
    "message-metadata": (("messageMetadata",), ()),
    "error": (("errorText",), ()),
    "start-step": ((), ()),
    "finish-step": ((), ()),
    "reset-step": ((), ()),
    "text-start": (("id",), (_PM,)),
    "text-delta": (("id", "delta"), (_PM,)),
    "text-end": (("id",), ("citations", _PM)),
    "reasoning-start": (("id",), (_PM,)),
    "reasoning-delta": (("id", "delta"), (_PM,)),
    "reasoning-end": (("id",), (_PM,)),
    "tool-input-start": (("toolCallId", "toolName"), ("inputEncoding", *_TOOL_OPT)),
    "tool-input-delta": (("toolCallId", "inputTextDelta"), ()),
    "tool-input-available": (("toolCallId", "toolName", "input"), _TOOL_OPT),
    "tool-input-error": (("toolCallId", "toolName", "input", "errorText"), _TOOL_OPT),
    "tool-approval-request": (
        ("approvalId", "toolCallId"),
        ("approvalDescriptor", "inputSchemaInput", "reason", "isAutomatic", "signature"),
    ),
    "tool-approval-response": (
        ("approvalId", "approved"),
        ("reason", "providerExecuted", _PM),
    ),
    "tool-output-available": (
        ("toolCallId", "output"),
        ("providerExecuted", _PM, "toolMetadata", "dynamic", "preliminary"),
    ),
    "tool-output-error": (
        ("toolCallId", "errorText"),
        ("providerExecuted", _PM, "toolMetadata", "dynamic"),
    ),
    "tool-output-denied": (("toolCallId",), ()),
    "source-url": (("sourceId", "url"), ("title", _PM)),
    "source-document": (("sourceId", "mediaType", "title"), ("filename", _PM)),
    "file": (("url", "mediaType"), (_PM,)),
    "reasoning-file": (("url", "mediaType"), (_PM,)),
    "custom": (("kind",), (_PM,)),
    "steering-message": (("id", "parts"), ()),
    "data-*": (("data",), ("id", "transient")),
}

# Field value types checked by ``validate_chunk`` (everything else: any JSON).
_STR_FIELDS: Final = frozenset(
    (
        "messageId",
        "finishReason",
        "reason",
        "errorText",
        "id",
        "delta",
        "toolCallId",
        "toolName",
        "inputTextDelta",
        "approvalId",
        "sourceId",
        "url",
        "title",
        "mediaType",
        "filename",
        "kind",
        "inputEncoding",
        "signature",
    )
)
_BOOL_FIELDS: Final = frozenset(("providerExecuted", "dynamic", "preliminary", "transient", "isAutomatic", "approved"))
_FINISH_REASONS: Final = frozenset(("stop", "length", "content-filter", "tool-calls", "error", "interrupted", "other"))


class ChunkFormatError(ValueError):
    """An object that is not a valid ai@7 chunk (what the SDK's schema would
    reject)."""


def is_data_type(chunk_type: str) -> bool:
    return chunk_type.startswith(DATA_PREFIX) and len(chunk_type) > len(DATA_PREFIX)


def validate_chunk(obj: Any) -> Chunk:
    """Check ``obj`` against the ai@7 chunk schema and return it.

    Strict where the SDK's schema is strict (required fields, field types,
    the finish reasons) and, like ai@7's loose objects, silent about extra
    keys. Raises ``ChunkFormatError`` naming the chunk type and field.
    """
    if not isinstance(obj, dict):
        raise ChunkFormatError(f"a chunk is a JSON object, not {type(obj).__name__}")
    chunk_type = obj.get("type")
    if not isinstance(chunk_type, str):
        raise ChunkFormatError("a chunk needs a string 'type'")
    key = "data-*" if is_data_type(chunk_type) else chunk_type
    spec = CHUNK_FIELDS.get(key)
    if spec is None:
        raise ChunkFormatError(f"unknown chunk type {chunk_type!r}")
    required, optional = spec
    for name in required:
        if name not in obj:
            raise ChunkFormatError(f"{chunk_type}: missing required field {name!r}")
    for name in (*required, *optional):
        if name not in obj:
            continue
        value = obj[name]
        if name in _STR_FIELDS and not isinstance(value, str):
            raise ChunkFormatError(f"{chunk_type}: {name!r} must be a string")
        if name in _BOOL_FIELDS and not isinstance(value, bool):
            raise ChunkFormatError(f"{chunk_type}: {name!r} must be a boolean")
        if name in (_PM, "toolMetadata") and not isinstance(value, dict):
            raise ChunkFormatError(f"{chunk_type}: {name!r} must be an object")
    if chunk_type == "finish" and "finishReason" in obj and obj["finishReason"] not in _FINISH_REASONS:
        raise ChunkFormatError(f"finish: unknown finishReason {obj['finishReason']!r}")
    return obj
