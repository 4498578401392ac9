"""The provider items a process keeps for the next call (``ReplayMemory``):
bounded by count and by bytes, so long thinking can't grow a process."""

from __future__ import annotations

from typing import Any

from uistream_app.runs._memory import ReplayMemory


def thinking(kib: int, signature: str = "sig") -> dict[str, Any]:
    return {"type": "thinking", "thinking": "t" * (kib * 1024), "signature": signature}


def test_the_least_recently_used_steps_go_first_once_the_bytes_are_spent() -> None:
    memory = ReplayMemory(max_bytes=250 * 1024)
    memory.remember(["call_1"], [thinking(100, "one")])
    memory.remember(["call_2"], [thinking(100, "two")])
    assert memory.recall(["call_1"])[0]["signature"] == "one"  # now the most recently used
    memory.remember(["call_3"], [thinking(100, "three")])
    assert memory.recall(["call_2"]) == ()
    assert [b["signature"] for b in memory.recall(["call_1"]) + memory.recall(["call_3"])] == ["one", "three"]


def test_a_step_larger_than_the_bound_is_not_kept_and_forgets_what_the_same_calls_left() -> None:
    memory = ReplayMemory(max_bytes=64 * 1024)
    memory.remember(["call_1"], [thinking(10, "small")])
    memory.remember(["call_2"], [thinking(10, "other")])
    memory.remember(["call_1"], [thinking(100, "huge")])
    assert memory.recall(["call_1"]) == ()
    assert memory.recall(["call_2"])[0]["signature"] == "other"


def test_replacing_a_step_frees_what_it_held() -> None:
    memory = ReplayMemory(max_bytes=150 * 1024)
    memory.remember(["call_1"], [thinking(100, "first")])
    for _ in range(5):
        memory.remember(["call_1"], [thinking(100, "again")])
    memory.remember(["call_2"], [thinking(40, "second")])
    assert memory.recall(["call_1"])[0]["signature"] == "again"
    assert memory.recall(["call_2"])[0]["signature"] == "second"


def test_the_count_bound_still_holds() -> None:
    memory = ReplayMemory(size=2)
    for i in range(3):
        memory.remember([f"call_{i}"], [thinking(1, str(i))])
    assert memory.recall(["call_0"]) == ()
    assert memory.recall(["call_2"])[0]["signature"] == "2"
