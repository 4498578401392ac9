"""A Redis server of the test's own, on a port of its own, that the test
kills and starts again for real (``redis-server`` in a subprocess, nothing
saved to disk: a restart is an empty Redis, as after a crash).

Skipped when ``redis-server`` is missing, except in CI (``CI=true``),
where that is a failure.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

from .conftest import in_ci
from .server import free_port


def redis_server_binary() -> str:
    """``redis-server`` ($UISTREAM_REDIS_SERVER, else on the PATH); skips
    the test without it, fails it in CI."""
    binary = os.environ.get("UISTREAM_REDIS_SERVER") or shutil.which("redis-server")
    if binary is None:
        message = "redis-server is needed to stop and start Redis for real"
        if in_ci():
            pytest.fail(f"{message} (CI=true: the Redis tests must run)")
        pytest.skip(message)
    return binary


class RedisProcess:
    """One ``redis-server`` on ``port``: ``start()``, ``kill()`` (SIGKILL),
    ``start()`` again on the same port; ``pause()`` and ``resume()``
    (SIGSTOP, SIGCONT) for a Redis that hangs."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert self.process is None, "already running"
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 15
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL: Redis goes away at once, its connections reset."""
        assert self.process is not None, "not running"
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.process = None

    def pause(self) -> None:
        """SIGSTOP: Redis hangs, its connections stay open and silent."""
        assert self.process is not None, "not running"
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None, "not running"
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.process is not None:
            self.kill()


def redis_process() -> Iterator[RedisProcess]:
    """For a fixture (``yield from``): a started ``RedisProcess``, killed
    when the fixture ends."""
    redis = RedisProcess(redis_server_binary())
    redis.start()
    try:
        yield redis
    finally:
        redis.stop()
