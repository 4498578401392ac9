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
    Custom,
    Done,
    Event,
    Finish,
    ReasoningDelta,
    ReasoningEnd,
    SteeringMessage,
    StepFinished,
    TextDelta,
    TextEnd,
    ToolApprovalRequest,
    ToolApprovalResponse,
    ToolCall,
    ToolDenied,
    ToolInputError,
    ToolResult,
    Usage,
)
from ..protocol.ui.encoder import output_value
from .failures import ToolError
from .messages import (
    AssistantMessage,
    AssistantPart,
    CustomPart,
    ModelMessage,
    ModelOptions,
    ProviderToolCall,
    ProviderToolResult,
    ReasoningPart,
    TextPart,
    ToolCallRequest,
    ToolMessage,
)
from .model import ChatModel
from .steering import SteeringInbox
from .telemetry import tool_failed, trace_model_call, trace_tool_call
from .tools import ApprovalStatus, Tool, ToolArgumentsError, ToolContext, approval_status, tool_output_text

__all__ = [
    "DEFAULT_MAX_STEPS",
    "MASKED_TOOL_ERROR",
    "AfterToolHook",
    "BeforeToolHook",
    "ToolApproval",
    "ToolApprovalPolicy",
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
#: A run's approval policy (ai@7's ``toolApproval``), asked before a tool's
#: own ``needs_approval`` and winning over it: a function of the call's
#: ``ToolContext``, or a mapping of tool names to a status or a function of
#: (arguments, context). It answers an approval status (``"user-approval"``,
#: ``"approved"``, ``"denied"``, ``"not-applicable"``, or ``{"type", "reason"}``,
#: or an ``ApprovalStatus``), maybe awaitably; None leaves the call to the
#: tool's own rule (docs/operations.md, "Approval policies").
ToolApprovalPolicy: TypeAlias = "Callable[[ToolContext], Any] | Mapping[str, Any]"

DENIED_TEXT: Final = "The user denied this tool call."
POLICY_DENIED_TEXT: Final = "The tool call was denied by the approval policy."


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
    context: Any = None  # the runtime context (ToolContext.runtime_context)
    steering: SteeringInbox | None = None
    step: int = 0
    waiting: bool = False  # a call of the last settled batch awaits its answer


@dataclass(slots=True)
class _Outcome:
    events: tuple[Event, ...]  # (): nothing to say yet (a client tool is running)
    message: ToolMessage | None  # None: the call is not answered yet (approval, client)
    #: Said on the way (an automatic approval, a preliminary output): the
    #: call's own outcome is still to come.
    progress: bool = False


def _said(*events: Event) -> _Outcome:
    return _Outcome(events, None, progress=True)


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
        tool_approval: ToolApprovalPolicy | None = None,
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
        self.tool_approval = tool_approval

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

    async def approval(self, tool: Tool, context: ToolContext) -> ApprovalStatus:
        """Whether the call ``context`` describes runs, waits for a person,
        or is approved or denied at once: the run's ``tool_approval`` policy
        wins; where it has no opinion (None, or no entry for the tool) the
        tool's own ``needs_approval`` decides (ai@7's ``resolveToolApproval``,
        but a policy's None defers instead of waiving the tool's rule)."""
        policy = self.tool_approval
        answer: Any = None
        if callable(policy):
            answer = policy(context)
        elif policy is not None:
            rule = policy.get(context.tool_name)
            answer = rule(dict(context.arguments), context) if callable(rule) else rule
        if inspect.isawaitable(answer):
            answer = await answer
        status = approval_status(answer)
        if status is not None:
            return status
        return await tool.approval(dict(context.arguments), context)

    async def record_call(self, tool: Tool, context: ToolContext) -> None:
        """Called just before a call of a tool that is not ``idempotent``
        runs (its arguments valid, its approval given), after everything the
        run said so far (the call itself among it) was yielded. The chat
        endpoints' loop waits here until the run's stored record holds the
        call, so a process that continues the run after this one died knows
        it may have run, and does not run it again (docs/operations.md,
        "Continuing a run whose process is gone"); an exception here
        fails the call's run before the tool runs. The default does nothing."""

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
        context: Any = None,
        steering: SteeringInbox | None = None,
        steps_taken: int = 0,
    ) -> AsyncGenerator[Event, None]:
        """The run's events. ``approvals`` maps tool call ids to a person's
        decisions, for calls that awaited approval in an earlier run;
        ``client_results`` the browser's results of client-side tools;
        ``context`` is what tools and approval rules see as
        ``ToolContext.runtime_context``; ``steering`` the run's inbox of
        messages sent while it runs (``runs.steering``: taken at each step
        boundary; the loop ends it where it ends, its owner where the run
        fails or is cancelled); ``steps_taken`` the model calls the run made
        before this loop took it over (a run continued after its process
        died): they count against ``max_steps``."""
        state = _Run(list(messages), approvals or {}, client_results or {}, context, steering, step=steps_taken)
        if steering is not None:
            steering.listening = True
        conversation = state.conversation
        specs = [t.spec for t in self.tools.values()]

        pending = _unanswered_calls(conversation)
        if pending:
            async with aclosing(self._answer(state, pending)) as answers:
                async for event in answers:
                    yield event
            if state.waiting:
                _end_steering(state, "waiting-for-tool-results")
                yield StepFinished(state.step)
                yield Done()
                return

        model_stream = self.model.stream
        while True:
            if state.step >= self.max_steps:
                # Only a continued run gets here: its earlier owners used the steps.
                _end_steering(state, "stop-condition")
                yield Done(self.max_steps_reason)
                return
            if steering is not None:
                for steered in steering.take(state.step):
                    conversation.append(steered.message)
                    yield SteeringMessage(steered.id, [dict(p) for p in steered.parts])
            finish_reason: str | None = None
            texts: list[str] = []
            reasoning: list[str] = []
            calls: list[ToolCall] = []
            # Reasoning parts that came with provider metadata (a thinking
            # signature, an encrypted reasoning item): the next call sends
            # them back. ``mark`` is where the open part's text began.
            reasoning_parts: list[ReasoningPart] = []
            mark = 0
            # The step in order (``AssistantMessage.parts``): what the
            # native providers send back, provider-run tools included.
            # ``text_mark``: where the open text part's text began.
            parts: list[AssistantPart] = []
            text_mark = 0
            stream = model_stream(conversation, specs, self.options)
            traced = trace_model_call(self.model)  # the call's span; None when the run is not traced
            try:
                async for event in stream:
                    cls = type(event)
                    if cls is TextDelta:
                        texts.append(event.text)  # type: ignore[union-attr]
                    elif cls is ReasoningDelta:
                        reasoning.append(event.text)  # type: ignore[union-attr]
                    elif cls is TextEnd:
                        text_mark = _text_part(parts, texts, text_mark, event.provider_metadata)  # type: ignore[union-attr]
                    elif cls is ReasoningEnd:
                        text_mark = _text_part(parts, texts, text_mark)
                        metadata = event.provider_metadata  # type: ignore[union-attr]
                        part = ReasoningPart("".join(reasoning[mark:]), metadata or {})
                        if metadata:
                            reasoning_parts.append(part)
                        parts.append(part)
                        mark = len(reasoning)
                    elif cls is ToolCall:
                        text_mark = _text_part(parts, texts, text_mark)
                        if event.provider_executed:  # type: ignore[union-attr]
                            # A call the provider runs itself (web search, code
                            # execution…) is answered in this same stream by its
                            # ``ToolResult``; only the others are the loop's.
                            parts.append(_provider_call(event))  # type: ignore[arg-type]
                        else:
                            calls.append(event)  # type: ignore[arg-type]
                            parts.append(_call_request(event))  # type: ignore[arg-type]
                    elif cls is ToolResult and event.provider_executed and not event.preliminary:  # type: ignore[union-attr]
                        text_mark = _text_part(parts, texts, text_mark)
                        parts.append(_provider_result(event))  # type: ignore[arg-type]
                    elif cls is Custom:
                        text_mark = _text_part(parts, texts, text_mark)
                        parts.append(CustomPart(event.kind, event.provider_metadata or {}))  # type: ignore[union-attr]
                    elif cls is Finish or cls is Usage:
                        if cls is Finish:
                            finish_reason = event.reason  # type: ignore[union-attr]
                        if traced is not None:
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

            _text_part(parts, texts, text_mark)
            requests = tuple(_call_request(c) for c in calls)
            conversation.append(
                AssistantMessage("".join(texts), requests, "".join(reasoning), tuple(reasoning_parts), tuple(parts))
            )
            if requests:
                # Closed explicitly: a nested generator left to the garbage
                # collector would cancel its tools late, or never.
                async with aclosing(self._answer(state, requests)) as answers:
                    async for event in answers:
                        yield event
            yield StepFinished(state.step)
            state.step += 1
            if state.waiting:
                _end_steering(state, "waiting-for-tool-results")
                yield Done()
                return
            if not requests:
                if not _steered_on(state, finish_reason):
                    _end_steering(state, "error" if finish_reason == "error" else "finished")
                    yield Done()
                    return
                if state.step >= self.max_steps:
                    _end_steering(state, "stop-condition")
                    yield Done()
                    return
                continue
            if state.step >= self.max_steps:
                _end_steering(state, "stop-condition")
                yield Done(self.max_steps_reason)
                return

    async def _answer(self, state: _Run, calls: Sequence[ToolCallRequest]) -> AsyncGenerator[Event, None]:
        """Settle ``calls``: yield what they say and append each answer to
        the conversation; afterwards ``state.waiting`` says whether one of
        them is still unanswered (an approval, a client tool)."""
        state.waiting = False
        async with aclosing(self._settle(state, calls)) as outcomes:
            async for outcome in outcomes:
                for event in outcome.events:
                    yield event
                if outcome.progress:
                    continue
                if outcome.message is None:
                    state.waiting = True
                else:
                    state.conversation.append(outcome.message)

    async def _settle(self, state: _Run, calls: Sequence[ToolCallRequest]) -> AsyncGenerator[_Outcome, None]:
        """Run ``calls`` concurrently, yield their outcomes in call order
        (what streaming tools and automatic approvals say on the way is
        yielded as it comes); on exit (normal, closed or cancelled) no task
        is left."""
        snapshot = tuple(state.conversation)
        slots: list[_Outcome | asyncio.Task[_Outcome]] = []
        said: asyncio.Queue[Event] = asyncio.Queue()
        streaming = False  # whether a tool of this batch streams
        try:
            for call in calls:
                ready = await self._prepare(state, call, snapshot)
                if isinstance(ready, _Outcome):
                    slots.append(ready)
                else:
                    tool, context, before = ready
                    if before:
                        yield _said(*before)
                    streaming = streaming or tool.streams
                    if not tool.idempotent:
                        await self.record_call(tool, context)
                    execution = self._execute(tool, context, said.put_nowait)
                    traced = trace_tool_call(execution, call.name, call.id, context.arguments, tool.description)
                    slots.append(asyncio.create_task(traced))
            for slot in slots:
                if isinstance(slot, _Outcome):
                    yield slot
                    continue
                while streaming and not slot.done():
                    getter = asyncio.ensure_future(said.get())
                    try:
                        await asyncio.wait((slot, getter), return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        if not getter.done():
                            getter.cancel()
                            await asyncio.gather(getter, return_exceptions=True)
                    if not getter.cancelled():
                        yield _said(getter.result())
                # A call says all it says before it ends: drained here, its
                # progress comes before its outcome.
                while not said.empty():
                    yield _said(said.get_nowait())
                yield await slot
        finally:
            running = [s for s in slots if isinstance(s, asyncio.Task) and not s.done()]
            for task in running:
                task.cancel()
            if running:
                await asyncio.gather(*running, return_exceptions=True)

    async def _prepare(
        self, state: _Run, call: ToolCallRequest, conversation: Sequence[ModelMessage]
    ) -> _Outcome | tuple[Tool, ToolContext, tuple[Event, ...]]:
        """What can be decided without running anything: unknown tool, bad
        arguments, approval needed or denied. Else the tool, its context and
        what to say before it runs (an automatic approval)."""
        tool = self.tools.get(call.name)
        if tool is None:
            text = f"Model tried to call unavailable tool '{call.name}'."
            return _Outcome(
                (ToolInputError(call.id, call.name, _loose_json(call.arguments), text, dynamic=True),),
                ToolMessage(call.id, text, is_error=True, tool_name=call.name),
            )
        try:
            arguments = tool.parse_arguments(call.arguments)
        except ToolArgumentsError as exc:
            return _Outcome(
                (ToolInputError(call.id, call.name, exc.input, str(exc)),),
                ToolMessage(call.id, str(exc), is_error=True, tool_name=call.name),
            )
        if tool.client_side:
            answer = state.client_results.get(call.id)
            if answer is None:
                return _Outcome((), None)  # the browser runs it; the run waits
            text = tool_output_text(answer.output)
            return _Outcome(
                (ToolResult(call.id, answer.output, is_error=answer.is_error, tool_name=call.name),),
                ToolMessage(call.id, text, is_error=answer.is_error, tool_name=call.name),
            )
        context = ToolContext(call.id, call.name, arguments, state.step, conversation, state.context)
        try:
            status = await self.approval(tool, context)
        except Exception:
            # A rule that fails must not run the call: it is an error the
            # model reads, masked, with the detail in the log.
            logger.exception("the approval rule for %s (call %s) failed", call.name, call.id)
            return _Outcome(
                (ToolResult(call.id, self.error_text, is_error=True, tool_name=call.name),),
                ToolMessage(call.id, self.error_text, is_error=True, tool_name=call.name),
            )
        decision = state.approvals.get(call.id)
        if decision is not None:
            # A person answered this call in an earlier run. A policy that
            # denies its (maybe edited) arguments still wins; else the
            # person's answer stands.
            if status.type == "denied":
                # Said as the policy's answer to the person's approval, so
                # the message and the run's decisions tell who denied it.
                overruled = _denied(call, POLICY_DENIED_TEXT, status.reason)
                overruled.events = (ToolApprovalResponse(decision.approval_id, False, status.reason), *overruled.events)
                return overruled
            if not decision.approved:
                return _denied(call, DENIED_TEXT, decision.reason)
            return tool, context, ()
        if status.type == "not-applicable":
            return tool, context, ()
        approval_id = self.approval_id(call)
        if status.type == "user-approval":
            return _Outcome((ToolApprovalRequest(approval_id, call.id, status.reason),), None)
        approved = status.type == "approved"
        decided: tuple[Event, ...] = (
            ToolApprovalRequest(approval_id, call.id, is_automatic=True),
            ToolApprovalResponse(approval_id, approved, status.reason),
        )
        if approved:
            return tool, context, decided
        text = POLICY_DENIED_TEXT + (f" Reason: {status.reason}" if status.reason else "")
        return _Outcome((*decided, ToolDenied(call.id)), ToolMessage(call.id, text, is_error=True, tool_name=call.name))

    async def _execute(self, tool: Tool, context: ToolContext, say: Callable[[Event], None]) -> _Outcome:
        """Hooks, the call under its timeout, and the error policy. A
        streaming tool's values go to ``say`` as preliminary outputs."""
        call_id, name = context.tool_call_id, context.tool_name

        def progress(value: Any) -> None:
            say(ToolResult(call_id, value, tool_name=name, preliminary=True))

        try:
            result = await self.before_tool(context)
            if result is None:
                result = ToolResult(call_id, await _invoke(tool, context, progress), tool_name=name)
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
        return _Outcome((result,), ToolMessage(call_id, tool_output_text(result.content), result.is_error, name))


def _end_steering(state: _Run, reason: Any) -> None:
    if state.steering is not None:
        state.steering.end(reason)


def _steered_on(state: _Run, finish_reason: str | None) -> bool:
    """Whether a final answer goes on for a steering message (runs.steering
    rules 1 and 2): one waits, or a queued one is promoted, unless the
    answer was cut short; never after a failed model call."""
    steering = state.steering
    if steering is None or finish_reason == "error":
        return False
    if steering.has_pending():
        return True
    return finish_reason not in ("length", "content-filter") and steering.promote_queued()


class _ToolTimeout(Exception):
    """The tool's own timeout expired (not a TimeoutError it raised)."""


def _denied(call: ToolCallRequest, text: str, reason: str | None) -> _Outcome:
    said = text + (f" Reason: {reason}" if reason else "")
    return _Outcome((ToolDenied(call.id),), ToolMessage(call.id, said, is_error=True, tool_name=call.name))


async def _invoke(tool: Tool, context: ToolContext, progress: Callable[[Any], None]) -> Any:
    if tool.timeout is None:
        return await tool.invoke(context.arguments, context, progress)
    scope = asyncio.timeout(tool.timeout)
    try:
        async with scope:
            return await tool.invoke(context.arguments, context, progress)
    except TimeoutError:
        if scope.expired():
            raise _ToolTimeout from None
        raise


def _text_part(parts: list[AssistantPart], texts: list[str], mark: int, metadata: Any = None) -> int:
    """Close the step's open text part (the text since ``mark``) into
    ``parts``; the new mark. A text the model never closed is closed by
    whatever comes after it."""
    if mark < len(texts) or metadata:
        parts.append(TextPart("".join(texts[mark:]), metadata or {}))
    return len(texts)


def _call_request(event: ToolCall) -> ToolCallRequest:
    return ToolCallRequest(event.tool_call_id, event.tool_name, event.input, event.provider_metadata or {})


def _provider_call(event: ToolCall) -> ProviderToolCall:
    return ProviderToolCall(
        event.tool_call_id,
        event.tool_name,
        _loose_json(event.input) if event.input.strip() else {},
        event.provider_metadata or {},
        bool(event.dynamic),
    )


def _provider_result(event: ToolResult) -> ProviderToolResult:
    return ProviderToolResult(
        event.tool_call_id,
        event.tool_name or "",
        output_value(event.content),
        event.is_error,
        event.provider_metadata or {},
    )


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
