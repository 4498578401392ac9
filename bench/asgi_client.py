"""A minimal in-process ASGI client for the benchmarks that call an
application directly (no server, no socket): ``call`` one request and get
its ``Answer``; a ``Browser`` keeps a page's cookies and CSRF token. Free of
Django, so a benchmark imports it before it configures its settings."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DELTAS", "FIRST", "Answer", "Browser", "call"]

#: The chunk types a "delta" is, and the ones a first delta is.
DELTAS = (b'"type":"text-delta"', b'"type":"reasoning-delta"', b'"type":"tool-input-delta"')
FIRST = (b'"type":"text-delta"', b'"type":"reasoning-delta"')


@dataclass
class Answer:
    status: int = 0
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: list[bytes] = field(default_factory=list)
    first_delta: float | None = None  # seconds from the call
    headers_at: float | None = None  # seconds from the call to the response's start

    def deltas(self) -> int:
        data = b"".join(self.body)
        return sum(data.count(marker) for marker in DELTAS)


async def call(
    app: Any,
    method: str,
    target: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    *,
    on_body: Callable[[bytes], None] | None = None,
) -> Answer:
    """One request to ``app``; the client stays connected until the
    response ends. ``on_body``: each piece of the body goes there instead
    of into ``Answer.body`` (a long stream is not kept)."""
    raw_headers = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    raw_headers += [(b"host", b"127.0.0.1"), (b"content-length", str(len(body)).encode())]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": target,
        "raw_path": target.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": raw_headers,
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 80),
    }
    answer = Answer()
    delivered = False
    never = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await never.wait()  # the client stays connected
        return {"type": "http.disconnect"}

    started = time.perf_counter()

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers_at = time.perf_counter() - started
            answer.headers = list(message.get("headers") or [])
        elif message["type"] == "http.response.body":
            piece = message.get("body", b"")
            if piece:
                if answer.first_delta is None and any(marker in piece for marker in FIRST):
                    answer.first_delta = time.perf_counter() - started
                if on_body is None:
                    answer.body.append(piece)
                else:
                    on_body(piece)

    await app(scope, receive, send)
    return answer


class Browser:
    """A page's cookies and CSRF token, for a Django application."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.cookies: dict[str, str] = {}
        self.token = ""

    def keep(self, answer: Answer) -> None:
        for name, value in answer.headers:
            if name.lower() == b"set-cookie":
                pair = value.decode().split(";", 1)[0]
                key, _, val = pair.partition("=")
                self.cookies[key.strip()] = val

    async def start(self) -> None:
        answer = await call(self.app, "GET", "/api/csrf")
        self.keep(answer)
        self.token = json.loads(b"".join(answer.body))["csrfToken"]

    async def post(
        self, target: str, body: dict[str, Any], *, on_body: Callable[[bytes], None] | None = None
    ) -> Answer:
        headers = {
            "content-type": "application/json",
            "x-csrftoken": self.token,
            "cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items()),
        }
        answer = await call(self.app, "POST", target, json.dumps(body).encode(), headers, on_body=on_body)
        self.keep(answer)
        return answer
