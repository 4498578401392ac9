"""The OpenAI Responses API as a model, over ``httpx``.

Speaks ``POST {base_url}/responses`` with ``stream: true`` to OpenAI and the
servers that copy it (Azure, LM Studio…) and reads the stream the way
``@ai-sdk/openai``'s Responses model does, into the model port's events
plus the results, sources and approval requests of the tools OpenAI runs
itself (all ``runs.model.ModelEvent``). Each event's kind is read from its
payload's ``type``, never from the ``event:`` line, so compatible servers
that send bare ``data:`` lines (with or without a space, ending in
``[DONE]`` or not) read the same.

The rules of the stream reader (``ResponsesStreamReader``), keyed by ``output_index``
(compatible servers rotate item ids between events; the index is stable):

1. ``output_item.added`` opens an item: a ``message`` (text follows), a
   ``reasoning`` item (its summary part 0 opens at once, as the AI SDK
   opens it; the encrypted content it announces is kept), a
   ``function_call`` (→ ``ToolCallStart``), or a server tool: web search,
   file search and image generation are provider-executed calls with
   input ``{}``; the code interpreter streams its code as input; hosted
   tool search waits for its arguments.
2. Deltas: ``output_text.delta`` → ``TextDelta``; ``refusal.delta`` too
   (the refusal is the answer a person sees, and the response ends as
   ``content-filter``, as ``@ai-sdk/openai`` 4.0.118 has it); each reasoning summary
   part is a reasoning part of its own (``reasoning_summary_part.added``
   ends the previous one); ``function_call_arguments.delta`` and the code
   interpreter's code → ``ToolCallDelta``; a partial image → a preliminary
   ``ToolResult``; ``output_text.annotation.added`` → ``SourceUrl``
   (``url_citation``, unless the page is already a source of a web
   search) or ``SourceDocument`` (``file_citation``,
   ``container_file_citation``, ``file_path``).
3. ``output_item.done`` closes it: ``TextEnd``; ``ReasoningEnd`` with
   ``{"openai": {"itemId", "reasoningEncryptedContent"}}`` (the content the
   item ends with, else the one it announced); the complete ``ToolCall``;
   a server tool's ``ToolResult`` (a web search that did not complete is
   an error; the pages it lists in ``action.sources`` are ``SourceUrl`` events);
   an MCP call (``mcp.<name>``, dynamic,
   with its result) or an MCP approval request (``ToolApprovalRequest``).
4. ``response.completed`` / ``response.incomplete`` end the response:
   ``Usage`` (cached and reasoning tokens), then ``Finish``: ``length`` for
   ``max_output_tokens``, ``content-filter`` for ``content_filter``, else
   ``tool-calls`` when a function was called, else ``stop``.
5. ``response.failed`` with an error, an ``error`` event, a line that is
   not JSON, or a Chat Completions chunk (a body of the wrong API) is
   ``ModelResponseError`` (rate limits and server errors are retryable:
   before any event was yielded the request is sent again). A body that
   ends before the response did is ``Finish("interrupted")``.

History goes out as Responses input items: system and user messages,
an assistant step as its reasoning items (from the step's
``reasoning_parts``, the item id and encrypted content kept in the stored
parts' provider metadata; else remembered from the stream that
produced them, ``runs._memory``; with ``store=False``, the default, those
that came with their encrypted content, which ``include`` asks for when
``reasoning`` is set; with ``store=True``, references to the stored
items), an ``output_text`` message and ``function_call`` items, and each
tool result as a ``function_call_output``. A step with ordered ``parts``
goes out as ``@ai-sdk/openai`` writes it (``_step_items``): provider-run
tools (a web search as its ``web_search_call``, the rest by reference when
stored), compaction items, and an ``mcp_approval_response`` for each
remote MCP call a person answered. The call an approved request then
runs (``mcp_call`` with its ``approval_request_id``) keeps the id of the
call that asked, made from the approval id, so it lands on the same part.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Unpack
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx

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
from ._files import data_url, is_image, is_pdf
from ._http import HTTPModelBase, HTTPOptions, int_field, json_object, sse_events
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

__all__ = ["OpenAIResponsesModel", "ResponsesStreamReader", "map_incomplete_reason", "responses_user_content"]

_RETRYABLE_CODES: Final = frozenset(("rate_limit_exceeded", "server_error", "server_is_overloaded", "slow_down"))
_MEMORY = ReplayMemory()


def map_incomplete_reason(reason: str | None, has_function_call: bool) -> str:
    """A response's ``incomplete_details.reason`` in the UI vocabulary."""
    if reason is None:
        return "tool-calls" if has_function_call else "stop"
    if reason == "max_output_tokens":
        return "length"
    if reason == "content_filter":
        return "content-filter"
    return "tool-calls" if has_function_call else "other"


class OpenAIResponsesModel(HTTPModelBase):
    """An OpenAI Responses model (see the module docstring).

    ``store`` is sent as given (``False`` by default: the conversation
    lives in your database, and reasoning items come back with their
    encrypted content); ``reasoning`` (e.g. ``{"effort": "low", "summary":
    "auto"}``) is sent only when given, since models without reasoning
    reject it.
    """

    path = "/responses"
    default_base_url = "https://api.openai.com/v1"
    max_tokens_key = "max_output_tokens"

    def __init__(
        self,
        model: str,
        *,
        store: bool = False,
        reasoning: Mapping[str, Any] | None = None,
        **options: Unpack[HTTPOptions],
    ) -> None:
        super().__init__(model, **options)
        self.store = store
        self.reasoning = dict(reasoning) if reasoning is not None else None
        self.memory = _MEMORY

    def tool_choice_to_wire(self, choice: str) -> str | dict[str, str]:
        if choice in ("auto", "none", "required"):
            return choice
        return {"type": "function", "name": choice}

    # -- request ---------------------------------------------------------------

    def api_body(self, messages: Sequence[ModelMessage], tools: Sequence[ToolSpec]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "input": self.input_items(messages),
            "stream": True,
            "store": self.store,
        }
        if self.reasoning is not None:
            body["reasoning"] = dict(self.reasoning)
            if not self.store:
                body["include"] = ["reasoning.encrypted_content"]
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.parameters),
                    "strict": False,
                }
                for t in tools
            ]
        return body

    def input_items(self, messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
        """The conversation as Responses input items."""
        items: list[dict[str, Any]] = []
        for message in messages:
            if isinstance(message, SystemMessage):
                items.append({"role": "system", "content": message.content})
            elif isinstance(message, UserMessage):
                items.append({"role": "user", "content": responses_user_content(message)})
            elif isinstance(message, AssistantMessage) and message.parts:
                items.extend(self._step_items(message))
            elif isinstance(message, AssistantMessage):
                reasoning = self._reasoning_items(message.reasoning_parts)
                if not reasoning:
                    reasoning = [dict(i) for i in self.memory.recall([c.id for c in message.tool_calls])]
                items.extend(reasoning)
                if message.content:
                    items.append({"role": "assistant", "content": [{"type": "output_text", "text": message.content}]})
                for call in message.tool_calls:
                    items.append(
                        {
                            "type": "function_call",
                            "call_id": call.id,
                            "name": call.name,
                            "arguments": call.arguments or "{}",
                        }
                    )
            elif isinstance(message, ToolMessage):
                items.append(
                    {"type": "function_call_output", "call_id": message.tool_call_id, "output": message.content}
                )
        return items

    def _step_items(self, message: AssistantMessage) -> list[dict[str, Any]]:
        """A step's input items from its ordered ``parts``, as
        ``@ai-sdk/openai`` 4.0.118 writes an assistant message: text as an
        assistant message (by ``item_reference`` when stored), reasoning
        items, ``function_call`` items, what OpenAI ran itself (a web
        search as its ``web_search_call`` item, any other by reference when
        stored), compaction items; then an ``mcp_approval_response`` for
        each remote MCP call a person answered. A reasoning item goes back
        only with its encrypted content when not stored (the API cannot
        find it by id), as ``_reasoning_items`` has it."""
        store = self.store
        items: list[dict[str, Any]] = []
        referenced: set[str] = set()
        reasoning: dict[str, dict[str, Any]] = {}
        approvals: list[dict[str, Any]] = []

        def reference(item_id: str) -> None:
            if item_id not in referenced:
                referenced.add(item_id)
                items.append({"type": "item_reference", "id": item_id})

        for part in message.parts:
            meta = _openai(part.provider_metadata) if not isinstance(part, ProviderToolResult) else {}
            if isinstance(part, TextPart):
                item_id = meta.get("itemId")
                if store and isinstance(item_id, str):
                    reference(item_id)
                    continue
                said: dict[str, Any] = {"role": "assistant", "content": part.text}
                if meta.get("phase") is not None:
                    said["phase"] = meta["phase"]
                items.append(said)
            elif isinstance(part, ReasoningPart):
                item_id = meta.get("itemId")
                if not isinstance(item_id, str):
                    continue
                if store:
                    reference(item_id)
                    continue
                item = reasoning.get(item_id)
                if item is None:
                    item = reasoning[item_id] = {"type": "reasoning", "id": item_id, "summary": []}
                    items.append(item)
                if part.text:
                    item["summary"].append({"type": "summary_text", "text": part.text})
                if isinstance(meta.get("reasoningEncryptedContent"), str):
                    item["encrypted_content"] = meta["reasoningEncryptedContent"]
            elif isinstance(part, ToolCallRequest):
                call: dict[str, Any] = {
                    "type": "function_call",
                    "call_id": part.id,
                    "name": part.name,
                    "arguments": part.arguments or "{}",
                }
                if meta.get("namespace") is not None:
                    call["namespace"] = meta["namespace"]
                items.append(call)
            elif isinstance(part, ProviderToolCall):
                if store and isinstance(meta.get("itemId"), str):
                    reference(meta["itemId"])
                if part.approval is not None:
                    if store:
                        approvals.append({"type": "item_reference", "id": part.approval.approval_id})
                    approvals.append(
                        {
                            "type": "mcp_approval_response",
                            "approval_request_id": part.approval.approval_id,
                            "approve": part.approval.approved,
                        }
                    )
            elif isinstance(part, ProviderToolResult):
                items.extend(_provider_result_items(part, store))
            elif isinstance(part, CustomPart) and part.kind == "openai.compaction":
                item_id = meta.get("itemId")
                if not isinstance(item_id, str):
                    continue
                if store:
                    reference(item_id)
                else:
                    items.append(
                        {"type": "compaction", "id": item_id, "encrypted_content": meta.get("encryptedContent")}
                    )
        # Not stored, a reasoning item without its encrypted content cannot
        # be found by the API: it is left out (see the module docstring).
        items = [i for i in items if i.get("type") != "reasoning" or "encrypted_content" in i]
        return items + approvals

    def _reasoning_items(self, parts: Sequence[ReasoningPart]) -> list[dict[str, Any]]:
        """A step's reasoning items from its stored reasoning parts (one
        part per summary part, grouped by ``itemId``): by reference when
        the conversation is stored server-side, else only the items that
        kept their encrypted content (the API cannot find one by id)."""
        grouped: dict[str, dict[str, Any]] = {}
        for part in parts:
            meta = part.provider_metadata.get("openai")
            if not isinstance(meta, Mapping) or not isinstance(meta.get("itemId"), str):
                continue
            item = grouped.setdefault(meta["itemId"], {"type": "reasoning", "id": meta["itemId"], "summary": []})
            if part.text:
                item["summary"].append({"type": "summary_text", "text": part.text})
            if isinstance(meta.get("reasoningEncryptedContent"), str):
                item["encrypted_content"] = meta["reasoningEncryptedContent"]
        if self.store:
            return [{"type": "item_reference", "id": item_id} for item_id in grouped]
        return [item for item in grouped.values() if "encrypted_content" in item]

    # -- the stream --------------------------------------------------------------

    async def _events(self, response: httpx.Response) -> AsyncIterator[ModelEvent]:
        reader = ResponsesStreamReader(_answered_approvals(response))
        async for sse in sse_events(response):
            payload = sse.data
            if payload == "[DONE]":
                break
            obj = json_object(payload)
            for event in reader.feed(obj):
                yield event
            if reader.finished:
                break
        for event in reader.end():
            yield event
        if self.store:
            # Stored server-side: the items are sent back by reference.
            items = [{"type": "item_reference", "id": i["id"]} for i in reader.reasoning_items]
        else:
            # Not stored: an item goes back only with its encrypted content
            # (the API cannot find one by id alone).
            items = [i for i in reader.reasoning_items if "encrypted_content" in i]
        self.memory.remember(reader.call_ids, items)


@dataclass(slots=True)
class _Item:
    kind: str  # "message", "reasoning", "call", "server"
    item_id: str = ""
    call_id: str = ""
    name: str = ""
    got_delta: bool = False
    encrypted: str | None = None
    summary: list[list[str]] = field(default_factory=lambda: [[]])
    part_open: bool = True
    container_id: str = ""
    annotations: list[dict[str, Any]] = field(default_factory=list)
    phase: str | None = None


class ResponsesStreamReader:
    """One response's events → model events (rules in the module docstring).
    Public: the OpenAI Agents SDK adapter reads the raw Responses events of
    the SDK's stream with it."""

    def __init__(self, approved: Sequence[str] = ()) -> None:
        self.items: dict[int, _Item] = {}
        self.started = False
        self.finished = False
        self.has_function_call = False
        self.refused = False
        self.call_ids: list[str] = []
        self.reasoning_items: list[dict[str, Any]] = []
        self._hosted_searches: list[str] = []
        self.source_urls: set[str] = set()
        #: The MCP approval requests of this response and those the request
        #: answered: their call, run, keeps the id of the call that asked.
        self.approvals: set[str] = set(approved)

    def feed(self, obj: dict[str, Any]) -> list[ModelEvent]:
        kind = obj.get("type")
        if not isinstance(kind, str):
            if isinstance(obj.get("choices"), list):
                raise ModelResponseError(
                    "Received a Chat Completions stream while using the OpenAI Responses API: "
                    "use OpenAIChatModel for a chat-completions endpoint"
                )
            if "error" in obj:
                raise _stream_error(obj["error"])
            return []
        self.started = True
        index = obj.get("output_index", -1)
        if kind == "response.output_item.added":
            return self._added(index, obj.get("item") or {})
        if kind == "response.output_item.done":
            return self._done(index, obj.get("item") or {})
        if kind == "response.output_text.delta":
            item = self.items.get(index) or self._by_id(obj.get("item_id"))
            if item is not None:
                item.got_delta = True
            return [TextDelta(obj.get("delta", ""))]
        if kind == "response.refusal.delta":
            # A person should see why there is no answer: the refusal is
            # the message's text, and the response ends as content-filter.
            self.refused = True
            item = self.items.get(index) or self._by_id(obj.get("item_id"))
            if item is not None:
                item.got_delta = True
            return [TextDelta(obj.get("delta", ""))]
        if kind == "response.reasoning_summary_part.added":
            return self._summary_part(index, obj)
        if kind == "response.reasoning_summary_text.delta":
            item = self.items.get(index) or self._by_id(obj.get("item_id"))
            text = obj.get("delta", "")
            if item is not None and item.summary:
                item.summary[-1].append(text)
            return [ReasoningDelta(text)]
        if kind == "response.function_call_arguments.delta":
            item = self.items.get(index)
            if item is not None and item.kind == "call":
                return [ToolCallDelta(item.call_id, obj.get("delta", ""))]
            return []
        if kind == "response.code_interpreter_call_code.delta":
            item = self.items.get(index)
            if item is not None:
                return [ToolCallDelta(item.call_id, json.dumps(obj.get("delta", ""))[1:-1])]
            return []
        if kind == "response.code_interpreter_call_code.done":
            item = self.items.get(index)
            if item is None:
                return []
            text = json.dumps({"code": obj.get("code", ""), "containerId": item.container_id}, separators=(",", ":"))
            return [
                ToolCallDelta(item.call_id, '"}'),
                ToolCall(item.call_id, "code_interpreter", text, provider_executed=True),
            ]
        if kind == "response.image_generation_call.partial_image":
            result = {"result": obj.get("partial_image_b64")}
            return [
                ToolResult(
                    obj.get("item_id", ""),
                    result,
                    tool_name="image_generation",
                    preliminary=True,
                    provider_executed=True,
                )
            ]
        if kind == "response.output_text.annotation.added":
            annotation = obj.get("annotation") or {}
            item = self.items.get(index) or self._by_id(obj.get("item_id"))
            if item is not None and item.kind == "message":
                item.annotations.append(annotation)
            if annotation.get("type") == "url_citation":
                # A citation of a page the search already listed is not a
                # second source (as @ai-sdk/openai 4.0.118 has it).
                url = _plain_url(annotation.get("url", ""))
                if url in self.source_urls:
                    return []
                self.source_urls.add(url)
            return _annotation(annotation)
        if kind in ("response.completed", "response.incomplete"):
            return self._finished(obj.get("response") or {})
        if kind == "response.failed":
            response = obj.get("response") or {}
            if response.get("error") is not None:
                raise _stream_error(response["error"])
            return self._finished(response)
        if kind == "error":
            raise _stream_error(obj.get("error") or obj)
        return []

    def end(self) -> list[ModelEvent]:
        """The body ended: a response cut before it finished is
        interrupted (open items closed, complete calls kept)."""
        if self.finished:
            return []
        if not self.started:
            raise ModelResponseError("the model stream ended before any response began")
        out = self._close_open()
        out.append(Finish("interrupted"))
        self.finished = True
        return out

    def _close_open(self) -> list[ModelEvent]:
        """Close the text and reasoning items still open (a call left
        open never got its arguments: it is dropped, as the AI SDK does)."""
        out: list[ModelEvent] = []
        for index in sorted(self.items):
            item = self.items.pop(index)
            if item.kind == "message" and item.got_delta:
                out.append(TextEnd({"openai": {"itemId": item.item_id}}))
            elif item.kind == "reasoning":
                out.extend(self._close_reasoning(item, item.encrypted))
        return out

    def _by_id(self, item_id: Any) -> _Item | None:
        for item in self.items.values():
            if item.item_id == item_id:
                return item
        return None

    # -- rule 1 ------------------------------------------------------------------

    def _added(self, index: int, item: dict[str, Any]) -> list[ModelEvent]:
        kind = item.get("type")
        item_id = item.get("id", "")
        if kind == "message":
            self.items[index] = _Item("message", item_id, phase=item.get("phase"))
            return []
        if kind == "reasoning":
            self.items[index] = _Item("reasoning", item_id, encrypted=item.get("encrypted_content"))
            return []
        if kind == "function_call":
            call_id, name = item.get("call_id", ""), item.get("name", "")
            self.items[index] = _Item("call", item_id, call_id, name)
            return [ToolCallStart(call_id, name)]
        if kind in ("web_search_call", "file_search_call", "image_generation_call"):
            name = kind.removesuffix("_call")
            self.items[index] = _Item("server", item_id, item_id, name)
            return [
                ToolCallStart(item_id, name, provider_executed=True),
                ToolCall(item_id, name, "{}", provider_executed=True),
            ]
        if kind == "code_interpreter_call":
            container = item.get("container_id", "")
            self.items[index] = _Item("server", item_id, item_id, "code_interpreter", container_id=container)
            opening = '{"containerId":' + json.dumps(container) + ',"code":"'
            return [
                ToolCallStart(item_id, "code_interpreter", provider_executed=True),
                ToolCallDelta(item_id, opening),
            ]
        if kind == "tool_search_call" and item.get("execution", "server") == "server":
            self.items[index] = _Item("server", item_id, item_id, "tool_search")
            return [ToolCallStart(item_id, "tool_search", provider_executed=True)]
        return []

    # -- rule 2 ------------------------------------------------------------------

    def _summary_part(self, index: int, obj: dict[str, Any]) -> list[ModelEvent]:
        item = self.items.get(index) or self._by_id(obj.get("item_id"))
        if item is None or item.kind != "reasoning" or obj.get("summary_index", 0) == 0:
            return []
        out = self._end_summary_part(item, {"openai": {"itemId": item.item_id}})
        item.summary.append([])
        item.part_open = True
        return out

    @staticmethod
    def _end_summary_part(item: _Item, metadata: dict[str, Any]) -> list[ModelEvent]:
        if not item.part_open:
            return []
        item.part_open = False
        # The AI SDK opens every summary part up front: one without text is
        # still a (empty) reasoning part of the message.
        return [*([] if item.summary[-1] else [ReasoningDelta("")]), ReasoningEnd(metadata)]

    def _close_reasoning(self, item: _Item, encrypted: str | None) -> list[ModelEvent]:
        metadata = {"openai": {"itemId": item.item_id, "reasoningEncryptedContent": encrypted}}
        out = self._end_summary_part(item, metadata)
        texts = ["".join(part) for part in item.summary]
        replay: dict[str, Any] = {
            "type": "reasoning",
            "id": item.item_id,
            "summary": [{"type": "summary_text", "text": t} for t in texts if t],
        }
        if encrypted is not None:
            replay["encrypted_content"] = encrypted
        self.reasoning_items.append(replay)
        return out

    # -- rule 3 ------------------------------------------------------------------

    def _done(self, index: int, item: dict[str, Any]) -> list[ModelEvent]:
        kind = item.get("type")
        open_item = self.items.pop(index, None)
        if kind == "message":
            end = _text_end(item, open_item)
            if open_item is None or open_item.got_delta:
                return [end]
            return [TextDelta(""), end]
        if kind == "reasoning":
            if open_item is None:
                return []
            encrypted = item.get("encrypted_content") or open_item.encrypted
            return self._close_reasoning(open_item, encrypted)
        if kind == "function_call":
            self.has_function_call = True
            call_id = item.get("call_id", "")
            self.call_ids.append(call_id)
            out: list[ModelEvent] = []
            if open_item is None:
                out.append(ToolCallStart(call_id, item.get("name", "")))
            meta: dict[str, Any] = {"itemId": item.get("id", "")}
            if item.get("namespace") is not None:
                meta["namespace"] = item["namespace"]
            out.append(
                ToolCall(call_id, item.get("name", ""), item.get("arguments", ""), provider_metadata={"openai": meta})
            )
            return out
        if kind == "web_search_call":
            output = _web_search_output(item.get("action"))
            # A search that ends in any state but "completed" failed.
            failed = item.get("status", "completed") != "completed"
            if failed:
                output = {"type": "web_search_error", "status": item.get("status"), **output}
            out = [
                ToolResult(item.get("id", ""), output, is_error=failed, tool_name="web_search", provider_executed=True)
            ]
            action = item.get("action")
            found = action.get("sources") if isinstance(action, dict) else None
            for source in found if isinstance(found, list) else ():
                if isinstance(source, dict) and source.get("type") == "url" and source.get("url"):
                    self.source_urls.add(_plain_url(source["url"]))
                    out.append(SourceUrl(_source_id(), source["url"], source.get("title")))
            return out
        if kind == "file_search_call":
            results = item.get("results")
            output = {
                "queries": item.get("queries"),
                "results": [
                    {
                        "attributes": r.get("attributes"),
                        "fileId": r.get("file_id"),
                        "filename": r.get("filename"),
                        "score": r.get("score"),
                        "text": r.get("text"),
                    }
                    for r in results
                ]
                if isinstance(results, list)
                else None,
            }
            return [ToolResult(item.get("id", ""), output, tool_name="file_search", provider_executed=True)]
        if kind == "code_interpreter_call":
            output = {"outputs": item.get("outputs")}
            return [ToolResult(item.get("id", ""), output, tool_name="code_interpreter", provider_executed=True)]
        if kind == "image_generation_call":
            output = {"result": item.get("result")}
            return [ToolResult(item.get("id", ""), output, tool_name="image_generation", provider_executed=True)]
        if kind == "tool_search_call" and open_item is not None:
            self._hosted_searches.append(open_item.call_id)
            text = json.dumps({"arguments": item.get("arguments"), "call_id": None}, separators=(",", ":"))
            return [ToolCall(open_item.call_id, "tool_search", text, provider_executed=True)]
        if kind == "tool_search_output":
            call_id = item.get("call_id") or (
                self._hosted_searches.pop(0) if self._hosted_searches else item.get("id", "")
            )
            output = {"tools": item.get("tools")}
            return [ToolResult(call_id, output, tool_name="tool_search", provider_executed=True)]
        if kind == "program":
            text = json.dumps({"code": item.get("code"), "fingerprint": item.get("fingerprint")}, separators=(",", ":"))
            call_id = item.get("call_id", "")
            return [
                ToolCallStart(call_id, "programmatic_tool_calling", provider_executed=True),
                ToolCall(call_id, "programmatic_tool_calling", text, provider_executed=True),
            ]
        if kind == "program_output":
            output = {"result": item.get("result"), "status": item.get("status")}
            return [ToolResult(item.get("call_id", ""), output, tool_name="programmatic_tool_calling")]
        if kind == "mcp_call":
            approval = item.get("approval_request_id")
            call_id = _approval_call_id(approval) if approval in self.approvals else item.get("id", "")
            name = f"mcp.{item.get('name', '')}"
            arguments = item.get("arguments", "")
            call: dict[str, Any] = {
                "type": "call",
                "serverLabel": item.get("server_label"),
                "name": item.get("name"),
                "arguments": arguments,
            }
            if item.get("output") is not None:
                call["output"] = item["output"]
            if item.get("error") is not None:
                call["error"] = item["error"]
            meta = {"openai": {"itemId": item.get("id", "")}}
            return [
                ToolCallStart(call_id, name, provider_executed=True, dynamic=True),
                ToolCall(call_id, name, arguments, provider_executed=True, dynamic=True),
                ToolResult(call_id, call, tool_name=name, dynamic=True, provider_executed=True, provider_metadata=meta),
            ]
        if kind == "compaction":
            compaction = {
                "type": "compaction",
                "itemId": item.get("id"),
                "encryptedContent": item.get("encrypted_content"),
            }
            return [Custom("openai.compaction", {"openai": compaction})]
        if kind == "mcp_approval_request":
            arguments = item.get("arguments", "")
            approval_id = item.get("approval_request_id") or item.get("id", "")
            self.approvals.add(approval_id)
            call_id, name = _approval_call_id(approval_id), f"mcp.{item.get('name', '')}"
            return [
                ToolCallStart(call_id, name, provider_executed=True, dynamic=True),
                ToolCall(call_id, name, arguments, provider_executed=True, dynamic=True),
                ToolApprovalRequest(approval_id, call_id),
            ]
        return []

    # -- rule 4 ------------------------------------------------------------------

    def _finished(self, response: dict[str, Any]) -> list[ModelEvent]:
        out = self._close_open()
        self.finished = True
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        usage = response.get("usage")
        out.append(_usage(usage if isinstance(usage, dict) else {}))
        finish = map_incomplete_reason(reason, self.has_function_call)
        out.append(Finish("content-filter" if self.refused and reason is None else finish))
        return out


def _approval_call_id(approval_id: str) -> str:
    """The call id an MCP approval request's call is shown under (the API
    gives the call no id until it runs; the AI SDK makes one up): made from
    the approval id, so the call that runs once a person approved it, in
    the next response, lands on the same tool part."""
    return f"mcpcall_{approval_id}"


def _answered_approvals(response: httpx.Response) -> list[str]:
    """The approval ids the request answered (``mcp_approval_response``)."""
    try:
        body = json.loads(response.request.content)
    except (ValueError, RuntimeError):
        return []
    items = body.get("input") if isinstance(body, dict) else None
    return [
        i["approval_request_id"]
        for i in items or ()
        if isinstance(i, dict)
        and i.get("type") == "mcp_approval_response"
        and isinstance(i.get("approval_request_id"), str)
    ]


def _openai(metadata: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = metadata.get("openai")
    return meta if isinstance(meta, Mapping) else {}


def _provider_result_items(part: ProviderToolResult, store: bool) -> list[dict[str, Any]]:
    """What OpenAI ran goes back as ``@ai-sdk/openai`` sends it: stored, by
    reference to its item; not stored, a web search as the
    ``web_search_call`` item it was (the rest cannot be sent, and is not)."""
    output = part.output
    if isinstance(output, dict) and output.get("type") == "execution-denied":
        return []
    item_id = _openai(part.provider_metadata).get("itemId") or part.tool_call_id
    if store:
        return [{"type": "item_reference", "id": item_id}]
    if part.name in ("web_search", "web_search_preview") and not part.is_error:
        call = _web_search_call(output, item_id)
        return [call] if call is not None else []
    return []


def _web_search_call(output: Any, item_id: str) -> dict[str, Any] | None:
    """A web search's result (``_web_search_output``) as its input item."""
    action = output.get("action") if isinstance(output, dict) else None
    if not isinstance(action, dict):
        return None
    kind = action.get("type")
    wire: dict[str, Any]
    if kind == "search":
        wire = {"type": "search"}
        if action.get("query") is not None:
            wire["query"] = action["query"]
        if action.get("queries") is not None:
            wire["queries"] = action["queries"]
        if output.get("sources") is not None:
            wire["sources"] = output["sources"]
    elif kind == "openPage":
        wire = {"type": "open_page", "url": action.get("url")}
    elif kind == "findInPage":
        wire = {"type": "find_in_page", "url": action.get("url"), "pattern": action.get("pattern")}
    else:
        return None
    return {"type": "web_search_call", "id": item_id, "status": "completed", "action": wire}


def _text_end(item: dict[str, Any], open_item: _Item | None) -> TextEnd:
    """A message item's end as @ai-sdk/openai ends its text: the item id
    (and phase) in the metadata, the annotations raw there too, and the
    citations in ai@7's form."""
    item_id = item.get("id") or (open_item.item_id if open_item is not None else "")
    meta: dict[str, Any] = {"itemId": item_id}
    phase = item.get("phase") or (open_item.phase if open_item is not None else None)
    if phase is not None:
        meta["phase"] = phase
    annotations = open_item.annotations if open_item is not None else []
    if annotations:
        meta["annotations"] = annotations
    citations = [_citation(a) for a in annotations if a.get("type") != "file_path"]
    return TextEnd({"openai": meta}, citations or None)


def _citation(annotation: dict[str, Any]) -> dict[str, Any]:
    """An annotation as ai@7's text-end ``citations`` hold it (the AI SDK's
    ``mapOpenAIResponsesCitations``)."""
    kind = annotation.get("type")
    source: dict[str, Any]
    if kind == "url_citation":
        url = annotation.get("url")
        source = {"type": "source", "sourceType": "url", "id": url, "url": url}
        if annotation.get("title") is not None:
            source["title"] = annotation["title"]
    else:
        filename = annotation.get("filename")
        metadata: dict[str, Any] = {"type": kind, "fileId": annotation.get("file_id")}
        if kind == "container_file_citation":
            metadata["containerId"] = annotation.get("container_id")
        else:
            metadata["index"] = annotation.get("index")
        source = {
            "type": "source",
            "sourceType": "document",
            "id": annotation.get("file_id"),
            "mediaType": "text/plain",
            "title": filename,
            "filename": filename,
            "providerMetadata": {"openai": metadata},
        }
    out: dict[str, Any] = {"source": source}
    if "start_index" in annotation:
        out["startIndex"] = annotation.get("start_index")
        out["endIndex"] = annotation.get("end_index")
    return out


def _usage(raw: Mapping[str, Any]) -> Usage:
    return Usage(
        input_tokens=int_field(raw, "input_tokens"),
        output_tokens=int_field(raw, "output_tokens"),
        reasoning_tokens=int_field(raw.get("output_tokens_details"), "reasoning_tokens"),
        cached_input_tokens=int_field(raw.get("input_tokens_details"), "cached_tokens"),
    )


def _stream_error(error: Any) -> ModelResponseError:
    if isinstance(error, dict):
        code = error.get("code") or error.get("type") or "error"
        message = error.get("message", "")
    else:
        code, message = "error", str(error)
    exc = ModelResponseError(f"the model stream carried an error ({code}): {message}")
    exc.retryable = code in _RETRYABLE_CODES
    return exc


def _web_search_output(action: Any) -> dict[str, Any]:
    if not isinstance(action, dict):
        return {}
    kind = action.get("type")
    if kind == "search":
        out: dict[str, Any] = {"action": {"type": "search"}}
        if action.get("query") is not None:
            out["action"]["query"] = action["query"]
        if action.get("queries") is not None:
            out["action"]["queries"] = action["queries"]
        if action.get("sources") is not None:
            out["sources"] = action["sources"]
        return out
    if kind == "open_page":
        return {"action": {"type": "openPage", "url": action.get("url")}}
    if kind == "find_in_page":
        return {"action": {"type": "findInPage", "url": action.get("url"), "pattern": action.get("pattern")}}
    return {}


def _plain_url(url: str) -> str:
    """``url`` without the ``utm_source`` parameter OpenAI adds to cited
    links."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "utm_source"]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _source_id() -> str:
    return f"src_{uuid.uuid4().hex[:24]}"


def _annotation(annotation: dict[str, Any]) -> list[ModelEvent]:
    kind = annotation.get("type")
    source_id = _source_id()
    if kind == "url_citation":
        return [SourceUrl(source_id, annotation.get("url", ""), annotation.get("title"))]
    if kind in ("file_citation", "container_file_citation"):
        filename = annotation.get("filename") or annotation.get("file_id", "")
        metadata: dict[str, Any] = {"type": kind, "fileId": annotation.get("file_id")}
        if kind == "file_citation":
            metadata["index"] = annotation.get("index")
        else:
            metadata["containerId"] = annotation.get("container_id")
        return [SourceDocument(source_id, "text/plain", filename, filename, {"openai": metadata})]
    if kind == "file_path":
        file_id = annotation.get("file_id", "")
        metadata = {"type": kind, "fileId": file_id, "index": annotation.get("index")}
        return [SourceDocument(source_id, "application/octet-stream", file_id, file_id, {"openai": metadata})]
    return []


_PROVIDER = "This model (OpenAI Responses)"


def responses_user_content(message: UserMessage, who: str = _PROVIDER) -> list[dict[str, Any]]:
    """A user message as Responses content, files as ``@ai-sdk/openai``'s
    Responses model sends them: ``input_image`` (a ``data:`` URL, or the
    image's own ``https:`` URL) and, for PDFs, ``input_file`` with
    ``file_data``; any other type can't be sent (``UnsupportedFileError``,
    naming ``who``: the Agents SDK adapter sends the same items)."""
    if not message.files:
        return [{"type": "input_text", "text": message.content}]
    content: list[dict[str, Any]] = []
    for file in message.ordered():
        index = len(content)
        if isinstance(file, str):
            content.append({"type": "input_text", "text": file})
            continue
        if is_image(file):
            url = file.url if file.load is None and file.url.startswith("https://") else data_url(file, who)
            content.append({"type": "input_image", "image_url": url})
        elif is_pdf(file):
            name = file.filename or f"part-{index}.pdf"
            content.append({"type": "input_file", "filename": name, "file_data": data_url(file, who)})
        else:
            raise UnsupportedFileError(who, file.media_type, file.filename, "it takes images and PDFs")
    return content
