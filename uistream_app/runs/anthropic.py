"""The Anthropic Messages API as a model, over ``httpx``.

Speaks ``POST {base_url}/messages`` with ``stream: true`` (``base_url`` is
the API root the official SDK uses, ending in ``/v1``) and reads the stream
the way ``@ai-sdk/anthropic`` does, into the model port's events
(``runs.model``) plus the results and sources of the tools Anthropic runs
itself (all ``runs.model.ModelEvent``).

The rules of the stream reader (``_Reader``), in the order events arrive:

1. ``message_start`` opens the message: input usage (cache reads and
   writes counted into input, as the AI SDK does) and tool calls that
   arrive already complete in its ``content`` (programmatic tool calling).
   A second ``message_start`` with the same id is ignored; one with
   another id while the first is open is an error (a spliced stream).
2. ``content_block_start`` opens block ``index``: ``text`` and
   ``compaction`` (a summary, shown as text) → text; ``thinking`` →
   reasoning; ``redacted_thinking`` → an empty reasoning part whose
   provider metadata keeps the data; ``tool_use`` → a client tool call;
   ``server_tool_use`` and ``mcp_tool_use`` → a provider-executed call
   (``text_editor_code_execution`` and ``bash_code_execution`` are shown
   as ``code_execution`` with the sub-tool as the input's ``type``);
   ``*_tool_result`` → a provider-executed ``ToolResult`` (web search
   results also become ``SourceUrl`` events).
3. ``content_block_delta``: text, thinking, the thinking ``signature``
   (kept for ``ReasoningEnd``'s provider metadata), tool input JSON
   fragments, compaction text, citations (kept for the text's
   ``TextEnd``: ai@7's ``citations`` and the raw ones in its provider
   metadata). A web-search citation is a source of its own only when the
   response holds no search results (as ``@ai-sdk/anthropic`` 4.0.105
   has it); a document citation is not one (it needs the prompt's
   documents, which the model port does not carry).
4. ``content_block_stop`` closes the block: ``TextEnd``, ``ReasoningEnd``
   with ``{"anthropic": {"signature"|"redactedData"}}``, or the complete
   ``ToolCall`` (empty input is ``{}``).
5. ``message_delta`` replaces the output usage (and input, cache and
   ``iterations`` when given) and sets the stop reason; ``message_stop``
   yields ``Usage`` and ``Finish``. ``ping`` is ignored.
6. An ``error`` event is ``ModelResponseError`` (``overloaded_error`` is
   retryable: before any event was yielded the request is sent again);
   the body ending without ``message_stop`` after a message began is
   ``Finish("interrupted")``, as the AI SDK reports it, with no usage.

Stop reasons map as the AI SDK maps them (``end_turn``, ``stop_sequence``,
``pause_turn`` → ``stop``; ``tool_use`` → ``tool-calls``; ``max_tokens``
and ``model_context_window_exceeded`` → ``length``; ``refusal`` →
``content-filter``; anything else → ``other``).

History goes out in the API's form: system messages in ``system``, tool
results as ``tool_result`` blocks of a user message (consecutive messages
of one role merged), and an assistant step's thinking blocks *with their
signatures* first, as the API requires when a tool loop continues with
thinking on. They come from the step's ``reasoning_parts`` (the
signature and redacted data kept in the stored parts' provider metadata,
so a conversation reloaded in another process sends them too); a step
without them falls back on the blocks this process streamed
(``runs._memory``: a bounded memory keyed by the step's tool call ids);
else it goes out without its reasoning (unsigned thinking is rejected by
the API). A step with ordered ``parts`` goes out as ``@ai-sdk/anthropic``
writes it (``_step_blocks``): cited text, thinking, ``tool_use``, and the
server tools Anthropic ran (``server_tool_use`` / ``mcp_tool_use``) with
their result blocks, each with its ``caller``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Unpack

import httpx

from ..protocol.events import (
    Custom,
    Finish,
    ReasoningDelta,
    ReasoningEnd,
    SourceUrl,
    TextDelta,
    TextEnd,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolResult,
    Usage,
)
from ._files import b64, file_bytes, is_image, is_pdf
from ._http import HTTPModelBase, HTTPOptions, json_object, sse_events
from ._memory import ReplayMemory
from .failures import ModelResponseError, UnsupportedFileError
from .messages import (
    AssistantMessage,
    CustomPart,
    ModelMessage,
    ProviderToolCall,
    ProviderToolResult,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCallRequest,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from .model import ModelEvent

__all__ = ["ANTHROPIC_VERSION", "STOP_REASON_MAP", "AnthropicModel", "map_stop_reason"]

ANTHROPIC_VERSION: Final = "2023-06-01"

STOP_REASON_MAP: Final[Mapping[str, str]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool-calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content-filter",
}

#: Server tools whose name the AI SDK rewrites, and the input ``type`` it adds.
_CODE_EXECUTION_SUBTOOLS: Final = frozenset(("text_editor_code_execution", "bash_code_execution"))
_SERVER_TOOL_RESULTS: Final[Mapping[str, str]] = {
    "web_search_tool_result": "web_search",
    "web_fetch_tool_result": "web_fetch",
    "code_execution_tool_result": "code_execution",
    "bash_code_execution_tool_result": "code_execution",
    "text_editor_code_execution_tool_result": "code_execution",
    "advisor_tool_result": "advisor",
}


def map_stop_reason(reason: str | None) -> str:
    """An Anthropic ``stop_reason`` in the UI vocabulary."""
    return STOP_REASON_MAP.get(reason or "", "other")


_MEMORY = ReplayMemory()


class AnthropicModel(HTTPModelBase):
    """An Anthropic Messages model (see the module docstring).

    ``max_tokens`` is required by the API (``ModelOptions.max_tokens``
    overrides it per call); ``thinking`` is sent as given (e.g.
    ``{"type": "enabled", "budget_tokens": 2048}``); ``betas`` become the
    ``anthropic-beta`` header.
    """

    path = "/messages"
    default_base_url = "https://api.anthropic.com/v1"

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int = 4096,
        thinking: Mapping[str, Any] | None = None,
        betas: Sequence[str] = (),
        version: str = ANTHROPIC_VERSION,
        **options: Unpack[HTTPOptions],
    ) -> None:
        super().__init__(model, **options)
        self.max_tokens = max_tokens
        self.thinking = dict(thinking) if thinking is not None else None
        self.betas = tuple(betas)
        self.version = version
        self.memory = _MEMORY

    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": self.version}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        if self.betas:
            headers["anthropic-beta"] = ",".join(self.betas)
        return headers

    def tool_choice_to_wire(self, choice: str) -> dict[str, str]:
        return _tool_choice(choice)

    # -- request ---------------------------------------------------------------

    def api_body(self, messages: Sequence[ModelMessage], tools: Sequence[ToolSpec]) -> dict[str, Any]:
        system, wire = self.messages_to_wire(messages)
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "messages": wire, "stream": True}
        if system:
            body["system"] = system
        if self.thinking is not None:
            body["thinking"] = dict(self.thinking)
        if tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)} for t in tools
            ]
        return body

    def messages_to_wire(self, messages: Sequence[ModelMessage]) -> tuple[str, list[dict[str, Any]]]:
        """The system text and the ``messages`` list: one role per message,
        alternating (consecutive messages of one role are merged)."""
        system: list[str] = []
        wire: list[dict[str, Any]] = []

        def add(role: str, blocks: list[dict[str, Any]]) -> None:
            if not blocks:
                return
            if wire and wire[-1]["role"] == role:
                wire[-1]["content"].extend(blocks)
            else:
                wire.append({"role": role, "content": blocks})

        for message in messages:
            if isinstance(message, SystemMessage):
                system.append(message.content)
            elif isinstance(message, UserMessage):
                add("user", _user_blocks(message))
            elif isinstance(message, AssistantMessage):
                add("assistant", self._assistant_blocks(message))
            elif isinstance(message, ToolMessage):
                block: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id,
                    "content": message.content,
                }
                if message.is_error:
                    block["is_error"] = True
                add("user", [block])
        return "\n\n".join(system), wire

    def _assistant_blocks(self, message: AssistantMessage) -> list[dict[str, Any]]:
        if message.parts:
            blocks = _step_blocks(message)
            if not any(b["type"] in ("thinking", "redacted_thinking") for b in blocks):
                blocks[:0] = [dict(b) for b in self.memory.recall([c.id for c in message.tool_calls])]
            return blocks
        blocks = _thinking_blocks(message.reasoning_parts)
        if not blocks:
            blocks = [dict(b) for b in self.memory.recall([c.id for c in message.tool_calls])]
        if message.content:
            blocks.append({"type": "text", "text": message.content})
        for call in message.tool_calls:
            blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": _json_object(call.arguments)})
        return blocks

    # -- the stream --------------------------------------------------------------

    async def _events(self, response: httpx.Response) -> AsyncIterator[ModelEvent]:
        reader = _Reader()
        async for sse in sse_events(response):
            payload = sse.data
            if payload == "[DONE]":
                break
            obj = json_object(payload)
            for event in reader.feed(obj):
                yield event
            if reader.stopped:
                break
        for event in reader.end():
            yield event
        self.memory.remember(reader.call_ids, reader.thinking_blocks)


@dataclass(slots=True)
class _Block:
    kind: str  # "text", "reasoning", "call"
    call_id: str = ""
    name: str = ""
    input: list[str] = field(default_factory=list)
    provider_executed: bool | None = None
    dynamic: bool | None = None
    input_type: str | None = None  # the AI SDK's injected ``type`` for code execution
    first_delta: bool = True
    code_execution: bool = False
    got_delta: bool = False
    thinking: list[str] = field(default_factory=list)
    signature: str | None = None
    redacted: str | None = None
    citations: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] | None = None  # a compaction block's, a call's caller


class _Reader:
    """One response's events → model events (rules in the module docstring)."""

    def __init__(self) -> None:
        self.message_id: str | None = None
        self.open = False
        self.stopped = False
        self.blocks: dict[int, _Block] = {}
        self.stop_reason: str | None = None
        self.usage: dict[str, Any] = {}
        self.tool_names: dict[str, str] = {}
        self.call_ids: list[str] = []
        self.thinking_blocks: list[dict[str, Any]] = []
        self.mcp_metadata: dict[str, dict[str, Any]] = {}
        self.callers: dict[str, dict[str, Any]] = {}
        # Web citations of a response without search results of its own
        # (the search ran in an earlier response) become sources at the end.
        self.web_citations: list[dict[str, Any]] = []
        self.has_web_results = False

    def feed(self, obj: dict[str, Any]) -> list[ModelEvent]:
        kind = obj.get("type")
        if kind == "message_start":
            return self._message_start(obj.get("message") or {})
        if kind == "content_block_start":
            return self._block_start(obj.get("index", 0), obj.get("content_block") or {})
        if kind == "content_block_delta":
            return self._block_delta(obj.get("index", 0), obj.get("delta") or {})
        if kind == "content_block_stop":
            return self._block_stop(obj.get("index", 0))
        if kind == "message_delta":
            self._message_delta(obj)
            return []
        if kind == "message_stop":
            return self._message_stop()
        if kind == "error":
            error = obj.get("error") or {}
            error_type = error.get("type", "error") if isinstance(error, dict) else "error"
            message = error.get("message", error) if isinstance(error, dict) else error
            exc = ModelResponseError(f"the model stream carried an error ({error_type}): {message}")
            exc.retryable = error_type == "overloaded_error"
            raise exc
        return []  # ping, and events this reader does not know

    def end(self) -> list[ModelEvent]:
        """The body ended: a message cut before ``message_stop`` is
        interrupted (its open blocks closed, complete calls kept)."""
        if self.stopped:
            return []
        if self.message_id is None:
            raise ModelResponseError("the model stream ended before any message began")
        out: list[ModelEvent] = []
        for index in sorted(self.blocks):
            out.extend(self._block_stop(index))
        out.append(Finish("interrupted"))
        self.stopped = True
        return out

    # -- rule 1 ------------------------------------------------------------------

    def _message_start(self, message: dict[str, Any]) -> list[ModelEvent]:
        message_id = message.get("id")
        if self.open:
            if message_id == self.message_id:
                return []
            raise ModelResponseError(
                f"Received message_start for message {json.dumps(message_id)} "
                f"while message {json.dumps(self.message_id)} is still open."
            )
        self.open = True
        self.message_id = message_id if isinstance(message_id, str) else ""
        usage = message.get("usage")
        if isinstance(usage, dict):
            self.usage = dict(usage)
        if message.get("stop_reason"):
            self.stop_reason = message["stop_reason"]
        raw_usage = dict(usage) if isinstance(usage, dict) else None
        started = {"id": message.get("id"), "model": message.get("model"), "usage": raw_usage}
        out: list[ModelEvent] = [Custom("anthropic.message_start", {"anthropic": started})]
        for part in message.get("content") or ():
            if isinstance(part, dict) and part.get("type") == "tool_use":
                text = json.dumps(part.get("input") or {}, separators=(",", ":"), ensure_ascii=False)
                out.append(ToolCallStart(part["id"], part["name"]))
                out.append(ToolCallDelta(part["id"], text))
                out.append(ToolCall(part["id"], part["name"], text, provider_metadata=_caller_metadata(part)))
                self.call_ids.append(part["id"])
        return out

    # -- rule 2 ------------------------------------------------------------------

    def _block_start(self, index: int, part: dict[str, Any]) -> list[ModelEvent]:
        kind = part.get("type")
        if kind in ("text", "compaction"):
            self.blocks[index] = _Block("text")
            if kind == "compaction":
                compaction: dict[str, Any] = {"type": "compaction"}
                if part.get("signature") is not None:
                    compaction["signature"] = part["signature"]
                self.blocks[index].metadata = {"anthropic": compaction}
            text = part.get("text") if kind == "text" else part.get("content")
            if isinstance(text, str) and text:
                self.blocks[index].got_delta = True
                return [TextDelta(text)]
            return []
        if kind == "thinking":
            self.blocks[index] = block = _Block("reasoning")
            text = part.get("thinking")
            if isinstance(text, str) and text:
                block.thinking.append(text)
                block.got_delta = True
                return [ReasoningDelta(text)]
            return []
        if kind == "redacted_thinking":
            self.blocks[index] = _Block("reasoning", redacted=part.get("data", ""))
            return []
        if kind == "tool_use":
            given = part.get("input")
            initial = json.dumps(given, separators=(",", ":"), ensure_ascii=False) if given else ""
            block = _Block("call", part["id"], part["name"], [initial] if initial else [], first_delta=not initial)
            block.metadata = _caller_metadata(part)
            self.blocks[index] = block
            self.call_ids.append(block.call_id)
            out: list[ModelEvent] = [ToolCallStart(block.call_id, block.name)]
            if initial:
                out.append(ToolCallDelta(block.call_id, initial))
            return out
        if kind == "server_tool_use":
            return self._server_tool_start(index, part)
        if kind == "mcp_tool_use":
            call_id, name = part["id"], part["name"]
            self.tool_names[call_id] = name
            text = json.dumps(part.get("input") or {}, separators=(",", ":"), ensure_ascii=False)
            # What the next request needs to send the call back as an
            # ``mcp_tool_use`` block (as @ai-sdk/anthropic marks it).
            meta = {"anthropic": {"type": "mcp-tool-use", "serverName": part.get("server_name")}}
            self.mcp_metadata[call_id] = meta
            return [
                ToolCallStart(call_id, name, provider_executed=True, dynamic=True, provider_metadata=meta),
                ToolCall(call_id, name, text, provider_executed=True, dynamic=True, provider_metadata=meta),
            ]
        if kind == "mcp_tool_result":
            call_id = part.get("tool_use_id", "")
            return [
                ToolResult(
                    call_id,
                    part.get("content"),
                    is_error=bool(part.get("is_error")),
                    tool_name=self.tool_names.get(call_id),
                    dynamic=True,
                    provider_executed=True,
                    provider_metadata=self.mcp_metadata.get(call_id),
                )
            ]
        if isinstance(kind, str) and kind.endswith("_tool_result"):
            return self._server_tool_result(kind, part)
        if kind == "fallback":
            # A server-side fallback served the turn: ai@7's custom part, and
            # sent back as a ``fallback`` block on the next request.
            fallback = {"type": "fallback", "from": part.get("from"), "to": part.get("to")}
            return [Custom("anthropic.fallback", {"anthropic": fallback})]
        return []

    def _server_tool_start(self, index: int, part: dict[str, Any]) -> list[ModelEvent]:
        raw_name = part.get("name", "")
        name = "code_execution" if raw_name in _CODE_EXECUTION_SUBTOOLS else raw_name
        input_type = raw_name if raw_name in _CODE_EXECUTION_SUBTOOLS else None
        if raw_name == "code_execution":
            input_type = "programmatic-tool-call"
        given = part.get("input")
        if raw_name == "advisor":
            initial = "{}"
        elif isinstance(given, dict) and given and raw_name not in ("tool_search_tool_regex", "tool_search_tool_bm25"):
            initial = json.dumps(given, separators=(",", ":"), ensure_ascii=False)
        else:
            initial = ""
        block = _Block(
            "call",
            part["id"],
            name,
            [initial] if initial else [],
            provider_executed=True,
            input_type=input_type,
            first_delta=raw_name == "advisor" or not initial,
            code_execution=name == "code_execution",
            metadata=_caller_metadata(part),
        )
        self.blocks[index] = block
        self.tool_names[block.call_id] = raw_name
        return [ToolCallStart(block.call_id, name, provider_executed=True)]

    def _server_tool_result(self, kind: str, part: dict[str, Any]) -> list[ModelEvent]:
        call_id = part.get("tool_use_id", "")
        provider_name = self.tool_names.get(call_id, "")
        if kind == "tool_search_tool_result":
            name = provider_name or "tool_search_tool_regex"
        else:
            name = _SERVER_TOOL_RESULTS.get(kind, kind.removesuffix("_tool_result"))
        content = part.get("content")
        meta = _caller_metadata(part) or self.callers.get(call_id)
        out: list[ModelEvent] = []
        if kind == "web_fetch_tool_result" and isinstance(content, dict) and content.get("type") == "web_fetch_result":
            document = _object(content.get("content"))
            source = _object(document.get("source"))
            fetched: dict[str, Any] = {
                "type": "web_fetch_result",
                "url": content.get("url"),
                "retrievedAt": content.get("retrieved_at"),
                "content": {
                    **{k: document[k] for k in ("type", "title", "citations") if k in document},
                    "source": {
                        "type": source.get("type"),
                        "mediaType": source.get("media_type"),
                        "data": source.get("data"),
                    },
                },
            }
            return [ToolResult(call_id, fetched, tool_name=name, provider_executed=True, provider_metadata=meta)]
        if kind == "web_search_tool_result" and isinstance(content, list):
            self.has_web_results = True
            results = [r for r in content if isinstance(r, dict)]
            output: Any = [
                {
                    "url": r.get("url"),
                    "title": r.get("title"),
                    "pageAge": r.get("page_age"),
                    "encryptedContent": r.get("encrypted_content"),
                    "type": r.get("type"),
                }
                for r in results
            ]
            out.append(ToolResult(call_id, output, tool_name=name, provider_executed=True, provider_metadata=meta))
            for r in results:
                out.append(
                    SourceUrl(
                        _source_id(),
                        r.get("url", ""),
                        r.get("title"),
                        {"anthropic": {"pageAge": r.get("page_age")}},
                    )
                )
            return out
        if kind == "tool_search_tool_result" and isinstance(content, dict) and "tool_references" in content:
            refs = [{"type": r.get("type"), "toolName": r.get("tool_name")} for r in content["tool_references"]]
            return [ToolResult(call_id, refs, tool_name=name, provider_executed=True, provider_metadata=meta)]
        is_error = isinstance(content, dict) and str(content.get("type", "")).endswith("_error")
        if is_error and isinstance(content, dict):
            content = {"type": content.get("type"), "errorCode": content.get("error_code")}
        return [
            ToolResult(
                call_id, content, is_error=is_error, tool_name=name, provider_executed=True, provider_metadata=meta
            )
        ]

    # -- rule 3 ------------------------------------------------------------------

    def _block_delta(self, index: int, delta: dict[str, Any]) -> list[ModelEvent]:
        block = self.blocks.get(index)
        kind = delta.get("type")
        if block is None:
            return []
        if kind == "text_delta" and block.kind == "text":
            block.got_delta = True
            return [TextDelta(delta.get("text", ""))]
        if kind == "compaction_delta" and block.kind == "text":
            content = delta.get("content")
            if isinstance(content, str):
                block.got_delta = True
                return [TextDelta(content)]
            return []
        if kind == "thinking_delta" and block.kind == "reasoning":
            text = delta.get("thinking", "")
            block.thinking.append(text)
            block.got_delta = True
            return [ReasoningDelta(text)]
        if kind == "signature_delta" and block.kind == "reasoning":
            block.signature = delta.get("signature")
            return []
        if kind == "citations_delta" and block.kind == "text":
            citation = delta.get("citation")
            if isinstance(citation, dict):
                block.citations.append(citation)
                if citation.get("type") == "web_search_result_location":
                    self.web_citations.append(citation)
            return []
        if kind == "input_json_delta" and block.kind == "call":
            fragment = delta.get("partial_json", "")
            if not fragment:
                return []
            if block.first_delta and block.input_type is not None:
                fragment = f'{{"type": "{block.input_type}",{fragment[1:]}'
            block.first_delta = False
            block.input.append(fragment)
            return [ToolCallDelta(block.call_id, fragment)]
        return []

    # -- rule 4 ------------------------------------------------------------------

    def _block_stop(self, index: int) -> list[ModelEvent]:
        block = self.blocks.pop(index, None)
        if block is None:
            return []
        if block.kind == "text":
            end = TextEnd(block.metadata)
            if block.citations:
                # As @ai-sdk/anthropic ends a cited text: the citations in
                # ai@7's form, and raw in the metadata, which the next
                # request sends back on the text block.
                end = TextEnd(
                    {"anthropic": {"citations": block.citations}},
                    [_citation(c) for c in block.citations],
                )
            return [end] if block.got_delta else [TextDelta(""), end]
        if block.kind == "reasoning":
            out: list[ModelEvent] = [] if block.got_delta else [ReasoningDelta("")]
            if block.redacted is not None:
                self.thinking_blocks.append({"type": "redacted_thinking", "data": block.redacted})
                out.append(ReasoningEnd({"anthropic": {"redactedData": block.redacted}}))
                return out
            text = "".join(block.thinking)
            if block.signature is not None:
                self.thinking_blocks.append({"type": "thinking", "thinking": text, "signature": block.signature})
                out.append(ReasoningEnd({"anthropic": {"signature": block.signature}}))
            else:
                out.append(ReasoningEnd())
            return out
        text = "".join(block.input) or "{}"
        if block.code_execution:
            text = _programmatic_input(text)
        if block.provider_executed:
            # ai@7 files who called a server tool under the result's
            # metadata (``resultProviderMetadata``), not the call's.
            if block.metadata is not None:
                self.callers[block.call_id] = block.metadata
            return [ToolCall(block.call_id, block.name, text, provider_executed=True)]
        return [ToolCall(block.call_id, block.name, text, provider_metadata=block.metadata)]

    # -- rule 5 ------------------------------------------------------------------

    def _message_delta(self, obj: dict[str, Any]) -> None:
        usage = obj.get("usage")
        if isinstance(usage, dict):
            for key, value in usage.items():
                if value is not None:
                    self.usage[key] = value
        delta = obj.get("delta") or {}
        self.stop_reason = delta.get("stop_reason")

    def _message_stop(self) -> list[ModelEvent]:
        out: list[ModelEvent] = []
        for index in sorted(self.blocks):
            out.extend(self._block_stop(index))
        self.open = False
        self.stopped = True
        if not self.has_web_results:
            for citation in self.web_citations:
                meta = {"citedText": citation.get("cited_text"), "encryptedIndex": citation.get("encrypted_index")}
                out.append(SourceUrl(_source_id(), citation.get("url", ""), citation.get("title"), {"anthropic": meta}))
        self.web_citations.clear()
        out.append(_usage(self.usage))
        out.append(Finish(map_stop_reason(self.stop_reason)))
        return out


def _step_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    """A step's blocks from its ordered ``parts``, as @ai-sdk/anthropic
    4.0.105 writes an assistant message: text (with its citations, or a
    compaction block), signed and redacted thinking, the loop's
    ``tool_use``, and what Anthropic ran itself: ``server_tool_use`` /
    ``mcp_tool_use`` and their result blocks (``web_search_tool_result``
    with the encrypted content the API needs back, ``code_execution_tool_result``…),
    and a server-side ``fallback``. Anything the API has no block for is
    left out, as the AI SDK leaves it out (with a warning there)."""
    blocks: list[dict[str, Any]] = []
    mcp_calls: set[str] = set()
    for part in message.parts:
        if isinstance(part, TextPart):
            meta = part.provider_metadata.get("anthropic")
            meta = meta if isinstance(meta, Mapping) else {}
            if meta.get("type") == "compaction":
                if part.text:
                    compaction = {"type": "compaction", "content": part.text}
                    if isinstance(meta.get("signature"), str):
                        compaction["signature"] = meta["signature"]
                    blocks.append(compaction)
            elif part.text:
                block: dict[str, Any] = {"type": "text", "text": part.text}
                if meta.get("citations") is not None:
                    block["citations"] = meta["citations"]
                blocks.append(block)
        elif isinstance(part, ReasoningPart):
            blocks.extend(_thinking_blocks((part,)))
        elif isinstance(part, ToolCallRequest):
            use = {"type": "tool_use", "id": part.id, "name": part.name, "input": _json_object(part.arguments)}
            blocks.append(_with_caller(use, part.provider_metadata))
        elif isinstance(part, ProviderToolCall):
            call = _server_call_block(part)
            if call is not None:
                if call["type"] == "mcp_tool_use":
                    mcp_calls.add(part.id)
                else:
                    call = _with_caller(call, part.provider_metadata)
                blocks.append(call)
        elif isinstance(part, ProviderToolResult):
            result = _server_result_block(part, part.tool_call_id in mcp_calls)
            if result is not None:
                if result["type"] in ("web_search_tool_result", "web_fetch_tool_result"):
                    result = _with_caller(result, part.provider_metadata)
                blocks.append(result)
        elif isinstance(part, CustomPart) and part.kind == "anthropic.fallback":
            meta = part.provider_metadata.get("anthropic")
            if isinstance(meta, Mapping) and meta.get("from") is not None and meta.get("to") is not None:
                blocks.append({"type": "fallback", "from": meta["from"], "to": meta["to"]})
    return blocks


_SERVER_TOOLS: Final = frozenset(
    ("code_execution", "web_fetch", "web_search", "tool_search_tool_regex", "tool_search_tool_bm25")
)


def _server_call_block(part: ProviderToolCall) -> dict[str, Any] | None:
    meta = part.provider_metadata.get("anthropic")
    if isinstance(meta, Mapping) and meta.get("type") == "mcp-tool-use":
        if not isinstance(meta.get("serverName"), str):
            return None  # the API cannot take an MCP call without its server
        return {
            "type": "mcp_tool_use",
            "id": part.id,
            "name": part.name,
            "input": part.input,
            "server_name": meta["serverName"],
        }
    tool_input = part.input
    if part.name == "code_execution" and isinstance(tool_input, dict) and isinstance(tool_input.get("type"), str):
        # The reader named the sub-tool in the input's ``type``: undone.
        kind = tool_input["type"]
        rest = {k: v for k, v in tool_input.items() if k != "type"}
        if kind in _CODE_EXECUTION_SUBTOOLS:
            return {"type": "server_tool_use", "id": part.id, "name": kind, "input": rest}
        if kind == "programmatic-tool-call":
            return {"type": "server_tool_use", "id": part.id, "name": "code_execution", "input": rest}
    if part.name in _SERVER_TOOLS:
        return {"type": "server_tool_use", "id": part.id, "name": part.name, "input": tool_input}
    if part.name == "advisor":
        return {"type": "server_tool_use", "id": part.id, "name": "advisor", "input": {}}
    return None


def _error_code(value: Any, default: str) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return default
    code = value.get("errorCode") if isinstance(value, dict) else None
    return code if isinstance(code, str) else default


def _server_result_block(part: ProviderToolResult, mcp: bool) -> dict[str, Any] | None:
    """A provider-run tool's result block (``_server_tool_result`` read it)."""
    output, call_id = part.output, part.tool_call_id
    if mcp:
        return {"type": "mcp_tool_result", "tool_use_id": call_id, "is_error": part.is_error, "content": output}
    if part.name == "web_search":
        if part.is_error:
            error = {"type": "web_search_tool_result_error", "error_code": _error_code(output, "unavailable")}
            return {"type": "web_search_tool_result", "tool_use_id": call_id, "content": error}
        if not isinstance(output, list):
            return None
        content = [
            {
                "url": r.get("url"),
                "title": r.get("title"),
                "page_age": r.get("pageAge"),
                "encrypted_content": r.get("encryptedContent"),
                "type": r.get("type"),
            }
            for r in output
            if isinstance(r, dict)
        ]
        return {"type": "web_search_tool_result", "tool_use_id": call_id, "content": content}
    if part.name == "web_fetch":
        if part.is_error:
            error = {"type": "web_fetch_tool_result_error", "error_code": _error_code(output, "unavailable")}
            return {"type": "web_fetch_tool_result", "tool_use_id": call_id, "content": error}
        if not isinstance(output, dict):
            return None
        document = _object(output.get("content"))
        source = _object(document.get("source"))
        fetched: dict[str, Any] = {
            "type": "web_fetch_result",
            "url": output.get("url"),
            "retrieved_at": output.get("retrievedAt"),
            "content": {
                "type": "document",
                **{k: document[k] for k in ("title", "citations") if k in document},
                "source": {
                    "type": source.get("type"),
                    "media_type": source.get("mediaType"),
                    "data": source.get("data"),
                },
            },
        }
        return {"type": "web_fetch_tool_result", "tool_use_id": call_id, "content": fetched}
    if part.name == "code_execution":
        if part.is_error:
            info = output if isinstance(output, dict) else {}
            if isinstance(output, str):
                try:
                    info = json.loads(output)
                except ValueError:
                    info = {}
            code = info.get("errorCode") if isinstance(info, dict) else None
            if isinstance(info, dict) and info.get("type") == "code_execution_tool_result_error":
                error = {"type": "code_execution_tool_result_error", "error_code": code or "unknown"}
                return {"type": "code_execution_tool_result", "tool_use_id": call_id, "content": error}
            error = {"type": "bash_code_execution_tool_result_error", "error_code": code or "unknown"}
            return {"type": "bash_code_execution_tool_result", "tool_use_id": call_id, "content": error}
        if not isinstance(output, dict) or not isinstance(output.get("type"), str):
            return None
        kind = output["type"]
        if kind in ("code_execution_result", "encrypted_code_execution_result"):
            executed: dict[str, Any] = {
                k: output[k] for k in ("type", "stdout", "encrypted_stdout", "stderr", "return_code") if k in output
            }
            executed["content"] = output.get("content") or []
            return {"type": "code_execution_tool_result", "tool_use_id": call_id, "content": executed}
        if kind.startswith("bash_code_execution"):
            return {"type": "bash_code_execution_tool_result", "tool_use_id": call_id, "content": output}
        return {"type": "text_editor_code_execution_tool_result", "tool_use_id": call_id, "content": output}
    if part.name in ("tool_search_tool_regex", "tool_search_tool_bm25"):
        if part.is_error or (isinstance(output, dict) and output.get("type") == "tool_search_tool_result_error"):
            error = {"type": "tool_search_tool_result_error", "error_code": _error_code(output, "unavailable")}
            return {"type": "tool_search_tool_result", "tool_use_id": call_id, "content": error}
        if not isinstance(output, list):
            return None
        refs = [{"type": "tool_reference", "tool_name": r.get("toolName")} for r in output if isinstance(r, dict)]
        found = {"type": "tool_search_tool_search_result", "tool_references": refs}
        return {"type": "tool_search_tool_result", "tool_use_id": call_id, "content": found}
    return None


def _thinking_blocks(parts: Sequence[ReasoningPart]) -> list[dict[str, Any]]:
    """The thinking blocks of a step's reasoning parts: signed thinking and
    redacted thinking (a part without either, or another provider's, is
    not sent: the API rejects unsigned thinking)."""
    blocks: list[dict[str, Any]] = []
    for part in parts:
        meta = part.provider_metadata.get("anthropic")
        if not isinstance(meta, Mapping):
            continue
        if isinstance(meta.get("signature"), str):
            blocks.append({"type": "thinking", "thinking": part.text, "signature": meta["signature"]})
        elif isinstance(meta.get("redactedData"), str):
            blocks.append({"type": "redacted_thinking", "data": meta["redactedData"]})
    return blocks


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _caller_metadata(part: Mapping[str, Any]) -> dict[str, Any] | None:
    """Who called a tool (``caller``: the model directly, or code running in
    code execution), as @ai-sdk/anthropic keeps it in the call's provider
    metadata; the next request sends it back."""
    caller = part.get("caller")
    if not isinstance(caller, dict):
        return None
    info: dict[str, Any] = {"type": caller.get("type")}
    if "tool_id" in caller:
        info["toolId"] = caller["tool_id"]
    return {"anthropic": {"caller": info}}


def _with_caller(block: dict[str, Any], metadata: Mapping[str, Any]) -> dict[str, Any]:
    caller = _wire_caller(metadata)
    if caller is not None:
        block["caller"] = caller
    return block


def _wire_caller(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``caller`` a block is sent back with (the AI SDK's ``getAnthropicCaller``)."""
    meta = metadata.get("anthropic")
    caller = meta.get("caller") if isinstance(meta, Mapping) else None
    if not isinstance(caller, Mapping):
        return None
    if caller.get("type") in ("code_execution_20250825", "code_execution_20260120") and caller.get("toolId"):
        return {"type": caller["type"], "tool_id": caller["toolId"]}
    return {"type": "direct"} if caller.get("type") == "direct" else None


def _citation(citation: dict[str, Any]) -> dict[str, Any]:
    """A citation as ai@7's text-end ``citations`` hold it (the AI SDK's
    ``mapAnthropicCitation``; the prompt's documents are not known here,
    so a document citation is titled by its own ``document_title``)."""
    kind = citation.get("type")
    if kind in ("web_search_result_location", "search_result_location"):
        url = citation.get("url") if kind == "web_search_result_location" else citation.get("source")
        source: dict[str, Any] = {"type": "source", "sourceType": "url", "id": url, "url": url}
        if citation.get("title") is not None:
            source["title"] = citation["title"]
    else:
        index = citation.get("document_index")
        source = {
            "type": "source",
            "sourceType": "document",
            "id": citation.get("file_id") or str(index),
            "mediaType": "text/plain",
            "title": citation.get("document_title") or f"Document {index}",
        }
    source["providerMetadata"] = {"anthropic": dict(citation)}
    out: dict[str, Any] = {"source": source}
    if citation.get("cited_text") is not None:
        out["citedText"] = citation["cited_text"]
    return out


def _usage(raw: Mapping[str, Any]) -> Usage:
    """As the AI SDK counts it: cache reads and writes are input; with
    ``iterations`` (compaction, advisor) the executor's iterations are
    summed, unless a server-side fallback served the turn."""

    def count(value: Any) -> int:
        return value if isinstance(value, int) else 0

    input_tokens, output_tokens = count(raw.get("input_tokens")), count(raw.get("output_tokens"))
    iterations = raw.get("iterations")
    if isinstance(iterations, list) and iterations:
        kinds = [i for i in iterations if isinstance(i, dict)]
        executor = [i for i in kinds if i.get("type") in ("compaction", "message")]
        if executor and not any(i.get("type") == "fallback_message" for i in kinds):
            input_tokens = sum(count(i.get("input_tokens")) for i in executor)
            output_tokens = sum(count(i.get("output_tokens")) for i in executor)
    cache_read = count(raw.get("cache_read_input_tokens"))
    cache_write = count(raw.get("cache_creation_input_tokens"))
    details = raw.get("output_tokens_details")
    thinking = details.get("thinking_tokens") if isinstance(details, dict) else None
    return Usage(
        input_tokens=input_tokens + cache_read + cache_write,
        output_tokens=output_tokens,
        reasoning_tokens=thinking if isinstance(thinking, int) else None,
        cached_input_tokens=cache_read,
    )


def _programmatic_input(text: str) -> str:
    """Code execution called with ``{"code": …}`` and no ``type`` is a
    programmatic tool call (the AI SDK marks it so)."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, dict) and "code" in value and "type" not in value:
        return json.dumps({"type": "programmatic-tool-call", **value}, separators=(",", ":"), ensure_ascii=False)
    return text


def _tool_choice(choice: str) -> dict[str, str]:
    if choice == "auto":
        return {"type": "auto"}
    if choice in ("required", "any"):
        return {"type": "any"}
    if choice == "none":
        return {"type": "none"}
    return {"type": "tool", "name": choice}


def _json_object(text: str) -> Any:
    """A call's argument text as the object ``tool_use.input`` needs."""
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _source_id() -> str:
    return f"src_{uuid.uuid4().hex[:24]}"


_PROVIDER = "This model (Anthropic)"


def _user_blocks(message: UserMessage) -> list[dict[str, Any]]:
    """A user message as Messages API blocks, files as ``@ai-sdk/anthropic``
    sends them: images as ``image`` blocks, PDFs and plain text as
    ``document`` blocks (base64, or the text itself), titled with the
    filename; any other type can't be sent (``UnsupportedFileError``)."""
    blocks: list[dict[str, Any]] = []
    for file in message.ordered():
        if isinstance(file, str):
            if file:
                blocks.append({"type": "text", "text": file})
            continue
        if is_image(file):
            source = {"type": "base64", "media_type": file.media_type, "data": b64(file, _PROVIDER)}
            blocks.append({"type": "image", "source": source})
            continue
        if is_pdf(file):
            source = {"type": "base64", "media_type": "application/pdf", "data": b64(file, _PROVIDER)}
        elif file.media_type.split(";", 1)[0].strip().lower() == "text/plain":
            text = file_bytes(file, _PROVIDER).decode("utf-8", errors="replace")
            source = {"type": "text", "media_type": "text/plain", "data": text}
        else:
            raise UnsupportedFileError(_PROVIDER, file.media_type, file.filename, "it takes images, PDFs and text")
        block: dict[str, Any] = {"type": "document", "source": source}
        if file.filename:
            block["title"] = file.filename
        blocks.append(block)
    return blocks
