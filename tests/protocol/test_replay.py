"""``replay_message``: stored message → chunks → the reader (and the real
ai@7 client) → the same message."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from uistream_app.protocol.ui.chunks import validate_chunk
from uistream_app.protocol.ui.reader import UIMessageReader, read_ui_message
from uistream_app.protocol.ui.replay import MessageReplayError, replay_message

JS_DIR = Path(__file__).resolve().parents[1] / "js"

PM = {"anthropic": {"signature": "sig-1"}}
PM2 = {"openai": {"itemId": "it-2"}}

# A stored message with every part kind and every tool state, each in the
# shape the SDK builds it (written from process-ui-message-stream.ts).
EVERY_KIND: dict[str, Any] = {
    "id": "msg-1",
    "role": "assistant",
    "metadata": {"model": "demo", "usage": {"inputTokens": 3}},
    "parts": [
        {"type": "data-status", "id": "status", "data": {"phase": "thinking"}},
        {"type": "step-start"},
        {"type": "reasoning", "id": "rs_1", "text": "Let me think.", "providerMetadata": PM, "state": "done"},
        {"type": "reasoning", "id": "reasoning-1", "text": "", "state": "done"},
        {"type": "text", "text": "Checking.", "state": "done", "citations": [{"type": "url", "url": "https://a"}]},
        {"type": "text", "text": "", "providerMetadata": PM2, "state": "done"},
        {
            "type": "tool-get_weather",
            "toolCallId": "c1",
            "state": "output-available",
            "title": "Weather",
            "toolMetadata": {"k": 1},
            "input": {"city": "Paris"},
            "output": {"temp": 21},
            "providerExecuted": True,
            "callProviderMetadata": PM,
            "resultProviderMetadata": PM2,
        },
        {
            "type": "dynamic-tool",
            "toolName": "mcp_lookup",
            "toolCallId": "c2",
            "state": "input-available",
            "input": {"q": "x"},
        },
        {
            "type": "tool-send_email",
            "toolCallId": "c3",
            "state": "approval-requested",
            "input": {"to": "a@b"},
            "approval": {
                "id": "ap3",
                "descriptor": {"d": 1},
                "inputSchemaInput": None,
                "requestReason": "sends mail",
                "isAutomatic": True,
                "signature": "sig",
            },
        },
        {
            "type": "tool-send_email",
            "toolCallId": "c4",
            "state": "approval-responded",
            "input": {"to": "c@d"},
            "approval": {"id": "ap4", "approved": True, "reason": "fine"},
        },
        {
            "type": "tool-send_email",
            "toolCallId": "c5",
            "state": "output-denied",
            "input": {"to": "e@f"},
            "approval": {"id": "ap5", "approved": False, "reason": "no"},
        },
        {
            "type": "tool-send_email",
            "toolCallId": "c6",
            "state": "output-available",
            "input": {"to": "g@h"},
            "output": "sent",
            "approval": {"id": "ap6", "approved": True},
        },
        {"type": "data-status", "data": "no id"},
        {"type": "step-start"},
        {
            "type": "tool-calc",
            "toolCallId": "c7",
            "state": "output-error",
            "input": "1 +",
            "errorText": "Invalid input",
        },
        {
            "type": "tool-calc",
            "toolCallId": "c8",
            "state": "output-error",
            "input": {"expr": "1/"},
            "rawInput": '{"expr":"1/',
            "errorText": "boom",
            "resultProviderMetadata": PM,
        },
        {
            "type": "dynamic-tool",
            "toolName": "mcp_fail",
            "toolCallId": "c9",
            "state": "output-error",
            "errorText": "timeout",
        },
        {
            "type": "tool-search",
            "toolCallId": "c10",
            "state": "output-available",
            "input": {"q": "x"},
            "output": {"hits": 1},
            "preliminary": True,
        },
        {"type": "tool-x", "toolCallId": "c14", "state": "output-denied", "input": {}},
        {"type": "source-url", "sourceId": "s1", "url": "https://a", "title": "A", "providerMetadata": PM},
        {
            "type": "source-document",
            "sourceId": "s2",
            "mediaType": "application/pdf",
            "title": "D",
            "filename": "d.pdf",
        },
        {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,AA", "providerMetadata": PM},
        {"type": "reasoning-file", "mediaType": "image/png", "url": "https://f"},
        {"type": "custom", "kind": "openai.compaction"},
        {"type": "steering-message", "id": "u2", "parts": [{"type": "text", "text": "also"}]},
        {"type": "data-flag", "data": None, "transient": False},
        {"type": "step-start"},
        {
            "type": "tool-get_weather",
            "toolCallId": "c11",
            "state": "input-streaming",
            "input": {"city": "Ber"},
            "rawInput": '{"city":"Ber',
        },
        {
            "type": "tool-sql",
            "toolCallId": "c12",
            "state": "input-streaming",
            "input": "SELECT",
            "inputEncoding": "text",
            "rawInput": "SELECT",
        },
        {"type": "tool-noop", "toolCallId": "c13", "state": "input-streaming", "title": "Noop"},
        {"type": "reasoning", "id": "rs_2", "text": "still", "providerMetadata": PM, "state": "streaming"},
        {"type": "text", "text": "Half an ans", "state": "streaming"},
    ],
}


def test_a_small_message_replays_to_the_canonical_chunks() -> None:
    message = {
        "id": "m",
        "role": "assistant",
        "metadata": {"a": 1},
        "parts": [
            {"type": "step-start"},
            {"type": "reasoning", "id": "rs", "text": "hm", "providerMetadata": PM, "state": "done"},
            {"type": "text", "text": "Hi", "state": "done"},
            {
                "type": "tool-get_weather",
                "toolCallId": "c1",
                "state": "output-available",
                "input": {"city": "Oslo"},
                "output": {"t": 1},
            },
            {"type": "step-start"},
            {"type": "text", "text": "Bye", "state": "streaming"},
        ],
    }
    assert replay_message(message, finish_reason="stop") == [
        {"type": "start", "messageId": "m", "messageMetadata": {"a": 1}},
        {"type": "start-step"},
        {"type": "reasoning-start", "id": "rs"},
        {"type": "reasoning-delta", "id": "rs", "delta": "hm"},
        {"type": "reasoning-end", "id": "rs", "providerMetadata": PM},
        {"type": "text-start", "id": "text-0"},
        {"type": "text-delta", "id": "text-0", "delta": "Hi"},
        {"type": "text-end", "id": "text-0"},
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": "get_weather"},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"city":"Oslo"}'},
        {"type": "tool-output-available", "toolCallId": "c1", "output": {"t": 1}},
        {"type": "finish-step"},
        {"type": "start-step"},
        {"type": "text-start", "id": "text-1"},
        {"type": "text-delta", "id": "text-1", "delta": "Bye"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop"},
    ]


def test_every_part_kind_and_tool_state_round_trips() -> None:
    chunks = replay_message(EVERY_KIND)
    for chunk in chunks:
        validate_chunk(chunk)
    # every chunk kind a stored message can need
    assert {c["type"] for c in chunks} == {
        "start", "start-step", "finish-step", "finish",
        "reasoning-start", "reasoning-delta", "reasoning-end", "text-start", "text-delta", "text-end",
        "tool-input-start", "tool-input-delta", "tool-input-available", "tool-input-error",
        "tool-approval-request", "tool-approval-response",
        "tool-output-available", "tool-output-error", "tool-output-denied",
        "source-url", "source-document", "file", "reasoning-file", "custom", "steering-message",
        "data-status", "data-flag",
    }  # fmt: skip
    assert read_ui_message(chunks) == EVERY_KIND
    assert replay_message(EVERY_KIND) == chunks  # deterministic


def test_each_part_round_trips_on_its_own() -> None:
    for part in EVERY_KIND["parts"]:
        message = {"id": "m", "role": "assistant", "parts": [part]}
        assert read_ui_message(replay_message(message)) == message, part


def test_an_empty_message_is_start_and_finish() -> None:
    message = {"id": "m", "role": "assistant", "parts": []}
    assert replay_message(message) == [{"type": "start", "messageId": "m"}, {"type": "finish"}]
    assert read_ui_message(replay_message(message)) == message


def test_ids_are_counted_per_kind() -> None:
    message = {
        "id": "m",
        "role": "assistant",
        "parts": [
            {"type": "text", "text": "a", "state": "done"},
            {"type": "reasoning", "text": "r", "state": "done"},
            {"type": "text", "text": "b", "state": "done"},
            {"type": "reasoning", "text": "s", "state": "done"},
        ],
    }
    starts = [c["id"] for c in replay_message(message) if c["type"].endswith("-start")]
    assert starts == ["text-0", "reasoning-0", "text-1", "reasoning-1"]
    # A reasoning part without its id comes back with the one it was sent with.
    rebuilt = read_ui_message(replay_message(message))
    assert [p.get("id") for p in rebuilt["parts"]] == [None, "reasoning-0", None, "reasoning-1"]


def test_parts_with_results_never_pass_through_tool_input_available() -> None:
    # useChat runs onToolCall on tool-input-available: a replayed finished
    # call must not run again in the browser.
    chunks = replay_message(EVERY_KIND)
    available = {c["toolCallId"] for c in chunks if c["type"] == "tool-input-available"}
    finished = {
        p["toolCallId"]
        for p in EVERY_KIND["parts"]
        if p["type"].startswith(("tool-", "dynamic-tool")) and p["state"] in ("output-available", "output-error")
    }
    assert finished
    assert not available & finished


def test_an_input_the_sdk_parser_would_reject_falls_back_to_tool_input_available() -> None:
    part = {
        "type": "tool-t",
        "toolCallId": "c1",
        "state": "output-available",
        "input": {"__proto__": {"x": 1}},
        "output": 1,
    }
    message = {"id": "m", "role": "assistant", "parts": [part]}
    chunks = replay_message(message)
    assert [c["type"] for c in chunks if c["type"].startswith("tool-")] == [
        "tool-input-start",
        "tool-input-available",
        "tool-output-available",
    ]
    assert read_ui_message(chunks) == message


def test_documented_losses() -> None:
    message = {
        "id": "m",
        "role": "assistant",
        "metadata": None,
        "createdAt": "2025-01-01",
        "parts": [
            {"type": "text", "text": "no state"},
            {"type": "file", "mediaType": "text/plain", "url": "data:,x", "filename": "x.txt"},
            {"type": "data-x", "data": 1, "transient": True},
        ],
    }
    assert read_ui_message(replay_message(message)) == {
        "id": "m",
        "role": "assistant",
        "parts": [
            {"type": "text", "text": "no state", "state": "done"},
            {"type": "file", "mediaType": "text/plain", "url": "data:,x"},
            {"type": "data-x", "data": 1},
        ],
    }


def test_what_cannot_be_replayed_raises() -> None:
    with pytest.raises(MessageReplayError, match="assistant"):
        replay_message({"id": "u", "role": "user", "parts": []})
    with pytest.raises(MessageReplayError, match="no-such-part"):
        replay_message({"id": "m", "role": "assistant", "parts": [{"type": "no-such-part"}]})
    with pytest.raises(MessageReplayError, match="unknown state"):
        replay_message({"id": "m", "role": "assistant", "parts": [{"type": "tool-t", "toolCallId": "c", "state": "x"}]})


def test_a_read_stream_replays_to_the_same_message() -> None:
    stream = [
        {"type": "start", "messageId": "m", "messageMetadata": {"a": 1}},
        {"type": "start-step"},
        {"type": "reasoning-start", "id": "reasoning-0"},
        {"type": "reasoning-delta", "id": "reasoning-0", "delta": "Weather?"},
        {"type": "reasoning-end", "id": "reasoning-0"},
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": "get_weather"},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"city":'},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": ' "Oslo"}'},
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "get_weather", "input": {"city": "Oslo"}},
        {"type": "tool-output-available", "toolCallId": "c1", "output": {"t": -3}},
        {"type": "finish-step"},
        {"type": "start-step"},
        {"type": "text-start", "id": "text-0"},
        {"type": "text-delta", "id": "text-0", "delta": "Cold."},
        {"type": "text-end", "id": "text-0"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop", "messageMetadata": {"b": 2}},
    ]
    message = read_ui_message(stream)
    assert read_ui_message(replay_message(message)) == message


# -- generated messages ------------------------------------------------------------

_KEYS = st.text(max_size=5) | st.sampled_from(["__proto__", "constructor", "prototype"])
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=8,
)
SAFE_JSON = JSON.filter(lambda v: not _forbidden(v))
OBJECTS = st.dictionaries(st.text(max_size=5), JSON, max_size=3)
PROVIDER_METADATA = st.dictionaries(st.sampled_from(["openai", "anthropic"]), OBJECTS, min_size=1, max_size=2)
TOOL_STATES = [
    "input-streaming",
    "input-available",
    "approval-requested",
    "approval-responded",
    "output-available",
    "output-error",
    "output-denied",
]


def _forbidden(value: Any) -> bool:
    """Keys the SDK's JSON parser rejects (secure-json-parse)."""
    if isinstance(value, dict):
        if "__proto__" in value or (isinstance(value.get("constructor"), dict) and "prototype" in value["constructor"]):
            return True
        return any(_forbidden(v) for v in value.values())
    if isinstance(value, list):
        return any(_forbidden(v) for v in value)
    return False


def _maybe(draw: st.DrawFn, part: dict[str, Any], key: str, strategy: st.SearchStrategy[Any]) -> None:
    if draw(st.booleans()):
        part[key] = draw(strategy)


def _approval(draw: st.DrawFn, i: int, approved: bool | None) -> dict[str, Any]:
    approval: dict[str, Any] = {"id": f"ap-{i}"}
    _maybe(draw, approval, "descriptor", JSON.filter(lambda v: v is not None))
    _maybe(draw, approval, "inputSchemaInput", JSON)
    _maybe(draw, approval, "requestReason", st.text(max_size=6))
    if draw(st.booleans()):
        approval["isAutomatic"] = True
    _maybe(draw, approval, "signature", st.text(max_size=6))
    if approved is not None:
        approval["approved"] = approved
        _maybe(draw, approval, "reason", st.text(max_size=6))
    return approval


@st.composite
def tool_parts(draw: st.DrawFn, i: int) -> dict[str, Any]:
    dynamic = draw(st.booleans())
    name = draw(st.sampled_from(["get_weather", "calc", "my-tool", "a-b-c"]))
    part: dict[str, Any] = {"type": "dynamic-tool", "toolName": name} if dynamic else {"type": f"tool-{name}"}
    part["toolCallId"] = f"call-{i}"
    state = draw(st.sampled_from(TOOL_STATES))
    part["state"] = state
    _maybe(draw, part, "title", st.text(max_size=6))
    _maybe(draw, part, "toolMetadata", OBJECTS)
    _maybe(draw, part, "providerExecuted", st.booleans())
    _maybe(draw, part, "callProviderMetadata", PROVIDER_METADATA)
    if state == "input-streaming":
        how = draw(st.sampled_from(["nothing", "json", "text"]))
        if how == "json":
            value = draw(SAFE_JSON)
            part["input"] = value
            part["rawInput"] = json.dumps(value)
        elif how == "text":
            part["inputEncoding"] = "text"
            part["input"] = part["rawInput"] = draw(st.text(max_size=10))
    elif state == "input-available":
        part["input"] = draw(JSON)
    elif state in ("approval-requested", "approval-responded", "output-denied"):
        how = draw(st.sampled_from(["input", "none", "raw", "failed"]))
        if how == "input":
            part["input"] = draw(JSON)
        elif how == "failed":  # an odd history: tool-input-error, then an approval
            part["input"] = draw(JSON)
            part["errorText"] = draw(st.text(max_size=8))
            _maybe(draw, part, "resultProviderMetadata", PROVIDER_METADATA)
        elif how == "raw":  # approved or denied while its input still streamed
            value = draw(SAFE_JSON)
            part["input"] = value
            part["rawInput"] = json.dumps(value)
        responded = {"approval-requested": None, "approval-responded": draw(st.booleans()), "output-denied": False}
        if state != "output-denied" or draw(st.booleans()):
            part["approval"] = _approval(draw, i, responded[state])
    elif state == "output-available":
        _maybe(draw, part, "input", JSON)
        part["output"] = draw(JSON)
        _maybe(draw, part, "preliminary", st.booleans())
        _maybe(draw, part, "resultProviderMetadata", PROVIDER_METADATA)
        if draw(st.booleans()):
            part["approval"] = _approval(draw, i, draw(st.sampled_from([None, True])))
    else:  # output-error
        how = draw(st.sampled_from(["input", "raw", "none"]))
        if how == "input":
            part["input"] = draw(JSON)
        elif how == "raw" and not dynamic:
            value = draw(SAFE_JSON)
            part["input"] = value
            part["rawInput"] = json.dumps(value)
        part["errorText"] = draw(st.text(max_size=8))
        _maybe(draw, part, "resultProviderMetadata", PROVIDER_METADATA)
        if draw(st.booleans()):
            part["approval"] = _approval(draw, i, True)
    return part


@st.composite
def other_parts(draw: st.DrawFn, i: int) -> dict[str, Any]:
    kind = draw(
        st.sampled_from(
            ["step-start", "text", "reasoning", "data", "source-url", "source-document", "file", "custom", "steering"]
        )
    )
    part: dict[str, Any]
    if kind == "step-start":
        return {"type": "step-start"}
    if kind in ("text", "reasoning"):
        part = {"type": kind, "text": draw(st.text(max_size=12)), "state": draw(st.sampled_from(["streaming", "done"]))}
        if kind == "reasoning":
            part["id"] = f"rs-{i}"
        _maybe(draw, part, "providerMetadata", PROVIDER_METADATA)
        if kind == "text" and part["state"] == "done":
            _maybe(draw, part, "citations", st.lists(OBJECTS, max_size=2))
        return part
    if kind == "data":
        part = {"type": f"data-{draw(st.sampled_from(['weather', 'x', 'a-b']))}", "data": draw(JSON)}
        _maybe(draw, part, "id", st.just(f"d-{i}"))
        _maybe(draw, part, "transient", st.just(False))
        return part
    if kind == "source-url":
        part = {"type": kind, "sourceId": f"s-{i}", "url": draw(st.text(max_size=8))}
        _maybe(draw, part, "title", st.text(max_size=6))
    elif kind == "source-document":
        part = {"type": kind, "sourceId": f"s-{i}", "mediaType": "application/pdf", "title": draw(st.text(max_size=6))}
        _maybe(draw, part, "filename", st.text(max_size=6))
    elif kind == "file":
        part = {"type": draw(st.sampled_from(["file", "reasoning-file"])), "mediaType": "image/png", "url": "https://f"}
    elif kind == "custom":
        part = {"type": "custom", "kind": "openai.compaction"}
    else:
        return {
            "type": "steering-message",
            "id": f"u-{i}",
            "parts": [{"type": "text", "text": draw(st.text(max_size=6))}],
        }
    _maybe(draw, part, "providerMetadata", PROVIDER_METADATA)
    return part


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    parts = []
    for i in range(draw(st.integers(min_value=0, max_value=10))):
        parts.append(draw(tool_parts(i) if draw(st.booleans()) else other_parts(i)))
    message: dict[str, Any] = {"id": draw(st.text(max_size=6)), "role": "assistant"}
    _maybe(draw, message, "metadata", JSON.filter(lambda v: v is not None))
    message["parts"] = parts
    return message


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages())
def test_generated_messages_round_trip(message: dict[str, Any]) -> None:
    chunks = replay_message(message)
    reader = UIMessageReader(validate=True)  # every chunk must fit the ai@7 schema
    reader.feed_all(chunks)
    assert reader.message == message
    assert reader.error_text is None


# -- the real client -------------------------------------------------------------------

_NODE_READ = """
import { readUIMessageStream } from 'ai7';
const cases = JSON.parse(await new Promise(r => { let s = ''; process.stdin.on('data', d => s += d);
  process.stdin.on('end', () => r(s)); }));
const out = [];
for (const chunks of cases) {
  const stream = new ReadableStream({ start(ctrl) { for (const ch of chunks) ctrl.enqueue(ch); ctrl.close(); } });
  let error = null; let last = null;
  for await (const m of readUIMessageStream({ stream, onError: e => { error = error ?? e.message; } })) last = m;
  out.push({ message: last, error });
}
process.stdout.write(JSON.stringify(out));
"""


@pytest.mark.node
def test_the_real_ai7_client_rebuilds_the_stored_message(node: str) -> None:
    stored = [EVERY_KIND] + [{"id": "m", "role": "assistant", "parts": [part]} for part in EVERY_KIND["parts"]]
    # readUIMessageStream snapshots only on writes: end on a chunk that writes
    cases = [[*replay_message(m), {"type": "data-probe", "data": None}] for m in stored]
    done = subprocess.run(
        [node, "--input-type=module", "-e", _NODE_READ],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        cwd=JS_DIR,
        check=True,
    )
    for message, theirs in zip(stored, json.loads(done.stdout), strict=True):
        assert theirs["error"] is None
        rebuilt = theirs["message"]
        assert rebuilt["parts"].pop() == {"type": "data-probe", "data": None}
        assert rebuilt == message
