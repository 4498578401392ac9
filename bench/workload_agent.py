"""The standard workload (``bench/workload.json``, docs/benchmarks.md) as a
pydantic-ai agent: a ``FunctionModel`` that streams each recorded step's
reasoning, text and tool-call fragments, and the workload's two tools
answering with the recorded results. ``bench/agent_bench.py`` runs the same
agent behind our chat view and behind pydantic-ai's own ``VercelAIAdapter``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, TypedDict

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, DeltaThinkingPart, DeltaToolCall, FunctionModel

#: The key of the thinking part in the model's streamed dicts (any index
#: the tool calls of one step don't use).
_THINKING = 1_000_000


class Filters(TypedDict):
    lang: str
    tags: list[str]


def _steps(workload: dict[str, Any]) -> tuple[list[list[Any]], dict[str, Any]]:
    """Each step's stream items for ``FunctionModel``, and the recorded tool
    results by call id."""
    steps: list[list[Any]] = []
    results: dict[str, Any] = {}
    for step in workload["steps"]:
        items: list[Any] = []
        index: dict[str, int] = {}
        for event in step["events"]:
            kind = event["type"]
            if kind == "reasoning-delta":
                items.append({_THINKING: DeltaThinkingPart(content=event["delta"])})
            elif kind == "text-delta":
                items.append(event["delta"])
            elif kind == "tool-input-start":
                index[event["toolCallId"]] = len(index)
                delta = DeltaToolCall(name=event["toolName"], tool_call_id=event["toolCallId"])
                items.append({index[event["toolCallId"]]: delta})
            elif kind == "tool-input-delta":
                items.append({index[event["toolCallId"]]: DeltaToolCall(json_args=event["delta"])})
            elif kind == "tool-result":
                results[event["toolCallId"]] = event["result"]
        steps.append(items)
    return steps, results


def workload_agent(workload: dict[str, Any]) -> Agent[None, str]:
    """The agent that plays ``workload``: model call n streams step n."""
    steps, results = _steps(workload)

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        for item in steps[sum(isinstance(m, ModelResponse) for m in messages)]:
            yield item

    agent: Agent[None, str] = Agent(FunctionModel(stream_function=stream), name="perf")

    @agent.tool
    async def search_docs(ctx: RunContext[None], query: str, limit: int, filters: Filters) -> Any:
        return results[ctx.tool_call_id]

    @agent.tool
    async def get_record(ctx: RunContext[None], query: str, limit: int, filters: Filters) -> Any:
        return results[ctx.tool_call_id]

    return agent
