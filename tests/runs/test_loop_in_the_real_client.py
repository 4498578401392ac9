"""A loop run, encoded, read by the real ai@5/6/7 client (``tests/js``).

The run covers what a loop adds to a model's stream: reasoning, text, two
parallel calls with fragmented arguments, arguments that are not JSON,
arguments that do not fit, an unknown tool, a masked tool failure, a
``ToolError``, several steps, an approval request, and a run cut by
``max_steps``. The client must accept every byte and build the message the
loop meant.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from demo_project.demo_model import DEMO_TOOLS, DemoModel
from uistream_app.protocol.ui.encoder import UIMessageEncoder
from uistream_app.protocol.ui.render import UIStreamRenderer
from uistream_app.protocol.ui.stream import aencode_events
from uistream_app.runs import ScriptedModel, ToolError, ToolLoop, UserMessage, tool
from uistream_app.runs.scripted import call, reasoning, text

from ..conftest import JS_DIR

pytestmark = [pytest.mark.asyncio, pytest.mark.node]


@tool
async def get_weather(city: str) -> dict[str, Any]:
    """Weather."""
    if city == "Atlantis":
        raise ToolError("No such city.")
    return {"city": city, "temp": 21}


@tool
async def broken() -> str:
    """Always fails."""
    raise RuntimeError("secret detail")


@tool(requires_approval=True)
async def send_email(to: str) -> str:
    """Sends."""
    return "sent"


async def encode(loop: ToolLoop, prompt: str, version: int) -> bytes:
    renderer = UIStreamRenderer(version)
    out = [
        renderer.render(chunk)
        async for chunk in aencode_events(loop.run([UserMessage(prompt)]), UIMessageEncoder("msg-1"))
    ]
    return b"".join(out) + renderer.done()


def read_in_client(node: str, version: int, body: bytes, tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / f"run.v{version}.sse"
    path.write_bytes(body)
    result = subprocess.run(
        [node, str(JS_DIR / "build_message.mjs"), str(version), str(path)],
        cwd=JS_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr + result.stdout
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def busy_loop() -> ToolLoop:
    model = ScriptedModel(
        [
            reasoning("Let me look.", words=True),
            text("Checking the weather.", words=True),
            call("get_weather", {"city": "Paris"}, fragments=3),
            call("get_weather", {"city": "Atlantis"}, fragments=2),
            call("get_weather", '{"city": "Par'),
            call("get_weather", {"town": "Oslo"}),
            call("teleport", {"to": "Mars"}),
            call("broken"),
        ],
        [text("Paris is 21. Sending a note.", words=True), call("send_email", {"to": "a@b.c"})],
    )
    return ToolLoop(model, [get_weather, broken, send_email])


def tool_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in message["parts"] if p["type"].startswith("tool-") or p["type"] == "dynamic-tool"]


@pytest.mark.parametrize("version", [7, 6])
async def test_a_busy_loop_run_is_read_by_the_real_client(node: str, tmp_path: Path, version: int) -> None:
    body = await encode(busy_loop(), "go", version)
    result = read_in_client(node, version, body, tmp_path)
    assert result["ok"]
    assert result["done"]
    assert result["error"] is None
    message = result["message"]
    assert message["id"] == "msg-1"
    assert [p["type"] for p in message["parts"] if p["type"] == "step-start"] == ["step-start"] * 2
    states: dict[str, tuple[Any, Any, Any]] = {
        p["toolCallId"]: (p["state"], p.get("output"), p.get("errorText")) for p in tool_parts(message)
    }
    assert states["call_0"] == ("output-available", {"city": "Paris", "temp": 21}, None)
    assert states["call_1"] == ("output-error", None, "No such city.")
    assert states["call_2"][0] == "output-error"
    assert "Invalid JSON" in states["call_2"][2]
    assert states["call_3"][0] == "output-error"
    assert "`city` is required" in states["call_3"][2]
    assert states["call_4"][0] == "output-error"
    assert "unavailable tool 'teleport'" in states["call_4"][2]
    assert states["call_5"] == ("output-error", None, "An error occurred.")
    assert states["call_6"][0] == "approval-requested"
    texts = "".join(p["text"] for p in message["parts"] if p["type"] == "text")
    assert texts == "Checking the weather.Paris is 21. Sending a note."
    assert b"secret detail" not in body


async def test_a_run_cut_by_max_steps_is_read_by_the_real_client(node: str, tmp_path: Path) -> None:
    model = ScriptedModel(*[[call("get_weather", {"city": f"C{i}"})] for i in range(3)])
    body = await encode(ToolLoop(model, [get_weather], max_steps=2), "go", 7)
    result = read_in_client(node, 7, body, tmp_path)
    assert result["ok"]
    assert [p["state"] for p in tool_parts(result["message"])] == ["output-available"] * 2
    assert b'{"type":"finish","finishReason":"length"}' in body


@pytest.mark.parametrize("version", [7, 5])
async def test_the_demo_model_is_read_by_the_real_client(node: str, tmp_path: Path, version: int) -> None:
    loop = ToolLoop(DemoModel(delay_ms=0), DEMO_TOOLS)
    body = await encode(loop, "weather in Paris and Rome, and compute 6 * 7", version)
    result = read_in_client(node, version, body, tmp_path)
    assert result["ok"]
    parts = result["message"]["parts"]
    assert [p["state"] for p in tool_parts(result["message"])] == ["output-available"] * 3
    assert any(p["type"] == "reasoning" for p in parts)
    assert "6 * 7 = 42." in "".join(p["text"] for p in parts if p["type"] == "text")
