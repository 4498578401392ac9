"""The demo's LangGraph chat: a hand-built ``StateGraph`` (a model node and
LangGraph's ``ToolNode``, the shape ``create_react_agent`` builds) on an
offline LangChain chat model that asks ``script.reply()`` and speaks the
answer as ``AIMessageChunk``s: reasoning and text as content blocks, tool
calls as ``tool_call_chunks`` whose id and name come only on the first
chunk, usage on the last. ``send_email`` asks a person with LangGraph's own
``interrupt()`` (the payload convention of docs/adapters.md).

LangChain's ``GenericFakeChatModel`` can't ``bind_tools``, hence the small
``BaseChatModel`` subclass here.

What the model saw (``SEEN``), how many deltas it produced (``DELTAS``) and
what ``send_email`` did (``ASKED``, ``SENT``) are kept for the tests.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import deque
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Annotated, Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import interrupt

from uistream_app.views import ChatView

from . import script

#: The lists of messages the model was last called with, oldest first
#: (bounded: the demo server runs for long).
SEEN: deque[list[BaseMessage]] = deque(maxlen=32)
#: How many text and reasoning deltas the model has produced.
DELTAS = [0]
#: How often ``send_email`` started (it starts again when its run is resumed).
ASKED = [0]
#: The emails ``send_email`` last sent (after a person's approval only).
SENT: deque[dict[str, Any]] = deque(maxlen=32)

#: The text a denied ``send_email`` reports to the model.
DENIED = "The user denied this call."


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)


def _outcomes(messages: Sequence[BaseMessage]) -> list[script.ToolOutcome]:
    """The tool results since the model's last call (the trailing
    ``ToolMessage``s), as the script reads them."""
    out: list[script.ToolOutcome] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        text = _text(message)
        status = "ok"
        if message.status == "error":
            status = "denied" if "denied" in text else "error"
        out.insert(0, script.ToolOutcome(message.name or "tool", text, status))
    return out


class ScriptChatModel(BaseChatModel):
    """A LangChain chat model that answers with ``script.reply()``."""

    #: The names of the tools bound with ``bind_tools``.
    tool_names: list[str] = []  # noqa: RUF012  (a pydantic field: copied per instance)

    @property
    def _llm_type(self) -> str:
        return "uistream-demo-script"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptChatModel:
        names = [t.name if isinstance(t, BaseTool) else getattr(t, "__name__", str(t)) for t in tools]
        return self.model_copy(update={"tool_names": names})

    def _reply(self, messages: list[BaseMessage]) -> script.Reply:
        SEEN.append(list(messages))
        prompt = next((_text(m) for m in reversed(messages) if isinstance(m, HumanMessage)), "")
        return script.reply(prompt, _outcomes(messages))

    def _chunks(self, answer: script.Reply) -> Iterator[AIMessageChunk]:
        if answer.reasoning:
            yield AIMessageChunk(content=[{"type": "reasoning", "reasoning": answer.reasoning, "index": 0}])
        for delta in answer.text:
            yield AIMessageChunk(content=[{"type": "text", "text": delta, "index": 1}])
        for index, (name, args) in enumerate(answer.calls):
            arguments = json.dumps(args)
            half = len(arguments) // 2
            call_id = f"call_{uuid.uuid4().hex[:16]}"
            # As providers stream them: id and name on the first fragment only.
            yield AIMessageChunk(
                content="",
                tool_call_chunks=[{"id": call_id, "name": name, "args": arguments[:half], "index": index}],
            )
            yield AIMessageChunk(
                content="",
                tool_call_chunks=[{"id": None, "name": None, "args": arguments[half:], "index": index}],
            )
        words = sum(len(t.split()) for t in answer.text) + len(answer.reasoning.split())
        yield AIMessageChunk(
            content="",
            usage_metadata={"input_tokens": 12, "output_tokens": words, "total_tokens": 12 + words},
            response_metadata={"finish_reason": "tool_calls" if answer.calls else "stop"},
            chunk_position="last",
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        merged: AIMessageChunk | None = None
        for chunk in self._chunks(self._reply(messages)):
            merged = chunk if merged is None else merged + chunk
        assert merged is not None
        message = AIMessage(
            content=merged.content,
            tool_calls=merged.tool_calls,
            usage_metadata=merged.usage_metadata,
            response_metadata=merged.response_metadata,
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        pause = script.delay()
        for chunk in self._chunks(self._reply(messages)):
            if pause and isinstance(chunk.content, list):
                await asyncio.sleep(pause)
            if isinstance(chunk.content, list):
                DELTAS[0] += 1
            yield ChatGenerationChunk(message=chunk)


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Get the current weather for a city."""
    return script.get_weather(city)


@tool
def send_email(to: str, body: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Any:
    """Send an email. A person approves it first."""
    # LangGraph runs this again from the top when the run is resumed: the
    # email goes only after interrupt() has returned the person's answer.
    ASKED[0] += 1
    answer = interrupt({"tool_call_id": tool_call_id, "action": "send_email", "args": {"to": to, "body": body}})
    if not answer.get("approved"):
        return ToolMessage(DENIED, tool_call_id=tool_call_id, name="send_email", status="error")
    SENT.append({"to": to, "body": body})
    return script.send_email(to, body)


TOOLS = [get_weather, send_email]


def build_graph(model: BaseChatModel | None = None) -> Any:
    """The agent: model ⇄ tools until the model answers without a call."""
    bound = (model or ScriptChatModel()).bind_tools(TOOLS)

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_node("tools", ToolNode(TOOLS))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder.compile(name="demo-langgraph")


graph = build_graph()


class LangGraphChatView(ChatView):
    """The demo chat on the LangGraph agent."""

    agent = graph
