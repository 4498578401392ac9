"""A request body over ``MAX_REQUEST_BYTES`` gets the pipeline's 413 JSON,
however it is sent: ``limit_request_bodies`` (the demo's ``asgi.py``)
answers a chunked body as soon as it passes the limit, and under uvicorn
the server stops reading it; the views answer the same when a body reaches
them whole (no guard, or a server that spooled it)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from django.test import override_settings

from uistream_app.models import Conversation, Message, Run
from uistream_app.protocol.jsonbody import LARGE_JSON_BYTES
from uistream_app.testing import ChatClient, ScriptedModel, user_message
from uistream_app.transport import body_limits
from uistream_app.transport.body_limits import MMAP_THRESHOLD_BYTES

from .server import demo_server, serve_demo, shared_database_url
from .test_chat_http import Browser

pytestmark = pytest.mark.django_db(transaction=True)

MB = 1024 * 1024
# The default MAX_REQUEST_BYTES, which the demo keeps: derived from the
# 10 MiB MAX_FILE_BYTES (docs/operations.md, "Body limits"): room for three
# such files in base64, plus 1 MiB. About 41 MiB.
LIMIT = 3 * -(-10 * MB * 4 // 3) + 1 * MB
HUGE = LIMIT + 30 * MB


def too_large(response_status: int, body: bytes) -> bool:
    return response_status == 413 and json.loads(body)["error"]["code"] == "too_large"


def chat_body_pieces(total: int, piece: int = 64 * 1024) -> Iterator[bytes]:
    """A useChat body of about ``total`` bytes (one huge text part), in pieces."""
    yield b'{"id": "big", "trigger": "submit-message", "messages": [{"id": "u1", "role": "user", '
    yield b'"parts": [{"type": "text", "text": "'
    for _ in range(total // piece):
        yield b"a" * piece
    yield b'"}]}]}'


class ChunkedUpload:
    """Sends a chunked POST from one thread while the test reads the answer
    on the same socket: what a client that keeps sending sees, and how
    much it had managed to send when the answer came."""

    def __init__(self, url: str, path: str, headers: dict[str, str], pieces: Iterator[bytes]) -> None:
        parts = urlsplit(url)
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=30)
        # A small send buffer of our own: what was sent is (nearly) what the
        # server's side has taken, not what sits in this process's kernel.
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        head = f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nTransfer-Encoding: chunked\r\n"
        head += "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        self.sock.sendall(head.encode() + b"\r\n")
        self.sent = 0
        self.pieces = pieces
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        try:
            for piece in self.pieces:
                self.sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.sent += len(piece)
            self.sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server closed the connection: it stopped reading

    def answer(self) -> tuple[int, bytes, int]:
        """The status and body of the answer, and the body bytes sent when
        the answer's head arrived."""
        response = http.client.HTTPResponse(self.sock)
        response.begin()
        sent_by_then = self.sent
        body = response.read()
        self.sock.close()
        self.thread.join(timeout=30)
        return response.status, body, sent_by_then


def session_headers(base: str) -> dict[str, str]:
    browser = Browser(base)
    cookie = "; ".join(f"{name}={value}" for name, value in browser.client.cookies.items())
    return {"Content-Type": "application/json", "X-CSRFToken": browser.token, "Cookie": cookie}


@pytest.fixture
def demo_env() -> dict[str, str]:
    return {
        "DJANGO_SETTINGS_MODULE": "demo_project.settings",
        "DATABASE_URL": shared_database_url(),
    }


def test_uvicorn_refuses_a_huge_chunked_body_with_413_json_after_reading_little_of_it(
    demo_env: dict[str, str],
) -> None:
    with demo_server("uvicorn", demo_env) as server:
        upload = ChunkedUpload(server.url, "/api/chat", session_headers(server.url), chat_body_pieces(HUGE))
        status, body, sent = upload.answer()
        assert too_large(status, body), (status, body[:300])
        # The answer came while the client still had much of its body to
        # send: the server read the limit and its buffers, not the body.
        assert sent < LIMIT + 8 * MB, sent
        # And the server is fine: the next request on a new connection works.
        assert httpx.get(server.url + "/api/csrf").status_code == 200
    assert Conversation.objects.count() == 0
    assert Run.objects.count() == 0


def test_daphne_refuses_a_huge_chunked_body_with_413_json(demo_env: dict[str, str]) -> None:
    # daphne reads a whole body before the application runs (docs/operations.md):
    # the answer is the same 413 JSON, after all of it has arrived.
    with demo_server("daphne", demo_env) as server:
        upload = ChunkedUpload(server.url, "/api/chat", session_headers(server.url), chat_body_pieces(HUGE))
        status, body, _sent = upload.answer()
        assert too_large(status, body), (status, body[:300])
    assert Conversation.objects.count() == 0


def test_a_declared_length_over_the_limit_is_refused_before_the_body(demo_env: dict[str, str]) -> None:
    with demo_server("uvicorn", demo_env) as server:
        parts = urlsplit(server.url)
        with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
            head = f"POST /api/chat HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Length: {HUGE}\r\n"
            head += "".join(f"{name}: {value}\r\n" for name, value in session_headers(server.url).items())
            sock.sendall(head.encode() + b"\r\n")  # and not a byte of the body
            response = http.client.HTTPResponse(sock)
            response.begin()
            assert too_large(response.status, response.read())


@pytest.fixture
def unguarded(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Django's own ASGI application, no guard in front: the views' checks
    (with the 1 MiB limit of a project that sets one)."""
    demo = {"ALLOW_ANONYMOUS": True, "MODEL": "demo_project.demo_model.make_model", "MAX_REQUEST_BYTES": 1 * MB}
    with override_settings(UISTREAM=demo):
        yield from serve_demo(monkeypatch, delay_ms=1)


@pytest.mark.parametrize(
    "size",
    [
        pytest.param(int(1.5 * MB), id="over MAX_REQUEST_BYTES"),
        pytest.param(3 * MB, id="over DATA_UPLOAD_MAX_MEMORY_SIZE too"),
    ],
)
def test_the_views_refuse_a_chunked_body_over_the_limit_with_the_same_413_json(unguarded: str, size: int) -> None:
    browser = Browser(unguarded)
    response = browser.client.post(
        "/api/chat",
        content=chat_body_pieces(size),  # an iterator: sent chunked, no Content-Length
        headers={"Content-Type": "application/json", "X-CSRFToken": browser.token},
    )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"
    assert Conversation.objects.count() == 0


def test_a_body_over_data_upload_max_memory_size_within_ours_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Django's DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MiB) does not stand in the
    way of a body within MAX_REQUEST_BYTES: the views read it themselves."""
    demo = {"ALLOW_ANONYMOUS": True, "MODEL": "demo_project.demo_model.make_model", "MAX_REQUEST_BYTES": 8 * MB}
    with override_settings(UISTREAM=demo):
        for base in serve_demo(monkeypatch, delay_ms=0):
            browser = Browser(base)
            body = browser.chat_body("roomy", "count to 2 " + "x" * (3 * MB))
            response = browser.post("/api/chat", body)
            assert response.status_code == 200, response.text[:300]
            assert Conversation.objects.filter(client_id="roomy").exists()


def test_a_body_within_the_limit_sent_chunked_still_starts_a_chat(unguarded: str) -> None:
    browser = Browser(unguarded)
    body: dict[str, Any] = browser.chat_body("small", "count to 3")
    response = browser.client.post(
        "/api/chat",
        content=iter([json.dumps(body).encode()]),
        headers={"Content-Type": "application/json", "X-CSRFToken": browser.token},
    )
    assert response.status_code == 200
    assert '"type":"finish"' in response.text.replace(" ", "")


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [MMAP_THRESHOLD_BYTES - 1, MMAP_THRESHOLD_BYTES])
async def test_after_a_request_with_a_big_body_the_heap_gives_back_its_free_pages(
    monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    # What a big body leaves in glibc's heap once freed is given back when
    # its request is over (bench/body_memory.py measures it); a small
    # body's request costs no trim.
    trims: list[int] = []
    monkeypatch.setattr(body_limits, "trim_heap", lambda: trims.append(read[0]) or True)
    read = [0]

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            read[0] += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    pieces = [b"x" * (size // 2), b"x" * (size - size // 2)]
    messages = [{"type": "http.request", "body": piece, "more_body": i == 0} for i, piece in enumerate(pieces)]

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/api/chat", "headers": []}
    await body_limits.limit_request_bodies(app, max_bytes=2 * size)(scope, receive, send)
    assert sent[0]["status"] == 204
    assert trims == ([size] if size >= MMAP_THRESHOLD_BYTES else [])


@pytest.mark.asyncio
async def test_a_big_text_is_stored_and_given_to_the_model_as_sent(settings: Any, django_user_model: Any) -> None:
    """A message of ``LARGE_JSON_BYTES`` or more of JSON, whose parts the
    store lets go while their row is written and reads back from its JSON
    after (and, on PostgreSQL, sends apart from the SQL): in a new chat and
    in its next turn, and in another chat under an id the first one's
    message holds as its key (the insert fails and is made again under a
    key of the server's), the model is given the text whole and the stored
    message is the one sent, its NUL as U+FFFD."""
    line = 'caf\u00e9 \U0001f600 "quoted" \\ back \x00 nul\n'
    texts = [
        "a first text, long " * 5 + line * (LARGE_JSON_BYTES // len(line)),
        "and a second " + line * (LARGE_JSON_BYTES // len(line)),
    ]
    model = ScriptedModel("first answer", "second answer", "third answer")
    settings.UISTREAM = {**settings.UISTREAM, "MODEL": model}
    chat = ChatClient()
    await chat.aforce_login(await django_user_model.objects.acreate(username="ada"))
    for index, (text, answer) in enumerate(zip(texts, ("first answer", "second answer"), strict=True)):
        result = await chat.send(user_message(text, id=f"big-{index}"))
        assert result.text == answer
        assert model.requests[-1].messages[-1].content == text.replace("\x00", "\ufffd")
    result = await chat.send(user_message(texts[0], id="big-0"), chat_id="another")
    assert result.text == "third answer"
    assert model.requests[-1].messages[-1].content == texts[0].replace("\x00", "\ufffd")

    sent = [[{"type": "text", "text": text.replace("\x00", "\ufffd")}] for text in texts]
    stored = [
        (m.role, m.parts if m.role == "user" else "".join(p["text"] for p in m.parts if p["type"] == "text"))
        async for m in Message.objects.filter(conversation__client_id=chat.chat_id).order_by("position")
    ]
    assert stored == [
        ("user", sent[0]),
        ("assistant", "first answer"),
        ("user", sent[1]),
        ("assistant", "second answer"),
    ]
    again = await Message.objects.aget(conversation__client_id="another", role="user")
    assert again.pk != "big-0"
    assert (again.client_id, again.parts) == ("big-0", sent[0])
