"""Cross-process latency of a chunk: published on one process, read by a
subscriber on another, through the Redis broker and the PostgreSQL broker
in the same run.

    .venv/bin/python bench/broker_latency.py [--chunks 400] [--interval-ms 10] [--rounds 1] [--flush-ms MS]
        [--database-url postgres://postgres@127.0.0.1:5432/NAME] [--redis-url redis://127.0.0.1:6379/0]

For each broker and round, three processes on 127.0.0.1:

* the **publisher** (Django, the demo's settings on ``--database-url``, the
  broker under test): a stored run whose chunks it records and publishes
  the way a run does (``RunRecorder.add`` then ``channel.publish``, the
  log writer at ``FLUSH_EVERY_MS``: the default 250, or ``--flush-ms``), one text delta every
  ``--interval-ms``, each carrying ``time.time_ns()`` when it was
  published;
* the **subscriber** (another process, the same broker setting): it
  follows the run from its first chunk and notes when each delta arrives;
* this process, which starts them in turn and prints per broker the
  latency p50 / p99 / max (ms) and the PostgreSQL ÷ Redis ratio of each.

The database is migrated first (``manage.py migrate``); the Redis broker's
keys go under a prefix of the run's own, deleted after. Both brokers' runs
record the same chunk log; the PostgreSQL subscriber reads it, so its
latency includes the log writer's interval (docs/operations.md, "postgres").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def env_for(args: argparse.Namespace, broker: dict[str, Any]) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "demo_project.settings",
        "DATABASE_URL": args.database_url,
        "REDIS_URL": "",
        "UISTREAM_BENCH_BROKER": json.dumps(broker),
        "UISTREAM_BENCH_FLUSH": "" if args.flush_ms is None else str(args.flush_ms),
        "PYTHONPATH": str(ROOT),
    }


# -- the publisher -----------------------------------------------------------------------------------


async def publish(chunks: int, interval: float) -> None:
    import django

    django.setup()
    from asgiref.sync import sync_to_async
    from django.conf import settings

    from uistream_app.conf import settings as uistream_settings
    from uistream_app.live import get_broker
    from uistream_app.models import Conversation, Message, Run
    from uistream_app.recording import RunRecorder

    settings.UISTREAM = {**settings.UISTREAM, "BROKER": json.loads(os.environ["UISTREAM_BENCH_BROKER"])}
    if os.environ.get("UISTREAM_BENCH_FLUSH"):
        settings.UISTREAM["FLUSH_EVERY_MS"] = float(os.environ["UISTREAM_BENCH_FLUSH"])
    uistream_settings.reload()

    def rows() -> tuple[Run, Message]:
        conversation = Conversation.objects.create(client_id=f"latency-{uuid.uuid4().hex}")
        message = Message.objects.create(
            id=f"m-{uuid.uuid4().hex}", conversation=conversation, role=Message.Role.ASSISTANT, parts=[], position=0
        )
        return Run.objects.create(conversation=conversation, message=message), message

    run, message = await sync_to_async(rows)()
    recorder = RunRecorder(run, message)
    broker = get_broker()
    channel = await broker.open_run(str(run.conversation_id), str(run.pk))
    channel.when_followed = recorder.followed  # as Runner.start does

    async def send(batch: list[dict[str, Any]]) -> None:
        recorder.add(batch)
        await channel.publish(batch)

    await send([{"type": "start", "messageId": str(message.pk)}, {"type": "text-start", "id": "t"}])
    await recorder.flush()
    await channel.flush()
    print(f"ready {run.pk}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)  # "go": the subscriber follows
    for _ in range(chunks):
        await send([{"type": "text-delta", "id": "t", "delta": str(time.time_ns())}])
        await asyncio.sleep(interval)
    await send([{"type": "text-end", "id": "t"}, {"type": "finish"}])
    await recorder.finish("completed")
    await channel.close()
    await broker.aclose()
    print("done", flush=True)


# -- the subscriber ------------------------------------------------------------------------------------


async def subscribe(run_id: str) -> None:
    import django

    django.setup()
    from django.conf import settings

    from uistream_app.conf import settings as uistream_settings
    from uistream_app.live import get_broker

    settings.UISTREAM = {**settings.UISTREAM, "BROKER": json.loads(os.environ["UISTREAM_BENCH_BROKER"])}
    uistream_settings.reload()
    broker = get_broker()
    latencies: list[float] = []
    announced = False
    async for _, batch in broker.subscribe_batches(run_id):
        now = time.time_ns()
        if not announced:
            print("following", flush=True)
            announced = True
        latencies += [(now - int(c["delta"])) / 1e6 for c in batch if c["type"] == "text-delta"]
    await broker.aclose()
    print(json.dumps(latencies), flush=True)


# -- the runner ----------------------------------------------------------------------------------------


def one_round(args: argparse.Namespace, broker: dict[str, Any]) -> list[float]:
    env = env_for(args, broker)
    me = [sys.executable, str(Path(__file__).resolve())]
    publisher = subprocess.Popen(
        [*me, "--role", "publisher", "--chunks", str(args.chunks), "--interval-ms", str(args.interval_ms)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert publisher.stdin is not None
    assert publisher.stdout is not None
    line = publisher.stdout.readline().split()
    if line[:1] != ["ready"]:
        raise RuntimeError(f"the publisher did not start: {line}")
    subscriber = subprocess.Popen(
        [*me, "--role", "subscriber", "--run", line[1]], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    assert subscriber.stdout is not None
    if subscriber.stdout.readline().strip() != "following":
        raise RuntimeError("the subscriber did not start")
    publisher.stdin.write("go\n")
    publisher.stdin.flush()
    latencies: list[float] = json.loads(subscriber.stdout.readline())
    subscriber.wait(timeout=60)
    publisher.wait(timeout=60)
    if len(latencies) != args.chunks:
        raise RuntimeError(f"{len(latencies)} deltas arrived of {args.chunks}")
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--role", choices=["publisher", "subscriber"])
    parser.add_argument("--run")
    parser.add_argument("--chunks", type=int, default=400)
    parser.add_argument("--interval-ms", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--flush-ms", type=float, default=None)
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    if args.role == "publisher":
        asyncio.run(publish(args.chunks, args.interval_ms / 1000))
        return
    if args.role == "subscriber":
        asyncio.run(subscribe(args.run))
        return
    if not args.database_url.startswith("postgres"):
        parser.error("--database-url postgres://… (or DATABASE_URL) is needed: the PostgreSQL broker's database")
    migrate = {**env_for(args, {"BACKEND": "memory"})}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=migrate, check=True)
    prefix = f"uistream-latency-{uuid.uuid4().hex[:8]}"
    brokers = {
        "redis": {"BACKEND": "redis", "URL": args.redis_url, "PREFIX": prefix},
        "postgres": {"BACKEND": "postgres"},
    }
    results: dict[str, list[float]] = {name: [] for name in brokers}
    try:
        for round_ in range(args.rounds):
            for name in brokers if round_ % 2 == 0 else reversed(brokers):
                results[name] += one_round(args, brokers[name])
    finally:
        import redis

        client = redis.Redis.from_url(args.redis_url)
        keys = list(client.scan_iter(match=f"{prefix}:*"))
        if keys:
            client.delete(*keys)
    print(
        f"{args.chunks} deltas {args.interval_ms:g} ms apart, {args.rounds} round(s), "
        f"FLUSH_EVERY_MS {args.flush_ms if args.flush_ms is not None else 'default (250)'}; "
        "latency publish (one process) -> subscriber (another), ms"
    )
    print(f"{'broker':10} {'p50':>8} {'p99':>8} {'max':>8}")
    for name, values in results.items():
        print(f"{name:10} {statistics.median(values):8.2f} {percentile(values, 0.99):8.2f} {max(values):8.2f}")
    pg, rd = results["postgres"], results["redis"]
    print(
        f"postgres / redis: p50 {statistics.median(pg) / statistics.median(rd):.1f}x, "
        f"p99 {percentile(pg, 0.99) / percentile(rd, 0.99):.1f}x"
    )


if __name__ == "__main__":
    main()
