"""``ChatHooks``: what a project overrides to shape a chat's runs, shared by
``ChatView``, ``AGUIView`` and ``ChatConsumer``, and the one way a turn
starts (``start_turn``).

Class attributes default from ``UISTREAM``; each ``get_*`` hook is one
override point (DRF's generics are the model). Every hook that decides
something about a run takes the turn's ``TurnContext`` (who asks, in which
chat, over which transport, with what extra keys), on HTTP, the
WebSocket, AG-UI and a Celery worker alike. The hooks say *what* a run
uses; the store and the runner do the work.

A setting the hooks can't use (``MODEL`` unimportable, not a model, a
provider name without its key…) raises ``ImproperlyConfigured`` in
``setup_turn``, before anything is written; ``setup_turn`` answers it as
``errors.Misconfigured`` (500 ``misconfigured``, the JSON body on HTTP and
AG-UI, an ``error`` frame on the WebSocket), because daphne and uvicorn
run no system checks and Django's own answer would be its HTML 500 page.
A bad ``MODEL`` says what its system check says (``model_setting_problem``
is the check's logic, ``load_model_setting`` the request's: one text).
"""

from __future__ import annotations

import functools
import inspect
import logging
import secrets
import threading
import typing
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, Final

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured

from .adapters import AgentAdapter, AgentModel, AgentTurn, adapter_for
from .conf import import_from_string, perform_import
from .conf import settings as uistream_settings
from .errors import Misconfigured
from .history import HistoryStrategy, LastMessages, load_strategy
from .lifecycle.continuation import replayed, turn_record
from .lifecycle.executors import executor_class
from .lifecycle.limits import RunUsageLimit, limit_usage, load_usage_limits
from .lifecycle.runner import RunHandle, Runner
from .lifecycle.store import ConversationStore, PreparedRun, Turn
from .lifecycle.turns import (
    AdoptedRun,
    RunNotActive,
    TurnContext,
    TurnSetup,
    adapt_legacy_hooks,
    context_hook,
    failing_source,
    no_source,
)
from .models import Message, MessageQuerySet, Run
from .owners import Owner
from .protocol.events import Event
from .recording import CURRENT_RECORDER
from .runs import (
    ChatModel,
    ModelSpecError,
    SystemMessage,
    Tool,
    ToolApprovalPolicy,
    ToolCallRequest,
    ToolContext,
    ToolLoop,
    is_model_spec,
    model_name,
    resolve_model,
    shared_model,
    ui_to_model_messages,
)

__all__ = [
    "AdoptedRun",
    "ChatHooks",
    "ModelSettingProblem",
    "RunNotActive",
    "ServerToolLoop",
    "TurnContext",
    "TurnSetup",
    "load_model_setting",
    "misconfigured",
    "model_setting_problem",
    "no_model_problem",
]

logger = logging.getLogger("uistream_app.hooks")

#: How ``UISTREAM["MODEL"]`` is named in the texts (a view's own is ``'ChatView.model'``).
MODEL_SETTING: Final = "UISTREAM['MODEL']"


# -- a model setting, checked and loaded (system checks E002, E008, E009, E011) ------------


@dataclass(frozen=True)
class ModelSettingProblem:
    """Why a model setting can't be used, as its system check reports it:
    ``check_id`` (``"uistream_app.E009"``), ``message`` and ``hint``.
    ``manage.py check`` shows it (``checks.py``), and a request that meets
    it under a server that ran no checks raises ``error()``: one text."""

    check_id: str
    message: str
    hint: str

    def error(self) -> ImproperlyConfigured:
        """The ``ImproperlyConfigured`` of a request that meets it: the
        check's message and then its hint, which names the fix."""
        stop = "" if self.message.endswith((".", "?", "!")) else "."
        return ImproperlyConfigured(f"{self.message}{stop} {self.hint}")


_IMPORT_HINT: Final = "Give the dotted path of a chat model class or factory."
_SHAPE_HINT: Final = (
    "Give a class or object with a stream(messages, tools, options) method, "
    "or a function of no arguments returning one."
)


def _spec_problem(key: str, spec: str, exc: ModelSpecError) -> ModelSettingProblem:
    return ModelSettingProblem("uistream_app.E011", f"{key} = {spec!r} cannot be used: {exc}", exc.hint)


def _import_problem(exc: ImproperlyConfigured) -> ModelSettingProblem:
    # import_from_string's text, which names the key: the same as E002's for TOOLS.
    return ModelSettingProblem("uistream_app.E002", str(exc), _IMPORT_HINT)


def _shape_problem(key: str, setting: object, reason: str) -> ModelSettingProblem:
    return ModelSettingProblem(
        "uistream_app.E009",
        f"{key} = {setting!r} is neither a chat model nor a callable returning one: {reason}.",
        _SHAPE_HINT,
    )


def no_model_problem(endpoints: Sequence[str]) -> ModelSettingProblem:
    """E008: ``MODEL`` unset, and ``endpoints`` (each ``"/route (module.View)"``,
    or the view alone where no route is known) have no model of their own."""
    if len(endpoints) == 1:
        these = "this chat endpoint has no model of its own"
    else:
        these = "these chat endpoints have no model of their own"
    return ModelSettingProblem(
        "uistream_app.E008",
        f"{MODEL_SETTING} is not set, and {these}: {', '.join(endpoints)}.",
        "Set UISTREAM['MODEL'] to a provider name such as 'anthropic:<model>', or to the "
        "dotted path of a chat model class or of a function returning one, or give each "
        "of these views a `model` attribute (or as_view(model=...)), a `get_model()` method or an `agent`.",
    )


def _is_model(value: object) -> bool:
    # A class with a stream method passes isinstance(..., ChatModel), a
    # runtime protocol: its instances are the models, not the class.
    return isinstance(value, ChatModel) and not isinstance(value, type)


def _says_nothing(annotation: object) -> bool:
    return annotation in (inspect.Parameter.empty, typing.Any, object) or isinstance(annotation, str)


def _factory_problem(value: Any) -> str | None:
    """Why calling ``value()`` can't make a model, as far as its signature
    tells without calling it: a required parameter (it is called with
    none), or a return annotation that names something without a
    ``stream`` method (``-> dict``). A factory is never called to find out:
    it may read keys, open clients or spend money, and checks run at every
    ``migrate``."""
    try:
        signature = inspect.signature(value, eval_str=True)
    except Exception:  # noqa: BLE001 - an annotation that names what only TYPE_CHECKING imports
        try:
            signature = inspect.signature(value)
        except (TypeError, ValueError):
            return None  # a builtin without a signature: nothing to tell
    required = [
        name
        for name, parameter in signature.parameters.items()
        if parameter.default is parameter.empty
        and parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
    ]
    if required:
        made = "its instances are made" if isinstance(value, type) else "it is called"
        return f"{made} with no arguments, and it requires {', '.join(map(repr, required))}"
    if isinstance(value, type):
        return None  # its instances are what it returns: their stream() was looked at
    returns = signature.return_annotation
    if returns is None:
        return "it is annotated to return None"
    if _says_nothing(returns):
        return None
    origin = typing.get_origin(returns) or returns
    if isinstance(origin, type) and not hasattr(origin, "stream"):
        return f"it is annotated to return {getattr(origin, '__qualname__', origin)}, which has no stream() method"
    return None


def _not_a_model(value: object) -> str | None:
    """Why ``value`` (a model setting, imported) makes no chat model
    without calling anything; None when it may."""
    if _is_model(value):
        return None
    if isinstance(value, type) and not hasattr(value, "stream"):
        return f"it is a class with no stream() method ({value.__qualname__})"
    if callable(value):
        return _factory_problem(value)
    return f"it is a {type(value).__name__}, which is neither a model nor callable"


#: ``_not_a_model`` of each class or factory a request has named, kept while
#: it lives: its signature is read once, not per request.
_shape_problems: weakref.WeakKeyDictionary[Any, str | None] = weakref.WeakKeyDictionary()


def _known_shape_problem(target: object) -> str | None:
    try:
        return _shape_problems[target]
    except KeyError:
        reason = _not_a_model(target)
    except TypeError:  # an object that takes no weak reference: asked each time
        return _not_a_model(target)
    _shape_problems[target] = reason
    return reason


def model_setting_problem(value: object, key: str = MODEL_SETTING) -> ModelSettingProblem | None:
    """The system check of a set model setting (E011, E002, E009): a
    provider name is made as a request would make it (that reads the
    environment and sends nothing), a dotted path imported, and a class or
    factory inspected, never called (``_factory_problem``)."""
    if is_model_spec(value):
        assert isinstance(value, str)
        try:
            resolve_model(value)
        except ModelSpecError as exc:
            return _spec_problem(key, value, exc)
        return None
    target = value
    if isinstance(value, str):
        try:
            target = import_from_string(value, key)
        except ImproperlyConfigured as exc:
            return _import_problem(exc)
    reason = _not_a_model(target)
    return None if reason is None else _shape_problem(key, value, reason)


def load_model_setting(value: object, key: str = MODEL_SETTING) -> ChatModel:
    """The chat model a set model setting names, for a request: a provider
    name made once per process (``shared_model``), a model as it is, a
    class or factory called (each time) once ``model_setting_problem``'s
    inspection passes. Raises the check's ``ImproperlyConfigured``, also
    for a factory whose result has no ``stream()`` (which the check can't
    know without calling it)."""
    if is_model_spec(value):
        assert isinstance(value, str)
        try:
            return shared_model(value)
        except ModelSpecError as exc:
            raise _spec_problem(key, value, exc).error() from exc
    target = value
    if isinstance(value, str):
        try:
            target = import_from_string(value, key)
        except ImproperlyConfigured as exc:
            raise _import_problem(exc).error() from exc
    if _is_model(target):
        return typing.cast(ChatModel, target)
    reason = _known_shape_problem(target)
    if reason is not None:
        raise _shape_problem(key, value, reason).error()
    assert callable(target)
    made = target()
    if _is_model(made):
        return typing.cast(ChatModel, made)
    shown = repr(made)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    raise _shape_problem(key, value, f"it returned {shown}, which has no stream() method").error()


# -- what a request that meets a misconfiguration is answered ---------------------------

#: The misconfigurations logged so far (by text): each once per process.
_reported: set[str] = set()
_reported_lock = threading.Lock()


def misconfigured(exc: ImproperlyConfigured) -> Misconfigured:
    """The answer to a request that met ``exc``: 500 ``misconfigured``.
    The text is logged at ERROR the first time this process meets it (not
    per request: every chat would repeat it). The client gets it where the
    project exposes errors (``DEBUG`` or ``UISTREAM["EXPOSE_ERRORS"]``),
    else the masked default, which points at the log and ``manage.py
    check``: a check's text names a setting and its value (a dotted path,
    a provider name, never a key's value), but ``ImproperlyConfigured``
    raised by a project's own hook may say anything."""
    text = str(exc)
    with _reported_lock:
        first = text not in _reported
        _reported.add(text)
    if first:
        logger.error("A chat turn cannot start: %s", text)
    if django_settings.DEBUG or uistream_settings.EXPOSE_ERRORS:
        return Misconfigured(text)
    return Misconfigured()


class ServerToolLoop(ToolLoop):
    """The tool loop of the chat endpoints: approval ids are unguessable
    (the server only accepts an answer that names the id it stored)."""

    def approval_id(self, call: ToolCallRequest) -> str:
        return "apv_" + secrets.token_urlsafe(18)

    async def record_call(self, tool: Tool, context: ToolContext) -> None:
        """With ``ON_OWNER_LOST = "continue"``, a call of a tool that is not
        idempotent runs only once the run's log holds it (its
        ``tool-input-available``; an approved call's id among the run's
        started calls): one write per step that calls such a tool, never per
        delta. A process that lost the run's lease fails here
        (``LeaseLost``), so its tool never runs. With ``"interrupt"`` no
        run is continued, so no call can run twice: nothing is written."""
        recorder = CURRENT_RECORDER.get()
        if recorder is not None and uistream_settings.ON_OWNER_LOST == "continue":
            await recorder.record_call(context.tool_call_id)


#: The set-up of the turn whose history the store is choosing, for the
#: default ``get_history`` (whose signature has no context).
_CHOOSING: ContextVar[TurnSetup] = ContextVar("uistream_choosing_history")


class ChatHooks:
    """The hooks of a chat endpoint (see the module docstring)."""

    model: Any = None
    tools: Sequence[Any] | None = None
    system_prompt: str | None = None
    max_steps: int | None = None
    sdk_version: int | None = None
    #: The last N stored messages the model sees; None: ``UISTREAM["HISTORY_MAX_MESSAGES"]``.
    history_max_messages: int | None = None
    #: How a turn's history is chosen (``history.HistoryStrategy``); None:
    #: ``UISTREAM["HISTORY_STRATEGY"]``, else ``LastMessages(history_max_messages)``.
    history_strategy: Any = None
    #: What one run may spend (``RunUsageLimit``s, like throttles); None:
    #: ``UISTREAM["USAGE_LIMITS"]``.
    usage_limits: Sequence[Any] | None = None
    #: The runs' approval policy (``runs.ToolApprovalPolicy``) or its dotted
    #: path; None: ``UISTREAM["TOOL_APPROVAL"]``.
    tool_approval: Any = None
    #: The ``UISTREAM["MCP_SERVERS"]`` whose tools join ``tools``, by name; None: all of them.
    mcp_servers: Sequence[str] | None = None
    #: An agent of another framework (pydantic-ai, LangGraph, the OpenAI
    #: Agents SDK) that answers instead of ``model`` and ``tools``
    #: (``adapters``; docs/adapters.md).
    agent: Any = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        adapt_legacy_hooks(cls)

    # -- the turn --------------------------------------------------------------------

    async def start_turn(
        self,
        turn: Turn,
        context: TurnContext,
        *,
        version: int,
        claim_owner: Callable[[], Awaitable[Owner]] | None = None,
        with_thread: bool = False,
        adopted: AdoptedRun | None = None,
        setup: TurnSetup | None = None,
    ) -> RunHandle:
        """Start ``turn`` for ``context.owner``: the one path every
        transport and executor takes (docs/architecture.md, "A turn").

        The hooks are asked once (``setup_turn``); the store applies the
        turn (``ConversationStore.prepare``: 404, 409 and the other
        refusals, with nothing written); the source is built
        (``get_source``) and the executor (``get_runner``) starts it. The
        returned handle's ``prepared`` is the ``PreparedRun``.

        ``adopted``: a worker's turn, prepared by a web process: the run is
        rebuilt from its rows (``ConversationStore.load``; ``RunNotActive``
        when it ended meanwhile) and executes here. There a hook's failure
        is the run's, stored and sent; in the web process it is raised
        before anything is written. ``setup``: the turn's, when the
        transport needed it first (AG-UI reads the input by it)."""
        failure: Exception | None = None
        if setup is None:
            await self._mcp_tools_listed()
            try:
                setup = self.setup_turn(context)
            except Exception as exc:
                if adopted is None:
                    raise  # nothing is written yet: the request's refusal
                failure = exc  # the worker's run is prepared: its failure, stored below
        store = self.get_store(setup, with_thread=with_thread) if setup is not None else ConversationStore()
        runner: Runner
        if adopted is None:
            assert setup is not None
            prepared = await store.prepare(
                turn,
                context.owner,
                version=version,
                model_name=model_name(setup.model),
                claim_owner=claim_owner,
                record_turn=functools.partial(turn_record, type(self), setup),
            )
            runner, metadata = self.get_runner(), None
        else:
            loaded = await store.load(
                adopted.run_id,
                context.owner,
                turn,
                approvals=adopted.approvals,
                client_results=adopted.client_results,
                channel=adopted.channel,
            )
            if loaded is None:
                raise RunNotActive(adopted.run_id)
            prepared, runner, metadata = loaded, Runner(), adopted.metadata
        prepared = replace(prepared, setup=setup)
        replay: list[Event] = []
        if adopted is not None and adopted.continued is not None:
            # A run whose process died, continued here: the half-done step's
            # kept part joins the history and is sent first (continuation).
            prepared, replay = adopted.continued.apply(prepared, setup.tools if setup is not None else ())
        try:
            if adopted is None:
                metadata = self.get_message_metadata(prepared)
            if failure is not None:
                source = failing_source(failure)
            elif runner.executes_here:
                assert setup is not None
                source = self.get_source(prepared.history, prepared, setup.model)
                if replay:
                    source = replayed(replay, source)
                if setup.usage_limits:
                    source = limit_usage(source, setup.usage_limits)
            else:
                source = no_source()  # its worker builds it
        except Exception as exc:  # noqa: BLE001 - the run is prepared: its failure is stored and sent
            source = failing_source(exc)
        # What a process continuing the run after this one died needs.
        record = turn_record(
            type(self),
            prepared.setup,
            prepared.turn,
            with_thread=prepared.thread is not None,
            approvals=prepared.approvals,
            client_results=prepared.client_results,
            metadata=metadata,
        )
        prepared = replace(prepared, turn_record=record)
        return await runner.start(prepared, source, metadata=metadata)

    async def _mcp_tools_listed(self) -> None:
        """Before ``setup_turn``, on the event loop: wait for the MCP
        servers' tool lists that ``get_tools`` would otherwise wait for
        while holding the loop (``lifecycle.mcp.mcp_listed``). Nothing to
        do without ``UISTREAM["MCP_SERVERS"]`` or when this endpoint uses
        none of them (``mcp_servers``)."""
        if uistream_settings.MCP_SERVERS and (self.mcp_servers is None or self.mcp_servers):
            from .lifecycle.mcp import mcp_listed  # the mcp extra: imported only where MCP_SERVERS is used

            await mcp_listed(self.mcp_servers)

    def setup_turn(self, context: TurnContext) -> TurnSetup:
        """Ask this endpoint's hooks, once, what ``context``'s turn uses.
        A setting they can't use (``ImproperlyConfigured``) is raised as
        ``Misconfigured`` (``misconfigured``): the house's 500, not
        Django's HTML page."""
        try:
            return self._ask_hooks(context)
        except ImproperlyConfigured as exc:
            raise misconfigured(exc) from exc

    def _ask_hooks(self, context: TurnContext) -> TurnSetup:
        agent = self.get_agent(context)
        adapter = self.get_adapter(agent) if agent is not None else None
        tools: tuple[Tool, ...] = ()
        approval = None
        if agent is None:
            model = self.get_model(context)
            tools = tuple(self.get_tools(context))
            approval = self.get_tool_approval(context)
        else:
            model = self.get_agent_model(agent, adapter)
        return TurnSetup(
            context=context,
            model=model,
            agent=agent,
            adapter=adapter,
            tools=tools,
            tool_approval=approval,
            system_prompt=self.get_system_prompt(context),
            max_steps=self.get_max_steps(context),
            usage_limits=tuple(self.get_usage_limits(context)),
            history_strategy=self.get_history_strategy(context),
        )

    # -- the hooks that decide (each takes the turn's context) ----------------------------

    @context_hook
    def get_agent(self, context: TurnContext) -> Any:
        """The agent this turn runs, or None for the tool loop over
        ``get_model`` and ``get_tools``. Override to choose per user or per
        conversation."""
        # Through the class, so a plain function is not bound as a method.
        return self.__dict__.get("agent", type(self).agent)

    @context_hook
    def get_model(self, context: TurnContext) -> ChatModel:
        """The chat model of this turn's run. Override to pick a model per
        user (``context.owner.user``) or per conversation.

        ``model`` (else ``UISTREAM["MODEL"]``) is a model, a class or
        factory (or its dotted path), or a provider-qualified name such as
        ``"anthropic:claude-sonnet-4-5"`` (``runs.providers``), resolved
        once per process and shared by every request."""
        # Read through the class so a plain function is not bound as a method.
        value = self.__dict__.get("model", type(self).model)
        key = f"'{type(self).__name__}.model'"
        if value is None:
            value, key = uistream_settings.MODEL, MODEL_SETTING
        if value is None:
            view = type(self)
            raise no_model_problem([f"{view.__module__}.{view.__qualname__}"]).error()
        return load_model_setting(value, key)

    @context_hook
    def get_tools(self, context: TurnContext) -> list[Tool]:
        """The tools the model may call (``Tool`` objects, functions, or
        dotted paths to either), and those of the MCP servers
        (``mcp_servers``, default every one of ``UISTREAM["MCP_SERVERS"]``).
        Override to give each user (``context.owner.user``) their own."""
        if self.tools is not None:
            values = perform_import(list(self.tools), f"'{type(self).__name__}.tools'")
        else:
            values = uistream_settings.import_setting("TOOLS")
        tools: list[Tool] = [value if isinstance(value, Tool) else Tool(value) for value in values]
        if uistream_settings.MCP_SERVERS and (self.mcp_servers is None or self.mcp_servers):
            from .lifecycle.mcp import mcp_tools  # the mcp extra: imported only where MCP_SERVERS is used

            tools.extend(mcp_tools(self.mcp_servers))
        return tools

    @context_hook
    def get_tool_approval(self, context: TurnContext) -> ToolApprovalPolicy | None:
        """The approval policy of this turn's run: it decides tool calls
        before the tools' own ``needs_approval`` (docs/operations.md,
        "Approval policies")."""
        # Read through the class so a plain function is not bound as a method.
        value = self.__dict__.get("tool_approval", type(self).tool_approval)
        if value is None:
            return uistream_settings.import_setting("TOOL_APPROVAL")  # type: ignore[no-any-return]
        return perform_import(value, f"'{type(self).__name__}.tool_approval'")  # type: ignore[no-any-return]

    @context_hook
    def get_system_prompt(self, context: TurnContext) -> str | None:
        """The system prompt sent first (None: none)."""
        return self.system_prompt

    @context_hook
    def get_max_steps(self, context: TurnContext) -> int:
        """The model calls one run may make (tool steps included)."""
        return int(self.max_steps if self.max_steps is not None else uistream_settings.MAX_STEPS)

    @context_hook
    def get_usage_limits(self, context: TurnContext) -> list[RunUsageLimit]:
        """The limits this turn's run is held to (``lifecycle.limits.limit_usage``)."""
        value = self.usage_limits if self.usage_limits is not None else uistream_settings.USAGE_LIMITS
        return load_usage_limits(value or ())

    @context_hook
    def get_history_strategy(self, context: TurnContext) -> HistoryStrategy:
        """The strategy that chooses what a turn sends (docs/operations.md,
        "History strategies")."""
        own = load_strategy(self.history_strategy, f"'{type(self).__name__}.history_strategy'")
        strategy = own or load_strategy(uistream_settings.HISTORY_STRATEGY)
        if strategy is not None:
            return strategy
        limit = self.history_max_messages
        if limit is None:
            limit = uistream_settings.HISTORY_MAX_MESSAGES
        return LastMessages(limit)

    # -- what follows from them ----------------------------------------------------------

    def get_adapter(self, agent: Any) -> AgentAdapter | None:
        """The adapter that runs ``agent`` (``ImproperlyConfigured`` for an
        agent no adapter runs)."""
        adapter = adapter_for(agent)
        if adapter is None:
            raise ImproperlyConfigured(
                f"'{type(self).__name__}.agent' is {agent!r}, which no adapter runs: a pydantic-ai Agent, "
                "a compiled LangGraph graph, an OpenAI Agents SDK Agent, or an AgentAdapter"
            )
        return adapter

    def get_agent_model(self, agent: Any, adapter: AgentAdapter | None) -> ChatModel:
        """What an agent's run records as its model: a stand-in that never
        streams, named after the adapter."""
        assert adapter is not None
        return AgentModel(adapter.name)

    def get_history(self, messages: MessageQuerySet) -> list[Message]:
        """The stored messages the model answers from, oldest first, chosen
        from the conversation's (``messages``, ordered by position; called in
        the store's transaction): the turn's strategy's ``select``
        (``get_history_strategy``). Default: the last
        ``history_max_messages``, starting at a user message. The last one
        must be the user message being answered (or, continuing, the
        assistant message continued)."""
        setup = _CHOOSING.get(None)
        if setup is None:
            raise RuntimeError("get_history() is called by the store while a turn starts (ChatHooks.start_turn)")
        return setup.history_strategy.select(messages)

    def get_source(self, history: list[dict[str, Any]], run: PreparedRun, model: ChatModel) -> AsyncIterator[Event]:
        """The run's event source. ``history`` is the stored conversation the
        model answers (UIMessages, oldest first); ``run`` the prepared run
        (its ``approvals``, ``client_results``, ``extra``, ``owner``, and
        ``setup``: what the hooks chose, ``setup.context`` among it). The
        default runs a ``ToolLoop`` over the model and tools; return any
        async iterator of source events to run something else. With an
        agent, its adapter's events (``get_agent_turn``)."""
        setup = _setup_of(run)
        if setup.adapter is not None:
            # Recorded on the run as a built history is, then the adapter's events.
            return setup.history_strategy.agent_source(history, run, self.get_agent_turn(history, run), setup.adapter)
        loop = ServerToolLoop(
            model,
            list(setup.tools),
            max_steps=setup.max_steps,
            error_text=uistream_settings.ERROR_TEXT,
            tool_approval=setup.tool_approval,
        )
        # The strategy builds what is sent (and records it on the run), then runs the loop.
        return setup.history_strategy.source(history, run, model, setup.system_prompt, loop)

    def get_agent_turn(self, history: list[dict[str, Any]], run: PreparedRun) -> AgentTurn:
        """What the agent's adapter gets for ``run``."""
        prompt = _setup_of(run).system_prompt
        messages = ui_to_model_messages(history)
        if prompt:
            messages.insert(0, SystemMessage(prompt))
        run_id = run.run.pk

        async def save_state(state: Any) -> None:
            await Run.objects.filter(pk=run_id).aupdate(agent_state=state)

        return AgentTurn(
            history=list(history),
            messages=messages,
            chat_id=run.chat_id,
            conversation_id=run.conversation_id,
            run_id=str(run_id),
            message_id=run.message_id,
            continues=run.continues,
            approvals=run.approvals,
            client_results=run.client_results,
            resume_state=run.resume_state,
            save_state=save_state,
            system_prompt=prompt,
            extra=run.extra,
            error_text=uistream_settings.ERROR_TEXT,
        )

    def get_message_metadata(self, run: PreparedRun) -> Any:
        """Metadata for the assistant message's ``start`` chunk (None: none)."""
        return None

    def get_store(self, setup: TurnSetup, *, with_thread: bool = False) -> ConversationStore:
        """The store that applies ``setup``'s turn to the conversation."""
        editable: dict[str, Any] = {}
        if setup.adapter is not None:
            client_tools = setup.adapter.client_tools
        else:
            client_tools = frozenset(t.name for t in setup.tools if t.client_side)
            editable = {t.name: t.parameters for t in setup.tools if t.editable_arguments}
        choose: Callable[[MessageQuerySet], list[Message]]
        if type(self).get_history is ChatHooks.get_history:
            choose = setup.history_strategy.select
        else:

            def choose(messages: MessageQuerySet) -> list[Message]:
                token = _CHOOSING.set(setup)
                try:
                    return self.get_history(messages)
                finally:
                    _CHOOSING.reset(token)

        return ConversationStore(
            client_tools=client_tools, choose_history=choose, with_thread=with_thread, editable_tools=editable
        )

    def get_runner(self) -> Runner:
        """The runner that starts this endpoint's runs: the executor
        ``UISTREAM["EXECUTOR"]`` names (in this process by default)."""
        return executor_class().for_hooks(self)


def _setup_of(run: PreparedRun) -> TurnSetup:
    if run.setup is None:
        raise RuntimeError("this run was not started by ChatHooks.start_turn: it has no setup")
    return run.setup
