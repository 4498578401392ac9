"""``OpenAIResponsesModel`` over every Responses stream of the corpus
(``providers_responses.json``): what we extract, and the message the real
client builds from our chunks, equal what ``@ai-sdk/openai`` and ai@7 make
of the same bytes."""

from __future__ import annotations

from typing import Any

import pytest

from uistream_app.protocol.events import ReasoningEnd, SourceDocument, SourceUrl, ToolApprovalRequest, ToolResult
from uistream_app.runs.openai import OpenAIResponsesModel

from .provider_peers import body_of, comparable, ended_in_error, expected_usage, our_usage, params, run_case

pytestmark = pytest.mark.asyncio

#: Part keys left out of the message comparison: the corpus records the
#: parts without their provider metadata (``providerMetadata``,
#: ``callProviderMetadata``, ``resultProviderMetadata``) and without the
#: ``output`` of provider-executed tools; tests/runs/test_provider_parts.py
#: compares those against the live @ai-sdk packages instead. Citations and
#: custom parts are compared here.
DROP_KEYS = frozenset({"providerMetadata", "callProviderMetadata", "resultProviderMetadata", "output"})
GENERATED = "<generated>"


def make_model(base_url: str) -> OpenAIResponsesModel:
    return OpenAIResponsesModel("peer-model", base_url=base_url, api_key="sk-test", max_retries=0)


def normalized(message: dict[str, Any], generated: set[str]) -> list[dict[str, Any]]:
    """Our ids for calls the oracle numbered itself read as its
    ``<generated>``, as do source ids. Source parts are compared in their
    own order after the others: where ai@7 files a source among a step's
    parts differs from where the encoder does when a source arrives
    inside a text (a listed difference; which sources, and their order,
    are compared)."""
    parts, sources = [], []
    for part in comparable(message, drop=DROP_KEYS):
        if part.get("toolCallId") in generated:
            part["toolCallId"] = GENERATED
        if part.get("state") == "streaming":
            # A listed difference: a response that completes with a message
            # item never closed leaves ai@7's text part "streaming"; the
            # encoder closes open parts when the message ends.
            part["state"] = "done"
        if part.get("type", "").startswith("source-"):
            part["sourceId"] = GENERATED
            sources.append(part)
        else:
            parts.append(part)
    return parts + sources


@pytest.mark.parametrize("case", params("providers_responses.json"))
async def test_a_recorded_stream_yields_what_the_ai_sdk_yields(case: dict[str, Any]) -> None:
    expect = case["expect"]
    outcome = await run_case(make_model, body_of(case))
    if ended_in_error(outcome, expect):
        return
    generated = {c.tool_call_id for c in outcome.tool_calls if c.tool_call_id.startswith("mcpcall_")}
    calls = [
        (GENERATED if c.tool_call_id in generated else c.tool_call_id, c.tool_name, c.input) for c in outcome.tool_calls
    ]
    assert calls == [(c["toolCallId"], c["toolName"], c["input"]) for c in expect["toolCalls"]]
    results = [
        (r.tool_call_id, r.tool_name, r.is_error)
        for r in outcome.events
        if isinstance(r, ToolResult) and not r.preliminary
    ]
    expected_results = [
        (r["toolCallId"], r["toolName"], r["isError"]) for r in expect["toolResults"] or [] if not r["preliminary"]
    ]
    assert results == expected_results
    approvals = [(a.approval_id, GENERATED) for a in outcome.events if isinstance(a, ToolApprovalRequest)]
    assert approvals == [(a["approvalId"], a["toolCallId"]) for a in expect["approvals"] or []]
    sources = []
    for s in outcome.events:
        if isinstance(s, SourceUrl):
            sources.append({"sourceType": "url", "url": s.url, **({"title": s.title} if s.title else {})})
        elif isinstance(s, SourceDocument):
            sources.append(
                {"sourceType": "document", "title": s.title, "mediaType": s.media_type, "filename": s.filename}
            )
    assert sources == (expect["sources"] or [])
    opaque = []
    for event in outcome.events:
        if isinstance(event, ReasoningEnd) and event.provider_metadata:
            value = event.provider_metadata["openai"].get("reasoningEncryptedContent")
            if value is not None:
                opaque.append({"kind": "encryptedContent", "value": value})
    assert opaque == (expect["reasoningOpaque"] or [])
    assert outcome.finish == expect["finishReason"]["unified"]
    assert our_usage(outcome.usage) == expected_usage(expect["usage"])
    theirs = expect["uiMessage"]["message"]
    if theirs is None:
        # A listed difference: ai@7 fails the whole message on these bodies
        # (a result for a call made in an earlier response, or a text-end
        # for a message item whose text-start it never got); our encoder
        # keeps the message well formed and the rest of it stands.
        assert expect["uiMessage"]["error"]
        return
    assert normalized(outcome.message, generated) == normalized(theirs, set())
