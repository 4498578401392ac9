"""``OpenAIResponsesModel`` against a real HTTP server on 127.0.0.1: the
stream, the request (turn 2 sends the reasoning items with their encrypted
content and the tool results as ``function_call_output``), and the errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from uistream_app.protocol.events import (
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
from uistream_app.runs.openai import OpenAIResponsesModel
from uistream_app.runs.openai_responses import map_incomplete_reason

from .chat_server import ChatServer, Reply
from .provider_peers import collect, collect_until_error, oracle, run_case
from .test_openai_responses_peer_cases import normalized

pytestmark = pytest.mark.asyncio


def ev(obj: dict[str, Any], *, event_line: bool = True, space: bool = True) -> bytes:
    data = ("data: " if space else "data:") + json.dumps(obj)
    return ((f"event: {obj['type']}\n" if event_line else "") + data + "\n\n").encode()


def created(response_id: str = "resp_1") -> bytes:
    return ev({"type": "response.created", "response": {"id": response_id, "created_at": 1, "model": "gpt-test"}})


def completed(input_tokens: int = 10, output_tokens: int = 5, *, reason: str | None = None, **details: Any) -> bytes:
    usage = {"input_tokens": input_tokens, "output_tokens": output_tokens, **details}
    incomplete = {"reason": reason} if reason else None
    kind = "response.incomplete" if reason else "response.completed"
    return ev({"type": kind, "response": {"id": "resp_1", "incomplete_details": incomplete, "usage": usage}})


def message(index: int, item_id: str, *pieces: str) -> list[bytes]:
    return [
        ev({"type": "response.output_item.added", "output_index": index, "item": {"id": item_id, "type": "message"}}),
        *(
            ev({"type": "response.output_text.delta", "output_index": index, "item_id": item_id, "delta": p})
            for p in pieces
        ),
        ev({"type": "response.output_item.done", "output_index": index, "item": {"id": item_id, "type": "message"}}),
    ]


def reasoning(index: int, item_id: str, summaries: list[str], encrypted: str | None) -> list[bytes]:
    out = [
        ev(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {"id": item_id, "type": "reasoning", "encrypted_content": encrypted},
            }
        )
    ]
    for n, text in enumerate(summaries):
        part = {"output_index": index, "item_id": item_id, "summary_index": n}
        out.append(ev({"type": "response.reasoning_summary_part.added", **part}))
        out.append(ev({"type": "response.reasoning_summary_text.delta", **part, "delta": text}))
        out.append(ev({"type": "response.reasoning_summary_part.done", **part}))
    done = {"id": item_id, "type": "reasoning", "encrypted_content": encrypted}
    out.append(ev({"type": "response.output_item.done", "output_index": index, "item": done}))
    return out


def function_call(index: int, call_id: str, name: str, *fragments: str) -> list[bytes]:
    item = {"id": f"fc_{call_id}", "type": "function_call", "call_id": call_id, "name": name, "arguments": ""}
    return [
        ev({"type": "response.output_item.added", "output_index": index, "item": item}),
        *(
            ev(
                {
                    "type": "response.function_call_arguments.delta",
                    "output_index": index,
                    "item_id": item["id"],
                    "delta": f,
                }
            )
            for f in fragments
        ),
        ev(
            {
                "type": "response.output_item.done",
                "output_index": index,
                "item": {**item, "arguments": "".join(fragments), "status": "completed"},
            }
        ),
    ]


def make_model(server: ChatServer, **kwargs: Any) -> OpenAIResponsesModel:
    kwargs.setdefault("retry_backoff", 0)
    return OpenAIResponsesModel("gpt-test", base_url=server.base_url, api_key="sk-test", **kwargs)


def _weather_spec() -> Any:
    from uistream_app.runs import ToolSpec

    return ToolSpec(
        "get_weather", "Weather for a city.", {"type": "object", "properties": {"city": {"type": "string"}}}
    )


async def test_reasoning_summaries_text_parallel_calls_usage_and_the_request_sent() -> None:
    async with ChatServer() as server:
        server.add(
            Reply(
                body=[
                    created(),
                    *reasoning(0, "rs_1", ["First.", "Second."], "enc-1"),
                    *message(1, "msg_1", "Check", "ing."),
                    *function_call(2, "call_a", "get_weather", '{"ci', 'ty": "Oslo"}'),
                    *function_call(3, "call_b", "get_weather", '{"city": "Rome"}'),
                    completed(
                        30,
                        12,
                        input_tokens_details={"cached_tokens": 8},
                        output_tokens_details={"reasoning_tokens": 4},
                    ),
                ]
            )
        )
        events = await collect(
            make_model(server, reasoning={"effort": "low", "summary": "auto"}),
            [SystemMessage("Be brief."), UserMessage("weather?")],
            tools=[_weather_spec()],
            options=ModelOptions(max_tokens=500, tool_choice="required"),
        )
    assert events == [
        ReasoningDelta("First."),
        ReasoningEnd({"openai": {"itemId": "rs_1"}}),
        ReasoningDelta("Second."),
        ReasoningEnd({"openai": {"itemId": "rs_1", "reasoningEncryptedContent": "enc-1"}}),
        TextDelta("Check"),
        TextDelta("ing."),
        TextEnd({"openai": {"itemId": "msg_1"}}),
        ToolCallStart("call_a", "get_weather"),
        ToolCallDelta("call_a", '{"ci'),
        ToolCallDelta("call_a", 'ty": "Oslo"}'),
        ToolCall("call_a", "get_weather", '{"city": "Oslo"}', provider_metadata={"openai": {"itemId": "fc_call_a"}}),
        ToolCallStart("call_b", "get_weather"),
        ToolCallDelta("call_b", '{"city": "Rome"}'),
        ToolCall("call_b", "get_weather", '{"city": "Rome"}', provider_metadata={"openai": {"itemId": "fc_call_b"}}),
        Usage(input_tokens=30, output_tokens=12, reasoning_tokens=4, cached_input_tokens=8),
        Finish("tool-calls"),
    ]
    (request,) = server.requests
    assert request.path == "/v1/responses"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.json() == {
        "model": "gpt-test",
        "input": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
        ],
        "stream": True,
        "store": False,
        "reasoning": {"effort": "low", "summary": "auto"},
        "include": ["reasoning.encrypted_content"],
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "Weather for a city.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                "strict": False,
            }
        ],
        "max_output_tokens": 500,
        "tool_choice": "required",
    }


async def test_turn_two_sends_the_encrypted_reasoning_and_the_tool_outputs_back() -> None:
    @tool(run_sync_in_thread=False)
    def get_weather(city: str) -> dict[str, Any]:
        """Weather for a city."""
        return {"city": city, "temp": 3}

    async with ChatServer() as server:
        server.add(
            Reply(
                body=[
                    created(),
                    *reasoning(0, "rs_turn1", ["Use the tool."], "enc-turn-1"),
                    *function_call(1, "call_1", "get_weather", '{"city": "Oslo"}'),
                    completed(),
                ]
            )
        )
        server.add(Reply(body=[created("resp_2"), *message(0, "msg_2", "3 degrees."), completed()]))
        loop = ToolLoop(make_model(server), [get_weather])
        events = [e async for e in loop.run([UserMessage("weather in Oslo?")])]
    assert ToolResult("call_1", {"city": "Oslo", "temp": 3}, tool_name="get_weather") in events
    assert TextDelta("3 degrees.") in events
    second = server.requests[1].json()
    assert second["input"] == [
        {"role": "user", "content": [{"type": "input_text", "text": "weather in Oslo?"}]},
        {
            "type": "reasoning",
            "id": "rs_turn1",
            "summary": [{"type": "summary_text", "text": "Use the tool."}],
            "encrypted_content": "enc-turn-1",
        },
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": json.dumps({"city": "Oslo", "temp": 3})},
    ]


async def test_history_goes_out_as_input_items() -> None:
    items = OpenAIResponsesModel("m").input_items(
        [
            UserMessage("compare"),
            AssistantMessage("Looking.", (ToolCallRequest("c1", "a", ""),), "never streamed by this process"),
            ToolMessage("c1", "boom", is_error=True),
        ]
    )
    assert items == [
        {"role": "user", "content": [{"type": "input_text", "text": "compare"}]},
        {"role": "assistant", "content": [{"type": "output_text", "text": "Looking."}]},
        {"type": "function_call", "call_id": "c1", "name": "a", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "boom"},
    ]


@pytest.mark.parametrize(
    ("reason", "calls", "mapped"),
    [
        (None, False, "stop"),
        (None, True, "tool-calls"),
        ("max_output_tokens", False, "length"),
        ("content_filter", True, "content-filter"),
        ("something_new", False, "other"),
    ],
)
async def test_incomplete_reasons_map(reason: str | None, calls: bool, mapped: str) -> None:
    assert map_incomplete_reason(reason, calls) == mapped


async def test_max_output_tokens_is_length() -> None:
    async with ChatServer() as server:
        server.add(
            Reply(body=[created(), *message(0, "msg", "The answer is lo"), completed(reason="max_output_tokens")])
        )
        events = await collect(make_model(server))
    assert events[-1] == Finish("length")
    assert TextDelta("The answer is lo") in events


async def test_a_refusal_is_shown_and_ends_as_content_filter() -> None:
    """A person sees why there is no answer (the real package agrees: see
    the oracle cases below)."""
    item = {"id": "msg", "type": "message"}
    async with ChatServer() as server:
        server.add(
            Reply(
                body=[
                    created(),
                    ev({"type": "response.output_item.added", "output_index": 0, "item": item}),
                    ev(
                        {"type": "response.refusal.delta", "output_index": 0, "item_id": "msg", "delta": "I can't help"}
                    ),
                    ev({"type": "response.refusal.delta", "output_index": 0, "item_id": "msg", "delta": " with that."}),
                    ev({"type": "response.output_item.done", "output_index": 0, "item": item}),
                    completed(),
                ]
            )
        )
        events = await collect(make_model(server))
    assert events[:3] == [TextDelta("I can't help"), TextDelta(" with that."), TextEnd({"openai": {"itemId": "msg"}})]
    assert events[-1] == Finish("content-filter")


async def test_compatible_servers_without_event_lines_and_with_done_read_the_same() -> None:
    """LM Studio and Azure send bare ``data:`` lines (some without the
    space) and end with ``[DONE]``: the kind comes from the payload."""
    item = {"id": "m", "type": "message"}
    text = {"type": "response.output_text.delta", "output_index": 0, "item_id": "m", "delta": "Hi"}
    body = [
        ev({"type": "response.created", "response": {"id": "r"}}, event_line=False, space=False),
        ev({"type": "response.output_item.added", "output_index": 0, "item": item}, event_line=False),
        ev(text, event_line=False, space=False),
        ev({"type": "response.output_item.done", "output_index": 0, "item": item}, event_line=False),
        ev({"type": "response.completed", "response": {"usage": None}}, event_line=False, space=False),
        b"data: [DONE]\n\n",
    ]
    async with ChatServer() as server:
        server.add(Reply(body=body))
        events = await collect(make_model(server))
    assert events == [TextDelta("Hi"), TextEnd({"openai": {"itemId": "m"}}), Usage(), Finish("stop")]


async def test_a_chat_completions_body_is_the_wrong_api() -> None:
    chunk = {"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "hi"}}]}
    async with ChatServer() as server:
        server.add(Reply(body=[f"data: {json.dumps(chunk)}\n\n".encode(), b"data: [DONE]\n\n"]))
        events, error = await collect_until_error(make_model(server))
    assert events == []
    assert isinstance(error, ModelResponseError)
    assert "Chat Completions" in str(error)


async def test_a_line_that_is_not_json_is_a_response_error_after_what_came_before() -> None:
    async with ChatServer() as server:
        server.add(Reply(body=[created(), *message(0, "m", "Hel")[:2], b"data: {not json\n\n", completed()]))
        events, error = await collect_until_error(make_model(server))
    assert events == [TextDelta("Hel")]
    assert isinstance(error, ModelResponseError)


async def test_a_body_cut_before_the_response_finished_is_interrupted() -> None:
    async with ChatServer() as server:
        server.add(Reply(body=[created(), *message(0, "m", "Hel")[:2]]))
        events = await collect(make_model(server))
    assert events == [TextDelta("Hel"), TextEnd({"openai": {"itemId": "m"}}), Finish("interrupted")]


async def test_a_connection_dropped_mid_event_is_typed_and_not_retried() -> None:
    async with ChatServer() as server:
        server.add(Reply(body=[created(), *message(0, "m", "Hel")[:2], b'data: {"type": "resp'], drop=True))
        server.add(Reply(body=[created(), *message(0, "m", "never"), completed()]))
        events, error = await collect_until_error(make_model(server))
    assert events == [TextDelta("Hel")]
    assert isinstance(error, ModelConnectionError)
    assert len(server.requests) == 1


async def test_response_failed_is_an_error_with_its_detail() -> None:
    failed = {"type": "response.failed", "response": {"error": {"code": "invalid_prompt", "message": "bad prompt"}}}
    async with ChatServer() as server:
        server.add(Reply(body=[created(), ev(failed)]))
        _, error = await collect_until_error(make_model(server))
    assert isinstance(error, ModelResponseError)
    assert "invalid_prompt" in str(error)
    assert not error.retryable


async def test_an_in_band_rate_limit_before_output_is_retried_a_quota_error_is_not() -> None:
    rate_limited = ev({"type": "error", "code": "rate_limit_exceeded", "message": "Rate limit reached"})
    quota = ev({"type": "error", "code": "insufficient_quota", "message": "You exceeded your current quota"})
    async with ChatServer() as server:
        server.add(Reply(body=[created(), rate_limited]))
        server.add(Reply(body=[created(), *message(0, "m", "ok"), completed()]))
        events = await collect(make_model(server))
        assert TextDelta("ok") in events
        server.add(Reply(body=[created(), quota]))
        server.add(Reply(body=[created(), *message(0, "m", "never"), completed()]))
        _, error = await collect_until_error(make_model(server))
    assert isinstance(error, ModelResponseError)
    assert "insufficient_quota" in str(error)
    assert len(server.requests) == 3


async def test_429_waits_as_retry_after_says_and_4xx_is_not_retried() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async with ChatServer() as server:
        server.add(Reply(429, [b'{"error": {"code": "rate_limit_exceeded"}}'], headers={"retry-after-ms": "1500"}))
        server.add(Reply(body=[created(), *message(0, "m", "ok"), completed()]))
        server.add(Reply(401, [b'{"error": {"message": "Incorrect API key provided"}}']))
        model = make_model(server, sleep=sleep)
        assert TextDelta("ok") in await collect(model)
        with pytest.raises(ModelHTTPError) as info:
            await collect(model)
    assert waits == [1.5]
    assert info.value.status_code == 401
    assert "Incorrect API key" in info.value.body
    assert len(server.requests) == 3


# -- cases of our own, judged by the real @ai-sdk/openai and ai@7 ------------------


def _oracle_cases() -> list[Any]:
    failed_search = {"id": "ws_1", "type": "web_search_call", "status": "failed", "action": None}
    refused = {"id": "msg", "type": "message"}
    return [
        pytest.param(
            [
                created(),
                *reasoning(0, "rs_1", ["Plan.", "More."], "enc"),
                *message(1, "m", "Cut o"),
                completed(reason="max_output_tokens", output_tokens_details={"reasoning_tokens": 3}),
            ],
            (),
            id="incomplete-after-two-summaries",
        ),
        pytest.param(
            [
                created(),
                *reasoning(0, "rs_1", [], "enc-empty"),
                *function_call(1, "call_a", "get_weather", '{"city":', ' "Oslo"}'),
                *function_call(2, "call_b", "get_weather", "{}"),
                completed(input_tokens_details={"cached_tokens": 4}),
            ],
            ("get_weather",),
            id="parallel-calls-after-empty-reasoning",
        ),
        pytest.param(
            [
                created(),
                ev({"type": "response.output_item.added", "output_index": 0, "item": refused}),
                ev({"type": "response.refusal.delta", "output_index": 0, "item_id": "msg", "delta": "I can't help"}),
                ev({"type": "response.refusal.delta", "output_index": 0, "item_id": "msg", "delta": " with that."}),
                ev({"type": "response.output_item.done", "output_index": 0, "item": refused}),
                completed(),
            ],
            (),
            id="refusal",
        ),
        pytest.param(
            [
                created(),
                ev({"type": "response.output_item.added", "output_index": 0, "item": failed_search}),
                ev({"type": "response.output_item.done", "output_index": 0, "item": failed_search}),
                *message(1, "m", "No results."),
                completed(),
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
    ours = await run_case(_peer_model, raw)
    theirs = oracle(node, "openai-responses", raw, tmp_path, tools)
    assert ours.error is None
    assert ours.text == theirs["text"]
    assert ours.finish == theirs["finishReason"]
    usage = ours.usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens) == (
        theirs["usage"]["inputTokens"],
        theirs["usage"]["outputTokens"],
    )
    assert (usage.cached_input_tokens or 0) == theirs["usage"]["inputTokenDetails"]["cacheReadTokens"]
    assert normalized(ours.message, set()) == normalized(theirs["message"], set())


def _peer_model(base_url: str) -> OpenAIResponsesModel:
    return OpenAIResponsesModel("peer-model", base_url=base_url, api_key="k", max_retries=0)


@pytest.mark.parametrize(
    ("store", "encrypted", "sent"),
    [
        (False, None, []),
        (True, None, [{"type": "item_reference", "id": "rs_x"}]),
        (True, "enc", [{"type": "item_reference", "id": "rs_x"}]),
    ],
)
async def test_reasoning_goes_back_only_in_a_form_the_api_can_find(
    store: bool, encrypted: str | None, sent: list[dict[str, Any]]
) -> None:
    """Not stored and without its encrypted content, a reasoning item sent
    back by id alone is an error ("not found"); stored, a reference is
    enough."""
    async with ChatServer() as server:
        server.add(
            Reply(
                body=[
                    created(),
                    *reasoning(0, "rs_x", ["Think."], encrypted),
                    *function_call(1, "call_x", "f", "{}"),
                    completed(),
                ]
            )
        )
        model = make_model(server, store=store)
        await collect(model)
    items = model.input_items([AssistantMessage("", (ToolCallRequest("call_x", "f", "{}"),), "Think.")])
    assert items[:-1] == sent


@pytest.mark.parametrize("store", [False, True])
async def test_reasoning_goes_back_from_stored_history_in_another_process(store: bool) -> None:
    """The step is stored as the browser builds it (encoder → reader) and
    sent by a model that never streamed it (an empty replay memory): the
    reasoning item goes back, its summary parts joined into one item."""
    from uistream_app.protocol.ui.encoder import UIMessageEncoder
    from uistream_app.protocol.ui.reader import UIMessageReader
    from uistream_app.protocol.ui.stream import aencode_events
    from uistream_app.runs import ui_to_model_messages
    from uistream_app.runs._memory import ReplayMemory

    @tool(requires_approval=True, run_sync_in_thread=False)
    def send_email(to: str) -> str:
        """Send an email."""
        return f"sent to {to}"

    user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "email ada"}]}
    async with ChatServer() as server:
        server.add(
            Reply(
                body=[
                    created(),
                    *reasoning(0, "rs_stored", ["Ada wants mail.", "Ask first."], "enc-stored"),
                    *function_call(1, "call_mail", "send_email", '{"to": "ada@example.com"}'),
                    completed(),
                ]
            )
        )
        first = make_model(server, store=store)
        first.memory = ReplayMemory()
        reader = UIMessageReader(message_id="a1")
        run = ToolLoop(first, [send_email]).run(ui_to_model_messages([user]))
        async for chunk in aencode_events(run, UIMessageEncoder("a1")):
            reader.feed(chunk)
    other_process = OpenAIResponsesModel("gpt-test", api_key="sk-test", store=store)
    other_process.memory = ReplayMemory()
    items = other_process.input_items(ui_to_model_messages([user, reader.message]))
    expected = (
        {"type": "item_reference", "id": "rs_stored"}
        if store
        else {
            "type": "reasoning",
            "id": "rs_stored",
            "summary": [
                {"type": "summary_text", "text": "Ada wants mail."},
                {"type": "summary_text", "text": "Ask first."},
            ],
            "encrypted_content": "enc-stored",
        }
    )
    assert items[1:] == [
        expected,
        {
            "type": "function_call",
            "call_id": "call_mail",
            "name": "send_email",
            "arguments": '{"to": "ada@example.com"}',
        },
    ]
