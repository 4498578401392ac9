"""The pydantic-ai adapter: the demo's pydantic-ai chat (a ``pydantic_ai.Agent``
on pydantic-ai's own ``FunctionModel``) through a real server and the real
ai@7 client, and the translation of pydantic-ai's stream for the cases its
own adapter gets wrong or that are easy to get wrong."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from django.test import override_settings
from django.urls import path
from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ThinkingPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaThinkingPart, DeltaToolCall, FunctionModel
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets.external import ExternalToolset

from demo_project.agents import pydantic_ai_agent, script
from tests.adapters.common import drop_then_resume, record_pydantic_ai_calls, stored, text, tool_parts
from tests.protocol.agui_oracles import assert_accepted
from tests.server import serve_demo
from tests.test_agui_http import run_client as run_agui_client
from tests.test_chat_http import Browser, read_chunks, run_finished, text_of, wait_for
from tests.test_chat_real_client import run_client
from tests.urls import urlpatterns as test_urlpatterns
from uistream_app.adapters import AgentTurn, MissingExtra, adapter_for
from uistream_app.adapters.pydantic_ai import PydanticAIAdapter, model_history
from uistream_app.models import Message, Run
from uistream_app.protocol import events as ev
from uistream_app.runs import ToolApproval, ui_to_model_messages
from uistream_app.testing import user_message
from uistream_app.transport import agui_views
from uistream_app.views import ChatView

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/agents/pydantic-ai/chat"
EMAIL = "email ada@example.com saying the build is green"


async def _locate(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
    """Calls the browser's get_location, then says where the user is."""
    returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    if returns:
        yield f"You are in {returns[0].content['city']}."
        return
    yield {1: DeltaToolCall("get_location", "{}")}


#: A pydantic-ai agent whose get_location the browser runs (an ExternalToolset).
locating_agent = Agent(
    FunctionModel(stream_function=_locate),
    toolsets=[
        ExternalToolset(
            [
                ToolDefinition(
                    name="get_location",
                    description="The user's location, from the browser.",
                    parameters_json_schema={"type": "object", "properties": {}},
                )
            ]
        )
    ],
)

urlpatterns = [
    *test_urlpatterns,
    path("test-agents/pydantic-ai/agui", agui_views.AGUIView.as_view(agent=pydantic_ai_agent.agent)),
    path("test-agents/pydantic-ai/client-tools/chat", ChatView.as_view(agent=locating_agent)),
]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    # 10 ms between deltas: "count to 200" streams for two seconds.
    yield from serve_demo(monkeypatch, 10)


@pytest.fixture
def model_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[ModelMessage]]:
    """What the agent's FunctionModel was sent, call by call."""
    return record_pydantic_ai_calls(monkeypatch)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The emails the demo's send_email tool sent."""
    emails: list[tuple[str, str]] = []
    original = script.send_email

    def recording(to: str, body: str) -> dict[str, Any]:
        emails.append((to, body))
        return original(to, body)

    monkeypatch.setattr(script, "send_email", recording)
    return emails


# -- through the real client ------------------------------------------------------


def test_counting_streams_every_number_and_is_stored_as_the_client_built_it(node: str, server: str) -> None:
    browser = Browser(server)
    out = run_client(node, server, browser, api=API, chatId="pai-count", version=7, steps=[{"send": "count to 12"}])
    assert out["error"] is None
    wait_for(run_finished, "the run to be stored")
    messages = stored("pai-count")
    assert out["messages"] == messages
    # "1" is the text part's first content (pydantic-ai's PartStartEvent).
    assert text(messages[1]).split() == [str(n) for n in range(1, 13)]
    assert [p["type"] for p in messages[1]["parts"]] == ["step-start", "reasoning", "text"]
    run = Run.objects.get()
    assert run.model == "pydantic-ai:demo"
    assert run.status == "completed"


def test_the_weather_is_a_tool_call_answered_from_its_output(node: str, server: str) -> None:
    browser = Browser(server)
    out = run_client(
        node, server, browser, api=API, chatId="pai-weather", version=7, steps=[{"send": "weather in Oslo and Lima?"}]
    )
    assert out["error"] is None
    wait_for(run_finished, "the run to be stored")
    messages = stored("pai-weather")
    assert out["messages"] == messages
    calls = tool_parts(messages[1], "get_weather")
    assert [c["input"] for c in calls] == [{"city": "Oslo"}, {"city": "Lima"}]
    assert [c["state"] for c in calls] == ["output-available", "output-available"]
    assert calls[0]["output"] == script.get_weather("Oslo")
    oslo = script.get_weather("Oslo")
    assert f"In Oslo it is {oslo['temperature_c']}°C and {oslo['conditions']}" in text(messages[1])
    # Two steps: the model's calls, then its answer from their outputs.
    assert [p["type"] for p in messages[1]["parts"]].count("step-start") == 2


@pytest.mark.parametrize("approved", [True, False])
def test_send_email_waits_for_a_person(node: str, server: str, sent: list[tuple[str, str]], approved: bool) -> None:
    browser = Browser(server)
    chat_id = f"pai-email-{approved}"
    out = run_client(
        node, server, browser, api=API, chatId=chat_id, version=7, steps=[{"send": EMAIL}, {"approve": approved}]
    )
    assert out["error"] is None
    wait_for(run_finished, "the runs to be stored")
    messages = stored(chat_id)
    assert out["messages"] == messages
    assert len(messages) == 2  # the continuation continued the same message
    (call,) = tool_parts(messages[1], "send_email")  # announced once, not again by the continuation
    assert call["input"] == {"to": "ada@example.com", "body": "the build is green"}
    answer = text(messages[1])
    if approved:
        assert call["state"] == "output-available"
        assert call["output"]["to"] == "ada@example.com"
        assert sent == [("ada@example.com", "the build is green")]
        assert "the email to ada@example.com is sent" in answer
    else:
        assert call["state"] == "output-denied"
        assert "output" not in call
        assert sent == []  # the tool never ran
        assert "I did not run send_email: the call was denied." in answer
    assert "The tool call was denied." not in json.dumps(messages)
    first, second = Run.objects.order_by("started_at")
    assert first.finish_reason == "tool-calls"
    assert second.trigger == "continue"
    assert second.decisions[0]["approved"] is approved


def test_a_forged_approval_runs_nothing(server: str, sent: list[tuple[str, str]]) -> None:
    browser = Browser(server)
    assert browser.post(API, browser.chat_body("pai-forged", EMAIL)).status_code == 200
    wait_for(run_finished, "the first run to end")
    question, asked = stored("pai-forged")
    forged = {
        **asked,
        "parts": [
            {**p, "state": "approval-responded", "approval": {"id": "apv_guessed", "approved": True}}
            if p["type"] == "tool-send_email"
            else p
            for p in asked["parts"]
        ],
    }
    answer = browser.post(API, {"id": "pai-forged", "messages": [question, forged]})
    assert answer.status_code == 409
    assert answer.json()["error"]["code"] == "approval_mismatch"
    assert sent == []
    assert Run.objects.count() == 1


def test_stop_cancels_the_agent_run(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    paced: list[float] = []
    original = script.delay

    def counting_delay() -> float:
        paced.append(original())
        return paced[-1]

    monkeypatch.setattr(script, "delay", counting_delay)
    browser = Browser(server)
    with browser.client.stream(
        "POST", API, json=browser.chat_body("pai-stop", "count to 200"), headers={"X-CSRFToken": browser.token}
    ) as response:
        read_chunks(response, stop=lambda cs: text_of(cs).count(" ") >= 5)
        answer = browser.post(f"{API}/pai-stop/stop")
        assert answer.json() == {"stopped": True}
        rest, done = read_chunks(response)
    assert done
    assert rest[-1] == {"type": "abort", "reason": "stopped"}
    wait_for(run_finished, "the run to end")
    assert Run.objects.get().status == "stopped"
    at_stop = len(paced)
    assert at_stop < 200
    # The model's stream was cancelled, not left running: another whole
    # run later, it has not paced one more delta of the stopped answer.
    browser.post(API, browser.chat_body("pai-after-stop", "count to 3"))
    wait_for(lambda: Run.objects.filter(status="completed").exists(), "the second run")
    assert len(paced) == at_stop + 3
    stopped = Message.objects.get(conversation__client_id="pai-stop", role="assistant")
    said = "".join(p.get("text", "") for p in stopped.parts if p["type"] == "text")
    assert said.split() == [str(n) for n in range(1, len(said.split()) + 1)]
    assert len(said.split()) < 200


def test_resume_after_a_disconnect_ends_the_message(server: str) -> None:
    # The connection is gone; the run goes on (ON_DISCONNECT "finish").
    head, replay, done = drop_then_resume(Browser(server), API, "pai-resume", "count to 120")
    assert done
    assert replay[: len(head)] == head  # the replay starts with what the POST had sent
    assert replay[-1]["type"] == "finish"
    assert text_of(replay).split() == [str(n) for n in range(1, 121)]
    wait_for(run_finished, "the run to end")
    (answer,) = [m for m in stored("pai-resume") if m["role"] == "assistant"]
    assert text(answer) == text_of(replay)


def test_turn_two_sees_turn_ones_tool_result(node: str, server: str, model_calls: list[list[ModelMessage]]) -> None:
    browser = Browser(server)
    out = run_client(
        node,
        server,
        browser,
        api=API,
        chatId="pai-history",
        version=7,
        steps=[{"send": "weather in Oslo?"}, {"send": "count to 2"}],
    )
    assert out["error"] is None
    wait_for(run_finished, "the runs to be stored")
    assert out["messages"] == stored("pai-history")
    first_call_id = tool_parts(stored("pai-history")[1], "get_weather")[0]["toolCallId"]
    last = model_calls[-1]  # turn 2's model call
    returns = [p for m in last if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]
    assert [(r.tool_name, r.tool_call_id, r.content) for r in returns] == [
        ("get_weather", first_call_id, script.get_weather("Oslo"))
    ]
    responses = [m for m in last if isinstance(m, ModelResponse)]
    assert [p.tool_call_id for p in responses[0].parts if p.part_kind == "tool-call"] == [first_call_id]
    assert "In Oslo it is" in "".join(p.content for p in responses[1].parts if p.part_kind == "text")


def test_ag_ui_from_an_adapter_run_is_accepted_by_the_ag_ui_client(node: str, server: str) -> None:
    browser = Browser(server)
    with override_settings(ROOT_URLCONF=__name__):
        out = run_agui_client(
            node,
            browser,
            f"{server}/test-agents/pydantic-ai/agui",
            "pai-agui",
            [{"text": "weather in Paris?", "messageId": "u1", "runId": "run-1"}],
        )
    (run,) = out["runs"]
    events = assert_accepted(run["events"])
    calls = [e for e in events if e["type"] == "TOOL_CALL_START"]
    assert [c["toolCallName"] for c in calls] == ["get_weather"]
    said = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert "In Paris it is" in said
    wait_for(run_finished, "the run to be stored")


def test_an_ag_ui_interrupt_answers_the_deferred_call(node: str, server: str, sent: list[tuple[str, str]]) -> None:
    browser = Browser(server)
    with override_settings(ROOT_URLCONF=__name__):
        out = run_agui_client(
            node,
            browser,
            f"{server}/test-agents/pydantic-ai/agui",
            "pai-agui-hitl",
            [
                {"text": EMAIL, "messageId": "u1", "runId": "run-a"},
                {"answers": [{"approved": True}], "runId": "run-b"},
            ],
        )
    first, second = out["runs"]
    assert_accepted(first["events"])
    assert_accepted(second["events"])
    assert first["finished"]["outcome"] == "interrupt"
    (interrupt,) = first["finished"]["interrupts"]
    assert second["finished"]["outcome"] == "success"
    results = [e for e in second["events"] if e["type"] == "TOOL_CALL_RESULT"]
    assert [e["toolCallId"] for e in results] == [interrupt["toolCallId"]]
    # The continuation did not announce the call again.
    assert not [e for e in second["events"] if e["type"] == "TOOL_CALL_START"]
    assert sent == [("ada@example.com", "the build is green")]
    wait_for(run_finished, "the runs to be stored")


def test_an_external_tool_is_run_by_the_browser(node: str, server: str) -> None:
    browser = Browser(server)
    with override_settings(ROOT_URLCONF=__name__):
        out = run_client(
            node,
            server,
            browser,
            chatId="pai-client-tool",
            version=7,
            api="/test-agents/pydantic-ai/client-tools/chat",
            clientTools={"get_location": {"city": "Lima"}},
            steps=[{"send": "where am I?"}, {"waitFinished": 2}],
        )
    assert out["error"] is None
    wait_for(run_finished, "the runs to be stored")
    messages = stored("pai-client-tool")
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert out["messages"] == messages
    (tool,) = tool_parts(messages[1], "get_location")
    assert tool["state"] == "output-available"
    assert tool["output"] == {"city": "Lima"}
    assert text(messages[1]) == "You are in Lima."


# -- the translation, without a server ---------------------------------------------


def turn(history: list[dict[str, Any]], **kw: Any) -> AgentTurn:
    return AgentTurn(
        history=history, messages=ui_to_model_messages(history), chat_id="c", run_id="r", message_id="m", **kw
    )


async def collect(adapter: PydanticAIAdapter, agent_turn: AgentTurn) -> list[ev.Event]:
    return [event async for event in adapter.run(agent_turn)]


def test_a_continuation_settles_the_deferred_call_without_announcing_it_again(
    sent: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "0")
    first = asyncio.run(collect(PydanticAIAdapter(pydantic_ai_agent.agent), turn([user_message(EMAIL)])))
    (call,) = [e for e in first if isinstance(e, ev.ToolCall)]
    (request,) = [e for e in first if isinstance(e, ev.ToolApprovalRequest)]
    assert request.tool_call_id == call.tool_call_id
    assert request.approval_id.startswith("apv_")
    assert sent == []
    asked = {
        "id": "a1",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {
                "type": "tool-send_email",
                "toolCallId": call.tool_call_id,
                "state": "approval-responded",
                "input": json.loads(call.input),
                "approval": {"id": request.approval_id, "approved": False, "reason": "not now"},
            },
        ],
    }
    # A fresh adapter, as another process would have: nothing but the stored history.
    again = adapter_for(pydantic_ai_agent.agent)
    assert isinstance(again, PydanticAIAdapter)
    decisions = {call.tool_call_id: ToolApproval(request.approval_id, False, "not now")}
    second = asyncio.run(collect(again, turn([user_message(EMAIL), asked], continues=True, approvals=decisions)))
    assert not [e for e in second if isinstance(e, ev.ToolCallStart | ev.ToolCall)]
    assert second[0] == ev.ToolDenied(call.tool_call_id)
    assert not [e for e in second if isinstance(e, ev.ToolResult)]
    assert sent == []


class City(BaseModel):
    name: str


def scripted_agent(*responses: list[Any]) -> Agent[None, str]:
    """An agent whose FunctionModel streams ``responses`` in turn."""
    queue = list(responses)

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        for item in queue.pop(0):
            yield item

    return Agent(FunctionModel(stream_function=stream))


def test_arguments_that_fail_validation_are_a_tool_input_error() -> None:
    agent = scripted_agent([{1: DeltaToolCall("add", '{"a": "not a number"', tool_call_id="c1")}], ["gave up"])

    @agent.tool_plain
    def add(a: int) -> int:
        return a + 1

    events = asyncio.run(collect(PydanticAIAdapter(agent), turn([user_message("add")])))
    (error,) = [e for e in events if isinstance(e, ev.ToolInputError)]
    assert error.tool_call_id == "c1"
    assert error.tool_name == "add"
    assert not [e for e in events if isinstance(e, ev.ToolCall | ev.ToolResult)]
    assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)) == "gave up"


def test_a_model_retry_is_a_tool_error_the_model_answers() -> None:
    agent = scripted_agent([{1: DeltaToolCall("lookup", '{"key": "x"}', tool_call_id="c1")}], ["sorry"])

    @agent.tool_plain
    def lookup(key: str) -> str:
        raise ModelRetry(f"no entry named {key}")

    events = asyncio.run(collect(PydanticAIAdapter(agent), turn([user_message("look it up")])))
    assert ev.ToolCall("c1", "lookup", '{"key": "x"}') in events
    (result,) = [e for e in events if isinstance(e, ev.ToolResult)]
    assert result.is_error
    assert result.content == "no entry named x"
    assert events[-1] == ev.Done()


def test_stored_history_becomes_pydantic_ai_messages_with_the_call_ids_kept() -> None:
    history = [
        user_message("weather and mail"),
        {
            "id": "a1",
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {"type": "reasoning", "text": "two tools", "state": "done"},
                {"type": "text", "text": "On it.", "state": "done"},
                {
                    "type": "tool-get_weather",
                    "toolCallId": "w1",
                    "state": "output-available",
                    "input": {"city": "Oslo"},
                    "output": {"city": "Oslo", "temperature_c": 3},
                },
                {"type": "tool-send_email", "toolCallId": "e1", "state": "output-denied", "input": {"to": "a@b.c"}},
                {"type": "tool-fail", "toolCallId": "f1", "state": "output-error", "input": {}, "errorText": "boom"},
                {"type": "step-start"},
                {"type": "text", "text": "Done.", "state": "done"},
            ],
        },
        user_message("and now?"),
    ]
    messages, prompt = model_history(turn(history))
    assert prompt == "and now?"
    request, response, results, answer = messages
    assert isinstance(request, ModelRequest)
    assert request.parts[0].content == "weather and mail"
    assert isinstance(response, ModelResponse)
    assert [p.part_kind for p in response.parts] == ["thinking", "text", "tool-call", "tool-call", "tool-call"]
    assert [p.tool_call_id for p in response.parts if p.part_kind == "tool-call"] == ["w1", "e1", "f1"]
    assert isinstance(results, ModelRequest)
    assert [(p.tool_call_id, p.outcome) for p in results.parts] == [
        ("w1", "success"),
        ("e1", "denied"),
        ("f1", "failed"),
    ]
    assert results.parts[0].content == {"city": "Oslo", "temperature_c": 3}
    assert isinstance(answer, ModelResponse)
    assert answer.parts[0].content == "Done."


def test_a_thinking_signature_goes_out_with_the_reasoning_and_comes_back_with_the_history() -> None:
    agent = scripted_agent([{0: DeltaThinkingPart(content="hmm", signature="sig-1")}, "Hello."])
    events = asyncio.run(collect(PydanticAIAdapter(agent), turn([user_message("hi")])))
    (end,) = [e for e in events if isinstance(e, ev.ReasoningEnd)]
    assert end.provider_metadata is not None
    assert end.provider_metadata["pydanticAI"]["signature"] == "sig-1"
    history = [
        user_message("hi"),
        {
            "id": "a1",
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {"type": "reasoning", "text": "hmm", "state": "done", "providerMetadata": end.provider_metadata},
                {"type": "text", "text": "Hello.", "state": "done"},
            ],
        },
        user_message("again"),
    ]
    messages, _ = model_history(turn(history))
    thinking = messages[1].parts[0]
    assert isinstance(thinking, ThinkingPart)
    assert (thinking.content, thinking.signature) == ("hmm", "sig-1")


def test_structured_output_is_the_output_tools_call_and_the_message_stops() -> None:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        yield {1: DeltaToolCall(info.output_tools[0].name, '{"name": "Oslo"}', tool_call_id="out1")}

    agent = Agent(FunctionModel(stream_function=stream), output_type=City)
    events = asyncio.run(collect(PydanticAIAdapter(agent), turn([user_message("which city?")])))
    assert ev.ToolCall("out1", "final_result", '{"name": "Oslo"}') in events
    assert [e.tool_call_id for e in events if isinstance(e, ev.ToolResult)] == ["out1"]
    assert events[-1] == ev.Done("stop")


def test_without_pydantic_ai_the_adapter_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)  # what an uninstalled package looks like
    monkeypatch.delitem(sys.modules, "uistream_app.adapters.pydantic_ai")
    with pytest.raises(MissingExtra, match=r"pip install 'django-uistream\[pydantic-ai\]'"):
        importlib.import_module("uistream_app.adapters.pydantic_ai")


def test_closing_the_run_closes_the_model_stream() -> None:
    said: list[int] = []
    closed: list[bool] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        try:
            for n in range(1, 1000):
                said.append(n)
                yield f" {n}"
                await asyncio.sleep(0)
        finally:
            closed.append(True)

    agent = Agent(FunctionModel(stream_function=stream))

    async def take_three_then_close() -> None:
        run = PydanticAIAdapter(agent).run(turn([user_message("count")]))
        deltas = 0
        async for event in run:
            deltas += isinstance(event, ev.TextDelta)
            if deltas == 3:
                break
        await run.aclose()  # type: ignore[attr-defined]

    asyncio.run(take_three_then_close())
    assert closed == [True]
    assert len(said) < 10
