"""Slow clients against a real server: what it closes, and when (issue 31).

    .venv/bin/python bench/slow_clients.py --server daphne|uvicorn [--connections 50] [--hold 60]
        [--interval 5] [--kinds header,body] [--options=...]

One server process (``--server``) serves the demo (``demo_project.asgi``)
on the demo's settings, ``DJANGO_DEBUG=0`` and a fresh SQLite file
(``ws_bench.Server``). Then ``--connections`` clients of each kind connect
at once and hold their request open for ``--hold`` seconds:

* ``header``: ``GET /`` whose headers never end: the request line, then one
  byte of yet another header line every ``--interval`` seconds;
* ``body``: ``POST /api/chat`` with whole headers (a ``Content-Length`` of
  10 MB, under the default ``MAX_REQUEST_BYTES``), then one byte of the
  body every ``--interval`` seconds;
* ``idle-header`` and ``idle-body``: the same, but nothing more after the
  request line (or the headers): a client that went silent.

A connection counts as closed by the server when its read ends (EOF or a
reset) or a write fails; what the server sent before closing (a status
line) is kept. At the end of the hold, while the slow clients are still
connected, one ordinary ``GET /api/csrf`` shows whether the server still
serves others. Printed: per kind, how many the server closed, the first
and last close (seconds after connecting) and the statuses it sent.

``--options`` adds options to the server's command line
(``--options=--limit-concurrency=80``). scripts/demo adds none: it runs
daphne (``manage.py runserver``), and none of daphne's options bounds how
long a client takes to send its request (docs/operations.md, "Slow
clients", has the figures of this script).
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
from bench_common import HOST
from ws_bench import Server

KINDS = ("header", "body", "idle-header", "idle-body")
BODY_BYTES = 10_000_000


@dataclass
class Held:
    """One slow connection: when the server closed it (seconds after it
    connected; None while open) and what the server sent before."""

    kind: str
    closed_at: float | None = None
    sent: bytes = b""
    errors: list[str] = field(default_factory=list)


def request_head(kind: str, port: int) -> bytes:
    """The bytes sent at once: the request line (header kinds) or the whole
    headers (body kinds)."""
    if kind.endswith("header"):
        return f"GET / HTTP/1.1\r\nHost: {HOST}:{port}\r\n".encode()
    return (
        f"POST /api/chat HTTP/1.1\r\nHost: {HOST}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {BODY_BYTES}\r\n\r\n"
    ).encode()


def trickle(kind: str) -> bytes:
    """What follows, a byte at a time: more header lines, or body bytes."""
    if kind == "header":
        return b"".join(f"X-Slow-{i}: {i}\r\n".encode() for i in range(10_000))
    return b'{"messages": [' + b" " * BODY_BYTES


async def hold(held: Held, port: int, seconds: float, interval: float) -> None:
    started = time.monotonic()
    reader, writer = await asyncio.open_connection(HOST, port)

    async def read_until_closed() -> None:
        try:
            while chunk := await reader.read(65536):
                held.sent += chunk
        except OSError as exc:
            held.errors.append(type(exc).__name__)
        held.closed_at = time.monotonic() - started

    async def send_slowly() -> None:
        writer.write(request_head(held.kind, port))
        await writer.drain()
        if held.kind.startswith("idle"):
            return
        for byte in trickle(held.kind):
            await asyncio.sleep(interval)
            if held.closed_at is not None:
                return
            try:
                writer.write(bytes([byte]))
                await writer.drain()
            except OSError as exc:
                held.errors.append(type(exc).__name__)
                held.closed_at = held.closed_at or time.monotonic() - started
                return

    sender = asyncio.ensure_future(send_slowly())
    try:
        await asyncio.wait_for(read_until_closed(), seconds)
    except TimeoutError:
        pass
    finally:
        sender.cancel()
        writer.close()


async def probe(port: int) -> str:
    """An ordinary request while the slow ones are held: its status and time."""
    started = time.monotonic()
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            response = await client.get(f"http://{HOST}:{port}/api/csrf")
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__} after {time.monotonic() - started:.2f} s"
    return f"{response.status_code} in {(time.monotonic() - started) * 1000:.0f} ms"


async def measure(
    port: int, kinds: list[str], connections: int, seconds: float, interval: float
) -> tuple[list[Held], str]:
    await probe(port)  # the first request imports the views: not what is measured
    held = [Held(kind) for kind in kinds for _ in range(connections)]
    tasks = [asyncio.ensure_future(hold(h, port, seconds, interval)) for h in held]
    await asyncio.sleep(max(seconds - 1, 0))
    probed = await probe(port)
    await asyncio.gather(*tasks)
    return held, probed


def status_of(sent: bytes) -> str:
    line = sent.split(b"\r\n", 1)[0].decode(errors="replace")
    return line.split(" ", 2)[1] if line.startswith("HTTP/") else "nothing"


def report(held: list[Held], kinds: list[str]) -> None:
    print("| kind | connections | closed by the server | first close | last close | what it sent |")
    print("|---|---|---|---|---|---|")
    for kind in kinds:
        mine = [h for h in held if h.kind == kind]
        closed = sorted(h.closed_at for h in mine if h.closed_at is not None)
        sent = Counter(status_of(h.sent) for h in mine if h.closed_at is not None)
        first = f"{closed[0]:.1f} s" if closed else "-"
        last = f"{closed[-1]:.1f} s" if closed else "-"
        what = ", ".join(f"{n}× {status}" for status, n in sent.most_common()) or "-"
        print(f"| {kind} | {len(mine)} | {len(closed)} | {first} | {last} | {what} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=("daphne", "uvicorn"), default="daphne")
    parser.add_argument("--connections", type=int, default=50, help="of each kind")
    parser.add_argument("--hold", type=float, default=60, help="seconds each connection is held")
    parser.add_argument("--interval", type=float, default=5, help="seconds between two bytes")
    parser.add_argument("--kinds", default="header,body", help=f"comma-separated, of {', '.join(KINDS)}")
    parser.add_argument("--options", default="", help="more options of the server, one string")
    args = parser.parse_args()
    kinds = [kind for kind in args.kinds.split(",") if kind]
    if unknown := set(kinds) - set(KINDS):
        parser.error(f"unknown kinds: {sorted(unknown)}")
    options = tuple(shlex.split(args.options))
    server = Server(0, kind=args.server, options=options)
    server.start()
    try:
        held, probed = asyncio.run(measure(server.port, kinds, args.connections, args.hold, args.interval))
    finally:
        server.stop()
    print(
        f"{args.server} {' '.join(options) or '(no options)'}: {args.connections} of each kind, "
        f"a byte every {args.interval:g} s, held {args.hold:g} s"
    )
    report(held, kinds)
    print(f"an ordinary GET /api/csrf at {max(args.hold - 1, 0):g} s: {probed}")


if __name__ == "__main__":
    main()
