"""``fold_messages``, AG-UI reducer rule 6 of docs/protocols.md: a
``MESSAGES_SNAPSHOT`` folds as the real client's reducer applies it
(``@ag-ui/client`` 1.0, ``src/apply/default.ts``); the last test has the
real client read the same stream."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from uistream_app.protocol.agui.reducer import fold_messages

from .agui_oracles import agui_client

HELD: list[dict[str, Any]] = [
    {"id": "u1", "role": "user", "content": "hi"},
    {"id": "r1", "role": "reasoning", "content": "thinking"},
    {"id": "a1", "role": "assistant", "content": "old"},
    {"id": "x1", "role": "assistant", "content": "not in the snapshot"},
]


def snapshot(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"type": "MESSAGES_SNAPSHOT", "messages": list(messages)}


def test_6_held_messages_take_the_snapshots_form_in_place_and_the_rest_is_appended() -> None:
    held = copy.deepcopy(HELD)
    new = {"id": "n1", "role": "assistant", "content": "new"}
    a1 = {"id": "a1", "role": "assistant", "content": "new text"}
    u1 = {"id": "u1", "role": "user", "content": "hi"}
    event = snapshot(new, a1, u1)
    folded = fold_messages([event], held)
    # x1 is dropped; the reasoning message stays (the snapshot has none); n1 goes last.
    assert folded == [u1, HELD[1], a1, new]
    assert held == HELD
    folded[0]["content"] = "changed"
    assert event["messages"][2]["content"] == "hi"  # copied in, not shared


def test_6_a_snapshot_with_reasoning_drops_the_held_reasoning_it_lacks() -> None:
    r2 = {"id": "r2", "role": "reasoning", "content": "other"}
    assert fold_messages([snapshot(HELD[0], r2)], HELD) == [HELD[0], r2]


def test_6_activity_stays_unless_the_snapshot_has_activity() -> None:
    activity = {"id": "act1", "role": "activity", "activityType": "plan", "content": {"n": 1}}
    held = [HELD[0], activity]
    assert fold_messages([snapshot(HELD[0])], held) == held
    other = {"id": "act2", "role": "activity", "activityType": "plan", "content": {"n": 2}}
    assert fold_messages([snapshot(HELD[0], other)], held) == [HELD[0], other]


def test_the_real_client_folds_the_same(node: str, tmp_path: Path) -> None:
    # Starting from nothing, as the fixtures' reader does: a stream whose
    # messages are built, then replaced by a snapshot that adds, changes and drops.
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "thread-1", "runId": "run-1"},
        {"type": "REASONING_START", "messageId": "r1"},
        {"type": "REASONING_MESSAGE_START", "messageId": "r1", "role": "reasoning"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r1", "delta": "hm"},
        {"type": "REASONING_MESSAGE_END", "messageId": "r1"},
        {"type": "REASONING_END", "messageId": "r1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "a1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1", "delta": "old"},
        {"type": "TEXT_MESSAGE_END", "messageId": "a1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "x1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "x1", "delta": "dropped"},
        {"type": "TEXT_MESSAGE_END", "messageId": "x1"},
        snapshot(
            {"id": "u0", "role": "user", "content": "before"},
            {"id": "a1", "role": "assistant", "content": "replaced"},
        ),
        {"type": "RUN_FINISHED", "threadId": "thread-1", "runId": "run-1"},
    ]
    path = tmp_path / "stream.sse"
    path.write_bytes(b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events))
    read = json.loads(agui_client(node, "read", str(path)))
    assert (read["error"], read["warnings"]) == (None, [])
    folded = fold_messages(events)
    assert [m["id"] for m in folded] == ["r1", "a1", "u0"]
    assert read["messages"] == folded
