"""The chat endpoints through a real ASGI server on 127.0.0.1.

Streaming, disconnects and resume are only real over a socket: these tests
talk HTTP to uvicorn serving the project, with the demo's offline model
(its "count to N" makes long, paced streams).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.test import override_settings

from uistream_app.models import Message, Run
from uistream_app.protocol.sse import KEEPALIVE_FRAME, SSEParser
from uistream_app.protocol.ui.reader import UIMessageReader
from uistream_app.recording import read_log
from uistream_app.testing import chat_body, user_message

from .conftest import JS_DIR
from .server import serve_demo

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from serve_demo(monkeypatch, 5)


class Browser:
    """A client with a session and its CSRF token, as a page would have."""

    def __init__(self, base: str) -> None:
        self.client = httpx.Client(base_url=base, timeout=20)
        self.token = self.client.get("/api/csrf").json()["csrfToken"]

    def chat_body(self, chat_id: str, text: str, message_id: str = "u1", **extra: Any) -> dict[str, Any]:
        return chat_body(chat_id, [user_message(text, id=message_id)], **extra)

    def post(self, path: str, body: Any = None, **kw: Any) -> httpx.Response:
        return self.client.post(path, json=body, headers={"X-CSRFToken": self.token}, **kw)

    def stream(self, chat_id: str, text: str, **kw: Any) -> Any:
        return self.client.stream(
            "POST",
            "/api/chat",
            json=self.chat_body(chat_id, text, **kw),
            headers={"X-CSRFToken": self.token},
        )


class SSEStream:
    """Reads an SSE response in pieces, keeping what it has read ahead."""

    def __init__(self, response: httpx.Response) -> None:
        self.raw = response.iter_raw()
        self.parser = SSEParser()
        self.events: list[str] = []
        self.done = False

    def read(self, stop: Callable[[list[dict]], bool] | None = None) -> tuple[list[dict], bool]:
        """Chunks until ``[DONE]`` (or until ``stop(chunks)``); returns them
        and whether ``[DONE]`` arrived."""
        chunks: list[dict] = []
        while True:
            while self.events:
                data = self.events.pop(0)
                if data == "[DONE]":
                    self.done = True
                    return chunks, True
                chunks.append(json.loads(data))
                if stop is not None and stop(chunks):
                    return chunks, False
            try:
                raw = next(self.raw)
            except StopIteration:
                return chunks, False
            self.events.extend(e.data for e in self.parser.feed(raw))


def read_chunks(response: httpx.Response, stop: Callable[[list[dict]], bool] | None = None) -> tuple[list[dict], bool]:
    stream = response.extensions.get("uistream_sse")
    if stream is None:
        stream = response.extensions["uistream_sse"] = SSEStream(response)
    return stream.read(stop)


def text_of(chunks: list[dict]) -> str:
    return "".join(c["delta"] for c in chunks if c["type"] == "text-delta")


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def run_finished() -> bool:
    return not Run.objects.filter(status="running").exists()


def test_headers_stream_and_stored_message(server: str) -> None:
    browser = Browser(server)
    with browser.stream("chat-1", "What's the weather in Paris?") as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        assert response.headers["cache-control"] == "no-cache"
        assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        assert response.headers["x-accel-buffering"] == "no"
        chunks, done = read_chunks(response)
    assert done
    wait_for(run_finished, "the run to be stored")
    run = Run.objects.get()
    assert run.status == "completed"
    assert run.chunk_count == len(chunks)
    message = Message.objects.get(role="assistant")
    assert chunks[0] == {"type": "start", "messageId": message.pk}
    tool_chunks = [c for c in chunks if c["type"] == "tool-input-available"]
    assert tool_chunks
    assert tool_chunks[0]["toolName"] == "get_weather"
    reader = UIMessageReader()
    for chunk in chunks:
        reader.feed(chunk)
    assert message.as_ui_message() == reader.message
    assert [entry.chunk for entry in read_log(run)] == chunks


def test_first_chunk_arrives_while_the_model_is_still_producing(server: str) -> None:
    browser = Browser(server)
    with browser.stream("chat-2", "count to 60") as response:
        chunks, _ = read_chunks(response, stop=lambda cs: any(c["type"] == "text-delta" for c in cs))
        # The model has more to say: the run is still going.
        assert Run.objects.get().status == "running"
        rest, done = read_chunks(response)
    assert done
    assert text_of(chunks + rest).split() == [str(n) for n in range(1, 61)]


@pytest.mark.parametrize("policy", ["cancel", "finish"])
def test_disconnect_mid_stream(server: str, policy: str) -> None:
    browser = Browser(server)
    with override_settings(
        UISTREAM={"ALLOW_ANONYMOUS": True, "ON_DISCONNECT": policy, "MODEL": "demo_project.demo_model.make_model"}
    ):
        with browser.stream("chat-3", "count to 400") as response:
            received, _ = read_chunks(response, stop=lambda cs: text_of(cs).count(" ") >= 10)
        wait_for(run_finished, "the run to end after the disconnect")
        run = Run.objects.get()
        log = [entry.chunk for entry in read_log(run)]
        # Everything the client was sent is in the log, in order.
        assert log[: len(received)] == received
        message = Message.objects.get(pk=received[0]["messageId"])
        stored_text = "".join(p.get("text", "") for p in message.parts if p["type"] == "text")
        if policy == "cancel":
            assert run.status == "cancelled"
            assert stored_text.startswith(text_of(received))
            assert len(stored_text.split()) < 400
            assert log[-1]["type"] == "abort"
        else:
            assert run.status == "completed"
            assert stored_text.split() == [str(n) for n in range(1, 401)]


def test_resume_replays_from_the_start_then_follows(server: str) -> None:
    browser = Browser(server)
    with browser.stream("chat-4", "count to 150") as first:
        head, _ = read_chunks(first, stop=lambda cs: len(cs) >= 8)
        with browser.client.stream("GET", "/api/chat/chat-4/stream") as resumed:
            assert resumed.status_code == 200
            assert resumed.headers["x-vercel-ai-ui-message-stream"] == "v1"
            replay, replay_done = read_chunks(resumed)
        rest, done = read_chunks(first)
    assert done
    assert replay_done
    assert replay == head + rest  # no gap, no duplicate, same message id
    wait_for(run_finished, "the run to end")
    assert browser.client.get("/api/chat/chat-4/stream").status_code == 204


def test_stop_is_not_a_disconnect(server: str) -> None:
    browser = Browser(server)
    with browser.stream("chat-5", "count to 400") as response:
        read_chunks(response, stop=lambda cs: text_of(cs).count(" ") >= 5)
        answer = browser.post("/api/chat/chat-5/stop")
        assert answer.status_code == 200
        assert answer.json() == {"stopped": True}
        rest, done = read_chunks(response)
    assert done
    assert rest[-1] == {"type": "abort", "reason": "stopped"}
    wait_for(run_finished, "the run to end")
    assert Run.objects.get().status == "stopped"
    assert browser.post("/api/chat/chat-5/stop").json() == {"stopped": False}


def test_two_subscribers_see_identical_streams(server: str) -> None:
    browser = Browser(server)
    with browser.stream("chat-6", "count to 80") as first:
        head, _ = read_chunks(first, stop=lambda cs: len(cs) >= 3)
        with browser.client.stream("GET", "/api/chat/chat-6/stream") as second:
            other, _ = read_chunks(second)
        rest, _ = read_chunks(first)
    assert other == head + rest


def test_csrf_and_ownership_on_every_path(server: str) -> None:
    alice = Browser(server)
    with alice.stream("chat-7", "count to 300") as response:
        read_chunks(response, stop=lambda cs: len(cs) >= 3)
        mallory = Browser(server)
        # No CSRF token: refused in JSON, nothing written.
        no_csrf = mallory.client.post("/api/chat", json=mallory.chat_body("chat-x", "hi"))
        assert no_csrf.status_code == 403
        assert no_csrf.json()["error"]["code"] == "csrf_failed"
        # Someone else's chat id names no chat of hers: a 404 like a free one.
        for resp in (
            mallory.client.get("/api/chat/chat-7/stream"),
            mallory.post("/api/chat/chat-7/stop"),
            mallory.client.get("/api/chat/no-such-chat/stream"),
        ):
            assert resp.status_code == 404, resp.text
            assert resp.json()["error"]["code"] == "not_found", resp.text
        # And a message under it starts her own chat, beside Alice's run.
        with mallory.stream("chat-7", "count to 3", message_id="m9") as own:
            assert own.status_code == 200
            chunks, done = read_chunks(own)
        assert done
        assert text_of(chunks).split() == ["1", "2", "3"]
        assert alice.post("/api/chat/chat-7/stop").json() == {"stopped": True}
        read_chunks(response)
    wait_for(run_finished, "the run to end")
    statuses = sorted(Run.objects.values_list("status", flat=True))
    assert statuses == ["completed", "stopped"]
    assert Message.objects.get(client_id="", pk="m9").conversation.client_id == "chat-7"
    assert Message.objects.filter(role="user").count() == 2


def test_chunks_reach_the_database_while_the_model_stalls(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # One word a second: without a timed flush, the words already sent
    # would wait in memory until the next one.
    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "1000")
    browser = Browser(server)
    with browser.stream("chat-8", "count to 5") as response:
        # The first delta, of the reasoning or the text: the model then stalls for a second.
        received, _ = read_chunks(response, stop=lambda cs: any(c["type"].endswith("-delta") for c in cs))
        run = Run.objects.get()
        wait_for(lambda: len(read_log(run)) >= len(received), "the sent chunks to be stored")
        assert Run.objects.get().status == "running"
        stored = [entry.chunk for entry in read_log(run)]
        assert stored[: len(received)] == received
        browser.post("/api/chat/chat-8/stop")
        read_chunks(response)


def test_keep_alive_comments_fill_the_silences(
    server: str, monkeypatch: pytest.MonkeyPatch, node: str, tmp_path: Path
) -> None:
    """After ``KEEPALIVE_SECONDS`` without a chunk the stream carries an SSE
    comment (which proxies count as traffic), and the real ai@7 client reads
    the stream with them as the message that was stored."""
    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "150")
    browser = Browser(server)
    faster = override_settings(UISTREAM={**settings.UISTREAM, "KEEPALIVE_SECONDS": 0.05})
    with faster, browser.stream("chat-ka", "count to 3") as response:
        raw = b"".join(response.iter_raw())
    assert raw.count(KEEPALIVE_FRAME) >= 3  # a 150 ms pause holds two or three of them
    path = tmp_path / "with-keepalives.sse"
    path.write_bytes(raw)
    result = subprocess.run(
        [node, str(JS_DIR / "build_message.mjs"), "7", str(path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=JS_DIR,
        timeout=60,
    )
    built = json.loads(result.stdout)
    assert (built["ok"], built["done"], built["error"]) == (True, True, None)
    wait_for(run_finished, "the run to be stored")
    assert built["message"] == Message.objects.get(pk=built["message"]["id"]).as_ui_message()
    assert [p["text"] for p in built["message"]["parts"] if p["type"] == "text"] == ["1 2 3"]
