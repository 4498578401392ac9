"""CPU per request: Django's own floor against a whole chat (issue 18).

    PYTHONPATH=.:bench .venv/bin/python bench/request_floor.py [--requests 200] [--rounds 3]

The demo project's ASGI application (``bounded_threads``, the demo's seven
sync middleware, session and CSRF) with ``bench_settings``, called in this
process by one visitor, one request at a time, alternately per round:

* **floor**: an async view that reads the session's user and streams one
  SSE frame: what any async Django view behind this middleware costs;
* **chat**: ``POST /api/chat`` "count to 1": the pipeline, the turn's
  transaction, the run, 16 streamed deltas, the chunk log, the stored
  answer.

Printed: CPU milliseconds per request (``time.process_time``: every
thread of this process, the lanes and the log writer included) per round,
the hops to a thread per request of each, and the ratio chat ÷ floor.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from asgi_client import Browser
from stream_memory import _setup, new_chat


def _install_floor() -> None:
    import bench_urls
    from django.http import HttpRequest, StreamingHttpResponse
    from django.urls import clear_url_caches, path
    from django.views.decorators.csrf import csrf_exempt

    @csrf_exempt
    async def floor(request: HttpRequest) -> StreamingHttpResponse:
        await request.auser()

        async def body() -> Any:
            yield b'data: {"type":"text-delta","id":"1","delta":"1"}\n\n'

        return StreamingHttpResponse(body(), content_type="text/event-stream")

    bench_urls.urlpatterns.append(path("bench/floor", floor))
    clear_url_caches()


def _count_hops() -> Counter[str]:
    from asgiref.sync import SyncToAsync

    hops: Counter[str] = Counter()
    original = SyncToAsync.__call__

    async def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        hops["all"] += 1
        return await original(self, *args, **kwargs)

    SyncToAsync.__call__ = counted  # type: ignore[method-assign]
    return hops


async def main(args: argparse.Namespace, app: Any) -> None:
    browser = Browser(app)
    await browser.start()
    hops = _count_hops()

    async def floor() -> None:
        answer = await browser.post("/bench/floor", {})
        assert answer.status == 200, answer.status

    async def chat() -> None:
        answer = await browser.post("/api/chat", new_chat("count to 1"))
        assert answer.status == 200, answer.status

    for _ in range(10):  # warm-up: the session, the lanes, the writer
        await chat()
        await floor()
    cpu: dict[str, list[float]] = {"floor": [], "chat": []}
    per_request: dict[str, float] = {}
    for _ in range(args.rounds):
        for name, request in (("floor", floor), ("chat", chat)):
            hops.clear()
            start = time.process_time()
            for _ in range(args.requests):
                await request()
            cpu[name].append(1000 * (time.process_time() - start) / args.requests)
            per_request[name] = hops["all"] / args.requests
    print(f"{args.requests} requests a round, {args.rounds} rounds (Python {sys.version.split()[0]})")
    for name, figures in cpu.items():
        rounds = " ".join(f"{x:.2f}" for x in figures)
        print(f"{name:6s} CPU ms per request: {rounds}; hops to a thread per request: {per_request[name]:.0f}")
    ratios = [c / f for c, f in zip(cpu["chat"], cpu["floor"], strict=True)]
    print("chat ÷ floor, per round: " + " ".join(f"{r:.2f}x" for r in ratios))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    application = _setup(0)
    _install_floor()
    asyncio.run(main(arguments, application))
