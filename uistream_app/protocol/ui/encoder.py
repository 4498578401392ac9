"""``UIMessageEncoder``: source events in, well-formed ai@7 UI chunks out.

The encoder is a state machine over one assistant message. It never does
I/O and never raises on odd input: whatever order events arrive in, the
chunks it returns form a stream the AI SDK accepts. Its rules are the
encoder rules of docs/protocols.md; "rule N" in this module means encoder
rule N there.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import orjson

from .. import events as ev
from ..events import FINISH_REASONS, Event
from .chunks import Chunk
from .parts import is_tool_type

__all__ = [
    "MASKED_ERROR_TEXT",
    "UIMessageEncoder",
    "normalize_finish_reason",
    "output_value",
    "parse_tool_input",
]

#: What the wire says when the real error is only logged: provider and
#: transport text can quote a user's prompt back.
MASKED_ERROR_TEXT: Final = "An error occurred."

_FINISH_ALIASES: Final = {
    "tool_calls": "tool-calls",
    "tool_use": "tool-calls",
    "function_call": "tool-calls",
    "content_filter": "content-filter",
    "end_turn": "stop",
    "max_tokens": "length",
}


_REASONING_ID: Final = re.compile(r"reasoning-(\d{1,9})")

_STREAMING: Final = 0
_AVAILABLE: Final = 1
_INPUT_ERROR: Final = 2


def normalize_finish_reason(reason: str | None) -> str | None:
    """A provider's finish reason in the ai@7 vocabulary; ``other`` for a
    word it does not know."""
    if reason is None or reason in FINISH_REASONS:
        return reason
    return _FINISH_ALIASES.get(reason, "other")


def parse_tool_input(tool_name: str, text: str) -> Any:
    """A tool call's argument text as JSON (an empty text is ``{}``).

    Raises ``ValueError`` with the text the client and the model are shown;
    the tool loop parses with this too, so both report the same words.
    """
    if not text.strip():
        return {}
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"Invalid JSON in arguments of {tool_name}: {exc}") from None


def output_value(content: Any) -> Any:
    """Rule 7: a tool's output as the JSON value the chunk carries."""
    if isinstance(content, str):
        try:
            return orjson.loads(content)
        except orjson.JSONDecodeError:
            return content
    return content


def _with(chunk: Chunk, **optional: Any) -> Chunk:
    """Add the optional fields that are set (rule: absent, never null)."""
    for key, value in optional.items():
        if value is not None:
            chunk[key] = value
    return chunk


class _Part:
    """The streamed parts of one kind (``text`` or ``reasoning``): the id
    of the open one, if any, and the number the next one's id takes."""

    __slots__ = ("delta_type", "end_type", "kind", "next", "open", "start_type")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.start_type = f"{kind}-start"
        self.delta_type = f"{kind}-delta"
        self.end_type = f"{kind}-end"
        self.open: str | None = None
        self.next = 0


class UIMessageEncoder:
    """Folds source events into UI message chunks for one message.

    ``feed(event)`` returns the chunks that event produces (often one,
    sometimes none); ``finish()``, ``error(text)`` and ``abort()`` end the
    message. ``done`` tells whether it has ended.
    """

    __slots__ = (
        "_approvals",
        "_dispatch",
        "_dynamic_calls",
        "_reasoning",
        "_started",
        "_step_open",
        "_text",
        "_tool_calls",
        "done",
        "finish_metadata",
        "finish_reason",
        "message_id",
        "message_metadata",
        "usage",
    )

    def __init__(
        self,
        message_id: str | None = None,
        message_metadata: Any = None,
        *,
        known_tool_calls: Iterable[str] = (),
        continues: Iterable[Mapping[str, Any]] = (),
        finish_metadata: Callable[[], Any] | None = None,
    ) -> None:
        self.message_id = message_id
        self.message_metadata = message_metadata
        #: Called when the message finishes normally: its value (unless
        #: None) is the ``finish`` chunk's ``messageMetadata``, as the SDK's
        #: ``messageMetadata`` callback puts it there (usage, timings).
        self.finish_metadata = finish_metadata
        self.done = False
        self.finish_reason: str | None = None
        self.usage: dict[str, int] = {}
        self._started = False
        self._step_open = False
        self._text = _Part("text")
        self._reasoning = _Part("reasoning")
        # toolCallId -> _STREAMING, _AVAILABLE or _INPUT_ERROR. Calls the
        # continued message already holds count as available.
        self._tool_calls: dict[str, int] = dict.fromkeys(known_tool_calls, _AVAILABLE)
        # The approval each call of this message holds (requested in this
        # run or, for a continuation, before), by toolCallId: a response to
        # any other id (one never requested, or one a later request for the
        # same call replaced) would make the SDK throw (no tool invocation
        # for it).
        self._approvals: dict[str, str] = {}
        for part in continues:
            self._count_continued(part)
        # Calls opened as dynamic: every later chunk of the call says so, or
        # the SDK looks for a static part and creates a duplicate (ai@6/7)
        # or throws (ai@5).
        self._dynamic_calls: set[str] = set()
        self._dispatch: dict[type, Callable[[Any], list[Chunk]]] = {
            ev.TextDelta: self._text_delta,
            ev.ReasoningDelta: self._reasoning_delta,
            ev.ToolCallDelta: self._tool_call_delta,
            ev.TextEnd: self._text_end,
            ev.ReasoningEnd: self._reasoning_end,
            ev.ToolCallStart: self._tool_call_start,
            ev.ToolCall: self._tool_call,
            ev.ToolResult: self._tool_result,
            ev.ToolInputError: self._tool_input_error,
            ev.ToolApprovalRequest: self._tool_approval_request,
            ev.ToolApprovalResponse: self._tool_approval_response,
            ev.ToolDenied: self._tool_denied,
            ev.Usage: self._usage,
            ev.Finish: self._finish_event,
            ev.StepFinished: self._step_finished,
            ev.Done: self._done,
            ev.SourceUrl: self._source_url,
            ev.SourceDocument: self._source_document,
            ev.File: self._file,
            ev.Data: self._data,
            ev.MessageMetadata: self._message_metadata,
        }

    def _count_continued(self, part: Mapping[str, Any]) -> None:
        """Rules 2 and 6 for one part of the continued message."""
        kind = part.get("type")
        if kind == "text":
            self._text.next += 1
        elif kind == "reasoning":
            own = part.get("id")
            match = _REASONING_ID.fullmatch(own) if isinstance(own, str) else None
            self._reasoning.next = max(self._reasoning.next + 1, int(match.group(1)) + 1 if match else 0)
        elif is_tool_type(kind):
            call_id = part.get("toolCallId")
            if isinstance(call_id, str):
                self._tool_calls[call_id] = _AVAILABLE
            approval = part.get("approval")
            if isinstance(call_id, str) and isinstance(approval, Mapping) and isinstance(approval.get("id"), str):
                self._approvals[call_id] = approval["id"]

    # -- public ---------------------------------------------------------------

    def feed(self, event: Event) -> list[Chunk]:
        """The chunks ``event`` produces; ``[]`` once the message is over."""
        if self.done:
            return []
        handler = self._dispatch.get(type(event))
        if handler is None:
            raise TypeError(f"not a source event: {event!r}")
        return handler(event)

    def finish(self, reason: str | None = None) -> list[Chunk]:
        """End the message normally (rules 4, 8, 9)."""
        if self.done:
            return []
        if reason is not None:
            self.finish_reason = normalize_finish_reason(reason)
        out: list[Chunk] = []
        self._ensure_started(out)
        self._close_parts(out)
        self._close_step(out)
        chunk: Chunk = {"type": "finish"}
        if self.finish_reason is not None:
            chunk["finishReason"] = self.finish_reason
        if self.finish_metadata is not None:
            metadata = self.finish_metadata()
            if metadata is not None:
                chunk["messageMetadata"] = metadata
        out.append(chunk)
        self.done = True
        return out

    def error(self, error_text: str = MASKED_ERROR_TEXT) -> list[Chunk]:
        """End the message with an ``error`` chunk carrying ``error_text``
        as given: pass the masked text for provider or transport errors."""
        if self.done:
            return []
        out: list[Chunk] = []
        self._ensure_started(out)
        self._close_parts(out)
        out.append({"type": "error", "errorText": error_text})
        self.done = True
        return out

    def abort(self, reason: str | None = None) -> list[Chunk]:
        """End the message as stopped on purpose (``abort``): open parts
        close so what was sent stays readable."""
        if self.done:
            return []
        out: list[Chunk] = []
        if self._started:
            self._close_parts(out)
        else:
            self._ensure_started(out)
        out.append(_with({"type": "abort"}, reason=reason))
        self.done = True
        return out

    # -- state helpers ------------------------------------------------------------

    def resume(self) -> None:
        """The message's stream was begun by an earlier writer of the same
        log (a run continued after its process died): no ``start`` chunk
        again; the next part opens a step."""
        self._started = True

    def _ensure_started(self, out: list[Chunk]) -> None:
        if not self._started:
            self._started = True
            self._step_open = True
            start: Chunk = {"type": "start"}
            if self.message_id is not None:
                start["messageId"] = self.message_id
            if self.message_metadata is not None:
                start["messageMetadata"] = self.message_metadata
            out.append(start)
            out.append({"type": "start-step"})

    def _ensure_message_started(self, out: list[Chunk]) -> None:
        """``start`` without a step: what a continuation's answers to its
        pending calls (outputs, denials) come after, as in ``streamText``,
        whose model step opens only when the model speaks (rule 1)."""
        if not self._started:
            self._started = True
            start: Chunk = {"type": "start"}
            if self.message_id is not None:
                start["messageId"] = self.message_id
            if self.message_metadata is not None:
                start["messageMetadata"] = self.message_metadata
            out.append(start)

    def _open_step(self, out: list[Chunk]) -> None:
        if not self._started:
            self._ensure_started(out)
        elif not self._step_open:
            self._step_open = True
            out.append({"type": "start-step"})

    def _close(self, part: _Part, out: list[Chunk], provider_metadata: Any = None) -> None:
        if part.open is not None:
            chunk: Chunk = {"type": part.end_type, "id": part.open}
            if provider_metadata is not None:
                chunk["providerMetadata"] = provider_metadata
            out.append(chunk)
            part.open = None

    def _close_parts(self, out: list[Chunk]) -> None:
        # Rule 3 means at most one of them is open.
        self._close(self._text, out)
        self._close(self._reasoning, out)

    def _start_part(self, part: _Part, other: _Part, delta: str) -> list[Chunk]:
        """A delta of ``part``'s kind while none is open: the step opens if
        it has not, ``other`` closes (rule 3), a new part starts."""
        out: list[Chunk] = []
        self._open_step(out)
        self._close(other, out)
        part_id = part.open = f"{part.kind}-{part.next}"
        part.next += 1
        out.append({"type": part.start_type, "id": part_id})
        out.append({"type": part.delta_type, "id": part_id, "delta": delta})
        return out

    def _dynamic(self, call_id: str, flag: bool | None) -> bool | None:
        """``True`` for a call opened (or now said to be) dynamic, else None."""
        if flag:
            self._dynamic_calls.add(call_id)
            return True
        return True if call_id in self._dynamic_calls else None

    def _close_step(self, out: list[Chunk]) -> None:
        if self._step_open:
            self._step_open = False
            out.append({"type": "finish-step"})

    def _input_start(
        self,
        out: list[Chunk],
        call_id: str,
        tool_name: str,
        dynamic: bool | None,
        provider_executed: bool | None = None,
        title: str | None = None,
    ) -> None:
        """A call's ``tool-input-start``, after closing the open text or
        reasoning part (rule 3)."""
        self._close_parts(out)
        out.append(
            _with(
                {"type": "tool-input-start", "toolCallId": call_id, "toolName": tool_name},
                providerExecuted=provider_executed,
                dynamic=dynamic,
                title=title,
            )
        )

    def _input_error(
        self,
        out: list[Chunk],
        call_id: str,
        tool_name: str,
        tool_input: Any,
        error_text: str,
        dynamic: bool | None,
        provider_executed: bool | None = None,
        title: str | None = None,
    ) -> None:
        """A call's ``tool-input-error``; the call takes no other input."""
        self._tool_calls[call_id] = _INPUT_ERROR
        out.append(
            _with(
                {
                    "type": "tool-input-error",
                    "toolCallId": call_id,
                    "toolName": tool_name,
                    "input": tool_input,
                    "errorText": error_text,
                },
                providerExecuted=provider_executed,
                dynamic=dynamic,
                title=title,
            )
        )

    # -- handlers -------------------------------------------------------------------

    def _text_delta(self, event: ev.TextDelta) -> list[Chunk]:
        part = self._text.open
        if part is not None:  # an open part implies an open step (rule 4)
            return [{"type": "text-delta", "id": part, "delta": event.text}]
        return self._start_part(self._text, self._reasoning, event.text)

    def _reasoning_delta(self, event: ev.ReasoningDelta) -> list[Chunk]:
        part = self._reasoning.open
        if part is not None:
            return [{"type": "reasoning-delta", "id": part, "delta": event.text}]
        return self._start_part(self._reasoning, self._text, event.text)

    def _text_end(self, event: ev.TextEnd) -> list[Chunk]:
        out: list[Chunk] = []
        self._close(self._text, out)
        return out

    def _reasoning_end(self, event: ev.ReasoningEnd) -> list[Chunk]:
        out: list[Chunk] = []
        self._close(self._reasoning, out, event.provider_metadata)
        return out

    def _tool_call_start(self, event: ev.ToolCallStart) -> list[Chunk]:
        if event.tool_call_id in self._tool_calls:
            return []  # a duplicate start would be a second part for one call
        out: list[Chunk] = []
        self._open_step(out)
        self._tool_calls[event.tool_call_id] = _STREAMING
        if event.dynamic:
            self._dynamic_calls.add(event.tool_call_id)
        self._input_start(out, event.tool_call_id, event.tool_name, event.dynamic, event.provider_executed, event.title)
        return out

    def _tool_call_delta(self, event: ev.ToolCallDelta) -> list[Chunk]:
        # Rule 6: only a started, still-streaming call grows.
        if self._tool_calls.get(event.tool_call_id) != _STREAMING:
            return []
        out: list[Chunk] = []
        if not self._step_open:
            self._open_step(out)
        out.append({"type": "tool-input-delta", "toolCallId": event.tool_call_id, "inputTextDelta": event.delta})
        return out

    def _tool_call(self, event: ev.ToolCall) -> list[Chunk]:
        call_id = event.tool_call_id
        state = self._tool_calls.get(call_id)
        if state is not None and state != _STREAMING:
            return []  # the call's input is already complete
        out: list[Chunk] = []
        self._open_step(out)
        dynamic = self._dynamic(call_id, event.dynamic)
        if state is None:
            self._input_start(out, call_id, event.tool_name, dynamic, event.provider_executed, event.title)
        self._tool_calls[call_id] = _AVAILABLE
        try:
            value = parse_tool_input(event.tool_name, event.input)
        except ValueError as exc:
            self._input_error(
                out, call_id, event.tool_name, event.input, str(exc), dynamic, event.provider_executed, event.title
            )
            return out
        out.append(
            _with(
                {"type": "tool-input-available", "toolCallId": call_id, "toolName": event.tool_name, "input": value},
                providerExecuted=event.provider_executed,
                dynamic=dynamic,
                title=event.title,
            )
        )
        return out

    def _tool_input_error(self, event: ev.ToolInputError) -> list[Chunk]:
        call_id = event.tool_call_id
        if self._tool_calls.get(call_id) == _INPUT_ERROR:
            return []  # already reported (its argument text was not JSON)
        out: list[Chunk] = []
        self._open_step(out)
        dynamic = self._dynamic(call_id, event.dynamic)
        if call_id not in self._tool_calls:
            self._input_start(out, call_id, event.tool_name, dynamic)
        self._input_error(out, call_id, event.tool_name, event.input, event.error_text, dynamic)
        return out

    def _tool_result(self, event: ev.ToolResult) -> list[Chunk]:
        if event.tool_call_id not in self._tool_calls:
            return []  # rule 6: the SDK throws on an output for an unknown call
        out: list[Chunk] = []
        self._ensure_message_started(out)
        dynamic = self._dynamic(event.tool_call_id, event.dynamic)
        if event.is_error:
            text = event.content if isinstance(event.content, str) else orjson.dumps(event.content).decode()
            out.append(
                _with(
                    {"type": "tool-output-error", "toolCallId": event.tool_call_id, "errorText": text},
                    providerExecuted=event.provider_executed,
                    dynamic=dynamic,
                )
            )
        else:
            out.append(
                _with(
                    {
                        "type": "tool-output-available",
                        "toolCallId": event.tool_call_id,
                        "output": output_value(event.content),
                    },
                    providerExecuted=event.provider_executed,
                    dynamic=dynamic,
                    preliminary=event.preliminary,
                )
            )
        return out

    def _tool_approval_request(self, event: ev.ToolApprovalRequest) -> list[Chunk]:
        if event.tool_call_id not in self._tool_calls:
            return []
        self._approvals[event.tool_call_id] = event.approval_id
        out: list[Chunk] = []
        self._ensure_message_started(out)
        out.append(
            _with(
                {"type": "tool-approval-request", "approvalId": event.approval_id, "toolCallId": event.tool_call_id},
                reason=event.reason,
                isAutomatic=True if event.is_automatic else None,
            )
        )
        return out

    def _tool_approval_response(self, event: ev.ToolApprovalResponse) -> list[Chunk]:
        """An approval policy's own answer (``streamText``'s): only for a
        request this message made and its call still holds, which the SDK
        looks the approval up by."""
        if event.approval_id not in self._approvals.values():
            return []
        out: list[Chunk] = []
        self._ensure_message_started(out)
        out.append(
            _with(
                {"type": "tool-approval-response", "approvalId": event.approval_id, "approved": event.approved},
                reason=event.reason,
            )
        )
        return out

    def _tool_denied(self, event: ev.ToolDenied) -> list[Chunk]:
        if event.tool_call_id not in self._tool_calls:
            return []
        out: list[Chunk] = []
        self._ensure_message_started(out)
        out.append({"type": "tool-output-denied", "toolCallId": event.tool_call_id})
        return out

    def _usage(self, event: ev.Usage) -> list[Chunk]:
        usage = self.usage
        for name in ("input_tokens", "output_tokens", "reasoning_tokens", "cached_input_tokens"):
            value = getattr(event, name)
            if value is not None:
                usage[name] = usage.get(name, 0) + value
        return []

    def _finish_event(self, event: ev.Finish) -> list[Chunk]:
        out: list[Chunk] = []
        self._ensure_started(out)
        self._close_parts(out)
        self.finish_reason = normalize_finish_reason(event.reason)
        return out

    def _step_finished(self, event: ev.StepFinished) -> list[Chunk]:
        out: list[Chunk] = []
        self._ensure_started(out)
        self._close_parts(out)
        self._close_step(out)
        return out

    def _done(self, event: ev.Done) -> list[Chunk]:
        return self.finish(event.reason)

    def _in_step(self, chunk: Chunk) -> list[Chunk]:
        """``chunk``, after opening the step if none is open."""
        out: list[Chunk] = []
        self._open_step(out)
        out.append(chunk)
        return out

    def _source_url(self, event: ev.SourceUrl) -> list[Chunk]:
        return self._in_step(
            _with(
                {"type": "source-url", "sourceId": event.source_id, "url": event.url},
                title=event.title,
                providerMetadata=event.provider_metadata,
            )
        )

    def _source_document(self, event: ev.SourceDocument) -> list[Chunk]:
        return self._in_step(
            _with(
                {
                    "type": "source-document",
                    "sourceId": event.source_id,
                    "mediaType": event.media_type,
                    "title": event.title,
                },
                filename=event.filename,
                providerMetadata=event.provider_metadata,
            )
        )

    def _file(self, event: ev.File) -> list[Chunk]:
        return self._in_step(
            _with(
                {"type": "file", "url": event.url, "mediaType": event.media_type},
                providerMetadata=event.provider_metadata,
            )
        )

    def _data(self, event: ev.Data) -> list[Chunk]:
        out: list[Chunk] = []
        self._ensure_started(out)
        chunk: Chunk = {"type": "data-" + event.name, "data": event.data}
        if event.id is not None:
            chunk["id"] = event.id
        if event.transient:
            chunk["transient"] = True
        out.append(chunk)
        return out

    def _message_metadata(self, event: ev.MessageMetadata) -> list[Chunk]:
        out: list[Chunk] = []
        self._ensure_started(out)
        out.append({"type": "message-metadata", "messageMetadata": event.metadata})
        return out
