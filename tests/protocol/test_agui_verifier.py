"""``AGUIVerifier``: each AG-UI verifier rule of docs/protocols.md,
ag-ui-validate's own conformance corpus as an oracle (its valid streams
pass, its invalid ones are refused for the rule it names), and a refused
event changing nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ag_ui_validate
import pytest

from uistream_app.protocol.agui.verifier import AGUIVerificationError, AGUIVerifier, verify_events, verify_sse

STARTED = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
FINISHED = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}


def tm(kind: str, mid: str = "m", **extra: Any) -> dict[str, Any]:
    event: dict[str, Any] = {"type": f"TEXT_MESSAGE_{kind}", "messageId": mid, **extra}
    if kind == "CONTENT":
        event.setdefault("delta", "x")
    return event


def tc(kind: str, cid: str = "c", **extra: Any) -> dict[str, Any]:
    event: dict[str, Any] = {"type": f"TOOL_CALL_{kind}", "toolCallId": cid, **extra}
    if kind == "START":
        event.setdefault("toolCallName", "f")
    return event


def refused(events: list[Any], rule: str, match: str | None = None) -> AGUIVerificationError:
    with pytest.raises(AGUIVerificationError, match=match) as info:
        verify_events(events)
    assert info.value.rule == rule, info.value
    return info.value


# (rule, name, events, refusing rule)
REFUSED: list[tuple[str, list[Any], str]] = [
    ("1 unknown key", [{**STARTED, "extra": 1}], "AGUI504"),
    ("1 null optional field", [STARTED, tm("START", role=None)], "AGUI504"),
    ("1 float timestamp", [{**STARTED, "timestamp": 1.5}], "AGUI504"),
    ("1 unknown type", [STARTED, {"type": "THINKING_START"}], "AGUI503"),
    ("1 bad patch shape", [STARTED, {"type": "STATE_DELTA", "delta": [{"op": "bogus", "path": "/a"}]}], "AGUI303"),
    ("1 bad outcome", [STARTED, {**FINISHED, "outcome": {"type": "done"}}], "AGUI504"),
    ("2 first event", [tm("START")], "AGUI001"),
    ("3 second start", [STARTED, STARTED], "AGUI002"),
    ("4 after finished", [STARTED, FINISHED, tm("START")], "AGUI004"),
    ("4 error after finished", [STARTED, FINISHED, {"type": "RUN_ERROR", "message": "x"}], "AGUI005"),
    ("4 after error", [STARTED, {"type": "RUN_ERROR", "message": "x"}, tm("START")], "AGUI004"),
    ("5 unstable run id", [STARTED, {**FINISHED, "runId": "other"}], "AGUI008"),
    ("5 open message", [STARTED, tm("START"), FINISHED], "AGUI103"),
    ("5 open tool call", [STARTED, tc("START"), FINISHED], "AGUI203"),
    ("5 open step", [STARTED, {"type": "STEP_STARTED", "stepName": "s"}, FINISHED], "AGUI007"),
    ("5 open reasoning span", [STARTED, {"type": "REASONING_START", "messageId": "x"}, FINISHED], "AGUI402"),
    (
        "5 open subagent",
        [STARTED, {"type": "SUBAGENT_STARTED", "subagentRunId": "s", "name": "n"}, FINISHED],
        "AGUI604",
    ),
    ("6 reopen open", [STARTED, tm("START"), tm("START")], "AGUI106"),
    ("6 reuse closed", [STARTED, tm("START"), tm("END"), tm("START")], "AGUI104"),
    ("6 content unopened", [STARTED, tm("CONTENT")], "AGUI101"),
    ("6 end unopened", [STARTED, tm("END")], "AGUI102"),
    ("6 empty delta", [STARTED, tm("START"), tm("CONTENT", delta="")], "AGUI105"),
    ("7 reuse call id", [STARTED, tc("START"), tc("END"), tc("START")], "AGUI205"),
    ("7 args unopened", [STARTED, tc("ARGS", delta="{}")], "AGUI201"),
    ("7 end unopened", [STARTED, tc("END")], "AGUI202"),
    ("7 args not json", [STARTED, tc("START"), tc("ARGS", delta="{"), tc("END")], "AGUI204"),
    (
        "7 result before end",
        [STARTED, tc("START"), {"type": "TOOL_CALL_RESULT", "messageId": "x", "toolCallId": "c", "content": ""}],
        "AGUI206",
    ),
    (
        "7 result unknown call",
        [STARTED, {"type": "TOOL_CALL_RESULT", "messageId": "x", "toolCallId": "c", "content": ""}],
        "AGUI207",
    ),
    (
        "8 same step twice",
        [STARTED, {"type": "STEP_STARTED", "stepName": "s"}, {"type": "STEP_STARTED", "stepName": "s"}],
        "client",
    ),
    ("8 finish unstarted", [STARTED, {"type": "STEP_FINISHED", "stepName": "s"}], "AGUI006"),
    (
        "8 a name open under another owner (ag-ui-validate's reading)",
        [
            STARTED,
            {"type": "STEP_STARTED", "stepName": "s"},
            {"type": "STEP_STARTED", "stepName": "s", "subagentRunId": "x"},
        ],
        "AGUI606",
    ),
    (
        "8 finish under another owner",
        [
            STARTED,
            {"type": "STEP_STARTED", "stepName": "s"},
            {"type": "STEP_FINISHED", "stepName": "s", "subagentRunId": "x"},
        ],
        "AGUI606",
    ),
    (
        "9 reasoning content unopened",
        [STARTED, {"type": "REASONING_MESSAGE_CONTENT", "messageId": "x", "delta": "d"}],
        "AGUI401",
    ),
    (
        "10 subagent reused after it ended",
        [
            STARTED,
            {"type": "SUBAGENT_STARTED", "subagentRunId": "s", "name": "n"},
            {"type": "SUBAGENT_FINISHED", "subagentRunId": "s", "outcome": {"type": "suspended"}},
            {"type": "SUBAGENT_STARTED", "subagentRunId": "s", "name": "n"},
        ],
        "AGUI601",
    ),
    (
        "10 unknown parent subagent",
        [STARTED, {"type": "SUBAGENT_STARTED", "subagentRunId": "s", "name": "n", "parentSubagentRunId": "p"}],
        "AGUI605",
    ),
    ("10 finish unstarted subagent", [STARTED, {"type": "SUBAGENT_FINISHED", "subagentRunId": "s"}], "AGUI602"),
    ("11 continuation under another tag", [STARTED, tm("START"), tm("CONTENT", subagentRunId="s")], "AGUI606"),
    (
        "11 call tagged against its parent message",
        [STARTED, tm("START"), tm("END"), tc("START", parentMessageId="m", subagentRunId="s")],
        "AGUI606",
    ),
    (
        "12 delta that does not apply",
        [
            STARTED,
            {"type": "STATE_SNAPSHOT", "snapshot": {"a": []}},
            {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/b", "value": 1}]},
        ],
        "AGUI302",
    ),
    ("13 chunk without id first", [STARTED, {"type": "TEXT_MESSAGE_CHUNK", "delta": "x"}], "AGUI504"),
    (
        "13 tool chunk args checked when it closes",
        [STARTED, {"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "toolCallName": "f", "delta": "{"}, tm("START")],
        "AGUI204",
    ),
    ("14 unterminated", [STARTED], "AGUI003"),
    ("14 empty", [], "AGUI003"),
    ("json text", [json.dumps(STARTED), "{not json"], "AGUI502"),
]


@pytest.mark.parametrize(("events", "rule"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_refused(events: list[Any], rule: str) -> None:
    refused(events, rule)


ACCEPTED: list[tuple[str, list[dict[str, Any]]]] = [
    ("2 an error as the first event", [{"type": "RUN_ERROR", "message": "no"}]),
    ("3 a new run after the end", [STARTED, FINISHED, {**STARTED, "runId": "r2"}, {**FINISHED, "runId": "r2"}]),
    ("3 a new run after an error", [STARTED, {"type": "RUN_ERROR", "message": "x"}, STARTED, FINISHED]),
    ("5 debris before RUN_ERROR", [STARTED, tm("START"), tc("START"), {"type": "RUN_ERROR", "message": "x"}]),
    (
        "7 interleaved calls by id",
        [
            STARTED,
            tc("START", "a"),
            tc("START", "b"),
            tc("ARGS", "a", delta='{"x":'),
            tc("ARGS", "b", delta="{}"),
            tc("ARGS", "a", delta="1}"),
            tc("END", "b"),
            tc("END", "a"),
            FINISHED,
        ],
    ),
    (
        "7 a result for a call of the input's history",
        [
            {
                **STARTED,
                "input": {
                    "threadId": "t",
                    "runId": "r",
                    "messages": [
                        {
                            "id": "a",
                            "role": "assistant",
                            "toolCalls": [
                                {"id": "old", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                            ],
                        }
                    ],
                },
            },
            {"type": "TOOL_CALL_RESULT", "messageId": "x", "toolCallId": "old", "content": "done"},
            FINISHED,
        ],
    ),
    (
        "8 one name, two owners, one after the other",
        [
            STARTED,
            {"type": "SUBAGENT_STARTED", "subagentRunId": "s", "name": "n"},
            {"type": "STEP_STARTED", "stepName": "tools", "subagentRunId": "s"},
            {"type": "STEP_FINISHED", "stepName": "tools", "subagentRunId": "s"},
            {"type": "SUBAGENT_FINISHED", "subagentRunId": "s"},
            {"type": "STEP_STARTED", "stepName": "tools"},
            {"type": "STEP_FINISHED", "stepName": "tools"},
            FINISHED,
        ],
    ),
    (
        "9 a span and its message share an id",
        [
            STARTED,
            {"type": "REASONING_START", "messageId": "x"},
            {"type": "REASONING_MESSAGE_START", "messageId": "x", "role": "reasoning"},
            {"type": "REASONING_MESSAGE_END", "messageId": "x"},
            {"type": "REASONING_END", "messageId": "x"},
            FINISHED,
        ],
    ),
    (
        "12 a delta applies",
        [
            STARTED,
            {"type": "STATE_SNAPSHOT", "snapshot": {"items": [1]}},
            {
                "type": "STATE_DELTA",
                "delta": [
                    {"op": "add", "path": "/items/-", "value": 2},
                    {"op": "test", "path": "/items/1", "value": 2},
                ],
            },
            FINISHED,
        ],
    ),
    (
        "13 chunks expand",
        [
            STARTED,
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "a"},
            {"type": "TEXT_MESSAGE_CHUNK", "delta": "b"},
            {"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "toolCallName": "f", "delta": '{"a":'},
            {"type": "TOOL_CALL_CHUNK", "delta": "1}"},
            {"type": "TOOL_CALL_RESULT", "messageId": "r", "toolCallId": "c", "content": "ok"},
            FINISHED,
        ],
    ),
    (
        "info-level notes are not enforced",
        [
            STARTED,
            tc("START", parentMessageId="nobody"),
            tc("END"),
            {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/a", "value": 1}]},
            {"type": "CUSTOM", "name": "plain", "value": None},
            FINISHED,
        ],
    ),
]


@pytest.mark.parametrize("events", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_accepted(events: list[dict[str, Any]]) -> None:
    assert verify_events(events) == len(events)


def test_a_refused_event_changes_nothing() -> None:
    verifier = AGUIVerifier()
    verifier.observe(STARTED)
    verifier.observe(tc("START"))
    verifier.observe(tc("ARGS", delta="{"))
    with pytest.raises(AGUIVerificationError) as info:
        verifier.observe(tc("END"))
    assert (info.value.rule, info.value.event_type, info.value.index) == ("AGUI204", "TOOL_CALL_END", 3)
    verifier.observe(tc("ARGS", delta="}"))
    verifier.observe(tc("END"))
    with pytest.raises(AGUIVerificationError):
        verifier.observe(tm("CONTENT"))
    verifier.observe(FINISHED)
    verifier.close()
    assert verifier.observed == 6


def test_verify_sse_refuses_cr_line_ends_and_cut_events() -> None:
    good = (
        b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'
        b'data: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n'
    )
    assert len(verify_sse(good)) == 2
    with pytest.raises(AGUIVerificationError, match="CR"):
        verify_sse(good.replace(b"\n", b"\r\n"))
    with pytest.raises(AGUIVerificationError) as info:
        verify_sse(good[:-1])
    assert info.value.rule == "AGUI501"


# -- ag-ui-validate's conformance corpus --------------------------------------------------------------

CORPUS = Path(ag_ui_validate.__file__).parent / "spec" / "fixtures"
#: Corpus streams our verifier accepts, and why: info-level notes (not
#: enforced), and a rule that only fires on a declared feature.
NOT_ENFORCED = {
    "AGUI208-unknown-parent-message-id": "info",
    "AGUI301-delta-before-snapshot": "info",
    "AGUI304-midrun-snapshot-discards-deltas": "info",
    "AGUI305-shared-state-never-established": "only with the shared-state feature declared",
    "AGUI901-raw-wraps-typed-event": "info",
    "AGUI902-no-timestamps": "info",
    "AGUI903-custom-name-not-namespaced": "info",
}


@pytest.mark.parametrize("path", sorted((CORPUS / "valid").glob("*.jsonl")), ids=lambda p: p.stem)
def test_the_corpus_valid_streams_pass(path: Path) -> None:
    verify_events([line for line in path.read_text().splitlines() if line.strip()])


INVALID = sorted(p for p in (CORPUS / "invalid").iterdir() if (p / "stream.jsonl").exists())


@pytest.mark.parametrize("directory", INVALID, ids=lambda p: p.name)
def test_the_corpus_invalid_streams_are_refused_for_their_rule(directory: Path) -> None:
    lines = [line for line in (directory / "stream.jsonl").read_text().splitlines() if line.strip()]
    expected = json.loads((directory / "expected.json").read_text())
    if directory.name in NOT_ENFORCED:
        verify_events(lines)
        return
    error = refused(lines, expected[0]["rule"])
    assert error.index == expected[0]["eventIndex"] or expected[0]["eventIndex"] == -1
