"""Issue 32's provider parts, end to end against the AI SDK's own provider
packages: what a recorded response becomes in the stored message (the
citations, the provider metadata of text, reasoning and calls, the
results of the tools the provider ran, its custom parts) equals what
ai@7 builds from the same bytes; and the next request we make from that
stored message equals the one ``@ai-sdk/anthropic`` /
``@ai-sdk/openai`` make from theirs (``convertToModelMessages`` + the
provider's request body, tests/js/provider_oracle.mjs ``request``).

The bodies are the recorded responses of the corpus (docs/protocols.md,
"Recorded provider streams") that hold provider-run tools or citations,
served from 127.0.0.1 as they were recorded.
"""

from __future__ import annotations

from typing import Any

import pytest

from uistream_app.protocol.ui.encoder import UIMessageEncoder
from uistream_app.protocol.ui.reader import read_ui_message
from uistream_app.protocol.ui.stream import encode_events
from uistream_app.runs.anthropic import AnthropicModel
from uistream_app.runs.openai import OpenAIResponsesModel
from uistream_app.runs.ui_messages import ui_to_model_messages

from .chat_server import ChatServer, Reply
from .provider_peers import body_of, load, oracle, oracle_request, run_case

pytestmark = [pytest.mark.asyncio, pytest.mark.node]

USER = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
NEXT = {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "go on"}]}

#: The corpus cases whose message holds a provider-run tool, a citation or
#: a custom part the next request carries.
#: (Each case runs Node twice; the set is kept to one case per kind of
#: block that goes back.)
ANTHROPIC_CASES = (
    "anthropic-anthropic-web-search-tool.1-f0073b",
    "anthropic-anthropic-code-execution-20250825.1-7ffa97",
    "anthropic-anthropic-web-fetch-tool.1-045d4a",
    "anthropic-anthropic-mcp.1-026563",
    "anthropic-anthropic-tool-search-regex.1#1-cbb40b",
    "anthropic-anthropic-fallback-3e5430",
)


def cases(name: str, ids: tuple[str, ...]) -> list[Any]:
    data = load(name)
    if data is None:
        return [pytest.param(None, id="corpus-absent", marks=pytest.mark.skip(reason="the corpus is absent"))]
    by_id = {c["id"]: c for c in [*data["cases"], *data.get("inline", {}).get("cases", [])]}
    return [pytest.param(by_id[i], id=i) for i in ids]


def without_ids(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The parts without the ids each side makes up (text and reasoning
    part ids, source ids, and the ids inside a citation's source that
    ai@7 takes from the source)."""
    parts = []
    for part in message["parts"]:
        part = dict(part)
        if part["type"] in ("text", "reasoning"):
            part.pop("id", None)
        if part["type"].startswith("source-"):
            part["sourceId"] = "<generated>"
        if part.get("state") == "streaming":
            part["state"] = "done"
        if part.get("state") == "output-error":
            # Each side words a failed provider tool's error its own way
            # (provider_peers.comparable leaves it out too).
            part.pop("errorText", None)
        parts.append(part)
    return parts


def answered(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with every call the client runs answered (as the
    browser would before the next turn), so a request can follow it."""
    parts = []
    for part in message["parts"]:
        if part["type"].startswith("tool-") and not part.get("providerExecuted") and part["state"] == "input-available":
            part = {**part, "state": "output-available", "output": "done"}
        parts.append(part)
    return {**message, "parts": parts}


def client_tools(message: dict[str, Any]) -> list[str]:
    return sorted(
        {
            p["type"].removeprefix("tool-")
            for p in message["parts"]
            if p["type"].startswith("tool-") and not p.get("providerExecuted")
        }
    )


@pytest.mark.parametrize("case", cases("providers_anthropic.json", ANTHROPIC_CASES))
async def test_an_anthropic_step_with_provider_parts_goes_back_as_the_sdk_sends_it(
    case: dict[str, Any], node: str, tmp_path: Any
) -> None:
    body = body_of(case)
    model = AnthropicModel("peer-model", base_url="http://127.0.0.1:9", api_key="k", max_retries=0)
    outcome = await run_case(lambda url: AnthropicModel("peer-model", base_url=url, api_key="k", max_retries=0), body)
    ours = outcome.message
    theirs = oracle(node, "anthropic", body, tmp_path, client_tools(ours))["message"]
    # The stored message: citations, provider metadata and outputs included.
    assert without_ids(ours) == without_ids(theirs)

    sdk = oracle_request(node, "anthropic", [USER, answered(theirs), NEXT], tmp_path)
    assert sdk["body"] is not None, sdk["errors"]
    sent = model.api_body(ui_to_model_messages([USER, answered(ours), NEXT]), [])
    assert sent["messages"] == sdk["body"]["messages"]


#: A case and whether the conversation is stored server-side (``store``):
#: not stored, a web search goes back as its ``web_search_call`` item and
#: other provider-run tools are left out; stored, each goes back as an
#: ``item_reference``.
RESPONSES_CASES = (
    ("responses-openai-web-search-tool.1-97cc78", False),
    ("responses-openai-web-search-tool.1-97cc78", True),
    ("responses-openai-code-interpreter-tool.1-2a44e1", True),
    ("responses-openai-compaction.1-d6637a", False),
    ("responses-openai-mcp-tool.1-c762ce", True),
)


def responses_cases() -> list[Any]:
    found = cases("providers_responses.json", tuple(dict.fromkeys(i for i, _ in RESPONSES_CASES)))
    if found[0].values[0] is None:
        return [pytest.param(None, False, id="corpus-absent", marks=found[0].marks)]
    by_id = {p.id: p.values[0] for p in found}
    return [
        pytest.param(by_id[i], store, id=f"{i}-{'stored' if store else 'not-stored'}") for i, store in RESPONSES_CASES
    ]


@pytest.mark.parametrize(("case", "store"), responses_cases())
async def test_a_responses_step_with_provider_parts_goes_back_as_the_sdk_sends_it(
    case: dict[str, Any], store: bool, node: str, tmp_path: Any
) -> None:
    body = body_of(case)
    outcome = await run_case(
        lambda url: OpenAIResponsesModel("peer-model", base_url=url, api_key="k", max_retries=0), body
    )
    ours = outcome.message
    theirs = oracle(node, "openai-responses", body, tmp_path, client_tools(ours))["message"]
    assert without_ids(ours) == without_ids(theirs)

    conversation = [USER, answered(theirs), NEXT]
    sdk = oracle_request(node, "openai-responses", conversation, tmp_path, {"openai": {"store": store}})
    assert sdk["body"] is not None, sdk["errors"]
    model = OpenAIResponsesModel("peer-model", api_key="k", store=store)
    sent = model.api_body(ui_to_model_messages([USER, answered(ours), NEXT]), [])
    assert sent["input"] == without_unfindable_reasoning(sdk["body"]["input"], store)


def without_unfindable_reasoning(items: list[dict[str, Any]], store: bool) -> list[dict[str, Any]]:
    """A listed difference: not stored, ``@ai-sdk/openai`` sends a
    reasoning item that came without encrypted content by its id alone,
    which the API cannot find (it was not stored); we leave it out."""
    if store:
        return items
    return [i for i in items if i.get("type") != "reasoning" or i.get("encrypted_content") is not None]


def approve(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with each call awaiting approval approved, as useChat's
    ``addToolApprovalResponse`` leaves it."""
    parts = []
    for part in message["parts"]:
        if part.get("state") == "approval-requested":
            part = {**part, "state": "approval-responded", "approval": {**part["approval"], "approved": True}}
        parts.append(part)
    return {**message, "parts": parts}


async def test_an_approved_remote_mcp_call_goes_back_and_its_run_lands_on_the_call(node: str, tmp_path: Any) -> None:
    """A recorded pair: the Responses API asks to approve a remote MCP call
    (approval.3); the person approves; the next request carries the
    ``mcp_approval_response`` the SDK sends; the API then runs the call
    (approval.4), and its output lands on the same tool part."""
    data = load("providers_responses.json")
    if data is None:
        pytest.skip("the corpus is absent")
    by_id = {c["id"]: c for c in data["cases"]}
    asked, ran = (
        by_id["responses-openai-mcp-tool-approval.3-2fa038"],
        by_id["responses-openai-mcp-tool-approval.4-836434"],
    )

    def make(url: str) -> OpenAIResponsesModel:
        return OpenAIResponsesModel("peer-model", base_url=url, api_key="k", max_retries=0)

    ours = approve((await run_case(make, body_of(asked))).message)
    theirs = approve(oracle(node, "openai-responses", body_of(asked), tmp_path)["message"])
    (call,) = [p for p in ours["parts"] if p["type"] == "dynamic-tool"]
    assert call["state"] == "approval-responded"

    sdk = oracle_request(node, "openai-responses", [USER, theirs], tmp_path, {"openai": {"store": False}})
    assert sdk["body"] is not None, sdk["errors"]
    conversation = ui_to_model_messages([USER, ours])
    sent = make("http://127.0.0.1:9").api_body(conversation, [])
    assert sent["input"] == without_unfindable_reasoning(sdk["body"]["input"], False)
    assert {"type": "mcp_approval_response", "approval_request_id": call["approval"]["id"], "approve": True} in sent[
        "input"
    ]

    async with ChatServer() as server:
        server.add(Reply(body=[body_of(ran)]))
        events = [e async for e in make(server.base_url).stream(conversation)]
    encoder = UIMessageEncoder(known_tool_calls=[call["toolCallId"]], continues=ours["parts"])
    continued = read_ui_message(encode_events(events, encoder), message=ours)
    (done,) = [p for p in continued["parts"] if p["type"] == "dynamic-tool"]
    assert done["toolCallId"] == call["toolCallId"]
    assert done["state"] == "output-available"
    assert done["output"]["type"] == "call"


async def test_within_a_run_the_next_step_sends_back_what_anthropic_ran(node: str, tmp_path: Any) -> None:
    """The loop's own conversation (not a stored one): a step in which
    Anthropic searched the web, cited a page and called a client tool;
    the next step's request carries the search, its result blocks and the
    cited text, as @ai-sdk/anthropic sends the message the client holds."""
    from uistream_app.runs import ToolLoop, UserMessage, tool

    from . import test_anthropic as a

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    found = [{"type": "web_search_result", "url": "https://a.example/", "title": "A", "encrypted_content": "enc"}]
    citation = {
        "type": "web_search_result_location",
        "url": "https://a.example/",
        "title": "A",
        "cited_text": "Oslo is cold.",
        "encrypted_index": "idx",
    }
    first = [
        a.start(),
        a.block(0, {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}),
        a.delta(0, {"type": "input_json_delta", "partial_json": '{"query": "oslo"}'}),
        a.stop(0),
        a.block(1, {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": found}),
        a.stop(1),
        a.block(2, {"type": "text", "text": ""}),
        a.delta(2, {"type": "text_delta", "text": "It is cold."}),
        a.delta(2, {"type": "citations_delta", "citation": citation}),
        a.stop(2),
        *a.tool_use(3, "toolu_1", "get_weather", '{"city": "Oslo"}'),
        *a.end("tool_use"),
    ]
    async with ChatServer() as server:
        server.add(Reply(body=first))
        server.add(Reply(body=[a.start(), *a.text(0, "Sunny, then."), *a.end()]))
        model = AnthropicModel("peer-model", base_url=server.base_url, api_key="k", max_retries=0)
        events = [e async for e in ToolLoop(model, [get_weather]).run([UserMessage("hi")])]
        second = server.requests[1].json()

    message = read_ui_message(encode_events(events))
    # The client's message up to the second step, as it held it then.
    steps = [i for i, p in enumerate(message["parts"]) if p["type"] == "step-start"]
    held = {**message, "parts": message["parts"][: steps[1]]}
    sdk = oracle_request(node, "anthropic", [USER, held], tmp_path)
    assert sdk["body"] is not None, sdk["errors"]
    assert second["messages"] == sdk["body"]["messages"]
    assert [b["type"] for b in second["messages"][1]["content"]] == [
        "server_tool_use",
        "web_search_tool_result",
        "text",
        "tool_use",
    ]
