"""A seeded fault soak (issue 30): runs on every transport while processes,
Redis and connections fail at random, then the invariants of a run checked
on what was stored and what every client received.

    .venv/bin/python bench/chaos.py [--seed N] [--rounds 10] [--runs 100] [--faults 20] [--cut-rate 0.1]
        [--mode interrupt|continue] [--lease 3] [--heartbeat 1] [--delay-ms 15] [--clients 8]
        [--kinds web-sigkill,worker-sigstop,...] [--database-url postgres://postgres@127.0.0.1:5432/uistream_chaos]
        [--keep]

The stack, all on 127.0.0.1 (``ChaosStack``): a ``redis-server`` of the
soak's own on a free port (its append-only file on, fsynced before each
reply, in the work directory: a Redis killed and started again has every
chunk it acknowledged, as docs/operations.md's Redis broker rules ask), a
PostgreSQL database (made if missing, migrated), daphne and uvicorn serving
``demo_project.asgi`` with ``bench/chaos_settings.py`` (the Redis broker,
``LEASE_SECONDS`` / ``HEARTBEAT_SECONDS`` as given, ``ON_OWNER_LOST`` under
``--mode continue``) and a Celery worker (``bench/chaos_project.py``'s
``/api/celery/chat`` hands its runs to it). The demo's scripted model
answers, ``--delay-ms`` between deltas.

Each round, ``--clients`` visitors at a time (each a session of its own,
one chat each) run scenarios until at least ``--runs`` runs were asked for
and every fault of the round was injected:

* useChat over HTTP, in the web process (``POST /api/chat``) or on the
  worker (``/api/celery/chat``); a broken stream resumes by chat id
  (``GET /api/chat/<id>/stream``) on whichever server is up;
* ``WorkflowChatTransport``'s way: reconnects by run id and
  ``startIndex`` until a terminal chunk or 410;
* the WebSocket (``/ws/chat/``): ``send``, then ``resume`` with
  ``lastSequence`` on a new socket after a break;
* AG-UI (``POST /api/agui``): read to ``RUN_FINISHED`` / ``RUN_ERROR``;
* an approval: the email that needs a person, approved from the stored
  message (``GET /api/conversations/<id>/messages/``), continued;

with short prompts (count to 12, the weather, a sum, an email the policy
approves). With probability ``--cut-rate`` a client cuts its connection
after a random number of bytes (mid-frame; a WebSocket: its TCP connection
aborted after a random number of frames) and reconnects as above.

Meanwhile ``--faults`` process faults are injected at random times, a kind
at a time in a seeded order (``--kinds`` picks some kinds only): SIGKILL, SIGTERM, or SIGSTOP for longer than
the lease (then SIGCONT) of a web server or the worker, and Redis killed
and started again. A killed process is started again on its port.

After each round, once everything settled (no run ``running``: polled
every 0.2 s, for at most ``3 * lease + 30`` s), the checks; each
violation names its seed and round, which replays the same schedule
(the faults' kinds, targets and times, the scenarios and the cuts; the
interleaving with the processes is the machine's):

* no run left ``running``;
* each run's log has contiguous sequence numbers from 0 and exactly one
  terminal chunk (``finish``, ``error``, ``abort``), its last (a status
  that disagrees with it, ``completed`` with ``error`` or ``abort``,
  ``failed`` with ``finish``, is printed as a note);
* the real ai@7 reader accepts each run's log, and builds from the last
  run of each message (continuing the message the client held, for an
  approval's continuation) the stored message (``tests/js/build_messages.mjs``,
  one node process per round);
* every chunk any client received is in its run's log at its sequence
  number (a trailing ``error`` a relay made when its stream broke is
  counted apart, not a violation); an AG-UI client's text and tool calls
  are the log's;
* every run a client was streamed (its ``start`` chunk's message, AG-UI's
  ``runId``) is of the client's own chat and session;
* no tool not marked idempotent ran twice for one call (the call files
  of ``chaos_project``);
* ``--mode continue``: every run whose process was killed or paused past
  its lease while it ran (SIGTERM's shutdown ends its runs itself)
  completed, with the answer the same prompt gets without faults (a
  baseline round, round 0, first), unless a call cut short was answered
  with the "interrupted" tool error.

Printed: runs, faults by kind, violations (with the seed and round), runs by
how they ended (completed, continued: completed after losing their process,
interrupted, failed…), the ``reset-step`` chunks logged, and from a SIGKILL
of a run's process to the first chunk past what its clients had
("continuing"; under ``interrupt`` the ``error`` a sweeper ends it with)
and to the terminal chunk of the run's last stream: p50 / p99. Exit status
1 when there is a violation.

Everything it starts it stops (also on Ctrl-C or a failure); every loop is
bounded. ``--keep`` keeps the work directory (the processes' logs, the
tool-call marks, ``faults.log``: each fault's time, kind and process) and
prints where it is.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import math
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
from websockets.asyncio.client import connect
from websockets.exceptions import WebSocketException
from websockets.typing import Origin

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
JS_DIR = ROOT / "tests" / "js"
PY = sys.executable
HOST = "127.0.0.1"

#: Process faults, injected by ``ChaosRound``; "client-cut" is the clients' own.
PROCESS_FAULTS = (
    "web-sigkill",
    "web-sigterm",
    "web-sigstop",
    "worker-sigkill",
    "worker-sigterm",
    "worker-sigstop",
    "redis-kill",
)
FAULT_KINDS = (*PROCESS_FAULTS, "client-cut")
TERMINAL = frozenset(("finish", "error", "abort"))
#: The faults after which a run's owner is lost (SIGTERM's shutdown ends its
#: runs itself: docs/operations.md, "Shutdown").
LOST = ("sigkill", "sigstop")
#: How a run ends when Redis went away under it (docs/operations.md, "When Redis goes away").
BROKER_FAILURES = frozenset(("BrokerUnavailable", "RunLost"))
AGUI_TERMINAL = frozenset(("RUN_FINISHED", "RUN_ERROR"))
TRANSPORTS = ("http", "celery", "workflow", "ws", "agui", "approval")
#: The prompts of the scenarios (short answers of the demo model).
PROMPTS = ("count to 12", "weather in Paris", "compute 12 * (3 + 4)", "email ada@trusted.test saying hi")
APPROVAL_PROMPT = "email ada@example.com saying hi"
#: Tools whose calls may run twice (those ``chaos_project`` marks idempotent).
MAY_REPEAT = frozenset(("get_weather",))
MAX_RECONNECTS = 12
CSRF = secrets.token_hex(16)  # 32 characters: an unmasked CSRF secret, for cookie and header alike


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


# -- the processes ------------------------------------------------------------------------


class Process:
    """One process of the stack, in a session of its own (a signal reaches a
    worker's pool processes too), its output appended to ``log``; started
    again on the same port after a fault."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log: Path, ready: Any) -> None:
        self.name = name
        self.args = args
        self.env = env
        self.log = log
        self.ready = ready
        self.proc: subprocess.Popen[bytes] | None = None
        #: Which start this is (0 the first): a fault names the incarnation it hit.
        self.incarnation = -1
        self.up = False

    def start(self, timeout: float = 90) -> None:
        self.incarnation += 1
        offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.args, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while not self.ready(self, offset):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start:\n{self.output()[-3000:]}")
            time.sleep(0.05)
        self.up = True

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def signal(self, signum: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signum)

    def wait_exit(self, timeout: float) -> None:
        """Wait for the process to end; SIGKILL it past ``timeout``."""
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
        # A worker's pool processes may outlive their parent for a moment.
        self.signal(signal.SIGKILL)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.up = False


def listening(port: int) -> Any:
    def ready(process: Process, offset: int) -> bool:
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return True
        except OSError:
            return False

    return ready


def worker_ready(process: Process, offset: int) -> bool:
    with process.log.open("rb") as log:
        log.seek(offset)
        return b" ready." in log.read()


class ChaosStack:
    """Redis, daphne, uvicorn and a Celery worker sharing one database."""

    def __init__(self, options: Options, workdir: Path) -> None:
        self.options = options
        self.workdir = workdir
        self.redis_port = free_port()
        self.redis_url = f"redis://{HOST}:{self.redis_port}/0"
        uistream: dict[str, Any] = {
            "LEASE_SECONDS": options.lease,
            "HEARTBEAT_SECONDS": options.heartbeat,
            # ACTIVE_TTL stays the default (60 s): a dead process's stream must
            # outlive the sweep that completes the log from it.
            "BROKER": {"BACKEND": "redis", "URL": self.redis_url, "PREFIX": "chaos"},
        }
        if options.mode == "continue":
            uistream["ON_OWNER_LOST"] = "continue"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "chaos_settings",
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(BENCH), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
            "DJANGO_DEBUG": "0",
            "DJANGO_SECRET_KEY": "uistream-chaos-" + uuid.uuid4().hex,
            "UISTREAM_CHAOS_DATABASE_URL": options.database_url,
            "UISTREAM_CHAOS_REDIS_URL": self.redis_url,
            "UISTREAM_CHAOS_DIR": str(workdir),
            "UISTREAM_CHAOS_SETTINGS": json.dumps(uistream),
            "UISTREAM_DEMO_EXECUTOR": "celery",  # loads the demo's Celery app (demo_project/__init__.py)
            "UISTREAM_DEMO_DELAY_MS": str(options.delay_ms),
            "UISTREAM_DEMO_ON_OWNER_LOST": options.mode,
            "UISTREAM_GC_FREEZE": "0",
        }
        for name in ("DATABASE_URL", "REDIS_URL"):
            self.env.pop(name, None)
        redis_binary = os.environ.get("UISTREAM_REDIS_SERVER") or shutil.which("redis-server")
        if redis_binary is None:
            raise RuntimeError("redis-server is needed (the soak kills and restarts a Redis of its own)")
        self.redis = Process(
            "redis",
            [
                *(redis_binary, "--port", str(self.redis_port), "--bind", HOST, "--dir", str(workdir)),
                # What the broker's rules ask of a Redis that may die with a
                # run's process (docs/operations.md, "Redis broker rules"):
                # its append-only file, written before each reply.
                *("--save", "", "--appendonly", "yes", "--appendfsync", "always"),
            ],
            self.env,
            workdir / "redis.log",
            listening(self.redis_port),
        )
        self.web: dict[str, Process] = {}
        self.ports: dict[str, int] = {}
        for kind in ("daphne", "uvicorn"):
            port = free_port()
            self.ports[kind] = port
            args = (
                ["-m", "daphne", "-v", "0", "-b", HOST, "-p", str(port), "demo_project.asgi:application"]
                if kind == "daphne"
                else [
                    *("-m", "uvicorn", "--host", HOST, "--port", str(port), "--no-access-log"),
                    *("--log-level", "warning", "demo_project.asgi:application"),
                ]
            )
            self.web[kind] = Process(kind, [PY, *args], self.env, workdir / f"{kind}.log", listening(port))
        self.worker = Process(
            "worker",
            [
                *(PY, "-m", "celery", "-A", "demo_project", "worker", "--loglevel=info", "-c", "2"),
                *(
                    "--without-gossip",
                    "--without-mingle",
                    "--without-heartbeat",
                    "-n",
                    f"chaos-{uuid.uuid4().hex[:6]}@%h",
                ),
            ],
            self.env,
            workdir / "worker.log",
            worker_ready,
        )

    def processes(self) -> list[Process]:
        return [self.redis, *self.web.values(), self.worker]

    def prepare_database(self) -> None:
        parts = urlsplit(self.options.database_url)
        name = parts.path.lstrip("/")
        admin = urlunsplit(parts._replace(path="/postgres"))
        with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
                conn.execute(f'CREATE DATABASE "{name}"')
        subprocess.run(
            [PY, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=ROOT,
            env=self.env,
            check=True,
            stdout=subprocess.DEVNULL,
        )

    def start(self) -> None:
        self.prepare_database()
        for process in self.processes():
            process.start()

    def close(self) -> None:
        for process in self.processes():
            with contextlib.suppress(Exception):
                process.stop()

    def sessions(self, count: int) -> list[str]:
        """``count`` new visitors' session keys, made in the database."""
        code = (
            "from importlib import import_module\n"
            "from django.conf import settings\n"
            "Store = import_module(settings.SESSION_ENGINE).SessionStore\n"
            f"for _ in range({count}):\n"
            "    s = Store(); s.create(); print('session', s.session_key)\n"
        )
        out = subprocess.run(
            [PY, "manage.py", "shell", "-c", code], cwd=ROOT, env=self.env, check=True, capture_output=True, text=True
        )
        keys = [line.split()[1] for line in out.stdout.splitlines() if line.startswith("session ")]
        if len(keys) != count:
            raise RuntimeError(f"made {len(keys)} sessions of {count}: {out.stderr[-2000:]}")
        return keys

    def up_servers(self) -> list[str]:
        return [kind for kind, process in self.web.items() if process.up]

    def base(self, kind: str) -> str:
        return f"http://{HOST}:{self.ports[kind]}"


# -- what the clients saw -----------------------------------------------------------------


@dataclass
class Stream:
    """One response or socket a client read: the chunks it got, in order,
    with their sequence numbers and when each arrived."""

    kind: str  # "post", "resume", "index", "ws", "ws-resume", "agui"
    server: str
    seqs: list[int] = field(default_factory=list)
    chunks: list[dict[str, Any]] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    ended: str = ""  # "end" (a terminal chunk), "cut", "broken", "no-active", "refused:<status>", "gone"


@dataclass
class RunSeen:
    """One run as its client knows it."""

    visitor: str
    chat: str
    transport: str
    prompt: str
    trigger: str
    home: tuple[str, int] | None  # the process executing it (name, incarnation), as far as the client knows
    run_id: str | None = None
    posted_at: float = 0.0
    streams: list[Stream] = field(default_factory=list)
    #: A continuation: the assistant message the client held before it (approval applied).
    continued: dict[str, Any] | None = None
    cut: bool = False


class Visitor:
    """One client: a session, a chat, an HTTP client; runs its scenario."""

    def __init__(self, soak: ChaosRound, session_key: str, chat: str, rng: random.Random) -> None:
        self.soak = soak
        self.stack = soak.stack
        self.session_key = session_key
        self.chat = chat
        self.rng = rng
        self.cookie = f"sessionid={session_key}; csrftoken={CSRF}"
        self.turns = 0

    # -- helpers

    def pick(self) -> str:
        """A web server that is up (the other one when both are down: it will be back)."""
        up = self.stack.up_servers()
        return self.rng.choice(up or list(self.stack.web))

    def headers(self, **more: str) -> dict[str, str]:
        return {"Cookie": self.cookie, "X-CSRFToken": CSRF, **more}

    def user_message(self, text: str) -> dict[str, Any]:
        self.turns += 1
        return {"id": f"{self.chat}-u{self.turns}", "role": "user", "parts": [{"type": "text", "text": text}]}

    def cut_after(self) -> int | None:
        if self.rng.random() < self.soak.cut_rate:
            self.soak.note_fault("client-cut")
            return self.rng.randint(40, 1500)
        return None

    async def pause(self, attempt: int) -> None:
        await asyncio.sleep(min(0.2 * (attempt + 1), 2.0))

    # -- scenarios

    async def run(self, transport: str, prompt: str, client: httpx.AsyncClient) -> None:
        if transport in ("http", "celery"):
            await self.usechat(client, transport, prompt)
        elif transport == "workflow":
            await self.usechat(client, "http", prompt, by_index=True)
        elif transport == "ws":
            await self.websocket(prompt)
        elif transport == "agui":
            await self.agui(client, prompt)
        else:
            await self.approval(client)

    async def usechat(
        self,
        client: httpx.AsyncClient,
        transport: str,
        prompt: str,
        *,
        by_index: bool = False,
        message: dict[str, Any] | None = None,
        history: list[dict[str, Any]] | None = None,
        continued: dict[str, Any] | None = None,
    ) -> RunSeen:
        path = "/api/celery/chat" if transport == "celery" else "/api/chat"
        if message is None:
            message = self.user_message(prompt)
        body: dict[str, Any] = {"id": self.chat, "trigger": "submit-message", "messages": [*(history or []), message]}
        if continued is not None:
            body["messageId"] = continued["id"]
        seen = RunSeen(
            self.session_key,
            self.chat,
            "workflow" if by_index else transport,
            prompt,
            "continue" if continued is not None else "submit-message",
            None,
            continued=continued,
        )
        self.soak.seen.append(seen)
        for attempt in range(6):
            server = self.pick()
            stream = Stream("post", server)
            seen.posted_at = time.monotonic()
            home = ("worker", self.stack.worker.incarnation) if transport == "celery" else None
            try:
                async with client.stream(
                    "POST", self.stack.base(server) + path, json=body, headers=self.headers()
                ) as response:
                    if response.status_code != 200:
                        await response.aread()
                        stream.ended = f"refused:{response.status_code}"
                        seen.streams.append(stream)
                        if response.status_code in (409, 500, 502, 503):
                            await self.pause(attempt)
                            continue
                        return seen
                    seen.run_id = response.headers.get("x-workflow-run-id")
                    seen.home = home or (server, self.stack.web[server].incarnation)
                    seen.streams.append(stream)
                    cut = self.cut_after()
                    seen.cut = seen.cut or cut is not None
                    await read_sse(response, stream, cut)
            except httpx.ConnectError:
                await self.pause(attempt)  # nothing was sent: another try, maybe on the other server
                continue
            except httpx.HTTPError:
                if not stream.chunks and seen.run_id is None:
                    # Nothing came back: whether a run started is the database's to say.
                    stream.ended = "gone"
                    seen.streams.append(stream)
                    return seen
                stream.ended = stream.ended or "broken"
            break
        else:
            return seen
        await self.follow(client, seen, by_index)
        return seen

    async def follow(self, client: httpx.AsyncClient, seen: RunSeen, by_index: bool) -> None:
        """Reconnect until the run's terminal chunk (or nothing is left to read)."""
        for attempt in range(MAX_RECONNECTS):
            last = seen.streams[-1]
            if last.ended == "end" or last.ended in ("no-active", "gone") or last.ended.startswith("refused"):
                return
            received = sum(len(s.chunks) for s in seen.streams if s.kind in ("post", "index"))
            server = self.pick()
            if by_index and seen.run_id is not None:
                stream = Stream("index", server)
                url = f"{self.stack.base(server)}/api/chat/{seen.run_id}/stream?startIndex={received}"
                first = received
            else:
                stream = Stream("resume", server)
                url = f"{self.stack.base(server)}/api/chat/{self.chat}/stream"
                first = 0
            seen.streams.append(stream)
            try:
                async with client.stream("GET", url, headers=self.headers()) as response:
                    if response.status_code == 204:
                        stream.ended = "no-active"
                        return
                    if response.status_code != 200:
                        await response.aread()
                        stream.ended = f"refused:{response.status_code}"
                        if response.status_code == 410:
                            return
                        stream.ended = "broken"
                        await self.pause(attempt)
                        continue
                    await read_sse(response, stream, self.cut_after(), first_seq=first)
            except httpx.HTTPError:
                stream.ended = stream.ended or "broken"
                await self.pause(attempt)

    async def approval(self, client: httpx.AsyncClient) -> None:
        transport = self.rng.choice(("http", "celery"))
        first = await self.usechat(client, transport, APPROVAL_PROMPT)
        first.transport = f"approval/{transport}"
        if not first.streams or first.streams[-1].ended != "end":
            return
        try:
            listing = await client.get(
                f"{self.stack.base(self.pick())}/api/conversations/{self.chat}/messages/", headers=self.headers()
            )
        except httpx.HTTPError:
            return
        if listing.status_code != 200:
            return
        messages = listing.json()["results"]
        answer = messages[-1] if messages and messages[-1]["role"] == "assistant" else None
        part = next(
            (p for p in (answer or {}).get("parts", []) if p.get("state") == "approval-requested"),
            None,
        )
        if answer is None or part is None:
            return
        part["state"] = "approval-responded"
        part["approval"] = {"id": part["approval"]["id"], "approved": True}
        transport = self.rng.choice(("http", "celery"))
        second = await self.usechat(
            client,
            transport,
            APPROVAL_PROMPT,
            message=answer,
            history=messages[:-1],
            continued=json.loads(json.dumps(answer)),
        )
        second.transport = f"approval/{transport}"

    async def websocket(self, prompt: str) -> None:
        message = self.user_message(prompt)
        seen = RunSeen(self.session_key, self.chat, "ws", prompt, "submit-message", None)
        self.soak.seen.append(seen)
        frame: dict[str, Any] = {
            "type": "send",
            "requestId": uuid.uuid4().hex,
            "id": self.chat,
            "trigger": "submit-message",
            "messages": [message],
            "headers": {},
            "body": {},
        }
        for attempt in range(MAX_RECONNECTS):
            server = self.pick()
            stream = Stream("ws" if frame["type"] == "send" else "ws-resume", server)
            seen.streams.append(stream)
            if frame["type"] == "send":
                seen.posted_at = time.monotonic()
                seen.home = (server, self.stack.web[server].incarnation)
            cut = self.cut_after()
            seen.cut = seen.cut or cut is not None
            try:
                await read_ws(self.stack, server, self.cookie, frame, stream, cut)
            except (OSError, WebSocketException, TimeoutError):
                stream.ended = stream.ended or "broken"
            if stream.ended in ("end", "no-active") or stream.ended.startswith("refused"):
                return
            if stream.ended == "unsent":
                seen.streams.remove(stream)  # the socket never opened: the same frame again
                await self.pause(attempt)
                continue
            last = max((s.seqs[-1] for s in seen.streams if s.seqs), default=None)
            frame = {"type": "resume", "requestId": uuid.uuid4().hex, "id": self.chat, "headers": {}, "body": {}}
            if last is not None:
                frame["lastSequence"] = last
            await self.pause(attempt)

    async def agui(self, client: httpx.AsyncClient, prompt: str) -> None:
        self.turns += 1
        body = {
            "threadId": self.chat,
            "runId": f"{self.chat}-r{self.turns}",
            "messages": [{"id": f"{self.chat}-u{self.turns}", "role": "user", "content": prompt}],
            "tools": [],
            "context": [],
            "state": {},
            "forwardedProps": {},
        }
        seen = RunSeen(self.session_key, self.chat, "agui", prompt, "submit-message", None)
        self.soak.seen.append(seen)
        for attempt in range(6):
            server = self.pick()
            stream = Stream("agui", server)
            seen.streams.append(stream)
            seen.posted_at = time.monotonic()
            try:
                async with client.stream(
                    "POST",
                    self.stack.base(server) + "/api/agui",
                    json=body,
                    headers=self.headers(Accept="text/event-stream"),
                ) as response:
                    if response.status_code != 200:
                        await response.aread()
                        stream.ended = f"refused:{response.status_code}"
                        if response.status_code in (409, 500, 502, 503):
                            await self.pause(attempt)
                            continue
                        return
                    seen.home = (server, self.stack.web[server].incarnation)
                    cut = self.cut_after()
                    seen.cut = cut is not None
                    await read_sse(response, stream, cut, agui=True)
            except httpx.ConnectError:
                seen.streams.remove(stream)
                await self.pause(attempt)
                continue
            except httpx.HTTPError:
                stream.ended = stream.ended or ("broken" if stream.chunks else "gone")
            return


async def read_sse(
    response: httpx.Response, stream: Stream, cut: int | None, *, first_seq: int = 0, agui: bool = False
) -> None:
    """Read an SSE body into ``stream`` (cut after ``cut`` bytes, mid-frame)."""
    buffer = b""
    taken = 0
    seq = first_seq
    async for data in response.aiter_raw():
        if cut is not None and taken + len(data) >= cut:
            data = data[: cut - taken]
            stream.ended = "cut"
        taken += len(data)
        buffer += data
        while b"\n\n" in buffer:
            frame, buffer = buffer.split(b"\n\n", 1)
            payload = b"\n".join(line[5:].lstrip(b" ") for line in frame.split(b"\n") if line.startswith(b"data:"))
            if not payload or payload == b"[DONE]":
                continue
            chunk = json.loads(payload)
            stream.chunks.append(chunk)
            stream.seqs.append(seq)
            stream.times.append(time.monotonic())
            seq += 1
            if chunk.get("type") in (AGUI_TERMINAL if agui else TERMINAL):
                stream.ended = "end"
        if stream.ended == "cut":
            return
    if stream.ended != "end":
        stream.ended = "broken"


async def read_ws(
    stack: ChaosStack, server: str, cookie: str, frame: dict[str, Any], stream: Stream, cut: int | None
) -> None:
    url = f"ws://{HOST}:{stack.ports[server]}/ws/chat/"
    frames_left = None if cut is None else max(1, cut // 100)
    timeout = stack.options.read_timeout
    stream.ended = "unsent"
    async with connect(
        url,
        additional_headers={"Cookie": cookie},
        origin=Origin(stack.base(server)),
        open_timeout=10,
        ping_interval=None,
        close_timeout=1,
    ) as ws:
        await ws.send(json.dumps(frame))
        stream.ended = ""
        while True:
            reply = json.loads(await asyncio.wait_for(ws.recv(), timeout))
            if reply.get("requestId") != frame["requestId"]:
                continue
            kind = reply.get("type")
            if kind == "chunk":
                stream.seqs.append(reply["sequence"])
                stream.chunks.append(reply["chunk"])
                stream.times.append(time.monotonic())
                if frames_left is not None:
                    frames_left -= 1
                    if frames_left <= 0:
                        stream.ended = "cut"
                        ws.transport.abort()
                        return
            elif kind == "end":
                stream.ended = "end"
                return
            elif kind == "no-active":
                stream.ended = "no-active"
                return
            elif kind == "error":
                code = reply.get("code") or "error"
                stream.ended = f"refused:{code}" if not stream.chunks else "broken"
                if code in ("broker_unavailable", "run_active", "internal"):
                    stream.ended = "broken"
                return


# -- a round --------------------------------------------------------------------------------


@dataclass
class Fault:
    kind: str
    target: str
    incarnation: int
    at: float
    resumed_at: float | None = None
    #: ``at`` on the wall clock, to hold against the runs' stored times.
    wall: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass
class Options:
    seed: int = 1
    rounds: int = 10
    runs: int = 100
    faults: int = 20
    cut_rate: float = 0.1
    mode: str = "interrupt"
    lease: float = 3.0
    heartbeat: float = 1.0
    delay_ms: int = 15
    clients: int = 8
    database_url: str = "postgres://postgres@127.0.0.1:5432/uistream_chaos"
    #: The process faults to inject (all of ``PROCESS_FAULTS`` when empty).
    kinds: tuple[str, ...] = ()
    keep: bool = False
    verbose: bool = True

    @property
    def read_timeout(self) -> float:
        return 3 * self.lease + 30

    @property
    def settle_bound(self) -> float:
        return 3 * self.lease + 30


@dataclass
class Violation:
    seed: int
    round: int
    what: str
    run_id: str | None = None

    def __str__(self) -> str:
        where = f" run {self.run_id}" if self.run_id else ""
        return f"seed {self.seed} round {self.round}{where}: {self.what}"


class ChaosRound:
    """One round: the clients' scenarios and the faults, then the checks."""

    def __init__(self, soak: Soak, number: int, *, faults: int, runs: int, cut_rate: float) -> None:
        self.soak = soak
        self.stack = soak.stack
        self.options = soak.options
        self.number = number
        self.rng = random.Random(f"{self.options.seed}:{number}")
        self.fault_count = faults
        self.run_quota = runs
        self.cut_rate = cut_rate
        self.seen: list[RunSeen] = []
        self.faults: list[Fault] = []
        self.fault_counts: Counter[str] = Counter()
        self.tag = f"{soak.tag}-r{number}"
        self.started = 0
        self.faulting = True
        #: The processes a fault is busy with (one fault per process at a time).
        self.busy: set[str] = set()

    def note_fault(self, kind: str) -> None:
        self.fault_counts[kind] += 1

    async def play(self) -> None:
        keys = await asyncio.to_thread(self.stack.sessions, self.run_quota + 2 * self.options.clients)
        more = asyncio.Lock()
        injector = asyncio.create_task(self.inject(self.schedule()))

        async def visitor_key(index: int) -> str:
            async with more:  # the faults outlast the visitors made: make more
                if index >= len(keys):
                    keys.extend(await asyncio.to_thread(self.stack.sessions, 4 * self.options.clients))
            return keys[index]

        async def client_loop() -> None:
            while not (self.started >= self.run_quota and injector.done()):
                index = self.started
                self.started += 1
                rng = random.Random(f"{self.options.seed}:{self.number}:{index}")
                visitor = Visitor(self, await visitor_key(index), f"{self.tag}-c{index}", rng)
                transport = rng.choice(TRANSPORTS)
                prompt = rng.choice(PROMPTS)
                async with httpx.AsyncClient(timeout=httpx.Timeout(self.options.read_timeout, connect=5)) as client:
                    await visitor.run(transport, prompt, client)

        try:
            await asyncio.gather(*(client_loop() for _ in range(self.options.clients)))
        finally:
            self.faulting = False
            await injector

    def schedule(self) -> list[tuple[float, str]]:
        chosen = self.options.kinds or PROCESS_FAULTS
        kinds = [chosen[i % len(chosen)] for i in range(self.fault_count)]
        self.rng.shuffle(kinds)
        return [(self.rng.uniform(0.3, 1.5), kind) for kind in kinds]

    async def inject(self, schedule: list[tuple[float, str]]) -> None:
        """Each fault after its gap, once its process is free: faults of
        different processes overlap, one process takes one at a time."""
        pending: set[asyncio.Task[None]] = set()
        for gap, kind in schedule:
            await asyncio.sleep(gap)
            if not self.faulting:
                break
            process = self.target(kind)
            # A process still coming back from its last fault is waited for (bounded).
            for _poll in range(3000):
                if process.up and process.name not in self.busy:
                    break
                await asyncio.sleep(0.1)
            else:
                raise RuntimeError(f"{process.name} did not come back in 300 s for the next fault")
            self.busy.add(process.name)
            task = asyncio.create_task(self.hit(process, kind, kind.partition("-")[2]))
            pending.add(task)
            task.add_done_callback(pending.discard)
        await asyncio.gather(*pending)

    def target(self, kind: str) -> Process:
        target_kind = kind.partition("-")[0]
        if target_kind == "web":
            return self.stack.web[self.rng.choice(sorted(self.stack.web))]
        if target_kind == "worker":
            return self.stack.worker
        return self.stack.redis

    async def hit(self, process: Process, kind: str, how: str) -> None:
        try:
            await self.signal(process, kind, how)
        finally:
            self.busy.discard(process.name)

    async def signal(self, process: Process, kind: str, how: str) -> None:
        process.up = False
        fault = Fault(kind, process.name, process.incarnation, time.monotonic())
        self.faults.append(fault)
        self.fault_counts[kind] += 1
        # For reading the processes' logs beside (--keep): what hit which process when.
        with (self.soak.workdir / "faults.log").open("a") as out:
            now = datetime.now(UTC).isoformat()
            out.write(f"{now} round {self.number} {kind} {process.name}#{process.incarnation}\n")
        if how == "sigstop":
            process.signal(signal.SIGSTOP)
            await asyncio.sleep(self.options.lease + 2 * self.options.heartbeat + 1)
            process.signal(signal.SIGCONT)
            fault.resumed_at = time.monotonic()
            process.up = True
            return
        process.signal(signal.SIGTERM if how == "sigterm" else signal.SIGKILL)
        await asyncio.to_thread(process.wait_exit, 20)
        await asyncio.to_thread(process.start)


# -- the checks ---------------------------------------------------------------------------


RUN_SQL = """
SELECT r.id::text, r.status, r.trigger, r.error_code, r.message_id, c.client_id, c.session_key,
       m.client_id, m.id, m.role, m.parts, m.metadata, r.started_at, r.finished_at
  FROM uistream_app_run r
  JOIN uistream_app_conversation c ON c.id = r.conversation_id
  LEFT JOIN uistream_app_message m ON m.id = r.message_id
 WHERE c.client_id LIKE %s
 ORDER BY r.started_at
"""
LOG_SQL = """
SELECT b.run_id::text, b.first_seq, b.last_seq, b.chunks
  FROM uistream_app_chunkbatch b
 WHERE b.run_id = ANY(%s::uuid[])
 ORDER BY b.run_id, b.first_seq
"""


@dataclass
class StoredRun:
    id: str
    status: str
    trigger: str
    error_code: str
    message_key: str | None
    chat: str
    session_key: str
    message: dict[str, Any] | None
    log: list[dict[str, Any]] = field(default_factory=list)
    log_problem: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


def load_runs(database_url: str, pattern: str) -> dict[str, StoredRun]:
    runs: dict[str, StoredRun] = {}
    with psycopg.connect(database_url, connect_timeout=5) as conn:
        for row in conn.execute(RUN_SQL, (pattern,)).fetchall():
            run_id, status, trigger, error_code, message_key, chat, session_key = row[:7]
            m_client, m_id, role, parts, meta = row[7:12]
            message = None
            if m_id is not None:
                message = {"id": m_client or m_id, "role": role}
                if meta is not None:
                    message["metadata"] = meta
                message["parts"] = parts
            runs[run_id] = StoredRun(run_id, status, trigger, error_code, message_key, chat, session_key, message)
            runs[run_id].started_at, runs[run_id].finished_at = row[12], row[13]
        expected: dict[str, int] = defaultdict(int)
        for run_id, first, last, chunks in conn.execute(LOG_SQL, (list(runs),)).fetchall():
            run = runs[run_id]
            if run.log_problem is None:
                if first != expected[run_id] or last - first + 1 != len(chunks):
                    run.log_problem = (
                        f"log batch {first}-{last} ({len(chunks)} chunks) after seq {expected[run_id] - 1}"
                    )
                expected[run_id] = last + 1
            run.log.extend(chunks)
    return runs


def running_count(database_url: str, pattern: str) -> int:
    with psycopg.connect(database_url, connect_timeout=5) as conn:
        row = conn.execute(
            "SELECT count(*) FROM uistream_app_run r JOIN uistream_app_conversation c ON c.id = r.conversation_id "
            "WHERE r.status = 'running' AND c.client_id LIKE %s",
            (pattern,),
        ).fetchone()
    return int(row[0]) if row else 0


def build_messages(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What the real ai@7 reader builds from each item (one node process)."""
    if not items:
        return {}
    node = os.environ.get("UISTREAM_NODE") or shutil.which("node")
    if node is None:
        raise RuntimeError("node is needed: the stored messages are judged by the real ai@7 reader")
    lines = "".join(json.dumps(item) + "\n" for item in items)
    out = subprocess.run(
        [node, str(JS_DIR / "build_messages.mjs")],
        input=lines,
        capture_output=True,
        text=True,
        cwd=JS_DIR,
        timeout=300,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"build_messages.mjs failed: {out.stderr[-2000:]}")
    return {result["key"]: result for result in map(json.loads, out.stdout.splitlines())}


def texts(message: dict[str, Any] | None) -> list[str]:
    return [p.get("text", "") for p in (message or {}).get("parts", []) if p.get("type") == "text"]


def may_repeat() -> frozenset[str]:
    """The tools ``chaos_project`` marks idempotent, if this tree's ``@tool`` knows the word."""
    try:
        from uistream_app.runs import tool
    except ImportError:  # pragma: no cover - the soak runs from the repository
        return frozenset()
    return MAY_REPEAT if "idempotent" in inspect.signature(tool).parameters else frozenset()


class Checker:
    """The invariants of a round (the module docstring), on the stored runs
    and what the round's clients saw."""

    def __init__(self, round_: ChaosRound, runs: dict[str, StoredRun], calls: Path) -> None:
        self.round = round_
        self.runs = runs
        self.calls = calls
        self.violations: list[Violation] = []
        self.relay_errors = 0
        #: What is odd but breaks no invariant (printed apart).
        self.notes: list[Violation] = []
        #: What ai@7 builds from each run's log (the answer as of that run).
        self.built: dict[str, dict[str, Any] | None] = {}

    def violation(self, what: str, run_id: str | None = None) -> None:
        self.violations.append(Violation(self.round.options.seed, self.round.number, what, run_id))

    def check(self, baseline: dict[tuple[str, str], list[str]]) -> None:
        for run in self.runs.values():
            self.check_log(run)
        self.check_messages()
        self.check_received()
        self.check_tools()
        if self.round.options.mode == "continue":
            self.check_continued(baseline)

    def check_log(self, run: StoredRun) -> None:
        if run.status == "running":
            self.violation("left running after everything settled", run.id)
        if run.log_problem:
            self.violation(f"sequence numbers not contiguous: {run.log_problem}", run.id)
        terminals = [i for i, chunk in enumerate(run.log) if chunk.get("type") in TERMINAL]
        if len(terminals) != 1 or terminals[0] != len(run.log) - 1:
            kinds = [run.log[i].get("type") for i in terminals]
            self.violation(f"{len(terminals)} terminal chunks ({kinds}) at {terminals} of {len(run.log)}", run.id)
        # The status says how the log ends: a run stored completed finished,
        # one stored failed ended with its error (what its clients were shown).
        # A note, not a violation: a run whose broker failed after its last
        # publish is stored failed though its log ends with its finish
        # (lifecycle/runner.py), which no rule of the issue forbids.
        end = run.log[-1].get("type") if run.log else None
        if (run.status, end) in (("completed", "error"), ("completed", "abort"), ("failed", "finish")):
            self.notes.append(
                Violation(
                    self.round.options.seed,
                    self.round.number,
                    f"stored {run.status}, but its log ends with {end} ({run.error_code})",
                    run.id,
                )
            )

    def check_messages(self) -> None:
        continued = {s.run_id: s.continued for s in self.round.seen if s.run_id and s.continued is not None}
        items = []
        for run in self.runs.values():
            if run.trigger == "continue" and run.id not in continued:
                continue  # a continuation no client of ours sent: nothing to continue from
            items.append({"key": run.id, "chunks": run.log, "message": continued.get(run.id)})
        built = build_messages(items)
        self.built = {key: result.get("message") for key, result in built.items()}
        last_of: dict[str, StoredRun] = {}
        for run in self.runs.values():  # in started order
            if run.message_key is not None:
                last_of[run.message_key] = run
        for run in self.runs.values():
            result = built.get(run.id)
            if result is None:
                continue
            if not result["ok"]:
                self.violation(f"ai@7 rejects the log: {result['errorKind']}: {result['error']}", run.id)
                continue
            if last_of.get(run.message_key or "") is not run or run.message is None:
                continue
            expected = result["message"]
            if result["updates"] == 0 and run.trigger != "continue":
                # No chunk made a message (a log of only its ``error``): the
                # client shows none; the stored one must have no parts.
                expected = {**run.message, "parts": []}
            if expected != run.message:
                self.violation(
                    f"stored message differs from ai@7's: stored {json.dumps(run.message)[:600]} "
                    f"ai@7 {json.dumps(expected)[:600]}",
                    run.id,
                )

    def check_received(self) -> None:
        by_chat: dict[str, list[StoredRun]] = defaultdict(list)
        for run in self.runs.values():
            by_chat[run.chat].append(run)
        for seen in self.round.seen:
            mine = [r for r in by_chat.get(seen.chat, []) if r.session_key == seen.visitor]
            for stream in seen.streams:
                if not stream.chunks:
                    continue
                if stream.kind == "agui":
                    self.check_agui(seen, stream, mine)
                    continue
                start = next((c for c in stream.chunks if c.get("type") == "start"), None)
                message_id = start.get("messageId") if start else None
                candidates = [r for r in mine if seen.run_id is None or r.id == seen.run_id]
                if message_id is not None:
                    candidates = [r for r in candidates if r.message and r.message["id"] == message_id]
                    if not candidates:
                        self.violation(
                            f"a {stream.kind} stream of {seen.chat} started message {message_id}, "
                            "no run of the client's own chat built it (another owner's run?)",
                            seen.run_id,
                        )
                        continue
                if not any(self.in_log(stream, run) is None for run in candidates):
                    run = candidates[0] if candidates else None
                    seq = self.in_log(stream, run) if run is not None else 0
                    i = stream.seqs.index(seq) if seq in stream.seqs else 0
                    logged = run.log[seq] if run is not None and seq is not None and seq < len(run.log) else None
                    self.violation(
                        f"a {stream.kind} stream ({stream.server}, ended {stream.ended}, {len(stream.chunks)} chunks) "
                        f"of {seen.chat} ({seen.transport}) received chunk {seq} {json.dumps(stream.chunks[i])[:200]}, "
                        f"its run's log ({run.status if run else '-'}, {len(run.log) if run else 0} chunks) has "
                        f"{json.dumps(logged)[:200]} there",
                        seen.run_id or (run.id if run else None),
                    )

    def in_log(self, stream: Stream, run: StoredRun) -> int | None:
        """The sequence number of the first chunk of ``stream`` that is not
        ``run``'s logged chunk of that number; None when all are."""
        for i, (seq, chunk) in enumerate(zip(stream.seqs, stream.chunks, strict=True)):
            if seq < len(run.log) and run.log[seq] == chunk:
                continue
            if i == len(stream.chunks) - 1 and chunk.get("type") == "error":
                self.relay_errors += 1  # a relay's own end of a broken stream
                continue
            return seq
        return None

    def check_agui(self, seen: RunSeen, stream: Stream, mine: list[StoredRun]) -> None:
        started = next((e for e in stream.chunks if e.get("type") == "RUN_STARTED"), None)
        # The client names its runs; the server's run id is in the event's metadata.
        run_id = ((started or {}).get("metadata") or {}).get("uistream", {}).get("runId")
        run = next((r for r in mine if r.id == run_id), None)
        if run is None:
            self.violation(f"an AG-UI stream of {seen.chat} is of a run not in the client's own chat: {started}")
            return
        seen.run_id = run.id
        text = "".join(e.get("delta", "") for e in stream.chunks if e.get("type") == "TEXT_MESSAGE_CONTENT")
        logged = "".join(c.get("delta", "") for c in run.log if c.get("type") == "text-delta")
        calls = {e.get("toolCallId") for e in stream.chunks if e.get("type") == "TOOL_CALL_START"}
        logged_calls = {c.get("toolCallId") for c in run.log if c.get("type") == "tool-input-start"}
        if not logged.startswith(text) or not calls <= logged_calls:
            self.violation(
                f"an AG-UI client got text {text[:80]!r} / calls {sorted(calls)} its run's log lacks "
                f"({logged[:80]!r} / {sorted(logged_calls)})",
                run.id,
            )

    def check_tools(self) -> None:
        repeatable = self.round.soak.may_repeat
        for path in sorted(self.calls.glob("*")):
            if path.name in self.round.soak.counted_calls:
                continue
            self.round.soak.counted_calls.add(path.name)
            lines = path.read_text().splitlines()
            name = lines[0].split()[0] if lines else "?"
            self.round.soak.tool_runs[name] += len(lines)
            if len(lines) > 1 and name not in repeatable:
                self.violation(f"tool {name} (not idempotent) ran {len(lines)} times for call {path.name}")

    def check_continued(self, baseline: dict[tuple[str, str], list[str]]) -> None:
        for seen, run in self.orphaned(LOST):
            expected = baseline.get((seen.prompt, seen.trigger))
            # A call cut short whose tool is not idempotent is answered with
            # a tool error instead of running again: the model's answer may
            # then differ from the baseline's.
            cut_short = any(
                c.get("type") == "tool-output-error" and "interrupted" in str(c.get("errorText", "")) for c in run.log
            )
            if run.status != "completed":
                self.violation(f"its process was lost ({seen.home}) and it ended {run.status}, not completed", run.id)
            elif expected is not None and texts(self.built.get(run.id)) != expected and not cut_short:
                self.violation(f"continued, but its answer {texts(self.built.get(run.id))} is not {expected}", run.id)

    def orphaned(
        self, kinds: tuple[str, ...] = ("sigkill", "sigterm", "sigstop")
    ) -> Iterator[tuple[RunSeen, StoredRun]]:
        """The runs whose executing process a fault of ``kinds`` hit while they ran."""
        for seen in self.round.seen:
            run = self.runs.get(seen.run_id or "")
            if run is None or seen.home is None:
                continue
            ended = max((t for s in seen.streams for t in s.times), default=float("inf"))
            started, finished = run.started_at, run.finished_at
            for fault in self.round.faults:
                hit = fault.kind.endswith(kinds) and (fault.target, fault.incarnation) == seen.home
                if not (hit and seen.posted_at <= fault.at <= ended):
                    continue
                # It ran when the fault came (the stored times), and Redis did
                # not end it first (a run whose stream is gone fails, by design).
                ran = started is None or finished is None or started <= fault.wall <= finished
                if ran and run.error_code not in BROKER_FAILURES:
                    yield seen, run
                    break


# -- the soak ---------------------------------------------------------------------------------


class Soak:
    def __init__(self, options: Options) -> None:
        self.options = options
        self.tag = f"s{options.seed}-{uuid.uuid4().hex[:6]}"
        self.workdir = Path(tempfile.mkdtemp(prefix="uistream-chaos-"))
        self.stack = ChaosStack(options, self.workdir)
        self.violations: list[Violation] = []
        self.notes: list[Violation] = []
        self.fault_counts: Counter[str] = Counter()
        self.outcomes: Counter[str] = Counter()
        self.transports: Counter[str] = Counter()
        self.tool_runs: Counter[str] = Counter()
        self.counted_calls: set[str] = set()
        self.relay_errors = 0
        self.reset_steps = 0
        self.runs = 0
        self.kill_to_next: list[float] = []
        self.kill_to_terminal: list[float] = []
        self.baseline: dict[tuple[str, str], list[str]] = {}
        self.may_repeat = may_repeat()
        self.elapsed = 0.0

    def log(self, text: str) -> None:
        if self.options.verbose:
            print(text, flush=True)

    def run(self) -> None:
        started = time.monotonic()
        try:
            self.stack.start()
            if self.options.mode == "continue":  # the answers a continued run must end with
                asyncio.run(self.play_round(0, faults=0, runs=2 * len(TRANSPORTS), cut_rate=0.0))
            for number in range(1, self.options.rounds + 1):
                asyncio.run(
                    self.play_round(
                        number, faults=self.options.faults, runs=self.options.runs, cut_rate=self.options.cut_rate
                    )
                )
        finally:
            self.elapsed = time.monotonic() - started
            self.stack.close()
            if self.options.keep:
                print(f"kept: {self.workdir}")
            else:
                shutil.rmtree(self.workdir, ignore_errors=True)

    async def play_round(self, number: int, *, faults: int, runs: int, cut_rate: float) -> None:
        round_ = ChaosRound(self, number, faults=faults, runs=runs, cut_rate=cut_rate)
        if number == 0:
            # The baseline: every prompt on every transport once, no fault.
            await self.baseline_round(round_)
        else:
            await round_.play()
        for process in self.stack.processes():
            if not process.up:  # a fault's restart that failed: the round cannot be judged
                raise RuntimeError(f"{process.name} is down after round {number}:\n{process.output()[-2000:]}")
        pattern = f"{round_.tag}-%"
        # Everything settles within a few leases (the sweep): polled, with a bound.
        deadline = time.monotonic() + self.options.settle_bound
        for _poll in range(int(self.options.settle_bound / 0.2) + 1):
            left = await asyncio.to_thread(running_count, self.options.database_url, pattern)
            if not left or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        runs_stored = await asyncio.to_thread(load_runs, self.options.database_url, pattern)
        checker = Checker(round_, runs_stored, self.workdir / "calls")
        await asyncio.to_thread(checker.check, self.baseline)
        if number == 0:
            for seen in round_.seen:
                run = runs_stored.get(seen.run_id or "")
                if run is not None and run.status == "completed":
                    # The answer as of this run (an approval's first run ends before its email is sent).
                    self.baseline.setdefault((seen.prompt, seen.trigger), texts(checker.built.get(run.id)))
        self.tally(round_, runs_stored, checker)
        self.log(
            f"round {number}: {len(runs_stored)} runs, faults {dict(round_.fault_counts)}, "
            f"{len(checker.violations)} violations{f' ({left} still running)' if left else ''}"
        )
        for violation in checker.violations[:20]:
            self.log(f"  {violation}")

    async def baseline_round(self, round_: ChaosRound) -> None:
        keys = await asyncio.to_thread(self.stack.sessions, len(PROMPTS) + 1)
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.options.read_timeout, connect=5)) as client:
            for i, prompt in enumerate(PROMPTS):
                visitor = Visitor(round_, keys[i], f"{round_.tag}-c{i}", random.Random(i))
                await visitor.run("http", prompt, client)
            visitor = Visitor(round_, keys[-1], f"{round_.tag}-ca", random.Random(0))
            await visitor.run("approval", APPROVAL_PROMPT, client)

    def tally(self, round_: ChaosRound, runs: dict[str, StoredRun], checker: Checker) -> None:
        self.violations.extend(checker.violations)
        self.notes.extend(checker.notes)
        self.relay_errors += checker.relay_errors
        if round_.number == 0:
            return
        self.runs += len(runs)
        self.fault_counts.update(round_.fault_counts)
        lost = {run.id for _seen, run in checker.orphaned(LOST)}
        for run in runs.values():
            # "continued": its process was lost while it ran, and it completed
            # all the same (under "interrupt": a paused process that went on
            # before a sweeper took its run).
            self.outcomes["continued" if run.id in lost and run.status == "completed" else run.status] += 1
            self.reset_steps += sum(c.get("type") == "reset-step" for c in run.log)
        for seen in round_.seen:
            self.transports[seen.transport] += 1
        # From a SIGKILL of a run's process to the first chunk past what its
        # clients had (continuing; under "interrupt" the sweeper's error) and
        # to the terminal chunk of its last stream.
        for seen, _run in checker.orphaned(("sigkill",)):
            kills = [
                f
                for f in round_.faults
                if f.kind.endswith("sigkill") and (f.target, f.incarnation) == seen.home and f.at >= seen.posted_at
            ]
            if not kills:
                continue
            killed = kills[0].at
            had = max(
                (q for st in seen.streams for q, t in zip(st.seqs, st.times, strict=True) if t <= killed), default=-1
            )
            new = sorted(
                t for st in seen.streams for q, t in zip(st.seqs, st.times, strict=True) if q > had and t > killed
            )
            ended = [st.times[-1] for st in seen.streams if st.ended == "end" and st.times and st.times[-1] > killed]
            if new:
                self.kill_to_next.append(new[0] - killed)
            if ended:
                self.kill_to_terminal.append(max(ended) - killed)

    def report(self) -> str:
        lines = [
            f"chaos soak: seed {self.options.seed}, mode {self.options.mode}, {self.options.rounds} rounds, "
            f"lease {self.options.lease:g} s, heartbeat {self.options.heartbeat:g} s, {self.elapsed:.0f} s",
            f"runs: {self.runs} ({', '.join(f'{k} {v}' for k, v in sorted(self.transports.items()))} scenarios)",
            f"faults: {sum(self.fault_counts.values())} "
            f"({', '.join(f'{k} {self.fault_counts[k]}' for k in FAULT_KINDS)})",
            f"ended: {', '.join(f'{k} {v}' for k, v in sorted(self.outcomes.items()))}",
            f"tool executions: {', '.join(f'{k} {v}' for k, v in sorted(self.tool_runs.items()))}; "
            f"relays' own error at a break: {self.relay_errors}; reset-step chunks: {self.reset_steps}",
            f"SIGKILL -> first new chunk a client got: p50 {pct(self.kill_to_next, 50):.2f} s, "
            f"p99 {pct(self.kill_to_next, 99):.2f} s (n={len(self.kill_to_next)}); "
            f"-> the terminal chunk: p50 {pct(self.kill_to_terminal, 50):.2f} s, "
            f"p99 {pct(self.kill_to_terminal, 99):.2f} s (n={len(self.kill_to_terminal)})",
            f"notes (odd, no invariant broken): {len(self.notes)}",
        ]
        lines += [f"  {n}" for n in self.notes[:10]]
        lines.append(f"violations: {len(self.violations)}")
        lines += [f"  {v}" for v in self.violations[:50]]
        if len(self.violations) > 50:
            lines.append(f"  … and {len(self.violations) - 50} more")
        lines.append(f"replay: .venv/bin/python bench/chaos.py {self.replay_args()}")
        return "\n".join(lines)

    def replay_args(self) -> str:
        o = self.options
        return (
            f"--seed {o.seed} --rounds {o.rounds} --runs {o.runs} --faults {o.faults} --cut-rate {o.cut_rate} "
            f"--mode {o.mode} --lease {o.lease:g} --heartbeat {o.heartbeat:g} --delay-ms {o.delay_ms} "
            f"--clients {o.clients}" + (f" --kinds {','.join(o.kinds)}" if o.kinds else "")
        )


def parse(argv: list[str] | None = None) -> Options:
    defaults = Options()
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--rounds", type=int, default=defaults.rounds)
    parser.add_argument("--runs", type=int, default=defaults.runs, help="runs asked for per round, at least")
    parser.add_argument("--faults", type=int, default=defaults.faults, help="process faults per round")
    parser.add_argument("--cut-rate", type=float, default=defaults.cut_rate, help="share of streams a client cuts")
    parser.add_argument("--mode", choices=("interrupt", "continue"), default=defaults.mode)
    parser.add_argument("--lease", type=float, default=defaults.lease)
    parser.add_argument("--heartbeat", type=float, default=defaults.heartbeat)
    parser.add_argument("--delay-ms", type=int, default=defaults.delay_ms)
    parser.add_argument("--clients", type=int, default=defaults.clients, help="visitors at once")
    parser.add_argument("--database-url", default=os.environ.get("UISTREAM_CHAOS_DATABASE_URL", defaults.database_url))
    parser.add_argument("--kinds", default="", help=f"comma-separated process faults (default all: {PROCESS_FAULTS})")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, tool-call marks)")
    args = parser.parse_args(argv)
    kinds = tuple(kind for kind in args.kinds.split(",") if kind)
    if unknown := set(kinds) - set(PROCESS_FAULTS):
        parser.error(f"--kinds: {sorted(unknown)} are not of {PROCESS_FAULTS}")
    return Options(**{**vars(args), "kinds": kinds})


def interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    soak = Soak(options)
    # SIGTERM ends the soak as Ctrl-C does: the finally blocks stop every process.
    signal.signal(signal.SIGTERM, interrupted)
    try:
        soak.run()
    except KeyboardInterrupt:
        print("interrupted: every process stopped; the rounds checked so far:", file=sys.stderr)
        print(soak.report())
        return 130
    print(soak.report())
    return 1 if soak.violations else 0


if __name__ == "__main__":
    sys.exit(main())
