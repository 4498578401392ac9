"""The AG-UI fixtures: scenarios, reading and regeneration.

``fixtures/ag-ui/<scenario>/`` holds, per scenario:

* ``scenario.json``: description, where the canonical chunks come from
  (``source``), the renderer's thread and run ids and fixed timestamp, and
  what the run ends with (``expect_outcome``: ``success``, ``interrupt``,
  ``cancelled``; or ``expect_error``, the ``RUN_ERROR`` message);
* ``stream.sse``: the exact bytes ``AGUIRenderer`` writes for them;
* ``messages.json``: the messages the real ``@ag-ui/client`` 1.0 builds
  from ``stream.sse`` (``runAgent().newMessages``);
* ``handles.jsonl`` (hand-written agents only): the events the agent's
  ``RunContext`` emitted, before the canonical log.

Sources: every UI message stream scenario (``fixtures/ui-message-stream/v1``:
the same canonical chunks, so both dialects of one run are side by side);
``stopped-mid-answer`` (the ``abort`` chunk a stop leaves); and hand-written
agents driven through the emit handles, ``agent_source``, the encoder and
the renderer, exactly as the view runs them.

Regenerate for review with ``python -m tests.agui_fixtures`` (needs Node and
``tests/js/node_modules``); read the diff, then commit. Tests never write
here.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from uistream_app.protocol import events as ev
from uistream_app.protocol.agui.handles import RunContext
from uistream_app.protocol.agui.renderer import AGUIRenderer
from uistream_app.protocol.agui.source import agent_source
from uistream_app.protocol.ui.chunks import Chunk
from uistream_app.protocol.ui.encoder import UIMessageEncoder
from uistream_app.protocol.ui.stream import aencode_batches

from . import ui_fixtures

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "ag-ui"
THREAD_ID = "thread-1"
RUN_ID = "run-1"
TIMESTAMP = 1764460800000


# -- hand-written agents ------------------------------------------------------------


async def weather_research_agent(ctx: RunContext) -> None:
    """Steps, reasoning, a subagent with a tool call and its answer, state,
    a custom event, then the answer."""
    ctx.state_snapshot({"stage": "planning", "cities": []})
    with ctx.step("plan"), ctx.reasoning() as thought:
        thought.delta("One city; ")
        thought.delta("the researcher looks it up.")
    with ctx.subagent("researcher", description="Looks up the weather"):
        with ctx.tool_call("get_weather") as call:
            call.args('{"city": ')
            call.args('"Lima"}')
        call.result({"temperature": 21, "sky": "clear"})
        with ctx.assistant_message() as note:
            note.delta("Lima: 21 °C, clear.")
    ctx.state_delta(
        [{"op": "replace", "path": "/stage", "value": "answering"}, {"op": "add", "path": "/cities/-", "value": "Lima"}]
    )
    ctx.custom("demo:progress", {"done": 1, "of": 1})
    with ctx.assistant_message() as answer:
        answer.delta("It is 21 °C ")
        answer.delta("and clear in Lima.")


class AgentFailure(Exception):
    """What the failing agent raises: its text must never reach the wire."""


async def failing_agent(ctx: RunContext) -> None:
    """Fails mid-message inside a step: the handles close both, the run ends
    RUN_ERROR with the masked text."""
    with ctx.step("answer"), ctx.assistant_message() as message:
        message.delta("Halfway")
        raise AgentFailure("database password is hunter2")


AGENTS: dict[str, Callable[[RunContext], Awaitable[None]]] = {
    "weather_research_agent": weather_research_agent,
    "failing_agent": failing_agent,
}

SCENARIOS: dict[str, dict[str, Any]] = {
    "stopped-mid-answer": {
        "description": "A stop mid-answer: the open message closes and the run ends cancelled.",
        "events": [ev.ReasoningDelta("Counting."), ev.TextDelta("1"), ev.TextDelta(" 2")],
        "abort": "stopped",
        "expect_outcome": "cancelled",
    },
    "hand-written-agent": {
        "description": (
            "A hand-written agent through the emit handles: state, a named step with reasoning, a subagent "
            "with a tool call and a message, a state delta, a custom event, the answer."
        ),
        "agent": "weather_research_agent",
        "expect_outcome": "success",
    },
    "hand-written-agent-fails": {
        "description": "A hand-written agent that raises inside a message inside a step: both close, RUN_ERROR.",
        "agent": "failing_agent",
        "expect_error": "An error occurred.",
    },
}


# -- reading ----------------------------------------------------------------------------


def renderer() -> AGUIRenderer:
    """Each fixture is the first run of its thread, as ``AGUIView`` renders
    it: with the thread's history, here empty (no messages before the run,
    so the client's ``newMessages`` are all it holds). A run that ends in an
    interrupt snapshots the thread before its ``RUN_FINISHED`` (renderer
    rule 14)."""
    return AGUIRenderer(THREAD_ID, RUN_ID, history=[], clock=lambda: TIMESTAMP)


def render(chunks: list[Chunk]) -> bytes:
    r = renderer()
    return r.render_many(chunks) + r.done()


async def agent_chunks(name: str) -> tuple[list[Chunk], list[dict[str, Any]]]:
    """The canonical chunks of one run of agent ``name`` and the events its
    handles emitted (as ``AGUIView`` runs it: message id ``msg-<name>``)."""
    handle_events: list[dict[str, Any]] = []
    message_id = f"msg-{name}"
    source = agent_source(
        AGENTS[name],
        thread_id=THREAD_ID,
        run_id=RUN_ID,
        message_id=message_id,
        clock=lambda: TIMESTAMP,
        on_event=handle_events.append,
    )
    encoder = UIMessageEncoder(message_id)
    chunks = [c async for batch in aencode_batches(source, encoder, on_error=lambda exc: None) for c in batch]
    return chunks, handle_events


def scenario_chunks(name: str) -> list[Chunk]:
    """The canonical chunks of scenario ``name`` (a UI fixture's or ours)."""
    spec = SCENARIOS.get(name)
    if spec is None:
        return ui_fixtures.canonical_chunks(ui_fixtures.FIXTURES / name)
    if "agent" in spec:
        return asyncio.run(agent_chunks(spec["agent"]))[0]
    encoder = UIMessageEncoder(f"msg-{name}")
    chunks = [c for e in spec["events"] for c in encoder.feed(e)]
    return chunks + encoder.abort(spec["abort"])


def fixture_dirs() -> list[Path]:
    return sorted(p for p in FIXTURES.iterdir() if (p / "scenario.json").exists())


def all_names() -> list[str]:
    return [p.name for p in ui_fixtures.fixture_dirs()] + list(SCENARIOS)


def _client_reading(node: str, path: Path) -> dict[str, Any]:
    out = subprocess.run(
        [node, str(ROOT / "tests" / "js" / "agui_client.mjs"), "read", str(path)],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT / "tests" / "js",
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def _ending(name: str) -> dict[str, Any]:
    spec = SCENARIOS.get(name)
    if spec is not None:
        return {k: spec[k] for k in ("expect_outcome", "expect_error") if k in spec}
    ui_scenario = json.loads((ui_fixtures.FIXTURES / name / "scenario.json").read_text())
    if "expect_error" in ui_scenario:
        return {"expect_error": ui_scenario["expect_error"]}
    return {"expect_outcome": "interrupt" if name == "approval-request" else "success"}


def regenerate(node: str = "node") -> None:
    for name in all_names():
        directory = FIXTURES / name
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.iterdir():
            stale.unlink()
        spec = SCENARIOS.get(name)
        if spec is None:
            source = f"ui-message-stream/v1/{name}"
            description = json.loads((ui_fixtures.FIXTURES / name / "scenario.json").read_text())["description"]
        elif "agent" in spec:
            source, description = f"agent:{spec['agent']}", spec["description"]
        else:
            source, description = "events", spec["description"]
        scenario = {
            "description": description,
            "source": source,
            "thread_id": THREAD_ID,
            "run_id": RUN_ID,
            "timestamp": TIMESTAMP,
            **_ending(name),
        }
        (directory / "scenario.json").write_text(json.dumps(scenario, indent=2, ensure_ascii=False) + "\n")
        if spec is not None and "agent" in spec:
            chunks, handle_events = asyncio.run(agent_chunks(spec["agent"]))
            (directory / "handles.jsonl").write_text(
                "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in handle_events)
            )
        else:
            chunks = scenario_chunks(name)
        path = directory / "stream.sse"
        path.write_bytes(render(chunks))
        reading = _client_reading(node, path)
        if reading["error"] or reading["warnings"]:
            raise SystemExit(f"{name}: the client refused the stream: {reading['error'] or reading['warnings']}")
        (directory / "messages.json").write_text(
            json.dumps(reading["newMessages"], indent=2, ensure_ascii=False) + "\n"
        )
        print(f"{name}: {len(chunks)} chunks")


if __name__ == "__main__":
    regenerate(sys.argv[1] if len(sys.argv) > 1 else "node")
