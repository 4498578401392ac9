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
from typing import Any
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


def free_port() -> int:
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


@contextmanager
def server_process(server: str, env: dict[str, str]) -> Iterator[str]:
    """``subprocess_server`` for either server: ``"daphne"`` or
    ``"uvicorn"`` (with websockets off: HTTP only) in its own process,
    killable for real. Yields its base URL. Its stderr goes to a file, not
    a pipe nobody reads: a server that logs a lot (tracebacks of failures
    the test provokes) would block once a pipe's buffer is full."""
    port = free_port()
    if server == "daphne":
        command = ["daphne", "-b", "127.0.0.1", "-p", str(port)]
    else:
        command = ["uvicorn", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", "--ws", "none"]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", *command, "demo_project.asgi:application"],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                        break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        log.seek(0)
                        err = log.read().decode(errors="replace")
                        raise RuntimeError(f"{server} did not start: {err[-2000:]}") from None
                    time.sleep(0.05)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
