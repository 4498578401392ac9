"""The WebSocket path under load, over real sockets on 127.0.0.1 (issue 5).

    .venv/bin/python bench/ws_bench.py [--sockets 500] [--count 100] [--delay-ms 20] [--ramp 2]

One ``daphne`` process serves the demo project (``demo_project.asgi``: the
Origin check, ``AuthMiddlewareStack``, ``ChatConsumer``) with the demo's
settings: its SQLite database (WAL, ``synchronous=NORMAL``) as a fresh file,
migrated, in a temporary directory, so the ``RunRecorder`` writes every
run's log; the in-process broker; ``DJANGO_DEBUG=0``; the demo model paced
at ``UISTREAM_DEMO_DELAY_MS=--delay-ms``. ``--flush-every-ms`` changes the
recorder's ``FLUSH_EVERY_MS`` (a diagnosis, not the demo).

A second daphne then serves a *baseline*: the same stack whose consumer
replays a captured run's frames at the same pacing with nothing behind it
(no run, recorder, broker or database): what daphne and Channels cost by
themselves (``--no-baseline`` skips it). A third serves the *stored
baseline*: the same replay, each send first storing a new chat's rows as a
plain Channels consumer would (``bench/stored_chat.py``'s ``start_chat``
through ``database_sync_to_async`` before ``start``, ``finish_chat`` with
the answer's parts before ``end``; the session verified at the handshake),
on a fresh migrated SQLite file of its own like ours: what Django's own
path costs with the rows a chat needs (``--no-stored-baseline`` skips it).
Both bare consumers keep Channels' ``dispatch`` (its database hop before
every message), which ``ChatConsumer`` skips.

``--sockets`` clients (the ``websockets`` package, in this process), each
its own visitor (a session of its own, sent as the handshake's cookie, with
the site's Origin), connect over ``--ramp`` seconds; when all are open they
all send ``{"type": "send", …}`` "count to ``--count``" at once, each to a
chat of its own, and read until ``end``. Every socket's frames are checked
(``start``, sequences from 0 without gaps, the numbers 1 to N, ``end``).

Reported:

* the gap between successive paced frames of a socket (text and reasoning
  deltas: the demo model sleeps ``--delay-ms`` before each), pooled over all
  sockets: p50 / p90 / p99 / max against the pacing; the target is
  p99 <= 2x the pacing;
* time from ``send`` to the first chunk frame;
* the server's RSS (``VmRSS`` of ``/proc/<pid>/status``): after a warm-up,
  with every socket open and idle, at its peak while all stream (sampled
  every 50 ms), and after; per socket = the difference / sockets;
* the server's CPU time while streaming, and this client process's own
  CPU time and event-loop lag (a 5 ms sleeper), to tell the client's share
  of a gap from the server's (the clients share the machine: a client
  near 100% of a core delays what it reads);
* how many sockets streamed at once (between their first chunk and their
  ``end``): 500 of 500 when every stream overlaps every other.

Every server's stored runs are checked too (all completed, every answer
"1 2 … N"). ``--rounds N`` measures the servers N times, each round
starting one server later than the last (round 1 with ours, whose warm-up
captures the frames the others replay), and prints each round's ratios and
their medians: ``ChatConsumer`` ÷ the bare consumer of the same round
against issue 29's targets, ``ChatConsumer`` ÷ the stored bare consumer,
and the stored ÷ the bare one. ``--profile`` prints where each server's
samples went (``PROFILE_ROWS``); ``--gc-stats`` its garbage collections
while it streams.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gc_probe
import orjson
from bench_common import HOST, cpu_seconds, free_port, lag_monitor, pct, rss_kib

try:
    from websockets.asyncio.client import connect
    from websockets.typing import Origin
except ImportError:  # pragma: no cover - a hint, not a code path
    sys.exit("bench/ws_bench.py needs the websockets package: .venv/bin/pip install websockets")

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
PACED = frozenset(("text-delta", "reasoning-delta"))
APP = "demo_project.asgi:application"
BASELINE = "ws_bench:baseline"
STORED_BASELINE = "ws_bench:stored_baseline"
WARM_UP = 5
TABLE_COLUMNS = [
    "server",
    "streams ok",
    "frames/s",
    "gap p50",
    "p90",
    "p99",
    "max",
    "first chunk p50 / p99",
    "streaming at once",
    "KiB/socket open / peak",
    "server CPU",
    "server CPU per frame",
    "client CPU",
]
TABLE_HEADER = "| " + " | ".join(TABLE_COLUMNS) + " |"


# -- the server ------------------------------------------------------------------------


#: The ASGI servers ``--server`` picks from (one process each).
SERVERS = {
    "daphne": ["-m", "daphne", "-v", "0", "-b", HOST, "-p", "{port}", "{app}"],
    "uvicorn": [
        *("-m", "uvicorn", "--host", HOST, "--port", "{port}"),
        *("--no-access-log", "--log-level", "warning", "{app}"),
    ],
}


class Server:
    """One ASGI server process (daphne by default), on the demo's settings
    and a fresh SQLite file."""

    def __init__(
        self,
        delay_ms: int,
        app: str = APP,
        label: str = "baseline",
        *,
        flush_every_ms: int | None = None,
        switch_interval_ms: float | None = None,
        gc_stats: bool = False,
        env: dict[str, str] | None = None,
        kind: str = "daphne",
        options: tuple[str, ...] = (),
    ) -> None:
        self.kind = kind
        #: More command-line options of the server (bench/slow_clients.py's timeouts).
        self.options = options
        self.dir = Path(tempfile.mkdtemp(prefix="uistream-ws-bench-"))
        self.port = free_port()
        self.app = app
        self.label = label
        # The demo's settings, its database (SQLite in WAL mode) moved to the
        # temporary directory.
        lines = [
            "from demo_project.settings import *  # noqa: F403",
            "from demo_project.settings import DATABASES, UISTREAM",
            f"DATABASES = {{'default': {{**DATABASES['default'], 'NAME': {str(self.dir / 'bench.sqlite3')!r}}}}}",
        ]
        if flush_every_ms is not None:  # a diagnosis, not the demo
            lines.append(f"UISTREAM = {{**UISTREAM, 'FLUSH_EVERY_MS': {flush_every_ms}}}")
        if switch_interval_ms is not None:  # a diagnosis: how long a thread waits for the GIL
            lines.append(f"import sys; sys.setswitchinterval({switch_interval_ms / 1000!r})")
        #: The server's garbage collections, when measured (``--gc-stats``; the
        #: migrate and session commands import these settings too, so the
        #: server's own file is named by the server's command line).
        self.gc_path = str(self.dir / "gc.json") if gc_stats else None
        if self.gc_path is not None:
            lines.append(
                "import sys\n"
                f"if any(arg.endswith({self.app!r}) for arg in sys.argv):\n"
                f"    import gc_probe; gc_probe.install({self.gc_path!r})"
            )
        (self.dir / "ws_bench_settings.py").write_text("\n".join(lines) + "\n")
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "ws_bench_settings",
            "DJANGO_DEBUG": "0",
            # DEBUG off needs a key of its own (demo_project/settings.py).
            "DJANGO_SECRET_KEY": "uistream-bench-" + uuid.uuid4().hex,
            "UISTREAM_DEMO_DELAY_MS": str(delay_ms),
            "PYTHONPATH": os.pathsep.join((str(ROOT), str(ROOT / "bench"), str(self.dir))),
            **(env or {}),
        }
        for name in ("REDIS_URL", "DATABASE_URL"):  # the demo's in-process broker and SQLite
            self.env.pop(name, None)
        self.log = self.dir / f"{kind}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        subprocess.run([PY, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=self.env, check=True)
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [PY, *(arg.format(port=self.port, app=self.app) for arg in SERVERS[self.kind]), *self.options],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection((HOST, self.port), timeout=0.5):
                    return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{self.kind} did not start:\n{self.log.read_text()[-2000:]}") from None
                time.sleep(0.05)

    def sessions(self, count: int) -> list[str]:
        """``count`` new sessions in the server's database, as cookies."""
        code = (
            "import django, sys; django.setup()\n"
            "from importlib import import_module\n"
            "from django.conf import settings\n"
            "Store = import_module(settings.SESSION_ENGINE).SessionStore\n"
            "for _ in range(int(sys.argv[1])):\n"
            "    s = Store(); s.create(); print(f'{settings.SESSION_COOKIE_NAME}={s.session_key}')\n"
        )
        out = subprocess.run([PY, "-c", code, str(count)], cwd=ROOT, env=self.env, check=True, capture_output=True)
        return out.stdout.decode().split()

    def rss_kib(self) -> int:
        assert self.proc is not None
        return rss_kib(self.proc.pid)

    def cpu_seconds(self) -> float:
        assert self.proc is not None
        return cpu_seconds(self.proc.pid)

    def run_statuses(self) -> dict[str, int]:
        code = (
            "import django; django.setup()\n"
            "import json\n"
            "from collections import Counter\n"
            "from uistream_app.models import Run\n"
            "print(json.dumps(Counter(Run.objects.values_list('status', flat=True))))\n"
        )
        out = subprocess.run([PY, "-c", code], cwd=ROOT, env=self.env, check=True, capture_output=True)
        result: dict[str, int] = orjson.loads(out.stdout)
        return result

    def answers(self, text: str) -> tuple[int, int]:
        """How many stored answers (the runs' messages) have ``text`` as
        their text parts, of how many."""
        code = (
            "import django, sys; django.setup()\n"
            "from uistream_app.models import Message\n"
            "answers = Message.objects.filter(role='assistant').values_list('parts', flat=True)\n"
            "texts = [''.join(p.get('text', '') for p in parts if p.get('type') == 'text') for parts in answers]\n"
            "print(sum(t == sys.argv[1] for t in texts), len(texts))\n"
        )
        out = subprocess.run([PY, "-c", code, text], cwd=ROOT, env=self.env, check=True, capture_output=True)
        right, total = out.stdout.split()
        return int(right), int(total)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def url(self) -> str:
        return f"ws://{HOST}:{self.port}/ws/chat/"

    @property
    def origin(self) -> Origin:
        return Origin(f"http://{HOST}:{self.port}")


# -- the clients ------------------------------------------------------------------------


@dataclass
class Result:
    sent_at: float = 0.0
    arrivals: list[float] = field(default_factory=list)  # paced frames only
    first_chunk_at: float | None = None
    end_at: float | None = None
    sequences: list[int] = field(default_factory=list)
    text: str = ""
    end: str | None = None


def send_frame(chat_id: str, text: str) -> str:
    frame = {
        "type": "send",
        "requestId": uuid.uuid4().hex[:16],
        "id": chat_id,
        "trigger": "submit-message",
        "messages": [{"id": "u-" + chat_id, "role": "user", "parts": [{"type": "text", "text": text}]}],
        "headers": {},
        "body": {},
    }
    return orjson.dumps(frame).decode()


async def chat(ws: Any, chat_id: str, text: str, result: Result, capture: list[dict[str, Any]] | None = None) -> None:
    result.sent_at = time.perf_counter()
    await ws.send(send_frame(chat_id, text))
    async for raw in ws:
        now = time.perf_counter()
        frame = orjson.loads(raw)
        kind = frame["type"]
        if capture is not None:
            capture.append(frame)
        if kind == "chunk":
            if result.first_chunk_at is None:
                result.first_chunk_at = now
            result.sequences.append(frame["sequence"])
            chunk = frame["chunk"]
            if chunk["type"] in PACED:
                result.arrivals.append(now)
                if chunk["type"] == "text-delta":
                    result.text += chunk["delta"]
        elif kind in ("end", "error", "no-active"):
            result.end_at = now
            result.end = kind if kind != "error" else f"error: {frame.get('errorText')}"
            return


async def sample_rss(server: Server, stop: asyncio.Event, peak: list[int]) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], server.rss_kib())
        await asyncio.sleep(0.05)


async def run(args: argparse.Namespace, server: Server, cookies: list[str]) -> dict[str, Any]:
    """The load: warm-up, ``--sockets`` sockets opened, then all send at once."""
    count, sockets = args.count, args.sockets
    # Warm-up, so that what any first run loads is in the "before" figure;
    # the first one is a whole run whose frames the baseline replays.
    captured: list[dict[str, Any]] = []
    for i, cookie in enumerate(cookies[:WARM_UP]):
        async with connect(server.url, additional_headers={"Cookie": cookie}, origin=server.origin) as ws:
            await chat(ws, f"warm-{i}", f"count to {count if i == 0 else 5}", Result(), captured if i == 0 else None)
    await asyncio.sleep(0.5)
    rss_before = server.rss_kib()

    opened = 0
    all_open = asyncio.Event()
    go = asyncio.Event()
    done = asyncio.Event()
    finished = 0
    results = [Result() for _ in range(sockets)]

    async def client(i: int) -> None:
        nonlocal opened, finished
        await asyncio.sleep(args.ramp * i / sockets)
        async with connect(
            server.url,
            additional_headers={"Cookie": cookies[WARM_UP + i]},
            origin=server.origin,
            compression=None,
            ping_interval=None,
            max_queue=None,
            open_timeout=60,
        ) as ws:
            opened += 1
            if opened == sockets:
                all_open.set()
            await go.wait()
            try:
                await chat(ws, f"bench-{i}", f"count to {count}", results[i])
            finally:
                finished += 1
                if finished == sockets:
                    done.set()
            await done.wait()  # every socket stays open until all runs are over

    tasks = [asyncio.create_task(client(i)) for i in range(sockets)]
    await asyncio.wait_for(all_open.wait(), timeout=args.timeout)
    await asyncio.sleep(0.5)
    rss_open = server.rss_kib()

    stop = asyncio.Event()
    peak = [rss_open]
    lags: list[float] = []
    probes = [asyncio.create_task(sample_rss(server, stop, peak)), asyncio.create_task(lag_monitor(stop, lags))]
    spy = start_profiler(server, f"{args.profile}.{server.label}") if args.profile else None
    if spy is not None:
        await asyncio.sleep(1)  # py-spy attaches
    gc0 = gc_probe.read(server.gc_path) if server.gc_path else None
    cpu0, own0, t0 = server.cpu_seconds(), time.process_time(), time.perf_counter()
    go.set()
    await asyncio.wait_for(done.wait(), timeout=args.timeout)
    elapsed, cpu = time.perf_counter() - t0, server.cpu_seconds() - cpu0
    if server.gc_path:
        await asyncio.sleep(0.3)  # the probe's next write
    gc1 = gc_probe.read(server.gc_path) if server.gc_path else None
    client_cpu = time.process_time() - own0
    stop.set()
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait(timeout=30)
    await asyncio.gather(*probes)
    await asyncio.sleep(0.5)
    rss_after_runs = server.rss_kib()
    await asyncio.gather(*tasks)
    return {
        "results": results,
        "captured": captured,
        "rss_before": rss_before,
        "rss_open": rss_open,
        "rss_peak": peak[0],
        "rss_after_runs": rss_after_runs,
        "elapsed": elapsed,
        "cpu": cpu,
        "client_cpu": client_cpu,
        "lags": lags,
        "gc": (gc0, gc1),
    }


def start_profiler(server: Server, output: str) -> subprocess.Popen[bytes]:
    """``py-spy record --gil`` of the server into ``output`` (raw stacks)."""
    assert server.proc is not None
    spy = str(Path(PY).parent / "py-spy")
    return subprocess.Popen(
        [spy, "record", "--pid", str(server.proc.pid), "--format", "raw", "--rate", "250", "--gil", "-o", output],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def streaming_at_once(results: list[Result]) -> int:
    """The most sockets between their first chunk and their end at one
    moment: 500 when every stream overlaps every other, fewer when the
    first streams end before the last start."""
    edges = sorted(
        edge
        for r in results
        if r.first_chunk_at is not None and r.end_at is not None
        for edge in ((r.first_chunk_at, 1), (r.end_at, -1))
    )
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def report(args: argparse.Namespace, label: str, m: dict[str, Any]) -> dict[str, Any]:
    results: list[Result] = m["results"]
    expected = " ".join(str(n) for n in range(1, args.count + 1))
    bad = [
        i
        for i, r in enumerate(results)
        if r.end != "end" or r.sequences != list(range(len(r.sequences))) or r.text != expected
    ]
    gaps = [(b - a) * 1000 for r in results for a, b in zip(r.arrivals, r.arrivals[1:], strict=False)]
    ttfc = [(r.first_chunk_at - r.sent_at) * 1000 for r in results if r.first_chunk_at is not None]
    pacing = args.delay_ms
    n = args.sockets
    frames = sum(len(r.sequences) + 2 for r in results)
    row = {
        "label": label,
        "ok": n - len(bad),
        "frames_per_s": frames / m["elapsed"],
        "p50": pct(gaps, 50),
        "p90": pct(gaps, 90),
        "p99": pct(gaps, 99),
        "max": max(gaps),
        "ttfc_p50": pct(ttfc, 50),
        "ttfc_p99": pct(ttfc, 99),
        "at_once": streaming_at_once(results),
        "kib_open": (m["rss_open"] - m["rss_before"]) / n,
        "kib_peak": (m["rss_peak"] - m["rss_before"]) / n,
        "cpu": m["cpu"] / m["elapsed"],
    }
    print(f"== {label}")
    print(f"all streams checked: {row['ok']} ok, {len(bad)} bad" + (f" (e.g. socket {bad[0]})" if bad else ""))
    print(f"{frames} frames in {m['elapsed']:.2f} s ({row['frames_per_s']:.0f} frames/s)")
    print(
        f"gap between paced frames ({len(gaps)} gaps): p50 {row['p50']:.1f} ms, p90 {row['p90']:.1f} ms, "
        f"p99 {row['p99']:.1f} ms ({row['p99'] / pacing:.2f}x pacing), max {row['max']:.1f} ms; "
        f"mean {statistics.fmean(gaps):.1f} ms"
    )
    print(f"send -> first chunk: p50 {row['ttfc_p50']:.1f} ms, p99 {row['ttfc_p99']:.1f} ms, max {max(ttfc):.1f} ms")
    print(f"streaming at once (first chunk to end): at most {row['at_once']} of {n} sockets")
    print(
        f"server RSS: {m['rss_before'] / 1024:.1f} MiB after warm-up, {m['rss_open'] / 1024:.1f} MiB with "
        f"{n} sockets open ({row['kib_open']:.1f} KiB/socket), peak {m['rss_peak'] / 1024:.1f} MiB while "
        f"streaming ({row['kib_peak']:.1f} KiB/socket), {m['rss_after_runs'] / 1024:.1f} MiB after the runs "
        "(sockets still open)"
    )
    row["us_per_frame"] = m["cpu"] / frames * 1e6
    print(
        f"server CPU while streaming: {m['cpu']:.2f} s in {m['elapsed']:.2f} s ({row['cpu']:.0%}), "
        f"{row['us_per_frame']:.0f} µs per frame"
    )
    lags = m["lags"]
    row["client_cpu"] = m["client_cpu"] / m["elapsed"]
    print(
        f"clients (this process): CPU {row['client_cpu']:.0%}; event-loop lag (5 ms sleeper) "
        f"p50 {pct(lags, 50) * 1000:.1f} ms, p99 {pct(lags, 99) * 1000:.1f} ms"
    )
    gc0, gc1 = m["gc"]
    if gc0 is not None and gc1 is not None:
        counts = [b - a for a, b in zip(gc0["count"], gc1["count"], strict=True)]
        seconds = [b - a for a, b in zip(gc0["seconds"], gc1["seconds"], strict=True)]
        print(
            f"server garbage collections while streaming: {', '.join(f'{c:.0f}' for c in counts)} "
            f"(generations 0, 1, 2), {sum(seconds) * 1000:.0f} ms in all ({sum(seconds) / m['cpu']:.0%} of its CPU), "
            f"of which full {seconds[2] * 1000:.0f} ms; longest full collection in the process "
            f"{gc1['longest'][2] * 1000:.0f} ms"
        )
    row["met"] = not bad and row["p99"] <= 2 * pacing
    return row


# -- the baselines: daphne and Channels alone, then with the rows stored ---------------------
#
# ``ws_bench:baseline`` is an ASGI application for daphne: the demo's stack
# (Origin check, AuthMiddlewareStack, a consumer at ws/chat/) whose consumer
# answers a send with the frames of a real run (captured in a warm-up of
# ``ChatConsumer``, file in UISTREAM_WS_BENCH_FRAMES), paced as the demo
# model paces them, with no run, recorder, broker or database behind it:
# what daphne and Channels cost by themselves. ``ws_bench:stored_baseline``
# is the same replay with a new chat's rows stored as a plain Channels
# consumer would store them (``StoredBaselineConsumer``). Both keep
# Channels' ``dispatch``, whose ``close_old_connections`` hop on the shared
# database thread comes before every message (``ChatConsumer`` skips it).

_baseline_app: Any = None


async def baseline(scope: dict[str, Any], receive: Any, send: Any) -> None:
    global _baseline_app
    if _baseline_app is None:
        _baseline_app = _make_baseline(stored=False)
    await _baseline_app(scope, receive, send)


async def stored_baseline(scope: dict[str, Any], receive: Any, send: Any) -> None:
    global _baseline_app
    if _baseline_app is None:
        _baseline_app = _make_baseline(stored=True)
    await _baseline_app(scope, receive, send)


def _verified_session_key(session: Any) -> str | None:
    # Loading drops a key the store does not know (expired, forged), as
    # ChatConsumer's own check does: only a real session owns a chat.
    session.keys()
    key = session.session_key
    return key if isinstance(key, str) and key else None


def _make_baseline(*, stored: bool) -> Any:
    import django

    django.setup()
    from channels.auth import AuthMiddlewareStack  # type: ignore[import-untyped]
    from channels.db import database_sync_to_async  # type: ignore[import-untyped]
    from channels.generic.websocket import AsyncWebsocketConsumer  # type: ignore[import-untyped]
    from channels.routing import URLRouter  # type: ignore[import-untyped]
    from channels.security.websocket import AllowedHostsOriginValidator  # type: ignore[import-untyped]
    from django.urls import path
    from stored_chat import finish_chat, start_chat

    chunks = orjson.loads(Path(os.environ["UISTREAM_WS_BENCH_FRAMES"]).read_bytes())
    delay = float(os.environ["UISTREAM_DEMO_DELAY_MS"]) / 1000

    class BaselineConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]
        """The captured frames, replayed at the demo model's pacing."""

        tasks: set[asyncio.Task[None]]

        async def connect(self) -> None:
            self.tasks = set()
            await self.accept()

        async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
            task = asyncio.create_task(self.stream(orjson.loads(text_data or "{}")))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

        async def stream(self, frame: dict[str, Any]) -> None:
            rid = orjson.dumps(frame["requestId"]).decode()
            await self.send(text_data='{"type":"start","requestId":' + rid + "}")
            for seq, chunk in enumerate(chunks):
                if chunk["type"] in PACED:
                    await asyncio.sleep(delay)
                head = '{"type":"chunk","requestId":' + rid + ',"sequence":' + str(seq) + ',"chunk":'
                await self.send(text_data=head + orjson.dumps(chunk).decode() + "}")
            await self.send(text_data='{"type":"end","requestId":' + rid + "}")

        async def disconnect(self, code: int) -> None:
            for task in self.tasks:
                task.cancel()

    class StoredBaselineConsumer(BaselineConsumer):  # type: ignore[misc]
        """The same replay, storing what a new chat stores the way a plain
        Channels consumer would: the socket's session verified once at the
        handshake (loaded in the database thread, as ``ChatConsumer`` does;
        a socket without a real session is refused); each send's rows
        (``stored_chat.start_chat``: the chat id looked up, then the
        conversation, both messages and the run in one transaction) through
        ``database_sync_to_async`` before ``start``, since ``ChatConsumer``
        sends ``start`` once its turn is stored and its run's first chunks
        are out; the answer's parts gathered from the deltas as they go out;
        after the last chunk, before ``end``, the run's end and the answer
        (``finish_chat``), as ``ChatConsumer``'s run has stored both by the
        time its ``end`` goes out."""

        session_key: str

        async def connect(self) -> None:
            key = await database_sync_to_async(_verified_session_key)(self.scope["session"])
            if key is None:
                await self.close()  # before accept: the handshake gets a 403
                return
            self.session_key = key
            await super().connect()

        async def begin(self, frame: dict[str, Any]) -> tuple[Any, Any]:
            return await database_sync_to_async(start_chat)(frame["id"], self.session_key, frame["messages"][-1])

        async def finish(self, run: Any, answer: Any, parts: list[dict[str, Any]]) -> None:
            await database_sync_to_async(finish_chat)(run, answer, parts)

        async def stream(self, frame: dict[str, Any]) -> None:
            rid = orjson.dumps(frame["requestId"]).decode()
            run, answer = await self.begin(frame)
            await self.send(text_data='{"type":"start","requestId":' + rid + "}")
            reasoning: list[str] = []
            text: list[str] = []
            for seq, chunk in enumerate(chunks):
                kind = chunk["type"]
                if kind in PACED:
                    await asyncio.sleep(delay)
                    (text if kind == "text-delta" else reasoning).append(chunk["delta"])
                head = '{"type":"chunk","requestId":' + rid + ',"sequence":' + str(seq) + ',"chunk":'
                await self.send(text_data=head + orjson.dumps(chunk).decode() + "}")
            parts = [
                {"type": "reasoning", "text": "".join(reasoning), "state": "done"},
                {"type": "text", "text": "".join(text), "state": "done"},
            ]
            await self.finish(run, answer, parts)
            await self.send(text_data='{"type":"end","requestId":' + rid + "}")

    consumer = StoredBaselineConsumer if stored else BaselineConsumer
    routes = URLRouter([path("ws/chat/", consumer.as_asgi())])
    return AllowedHostsOriginValidator(AuthMiddlewareStack(routes))


#: Where a sample of ``--profile`` goes: the first rule that one of its
#: stack's functions (py-spy's names) matches; the last takes the rest.
PROFILE_ROWS: list[tuple[str, tuple[str, ...]]] = [
    ("a turn's set-up, database thread (ConversationStore.prepare_sync)", ("ConversationStore.prepare_sync",)),
    ("the log writer's thread", ("_write_jobs",)),
    ("the stored bare consumer's rows, database thread (start_chat, finish_chat)", ("start_chat", "finish_chat")),
    ("closing stale connections, database thread (close_old_connections)", ("close_old_connections",)),
    ("other threads", ("Thread._bootstrap",)),
    ("a frame's send: daphne, autobahn, Twisted's write", ("Server.handle_reply",)),
    ("a frame's send: Channels' consumer and session wrapper", ("AsyncWebsocketConsumer.send",)),
    ("the run task (model, tool loop, encoder, recorder, publish)", ("execute_run",)),
    ("the stored bare consumer's rows, event loop", ("StoredBaselineConsumer.begin", "StoredBaselineConsumer.finish")),
    ("Channels' hop before each message, event loop (aclose_old_connections)", ("aclose_old_connections",)),
    (
        "the consumer's own per frame (subscription, rendering)",
        ("ChatConsumer._forward", "BaselineConsumer.stream", "StoredBaselineConsumer.stream"),
    ),
    ("a turn's set-up, event loop (policies, hooks, Runner.start)", ("ChatConsumer.serve_send",)),
    ("the log writer, event loop", ("LogWriter._run",)),
    ("Twisted and asyncio I/O callbacks", ("AsyncioSelectorReactor._readOrWrite",)),
    ("the event loop: timers, task steps", ()),
]


def print_profile(path: str, us_per_frame: float) -> None:
    """The samples of a ``--profile`` file (py-spy's raw format: a stack,
    a space, a count) by ``PROFILE_ROWS``, as shares and as µs per frame."""
    counts = dict.fromkeys((name for name, _ in PROFILE_ROWS), 0)
    total = 0
    for line in Path(path).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        # py-spy names a function by its qualified name: a method of a class
        # defined in a function is "_make_baseline.<locals>.BaselineConsumer.stream".
        functions = {frame.split(" (", 1)[0].rpartition("<locals>.")[2] for frame in stack.split(";")}
        for name, markers in PROFILE_ROWS:
            if not markers or not functions.isdisjoint(markers):
                counts[name] += int(count)
                break
        total += int(count)
    print(f"py-spy --gil, {total} samples ({path}):")
    for name, count in counts.items():
        if count:
            print(f"  {name}: {count / total:.0%}, {count / total * us_per_frame:.0f} µs per frame")


def measure(args: argparse.Namespace, label: str, server: Server) -> dict[str, Any]:
    try:
        server.start()
        cookies = server.sessions(args.sockets + WARM_UP)
        measured = asyncio.run(run(args, server, cookies))
        row = report(args, label, measured)
        if server.app in (APP, STORED_BASELINE):
            row["stored_ok"] = check_stored(args, server)
        if args.profile:
            print_profile(f"{args.profile}.{server.label}", row["us_per_frame"])
        row["captured"] = measured["captured"]
        return row
    finally:
        server.stop()


def check_stored(args: argparse.Namespace, server: Server) -> bool:
    """Whether the server stored every run as completed and every "count
    to ``--count``" answer whole (the bench's and the warm-up's)."""
    statuses = server.run_statuses()
    chats = WARM_UP + args.sockets
    right, total = server.answers(" ".join(str(n) for n in range(1, args.count + 1)))
    # The warm-up's last chats ask for 5; the stored bare consumer replays
    # the same answer to every question.
    expected = chats if server.app == STORED_BASELINE else args.sockets + 1 + (WARM_UP - 1) * (args.count == 5)
    ok = statuses == {"completed": chats} and right == expected and total == chats
    print(
        f"runs stored: {statuses}; answers 'count to {args.count}' right: {right} of {expected} "
        f"({total} answers) — {'ok' if ok else 'NOT as expected'}"
    )
    return ok


#: The servers of a round, in round 1's order: ChatConsumer first, since the
#: bare consumers replay the frames its warm-up captures.
ROLES = ("ours", "bare", "stored")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sockets", type=int, default=500)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--delay-ms", type=int, default=20)
    parser.add_argument("--ramp", type=float, default=2.0, help="seconds over which the sockets connect")
    parser.add_argument("--timeout", type=float, default=300.0, help="give up after this many seconds")
    parser.add_argument("--no-baseline", action="store_true", help="skip the bare consumer")
    parser.add_argument("--no-stored-baseline", action="store_true", help="skip the stored bare consumer")
    parser.add_argument(
        "--flush-every-ms", type=int, help="diagnosis: the demo settings with another UISTREAM['FLUSH_EVERY_MS']"
    )
    parser.add_argument(
        "--switch-interval-ms",
        type=float,
        help="diagnosis: every server with another sys.setswitchinterval (Python's default is 5 ms)",
    )
    parser.add_argument(
        "--gc-stats", action="store_true", help="diagnosis: time each server's garbage collections while it streams"
    )
    parser.add_argument("--profile", metavar="PREFIX", help="py-spy record --gil each server while it streams")
    parser.add_argument("--server", choices=sorted(SERVERS), default="daphne", help="the ASGI server (default daphne)")
    parser.add_argument(
        "--rounds", type=int, default=1, help="rounds of ChatConsumer and its baselines, in turn (default 1)"
    )
    args = parser.parse_args()
    print(
        f"{args.sockets} sockets, 'count to {args.count}' each, demo model paced at {args.delay_ms} ms, "
        f"one {args.server} process"
    )
    label = "ChatConsumer (demo_project.asgi)"
    if args.flush_every_ms is not None:
        label += f", FLUSH_EVERY_MS={args.flush_every_ms}"
    if args.switch_interval_ms is not None:
        label += f", switch interval {args.switch_interval_ms:g} ms"
    roles = [
        role
        for role in ROLES
        if not (role == "bare" and args.no_baseline) and not (role == "stored" and args.no_stored_baseline)
    ]
    common: dict[str, Any] = {
        "kind": args.server,
        "switch_interval_ms": args.switch_interval_ms,
        "gc_stats": args.gc_stats,
    }
    rounds: list[dict[str, dict[str, Any]]] = []
    with tempfile.NamedTemporaryFile(suffix=".json") as frames_file:  # the captured frames, kept over the rounds
        for number in range(args.rounds):
            if args.rounds > 1:
                print(f"\n--- round {number + 1} of {args.rounds}")
            rows: dict[str, dict[str, Any]] = {}
            # Each round starts one server later than the last (round 1 with
            # ours, whose warm-up captures the frames); a baseline that runs
            # before ours in its round replays the frames of the round before.
            shift = number % len(roles)
            for role in roles[shift:] + roles[:shift]:
                if role == "ours":
                    server = Server(args.delay_ms, label="consumer", flush_every_ms=args.flush_every_ms, **common)
                    rows[role] = measure(args, label, server)
                    frames_file.seek(0)
                    frames_file.truncate()
                    frames_file.write(
                        orjson.dumps([f["chunk"] for f in rows[role]["captured"] if f["type"] == "chunk"])
                    )
                    frames_file.flush()
                    continue
                env = {"UISTREAM_WS_BENCH_FRAMES": frames_file.name}
                if role == "bare":
                    server = Server(args.delay_ms, BASELINE, env=env, **common)
                    rows[role] = measure(args, f"baseline ({args.server} + Channels only)", server)
                else:
                    server = Server(args.delay_ms, STORED_BASELINE, label="stored-baseline", env=env, **common)
                    rows[role] = measure(args, f"stored baseline ({args.server} + Channels + the rows)", server)
            rounds.append(rows)
    print()
    print(TABLE_HEADER)
    print("|---" + "|---:" * (len(TABLE_COLUMNS) - 1) + "|")
    for r in (rows[role] for rows in rounds for role in roles):
        print(
            f"| {r['label']} | {r['ok']}/{args.sockets} | {r['frames_per_s']:,.0f} | {r['p50']:.1f} ms | "
            f"{r['p90']:.1f} ms | **{r['p99']:.1f} ms** ({r['p99'] / args.delay_ms:.2f}x) | {r['max']:.0f} ms | "
            f"{r['ttfc_p50']:.0f} / {r['ttfc_p99']:.0f} ms | {r['at_once']} | {r['kib_open']:.0f} / "
            f"{r['kib_peak']:.0f} | {r['cpu']:.0%} | {r['us_per_frame']:.0f} µs | {r['client_cpu']:.0%} |"
        )
    met = all(rows["ours"]["met"] for rows in rounds)
    print(f"\ntarget (ChatConsumer p99 gap <= 2x pacing, every round): {'met' if met else 'NOT met'}")
    stored_ok = all(row.get("stored_ok", True) for rows in rounds for row in rows.values())
    if not stored_ok:
        print("some server did not store what it should (above)")
    met = met and stored_ok
    if "bare" in roles:
        met = paired(args, rounds, "ours", "bare", targets=True) and met
    if "stored" in roles:
        paired(args, rounds, "ours", "stored")
    if "bare" in roles and "stored" in roles:
        paired(args, rounds, "stored", "bare")
    return 0 if met else 1


#: Issue 29's targets: ChatConsumer ÷ the bare consumer of the same round.
PAIRED = (("gap p99", "p99", 1.5), ("CPU per frame", "us_per_frame", 1.5), ("send -> first chunk p50", "ttfc_p50", 3.0))
NAMES = {"ours": "ChatConsumer", "bare": "the bare consumer", "stored": "the stored bare consumer"}


def paired(
    args: argparse.Namespace, rounds: list[dict[str, dict[str, Any]]], top: str, under: str, *, targets: bool = False
) -> bool:
    """Each round's ratios of server ``top`` to server ``under`` and their
    median, and how many sockets streamed at once on each; with
    ``targets``, True when the medians meet issue 29's targets and every
    stream of ``top`` streamed at once with all the others."""
    print(f"\n{NAMES[top]} ÷ {NAMES[under]} of the same round:")
    met = True
    for name, key, most in PAIRED:
        ratios = [rows[top][key] / rows[under][key] for rows in rounds]
        median = statistics.median(ratios)
        met = met and median <= most
        each = ", ".join(f"{r:.2f}x" for r in ratios)
        print(f"  {name}: median {median:.2f}x (rounds {each}" + (f"; target <= {most}x)" if targets else ")"))
    at_once = [(rows[top]["at_once"], rows[under]["at_once"]) for rows in rounds]
    median_top = statistics.median(a for a, _ in at_once)
    median_under = statistics.median(b for _, b in at_once)
    met = met and median_top == args.sockets
    each = ", ".join(f"{a} / {b}" for a, b in at_once)
    print(
        f"  streaming at once: median {median_top:g} / {median_under:g} of {args.sockets} "
        f"(rounds, {top} / {under}: {each})"
    )
    if targets:
        print(f"targets of issue 29 (medians of {len(rounds)} rounds): {'met' if met else 'NOT met'}")
    return met


if __name__ == "__main__":
    sys.exit(main())
