"""Publish + subscribe throughput of one run through each broker backend.

    .venv/bin/python bench/broker_bench.py [--reps 5] [--batches 1,16] [--redis-url URL] [--no-redis]

The run is the benchmark workload's UI chunks (12,576: its 12,577 SSE
frames less ``[DONE]``) (``bench/workload.json`` through
``UIMessageEncoder``; synthetic chunks of the same mix when that file is
absent). For each backend and batch size a publisher
task publishes the run, yielding to the loop after each ``publish`` (as a
run does between model reads), while a subscriber that attached first reads
it live; then a second subscriber replays the finished run.

Two kinds of consumer, each against its own baseline in the same process:

* ``count``: the subscriber only counts; the baseline iterates a plain
  list. The ratio is the broker's own cost against doing nothing.
* ``sse``: the subscriber renders ai@7 SSE frames (per chunk with
  ``subscribe``, per batch with ``subscribe_batches`` + ``render_many``);
  the baseline renders the list the same way, which is what a view without
  a broker does. That ratio is the one the view's >= 0.7x budget is about.

Ratios are baseline time / broker time (1.0 = free). Best of ``--reps``.
"Live" includes the publisher's own ``sleep(0)`` per publish; the
``asyncio.Queue`` floor printed first shows what any hand-off between two
tasks costs at that cadence.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from bench_common import WORKLOAD_PATH  # noqa: E402

from uistream_app.live import Broker, MemoryBroker, broker_from_config  # noqa: E402
from uistream_app.protocol.ui.encoder import UIMessageEncoder  # noqa: E402
from uistream_app.protocol.ui.render import UIStreamRenderer  # noqa: E402

CHUNKS = 12_577


def workload_chunks() -> tuple[list[dict[str, Any]], str]:
    if WORKLOAD_PATH.exists():
        from uistream_plugin import source_events

        workload = json.loads(WORKLOAD_PATH.read_text())
        encoder = UIMessageEncoder(workload["message_id"])
        chunks = [chunk for event in source_events(workload) for chunk in encoder.feed(event)]
        return chunks, f"{WORKLOAD_PATH.name} through UIMessageEncoder"
    chunks = [{"type": "start", "messageId": "msg-1"}]
    for i in range(CHUNKS - 2):
        chunks.append({"type": "text-delta", "id": f"text-{i // 200}", "delta": f"word{i} "})
    chunks.append({"type": "finish", "finishReason": "stop"})
    return chunks, "synthetic text deltas"


Consume = Callable[[Broker, str], Awaitable[int]]


async def count_each(broker: Broker, run_id: str) -> int:
    n = 0
    async for _ in broker.subscribe(run_id):
        n += 1
    return n


async def render_each(broker: Broker, run_id: str) -> int:
    render = UIStreamRenderer(7).render
    size = 0
    async for _, chunk in broker.subscribe(run_id):
        size += len(render(chunk))
    return size


async def render_batches(broker: Broker, run_id: str) -> int:
    render_many = UIStreamRenderer(7).render_many
    size = 0
    async for _, batch in broker.subscribe_batches(run_id):
        size += len(render_many(batch))
    return size


def bare_count(chunks: list[dict[str, Any]]) -> int:
    n = 0
    for _ in chunks:
        n += 1
    return n


def bare_render(chunks: list[dict[str, Any]]) -> int:
    render = UIStreamRenderer(7).render
    return sum(len(render(chunk)) for chunk in chunks)


async def through_broker(
    broker: Broker, chunks: list[dict[str, Any]], batch: int, consume: Consume
) -> tuple[float, float]:
    """Seconds for (live: publish while one subscriber follows, replay: one
    subscriber reads the finished run)."""
    run_id = uuid.uuid4().hex
    started = time.perf_counter()
    channel = await broker.open_run(run_id, run_id)
    reader = asyncio.create_task(consume(broker, run_id))
    await asyncio.sleep(0)
    for start in range(0, len(chunks), batch):
        await channel.publish(chunks[start : start + batch])
        await asyncio.sleep(0)
    await channel.close()
    await reader
    live = time.perf_counter() - started
    started = time.perf_counter()
    await consume(broker, run_id)
    return live, time.perf_counter() - started


async def queue_floor(chunks: list[dict[str, Any]], batch: int) -> float:
    """The same publisher and a counting consumer over an ``asyncio.Queue``:
    the cheapest hand-off between two tasks, for scale."""
    queue: asyncio.Queue[list[dict[str, Any]] | None] = asyncio.Queue()

    async def consume() -> int:
        n = 0
        while (item := await queue.get()) is not None:
            n += len(item)
        return n

    started = time.perf_counter()
    reader = asyncio.create_task(consume())
    await asyncio.sleep(0)
    for start in range(0, len(chunks), batch):
        queue.put_nowait(chunks[start : start + batch])
        await asyncio.sleep(0)
    queue.put_nowait(None)
    await reader
    return time.perf_counter() - started


def best(samples: list[float]) -> float:
    return min(samples)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--batches", default="1,16", help="chunks per publish call, comma-separated")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--no-redis", action="store_true")
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]

    chunks, origin = workload_chunks()
    print(f"{len(chunks):,} chunks ({origin}), best of {args.reps}, Python {sys.version.split()[0]}")

    backends: list[tuple[str, Broker]] = [("memory", MemoryBroker(finished_ttl=0.001))]
    if not args.no_redis:
        redis_broker = broker_from_config(
            {"BACKEND": "redis", "URL": args.redis_url, "PREFIX": f"uistream-bench:{uuid.uuid4().hex[:8]}"}
        )
        try:
            await redis_broker.ping()
            backends.append(("redis", redis_broker))
        except Exception as exc:  # noqa: BLE001 - a benchmark reports and goes on
            print(f"redis: skipped ({exc})")

    baselines = {
        "count": best([timed(bare_count, chunks) for _ in range(args.reps)]),
        "sse": best([timed(bare_render, chunks) for _ in range(args.reps)]),
    }
    for name, seconds in baselines.items():
        print(f"baseline {name:<5} plain list: {seconds * 1e3:8.2f} ms  {seconds / len(chunks) * 1e6:6.3f} µs/chunk")

    consumers: list[tuple[str, str, Consume]] = [
        ("count", "subscribe", count_each),
        ("sse", "subscribe", render_each),
        ("sse", "subscribe_batches", render_batches),
    ]
    for batch in batches:
        floor = best([await queue_floor(chunks, batch) for _ in range(args.reps)])
        print(f"live hand-off floor (asyncio.Queue, count), batch {batch:>3}: {floor * 1e3:8.2f} ms")
    print()
    print(f"{'backend':<8}{'batch':>6}  {'consumer':<24}{'live ms':>9}{'ratio':>7}{'replay ms':>11}{'ratio':>7}")
    for backend_name, broker in backends:
        for batch in batches:
            for kind, api, consume in consumers:
                samples = [await through_broker(broker, chunks, batch, consume) for _ in range(args.reps)]
                live = best([s[0] for s in samples])
                replay = best([s[1] for s in samples])
                base = baselines[kind]
                label = f"{kind} {api}"
                print(
                    f"{backend_name:<8}{batch:>6}  {label:<24}{live * 1e3:9.2f}{base / live:7.2f}"
                    f"{replay * 1e3:11.2f}{base / replay:7.2f}"
                )
        await broker.aclose()
    if len(backends) > 1:
        await cleanup(args.redis_url, backends[1][1])


def timed(function: Callable[[list[dict[str, Any]]], int], chunks: list[dict[str, Any]]) -> float:
    started = time.perf_counter()
    function(chunks)
    return time.perf_counter() - started


async def cleanup(url: str, broker: Broker) -> None:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(url)
    keys = [key async for key in client.scan_iter(match=f"{broker.prefix}:*", count=1000)]  # type: ignore[attr-defined]
    if keys:
        await client.delete(*keys)
    await client.aclose()


if __name__ == "__main__":
    asyncio.run(main())
