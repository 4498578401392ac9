"""What an open stream holds in memory, and whether it grows with the
stream's length (issue 18), measured with ``tracemalloc``.

    PYTHONPATH=.:bench .venv/bin/python bench/stream_memory.py [--streams 100] [--count 2000] [--delay-ms 5]

The demo project's ASGI application (``demo_project.asgi``: the request
pipeline as served, ``bounded_threads`` included) with ``bench_settings``
(a fresh SQLite file, WAL), driven in this process: a warm-up chat, then
``--streams`` chats of one visitor, "count to ``--count``" paced at
``--delay-ms``, all open at once, their bodies read and dropped as they
come. ``tracemalloc`` is started after the warm-up; snapshots are taken
when every stream has sent a quarter of its deltas and again at three
quarters. Printed:

* memory per open stream at a quarter (traced bytes over the baseline,
  divided by the streams), and the sources that hold it, by file;
* growth per stream from a quarter to three quarters, per 1,000 deltas,
  and the sources that grew: what a longer answer costs an open stream.

The figures are Python allocations (what ``tracemalloc`` sees), not RSS:
the server benchmark (``bench/server/``) reports RSS per open stream.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
import tracemalloc
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from asgi_client import Browser

from uistream_app.testing import chat_body, user_message


def _setup(delay_ms: int) -> Any:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench_settings")
    os.environ["UISTREAM_DEMO_DELAY_MS"] = str(delay_ms)
    os.environ.setdefault("UISTREAM_BENCH_DIR", tempfile.mkdtemp(prefix="uistream-memory-"))
    os.environ.setdefault("UISTREAM_GC_FREEZE", "1")
    from django.core.management import call_command

    from demo_project.asgi import application

    call_command("migrate", verbosity=0)
    return application


def new_chat(text: str) -> dict[str, Any]:
    """useChat's body for ``text`` in a new chat."""
    return chat_body(str(uuid.uuid4()), [user_message(text, id=str(uuid.uuid4()))])


def by_file(diff: list[tracemalloc.StatisticDiff], streams: int, top: int, scale: float = 1.0) -> list[str]:
    sizes: Counter[str] = Counter()
    for stat in diff:
        frame = stat.traceback[0]
        name = frame.filename
        for marker in ("site-packages/", "uistream_app/", "lib/python3"):
            if marker in name:
                rest = name.split(marker, 1)[1]
                name = "uistream_app/" + rest if marker == "uistream_app/" else rest
                break
        sizes[name] += stat.size_diff
    return [f"  {size * scale / streams / 1024:8.1f} KiB  {name}" for name, size in sizes.most_common(top) if size > 0]


async def main(args: argparse.Namespace, app: Any) -> None:
    browser = Browser(app)
    await browser.start()
    warm = await browser.post("/api/chat", new_chat("count to 3"))  # the session, the lanes, the writer
    assert warm.status == 200, warm.status

    progress = [0] * args.streams
    quarter, three_quarters = args.count // 4, 3 * args.count // 4
    reached: dict[int, asyncio.Event] = {quarter: asyncio.Event(), three_quarters: asyncio.Event()}

    def reader(i: int) -> Any:
        def on_body(chunk: bytes) -> None:
            progress[i] += chunk.count(b'"text-delta"')
            for mark, event in reached.items():
                if not event.is_set() and min(progress) >= mark:
                    event.set()

        return on_body

    gc.collect()
    tracemalloc.start(args.frames)
    base = tracemalloc.take_snapshot()
    chats = [
        asyncio.create_task(browser.post("/api/chat", new_chat(f"count to {args.count}"), on_body=reader(i)))
        for i in range(args.streams)
    ]
    await reached[quarter].wait()
    gc.collect()
    first = tracemalloc.take_snapshot()
    await reached[three_quarters].wait()
    gc.collect()
    second = tracemalloc.take_snapshot()
    answers = await asyncio.gather(*chats)
    tracemalloc.stop()
    assert [answer.status for answer in answers] == [200] * args.streams

    held = first.compare_to(base, "traceback")
    grown = second.compare_to(first, "traceback")
    per_stream = sum(stat.size_diff for stat in held) / args.streams
    deltas = three_quarters - quarter
    growth = sum(stat.size_diff for stat in grown) / args.streams / deltas * 1000
    print(
        f"{args.streams} open streams, 'count to {args.count}' at {args.delay_ms} ms "
        f"(Python {sys.version.split()[0]}; tracemalloc, {args.frames} frames)"
    )
    print(f"memory per open stream at {quarter} deltas: {per_stream / 1024:.1f} KiB, by file:")
    print("\n".join(by_file(held, args.streams, args.top)))
    print(
        f"growth per stream from {quarter} to {three_quarters} deltas: "
        f"{growth / 1024:.2f} KiB per 1,000 deltas, by file:"
    )
    print("\n".join(by_file(grown, args.streams, args.top, 1000 / deltas)))
    for stat in sorted(grown, key=lambda stat: -stat.size_diff)[: args.tracebacks]:
        print(f"-- {stat.size_diff * 1000 / deltas / args.streams / 1024:.2f} KiB per stream per 1,000 deltas:")
        print("\n".join(f"     {line}" for line in stat.traceback.format(limit=args.frames)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--delay-ms", type=int, default=5)
    parser.add_argument("--frames", type=int, default=1)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--tracebacks", type=int, default=0, help="print the N largest growths' tracebacks")
    arguments = parser.parse_args()
    asyncio.run(main(arguments, _setup(arguments.delay_ms)))
