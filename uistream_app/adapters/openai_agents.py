"""The OpenAI Agents SDK (``agents.Agent``) as a run's source.

``OpenAIAgentsAdapter`` runs the agent with ``Runner.run_streamed`` and
turns what the run streams into the neutral events. The SDK streams text
only as raw Responses events (``RawResponsesStreamEvent``: output text,
reasoning summary and function-call argument deltas), and its run items
(``RunItemStreamEvent``: a tool called, its output…) only after the
model's response is complete, so:

* each model response's raw events are read by the same reader as our
  own Responses model (``runs.openai_responses``): text, reasoning parts
  (their item ids kept in the part's provider metadata, so the next
  turn can send them back), tool calls with their streamed arguments,
  usage and the finish reason of each model call;
* the run items add what the model does not stream: a tool's output
  (``ToolResult``; a handoff's too; the SDK's default text for a tool
  that raised is a ``tool-output-error``), a call the raw stream did not
  announce, and the end of each step (``StepFinished``, before the next
  model response).

History: the stored conversation is the truth, so every new turn starts
from it, as Responses input items (``input_items``): user and system
messages, the assistant's text, its ``function_call`` items and their
``function_call_output`` items by call id, and the reasoning items that
came from a Responses model (by item id, with their encrypted content
when they kept it). A user message's files are Responses content items,
as the built-in Responses model sends them: ``input_image`` and, for PDFs,
``input_file``, each with the stored file's bytes as a ``data:`` URL
(read through its loader: the chat's own files only).

Approvals: a tool with ``needs_approval`` ends the SDK's run with
interruptions. The adapter saves the SDK's own ``RunState``
(``to_json()``) with the run and asks for each call's approval; the run
that answers restores it (``RunState.from_json``), applies the person's
checked decisions (``state.approve`` / ``state.reject``, by call id) and
runs it on. The SDK then reports a rejected call's output as its
"Tool execution was not approved." text: that becomes ``ToolDenied``.
The pending calls were streamed by the run that asked, so they are not
announced again.

Client-side tools: the SDK has no tool without a body, so
``client_tool(name, description, parameters)`` is a ``FunctionTool`` with
``needs_approval=True`` whose body returns the browser's result. Its call
ends the SDK's run with an interruption like an approval's, but no person
is asked: the call stays pending, the browser runs it (useChat's
``onToolCall`` + ``addToolOutput``, AG-UI's ``tool`` message), and the
continuation, whose result the store checked, restores the ``RunState``,
approves the call and runs on; the tool returns that result (handed to it
in a context variable of the SDK's run task, never shared between runs).
The call's result on the wire is the browser's, as it sent it.

Stop and disconnect: closing the events cancels the SDK's run
(``result.cancel()``), which cancels its model stream and running tools.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from ..protocol.events import (
    Done,
    Event,
    Finish,
    StepFinished,
    ToolApprovalRequest,
    ToolCall,
    ToolCallStart,
    ToolDenied,
    ToolResult,
)
from ..protocol.jsonbody import is_json
from ..runs import ClientToolResult
from ..runs.messages import (
    AssistantMessage,
    ModelMessage,
    ReasoningPart,
    SystemMessage,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from ..runs.openai_responses import ResponsesStreamReader, responses_user_content
from . import AgentAdapter, AgentDescription, AgentTurn, import_extra, read_files

agents = import_extra("agents", "openai-agents")
run_config_module = import_extra("agents.run_config", "openai-agents")
tool_module = import_extra("agents.tool", "openai-agents")

#: What a function tool that raised returns by default: the SDK's fixed
#: text (``default_tool_error_function``), shown as the call's error.
DEFAULT_TOOL_ERROR: str = tool_module.default_tool_error_function(None, Exception())

__all__ = ["OpenAIAgentsAdapter", "client_tool", "input_items"]

#: Seconds a stopped run waits for the SDK's run to unwind.
CANCEL_GRACE = 5.0

#: The Responses delta events, read without dumping the whole event.
_DELTAS = frozenset(
    (
        "response.output_text.delta",
        "response.reasoning_summary_text.delta",
        "response.function_call_arguments.delta",
    )
)

#: Who a file is refused by, in the text the user sees.
_WHO = "This agent (OpenAI Agents SDK)"

#: The key of the saved state: the SDK's ``RunState.to_json()``.
STATE_KEY = "run_state"


#: The browser's checked results of the run's client-side calls, by call id:
#: set in a copy of the context the SDK's run task starts in.
_CLIENT_RESULTS: contextvars.ContextVar[Mapping[str, ClientToolResult]] = contextvars.ContextVar(
    "uistream_client_results"
)

#: What a client-side tool returns when its call has no result of the browser's.
NO_CLIENT_RESULT = "The client did not answer this call."


class _ClientToolBody:
    """The ``on_invoke_tool`` of a ``client_tool``: the browser's result of
    the call (the SDK runs it once the adapter approves the call)."""

    async def __call__(self, context: Any, arguments: str) -> Any:
        answer = _CLIENT_RESULTS.get({}).get(getattr(context, "tool_call_id", ""))
        if answer is None:
            return NO_CLIENT_RESULT
        output = answer.output
        # What the model reads back (an error's text too: a function call's
        # output has no error flag); the wire carries the browser's value.
        return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


def client_tool(name: str, description: str, parameters: Mapping[str, Any] | None = None) -> Any:
    """A function tool the browser runs, named ``name``, described to the
    model by ``description``, taking arguments of the JSON Schema
    ``parameters`` (none by default; not made strict). Put it in the
    agent's ``tools``; see the module docstring."""
    schema = dict(parameters) if parameters is not None else {"type": "object", "properties": {}}
    return agents.FunctionTool(
        name=name,
        description=description,
        params_json_schema=schema,
        on_invoke_tool=_ClientToolBody(),
        strict_json_schema=False,
        needs_approval=True,
    )


def _agents(agent: Any, seen: set[int]) -> Iterator[Any]:
    """``agent`` and the agents it may hand off to, each once."""
    if id(agent) in seen:
        return
    seen.add(id(agent))
    yield agent
    for handoff in getattr(agent, "handoffs", None) or ():
        if isinstance(handoff, agents.Agent):
            yield from _agents(handoff, seen)


class OpenAIAgentsAdapter(AgentAdapter):
    """Runs an ``agents.Agent`` (see the module docstring).

    ``run_config``, ``max_turns`` and ``context`` go to
    ``Runner.run_streamed`` as they are; to set them, make the adapter the
    view's agent: ``agent = OpenAIAgentsAdapter(my_agent, max_turns=20)``.
    A ``context`` that is not a mapping is not saved with a pending
    approval (the SDK cannot serialise it); the continuing run gets
    ``context`` again."""

    framework = "openai-agents"
    extra = "openai-agents"

    def __init__(
        self,
        agent: Any,
        *,
        run_config: Any = None,
        max_turns: int | None = None,
        context: Any = None,
    ) -> None:
        super().__init__(agent)
        self.run_config = run_config
        self.max_turns = run_config_module.DEFAULT_MAX_TURNS if max_turns is None else max_turns
        self.context = context

    @classmethod
    def accepts(cls, agent: Any) -> bool:
        return isinstance(agent, agents.Agent)

    @property
    def client_tools(self) -> frozenset[str]:
        """The client tools (``client_tool``) of the agent and of the agents
        it may hand off to."""
        return frozenset(
            tool.name
            for agent in _agents(self.agent, set())
            for tool in getattr(agent, "tools", None) or ()
            if isinstance(getattr(tool, "on_invoke_tool", None), _ClientToolBody)
        )

    def describe(self) -> AgentDescription:
        """The agent's instructions (when a string) and its tools: function
        tools with their schemas, hosted tools by name. Instructions a
        function writes, a stored prompt, tools enabled by a function, MCP
        servers and handoffs are the agent's at run time: the note names them."""
        agent = self.agent
        notes: list[str] = []
        instructions: tuple[str, ...] = ()
        if isinstance(agent.instructions, str) and agent.instructions:
            instructions = (agent.instructions,)
        elif agent.instructions is not None:
            notes.append("its instructions are written by a function at run time")
        if getattr(agent, "prompt", None) is not None:
            notes.append("a stored prompt (the prompt parameter) is added at run time")
        tools: list[ToolSpec] = []
        for tool in getattr(agent, "tools", ()) or ():
            schema = getattr(tool, "params_json_schema", None)
            name = str(getattr(tool, "name", type(tool).__name__))
            if isinstance(schema, dict):
                tools.append(ToolSpec(name, str(getattr(tool, "description", "") or ""), schema))
            else:
                tools.append(ToolSpec(name, f"(a hosted tool: {type(tool).__name__})", {}))
            if callable(getattr(tool, "is_enabled", True)):
                notes.append(f"whether {name} is offered is decided at run time")
        servers = getattr(agent, "mcp_servers", ()) or ()
        if servers:
            notes.append(f"the tools of {len(servers)} MCP server(s) are listed at run time")
        handoffs = [str(getattr(h, "name", None) or getattr(h, "agent_name", None) or h) for h in agent.handoffs or ()]
        if handoffs:
            notes.append(f"it may hand off to: {', '.join(handoffs)}")
        return AgentDescription(instructions, tuple(tools), "; ".join(notes))

    async def run(self, turn: AgentTurn) -> AsyncIterator[Event]:
        client = self.client_tools
        translator = _Translator(turn.client_results)
        if turn.continues:
            run_input: Any = await self._resume(turn, translator, client)
        else:
            run_input = input_items(await read_files(turn.messages))
        # The SDK's run task starts in this copy, so its client tools read
        # this run's results, and nothing leaks into the caller's context.
        run_context = contextvars.copy_context()
        run_context.run(_CLIENT_RESULTS.set, dict(turn.client_results))
        result = run_context.run(
            agents.Runner.run_streamed,
            self.agent,
            run_input,
            context=self.context,
            max_turns=self.max_turns,
            run_config=self.run_config,
        )
        finished = False
        stream = result.stream_events()
        try:
            async for event in stream:
                for out in translator.feed(event):
                    yield out
            finished = True
        finally:
            if not finished:
                # Stop, disconnect or a failure of ours: the SDK's run
                # (its model stream, its tools) must not go on. Cancelled
                # before its event stream is closed, which would otherwise
                # wait for the whole run to end.
                await _cancel(result)
            await stream.aclose()
        interruptions = list(result.interruptions)
        if not interruptions:
            for out in translator.step_end():
                yield out
            # The run has its final output. When a tool's output was it
            # (``tool_use_behavior``), the last model call ended in calls,
            # but the message is over all the same.
            yield Done("stop" if translator.last_finish == "tool-calls" else None)
            return
        pending: list[str] = []
        for item in interruptions:
            call_id, name, arguments = _call_of(item.raw_item)
            if not call_id:
                raise TypeError(f"the Agents SDK asks approval for a call with no call id: {item.raw_item!r}")
            for out in translator.announce(call_id, name or item.tool_name or "", arguments):
                yield out
            pending.append(call_id)
        # Saved before the run ends: the answer may be handled by another
        # process, which has only what is stored.
        await turn.save_state({STATE_KEY: result.to_state().to_json(), "pending": pending})
        for item in interruptions:
            if item.tool_name in client:
                continue  # the browser answers it: its call stays pending, input available
            yield ToolApprovalRequest(turn.approval_id(), _call_of(item.raw_item)[0])
        for out in translator.step_end():
            yield out
        yield Done("tool-calls")

    async def _resume(self, turn: AgentTurn, translator: _Translator, client: frozenset[str]) -> Any:
        """The saved ``RunState`` with the person's decisions applied, and
        the client-side calls approved: their tool returns the browser's
        result."""
        saved = turn.resume_state
        if not isinstance(saved, dict) or not isinstance(saved.get(STATE_KEY), dict):
            raise ValueError("this continuation has no saved Agents SDK RunState to resume")
        state = await agents.RunState.from_json(
            self.agent,
            saved[STATE_KEY],
            context_override=self.context,
        )
        for item in state.get_interruptions():
            call_id, name, _ = _call_of(item.raw_item)
            # Streamed by the run that asked: not announced again.
            translator.announced[call_id] = name or item.tool_name or ""
            if item.tool_name in client:
                state.approve(item)
                continue
            decision = turn.approvals.get(call_id)
            if decision is not None and decision.approved:
                state.approve(item)
            else:
                # No decision is no approval (the store lets a continuation
                # start only once every pending call was answered).
                translator.denied.add(call_id)
                if decision is not None and decision.reason:
                    state.reject(item, rejection_message=f"The user denied this tool call. Reason: {decision.reason}")
                else:
                    state.reject(item)
        return state


class _Translator:
    """The SDK's stream events → neutral events, for one run."""

    def __init__(self, client_results: Mapping[str, ClientToolResult] | None = None) -> None:
        self.reader: ResponsesStreamReader | None = None
        #: The browser's results of client-side calls: their results as sent.
        self.client_results = dict(client_results or {})
        #: Calls already on the wire: call id → tool name.
        self.announced: dict[str, str] = {}
        #: Calls a person rejected: their SDK output is a denial.
        self.denied: set[str] = set()
        #: Calls whose complete ``ToolCall`` was sent.
        self.complete: set[str] = set()
        self.step = 0
        self.step_open = False
        #: The reason the last model call ended with.
        self.last_finish: str | None = None

    def feed(self, event: Any) -> list[Event]:
        kind = event.type
        if kind == "raw_response_event":
            return self._raw(event.data)
        if kind == "run_item_stream_event":
            return self._item(event.item)
        return []

    def step_end(self) -> list[Event]:
        if not self.step_open:
            return []
        self.step_open = False
        step = self.step
        self.step += 1
        return [StepFinished(step)]

    def announce(self, call_id: str, name: str, arguments: str) -> list[Event]:
        """A call the raw stream did not show (or a pending one): its
        start and its whole arguments, once."""
        if call_id in self.announced:
            return []
        self.announced[call_id] = name
        self.complete.add(call_id)
        self.step_open = True
        return [ToolCallStart(call_id, name), ToolCall(call_id, name, arguments or "{}")]

    def _raw(self, data: Any) -> list[Event]:
        kind = getattr(data, "type", None)
        if kind in _DELTAS:
            # The hot path (one per delta): the fields the reader reads,
            # without dumping the whole pydantic event.
            payload: dict[str, Any] = {
                "type": kind,
                "output_index": data.output_index,
                "item_id": data.item_id,
                "delta": data.delta,
            }
        else:
            payload = data.model_dump(mode="json") if hasattr(data, "model_dump") else dict(data)
        if payload.get("type") == "response.created" or self.reader is None:
            # A new model call: the step before it (its tools) is over.
            out = self.step_end() if payload.get("type") == "response.created" else []
            self.reader = ResponsesStreamReader()
        else:
            out = []
        self.step_open = True
        for event in self.reader.feed(payload):
            if isinstance(event, ToolCallStart):
                if event.tool_call_id in self.announced:
                    continue
                self.announced[event.tool_call_id] = event.tool_name
            elif isinstance(event, ToolCall):
                if event.tool_call_id in self.complete:
                    continue
                self.complete.add(event.tool_call_id)
            elif isinstance(event, Finish):
                self.last_finish = event.reason
            elif isinstance(event, ToolApprovalRequest):
                # A hosted MCP server's approval request: the SDK answers it
                # through the agent's ``on_approval_request``, not a person here.
                continue
            out.append(event)
        return out

    def _item(self, item: Any) -> list[Event]:
        raw = item.raw_item
        kind = getattr(item, "type", "")
        if kind in ("tool_call_item", "handoff_call_item"):
            call_id, name, arguments = _call_of(raw)
            if call_id and call_id not in self.announced:
                return self.announce(call_id, name or getattr(item, "tool_name", None) or "", arguments)
            return []
        if kind in ("tool_call_output_item", "handoff_output_item"):
            call_id = _get(raw, "call_id")
            if not isinstance(call_id, str) or not call_id:
                return []
            self.step_open = True
            if call_id in self.denied:
                return [ToolDenied(call_id)]
            answer = self.client_results.get(call_id)
            if answer is not None:
                return [
                    ToolResult(call_id, answer.output, is_error=answer.is_error, tool_name=self.announced.get(call_id))
                ]
            output = getattr(item, "output", None) if kind == "tool_call_output_item" else None
            if output is None or not is_json(output):
                output = _get(raw, "output")
            failed = output == DEFAULT_TOOL_ERROR
            return [ToolResult(call_id, output, is_error=failed, tool_name=self.announced.get(call_id))]
        return []


async def _cancel(result: Any) -> None:
    """Cancel the SDK's run and let its task unwind (its model stream and
    tools see the cancellation) before the run is recorded as over; a task
    that does not unwind within ``CANCEL_GRACE`` seconds (a tool blocking
    in a thread) is left to finish on its own."""
    result.cancel()
    task = result.run_loop_task
    if task is not None and not task.done():
        await asyncio.wait([task], timeout=CANCEL_GRACE)


def _get(raw: Any, key: str) -> Any:
    return raw.get(key) if isinstance(raw, dict) else getattr(raw, key, None)


def _call_of(raw: Any) -> tuple[str, str, str]:
    """A raw tool call's call id, name and argument text."""
    call_id = _get(raw, "call_id") or _get(raw, "id") or ""
    arguments = _get(raw, "arguments")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments) if arguments is not None else "{}"
    return str(call_id), str(_get(raw, "name") or ""), arguments


def input_items(messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    """The stored conversation as the Agents SDK's input items (Responses
    style): what ``Runner.run_streamed`` takes as ``input``."""
    items: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            items.append({"role": "system", "content": message.content})
        elif isinstance(message, UserMessage):
            content: Any = responses_user_content(message, _WHO) if message.files else message.content
            items.append({"role": "user", "content": content})
        elif isinstance(message, AssistantMessage):
            items.extend(_reasoning_items(message.reasoning_parts))
            if message.content:
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": message.content, "annotations": []}],
                    }
                )
            for call in message.tool_calls:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.id,
                        "name": call.name,
                        "arguments": call.arguments or "{}",
                    }
                )
        elif isinstance(message, ToolMessage):
            items.append({"type": "function_call_output", "call_id": message.tool_call_id, "output": message.content})
    return items


def _reasoning_items(parts: Sequence[ReasoningPart]) -> list[dict[str, Any]]:
    """A step's Responses reasoning items from its stored reasoning parts
    (one part per summary part, grouped by the item id they streamed
    with); reasoning of other providers has no place in Responses input."""
    grouped: dict[str, dict[str, Any]] = {}
    for part in parts:
        meta = part.provider_metadata.get("openai")
        if not isinstance(meta, dict) or not isinstance(meta.get("itemId"), str) or not meta["itemId"]:
            continue
        item = grouped.setdefault(meta["itemId"], {"type": "reasoning", "id": meta["itemId"], "summary": []})
        if part.text:
            item["summary"].append({"type": "summary_text", "text": part.text})
        if isinstance(meta.get("reasoningEncryptedContent"), str):
            item["encrypted_content"] = meta["reasoningEncryptedContent"]
    return list(grouped.values())
