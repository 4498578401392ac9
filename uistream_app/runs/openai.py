"""An OpenAI-compatible chat-completions model over ``httpx``.

Speaks ``POST {base_url}/chat/completions`` with ``stream: true`` to OpenAI
and the servers that copy its API (vLLM, llama.cpp, Ollama, LM Studio,
OpenRouter, DeepSeek, Groq…), and turns the chunks into the model port's
events (``runs.model``):

* ``delta.content`` → ``TextDelta``, also when it is a list of parts
  (Mistral: ``text`` parts are answer, ``thinking`` parts reasoning);
  ``delta.reasoning_content`` (or ``delta.reasoning``, where a server sends
  it) → ``ReasoningDelta``, closed by ``ReasoningEnd`` when other output
  begins;
* ``delta.tool_calls[]`` fragments, keyed by ``index`` (parallel calls
  interleave freely): the first fragment of an index → ``ToolCallStart``,
  each argument fragment → ``ToolCallDelta``; when the choice finishes,
  one ``ToolCall`` per index in index order with the whole argument text
  (a call that never received a name is an error, as in the AI SDK);
* ``usage`` (asked for with ``stream_options.include_usage``; the last one
  seen wins, for servers that repeat it cumulatively) → one ``Usage``;
* ``finish_reason`` mapped to the UI vocabulary (``tool_calls`` →
  ``tool-calls``, ``content_filter`` → ``content-filter``, unknown →
  ``other``) → the last event, ``Finish``.

Errors are typed (``failures``): a non-2xx answer is ``ModelHTTPError``
(retried for 429 and 5xx, honouring ``Retry-After``, only before the first
byte of a successful response: once streaming has begun nothing is
retried); a connection that cannot be made is retried likewise and then
``ModelConnectionError``; a connection dropped mid-stream, or a stream that
ends before a finish reason, is ``ModelConnectionError`` (a ``[DONE]``
before any finish reason is ``ModelResponseError``: the AI SDK reports
both as errors, not as a normal stop); a timeout is
``ModelTimeoutError``; a ``data:`` line that is not JSON, or an in-band
``{"error": …}``, is ``ModelResponseError``.

Closing the event iterator closes the HTTP response (and the client, when
this object made it): no read-ahead past the network read in hand, no
orphaned request. Without a ``client`` argument each call makes its own
``httpx.AsyncClient``, because a client is bound to the event loop it
first ran in and Django may run async views in a new loop per request
(the TLS context, the costly part, is shared); pass a long-lived client
to reuse connections where the loop is one.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Unpack

import httpx

from ..protocol.events import (
    Finish,
    ReasoningDelta,
    ReasoningEnd,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from ._files import data_url, is_image, is_pdf
from ._http import HTTPModelBase, HTTPOptions, int_field, json_object, sse_events
from .failures import ModelConnectionError, ModelResponseError, UnsupportedFileError
from .messages import AssistantMessage, ModelMessage, SystemMessage, ToolSpec, UserMessage
from .model import ModelEvent
from .openai_responses import OpenAIResponsesModel

__all__ = ["FINISH_REASON_MAP", "OpenAIChatModel", "OpenAIResponsesModel", "map_finish_reason"]

FINISH_REASON_MAP: Final[Mapping[str, str]] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "content_filter": "content-filter",
    "error": "error",
}


def map_finish_reason(reason: str | None) -> str:
    """A chat-completions ``finish_reason`` in the UI vocabulary."""
    if reason is None:
        return "stop"
    return FINISH_REASON_MAP.get(reason, "other")


@dataclass(slots=True)
class _PendingCall:
    id: str
    name: str
    arguments: list[str] = field(default_factory=list)
    started: bool = False


@dataclass(slots=True)
class _StreamState:
    calls: dict[int, _PendingCall] = field(default_factory=dict)
    reasoning_open: bool = False
    finish_reason: str | None = None
    flushed: bool = False
    usage: Usage | None = None


class OpenAIChatModel(HTTPModelBase):
    """A chat-completions model (see the module docstring)."""

    path = "/chat/completions"
    default_base_url = "https://api.openai.com/v1"

    def __init__(
        self,
        model: str,
        *,
        include_usage: bool = True,
        **options: Unpack[HTTPOptions],
    ) -> None:
        super().__init__(model, **options)
        self.include_usage = include_usage

    # -- request ---------------------------------------------------------------

    def api_body(self, messages: Sequence[ModelMessage], tools: Sequence[ToolSpec]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [self.message_to_wire(m) for m in messages],
            "stream": True,
        }
        if self.include_usage:
            body["stream_options"] = {"include_usage": True}
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": dict(t.parameters)},
                }
                for t in tools
            ]
        return body

    @staticmethod
    def message_to_wire(message: ModelMessage) -> dict[str, Any]:
        """One model message as a chat-completions message. Reasoning is
        not sent back: the API has no field for it (and DeepSeek rejects
        ``reasoning_content`` in input)."""
        if isinstance(message, SystemMessage):
            return {"role": "system", "content": message.content}
        if isinstance(message, UserMessage):
            if not message.files:
                return {"role": "user", "content": message.content}
            return {"role": "user", "content": user_content(message)}
        if isinstance(message, AssistantMessage):
            wire: dict[str, Any] = {"role": "assistant", "content": message.content or None}
            if message.tool_calls:
                wire["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments or "{}"}}
                    for c in message.tool_calls
                ]
            return wire
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}

    # -- the stream --------------------------------------------------------------

    async def _events(self, response: httpx.Response) -> AsyncIterator[ModelEvent]:
        state = _StreamState()
        done = False
        async for sse in sse_events(response):
            payload = sse.data
            if payload == "[DONE]":
                done = True
                break
            obj = json_object(payload, "chunk")
            for event in self._chunk_events(obj, state):
                yield event
        if state.finish_reason is None:
            if not done:
                raise ModelConnectionError("the model stream ended before the model finished")
            raise ModelResponseError("the model stream ended ([DONE]) without a finish reason")
        for event in self._flush(state):
            yield event
        if state.usage is not None:
            yield state.usage
        yield Finish(map_finish_reason(state.finish_reason))

    def _chunk_events(self, obj: dict[str, Any], state: _StreamState) -> list[ModelEvent]:
        out: list[ModelEvent] = []
        error = obj.get("error")
        if error:
            message = error.get("message") if isinstance(error, dict) else error
            raise ModelResponseError(f"the model stream carried an error: {message}")
        usage = obj.get("usage")
        if isinstance(usage, dict):
            state.usage = _usage(usage)
        choices = obj.get("choices")
        if not choices:
            return out
        choice = choices[0]
        delta = choice.get("delta") or {}
        thought = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(thought, str) and thought:
            state.reasoning_open = True
            out.append(ReasoningDelta(thought))
        content = delta.get("content")
        if isinstance(content, str):
            if content:
                self._close_reasoning(state, out)
                out.append(TextDelta(content))
        elif isinstance(content, list):
            self._content_parts(content, state, out)
        tool_calls = delta.get("tool_calls")
        if tool_calls:
            self._close_reasoning(state, out)
            for position, fragment in enumerate(tool_calls):
                self._tool_fragment(fragment, position, state, out)
        reason = choice.get("finish_reason")
        if reason:
            state.finish_reason = reason
            out.extend(self._flush(state))
        return out

    def _content_parts(self, parts: list[Any], state: _StreamState, out: list[ModelEvent]) -> None:
        """``delta.content`` as a list of parts (Mistral's magistral models):
        ``{"type": "text", "text"}`` is answer text, ``{"type": "thinking",
        "thinking": [{"type": "text", "text"}…]}`` is reasoning."""
        for part in parts:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind == "text":
                text = part.get("text")
                if isinstance(text, str) and text:
                    self._close_reasoning(state, out)
                    out.append(TextDelta(text))
            elif kind == "thinking":
                for text in _thinking_texts(part.get("thinking")):
                    state.reasoning_open = True
                    out.append(ReasoningDelta(text))

    @staticmethod
    def _close_reasoning(state: _StreamState, out: list[ModelEvent]) -> None:
        if state.reasoning_open:
            state.reasoning_open = False
            out.append(ReasoningEnd())

    @staticmethod
    def _tool_fragment(fragment: dict[str, Any], position: int, state: _StreamState, out: list[ModelEvent]) -> None:
        index = fragment.get("index", position)
        function = fragment.get("function") or {}
        name = function.get("name")
        pending = state.calls.get(index)
        if pending is None:
            call_id = fragment.get("id") or f"call_{uuid.uuid4().hex[:24]}"
            pending = state.calls[index] = _PendingCall(call_id, "")
        if name and not pending.started:
            pending.name = name
            pending.started = True
            out.append(ToolCallStart(pending.id, name))
            if pending.arguments:
                out.append(ToolCallDelta(pending.id, "".join(pending.arguments)))
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            pending.arguments.append(arguments)
            if pending.started:
                out.append(ToolCallDelta(pending.id, arguments))

    @staticmethod
    def _flush(state: _StreamState) -> list[ModelEvent]:
        """The complete calls, once, in index order."""
        if state.flushed:
            return []
        state.flushed = True
        out: list[ModelEvent] = []
        if state.reasoning_open:
            state.reasoning_open = False
            out.append(ReasoningEnd())
        for index in sorted(state.calls):
            pending = state.calls[index]
            if not pending.name:
                raise ModelResponseError(f"the tool call {pending.id!r} never received a function name")
            if not pending.started:
                out.append(ToolCallStart(pending.id, pending.name))
            out.append(ToolCall(pending.id, pending.name, "".join(pending.arguments)))
        return out


def _thinking_texts(thinking: Any) -> list[str]:
    """The texts of a Mistral ``thinking`` part: a string, or a list of
    ``{"type": "text", "text"}`` chunks."""
    if isinstance(thinking, str):
        return [thinking] if thinking else []
    if not isinstance(thinking, list):
        return []
    return [c["text"] for c in thinking if isinstance(c, dict) and isinstance(c.get("text"), str) and c["text"]]


def _usage(raw: dict[str, Any]) -> Usage:
    return Usage(
        input_tokens=int_field(raw, "prompt_tokens"),
        output_tokens=int_field(raw, "completion_tokens"),
        reasoning_tokens=int_field(raw.get("completion_tokens_details"), "reasoning_tokens"),
        cached_input_tokens=int_field(raw.get("prompt_tokens_details"), "cached_tokens"),
    )


_PROVIDER = "This model (OpenAI chat completions)"


def user_content(message: UserMessage) -> list[dict[str, Any]]:
    """A user message with files as chat-completions content parts, as
    ``@ai-sdk/openai``'s chat model sends them: images as ``image_url`` (a
    ``data:`` URL, or the image's own ``https:`` URL), PDFs as ``file`` with
    ``file_data``; any other type can't be sent (``UnsupportedFileError``)."""
    content: list[dict[str, Any]] = []
    for file in message.ordered():
        index = len(content)
        if isinstance(file, str):
            content.append({"type": "text", "text": file})
            continue
        if is_image(file):
            url = file.url if file.load is None and file.url.startswith("https://") else data_url(file, _PROVIDER)
            content.append({"type": "image_url", "image_url": {"url": url}})
        elif is_pdf(file):
            name = file.filename or f"part-{index}.pdf"
            content.append({"type": "file", "file": {"filename": name, "file_data": data_url(file, _PROVIDER)}})
        else:
            raise UnsupportedFileError(_PROVIDER, file.media_type, file.filename, "it takes images and PDFs")
    return content
