"""The LangGraph adapter: the demo's graph (a ``StateGraph`` with LangGraph's
``ToolNode``, on an offline LangChain chat model) behind the chat view,
through a real server and the real ai@7 client, and the translation of
LangGraph's stream, interrupts and checkpoints on their own.

The module is also a URLconf (the project's URLs plus an ``AGUIView`` of
the same graph) for the AG-UI test.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.test import override_settings
from django.urls import path
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Interrupt

from demo_project.agents import langgraph_agent as demo
from uistream_app.adapters import AgentTurn, adapter_for
from uistream_app.adapters.langgraph import (
    LangGraphAdapter,
    _Translator,
    map_interrupts,
    resume_values,
    to_langchain_messages,
)
from uistream_app.models import Run
from uistream_app.protocol import events as ev
from uistream_app.protocol.agui.messages import agui_user_message, ui_messages_to_agui
from uistream_app.recording import read_log
from uistream_app.runs import ToolApproval
from uistream_app.runs.ui_messages import ui_to_model_messages
from uistream_app.views import AGUIView

from ..protocol.agui_oracles import assert_accepted
from ..server import demo_server, serve_demo, shared_database_url
from ..test_agui_http import run_client as run_agui_client
from ..test_chat_http import Browser, read_chunks, run_finished, text_of, wait_for
from ..test_chat_real_client import run_client
from ..urls import urlpatterns as test_urlpatterns
from .common import drop_then_resume, stored, text, tool_parts

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/agents/langgraph/chat"

urlpatterns = [*test_urlpatterns, path("test-langgraph/agui", AGUIView.as_view(agent=demo.graph))]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with override_settings(ROOT_URLCONF=__name__):
        yield from serve_demo(monkeypatch, 5)


@pytest.fixture(autouse=True)
def fresh_demo() -> None:
    demo.SEEN.clear()
    demo.SENT.clear()
    demo.ASKED[0] = 0


# -- through the server and the real client -------------------------------------------


@pytest.mark.node
def test_the_three_phrases_are_streamed_and_stored_as_the_client_built_them(node: str, server: str) -> None:
    browser = Browser(server)
    out = run_client(
        node,
        server,
        browser,
        api=API,
        chatId="lg-phrases",
        version=7,
        steps=[{"send": "count to 7"}, {"send": "What's the weather in Paris?"}],
    )
    assert out["error"] is None
    wait_for(run_finished, "the runs to be stored")
    messages = stored("lg-phrases")
    assert out["messages"] == messages
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert text(messages[1]).split() == [str(n) for n in range(1, 8)]
    # The model's reasoning blocks became reasoning parts.
    assert any(p["type"] == "reasoning" and "count to 7" in p["text"] for p in messages[1]["parts"])
    (weather,) = tool_parts(messages[3], "get_weather")
    assert weather["state"] == "output-available"
    assert weather["input"] == {"city": "Paris"}
    assert weather["output"]["city"] == "Paris"
    assert "Paris" in text(messages[3])
    # One step per model call: the call, then the answer from its output.
    assert [p["type"] for p in messages[3]["parts"]].count("step-start") == 2
    first, second = Run.objects.order_by("started_at")
    assert first.model == "langgraph:demo-langgraph"
    assert second.status == "completed"
    # The model's usage_metadata and finish reasons, totalled over its two calls.
    assert second.usage["input_tokens"] == 24
    assert second.finish_reason == "stop"
    # The streamed arguments arrived in pieces (id and name on the first only).
    deltas = [c for c in (e.chunk for e in read_log(second)) if c["type"] == "tool-input-delta"]
    assert "".join(d["inputTextDelta"] for d in deltas) == '{"city": "Paris"}'
    assert len(deltas) == 2


@pytest.mark.node
@pytest.mark.parametrize("approved", [True, False])
def test_send_email_waits_for_a_person_and_runs_once_or_never(node: str, server: str, approved: bool) -> None:
    browser = Browser(server)
    chat_id = f"lg-email-{approved}"
    out = run_client(
        node,
        server,
        browser,
        api=API,
        chatId=chat_id,
        version=7,
        steps=[{"send": "email ada@example.com saying hello there"}, {"approve": approved}],
    )
    assert out["error"] is None
    wait_for(run_finished, "the runs to be stored")
    messages = stored(chat_id)
    assert out["messages"] == messages
    # Announced once: the continuation did not stream the call again.
    (part,) = tool_parts(messages[1], "send_email")
    assert part["input"] == {"to": "ada@example.com", "body": "hello there"}
    first, second = Run.objects.order_by("started_at")
    assert second.trigger == "continue"
    assert not [c for c in (e.chunk for e in read_log(second)) if c["type"].startswith("tool-input")]
    # LangGraph ran the tool from its start again on resume; it sent once.
    assert demo.ASKED[0] == 2
    if approved:
        assert part["state"] == "output-available"
        assert part["output"]["status"] == "sent"
        assert list(demo.SENT) == [{"to": "ada@example.com", "body": "hello there"}]
        assert "the email to ada@example.com is sent" in text(messages[1])
    else:
        assert part["state"] == "output-denied"
        assert list(demo.SENT) == []
        assert "denied" in text(messages[1])
    # The checkpoint and which interrupt asks about which call, with the run.
    state = first.agent_state
    assert state["interrupts"][0]["calls"] == [part["toolCallId"]]
    assert state["checkpoint"]["storage"]


def test_a_stop_cancels_the_graph_run(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "20")
    browser = Browser(server)
    with browser.client.stream(
        "POST", API, json=browser.chat_body("lg-stop", "count to 200"), headers={"X-CSRFToken": browser.token}
    ) as response:
        read_chunks(response, stop=lambda cs: text_of(cs).count(" ") >= 5)
        assert browser.post("/api/agents/langgraph/chat/lg-stop/stop").json() == {"stopped": True}
        rest, done = read_chunks(response)
    assert done
    assert rest[-1] == {"type": "abort", "reason": "stopped"}
    wait_for(run_finished, "the run to end")
    run = Run.objects.get()
    assert run.status == "stopped"
    said = text(stored("lg-stop")[1]).split()
    assert 5 < len(said) < 200
    # No more model work after the stop: a whole later answer adds only its
    # own deltas (a graph left running would add its own meanwhile).
    before = demo.DELTAS[0]
    out = browser.post(API, browser.chat_body("lg-after-stop", "count to 30"))
    assert out.status_code == 200
    wait_for(run_finished, "the second run")
    assert demo.DELTAS[0] - before == 31  # its reasoning and 30 numbers


def test_resume_after_a_disconnect_replays_and_follows_to_the_end(server: str) -> None:
    browser = Browser(server)
    with override_settings(UISTREAM={"ALLOW_ANONYMOUS": True, "ON_DISCONNECT": "finish"}):
        head, replay, done = drop_then_resume(browser, API, "lg-resume", "count to 120", words=10)
    assert done
    assert replay[: len(head)] == head
    assert text_of(replay).split() == [str(n) for n in range(1, 121)]
    wait_for(run_finished, "the run to be stored")
    assert Run.objects.get().status == "completed"
    assert text(stored("lg-resume")[1]).split() == [str(n) for n in range(1, 121)]


@pytest.mark.node
def test_turn_two_sees_turn_ones_tool_call_and_result(node: str, server: str) -> None:
    browser = Browser(server)
    out = run_client(
        node,
        server,
        browser,
        api=API,
        chatId="lg-history",
        version=7,
        steps=[{"send": "weather in Lima"}, {"send": "count to 3"}],
    )
    assert out["error"] is None
    seen = demo.SEEN[-1]
    assert [type(m).__name__ for m in seen] == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage", "HumanMessage"]
    _, call, result, answer, _ = seen
    assert isinstance(call, AIMessage)
    assert isinstance(result, ToolMessage)
    assert [(c["name"], c["args"]) for c in call.tool_calls] == [("get_weather", {"city": "Lima"})]
    assert result.tool_call_id == call.tool_calls[0]["id"]
    assert json.loads(str(result.content))["city"] == "Lima"
    # Reasoning went back as LangChain reasoning blocks.
    assert isinstance(answer.content, list)
    assert answer.content[0]["type"] == "reasoning"
    assert "Lima" in answer.content[1]["text"]


def test_the_approval_is_answered_by_another_process(server: str) -> None:
    """The first run on a daphne process that is gone afterwards; the
    approval on this one: what resumes the graph is what the run stored."""
    env = {
        "DJANGO_SETTINGS_MODULE": "tests.server_settings",
        "DATABASE_URL": shared_database_url(),
        "UISTREAM_TEST_SETTINGS": json.dumps({"ALLOW_ANONYMOUS": True, "BROKER": {"BACKEND": "memory"}}),
        "UISTREAM_DEMO_DELAY_MS": "0",
    }
    browser = Browser(server)
    cookie = "; ".join(f"{k}={v}" for k, v in browser.client.cookies.items())
    with demo_server("daphne", env) as other:
        first = httpx.post(
            other.url + API,
            json=browser.chat_body("lg-processes", "email bo@example.com saying see you"),
            headers={"X-CSRFToken": browser.token, "Cookie": cookie},
            timeout=30,
        )
        assert first.status_code == 200
        # The session the other process started for this visitor.
        browser.client.cookies.update(first.cookies)
        wait_for(run_finished, "the first run to be stored")
    assert demo.ASKED[0] == 0  # not this process
    user, assistant = stored("lg-processes")
    (part,) = tool_parts(assistant, "send_email")
    assert part["state"] == "approval-requested"
    answered = {
        **assistant,
        "parts": [
            {**p, "state": "approval-responded", "approval": {**p["approval"], "approved": True}}
            if p["type"] == "tool-send_email"
            else p
            for p in assistant["parts"]
        ],
    }
    with browser.client.stream(
        "POST", API, json={"id": "lg-processes", "messages": [user, answered]}, headers={"X-CSRFToken": browser.token}
    ) as response:
        assert response.status_code == 200
        chunks, done = read_chunks(response)
    assert done
    assert "the email to bo@example.com is sent" in text_of(chunks)
    wait_for(run_finished, "the continuation to be stored")
    assert list(demo.SENT) == [{"to": "bo@example.com", "body": "see you"}]
    assert demo.ASKED[0] == 1  # the resumed tool, from its start
    (part,) = tool_parts(stored("lg-processes")[1], "send_email")
    assert part["state"] == "output-available"


@pytest.mark.node
def test_ag_ui_from_the_graph_is_accepted_by_the_real_client(node: str, server: str) -> None:
    browser = Browser(server)
    out = run_agui_client(
        node,
        browser,
        f"{server}/test-langgraph/agui",
        "lg-agui",
        [
            {"text": "What's the weather in Oslo?", "messageId": "u1", "runId": "run-a"},
            {"text": "email cy@example.com saying hi", "messageId": "u2", "runId": "run-b"},
            {"answers": [{"approved": True}], "runId": "run-c"},
        ],
    )
    for run in out["runs"]:
        assert run["error"] is None
        assert run["runError"] is None
        assert run["warnings"] == []
        assert_accepted(run["events"])
    assert out["runs"][1]["pendingInterrupts"]
    wait_for(run_finished, "the runs to be stored")
    messages = stored("lg-agui")
    expected = [
        m
        for message in messages
        for m in (ui_messages_to_agui([message]) if message["role"] == "assistant" else [agui_user_message(message)])
    ]
    assert out["messages"] == expected
    assert list(demo.SENT) == [{"to": "cy@example.com", "body": "hi"}]
    assert "Oslo" in text(messages[1])


# -- the translation on its own -------------------------------------------------------------


def events_of(translator: _Translator, items: list[Any]) -> list[ev.Event]:
    out: list[ev.Event] = []
    for item in items:
        out.extend(translator.message(item))
    out.extend(translator.end())
    return out


def test_tool_call_chunks_are_followed_by_index_when_id_and_name_come_once() -> None:
    chunks = [
        AIMessageChunk(id="m1", content="", tool_call_chunks=[{"id": "a", "name": "f", "args": '{"x"', "index": 0}]),
        AIMessageChunk(id="m1", content="", tool_call_chunks=[{"id": "b", "name": "g", "args": "{", "index": 1}]),
        AIMessageChunk(id="m1", content="", tool_call_chunks=[{"id": None, "name": None, "args": ": 1}", "index": 0}]),
        AIMessageChunk(id="m1", content="", tool_call_chunks=[{"id": None, "name": None, "args": "}", "index": 1}]),
        AIMessageChunk(
            id="m1",
            content="",
            usage_metadata={
                "input_tokens": 5,
                "output_tokens": 7,
                "total_tokens": 12,
                "output_token_details": {"reasoning": 3},
            },
            response_metadata={"finish_reason": "tool_calls"},
        ),
    ]
    assert events_of(_Translator({}, set()), chunks) == [
        ev.ToolCallStart("a", "f"),
        ev.ToolCallDelta("a", '{"x"'),
        ev.ToolCallStart("b", "g"),
        ev.ToolCallDelta("b", "{"),
        ev.ToolCallDelta("a", ": 1}"),
        ev.ToolCallDelta("b", "}"),
        ev.ToolCall("a", "f", '{"x": 1}'),
        ev.ToolCall("b", "g", "{}"),
        ev.Usage(input_tokens=5, output_tokens=7, reasoning_tokens=3),
        ev.Finish("tool-calls"),
    ]


def test_content_blocks_strings_and_thinking_become_text_and_reasoning() -> None:
    chunks = [
        AIMessageChunk(id="m1", content=[{"type": "thinking", "thinking": "Hmm.", "index": 0}]),
        AIMessageChunk(id="m1", content=[{"type": "text", "text": "Hel", "index": 1}]),
        AIMessageChunk(id="m1", content="lo", response_metadata={"stop_reason": "end_turn"}),
    ]
    assert events_of(_Translator({}, set()), chunks) == [
        ev.ReasoningDelta("Hmm."),
        ev.ReasoningEnd(),
        ev.TextDelta("Hel"),
        ev.TextDelta("lo"),
        ev.TextEnd(),
        ev.Finish("stop"),
    ]


def test_a_model_that_does_not_stream_and_the_tools_answers() -> None:
    whole = AIMessage(
        id="m1",
        content="Checking.",
        tool_calls=[{"id": "c1", "name": "lookup", "args": {"q": "x"}}, {"id": "c2", "name": "fail", "args": {}}],
        usage_metadata={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
    )
    translator = _Translator({}, set())
    events = events_of(
        translator,
        [
            whole,
            ToolMessage("found", tool_call_id="c1", name="lookup"),
            ToolMessage("boom", tool_call_id="c2", name="fail", status="error"),
            AIMessage(id="m2", content="Done."),
        ],
    )
    assert events == [
        ev.TextDelta("Checking."),
        ev.TextEnd(),
        ev.ToolCallStart("c1", "lookup"),
        ev.ToolCallDelta("c1", '{"q": "x"}'),
        ev.ToolCallStart("c2", "fail"),
        ev.ToolCallDelta("c2", "{}"),
        ev.ToolCall("c1", "lookup", '{"q": "x"}'),
        ev.ToolCall("c2", "fail", "{}"),
        ev.Usage(input_tokens=3, output_tokens=4),
        ev.Finish("tool-calls"),
        ev.ToolResult("c1", "found", tool_name="lookup"),
        ev.ToolResult("c2", "boom", is_error=True, tool_name="fail"),
        ev.StepFinished(0),
        ev.TextDelta("Done."),
        ev.TextEnd(),
        ev.Finish("stop"),
    ]


def test_calls_the_chunks_did_not_name_come_from_the_nodes_whole_message() -> None:
    translator = _Translator({}, set())
    events = translator.message(AIMessageChunk(id="m1", content="On it."))
    events += translator.message(
        AIMessageChunk(id="m1", content="", tool_call_chunks=[{"id": None, "name": None, "args": "{", "index": None}])
    )
    whole = AIMessage(id="m1", content="On it.", tool_calls=[{"id": "c9", "name": "lookup", "args": {"q": 1}}])
    events += translator.update({"model": {"messages": [whole]}})
    # A result for a call this message does not have has no part to go to.
    events += translator.message(ToolMessage("old", tool_call_id="elsewhere", name="lookup"))
    events += translator.message(ToolMessage("new", tool_call_id="c9", name="lookup"))
    assert events == [
        ev.TextDelta("On it."),
        ev.TextEnd(),
        ev.ToolCallStart("c9", "lookup"),
        ev.ToolCallDelta("c9", '{"q": 1}'),
        ev.ToolCall("c9", "lookup", '{"q": 1}'),
        ev.Finish("tool-calls"),
        ev.ToolResult("c9", "new", tool_name="lookup"),
    ]


def test_a_continuation_does_not_announce_the_pending_call_and_a_denial_is_denied() -> None:
    translator = _Translator({"c1": ("send_email", {"to": "a"})}, {"c1"})
    events = events_of(
        translator, [ToolMessage("The tool call was denied.", tool_call_id="c1", name="send_email", status="error")]
    )
    assert events == [ev.ToolDenied("c1")]


def test_interrupts_map_to_the_pending_calls() -> None:
    pending = {"c1": ("send_email", {"to": "a"}), "c2": ("send_email", {"to": "b"}), "c3": ("delete", {})}
    mapping = map_interrupts(
        [
            Interrupt({"tool_call_id": "c3"}, id="i1"),
            Interrupt({"action": "send_email", "args": {"to": "b"}}, id="i2"),
            Interrupt({"action_requests": [{"name": "send_email", "args": {"to": "a"}}]}, id="i3"),
        ],
        pending,
    )
    assert mapping == [
        {"id": "i1", "kind": "call", "calls": ["c3"]},
        {"id": "i2", "kind": "call", "calls": ["c2"]},
        {"id": "i3", "kind": "hitl", "calls": ["c1"]},
    ]
    approvals = {
        "c1": ToolApproval("x", False, "not now"),
        "c2": ToolApproval("y", True),
        "c3": ToolApproval("z", True),
    }
    assert resume_values(mapping, approvals) == {
        "i1": {"approved": True, "reason": None},
        "i2": {"approved": True, "reason": None},
        "i3": {"decisions": [{"type": "reject", "message": "not now"}]},
    }
    # One question, one pending call: that call, whatever the payload.
    assert map_interrupts([Interrupt("Sure?", id="i9")], {"c1": ("x", {})}) == [
        {"id": "i9", "kind": "call", "calls": ["c1"]}
    ]
    with pytest.raises(RuntimeError, match="name no pending tool call"):
        map_interrupts([Interrupt("Sure?", id="i9")], pending)


def test_stored_history_becomes_langchain_messages() -> None:
    history = [
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "weather?"}]},
        {
            "id": "a",
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {"type": "reasoning", "text": "Look it up.", "state": "done"},
                {
                    "type": "tool-get_weather",
                    "toolCallId": "c1",
                    "state": "output-available",
                    "input": {"city": "Rome"},
                    "output": {"t": 20},
                },
                {
                    "type": "tool-send_email",
                    "toolCallId": "c2",
                    "state": "output-denied",
                    "input": {"to": "x"},
                    "approval": {"id": "a1", "approved": False},
                },
                {"type": "step-start"},
                {"type": "text", "text": "20 degrees.", "state": "done"},
            ],
        },
    ]
    messages = to_langchain_messages(ui_to_model_messages(history))
    human, call, result, denied, answer = messages
    assert isinstance(human, HumanMessage)
    assert call.content == [{"type": "reasoning", "reasoning": "Look it up."}]
    assert [(c["id"], c["args"]) for c in call.tool_calls] == [("c1", {"city": "Rome"}), ("c2", {"to": "x"})]
    assert (result.tool_call_id, json.loads(result.content), result.status) == ("c1", {"t": 20}, "success")
    assert (denied.tool_call_id, denied.status) == ("c2", "error")
    assert answer.content == "20 degrees."


# -- state ----------------------------------------------------------------------------------------


def turn(**kw: Any) -> AgentTurn:
    return AgentTurn(**{"history": [], "messages": [], "chat_id": "c", "run_id": "r", "message_id": "m", **kw})


async def collect(adapter: LangGraphAdapter, t: AgentTurn) -> list[ev.Event]:
    return [e async for e in adapter.run(t)]


def test_the_saved_checkpoint_resumes_in_a_fresh_adapter_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "0")
    saved: list[Any] = []

    async def save(state: Any) -> None:
        saved.append(json.loads(json.dumps(state)))

    from uistream_app.runs.messages import UserMessage

    first = asyncio.run(
        collect(
            LangGraphAdapter(demo.build_graph()), turn(messages=[UserMessage("email d@e.f saying yo")], save_state=save)
        )
    )
    (request,) = [e for e in first if isinstance(e, ev.ToolApprovalRequest)]
    assert first[-1] == ev.Done("tool-calls")
    call = next(e for e in first if isinstance(e, ev.ToolCall))
    history = [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool-send_email",
                    "toolCallId": call.tool_call_id,
                    "state": "approval-responded",
                    "input": json.loads(call.input),
                }
            ],
        }
    ]
    again = asyncio.run(
        collect(
            LangGraphAdapter(demo.build_graph()),
            turn(
                history=history,
                continues=True,
                approvals={call.tool_call_id: ToolApproval(request.approval_id, True)},
                resume_state=saved[0],
            ),
        )
    )
    assert isinstance(again[0], ev.ToolResult)
    assert again[0].tool_call_id == call.tool_call_id
    assert list(demo.SENT) == [{"to": "d@e.f", "body": "yo"}]
    assert not [e for e in again if isinstance(e, ev.ToolCallStart | ev.ToolCall)]


def test_a_graph_with_its_own_checkpointer_keeps_its_thread_without_duplicates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "0")
    from uistream_app.runs.messages import AssistantMessage, UserMessage

    theirs = InMemorySaver()
    graph = demo.build_graph().copy(update={"checkpointer": theirs})
    saved: list[Any] = []

    async def save(state: Any) -> None:
        saved.append(state)

    adapter = adapter_for(graph)
    assert isinstance(adapter, LangGraphAdapter)
    asyncio.run(collect(adapter, turn(messages=[UserMessage("count to 2")], chat_id="mine")))
    history = [UserMessage("count to 2"), AssistantMessage("1 2"), UserMessage("email g@h.i saying x")]
    events = asyncio.run(collect(adapter, turn(messages=history, chat_id="mine", save_state=save)))
    assert any(isinstance(e, ev.ToolApprovalRequest) for e in events)
    # The thread is the chat's, holding the stored conversation once.
    state = graph.get_state({"configurable": {"thread_id": "mine"}})
    kinds = [type(m).__name__ for m in state.values["messages"]]
    assert kinds == ["HumanMessage", "AIMessage", "HumanMessage", "AIMessage"]
    # Only what maps the interrupt is stored with the run: the checkpoint is theirs.
    assert "checkpoint" not in saved[0]
    assert saved[0]["thread_id"] == "mine"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_create_react_agent_runs_parallel_calls_and_its_interrupts(monkeypatch: pytest.MonkeyPatch) -> None:
    """``create_react_agent`` sends each tool call to its own task: the
    results and the interrupt map all the same."""
    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "0")
    from langgraph.prebuilt import create_react_agent

    from uistream_app.runs.messages import UserMessage

    graph = create_react_agent(demo.ScriptChatModel(), demo.TOOLS)
    adapter = adapter_for(graph)
    assert isinstance(adapter, LangGraphAdapter)
    events = asyncio.run(collect(adapter, turn(messages=[UserMessage("weather in Paris and Rome")])))
    results = [e for e in events if isinstance(e, ev.ToolResult)]
    assert [json.loads(r.content)["city"] for r in results] == ["Paris", "Rome"]
    assert "Rome" in "".join(e.text for e in events if isinstance(e, ev.TextDelta))
    assert events[-1] == ev.Done()

    saved: list[Any] = []

    async def save(state: Any) -> None:
        saved.append(json.loads(json.dumps(state)))

    asked = asyncio.run(collect(adapter, turn(messages=[UserMessage("email j@k.l saying no")], save_state=save)))
    (request,) = [e for e in asked if isinstance(e, ev.ToolApprovalRequest)]
    part = {"type": "tool-send_email", "toolCallId": request.tool_call_id, "state": "approval-responded", "input": {}}
    denied = asyncio.run(
        collect(
            LangGraphAdapter(graph),
            turn(
                history=[{"role": "assistant", "parts": [part]}],
                continues=True,
                approvals={request.tool_call_id: ToolApproval(request.approval_id, False)},
                resume_state=saved[0],
            ),
        )
    )
    assert denied[0] == ev.ToolDenied(request.tool_call_id)
    assert list(demo.SENT) == []


def test_a_failing_graph_raises_for_the_runner_to_mask() -> None:
    from langgraph.graph import START, MessagesState, StateGraph

    from uistream_app.runs.messages import UserMessage

    def broken(state: MessagesState) -> dict[str, Any]:
        raise ValueError("the database is down")

    builder = StateGraph(MessagesState)
    builder.add_node("broken", broken)
    builder.add_edge(START, "broken")
    with pytest.raises(ValueError, match="the database is down"):
        asyncio.run(collect(LangGraphAdapter(builder.compile()), turn(messages=[UserMessage("hi")])))


def test_a_continuation_without_its_saved_state_fails_clearly() -> None:
    with pytest.raises(RuntimeError, match="no saved graph state"):
        asyncio.run(collect(LangGraphAdapter(demo.graph), turn(continues=True, resume_state=None)))


def test_without_langgraph_the_import_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import sys

    from uistream_app.adapters import MissingExtra

    monkeypatch.delitem(sys.modules, "uistream_app.adapters.langgraph")
    monkeypatch.setitem(sys.modules, "langgraph", None)
    with pytest.raises(MissingExtra, match=r"pip install 'django-uistream\[langgraph\]'"):
        importlib.import_module("uistream_app.adapters.langgraph")
