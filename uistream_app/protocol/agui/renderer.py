"""Canonical UI message chunks → the AG-UI 1.0 event stream.

The canonical log speaks ai@7 (``protocol.ui.chunks``); ``AGUIRenderer``
turns one run's chunks into AG-UI events, as ``UIStreamRenderer`` turns them
into the UI message stream: pure (chunks in, bytes out), one instance per
stream, the same ``render`` / ``render_many`` / ``done`` API, so the views'
``render_subscription`` serves either dialect unchanged. A stored run's log
renders the same way, so any conversation can be served as AG-UI.

Invariant: whatever the chunks, the events pass both real clients' checks
(``AGUIVerifier``). The mapping is the AG-UI renderer rules of
docs/protocols.md ("rule N" in this module means AG-UI renderer rule N
there); the framing is SSE rules 1, 2 and 5. The input is never mutated.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, TypeAlias

import orjson

from ..ui.chunks import Chunk
from ..ui.render import DENIED_ERROR_TEXT, _dumps_lenient
from .events import ATTRIBUTABLE, AGUIEventFormatError, Event, validate_event
from .reducer import fold_messages

__all__ = [
    "APPROVAL_REASON",
    "APPROVAL_RESPONSE_SCHEMA",
    "CARRIER_TYPE",
    "CUSTOM_PREFIX",
    "ERROR_CODE",
    "INCOMPLETE_CODE",
    "PROGRESS_ACTIVITY",
    "STOPPED_CODE",
    "AGUIRenderer",
    "encode_event",
    "json_text",
    "now_ms",
]

#: ``activityType`` of a streaming tool's progress (rule 7).
PROGRESS_ACTIVITY: Final = "tool-progress"
#: The canonical chunk type that carries an AG-UI event (rule 11).
CARRIER_TYPE: Final = "data-agui-event"
#: The namespace of the CUSTOM events made from UI chunks (rule 10).
CUSTOM_PREFIX: Final = "uistream:"
#: ``RUN_ERROR.code`` for a run whose log ends in an ``error`` chunk.
ERROR_CODE: Final = "run_failed"
#: ``RUN_ERROR.code`` when the log ends without an end (``done()``).
INCOMPLETE_CODE: Final = "incomplete"
INCOMPLETE_TEXT: Final = "The stream ended before the run did."
#: ``RUN_ERROR.code`` of a hand-written agent's run stopped while something
#: was left open, so that no ``cancelled`` outcome could end it.
STOPPED_CODE: Final = "cancelled"
STOPPED_TEXT: Final = "The run was stopped."
#: ``Interrupt.reason`` of a tool approval: AG-UI's core value for an
#: interrupt bound to a tool call (rule 8).
APPROVAL_REASON: Final = "tool_call"
#: ``Interrupt.responseSchema`` of a tool approval: the ``resume`` payload
#: it takes (rule 8).
APPROVAL_RESPONSE_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved"],
}

#: Carried events that render as they are (rule 11); steps and subagents
#: are tracked as scopes.
_CARRIED: Final = frozenset(
    (
        "STATE_SNAPSHOT",
        "STATE_DELTA",
        "MESSAGES_SNAPSHOT",
        "ACTIVITY_SNAPSHOT",
        "ACTIVITY_DELTA",
        "RAW",
        "CUSTOM",
        "REASONING_ENCRYPTED_VALUE",
    )
)
_SCOPES: Final = frozenset(("STEP_STARTED", "STEP_FINISHED", "SUBAGENT_STARTED", "SUBAGENT_FINISHED", "SUBAGENT_ERROR"))
#: The events the client's reducer builds messages from: what a run with
#: ``history`` keeps for the snapshot at an interrupt (rule 14).
#: (Content is kept apart, see ``_Kept``.)
_FOLDED: Final = frozenset(
    (
        "TEXT_MESSAGE_START",
        "REASONING_MESSAGE_START",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_RESULT",
        "MESSAGES_SNAPSHOT",
        "ACTIVITY_SNAPSHOT",
        "ACTIVITY_DELTA",
    )
)
_CONTENT_OF: Final = {
    "TEXT_MESSAGE_START": "TEXT_MESSAGE_CONTENT",
    "REASONING_MESSAGE_START": "REASONING_MESSAGE_CONTENT",
}


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch: the default ``clock``."""
    return time.time_ns() // 1_000_000


def encode_event(event: Event) -> bytes:
    """One SSE frame: ``data: <compact JSON>\\n\\n``. What orjson refuses
    (a lone surrogate, an integer beyond 64 bits) takes the UI renderer's
    slower path, which still writes valid JSON."""
    try:
        return b"data: " + orjson.dumps(event) + b"\n\n"
    except TypeError:
        return b"data: " + _dumps_lenient(event) + b"\n\n"


def json_text(value: Any) -> str:
    """``value`` as compact JSON text (tool arguments, tool output)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return _dumps_lenient(value).decode()


def result_text(output: Any) -> str:
    """A tool output as ``TOOL_CALL_RESULT.content``: a string as it is,
    anything else as compact JSON (rule 7)."""
    return output if isinstance(output, str) else json_text(output)


class _Unset:
    pass


_UNSET: Final = _Unset()

#: An open text or reasoning part: its AG-UI message id, its owner (a
#: subagent run id or None), and where its deltas are kept (or None).
_Part: TypeAlias = tuple[str, str | None, list[str] | None]


@dataclass(slots=True)
class _Call:
    name: str
    parent: str
    owner: str | None
    deltas: list[str] = field(default_factory=list)
    value: Any = _UNSET  # the input, once known; None: known to have no JSON value
    emitted: bool = False


class _Kept:
    """A run's message events, kept for the snapshot at an interrupt (rule
    14). Content is not kept as events: each text or reasoning message's
    deltas go to one list (``deltas``, held by the open part so the hot
    path only appends), read back as one content event after its start.
    The fold reads the same text; a run's thousands of deltas do not stay
    alive as thousands of dicts."""

    __slots__ = ("_deltas", "_events")

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._deltas: dict[str, list[str]] = {}

    def deltas(self, message_id: str) -> list[str]:
        """Where the deltas of ``message_id`` go (one list per message: ids
        are unique per run, rule 3)."""
        return self._deltas.setdefault(message_id, [])

    def add(self, events: list[Event]) -> None:
        self._events += [e for e in events if e["type"] in _FOLDED]

    def events(self) -> list[Event]:
        out: list[Event] = []
        for event in self._events:
            out.append(event)
            content = _CONTENT_OF.get(event["type"])
            deltas = self._deltas.get(event["messageId"]) if content is not None else None
            if content is not None and deltas:
                out.append({"type": content, "messageId": event["messageId"], "delta": "".join(deltas)})
        return out


@dataclass(slots=True)
class _Scope:
    kind: str  # "ui-step" | "step" | "subagent"
    key: str  # step name or subagent run id
    owner: str | None


class AGUIRenderer:
    """AG-UI SSE bytes for one run's canonical chunks.

    ``render(chunk)`` gives the chunk's events (``b""`` when it makes none),
    ``render_many(chunks)`` those of several, ``done()`` what ends a stream
    whose log did not (usually ``b""``). ``events(chunk)`` and
    ``close_events()`` give the same events as dicts. ``clock`` returns
    integer milliseconds (default: the wall clock); fixtures pass a fixed
    one. ``metadata`` goes on ``RUN_STARTED``; ``history`` is the thread
    the run starts from (rules 13 and 14), ``continues`` makes the stream a
    continuation's (rule 13). ``state`` (a replay's: the shared state the
    run left, which its log does not carry) goes out first, in place of any
    state event of the log (rule 16). Make one per stream.
    """

    def __init__(
        self,
        thread_id: str,
        run_id: str,
        *,
        parent_run_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        history: Iterable[Mapping[str, Any]] | None = None,
        continues: bool = False,
        state: Any = _UNSET,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.parent_run_id = parent_run_id
        self.metadata = metadata
        self.clock = clock
        self.started = False
        self.terminated = False
        self._now = 0
        self._base = run_id
        self._used_ids: set[str] = set()
        self._texts: dict[str, _Part] = {}
        self._reasoning: dict[str, _Part] = {}
        self._calls: dict[str, _Call] = {}
        self._interrupts: dict[str, dict[str, Any]] = {}
        self._scopes: list[_Scope] = []
        self._used_subagents: set[str] = set()
        self._steps = 0
        self._tool_parents = 0
        self._parent: tuple[str, str | None] | None = None  # (message id, its owner)
        self._run_result: Any = None
        self._progress: dict[str, str] = {}  # tool call id → its progress activity message id
        self._dispatch: dict[str, Callable[[Chunk, list[Event]], None]] = {
            "start": self._start,
            "start-step": self._start_step,
            "finish-step": self._finish_step,
            "text-start": self._text_start,
            "text-delta": partial(self._part_delta, self._texts, "TEXT_MESSAGE_CONTENT"),
            "text-end": partial(self._part_end, self._texts, ("TEXT_MESSAGE_END",)),
            "reasoning-start": self._reasoning_start,
            "reasoning-delta": partial(self._part_delta, self._reasoning, "REASONING_MESSAGE_CONTENT"),
            "reasoning-end": partial(self._part_end, self._reasoning, ("REASONING_MESSAGE_END", "REASONING_END")),
            "tool-input-start": self._tool_input_start,
            "tool-input-delta": self._tool_input_delta,
            "tool-input-available": self._tool_input_available,
            "tool-input-error": self._tool_input_error,
            "tool-output-available": self._tool_output_available,
            "tool-output-error": self._tool_output_error,
            "tool-output-denied": self._tool_output_denied,
            "tool-approval-request": self._tool_approval_request,
            "tool-approval-response": self._tool_approval_response,
            "message-metadata": self._message_metadata,
            "finish": self._finish,
            "abort": self._abort,
            "error": self._error,
            CARRIER_TYPE: self._carried,
        }
        self.history = [dict(m) for m in history] if history is not None else None
        self.continues = continues
        self._state = state
        # What the snapshot at an interrupt folds onto the history (rule 14).
        self._kept: _Kept | None = _Kept() if self.history is not None else None
        for message in self.history or ():
            self._used_ids.add(message["id"])
            if not continues:
                continue
            for known in message.get("toolCalls") or ():
                self._calls[known["id"]] = _Call(
                    known["function"]["name"], message["id"], message.get("subagentRunId"), emitted=True
                )

    # -- public ---------------------------------------------------------------------

    def events(self, chunk: Chunk) -> list[Event]:
        """The AG-UI events ``chunk`` makes (``[]`` after the run ended)."""
        if self.terminated:
            return []
        out = self._batch()
        chunk_type = chunk.get("type")
        handler = self._dispatch.get(chunk_type) if isinstance(chunk_type, str) else None
        if handler is None:
            if isinstance(chunk_type, str):
                self._custom(chunk_type, chunk, out)
        else:
            handler(chunk, out)
        if self._kept is not None:
            self._kept.add(out)
        return out

    def render(self, chunk: Chunk) -> bytes:
        """The SSE events one chunk makes (often one, sometimes none)."""
        return b"".join([encode_event(e) for e in self.events(chunk)])

    def render_many(self, chunks: Iterable[Chunk]) -> bytes:
        """``render`` for each chunk, joined (the same bytes, faster)."""
        # The hot path: a text or reasoning delta of an open part is one
        # event built and framed here (measured: half the time of the general
        # path on the standard workload); everything else goes through
        # events(). The bytes are the same either way.
        frames: list[bytes] = []
        append = frames.append
        dumps = orjson.dumps
        texts, reasoning = self._texts, self._reasoning
        for chunk in chunks:
            kind = chunk.get("type")
            if kind == "text-delta" or kind == "reasoning-delta":
                parts = texts if kind == "text-delta" else reasoning
                entry = parts.get(chunk.get("id", ""))
                delta = chunk.get("delta")
                if entry is not None and not self.terminated and delta.__class__ is str:
                    if delta:
                        self._now = now = self.clock()
                        event_type = "TEXT_MESSAGE_CONTENT" if kind == "text-delta" else "REASONING_MESSAGE_CONTENT"
                        event: Event = {"type": event_type, "timestamp": now}
                        if entry[1] is not None:
                            event["subagentRunId"] = entry[1]
                        event["messageId"] = entry[0]
                        event["delta"] = delta
                        try:
                            append(b"data: " + dumps(event) + b"\n\n")
                        except TypeError:
                            append(encode_event(event))
                        if entry[2] is not None:
                            entry[2].append(delta)
                    continue
            for event in self.events(chunk):
                append(encode_event(event))
        return b"".join(frames)

    def close_events(self) -> list[Event]:
        """What ends the stream if its log did not: closes everything open
        and sends ``RUN_ERROR {code: "incomplete"}``; ``[]`` otherwise."""
        if self.terminated:
            return []
        out = self._batch()
        self._close_all(out, finished=False, reason=INCOMPLETE_TEXT)
        out.append({"type": "RUN_ERROR", "timestamp": self._now, "message": INCOMPLETE_TEXT, "code": INCOMPLETE_CODE})
        self.terminated = True
        return out

    def done(self) -> bytes:
        """``close_events`` framed: for a log that had no end, what closes it
        (rule 9); ``b""`` otherwise."""
        return b"".join([encode_event(e) for e in self.close_events()])

    # -- helpers ----------------------------------------------------------------------

    def _event(self, event_type: str, owner: str | None, fields: dict[str, Any]) -> Event:
        event: Event = {"type": event_type, "timestamp": self._now}
        if owner is not None:
            event["subagentRunId"] = owner
        event.update(fields)
        return event

    def _owner(self) -> str | None:
        for scope in reversed(self._scopes):
            if scope.kind == "subagent":
                return scope.key
        return None

    def _batch(self) -> list[Event]:
        """The start of the events one call makes: the clock read once for
        all of them, and ``RUN_STARTED`` first if the run had not started."""
        out: list[Event] = []
        self._now = self.clock()
        if not self.started:
            self._begin(out)
        return out

    def _begin(self, out: list[Event]) -> None:
        self.started = True
        event: Event = {"type": "RUN_STARTED", "timestamp": self._now}
        if self.metadata is not None:
            event["metadata"] = self.metadata
        event["threadId"] = self.thread_id
        event["runId"] = self.run_id
        if self.parent_run_id is not None:
            event["parentRunId"] = self.parent_run_id
        out.append(event)
        if self.history is not None and self.continues:
            out.append({"type": "MESSAGES_SNAPSHOT", "timestamp": self._now, "messages": self.history})
        if self._state is not _UNSET:
            out.append({"type": "STATE_SNAPSHOT", "timestamp": self._now, "snapshot": self._state})

    def _new_id(self, wanted: str) -> str:
        candidate, n = wanted, 1
        while candidate in self._used_ids:
            n += 1
            candidate = f"{wanted}-{n}"
        self._used_ids.add(candidate)
        return candidate

    def _custom(self, chunk_type: str, chunk: Chunk, out: list[Event]) -> None:
        value = {k: v for k, v in chunk.items() if k != "type"}
        out.append(self._event("CUSTOM", self._owner(), {"name": CUSTOM_PREFIX + chunk_type, "value": value}))

    def _metadata_event(self, metadata: Any, out: list[Event]) -> None:
        out.append(
            self._event("CUSTOM", self._owner(), {"name": CUSTOM_PREFIX + "message-metadata", "value": metadata})
        )

    def _close_parts(self, out: list[Event]) -> None:
        for agui_id, owner, _ in self._texts.values():
            out.append(self._event("TEXT_MESSAGE_END", owner, {"messageId": agui_id}))
        self._texts.clear()
        for agui_id, owner, _ in self._reasoning.values():
            out.append(self._event("REASONING_MESSAGE_END", owner, {"messageId": agui_id}))
            out.append(self._event("REASONING_END", owner, {"messageId": agui_id}))
        self._reasoning.clear()

    def _close_scope(self, scope: _Scope, out: list[Event], *, finished: bool, reason: str) -> None:
        if scope.kind == "subagent":
            if finished:
                out.append({"type": "SUBAGENT_FINISHED", "timestamp": self._now, "subagentRunId": scope.key})
            else:
                out.append(
                    {"type": "SUBAGENT_ERROR", "timestamp": self._now, "subagentRunId": scope.key, "message": reason}
                )
        else:
            out.append(self._event("STEP_FINISHED", scope.owner, {"stepName": scope.key}))

    def _close_all(self, out: list[Event], *, finished: bool, reason: str) -> None:
        self._close_parts(out)
        while self._scopes:
            self._close_scope(self._scopes.pop(), out, finished=finished, reason=reason)
        self._parent = None

    # -- lifecycle and steps ----------------------------------------------------------

    def _start(self, chunk: Chunk, out: list[Event]) -> None:
        message_id = chunk.get("messageId")
        if isinstance(message_id, str) and message_id:
            self._base = message_id
        metadata = chunk.get("messageMetadata")
        if metadata is not None:
            self._metadata_event(metadata, out)

    def _start_step(self, chunk: Chunk, out: list[Event]) -> None:
        for scope in self._scopes:
            if scope.kind == "ui-step":
                self._finish_step(chunk, out)
                break
        owner = self._owner()
        name = f"step-{self._steps}"
        self._steps += 1
        self._scopes.append(_Scope("ui-step", name, owner))
        self._parent = None
        out.append(self._event("STEP_STARTED", owner, {"stepName": name}))

    def _finish_step(self, chunk: Chunk, out: list[Event]) -> None:
        # AG-UI steps and subagents need not nest: a carried step or subagent
        # opened inside this step may stay open after it.
        for i in range(len(self._scopes) - 1, -1, -1):
            scope = self._scopes[i]
            if scope.kind == "ui-step":
                self._close_parts(out)
                del self._scopes[i]
                out.append(self._event("STEP_FINISHED", scope.owner, {"stepName": scope.key}))
                break
        self._parent = None

    def _message_metadata(self, chunk: Chunk, out: list[Event]) -> None:
        if "messageMetadata" in chunk:
            self._metadata_event(chunk["messageMetadata"], out)

    def _finish(self, chunk: Chunk, out: list[Event]) -> None:
        metadata = chunk.get("messageMetadata")
        if metadata is not None:
            self._metadata_event(metadata, out)
        self._close_all(out, finished=True, reason="")
        if self._interrupts and self._kept is not None:
            # Rule 14 (only with history); this chunk's events are not kept yet.
            messages = fold_messages([*self._kept.events(), *out], self.history)
            out.append({"type": "MESSAGES_SNAPSHOT", "timestamp": self._now, "messages": messages})
        outcome = {"type": "interrupt", "interrupts": list(self._interrupts.values())} if self._interrupts else None
        self._run_finished(out, "finishReason", chunk.get("finishReason"), self._run_result, outcome)

    def _abort(self, chunk: Chunk, out: list[Event]) -> None:
        self._close_all(out, finished=False, reason=STOPPED_TEXT)
        self._run_finished(out, "abortReason", chunk.get("reason"), None, {"type": "cancelled"})

    def _run_finished(
        self, out: list[Event], reason_key: str, reason: Any, result: Any, outcome: dict[str, Any] | None
    ) -> None:
        """``RUN_FINISHED``, the last event: the chunk's reason (a string)
        kept as ``metadata.uistream[reason_key]``."""
        event: Event = {"type": "RUN_FINISHED", "timestamp": self._now}
        if isinstance(reason, str):
            event["metadata"] = {"uistream": {reason_key: reason}}
        event["threadId"] = self.thread_id
        event["runId"] = self.run_id
        if result is not None:
            event["result"] = result
        if outcome is not None:
            event["outcome"] = outcome
        out.append(event)
        self.terminated = True

    def _error(self, chunk: Chunk, out: list[Event]) -> None:
        text = chunk.get("errorText")
        message = text if isinstance(text, str) else ""
        self._close_all(out, finished=False, reason=message)
        out.append({"type": "RUN_ERROR", "timestamp": self._now, "message": message, "code": ERROR_CODE})
        self.terminated = True

    # -- text and reasoning -------------------------------------------------------------

    def _text_start(self, chunk: Chunk, out: list[Event]) -> None:
        opened = self._open_part(self._texts, chunk)
        if opened is not None:
            self._parent = opened
            out.append(self._event("TEXT_MESSAGE_START", opened[1], {"messageId": opened[0], "role": "assistant"}))

    def _reasoning_start(self, chunk: Chunk, out: list[Event]) -> None:
        opened = self._open_part(self._reasoning, chunk)
        if opened is not None:
            agui_id, owner = opened
            out.append(self._event("REASONING_START", owner, {"messageId": agui_id}))
            out.append(self._event("REASONING_MESSAGE_START", owner, {"messageId": agui_id, "role": "reasoning"}))

    def _open_part(self, parts: dict[str, _Part], chunk: Chunk) -> tuple[str, str | None] | None:
        """A new text or reasoning part's AG-UI message id and owner (None
        for a part id that is not a string or already open)."""
        part = chunk.get("id")
        if not isinstance(part, str) or part in parts:
            return None
        owner = self._owner()
        agui_id = self._new_id(f"{self._base}-{part}")
        parts[part] = (agui_id, owner, self._kept.deltas(agui_id) if self._kept is not None else None)
        return agui_id, owner

    def _part_delta(self, parts: dict[str, _Part], kind: str, chunk: Chunk, out: list[Event]) -> None:
        entry = parts.get(chunk.get("id", ""))
        delta = chunk.get("delta")
        if entry is not None and isinstance(delta, str) and delta:
            out.append(self._event(kind, entry[1], {"messageId": entry[0], "delta": delta}))
            if entry[2] is not None:
                entry[2].append(delta)

    def _part_end(self, parts: dict[str, _Part], kinds: tuple[str, ...], chunk: Chunk, out: list[Event]) -> None:
        entry = parts.pop(chunk.get("id", ""), None)
        if entry is not None:
            for kind in kinds:
                out.append(self._event(kind, entry[1], {"messageId": entry[0]}))

    # -- tool calls -----------------------------------------------------------------------

    def _call(self, chunk: Chunk) -> tuple[str, _Call] | None:
        """The call a chunk names, opened if this is the first word of it."""
        call_id = chunk.get("toolCallId")
        if not isinstance(call_id, str):
            return None
        call = self._calls.get(call_id)
        if call is None:
            name = chunk.get("toolName")
            if not isinstance(name, str):
                return None
            owner = self._owner()
            if self._parent is None or self._parent[1] != owner:
                n = self._tool_parents
                while f"{self._base}-tools-{n}" in self._used_ids:
                    n += 1  # rule 13: an earlier run's
                self._parent = (self._new_id(f"{self._base}-tools-{n}"), owner)
                self._tool_parents = n + 1
            call = self._calls[call_id] = _Call(name, self._parent[0], owner)
        return call_id, call

    def _emit_call(self, call_id: str, call: _Call, out: list[Event]) -> None:
        if call.emitted:
            return
        call.emitted = True
        value = call.value
        if value is _UNSET:
            try:
                value = orjson.loads("".join(call.deltas)) if call.deltas else None
            except orjson.JSONDecodeError:
                value = None
        out.append(
            self._event(
                "TOOL_CALL_START",
                call.owner,
                {"toolCallId": call_id, "toolCallName": call.name, "parentMessageId": call.parent},
            )
        )
        if value is not None:
            out.append(self._event("TOOL_CALL_ARGS", call.owner, {"toolCallId": call_id, "delta": json_text(value)}))
        out.append(self._event("TOOL_CALL_END", call.owner, {"toolCallId": call_id}))

    def _result(self, call_id: str, content: str, outcome: str | None, out: list[Event]) -> None:
        self._interrupts.pop(call_id, None)
        event = self._event(
            "TOOL_CALL_RESULT",
            self._owner(),
            {"messageId": self._new_id(f"{call_id}-result"), "toolCallId": call_id, "content": content, "role": "tool"},
        )
        if outcome is not None:
            event["metadata"] = {"uistream": {"outcome": outcome}}
        out.append(event)

    def _tool_input_start(self, chunk: Chunk, out: list[Event]) -> None:
        self._call(chunk)

    def _tool_input_delta(self, chunk: Chunk, out: list[Event]) -> None:
        call = self._calls.get(chunk.get("toolCallId", ""))
        delta = chunk.get("inputTextDelta")
        if call is not None and not call.emitted and isinstance(delta, str):
            call.deltas.append(delta)

    def _tool_input_available(self, chunk: Chunk, out: list[Event]) -> None:
        found = self._call(chunk)
        if found is None:
            return
        call_id, call = found
        if not call.emitted:
            call.value = chunk.get("input")
            self._emit_call(call_id, call, out)

    def _tool_input_error(self, chunk: Chunk, out: list[Event]) -> None:
        found = self._call(chunk)
        if found is None:
            return
        call_id, call = found
        if not call.emitted:
            value = chunk.get("input")
            # A string input is the raw text that did not parse: no JSON to send.
            call.value = None if isinstance(value, str) else value
            self._emit_call(call_id, call, out)
        text = chunk.get("errorText")
        self._result(call_id, text if isinstance(text, str) else "", "input-error", out)

    def _known_call(self, chunk: Chunk, out: list[Event]) -> str | None:
        call_id = chunk.get("toolCallId")
        call = self._calls.get(call_id) if isinstance(call_id, str) else None
        if call is None:
            return None
        assert isinstance(call_id, str)
        self._emit_call(call_id, call, out)
        return call_id

    def _tool_output_available(self, chunk: Chunk, out: list[Event]) -> None:
        call_id = self._known_call(chunk, out)
        if call_id is None:
            return
        if chunk.get("preliminary") is not True:
            self._result(call_id, result_text(chunk.get("output")), None, out)
            return
        # A streaming tool's progress: one activity message per call, each
        # value replacing the last (a second result would be a second tool
        # message; the result comes with the final output).
        message_id = self._progress.get(call_id)
        if message_id is None:
            message_id = self._progress[call_id] = self._new_id(f"{call_id}-progress")
        output = chunk.get("output")
        out.append(
            self._event(
                "ACTIVITY_SNAPSHOT",
                self._calls[call_id].owner,
                {
                    "messageId": message_id,
                    "activityType": PROGRESS_ACTIVITY,
                    "content": {"toolCallId": call_id, "output": output},
                    "replace": True,
                },
            )
        )

    def _tool_output_error(self, chunk: Chunk, out: list[Event]) -> None:
        call_id = self._known_call(chunk, out)
        if call_id is not None:
            text = chunk.get("errorText")
            self._result(call_id, text if isinstance(text, str) else "", "error", out)

    def _tool_output_denied(self, chunk: Chunk, out: list[Event]) -> None:
        call_id = self._known_call(chunk, out)
        if call_id is not None:
            self._result(call_id, DENIED_ERROR_TEXT, "denied", out)

    def _tool_approval_request(self, chunk: Chunk, out: list[Event]) -> None:
        call_id = self._known_call(chunk, out)
        approval_id = chunk.get("approvalId")
        if call_id is None or not isinstance(approval_id, str):
            return
        interrupt: dict[str, Any] = {"id": approval_id, "reason": APPROVAL_REASON, "toolCallId": call_id}
        owner = self._calls[call_id].owner
        if owner is not None:
            interrupt["subagentRunId"] = owner
        reason = chunk.get("reason")
        if isinstance(reason, str):
            interrupt["message"] = reason
        interrupt["responseSchema"] = APPROVAL_RESPONSE_SCHEMA
        self._interrupts[call_id] = interrupt

    def _tool_approval_response(self, chunk: Chunk, out: list[Event]) -> None:
        approval_id = chunk.get("approvalId")
        for call_id, interrupt in list(self._interrupts.items()):
            if interrupt["id"] == approval_id:
                del self._interrupts[call_id]
        self._custom("tool-approval-response", chunk, out)

    # -- carried AG-UI events (rules 11, 12) -------------------------------------------------

    def _carried(self, chunk: Chunk, out: list[Event]) -> None:
        carried = chunk.get("data")
        event_type = carried.get("type") if isinstance(carried, dict) else None
        if event_type == "RUN_FINISHED" and isinstance(carried, dict) and carried.get("result") is not None:
            self._run_result = carried["result"]  # goes on the RUN_FINISHED that ends the run
            return
        if event_type not in _CARRIED and event_type not in _SCOPES:
            self._custom(CARRIER_TYPE, chunk, out)
            return
        if self._state is not _UNSET and event_type in ("STATE_SNAPSHOT", "STATE_DELTA"):
            return  # rule 16: the stored state, sent first, already holds them
        assert isinstance(carried, dict)
        assert isinstance(event_type, str)
        event: Event = {"type": event_type, "timestamp": self._now}
        event.update((k, v) for k, v in carried.items() if k not in ("type", "timestamp"))
        if event_type in ATTRIBUTABLE and "subagentRunId" not in event:
            owner = self._owner()
            if owner is not None:
                event["subagentRunId"] = owner
        try:
            validate_event(event)
        except AGUIEventFormatError:
            return
        if event_type in _CARRIED:
            out.append(event)
        elif event_type == "STEP_STARTED":
            owner = event.get("subagentRunId")
            if not any(s.kind == "step" and s.key == event["stepName"] and s.owner == owner for s in self._scopes):
                self._scopes.append(_Scope("step", event["stepName"], owner))
                out.append(event)
        elif event_type == "STEP_FINISHED":
            owner = event.get("subagentRunId")
            for i in range(len(self._scopes) - 1, -1, -1):
                scope = self._scopes[i]
                if scope.kind == "step" and scope.key == event["stepName"] and scope.owner == owner:
                    del self._scopes[i]
                    out.append(event)
                    break
        elif event_type == "SUBAGENT_STARTED":
            run_id = event["subagentRunId"]
            parent = event.get("parentSubagentRunId")
            if run_id not in self._used_subagents and (parent is None or parent in self._used_subagents):
                self._used_subagents.add(run_id)
                self._scopes.append(_Scope("subagent", run_id, None))
                out.append(event)
        else:  # SUBAGENT_FINISHED / SUBAGENT_ERROR
            for i in range(len(self._scopes) - 1, -1, -1):
                scope = self._scopes[i]
                if scope.kind == "subagent" and scope.key == event["subagentRunId"]:
                    del self._scopes[i]
                    out.append(event)
                    break
