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

from uistream_app.runs.anthropic import AnthropicModel
from uistream_app.runs.ui_messages import ui_to_model_messages

from .provider_peers import body_of, load, oracle, oracle_request, run_case

pytestmark = [pytest.mark.asyncio, pytest.mark.node]

USER = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
NEXT = {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "go on"}]}

#: The corpus cases whose message holds a provider-run tool, a citation or
#: a custom part the next request carries.
ANTHROPIC_CASES = (
    "anthropic-anthropic-web-search-tool.1-f0073b",
    "anthropic-anthropic-code-execution-20250825.1-7ffa97",
    "anthropic-anthropic-code-execution-20260120-prompt-cache.1-7b6c75",
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
