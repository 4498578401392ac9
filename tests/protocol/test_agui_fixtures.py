"""The golden AG-UI fixtures (``fixtures/ag-ui``), from the Python side.

Python regenerates every ``stream.sse`` byte for byte from the scenario's
canonical chunks; our verifier, ag-ui-protocol and ag-ui-validate accept
it; ``fold_messages`` (the Python twin of the client's reducer) builds the
``messages.json`` the real client built; a hand-written agent's handle
stream is the wire stream but for the renderer's own steps. The real
client's side is ``tests/js/agui.test.mjs``.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from tests import agui_fixtures
from uistream_app.protocol.agui.messages import fold_messages
from uistream_app.protocol.agui.verifier import verify_sse

from .agui_oracles import assert_accepted

DIRS = agui_fixtures.fixture_dirs()


def test_every_scenario_has_a_fixture() -> None:
    assert sorted(p.name for p in DIRS) == sorted(agui_fixtures.all_names())


@pytest.mark.parametrize("directory", DIRS, ids=[p.name for p in DIRS])
def test_bytes_regenerate_exactly(directory: Path) -> None:
    chunks = agui_fixtures.scenario_chunks(directory.name)
    assert agui_fixtures.render(chunks) == (directory / "stream.sse").read_bytes()


@pytest.mark.parametrize("directory", DIRS, ids=[p.name for p in DIRS])
def test_every_judge_accepts_the_stream(directory: Path) -> None:
    events = verify_sse((directory / "stream.sse").read_bytes())
    assert_accepted(events)
    scenario = json.loads((directory / "scenario.json").read_text())
    last = events[-1]
    if "expect_error" in scenario:
        assert last["type"] == "RUN_ERROR"
        assert last["message"] == scenario["expect_error"]
    else:
        assert last["type"] == "RUN_FINISHED"
        assert last.get("outcome", {"type": "success"})["type"] == scenario["expect_outcome"]


@pytest.mark.parametrize("directory", DIRS, ids=[p.name for p in DIRS])
def test_fold_messages_builds_what_the_client_built(directory: Path) -> None:
    events = verify_sse((directory / "stream.sse").read_bytes())
    assert fold_messages(events) == json.loads((directory / "messages.json").read_text())


def test_masked_errors_stay_masked() -> None:
    for name in ("model-error-mid-text", "hand-written-agent-fails"):
        body = (agui_fixtures.FIXTURES / name / "stream.sse").read_bytes()
        assert b"secret" not in body
        assert b"hunter2" not in body
        assert b'"message":"An error occurred."' in body


_UI_STEP = re.compile(r"step-\d+")


@pytest.mark.parametrize("name", ["hand-written-agent", "hand-written-agent-fails"])
def test_the_handles_stream_is_the_wire_stream_but_for_ui_steps(name: str) -> None:
    chunks, handle_events = asyncio.run(agui_fixtures.agent_chunks(agui_fixtures.SCENARIOS[name]["agent"]))
    wire = verify_sse(agui_fixtures.render(chunks))
    assert handle_events == [
        e for e in wire if not (e["type"].startswith("STEP_") and _UI_STEP.fullmatch(e["stepName"]))
    ]
    stored = [json.loads(line) for line in (agui_fixtures.FIXTURES / name / "handles.jsonl").read_text().splitlines()]
    assert stored == handle_events
    assert_accepted(handle_events)
