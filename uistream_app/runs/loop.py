"""The tool loop: model, tools, model again, until the model is done.

``ToolLoop`` holds configuration only; each ``run()`` keeps its own state,
so one loop serves many runs at once. Its step rules, failure policy and
cancellation guarantee are in docs/operations.md ("The tool loop").
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from ..protocol.events import (
    Done,
    Event,
    Finish,
    ReasoningDelta,
    ReasoningEnd,
    StepFinished,
    TextDelta,
    ToolApprovalRequest,
    ToolCall,
    ToolDenied,
    ToolInputError,
    ToolResult,
    Usage,
)
from ..telemetry import tool_failed, trace_model_call, trace_tool_call
from .errors import ToolError
from .messages import AssistantMessage, ModelMessage, ModelOptions, ReasoningPart, ToolCallRequest, ToolMessage
from .model import ChatModel
from .tools import Tool, ToolArgumentsError, ToolContext, tool_output_text

__all__ = [
    "DEFAULT_MAX_STEPS",
    "MASKED_TOOL_ERROR",
    "AfterToolHook",
    "BeforeToolHook",
    "ToolApproval",
    "ToolLoop",
]

logger = logging.getLogger("uistream_app.runs")

MASKED_TOOL_ERROR: Final = "An error occurred."
DEFAULT_MAX_STEPS: Final = 8

#: Called before a tool runs (after its arguments validated). Return None to
#: run the tool, or a ``ToolResult`` to use instead; raise ``ToolError`` to
#: refuse the call with a message.
BeforeToolHook: TypeAlias = Callable[[ToolContext], "Awaitable[ToolResult | None] | ToolResult | None"]
#: Called after a tool ran (or failed). Return None to keep the result, or a
#: replacement ``ToolResult``.
AfterToolHook: TypeAlias = Callable[[ToolContext, ToolResult], "Awaitable[ToolResult | None] | ToolResult | None"]


@dataclass(frozen=True, slots=True)
class ToolApproval:
    """A person's decision on a call that needed approval."""

    approval_id: str
    approved: bool
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class ClientToolResult:
    """What the browser answered for a client-side tool's call."""

    output: Any
    is_error: bool = False


@dataclass(slots=True)
class _Run:
    """One run's state. ``ToolLoop.run`` makes one per call, so concurrent
    runs of one loop share nothing that changes."""

    conversation: list[ModelMessage]
    approvals: Mapping[str, ToolApproval]
    client_results: Mapping[str, ClientToolResult]
    step: int = 0
    waiting: bool = False  # a call of the last settled batch awaits its answer


@dataclass(slots=True)
class _Outcome:
    event: Event | None  # None: nothing to say yet (a client tool is running)
    message: ToolMessage | None  # None: the call is not answered yet (approval, client)


def _as_tool(item: Tool | Callable[..., Any]) -> Tool:
    return item if isinstance(item, Tool) else Tool(item)


class ToolLoop:
    """Runs ``model`` with ``tools`` until it answers without calling one
    (docs/operations.md, "The tool loop"). A loop object holds
    configuration only: one may serve many runs, concurrently."""

    def __init__(
        self,
        model: ChatModel,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        *,
        max_steps: int = DEFAULT_MAX_STEPS,
        options: ModelOptions | None = None,
        error_text: str = MASKED_TOOL_ERROR,
        max_steps_reason: str = "length",
        before_tool: BeforeToolHook | None = None,
        after_tool: AfterToolHook | None = None,
    ) -> None:
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self.model = model
        self.tools: dict[str, Tool] = {}
        for item in tools:
            t = _as_tool(item)
            if t.name in self.tools:
                raise ValueError(f"two tools are named {t.name!r}")
            self.tools[t.name] = t
        self.max_steps = max_steps
        self.options = options
        self.error_text = error_text
        self.max_steps_reason = max_steps_reason
        self._before_tool = before_tool
        self._after_tool = after_tool

    # -- hooks (override in a subclass, or pass callables) ---------------------

    async def before_tool(self, context: ToolContext) -> ToolResult | None:
        """Called before each tool call runs, its arguments already valid.
        Override to log, authorise or short-circuit a call: return a
        ``ToolResult`` to use it instead of running the tool."""
        if self._before_tool is None:
            return None
        result = self._before_tool(context)
        return await result if inspect.isawaitable(result) else result

    async def after_tool(self, context: ToolContext, result: ToolResult) -> ToolResult | None:
        """Called after each tool call with its result (errors included).
        Override to log or rewrite results; return None to keep it."""
        if self._after_tool is None:
            return None
        replaced = self._after_tool(context, result)
        return await replaced if inspect.isawaitable(replaced) else replaced

    def approval_id(self, call: ToolCallRequest) -> str:
        """The id of the approval request for ``call`` (deterministic, so a
        run encodes to the same bytes every time)."""
        return f"approval-{call.id}"

    # -- the run ---------------------------------------------------------------

    async def run(
        self,
        messages: Sequence[ModelMessage],
        *,
        approvals: Mapping[str, ToolApproval] | None = None,
        client_results: Mapping[str, ClientToolResult] | None = None,
    ) -> AsyncGenerator[Event, None]:
        """The run's events. ``approvals`` maps tool call ids to a person's
        decisions, for calls that awaited approval in an earlier run;
        ``client_results`` the browser's results of client-side tools."""
        state = _Run(list(messages), approvals or {}, client_results or {})
        conversation = state.conversation
        specs = [t.spec for t in self.tools.values()]

        pending = _unanswered_calls(conversation)
        if pending:
            async with aclosing(self._answer(state, pending)) as answers:
                async for event in answers:
                    yield event
            if state.waiting:
                yield StepFinished(state.step)
                yield Done()
                return

        model_stream = self.model.stream
        while True:
            texts: list[str] = []
            reasoning: list[str] = []
            calls: list[ToolCall] = []
            # Reasoning parts that came with provider metadata (a thinking
            # signature, an encrypted reasoning item): the next call sends
            # them back. ``mark`` is where the open part's text began.
            reasoning_parts: list[ReasoningPart] = []
            mark = 0
            stream = model_stream(conversation, specs, self.options)
            traced = trace_model_call(self.model)  # the call's span; None when the run is not traced
            try:
                async for event in stream:
                    cls = type(event)
                    if cls is TextDelta:
                        texts.append(event.text)  # type: ignore[union-attr]
                    elif cls is ReasoningDelta:
                        reasoning.append(event.text)  # type: ignore[union-attr]
                    elif cls is ReasoningEnd:
                        metadata = event.provider_metadata  # type: ignore[union-attr]
                        if metadata:
                            reasoning_parts.append(ReasoningPart("".join(reasoning[mark:]), metadata))
                        mark = len(reasoning)
                    elif cls is ToolCall and not event.provider_executed:  # type: ignore[union-attr]
                        # A call the provider runs itself (web search, code
                        # execution…) is answered in this same stream by its
                        # ``ToolResult``; only the others are the loop's.
                        calls.append(event)  # type: ignore[arg-type]
                    elif traced is not None and (cls is Usage or cls is Finish):
                        traced.observe(event)  # type: ignore[arg-type]
                    yield event
            except BaseException as exc:
                if traced is not None:
                    traced.failed(exc)
                raise
            finally:
                aclose = getattr(stream, "aclose", None)
                if aclose is not None:
                    await aclose()
                if traced is not None:
                    traced.end()

            requests = tuple(ToolCallRequest(c.tool_call_id, c.tool_name, c.input) for c in calls)
            conversation.append(AssistantMessage("".join(texts), requests, "".join(reasoning), tuple(reasoning_parts)))
            if requests:
                # Closed explicitly: a nested generator left to the garbage
                # collector would cancel its tools late, or never.
                async with aclosing(self._answer(state, requests)) as answers:
                    async for event in answers:
                        yield event
            yield StepFinished(state.step)
            state.step += 1
            if not requests or state.waiting:
                yield Done()
                return
            if state.step >= self.max_steps:
                yield Done(self.max_steps_reason)
                return

    async def _answer(self, state: _Run, calls: Sequence[ToolCallRequest]) -> AsyncGenerator[Event, None]:
        """Settle ``calls``: yield what they say and append each answer to
        the conversation; afterwards ``state.waiting`` says whether one of
        them is still unanswered (an approval, a client tool)."""
        state.waiting = False
        async with aclosing(self._settle(state, calls)) as outcomes:
            async for outcome in outcomes:
                if outcome.event is not None:
                    yield outcome.event
                if outcome.message is None:
                    state.waiting = True
                else:
                    state.conversation.append(outcome.message)

    async def _settle(self, state: _Run, calls: Sequence[ToolCallRequest]) -> AsyncGenerator[_Outcome, None]:
        """Run ``calls`` concurrently, yield their outcomes in call
        order; on exit (normal, closed or cancelled) no task is left."""
        snapshot = tuple(state.conversation)
        slots: list[_Outcome | asyncio.Task[_Outcome]] = []
        try:
            for call in calls:
                ready = self._prepare(state, call, snapshot)
                if isinstance(ready, _Outcome):
                    slots.append(ready)
                else:
                    tool, context = ready
                    execution = self._execute(tool, context)
                    traced = trace_tool_call(execution, call.name, call.id, context.arguments, tool.description)
                    slots.append(asyncio.create_task(traced))
            for slot in slots:
                yield slot if isinstance(slot, _Outcome) else await slot
        finally:
            running = [s for s in slots if isinstance(s, asyncio.Task) and not s.done()]
            for task in running:
                task.cancel()
            if running:
                await asyncio.gather(*running, return_exceptions=True)

    def _prepare(
        self, state: _Run, call: ToolCallRequest, conversation: Sequence[ModelMessage]
    ) -> _Outcome | tuple[Tool, ToolContext]:
        """What can be decided without running anything: unknown tool, bad
        arguments, approval needed or denied. Else the tool and its context."""
        tool = self.tools.get(call.name)
        if tool is None:
            text = f"Model tried to call unavailable tool '{call.name}'."
            return _Outcome(
                ToolInputError(call.id, call.name, _loose_json(call.arguments), text, dynamic=True),
                ToolMessage(call.id, text, is_error=True, tool_name=call.name),
            )
        try:
            arguments = tool.parse_arguments(call.arguments)
        except ToolArgumentsError as exc:
            return _Outcome(
                ToolInputError(call.id, call.name, exc.input, str(exc)),
                ToolMessage(call.id, str(exc), is_error=True, tool_name=call.name),
            )
        if tool.client_side:
            answer = state.client_results.get(call.id)
            if answer is None:
                return _Outcome(None, None)  # the browser runs it; the run waits
            text = tool_output_text(answer.output)
            return _Outcome(
                ToolResult(call.id, answer.output, is_error=answer.is_error, tool_name=call.name),
                ToolMessage(call.id, text, is_error=answer.is_error, tool_name=call.name),
            )
        if tool.needs_approval(arguments):
            decision = state.approvals.get(call.id)
            if decision is None:
                return _Outcome(ToolApprovalRequest(self.approval_id(call), call.id), None)
            if not decision.approved:
                text = "The user denied this tool call." + (f" Reason: {decision.reason}" if decision.reason else "")
                return _Outcome(ToolDenied(call.id), ToolMessage(call.id, text, is_error=True, tool_name=call.name))
        return tool, ToolContext(call.id, call.name, arguments, state.step, conversation)

    async def _execute(self, tool: Tool, context: ToolContext) -> _Outcome:
        """Hooks, the call under its timeout, and the error policy."""
        call_id, name = context.tool_call_id, context.tool_name
        try:
            result = await self.before_tool(context)
            if result is None:
                result = ToolResult(call_id, await _invoke(tool, context), tool_name=name)
        except ToolError as exc:
            tool_failed("ToolError")
            result = ToolResult(call_id, str(exc), is_error=True, tool_name=name)
        except _ToolTimeout:
            tool_failed("timeout")
            logger.warning("tool %s (call %s) timed out after %ss", name, call_id, tool.timeout)
            text = f"Tool {name} timed out after {tool.timeout:g} seconds."
            result = ToolResult(call_id, text, is_error=True, tool_name=name)
        except Exception as exc:
            tool_failed(type(exc).__name__)
            logger.exception("tool %s (call %s) failed", name, call_id)
            result = ToolResult(call_id, self.error_text, is_error=True, tool_name=name)
        try:
            replaced = await self.after_tool(context, result)
        except ToolError as exc:
            replaced = ToolResult(call_id, str(exc), is_error=True, tool_name=name)
        except Exception:
            logger.exception("after_tool hook failed for %s (call %s)", name, call_id)
            replaced = ToolResult(call_id, self.error_text, is_error=True, tool_name=name)
        if replaced is not None:
            result = replaced
        return _Outcome(result, ToolMessage(call_id, tool_output_text(result.content), result.is_error, name))


class _ToolTimeout(Exception):
    """The tool's own timeout expired (not a TimeoutError it raised)."""


async def _invoke(tool: Tool, context: ToolContext) -> Any:
    if tool.timeout is None:
        return await tool.invoke(context.arguments, context)
    scope = asyncio.timeout(tool.timeout)
    try:
        async with scope:
            return await tool.invoke(context.arguments, context)
    except TimeoutError:
        if scope.expired():
            raise _ToolTimeout from None
        raise


def _unanswered_calls(conversation: Sequence[ModelMessage]) -> tuple[ToolCallRequest, ...]:
    """The tool calls of the last assistant message that no tool message
    answers, when nothing but tool messages follows it."""
    answered: set[str] = set()
    for message in reversed(conversation):
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
        elif isinstance(message, AssistantMessage):
            return tuple(c for c in message.tool_calls if c.id not in answered)
        else:
            return ()
    return ()


def _loose_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text
