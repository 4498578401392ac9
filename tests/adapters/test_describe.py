"""What each adapter tells of its agent's own instructions and tools
(``AgentAdapter.describe``), read from the real frameworks' agents (the
demo's, and a few built here), and what a run of one stores and shows."""

from __future__ import annotations

import re
from typing import Any

import pytest
from agents import Agent as OpenAIAgent
from agents import WebSearchTool, function_tool
from django.contrib.auth import get_user_model
from django.test import AsyncClient
from django.urls import reverse
from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets.external import ExternalToolset

from demo_project.agents import langgraph_agent, openai_agents_agent, pydantic_ai_agent
from uistream_app.adapters import adapter_for
from uistream_app.models import Run
from uistream_app.testing import ChatClient


def names_and_schemas(tools: Any) -> dict[str, Any]:
    return {t.name: t.parameters for t in tools}


def test_pydantic_ai_tells_its_instructions_and_tools_and_what_it_decides_at_run_time() -> None:
    agent = Agent(
        FunctionModel(stream_function=pydantic_ai_agent.demo_stream),
        instructions="Answer in French.",
        system_prompt="You are terse.",
        toolsets=[ExternalToolset([ToolDefinition(name="get_location", description="Where the user is.")])],
    )

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    described = adapter_for(agent).describe()  # type: ignore[union-attr]
    assert described.instructions == ("You are terse.", "Answer in French.")
    tools = {t.name: t for t in described.tools}
    assert tools["get_weather"].description == "The weather in a city."
    assert tools["get_weather"].parameters["properties"] == {"city": {"type": "string"}}
    assert tools["get_location"].description == "Where the user is."
    assert described.note == ""

    @agent.instructions
    def today() -> str:
        return "Today is Monday."

    assert "instructions written by a function" in adapter_for(agent).describe().note  # type: ignore[union-attr]


def test_the_demo_pydantic_ai_agent_tells_its_tools() -> None:
    described = adapter_for(pydantic_ai_agent.agent).describe()  # type: ignore[union-attr]
    schemas = names_and_schemas(described.tools)
    assert set(schemas) == {"get_weather", "send_email"}
    assert schemas["send_email"]["required"] == ["to", "body"]


def test_openai_agents_tells_its_instructions_tools_and_handoffs() -> None:
    described = adapter_for(openai_agents_agent.demo_agent).describe()  # type: ignore[union-attr]
    assert described.instructions == ("You are the demo's offline assistant.",)
    schemas = names_and_schemas(described.tools)
    assert set(schemas) == {"get_weather", "send_email"}
    assert "city" in schemas["get_weather"]["properties"]

    @function_tool
    def lookup(order_id: str) -> str:
        """Look an order up."""
        return "shipped"

    billing = OpenAIAgent(name="billing")
    triage = OpenAIAgent(
        name="triage",
        instructions=lambda context, agent: "dynamic",
        tools=[lookup, WebSearchTool()],
        handoffs=[billing],
    )
    described = adapter_for(triage).describe()  # type: ignore[union-attr]
    assert described.instructions == ()
    assert [t.name for t in described.tools] == ["lookup", "web_search"]
    assert described.tools[1].description == "(a hosted tool: WebSearchTool)"
    assert "written by a function" in described.note
    assert "it may hand off to: billing" in described.note


def test_langgraph_tells_its_tool_nodes_tools_and_that_its_nodes_write_the_prompts() -> None:
    described = adapter_for(langgraph_agent.build_graph()).describe()  # type: ignore[union-attr]
    schemas = names_and_schemas(described.tools)
    assert set(schemas) == {"get_weather", "send_email"}
    # The id LangGraph injects is not what the model is told of.
    assert set(schemas["send_email"]["properties"]) == {"to", "body"}
    assert described.instructions == ()
    assert "nodes write its prompts" in described.note


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_an_agent_run_stores_and_shows_what_its_agent_brings() -> None:
    result = await ChatClient("/api/agents/openai-agents/chat").send("What's the weather in Paris?")
    assert result.ok, result.error
    setup = (await Run.objects.aget(pk=result.run_id)).setup
    assert setup["agent"]["framework"] == "openai-agents"
    assert setup["agent"]["instructions"] == ["You are the demo's offline assistant."]
    assert [t["name"] for t in setup["agent"]["tools"]] == ["get_weather", "send_email"]
    assert setup["tools"] == []  # the agent brings its own
    client = AsyncClient()
    await client.aforce_login(await get_user_model().objects.acreate_superuser("root", "root@example.com", "pw"))
    html = (await client.get(reverse("admin:uistream_app_run_change", args=[result.run_id]))).content.decode()
    given = re.search(r'<section id="given".*?</section>', html, re.DOTALL)
    assert given is not None
    assert "You are the demo&#x27;s offline assistant." in given.group(0)
    assert '<code class="uistream-tool-name">get_weather</code>' in given.group(0)
    assert "What&#x27;s the weather in Paris?" in html
