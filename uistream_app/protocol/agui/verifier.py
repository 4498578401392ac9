"""``AGUIVerifier``: the rules an AG-UI 1.0 event stream must keep.

The union of what the two real clients refuse (``@ag-ui/client`` 1.0 and
``ag-ui-validate`` 0.4): the AG-UI verifier rules of docs/protocols.md
("rule N" in this module means AG-UI verifier rule N there). The emit
handles (``protocol.agui.handles``) put every event through one, so a
misuse raises where it happens; users' tests can check any stream with
``verify_events`` or ``verify_sse``. ``observe(event)`` raises
``AGUIVerificationError`` (``rule`` names the ag-ui-validate rule, or
``client`` for a rule only the TypeScript client has, or ``schema``).

Deliberate divergence from house style: a refused event changes nothing,
and the verifier goes on as if it had not been offered, because the
handles do not send a refused event and their stream stays well formed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from ..sse import parse_sse
from .events import AGUIEventFormatError, Event, validate_event
from .patch import PatchError, apply_patch

__all__ = ["AGUIVerificationError", "AGUIVerifier", "verify_events", "verify_sse"]

_PARENT: Final = "(the parent agent)"


class AGUIVerificationError(ValueError):
    """An event a client would refuse (AG-UI verifier rules, docs/protocols.md)."""

    def __init__(self, message: str, *, rule: str, event_type: str = "", index: int = -1) -> None:
        super().__init__(message)
        self.rule = rule
        self.event_type = event_type
        self.index = index


def _who(owner: str | None) -> str:
    return _PARENT if owner is None else f"subagent {owner!r}"


@dataclass
class _ToolCall:
    name: str
    owner: str | None
    args: list[str] = field(default_factory=list)


@dataclass
class _Chunk:
    entity_id: str
    owner: str | None
    name: str = ""
    args: list[str] = field(default_factory=list)


@dataclass
class _Run:
    thread_id: str
    run_id: str
    open_messages: set[str] = field(default_factory=set)
    closed_messages: set[str] = field(default_factory=set)
    message_owners: dict[str, str | None] = field(default_factory=dict)
    open_calls: dict[str, _ToolCall] = field(default_factory=dict)
    used_calls: set[str] = field(default_factory=set)
    known_calls: set[str] = field(default_factory=set)
    call_owners: dict[str, str | None] = field(default_factory=dict)
    spans: set[str] = field(default_factory=set)
    reasoning_messages: set[str] = field(default_factory=set)
    reasoning_owners: dict[str, str | None] = field(default_factory=dict)
    activity_owners: dict[str, str | None] = field(default_factory=dict)
    steps: dict[str | None, set[str]] = field(default_factory=dict)
    active_subagents: set[str] = field(default_factory=set)
    ended_subagents: set[str] = field(default_factory=set)
    state: Any = None
    state_known: bool = False
    text_chunk: _Chunk | None = None
    tool_chunk: _Chunk | None = None
    reasoning_chunk: _Chunk | None = None


class AGUIVerifier:
    """Checks an AG-UI event stream event by event (AG-UI verifier rules 1-13).

    ``observe(event)`` raises ``AGUIVerificationError`` for an event a
    client would refuse, leaving the verifier as it was; ``close()`` checks
    the end of the stream. ``observed`` counts the events accepted.
    """

    def __init__(self) -> None:
        self.observed = 0
        self._run: _Run | None = None
        self._ended: str | None = None  # the terminal event type of the last run

    @property
    def run_active(self) -> bool:
        """Whether a run has started and not ended."""
        return self._run is not None and self._ended is None

    @property
    def terminated(self) -> bool:
        """Whether the last run seen has ended (``RUN_FINISHED`` or ``RUN_ERROR``)."""
        return self._ended is not None

    # -- public -------------------------------------------------------------------

    def observe(self, event: Event) -> None:
        """Check the next event; raises ``AGUIVerificationError`` and changes nothing when a client would refuse it."""
        index = self.observed
        try:
            validate_event(event)
        except AGUIEventFormatError as exc:
            rule = "AGUI503" if exc.field == "type" else "AGUI303" if exc.field in ("delta", "patch") else "AGUI504"
            raise AGUIVerificationError(str(exc), rule=rule, event_type=exc.event_type, index=index) from None
        event_type: str = event["type"]
        try:
            self._observe(event_type, event)
        except AGUIVerificationError as exc:
            exc.event_type = event_type
            exc.index = index
            raise
        self.observed += 1

    def close(self) -> None:
        """The stream has ended: raises when it held no event or its run is still active (rule 14)."""
        if self.observed == 0:
            raise AGUIVerificationError("the stream held no event", rule="AGUI003")
        if self.run_active:
            assert self._run is not None
            raise AGUIVerificationError(
                f"the stream ended without RUN_FINISHED or RUN_ERROR for run {self._run.run_id!r}", rule="AGUI003"
            )

    # -- the state machine ------------------------------------------------------------

    def _observe(self, event_type: str, event: Event) -> None:
        if event_type == "RUN_STARTED":
            if self.run_active:
                raise AGUIVerificationError(
                    "Cannot send 'RUN_STARTED' while a run is still active: finish it with 'RUN_FINISHED' first",
                    rule="AGUI002",
                )
            run = _Run(event["threadId"], event["runId"])
            run_input = event.get("input")
            if isinstance(run_input, dict):
                self._seed(run, run_input.get("messages"), authoritative=False)
            self._run, self._ended = run, None
            return
        if self._run is None:
            if event_type == "RUN_ERROR":
                self._ended = "RUN_ERROR"
                self._run = _Run("", "")
                return
            raise AGUIVerificationError(f"the first event must be 'RUN_STARTED', not {event_type!r}", rule="AGUI001")
        if self._ended is not None:
            rule = "AGUI005" if event_type in ("RUN_FINISHED", "RUN_ERROR") else "AGUI004"
            raise AGUIVerificationError(
                f"Cannot send {event_type!r}: the run already ended with {self._ended!r}; "
                "start a new run with 'RUN_STARTED'",
                rule=rule,
            )
        run = self._run
        closing = self._chunks_closed_by(run, event_type)
        if event_type == "RUN_ERROR":
            self._apply_chunk_close(run, closing)
            self._ended = "RUN_ERROR"
            return
        if event_type == "RUN_FINISHED":
            self._check_finished(run, event, closing)
            self._apply_chunk_close(run, closing)
            self._ended = "RUN_FINISHED"
            return
        handler = getattr(self, "_" + event_type.lower(), None)
        if handler is not None:
            handler(run, event, closing)
        else:  # CUSTOM, RAW: no ordering rules
            self._apply_chunk_close(run, closing)

    # rule 13: which chunk streams this event closes (checked now, applied by
    # the handler once the event is accepted).

    def _chunks_closed_by(self, run: _Run, event_type: str) -> list[str]:
        closing = []
        if run.text_chunk is not None and event_type != "TEXT_MESSAGE_CHUNK":
            closing.append("text")
        if run.reasoning_chunk is not None and event_type != "REASONING_MESSAGE_CHUNK":
            closing.append("reasoning")
        if run.tool_chunk is not None and event_type != "TOOL_CALL_CHUNK":
            chunk = run.tool_chunk
            self._check_args(chunk.entity_id, chunk.args)
            closing.append("tool")
        return closing

    @staticmethod
    def _apply_chunk_close(run: _Run, closing: list[str]) -> None:
        for kind in closing:
            if kind == "text" and run.text_chunk is not None:
                run.closed_messages.add(run.text_chunk.entity_id)
                run.text_chunk = None
            elif kind == "reasoning":
                run.reasoning_chunk = None
            elif kind == "tool" and run.tool_chunk is not None:
                run.used_calls.add(run.tool_chunk.entity_id)
                run.tool_chunk = None

    @staticmethod
    def _check_args(call_id: str, args: list[str]) -> None:
        text = "".join(args)
        if not text:
            return
        try:
            orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise AGUIVerificationError(
                f"the arguments of tool call {call_id!r} are not JSON: {exc}", rule="AGUI204"
            ) from None

    @staticmethod
    def _agree(event: Event, owners: dict[str, str | None], entity: str, what: str) -> None:
        """Rule 11: a continuation's tag must not disagree with its opener's."""
        tag = event.get("subagentRunId")
        if tag is None or entity not in owners:
            return
        owner = owners[entity]
        if owner != tag:
            raise AGUIVerificationError(
                f"Cannot send {event['type']!r}: subagentRunId {tag!r} does not match the {what} {entity!r} "
                f"opener's {_who(owner)}",
                rule="AGUI606",
            )

    @staticmethod
    def _seed(run: _Run, messages: Any, *, authoritative: bool) -> None:
        if not isinstance(messages, list):
            return
        for message in messages:
            if not isinstance(message, dict) or not isinstance(message.get("id"), str):
                continue
            owner = message.get("subagentRunId")
            role = message.get("role")
            bucket = (
                run.reasoning_owners
                if role == "reasoning"
                else run.activity_owners
                if role == "activity"
                else run.message_owners
            )
            if authoritative or message["id"] not in bucket:
                bucket[message["id"]] = owner
            for call in message.get("toolCalls") or ():
                if isinstance(call, dict) and isinstance(call.get("id"), str):
                    run.known_calls.add(call["id"])
                    if authoritative or call["id"] not in run.call_owners:
                        run.call_owners[call["id"]] = owner

    def _check_finished(self, run: _Run, event: Event, closing: list[str]) -> None:
        for name in ("threadId", "runId"):
            expected = run.thread_id if name == "threadId" else run.run_id
            if event[name] != expected:
                raise AGUIVerificationError(
                    f"RUN_FINISHED.{name} {event[name]!r} is not the run's {expected!r}", rule="AGUI008"
                )
        still_open = [
            (
                "steps",
                "AGUI007",
                [f"{n} ({_who(o)})" if o is not None else n for o, ns in run.steps.items() for n in ns],
            ),
            ("text messages", "AGUI103", sorted(run.open_messages)),
            ("reasoning messages", "AGUI402", sorted(run.reasoning_messages)),
            ("reasoning spans", "AGUI402", sorted(run.spans)),
            ("tool calls", "AGUI203", sorted(run.open_calls)),
            ("subagents", "AGUI604", sorted(run.active_subagents)),
        ]
        for what, rule, ids in still_open:
            if ids:
                raise AGUIVerificationError(
                    f"Cannot send 'RUN_FINISHED' while {what} are still active: {', '.join(ids)}", rule=rule
                )

    # -- text (rules 6, 13) -----------------------------------------------------------

    def _text_message_start(self, run: _Run, event: Event, closing: list[str]) -> None:
        message_id = event["messageId"]
        if message_id in run.open_messages or (run.text_chunk and run.text_chunk.entity_id == message_id):
            raise AGUIVerificationError(
                f"Cannot send 'TEXT_MESSAGE_START': a text message with ID {message_id!r} is already in progress",
                rule="AGUI106",
            )
        if message_id in run.closed_messages:
            raise AGUIVerificationError(
                f"Cannot send 'TEXT_MESSAGE_START': message ID {message_id!r} was already used in this run",
                rule="AGUI104",
            )
        self._agree(event, run.message_owners, message_id, "message")
        self._apply_chunk_close(run, closing)
        run.open_messages.add(message_id)
        run.message_owners.setdefault(message_id, event.get("subagentRunId"))

    def _text_message_content(self, run: _Run, event: Event, closing: list[str]) -> None:
        message_id = event["messageId"]
        if message_id not in run.open_messages:
            raise AGUIVerificationError(
                f"Cannot send 'TEXT_MESSAGE_CONTENT': no active text message with ID {message_id!r}", rule="AGUI101"
            )
        if event["delta"] == "":
            raise AGUIVerificationError(f"empty delta for text message {message_id!r}", rule="AGUI105")
        self._agree(event, run.message_owners, message_id, "message")
        self._apply_chunk_close(run, closing)

    def _text_message_end(self, run: _Run, event: Event, closing: list[str]) -> None:
        message_id = event["messageId"]
        if message_id not in run.open_messages:
            raise AGUIVerificationError(
                f"Cannot send 'TEXT_MESSAGE_END': no active text message with ID {message_id!r}", rule="AGUI102"
            )
        self._agree(event, run.message_owners, message_id, "message")
        self._apply_chunk_close(run, closing)
        run.open_messages.discard(message_id)
        run.closed_messages.add(message_id)

    def _text_message_chunk(self, run: _Run, event: Event, closing: list[str]) -> None:
        message_id = event.get("messageId")
        current = run.text_chunk
        if message_id is None:
            if current is None:
                raise AGUIVerificationError(
                    "the first TEXT_MESSAGE_CHUNK of a message must include messageId", rule="AGUI504"
                )
            self._apply_chunk_close(run, closing)
            return
        if current is not None and current.entity_id == message_id:
            self._agree(event, run.message_owners, message_id, "message")
            self._apply_chunk_close(run, closing)
            return
        if message_id in run.open_messages:
            raise AGUIVerificationError(
                f"TEXT_MESSAGE_CHUNK for {message_id!r}, a message opened with TEXT_MESSAGE_START", rule="client"
            )
        if message_id in run.closed_messages:
            raise AGUIVerificationError(f"message ID {message_id!r} was already used in this run", rule="AGUI104")
        self._agree(event, run.message_owners, message_id, "message")
        self._apply_chunk_close(run, closing)
        if current is not None:
            run.closed_messages.add(current.entity_id)
        run.text_chunk = _Chunk(message_id, event.get("subagentRunId"))
        run.message_owners.setdefault(message_id, event.get("subagentRunId"))

    # -- tool calls (rules 7, 13) -------------------------------------------------------

    def _tool_call_start(self, run: _Run, event: Event, closing: list[str]) -> None:
        call_id = event["toolCallId"]
        if call_id in run.open_calls or call_id in run.used_calls:
            raise AGUIVerificationError(
                f"Cannot send 'TOOL_CALL_START': tool call ID {call_id!r} is already in use in this run",
                rule="AGUI205",
            )
        tag = event.get("subagentRunId")
        parent = event.get("parentMessageId")
        owner = tag
        if parent is not None and parent in run.message_owners:
            parent_owner = run.message_owners[parent]
            if tag is not None and tag != parent_owner:
                raise AGUIVerificationError(
                    f"Cannot send 'TOOL_CALL_START': subagentRunId {tag!r} does not match its parent message "
                    f"{parent!r} owner, {_who(parent_owner)}",
                    rule="AGUI606",
                )
            if tag is None:
                owner = parent_owner
        if call_id in run.call_owners and run.call_owners[call_id] != owner:
            raise AGUIVerificationError(
                f"Cannot send 'TOOL_CALL_START': tool call {call_id!r} belongs to {_who(run.call_owners[call_id])}",
                rule="AGUI606",
            )
        self._apply_chunk_close(run, closing)
        run.open_calls[call_id] = _ToolCall(event["toolCallName"], owner)
        run.call_owners.setdefault(call_id, owner)

    def _tool_call_args(self, run: _Run, event: Event, closing: list[str]) -> None:
        call = run.open_calls.get(event["toolCallId"])
        if call is None:
            raise AGUIVerificationError(
                f"Cannot send 'TOOL_CALL_ARGS': no active tool call with ID {event['toolCallId']!r}", rule="AGUI201"
            )
        self._agree(event, run.call_owners, event["toolCallId"], "tool call")
        self._apply_chunk_close(run, closing)
        call.args.append(event["delta"])

    def _tool_call_end(self, run: _Run, event: Event, closing: list[str]) -> None:
        call_id = event["toolCallId"]
        call = run.open_calls.get(call_id)
        if call is None:
            raise AGUIVerificationError(
                f"Cannot send 'TOOL_CALL_END': no active tool call with ID {call_id!r}", rule="AGUI202"
            )
        self._agree(event, run.call_owners, call_id, "tool call")
        self._check_args(call_id, call.args)
        self._apply_chunk_close(run, closing)
        del run.open_calls[call_id]
        run.used_calls.add(call_id)

    def _tool_call_result(self, run: _Run, event: Event, closing: list[str]) -> None:
        call_id = event["toolCallId"]
        if call_id in run.open_calls:
            raise AGUIVerificationError(f"TOOL_CALL_RESULT for {call_id!r} before its TOOL_CALL_END", rule="AGUI206")
        chunk = run.tool_chunk
        closed_by_this = chunk is not None and chunk.entity_id == call_id and "tool" in closing
        if call_id not in run.used_calls and call_id not in run.known_calls and not closed_by_this:
            raise AGUIVerificationError(f"TOOL_CALL_RESULT for unknown tool call {call_id!r}", rule="AGUI207")
        self._apply_chunk_close(run, closing)
        run.message_owners[event["messageId"]] = event.get("subagentRunId")

    def _tool_call_chunk(self, run: _Run, event: Event, closing: list[str]) -> None:
        call_id = event.get("toolCallId")
        current = run.tool_chunk
        delta = event.get("delta")
        if call_id is None or (current is not None and current.entity_id == call_id):
            if current is None:
                raise AGUIVerificationError(
                    "the first TOOL_CALL_CHUNK of a call must include toolCallId and toolCallName", rule="AGUI504"
                )
            if call_id is not None:
                self._agree(event, run.call_owners, call_id, "tool call")
            self._apply_chunk_close(run, closing)
            if isinstance(delta, str):
                current.args.append(delta)
            return
        if call_id in run.open_calls:
            raise AGUIVerificationError(
                f"TOOL_CALL_CHUNK for {call_id!r}, a call opened with TOOL_CALL_START", rule="client"
            )
        if call_id in run.used_calls:
            raise AGUIVerificationError(f"tool call ID {call_id!r} was already used in this run", rule="AGUI205")
        name = event.get("toolCallName")
        if name is None:
            raise AGUIVerificationError("the first TOOL_CALL_CHUNK of a call must include toolCallName", rule="AGUI504")
        if current is not None:
            self._check_args(current.entity_id, current.args)
        owner = event.get("subagentRunId")
        parent = event.get("parentMessageId")
        if owner is None and parent is not None:
            owner = run.message_owners.get(parent)
        self._apply_chunk_close(run, closing)
        if current is not None:
            run.used_calls.add(current.entity_id)
        run.tool_chunk = _Chunk(call_id, owner, name, [delta] if isinstance(delta, str) else [])
        run.call_owners.setdefault(call_id, owner)

    # -- steps (rule 8) -------------------------------------------------------------------

    def _step_started(self, run: _Run, event: Event, closing: list[str]) -> None:
        owner, name = event.get("subagentRunId"), event["stepName"]
        if name in run.steps.get(owner, ()):
            where = f" in {_who(owner)}" if owner is not None else ""
            raise AGUIVerificationError(f"Step {name!r} is already active{where}", rule="client")
        others = [o for o, names in run.steps.items() if name in names]
        if others:
            raise AGUIVerificationError(
                f"Step {name!r} is open under {_who(others[0])}: ag-ui-validate keys steps by name and would "
                f"read this as a re-entry of that step (AGUI606 at its finish)",
                rule="AGUI606",
            )
        self._apply_chunk_close(run, closing)
        run.steps.setdefault(owner, set()).add(name)

    def _step_finished(self, run: _Run, event: Event, closing: list[str]) -> None:
        owner, name = event.get("subagentRunId"), event["stepName"]
        if name not in run.steps.get(owner, ()):
            others = [o for o, names in run.steps.items() if name in names]
            if others:
                raise AGUIVerificationError(
                    f"Cannot send 'STEP_FINISHED' for step {name!r} attributed to {_who(owner)}: "
                    f"that step is open under {_who(others[0])}",
                    rule="AGUI606",
                )
            raise AGUIVerificationError(
                f"Cannot send 'STEP_FINISHED' for step {name!r} that was not started", rule="AGUI006"
            )
        self._apply_chunk_close(run, closing)
        run.steps[owner].discard(name)
        if not run.steps[owner]:
            del run.steps[owner]

    # -- reasoning (rules 9, 13) ----------------------------------------------------------

    def _open_reasoning(self, run: _Run, event: Event, closing: list[str], opened: set[str], what: str) -> None:
        message_id = event["messageId"]
        if message_id in opened:
            raise AGUIVerificationError(
                f"Cannot send {event['type']!r}: a reasoning {what} with ID {message_id!r} is already in progress",
                rule="client",
            )
        self._agree(event, run.reasoning_owners, message_id, "reasoning message")
        self._apply_chunk_close(run, closing)
        opened.add(message_id)
        run.reasoning_owners.setdefault(message_id, event.get("subagentRunId"))

    def _continue_reasoning(
        self, run: _Run, event: Event, closing: list[str], opened: set[str], what: str, *, end: bool
    ) -> None:
        message_id = event["messageId"]
        if message_id not in opened:
            raise AGUIVerificationError(
                f"Cannot send {event['type']!r}: no active reasoning {what} with ID {message_id!r}", rule="AGUI401"
            )
        self._agree(event, run.reasoning_owners, message_id, "reasoning message")
        self._apply_chunk_close(run, closing)
        if end:
            opened.discard(message_id)

    def _reasoning_start(self, run: _Run, event: Event, closing: list[str]) -> None:
        self._open_reasoning(run, event, closing, run.spans, "span")

    def _reasoning_end(self, run: _Run, event: Event, closing: list[str]) -> None:
        self._continue_reasoning(run, event, closing, run.spans, "span", end=True)

    def _reasoning_message_start(self, run: _Run, event: Event, closing: list[str]) -> None:
        self._open_reasoning(run, event, closing, run.reasoning_messages, "message")

    def _reasoning_message_content(self, run: _Run, event: Event, closing: list[str]) -> None:
        self._continue_reasoning(run, event, closing, run.reasoning_messages, "message", end=False)

    def _reasoning_message_end(self, run: _Run, event: Event, closing: list[str]) -> None:
        self._continue_reasoning(run, event, closing, run.reasoning_messages, "message", end=True)

    def _reasoning_message_chunk(self, run: _Run, event: Event, closing: list[str]) -> None:
        message_id = event.get("messageId")
        current = run.reasoning_chunk
        if message_id is None:
            if current is None:
                raise AGUIVerificationError("the first REASONING_MESSAGE_CHUNK must include messageId", rule="AGUI504")
            self._apply_chunk_close(run, closing)
            if event.get("delta") == "":
                run.reasoning_chunk = None  # an empty delta closes the chunk stream
            return
        if message_id in run.reasoning_messages:
            raise AGUIVerificationError(
                f"REASONING_MESSAGE_CHUNK for {message_id!r}, a message opened with REASONING_MESSAGE_START",
                rule="client",
            )
        self._agree(event, run.reasoning_owners, message_id, "reasoning message")
        self._apply_chunk_close(run, closing)
        run.reasoning_owners.setdefault(message_id, event.get("subagentRunId"))
        ends = event.get("delta") == ""
        run.reasoning_chunk = None if ends else _Chunk(message_id, event.get("subagentRunId"))

    def _reasoning_encrypted_value(self, run: _Run, event: Event, closing: list[str]) -> None:
        entity = event["entityId"]
        if event["subtype"] == "tool-call":
            self._agree(event, run.call_owners, entity, "tool call")
        elif entity in run.message_owners:
            self._agree(event, run.message_owners, entity, "message")
        else:
            self._agree(event, run.reasoning_owners, entity, "reasoning message")
        self._apply_chunk_close(run, closing)

    # -- state and activity (rules 11, 12) ---------------------------------------------------

    def _state_snapshot(self, run: _Run, event: Event, closing: list[str]) -> None:
        self._apply_chunk_close(run, closing)
        run.state = event["snapshot"]
        run.state_known = True

    def _state_delta(self, run: _Run, event: Event, closing: list[str]) -> None:
        new_state = run.state
        if run.state_known:
            try:
                new_state = apply_patch(run.state, event["delta"])
            except PatchError as exc:
                raise AGUIVerificationError(f"STATE_DELTA does not apply: {exc}", rule="AGUI302") from None
        self._apply_chunk_close(run, closing)
        run.state = new_state

    def _messages_snapshot(self, run: _Run, event: Event, closing: list[str]) -> None:
        self._apply_chunk_close(run, closing)
        self._seed(run, event["messages"], authoritative=True)

    def _activity_snapshot(self, run: _Run, event: Event, closing: list[str]) -> None:
        message_id = event["messageId"]
        self._apply_chunk_close(run, closing)
        if message_id not in run.activity_owners or event.get("replace") is not False:
            run.activity_owners[message_id] = event.get("subagentRunId")

    def _activity_delta(self, run: _Run, event: Event, closing: list[str]) -> None:
        self._agree(event, run.activity_owners, event["messageId"], "activity")
        self._apply_chunk_close(run, closing)

    # -- subagents (rule 10) ------------------------------------------------------------------

    def _subagent_started(self, run: _Run, event: Event, closing: list[str]) -> None:
        run_id = event["subagentRunId"]
        if run_id in run.active_subagents:
            raise AGUIVerificationError(
                f"Cannot send 'SUBAGENT_STARTED': subagent {run_id!r} is already active", rule="AGUI601"
            )
        if run_id in run.ended_subagents:
            raise AGUIVerificationError(
                f"Cannot send 'SUBAGENT_STARTED': subagent {run_id!r} already ended in this run; "
                "subagent ids are per invocation",
                rule="AGUI601",
            )
        parent = event.get("parentSubagentRunId")
        if parent is not None and parent not in run.active_subagents and parent not in run.ended_subagents:
            raise AGUIVerificationError(
                f"Cannot send 'SUBAGENT_STARTED': parentSubagentRunId {parent!r} has not been started in this run",
                rule="AGUI605",
            )
        self._apply_chunk_close(run, closing)
        run.active_subagents.add(run_id)

    def _end_subagent(self, run: _Run, event: Event, closing: list[str]) -> None:
        run_id = event["subagentRunId"]
        if run_id not in run.active_subagents:
            raise AGUIVerificationError(
                f"Cannot send {event['type']!r}: no active subagent with ID {run_id!r}",
                rule="AGUI602" if event["type"] == "SUBAGENT_FINISHED" else "AGUI603",
            )
        self._apply_chunk_close(run, closing)
        run.active_subagents.discard(run_id)
        run.ended_subagents.add(run_id)

    _subagent_finished = _end_subagent
    _subagent_error = _end_subagent


def verify_events(events: Iterable[Event | str | bytes]) -> int:
    """Check a whole stream (AG-UI verifier rules 1-14, ``close()`` included);
    returns the number of events. An event may be given as its JSON text (a
    line of a JSONL capture). Raises ``AGUIVerificationError`` at the first
    one a client would refuse."""
    verifier = AGUIVerifier()
    for event in events:
        if isinstance(event, (str, bytes)):
            try:
                event = orjson.loads(event)
            except orjson.JSONDecodeError as exc:
                raise AGUIVerificationError(
                    f"an event is not JSON: {exc}", rule="AGUI502", index=verifier.observed
                ) from None
        verifier.observe(event)
    verifier.close()
    return verifier.observed


def verify_sse(body: bytes) -> list[Event]:
    """Parse an AG-UI SSE response body (``\\n`` line ends only, as the
    TypeScript client needs) and check its events; returns them."""
    if b"\r" in body:
        raise AGUIVerificationError(
            "the stream has CR line ends; the TypeScript client splits on \\n\\n", rule="AGUI501"
        )
    try:
        frames = parse_sse(body)
    except ValueError as exc:
        raise AGUIVerificationError(str(exc), rule="AGUI501") from None
    verify_events([frame.data for frame in frames])
    return [orjson.loads(frame.data) for frame in frames]
