"""Per-run usage limits: a run that crosses one ends with an in-band error
naming the limit, stored ``failed`` with ``error_code="usage_limit"``, and
the real ai@7 client (``chat_client.mjs``) sees the error and the message
up to there, which is what was stored."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from uistream_app.lifecycle.limits import RunUsageLimit
from uistream_app.models import Run

from .server import serve_demo
from .test_agui_http import run_client as run_agui_client
from .test_chat_http import Browser, read_chunks, wait_for
from .test_chat_http import text_of as chunk_text
from .test_chat_real_client import run_client, stored_messages

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    # The demo model waits 40 ms before each delta: the wall-time limit
    # below (10 ms) is crossed while it waits for its first.
    yield from serve_demo(monkeypatch, 40)


def limited(settings: Any, **fields: Any) -> None:
    settings.UISTREAM = {**settings.UISTREAM, "USAGE_LIMITS": [RunUsageLimit(**fields)]}


def cut_run(node: str, server: str, chat_id: str, text: str) -> tuple[dict[str, Any], Run, dict[str, Any]]:
    browser = Browser(server)
    out = run_client(node, server, browser, chatId=chat_id, version=7, steps=[{"send": text}])
    wait_for(lambda: not Run.objects.filter(status="running").exists(), "the run to be stored")
    run = Run.objects.get(conversation__client_id=chat_id)
    return out, run, stored_messages(chat_id)[-1]


def tool_states(message: dict[str, Any]) -> list[str]:
    return [p["state"] for p in message["parts"] if p["type"].startswith("tool-")]


def text_of(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")


def test_output_tokens_limit(node: str, server: str, settings: Any) -> None:
    limited(settings, output_tokens=2)
    out, run, stored = cut_run(node, server, "lim-out", "count to 3")
    assert out["error"] == "usage_limit: the run reached its output_tokens limit (2)"
    assert (run.status, run.error_code) == ("failed", "usage_limit")
    assert "output_tokens" in run.error_detail
    # The step that crossed it was streamed whole, and its usage is stored.
    assert text_of(stored) == "1 2 3"
    assert run.usage["output_tokens"] > 2
    assert out["messages"][-1] == stored


def test_input_tokens_limit(node: str, server: str, settings: Any) -> None:
    limited(settings, input_tokens=3)
    out, run, stored = cut_run(node, server, "lim-in", "please count to 2 for me now")
    assert out["error"] == "usage_limit: the run reached its input_tokens limit (3)"
    assert (run.status, run.error_code) == ("failed", "usage_limit")
    assert out["messages"][-1] == stored


def test_total_tokens_limit_stops_before_the_next_model_call(node: str, server: str, settings: Any) -> None:
    limited(settings, total_tokens=5)
    out, run, stored = cut_run(node, server, "lim-total", "What's the weather in Oslo?")
    assert out["error"] == "usage_limit: the run reached its total_tokens limit (5)"
    assert (run.status, run.error_code) == ("failed", "usage_limit")
    # The first step asked for the tool; the run ended before running it.
    assert tool_states(stored) == ["input-available"]
    assert out["messages"][-1] == stored


def test_tool_calls_limit_refuses_the_call_before_it_runs(node: str, server: str, settings: Any) -> None:
    limited(settings, tool_calls=0)
    out, run, stored = cut_run(node, server, "lim-tools", "What's the weather in Oslo?")
    assert out["error"] == "usage_limit: the run reached its tool_calls limit (0)"
    assert (run.status, run.error_code) == ("failed", "usage_limit")
    # The model's call was streamed as far as its arguments; it never ran.
    assert tool_states(stored) == ["input-streaming"]
    assert out["messages"][-1] == stored


def test_wall_time_limit(node: str, server: str, settings: Any) -> None:
    limited(settings, wall_seconds=0.01)
    out, run, stored = cut_run(node, server, "lim-wall", "count to 3")
    assert out["error"] == "usage_limit: the run reached its wall_seconds limit (0.01)"
    assert (run.status, run.error_code) == ("failed", "usage_limit")
    assert text_of(stored) == ""
    assert out["messages"][-1] == stored


def test_a_run_within_its_limits_completes(node: str, server: str, settings: Any) -> None:
    limited(settings, output_tokens=10_000, tool_calls=5, wall_seconds=30)
    out, run, stored = cut_run(node, server, "lim-ok", "What's the weather in Oslo?")
    assert out["error"] is None
    assert (run.status, run.error_code) == ("completed", "")
    assert tool_states(stored) == ["output-available"]


def test_the_real_agui_client_sees_the_limit_as_run_error(node: str, server: str, settings: Any) -> None:
    limited(settings, tool_calls=0)
    browser = Browser(server)
    out = run_agui_client(
        node,
        browser,
        f"{server}/api/agui",
        "lim-agui",
        [{"text": "What's the weather in Oslo?", "messageId": "u1", "runId": "run-a"}],
    )
    (run_out,) = out["runs"]
    assert run_out["runError"]["message"] == "usage_limit: the run reached its tool_calls limit (0)"
    wait_for(lambda: not Run.objects.filter(status="running").exists(), "the run to be stored")
    run = Run.objects.get(conversation__client_id="lim-agui")
    assert (run.status, run.error_code) == ("failed", "usage_limit")


def test_a_limited_run_can_still_be_stopped(server: str, settings: Any) -> None:
    # The limits wrap the source; a stop still ends the run as stopped.
    limited(settings, output_tokens=100_000, wall_seconds=60)
    browser = Browser(server)
    with browser.stream("lim-stop", "count to 400") as response:
        read_chunks(response, stop=lambda cs: chunk_text(cs).count(" ") >= 3)
        assert browser.post("/api/chat/lim-stop/stop").json() == {"stopped": True}
        rest, done = read_chunks(response)
    assert done
    assert rest[-1] == {"type": "abort", "reason": "stopped"}
    wait_for(lambda: not Run.objects.filter(status="running").exists(), "the run to end")
    assert (
        Run.objects.get(conversation__client_id="lim-stop").status,
        Run.objects.get(conversation__client_id="lim-stop").error_code,
    ) == ("stopped", "")
