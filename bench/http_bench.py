"""The HTTP path, measured over real sockets on 127.0.0.1 (issue 4).

    .venv/bin/python bench/http_bench.py [--only 1|2|3] [--reps N] [--streams 200] [--diagnose] [--lease]
        [--sqlite wal|default] [--flush-ms MS] [--profile DIR]

Each benchmark starts its own ``daphne`` (one process) on the demo project
with ``bench/bench_settings.py``: a file SQLite database, freshly migrated
in a temporary directory, so the ``RunRecorder`` writes every run's log;
``bench/bench_urls.py`` adds the workload chat view, the bare baseline and
a query counter. Clients run in this process: a blocking raw socket for 1
and 2 (it reads the whole response, ``Connection: close``), raw asyncio
streams for 3.

1. **Throughput.** ``bench/workload.json`` (12,577 SSE frames)
   through ``POST /bench/chat``, the real ``ChatView`` (session, CSRF,
   ``ConversationStore.prepare``, ``ToolLoop`` over a zero-delay ``ScriptedModel`` that
   replays the workload, the recorded tool results, encoder,
   ``RunRecorder``, broker, ``render_subscription``), against ``POST
   /bench/baseline``, a bare ``StreamingHttpResponse`` yielding the same
   frames (made at start-up by the project's encoder and renderer), one
   frame per yield. Warm-up pairs, then ``--reps`` pairs A B A B; the ratio
   is baseline time / view time per pair (view throughput relative to the
   baseline's), median over pairs; the same for the server's CPU time per
   request (``/proc/<pid>/stat``), which a busy machine disturbs less.
   Both bodies are checked first: the same chunks, byte for byte, but the
   message id. Also shown: the body's writes (chunks of the chunked
   encoding) and when its first byte arrived (a view that streams while the
   run still produces writes more, and earlier).
2. **Database writes** of one standard-workload run: every SQL statement
   of the server process is counted (``execute_wrapper`` on each
   connection); INSERT / UPDATE / DELETE are the writes, split into the
   run's log (chunk inserts, run updates, the final message and
   conversation updates) and the request's set-up (session, conversation,
   messages, run row). Also shown: a paced demo run ("count to 200" at
   ``--delay-ms``), whose recorder flushes by time.
3. **Concurrency.** ``--streams`` concurrent ``POST /api/chat`` "count to
   ``--count``" with the demo model at ``UISTREAM_DEMO_DELAY_MS=--delay-ms``,
   each with its own chat id, one shared anonymous session, started over
   ``--ramp`` seconds. Client side, per stream, the gap between successive
   text-delta arrivals (pooled p50 / p90 / p99 / max) against the pacing;
   server RSS (``/proc/<pid>/status``) before and while all streams are
   open, per stream; server CPU; this client's own event-loop lag (a
   5 ms sleeper), to tell the client's share of a gap from the server's.

``--diagnose`` adds diagnostic arms (``bench_urls.py``) to 1 and 3;
``--lease`` adds to 1 the view without the orphan check a new turn makes
(``ConversationStore.settle_orphans``), for the lease's cost.

``--profile DIR`` attaches ``py-spy record --gil`` (``pip install py-spy``)
to each server and prints where its CPU time went (samples of whichever
thread holds the GIL; leaf and inclusive), raw samples kept in ``DIR``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_common import HOST, cpu_seconds, free_port, lag_monitor, pct, rss_kib

from uistream_app.testing import chat_body, user_message

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
PY = sys.executable
TEXT_DELTA = b'"type":"text-delta"'
WRITES = ("INSERT", "UPDATE", "DELETE")
LOG_TABLES = ("INSERT uistream_app_chunkbatch", "UPDATE uistream_app_run")
PROFILES: list[Path] = []


# -- the server --------------------------------------------------------------------------


#: The ASGI servers ``--server`` picks from: one process each.
SERVERS = {
    "daphne": ["-m", "daphne", "-b", HOST, "-p", "{port}", "demo_project.asgi:application"],
    "uvicorn": [
        "-m",
        "uvicorn",
        "--host",
        HOST,
        "--port",
        "{port}",
        "--no-access-log",
        "--log-level",
        "warning",
        "demo_project.asgi:application",
    ],
}


class Server:
    """One ASGI server process (daphne by default) on a fresh migrated
    SQLite file."""

    def __init__(
        self,
        name: str,
        delay_ms: int,
        sqlite: str = "wal",
        flush_ms: int | None = None,
        profile_dir: Path | None = None,
        kind: str = "daphne",
    ) -> None:
        self.name = name
        self.kind = kind
        self.dir = Path(tempfile.mkdtemp(prefix=f"uistream-http-bench-{name}-"))
        self.port = free_port()
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "bench_settings",
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(BENCH), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
            "UISTREAM_BENCH_DIR": str(self.dir),
            "UISTREAM_DEMO_DELAY_MS": str(delay_ms),
            "UISTREAM_BENCH_SQLITE": sqlite,
            "UISTREAM_BENCH_FLUSH_MS": str(flush_ms or ""),
        }
        self.profile_dir = profile_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.spy: subprocess.Popen[bytes] | None = None
        self.log = self.dir / f"{kind}.log"

    def start(self) -> None:
        subprocess.run([PY, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=self.env, check=True)
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [PY, *(arg.format(port=self.port) for arg in SERVERS[self.kind])],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while True:
            try:
                if request(self.port, "GET", "/bench/ping", timeout=2).status == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.kind} did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.1)
        if self.profile_dir is not None:
            self.profile_dir.mkdir(parents=True, exist_ok=True)
            spy = shutil.which("py-spy", path=str(Path(PY).parent)) or shutil.which("py-spy")
            if spy is None:
                raise RuntimeError("--profile needs py-spy: .venv/bin/pip install py-spy")
            self.spy = subprocess.Popen(
                [
                    spy,
                    "record",
                    "-p",
                    str(self.proc.pid),
                    "-f",
                    "raw",
                    "-r",
                    "200",
                    "--nonblocking",
                    "-o",
                    str(self.profile_path),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(1.0)

    @property
    def profile_path(self) -> Path:
        assert self.profile_dir is not None
        return self.profile_dir / f"{self.name}.txt"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def rss_kib(self) -> int:
        return rss_kib(self.pid)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def threads(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/task"))

    def stop(self) -> None:
        if self.spy is not None:
            self.spy.send_signal(signal.SIGINT)
            try:
                self.spy.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.spy.kill()
            if self.profile_path.exists():
                PROFILES.append(self.profile_path)
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # A server that never started (another's start failed first) has no log.
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        pauses = [float(line.split()[2]) for line in lines if line.startswith("gc gen2:")]
        if pauses:  # UISTREAM_BENCH_GC_DEBUG=1 (bench_settings.py)
            print(
                f"  {self.name}: {len(pauses)} full garbage collections, longest {max(pauses):.1f} ms,"
                f" {sum(pauses):.0f} ms in all"
            )
        errors = [line for line in lines if "Traceback" in line]
        if errors:
            print(f"  ! the {self.name} server logged {len(errors)} tracebacks; see its log (kept in {self.dir})")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


@contextmanager
def server(name: str, args: argparse.Namespace) -> Iterator[Server]:
    srv = Server(
        name, args.delay_ms, args.sqlite, args.flush_ms, Path(args.profile) if args.profile else None, args.server
    )
    try:
        srv.start()
        yield srv
    finally:
        srv.stop()


def print_profile(path: Path, top: int = 25) -> None:
    """py-spy's raw output (``frame;frame;... count``): self and inclusive
    sample shares per function, all threads."""
    leaf: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [
            f.split(" (")[0] + " (" + f.split(" (")[1].split(":")[0] + ")" if " (" in f else f for f in stack.split(";")
        ]
        frames = [f for f in frames if not f.startswith("process ") and not f.startswith("thread ")]
        if frames:
            leaf[frames[-1]] += n
        for f in set(frames):
            inclusive[f] += n
    if not total:
        return
    print(f"\n  py-spy, {path.name}: {total} samples holding the GIL (all threads)")
    print("  self%   function")
    for name, n in leaf.most_common(top):
        print(f"  {100 * n / total:5.1f}   {name}")
    print("  incl%   function")
    for name, n in inclusive.most_common(top + 15):
        print(f"  {100 * n / total:5.1f}   {name}")


# -- a raw HTTP/1.1 client ----------------------------------------------------------------


@dataclass
class Response:
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    writes: int  # chunks of the chunked encoding: one per server write
    seconds: float
    wire_bytes: int
    server_cpu: float = 0.0  # the server's CPU time during the request, when measured
    first_body_byte: float = 0.0  # seconds from the request to the first byte after the head

    def header(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]


def dechunk(data: bytes) -> tuple[bytes, int]:
    out = []
    pos = 0
    n = 0
    while True:
        end = data.index(b"\r\n", pos)
        size = int(data[pos:end].split(b";")[0], 16)
        if size == 0:
            return b"".join(out), n
        out.append(data[end + 2 : end + 2 + size])
        n += 1
        pos = end + 2 + size + 2


def encode_request(method: str, target: str, body: bytes = b"", headers: dict[str, str] | None = None) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", f"Host: {HOST}", "Connection: close", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def parse_head(head: bytes) -> tuple[int, list[tuple[str, str]]]:
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.append((name.strip(), value.strip()))
    return status, headers


def request(
    port: int,
    method: str,
    target: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    timeout: float = 120,
) -> Response:
    """One request on a fresh connection; the whole response is read (to
    EOF) before the clock stops."""
    raw = encode_request(method, target, body, headers)
    parts = []
    first_body_byte = 0.0
    t0 = time.perf_counter()
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.sendall(raw)
        recv = sock.recv
        while True:
            data = recv(1 << 20)
            if not data:
                break
            parts.append(data)
            if not first_body_byte:
                so_far = b"".join(parts)
                end_of_head = so_far.find(b"\r\n\r\n")
                if end_of_head >= 0 and len(so_far) > end_of_head + 4:
                    first_body_byte = time.perf_counter() - t0
    seconds = time.perf_counter() - t0
    data = b"".join(parts)
    head, _, rest = data.partition(b"\r\n\r\n")
    status, response_headers = parse_head(head)
    chunked = any(k.lower() == "transfer-encoding" and "chunked" in v for k, v in response_headers)
    payload, writes = dechunk(rest) if chunked else (rest, 1)
    return Response(status, response_headers, payload, writes, seconds, len(data), first_body_byte=first_body_byte)


class Client:
    """An anonymous visitor: the CSRF token from ``GET /api/csrf`` and the
    cookies the server sets (csrftoken, then sessionid on the first chat)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.cookies: dict[str, str] = {}
        response = self.send("GET", "/api/csrf")
        self.token = json.loads(response.body)["csrfToken"]

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = dict(extra or {})
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        return headers

    def remember(self, response: Response) -> None:
        for cookie in response.header("set-cookie"):
            name, _, value = cookie.split(";")[0].partition("=")
            self.cookies[name] = value

    def send(self, method: str, target: str, body: bytes = b"", headers: dict[str, str] | None = None) -> Response:
        response = request(self.port, method, target, body, self.headers(headers))
        self.remember(response)
        return response

    @staticmethod
    def chat_bytes(text: str, chat_id: str | None = None) -> bytes:
        """useChat's body for ``text`` in a new chat (or ``chat_id``), as bytes."""
        message = user_message(text, id="u-" + uuid.uuid4().hex[:16])
        return json.dumps(chat_body(chat_id or "chat-" + uuid.uuid4().hex[:12], [message])).encode()

    def chat_headers(self) -> dict[str, str]:
        return {"Content-Type": "application/json", "X-CSRFToken": self.token}

    def chat_request(self, target: str, text: str, chat_id: str | None = None) -> bytes:
        return encode_request("POST", target, self.chat_bytes(text, chat_id), self.headers(self.chat_headers()))

    def chat(self, target: str, text: str) -> Response:
        response = self.send("POST", target, self.chat_bytes(text), self.chat_headers())
        if response.status != 200:
            raise RuntimeError(f"POST {target}: {response.status} {response.body[:500]!r}")
        return response

    def queries(self, reset: bool = False) -> dict[str, Any]:
        response = self.send("GET", "/bench/queries" + ("?reset=1" if reset else ""))
        return dict(json.loads(response.body))


def frames_of(body: bytes) -> list[bytes]:
    frames = body.split(b"\n\n")
    assert frames[-1] == b"", "the body does not end with a blank line"
    return [f + b"\n\n" for f in frames[:-1]]


def chunks_of(body: bytes) -> list[Any]:
    out = []
    for frame in frames_of(body):
        assert frame.startswith(b"data: "), frame[:80]
        payload = frame[6:-2]
        out.append(payload.decode() if payload == b"[DONE]" else json.loads(payload))
    if out and isinstance(out[0], dict) and out[0].get("type") == "start":
        out[0] = {**out[0], "messageId": "<id>"}
    return out


# -- formatting -----------------------------------------------------------------------------


def table(rows: list[list[str]], header: list[str]) -> str:
    cells = [header, *rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    right = [i > 0 for i in range(len(header))]

    def line(r: list[str]) -> str:
        return (
            "| "
            + " | ".join(c.rjust(w) if ra else c.ljust(w) for c, w, ra in zip(r, widths, right, strict=True))
            + " |"
        )

    sep = (
        "|"
        + "|".join(("-" * (w + 1) + ":") if ra else ("-" * (w + 2)) for w, ra in zip(widths, right, strict=True))
        + "|"
    )
    return "\n".join([line(header), sep, *(line(r) for r in rows)])


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def fnum(n: float) -> str:
    return f"{n:,.0f}"


# -- 1. throughput -------------------------------------------------------------------------------


ARMS = {
    "view": ("ChatView (SQLite log on)", "/bench/chat"),
    "baseline": ("bare StreamingHttpResponse", "/bench/baseline"),
    "nolog": ("diagnostic: ChatView, no chunk rows", "/bench/chat-nolog"),
    "nolease": ("ChatView without the orphan check", "/bench/chat-nolease"),
}


def bench_throughput(args: argparse.Namespace) -> None:
    print("\n## 1. The standard workload through the whole view vs a bare StreamingHttpResponse\n")
    arms = ["view", "baseline", *(["nolog"] if args.diagnose else []), *(["nolease"] if args.lease else [])]
    with server("throughput", args) as srv:
        client = Client(srv.port)

        def one(kind: str) -> Response:
            target = ARMS[kind][1]
            cpu = srv.cpu_seconds()
            if kind == "baseline":
                response = client.send("POST", target, b"{}", {"Content-Type": "application/json"})
            else:
                response = client.chat(target, "Run the workload.")
            response.server_cpu = srv.cpu_seconds() - cpu
            return response

        bodies = {kind: one(kind).body for kind in arms}
        reference = chunks_of(bodies["baseline"])
        for kind in arms:
            got = chunks_of(bodies[kind])
            if got != reference:
                at = next((i for i, (x, y) in enumerate(zip(got, reference, strict=False)) if x != y), "the end")
                raise AssertionError(f"{kind} differs from the baseline at frame {at}")
        frames = len(reference)
        sizes = " / ".join(f"{len(bodies[k]):,}" for k in arms)
        print(f"checked: {' / '.join(arms)} bodies are {frames:,} frames, {sizes} bytes, the same chunks")
        for _ in range(args.warmup):
            for kind in arms:
                one(kind)
        samples: dict[str, list[Response]] = {kind: [] for kind in arms}
        cpu0, t0 = srv.cpu_seconds(), time.perf_counter()
        for _ in range(args.reps):
            for kind in arms:
                samples[kind].append(one(kind))
        cpu = (srv.cpu_seconds() - cpu0) / (time.perf_counter() - t0)
    print(f"{args.reps} interleaved rounds ({' '.join(arms)}) after {args.warmup} warm-up rounds; ", end="")
    print(f"server CPU {cpu:.2f} cores\n")
    rows = []
    for kind in arms:
        times = sorted(r.seconds for r in samples[kind])
        med = statistics.median(times)
        paired = sorted(b.seconds / a.seconds for a, b in zip(samples[kind], samples["baseline"], strict=True))
        cpu_paired = sorted(
            b.server_cpu / a.server_cpu for a, b in zip(samples[kind], samples["baseline"], strict=True)
        )
        rows.append(
            [
                ARMS[kind][0],
                ms(med),
                f"{ms(times[0])} – {ms(times[-1])}",
                fnum(frames / med),
                f"{len(samples[kind][0].body) / med / 1e6:.1f}",
                fnum(statistics.median(r.writes for r in samples[kind])),
                ms(statistics.median(r.first_body_byte for r in samples[kind])),
                f"{statistics.median(paired):.2f}x ({paired[0]:.2f}–{paired[-1]:.2f})",
                ms(statistics.median(r.server_cpu for r in samples[kind])),
                f"{statistics.median(cpu_paired):.2f}x",
            ]
        )
    header = ["", "median", "min – max", "frames/s", "MB/s", "body writes", "first body byte", "throughput / baseline"]
    print(table(rows, [*header, "server CPU", "CPU: baseline / this"]))
    ratios = sorted(b.seconds / a.seconds for a, b in zip(samples["view"], samples["baseline"], strict=True))
    print(
        f"\nview / baseline throughput, median of {len(ratios)} paired runs: **{statistics.median(ratios):.2f}x**"
        f" (range {ratios[0]:.2f}x – {ratios[-1]:.2f}x; target >= 0.7x)"
    )


# -- 2. database writes ------------------------------------------------------------------------------


def count_writes(counts: dict[str, int]) -> tuple[int, int, int]:
    log = sum(n for k, n in counts.items() if k in LOG_TABLES)
    writes = sum(n for k, n in counts.items() if k.split()[0] in WRITES)
    return writes, log, counts.get("BEGIN", 0)


def bench_writes(args: argparse.Namespace) -> None:
    print("\n## 2. Database writes of one run\n")
    rows = []
    details = []
    with server("writes", args) as srv:
        client = Client(srv.port)
        client.chat("/bench/chat", "Run the workload.")  # the session exists from here on
        runs = [("standard workload", "/bench/chat", "Run the workload.")] * args.write_runs
        runs.append((f"demo, count to {args.count} at {args.delay_ms} ms", "/api/chat", f"count to {args.count}"))
        for label, target, text in runs:
            client.queries(reset=True)
            response = client.chat(target, text)
            info = client.queries()
            counts = info["counts"]
            writes, log, transactions = count_writes(counts)
            chunks = info["last_run"]["chunk_count"]
            budget = chunks / 50
            rows.append(
                [
                    label,
                    fnum(chunks),
                    ms(response.seconds),
                    str(writes),
                    str(log),
                    str(writes - log),
                    str(transactions),
                    f"{chunks / writes:.0f}",
                    f"{writes / chunks:.4f}",
                    f"{budget:.0f} + c",
                ]
            )
            details.append((label, counts))
    print(
        table(
            rows,
            [
                "run",
                "chunks",
                "time",
                "writes",
                "log",
                "set-up",
                "transactions",
                "chunks/write",
                "writes/chunk",
                "target",
            ],
        )
    )
    print("\nwrites: INSERT/UPDATE/DELETE statements of the server process during the request (counted per statement)")
    print(
        "log: chunk-log INSERTs + run UPDATEs (RunRecorder flushes); set-up: session, conversation, messages, run row,"
    )
    print("final message/conversation update; transactions: BEGINs. Statements of the last run:")
    label, counts = details[-2] if len(details) > 1 else details[-1]
    for k, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"    {n:5d}  {k}")


# -- 3. concurrency --------------------------------------------------------------------------------


@dataclass
class StreamResult:
    status: int = 0
    deltas: list[float] = field(default_factory=list)
    done: bool = False
    started: float = 0.0
    first_byte: float = 0.0
    error: str = ""


async def one_stream(
    port: int, raw: bytes, result: StreamResult, opened: asyncio.Event, tally: list[int], ended: asyncio.Event
) -> None:
    result.started = time.perf_counter()
    try:
        reader, writer = await asyncio.open_connection(HOST, port)
    except OSError as exc:
        result.error = repr(exc)
        tally[1] -= 1
        if tally[0] >= tally[1]:
            opened.set()
        return
    try:
        writer.write(raw)
        buf = b""
        first = True
        deltas = result.deltas
        while True:
            data = await reader.read(1 << 16)
            if not data:
                break
            now = time.perf_counter()
            if first:
                result.status = int(data.split(b" ", 2)[1])
                result.first_byte = now
                first = False
            buf += data
            *frames, buf = buf.split(b"\n\n")
            for frame in frames:
                if TEXT_DELTA in frame:
                    if not deltas:
                        tally[0] += 1
                        if tally[0] == tally[1]:
                            opened.set()
                    deltas.append(now)
                elif b"data: [DONE]" in frame:
                    result.done = True
    except OSError as exc:
        result.error = repr(exc)
    finally:
        writer.close()
        if result.done:
            ended.set()
        if not result.deltas:  # failed: it will not open, don't wait for it
            tally[1] -= 1
            if tally[0] >= tally[1]:
                opened.set()


async def rss_sampler(srv: Server, stop: asyncio.Event, samples: list[int]) -> None:
    while not stop.is_set():
        samples.append(srv.rss_kib())
        await asyncio.sleep(0.05)


async def run_streams(
    srv: Server, client: Client, target: str, n: int, count: int, ramp: float
) -> tuple[list[StreamResult], dict[str, Any]]:
    requests = [
        client.chat_request(target, f"count to {count}", chat_id=f"s{i}-{uuid.uuid4().hex[:8]}") for i in range(n)
    ]
    results = [StreamResult() for _ in range(n)]
    opened = asyncio.Event()
    ended = asyncio.Event()
    tally = [0, n]
    stop = asyncio.Event()
    lags: list[float] = []
    rss: list[int] = []
    monitors = [asyncio.create_task(lag_monitor(stop, lags)), asyncio.create_task(rss_sampler(srv, stop, rss))]
    cpu0, threads0, t0, own0 = srv.cpu_seconds(), srv.threads(), time.perf_counter(), time.process_time()
    tasks = []
    for i, (raw, result) in enumerate(zip(requests, results, strict=True)):
        tasks.append(asyncio.create_task(one_stream(srv.port, raw, result, opened, tally, ended)))
        if ramp and i < n - 1:
            await asyncio.sleep(ramp / n)
    info: dict[str, Any] = {}
    try:
        await asyncio.wait_for(opened.wait(), timeout=60)
        info["rss_open"] = srv.rss_kib()
        info["threads_open"] = srv.threads()
        info["open_at"] = time.perf_counter() - t0
        cpu_open, deltas_open = srv.cpu_seconds(), sum(len(r.deltas) for r in results)
        # Steady state: from all streams open to the first one ending.
        await asyncio.wait_for(ended.wait(), timeout=300)
        cpu_end, deltas_end = srv.cpu_seconds(), sum(len(r.deltas) for r in results)
        if deltas_end > deltas_open:
            info["steady_us"] = (cpu_end - cpu_open) / (deltas_end - deltas_open) * 1e6
            info["steady_rate"] = (deltas_end - deltas_open) / (time.perf_counter() - t0 - info["open_at"])
    except TimeoutError:
        info["rss_open"] = None
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=300)
    info["wall"] = time.perf_counter() - t0
    info["cpu_seconds"] = srv.cpu_seconds() - cpu0
    info["cpu"] = info["cpu_seconds"] / info["wall"]
    info["client_cpu"] = (time.process_time() - own0) / info["wall"]
    info["threads_before"] = threads0
    stop.set()
    await asyncio.gather(*monitors)
    info["rss_peak"] = max(rss)
    info["lags"] = sorted(lags)
    return results, info


def bench_concurrency(args: argparse.Namespace, target: str = "/api/chat", what: str = "") -> None:
    n, count, delay = args.streams, args.count, args.delay_ms
    print(f"\n## 3. {n} concurrent streams, demo model 'count to {count}' at {delay} ms{what}\n")
    with server("concurrency", args) as srv:
        client = Client(srv.port)
        client.chat(target, "count to 5")  # session + first-use imports
        asyncio.run(run_streams(srv, client, target, 10, 20, 0))  # warm-up
        time.sleep(1.0)
        client.queries(reset=True)
        rss_before = srv.rss_kib()
        results, info = asyncio.run(run_streams(srv, client, target, n, count, args.ramp))
        time.sleep(0.5)
        queries = client.queries()
    failed = [r for r in results if r.status != 200 or not r.done or len(r.deltas) != count or r.error]
    pacing = delay / 1000
    ttfb = sorted(r.first_byte - r.started for r in results if r.first_byte)
    ttfd = sorted(r.deltas[0] - r.started for r in results if r.deltas)
    gaps = sorted(b - a for r in results for a, b in zip(r.deltas, r.deltas[1:], strict=False))
    per_stream_p99 = sorted(
        pct(sorted(b - a for a, b in zip(r.deltas, r.deltas[1:], strict=False)), 99) for r in results if r.deltas
    )
    durations = sorted(r.deltas[-1] - r.deltas[0] for r in results if len(r.deltas) > 1)
    print(
        f"{n - len(failed)}/{n} streams complete ({count} text deltas + [DONE] each); all open "
        f"{info.get('open_at', float('nan')):.2f} s after the first request, all done after {info['wall']:.2f} s; "
        f"server CPU {info['cpu']:.2f} cores, this client {info['client_cpu']:.2f} (of {os.cpu_count()}); "
        f"server CPU per text delta {info['cpu_seconds'] / max(1, sum(len(r.deltas) for r in results)) * 1e6:.0f} µs "
        f"(set-up and reasoning included)"
    )
    if "steady_us" in info:
        print(
            f"steady state (all open until the first ends): {info['steady_rate']:,.0f} text deltas/s "
            f"(paced demand {n / pacing:,.0f}/s), server CPU {info['steady_us']:.0f} µs per text delta"
        )
    if failed:
        sample = failed[0]
        print(
            f"  ! {len(failed)} failed, e.g. status {sample.status}, [DONE] {sample.done}, "
            f"{len(sample.deltas)} deltas {sample.error}"
        )
    rows = [
        [
            "gap between text deltas",
            ms(pct(gaps, 50)),
            ms(pct(gaps, 90)),
            ms(pct(gaps, 99)),
            ms(gaps[-1]),
            f"{pct(gaps, 99) / pacing:.2f}x",
        ],
        [
            "per-stream p99 (over streams)",
            ms(pct(per_stream_p99, 50)),
            ms(pct(per_stream_p99, 90)),
            ms(pct(per_stream_p99, 99)),
            ms(per_stream_p99[-1]),
            "",
        ],
        ["request → response headers", ms(pct(ttfb, 50)), ms(pct(ttfb, 90)), ms(pct(ttfb, 99)), ms(ttfb[-1]), ""],
        ["request → first text delta", ms(pct(ttfd, 50)), ms(pct(ttfd, 90)), ms(pct(ttfd, 99)), ms(ttfd[-1]), ""],
        [
            "client loop lag (5 ms sleeper)",
            ms(pct(info["lags"], 50)),
            ms(pct(info["lags"], 90)),
            ms(pct(info["lags"], 99)),
            ms(info["lags"][-1]),
            "",
        ],
    ]
    print(f"\n{len(gaps):,} gaps, pacing {delay} ms (target p99 <= {2 * delay} ms)\n")
    print(table(rows, ["", "p50", "p90", "p99", "max", "p99 / pacing"]))
    mean_gap = statistics.median(durations) / (count - 1)
    print(
        f"\nstream duration first→last text delta: median {statistics.median(durations):.2f} s "
        f"(ideal {(count - 1) * pacing:.2f} s; mean gap {ms(mean_gap)})"
    )
    rss_open, rss_peak = info["rss_open"], info["rss_peak"]
    rows = [
        ["before (after warm-up)", f"{rss_before / 1024:.1f} MiB", ""],
        [
            f"all {n} streams open",
            f"{rss_open / 1024:.1f} MiB" if rss_open else "n/a",
            f"{(rss_open - rss_before) / n:.0f} KiB" if rss_open else "n/a",
        ],
        ["peak while streaming", f"{rss_peak / 1024:.1f} MiB", f"{(rss_peak - rss_before) / n:.0f} KiB"],
    ]
    print()
    print(table(rows, ["server RSS", "VmRSS", "per stream"]))
    print(f"\nserver threads: {info['threads_before']} before, {info.get('threads_open', '?')} with all streams open")
    counts = queries["counts"]
    writes, log, transactions = count_writes(counts)
    chunks_total = sum(len(r.deltas) for r in results)
    print(
        f"database during the {n} streams: {writes:,} writes ({log:,} log), {transactions:,} transactions; "
        f"about {chunks_total:,} text-delta chunks; runs stored: {queries.get('runs')}"
    )


# -- main ------------------------------------------------------------------------------------------


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["1", "2", "3"], action="append", help="run only these (repeatable)")
    parser.add_argument("--reps", type=int, default=10, help="measured pairs in 1 (default 10)")
    parser.add_argument("--warmup", type=int, default=2, help="warm-up pairs in 1 (default 2)")
    parser.add_argument("--write-runs", type=int, default=2, help="standard runs counted in 2 (default 2)")
    parser.add_argument("--streams", type=int, default=200, help="concurrent streams in 3 (default 200)")
    parser.add_argument("--count", type=int, default=200, help="text deltas per stream in 3 (default 200)")
    parser.add_argument("--delay-ms", type=int, default=20, help="the demo model's pacing (default 20)")
    parser.add_argument("--ramp", type=float, default=1.0, help="seconds over which 3 opens its streams (default 1)")
    parser.add_argument(
        "--sqlite",
        choices=["wal", "default"],
        default="wal",
        help="SQLite configuration (bench_settings.py): wal (default) or the demo's default",
    )
    parser.add_argument("--flush-ms", type=int, help="UISTREAM['FLUSH_EVERY_MS'] of the server (default: the app's)")
    parser.add_argument(
        "--server", choices=sorted(SERVERS), default="daphne", help="the ASGI server, one process (default daphne)"
    )
    parser.add_argument(
        "--diagnose",
        action="store_true",
        help="1: add the view storing no chunk rows; 3: rerun with a recorder making no DB call",
    )
    parser.add_argument("--profile", metavar="DIR", help="py-spy each server, print where the time went")
    parser.add_argument("--lease", action="store_true", help="1: add the view without the new turn's orphan check")
    args = parser.parse_args()
    which = set(args.only or ["1", "2", "3"])
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; {args.server}, one process; "
        f"SQLite file database ({args.sqlite} configuration)"
        + (f"; FLUSH_EVERY_MS={args.flush_ms}" if args.flush_ms else "")
        + f"; {load()}"
    )
    if "1" in which:
        bench_throughput(args)
    if "2" in which:
        bench_writes(args)
    if "3" in which:
        bench_concurrency(args)
        if args.diagnose:
            bench_concurrency(args, "/bench/demo-nodb", " (diagnostic: the recorder makes no database call)")
    print(f"\n({load()} at the end)")
    for path in PROFILES:
        print_profile(path)


if __name__ == "__main__":
    main()
