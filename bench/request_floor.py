"""CPU per request: Django's own floor against a whole chat (issue 18), and
the same against another commit (issue 27).

    PYTHONPATH=.:bench .venv/bin/python bench/request_floor.py [--requests 200] [--rounds 3] [--chat count|workload]
    .venv/bin/python bench/request_floor.py --against REV [--this REV2] [--requests 200] [--rounds 6] [--chat …]
    PYTHONPATH=.:bench .venv/bin/python bench/request_floor.py --requests 600 --profile /tmp/floor

The demo project's ASGI application (``bounded_threads``, the demo's seven
sync middleware, session and CSRF) with ``bench_settings``, called in this
process by one visitor, one request at a time, alternately per round:

* **floor**: an async view that reads the session's user and streams one
  SSE frame: what any async Django view behind this middleware costs;
* **chat**: ``POST /api/chat`` "count to 1": the pipeline, the turn's
  transaction, the run, 16 streamed deltas, the chunk log, the stored
  answer; with ``--chat workload``, ``POST /bench/chat``: the standard
  workload (``bench/workload.json``: 50 model steps, 98 tool calls, 12,577
  frames) through the real ``ChatView``, its log and its stored answer;
* **stored floor**: an async view of plain Django that stores what a new
  chat stores, the plainest way the ORM allows: the chat id looked up, the
  conversation, its two messages and the run inserted in one transaction,
  16 deltas streamed, then the run's end and the answer updated in a
  second (no pipeline, hooks, broker, chunk log or caps): what any Django
  view that keeps the conversation costs (issue 29's floor, with the rows).

Printed: CPU milliseconds per request (``time.process_time``: every
thread of this process, the lanes and the log writer included) per round,
the hops to a thread and the SQL statements (every connection's, counted
by ``bench_urls``) per request of each, and the ratios chat ÷ floor and
chat ÷ stored floor.

``--profile PREFIX``: then the stored floor and the chat again, each
alone in a process under ``py-spy record --gil`` (``PREFIX.stored``,
``PREFIX.chat``), and a table of where each one's CPU per request goes
(``bench/profile_rows.py``: Django's ORM and database, its request path,
the thread hops, uistream's rooms), side by side with their difference.

``--against REV``: the commit ``REV`` (``git archive``, into a temporary
folder) and this checkout, each measured in a fresh process per round, in
alternating order, with this file's measurement and each tree's own
package, demo and bench settings. Printed per round: each tree's chat,
floor and stored floor CPU per request, and this tree ÷ ``REV`` for the chat (a new chat's
whole turn: its set-up and 16 deltas) and for chat ÷ floor (the chat with
the machine's drift divided out). ``--this REV2``: the commit ``REV2``
instead of this checkout (two commits paired, e.g. a change and its
parent).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


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

    @csrf_exempt
    async def stored_floor(request: HttpRequest) -> StreamingHttpResponse:
        """Plain Django storing what a new chat stores: the lookup of the
        chat id, then in one transaction the conversation, its two messages
        and the run; sixteen deltas; then the run's end and the answer in a
        second transaction. No pipeline, broker, log, caps or hooks."""
        from asgiref.sync import sync_to_async
        from stored_chat import finish_chat, start_chat

        body = json.loads(request.body)
        await request.auser()
        session_key = request.session.session_key or ""
        asked = body["messages"][-1]

        run, answer = await sync_to_async(start_chat)(body["id"], session_key, asked)

        async def stream() -> Any:
            text = ""
            for i in range(16):
                text += str(i)
                yield b'data: {"type":"text-delta","id":"1","delta":"%d"}\n\n' % i
            await sync_to_async(finish_chat)(run, answer, [{"type": "text", "text": text}])

        return StreamingHttpResponse(stream(), content_type="text/event-stream")

    bench_urls.urlpatterns.append(path("bench/floor", floor))
    bench_urls.urlpatterns.append(path("bench/stored-floor", stored_floor))
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


async def main(args: argparse.Namespace, app: Any) -> dict[str, Any]:
    import bench_urls
    from asgi_client import Browser

    try:
        from stream_memory import new_chat
    except ImportError:  # a tree from before uistream_app.testing's body helpers (--against)
        from stream_memory import chat_body as new_chat

    browser = Browser(app)
    await browser.start()
    hops = _count_hops()

    async def floor() -> None:
        answer = await browser.post("/bench/floor", {})
        assert answer.status == 200, answer.status

    async def stored() -> None:
        answer = await browser.post("/bench/stored-floor", new_chat("count to 1"))
        assert answer.status == 200, answer.status

    async def chat() -> None:
        if args.chat == "workload":
            answer = await browser.post("/bench/chat", new_chat("the standard workload"))
        else:
            answer = await browser.post("/api/chat", new_chat("count to 1"))
        assert answer.status == 200, answer.status

    for _ in range(3 if args.chat == "workload" else 10):  # warm-up: the session, the lanes, the writer
        await chat()
        await floor()
        await stored()
    cpu: dict[str, list[float]] = {"floor": [], "stored": [], "chat": []}
    per_request: dict[str, float] = {}
    statements: dict[str, float] = {}
    kinds = (("floor", floor), ("stored", stored), ("chat", chat))
    for _ in range(args.rounds):
        for name, request in kinds if args.only is None else [k for k in kinds if k[0] == args.only]:
            await asyncio.sleep(0.05)  # the writer's last round of the previous requests
            hops.clear()
            counted = sum(bench_urls._counts.values())
            start = time.process_time()
            for _ in range(args.requests):
                await request()
            cpu[name].append(1000 * (time.process_time() - start) / args.requests)
            per_request[name] = hops["all"] / args.requests
            statements[name] = (sum(bench_urls._counts.values()) - counted) / args.requests
    await asyncio.sleep(0.2)  # the writer's last round, before the loop closes
    if not args.measure and args.only is None:
        print(f"{args.requests} requests a round, {args.rounds} rounds (Python {sys.version.split()[0]})")
        for name, figures in cpu.items():
            rounds = " ".join(f"{x:.2f}" for x in figures)
            print(
                f"{name:6s} CPU ms per request: {rounds}; hops to a thread per request: {per_request[name]:.0f}; "
                f"SQL statements per request: {statements[name]:.1f}"
            )
        ratios = [c / f for c, f in zip(cpu["chat"], cpu["floor"], strict=True)]
        print("chat ÷ floor, per round: " + " ".join(f"{r:.2f}x" for r in ratios))
        ratios = [c / f for c, f in zip(cpu["chat"], cpu["stored"], strict=True)]
        print("chat ÷ stored floor, per round: " + " ".join(f"{r:.2f}x" for r in ratios))
    return {"cpu": cpu, "hops": per_request, "statements": statements}


def _measure_in(tree: Path, requests: int, chat: str) -> dict[str, Any]:
    """One round in a fresh process that imports ``tree``'s package."""
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'bench'}"}
    env.pop("UISTREAM_BENCH_DIR", None)
    script = str(Path(__file__).resolve())
    out = subprocess.run(
        [sys.executable, script, "--measure", str(tree), "--requests", str(requests), "--chat", chat],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"the round in {tree} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    return result


def profile(args: argparse.Namespace, cpu: dict[str, list[float]]) -> None:
    """``--profile``: the stored floor and the chat, each alone in a process
    under ``py-spy record --gil`` (500 Hz, ``--requests`` requests), their
    samples sorted by ``profile_rows.ROWS``; each row's share times the
    median CPU per request of the rounds above (measured without the
    profiler, which slows what it watches)."""
    from profile_rows import classify

    spy = str(Path(sys.executable).parent / "py-spy")
    shares: dict[str, dict[str, float]] = {}
    for kind in ("stored", "chat"):
        out = f"{args.profile}.{kind}"
        command = [sys.executable, str(Path(__file__).resolve()), "--only", kind, "--requests", str(args.requests)]
        command += ["--chat", args.chat]
        subprocess.run(
            [spy, "record", "--gil", "--rate", "500", "--format", "raw", "-o", out, "--", *command],
            check=True,
            capture_output=True,
        )
        shares[kind] = classify(out)
    stored_ms = statistics.median(cpu["stored"])
    chat_ms = statistics.median(cpu["chat"])
    print("\nwhere the CPU goes (py-spy --gil; shares of each profile times its median CPU per request):")
    print(f"{'':68s} {'stored floor':>16s} {'chat':>16s} {'chat - stored':>14s}")
    for row in shares["chat"]:
        s, c = shares["stored"][row], shares["chat"][row]
        print(
            f"{row:68s} {s * stored_ms:6.2f} ms {s:5.0%}  {c * chat_ms:6.2f} ms {c:5.0%}  "
            f"{c * chat_ms - s * stored_ms:+9.2f} ms"
        )
    print(f"{'all':68s} {stored_ms:6.2f} ms        {chat_ms:6.2f} ms        {chat_ms - stored_ms:+9.2f} ms")


def _tree_of(rev: str, folder: Path) -> Path:
    """The files of commit ``rev`` (``git archive``) in ``folder``."""
    folder.mkdir()
    archive = subprocess.run(["git", "archive", rev], cwd=HERE.parent, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder


def _short(rev: str) -> str:
    return subprocess.run(
        ["git", "rev-parse", "--short", rev], cwd=HERE.parent, capture_output=True, text=True
    ).stdout.strip()


def against(rev: str, requests: int, rounds: int, chat: str = "count", this: str | None = None) -> None:
    root = HERE.parent
    with tempfile.TemporaryDirectory(prefix="uistream-floor-") as tmp:
        old = _tree_of(rev, Path(tmp) / "tree")
        if this is not None:
            root = _tree_of(this, Path(tmp) / "this")
            print(f"{this} ({_short(this)}) against {rev} ({_short(rev)}), chat: {chat}:")
        else:
            print(
                f"this tree (HEAD {_short('HEAD')}, and its working changes) against {rev} ({_short(rev)}), "
                f"chat: {chat}:"
            )
        print(f"{requests} requests a round, {rounds} rounds, a fresh process each (Python {sys.version.split()[0]})")
        figures: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
        for i in range(rounds):
            order = (("old", old), ("new", root)) if i % 2 == 0 else (("new", root), ("old", old))
            for name, tree in order:
                figures[name].append(_measure_in(tree, requests, chat))
        for name in ("old", "new"):
            chat = [r["cpu"]["chat"][0] for r in figures[name]]
            floor = [r["cpu"]["floor"][0] for r in figures[name]]
            stored = [r["cpu"]["stored"][0] for r in figures[name]]
            hops = figures[name][-1]["hops"]["chat"]
            statements = figures[name][-1]["statements"]["chat"]
            label = rev if name == "old" else (this or "this tree")
            print(
                f"{label:>10s}: chat CPU ms per request {' '.join(f'{x:.2f}' for x in chat)}; "
                f"floor {' '.join(f'{x:.2f}' for x in floor)}; stored floor {' '.join(f'{x:.2f}' for x in stored)}; "
                f"hops per chat {hops:.0f}; "
                f"SQL statements per chat {statements:.1f}"
            )
        for name in ("old", "new"):
            ratios = [r["cpu"]["chat"][0] / r["cpu"]["floor"][0] for r in figures[name]]
            stored = [r["cpu"]["chat"][0] / r["cpu"]["stored"][0] for r in figures[name]]
            label = rev if name == "old" else (this or "this tree")
            print(
                f"{label:>10s}: chat ÷ floor per round {' '.join(f'{x:.2f}x' for x in ratios)} "
                f"(median {statistics.median(ratios):.2f}x); "
                f"chat ÷ stored floor {' '.join(f'{x:.2f}x' for x in stored)} "
                f"(median {statistics.median(stored):.2f}x)"
            )
        chat_ratio = [
            n["cpu"]["chat"][0] / o["cpu"]["chat"][0] for n, o in zip(figures["new"], figures["old"], strict=True)
        ]
        rel = [
            (n["cpu"]["chat"][0] / n["cpu"]["floor"][0]) / (o["cpu"]["chat"][0] / o["cpu"]["floor"][0])
            for n, o in zip(figures["new"], figures["old"], strict=True)
        ]
        new = this or "this tree"
        print(f"{new} ÷ {rev}, chat CPU, per round: " + " ".join(f"{r:.3f}x" for r in chat_ratio))
        print(f"  median {statistics.median(chat_ratio):.3f}x")
        print(f"{new} ÷ {rev}, (chat ÷ floor), per round: " + " ".join(f"{r:.3f}x" for r in rel))
        print(f"  median {statistics.median(rel):.3f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--against", metavar="REV", help="pair this tree with the commit REV, round by round")
    parser.add_argument("--this", metavar="REV2", help="with --against: the commit REV2 instead of this checkout")
    parser.add_argument(
        "--chat", choices=("count", "workload"), default="count", help="the chat request: 'count to 1' or the workload"
    )
    parser.add_argument(
        "--profile",
        metavar="PREFIX",
        help="then profile the stored floor and the chat (py-spy --gil, PREFIX.stored and PREFIX.chat) and print "
        "where each one's CPU goes (bench/profile_rows.py)",
    )
    parser.add_argument("--measure", metavar="TREE", help=argparse.SUPPRESS)
    parser.add_argument("--only", choices=("floor", "stored", "chat"), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.against:
        against(arguments.against, arguments.requests, arguments.rounds or 6, arguments.chat, arguments.this)
        sys.exit(0)
    if arguments.measure:
        # A round of --against: the tree's package and bench, not this file's folder.
        tree = Path(arguments.measure).resolve()
        sys.path[:] = [str(tree), str(tree / "bench"), *(p for p in sys.path if Path(p or ".").resolve() != HERE)]
        sys.path.append(str(HERE))  # stored_chat, for a tree from before it
        arguments.rounds = 1
    else:
        sys.path.insert(0, str(HERE))
        arguments.rounds = 1 if arguments.only else arguments.rounds or 3
    from stream_memory import _setup

    application = _setup(0)
    import uistream_app

    if arguments.measure:
        assert Path(uistream_app.__file__).resolve().is_relative_to(tree), uistream_app.__file__
    _install_floor()
    result = asyncio.run(main(arguments, application))
    if arguments.measure:
        print(json.dumps(result))
    elif arguments.profile and arguments.only is None:
        profile(arguments, result["cpu"])
