"""``UIStreamRenderer`` and ``downgrade``: the bytes each client version gets.

Every downgrade rule of docs/protocols.md has its cases
here, byte for byte. The real clients reading these bytes are proven by the
fixtures (tests/js/fixtures.test.mjs, including the strict 6.0.230/5.0.216).
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

import orjson
import pytest

from uistream_app.protocol.sse import DONE_FRAME, parse_sse
from uistream_app.protocol.ui.chunks import CHUNK_FIELDS
from uistream_app.protocol.ui.render import (
    DENIED_ERROR_TEXT,
    SUPPORTED_SDK_VERSIONS,
    UIStreamRenderer,
    downgrade,
)

PM = {"acme": {"sig": "abc"}}
CITATION = {"source": {"type": "source", "sourceType": "url", "id": "s1", "url": "https://e.x"}}

# (rule, version, chunk, the exact bytes; b"" = not sent)
RULE_CASES: list[tuple[str, int, dict[str, Any], bytes]] = [
    # 1. ai@7: as it is, whatever it is
    (
        "1-text-delta",
        7,
        {"type": "text-delta", "id": "text-0", "delta": 'w\u00f6rld \u2028 "q" \\ \n\t\u2603'},
        # JSON.stringify's bytes: UTF-8 as is (U+2028 too), only " \\ and controls escaped
        b'data: {"type":"text-delta","id":"text-0",'
        b'"delta":"w\xc3\xb6rld \xe2\x80\xa8 \\"q\\" \\\\ \\n\\t\xe2\x98\x83"}\n\n',
    ),
    (
        "1-interrupted",
        7,
        {"type": "finish", "finishReason": "interrupted"},
        b'data: {"type":"finish","finishReason":"interrupted"}\n\n',
    ),
    (
        "1-approval-reason",
        7,
        {"type": "tool-approval-request", "approvalId": "a1", "toolCallId": "c1", "reason": "r", "isAutomatic": True},
        b'data: {"type":"tool-approval-request","approvalId":"a1","toolCallId":"c1",'
        b'"reason":"r","isAutomatic":true}\n\n',
    ),
    ("1-reset-step", 7, {"type": "reset-step"}, b'data: {"type":"reset-step"}\n\n'),
    ("1-unknown-type", 7, {"type": "x-new", "a": None}, b'data: {"type":"x-new","a":null}\n\n'),
    # 2. a type the target does not list, not data-*, is dropped
    ("2-unknown-type-v6", 6, {"type": "x-new"}, b""),
    ("2-unknown-type-v5", 5, {"type": "x-new"}, b""),
    (
        "2-data-v5",
        5,
        {"type": "data-weather", "id": "w1", "data": {"t": 21}, "transient": True},
        b'data: {"type":"data-weather","id":"w1","data":{"t":21},"transient":true}\n\n',
    ),
    ("2-data-null-v6", 6, {"type": "data-x", "data": None}, b'data: {"type":"data-x","data":null}\n\n'),
    # 3. keys the target does not list are stripped; the rest is untouched
    (
        "3-unlisted-key-v6",
        6,
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": "t", "inputEncoding": "text", "title": "T"},
        b'data: {"type":"tool-input-start","toolCallId":"c1","toolName":"t","title":"T"}\n\n',
    ),
    (
        "3-listed-keys-kept-v6",
        6,
        {"type": "start", "messageId": "m1", "messageMetadata": {"a": 1}},
        b'data: {"type":"start","messageId":"m1","messageMetadata":{"a":1}}\n\n',
    ),
    # 4. text-end.citations stripped
    (
        "4-citations-v6",
        6,
        {"type": "text-end", "id": "text-0", "citations": [CITATION], "providerMetadata": PM},
        b'data: {"type":"text-end","id":"text-0","providerMetadata":{"acme":{"sig":"abc"}}}\n\n',
    ),
    (
        "4-citations-v5",
        5,
        {"type": "text-end", "id": "text-0", "citations": []},
        b'data: {"type":"text-end","id":"text-0"}\n\n',
    ),
    # 5. finish reasons outside the target's enum
    (
        "5-interrupted-v6",
        6,
        {"type": "finish", "finishReason": "interrupted", "messageMetadata": {"n": 1}},
        b'data: {"type":"finish","finishReason":"other","messageMetadata":{"n":1}}\n\n',
    ),
    (
        "5-interrupted-v5",
        5,
        {"type": "finish", "finishReason": "interrupted"},
        b'data: {"type":"finish","finishReason":"unknown"}\n\n',
    ),
    (
        "5-unknown-v6",
        6,
        {"type": "finish", "finishReason": "unknown"},
        b'data: {"type":"finish","finishReason":"other"}\n\n',
    ),
    (
        "5-unknown-v5",
        5,
        {"type": "finish", "finishReason": "unknown"},
        b'data: {"type":"finish","finishReason":"unknown"}\n\n',
    ),
    (
        "5-odd-v5",
        5,
        {"type": "finish", "finishReason": "max-steps"},
        b'data: {"type":"finish","finishReason":"other"}\n\n',
    ),
    ("5-stop-v6", 6, {"type": "finish", "finishReason": "stop"}, b'data: {"type":"finish","finishReason":"stop"}\n\n'),
    ("5-no-reason-v5", 5, {"type": "finish"}, b'data: {"type":"finish"}\n\n'),
    # 6. ai@7-only chunk types are dropped
    ("6-reset-step-v6", 6, {"type": "reset-step"}, b""),
    ("6-reset-step-v5", 5, {"type": "reset-step"}, b""),
    ("6-reasoning-file-v6", 6, {"type": "reasoning-file", "url": "data:,", "mediaType": "text/plain"}, b""),
    ("6-reasoning-file-v5", 5, {"type": "reasoning-file", "url": "data:,", "mediaType": "text/plain"}, b""),
    ("6-custom-v6", 6, {"type": "custom", "kind": "acme.x"}, b""),
    ("6-custom-v5", 5, {"type": "custom", "kind": "acme.x"}, b""),
    ("6-steering-v6", 6, {"type": "steering-message", "id": "u1", "parts": []}, b""),
    ("6-steering-v5", 5, {"type": "steering-message", "id": "u1", "parts": []}, b""),
    ("6-approval-response-v6", 6, {"type": "tool-approval-response", "approvalId": "a1", "approved": True}, b""),
    ("6-approval-response-v5", 5, {"type": "tool-approval-response", "approvalId": "a1", "approved": False}, b""),
    # 7. ai@6: inputEncoding stripped
    (
        "7-input-encoding-v6",
        6,
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": "t", "inputEncoding": "json", "dynamic": True},
        b'data: {"type":"tool-input-start","toolCallId":"c1","toolName":"t","dynamic":true}\n\n',
    ),
    # 8. ai@6: approval request keeps approvalId, toolCallId, signature
    (
        "8-approval-request-v6",
        6,
        {
            "type": "tool-approval-request",
            "approvalId": "a1",
            "toolCallId": "c1",
            "approvalDescriptor": {"d": 1},
            "inputSchemaInput": None,
            "reason": "sends mail",
            "isAutomatic": False,
            "signature": "s1",
        },
        b'data: {"type":"tool-approval-request","approvalId":"a1","toolCallId":"c1","signature":"s1"}\n\n',
    ),
    (
        "8-approval-request-plain-v6",
        6,
        {"type": "tool-approval-request", "approvalId": "a1", "toolCallId": "c1"},
        b'data: {"type":"tool-approval-request","approvalId":"a1","toolCallId":"c1"}\n\n',
    ),
    (
        "8-denied-v6",
        6,
        {"type": "tool-output-denied", "toolCallId": "c1"},
        b'data: {"type":"tool-output-denied","toolCallId":"c1"}\n\n',
    ),
    # 9. ai@5: abort without reason
    ("9-abort-v5", 5, {"type": "abort", "reason": "user stopped"}, b'data: {"type":"abort"}\n\n'),
    (
        "9-abort-v6",
        6,
        {"type": "abort", "reason": "user stopped"},
        b'data: {"type":"abort","reason":"user stopped"}\n\n',
    ),
    # 10. ai@5: tool input chunks
    (
        "10-input-start-v5",
        5,
        {
            "type": "tool-input-start",
            "toolCallId": "c1",
            "toolName": "t",
            "inputEncoding": "json",
            "providerExecuted": False,
            "providerMetadata": PM,
            "toolMetadata": {"v": 1},
            "dynamic": False,
            "title": "T",
        },
        b'data: {"type":"tool-input-start","toolCallId":"c1","toolName":"t",'
        b'"providerExecuted":false,"dynamic":false}\n\n',
    ),
    (
        "10-input-available-v5",
        5,
        {
            "type": "tool-input-available",
            "toolCallId": "c1",
            "toolName": "t",
            "input": None,
            "providerMetadata": PM,
            "toolMetadata": {"v": 1},
            "title": "T",
        },
        b'data: {"type":"tool-input-available","toolCallId":"c1","toolName":"t","input":null,'
        b'"providerMetadata":{"acme":{"sig":"abc"}}}\n\n',
    ),
    (
        "10-input-error-v5",
        5,
        {
            "type": "tool-input-error",
            "toolCallId": "c1",
            "toolName": "t",
            "input": "{",
            "errorText": "bad",
            "title": "T",
        },
        b'data: {"type":"tool-input-error","toolCallId":"c1","toolName":"t","input":"{","errorText":"bad"}\n\n',
    ),
    # 11. ai@5: tool output chunks
    (
        "11-output-available-v5",
        5,
        {
            "type": "tool-output-available",
            "toolCallId": "c1",
            "output": {"t": 21},
            "providerExecuted": True,
            "providerMetadata": PM,
            "toolMetadata": {"v": 1},
            "preliminary": True,
        },
        b'data: {"type":"tool-output-available","toolCallId":"c1","output":{"t":21},"providerExecuted":true,'
        b'"preliminary":true}\n\n',
    ),
    (
        "11-output-error-v5",
        5,
        {
            "type": "tool-output-error",
            "toolCallId": "c1",
            "errorText": "boom",
            "providerMetadata": PM,
            "dynamic": False,
        },
        b'data: {"type":"tool-output-error","toolCallId":"c1","errorText":"boom","dynamic":false}\n\n',
    ),
    (
        "11-output-available-v6",
        6,
        {"type": "tool-output-available", "toolCallId": "c1", "output": 1, "providerMetadata": PM, "toolMetadata": {}},
        b'data: {"type":"tool-output-available","toolCallId":"c1","output":1,'
        b'"providerMetadata":{"acme":{"sig":"abc"}},"toolMetadata":{}}\n\n',
    ),
    # 13. ai@5: a denial is an output error with the SDK's own text
    (
        "13-denied-v5",
        5,
        {"type": "tool-output-denied", "toolCallId": "c1"},
        b'data: {"type":"tool-output-error","toolCallId":"c1","errorText":"Tool call execution denied."}\n\n',
    ),
    # 14. ai@5: no approval request
    (
        "14-approval-request-v5",
        5,
        {"type": "tool-approval-request", "approvalId": "a1", "toolCallId": "c1", "reason": "r"},
        b"",
    ),
]


@pytest.mark.parametrize(("version", "chunk", "expected"), [c[1:] for c in RULE_CASES], ids=[c[0] for c in RULE_CASES])
def test_rule(version: int, chunk: dict[str, Any], expected: bytes) -> None:
    before = copy.deepcopy(chunk)
    assert UIStreamRenderer(version).render(chunk) == expected
    assert chunk == before, "the canonical chunk must not be mutated"
    out = downgrade(chunk, version)
    assert (b"" if out is None else b"data: " + orjson.dumps(out) + b"\n\n") == expected


def test_the_ai7_path_neither_copies_nor_checks() -> None:
    chunk = {"type": "anything", "not": "checked"}
    assert downgrade(chunk, 7) is chunk


@pytest.mark.parametrize("version", [5, 6])
@pytest.mark.parametrize(
    "chunk",
    [
        {"type": "text-delta", "id": "text-0", "delta": "x"},
        {"type": "text-end", "id": "text-0"},
        {"type": "start-step"},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "{"},
        {"type": "data-x", "data": 1},
        {"type": "finish", "finishReason": "stop"},
        {"type": "tool-output-available", "toolCallId": "c1", "output": 1},
    ],
    ids=lambda c: c["type"],
)
def test_a_chunk_that_needs_no_change_is_not_copied(version: int, chunk: dict[str, Any]) -> None:
    assert downgrade(chunk, version) is chunk


# -- rule 12: ai@5 needs ``dynamic`` on the outputs of a dynamic call ---------


def v5_stream(chunks: list[dict[str, Any]]) -> bytes:
    return UIStreamRenderer(5).render_many(chunks)


@pytest.mark.parametrize("opener", ["tool-input-start", "tool-input-available", "tool-input-error"])
def test_12_outputs_of_a_dynamic_call_say_so(opener: str) -> None:
    opening: dict[str, Any] = {"type": opener, "toolCallId": "c1", "toolName": "t", "dynamic": True}
    if opener != "tool-input-start":
        opening["input"] = {}
    if opener == "tool-input-error":
        opening["errorText"] = "bad"
    body = v5_stream(
        [
            opening,
            {"type": "tool-output-available", "toolCallId": "c1", "output": 2, "preliminary": True},
            {"type": "tool-output-error", "toolCallId": "c1", "errorText": "boom"},
            {"type": "tool-output-denied", "toolCallId": "c1"},
            {"type": "tool-output-available", "toolCallId": "c2", "output": 3},
        ]
    )
    assert body.split(b"\n\n")[1:-1] == [
        b'data: {"type":"tool-output-available","toolCallId":"c1","output":2,"preliminary":true,"dynamic":true}',
        b'data: {"type":"tool-output-error","toolCallId":"c1","errorText":"boom","dynamic":true}',
        b'data: {"type":"tool-output-error","toolCallId":"c1",'
        b'"errorText":"Tool call execution denied.","dynamic":true}',
        b'data: {"type":"tool-output-available","toolCallId":"c2","output":3}',
    ]


def test_12_an_explicit_dynamic_flag_is_kept() -> None:
    body = v5_stream(
        [
            {"type": "tool-input-start", "toolCallId": "c1", "toolName": "t", "dynamic": True},
            {"type": "tool-output-available", "toolCallId": "c1", "output": 1, "dynamic": False},
        ]
    )
    assert body.endswith(b'data: {"type":"tool-output-available","toolCallId":"c1","output":1,"dynamic":false}\n\n')


def test_12_only_ai5_gets_the_flag() -> None:
    chunks: list[dict[str, Any]] = [
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": "t", "dynamic": True},
        {"type": "tool-output-available", "toolCallId": "c1", "output": 1},
    ]
    last = b'data: {"type":"tool-output-available","toolCallId":"c1","output":1}\n\n'
    assert UIStreamRenderer(6).render_many(chunks).endswith(last)
    assert UIStreamRenderer(7).render_many(chunks).endswith(last)


def test_12_downgrade_is_told_the_dynamic_calls() -> None:
    chunk = {"type": "tool-output-denied", "toolCallId": "c9"}
    assert downgrade(chunk, 5, dynamic_tool_calls={"c9"}) == {
        "type": "tool-output-error",
        "toolCallId": "c9",
        "errorText": DENIED_ERROR_TEXT,
        "dynamic": True,
    }
    assert downgrade(chunk, 5) == {"type": "tool-output-error", "toolCallId": "c9", "errorText": DENIED_ERROR_TEXT}


def test_12_each_renderer_has_its_own_memory() -> None:
    first = UIStreamRenderer(5)
    first.render({"type": "tool-input-start", "toolCallId": "c1", "toolName": "t", "dynamic": True})
    chunk = {"type": "tool-output-available", "toolCallId": "c1", "output": 1}
    assert b'"dynamic":true' in first.render(chunk)
    assert b"dynamic" not in UIStreamRenderer(5).render(chunk)


# -- every ai@7 chunk type, every field filled --------------------------------

FULL: dict[str, dict[str, Any]] = {
    "start": {"type": "start", "messageId": "m1", "messageMetadata": {"a": 1}},
    "finish": {"type": "finish", "finishReason": "stop", "messageMetadata": {"a": 1}},
    "abort": {"type": "abort", "reason": "r"},
    "message-metadata": {"type": "message-metadata", "messageMetadata": None},
    "error": {"type": "error", "errorText": "e"},
    "start-step": {"type": "start-step"},
    "finish-step": {"type": "finish-step"},
    "reset-step": {"type": "reset-step"},
    "text-start": {"type": "text-start", "id": "t", "providerMetadata": PM},
    "text-delta": {"type": "text-delta", "id": "t", "delta": "d", "providerMetadata": PM},
    "text-end": {"type": "text-end", "id": "t", "citations": [CITATION], "providerMetadata": PM},
    "reasoning-start": {"type": "reasoning-start", "id": "r", "providerMetadata": PM},
    "reasoning-delta": {"type": "reasoning-delta", "id": "r", "delta": "d", "providerMetadata": PM},
    "reasoning-end": {"type": "reasoning-end", "id": "r", "providerMetadata": PM},
    "tool-input-start": {
        "type": "tool-input-start",
        "toolCallId": "c",
        "toolName": "n",
        "inputEncoding": "text",
        "providerExecuted": True,
        "providerMetadata": PM,
        "toolMetadata": {"k": 1},
        "dynamic": True,
        "title": "T",
    },
    "tool-input-delta": {"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": "x"},
    "tool-input-available": {
        "type": "tool-input-available",
        "toolCallId": "c",
        "toolName": "n",
        "input": {},
        "providerExecuted": True,
        "providerMetadata": PM,
        "toolMetadata": {"k": 1},
        "dynamic": True,
        "title": "T",
    },
    "tool-input-error": {
        "type": "tool-input-error",
        "toolCallId": "c",
        "toolName": "n",
        "input": {},
        "errorText": "e",
        "providerExecuted": True,
        "providerMetadata": PM,
        "toolMetadata": {"k": 1},
        "dynamic": True,
        "title": "T",
    },
    "tool-approval-request": {
        "type": "tool-approval-request",
        "approvalId": "a",
        "toolCallId": "c",
        "approvalDescriptor": {},
        "inputSchemaInput": {},
        "reason": "r",
        "isAutomatic": True,
        "signature": "s",
    },
    "tool-approval-response": {
        "type": "tool-approval-response",
        "approvalId": "a",
        "approved": True,
        "reason": "r",
        "providerExecuted": True,
        "providerMetadata": PM,
    },
    "tool-output-available": {
        "type": "tool-output-available",
        "toolCallId": "c",
        "output": None,
        "providerExecuted": True,
        "providerMetadata": PM,
        "toolMetadata": {"k": 1},
        "dynamic": True,
        "preliminary": True,
    },
    "tool-output-error": {
        "type": "tool-output-error",
        "toolCallId": "c",
        "errorText": "e",
        "providerExecuted": True,
        "providerMetadata": PM,
        "toolMetadata": {"k": 1},
        "dynamic": True,
    },
    "tool-output-denied": {"type": "tool-output-denied", "toolCallId": "c"},
    "source-url": {"type": "source-url", "sourceId": "s", "url": "u", "title": "T", "providerMetadata": PM},
    "source-document": {
        "type": "source-document",
        "sourceId": "s",
        "mediaType": "m",
        "title": "T",
        "filename": "f",
        "providerMetadata": PM,
    },
    "file": {"type": "file", "url": "u", "mediaType": "m", "providerMetadata": PM},
    "reasoning-file": {"type": "reasoning-file", "url": "u", "mediaType": "m", "providerMetadata": PM},
    "custom": {"type": "custom", "kind": "a.b", "providerMetadata": PM},
    "steering-message": {"type": "steering-message", "id": "u", "parts": [{"type": "text", "text": "x"}]},
    "data-*": {"type": "data-x", "id": "d", "data": [1], "transient": False},
}

SAME = "same"
DROP = None
#: What each older client gets of FULL[type]: SAME, DROP or the exact keys sent.
EXPECTED: dict[str, dict[int, Any]] = {
    "start": {6: SAME, 5: SAME},
    "finish": {6: SAME, 5: SAME},
    "abort": {6: SAME, 5: ("type",)},
    "message-metadata": {6: SAME, 5: SAME},
    "error": {6: SAME, 5: SAME},
    "start-step": {6: SAME, 5: SAME},
    "finish-step": {6: SAME, 5: SAME},
    "reset-step": {6: DROP, 5: DROP},
    "text-start": {6: SAME, 5: SAME},
    "text-delta": {6: SAME, 5: SAME},
    "text-end": {6: ("type", "id", "providerMetadata"), 5: ("type", "id", "providerMetadata")},
    "reasoning-start": {6: SAME, 5: SAME},
    "reasoning-delta": {6: SAME, 5: SAME},
    "reasoning-end": {6: SAME, 5: SAME},
    "tool-input-start": {
        6: (
            "type",
            "toolCallId",
            "toolName",
            "providerExecuted",
            "providerMetadata",
            "toolMetadata",
            "dynamic",
            "title",
        ),
        5: ("type", "toolCallId", "toolName", "providerExecuted", "dynamic"),
    },
    "tool-input-delta": {6: SAME, 5: SAME},
    "tool-input-available": {
        6: SAME,
        5: ("type", "toolCallId", "toolName", "input", "providerExecuted", "providerMetadata", "dynamic"),
    },
    "tool-input-error": {
        6: SAME,
        5: ("type", "toolCallId", "toolName", "input", "errorText", "providerExecuted", "providerMetadata", "dynamic"),
    },
    "tool-approval-request": {6: ("type", "approvalId", "toolCallId", "signature"), 5: DROP},
    "tool-approval-response": {6: DROP, 5: DROP},
    "tool-output-available": {
        6: SAME,
        5: ("type", "toolCallId", "output", "providerExecuted", "dynamic", "preliminary"),
    },
    "tool-output-error": {6: SAME, 5: ("type", "toolCallId", "errorText", "providerExecuted", "dynamic")},
    "tool-output-denied": {6: SAME, 5: ("type", "toolCallId", "errorText")},
    "source-url": {6: SAME, 5: SAME},
    "source-document": {6: SAME, 5: SAME},
    "file": {6: SAME, 5: SAME},
    "reasoning-file": {6: DROP, 5: DROP},
    "custom": {6: DROP, 5: DROP},
    "steering-message": {6: DROP, 5: DROP},
    "data-*": {6: SAME, 5: SAME},
}


def test_the_tables_cover_the_whole_ai7_vocabulary() -> None:
    assert set(FULL) == set(EXPECTED) == set(CHUNK_FIELDS)
    for name, chunk in FULL.items():
        required, optional = CHUNK_FIELDS[name]
        assert set(chunk) == {"type", *required, *optional}, name


@pytest.mark.parametrize("version", [6, 5])
@pytest.mark.parametrize("name", sorted(FULL))
def test_every_type_with_every_field(name: str, version: int) -> None:
    chunk = FULL[name]
    out = downgrade(chunk, version)
    expected = EXPECTED[name][version]
    if expected is DROP:
        assert out is None
    elif expected == SAME:
        assert out is chunk
    else:
        assert out is not None
        assert tuple(out) == expected
        if name != "tool-output-denied":
            assert all(out[key] is chunk[key] for key in expected)


# -- the renderer as a whole --------------------------------------------------


@pytest.mark.parametrize("version", SUPPORTED_SDK_VERSIONS)
def test_render_many_is_render_one_by_one(version: int) -> None:
    chunks = list(FULL.values())
    one_by_one = UIStreamRenderer(version)
    assert UIStreamRenderer(version).render_many(chunks) == b"".join(one_by_one.render(c) for c in chunks)


@pytest.mark.parametrize("version", SUPPORTED_SDK_VERSIONS)
def test_rendered_stream_parses_back(version: int) -> None:
    renderer = UIStreamRenderer(version)
    chunks = list(FULL.values())
    body = renderer.render_many(chunks) + renderer.done()
    events = parse_sse(body)
    assert events[-1].data == "[DONE]"
    decoded = [orjson.loads(e.data) for e in events[:-1]]
    # FULL opens call "c" as dynamic, so the ai@5 renderer marks its outputs (rule 12).
    expected = (downgrade(c, version, dynamic_tool_calls={"c"}) for c in chunks)
    assert decoded == [c for c in expected if c is not None]


def test_render_many_of_nothing_and_done() -> None:
    for version in SUPPORTED_SDK_VERSIONS:
        renderer = UIStreamRenderer(version)
        assert renderer.render_many([]) == b""
        assert renderer.render_many(iter([{"type": "reset-step"}])) == (
            b'data: {"type":"reset-step"}\n\n' if version == 7 else b""
        )
        assert renderer.done() == DONE_FRAME == b"data: [DONE]\n\n"


def test_default_version_is_7() -> None:
    renderer = UIStreamRenderer()
    assert renderer.sdk_version == 7
    assert renderer.render({"type": "reset-step"}) == b'data: {"type":"reset-step"}\n\n'


@pytest.mark.parametrize("version", [4, 8, 0, "7"])
def test_unsupported_versions_are_refused(version: Any) -> None:
    with pytest.raises(ValueError, match="unsupported AI SDK version"):
        UIStreamRenderer(version)
    with pytest.raises(ValueError, match="choose one of 5, 6, 7"):
        downgrade({"type": "start"}, version)


# -- what orjson refuses still goes out as valid JSON --------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (2**70, b"1180591620717411303424"),
        (-(2**63) - 1, b"-9223372036854775809"),
        ("a\ud800b\u00e9", b'"a\\ud800b\xc3\xa9"'),  # JSON.stringify escapes a lone surrogate
        ({1: "one", "n": float("nan")}, b'{"1":"one","n":null}'),
        ([2**64, uuid.UUID(int=1)], b'[18446744073709551616,"00000000-0000-0000-0000-000000000001"]'),
    ],
    ids=["big-int", "small-int", "lone-surrogate", "int-key-nan", "nested"],
)
@pytest.mark.parametrize("version", SUPPORTED_SDK_VERSIONS)
def test_what_orjson_refuses(version: int, data: Any, expected: bytes) -> None:
    chunk = {"type": "data-x", "data": data}
    frame = b'data: {"type":"data-x","data":' + expected + b"}\n\n"
    assert UIStreamRenderer(version).render(chunk) == frame
    before = {"type": "abort", "reason": "r"}
    many = UIStreamRenderer(version).render_many(iter([before, chunk]))
    assert many == UIStreamRenderer(version).render(before) + frame


def test_the_slow_path_keeps_the_dynamic_calls_as_they_were() -> None:
    renderer = UIStreamRenderer(5)
    body = renderer.render_many(
        [
            {"type": "tool-output-available", "toolCallId": "c1", "output": 2**70},
            {"type": "tool-input-start", "toolCallId": "c1", "toolName": "t", "dynamic": True},
            {"type": "tool-output-available", "toolCallId": "c1", "output": 1},
        ]
    )
    assert body == (
        b'data: {"type":"tool-output-available","toolCallId":"c1","output":1180591620717411303424}\n\n'
        b'data: {"type":"tool-input-start","toolCallId":"c1","toolName":"t","dynamic":true}\n\n'
        b'data: {"type":"tool-output-available","toolCallId":"c1","output":1,"dynamic":true}\n\n'
    )


def test_a_value_no_json_can_hold_raises() -> None:
    for version in SUPPORTED_SDK_VERSIONS:
        with pytest.raises(TypeError, match="set"):
            UIStreamRenderer(version).render({"type": "data-x", "data": {1, 2}})
