"""The UI message stream fixtures: scenarios, reading and regeneration.

``fixtures/ui-message-stream/v1/<scenario>/`` holds, per scenario:

* ``scenario.json``: description, the message id (and start metadata) the
  encoder is given, and ``expect_error`` when the stream ends in an error;
* ``events.jsonl``: the source events, one JSON object a line
  (``protocol.events.event_to_dict``); the pseudo-event
  ``{"type": "raise", "message": ...}`` makes the source raise there.
  The replay scenario has ``stored_message.json`` instead: a stored
  UIMessage replayed by ``protocol.ui.replay``;
* ``v7.sse``, ``v6.sse``, ``v5.sse``: the exact bytes for each client;
* ``message.json``: the UIMessage the real ai@7 client builds from
  ``v7.sse``; ``message.v6.json`` / ``message.v5.json`` where that older
  client builds a different one.

Regenerate for review with ``python -m tests.ui_fixtures`` (needs Node and
``tests/js/node_modules``); read the diff, then commit. Tests never write
here.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from uistream_app.protocol import events as ev
from uistream_app.protocol.sse import DONE, parse_sse
from uistream_app.protocol.ui.chunks import Chunk
from uistream_app.protocol.ui.encoder import UIMessageEncoder
from uistream_app.protocol.ui.render import UIStreamRenderer
from uistream_app.protocol.ui.stream import encode_events

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "ui-message-stream" / "v1"
VERSIONS = (7, 6, 5)


class SourceFailure(Exception):
    """What the ``raise`` pseudo-event raises: a provider error whose text
    must never reach the wire."""


def _split(call_id: str, text: str, cuts: list[int]) -> list[ev.Event]:
    bounds = [0, *cuts, len(text)]
    return [ev.ToolCallDelta(call_id, text[a:b]) for a, b in itertools.pairwise(bounds)]


SCENARIOS: dict[str, dict[str, Any]] = {
    "plain-text": {
        "description": "A one-step answer, word by word.",
        "events": [ev.TextDelta("Hello"), ev.TextDelta(", "), ev.TextDelta("world!"), ev.Finish("stop")],
    },
    "reasoning-then-text": {
        "description": "The model thinks aloud, then answers: the reasoning part closes when text opens.",
        "events": [
            ev.ReasoningDelta("The user greets me. "),
            ev.ReasoningDelta("I should greet back."),
            ev.TextDelta("Hi "),
            ev.TextDelta("there."),
            ev.ReasoningDelta("Done."),
            ev.Finish("stop"),
            ev.Usage(input_tokens=12, output_tokens=9),
        ],
    },
    "tool-loop-multi-step": {
        "description": (
            "Two model steps: a tool call whose arguments arrive split mid-token, its result, then the answer."
        ),
        "events": [
            ev.ReasoningDelta("I need the weather."),
            ev.TextDelta("Let me check."),
            ev.ToolCallStart("call_1", "get_weather"),
            *_split("call_1", '{"city": "Paris", "unit": "celsius"}', [3, 11, 19]),
            ev.ToolCall("call_1", "get_weather", '{"city": "Paris", "unit": "celsius"}'),
            ev.Finish("tool_calls"),
            ev.ToolResult("call_1", '{"temperature": 18, "sky": "clear"}', tool_name="get_weather"),
            ev.StepFinished(0),
            ev.TextDelta("It is 18 °C "),
            ev.TextDelta("and clear in Paris."),
            ev.Finish("stop"),
            ev.StepFinished(1),
            ev.Done(),
        ],
    },
    "parallel-tool-calls": {
        "description": (
            "Two calls in one step, fragments interleaved; results reported in call order; a plain-text result."
        ),
        "events": [
            ev.ToolCallStart("call_a", "get_weather"),
            ev.ToolCallStart("call_b", "calculate"),
            ev.ToolCallDelta("call_a", '{"city":'),
            ev.ToolCallDelta("call_b", '{"expression": "6*'),
            ev.ToolCallDelta("call_a", '"Oslo"}'),
            ev.ToolCallDelta("call_b", '7"}'),
            ev.ToolCall("call_a", "get_weather", '{"city":"Oslo"}'),
            ev.ToolCall("call_b", "calculate", '{"expression": "6*7"}'),
            ev.Finish("tool-calls"),
            ev.ToolResult("call_a", {"temperature": -3, "sky": "snow"}),
            ev.ToolResult("call_b", "42 (exactly)"),
            ev.StepFinished(0),
            ev.TextDelta("Oslo: -3 °C, snow. 6×7 = 42."),
            ev.Finish("stop"),
            ev.StepFinished(1),
            ev.Done(),
        ],
    },
    "tool-fails": {
        "description": "A tool that raised (masked text) and a call whose arguments are not JSON.",
        "events": [
            ev.ToolCallStart("call_1", "get_weather"),
            ev.ToolCallDelta("call_1", '{"city": "Rome"}'),
            ev.ToolCall("call_1", "get_weather", '{"city": "Rome"}'),
            ev.ToolCall("call_2", "calculate", '{"expression": 1+}'),
            ev.Finish("tool-calls"),
            ev.ToolResult("call_1", "An error occurred.", is_error=True),
            ev.StepFinished(0),
            ev.TextDelta("Sorry, both tools failed."),
            ev.Finish("stop"),
            ev.StepFinished(1),
            ev.Done(),
        ],
    },
    "model-error-mid-text": {
        "description": "The provider fails mid-answer: the wire gets the masked text, never the provider's words.",
        "expect_error": "An error occurred.",
        "events": [
            ev.TextDelta("The answer is"),
            {"type": "raise", "message": "upstream 500: prompt 'my secret plan' rejected"},
            ev.TextDelta(" never sent"),
        ],
    },
    "stops-without-finishing": {
        "description": "The source just stops, mid tool call: open parts and the step close, finish goes out.",
        "events": [
            ev.TextDelta("Looking it up"),
            ev.ToolCallStart("call_1", "search"),
            ev.ToolCallDelta("call_1", '{"q": "dja'),
        ],
    },
    "data-parts": {
        "description": "Data parts: one replaced by id, one transient (never stored), one plain.",
        "events": [
            ev.Data("status", {"stage": "searching"}, id="status-1"),
            ev.Data("notification", {"text": "Working…"}, transient=True),
            ev.TextDelta("Found it."),
            ev.Data("status", {"stage": "done"}, id="status-1"),
            ev.Data("weather", {"city": "Lima", "temperature": 21}),
            ev.Finish("stop"),
        ],
    },
    "sources-and-files": {
        "description": "Sources by URL and document, and a file part.",
        "events": [
            ev.TextDelta("See the docs."),
            ev.SourceUrl("src-1", "https://docs.djangoproject.com/", title="Django docs"),
            ev.SourceDocument("src-2", "application/pdf", "Design notes", filename="design.pdf"),
            ev.File("data:image/png;base64,iVBORw0KGgo=", "image/png"),
            ev.Finish("stop"),
        ],
    },
    "message-metadata": {
        "description": "Metadata on start, mid-stream and merged at the end.",
        "message_metadata": {"model": "demo", "createdAt": 1764460800000},
        "events": [
            ev.TextDelta("Hello."),
            ev.MessageMetadata({"usage": {"outputTokens": 2}}),
            ev.Finish("stop"),
        ],
    },
    "approval-request": {
        "description": "A tool that needs a person's approval: the run ends with the call pending.",
        "events": [
            ev.TextDelta("I will send that email once you approve."),
            ev.ToolCallStart("call_1", "send_email"),
            ev.ToolCallDelta("call_1", '{"to": "ada@example.com", "body": "Hi"}'),
            ev.ToolCall("call_1", "send_email", '{"to": "ada@example.com", "body": "Hi"}'),
            ev.ToolApprovalRequest("approval-7f3a", "call_1"),
            ev.Finish("tool-calls"),
            ev.StepFinished(0),
            ev.Done(),
        ],
    },
    "escapes-and-unicode": {
        "description": "Quotes, backslashes, control characters, emoji and markup travel intact.",
        "events": [
            ev.TextDelta('He said "hi"\\n'),
            ev.TextDelta("line\nbreak\ttab \u2028 é 🤖 </script><b>"),
            ev.Finish("stop"),
        ],
    },
    "interrupted": {
        "description": "An ai@7-only finish reason: older clients get one they accept.",
        "events": [ev.TextDelta("Partial"), ev.Finish("stop"), ev.Done("interrupted")],
    },
    "replayed-stored-turn": {
        "description": "A stored assistant message with every common part kind, replayed as a stream.",
        "stored_message": {
            "id": "msg-stored-1",
            "role": "assistant",
            "metadata": {"model": "demo"},
            "parts": [
                {"type": "step-start"},
                {"type": "reasoning", "id": "reasoning-0", "text": "Weather question.", "state": "done"},
                {"type": "text", "text": "Checking.", "state": "done"},
                {
                    "type": "tool-get_weather",
                    "toolCallId": "call_1",
                    "state": "output-available",
                    "input": {"city": "Paris"},
                    "output": {"temperature": 18},
                },
                {"type": "step-start"},
                {"type": "text", "text": "18 °C in Paris.", "state": "done"},
                {"type": "source-url", "sourceId": "s1", "url": "https://example.com/weather"},
                {"type": "data-weather", "id": "w1", "data": {"city": "Paris"}},
            ],
        },
    },
}


def scenario_events(spec_events: list[Any]) -> Iterator[ev.Event]:
    """The event source a scenario describes (raises where it says so)."""
    for item in spec_events:
        if isinstance(item, dict):
            if item.get("type") == "raise":
                raise SourceFailure(item["message"])
            yield ev.event_from_dict(item)
        else:
            yield item


def canonical_chunks(directory: Path) -> list[Chunk]:
    """Encode a fixture's source (events.jsonl or stored_message.json)."""
    scenario = json.loads((directory / "scenario.json").read_text())
    logged = directory / "chunks.jsonl"
    if logged.exists():
        # Exported from a stored run whose log no events re-encode to (a
        # stopped run's abort): the chunks themselves are the source.
        return [json.loads(line) for line in logged.read_text().split("\n") if line]
    stored = directory / "stored_message.json"
    if stored.exists():
        from uistream_app.protocol.ui.replay import replay_message

        return replay_message(json.loads(stored.read_text()))
    lines = [json.loads(line) for line in (directory / "events.jsonl").read_text().split("\n") if line]
    encoder = UIMessageEncoder(scenario.get("message_id"), scenario.get("message_metadata"))
    return list(encode_events(scenario_events(lines), encoder))


def render(chunks: list[Chunk], version: int) -> bytes:
    renderer = UIStreamRenderer(version)
    return renderer.render_many(chunks) + renderer.done()


def sse_chunks(body: bytes) -> list[Chunk]:
    return [json.loads(e.data) for e in parse_sse(body) if e.data != DONE]


def fixture_dirs() -> list[Path]:
    return sorted(p for p in FIXTURES.iterdir() if (p / "scenario.json").exists())


def _sdk_message(node: str, version: int, path: Path) -> dict[str, Any]:
    out = subprocess.run(
        [node, str(ROOT / "tests" / "js" / "build_message.mjs"), str(version), str(path)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def regenerate(node: str = "node") -> None:
    for name, spec in SCENARIOS.items():
        directory = FIXTURES / name
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.iterdir():
            stale.unlink()
        scenario: dict[str, Any] = {"description": spec["description"]}
        if "stored_message" in spec:
            (directory / "stored_message.json").write_text(
                json.dumps(spec["stored_message"], indent=2, ensure_ascii=False) + "\n"
            )
        else:
            scenario["message_id"] = f"msg-{name}"
            if "message_metadata" in spec:
                scenario["message_metadata"] = spec["message_metadata"]
            lines = [e if isinstance(e, dict) else ev.event_to_dict(e) for e in spec["events"]]
            (directory / "events.jsonl").write_text(
                "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
            )
        if "expect_error" in spec:
            scenario["expect_error"] = spec["expect_error"]
        (directory / "scenario.json").write_text(json.dumps(scenario, indent=2, ensure_ascii=False) + "\n")
        chunks = canonical_chunks(directory)
        messages: dict[int, Any] = {}
        for version in VERSIONS:
            path = directory / f"v{version}.sse"
            path.write_bytes(render(chunks, version))
            messages[version] = _sdk_message(node, version, path)
        for version in VERSIONS:
            result = messages[version]
            if version == 7:
                target = directory / "message.json"
            elif result["message"] != messages[7]["message"]:
                target = directory / f"message.v{version}.json"
            else:
                continue
            target.write_text(json.dumps(result["message"], indent=2, ensure_ascii=False) + "\n")
        print(f"{name}: {len(chunks)} chunks")


if __name__ == "__main__":
    regenerate(sys.argv[1] if len(sys.argv) > 1 else "node")
