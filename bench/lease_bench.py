"""Servers killed mid-answer: how long until the run is settled, and what
the stored message lacks of what the client received (issue 15).

    .venv/bin/python bench/lease_bench.py [--kills 20] [--heartbeat 1] [--lease 3] [--broker memory|redis ...]
        [--first-delta N]

For each broker (``memory``; ``redis`` at ``$REDIS_URL`` or the local
default, skipped when unreachable): one *survivor* server (daphne) and,
``--kills`` times, a *victim* server (uvicorn) on the same fresh SQLite
file (``bench/bench_settings.py``) with ``HEARTBEAT_SECONDS`` /
``LEASE_SECONDS`` as given. A client asks the victim to "count to 300"
(``--delay-ms`` per number), reads 30 numbers, SIGKILLs the victim and
reads what is left. Measured: the time from the kill to the run stored
``interrupted`` (read from the database every 10 ms; the survivor's
sweeper settles it, every ``LEASE_SECONDS``), p50 / p99 / max, also in
leases; and the numbers the client received that the stored message lacks
(the in-process broker died with its process: up to ``FLUSH_EVERY_MS`` of
deltas; the Redis broker's stream holds them all).

``--on-owner-lost continue`` (``ON_OWNER_LOST``; default ``interrupt``)
and ``--resumer``: a second client resumes the chat on the survivor
(``GET /api/chat/<id>/stream``, same session) before the kill; measured
from the kill: its ``reset-step`` (the answer continuing on the survivor)
and its terminal chunk (``error`` when interrupted, ``finish`` when
continued); with ``continue``, "settled" is the run stored ``completed``.

``--first-delta N`` also times the first text delta of a new chat through
the standard workload's view with and without the orphan check a new turn
makes (``ConversationStore.settle_orphans``), N alternating pairs in one
server; ``--kills 0`` skips the kills.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
from bench_common import HOST, free_port, pct

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
PY = sys.executable
SERVERS = {
    "daphne": ["-m", "daphne", "-b", HOST, "-p", "{port}", "demo_project.asgi:application"],
    "uvicorn": [
        "-m",
        "uvicorn",
        "--host",
        HOST,
        "--port",
        "{port}",
        "--log-level",
        "warning",
        "demo_project.asgi:application",
    ],
}


def environment(directory: Path, args: argparse.Namespace, broker: dict[str, Any]) -> dict[str, str]:
    uistream = {
        "HEARTBEAT_SECONDS": args.heartbeat,
        "LEASE_SECONDS": args.lease,
        "BROKER": broker,
        "ON_OWNER_LOST": args.on_owner_lost,
    }
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench_settings",
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(BENCH), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "UISTREAM_BENCH_DIR": str(directory),
        "UISTREAM_DEMO_DELAY_MS": str(args.delay_ms),
        "UISTREAM_BENCH_SETTINGS": json.dumps(uistream),
        "UISTREAM_GC_FREEZE": "0",
    }


@contextmanager
def server(kind: str, env: dict[str, str], log: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [PY, *(a.format(port=port) for a in SERVERS[kind])], cwd=ROOT, env=env, stdout=out, stderr=out
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection((HOST, port), timeout=0.5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{kind} did not start:\n{log.read_text()[-3000:]}") from None
                time.sleep(0.05)
        yield f"http://{HOST}:{port}", proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:  # a loaded machine: not the measurement's business
                proc.kill()
                proc.wait()


def sse_chunks(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if line.startswith("data: ") and line != "data: [DONE]":
            yield json.loads(line[6:])


def numbers_in(chunks: list[dict[str, Any]]) -> int:
    return len("".join(c["delta"] for c in chunks if c["type"] == "text-delta").split())


class Resumer(threading.Thread):
    """Resumes ``chat`` on ``base`` with ``cookies`` and notes when each
    chunk type first arrived (monotonic)."""

    def __init__(self, base: str, chat: str, cookies: httpx.Cookies) -> None:
        super().__init__(daemon=True)
        self.client = httpx.Client(base_url=base, cookies=cookies, timeout=120)
        self.chat = chat
        self.first: dict[str, float] = {}
        self.attached = threading.Event()

    def run(self) -> None:
        with self.client.stream("GET", f"/api/chat/{self.chat}/stream") as response:
            for chunk in sse_chunks(response.iter_lines()):
                self.attached.set()
                self.first.setdefault(chunk["type"], time.monotonic())
        self.attached.set()


def one_kill(
    victim_env: dict[str, str], db: Path, log: Path, survivor: str | None = None
) -> tuple[float, int, int, dict[str, float]]:
    """(seconds from kill to settled, numbers received, numbers stored, and
    a resumer's seconds from the kill to its first chunk of each type)."""
    chat = f"kill-{uuid.uuid4().hex[:8]}"
    resumer = None
    done_status = "completed" if victim_env.get("UISTREAM_BENCH_ON_OWNER_LOST") == "continue" else "interrupted"
    with server("uvicorn", victim_env, log) as (url, proc), httpx.Client(base_url=url, timeout=120) as client:
        token = client.get("/api/csrf").json()["csrfToken"]
        body = {
            "id": chat,
            "trigger": "submit-message",
            "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "count to 300"}]}],
        }
        received: list[dict[str, Any]] = []
        with client.stream("POST", "/api/chat", json=body, headers={"X-CSRFToken": token}) as response:
            lines = response.iter_lines()
            for chunk in sse_chunks(lines):
                received.append(chunk)
                if survivor is not None and resumer is None and numbers_in(received) >= 5:
                    resumer = Resumer(survivor, chat, client.cookies)
                    resumer.start()
                    resumer.attached.wait(30)
                if numbers_in(received) >= 30:
                    break
            proc.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            proc.wait()
            with suppress(httpx.HTTPError):  # the connection breaks: keep what came before
                for chunk in sse_chunks(lines):
                    received.append(chunk)
    with sqlite3.connect(db, timeout=20) as conn:
        while True:
            row = conn.execute(
                "SELECT r.status, m.parts FROM uistream_app_run r JOIN uistream_app_message m ON m.id = r.message_id "
                "JOIN uistream_app_conversation c ON c.id = r.conversation_id WHERE c.client_id = ?",
                (chat,),
            ).fetchone()
            if row is not None and row[0] == done_status:
                settled = time.monotonic() - killed
                break
            if time.monotonic() - killed > 120:
                raise RuntimeError(f"run of {chat} not settled after 120 s: {row and row[0]}")
            time.sleep(0.01)
    stored = sum(len(p["text"].split()) for p in json.loads(row[1]) if p["type"] == "text")
    seen: dict[str, float] = {}
    if resumer is not None:
        resumer.join(120)
        seen = {kind: at - killed for kind, at in resumer.first.items() if at >= killed}
    return settled, numbers_in(received), stored, seen


def redis_reachable(url: str) -> bool:
    try:
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=2)
        client.ping()
        client.close()
    except Exception:  # noqa: BLE001 - any failure: not reachable
        return False
    return True


def bench(broker_name: str, args: argparse.Namespace) -> None:
    if broker_name == "redis":
        url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
        if not redis_reachable(url):
            print(f"\n## redis: skipped, {url} cannot be reached")
            return
        broker = {"BACKEND": "redis", "URL": url, "PREFIX": f"uistream-lease-bench:{uuid.uuid4().hex[:8]}"}
    else:
        broker = {"BACKEND": "memory"}
    directory = Path(tempfile.mkdtemp(prefix="uistream-lease-bench-"))
    env = environment(directory, args, broker)
    log = directory / "servers.log"
    subprocess.run([PY, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    results = []
    env["UISTREAM_BENCH_ON_OWNER_LOST"] = args.on_owner_lost
    with server("daphne", env, log) as (survivor, _):
        httpx.get(f"{survivor}/api/csrf", timeout=60)  # its first request starts its renewer and sweeper
        for _ in range(args.kills):
            watch = survivor if args.resumer and broker_name == "redis" else None
            results.append(one_kill(env, directory / "bench.sqlite3", log, watch))
    times = [r[0] for r in results]
    missing = [r[1] - r[2] for r in results]
    print(f"\n## {broker_name} broker: {args.kills} kills, HEARTBEAT_SECONDS {args.heartbeat}, ", end="")
    print(f"LEASE_SECONDS {args.lease}, ON_OWNER_LOST {args.on_owner_lost}\n")
    for kind, label in (("reset-step", "the answer continuing"), ("error", "error chunk"), ("finish", "finish chunk")):
        seen = [r[3][kind] for r in results if kind in r[3]]
        if seen:
            print(
                f"kill → the resumer's {kind} ({label}), {len(seen)} of {len(results)}: "
                + ", ".join(f"{name} {pct(seen, q):.2f} s" for name, q in (("p50", 50), ("p99", 99), ("max", 100)))
            )
    status = "completed" if args.on_owner_lost == "continue" else "interrupted"
    print(
        f"kill → stored {status}: "
        + ", ".join(
            f"{name} {pct(times, q):.2f} s ({pct(times, q) / args.lease:.2f} leases)"
            for name, q in (("p50", 50), ("p99", 99), ("max", 100))
        )
    )
    print(f"numbers received per kill: median {statistics.median(r[1] for r in results):.0f}")
    total = sum(r[1] for r in results)
    print(f"received but missing from the stored message: median {statistics.median(missing):.0f}, ", end="")
    print(f"max {max(missing)}, total {sum(missing)} of {total}")


def first_delta(client: httpx.Client, target: str, token: str) -> float:
    """Seconds from sending a new chat's first message to its first text delta."""
    body = {
        "id": f"ttfd-{uuid.uuid4().hex[:8]}",
        "trigger": "submit-message",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Run the workload."}]}],
    }
    started = time.perf_counter()
    with client.stream("POST", target, json=body, headers={"X-CSRFToken": token}) as response:
        seconds = None
        for line in response.iter_lines():  # read it whole: the run ends before the next one
            if seconds is None and line.startswith("data: ") and '"text-delta"' in line:
                seconds = time.perf_counter() - started
    if seconds is None:
        raise RuntimeError(f"{target} sent no text delta")
    return seconds


def bench_first_delta(args: argparse.Namespace) -> None:
    """Time to first delta through the workload view with and without the
    new turn's orphan check (``bench_urls.NoLeaseCheckChatView``), pairs
    alternating, in one server (whose renewer runs for both)."""
    directory = Path(tempfile.mkdtemp(prefix="uistream-lease-bench-"))
    env = environment(directory, args, {"BACKEND": "memory"})
    subprocess.run([PY, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    with server("daphne", env, directory / "servers.log") as (url, _), httpx.Client(base_url=url, timeout=30) as client:
        token = client.get("/api/csrf").json()["csrfToken"]
        arms = {"with": "/bench/chat", "without": "/bench/chat-nolease"}
        for _ in range(5):  # warm-up
            for target in arms.values():
                first_delta(client, target, token)
        samples: dict[str, list[float]] = {arm: [] for arm in arms}
        for _ in range(args.first_delta):
            for arm, target in arms.items():
                samples[arm].append(first_delta(client, target, token))
    paired = sorted(w / o for w, o in zip(samples["with"], samples["without"], strict=True))
    print(f"\n## time to first delta, the standard workload's chat view, {args.first_delta} alternating pairs\n")
    for arm, values in samples.items():
        median, p90 = statistics.median(values) * 1000, pct(values, 90) * 1000
        print(f"{arm} the orphan check: median {median:.1f} ms, p90 {p90:.1f} ms")
    print(f"with / without, median of paired ratios: **{statistics.median(paired):.3f}x**")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--heartbeat", type=float, default=1.0, help="HEARTBEAT_SECONDS (default 1)")
    parser.add_argument("--lease", type=float, default=3.0, help="LEASE_SECONDS (default 3)")
    parser.add_argument("--delay-ms", type=int, default=20, help="the demo model's pacing (default 20)")
    parser.add_argument("--broker", choices=["memory", "redis"], action="append", help="default: both")
    parser.add_argument("--on-owner-lost", choices=["interrupt", "continue"], default="interrupt")
    parser.add_argument("--resumer", action="store_true", help="time a resumer on the survivor (redis only)")
    parser.add_argument("--first-delta", type=int, default=0, metavar="N", help="also time to first delta, N pairs")
    args = parser.parse_args()
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; load average {load}")
    if args.first_delta:
        bench_first_delta(args)
    for name in args.broker or ["memory", "redis"]:
        if args.kills:
            bench(name, args)


if __name__ == "__main__":
    main()
