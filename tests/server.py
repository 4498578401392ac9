"""A real ASGI server on 127.0.0.1 for the streaming tests.

``ASGIServer`` runs uvicorn in a thread of the test process, serving the
project's ASGI application over real TCP: streaming, buffering and
disconnects behave as they do in production, while the test can still read
the database with the ORM (the test database is a file, shared by both).
``subprocess_server`` starts daphne in another process for the tests that
are about several processes (resume through Redis).
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any, Final
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import uvicorn

ROOT = Path(__file__).resolve().parent.parent


class ASGIServer:
    def __init__(self, app: object) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", ws="none")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="uvicorn-test", daemon=True)

    def start(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


#: The ports ``free_port`` hands out: below the kernel's ephemeral range.
_PORTS: Final = range(max(1024, _ephemeral_low() - 12000), _ephemeral_low())


def free_port() -> int:
    """A port free on 127.0.0.1 now, for a server a test starts. It is
    chosen below the kernel's ephemeral range: a port the kernel picked
    for a socket bound to port 0 (a fake provider, a client's connection)
    would be free here a moment, then taken before the server bound it,
    and the server's readiness check would find the other listener (seen
    in CI: a demo server's first request answered by a fake provider)."""
    for _ in range(100):
        port = random.choice(_PORTS)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def subprocess_server(env: dict[str, str]) -> Iterator[str]:
    """daphne in its own process, with ``env`` added (settings module,
    database and broker must point at what the test shares)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "demo_project.asgi:application"],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    raise RuntimeError(f"daphne did not start: {err[-2000:]}") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def serve_demo(monkeypatch: Any, delay_ms: int) -> Iterator[str]:
    """For a fixture (``yield from``): the project's ASGI application behind
    a real server on 127.0.0.1, the demo model pacing its deltas
    ``delay_ms`` apart; stopped when the fixture ends."""
    from django.core.asgi import get_asgi_application

    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", str(delay_ms))
    srv = ASGIServer(get_asgi_application())
    url = srv.start()
    try:
        yield url
    finally:
        srv.stop()


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def serve_wsgi_demo(monkeypatch: Any, delay_ms: int) -> Iterator[str]:
    """``serve_demo`` for the sync path: the project's WSGI application
    behind a threaded ``wsgiref`` server on 127.0.0.1."""
    from django.core.wsgi import get_wsgi_application

    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", str(delay_ms))
    server = make_server("127.0.0.1", 0, get_wsgi_application(), _ThreadingWSGIServer, _QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def shared_database_url() -> str:
    """A ``DATABASE_URL`` naming the test database this process uses (a
    SQLite file or a PostgreSQL database), for a server in another process:
    the test needs ``django_db(transaction=True)`` so both see every row."""
    from urllib.parse import quote

    from django.db import connection

    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings['NAME']}"
    if connection.vendor != "postgresql":
        raise RuntimeError(f"no DATABASE_URL for a {connection.vendor} test database")
    user = quote(settings["USER"] or "", safe="")
    if settings["PASSWORD"]:
        user += ":" + quote(settings["PASSWORD"], safe="")
    port = f":{settings['PORT']}" if settings["PORT"] else ""
    return f"postgres://{user}@{settings['HOST'] or ''}{port}/{quote(settings['NAME'], safe='')}"


class ServerProcess:
    """A demo server in its own process (``demo_server``): its URL and its
    process, for the tests that signal or kill it."""

    def __init__(self, proc: subprocess.Popen[bytes], url: str, log: Any) -> None:
        self.proc = proc
        self.url = url
        self.log = log

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout=timeout)

    def output(self) -> str:
        """What the server has written to stderr so far."""
        self.log.seek(0)
        return bytes(self.log.read()).decode(errors="replace")


#: How each server is started on ``port`` with the demo's ASGI application.
SERVER_COMMANDS: dict[str, list[str]] = {
    "daphne": ["-m", "daphne", "-b", "127.0.0.1", "-p", "{port}", "demo_project.asgi:application"],
    "uvicorn": [
        "-m",
        "uvicorn",
        "--host",
        "127.0.0.1",
        "--port",
        "{port}",
        "--log-level",
        "warning",
        "demo_project.asgi:application",
    ],
}


def listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` itself listens on 127.0.0.1:``port`` (Linux:
    its sockets' inodes against the kernel's table of listening ones). A
    connect alone can reach another listener on the port: a server of
    another test worker that drew the same port, when this one could not
    bind it (seen in a full run: a demo server's first request cut off)."""
    listening = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                listening.add(f"socket:[{fields[9]}]")
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(fd) in listening:
                return True
        except OSError:
            continue
    return False


@contextmanager
def demo_server(server: str, env: dict[str, str]) -> Iterator[ServerProcess]:
    """``server`` ("daphne" or "uvicorn") serving the demo in its own
    process, with ``env`` added; killed at the end if still running. Ready
    when the process itself listens on its port; one that could not bind
    it (another worker's server drew the same port) is started again on
    another."""
    for attempt in range(3):
        port = free_port()
        command = [sys.executable, *(arg.format(port=port) for arg in SERVER_COMMANDS[server])]
        # A file, not a pipe: a chatty server never blocks on it.
        with tempfile.TemporaryFile() as log:
            proc = subprocess.Popen(command, cwd=ROOT, env={**os.environ, **env}, stdout=log, stderr=log)
            handle = ServerProcess(proc, f"http://127.0.0.1:{port}", log)
            try:
                deadline = time.monotonic() + 30
                while not listens(proc.pid, port):
                    if proc.poll() is not None or time.monotonic() > deadline:
                        output = handle.output()
                        if proc.poll() is not None and "in use" in output and attempt < 2:
                            break  # the port was taken meanwhile: another one
                        raise RuntimeError(f"{server} did not start: {output[-2000:]}")
                    time.sleep(0.05)
                else:
                    yield handle
                    return
            finally:
                if proc.poll() is None:
                    proc.kill()
                proc.wait(timeout=10)
    raise AssertionError("unreachable")


@contextmanager
def server_process(server: str, env: dict[str, str]) -> Iterator[str]:
    """``demo_server``'s base URL, for tests that only need to reach it."""
    with demo_server(server, env) as handle:
        yield handle.url
