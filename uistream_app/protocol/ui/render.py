"""Canonical UI message chunks → the SSE bytes an ai@7, ai@6 or ai@5 client reads.

The canonical log speaks ai@7 (``chunks.CHUNK_FIELDS``). An ai@7 client gets
it as it is; older clients get it through ``downgrade``, which drops or maps
what their chunk schema or ``processUIMessageStream`` would reject or
misread. The renderer is pure: chunks in, bytes out, no I/O; a chunk is
copied only when it must change, and the input is never mutated.

Invariant: a rendered stream holds only chunk types and keys that the target
client's schema lists, so even the strict releases accept every event. The
rules that keep it are the downgrade rules of docs/protocols.md ("rule N"
in this module means downgrade rule N there); the framing is SSE rules 1-4.
What orjson refuses (an integer beyond 64 bits, a lone surrogate, a
non-string key) takes a slower path that still writes valid JSON; a value
no JSON can hold raises ``TypeError``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Container, Iterable
from enum import Enum
from typing import Any, Final, TypeAlias

import orjson

from ..sse import DONE_FRAME
from .chunks import CHUNK_FIELDS, DATA_PREFIX, Chunk

__all__ = [
    "DENIED_ERROR_TEXT",
    "SUPPORTED_SDK_VERSIONS",
    "UIStreamRenderer",
    "chunk_json",
    "downgrade",
]

SUPPORTED_SDK_VERSIONS: Final = (5, 6, 7)

#: What an ai@5 client shows for a denied tool call (rule 13).
DENIED_ERROR_TEXT: Final = "Tool call execution denied."

_dumps = orjson.dumps
_PM = "providerMetadata"

# -- what each older client's schema lists (type → keys besides ``type``) ----

_SHARED: Final[dict[str, tuple[str, ...]]] = {
    "start": ("messageId", "messageMetadata"),
    "finish": ("finishReason", "messageMetadata"),
    "message-metadata": ("messageMetadata",),
    "error": ("errorText",),
    "start-step": (),
    "finish-step": (),
    "text-start": ("id", _PM),
    "text-delta": ("id", "delta", _PM),
    "text-end": ("id", _PM),
    "reasoning-start": ("id", _PM),
    "reasoning-delta": ("id", "delta", _PM),
    "reasoning-end": ("id", _PM),
    "tool-input-delta": ("toolCallId", "inputTextDelta"),
    "source-url": ("sourceId", "url", "title", _PM),
    "source-document": ("sourceId", "mediaType", "title", "filename", _PM),
    "file": ("url", "mediaType", _PM),
}
_V6_TOOL: Final = ("providerExecuted", _PM, "toolMetadata", "dynamic", "title")
_V6_OUTPUT: Final = ("providerExecuted", _PM, "toolMetadata", "dynamic")

#: ai 6.0.325's schema, minus what 6.0.230 (the last strict ai@6) lacks.
_V6_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    **_SHARED,
    "abort": ("reason",),
    "tool-input-start": ("toolCallId", "toolName", *_V6_TOOL),
    "tool-input-available": ("toolCallId", "toolName", "input", *_V6_TOOL),
    "tool-input-error": ("toolCallId", "toolName", "input", "errorText", *_V6_TOOL),
    "tool-approval-request": ("approvalId", "toolCallId", "signature"),
    "tool-output-available": ("toolCallId", "output", "preliminary", *_V6_OUTPUT),
    "tool-output-error": ("toolCallId", "errorText", *_V6_OUTPUT),
    "tool-output-denied": ("toolCallId",),
}

#: ai 5.0.277's schema (5.0.216, the last strict ai@5, lists the same keys).
_V5_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    **_SHARED,
    "abort": (),
    "tool-input-start": ("toolCallId", "toolName", "providerExecuted", "dynamic"),
    "tool-input-available": ("toolCallId", "toolName", "input", "providerExecuted", _PM, "dynamic"),
    "tool-input-error": ("toolCallId", "toolName", "input", "errorText", "providerExecuted", _PM, "dynamic"),
    "tool-output-available": ("toolCallId", "output", "providerExecuted", "dynamic", "preliminary"),
    "tool-output-error": ("toolCallId", "errorText", "providerExecuted", "dynamic"),
}

_FINISH_REASONS: Final[dict[int, frozenset[str]]] = {
    6: frozenset(("stop", "length", "content-filter", "tool-calls", "error", "other")),
    5: frozenset(("stop", "length", "content-filter", "tool-calls", "error", "other", "unknown")),
}
_INTERRUPTED_AS: Final[dict[int, str]] = {6: "other", 5: "unknown"}

# -- the rules, derived once from the tables above ---------------------------


class _Drop(Enum):
    DROP = "drop"


_DROP: Final = _Drop.DROP
_Map: TypeAlias = Callable[[Chunk, Container[str]], "Chunk | None"]
#: drop | keep only these keys | map | (None) pass on as is
_Rule: TypeAlias = "_Drop | frozenset[str] | _Map | None"


def _strip(chunk: Chunk, keep: frozenset[str]) -> Chunk:
    for key in chunk:
        if key not in keep:
            return {k: v for k, v in chunk.items() if k in keep}
    return chunk


def _finish_rule(version: int) -> _Map:
    accepted = _FINISH_REASONS[version]
    interrupted_as = _INTERRUPTED_AS[version]

    def finish(chunk: Chunk, _dynamic: Container[str]) -> Chunk:
        reason = chunk.get("finishReason")
        if reason is None or reason in accepted:
            return chunk
        out = dict(chunk)
        out["finishReason"] = interrupted_as if reason == "interrupted" else "other"
        return out

    return finish


def _v5_tool_output(chunk_type: str) -> _Map:
    keep = frozenset(("type", *_V5_FIELDS[chunk_type]))

    def tool_output(chunk: Chunk, dynamic: Container[str]) -> Chunk:
        out = _strip(chunk, keep)
        if "dynamic" not in out and out.get("toolCallId") in dynamic:
            if out is chunk:
                out = dict(chunk)
            out["dynamic"] = True
        return out

    return tool_output


def _v5_denied(chunk: Chunk, dynamic: Container[str]) -> Chunk:
    call_id = chunk["toolCallId"]
    out: Chunk = {"type": "tool-output-error", "toolCallId": call_id, "errorText": DENIED_ERROR_TEXT}
    if call_id in dynamic:
        out["dynamic"] = True
    return out


def _rules(version: int, fields: dict[str, tuple[str, ...]]) -> dict[str, _Rule]:
    rules: dict[str, _Rule] = {}
    for chunk_type, (required, optional) in CHUNK_FIELDS.items():
        if chunk_type == "data-*":
            continue  # any ``data-NAME``: same keys in every version
        target = fields.get(chunk_type)
        if target is None:
            rules[chunk_type] = _DROP
            continue
        keep = frozenset(("type", *target))
        rules[chunk_type] = None if keep.issuperset((*required, *optional)) else keep
    rules["finish"] = _finish_rule(version)
    if version == 5:
        rules["tool-output-available"] = _v5_tool_output("tool-output-available")
        rules["tool-output-error"] = _v5_tool_output("tool-output-error")
        rules["tool-output-denied"] = _v5_denied
    return rules


_RULES: Final[dict[int, dict[str, _Rule]]] = {6: _rules(6, _V6_FIELDS), 5: _rules(5, _V5_FIELDS)}
_NO_CALLS: Final[frozenset[str]] = frozenset()
#: Chunks that open or restate a tool call (rule 12 remembers the dynamic ones).
_TOOL_INPUT_TYPES: Final = frozenset(("tool-input-start", "tool-input-available", "tool-input-error"))


def _unsupported(sdk_version: object) -> ValueError:
    choices = ", ".join(map(str, SUPPORTED_SDK_VERSIONS))
    return ValueError(f"unsupported AI SDK version {sdk_version!r}; choose one of {choices}")


def _apply(rules: dict[str, _Rule], chunk: Chunk, dynamic: Container[str]) -> Chunk | None:
    chunk_type = chunk["type"]
    rule = rules.get(chunk_type, _DROP)
    if rule is None:
        return chunk
    if rule is _DROP:
        return chunk if chunk_type.startswith(DATA_PREFIX) else None
    if isinstance(rule, frozenset):
        return _strip(chunk, rule)
    return rule(chunk, dynamic)


def downgrade(chunk: Chunk, sdk_version: int, *, dynamic_tool_calls: Container[str] = _NO_CALLS) -> Chunk | None:
    """``chunk`` as the ai@``sdk_version`` client must receive it: the same
    object when nothing changes, a new dict when something does, ``None``
    when the chunk is not sent at all (the downgrade rules).

    ``dynamic_tool_calls`` holds the ids of the calls the stream opened with
    ``dynamic: true``; only ai@5 needs them (rule 12). Raises ``ValueError``
    for a version outside ``SUPPORTED_SDK_VERSIONS``.
    """
    if sdk_version == 7:
        return chunk
    rules = _RULES.get(sdk_version)
    if rules is None:
        raise _unsupported(sdk_version)
    return _apply(rules, chunk, dynamic_tool_calls)


_LONE_SURROGATE: Final = re.compile("[\\ud800-\\udfff]")


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None  # as orjson and JSON.stringify write NaN and infinities
    if value is None or isinstance(value, (str, int, float)):
        return value
    return orjson.loads(_dumps(value))  # what orjson can encode (dates, UUIDs…) or TypeError


def _dumps_lenient(chunk: Chunk) -> bytes:
    """``chunk`` as JSON when orjson refused it (see the module docstring)."""
    text = json.dumps(_jsonable(chunk), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode()


def chunk_json(chunk: Chunk) -> bytes:
    """``chunk``'s JSON as ai@7's SSE event carries it: orjson's, or the
    lenient encoder's for what orjson refuses (the WebSocket's ``chunk``
    frames carry the same bytes)."""
    try:
        return _dumps(chunk)
    except TypeError:
        return _dumps_lenient(chunk)


def _frame(payload: Chunk) -> bytes:
    return b"data: " + chunk_json(payload) + b"\n\n"


class UIStreamRenderer:
    """SSE bytes for one client version, one stream at a time.

    ``render(chunk)`` gives one event (``b""`` when the version drops the
    chunk), ``render_many(chunks)`` the events of several, ``done()`` the
    closing ``data: [DONE]`` event. Make one per stream: for ai@5 it
    remembers which tool calls are dynamic (rule 12).
    """

    __slots__ = ("_dynamic_calls", "_rules", "_track_dynamic", "sdk_version")

    def __init__(self, sdk_version: int = 7) -> None:
        if sdk_version not in SUPPORTED_SDK_VERSIONS:
            raise _unsupported(sdk_version)
        self.sdk_version = sdk_version
        self._rules = _RULES.get(sdk_version)  # None: ai@7, rule 1
        self._track_dynamic = sdk_version == 5
        self._dynamic_calls: set[str] = set()

    def render(self, chunk: Chunk) -> bytes:
        """One chunk as its SSE event for the target client; ``b""`` when the downgrade drops it."""
        if self._rules is None:
            try:
                return b"data: " + _dumps(chunk) + b"\n\n"
            except TypeError:
                return b"data: " + _dumps_lenient(chunk) + b"\n\n"
        out = self._downgrade(chunk)
        return b"" if out is None else _frame(out)

    def render_many(self, chunks: Iterable[Chunk]) -> bytes:
        """``render`` for each chunk, joined (the same bytes, faster)."""
        if not isinstance(chunks, (list, tuple)):
            chunks = list(chunks)
        dynamic_calls = set(self._dynamic_calls) if self._track_dynamic else self._dynamic_calls
        # Each frame is built at once, not by joining the payloads with a
        # separator: orjson's results keep a ~4 KiB buffer each, and holding
        # thousands of them alive costs five times the encoding itself.
        dumps = _dumps
        try:
            if self._rules is None:
                return b"".join([b"data: " + dumps(chunk) + b"\n\n" for chunk in chunks])
            downgraded = map(self._downgrade, chunks)
            return b"".join([b"data: " + dumps(out) + b"\n\n" for out in downgraded if out is not None])
        except TypeError:
            # Something orjson refused: start over, frame by frame.
            self._dynamic_calls = dynamic_calls
            return b"".join([self.render(chunk) for chunk in chunks])

    def done(self) -> bytes:
        """The stream's last event, ``data: [DONE]``."""
        return DONE_FRAME

    def _downgrade(self, chunk: Chunk) -> Chunk | None:
        assert self._rules is not None
        out = _apply(self._rules, chunk, self._dynamic_calls)
        if self._track_dynamic and chunk["type"] in _TOOL_INPUT_TYPES and chunk.get("dynamic") is True:
            self._dynamic_calls.add(chunk["toolCallId"])
        return out
