"""``AnthropicModel`` against a real HTTP server on 127.0.0.1: the stream,
the request (turn 2 sends thinking with its signature and tool results the
way the Messages API requires), and the errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from uistream_app.protocol.events import (
    Custom,
    Finish,
    ReasoningDelta,
    ReasoningEnd,
    TextDelta,
    TextEnd,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolResult,
    Usage,
)
from uistream_app.runs import (
    AssistantMessage,
    ModelConnectionError,
    ModelHTTPError,
    ModelOptions,
    ModelResponseError,
    SystemMessage,
    ToolCallRequest,
    ToolLoop,
    ToolMessage,
    UserMessage,
    tool,
)
from uistream_app.runs.anthropic import AnthropicModel, map_stop_reason

from .chat_server import ChatServer, Reply
from .provider_peers import collect, collect_until_error, oracle, run_case
from .test_anthropic_peer_cases import normalized

pytestmark = pytest.mark.asyncio


def ev(obj: dict[str, Any]) -> bytes:
    """One event as the Messages API frames it."""
    return f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n".encode()


def start(message_id: str = "msg_1", input_tokens: int = 10, **usage: Any) -> bytes:
    return ev(
        {
            "type": "message_start",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": "claude-test",
                "stop_reason": None,
                "usage": {"input_tokens": input_tokens, "output_tokens": 1, **usage},
            },
        }
    )


def opened(message_id: str = "msg_1", input_tokens: int = 10, **usage: Any) -> Custom:
    """The custom part ``start`` opens the message with, as @ai-sdk/anthropic
    sends it (``anthropic.message_start``: the id, model and raw usage)."""
    raw = {"input_tokens": input_tokens, "output_tokens": 1, **usage}
    return Custom("anthropic.message_start", {"anthropic": {"id": message_id, "model": "claude-test", "usage": raw}})


def block(index: int, content_block: dict[str, Any]) -> bytes:
    return ev({"type": "content_block_start", "index": index, "content_block": content_block})


def delta(index: int, d: dict[str, Any]) -> bytes:
    return ev({"type": "content_block_delta", "index": index, "delta": d})


def stop(index: int) -> bytes:
    return ev({"type": "content_block_stop", "index": index})


def end(reason: str = "end_turn", output_tokens: int = 5, **usage: Any) -> list[bytes]:
    return [
        ev(
            {
                "type": "message_delta",
                "delta": {"stop_reason": reason},
                "usage": {"output_tokens": output_tokens, **usage},
            }
        ),
        ev({"type": "message_stop"}),
    ]


def text(index: int, *pieces: str) -> list[bytes]:
    return [
        block(index, {"type": "text", "text": ""}),
        *(delta(index, {"type": "text_delta", "text": p}) for p in pieces),
        stop(index),
    ]


def thinking(index: int, thought: str, signature: str) -> list[bytes]:
    return [
        block(index, {"type": "thinking", "thinking": ""}),
        delta(index, {"type": "thinking_delta", "thinking": thought}),
        delta(index, {"type": "signature_delta", "signature": signature}),
        stop(index),
    ]


def tool_use(index: int, call_id: str, name: str, *fragments: str) -> list[bytes]:
    return [
        block(index, {"type": "tool_use", "id": call_id, "name": name, "input": {}}),
        *(delta(index, {"type": "input_json_delta", "partial_json": f}) for f in fragments),
        stop(index),
    ]


def make_model(server: ChatServer, **kwargs: Any) -> AnthropicModel:
    kwargs.setdefault("retry_backoff", 0)
    return AnthropicModel("claude-test", base_url=server.base_url, api_key="sk-ant-test", **kwargs)


async def test_thinking_text_and_parallel_tool_calls_and_the_request_sent() -> None:
    async with ChatServer() as server:
        server.add(
            Reply(
                body=[
                    start(input_tokens=7, cache_read_input_tokens=3, cache_creation_input_tokens=2),
                    ev({"type": "ping"}),
                    *thinking(0, "Two cities.", "sig-1"),
                    *text(1, "Check", "ing."),
                    *tool_use(2, "toolu_a", "get_weather", '{"ci', 'ty": "Oslo"}'),
                    *tool_use(3, "toolu_b", "get_weather", '{"city": "Rome"}'),
                    *end("tool_use", 40),
                ]
            )
        )
        events = await collect(
            make_model(server, max_tokens=1000, thinking={"type": "enabled", "budget_tokens": 512}),
            [SystemMessage("Be brief."), UserMessage("weather?")],
            options=ModelOptions(temperature=1.0, tool_choice="auto"),
            tools=[_weather_spec()],
        )
    assert events == [
        opened("msg_1", 7, cache_read_input_tokens=3, cache_creation_input_tokens=2),
        ReasoningDelta("Two cities."),
        ReasoningEnd({"anthropic": {"signature": "sig-1"}}),
        TextDelta("Check"),
        TextDelta("ing."),
        TextEnd(),
        ToolCallStart("toolu_a", "get_weather"),
        ToolCallDelta("toolu_a", '{"ci'),
        ToolCallDelta("toolu_a", 'ty": "Oslo"}'),
        ToolCall("toolu_a", "get_weather", '{"city": "Oslo"}'),
        ToolCallStart("toolu_b", "get_weather"),
        ToolCallDelta("toolu_b", '{"city": "Rome"}'),
        ToolCall("toolu_b", "get_weather", '{"city": "Rome"}'),
        Usage(input_tokens=12, output_tokens=40, cached_input_tokens=3),
        Finish("tool-calls"),
    ]
    (request,) = server.requests
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == "sk-ant-test"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    assert request.json() == {
        "model": "claude-test",
        "max_tokens": 1000,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "weather?"}]}],
        "stream": True,
        "thinking": {"type": "enabled", "budget_tokens": 512},
        "tools": [
            {
                "name": "get_weather",
                "description": "Weather for a city.",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            }
        ],
        "temperature": 1.0,
        "tool_choice": {"type": "auto"},
    }


def _weather_spec() -> Any:
    from uistream_app.runs import ToolSpec

    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    return ToolSpec("get_weather", "Weather for a city.", schema)


async def test_turn_two_sends_the_signed_thinking_and_the_tool_results_back() -> None:
    @tool(run_sync_in_thread=False)
    def get_weather(city: str) -> dict[str, Any]:
        """Weather for a city."""
        return {"city": city, "temp": 3}

    async with ChatServer() as server:
        server.add(
            Reply(
                body=[
                    start(),
                    *thinking(0, "Use the tool.", "sig-turn-1"),
                    block(1, {"type": "redacted_thinking", "data": "opaque-data"}),
                    stop(1),
                    *tool_use(2, "toolu_1", "get_weather", '{"city": "Oslo"}'),
                    *end("tool_use"),
                ]
            )
        )
        server.add(Reply(body=[start("msg_2"), *text(0, "3 degrees."), *end()]))
        loop = ToolLoop(make_model(server), [get_weather])
        events = [e async for e in loop.run([UserMessage("weather in Oslo?")])]
    assert ToolResult("toolu_1", {"city": "Oslo", "temp": 3}, tool_name="get_weather") in events
    assert TextDelta("3 degrees.") in events
    assert ReasoningEnd({"anthropic": {"redactedData": "opaque-data"}}) in events
    second = server.requests[1].json()
    assert second["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "weather in Oslo?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Use the tool.", "signature": "sig-turn-1"},
                {"type": "redacted_thinking", "data": "opaque-data"},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": json.dumps({"city": "Oslo", "temp": 3})}
            ],
        },
    ]


async def test_signed_thinking_goes_back_only_with_the_calls_it_came_with() -> None:
    """The same reasoning text in another conversation's step (other call
    ids) does not pick up this step's thinking blocks."""
    async with ChatServer() as server:
        server.add(
            Reply(
                body=[
                    start(),
                    *thinking(0, "Same words.", "sig-mine"),
                    *tool_use(1, "toolu_mine", "f", "{}"),
                    *end("tool_use"),
                ]
            )
        )
        model = make_model(server)
        await collect(model)
    mine = AssistantMessage("", (ToolCallRequest("toolu_mine", "f", "{}"),), "Same words.")
    theirs = AssistantMessage("", (ToolCallRequest("toolu_theirs", "f", "{}"),), "Same words.")
    _, wire = model.messages_to_wire([mine, ToolMessage("toolu_mine", "1"), theirs])
    assert wire[0]["content"][0] == {"type": "thinking", "thinking": "Same words.", "signature": "sig-mine"}
    assert [b["type"] for b in wire[2]["content"]] == ["tool_use"]


async def test_history_goes_out_in_the_messages_api_shape() -> None:
    """Tool results of one step share one user message; a failed tool
    says ``is_error``; unsigned reasoning is not sent (the API rejects a
    thinking block without its signature)."""
    model = AnthropicModel("m")
    system, wire = model.messages_to_wire(
        [
            SystemMessage("one"),
            SystemMessage("two"),
            UserMessage("compare"),
            AssistantMessage(
                "",
                (ToolCallRequest("c1", "a", '{"x": 1}'), ToolCallRequest("c2", "b", "")),
                "never streamed by this process",
            ),
            ToolMessage("c1", "1"),
            ToolMessage("c2", "boom", is_error=True),
            UserMessage("and?"),
        ]
    )
    assert system == "one\n\ntwo"
    assert wire == [
        {"role": "user", "content": [{"type": "text", "text": "compare"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "c1", "name": "a", "input": {"x": 1}},
                {"type": "tool_use", "id": "c2", "name": "b", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "1"},
                {"type": "tool_result", "tool_use_id": "c2", "content": "boom", "is_error": True},
                {"type": "text", "text": "and?"},
            ],
        },
    ]


@pytest.mark.parametrize(
    ("raw", "mapped"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("pause_turn", "stop"),
        ("tool_use", "tool-calls"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("refusal", "content-filter"),
        ("something_new", "other"),
        (None, "other"),
    ],
)
async def test_stop_reasons_map(raw: str | None, mapped: str) -> None:
    assert map_stop_reason(raw) == mapped


async def test_max_tokens_ends_as_length_with_the_text_so_far() -> None:
    async with ChatServer() as server:
        server.add(Reply(body=[start(), *text(0, "The answer is lo"), *end("max_tokens", 16)]))
        events = await collect(make_model(server))
    assert events[-2:] == [Usage(input_tokens=10, output_tokens=16, cached_input_tokens=0), Finish("length")]
    assert TextDelta("The answer is lo") in events


async def test_a_body_cut_before_message_stop_is_interrupted_not_a_stop() -> None:
    async with ChatServer() as server:
        server.add(Reply(body=[start(), *text(0, "Hel"), block(1, {"type": "text", "text": ""})]))
        events = await collect(make_model(server))
    assert events == [opened(), TextDelta("Hel"), TextEnd(), TextDelta(""), TextEnd(), Finish("interrupted")]


async def test_a_connection_dropped_mid_event_is_typed_and_not_retried() -> None:
    async with ChatServer() as server:
        server.add(
            Reply(body=[start(), *text(0, "Hel"), b'event: content_block_delta\ndata: {"type": "con'], drop=True)
        )
        server.add(Reply(body=[start(), *text(0, "never"), *end()]))
        events, error = await collect_until_error(make_model(server))
    assert events == [opened(), TextDelta("Hel"), TextEnd()]
    assert isinstance(error, ModelConnectionError)
    assert len(server.requests) == 1


async def test_a_second_message_spliced_in_is_an_error() -> None:
    async with ChatServer() as server:
        server.add(Reply(body=[start("msg_first"), *text(0, "a"), start("msg_second"), *text(0, "b"), *end()]))
        events, error = await collect_until_error(make_model(server))
    assert events == [opened("msg_first"), TextDelta("a"), TextEnd()]
    assert isinstance(error, ModelResponseError)
    assert "msg_second" in str(error)


@pytest.mark.parametrize("status", [400, 401, 404])
async def test_client_errors_are_not_retried_and_keep_the_detail(status: int) -> None:
    body = json.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": "bad thing"}})
    async with ChatServer() as server:
        server.add(Reply(status, [body.encode()]))
        with pytest.raises(ModelHTTPError) as info:
            await collect(make_model(server))
    assert info.value.status_code == status
    assert not info.value.retryable
    assert "bad thing" in info.value.body
    assert len(server.requests) == 1


async def test_429_waits_as_retry_after_says_then_succeeds() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async with ChatServer() as server:
        server.add(
            Reply(429, [b'{"type": "error", "error": {"type": "rate_limit_error"}}'], headers={"retry-after": "7"})
        )
        server.add(Reply(body=[start(), *text(0, "ok"), *end()]))
        events = await collect(make_model(server, sleep=sleep))
    assert TextDelta("ok") in events
    assert waits == [7.0]
    assert server.requests[0].body == server.requests[1].body


@pytest.mark.parametrize("status", [500, 529])
async def test_server_errors_and_overloaded_are_retried_then_raised(status: int) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async with ChatServer() as server:
        server.add(*[Reply(status, [b'{"type": "error", "error": {"type": "overloaded_error"}}']) for _ in range(3)])
        with pytest.raises(ModelHTTPError) as info:
            await collect(make_model(server, sleep=sleep, max_retries=2, retry_backoff=0.25))
    assert info.value.status_code == status
    assert len(server.requests) == 3
    assert waits == [0.25, 0.5]


async def test_in_band_overloaded_before_any_output_is_retried() -> None:
    overloaded = ev({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    async with ChatServer() as server:
        server.add(Reply(body=[overloaded]))
        server.add(Reply(body=[start(), *text(0, "ok"), *end()]))
        events = await collect(make_model(server))
    assert TextDelta("ok") in events
    assert len(server.requests) == 2


async def test_in_band_overloaded_after_output_is_raised_not_retried() -> None:
    overloaded = ev({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    async with ChatServer() as server:
        server.add(Reply(body=[start(), *text(0, "partial"), overloaded]))
        server.add(Reply(body=[start(), *text(0, "never"), *end()]))
        events, error = await collect_until_error(make_model(server))
    assert TextDelta("partial") in events
    assert isinstance(error, ModelResponseError)
    assert "overloaded_error" in str(error)
    assert len(server.requests) == 1


async def test_web_search_is_a_provider_executed_call_with_its_sources() -> None:
    result = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [{"type": "web_search_result", "url": "https://a.example/", "title": "A", "page_age": "1 day"}],
    }
    async with ChatServer() as server:
        server.add(
            Reply(
                body=[
                    start(),
                    block(0, {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}),
                    delta(0, {"type": "input_json_delta", "partial_json": '{"query": "a"}'}),
                    stop(0),
                    block(1, result),
                    stop(1),
                    *text(2, "Found A."),
                    *end(),
                ]
            )
        )
        events = await collect(make_model(server))
    assert events[:4] == [
        opened(),
        ToolCallStart("srvtoolu_1", "web_search", provider_executed=True),
        ToolCallDelta("srvtoolu_1", '{"query": "a"}'),
        ToolCall("srvtoolu_1", "web_search", '{"query": "a"}', provider_executed=True),
    ]
    output = [
        {
            "url": "https://a.example/",
            "title": "A",
            "pageAge": "1 day",
            "encryptedContent": None,
            "type": "web_search_result",
        }
    ]
    assert events[4] == ToolResult("srvtoolu_1", output, tool_name="web_search", provider_executed=True)
    assert (events[5].url, events[5].title) == ("https://a.example/", "A")  # type: ignore[union-attr]


async def test_a_tool_loop_over_web_search_asks_the_model_once() -> None:
    """Anthropic ran the search: the loop shows the call and its result and
    does not answer it with an "unavailable tool" error and a second call."""
    result = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [{"type": "web_search_result", "url": "https://a.example/", "title": "A", "page_age": None}],
    }
    async with ChatServer() as server:
        server.add(
            Reply(
                body=[
                    start(),
                    block(0, {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}),
                    delta(0, {"type": "input_json_delta", "partial_json": '{"query": "a"}'}),
                    stop(0),
                    block(1, result),
                    stop(1),
                    *text(2, "Found A."),
                    *end(),
                ]
            )
        )
        events = [e async for e in ToolLoop(make_model(server)).run([UserMessage("search a")])]
    assert len(server.requests) == 1
    assert [type(e).__name__ for e in events if type(e).__name__.startswith("Tool")] == [
        "ToolCallStart",
        "ToolCallDelta",
        "ToolCall",
        "ToolResult",
    ]
    assert TextDelta("Found A.") in events


async def test_an_approved_call_continued_from_stored_history_sends_the_signed_thinking() -> None:
    """The approval case across processes: the run that asked for approval
    is stored as the browser builds it (encoder → reader), the approval
    comes back to a process that never streamed that step (an empty replay
    memory), and the continuation still sends the thinking with its
    signature, which the API requires with thinking on."""
    from uistream_app.protocol.ui.encoder import UIMessageEncoder
    from uistream_app.protocol.ui.reader import UIMessageReader
    from uistream_app.protocol.ui.stream import aencode_events
    from uistream_app.runs import approvals_from_ui, ui_to_model_messages
    from uistream_app.runs._memory import ReplayMemory

    @tool(requires_approval=True, run_sync_in_thread=False)
    def send_email(to: str) -> str:
        """Send an email."""
        return f"sent to {to}"

    thinking_on = {"type": "enabled", "budget_tokens": 1024}
    user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "email ada"}]}
    async with ChatServer() as server:
        server.add(
            Reply(
                body=[
                    start(),
                    *thinking(0, "Ada wants mail.", "sig-stored"),
                    block(1, {"type": "redacted_thinking", "data": "opaque-stored"}),
                    stop(1),
                    *tool_use(2, "toolu_mail", "send_email", '{"to": "ada@example.com"}'),
                    *end("tool_use"),
                ]
            ),
            Reply(body=[start("msg_2"), *text(0, "Sent."), *end()]),
        )
        first = make_model(server, thinking=thinking_on)
        first.memory = ReplayMemory()
        reader = UIMessageReader(message_id="a1")
        run = ToolLoop(first, [send_email]).run(ui_to_model_messages([user]))
        async for chunk in aencode_events(run, UIMessageEncoder("a1")):
            reader.feed(chunk)
        stored = reader.message
        (call_part,) = [p for p in stored["parts"] if p["type"] == "tool-send_email"]
        assert call_part["state"] == "approval-requested"
        call_part["state"] = "approval-responded"
        call_part["approval"] = {**call_part["approval"], "approved": True}

        other_process = make_model(server, thinking=thinking_on)
        other_process.memory = ReplayMemory()
        history = [user, stored]
        loop = ToolLoop(other_process, [send_email])
        events = [e async for e in loop.run(ui_to_model_messages(history), approvals=approvals_from_ui(history))]
    assert TextDelta("Sent.") in events
    assert server.requests[1].json()["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Ada wants mail.", "signature": "sig-stored"},
                {"type": "redacted_thinking", "data": "opaque-stored"},
                {"type": "tool_use", "id": "toolu_mail", "name": "send_email", "input": {"to": "ada@example.com"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_mail", "content": "sent to ada@example.com"}],
        },
    ]


async def test_a_stored_web_search_goes_back_as_anthropic_ran_it() -> None:
    from uistream_app.runs import ui_to_model_messages

    stored = {
        "id": "a1",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {
                "type": "tool-web_search",
                "toolCallId": "srvtoolu_1",
                "state": "output-available",
                "input": {"query": "a"},
                "output": [{"url": "https://a.example/"}],
                "providerExecuted": True,
            },
            {"type": "text", "text": "Found A.", "state": "done"},
        ],
    }
    user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "search a"}]}
    model = AnthropicModel("claude-test", api_key="k")
    _, wire = model.messages_to_wire(ui_to_model_messages([user, stored]))
    assert wire[1] == {
        "role": "assistant",
        "content": [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "a"}},
            {
                "type": "web_search_tool_result",
                "tool_use_id": "srvtoolu_1",
                "content": [
                    {
                        "url": "https://a.example/",
                        "title": None,
                        "page_age": None,
                        "encrypted_content": None,
                        "type": None,
                    }
                ],
            },
            {"type": "text", "text": "Found A."},
        ],
    }


# -- cases of our own, judged by the real @ai-sdk/anthropic and ai@7 ---------------


def _oracle_cases() -> list[Any]:
    search_error = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_x",
        "content": {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"},
    }
    return [
        pytest.param([start(), *text(0, "The answer is lo"), *end("max_tokens", 16)], (), id="max-tokens"),
        pytest.param([start(), *text(0, "Stopped at"), *end("stop_sequence", 3)], (), id="stop-sequence"),
        pytest.param([start(), *text(0, "Searching more"), *end("pause_turn", 3)], (), id="pause-turn"),
        pytest.param([start(), *end("refusal", 2)], (), id="refusal-no-content"),
        pytest.param([start(), *text(0, "Too long"), *end("model_context_window_exceeded", 2)], (), id="context-full"),
        pytest.param(
            [
                start(input_tokens=7, cache_read_input_tokens=3, cache_creation_input_tokens=2),
                *thinking(0, "Two cities.", "sig-1"),
                *text(1, "Checking."),
                *tool_use(2, "toolu_a", "get_weather", '{"ci', 'ty": "Oslo"}'),
                *tool_use(3, "toolu_b", "get_weather"),
                *end("tool_use", 40),
            ],
            ("get_weather",),
            id="thinking-parallel-calls-empty-input-cache",
        ),
        pytest.param(
            [
                start(),
                block(0, {"type": "server_tool_use", "id": "srvtoolu_x", "name": "web_search", "input": {}}),
                delta(0, {"type": "input_json_delta", "partial_json": '{"query": "x"}'}),
                stop(0),
                block(1, search_error),
                stop(1),
                *text(2, "The search failed."),
                *end(),
            ],
            (),
            id="failed-web-search",
        ),
    ]


@pytest.mark.parametrize(("body", "tools"), _oracle_cases())
async def test_our_own_cases_yield_what_the_ai_sdk_yields(
    body: list[bytes], tools: tuple[str, ...], node: str, tmp_path: Path
) -> None:
    raw = b"".join(body)
    ours = await run_case(lambda url: AnthropicModel("peer-model", base_url=url, api_key="k", max_retries=0), raw)
    theirs = oracle(node, "anthropic", raw, tmp_path, tools)
    assert ours.error is None
    assert ours.text == theirs["text"]
    assert ours.finish == theirs["finishReason"]
    usage = ours.usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens) == (
        theirs["usage"]["inputTokens"],
        theirs["usage"]["outputTokens"],
    )
    assert usage.cached_input_tokens == theirs["usage"]["inputTokenDetails"]["cacheReadTokens"]
    assert normalized(ours.message) == normalized(theirs["message"])
