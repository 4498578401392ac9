"""A turn's context and set-up: who asks, over what, and what the hooks
chose for it, once.

``TurnContext`` is the one argument of every hook that decides something
about a run (``ChatHooks.get_model(context)``, ``get_tools(context)``…).
It is built by the transport that took the turn (HTTP, the WebSocket,
AG-UI) and, on a Celery worker, again from the stored run, so a choice
made from ``context.owner.user`` is the same wherever the run executes.

``TurnSetup`` is what ``ChatHooks.setup_turn`` resolved from those hooks:
the model, the tools, the approval policy, the history strategy, the
limits and the agent. ``ChatHooks.start_turn`` resolves it once per turn
and everything after reads it (docs/architecture.md, "A turn").

An override written before hooks took a context (``def get_tools(self)``)
still works for one release: ``adapt_legacy_hooks`` wraps it when its
class is made, with a ``DeprecationWarning`` naming the new signature.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import warnings
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar, cast

from ..owners import Owner
from ..runs.given import MAX_PROMPT_CHARS, clip, tools_record
from ..runs.model import model_name

if TYPE_CHECKING:
    from ..adapters import AgentAdapter
    from ..history import HistoryStrategy
    from ..live import RunChannel
    from ..protocol.events import Event
    from ..runs import ChatModel, ClientToolResult, Tool, ToolApproval, ToolApprovalPolicy
    from .continuation import Continued
    from .limits import RunUsageLimit

__all__ = [
    "CONTEXT_HOOKS",
    "AdoptedRun",
    "RunNotActive",
    "Transport",
    "TurnContext",
    "TurnSetup",
    "adapt_legacy_hooks",
    "context_hook",
    "failing_source",
    "no_source",
]

#: The transport a turn came over.
Transport = Literal["http", "websocket", "agui"]

#: The hooks that take a ``TurnContext``, in the order ``setup_turn`` calls them.
CONTEXT_HOOKS: Final = (
    "get_agent",
    "get_model",
    "get_tools",
    "get_tool_approval",
    "get_system_prompt",
    "get_max_steps",
    "get_usage_limits",
    "get_history_strategy",
)


@dataclass(frozen=True)
class TurnContext:
    """Who asks for a turn, and over what (see the module docstring).

    ``owner`` is the ``Owner`` (``owner.user`` the signed-in user, else
    None and ``owner.session_key`` the anonymous visitor's session; a
    visitor's very first message has no session yet). ``extra`` is what
    the client sent besides the messages: useChat's extra body keys (its
    ``body`` option; on the WebSocket, the frame's ``body``), AG-UI's
    ``forwardedProps``; read-only. ``request`` is the ``HttpRequest`` (on
    the WebSocket, the send's ``policies.SocketRequest``), None on a
    worker, where ``on_worker`` is True."""

    owner: Owner
    chat_id: str
    transport: Transport
    extra: Mapping[str, Any] = field(default_factory=dict)
    request: Any = field(default=None, compare=False, repr=False)
    on_worker: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.extra, MappingProxyType):
            object.__setattr__(self, "extra", MappingProxyType(dict(self.extra)))

    def as_payload(self) -> dict[str, Any]:
        """What a worker needs to build this context again (JSON): the
        transport and ``extra``; the owner and chat travel with the run."""
        return {"transport": self.transport, "extra": dict(self.extra)}


@dataclass(frozen=True, eq=False)
class TurnSetup:
    """What the hooks chose for one turn (``ChatHooks.setup_turn``).

    ``model`` is what the run records and streams from: with an agent, a
    stand-in that never streams (``adapters.AgentModel``). ``adapter`` is
    the agent's adapter (None for the tool loop and for a hand-written
    AG-UI agent); ``tools`` is empty with an agent, which brings its own."""

    context: TurnContext
    model: ChatModel
    agent: Any
    adapter: AgentAdapter | None
    tools: tuple[Tool, ...]
    tool_approval: ToolApprovalPolicy | None
    system_prompt: str | None
    max_steps: int
    usage_limits: tuple[RunUsageLimit, ...]
    history_strategy: HistoryStrategy

    def record(self) -> dict[str, Any]:
        """What the run was given, as stored with it (``Run.setup``, when
        it starts, with its first chunks): the model, the transport (and
        whether a worker ran it), the system prompt, the tools the model was
        offered (``runs.given``: bounded, no secrets), the steps allowed,
        the history strategy and approval policy by name; with an agent,
        what its adapter knows of its own instructions and tools. JSON."""
        tools, omitted = tools_record(self.tools)
        record: dict[str, Any] = {
            "model": model_name(self.model),
            "transport": self.context.transport,
            "on_worker": self.context.on_worker,
            "system_prompt": clip(self.system_prompt, MAX_PROMPT_CHARS) if self.system_prompt else None,
            "tools": tools,
            "max_steps": self.max_steps,
            "history_strategy": getattr(self.history_strategy, "name", type(self.history_strategy).__name__),
            "tool_approval": _dotted_name(self.tool_approval),
        }
        if omitted:
            record["tools_omitted"] = omitted
        if self.adapter is not None:
            try:
                described = self.adapter.describe()
                instructions, note = tuple(described.instructions), described.note
                agent_tools, agent_omitted = tools_record(described.tools)
            except Exception as exc:  # noqa: BLE001 - a record must never fail the run it records
                instructions, agent_tools, agent_omitted = (), [], 0
                note = f"the adapter could not describe the agent ({type(exc).__name__})"
            record["agent"] = {
                "framework": self.adapter.framework or type(self.adapter).__name__,
                "name": self.adapter.name,
                "instructions": [clip(text, MAX_PROMPT_CHARS) for text in instructions],
                "tools": agent_tools,
                "note": note,
            }
            if agent_omitted:
                record["agent"]["tools_omitted"] = agent_omitted
        return record


def _dotted_name(value: Any) -> str | None:
    """A policy by the dotted path of its function or class (of its class
    for an instance)."""
    if value is None:
        return None
    named = value if hasattr(value, "__qualname__") else type(value)
    return f"{named.__module__}.{named.__qualname__}"


@dataclass(frozen=True)
class AdoptedRun:
    """A run prepared in another process and adopted here (an executor's
    worker): what ``ChatHooks.start_turn`` needs besides its stored rows."""

    run_id: str
    channel: RunChannel
    approvals: dict[str, ToolApproval]
    client_results: dict[str, ClientToolResult]
    #: The start chunk's metadata, as the web process chose it.
    metadata: Any = None
    #: A run whose process died, continued here (``continuation.Continued``):
    #: its log's length and the half-done step it dropped.
    continued: Continued | None = None


class RunNotActive(Exception):
    """``start_turn`` of an ``AdoptedRun`` that ended meanwhile (settled,
    stopped): there is nothing to execute."""


#: The context of the hook a legacy override (one without ``context``) is
#: running, for the ``super()`` calls it makes without one.
_LEGACY_CONTEXT: contextvars.ContextVar[TurnContext] = contextvars.ContextVar("uistream_legacy_hook_context")

_Hook = TypeVar("_Hook", bound=Callable[..., Any])


def context_hook(method: _Hook) -> _Hook:
    """Marks one of ``ChatHooks``' own context hooks: called without its
    context (a ``super()`` call in an override written the old way), it
    gets the context of the turn that override is serving (None outside a
    turn: the defaults decide nothing from it)."""

    @functools.wraps(method)
    def hook(self: Any, context: TurnContext | None = None, /) -> Any:
        if context is None:
            context = _LEGACY_CONTEXT.get(None)
        return method(self, context)

    return cast(_Hook, hook)


def _takes_no_context(function: Any) -> bool:
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return False
    # self, and nothing else a context could be passed as.
    return len(parameters) == 1 and parameters[0].kind in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    )


def _legacy(name: str, old: Callable[[Any], Any]) -> Callable[[Any, TurnContext], Any]:
    @functools.wraps(old)
    def hook(self: Any, context: TurnContext | None = None, /) -> Any:
        if context is None:
            return old(self)
        token = _LEGACY_CONTEXT.set(context)
        try:
            return old(self)
        finally:
            _LEGACY_CONTEXT.reset(token)

    hook.__uistream_legacy__ = name  # type: ignore[attr-defined]
    return hook


def adapt_legacy_hooks(cls: type) -> None:
    """Wrap each context hook ``cls`` gets without a ``context`` parameter
    (defined on it, or on a mixin before the hooks class in its MRO),
    warning once per hook at the class statement."""
    for name in CONTEXT_HOOKS:
        own = next((klass.__dict__[name] for klass in cls.__mro__ if name in klass.__dict__), None)
        if own is None or not callable(own) or getattr(own, "__uistream_legacy__", None) or not _takes_no_context(own):
            continue
        warnings.warn(
            f"{cls.__module__}.{cls.__qualname__}.{name}() takes no context: write "
            f"`def {name}(self, context)` (a uistream_app.hooks.TurnContext, with the owner, the chat and the "
            "transport of the turn). The form without it stops working in the next release.",
            DeprecationWarning,
            stacklevel=3,
        )
        setattr(cls, name, _legacy(name, own))


async def failing_source(exc: Exception) -> AsyncIterator[Event]:
    """A source that fails at once (with ``exc``): a run that could not
    start, ended as failed, in-band and stored."""
    nothing: tuple[Event, ...] = ()
    for event in nothing:
        yield event
    raise exc


async def no_source() -> AsyncIterator[Event]:
    """The source handed to an executor that builds its own (a worker)."""
    nothing: tuple[Event, ...] = ()
    for event in nothing:
        yield event
