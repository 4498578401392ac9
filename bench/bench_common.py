"""What the HTTP and WebSocket benchmarks share: a free port on the
loopback, a process's RSS and CPU time read from ``/proc``, percentiles
(nearest rank), and the client's own event-loop lag (to tell a gap the
client caused from one the server did)."""

from __future__ import annotations

import asyncio
import math
import os
import socket
import time
from pathlib import Path

#: The standard workload (docs/benchmarks.md, "The standard workload"): 50
#: recorded model steps with reasoning, text, tool calls and their results.
WORKLOAD_PATH = Path(os.environ.get("UISTREAM_BENCH_WORKLOAD") or Path(__file__).with_name("workload.json"))

HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def rss_kib(pid: int) -> int:
    """``VmRSS`` of process ``pid``, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    """The ``q``-th percentile of ``values`` by nearest rank (NaN for none)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


async def lag_monitor(stop: asyncio.Event, lags: list[float], period: float = 0.005) -> None:
    """How late a ``period`` sleep wakes, until ``stop``: this process's
    event-loop lag."""
    while not stop.is_set():
        started = time.perf_counter()
        await asyncio.sleep(period)
        lags.append(time.perf_counter() - started - period)
