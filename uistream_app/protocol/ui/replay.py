"""``replay_message``: a stored assistant ``UIMessage`` back into ai@7 chunks.

The inverse of ``UIMessageReader``: feeding the chunks to the reader (or to
the SDK's ``processUIMessageStream``) from a fresh state rebuilds a message
equal to the stored one, for every part the reader produces. The output is
deterministic and valid under ``chunks.validate_chunk``. Its rules, and
what cannot round-trip, are the replay rules of docs/protocols.md ("rule N"
in this module means replay rule N there).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, ClassVar, Final

from .chunks import Chunk
from .parts import is_tool_type
from .reader import parse_partial_json

__all__ = ["MessageReplayError", "replay_message"]


class MessageReplayError(ValueError):
    """A message that cannot be replayed: not an assistant message, or a part
    the chunk vocabulary has no words for."""


_SIMPLE_PARTS: Final[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    # part type -> (required keys, optional keys), read off the chunk schema
    "source-url": (("sourceId", "url"), ("title", "providerMetadata")),
    "source-document": (("sourceId", "mediaType", "title"), ("filename", "providerMetadata")),
    "file": (("url", "mediaType"), ("providerMetadata",)),
    "reasoning-file": (("url", "mediaType"), ("providerMetadata",)),
    "custom": (("kind",), ("providerMetadata",)),
    "steering-message": (("id", "parts"), ()),
}


def _put(chunk: Chunk, key: str, value: Any) -> None:
    # Rule 7: optional fields are left out rather than null.
    if value is not None:
        chunk[key] = value


def _json_text(value: Any) -> str | None:
    """``value`` as compact JSON text the SDK's parser returns unchanged, or
    ``None`` when there is no such text."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return None
    parsed, state = parse_partial_json(text)
    return text if state == "successful-parse" and parsed == value else None


def _tool_chunks(part: dict[str, Any]) -> list[Chunk]:
    """Rule 5."""
    return _ToolPartReplay(part).chunks()


class _ToolPartReplay:
    """Rule 5 for one tool part: its ``tool-input-start``, then the chunks
    its state needs, one method per state."""

    __slots__ = ("call_id", "dynamic", "has_input", "name", "out", "part")

    def __init__(self, part: dict[str, Any]) -> None:
        self.part = part
        self.dynamic = part["type"] == "dynamic-tool"
        self.name = part.get("toolName") if self.dynamic else part["type"][len("tool-") :]
        self.call_id = part.get("toolCallId")
        self.has_input = "input" in part
        self.out: list[Chunk] = []

    def chunks(self) -> list[Chunk]:
        state = self.part.get("state")
        by_state = self._BY_STATE.get(state) if isinstance(state, str) else None
        if by_state is None:
            raise MessageReplayError(f"tool part {self.call_id!r} has an unknown state {state!r}")
        self._start(state)
        by_state(self)
        return self.out

    # -- pieces several states share ------------------------------------------------

    def _start(self, state: object) -> None:
        part = self.part
        start: Chunk = {"type": "tool-input-start", "toolCallId": self.call_id, "toolName": self.name}
        if state not in ("output-available", "output-error"):
            # Those states always drop it; elsewhere a later update drops it too.
            _put(start, "inputEncoding", part.get("inputEncoding"))
        _put(start, "providerExecuted", part.get("providerExecuted"))
        _put(start, "providerMetadata", part.get("callProviderMetadata"))
        _put(start, "toolMetadata", part.get("toolMetadata"))
        if self.dynamic:
            start["dynamic"] = True
        _put(start, "title", part.get("title"))
        self.out.append(start)

    def _delta(self, text: str) -> None:
        self.out.append({"type": "tool-input-delta", "toolCallId": self.call_id, "inputTextDelta": text})

    def _available(self, *, then_settled: bool = False) -> None:
        """The input. ``then_settled``: a later approval or denial chunk sets
        the state, so the input may arrive by whichever chunk also rebuilds
        what an odd history left on the part."""
        part = self.part
        raw = part.get("rawInput")
        if then_settled:
            if "errorText" in part and self.has_input:
                # Reached through tool-input-error; approvals and denials
                # leave its fields in place.
                failed: Chunk = {"type": "tool-input-error", "toolCallId": self.call_id, "toolName": self.name}
                failed["input"] = part["input"]
                failed["errorText"] = part["errorText"]
                _put(failed, "providerMetadata", part.get("resultProviderMetadata"))
                self.out.append(failed)
                return
            if isinstance(raw, str) and _parses_to(raw, part):
                self._delta(raw)  # approved or denied while still streaming
                return
            if not self.has_input:
                return
        chunk: Chunk = {"type": "tool-input-available", "toolCallId": self.call_id, "toolName": self.name}
        chunk["input"] = part.get("input")
        if self.dynamic:
            chunk["dynamic"] = True
        self.out.append(chunk)

    def _approval_chunks(self, with_response: bool) -> None:
        approval = self.part.get("approval")
        if not isinstance(approval, dict) or "id" not in approval:
            return
        request: Chunk = {"type": "tool-approval-request", "approvalId": approval["id"], "toolCallId": self.call_id}
        _put(request, "approvalDescriptor", approval.get("descriptor"))
        if "inputSchemaInput" in approval:
            request["inputSchemaInput"] = approval["inputSchemaInput"]
        _put(request, "reason", approval.get("requestReason"))
        if approval.get("isAutomatic") is True:
            request["isAutomatic"] = True
        _put(request, "signature", approval.get("signature"))
        self.out.append(request)
        if with_response and "approved" in approval:
            response: Chunk = {
                "type": "tool-approval-response",
                "approvalId": approval["id"],
                "approved": approval["approved"],
            }
            _put(response, "reason", approval.get("reason"))
            self.out.append(response)

    def _result_chunk(self, chunk_type: str) -> Chunk:
        chunk: Chunk = {"type": chunk_type, "toolCallId": self.call_id}
        if self.dynamic and chunk_type != "tool-output-denied":  # denial has no such field
            chunk["dynamic"] = True
        return chunk

    # -- one method per state ----------------------------------------------------------

    def _input_streaming(self) -> None:
        raw = self.part.get("rawInput")
        if isinstance(raw, str):
            self._delta(raw)

    def _input_available(self) -> None:
        self._available()

    def _approval_requested(self) -> None:
        self._available(then_settled=True)
        self._approval_chunks(with_response=False)

    def _approval_responded(self) -> None:
        self._available(then_settled=True)
        self._approval_chunks(with_response=True)

    def _output_denied(self) -> None:
        self._available(then_settled=True)
        self._approval_chunks(with_response=True)
        self.out.append(self._result_chunk("tool-output-denied"))

    def _output_available(self) -> None:
        part = self.part
        text = _json_text(part["input"]) if self.has_input else None
        if text is not None:
            self._delta(text)
        elif self.has_input:
            self._available()
        self._approval_chunks(with_response=True)
        chunk = self._result_chunk("tool-output-available")
        chunk["output"] = part.get("output")
        _put(chunk, "preliminary", part.get("preliminary"))
        _put(chunk, "providerMetadata", part.get("resultProviderMetadata"))
        self.out.append(chunk)

    def _output_error(self) -> None:
        part = self.part
        raw = part.get("rawInput")
        keeps_raw = not self.dynamic and isinstance(raw, str) and _parses_to(raw, part)
        if keeps_raw and isinstance(raw, str):
            self._delta(raw)
        self._approval_chunks(with_response=True)
        if keeps_raw or not self.has_input:
            chunk = self._result_chunk("tool-output-error")
        else:
            chunk = {"type": "tool-input-error", "toolCallId": self.call_id, "toolName": self.name}
            chunk["input"] = part["input"]
            if self.dynamic:
                chunk["dynamic"] = True
        chunk["errorText"] = part.get("errorText")
        _put(chunk, "providerMetadata", part.get("resultProviderMetadata"))
        self.out.append(chunk)

    _BY_STATE: ClassVar[dict[str, Callable[[_ToolPartReplay], None]]] = {
        "input-streaming": _input_streaming,
        "input-available": _input_available,
        "approval-requested": _approval_requested,
        "approval-responded": _approval_responded,
        "output-denied": _output_denied,
        "output-available": _output_available,
        "output-error": _output_error,
    }


def _parses_to(raw: str, part: dict[str, Any]) -> bool:
    """Whether streaming ``raw`` rebuilds the part's ``input`` (or its lack of
    one)."""
    value, state = parse_partial_json(raw)
    if state == "failed-parse":
        return "input" not in part
    return "input" in part and value == part["input"]


def replay_message(message: dict[str, Any], *, finish_reason: str | None = None) -> list[Chunk]:
    """The chunks that rebuild ``message``, from ``start`` to ``finish``.
    Raises ``MessageReplayError`` for a part it cannot express."""
    if not isinstance(message, dict) or message.get("role") != "assistant":
        raise MessageReplayError("only an assistant message can be replayed")
    start: Chunk = {"type": "start", "messageId": message.get("id")}
    _put(start, "messageMetadata", message.get("metadata"))
    out: list[Chunk] = [start]
    counts = {"text": 0, "reasoning": 0}
    in_step = False
    for index, part in enumerate(message.get("parts") or ()):
        part_type = part.get("type") if isinstance(part, dict) else None
        if not isinstance(part_type, str):
            raise MessageReplayError(f"part {index} has no string 'type'")
        if part_type == "step-start":
            if in_step:
                out.append({"type": "finish-step"})
            out.append({"type": "start-step"})
            in_step = True
        elif part_type in ("text", "reasoning"):
            out.extend(_text_chunks(part_type, part, counts))
        elif is_tool_type(part_type):
            out.extend(_tool_chunks(part))
        elif part_type.startswith("data-"):
            chunk = dict(part)
            if chunk.get("transient") is True:
                del chunk["transient"]
            chunk.setdefault("data", None)
            out.append(chunk)
        elif part_type in _SIMPLE_PARTS:
            required, optional = _SIMPLE_PARTS[part_type]
            chunk = {"type": part_type}
            for key in required:
                chunk[key] = part.get(key)
            for key in optional:
                _put(chunk, key, part.get(key))
            out.append(chunk)
        else:
            raise MessageReplayError(f"part {index} has a type no chunk can rebuild: {part_type!r}")
    if in_step:
        out.append({"type": "finish-step"})
    finish: Chunk = {"type": "finish"}
    _put(finish, "finishReason", finish_reason)
    out.append(finish)
    return out


def _text_chunks(kind: str, part: dict[str, Any], counts: dict[str, int]) -> list[Chunk]:
    """Rules 3 and 4."""
    number = counts[kind]
    counts[kind] = number + 1
    own_id = part.get("id") if kind == "reasoning" else None
    part_id = own_id if isinstance(own_id, str) else f"{kind}-{number}"
    text = part.get("text")
    if not isinstance(text, str):
        raise MessageReplayError(f"{kind} part {part_id!r} has no string 'text'")
    done = part.get("state") != "streaming"
    start: Chunk = {"type": f"{kind}-start", "id": part_id}
    if not done:
        _put(start, "providerMetadata", part.get("providerMetadata"))
    out = [start]
    if text:
        out.append({"type": f"{kind}-delta", "id": part_id, "delta": text})
    if done:
        end: Chunk = {"type": f"{kind}-end", "id": part_id}
        if kind == "text":
            _put(end, "citations", part.get("citations"))
        _put(end, "providerMetadata", part.get("providerMetadata"))
        out.append(end)
    return out
