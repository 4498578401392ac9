"""What an MCP server's tool costs through the app's session.

    PYTHONPATH=. .venv/bin/python bench/mcp_bench.py [--calls 500]

The demo's MCP server (``demo_project/mcp_server.py``, stdio) as
``UISTREAM["MCP_SERVERS"]`` would start it: the first listing (the server
process starts, the handshake, ``tools/list``) and a cached one; then
``--calls`` calls of ``demo__roll_die`` through ``Tool.invoke`` from an event
loop of the caller's own (each crosses to the sessions' loop and back),
one after another (median, p95) and all at once (calls per second).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

import django


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    django.setup()
    from uistream_app.lifecycle import mcp

    server = Path(__file__).resolve().parent.parent / "demo_project" / "mcp_server.py"
    (config,) = mcp.parse_servers({"demo": {"command": sys.executable, "args": [str(server)]}})
    started = time.perf_counter()
    (roll,) = mcp.connection(config).tools_blocking()
    cold = time.perf_counter() - started
    started = time.perf_counter()
    mcp.connection(config).tools_blocking()
    cached = time.perf_counter() - started

    async def calls() -> tuple[list[float], float]:
        each = []
        for _ in range(args.calls):
            t = time.perf_counter()
            await roll.invoke({"sides": 6})
            each.append(time.perf_counter() - t)
        t = time.perf_counter()
        await asyncio.gather(*(roll.invoke({"sides": 6}) for _ in range(args.calls)))
        return each, time.perf_counter() - t

    each, together = asyncio.run(calls())
    each.sort()
    print(f"first listing (start, handshake, tools/list): {cold * 1000:.0f} ms; cached: {cached * 1e6:.1f} us")
    print(
        f"one call at a time: median {statistics.median(each) * 1000:.2f} ms, "
        f"p95 {each[int(len(each) * 0.95)] * 1000:.2f} ms ({len(each)} calls)"
    )
    print(f"{args.calls} calls at once: {together * 1000:.0f} ms ({args.calls / together:.0f} calls/s)")
    mcp.close_all()


if __name__ == "__main__":
    main()
