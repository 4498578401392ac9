"""Time to first byte as a conversation grows, with useChat's default request.

    .venv/bin/python bench/ttfb_bench.py [--turns 500] [--server uvicorn|daphne] [--root CHECKOUT]

One ASGI server process (``http_bench.Server``: the demo project on a fresh
SQLite file, WAL) and one chat: ``--turns`` turns of "count to 3" on the
demo model, each POSTed as useChat sends it by default: the whole history
(every earlier user and assistant message) plus the new user message. Per
turn, the time from sending the request to the first byte of the response
body (the ``start`` chunk), on a fresh connection. Printed: the median of
the first 10 turns and of the last 10, and their ratio (the reference is
turn 1..10 of the same run), plus the request body's size at the end;
then, paired so that the machine's drift cancels, ten rounds of a fresh
chat's first turn beside one more turn of the long chat, and the median of
their ratios. ``--versions N`` regenerates each answer N-1 times (every
attempt is kept), and the messages API's pages are timed at the end.

``--root`` runs the server from another checkout (its own
``bench/bench_settings.py``), e.g. the commit before a change, to compare
the same figure before and after in one sitting.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import http_bench
from bench_common import HOST
from http_bench import Client, Server, encode_request, parse_head

from uistream_app.protocol.sse import SSEParser


def turn(
    client: Client, chat_id: str, history: list[dict[str, Any]], text: str, *, regenerate: bool = False
) -> tuple[float, dict[str, Any]]:
    """One turn: (seconds to the first body byte, the assistant message).
    ``regenerate``: useChat's ``regenerate()`` of the last answer instead
    (the history without it, ``messageId`` naming it): a new version."""
    request: dict[str, Any] = {"id": chat_id, "trigger": "submit-message", "messages": history}
    if regenerate:
        request.update(trigger="regenerate-message", messageId=history.pop()["id"])
    else:
        message = {"id": "u-" + uuid.uuid4().hex[:16], "role": "user", "parts": [{"type": "text", "text": text}]}
        history.append(message)
    body = json.dumps(request).encode()
    raw = encode_request("POST", "/api/chat", body, client.headers(client.chat_headers()))
    data = b""
    with socket.create_connection((HOST, client.port), timeout=120) as sock:
        t0 = time.perf_counter()
        sock.sendall(raw)
        first = 0.0
        while True:
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            data += chunk
            if not first and b"\r\n\r\n" in data and data.partition(b"\r\n\r\n")[2]:
                first = time.perf_counter() - t0
    head, _, rest = data.partition(b"\r\n\r\n")
    status, headers = parse_head(head)
    if status != 200:
        raise RuntimeError(f"turn {len(history) // 2}: {status} {rest[:300]!r}")
    client.remember(http_bench.Response(status, headers, b"", 0, 0.0, 0))
    payload, _ = http_bench.dechunk(rest)
    parser = SSEParser()
    message_id, texts, reasoning = "", [], []
    for event in parser.feed(payload):
        if event.data == "[DONE]":
            continue
        chunk = json.loads(event.data)
        if chunk["type"] == "start":
            message_id = chunk["messageId"]
        elif chunk["type"] == "text-delta":
            texts.append(chunk["delta"])
        elif chunk["type"] == "reasoning-delta":
            reasoning.append(chunk["delta"])
    parts: list[dict[str, Any]] = [{"type": "step-start"}]
    if reasoning:
        parts.append({"type": "reasoning", "text": "".join(reasoning), "state": "done"})
    parts.append({"type": "text", "text": "".join(texts), "state": "done"})
    assistant = {"id": message_id, "role": "assistant", "parts": parts}
    history.append(assistant)
    return first, assistant


def messages_page(client: Client, chat_id: str, page_size: int = 100) -> tuple[float, int, int]:
    """``GET conversations/<id>/messages/?page_size=N`` (what a reload
    loads; 100 is the default, 1,000 the most), as the chat's owner:
    (median ms of 9, bytes, messages on the page)."""
    target = f"/api/conversations/{chat_id}/messages/?page_size={page_size}"
    raw = encode_request("GET", target, b"", client.headers())
    times, data = [], b""
    for _ in range(9):
        data = b""
        with socket.create_connection((HOST, client.port), timeout=120) as sock:
            t0 = time.perf_counter()
            sock.sendall(raw)
            while chunk := sock.recv(1 << 16):
                data += chunk
            times.append((time.perf_counter() - t0) * 1000)
    head, _, rest = data.partition(b"\r\n\r\n")
    status, headers = parse_head(head)
    if status != 200:
        raise RuntimeError(f"messages page: {status} {rest[:300]!r}")
    if ("Transfer-Encoding", "chunked") in headers:
        rest, _ = http_bench.dechunk(rest)
    return statistics.median(times), len(rest), len(json.loads(rest)["results"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument(
        "--versions", type=int, default=1, help="versions of each answer: each turn regenerated N-1 times (issue 34)"
    )
    parser.add_argument("--server", choices=sorted(http_bench.SERVERS), default="uvicorn")
    parser.add_argument("--root", type=Path, default=None, help="the checkout the server runs (default: this one)")
    args = parser.parse_args()
    if args.root is not None:
        http_bench.ROOT = args.root.resolve()
        http_bench.BENCH = http_bench.ROOT / "bench"
    server = Server("ttfb", delay_ms=1, kind=args.server)
    server.start()
    try:
        client = Client(server.port)
        chat_id = "ttfb-" + uuid.uuid4().hex[:8]
        history: list[dict[str, Any]] = []
        times = []
        for _ in range(args.turns):
            seconds, _assistant = turn(client, chat_id, history, "count to 3")
            times.append(seconds)
            for _ in range(args.versions - 1):
                turn(client, chat_id, history, "", regenerate=True)
        size = len(json.dumps({"id": chat_id, "messages": history}))
        # Paired, so the machine's drift during the long build cancels: a
        # fresh chat's first turn, then one more turn of the long chat, ten times.
        pairs = []
        for _ in range(10):
            fresh, _answer = turn(client, "fresh-" + uuid.uuid4().hex[:8], [], "count to 3")
            grown, _answer = turn(client, chat_id, history, "count to 3")
            pairs.append((fresh, grown))
        pages = [messages_page(client, chat_id, size) for size in (100, 1000)]
    finally:
        server.stop()
    first, last = statistics.median(times[:10]), statistics.median(times[-10:])
    print(f"server {args.server}, checkout {http_bench.ROOT}")
    print(f"time to first byte, turns 1-10:   {first * 1000:7.1f} ms (median)")
    print(f"time to first byte, turns {args.turns - 9}-{args.turns}: {last * 1000:7.1f} ms (median)")
    print(f"ratio last / first: {last / first:.2f}x   (request body at the end: {size / 1024:.0f} KiB)")
    fresh_ms = statistics.median(f for f, _ in pairs) * 1000
    grown_ms = statistics.median(g for _, g in pairs) * 1000
    print(
        f"paired, a fresh chat's first turn / turn {args.turns + 1}+ of the long chat, 10 pairs: "
        f"{fresh_ms:.1f} / {grown_ms:.1f} ms, "
        f"ratio {statistics.median(g / f for f, g in pairs):.2f}x (median of the pairs' ratios)"
    )
    for page_ms, page_bytes, page_count in pages:
        print(
            f"the messages API's first page of {page_count} messages ({args.versions} version(s) of each answer): "
            f"{page_ms:.1f} ms (median of 9), {page_bytes / 1024:.0f} KiB"
        )


if __name__ == "__main__":
    main()
