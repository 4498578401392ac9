"""The process's sync threads (``uistream_app.lifecycle.threads``): open streams on a
real daphne or uvicorn process share a few threads instead of holding one
each; a lane runs one call at a time, on one thread, the oldest request's
first; runs started by a request keep their place after it ended."""

from __future__ import annotations

import asyncio
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.db import connection

from uistream_app.lifecycle.threads import (
    Lane,
    bounded_threads,
    close_connections,
    in_lane,
    lanes,
    pick_lane,
    release_after_large_write,
)
from uistream_app.models import Run

from .server import demo_server
from .test_chat_http import Browser, SSEStream, text_of, wait_for
from .test_shutdown import server_env

OPEN_STREAMS = 24


def threads_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no thread count")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("server", ["daphne", "uvicorn"])
def test_open_streams_do_not_each_hold_a_thread(server: str) -> None:
    env = server_env(SYNC_THREADS=2)
    with demo_server(server, env) as process, ExitStack() as streams:
        # One whole chat first: the threads a serving process keeps (the
        # lanes, the log writer, the lease renewer) exist from here on.
        warm = Browser(process.url)
        with warm.stream("warm-up", "count to 2") as response:
            _, done = SSEStream(response).read()
        assert done
        settled = threads_of(process.proc.pid)

        readers: dict[str, SSEStream] = {}
        for i in range(OPEN_STREAMS):
            chat_id = f"{server}-open-{i}"
            # 8 s of answer at 20 ms a word: every stream is still open once
            # the last has started, even on a loaded machine ("count to 150"
            # was not, beside the other workers of the suite).
            response = streams.enter_context(Browser(process.url).stream(chat_id, "count to 400"))
            assert response.status_code == 200
            readers[chat_id] = SSEStream(response)
        got = {chat_id: reader.read(stop=lambda cs: bool(text_of(cs)))[0] for chat_id, reader in readers.items()}
        assert Run.objects.filter(status="running").count() == OPEN_STREAMS
        while_open = threads_of(process.proc.pid)
        # Before: one more thread per open stream (asgiref's per-request
        # executor, alive as long as the response).
        assert while_open <= settled + 2, (settled, while_open)

        for chat_id, reader in readers.items():
            rest, done = reader.read()
            assert done
            assert text_of(got[chat_id] + rest) == " ".join(str(n) for n in range(1, 401))
    wait_for(lambda: not Run.objects.filter(status="running").exists(), "the runs to be stored")
    assert set(Run.objects.values_list("status", flat=True)) == {"completed"}


def test_a_lane_runs_its_calls_on_one_thread_the_first_arrived_request_first() -> None:
    lane = Lane(99)
    try:
        gate = threading.Event()
        order: list[str] = []
        threads: set[int] = set()

        def call(name: str) -> str:
            threads.add(threading.get_ident())
            if name == "blocker":
                gate.wait(5)
            order.append(name)
            return name

        async def main() -> list[str]:
            loop = asyncio.get_running_loop()
            blocker = loop.run_in_executor(lane, call, "blocker")  # holds the thread meanwhile

            async def request(name: str, arrival: int) -> str:
                from uistream_app.lifecycle import threads as module

                module._ARRIVAL.set(arrival)
                return await loop.run_in_executor(lane, call, name)

            # Submitted newest first; the lane takes them oldest first.
            waiting = [asyncio.create_task(request(f"request-{n}", n)) for n in (30, 20, 10)]
            await asyncio.sleep(0)  # each task submits its call in its first step
            assert lane.pending == 4
            gate.set()
            await blocker
            return await asyncio.gather(*waiting)

        assert asyncio.run(main()) == ["request-30", "request-20", "request-10"]
        assert order == ["blocker", "request-10", "request-20", "request-30"]
        assert len(threads) == 1
        assert lane.pending == 0
    finally:
        lane.shutdown()


def test_a_failing_call_raises_in_its_caller_and_the_lane_goes_on() -> None:
    lane = Lane(98)
    try:

        def fail() -> None:
            raise ValueError("no")

        with pytest.raises(ValueError, match="no"):
            lane.submit(fail).result(5)
        assert lane.submit(lambda: 42).result(5) == 42
    finally:
        lane.shutdown()
    with pytest.raises(RuntimeError):
        lane.submit(lambda: 1)


def test_requests_and_runs_get_the_least_busy_lane() -> None:
    pool = lanes()
    assert len(pool) >= 1
    gate = threading.Event()
    busy = pool[0]
    held = busy.submit(gate.wait, 5)
    try:
        if len(pool) > 1:
            assert all(pick_lane() is not busy for _ in range(len(pool) * 2))
    finally:
        gate.set()
        held.result(5)


def test_the_work_of_one_request_stays_on_one_thread_and_off_the_event_loop() -> None:
    seen: list[int] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        for _ in range(3):
            await sync_to_async(lambda: seen.append(threading.get_ident()))()

    async def main() -> None:
        await bounded_threads(app)({"type": "http"}, None, None)

    asyncio.run(main())
    assert len(set(seen)) == 1
    assert seen[0] != threading.get_ident()
    assert seen[0] in {lane._thread.ident for lane in lanes()}


def test_a_run_outliving_its_request_keeps_a_lane() -> None:
    """A run task made inside a request goes on after the request's context
    ended, and its thread-sensitive calls still find a thread."""
    results: list[str] = []

    async def main() -> None:
        started = asyncio.Event()

        async def run() -> None:
            started.set()
            await asyncio.sleep(0.01)  # the request ends meanwhile
            results.append(await sync_to_async(lambda: threading.current_thread().name)())

        async with ThreadSensitiveContext(executor=pick_lane()):
            task = asyncio.create_task(in_lane(run()))
            await started.wait()
        await task

    asyncio.run(main())
    assert len(results) == 1
    assert results[0].startswith("uistream-sync-")


@pytest.mark.django_db(transaction=True)
def test_the_lanes_database_connections_can_be_closed() -> None:
    from django.db import connections

    def used() -> bool:
        Run.objects.exists()
        return connections["default"].connection is not None

    assert all(lane.submit(used).result(5) for lane in lanes())
    close_connections()
    assert not any(lane.submit(lambda: connections["default"].connection is not None).result(5) for lane in lanes())


@pytest.mark.django_db(transaction=True)
def test_a_persistent_connection_is_closed_after_a_large_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """PostgreSQL's client keeps its buffers at the largest message a
    connection sent: after a big turn, a persistent connection is closed at
    the end of its request (the next obsolete check) instead of kept."""
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 60)
    connection.close()
    connection.ensure_connection()
    assert connection.close_at is not None
    assert connection.close_at > time.monotonic() + 30

    release_after_large_write(200_000)  # an ordinary turn: the connection is kept
    connection.close_if_unusable_or_obsolete()
    assert connection.connection is not None

    release_after_large_write(30 * 1024 * 1024)
    connection.close_if_unusable_or_obsolete()
    assert connection.connection is None


@pytest.mark.django_db(transaction=True)
def test_a_connection_per_request_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 0)
    connection.ensure_connection()
    closes_at = connection.close_at
    release_after_large_write(30 * 1024 * 1024)
    assert connection.close_at == closes_at
