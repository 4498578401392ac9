"""Resume, follow and stop across processes, through the Redis broker.

The run streams from one server (uvicorn in this process); a second server
(daphne in its own process, same database, same Redis) resumes it, follows
it, and stops it. Skipped without Redis, except in CI where it must run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.core.asgi import get_asgi_application
from django.db import connection
from django.test import override_settings

from uistream_app.models import Run

from .live.conftest import redis_config  # noqa: F401  (fixture)
from .server import ASGIServer, subprocess_server
from .test_chat_http import Browser, read_chunks, text_of, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def two_servers(redis_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "5")
    uistream = {
        "ALLOW_ANONYMOUS": True,
        "MODEL": "demo_project.demo_model.make_model",
        "TOOLS": ["demo_project.demo_model.get_weather", "demo_project.demo_model.calculate"],
        "BROKER": redis_config,
    }
    db_path = connection.settings_dict["NAME"]
    if connection.vendor != "sqlite":
        pytest.skip("the second process shares the database through its file (SQLite)")
    with override_settings(UISTREAM=uistream):
        here = ASGIServer(get_asgi_application())
        first = here.start()
        try:
            env = {
                "DJANGO_SETTINGS_MODULE": "tests.server_settings",
                "DATABASE_URL": f"sqlite:///{db_path}",
                "UISTREAM_TEST_SETTINGS": json.dumps(uistream),
                "UISTREAM_DEMO_DELAY_MS": "5",
            }
            with subprocess_server(env) as second:
                yield first, second
        finally:
            here.stop()


def same_visitor(browser: Browser, base: str) -> httpx.Client:
    """A client for ``base`` that carries ``browser``'s session: the same
    person, reaching another server of the same site."""
    cookie = "; ".join(f"{name}={value}" for name, value in browser.client.cookies.items())
    return httpx.Client(base_url=base, headers={"Cookie": cookie}, timeout=20)


def test_resume_from_another_process_reproduces_the_same_bytes(two_servers: tuple[str, str]) -> None:
    first, second = two_servers
    browser = Browser(first)
    with browser.stream("chat-r1", "count to 400") as original:
        other = same_visitor(browser, second)  # the POST's answer set the session cookie
        raw = original.iter_raw()  # kept: dropping it would close the stream
        head = b""
        while head.count(b"text-delta") < 5:
            head += next(raw)
        with other.stream("GET", "/api/chat/chat-r1/stream") as resumed:
            assert resumed.status_code == 200
            resumed_body = resumed.read()
        original_body = head + b"".join(raw)
    assert resumed_body == original_body
    assert resumed_body.endswith(b"data: [DONE]\n\n")
    wait_for(lambda: not Run.objects.filter(status="running").exists(), "the run to be stored")
    assert other.get("/api/chat/chat-r1/stream").status_code == 204


def test_stop_from_another_process(two_servers: tuple[str, str]) -> None:
    first, second = two_servers
    browser = Browser(first)
    with browser.stream("chat-r2", "count to 400") as response:
        other = same_visitor(browser, second)
        received, _ = read_chunks(response, stop=lambda cs: text_of(cs).count(" ") >= 5)
        answer = other.post("/api/chat/chat-r2/stop", headers={"X-CSRFToken": browser.token})
        assert answer.json() == {"stopped": True}
        rest, done = read_chunks(response)
    assert done
    assert rest[-1] == {"type": "abort", "reason": "stopped"}
    wait_for(lambda: Run.objects.filter(status="stopped").exists(), "the run to be stored as stopped")
    assert len(text_of(received + rest).split()) < 400


def test_reconnect_by_index_in_another_process(two_servers: tuple[str, str]) -> None:
    """WorkflowChatTransport's reconnect (``?startIndex=N`` by run id) served
    by a process that did not run the run: from the Redis stream while it
    runs, numbered as the POST's events."""
    first, second = two_servers
    browser = Browser(first)
    with browser.stream("chat-r3", "count to 400") as original:
        run_id = original.headers["x-workflow-run-id"]
        other = same_visitor(browser, second)
        head, _ = read_chunks(original, stop=lambda cs: len(cs) >= 10)
        with other.stream("GET", f"/api/chat/{run_id}/stream?startIndex=10") as again:
            assert again.status_code == 200
            assert int(again.headers["x-workflow-stream-tail-index"]) >= 9
            followed, done = read_chunks(again)
        rest, _ = read_chunks(original)
    assert done
    assert followed == (head + rest)[10:]
    assert followed[-1]["type"] == "finish"
    wait_for(lambda: not Run.objects.filter(status="running").exists(), "the run to be stored")
    ended = other.get(f"/api/chat/{run_id}/stream?startIndex=-3")
    assert ended.status_code == 200
    assert ended.headers["x-workflow-stream-tail-index"] == str(len(head + rest) - 1)
