"""A pydantic-ai ``Agent`` as a run's source (docs/adapters.md, "pydantic-ai").

The agent runs with ``agent.iter()``: each model request's stream and each
tool-calling step's stream are read node by node, in the task that
iterates ``run()``, so a stop (the runner cancels that task) cancels the
agent's run where it is: the model stream, the tools in flight.

History is rebuilt from the stored conversation on every run
(``turn.messages`` → ``ModelRequest`` / ``ModelResponse``), tool call ids
kept, so nothing of pydantic-ai's lives between requests: a continuation
answers a pending call on whatever process gets it. A tool that needs
approval (``requires_approval=True``, ``ApprovalRequired``) ends the run
with ``DeferredToolRequests`` as its output; the adapter asks for it under
an approval id of the store's, and the continuation hands the checked
decision back as ``DeferredToolResults``. pydantic-ai's own Vercel adapter
is not used: it trusts the approvals the client sends.

A user message's files go to the agent in pydantic-ai's own types: a
stored file's bytes as ``BinaryContent`` (read through its loader: the
chat's own files only), a file that is only an ``https:`` URL as
``ImageUrl`` / ``AudioUrl`` / ``VideoUrl`` / ``DocumentUrl``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from ..protocol import events as ev
from ..runs import AssistantMessage, SystemMessage, ToolMessage, ToolSpec, UnsupportedFileError, UserMessage
from ..runs.messages import FilePart
from . import AgentAdapter, AgentDescription, AgentTurn, import_extra, read_files

import_extra("pydantic_ai", "pydantic-ai")

import pydantic_core  # noqa: E402
from pydantic_ai import (  # noqa: E402
    Agent,
    DeferredToolRequests,
    DeferredToolResults,
    ToolDenied,
)
from pydantic_ai import messages as pm  # noqa: E402
from pydantic_ai.agent import AbstractAgent  # noqa: E402
from pydantic_ai.exceptions import ToolFailed  # noqa: E402
from pydantic_ai.toolsets.external import ExternalToolset  # noqa: E402
from pydantic_core import to_jsonable_python  # noqa: E402

__all__ = ["PydanticAIAdapter", "model_history", "user_content"]

#: The key of a reasoning part's provider metadata under which the adapter
#: keeps what pydantic-ai needs to send a thinking part back (a signature).
METADATA_KEY = "pydanticAI"

_FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "content_filter": "content-filter",
    "tool_call": "tool-calls",
    "error": "error",
}


class PydanticAIAdapter(AgentAdapter):
    """Runs a ``pydantic_ai.Agent`` (any ``AbstractAgent``) as a source.

    Override ``run_options(turn)`` to hand the run ``deps``,
    ``model_settings``, ``usage_limits``… (keyword arguments of
    ``Agent.iter``)."""

    framework = "pydantic-ai"
    extra = "pydantic-ai"

    @classmethod
    def accepts(cls, agent: Any) -> bool:
        return isinstance(agent, AbstractAgent)

    @property
    def client_tools(self) -> frozenset[str]:
        """The tools of the agent's ``ExternalToolset``\\ s: their calls end
        the run deferred, and the browser answers them."""
        names: set[str] = set()
        for toolset in getattr(self.agent, "toolsets", ()):
            if isinstance(toolset, ExternalToolset):
                names.update(tool.name for tool in toolset.tool_defs)
        return frozenset(names)

    def describe(self) -> AgentDescription:
        """The agent's static instructions and system prompts, and the tools
        of its function and external toolsets. Instructions written by a
        function, a tool's ``prepare`` and the toolsets that list their
        tools only when asked (MCP servers, dynamic toolsets) decide at run
        time: the note names them. Read from pydantic-ai's own attributes,
        some of them private: what is not there is not known, not an error."""
        agent = self.agent
        instructions: list[str] = list(_texts(getattr(agent, "_system_prompts", ())))
        dynamic = bool(getattr(agent, "_system_prompt_functions", ()))
        for item in getattr(agent, "_instructions", ()) or ():
            text = getattr(item, "instruction", item)
            if isinstance(text, str):
                instructions.append(text)
            else:
                dynamic = True
        tools: list[ToolSpec] = []
        at_run_time: list[str] = []
        for toolset in getattr(agent, "toolsets", ()):
            if isinstance(toolset, ExternalToolset):
                defs = list(toolset.tool_defs)
            elif isinstance(getattr(toolset, "tools", None), Mapping):
                defs = []
                for tool in toolset.tools.values():
                    if getattr(tool, "prepare", None) is not None:
                        at_run_time.append(f"the tool {tool.name} (prepared per run)")
                    defs.append(tool.tool_def)
            else:
                at_run_time.append(type(toolset).__name__)
                continue
            tools.extend(ToolSpec(d.name, d.description or "", d.parameters_json_schema) for d in defs)
        notes = []
        if dynamic:
            notes.append("instructions written by a function are the agent's at run time")
        if at_run_time:
            notes.append(f"decided at run time: {', '.join(at_run_time)}")
        return AgentDescription(tuple(instructions), tuple(tools), "; ".join(notes))

    def run_options(self, turn: AgentTurn) -> dict[str, Any]:
        """Extra keyword arguments for ``agent.iter`` (``deps``,
        ``model_settings``…). None by default."""
        return {}

    def output_type(self) -> Any:
        """The run's ``output_type``: the agent's, plus
        ``DeferredToolRequests`` when it does not allow it already, so a
        call that needs approval ends the run instead of failing it. None
        (the agent's own) when the agent has output validators, which
        pydantic-ai does not allow a run's output type beside."""
        declared = getattr(self.agent, "output_type", str)
        if _allows_deferred(declared) or getattr(self.agent, "_output_validators", None):
            return None
        return [declared, DeferredToolRequests]

    async def run(self, turn: AgentTurn) -> AsyncIterator[ev.Event]:
        turn = replace(turn, messages=await read_files(turn.messages))
        history, prompt = model_history(turn)
        results = deferred_results(turn) if turn.continues else None
        options: dict[str, Any] = {}
        if turn.system_prompt:
            options["instructions"] = turn.system_prompt
        output_type = self.output_type()
        if output_type is not None:
            options["output_type"] = output_type
        options.update(self.run_options(turn))
        translate = _Translator()
        step = 0
        answered_model = False  # a model call of this run preceded the tools node
        # A step (model call and its tools) is said finished when the next
        # begins or the run ends: after the approval requests it asked.
        step_open = False
        guessed_calls = False  # "tool-calls" guessed for the last model response
        try:
            async with self.agent.iter(
                prompt,
                message_history=history or None,
                deferred_tool_results=results,
                **options,
            ) as agent_run:
                async for node in agent_run:
                    if Agent.is_model_request_node(node):
                        if step_open:
                            yield ev.StepFinished(step)
                            step += 1
                            step_open = False
                        stream: Any
                        async with node.stream(agent_run.ctx) as stream:
                            async for event in stream:
                                for out in translate.event(event):
                                    yield out
                            response = stream.response
                        yield _usage(response.usage)
                        reason = _finish_reason(response)
                        yield ev.Finish(reason)
                        answered_model = True
                        # Guessed from its calls: an output tool's call too.
                        guessed_calls = response.finish_reason is None and reason == "tool-calls"
                    elif Agent.is_call_tools_node(node):
                        async with node.stream(agent_run.ctx) as tool_stream:
                            async for tool_event in tool_stream:
                                for out in translate.event(tool_event):
                                    yield out
                        step_open = step_open or answered_model
                        answered_model = False
                result = agent_run.result
        except Exception:
            # The client saw these calls' arguments stream: say they are
            # complete before the runner's error ends the message.
            for out in translate.unannounced():
                yield out
            raise
        output = result.output if result is not None else None
        if isinstance(output, DeferredToolRequests):
            client = self.client_tools
            for call in output.approvals:
                yield ev.ToolApprovalRequest(turn.approval_id(), call.tool_call_id)
            for call in output.calls:
                if call.tool_name not in client:
                    raise RuntimeError(
                        f"the agent deferred a call of {call.tool_name!r}, which is neither an approval nor a "
                        "client-side tool (an ExternalToolset's): nothing here can answer it"
                    )
        if step_open:
            yield ev.StepFinished(step)
        # A model that says no reason and ended the run with an output
        # tool's call (structured output) did stop, whatever it called.
        yield ev.Done("stop" if guessed_calls and not isinstance(output, DeferredToolRequests) else None)


def _texts(values: Any) -> Iterator[str]:
    for value in values or ():
        if isinstance(value, str) and value:
            yield value


def _allows_deferred(spec: Any) -> bool:
    if spec is DeferredToolRequests:
        return True
    if isinstance(spec, Sequence) and not isinstance(spec, str):
        return any(_allows_deferred(item) for item in spec)
    return False


def _usage(usage: Any) -> ev.Usage:
    details = getattr(usage, "details", None) or {}
    reasoning = details.get("reasoning_tokens") if isinstance(details, Mapping) else None
    return ev.Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        reasoning_tokens=reasoning,
        cached_input_tokens=usage.cache_read_tokens or None,
    )


def _finish_reason(response: pm.ModelResponse) -> str:
    if response.finish_reason:
        return _FINISH_REASONS.get(response.finish_reason, "other")
    # A model that says nothing (FunctionModel, TestModel): what it did.
    return "tool-calls" if any(isinstance(p, pm.ToolCallPart) for p in response.parts) else "stop"


def _args_text(args: Any) -> str:
    if args is None:
        return ""
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


def _output(content: Any) -> Any:
    try:
        return to_jsonable_python(content)
    except (TypeError, ValueError, pydantic_core.PydanticSerializationError):  # not serialisable: its text
        return str(content)


class _Translator:
    """pydantic-ai's agent stream events → neutral events, for one run.

    Calls are announced complete (``ToolCall``) when pydantic-ai is about to
    run them (its call event), not when their part ends: a call whose
    arguments failed validation is then a ``ToolInputError`` instead. Only
    calls streamed in this run are announced, so a continuation, where
    pydantic-ai re-emits the call event of the deferred call it now
    settles, does not announce it twice."""

    def __init__(self) -> None:
        self.calls_by_index: dict[int, str] = {}
        #: Calls streamed in this run, not yet announced: id → their part.
        self.streamed: dict[str, pm.ToolCallPart] = {}
        #: Calls whose arguments failed validation: id → their part.
        self.invalid: dict[str, pm.ToolCallPart] = {}

    def event(self, event: Any) -> Iterator[ev.Event]:
        if isinstance(event, pm.PartStartEvent):
            yield from self._start(event.index, event.part)
        elif isinstance(event, pm.PartDeltaEvent):
            yield from self._delta(event.index, event.delta)
        elif isinstance(event, pm.PartEndEvent):
            yield from self._end(event)
        elif isinstance(event, pm.ToolCallEvent):
            yield from self._call(event)
        elif isinstance(event, pm.ToolResultEvent):
            yield from self._result(event.part)

    def unannounced(self) -> Iterator[ev.Event]:
        for call_id, part in self.streamed.items():
            yield ev.ToolCall(call_id, part.tool_name, _args_text(part.args))
        self.streamed.clear()

    def _start(self, index: int, part: Any) -> Iterator[ev.Event]:
        if isinstance(part, pm.TextPart):
            if part.content:  # the first text arrives here, not as a delta
                yield ev.TextDelta(part.content)
        elif isinstance(part, pm.ThinkingPart):
            if part.content:
                yield ev.ReasoningDelta(part.content)
        elif isinstance(part, pm.ToolCallPart):
            self.calls_by_index[index] = part.tool_call_id
            self.streamed[part.tool_call_id] = part
            yield ev.ToolCallStart(part.tool_call_id, part.tool_name)
            if part.args:
                yield ev.ToolCallDelta(part.tool_call_id, _args_text(part.args))
        elif isinstance(part, pm.NativeToolCallPart):
            self.calls_by_index[index] = part.tool_call_id
            yield ev.ToolCallStart(part.tool_call_id, part.tool_name, provider_executed=True)
        elif isinstance(part, pm.NativeToolReturnPart):
            yield self._return(part, provider_executed=True)
        elif isinstance(part, pm.FilePart):
            yield ev.File(part.content.data_uri, part.content.media_type)

    def _delta(self, index: int, delta: Any) -> Iterator[ev.Event]:
        if isinstance(delta, pm.TextPartDelta):
            if delta.content_delta:
                yield ev.TextDelta(delta.content_delta)
        elif isinstance(delta, pm.ThinkingPartDelta):
            if delta.content_delta:
                yield ev.ReasoningDelta(delta.content_delta)
        elif isinstance(delta, pm.ToolCallPartDelta):
            call_id = delta.tool_call_id or self.calls_by_index.get(index)
            if call_id and delta.args_delta is not None:
                yield ev.ToolCallDelta(call_id, _args_text(delta.args_delta))

    def _end(self, event: pm.PartEndEvent) -> Iterator[ev.Event]:
        part = event.part
        if isinstance(part, pm.TextPart):
            if event.next_part_kind != "text":
                yield ev.TextEnd()
        elif isinstance(part, pm.ThinkingPart):
            kept = {
                key: value
                for key, value in (("signature", part.signature), ("providerName", part.provider_name), ("id", part.id))
                if value
            }
            yield ev.ReasoningEnd({METADATA_KEY: kept} if kept else None)
        elif isinstance(part, pm.ToolCallPart):
            if part.tool_call_id in self.streamed:
                self.streamed[part.tool_call_id] = part  # its complete arguments
        elif isinstance(part, pm.NativeToolCallPart):
            yield ev.ToolCall(part.tool_call_id, part.tool_name, _args_text(part.args), provider_executed=True)

    def _call(self, event: pm.ToolCallEvent) -> Iterator[ev.Event]:
        part = self.streamed.get(event.part.tool_call_id)
        if part is None:
            return  # announced already (in this run, or by the run that deferred it)
        if event.args_valid is False:
            self.invalid[part.tool_call_id] = self.streamed.pop(part.tool_call_id)
            return
        del self.streamed[part.tool_call_id]
        yield ev.ToolCall(part.tool_call_id, part.tool_name, _args_text(event.part.args))

    def _result(self, part: pm.ToolReturnPart) -> Iterator[ev.Event]:
        call_id = part.tool_call_id
        invalid = self.invalid.pop(call_id, None)
        if invalid is not None:
            text = part.model_response_str(wrap_if_error=False)
            yield ev.ToolInputError(call_id, invalid.tool_name, _loose_json(_args_text(invalid.args)), text)
            return
        streamed = self.streamed.pop(call_id, None)
        if streamed is not None:  # settled without a call event of its own
            yield ev.ToolCall(call_id, streamed.tool_name, _args_text(streamed.args))
        yield self._return(part)

    def _return(self, part: pm.BaseToolReturnPart[Any], provider_executed: bool | None = None) -> ev.Event:
        if part.outcome == "denied":
            # Never pydantic-ai's "The tool call was denied." as an output.
            return ev.ToolDenied(part.tool_call_id)
        if part.outcome in pm.ERROR_OUTCOMES:
            text = part.model_response_str(wrap_if_error=False)
            return ev.ToolResult(
                part.tool_call_id, text, is_error=True, tool_name=part.tool_name, provider_executed=provider_executed
            )
        return ev.ToolResult(
            part.tool_call_id, _output(part.content), tool_name=part.tool_name, provider_executed=provider_executed
        )


def _loose_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


# -- history ------------------------------------------------------------------


def _denied_calls(history: Sequence[Mapping[str, Any]]) -> set[str]:
    return {
        str(part.get("toolCallId"))
        for message in history
        if message.get("role") == "assistant"
        for part in message.get("parts") or ()
        if part.get("state") == "output-denied"
    }


def _thinking(message: AssistantMessage) -> list[pm.ModelResponsePart]:
    kept = message.reasoning_parts
    if kept and "".join(r.text for r in kept) == message.reasoning:
        parts: list[pm.ModelResponsePart] = []
        for reasoning in kept:
            meta = reasoning.provider_metadata.get(METADATA_KEY) or {}
            parts.append(
                pm.ThinkingPart(
                    reasoning.text,
                    id=meta.get("id"),
                    signature=meta.get("signature"),
                    provider_name=meta.get("providerName"),
                )
            )
        return parts
    return [pm.ThinkingPart(message.reasoning)] if message.reasoning else []


#: Who a file is refused by, in the text the user sees.
_WHO = "This agent (pydantic-ai)"

_URL_TYPES: dict[str, type[pm.ImageUrl | pm.AudioUrl | pm.VideoUrl]] = {
    "image": pm.ImageUrl,
    "audio": pm.AudioUrl,
    "video": pm.VideoUrl,
}


def _file(part: FilePart) -> pm.UserContent:
    """A file as pydantic-ai takes it: its bytes, else its public URL."""
    data = part.data()
    if data is not None:
        return pm.BinaryContent(data, media_type=part.media_type)
    if part.url.startswith("https://"):
        major = part.media_type.split("/", 1)[0].strip().lower()
        url_type = _URL_TYPES.get(major, pm.DocumentUrl)
        return url_type(part.url, media_type=part.media_type)
    raise UnsupportedFileError(_WHO, part.media_type, part.filename, "its bytes are not available")


def user_content(message: UserMessage) -> str | list[pm.UserContent]:
    """A user message as a pydantic-ai prompt: its text, or with files its
    text pieces and files in the message's order."""
    if not message.files:
        return message.content
    return [piece if isinstance(piece, str) else _file(piece) for piece in message.ordered()]


def model_history(turn: AgentTurn) -> tuple[list[pm.ModelMessage], str | list[pm.UserContent] | None]:
    """The stored conversation as pydantic-ai's message history, and the
    user prompt the run answers (None for a continuation, whose history
    ends with the calls it settles). The view's system prompt is left out:
    the run gets it as ``instructions``."""
    messages = list(turn.messages)
    if turn.system_prompt and messages and messages[0] == SystemMessage(turn.system_prompt):
        messages.pop(0)
    prompt: str | list[pm.UserContent] | None = None
    last = messages[-1] if messages else None
    if not turn.continues and isinstance(last, UserMessage):
        messages.pop()
        prompt = user_content(last)
    denied = _denied_calls(turn.history)
    out: list[pm.ModelMessage] = []
    request: list[pm.ModelRequestPart] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            request.append(pm.SystemPromptPart(message.content))
        elif isinstance(message, UserMessage):
            request.append(pm.UserPromptPart(user_content(message)))
        elif isinstance(message, ToolMessage):
            call_id = message.tool_call_id
            outcome: Literal["success", "failed", "denied"] = (
                "denied" if call_id in denied else ("failed" if message.is_error else "success")
            )
            content = message.content if message.is_error else _loose_json(message.content)
            request.append(pm.ToolReturnPart(message.tool_name or "", content, call_id, outcome=outcome))
        elif isinstance(message, AssistantMessage):
            if request:
                out.append(pm.ModelRequest(request))
                request = []
            parts = _thinking(message)
            if message.content:
                parts.append(pm.TextPart(message.content))
            parts.extend(pm.ToolCallPart(c.name, c.arguments, c.id) for c in message.tool_calls)
            out.append(pm.ModelResponse(parts))
    if request:
        out.append(pm.ModelRequest(request))
    return out, prompt


def deferred_results(turn: AgentTurn) -> DeferredToolResults | None:
    """The checked decisions and the browser's results of a continuation,
    as pydantic-ai takes them."""
    if not turn.approvals and not turn.client_results:
        return None
    approvals: dict[str, bool | ToolDenied] = {}
    for call_id, decision in turn.approvals.items():
        if decision.approved:
            approvals[call_id] = True
        else:
            text = "The user denied this tool call." + (f" Reason: {decision.reason}" if decision.reason else "")
            approvals[call_id] = ToolDenied(text)
    calls: dict[str, Any] = {}
    for call_id, answer in turn.client_results.items():
        if answer.is_error:
            calls[call_id] = ToolFailed(answer.output if isinstance(answer.output, str) else json.dumps(answer.output))
        else:
            calls[call_id] = answer.output
    return DeferredToolResults(approvals=approvals, calls=calls)  # type: ignore[arg-type]
