"""Emit handles: AG-UI agents written by hand, where misuse raises at once.

``RunContext`` hands out context managers for AG-UI's bracketed events
(messages, reasoning, tool calls, steps, subagents), so an agent can't
leave one open; ``run_agent`` drives a run. How to write one, and the
rules ("rule N" here): docs/agents.md.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, Final, TypeAlias

import orjson

from ..ui.encoder import MASKED_ERROR_TEXT
from .events import ATTRIBUTABLE, Event
from .input import AGUIInput
from .renderer import ERROR_CODE, STOPPED_CODE, STOPPED_TEXT, json_text, now_ms, result_text
from .verifier import AGUIVerifier

__all__ = [
    "Agent",
    "HandleError",
    "MessageHandle",
    "ReasoningHandle",
    "RunCancelled",
    "RunContext",
    "StepScope",
    "SubagentScope",
    "ToolCallHandle",
    "run_agent",
]

logger = logging.getLogger("uistream_app.protocol")

Sink: TypeAlias = Callable[[Event], None]
#: A hand-written agent: a function of the run's context, sync or async.
Agent: TypeAlias = Callable[["RunContext"], "Awaitable[None] | None"]

#: Events the handles own: ``RunContext.emit`` refuses them (rule 4).
_OWNED: Final = frozenset(
    (
        "RUN_STARTED",
        "RUN_FINISHED",
        "RUN_ERROR",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TEXT_MESSAGE_CHUNK",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_MESSAGE_CHUNK",
        "REASONING_END",
        "TOOL_CALL_CHUNK",
        "STEP_STARTED",
        "STEP_FINISHED",
        "SUBAGENT_STARTED",
        "SUBAGENT_FINISHED",
        "SUBAGENT_ERROR",
    )
)
_TOOL_EVENTS: Final = frozenset(("TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT"))


class HandleError(RuntimeError):
    """A handle used against its rules (the module's rules 2-6)."""


class RunCancelled(Exception):
    """Raised by every emit after the run was cancelled."""


class RunContext:
    """One AG-UI run's emitter: the handles, the unordered events, the run's
    end. See the module docstring; ``input`` is the request's
    ``RunAgentInput`` (``tools``, ``context``, ``state``,
    ``forwarded_props`` reach the agent through it), ``history`` the stored
    conversation the run answers (``UIMessage``\\ s, oldest first)."""

    def __init__(
        self,
        input: AGUIInput | None = None,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        message_id: str | None = None,
        history: list[dict[str, Any]] | None = None,
        sink: Sink | None = None,
        verify: bool = True,
        clock: Callable[[], int] | None = now_ms,
    ) -> None:
        self.input = input if input is not None else AGUIInput(thread_id or "thread", run_id or "run")
        self.thread_id = thread_id or self.input.thread_id
        self.run_id = run_id or self.input.run_id
        self.message_id = message_id
        self.history = list(history or [])
        self.state: Any = self.input.state
        self.events: list[Event] = []
        self._sink: Sink = sink if sink is not None else self.events.append
        self._verifier = AGUIVerifier() if verify else None
        self._clock = clock
        self._base = message_id or self.run_id
        self._started = False
        self._ended = False
        self._cancelled = False
        self._streaming: _Handle | None = None
        self._scopes: list[_Handle] = []
        self._subagents: list[str] = []
        self._counters: dict[str, int] = {}
        self._parent: tuple[str, str | None] | None = None  # (message id, its owner)

    # -- what the agent reads -----------------------------------------------------------

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The client's tools, from the ``RunAgentInput``."""
        return self.input.tools

    @property
    def context(self) -> list[dict[str, Any]]:
        """The client's context entries, from the ``RunAgentInput``."""
        return self.input.context

    @property
    def forwarded_props(self) -> Any:
        """The ``RunAgentInput``'s ``forwardedProps``."""
        return self.input.forwarded_props

    @property
    def cancelled(self) -> bool:
        """Whether ``cancel()`` was called (every emit now raises ``RunCancelled``)."""
        return self._cancelled

    @property
    def ended(self) -> bool:
        """Whether the run has sent ``RUN_FINISHED`` or ``RUN_ERROR``."""
        return self._ended

    def drain(self) -> list[Event]:
        """The events emitted since the last drain (without a ``sink``)."""
        out, self.events[:] = list(self.events), []
        return out

    # -- the run --------------------------------------------------------------------------

    def start(self) -> None:
        """Send ``RUN_STARTED`` (``run_agent`` does)."""
        if self._started:
            raise HandleError("the run has already started")
        event: Event = {"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id}
        if self.input.parent_run_id is not None:
            event["parentRunId"] = self.input.parent_run_id
        self._started = True
        try:
            self._emit(event, forced=True)
        except BaseException:
            self._started = False
            raise

    def finish(self, *, result: Any = None, outcome: Mapping[str, Any] | None = None) -> None:
        """Send ``RUN_FINISHED``, even after ``cancel()``. Every handle must be
        closed."""
        if self._streaming is not None or self._scopes:
            open_handle = self._streaming or self._scopes[-1]
            raise HandleError(f"close the open {open_handle.kind} before finishing the run")
        event: Event = {"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.run_id}
        if result is not None:
            event["result"] = result
        if outcome is not None:
            event["outcome"] = dict(outcome)
        self._emit(event, forced=True)

    def fail(self, message: str = MASKED_ERROR_TEXT, *, code: str | None = ERROR_CODE) -> None:
        """Send ``RUN_ERROR``, even after ``cancel()`` and with handles open."""
        event: Event = {"type": "RUN_ERROR", "message": message}
        if code is not None:
            event["code"] = code
        self._emit(event, forced=True)

    def cancel(self) -> None:
        """From now on every emit raises ``RunCancelled`` (rule 6)."""
        self._cancelled = True

    # -- handles ---------------------------------------------------------------------------

    def assistant_message(self) -> MessageHandle:
        """A text message: entering it sends ``TEXT_MESSAGE_START``, leaving it ``TEXT_MESSAGE_END``."""
        return MessageHandle(self)

    def reasoning(self) -> ReasoningHandle:
        """A reasoning message inside its span: ``REASONING_START`` … ``REASONING_END``."""
        return ReasoningHandle(self)

    def tool_call(self, name: str, *, tool_call_id: str | None = None) -> ToolCallHandle:
        """A call of tool ``name``; its arguments go out whole when it ends (rule 5)."""
        return ToolCallHandle(self, name, tool_call_id)

    def step(self, name: str) -> StepScope:
        """A scope between ``STEP_STARTED`` and ``STEP_FINISHED``."""
        return StepScope(self, name)

    def subagent(self, name: str, *, description: str | None = None) -> SubagentScope:
        """A subagent's scope: what is emitted inside it carries its ``subagentRunId`` (rule 3)."""
        return SubagentScope(self, name, description)

    def say(self, text: str) -> str:
        """One whole assistant message; returns its id."""
        with self.assistant_message() as message:
            message.delta(text)
        return message.id

    def tool_result(self, tool_call_id: str, content: Any, *, error: bool = False) -> None:
        """``TOOL_CALL_RESULT`` for a call closed by hand (``emit``)."""
        self._result(tool_call_id, content, error)

    # -- unordered events (rule 4) -----------------------------------------------------------

    def emit(self, event: Event) -> Event:
        """Send one event the handles do not own (see rule 4); returns it as
        sent (tagged, stamped)."""
        event_type = event.get("type")
        if event_type in _OWNED:
            raise HandleError(f"{event_type} belongs to the handles: use them rather than emit()")
        if event_type in _TOOL_EVENTS and self._streaming is not None and self._streaming.kind != "tool call":
            raise HandleError(f"close the open {self._streaming.kind} before sending {event_type}")
        sent = self._emit(dict(event))
        if event_type == "TOOL_CALL_RESULT":
            self._parent = None
        return sent

    def custom(self, name: str, value: Any) -> None:
        """Send ``CUSTOM {name, value}``."""
        self.emit({"type": "CUSTOM", "name": name, "value": value})

    def raw(self, event: Any, *, source: str | None = None) -> None:
        """Send ``RAW``: an event of another system, passed through."""
        raw: Event = {"type": "RAW", "event": event}
        if source is not None:
            raw["source"] = source
        self.emit(raw)

    def state_snapshot(self, snapshot: Any) -> None:
        """Send ``STATE_SNAPSHOT``: the agent's whole state."""
        self.emit({"type": "STATE_SNAPSHOT", "snapshot": snapshot})

    def state_delta(self, patch: list[dict[str, Any]]) -> None:
        """Send ``STATE_DELTA``: a JSON Patch against the last snapshot."""
        self.emit({"type": "STATE_DELTA", "delta": patch})

    def publish_state(self) -> None:
        """``STATE_SNAPSHOT`` of ``self.state``."""
        self.state_snapshot(self.state)

    def messages_snapshot(self, messages: list[dict[str, Any]]) -> None:
        """Send ``MESSAGES_SNAPSHOT``: the thread's messages, replacing the client's."""
        self.emit({"type": "MESSAGES_SNAPSHOT", "messages": messages})

    def activity_snapshot(
        self, message_id: str, activity_type: str, content: dict[str, Any], *, replace: bool | None = None
    ) -> None:
        event: Event = {"type": "ACTIVITY_SNAPSHOT", "messageId": message_id, "activityType": activity_type}
        event["content"] = content
        if replace is not None:
            event["replace"] = replace
        self.emit(event)

    def activity_delta(self, message_id: str, activity_type: str, patch: list[dict[str, Any]]) -> None:
        """Send ``ACTIVITY_DELTA``: a JSON Patch against an activity message's content."""
        self.emit({"type": "ACTIVITY_DELTA", "messageId": message_id, "activityType": activity_type, "patch": patch})

    # -- internals ------------------------------------------------------------------------------

    def _next(self, kind: str) -> int:
        n = self._counters.get(kind, 0)
        self._counters[kind] = n + 1
        return n

    def _new_id(self, kind: str) -> str:
        return f"{self._base}-{kind}-{self._next(kind)}"

    def _owner(self) -> str | None:
        return self._subagents[-1] if self._subagents else None

    def _tool_parent(self) -> str:
        owner = self._owner()
        if self._parent is None or self._parent[1] != owner:
            self._parent = (self._new_id("tools"), owner)
        return self._parent[0]

    def _result(self, tool_call_id: str, content: Any, error: bool) -> None:
        event: Event = {
            "type": "TOOL_CALL_RESULT",
            "messageId": f"{tool_call_id}-result",
            "toolCallId": tool_call_id,
            "content": result_text(content),
            "role": "tool",
        }
        if error:
            event["metadata"] = {"uistream": {"outcome": "error"}}
        self._emit(event)
        self._parent = None

    def _emit(self, event: Event, *, forced: bool = False) -> Event:
        if self._ended:
            raise HandleError("the run has ended: nothing more can be sent")
        if not self._started and event.get("type") != "RUN_ERROR":
            raise HandleError("the run has not started: call start(), or drive the agent with run_agent()")
        if self._cancelled and not forced:
            raise RunCancelled("the run was cancelled")
        event_type = event.get("type")
        sent: Event = {"type": event_type}
        if self._clock is not None:
            sent["timestamp"] = self._clock()
        if event_type in ATTRIBUTABLE and "subagentRunId" not in event and self._subagents:
            sent["subagentRunId"] = self._subagents[-1]
        sent.update((k, v) for k, v in event.items() if k not in ("type", "timestamp"))
        if self._verifier is not None:
            self._verifier.observe(sent)
        if event_type in ("RUN_FINISHED", "RUN_ERROR"):
            self._ended = True
            self._started = True
        self._sink(sent)
        return sent

    def _enter(self, handle: _Handle) -> None:
        if self._ended:
            raise HandleError("the run has ended: nothing more can be opened")
        if self._streaming is not None:
            raise HandleError(
                f"a {self._streaming.kind} is open: close it before opening a {handle.kind} "
                "(one streaming handle at a time)"
            )
        if self._cancelled:
            raise RunCancelled("the run was cancelled")

    def _exit(self, handle: _Handle) -> None:
        if self._streaming is handle:
            self._streaming = None
        elif handle in self._scopes:
            self._scopes.remove(handle)


class _Handle:
    """A bracketed construct: opening event on entry, closing one on exit."""

    kind = "handle"

    def __init__(self, context: RunContext) -> None:
        self._context = context
        self._state = "new"  # -> "open" -> "closed"
        self._exc: BaseException | None = None

    def __enter__(self) -> Any:
        if self._state != "new":
            raise HandleError(f"this {self.kind} was already used: open a new one")
        context = self._context
        context._enter(self)
        self._open()
        self._state = "open"
        if self._is_streaming:
            context._streaming = self
        else:
            context._scopes.append(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._state != "open":
            return
        self._state = "closed"
        self._exc = exc
        try:
            self._close(abnormal=exc_type is not None)
        except Exception:
            if exc_type is None:
                raise
            # Rule 1: the exception on its way out is the one to see.
            logger.warning("closing a %s after an exception failed", self.kind, exc_info=True)
        finally:
            self._context._exit(self)

    _is_streaming = False

    def _open(self) -> None:
        raise NotImplementedError

    def _close(self, *, abnormal: bool) -> None:
        raise NotImplementedError

    def _require_open(self, what: str) -> None:
        if self._state != "open":
            state = "not entered yet (use it in a with block)" if self._state == "new" else "closed"
            raise HandleError(f"cannot {what}: this {self.kind} is {state}")

    # Unordered events are reachable from inside any handle (rule 4).

    def emit(self, event: Event) -> Event:
        return self._context.emit(event)

    def custom(self, name: str, value: Any) -> None:
        self._context.custom(name, value)

    def state_snapshot(self, snapshot: Any) -> None:
        self._context.state_snapshot(snapshot)

    def state_delta(self, patch: list[dict[str, Any]]) -> None:
        self._context.state_delta(patch)

    def activity_snapshot(
        self, message_id: str, activity_type: str, content: dict[str, Any], *, replace: bool | None = None
    ) -> None:
        self._context.activity_snapshot(message_id, activity_type, content, replace=replace)

    def activity_delta(self, message_id: str, activity_type: str, patch: list[dict[str, Any]]) -> None:
        self._context.activity_delta(message_id, activity_type, patch)


class MessageHandle(_Handle):
    """An assistant text message: ``delta(text)`` appends."""

    kind = "message"
    _is_streaming = True

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        self.id = ""

    def _open(self) -> None:
        context = self._context
        self.id = context._new_id("text")
        context._emit({"type": "TEXT_MESSAGE_START", "messageId": self.id, "role": "assistant"})
        context._parent = (self.id, context._owner())

    def delta(self, text: str) -> None:
        """Append ``text`` (an empty one sends nothing: AGUI105)."""
        self._require_open("add text")
        if not isinstance(text, str):
            raise TypeError(f"a message delta is a str, not {type(text).__name__}")
        if text:
            self._context._emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": self.id, "delta": text})

    def __enter__(self) -> MessageHandle:
        handle: MessageHandle = super().__enter__()
        return handle

    def _close(self, *, abnormal: bool) -> None:
        self._context._emit({"type": "TEXT_MESSAGE_END", "messageId": self.id}, forced=True)


class ReasoningHandle(_Handle):
    """A reasoning span holding one reasoning message: ``delta(text)``
    appends; ``encrypted_value(value)`` attaches a provider's opaque one."""

    kind = "reasoning"
    _is_streaming = True

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        self.id = ""

    def __enter__(self) -> ReasoningHandle:
        handle: ReasoningHandle = super().__enter__()
        return handle

    def _open(self) -> None:
        context = self._context
        self.id = context._new_id("reasoning")
        context._emit({"type": "REASONING_START", "messageId": self.id})
        try:
            context._emit({"type": "REASONING_MESSAGE_START", "messageId": self.id, "role": "reasoning"})
        except BaseException:
            context._emit({"type": "REASONING_END", "messageId": self.id}, forced=True)
            raise

    def delta(self, text: str) -> None:
        self._require_open("add reasoning")
        if not isinstance(text, str):
            raise TypeError(f"a reasoning delta is a str, not {type(text).__name__}")
        if text:
            self._context._emit({"type": "REASONING_MESSAGE_CONTENT", "messageId": self.id, "delta": text})

    def encrypted_value(self, value: str) -> None:
        """Attach the provider's encrypted reasoning to this message (``REASONING_ENCRYPTED_VALUE``)."""
        self._require_open("attach an encrypted value")
        self._context._emit(
            {"type": "REASONING_ENCRYPTED_VALUE", "subtype": "message", "entityId": self.id, "encryptedValue": value}
        )

    def _close(self, *, abnormal: bool) -> None:
        context = self._context
        try:
            context._emit({"type": "REASONING_MESSAGE_END", "messageId": self.id}, forced=True)
        finally:
            context._emit({"type": "REASONING_END", "messageId": self.id}, forced=True)


class ToolCallHandle(_Handle):
    """A tool call: ``args()`` adds argument text (or a JSON value),
    ``end()`` sends the arguments and closes the call, ``result()`` sends
    its outcome (after ``end()``, inside the block or after it)."""

    kind = "tool call"
    _is_streaming = True

    def __init__(self, context: RunContext, name: str, tool_call_id: str | None) -> None:
        super().__init__(context)
        if not isinstance(name, str) or not name:
            raise HandleError("a tool call needs a name")
        self.name = name
        self.id = tool_call_id or ""
        self._args: list[str] = []
        self._ended = False
        self._answered = False

    def __enter__(self) -> ToolCallHandle:
        handle: ToolCallHandle = super().__enter__()
        return handle

    def _open(self) -> None:
        context = self._context
        if not self.id:
            self.id = context._new_id("call")
        context._emit(
            {
                "type": "TOOL_CALL_START",
                "toolCallId": self.id,
                "toolCallName": self.name,
                "parentMessageId": context._tool_parent(),
            }
        )

    def args(self, fragment: Any) -> None:
        """Add argument text; a value that is not a string is added as its
        JSON."""
        self._require_open("add arguments")
        if self._ended:
            raise HandleError(f"the arguments of {self.name} already ended")
        if self._context.cancelled:
            raise RunCancelled("the run was cancelled")
        self._args.append(fragment if isinstance(fragment, str) else json_text(fragment))

    def _valid_args(self) -> str | None:
        """The arguments as compact JSON (as the renderer sends them), ``""``
        for none, None when they are not JSON."""
        text = "".join(self._args)
        if not text:
            return ""
        try:
            return json_text(orjson.loads(text))
        except orjson.JSONDecodeError:
            return None

    def end(self) -> None:
        """Send the arguments and ``TOOL_CALL_END`` (rule 5)."""
        self._require_open("end the arguments")
        self._end(abnormal=False)

    def _end(self, *, abnormal: bool) -> None:
        if self._ended:
            return
        self._ended = True
        context = self._context
        text = self._valid_args()
        if text:
            context._emit({"type": "TOOL_CALL_ARGS", "toolCallId": self.id, "delta": text}, forced=abnormal)
        context._emit({"type": "TOOL_CALL_END", "toolCallId": self.id}, forced=True)
        if text is None and not abnormal:
            raise HandleError(f"the arguments of {self.name} are not JSON: {''.join(self._args)!r}")

    def result(self, content: Any, *, error: bool = False) -> None:
        """Send the call's outcome (``TOOL_CALL_RESULT``); ``error`` marks a
        failure. Ends the arguments first when they are still open."""
        if self._state == "new":
            raise HandleError(f"cannot answer {self.name}: it was never opened")
        if self._answered:
            raise HandleError(f"{self.name} ({self.id}) already has its result")
        if self._state == "open":
            self._end(abnormal=False)
        self._answered = True
        self._context._result(self.id, content, error)

    def _close(self, *, abnormal: bool) -> None:
        self._end(abnormal=abnormal)


class StepScope(_Handle):
    """A named step: ``STEP_STARTED`` … ``STEP_FINISHED``."""

    kind = "step"

    def __init__(self, context: RunContext, name: str) -> None:
        super().__init__(context)
        if not isinstance(name, str) or not name:
            raise HandleError("a step needs a name")
        self.name = name

    def __enter__(self) -> StepScope:
        handle: StepScope = super().__enter__()
        return handle

    def _open(self) -> None:
        self._context._emit({"type": "STEP_STARTED", "stepName": self.name})

    def _close(self, *, abnormal: bool) -> None:
        self._context._emit({"type": "STEP_FINISHED", "stepName": self.name}, forced=True)


class SubagentScope(_Handle):
    """A subagent invocation: everything emitted inside is attributed to it
    (rule 3). Ends ``SUBAGENT_FINISHED``, or ``SUBAGENT_ERROR`` when left by
    an exception or a cancellation."""

    kind = "subagent"

    def __init__(self, context: RunContext, name: str, description: str | None) -> None:
        super().__init__(context)
        if not isinstance(name, str) or not name:
            raise HandleError("a subagent needs a name")
        self.name = name
        self.description = description
        self.id = ""

    def __enter__(self) -> SubagentScope:
        handle: SubagentScope = super().__enter__()
        return handle

    def _open(self) -> None:
        context = self._context
        self.id = context._new_id("subagent")
        event: Event = {"type": "SUBAGENT_STARTED", "subagentRunId": self.id, "name": self.name}
        if self.description is not None:
            event["description"] = self.description
        if context._subagents:
            event["parentSubagentRunId"] = context._subagents[-1]
        context._emit(event)
        context._subagents.append(self.id)

    def _close(self, *, abnormal: bool) -> None:
        context = self._context
        if self.id in context._subagents:
            context._subagents.remove(self.id)
        if abnormal:
            stopped = context.cancelled or isinstance(self._exc, (RunCancelled, asyncio.CancelledError))
            message = STOPPED_TEXT if stopped else MASKED_ERROR_TEXT
            context._emit({"type": "SUBAGENT_ERROR", "subagentRunId": self.id, "message": message}, forced=True)
        else:
            context._emit({"type": "SUBAGENT_FINISHED", "subagentRunId": self.id}, forced=True)


async def run_agent(
    agent: Agent,
    context: RunContext,
    *,
    error_text: str = MASKED_ERROR_TEXT,
    expose_errors: bool = False,
) -> None:
    """Drive one run of ``agent`` (see the module docstring). An exception
    from the agent is logged, sent as ``RUN_ERROR`` (``error_text``, or its
    own text with ``expose_errors``) and re-raised."""
    context.start()
    try:
        outcome = agent(context)
        if inspect.isawaitable(outcome):
            await outcome
    except RunCancelled:
        _end_cancelled(context)
    except asyncio.CancelledError:
        context.cancel()
        _end_cancelled(context)
        raise
    except Exception as exc:
        logger.warning("AG-UI agent failed; the wire carries the masked text", exc_info=exc)
        if not context.ended:
            context.fail(str(exc) if expose_errors else error_text)
        raise
    else:
        if not context.ended:
            context.finish()


def _end_cancelled(context: RunContext) -> None:
    if context.ended:
        return
    try:
        context.finish(outcome={"type": "cancelled"})
    except Exception:  # noqa: BLE001 - something was left open by hand: the end a client accepts then
        context.fail(STOPPED_TEXT, code=STOPPED_CODE)
