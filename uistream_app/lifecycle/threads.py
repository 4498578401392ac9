"""The process's sync threads: the thread-sensitive work of requests and
runs (the ORM, sessions, caches, Django's sync middleware) shares a bounded
set of threads instead of taking one per request for as long as its
response streams.

Django runs each ASGI request in a ``ThreadSensitiveContext`` of its own:
the request's first ``sync_to_async`` call (a sync middleware's, the
session's, the view's ORM) makes a thread for it, and the thread lives
until the response ends. A chat's response is a stream, so 200 open
streams hold 200 threads, each with its own database connection (on SQLite,
200 writers queueing for one lock with a sleeping busy handler). Here each
HTTP request and each run instead gets one of ``UISTREAM["SYNC_THREADS"]``
*lanes*, single-thread executors shared by the process (the least busy
lane when it starts): its thread-sensitive calls still run one at a time,
in order, on one thread, as Django requires, and the number of threads
does not grow with open streams.

``bounded_threads(app)`` (the project's ``asgi.py``) gives HTTP requests a
lane; ``Runner.start`` gives each run one (``in_lane``). docs/operations.md,
"Threads", says what a project gives up (a long blocking call delays the
other requests of its lane) and how to size it.
"""

from __future__ import annotations

import heapq
import itertools
import queue
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import Executor, Future
from contextvars import ContextVar
from functools import partial
from typing import Any, Final, TypeVar

from asgiref.sync import ThreadSensitiveContext
from django.db import connection, connections

from ..conf import settings as uistream_settings

__all__ = [
    "LARGE_WRITE_BYTES",
    "Lane",
    "bounded_threads",
    "close_connections",
    "in_lane",
    "lanes",
    "pick_lane",
    "release_after_large_write",
]

T = TypeVar("T")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


#: The arrival number of the request (or of the request that started the
#: run) whose task submits work: a lane runs the oldest request's work first.
_ARRIVAL: ContextVar[int] = ContextVar("uistream_arrival", default=0)
_arrivals = itertools.count(1)

#: A lane's queued call: (arrival, order of submission, future, call).
_Entry = tuple[int, int, Future[Any], Callable[[], Any]]


class Lane(Executor):
    """One thread, shared: runs one call at a time (as thread-sensitive code
    needs) and takes the calls of the request that arrived first first.

    Requests take many short hops to their thread (each sync middleware,
    the session, the view's queries). Served in submission order, a burst
    of requests would advance hop by hop together and all get their answer
    late; served by arrival, each request's hops go through as soon as the
    ones of earlier requests have, and the first answers start early, as
    under a server that handles a request at a time. ``pending`` counts
    the calls it holds, so that new work goes to the least busy lane.
    """

    def __init__(self, index: int) -> None:
        self.index = index
        self.pending = 0
        self._queue: list[_Entry] = []
        self._order = itertools.count()
        self._lock = threading.Lock()
        # One token per call (and one to stop): the thread sleeps in C, and
        # a submit wakes it without a Python-level condition.
        self._tokens: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._closed = False
        self._thread = threading.Thread(target=self._work, name=f"uistream-sync-{index}", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        entry: _Entry = (_ARRIVAL.get(), next(self._order), future, partial(fn, *args, **kwargs))
        with self._lock:
            if self._closed:
                raise RuntimeError("this lane is shut down")
            heapq.heappush(self._queue, entry)
            self.pending += 1
        self._tokens.put(None)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
            if cancel_futures:
                for _arrival, _order, future, _call in self._queue:
                    future.cancel()
        self._tokens.put(None)
        if wait and self._thread is not threading.current_thread():
            self._thread.join()

    def _work(self) -> None:
        while True:
            self._tokens.get()
            with self._lock:
                if not self._queue:
                    if self._closed:
                        return
                    continue
                _arrival, _order, future, call = heapq.heappop(self._queue)
            # ``pending`` drops before the caller is woken, so that a caller
            # who reads it after its result never counts its own call.
            outcome: tuple[bool, Any] | None = None
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        outcome = (True, call())
                    except BaseException as exc:  # noqa: BLE001 - handed to the caller
                        outcome = (False, exc)
            finally:
                with self._lock:
                    self.pending -= 1
            if outcome is not None:
                ok, value = outcome
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)
            del future, call, outcome


_lanes: list[Lane] = []
_lanes_lock = threading.Lock()
_turn = itertools.count()


def lanes() -> list[Lane]:
    """The process's lanes, made on first use (``UISTREAM["SYNC_THREADS"]``
    of them; a changed setting takes effect in a new process)."""
    if not _lanes:
        with _lanes_lock:
            if not _lanes:
                count = max(1, uistream_settings.SYNC_THREADS)
                _lanes.extend(Lane(index) for index in range(count))
    return _lanes


def close_connections(timeout: float = 10.0) -> None:
    """Close the database connections the lanes hold, each on its own
    thread, before the process lets go of a database (a test run dropping
    its test database). Otherwise a lane's connection lives as a request
    thread's would: Django closes it when a request on the lane ends."""
    for lane in list(_lanes):
        lane.submit(connections.close_all).result(timeout)


#: A write of this many bytes or more (a turn's big message) lets go of a
#: persistent connection once its request is over.
LARGE_WRITE_BYTES: Final = 1024 * 1024


def release_after_large_write(size: int) -> None:
    """After writing ``size`` bytes on this thread's connection: when the
    connection is persistent (``CONN_MAX_AGE``) and the write large, have
    it closed at the next check for an obsolete connection (the end of the
    request; a WebSocket send's database call) instead of kept.
    PostgreSQL's client library keeps its buffers at the largest message
    the connection has sent, for the connection's life: three 30 MiB text
    bodies left two bodies' worth held by the lanes' connections
    (``bench/body_memory.py --postgres``). The log writer needs none: what
    it writes of a turn (``Run.history``) is bounded (``runs.given``)."""
    if size >= LARGE_WRITE_BYTES and connection.settings_dict.get("CONN_MAX_AGE"):
        connection.close_at = time.monotonic()


def pick_lane() -> Lane:
    """The least busy lane; among equally busy ones, the next in turn."""
    pool = lanes()
    start = next(_turn) % len(pool)
    rotated = pool[start:] + pool[:start]
    return min(rotated, key=lambda lane: lane.pending)


async def in_lane(awaitable: Awaitable[T], *, arrival: bool = False) -> T:
    """Await ``awaitable`` with its thread-sensitive calls on a lane (the
    code that awaits it, a run's task, is the context). ``arrival``: this is
    a new request, served after the ones that came before it; else the work
    keeps the place of the request it comes from (a run's, its request's)."""
    if arrival:
        _ARRIVAL.set(next(_arrivals))
    async with ThreadSensitiveContext(executor=pick_lane()):
        return await awaitable


def bounded_threads(app: ASGIApp) -> ASGIApp:
    """``app`` (Django's ASGI application, or a router around it) with each
    HTTP request's thread-sensitive work on a lane instead of a thread of
    its own. WebSocket and lifespan scopes pass through (Channels runs a
    consumer's database calls on its own executor)."""

    async def shared(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        # The outermost context wins: Django's own (inside ``app``) then
        # leaves the request on this lane.
        await in_lane(app(scope, receive, send), arrival=True)

    return shared
