"""What OpenTelemetry tracing costs a run, in one sitting.

    PYTHONPATH=.:bench .venv/bin/python bench/otel_bench.py [--rounds 7] [--runs 5]

The standard workload (``POST /bench/chat``: the real ``ChatView`` replaying
the standard workload's 50 model steps and 98 tool calls, ``otel_bench_urls``)
through the whole app in-process: Django's ``AsyncClient`` posts the chat,
the view prepares the run (SQLite file, the ``RunRecorder`` writing the
log), the runner executes the ``ToolLoop`` and the response's SSE body is
read to its end. Three arms, each a process of its own on its own database:

* ``on``: the SDK's ``TracerProvider`` with a ``SimpleSpanProcessor`` into
  an ``InMemorySpanExporter`` (cleared between rounds): every span of the
  run (1 ``invoke_agent``, 50 ``chat``, 98 ``execute_tool``) is made,
  filled and exported in line;
* ``off``: the SDK installed, no tracer provider configured (the API's
  no-op);
* ``absent``: ``opentelemetry`` made unimportable (as if the extra were
  not installed).

Rounds interleave the arms (off, on, absent, then the next round), each
round ``--runs`` chats in a row per arm, after one warm-up round. Printed
per arm: the median CPU time of one run (the arm process's, every thread:
what tracing adds, and steadier than wall time on a shared machine) and
its wall time, each with the per-round ratios to ``absent`` (median and
range).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARMS = ("off", "on", "absent")

ARM_CODE = r"""
import sys
mode = sys.argv[1]
if mode == "absent":
    class _Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "opentelemetry":
                raise ImportError("blocked: " + name)
    sys.meta_path.insert(0, _Block())
import asyncio, json, time
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from uistream_app.runs import telemetry
exporter = None
if mode == "on":
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
assert telemetry.ENABLED == (mode != "absent")
from django.conf import settings
from django.test import AsyncClient
from uistream_app.models import Run
settings.ALLOWED_HOSTS.append("testserver")  # the test client's host
settings.ROOT_URLCONF = "otel_bench_urls"  # not the demo's: its pydantic-ai agent imports opentelemetry

counter = [0]

async def one(client):
    counter[0] += 1
    body = {"id": f"otel-{counter[0]}", "trigger": "submit-message",
            "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}]}
    response = await client.post("/bench/chat", json.dumps(body), content_type="application/json")
    assert response.status_code == 200, (response.status_code, getattr(response, "content", b"")[:300])
    size = 0
    async for part in response.streaming_content:
        size += len(part)
    return size

async def serve():
    client = AsyncClient()
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line.strip():
            return
        runs = int(line)
        if exporter is not None:
            exporter.clear()
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(runs):
            await one(client)
        elapsed = time.perf_counter() - t0
        # Every run stored before the next round (the log writer's thread).
        while await Run.objects.filter(status="running").aexists():
            await asyncio.sleep(0.01)
        cpu = time.process_time() - c0
        spans = len(exporter.get_finished_spans()) if exporter is not None else 0
        statuses = sorted({s async for s in Run.objects.values_list("status", flat=True)})
        print(json.dumps({"seconds": elapsed, "cpu": cpu, "spans": spans, "statuses": statuses}), flush=True)

asyncio.run(serve())
"""


class Arm:
    """One arm's process: it reads a number of runs, answers a JSON line."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.dir = tempfile.mkdtemp(prefix=f"uistream-otel-bench-{mode}-")
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "bench_settings",
                "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'bench'}",
                "UISTREAM_BENCH_DIR": self.dir,
                "UISTREAM_GC_FREEZE": "0",
                # No MCP servers: the mcp SDK imports opentelemetry too.
                "UISTREAM_BENCH_SETTINGS": json.dumps({"MCP_SERVERS": {}}),
            }
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ARM_CODE, mode],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def round(self, runs: int) -> dict[str, object]:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(f"{runs}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.mode} arm died (exit {self.proc.wait()})")
        result: dict[str, object] = json.loads(line)
        return result

    def close(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            self.proc.stdin.write("\n")
            self.proc.stdin.close()
        self.proc.wait(timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--runs", type=int, default=5, help="chats per arm per round")
    args = parser.parse_args()

    arms = {mode: Arm(mode) for mode in ARMS}
    try:
        for arm in arms.values():  # warm-up (imports, first queries)
            arm.round(2)
        per_run: dict[str, list[float]] = {mode: [] for mode in ARMS}
        cpu_per_run: dict[str, list[float]] = {mode: [] for mode in ARMS}
        spans = 0
        started = time.perf_counter()
        for _ in range(args.rounds):
            for mode, arm in arms.items():
                result = arm.round(args.runs)
                assert result["statuses"] == ["completed"], result
                per_run[mode].append(float(result["seconds"]) / args.runs)  # type: ignore[arg-type]
                cpu_per_run[mode].append(float(result["cpu"]) / args.runs)  # type: ignore[arg-type]
                if mode == "on":
                    spans = int(result["spans"]) // args.runs  # type: ignore[call-overload]
        wall = time.perf_counter() - started
    finally:
        for arm in arms.values():
            arm.close()

    print(f"the standard workload through ChatView and the runner; {args.rounds} rounds x {args.runs} runs per arm")
    print(f"spans per traced run: {spans}; wall time {wall:.1f} s\n")
    print(f"{'arm':<8} {'CPU ms/run':>11} {'CPU ratio (median, range)':>28} {'wall ms/run':>12} {'wall ratio':>22}")
    for mode in ("absent", "off", "on"):
        cells = []
        for values in (cpu_per_run, per_run):
            ratios = [value / b for value, b in zip(values[mode], values["absent"], strict=True)]
            cells.append(statistics.median(values[mode]) * 1000)
            cells.append(f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
        print(f"{mode:<8} {cells[0]:>11.1f} {cells[1]:>28} {cells[2]:>12.1f} {cells[3]:>22}")


if __name__ == "__main__":
    main()
