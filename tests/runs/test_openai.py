"""``OpenAIChatModel`` against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest

from uistream_app.protocol.events import (
    Finish,
    ReasoningDelta,
    ReasoningEnd,
    TextDelta,
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
    ModelTimeoutError,
    SystemMessage,
    ToolCallRequest,
    ToolLoop,
    ToolMessage,
    UserMessage,
    tool,
)
from uistream_app.runs.openai import OpenAIChatModel, map_finish_reason

from .chat_server import DONE, ChatServer, Reply, chunk, sse, usage_chunk
from .provider_peers import collect, collect_until_error

pytestmark = pytest.mark.asyncio


def make_model(server: ChatServer, **kwargs: Any) -> OpenAIChatModel:
    kwargs.setdefault("retry_backoff", 0)
    return OpenAIChatModel("test-model", base_url=server.base_url, api_key="sk-test", **kwargs)


async def test_plain_text_usage_and_the_request_sent() -> None:
    async with ChatServer() as server:
        server.add(
            Reply(
                body=[
                    chunk({"role": "assistant", "content": ""}),
                    chunk({"content": "Hel"}),
                    chunk({"content": "lo"}),
                    chunk({}, "stop"),
                    usage_chunk(7, 2, prompt_tokens_details={"cached_tokens": 3}),
                    DONE,
                ]
            )
        )
        model = make_model(server)
        events = await collect(
            model,
            [SystemMessage("Be brief."), UserMessage("hi")],
            options=ModelOptions(temperature=0.5, max_tokens=100, extra={"seed": 1}),
        )
    assert events == [
        TextDelta("Hel"),
        TextDelta("lo"),
        Usage(input_tokens=7, output_tokens=2, cached_input_tokens=3),
        Finish("stop"),
    ]
    [request] = server.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.json() == {
        "model": "test-model",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.5,
        "max_tokens": 100,
        "seed": 1,
    }


async def test_parallel_tool_calls_with_arguments_split_mid_token() -> None:
    # Two calls, fragments interleaved by index, split inside keys, inside a
    # string and (at the TCP level) inside a UTF-8 sequence and an SSE line.
    second = chunk({"tool_calls": [{"index": 1, "function": {"arguments": '"Zür'}}]})
    cut = second.index(b"Z") + 2  # in the middle of "ü"
    async with ChatServer() as server:
        server.add(
            Reply(
                body=[
                    chunk(
                        {
                            "role": "assistant",
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "call_a",
                                    "type": "function",
                                    "function": {"name": "get_weather", "arguments": ""},
                                }
                            ],
                        }
                    ),
                    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]}),
                    chunk(
                        {
                            "tool_calls": [
                                {
                                    "index": 1,
                                    "id": "call_b",
                                    "type": "function",
                                    "function": {"name": "get_weather", "arguments": '{"'},
                                }
                            ]
                        }
                    ),
                    chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Par'}}]}),
                    chunk({"tool_calls": [{"index": 1, "function": {"arguments": 'city": '}}]})[:20],
                    chunk({"tool_calls": [{"index": 1, "function": {"arguments": 'city": '}}]})[20:],
                    second[:cut],
                    second[cut:],
                    chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'is"}'}}]}),
                    chunk({"tool_calls": [{"index": 1, "function": {"arguments": 'ich"}'}}]}),
                    chunk({}, "tool_calls"),
                    DONE,
                ]
            )
        )
        events = await collect(make_model(server, include_usage=False))
    assert events == [
        ToolCallStart("call_a", "get_weather"),
        ToolCallDelta("call_a", '{"ci'),
        ToolCallStart("call_b", "get_weather"),
        ToolCallDelta("call_b", '{"'),
        ToolCallDelta("call_a", 'ty": "Par'),
        ToolCallDelta("call_b", 'city": '),
        ToolCallDelta("call_b", '"Zür'),
        ToolCallDelta("call_a", 'is"}'),
        ToolCallDelta("call_b", 'ich"}'),
        ToolCall("call_a", "get_weather", '{"city": "Paris"}'),
        ToolCall("call_b", "get_weather", '{"city": "Zürich"}'),
        Finish("tool-calls"),
    ]
    assert "stream_options" not in server.requests[0].json()


async def test_a_whole_call_in_one_chunk_and_a_missing_id() -> None:
    async with ChatServer() as server:
        server.add(
            Reply(
                body=[
                    chunk(
                        {
                            "tool_calls": [
                                {"index": 0, "function": {"name": "calculate", "arguments": '{"expression": "1+1"}'}}
                            ]
                        }
                    ),
                    chunk({}, "tool_calls"),
                    DONE,
                ]
            )
        )
        events = await collect(make_model(server))
    start, delta, call, finish = events
    assert isinstance(start, ToolCallStart)
    assert start.tool_name == "calculate"
    assert start.tool_call_id.startswith("call_")
    assert delta == ToolCallDelta(start.tool_call_id, '{"expression": "1+1"}')
    assert call == ToolCall(start.tool_call_id, "calculate", '{"expression": "1+1"}')
    assert finish == Finish("tool-calls")


async def test_reasoning_content_then_text() -> None:
    async with ChatServer() as server:
        server.add(
            Reply(
                body=[
                    chunk({"role": "assistant", "reasoning_content": "Let me"}),
                    chunk({"reasoning_content": " think."}),
                    chunk({"content": "Four."}),
                    chunk({}, "stop"),
                    usage_chunk(3, 9, completion_tokens_details={"reasoning_tokens": 5}),
                    DONE,
                ]
            )
        )
        events = await collect(make_model(server))
    assert events == [
        ReasoningDelta("Let me"),
        ReasoningDelta(" think."),
        ReasoningEnd(),
        TextDelta("Four."),
        Usage(input_tokens=3, output_tokens=9, reasoning_tokens=5),
        Finish("stop"),
    ]


async def test_reasoning_field_and_repeated_usage_keep_the_last() -> None:
    async with ChatServer() as server:
        server.add(
            Reply(
                body=[
                    b": OPENROUTER PROCESSING\n\n",
                    chunk({"reasoning": "Hmm."}, usage={"prompt_tokens": 3, "completion_tokens": 1}),
                    chunk({"content": "Yes."}, usage={"prompt_tokens": 3, "completion_tokens": 2}),
                    chunk({}, "length", usage={"prompt_tokens": 3, "completion_tokens": 3}),
                    DONE,
                ]
            )
        )
        events = await collect(make_model(server))
    assert events == [
        ReasoningDelta("Hmm."),
        ReasoningEnd(),
        TextDelta("Yes."),
        Usage(input_tokens=3, output_tokens=3),
        Finish("length"),
    ]


@pytest.mark.parametrize(
    ("raw", "mapped"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("tool_calls", "tool-calls"),
        ("function_call", "tool-calls"),
        ("content_filter", "content-filter"),
        ("eos", "other"),
        (None, "stop"),
    ],
)
async def test_finish_reasons_map(raw: str | None, mapped: str) -> None:
    assert map_finish_reason(raw) == mapped


async def test_a_connection_dropped_mid_stream_is_typed_and_not_retried() -> None:
    async with ChatServer() as server:
        server.add(Reply(body=[chunk({"content": "Hel"}), chunk({"content": "lo"})], drop=True))
        server.add(Reply(body=[chunk({"content": "never"}), chunk({}, "stop"), DONE]))
        events, error = await collect_until_error(make_model(server))
    assert events == [TextDelta("Hel"), TextDelta("lo")]
    assert isinstance(error, ModelConnectionError)
    assert len(server.requests) == 1


async def test_a_stream_that_ends_before_a_finish_reason_is_a_connection_error() -> None:
    async with ChatServer() as server:
        server.add(Reply(body=[chunk({"content": "Hel"})]))
        events, error = await collect_until_error(make_model(server))
    assert events == [TextDelta("Hel")]
    assert isinstance(error, ModelConnectionError)


async def test_429_then_success_retries_before_the_first_byte() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async with ChatServer() as server:
        server.add(Reply(429, [b'{"error": {"message": "slow down"}}'], headers={"retry-after": "1.5"}))
        server.add(Reply(body=[chunk({"content": "ok"}), chunk({}, "stop"), DONE]))
        events = await collect(make_model(server, sleep=sleep))
    assert events == [TextDelta("ok"), Finish("stop")]
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body
    assert waits == [1.5]


async def test_5xx_retries_up_to_max_retries_then_raises_typed() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async with ChatServer() as server:
        server.add(*[Reply(503, [b'{"error": "overloaded"}']) for _ in range(3)])
        model = make_model(server, sleep=sleep, max_retries=2, retry_backoff=0.25)
        with pytest.raises(ModelHTTPError) as info:
            await collect(model)
    assert info.value.status_code == 503
    assert info.value.retryable
    assert "overloaded" in info.value.body
    assert len(server.requests) == 3
    assert waits == [0.25, 0.5]


async def test_4xx_is_not_retried() -> None:
    async with ChatServer() as server:
        server.add(Reply(400, [b'{"error": {"message": "bad model"}}']))
        with pytest.raises(ModelHTTPError) as info:
            await collect(make_model(server))
    assert info.value.status_code == 400
    assert not info.value.retryable
    assert len(server.requests) == 1


async def test_a_malformed_line_is_a_response_error_after_what_came_before() -> None:
    async with ChatServer() as server:
        server.add(Reply(body=[chunk({"content": "Hel"}), b"data: {not json\n\n", chunk({}, "stop"), DONE]))
        events, error = await collect_until_error(make_model(server))
    assert events == [TextDelta("Hel")]
    assert isinstance(error, ModelResponseError)
    assert "not JSON" in str(error)


async def test_an_in_band_error_object_is_a_response_error() -> None:
    async with ChatServer() as server:
        server.add(Reply(body=[chunk({"content": "Hel"}), sse({"error": {"message": "context too long"}})]))
        events, error = await collect_until_error(make_model(server))
    assert events == [TextDelta("Hel")]
    assert isinstance(error, ModelResponseError)
    assert "context too long" in str(error)


async def test_a_stalled_stream_times_out_typed() -> None:
    async with ChatServer() as server:
        server.add(Reply(body=[chunk({"content": "Hel"})], hold=True))
        events, error = await collect_until_error(make_model(server, timeout=0.2))
    assert events == [TextDelta("Hel")]
    assert isinstance(error, ModelTimeoutError)


async def test_no_server_is_a_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, retry_backoff=0)
    with pytest.raises(ModelConnectionError):
        await collect(model)


async def test_closing_the_iterator_closes_the_http_response() -> None:
    async with ChatServer() as server:
        server.add(Reply(body=[chunk({"content": "Hel"}), chunk({"content": "lo"})], hold=True))
        stream = make_model(server).stream([UserMessage("hi")])
        assert await anext(stream) == TextDelta("Hel")
        await stream.aclose()
        # The server sees the client hang up; no timer, just its EOF.
        await asyncio.wait_for(server.client_gone.wait(), timeout=10)


async def test_nothing_is_sent_until_the_first_event_is_pulled() -> None:
    async with ChatServer() as server:
        stream = make_model(server).stream([UserMessage("hi")])
        assert server.requests == []
        await stream.aclose()
        assert server.requests == []


async def test_conversation_with_tool_calls_goes_out_in_chat_completions_shape() -> None:
    model = OpenAIChatModel("m")
    body = model.request_body(
        [
            UserMessage("weather?"),
            AssistantMessage("Checking.", (ToolCallRequest("c1", "get_weather", '{"city": "Oslo"}'),), "hmm"),
            ToolMessage("c1", '{"temp": 3}'),
        ],
    )
    assert body["messages"] == [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 3}'},
    ]


async def test_a_loop_over_the_real_server() -> None:
    @tool(run_sync_in_thread=False)
    def get_weather(city: str) -> dict[str, Any]:
        """Weather for a city."""
        return {"city": city, "temp": 3}

    async with ChatServer() as server:
        server.add(
            Reply(
                body=[
                    chunk(
                        {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "get_weather", "arguments": ""}}]}
                    ),
                    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Oslo"}'}}]}),
                    chunk({}, "tool_calls"),
                    DONE,
                ]
            )
        )
        server.add(Reply(body=[chunk({"content": "3 degrees."}), chunk({}, "stop"), DONE]))
        loop = ToolLoop(make_model(server), [get_weather])
        events = [e async for e in loop.run([UserMessage("weather in Oslo?")])]
    assert ToolResult("c1", {"city": "Oslo", "temp": 3}, tool_name="get_weather") in events
    assert TextDelta("3 degrees.") in events
    first, second = (r.json() for r in server.requests)
    assert first["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city.",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                    "additionalProperties": False,
                },
            },
        }
    ]
    assert second["messages"][1:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"city": "Oslo", "temp": 3})},
    ]


async def test_content_sent_as_a_list_of_parts_is_reasoning_then_text() -> None:
    """Mistral's magistral models send ``delta.content`` as parts; the
    user saw an empty answer when they were dropped."""
    async with ChatServer() as server:
        thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "2+2 is 4."}]}
        server.add(
            Reply(
                body=[
                    chunk({"role": "assistant", "content": [thinking]}),
                    chunk({"content": [{"type": "text", "text": "2 + 2 = "}, {"type": "text", "text": "4"}]}),
                    chunk({"content": ""}, "stop"),
                    DONE,
                ]
            )
        )
        events = await collect(make_model(server))
    assert events == [
        ReasoningDelta("2+2 is 4."),
        ReasoningEnd(),
        TextDelta("2 + 2 = "),
        TextDelta("4"),
        Finish("stop"),
    ]


async def test_done_before_any_finish_reason_is_an_error_not_a_stop() -> None:
    async with ChatServer() as server:
        server.add(Reply(body=[chunk({"content": "Hello"}), DONE]))
        events, error = await collect_until_error(make_model(server))
    assert events == [TextDelta("Hello")]
    assert isinstance(error, ModelResponseError)
    assert "without a finish reason" in str(error)


async def test_a_tool_call_that_never_receives_a_name_is_rejected() -> None:
    async with ChatServer() as server:
        fragment = {"index": 0, "id": "call_missing", "type": "function", "function": {"arguments": "{}"}}
        server.add(Reply(body=[chunk({"tool_calls": [fragment]}), chunk({}, "tool_calls"), DONE]))
        events, error = await collect_until_error(make_model(server))
    assert not any(isinstance(e, (ToolCallStart, ToolCall)) for e in events)
    assert isinstance(error, ModelResponseError)
    assert "call_missing" in str(error)
