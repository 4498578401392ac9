"""A real chat-completions server on 127.0.0.1 for the provider tests.

Written on ``asyncio.start_server`` (no framework, no mocked transport):
each request pops the next scripted ``Reply``, which says the status, the
headers, and the body as a list of writes. The body goes out with chunked
transfer encoding, one TCP write per item, so a test controls exactly
where the network splits the stream; ``drop`` closes the socket without
the final chunk (a connection lost mid-stream), ``hold`` stops writing and
waits for the client to hang up (``client_gone`` is set when it does).
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any


def sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> bytes:
    """One ``chat.completion.chunk`` event with one choice."""
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
    }
    body.update(extra)
    return sse(body)


def usage_chunk(prompt: int, completion: int, **details: Any) -> bytes:
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    usage.update(details)
    return sse({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [], "usage": usage})


DONE = b"data: [DONE]\n\n"


@dataclass
class Reply:
    status: int = 200
    body: list[bytes] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    hold: bool = False
    #: Answer the request's own headers as the body (a provider whose error
    #: quotes the request, its credentials included).
    echo: bool = False


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class ChatServer:
    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Request] = []
        self.client_gone = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    def add(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    @property
    def base_url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def __aenter__(self) -> ChatServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            self.client_gone.set()
        finally:
            self._handlers.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self.requests.append(Request(method, path, headers, body))
        reply = self.replies.popleft() if self.replies else Reply(500, [b'{"error": "no reply scripted"}'])
        reason = {200: "OK", 429: "Too Many Requests", 500: "Internal Server Error"}.get(reply.status, "Status")
        content_type = "text/event-stream" if reply.status == 200 else "application/json"
        out = [
            f"HTTP/1.1 {reply.status} {reason}",
            f"content-type: {content_type}",
            "transfer-encoding: chunked",
            "connection: close",
        ]
        out += [f"{k}: {v}" for k, v in reply.headers.items()]
        writer.write(("\r\n".join(out) + "\r\n\r\n").encode())
        await writer.drain()
        pieces = [json.dumps({"error": "unauthorized", "request_headers": headers}).encode()] if reply.echo else []
        for piece in [*reply.body, *pieces]:
            writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            await writer.drain()
        if reply.hold:
            # Wait for the client to hang up: EOF (or a reset) on the socket.
            while await reader.read(1024):
                pass
            self.client_gone.set()
            return
        if reply.drop:
            writer.transport.abort()
            return
        writer.write(b"0\r\n\r\n")
        await writer.drain()
