"""A worker executor's overhead against in-process runs, in one sitting.

    .venv/bin/python bench/executor_bench.py [--executor celery|tasks] [--reps 10] [--ttfd-reps 30]
        [--concurrency 1] [--interval 0.1]

Two daphne servers (``http_bench.Server``: the bench project on a fresh
SQLite file each), both on the Redis broker ($REDIS_URL, else
127.0.0.1:6379, under a key prefix of this run's own), so that only the
executor differs: ``inprocess`` runs in the web process; ``celery`` hands
every run to a ``celery -A demo_project worker`` started here on the second
server's settings and database, ``tasks`` to Django's background tasks on
the database backend, whose ``db_worker`` (one; it polls the table every
``--interval`` seconds when idle) is started here the same way. Measured,
interleaved (in-process, then the worker, per round), on fresh connections:

1. **time to first delta**: from sending the useChat POST ("count to 3",
   the demo model with no delay) to the first ``text-delta`` byte;
2. **the standard workload** (``POST /bench/chat``: the real ``ChatView``
   replaying the standard workload's 50 steps): the whole response.

Printed: medians and the per-round paired ratio worker / in-process (its
median and range). Both arms' bodies are checked first: the same chunks
(the worker's after its leading keep-alive comment).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid

from bench_common import HOST
from http_bench import PY, ROOT, Client, Server, chunks_of, ms, table

REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"


def first_delta(client: Client) -> float:
    """Seconds from sending a chat POST to the first text-delta byte (the
    rest is read too, so the run ends before the next one)."""
    raw = client.chat_request("/api/chat", "count to 3")
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
            if not first and b'"type":"text-delta"' in data:
                first = time.perf_counter() - t0
    if not first:
        raise RuntimeError(f"no text delta: {data[:500]!r}")
    return first


def paired(label: str, here: list[float], there: list[float]) -> list[str]:
    ratios = sorted(b / a for a, b in zip(here, there, strict=True))
    return [
        label,
        ms(statistics.median(here)),
        ms(statistics.median(there)),
        f"**{statistics.median(ratios):.2f}x** ({ratios[0]:.2f}–{ratios[-1]:.2f})",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=10, help="rounds of the standard workload")
    parser.add_argument("--ttfd-reps", type=int, default=30, help="rounds of time to first delta")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--executor", choices=["celery", "tasks"], default="celery")
    parser.add_argument("--concurrency", type=int, default=1, help="the Celery worker's pool size")
    parser.add_argument("--interval", type=float, default=0.1, help="db_worker's polling interval (s)")
    args = parser.parse_args()
    executor = args.executor

    prefix = f"uistream-executor-bench:{uuid.uuid4().hex[:10]}"
    redis_env = {"UISTREAM_BENCH_REDIS_URL": REDIS_URL, "UISTREAM_BENCH_REDIS_PREFIX": prefix}
    here = Server("inprocess", 0)
    there = Server(executor, 0)
    here.env.update(redis_env)
    # UISTREAM_DEMO_EXECUTOR: the demo package loads its Celery app with Django.
    there.env.update({**redis_env, "UISTREAM_BENCH_EXECUTOR": executor, "UISTREAM_DEMO_EXECUTOR": executor})
    if executor == "celery":
        command = [
            *(PY, "-m", "celery", "-A", "demo_project", "worker", "--loglevel=warning"),
            *("-c", str(args.concurrency), "--without-gossip", "--without-mingle"),
            *("-n", f"bench-{prefix[-10:]}@%h"),
        ]
    else:
        command = [
            *(PY, "-m", "django", "db_worker", "--no-reload", "--no-startup-delay", "--skip-checks"),
            *("--interval", str(args.interval), "--worker-id", f"bench-{prefix[-10:]}"),
        ]
    worker: subprocess.Popen[bytes] | None = None
    log = there.dir / "worker.log"
    try:
        here.start()
        there.start()
        with log.open("wb") as out:
            worker = subprocess.Popen(
                command,
                cwd=ROOT,
                env=there.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        # A run that waits a lease for a worker still starting is swept (a
        # Celery task waits in its queue until the worker is up).
        deadline = time.monotonic() + 120
        while executor == "tasks" and b"Starting worker" not in log.read_bytes():
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the worker did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.1)
        clients = {"inprocess": Client(here.port), executor: Client(there.port)}
        bodies = {kind: client.chat("/bench/chat", "Run the workload.").body for kind, client in clients.items()}
        worker_body = bodies[executor]
        while worker_body.startswith(b":"):  # keep-alives while the run waited for a worker
            worker_body = worker_body.split(b"\n\n", 1)[1]
        if chunks_of(worker_body) != chunks_of(bodies["inprocess"]):
            raise AssertionError(f"the {executor} run's chunks differ from the in-process run's")
        print(f"checked: both arms stream the same {len(chunks_of(worker_body)):,} chunks of the standard workload")
        for _ in range(args.warmup):
            for client in clients.values():
                first_delta(client)
                client.chat("/bench/chat", "Run the workload.")
        ttfd: dict[str, list[float]] = {kind: [] for kind in clients}
        for _ in range(args.ttfd_reps):
            for kind, client in clients.items():
                ttfd[kind].append(first_delta(client))
        workload: dict[str, list[float]] = {kind: [] for kind in clients}
        for _ in range(args.reps):
            for kind, client in clients.items():
                workload[kind].append(client.chat("/bench/chat", "Run the workload.").seconds)
    finally:
        if worker is not None:
            worker.terminate()
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()
        there.stop()
        here.stop()
        _forget_keys(prefix)
    if executor == "celery":
        worker_kind = f"worker pool {args.concurrency}"
    else:
        worker_kind = f"one db_worker, --interval {args.interval}"
    print(
        f"\n{args.ttfd_reps} rounds of time to first delta, {args.reps} of the standard workload, interleaved"
        f" (daphne, Redis broker both; {worker_kind}):\n"
    )
    rows = [
        paired("time to first delta", ttfd["inprocess"], ttfd[executor]),
        paired("standard workload, whole response", workload["inprocess"], workload[executor]),
    ]
    print(table(rows, ["", "in-process (median)", f"{executor} (median)", f"{executor} / in-process (paired)"]))


def _forget_keys(prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main())
