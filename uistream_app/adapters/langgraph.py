"""A compiled LangGraph graph as a run's source.

The graph is any ``CompiledStateGraph`` whose state has a ``messages`` key
of LangChain messages (``StateGraph(MessagesState)`` built by hand,
``langgraph.prebuilt.create_react_agent``, ``langchain.agents.create_agent``).
It runs with ``astream(stream_mode=["messages", "updates"])``: the messages
mode carries the model's ``AIMessageChunk``s (text and reasoning, as a
string or as content blocks; tool-call chunks whose id and name come only
on the first chunk of a call, matched by index) and the tools node's
``ToolMessage``s; the updates mode says when a model call is over (its
node's full ``AIMessage``) and carries ``__interrupt__``.

History: the stored conversation is the truth. Every turn rebuilds the
graph's input from it (``HumanMessage``, ``AIMessage`` with its
``tool_calls`` and reasoning blocks, ``ToolMessage``); the checkpointer is
used only to resume interrupts. A user message's files are LangChain's
standard content blocks (``image`` / ``audio`` / ``video`` / ``file`` with
the stored file's bytes in ``base64`` and its ``mime_type``; a file that
is only an ``https:`` URL as ``url``), built by ``langchain_core``'s own
``create_*_block``; the bytes are read through the stored file's loader
(the chat's own files only).

Approvals: a tool (or a review node) calls ``interrupt(payload)``; the
adapter maps each interrupt to the pending tool calls it is about, asks
the person (``ToolApprovalRequest`` per call) and saves the checkpoint and
the mapping with the run. The run that answers resumes the graph with
``Command(resume={interrupt_id: value})``. The payloads understood:

* ``{"tool_call_id": ID, ...}``: that call; resumed with
  ``{"approved": bool, "reason": str | None}``;
* ``{"action": NAME, "args": {...}}`` (or ``"name"``): the pending call of
  that name and arguments; resumed likewise;
* LangChain's ``HumanInTheLoopMiddleware`` request, ``{"action_requests":
  [{"name", "args"}...], ...}``: those calls, in order; resumed with
  ``{"decisions": [{"type": "approve"} | {"type": "reject", "message":
  reason}...]}``;
* anything else, when exactly one call is pending: that call.

LangGraph runs the interrupted node again from its start on resume, so
whatever a tool does before ``interrupt()`` happens twice (do the work
after it). A denied call's ``ToolMessage`` becomes ``ToolDenied``.

Client-side tools: LangGraph has no tool without a body, so a
``ClientTool`` (``client_tool(name, description, parameters)``) is a tool
whose body is ``interrupt({"client_tool": name, "args": {...}})``. Its
call ends the run with the call pending (no approval asked): the browser
runs it (useChat's ``onToolCall`` + ``addToolOutput``, AG-UI's ``tool``
message) and the continuation, whose result the store checked, resumes
the graph with ``{"output": ..., "is_error": bool}``, which the tool
returns (an error raises ``ToolException``: a ``ToolMessage`` with status
error). The call's result on the wire is the browser's, as it sent it.

State: a graph compiled without a checkpointer runs on a fresh
``InMemorySaver`` per run, seeded from the saved state and dumped after an
interrupt (LangGraph's own serde, bytes in base64) into ``Run.agent_state``,
so any process can resume it. A graph compiled with its own checkpointer
(Postgres…) keeps its thread there (thread id = chat id, the messages
replaced by the stored history each turn); only the interrupt mapping is
saved with the run.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import aclosing
from typing import Any

from ..protocol import events as ev
from ..runs import ClientToolResult, ToolApproval, ToolSpec, UnsupportedFileError
from ..runs.messages import AssistantMessage, FilePart, ModelMessage, SystemMessage, ToolMessage, UserMessage
from . import AgentAdapter, AgentDescription, AgentTurn, import_extra, read_files

import_extra("langgraph", "langgraph")
import_extra("langchain_core", "langgraph")

from langchain_core import messages as lc  # noqa: E402
from langchain_core.messages import content as blocks  # noqa: E402
from langchain_core.tools import BaseTool, ToolException  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402
from langgraph.checkpoint.base import BaseCheckpointSaver  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph.message import REMOVE_ALL_MESSAGES  # noqa: E402
from langgraph.pregel import Pregel  # noqa: E402
from langgraph.types import Command, Interrupt, interrupt  # noqa: E402

__all__ = ["ClientTool", "LangGraphAdapter", "client_tool", "dump_saver", "load_saver", "to_langchain_messages"]

#: The version of the saved state's shape.
STATE_VERSION = 1

_FINISH = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_calls": "tool-calls",
    "tool_use": "tool-calls",
    "function_call": "tool-calls",
    "length": "length",
    "max_tokens": "length",
    "content_filter": "content-filter",
    "refusal": "content-filter",
}


# -- client-side tools -------------------------------------------------------------

#: The key of an interrupt payload that stops for a client-side tool.
CLIENT_TOOL_KEY = "client_tool"


class ClientTool(BaseTool):
    """A tool the browser runs: put it among a graph's tools (a ``ToolNode``,
    ``create_agent``'s ``tools``) and the adapter offers it to the client.
    Its body stops the graph with ``interrupt()`` and returns what the
    browser answered when the graph is resumed (see the module docstring);
    ``args_schema`` is the JSON Schema of its arguments."""

    handle_tool_error: bool = True  # the browser's error is the call's error result

    def _run(self, **arguments: Any) -> Any:
        answer = interrupt({CLIENT_TOOL_KEY: self.name, "args": arguments})
        if not isinstance(answer, Mapping):
            raise ToolException("the client's answer did not come back")
        if answer.get("is_error"):
            output = answer.get("output")
            raise ToolException(output if isinstance(output, str) else json.dumps(output))
        return answer.get("output")

    async def _arun(self, **arguments: Any) -> Any:
        # interrupt() reads the graph's config from the context: no thread hop.
        return self._run(**arguments)


def client_tool(name: str, description: str, parameters: Mapping[str, Any] | None = None) -> ClientTool:
    """A ``ClientTool`` named ``name``, described to the model by
    ``description``, taking arguments of the JSON Schema ``parameters``
    (none by default)."""
    schema = dict(parameters) if parameters is not None else {"type": "object", "properties": {}}
    return ClientTool(name=name, description=description, args_schema=schema)


def _client_answer(result: ClientToolResult | None) -> dict[str, Any]:
    """What a ``ClientTool``'s ``interrupt()`` returns on resume."""
    if result is None:
        return {"output": "The client did not answer this call.", "is_error": True}
    return {"output": result.output, "is_error": result.is_error}


# -- history in ------------------------------------------------------------------


def to_langchain_messages(messages: Iterable[ModelMessage]) -> list[lc.BaseMessage]:
    """The stored conversation (neutral model messages) as LangChain
    messages: reasoning goes back as ``reasoning`` content blocks before the
    text, a failed call's result as a ``ToolMessage`` with status error."""
    out: list[lc.BaseMessage] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            out.append(lc.SystemMessage(message.content))
        elif isinstance(message, UserMessage):
            out.append(lc.HumanMessage(_human_content(message)))
        elif isinstance(message, AssistantMessage):
            calls = [
                lc.ToolCall(id=c.id, name=c.name, args=_arguments(c.arguments), type="tool_call")
                for c in message.tool_calls
            ]
            content: str | list[str | dict[str, Any]] = message.content
            if message.reasoning:
                content = [{"type": "reasoning", "reasoning": message.reasoning}]
                if message.content:
                    content.append({"type": "text", "text": message.content})
            out.append(lc.AIMessage(content=content, tool_calls=calls))
        elif isinstance(message, ToolMessage):
            out.append(
                lc.ToolMessage(
                    message.content,
                    tool_call_id=message.tool_call_id,
                    name=message.tool_name,
                    status="error" if message.is_error else "success",
                )
            )
    return out


#: Who a file is refused by, in the text the user sees.
_WHO = "This agent (LangGraph)"

_BLOCKS: dict[str, Any] = {
    "image": blocks.create_image_block,
    "audio": blocks.create_audio_block,
    "video": blocks.create_video_block,
}


def _file_block(part: FilePart) -> dict[str, Any]:
    """A file as a LangChain standard content block: its bytes, else its
    public URL."""
    major = part.media_type.split("/", 1)[0].strip().lower()
    create = _BLOCKS.get(major, blocks.create_file_block)
    extra: dict[str, Any] = {"filename": part.filename} if part.filename and create is blocks.create_file_block else {}
    data = part.data()
    if data is not None:
        block = create(base64=base64.b64encode(data).decode("ascii"), mime_type=part.media_type, **extra)
    elif part.url.startswith("https://"):
        block = create(url=part.url, mime_type=part.media_type, **extra)
    else:
        raise UnsupportedFileError(_WHO, part.media_type, part.filename, "its bytes are not available")
    return dict(block)


def _human_content(message: UserMessage) -> str | list[str | dict[str, Any]]:
    """A user message's content: its text, or with files its text and file
    blocks in the message's order."""
    if not message.files:
        return message.content
    return [
        {"type": "text", "text": piece} if isinstance(piece, str) else _file_block(piece) for piece in message.ordered()
    ]


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


# -- the checkpoint, as JSON -------------------------------------------------------


def _typed(value: tuple[str, bytes]) -> list[str]:
    return [value[0], base64.b64encode(value[1]).decode("ascii")]


def _untyped(value: Sequence[str]) -> tuple[str, bytes]:
    return (value[0], base64.b64decode(value[1]))


def dump_saver(saver: InMemorySaver, thread_id: str, *, whole: bool = False) -> dict[str, Any]:
    """What ``saver`` holds for ``thread_id`` as JSON, as LangGraph's serde
    wrote it (``JsonPlusSerializer``; bytes in base64): the latest
    checkpoint of each namespace with its pending writes and the channel
    blobs it names, which is all a resume reads; ``whole``: every
    checkpoint (delta channels read back along the parent chain)."""
    storage: list[list[Any]] = []
    keep: set[tuple[str, str]] = set()
    versions: set[tuple[str, str, Any]] = set()
    for ns, checkpoints in saver.storage.get(thread_id, {}).items():
        chosen = checkpoints if whole else {k: checkpoints[k] for k in [max(checkpoints)] if checkpoints}
        for checkpoint_id, (checkpoint, metadata, parent) in chosen.items():
            storage.append([ns, checkpoint_id, _typed(checkpoint), _typed(metadata), parent])
            keep.add((ns, checkpoint_id))
            for channel, version in saver.serde.loads_typed(checkpoint)["channel_versions"].items():
                versions.add((ns, channel, version))
    writes = [
        [ns, checkpoint_id, task_id, index, channel, _typed(value), path]
        for (thread, ns, checkpoint_id), entries in saver.writes.items()
        if thread == thread_id and (whole or (ns, checkpoint_id) in keep)
        for (task_id, index), (_task, channel, value, path) in entries.items()
    ]
    blobs = [
        [ns, channel, version, _typed(value)]
        for (thread, ns, channel, version), value in saver.blobs.items()
        if thread == thread_id and (whole or (ns, channel, version) in versions)
    ]
    return {"thread_id": thread_id, "storage": storage, "writes": writes, "blobs": blobs}


def load_saver(saver: InMemorySaver, dumped: Mapping[str, Any]) -> None:
    """Put what ``dump_saver`` returned back into ``saver``."""
    thread_id = dumped["thread_id"]
    for ns, checkpoint_id, checkpoint, metadata, parent in dumped["storage"]:
        saver.storage[thread_id][ns][checkpoint_id] = (_untyped(checkpoint), _untyped(metadata), parent)
    for ns, checkpoint_id, task_id, index, channel, value, path in dumped["writes"]:
        saver.writes[(thread_id, ns, checkpoint_id)][(task_id, index)] = (task_id, channel, _untyped(value), path)
    for ns, channel, version, value in dumped["blobs"]:
        saver.blobs[(thread_id, ns, channel, version)] = _untyped(value)


# -- the stream ------------------------------------------------------------------


def _blocks(content: Any) -> list[tuple[str, str]]:
    """A message's content as ("text" | "reasoning", text) runs."""
    if isinstance(content, str):
        return [("text", content)] if content else []
    out: list[tuple[str, str]] = []
    for block in content or ():
        if isinstance(block, str):
            if block:
                out.append(("text", block))
            continue
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            out.append(("text", str(block["text"])))
        elif kind == "reasoning":
            text = block.get("reasoning")
            if not isinstance(text, str):
                # OpenAI Responses' shape: a list of summary parts.
                text = "".join(str(s.get("text", "")) for s in block.get("summary") or () if isinstance(s, Mapping))
            if text:
                out.append(("reasoning", text))
        elif kind == "thinking" and block.get("thinking"):
            out.append(("reasoning", str(block["thinking"])))
    return out


def _tool_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(text for kind, text in _blocks(content) if kind == "text") or json.dumps(content, default=str)


class _Call:
    __slots__ = ("args", "id", "name")

    def __init__(self, call_id: str, name: str) -> None:
        self.id = call_id
        self.name = name
        self.args: list[str] = []


class _Translator:
    """LangGraph's ``messages`` and ``updates`` items → neutral events.

    One model call is one AI message id: it opens when its first chunk
    arrives and closes when its node's update (the whole message) comes,
    or another message does; closing completes its tool calls and says
    its usage and finish reason. A new model call after tool results is a
    new step."""

    def __init__(
        self,
        announced: Mapping[str, tuple[str, dict[str, Any]]],
        denied: set[str],
        client_results: Mapping[str, ClientToolResult] | None = None,
    ) -> None:
        #: Calls streamed by an earlier run (this run continues them): not
        #: announced again.
        self.announced = dict(announced)
        self.denied = denied
        #: The browser's results of client-side calls (checked by the store):
        #: the calls' results as the client sent them.
        self.client_results = dict(client_results or {})
        #: Tool calls asked for and not answered yet: id → (name, args).
        self.pending: dict[str, tuple[str, dict[str, Any]]] = dict(announced)
        self.step = 0
        self.step_used = False
        self.message_id: str | None = None
        self.calls: dict[Any, _Call] = {}
        self.usage: dict[str, Any] = {}
        self.finish: str | None = None
        self.open: str | None = None
        self.closed: set[str] = set()
        #: Every call this message has (a result for another one, such as
        #: a history message a node wrote again, has no part to go to).
        self.known: set[str] = set(announced)

    # model calls

    def _open(self, message: lc.BaseMessage) -> list[ev.Event]:
        out = self._close()
        if self.step_used:
            out.append(ev.StepFinished(self.step))
            self.step += 1
            self.step_used = False
        self.message_id = message.id
        self.calls = {}
        self.usage = {}
        self.finish = None
        return out

    def _content(self, message: lc.BaseMessage) -> list[ev.Event]:
        out: list[ev.Event] = []
        for kind, text in _blocks(message.content):
            if kind == "reasoning":
                if self.open == "text":
                    out.append(ev.TextEnd())
                self.open = "reasoning"
                out.append(ev.ReasoningDelta(text))
            else:
                if self.open == "reasoning":
                    out.append(ev.ReasoningEnd())
                self.open = "text"
                out.append(ev.TextDelta(text))
        kwargs_reasoning = message.additional_kwargs.get("reasoning_content")
        if isinstance(kwargs_reasoning, str) and kwargs_reasoning:
            self.open = "reasoning"
            out.append(ev.ReasoningDelta(kwargs_reasoning))
        return out

    def _chunk(self, chunk: lc.AIMessageChunk) -> list[ev.Event]:
        same = self.message_id is not None and (chunk.id is None or chunk.id == self.message_id)
        out = [] if same else self._open(chunk)
        self.step_used = True
        out.extend(self._content(chunk))
        for piece in chunk.tool_call_chunks:
            key: Any = piece.get("index")
            if key is None:
                key = piece.get("id") or (next(reversed(self.calls)) if self.calls else 0)
            call = self.calls.get(key)
            if call is None:
                call_id, name = piece.get("id"), piece.get("name")
                if not call_id or not name:
                    continue
                call = self.calls[key] = _Call(call_id, name)
                out.extend(self._end_part())
                if call_id not in self.announced:
                    out.append(ev.ToolCallStart(call_id, name))
            args = piece.get("args")
            if args:
                call.args.append(args)
                if call.id not in self.announced:
                    out.append(ev.ToolCallDelta(call.id, args))
        self._metadata(chunk)
        return out

    def _metadata(self, message: lc.BaseMessage) -> None:
        usage = getattr(message, "usage_metadata", None)
        if usage and isinstance(message, lc.AIMessageChunk):
            for key in ("input_tokens", "output_tokens"):
                self.usage[key] = self.usage.get(key, 0) + (usage.get(key) or 0)
            reasoning = (usage.get("output_token_details") or {}).get("reasoning")
            cached = (usage.get("input_token_details") or {}).get("cache_read")
            if reasoning:
                self.usage["reasoning_tokens"] = self.usage.get("reasoning_tokens", 0) + reasoning
            if cached:
                self.usage["cached_input_tokens"] = self.usage.get("cached_input_tokens", 0) + cached
        elif usage:
            self.usage = {
                "input_tokens": usage.get("input_tokens"),
                "output_tokens": usage.get("output_tokens"),
                "reasoning_tokens": (usage.get("output_token_details") or {}).get("reasoning"),
                "cached_input_tokens": (usage.get("input_token_details") or {}).get("cache_read"),
            }
        metadata = message.response_metadata or {}
        reason = metadata.get("finish_reason") or metadata.get("stop_reason")
        if reason:
            self.finish = _FINISH.get(str(reason), "other")

    def _whole(self, message: lc.AIMessage) -> list[ev.Event]:
        """A model call that arrived as one message (a model that does not
        stream, or a node that wrote an ``AIMessage`` itself)."""
        out = self._open(message)
        self.step_used = True
        out.extend(self._content(message))
        if message.tool_calls:
            out.extend(self._end_part())
        for index, call in enumerate(message.tool_calls):
            call_id = call.get("id") or f"call_{index}"
            record = self.calls[index] = _Call(call_id, call["name"])
            record.args.append(json.dumps(call.get("args") or {}))
            if call_id not in self.announced:
                out.append(ev.ToolCallStart(call_id, call["name"]))
                out.append(ev.ToolCallDelta(call_id, record.args[0]))
        self._metadata(message)
        out.extend(self._close(message))
        return out

    def _end_part(self) -> list[ev.Event]:
        """Close the open text or reasoning part."""
        kind, self.open = self.open, None
        if kind == "reasoning":
            return [ev.ReasoningEnd()]
        if kind == "text":
            return [ev.TextEnd()]
        return []

    def _close(self, message: lc.BaseMessage | None = None) -> list[ev.Event]:
        """End the open model call (``message``: its whole message, whose
        parsed tool calls and usage are the final word)."""
        if self.message_id is None:
            return []
        out = self._end_part()
        if message is not None:
            out.extend(self._metadata_final(message))
        for call in self.calls.values():
            arguments = "".join(call.args)
            self.pending[call.id] = (call.name, _arguments(arguments))
            self.known.add(call.id)
            if call.id not in self.announced:
                out.append(ev.ToolCall(call.id, call.name, arguments or "{}"))
        if any(self.usage.get(k) is not None for k in self.usage):
            out.append(ev.Usage(**{k: self.usage.get(k) for k in ev.Usage.__dataclass_fields__}))
        out.append(ev.Finish(self.finish or ("tool-calls" if self.calls else "stop")))
        self.closed.add(self.message_id)
        self.message_id = None
        self.calls = {}
        return out

    def _metadata_final(self, message: lc.BaseMessage) -> list[ev.Event]:
        """What the node's whole message adds to its streamed chunks: calls
        the chunks did not name (a provider that sent no id or index) and
        arguments a lost fragment left unparseable."""
        out: list[ev.Event] = []
        if not isinstance(message, lc.AIMessage):
            return out
        by_id = {c.id: c for c in self.calls.values()}
        for call in message.tool_calls:
            call_id = call.get("id")
            if not call_id:
                continue
            known = by_id.get(call_id)
            if known is None:
                known = self.calls[call_id] = _Call(call_id, call["name"])
                known.args = [json.dumps(call.get("args") or {})]
                if call_id not in self.announced:
                    out.append(ev.ToolCallStart(call_id, call["name"]))
                    out.append(ev.ToolCallDelta(call_id, known.args[0]))
            elif not _arguments("".join(known.args)) and call.get("args"):
                known.args = [json.dumps(call["args"])]
        if not self.usage and message.usage_metadata:
            self._metadata(message)
        metadata = message.response_metadata or {}
        reason = metadata.get("finish_reason") or metadata.get("stop_reason")
        if reason:
            self.finish = _FINISH.get(str(reason), "other")
        return out

    # what the stream says

    def message(self, message: Any) -> list[ev.Event]:
        if isinstance(message, lc.AIMessageChunk):
            return self._chunk(message)
        if isinstance(message, lc.AIMessage):
            if message.id is not None and (message.id == self.message_id or message.id in self.closed):
                return self._close(message) if message.id == self.message_id else []
            return self._whole(message)
        if isinstance(message, lc.ToolMessage):
            return self._tool(message)
        return []

    def update(self, update: Any) -> list[ev.Event]:
        """A node's update: the open model call's whole message ends it."""
        if not isinstance(update, Mapping) or self.message_id is None:
            return []
        for value in update.values():
            written = value.get("messages") if isinstance(value, Mapping) else None
            if written is None:
                continue
            for message in written if isinstance(written, list) else [written]:
                if isinstance(message, lc.AIMessage) and message.id == self.message_id:
                    return self._close(message)
        return []

    def _tool(self, message: lc.ToolMessage) -> list[ev.Event]:
        out = self._close()
        call_id = message.tool_call_id
        if call_id not in self.known:
            return out
        self.step_used = True
        name = self.pending.pop(call_id, (message.name or "", {}))[0] or message.name
        answer = self.client_results.get(call_id)
        if call_id in self.denied:
            out.append(ev.ToolDenied(call_id))
        elif answer is not None:
            out.append(ev.ToolResult(call_id, answer.output, is_error=answer.is_error, tool_name=name))
        elif message.status == "error":
            out.append(ev.ToolResult(call_id, _tool_text(message.content), is_error=True, tool_name=name))
        else:
            content = message.content
            out.append(
                ev.ToolResult(call_id, content if isinstance(content, str) else _tool_text(content), tool_name=name)
            )
        return out

    def end(self) -> list[ev.Event]:
        return self._close()


# -- interrupts --------------------------------------------------------------------


def _match(pending: Mapping[str, tuple[str, dict[str, Any]]], taken: set[str], name: Any, args: Any) -> str | None:
    for call_id, (call_name, call_args) in pending.items():
        if call_id not in taken and call_name == name and (args is None or call_args == args):
            return call_id
    return None


def map_interrupts(
    interrupts: Sequence[Interrupt], pending: Mapping[str, tuple[str, dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Which pending tool calls each interrupt asks about (see the module
    docstring for the payloads): ``[{"id", "kind", "calls"}]``. An
    interrupt about no tool call is an error: there is nothing to ask the
    person in the chat's vocabulary."""
    taken: set[str] = set()
    out: list[dict[str, Any]] = []
    unmatched: list[Interrupt] = []
    for item in interrupts:
        value = item.value
        calls: list[str] = []
        kind = "call"
        if isinstance(value, Mapping):
            if isinstance(value.get(CLIENT_TOOL_KEY), str):
                kind = "client"
                found = _match(pending, taken, value[CLIENT_TOOL_KEY], value.get("args"))
                if found is None:
                    raise RuntimeError(f"LangGraph interrupt {item.id} stops for a client tool call not pending")
                calls = [found]
            elif isinstance(value.get("tool_call_id"), str) and value["tool_call_id"] in pending:
                calls = [value["tool_call_id"]]
            elif isinstance(value.get("action_requests"), list):
                kind = "hitl"
                for request in value["action_requests"]:
                    found = _match(pending, taken | set(calls), request.get("name"), request.get("args"))
                    if found is None:
                        raise RuntimeError(f"LangGraph interrupt {item.id} asks about a tool call that is not pending")
                    calls.append(found)
            elif isinstance(value.get("action") or value.get("name"), str):
                found = _match(pending, taken, value.get("action") or value.get("name"), value.get("args"))
                calls = [found] if found else []
        if not calls:
            unmatched.append(item)
            continue
        taken.update(calls)
        out.append({"id": item.id, "kind": kind, "calls": calls})
    left = [call_id for call_id in pending if call_id not in taken]
    if unmatched:
        if len(unmatched) == 1 and len(left) == 1:
            out.append({"id": unmatched[0].id, "kind": "call", "calls": left})
        else:
            raise RuntimeError(
                f"LangGraph interrupt(s) {[i.id for i in unmatched]} name no pending tool call: "
                'interrupt({"tool_call_id": ...}) inside the tool (docs/adapters.md)'
            )
    return out


def resume_values(
    mapping: Sequence[Mapping[str, Any]],
    approvals: Mapping[str, ToolApproval],
    client_results: Mapping[str, ClientToolResult] | None = None,
) -> dict[str, Any]:
    """``Command(resume=...)``'s value: each interrupt's answer, from the
    person's checked decisions (a call without one is denied) or the
    browser's checked result of a client-side call."""
    out: dict[str, Any] = {}
    for entry in mapping:
        if entry["kind"] == "client":
            out[entry["id"]] = _client_answer((client_results or {}).get(entry["calls"][0]))
            continue
        decisions = [approvals.get(call_id) for call_id in entry["calls"]]
        if entry["kind"] == "hitl":
            out[entry["id"]] = {
                "decisions": [
                    {"type": "approve"}
                    if d is not None and d.approved
                    else {"type": "reject", "message": (d.reason if d is not None else None) or "Denied by the user."}
                    for d in decisions
                ]
            }
        else:
            d = decisions[0]
            out[entry["id"]] = {"approved": bool(d and d.approved), "reason": d.reason if d else None}
    return out


def _announced(history: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, dict[str, Any]]]:
    """The tool calls of the continued assistant message that are not
    answered yet (streamed by the run that asked): id → (name, args)."""
    if not history or history[-1].get("role") != "assistant":
        return {}
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for part in history[-1].get("parts") or ():
        kind = str(part.get("type", ""))
        if not (kind.startswith("tool-") or kind == "dynamic-tool") or "toolCallId" not in part:
            continue
        if part.get("state") in ("output-available", "output-error", "output-denied"):
            continue
        name = part.get("toolName") if kind == "dynamic-tool" else kind[len("tool-") :]
        args = part.get("input")
        out[str(part["toolCallId"])] = (str(name), args if isinstance(args, dict) else {})
    return out


# -- the adapter ---------------------------------------------------------------------


class LangGraphAdapter(AgentAdapter):
    """Runs a compiled LangGraph graph (see the module docstring)."""

    framework = "langgraph"
    extra = "langgraph"

    def __init__(self, agent: Any, *, client_tools: Iterable[str] = ()) -> None:
        """``client_tools``: names of tools the browser runs besides the
        graph's client tools (a tool of the project's own whose body
        is ``interrupt({"client_tool": name, "args": arguments})``)."""
        super().__init__(agent)
        self.extra_client_tools = frozenset(client_tools)

    @classmethod
    def accepts(cls, agent: Any) -> bool:
        return isinstance(agent, Pregel)

    def graph_tools(self) -> list[BaseTool]:
        """The tools of the graph's tool nodes (``ToolNode``): what its model
        is offered. A subgraph's are its own, not listed."""
        tools: list[BaseTool] = []
        for node in getattr(self.agent, "nodes", {}).values():
            by_name = getattr(getattr(node, "bound", None), "tools_by_name", None)
            if isinstance(by_name, Mapping):
                tools.extend(t for t in by_name.values() if isinstance(t, BaseTool))
        return tools

    @property
    def client_tools(self) -> frozenset[str]:
        """The graph's ``ClientTool`` tools and the names given as ``client_tools``."""
        return self.extra_client_tools | {t.name for t in self.graph_tools() if isinstance(t, ClientTool)}

    @property
    def name(self) -> str:
        return f"{self.framework}:{getattr(self.agent, 'name', None) or 'graph'}"[:200]

    def describe(self) -> AgentDescription:
        """The tools of the graph's tool nodes (``ToolNode``), as the model
        is told of them. A graph's prompts are written inside its nodes,
        which nothing outside them can read, and a subgraph's tools are its
        own: the note says so."""
        tools: list[ToolSpec] = []
        for tool in self.graph_tools():
            function = convert_to_openai_tool(tool)["function"]
            tools.append(ToolSpec(function["name"], function.get("description", ""), function.get("parameters", {})))
        return AgentDescription(
            tools=tuple(tools),
            note="the graph's nodes write its prompts (not visible from outside them); subgraphs' tools are not listed",
        )

    def own_checkpointer(self) -> BaseCheckpointSaver[Any] | None:
        """The checkpointer the graph was compiled with, if any."""
        saver = getattr(self.agent, "checkpointer", None)
        return saver if isinstance(saver, BaseCheckpointSaver) else None

    def delta_channels(self) -> bool:
        """Whether the graph keeps a channel as deltas (``DeltaChannel``),
        whose value is read back along the parent checkpoints: then the
        whole thread is saved, not only its latest checkpoint."""
        return any(type(channel).__name__ == "DeltaChannel" for channel in getattr(self.agent, "channels", {}).values())

    def config(self, turn: AgentTurn, thread_id: str) -> dict[str, Any]:
        """The graph's run config (override to add ``recursion_limit``,
        ``context``…)."""
        return {"configurable": {"thread_id": thread_id}}

    def graph_input(self, turn: AgentTurn, replace: bool) -> dict[str, Any]:
        """A new turn's input: the stored conversation as the ``messages``
        (replacing the thread's when the graph keeps its own)."""
        history: list[Any] = to_langchain_messages(turn.messages)
        if replace:
            history.insert(0, lc.RemoveMessage(id=REMOVE_ALL_MESSAGES))
        return {"messages": history}

    async def run(self, turn: AgentTurn) -> AsyncIterator[ev.Event]:
        own = self.own_checkpointer()
        saved: Mapping[str, Any] | None = None
        if turn.continues:
            saved = turn.resume_state
            if not isinstance(saved, Mapping) or saved.get("v") != STATE_VERSION:
                raise RuntimeError("this LangGraph run continues pending calls, but no saved graph state came with it")
        # The conversation's key, not the chat id: a checkpointer of the
        # project's own is shared by every owner, and chat ids are per owner.
        thread_id = str(saved["thread_id"]) if saved else turn.thread_key
        saver = own if own is not None else InMemorySaver()
        if own is None and saved is not None:
            load_saver(saver, saved["checkpoint"])  # type: ignore[arg-type]
        graph = self.agent if own is not None else self.agent.copy(update={"checkpointer": saver})
        if saved is not None:
            announced = _announced(turn.history)
            denied = {call_id for call_id, d in turn.approvals.items() if not d.approved}
            resume = resume_values(saved["interrupts"], turn.approvals, turn.client_results)
            graph_input: Any = Command(resume=resume)
        else:
            announced, denied = {}, set()
            turn = dataclasses.replace(turn, messages=await read_files(turn.messages))  # the files' bytes
            graph_input = self.graph_input(turn, replace=own is not None)
        translate = _Translator(announced, denied, turn.client_results)
        interrupts: list[Interrupt] = []
        stream = graph.astream(graph_input, self.config(turn, thread_id), stream_mode=["messages", "updates"])
        # Closing the stream (stop, disconnect) cancels the graph's tasks.
        async with aclosing(stream):
            async for mode, data in stream:
                if mode == "messages":
                    events = translate.message(data[0])
                elif isinstance(data, Mapping) and "__interrupt__" in data:
                    interrupts.extend(data["__interrupt__"])
                    continue
                else:
                    events = translate.update(data)
                for event in events:
                    yield event
        for event in translate.end():
            yield event
        if interrupts:
            mapping = map_interrupts(interrupts, translate.pending)
            state: dict[str, Any] = {"v": STATE_VERSION, "thread_id": thread_id, "interrupts": mapping}
            if own is None:
                state["checkpoint"] = dump_saver(saver, thread_id, whole=self.delta_channels())  # type: ignore[arg-type]
            await turn.save_state(state)
            for entry in mapping:
                if entry["kind"] == "client":
                    continue  # the browser answers it: its call stays pending, input available
                for call_id in entry["calls"]:
                    yield ev.ToolApprovalRequest(turn.approval_id(), call_id)
            yield ev.StepFinished(translate.step)
            yield ev.Done("tool-calls")
            return
        yield ev.StepFinished(translate.step)
        yield ev.Done()
