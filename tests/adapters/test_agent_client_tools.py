"""Client-side tools of LangGraph and Agents SDK agents: a tool the browser
runs (useChat's ``onToolCall`` + ``addToolOutput``), offered to the model by
the agent, its call left pending for the browser, the browser's result
checked by the store and given back to the framework, which answers from
it. Through a real server and the real ai@7 client, as pydantic-ai's
``ExternalToolset`` is in test_pydantic_ai.py; the error path and a
fresh adapter on another process without a server.

The module is also a URLconf: the project's URLs plus a chat view per
framework whose agent has ``get_location`` as a client tool, on the
frameworks' test models (LangChain's chat model of the demo, the Agents
SDK's ``Model`` of the demo), which call it when asked "where am I?".
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from agents import Agent
from django.test import override_settings
from django.urls import path
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from demo_project.agents import langgraph_agent, openai_agents_agent
from uistream_app.adapters import AgentTurn, adapter_for
from uistream_app.adapters import langgraph as lg
from uistream_app.adapters import openai_agents as oa
from uistream_app.models import Run
from uistream_app.protocol import events as ev
from uistream_app.runs import ClientToolResult
from uistream_app.runs.messages import UserMessage
from uistream_app.views import AGUIView, ChatView

from ..protocol.agui_oracles import assert_accepted
from ..server import serve_demo
from ..test_agui_approvals import client_history
from ..test_agui_http import post_agui, run_input, user
from ..test_chat_http import Browser, run_finished, wait_for
from ..test_chat_real_client import run_client
from ..urls import urlpatterns as test_urlpatterns
from .common import stored, text, tool_parts

pytestmark = pytest.mark.django_db(transaction=True)

DESCRIPTION = "The user's location, from the browser."


def locating_graph() -> Any:
    """The demo's graph shape (model ⇄ ``ToolNode``) with ``get_location``
    as its one tool, a ``ClientTool``."""
    location = lg.client_tool("get_location", DESCRIPTION)
    bound = langgraph_agent.ScriptChatModel().bind_tools([location])

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_node("tools", ToolNode([location]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder.compile(name="locating")


def locating_agent() -> Any:
    return Agent(
        name="locating",
        model=openai_agents_agent.ScriptModel(),
        tools=[oa.client_tool("get_location", DESCRIPTION), openai_agents_agent.get_weather],
    )


AGENTS = {"langgraph": locating_graph(), "openai-agents": locating_agent()}

urlpatterns = [
    *test_urlpatterns,
    *(path(f"test-client-tools/{name}/chat", ChatView.as_view(agent=agent)) for name, agent in AGENTS.items()),
    *(path(f"test-client-tools/{name}/agui", AGUIView.as_view(agent=agent)) for name, agent in AGENTS.items()),
]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with override_settings(ROOT_URLCONF=__name__):
        yield from serve_demo(monkeypatch, 0)


def test_the_adapters_offer_their_client_tools_to_the_store() -> None:
    graph_adapter = adapter_for(AGENTS["langgraph"])
    assert graph_adapter is not None
    assert graph_adapter.client_tools == frozenset({"get_location"})
    assert [t.name for t in graph_adapter.describe().tools] == ["get_location"]
    sdk_adapter = adapter_for(AGENTS["openai-agents"])
    assert sdk_adapter is not None
    assert sdk_adapter.client_tools == frozenset({"get_location"})  # get_weather runs on the server
    # A handoff's agent's client tools are the run's too.
    front = Agent(name="front", model=openai_agents_agent.ScriptModel(), handoffs=[AGENTS["openai-agents"]])
    assert oa.OpenAIAgentsAdapter(front).client_tools == frozenset({"get_location"})
    # The demo agents have none: their calls are the server's.
    assert adapter_for(langgraph_agent.graph).client_tools == frozenset()  # type: ignore[union-attr]
    assert adapter_for(openai_agents_agent.demo_agent).client_tools == frozenset()  # type: ignore[union-attr]


@pytest.mark.node
@pytest.mark.parametrize("framework", list(AGENTS))
def test_a_client_tool_is_run_by_the_browser_and_the_agent_answers_from_its_result(
    node: str, server: str, framework: str
) -> None:
    browser = Browser(server)
    chat_id = f"client-tool-{framework}"
    with override_settings(ROOT_URLCONF=__name__):
        out = run_client(
            node,
            server,
            browser,
            chatId=chat_id,
            version=7,
            api=f"/test-client-tools/{framework}/chat",
            clientTools={"get_location": {"city": "Lima"}},
            steps=[{"send": "where am I?"}, {"waitFinished": 2}],
        )
    assert out["error"] is None
    wait_for(run_finished, "the runs to be stored")
    messages = stored(chat_id)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert out["messages"] == messages
    (call,) = tool_parts(messages[1], "get_location")  # announced once, by the run that asked
    assert call["state"] == "output-available"
    assert call["output"] == {"city": "Lima"}  # the browser's value, as it sent it
    assert "approval" not in call  # nobody was asked
    # The framework gave the result to its model, which answered from it.
    assert text(messages[1]).endswith('get_location returned {"city": "Lima"}.')
    first, second = Run.objects.order_by("started_at")
    assert (first.status, first.finish_reason) == ("completed", "tool-calls")
    assert second.trigger == "continue"
    assert second.decisions[0]["clientResult"] == "output-available"
    assert second.status == "completed"
    # What the run was given (the admin's run page): the tool, as the browser's.
    offered = {t["name"]: t.get("client_side", False) for t in first.setup["agent"]["tools"]}
    assert offered["get_location"] is True
    assert offered.get("get_weather", False) is False


def _agui_events(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[len("data: ") :]) for line in body.decode().splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize("framework", list(AGENTS))
def test_over_ag_ui_the_call_is_left_pending_and_a_tool_message_answers_it(server: str, framework: str) -> None:
    browser = Browser(server)
    thread, api = f"agui-client-tool-{framework}", f"/test-client-tools/{framework}/agui"
    with override_settings(ROOT_URLCONF=__name__):
        asked = post_agui(browser, run_input(thread, [user("where am I?")]), api)
        assert asked.status_code == 200
        first = assert_accepted(_agui_events(asked.content))
        (start,) = [e for e in first if e["type"] == "TOOL_CALL_START"]
        assert start["toolCallName"] == "get_location"
        assert first[-1]["type"] == "RUN_FINISHED"
        assert first[-1].get("outcome", "success") == "success"  # no interrupt: nobody is asked
        wait_for(run_finished, "the first run to be stored")
        answer = {"id": "t1", "role": "tool", "toolCallId": start["toolCallId"], "content": '{"city": "Lima"}'}
        answered = post_agui(browser, run_input(thread, [*client_history(thread), answer], run_id="r2"), api)
        assert answered.status_code == 200
    second = assert_accepted(_agui_events(answered.content))
    (result,) = [e for e in second if e["type"] == "TOOL_CALL_RESULT"]
    assert result["toolCallId"] == start["toolCallId"]
    assert json.loads(result["content"]) == {"city": "Lima"}
    said = "".join(e["delta"] for e in second if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert said.endswith('get_location returned {"city": "Lima"}.')
    wait_for(run_finished, "the continuation to be stored")
    (call,) = tool_parts(stored(thread)[1], "get_location")
    assert (call["state"], call["output"]) == ("output-available", {"city": "Lima"})


# -- without a server: the error path, and the answer on another process -----------------


def turn(**kw: Any) -> AgentTurn:
    return AgentTurn(**{"history": [], "messages": [], "chat_id": "c", "run_id": "r", "message_id": "m", **kw})


async def collect(adapter: Any, t: AgentTurn) -> list[ev.Event]:
    return [e async for e in adapter.run(t)]


@pytest.mark.parametrize("framework", list(AGENTS))
def test_the_browsers_error_reaches_the_model_and_the_wire_on_a_fresh_adapter(
    framework: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "0")
    saved: list[Any] = []

    async def save(state: Any) -> None:
        saved.append(json.loads(json.dumps(state)))  # what the database keeps

    make = locating_graph if framework == "langgraph" else locating_agent
    asked = asyncio.run(collect(adapter_for(make()), turn(messages=[UserMessage("where am I?")], save_state=save)))
    (call,) = [e for e in asked if isinstance(e, ev.ToolCall)]
    assert call.tool_name == "get_location"
    assert not [e for e in asked if isinstance(e, ev.ToolApprovalRequest)]
    assert asked[-1] == ev.Done("tool-calls")
    pending = {
        "id": "a1",
        "role": "assistant",
        "parts": [
            {"type": "tool-get_location", "toolCallId": call.tool_call_id, "state": "input-available", "input": {}}
        ],
    }
    # Another process: a fresh agent and adapter, and only what was stored.
    answered = asyncio.run(
        collect(
            adapter_for(make()),
            turn(
                history=[{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "where am I?"}]}, pending],
                messages=[UserMessage("where am I?")],
                continues=True,
                client_results={call.tool_call_id: ClientToolResult("The GPS is off.", is_error=True)},
                resume_state=saved[0],
            ),
        )
    )
    assert not [e for e in answered if isinstance(e, ev.ToolCallStart | ev.ToolCall)]  # not announced again
    results = [e for e in answered if isinstance(e, ev.ToolResult)]
    assert [(r.tool_call_id, r.content, r.is_error) for r in results] == [(call.tool_call_id, "The GPS is off.", True)]
    said = "".join(e.text for e in answered if isinstance(e, ev.TextDelta))
    if framework == "langgraph":  # a ToolMessage with status error
        assert said == "The get_location tool failed: The GPS is off."
    else:  # a function call's output has no error flag: the model reads the text
        assert said == 'get_location returned "The GPS is off.".'

    assert answered[-1] == ev.Done()


def test_a_langgraph_client_interrupt_maps_to_its_pending_call_and_resumes_with_the_result() -> None:
    from langgraph.types import Interrupt

    pending = {"c1": ("get_location", {}), "c2": ("get_location", {"precise": True})}
    mapping = lg.map_interrupts(
        [
            Interrupt({"client_tool": "get_location", "args": {"precise": True}}, id="i1"),
            Interrupt({"client_tool": "get_location", "args": {}}, id="i2"),
        ],
        pending,
    )
    assert mapping == [{"id": "i1", "kind": "client", "calls": ["c2"]}, {"id": "i2", "kind": "client", "calls": ["c1"]}]
    values = lg.resume_values(mapping, {}, {"c2": ClientToolResult({"city": "Lima"})})
    assert values == {
        "i1": {"output": {"city": "Lima"}, "is_error": False},
        "i2": {"output": "The client did not answer this call.", "is_error": True},
    }
    with pytest.raises(RuntimeError, match="client tool call not pending"):
        lg.map_interrupts([Interrupt({"client_tool": "get_time", "args": {}}, id="i3")], pending)
