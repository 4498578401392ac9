"""OpenTelemetry traces of runs (docs/operations.md, "Tracing").

The only module that imports ``opentelemetry`` (the ``otel`` extra:
``pip install 'django-uistream[otel]'``), when a hook first records, not
when this module is imported: a process starts without it. Without the
package every hook below returns at its first line; with it but no tracer
provider configured the run's span is the API's non-recording one and the
hooks return at their second. Spans follow the OpenTelemetry GenAI semantic conventions:

* ``invoke_agent {model}``, one per run (``start_run``/``end_run``): the
  conversation, the owner's kind, how the run ended, its token totals. It
  is the current span while the run's task runs, so what the source does
  (a framework adapter's own spans, an HTTP client's) nests under it;
* ``chat {model}``, one per model call (``trace_model_call``): the model,
  its token usage and finish reason (an instrumented HTTP client's spans
  nest under the run's span: the model call's is never current, which
  would take a frame per streamed delta);
* ``execute_tool {name}``, one per tool call the server runs
  (``trace_tool_call``): the tool, the outcome, and, only with
  ``UISTREAM["TRACE_CONTENT"]`` (they may hold personal data), its
  arguments and result.

The run span's parent is the span current when the run starts: the
request's, made by the Django or ASGI instrumentation. A run handed to a
worker carries that context in its payload as a W3C ``traceparent``
(``carrier``/``continued``).

Nothing here imports Django: the tool loop (``runs/``, which must not)
calls the model and tool hooks; the run's own settings reach them through
a context variable that ``start_run`` sets.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib.util
import json
from collections.abc import Coroutine, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Final, TypeVar

from ..protocol.events import Finish, Usage


def _installed() -> bool:
    try:
        return importlib.util.find_spec("opentelemetry.trace") is not None
    except ImportError:  # hidden: sys.modules["opentelemetry"] is None
        return False


#: Whether the "otel" extra is installed (if not, every hook is a no-op).
#: Its modules are imported by the first hook that records (``_otel``),
#: not with this one: a process that never runs a turn (a management
#: command, a web process whose runs execute on workers) doesn't load them.
ENABLED: Final = _installed()


@functools.cache
def _otel() -> SimpleNamespace:
    """The OpenTelemetry API's modules, imported at their first use."""
    from opentelemetry import context, propagate, trace

    return SimpleNamespace(context=context, propagate=propagate, trace=trace)


def _error_status(description: str | None = None) -> Any:
    trace = _otel().trace
    return trace.Status(trace.StatusCode.ERROR, description)


__all__ = [
    "ENABLED",
    "ModelCall",
    "carrier",
    "continued",
    "current_context",
    "end_run",
    "in_context",
    "record_feedback",
    "run_span_id",
    "start_run",
    "tool_failed",
    "trace_model_call",
    "trace_tool_call",
]

T = TypeVar("T")

#: The instrumentation scope of every span made here.
TRACER_NAME: Final = "uistream_app"

# The GenAI semantic conventions' attribute names (the tests compare them
# with the ``opentelemetry-semantic-conventions`` package's constants; the
# package is not a dependency of the extra).
OPERATION_NAME: Final = "gen_ai.operation.name"
PROVIDER_NAME: Final = "gen_ai.provider.name"
AGENT_NAME: Final = "gen_ai.agent.name"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
REQUEST_MODEL: Final = "gen_ai.request.model"
RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_TYPE: Final = "gen_ai.tool.type"
TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
ERROR_TYPE: Final = "error.type"
# uistream's own, where the conventions have no name.
RUN_ID: Final = "uistream.run.id"
RUN_STATUS: Final = "uistream.run.status"
OWNER_KIND: Final = "uistream.owner.kind"
# A user's feedback on an answer: the conventions' evaluation event.
EVALUATION_EVENT: Final = "gen_ai.evaluation.result"
EVALUATION_NAME: Final = "gen_ai.evaluation.name"
EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"
FEEDBACK_REASON: Final = "uistream.feedback.reason"
#: ``gen_ai.evaluation.name`` of a user's rating.
USER_FEEDBACK: Final = "user_feedback"
TOOL_OUTCOME: Final = "uistream.tool.outcome"

#: ``gen_ai.provider.name`` by the module of a model's class.
_PROVIDERS: Final = {
    "uistream_app.runs.anthropic": "anthropic",
    "uistream_app.runs.openai": "openai",
    "uistream_app.runs.openai_responses": "openai",
}
#: The usage keys the encoder totals, and their attributes.
_USAGE_ATTRIBUTES: Final = (
    ("input_tokens", USAGE_INPUT_TOKENS),
    ("output_tokens", USAGE_OUTPUT_TOKENS),
    ("reasoning_tokens", USAGE_REASONING_OUTPUT_TOKENS),
    ("cached_input_tokens", USAGE_CACHE_READ_INPUT_TOKENS),
)


@dataclass(frozen=True, slots=True)
class _RunTrace:
    """What the model and tool hooks of one run need: its span, its
    conversation, and whether content may be recorded."""

    span: Any
    conversation_id: str
    content: bool


#: The traced run whose task this is (None: tracing is off for it).
_RUN: contextvars.ContextVar[_RunTrace | None] = contextvars.ContextVar("uistream_run_trace", default=None)

_tracer: Any = None


def _get_tracer() -> Any:
    # A proxy tracer: it follows a provider configured later on.
    global _tracer
    if _tracer is None:
        _tracer = _otel().trace.get_tracer(TRACER_NAME)
    return _tracer


# -- the run --------------------------------------------------------------------


def start_run(
    *, run_id: str, conversation_id: str, model: str, owner_kind: str, content: bool = False
) -> tuple[contextvars.Context | None, str]:
    """Open the run's span, a child of the current one (the request's).

    Returns the context the run's task must run in (the span current in
    it) and the span's trace id (32 hex digits), or ``(None, "")`` when
    nothing records: the task then runs in a copy of the caller's context,
    as it would anyway."""
    if not ENABLED:
        return None, ""
    span = _get_tracer().start_span(
        f"invoke_agent {model}",
        kind=_otel().trace.SpanKind.INTERNAL,
        attributes={
            OPERATION_NAME: "invoke_agent",
            AGENT_NAME: model,
            REQUEST_MODEL: model,
            CONVERSATION_ID: conversation_id,
            RUN_ID: run_id,
            OWNER_KIND: owner_kind,
        },
    )
    if not span.is_recording():
        return None, ""
    context = contextvars.copy_context()
    context.run(_enter_run, span, _RunTrace(span, conversation_id, content))
    return context, format(span.get_span_context().trace_id, "032x")


def run_span_id(context: contextvars.Context | None) -> str:
    """The span id (16 hex digits) of the run span current in ``context``
    (``start_run``'s), or "" when nothing records."""
    if context is None:
        return ""
    run = context.get(_RUN)
    if run is None:
        return ""
    return format(run.span.get_span_context().span_id, "016x")


def _enter_run(span: Any, run: _RunTrace) -> None:
    # Never detached: the context is the run task's own and ends with it.
    _otel().context.attach(_otel().trace.set_span_in_context(span))
    _RUN.set(run)


def end_run(
    status: str, *, finish_reason: str | None, usage: Mapping[str, int], error: BaseException | None = None
) -> None:
    """End the run span of this task with how the run ended (``Run.status``)."""
    run = _RUN.get()
    if run is None:
        return
    _RUN.set(None)  # once
    span = run.span
    span.set_attribute(RUN_STATUS, status)
    if finish_reason:
        span.set_attribute(RESPONSE_FINISH_REASONS, (finish_reason,))
    for key, attribute in _USAGE_ATTRIBUTES:
        if key in usage:
            span.set_attribute(attribute, usage[key])
    if status == "failed":
        span.set_attribute(ERROR_TYPE, type(error).__name__ if error is not None else "failed")
        if error is not None and run.content:
            span.record_exception(error)
        span.set_status(_error_status())
    elif status == "interrupted":
        span.set_attribute(ERROR_TYPE, "interrupted")
        span.set_status(_error_status("the process stopped before the run ended"))
    elif status == "lost":
        span.set_attribute(ERROR_TYPE, "lease_lost")
        span.set_status(_error_status("another process took the run over (its lease ran out here)"))
    span.end()


# -- feedback -------------------------------------------------------------------


def record_feedback(
    *, trace_id: str, span_id: str, run_id: str, rating: str, reason: str, comment: str, content: bool = False
) -> bool:
    """Send a user's rating of a run's answer as the GenAI conventions'
    evaluation event (``gen_ai.evaluation.result``, named
    ``user_feedback``, score 1 up and -1 down), on a span ``feedback``
    whose parent is the run's span (``trace_id`` / ``span_id``, stored on
    the run when it was traced), so a tracing backend shows the score on
    the run's trace. The comment goes on it only with ``content``
    (``TRACE_CONTENT``: it is the user's words). Returns whether a span
    was recorded: not without the extra, a provider, or a traced run."""
    if not ENABLED or not trace_id or not span_id:
        return False
    trace = _otel().trace
    try:
        parent = trace.SpanContext(
            trace_id=int(trace_id, 16),
            span_id=int(span_id, 16),
            is_remote=True,
            trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
        )
    except ValueError:
        return False
    context = trace.set_span_in_context(trace.NonRecordingSpan(parent))
    span = _get_tracer().start_span(
        "feedback", context=context, kind=trace.SpanKind.INTERNAL, attributes={RUN_ID: run_id}
    )
    if not span.is_recording():
        return False
    attributes: dict[str, Any] = {
        EVALUATION_NAME: USER_FEEDBACK,
        EVALUATION_SCORE_LABEL: rating,
        EVALUATION_SCORE_VALUE: 1.0 if rating == "up" else -1.0,
    }
    if reason:
        attributes[FEEDBACK_REASON] = reason
    if content and comment:
        attributes[EVALUATION_EXPLANATION] = comment
    span.add_event(EVALUATION_EVENT, attributes=attributes)
    span.end()
    return True


# -- model calls ----------------------------------------------------------------


def trace_model_call(model: object) -> ModelCall | None:
    """A ``chat`` span for one call of ``model``, or None when the run is
    not traced. The loop hands it the call's ``Usage`` and ``Finish``
    events (``observe``), its failure (``failed``), and ends it."""
    if not ENABLED:
        return None
    run = _RUN.get()
    if run is None:
        return None
    return ModelCall(model, run)


class ModelCall:
    """One model call's span (see ``trace_model_call``). The loop reads the
    model's events itself: a wrapper around the stream would cost a frame
    per delta, thousands per answer."""

    __slots__ = ("_ended", "_error", "_reasons", "_span", "_usage")

    def __init__(self, model: object, run: _RunTrace) -> None:
        name = _model_name(model)
        attributes: dict[str, Any] = {
            OPERATION_NAME: "chat",
            REQUEST_MODEL: name,
            CONVERSATION_ID: run.conversation_id,
        }
        provider = _PROVIDERS.get(type(model).__module__) or getattr(model, "provider_name", None)
        if isinstance(provider, str):
            attributes[PROVIDER_NAME] = provider
        self._span = _get_tracer().start_span(f"chat {name}", kind=_otel().trace.SpanKind.CLIENT, attributes=attributes)
        self._usage: dict[str, int] = {}
        self._reasons: list[str] = []
        self._error: BaseException | None = None
        self._ended = False

    def observe(self, event: Usage | Finish) -> None:
        """Take a ``Usage`` (summed) or ``Finish`` event of the call."""
        if type(event) is Usage:
            for key, _attribute in _USAGE_ATTRIBUTES:
                value = getattr(event, key)
                if value is not None:
                    self._usage[key] = self._usage.get(key, 0) + value
        else:
            self._reasons.append(event.reason)  # type: ignore[union-attr]

    def failed(self, error: BaseException) -> None:
        """The call raised ``error`` (a closing or a cancellation is no
        failure: the run was stopped or its client left)."""
        if not isinstance(error, (GeneratorExit, asyncio.CancelledError)):
            self._error = error

    def end(self) -> None:
        if self._ended:
            return
        self._ended = True
        span = self._span
        for key, attribute in _USAGE_ATTRIBUTES:
            if key in self._usage:
                span.set_attribute(attribute, self._usage[key])
        if self._reasons:
            span.set_attribute(RESPONSE_FINISH_REASONS, tuple(self._reasons))
        if self._error is not None:
            span.set_attribute(ERROR_TYPE, type(self._error).__name__)
            span.set_status(_error_status())
        span.end()


# -- tool calls -----------------------------------------------------------------


def trace_tool_call(
    call: Coroutine[Any, Any, T], tool_name: str, tool_call_id: str, arguments: Any, description: str = ""
) -> Coroutine[Any, Any, T]:
    """``call`` (the loop's execution of one tool call, which returns an
    outcome with the ``ToolResult``) under an ``execute_tool`` span, or
    ``call`` itself when its run is not traced. Run it as a task of its
    own: the span is current inside it."""
    if not ENABLED:
        return call
    run = _RUN.get()
    if run is None:
        return call
    return _tool_call(call, run, tool_name, tool_call_id, arguments, description)


async def _tool_call(
    call: Coroutine[Any, Any, T], run: _RunTrace, name: str, call_id: str, arguments: Any, description: str
) -> T:
    attributes: dict[str, Any] = {
        OPERATION_NAME: "execute_tool",
        TOOL_NAME: name,
        TOOL_CALL_ID: call_id,
        TOOL_TYPE: "function",
        CONVERSATION_ID: run.conversation_id,
    }
    if description:
        attributes[TOOL_DESCRIPTION] = description
    if run.content:
        attributes[TOOL_CALL_ARGUMENTS] = _json(arguments)
    span = _get_tracer().start_span(f"execute_tool {name}", kind=_otel().trace.SpanKind.INTERNAL, attributes=attributes)
    token = _otel().context.attach(_otel().trace.set_span_in_context(span))
    try:
        outcome = await call
    except asyncio.CancelledError:
        # The run was stopped or its client left while the tool ran: no failure of the tool's.
        span.set_attribute(TOOL_OUTCOME, "cancelled")
        raise
    except BaseException as exc:  # the loop catches a tool's errors: this is the loop's own
        span.set_attribute(ERROR_TYPE, type(exc).__name__)
        span.set_status(_error_status())
        if run.content:
            span.record_exception(exc)
        raise
    else:
        # The loop's outcome of the call: its ToolResult comes last.
        said = getattr(outcome, "events", ())
        result = said[-1] if said else None
        failed = bool(getattr(result, "is_error", False))
        span.set_attribute(TOOL_OUTCOME, "error" if failed else "success")
        if failed:
            if ERROR_TYPE not in (getattr(span, "attributes", None) or {}):
                span.set_attribute(ERROR_TYPE, "tool_error")
            span.set_status(_error_status())
        if run.content and result is not None:
            span.set_attribute(TOOL_CALL_RESULT, _json(getattr(result, "content", None)))
        return outcome
    finally:
        _otel().context.detach(token)
        span.end()


def tool_failed(error_type: str) -> None:
    """Say why the tool call of the current ``execute_tool`` span failed
    (``error.type``: ``ToolError``, ``timeout``, the exception's class)."""
    if not ENABLED or _RUN.get() is None:
        return
    span = _otel().trace.get_current_span()
    if span.is_recording():
        span.set_attribute(ERROR_TYPE, error_type)


# -- crossing to another thread or process -------------------------------------


def current_context() -> Any:
    """The OpenTelemetry context of the caller, to re-enter elsewhere with
    ``in_context`` (None without the package)."""
    return _otel().context.get_current() if ENABLED else None


@contextmanager
def in_context(context: Any) -> Iterator[None]:
    """Make ``context`` (from ``current_context``) current for the block."""
    if context is None:
        yield
        return
    token = _otel().context.attach(context)
    try:
        yield
    finally:
        _otel().context.detach(token)


def carrier() -> dict[str, str]:
    """The current trace context as W3C headers (``traceparent``…), for a
    run handed to a worker; empty when there is none."""
    headers: dict[str, str] = {}
    if ENABLED:
        _otel().propagate.inject(headers)
    return headers


@contextmanager
def continued(headers: Mapping[str, str] | None) -> Iterator[None]:
    """Continue the trace ``headers`` carry (``carrier``) for the block,
    unless a span is current already (a worker instrumented by
    opentelemetry-instrumentation-celery continues it itself)."""
    if not ENABLED or not headers or _otel().trace.get_current_span().get_span_context().is_valid:
        yield
        return
    token = _otel().context.attach(_otel().propagate.extract(dict(headers)))
    try:
        yield
    finally:
        _otel().context.detach(token)


# -- helpers --------------------------------------------------------------------


def _model_name(model: object) -> str:
    name = getattr(model, "name", None)
    return name if isinstance(name, str) and name else type(model).__name__


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)
