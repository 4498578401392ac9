"""``ChatHooks``: what a project overrides to shape a chat's runs, shared by
``ChatView``, ``AGUIView`` and ``ChatConsumer``.

Class attributes default from ``UISTREAM``; each ``get_*`` hook is one
override point (DRF's generics are the model). The hooks say *what* a run
uses; the store and the runner do the work.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Sequence
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from .adapters import AgentAdapter, AgentModel, AgentTurn, adapter_for
from .conf import perform_import
from .conf import settings as uistream_settings
from .executors import executor_class
from .history import HistoryStrategy, LastMessages, load_strategy
from .limits import RunUsageLimit, load_usage_limits
from .models import Message, MessageQuerySet, Run
from .protocol.events import Event
from .runner import Runner
from .runs import (
    ChatModel,
    ModelSpecError,
    SystemMessage,
    Tool,
    ToolApprovalPolicy,
    ToolCallRequest,
    ToolLoop,
    is_model_spec,
    shared_model,
    ui_to_model_messages,
)
from .store import ConversationStore, PreparedRun

__all__ = ["ChatHooks", "ServerToolLoop"]


class ServerToolLoop(ToolLoop):
    """The tool loop of the chat endpoints: approval ids are unguessable
    (the server only accepts an answer that names the id it stored)."""

    def approval_id(self, call: ToolCallRequest) -> str:
        return "apv_" + secrets.token_urlsafe(18)


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

    def get_agent(self) -> Any:
        """The agent this request runs, or None for the tool loop over
        ``get_model()`` and ``get_tools()``. Called once per request;
        override to choose per user or per conversation."""
        # Through the class, so a plain function is not bound as a method.
        return self.__dict__.get("agent", type(self).agent)

    def get_adapter(self) -> AgentAdapter | None:
        """The adapter that runs ``get_agent()`` (None without an agent)."""
        agent = self.get_agent()
        if agent is None:
            return None
        adapter = adapter_for(agent)
        if adapter is None:
            raise ImproperlyConfigured(
                f"'{type(self).__name__}.agent' is {agent!r}, which no adapter runs: a pydantic-ai Agent, "
                "a compiled LangGraph graph, an OpenAI Agents SDK Agent, or an AgentAdapter"
            )
        return adapter

    def get_run_model(self) -> ChatModel:
        """What the run records as its model: the agent (through a stand-in
        that never streams), else ``get_model()``."""
        adapter = self.get_adapter()
        if adapter is not None:
            return AgentModel(adapter.name)
        return self.get_model()

    def get_model(self) -> ChatModel:
        """The chat model of this request's run. Called once per request;
        override to pick a model per user or per conversation.

        ``model`` (else ``UISTREAM["MODEL"]``) is a model, a class or
        factory (or its dotted path), or a provider-qualified name such as
        ``"anthropic:claude-sonnet-4-5"`` (``runs.providers``), resolved
        once per process and shared by every request."""
        # Read through the class so a plain function is not bound as a method.
        value = self.__dict__.get("model", type(self).model)
        key = f"'{type(self).__name__}.model'"
        if value is None:
            value, key = uistream_settings.MODEL, "UISTREAM['MODEL']"
            if not is_model_spec(value):
                value = uistream_settings.import_setting("MODEL")
        if is_model_spec(value):
            try:
                return shared_model(value)
            except ModelSpecError as exc:
                raise ImproperlyConfigured(f"{key} = {value!r} cannot be used: {exc}") from exc
        if value is None:
            raise ImproperlyConfigured(
                f"'{type(self).__name__}' should either include a `model` attribute, "
                "set UISTREAM['MODEL'], or override the `get_model()` method."
            )
        if isinstance(value, type) or (callable(value) and not isinstance(value, ChatModel)):
            value = value()
        if isinstance(value, ChatModel):
            return value
        raise ImproperlyConfigured(f"'{type(self).__name__}': the model {value!r} has no stream() method.")

    def get_tools(self) -> list[Tool]:
        """The tools the model may call (``Tool`` objects, functions, or
        dotted paths to either), and those of the MCP servers
        (``mcp_servers``, default every one of ``UISTREAM["MCP_SERVERS"]``)."""
        if self.tools is not None:
            values = perform_import(list(self.tools), f"'{type(self).__name__}.tools'")
        else:
            values = uistream_settings.import_setting("TOOLS")
        tools: list[Tool] = [value if isinstance(value, Tool) else Tool(value) for value in values]
        if uistream_settings.MCP_SERVERS and (self.mcp_servers is None or self.mcp_servers):
            from .mcp import mcp_tools  # the mcp extra: imported only where MCP_SERVERS is used

            tools.extend(mcp_tools(self.mcp_servers))
        return tools

    def get_tool_approval(self) -> ToolApprovalPolicy | None:
        """The approval policy of this request's run: it decides tool calls
        before the tools' own ``needs_approval`` (docs/operations.md,
        "Approval policies")."""
        # Read through the class so a plain function is not bound as a method.
        value = self.__dict__.get("tool_approval", type(self).tool_approval)
        if value is None:
            return uistream_settings.import_setting("TOOL_APPROVAL")  # type: ignore[no-any-return]
        return perform_import(value, f"'{type(self).__name__}.tool_approval'")  # type: ignore[no-any-return]

    def get_system_prompt(self) -> str | None:
        return self.system_prompt

    def get_max_steps(self) -> int:
        return int(self.max_steps if self.max_steps is not None else uistream_settings.MAX_STEPS)

    def get_usage_limits(self) -> list[RunUsageLimit]:
        """The limits every run of this endpoint is held to (the runner
        enforces them: ``limits.limit_usage``)."""
        value = self.usage_limits if self.usage_limits is not None else uistream_settings.USAGE_LIMITS
        return load_usage_limits(value or ())

    def get_history_strategy(self) -> HistoryStrategy:
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

    def get_history(self, messages: MessageQuerySet) -> list[Message]:
        """The stored messages the model answers from, oldest first, chosen
        from the conversation's (``messages``, ordered by position; called in
        the store's transaction): the strategy's ``select``. Default: the
        last ``history_max_messages``, starting at a user message. The last
        one must be the user message being answered (or, continuing, the
        assistant message continued)."""
        return self.get_history_strategy().select(messages)

    def get_source(self, history: list[dict[str, Any]], run: PreparedRun, model: ChatModel) -> AsyncIterator[Event]:
        """The run's event source. ``history`` is the stored conversation the
        model answers (UIMessages, oldest first); ``run`` the prepared run
        (its ``approvals``, ``client_results``, ``extra``, ``owner``…). The
        default runs a ``ToolLoop`` over the model and tools; return any
        async iterator of source events to run something else. With an
        agent, its adapter's events (``get_agent_turn``)."""
        adapter = self.get_adapter()
        if adapter is not None:
            return adapter.run(self.get_agent_turn(history, run))
        loop = ServerToolLoop(
            model,
            self.get_tools(),
            max_steps=self.get_max_steps(),
            error_text=uistream_settings.ERROR_TEXT,
            tool_approval=self.get_tool_approval(),
        )
        # The strategy builds what is sent (and records it on the run), then runs the loop.
        return self.get_history_strategy().source(history, run, model, self.get_system_prompt(), loop)

    def get_agent_turn(self, history: list[dict[str, Any]], run: PreparedRun) -> AgentTurn:
        """What the agent's adapter gets for ``run``."""
        messages = ui_to_model_messages(history)
        prompt = self.get_system_prompt()
        if prompt:
            messages.insert(0, SystemMessage(prompt))
        run_id = run.run.pk

        async def save_state(state: Any) -> None:
            await Run.objects.filter(pk=run_id).aupdate(agent_state=state)

        return AgentTurn(
            history=list(history),
            messages=messages,
            chat_id=run.chat_id,
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

    def get_store(self, *, with_thread: bool = False) -> ConversationStore:
        """The store that turns this endpoint's requests into runs."""
        adapter = self.get_adapter()
        editable: dict[str, Any] = {}
        if adapter is not None:
            client_tools = adapter.client_tools
        else:
            tools = self.get_tools()
            client_tools = frozenset(t.name for t in tools if t.client_side)
            editable = {t.name: t.parameters for t in tools if t.editable_arguments}
        return ConversationStore(
            client_tools=client_tools,
            choose_history=self.get_history,
            with_thread=with_thread,
            editable_tools=editable,
        )

    def get_runner(self) -> Runner:
        """The runner that starts this endpoint's runs: the executor
        ``UISTREAM["EXECUTOR"]`` names (in this process by default)."""
        return executor_class().for_hooks(self)
