"""The OpenAI Agents SDK adapter: the demo's ``agents.Agent`` (on its
offline Responses model, ``ScriptModel``) behind
``/api/agents/openai-agents/chat``, driven by the real ai@7 client, and the
translation of the SDK's stream for the cases that are easy to get wrong
(text only in raw events, run items after them, a rejected call's output,
a continuation that must not announce the pending call again)."""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, function_tool
from django.conf import settings
from django.core.asgi import get_asgi_application
from django.db import connection
from django.test import override_settings

from demo_project.agents import openai_agents_agent as demo
from demo_project.agents import script
from uistream_app.adapters import AgentTurn, adapter_for
from uistream_app.adapters.openai_agents import OpenAIAgentsAdapter, input_items
from uistream_app.models import Run
from uistream_app.protocol import events as ev
from uistream_app.protocol.agui.messages import fold_messages, ui_messages_to_agui
from uistream_app.protocol.agui.verifier import verify_sse
from uistream_app.runs import AssistantMessage, ReasoningPart, ToolApproval, ToolCallRequest, ToolMessage, UserMessage
from uistream_app.transport.agui_views import render_stored_run

from ..live.conftest import redis_config  # noqa: F401  (fixture)
from ..protocol.agui_oracles import agui_client, assert_accepted
from ..server import ASGIServer, serve_demo, subprocess_server
from ..test_agui_http import run_client as agui_run_client
from ..test_chat_http import Browser, read_chunks, run_finished, text_of, wait_for
from ..test_chat_real_client import run_client
from ..test_chat_redis import same_visitor
from .common import drop_then_resume, stored, text, tool_parts

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/agents/openai-agents/chat"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from serve_demo(monkeypatch, 5)


@pytest.fixture
def agui_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The demo plus an ``AGUIView`` running the demo's agent."""
    with override_settings(ROOT_URLCONF="tests.adapters.openai_agents_urls"):
        yield from serve_demo(monkeypatch, 1)


@pytest.fixture(autouse=True)
def fresh_demo_model(monkeypatch: pytest.MonkeyPatch) -> demo.ScriptModel:
    """A new model and tool counters for each test: what a test reads is
    what its own requests made the agent do."""
    model = demo.ScriptModel()
    monkeypatch.setattr(demo.demo_agent, "model", model)
    monkeypatch.setattr(demo, "demo_model", model)
    monkeypatch.setitem(demo.RAN, "get_weather", 0)
    monkeypatch.setitem(demo.RAN, "send_email", 0)
    return model


# -- through the real server and the real ai@7 client -------------------------------


def test_the_three_phrases_stream_are_stored_as_the_client_built_them_and_carry_history(
    node: str, server: str, fresh_demo_model: demo.ScriptModel
) -> None:
    browser = Browser(server)
    out = run_client(
        node,
        server,
        browser,
        api=API,
        chatId="oa-phrases",
        version=7,
        steps=[{"send": "What's the weather in Oslo?"}, {"send": "count to 12"}],
    )
    assert out["error"] is None
    wait_for(run_finished, "the runs to be stored")
    messages = stored("oa-phrases")
    assert out["messages"] == messages
    weather, count = messages[1], messages[3]
    (call,) = tool_parts(weather, "get_weather")
    assert call["state"] == "output-available"
    assert call["input"] == {"city": "Oslo"}
    assert call["output"]["city"] == "Oslo"
    assert "In Oslo it is" in text(weather)
    assert demo.RAN["get_weather"] == 1
    assert text(count).split() == [str(n) for n in range(1, 13)]
    assert [p["type"] for p in count["parts"]][:2] == ["step-start", "reasoning"]
    runs = Run.objects.order_by("started_at")
    assert [r.model for r in runs] == ["openai-agents:demo", "openai-agents:demo"]
    assert all(r.status == "completed" for r in runs)
    # Turn 2 (the model's third call) was given turn 1 as Responses input
    # items: the reasoning item, the call and its result, by call id.
    given = fresh_demo_model.inputs[2]
    reasoning_id = weather["parts"][1]["providerMetadata"]["openai"]["itemId"]
    assert given[0] == {"role": "user", "content": "What's the weather in Oslo?"}
    assert {
        "type": "reasoning",
        "id": reasoning_id,
        "summary": [{"type": "summary_text", "text": weather["parts"][1]["text"]}],
    } in given
    calls = [i for i in given if i.get("type") == "function_call"]
    assert [(c["call_id"], c["name"], json.loads(c["arguments"])) for c in calls] == [
        (call["toolCallId"], "get_weather", {"city": "Oslo"})
    ]
    (result,) = [i for i in given if i.get("type") == "function_call_output"]
    assert result["call_id"] == call["toolCallId"]
    assert json.loads(result["output"]) == call["output"]
    assert given[-1] == {"role": "user", "content": "count to 12"}


@pytest.mark.parametrize("approved", [True, False])
def test_send_email_asks_and_the_answer_reaches_the_sdk(
    node: str, server: str, approved: bool, fresh_demo_model: demo.ScriptModel
) -> None:
    browser = Browser(server)
    chat_id = f"oa-email-{approved}"
    out = run_client(
        node,
        server,
        browser,
        api=API,
        chatId=chat_id,
        version=7,
        steps=[{"send": "email ada@example.com saying the build is green"}, {"approve": approved}],
    )
    assert out["error"] is None
    wait_for(run_finished, "the runs to be stored")
    messages = stored(chat_id)
    assert out["messages"] == messages
    assert len(messages) == 2  # the continuation continued the same message
    (part,) = tool_parts(messages[1], "send_email")  # announced once, not again by the continuation
    assert part["input"] == {"to": "ada@example.com", "body": "the build is green"}
    first, second = Run.objects.order_by("started_at")
    # The SDK's own RunState was stored with the run that asked.
    assert first.agent_state["pending"] == [part["toolCallId"]]
    assert first.agent_state["run_state"]["current_turn"] >= 1
    assert second.trigger == "continue"
    if approved:
        assert part["state"] == "output-available"
        assert part["output"]["status"] == "sent"
        assert demo.RAN["send_email"] == 1
        assert "the email to ada@example.com is sent" in text(messages[1])
    else:
        assert part["state"] == "output-denied"
        assert "output" not in part
        assert demo.RAN["send_email"] == 0  # the tool never ran
        assert "I did not run send_email: the call was denied." in text(messages[1])
    # The model's second call was given the decision's outcome by call id.
    outputs = [i for i in fresh_demo_model.inputs[-1] if i.get("type") == "function_call_output"]
    assert [o["call_id"] for o in outputs] == [part["toolCallId"]]
    assert (outputs[0]["output"] == "Tool execution was not approved.") is not approved


def test_stop_mid_answer_cancels_the_sdk_run(server: str, fresh_demo_model: demo.ScriptModel) -> None:
    browser = Browser(server)
    with browser.client.stream(
        "POST", API, json=browser.chat_body("oa-stop", "count to 200"), headers={"X-CSRFToken": browser.token}
    ) as response:
        head, _ = read_chunks(response, stop=lambda cs: text_of(cs).count(" ") >= 5)
        answer = browser.post(f"{API}/oa-stop/stop")
        assert answer.status_code == 200
        assert answer.json() == {"stopped": True}
        rest, done = read_chunks(response)
    assert done
    assert rest[-1] == {"type": "abort", "reason": "stopped"}
    wait_for(run_finished, "the run to end")
    assert Run.objects.get().status == "stopped"
    # The SDK's model stream was cut short, and nothing ran after it.
    wait_for(lambda: fresh_demo_model.cancelled == 1, "the model stream to be cancelled")
    assert fresh_demo_model.calls == 1
    assert fresh_demo_model.completed == 0
    stored_text = text(stored("oa-stop")[1])
    assert stored_text.startswith(text_of(head))
    assert len(stored_text.split()) < 200


def test_resume_after_a_disconnect_replays_and_follows(server: str) -> None:
    # The POST's connection is gone; the demo finishes runs on disconnect.
    head, replay, done = drop_then_resume(Browser(server), API, "oa-resume", "count to 150")
    assert done
    assert replay[: len(head)] == head
    assert replay[-1]["type"] == "finish"
    assert text_of(replay).split() == [str(n) for n in range(1, 151)]
    wait_for(run_finished, "the run to be stored")
    assert Run.objects.get().status == "completed"
    assert text(stored("oa-resume")[1]).split() == [str(n) for n in range(1, 151)]


def test_an_adapter_run_renders_as_agui_the_real_client_accepts(node: str, server: str) -> None:
    browser = Browser(server)
    out = run_client(node, server, browser, api=API, chatId="oa-agui", version=7, steps=[{"send": "weather in Lima"}])
    assert out["error"] is None
    wait_for(run_finished, "the run to be stored")
    run = Run.objects.get()
    body = asyncio.run(render_stored_run(run))
    events = assert_accepted(verify_sse(body))
    messages = stored("oa-agui")
    assert fold_messages(events) == ui_messages_to_agui(messages[1:])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.sse"
        path.write_bytes(body)
        read = json.loads(agui_client(node, "read", str(path)))
    assert read["error"] is None
    assert read["runError"] is None
    assert read["finished"]
    tool_results = [m for m in read["messages"] if m["role"] == "tool"]
    assert json.loads(tool_results[0]["content"])["city"] == "Lima"
    assert "In Lima it is" in read["messages"][-1]["content"]


@pytest.mark.parametrize("approved", [True, False])
def test_the_agent_behind_agui_interrupts_and_resumes_with_the_real_client(
    node: str, agui_server: str, approved: bool
) -> None:
    browser = Browser(agui_server)
    out = agui_run_client(
        node,
        browser,
        f"{agui_server}/test-agui/openai-agents",
        f"oa-agui-live-{approved}",
        [
            {"text": "email ada@example.com saying hi", "messageId": "u1", "runId": "run-a"},
            {"answers": [{"approved": approved}], "runId": "run-b"},
        ],
    )
    first, second = out["runs"]
    for run in (first, second):
        assert (run["error"], run["runError"], run["warnings"]) == (None, None, [])
        assert_accepted(run["events"])
    assert first["finished"]["outcome"] == "interrupt"
    (interrupt,) = first["finished"]["interrupts"]
    assert second["finished"]["outcome"] == "success"
    assert not [e for e in second["events"] if e["type"] == "TOOL_CALL_START"]  # not announced again
    (result,) = [e for e in second["events"] if e["type"] == "TOOL_CALL_RESULT"]
    assert result["toolCallId"] == interrupt["toolCallId"]
    assert demo.RAN["send_email"] == (1 if approved else 0)
    wait_for(run_finished, "the runs to be stored")
    (part,) = tool_parts(stored(f"oa-agui-live-{approved}")[1], "send_email")
    assert part["state"] == ("output-available" if approved else "output-denied")


@pytest.fixture
def two_servers(redis_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """This process's server and daphne in another process, sharing the
    database and Redis (as tests/test_chat_redis.py sets them up)."""
    if connection.vendor != "sqlite":
        pytest.skip("the second process shares the database through its file (SQLite)")
    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "1")
    uistream = {**settings.UISTREAM, "BROKER": redis_config}
    with override_settings(UISTREAM=uistream):
        here = ASGIServer(get_asgi_application())
        first = here.start()
        try:
            env = {
                "DJANGO_SETTINGS_MODULE": "tests.server_settings",
                "DATABASE_URL": f"sqlite:///{connection.settings_dict['NAME']}",
                "UISTREAM_TEST_SETTINGS": json.dumps(uistream),
                "UISTREAM_DEMO_DELAY_MS": "1",
            }
            with subprocess_server(env) as second:
                yield first, second
        finally:
            here.stop()


def test_another_process_answers_the_approval_from_the_stored_run_state(two_servers: tuple[str, str]) -> None:
    """The run that asked ran here; the answer goes to a process that never
    saw it: all it has is the ``RunState`` stored with the run."""
    first, second = two_servers
    browser = Browser(first)
    with browser.client.stream(
        "POST",
        API,
        json=browser.chat_body("oa-two", "email ada@example.com saying hello"),
        headers={"X-CSRFToken": browser.token},
    ) as response:
        _, done = read_chunks(response)
    assert done
    wait_for(run_finished, "the first run to be stored")
    user, assistant = stored("oa-two")
    (part,) = tool_parts(assistant, "send_email")
    assert part["state"] == "approval-requested"
    answered = {
        **assistant,
        "parts": [
            {**p, "state": "approval-responded", "approval": {**p["approval"], "approved": True}}
            if p.get("toolCallId") == part["toolCallId"]
            else p
            for p in assistant["parts"]
        ],
    }
    other = same_visitor(browser, second)
    with other.stream(
        "POST", API, json={"id": "oa-two", "messages": [user, answered]}, headers={"X-CSRFToken": browser.token}
    ) as response:
        assert response.status_code == 200
        chunks, done = read_chunks(response)
    assert done
    assert not [c for c in chunks if c["type"] == "tool-input-start"]  # not announced again
    wait_for(run_finished, "the continuation to be stored")
    messages = stored("oa-two")
    assert len(messages) == 2
    (done_part,) = tool_parts(messages[1], "send_email")
    assert done_part["state"] == "output-available"
    assert done_part["output"]["status"] == "sent"
    assert "the email to ada@example.com is sent" in text(messages[1])
    assert demo.RAN["send_email"] == 0  # it ran in the other process, not here


# -- the translation, on the SDK itself ------------------------------------------------


async def collect(events: AsyncIterator[ev.Event]) -> list[ev.Event]:
    return [e async for e in events]


def turn(messages: list[Any], **kw: Any) -> AgentTurn:
    return AgentTurn(history=[], messages=messages, chat_id="c", run_id="r", message_id="m", **kw)


def test_text_comes_from_the_raw_events_and_tool_outputs_from_the_run_items() -> None:
    events = asyncio.run(collect(adapter_for(demo.demo_agent).run(turn([UserMessage("weather in Paris")]))))
    kinds = [type(e).__name__ for e in events]
    # The call streams its arguments before the SDK's run item says it was
    # called; its output comes from the run item; text from raw events.
    assert kinds.index("ToolCallStart") < kinds.index("ToolCallDelta") < kinds.index("ToolCall")
    assert kinds.index("ToolCall") < kinds.index("ToolResult") < kinds.index("TextDelta")
    assert kinds.count("ToolCall") == 1  # the run item does not announce it twice
    assert [e for e in events if isinstance(e, ev.StepFinished)] == [ev.StepFinished(0), ev.StepFinished(1)]
    assert [e.reason for e in events if isinstance(e, ev.Finish)] == ["tool-calls", "stop"]
    assert sum(isinstance(e, ev.Usage) for e in events) == 2
    assert events[-1] == ev.Done()
    (result,) = [e for e in events if isinstance(e, ev.ToolResult)]
    assert result.tool_name == "get_weather"
    assert json.loads(result.content)["city"] == "Paris"


def test_a_continuation_on_a_fresh_adapter_resumes_the_saved_state_and_denies_as_denied() -> None:
    """The state saved by the run that asked is all the continuation has:
    it goes through JSON, and a new adapter over a new agent (another
    process) resumes it; the rejected call is ``ToolDenied``, not the SDK's
    rejection text, and is not announced again."""
    ran: list[str] = []

    def build() -> Agent[Any]:
        @function_tool(needs_approval=True)
        def send_email(to: str, body: str) -> str:
            """Send an email."""
            ran.append(to)
            return "sent"

        return Agent(name="mailer", model=demo.ScriptModel(), tools=[send_email])

    saved: list[Any] = []

    async def save(value: Any) -> None:
        saved.append(json.loads(json.dumps(value)))

    first = asyncio.run(
        collect(
            OpenAIAgentsAdapter(build()).run(turn([UserMessage("email bo@example.com saying hi")], save_state=save))
        )
    )
    (call,) = [e for e in first if isinstance(e, ev.ToolCall)]
    (request,) = [e for e in first if isinstance(e, ev.ToolApprovalRequest)]
    assert request.tool_call_id == call.tool_call_id
    assert first[-1] == ev.Done("tool-calls")
    assert saved[0]["pending"] == [call.tool_call_id]

    for approved in (False, True):
        again = OpenAIAgentsAdapter(build())
        decision = {call.tool_call_id: ToolApproval(request.approval_id, approved)}
        events = asyncio.run(collect(again.run(turn([], continues=True, approvals=decision, resume_state=saved[0]))))
        assert not [e for e in events if isinstance(e, (ev.ToolCallStart, ev.ToolCall))]
        if approved:
            assert events[0] == ev.ToolResult(call.tool_call_id, "sent", tool_name="send_email")
        else:
            assert events[0] == ev.ToolDenied(call.tool_call_id)
            assert not any(isinstance(e, ev.ToolResult) for e in events)
        assert events[-1] == ev.Done()
    assert ran == ["bo@example.com"]  # only the approved continuation ran it


def test_a_step_with_a_free_call_and_one_held_for_approval_runs_each_once() -> None:
    """The SDK runs the free call before it stops for the held one; the
    continuation neither runs nor reports the free call again."""

    class Both(demo.ScriptModel):
        def _reply(self, input: Any) -> script.Reply:
            answer = super()._reply(input)
            if not answer.calls:
                return answer
            return script.Reply(
                calls=[("get_weather", {"city": "Oslo"}), ("send_email", {"to": "a@b.c", "body": "hi"})]
            )

    agent: Agent[Any] = Agent(name="both", model=Both(), tools=[demo.get_weather, demo.send_email])
    saved: list[Any] = []

    async def save(value: Any) -> None:
        saved.append(json.loads(json.dumps(value)))

    first = asyncio.run(
        collect(OpenAIAgentsAdapter(agent).run(turn([UserMessage("weather in Oslo")], save_state=save)))
    )
    weather, email = [e for e in first if isinstance(e, ev.ToolCall)]
    assert [e.tool_call_id for e in first if isinstance(e, ev.ToolResult)] == [weather.tool_call_id]
    assert [e.tool_call_id for e in first if isinstance(e, ev.ToolApprovalRequest)] == [email.tool_call_id]
    approvals = {email.tool_call_id: ToolApproval("apv", True)}
    again = OpenAIAgentsAdapter(agent).run(turn([], continues=True, approvals=approvals, resume_state=saved[0]))
    events = asyncio.run(collect(again))
    assert [e.tool_call_id for e in events if isinstance(e, ev.ToolResult)] == [email.tool_call_id]
    assert not [e for e in events if isinstance(e, (ev.ToolCallStart, ev.ToolCall))]
    assert demo.RAN == {"get_weather": 1, "send_email": 1}


def test_a_handoff_is_a_call_with_its_result_and_the_next_agent_speaks_on() -> None:
    class Router(demo.ScriptModel):
        def _reply(self, input: Any) -> script.Reply:
            self.calls += 1
            return script.Reply("The counter agent does this.", calls=[("transfer_to_counter", {})])

    counter_model = demo.ScriptModel()
    counter: Agent[Any] = Agent(name="counter", model=counter_model)
    router: Agent[Any] = Agent(name="router", model=Router(), handoffs=[counter])
    events = asyncio.run(collect(OpenAIAgentsAdapter(router).run(turn([UserMessage("count to 3")]))))
    (call,) = [e for e in events if isinstance(e, ev.ToolCall)]
    assert call.tool_name == "transfer_to_counter"
    (result,) = [e for e in events if isinstance(e, ev.ToolResult)]
    assert (result.tool_call_id, json.loads(result.content)) == (call.tool_call_id, {"assistant": "counter"})
    assert counter_model.calls == 1
    assert events.index(result) < min(i for i, e in enumerate(events) if isinstance(e, ev.TextDelta))
    assert events[-1] == ev.Done()


def test_a_run_whose_answer_is_a_tools_output_ends_as_stopped() -> None:
    agent: Agent[Any] = Agent(
        name="weather", model=demo.ScriptModel(), tools=[demo.get_weather], tool_use_behavior="stop_on_first_tool"
    )
    events = asyncio.run(collect(OpenAIAgentsAdapter(agent).run(turn([UserMessage("weather in Oslo")]))))
    assert [type(e) for e in events[-4:]] == [ev.Finish, ev.ToolResult, ev.StepFinished, ev.Done]
    assert events[-4] == ev.Finish("tool-calls")
    assert events[-1] == ev.Done("stop")


def test_a_tool_that_raised_is_an_error_and_the_run_goes_on() -> None:
    @function_tool
    def get_weather(city: str) -> str:
        """Get the weather."""
        raise RuntimeError("the weather service is down: secret detail")

    agent: Agent[Any] = Agent(name="weather", model=demo.ScriptModel(), tools=[get_weather])
    events = asyncio.run(collect(OpenAIAgentsAdapter(agent).run(turn([UserMessage("weather in Rome")]))))
    (result,) = [e for e in events if isinstance(e, ev.ToolResult)]
    assert result.is_error
    assert "secret detail" not in result.content
    assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)).startswith("The get_weather tool failed")
    assert events[-1] == ev.Done()


def test_history_becomes_responses_input_items() -> None:
    reasoning = ReasoningPart("thinking", {"openai": {"itemId": "rs_1", "reasoningEncryptedContent": "enc"}})
    foreign = ReasoningPart("other", {"anthropic": {"signature": "sig"}})
    items = input_items(
        [
            UserMessage("weather in Oslo"),
            AssistantMessage(
                "Checking.", (ToolCallRequest("call_1", "get_weather", '{"city":"Oslo"}'),), "", (reasoning, foreign)
            ),
            ToolMessage("call_1", '{"city":"Oslo"}', tool_name="get_weather"),
            AssistantMessage("Foggy."),
            UserMessage("thanks"),
        ]
    )
    assert items == [
        {"role": "user", "content": "weather in Oslo"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "thinking"}],
            "encrypted_content": "enc",
        },
        {
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
        },
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Oslo"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": '{"city":"Oslo"}'},
        {
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Foggy.", "annotations": []}],
        },
        {"role": "user", "content": "thanks"},
    ]


def test_closing_the_events_cancels_the_sdk_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "2")
    model = demo.ScriptModel()
    agent: Agent[Any] = Agent(name="counter", model=model)

    async def take_some() -> None:
        stream = OpenAIAgentsAdapter(agent).run(turn([UserMessage("count to 500")]))
        async for event in stream:
            if isinstance(event, ev.TextDelta) and event.text == " 3":
                break
        await stream.aclose()  # what the runner does on stop

    asyncio.run(take_some())
    assert model.cancelled == 1
    assert model.completed == 0


def test_the_adapter_is_found_for_an_agents_sdk_agent() -> None:
    adapter = adapter_for(demo.demo_agent)
    assert isinstance(adapter, OpenAIAgentsAdapter)
    assert adapter.name == "openai-agents:demo"
    assert not OpenAIAgentsAdapter.accepts(object())
