"""Many paced streams through the in-process broker: CPU per chunk (issue 29).

    .venv/bin/python bench/paced_streams.py [--streams 200] [--chunks 100] [--delay-ms 20]
    .venv/bin/python bench/paced_streams.py --against REV [--rounds 4]

``--streams`` runs in one event loop, each a publisher that publishes a
text delta, then sleeps ``--delay-ms`` (a paced model), and a subscriber
reading it with ``subscribe_batches(keepalive=15)``, as a streaming
response does (one wait per delta). Printed: the process's CPU per chunk
(``time.process_time``), every chunk counted. No database, no
rendering: the broker and the event loop's own timers, which is what a
subscription's keep-alive costs (docs/benchmarks.md, "One keep-alive timer
a subscription").

``--against REV``: this tree and commit ``REV`` (``git archive``), each
round a fresh process per tree, alternately; the median of the rounds and
their ratio (this ÷ REV).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


async def measure(streams: int, chunks: int, delay: float) -> float:
    from uistream_app.live.memory import MemoryBroker

    broker = MemoryBroker()
    channels = [await broker.open_run(f"chat-{i}", f"run-{i}") for i in range(streams)]

    async def publish(channel: Any) -> None:
        for k in range(chunks):
            await channel.publish([{"type": "text-delta", "id": "text-0", "delta": f" {k}"}])
            await asyncio.sleep(delay)
        await channel.close()

    async def read(i: int) -> int:
        got = 0
        async for _, batch in broker.subscribe_batches(f"run-{i}", keepalive=15.0):
            got += len(batch)
        return got

    start = time.process_time()
    readers = [asyncio.create_task(read(i)) for i in range(streams)]
    await asyncio.gather(*(publish(channel) for channel in channels))
    got = await asyncio.gather(*readers)
    assert sum(got) == streams * chunks, (sum(got), streams * chunks)
    return (time.process_time() - start) / (streams * chunks) * 1e6


def _round_in(tree: Path, args: argparse.Namespace) -> float:
    """One round in a fresh process that imports ``tree``'s package."""
    command = [sys.executable, str(Path(__file__).resolve()), "--streams", str(args.streams)]
    command += ["--chunks", str(args.chunks), "--delay-ms", str(args.delay_ms), "--quiet"]
    out = subprocess.run(
        command, env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True, check=True
    )
    return float(out.stdout.split()[-1])


def against(args: argparse.Namespace) -> None:
    from request_floor import _short, _tree_of

    with tempfile.TemporaryDirectory(prefix="uistream-paced-") as tmp:
        theirs = _tree_of(args.against, Path(tmp) / "against")
        mine: list[float] = []
        other: list[float] = []
        for _ in range(args.rounds):
            mine.append(_round_in(HERE.parent, args))
            other.append(_round_in(theirs, args))
    name = _short(args.against)
    print(f"{args.streams} streams x {args.chunks} chunks at {args.delay_ms} ms, CPU µs per chunk, per round:")
    print("this tree: " + " ".join(f"{x:.2f}" for x in mine) + f"  (median {statistics.median(mine):.2f})")
    print(f"{name}: " + " ".join(f"{x:.2f}" for x in other) + f"  (median {statistics.median(other):.2f})")
    ratios = [a / b for a, b in zip(mine, other, strict=True)]
    print(f"this ÷ {name}, per round: " + " ".join(f"{r:.2f}x" for r in ratios), end="")
    print(f"; median {statistics.median(ratios):.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--chunks", type=int, default=100)
    parser.add_argument("--delay-ms", type=float, default=20)
    parser.add_argument("--against", metavar="REV")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--quiet", action="store_true", help="print the figure alone")
    args = parser.parse_args()
    if args.against:
        sys.path.insert(0, str(HERE))
        against(args)
        return
    cpu = asyncio.run(measure(args.streams, args.chunks, args.delay_ms / 1000))
    print(f"{cpu:.2f}" if args.quiet else f"{args.streams} streams: {cpu:.2f} µs of CPU per chunk")


if __name__ == "__main__":
    main()
