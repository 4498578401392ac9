"""Agents written with other frameworks as a run's source.

A project that already has an agent (pydantic-ai, LangGraph, the OpenAI
Agents SDK) sets it on a chat view (``agent = my_agent``, or a
``get_agent()`` hook) instead of a model and tools. The view finds the
**adapter** for it here; the adapter runs the agent and turns the
framework's own stream into the neutral source events
(``protocol.events``), so the run goes through the same store, runner,
chunk log, broker and renderers as a run of our own tool loop: stored
turns, resume, stop, approvals, the admin, AG-UI, ai@5/6/7.

The contract of an adapter (docs/adapters.md has the long form):

* ``run(turn)`` is an async iterator of events for one run. ``turn``
  (``AgentTurn``) holds the stored history, the checked approvals and
  client results of a continuation, and what an earlier run saved.
* Approvals: a call the framework holds for a person is announced with
  ``ToolCall`` then ``ToolApprovalRequest(turn.approval_id(), call_id)``
  and the run ends (``Done``); the store then accepts one answer, from the
  owner, for that pending request only, and the continuing run gets it in
  ``turn.approvals`` (keyed by tool call id). A denial is ``ToolDenied``,
  never the framework's own "denied" result text.
* A continuation continues the same assistant message: the pending calls
  were already streamed, so the adapter does not announce them again.
* State the framework needs to resume (a checkpoint, a ``RunState``) is
  saved with ``await turn.save_state(value)`` (JSON) before the run ends,
  and comes back as ``turn.resume_state`` in the run that answers.
* Stop and disconnect cancel the task iterating ``run()``: the adapter
  cancels the framework's run on ``CancelledError`` / ``GeneratorExit``.
* A failure raises; the runner sends the masked in-band error.
* ``describe()`` says what the adapter knows, before the run, of the
  instructions and tools the agent brings (``AgentDescription``), for the
  run's record in the admin; what the agent decides only while it runs is
  said in its ``note``, not guessed.
* Files: a user message's files come in ``turn.messages`` as ``FilePart`` parts
  whose loader reads the stored bytes (the conversation's own files only;
  ``lifecycle.attachments.attach_files``). ``read_files`` reads them once,
  off the event loop; the adapter hands the bytes to its framework in the
  framework's own file types, and a file whose bytes it can't have (a
  URL it can't send, another chat's file) fails the run with
  ``UnsupportedFileError``, whose text the user sees: never dropped.

No Django here, as in ``runs/``: the view hands in everything a run needs.
Each adapter module imports its framework through ``import_extra`` (from
``errors``, the one helper every extra uses, re-exported here), so a
missing framework names its pip extra.
"""

from __future__ import annotations

import asyncio
import importlib
import secrets
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from ..errors import MissingExtra, import_extra
from ..protocol.events import Event
from ..runs import ClientToolResult, ModelMessage, ModelOptions, ToolApproval, ToolSpec
from ..runs.messages import FilePart, UserMessage
from ..runs.model import ModelEvent

__all__ = [
    "ADAPTERS",
    "AgentAdapter",
    "AgentDescription",
    "AgentModel",
    "AgentTurn",
    "MissingExtra",
    "adapter_for",
    "import_extra",
    "read_files",
    "register_adapter",
]


async def _no_save(state: Any) -> None:
    return None


@dataclass(frozen=True)
class AgentTurn:
    """What an adapter gets for one run (see the module docstring)."""

    #: The stored messages the agent answers, oldest first, as UIMessages
    #: (the view's ``get_history``): the last is the user message being
    #: answered or, continuing, the assistant message continued.
    history: list[dict[str, Any]]
    #: The same as neutral model messages (``runs.messages``), the system
    #: prompt first when the view has one.
    messages: list[ModelMessage]
    #: The client's chat id (useChat's id, AG-UI's threadId): unique per owner only.
    chat_id: str
    run_id: str
    message_id: str
    #: Whether this run continues the last assistant message (answers to
    #: its pending calls) rather than answering a user message.
    continues: bool = False
    #: A person's checked decisions, by tool call id (continuations).
    approvals: Mapping[str, ToolApproval] = field(default_factory=dict)
    #: The browser's results of client-side tools, by tool call id.
    client_results: Mapping[str, ClientToolResult] = field(default_factory=dict)
    #: What the run that asked for the pending calls saved; else None.
    resume_state: Any = None
    #: Stores a JSON value with this run for the run that answers it.
    save_state: Callable[[Any], Awaitable[None]] = _no_save
    system_prompt: str | None = None
    #: What the transport read besides the message (useChat's extra body
    #: keys, the AG-UI input): the view's business.
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: The text a tool failure shows the model and the client.
    error_text: str = "An error occurred."
    #: The conversation's key (``Conversation.pk``), unique across owners:
    #: what to key an agent framework's own per-chat state by (a
    #: checkpointer's thread). Empty: the chat id.
    conversation_id: str = ""

    @property
    def thread_key(self) -> str:
        """The key of this chat's state in a store shared by every owner."""
        return self.conversation_id or self.chat_id

    def approval_id(self) -> str:
        """A new, unguessable approval id: the store accepts an answer only
        when it names the id that was streamed."""
        return "apv_" + secrets.token_urlsafe(18)


@dataclass(frozen=True)
class AgentDescription:
    """What an adapter can tell, before a run, of the instructions and the
    tools its agent brings besides the view's system prompt (stored with
    the run as what it was given; the admin's run page shows it).
    ``note`` says what the agent chooses for itself while it runs
    (instructions a function writes, toolsets that list their tools when
    asked, handoffs), which no record can hold."""

    instructions: tuple[str, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    note: str = ""


class AgentAdapter(ABC):
    """Runs one framework's agent as a source of events."""

    #: The framework's name, as runs record it (``"pydantic-ai"``…).
    framework: ClassVar[str] = ""
    #: The pip extra that installs the framework.
    extra: ClassVar[str] = ""

    def __init__(self, agent: Any) -> None:
        self.agent = agent

    @classmethod
    def accepts(cls, agent: Any) -> bool:
        """Whether ``agent`` is this framework's."""
        return False

    @property
    def name(self) -> str:
        """What the run's ``model`` field records: framework and agent."""
        agent_name = getattr(self.agent, "name", None) or type(self.agent).__name__
        return f"{self.framework}:{agent_name}"[:200]

    @property
    def client_tools(self) -> frozenset[str]:
        """The names of the agent's tools the browser runs."""
        return frozenset()

    def describe(self) -> AgentDescription:
        """What the agent brings of its own (see ``AgentDescription``),
        read from it without running it: called once per run, when it
        starts. Default: nothing known, the agent chooses."""
        return AgentDescription(
            note="the agent chooses its own instructions and tools; this adapter does not tell them"
        )

    @abstractmethod
    def run(self, turn: AgentTurn) -> AsyncIterator[Event]:
        """The run's events (see the module docstring for the contract)."""


#: The built-in adapters: the top-level module of an agent's class (or of
#: a class in its MRO) → the adapter's dotted path. Imported on first use,
#: so the core never imports a framework.
ADAPTERS: dict[str, str] = {
    "pydantic_ai": "uistream_app.adapters.pydantic_ai.PydanticAIAdapter",
    "langgraph": "uistream_app.adapters.langgraph.LangGraphAdapter",
    "agents": "uistream_app.adapters.openai_agents.OpenAIAgentsAdapter",
}

_registered: list[type[AgentAdapter]] = []


def register_adapter(adapter: type[AgentAdapter]) -> type[AgentAdapter]:
    """Make ``adapter`` known to ``adapter_for`` (it asks ``accepts``);
    usable as a class decorator. Registered adapters are asked first."""
    _registered.insert(0, adapter)
    return adapter


def _adapter_class(path: str) -> type[AgentAdapter]:
    module, _, name = path.rpartition(".")
    cls: type[AgentAdapter] = getattr(importlib.import_module(module), name)
    return cls


def adapter_for(agent: Any) -> AgentAdapter | None:
    """The adapter that runs ``agent``, or None when no adapter knows it.
    An ``AgentAdapter`` is its own adapter."""
    if isinstance(agent, AgentAdapter):
        return agent
    for cls in _registered:
        if cls.accepts(agent):
            return cls(agent)
    for klass in type(agent).__mro__:
        root = klass.__module__.partition(".")[0]
        path = ADAPTERS.get(root)
        if path is not None:
            adapter = _adapter_class(path)
            if adapter.accepts(agent):
                return adapter(agent)
    return None


def _bytes_of(data: bytes) -> Callable[[], bytes]:
    return lambda: data


def _read_sync(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    out: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, UserMessage) and any(f.load is not None for f in message.files):
            read: dict[int, FilePart] = {}
            for f in message.files:
                if f.load is not None:
                    data = f.load()
                    read[id(f)] = replace(f, size=len(data), load=_bytes_of(data))
            files = tuple(read.get(id(f), f) for f in message.files)
            parts = tuple(read.get(id(p), p) if isinstance(p, FilePart) else p for p in message.parts)
            message = replace(message, files=files, parts=parts)
        out.append(message)
    return out


async def read_files(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """``messages`` with every file that has a loader read now, in a worker
    thread (storage is blocking I/O), and kept in memory: a framework takes
    a turn's whole history at once, so each file is read once per run. A
    file without a loader (only its URL is known) is left as it is."""
    if not any(isinstance(m, UserMessage) and m.files for m in messages):
        return list(messages)
    return await asyncio.to_thread(_read_sync, messages)


class AgentModel:
    """Stands in for the model on an agent's run, so the run records the
    agent's name. It is never asked to stream."""

    def __init__(self, name: str) -> None:
        self.name = name

    def stream(
        self,
        messages: Sequence[ModelMessage],
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> AsyncIterator[ModelEvent]:
        raise TypeError(f"{self.name} is an agent, not a model: it has no stream()")
