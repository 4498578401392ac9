"""The fault soak's short form (``bench/chaos.py``, issue 30): daphne,
uvicorn and a Celery worker on PostgreSQL and a Redis of the soak's own,
clients on every transport, and a dozen faults (SIGKILL, SIGTERM,
SIGSTOP past the lease of each process, Redis killed and restarted,
connections cut mid-frame); then every invariant of a run checked on the
stored runs, their logs read by the real ai@7 client, and what every client
received.

Marked ``soak``: scripts/test runs it on its own, on PostgreSQL (in the
database named by ``DATABASE_URL`` with ``_chaos`` added, made if
missing). ``UISTREAM_CHAOS_SEED`` picks another seed; a failure prints the
command that replays it. Skipped without PostgreSQL, ``redis-server``,
Celery or Node.js, except in CI (``CI=true``), where that is a failure.

Beside it, with no process started, the soak's checks are shown each
violation they are for (so a soak that reports none could have).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from .conftest import in_ci, node_binary
from .server import ROOT


def import_chaos() -> ModuleType:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import chaos
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return chaos


def need(ready: bool, message: str) -> None:
    if not ready:
        if in_ci():
            pytest.fail(f"{message} (CI=true: the soak must run)")
        pytest.skip(message)


def soak_database_url() -> str:
    url = os.environ.get("DATABASE_URL", "")
    parts = urlsplit(url)
    need(parts.scheme in ("postgres", "postgresql"), "the soak needs PostgreSQL: DATABASE_URL=postgres://…")
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "_chaos"))


@pytest.mark.soak
def test_every_run_keeps_its_invariants_through_faults() -> None:
    database_url = soak_database_url()
    need(bool(os.environ.get("UISTREAM_REDIS_SERVER") or shutil.which("redis-server")), "redis-server is needed")
    need(importlib.util.find_spec("celery") is not None, "Celery is needed (pip install 'django-uistream[celery]')")
    node = node_binary()
    need(node is not None and (ROOT / "tests" / "js" / "node_modules" / "ai7").is_dir(), "Node.js and tests/js")
    chaos = import_chaos()
    options = chaos.Options(
        seed=int(os.environ.get("UISTREAM_CHAOS_SEED", "30")),
        rounds=1,
        runs=40,
        faults=9,
        cut_rate=0.1,
        database_url=database_url,
        verbose=False,
    )
    soak = chaos.Soak(options)
    soak.run()
    report = soak.report()
    assert not soak.violations, report
    assert soak.runs >= 40, report
    # Every kind of process fault was injected, and clients cut connections.
    assert {kind for kind, n in soak.fault_counts.items() if n} >= set(chaos.PROCESS_FAULTS), report
    assert sum(soak.fault_counts.values()) >= 12, report
    # The faults hit runs: some ended otherwise than completed.
    assert sum(n for outcome, n in soak.outcomes.items() if not outcome.startswith("completed")) > 0, report


def text_log(message_id: str, text: str, end: str = "finish") -> list[dict[str, Any]]:
    terminal = {"type": "error", "errorText": "An error occurred."} if end == "error" else {"type": end}
    return [
        {"type": "start", "messageId": message_id},
        {"type": "start-step"},
        {"type": "text-start", "id": "t"},
        {"type": "text-delta", "id": "t", "delta": text},
        {"type": "text-end", "id": "t"},
        {"type": "finish-step"},
        terminal,
    ]


def answer(message_id: str, text: str) -> dict[str, Any]:
    return {
        "id": message_id,
        "role": "assistant",
        "parts": [{"type": "step-start"}, {"type": "text", "text": text, "state": "done"}],
    }


@pytest.mark.node
def test_the_soaks_checks_catch_each_violation(node: str, tmp_path: Path) -> None:
    chaos = import_chaos()
    stored = {
        "ok": chaos.StoredRun("ok", "completed", "submit-message", "", "m-ok", "c-ok", "s1", answer("m-ok", "hi")),
        "running": chaos.StoredRun("running", "running", "submit-message", "", "m-run", "c-run", "s1", None),
        "gap": chaos.StoredRun("gap", "completed", "submit-message", "", "m-gap", "c-gap", "s1", None),
        "two-ends": chaos.StoredRun("two-ends", "completed", "submit-message", "", "m-2", "c-2", "s1", None),
        "message": chaos.StoredRun(
            "message", "completed", "submit-message", "", "m-msg", "c-msg", "s1", answer("m-msg", "no")
        ),
        "theirs": chaos.StoredRun(
            "theirs", "completed", "submit-message", "", "m-th", "c-th", "s2", answer("m-th", "x")
        ),
    }
    stored["ok"].log = text_log("m-ok", "hi")
    stored["running"].log = text_log("m-run", "hi")[:3]
    stored["gap"].log, stored["gap"].log_problem = text_log("m-gap", "hi"), "log batch 5-6 after seq 2"
    stored["two-ends"].log = [*text_log("m-2", "hi", end="error"), {"type": "finish"}]
    stored["message"].log = text_log("m-msg", "yes")
    stored["theirs"].log = text_log("m-th", "x")
    stored["bad"] = chaos.StoredRun("bad", "completed", "submit-message", "", "m-bad", "c-bad", "s1", None)
    stored["bad"].log = [text_log("m-bad", "x")[i] for i in (0, 1, 3, 6)]  # a delta of a text never started
    stored["late"] = chaos.StoredRun("late", "completed", "submit-message", "", "m-late", "c-late", "s1", None)
    stored["late"].log = text_log("m-late", "x", end="error")  # settled, then a late finish stored its status

    def seen(chat: str, visitor: str, chunks: list[dict[str, Any]], kind: str = "post") -> Any:
        stream = chaos.Stream(kind, "daphne", list(range(len(chunks))), chunks, [0.0] * len(chunks), "end")
        return chaos.RunSeen(visitor, chat, "http", "hi", "submit-message", ("daphne", 0), streams=[stream])

    received = [
        seen("c-ok", "s1", text_log("m-ok", "hi")),  # all in the log: fine
        seen("c-ok", "s1", [*text_log("m-ok", "hi")[:3], {"type": "error", "errorText": "x"}]),  # a relay's end
        seen("c-msg", "s1", text_log("m-msg", "maybe")),  # a delta the log lacks
        seen("c-ok", "s1", text_log("m-th", "x")),  # another owner's run, in the client's own chat
        seen("c-ok", "s1", [{"type": "RUN_STARTED", "metadata": {"uistream": {"runId": "theirs"}}}], "agui"),
    ]
    calls = tmp_path / "calls"
    calls.mkdir()
    (calls / "m-ok-call_0").write_text("calculate 1\ncalculate 2\n")
    (calls / "m-ok-call_1").write_text("get_weather 1\nget_weather 2\n")
    (calls / "m-ok-call_2").write_text("calculate 1\n")
    soak = SimpleNamespace(may_repeat=frozenset({"get_weather"}), counted_calls=set(), tool_runs=chaos.Counter())
    round_ = SimpleNamespace(
        options=chaos.Options(seed=5, mode="interrupt"), number=3, seen=received, faults=[], soak=soak
    )
    checker = chaos.Checker(round_, stored, calls)
    checker.check({})

    expected = [
        ("running", "left running after everything settled"),
        ("running", "0 terminal chunks"),
        ("bad", "ai@7 rejects the log"),
        ("gap", "sequence numbers not contiguous"),
        ("two-ends", "2 terminal chunks"),
        ("message", "stored message differs from ai@7's"),
        ("message", "a post stream"),
        (None, "a post stream of c-ok started message m-th, no run of the client's own chat"),
        (None, "an AG-UI stream of c-ok is of a run not in the client's own chat"),
        (None, "tool calculate (not idempotent) ran 2 times for call m-ok-call_0"),
    ]
    found = [(v.run_id, v.what) for v in checker.violations]
    assert len(found) == len(expected), found
    for run_id, start in expected:
        assert any(r == run_id and what.startswith(start) for r, what in found), (run_id, start, found)
    assert all(str(v).startswith("seed 5 round 3") for v in checker.violations)
    assert [(n.run_id, n.what) for n in checker.notes] == [("late", "stored completed, but its log ends with error ()")]
    assert checker.relay_errors == 1
    assert soak.tool_runs == {"calculate": 3, "get_weather": 2}
