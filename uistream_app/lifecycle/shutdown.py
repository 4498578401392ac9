"""A graceful stop on SIGTERM, the same under uvicorn and daphne
(docs/operations.md, "Shutdown").

Neither server tells the application in time on its own. uvicorn, on
SIGTERM, stops accepting and then waits for every open connection to
close (for ever, unless ``--timeout-graceful-shutdown``): a long answer
holds the process up, and once that timeout passes its task is cancelled
with nothing sent; the lifespan ``shutdown`` event comes only after all
connections are gone. daphne (Twisted) stops its reactor, whose "before
shutdown" trigger cancels every application instance still running: each
open stream is cut off without a terminal chunk, and a run that outlived
its client (``ON_DISCONNECT="finish"``) dies with the event loop, left
``running``.

So the first run this process starts installs ``install()``'s SIGTERM
handler in front of the server's own (both servers set theirs with
``signal.signal`` in the main thread, where their event loop runs). On
SIGTERM it:

1. lets the runs of this process (``registry.live_runs()``, whether or not a
   client still reads them) go on for up to ``SHUTDOWN_GRACE_SECONDS``;
2. interrupts those still running: each ends with an ``error`` chunk
   (``INTERRUPTED_TEXT``), its log stored, its run ``interrupted``; then
   closes this process's MCP sessions (``mcp.aclose_all``: the stdio
   servers exit), no run being left to call them;
3. waits (up to ``DRAIN_SECONDS``) until every HTTP request in flight has
   been answered, so the streams' last bytes are out;
4. hands the signal to the server's own handler, which stops as it would
   have. A second SIGTERM meanwhile goes to it at once.

Why ``error`` and not ``abort``: ``abort`` is what the Stop button ends an
answer with, and useChat treats it as a normal end (``isAbort``, status
back to ``ready``); an ``error`` puts the chat in its error state with
this text, so the person sees the answer was cut short and can send it
again, to whichever process answers next.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any

from django.core.signals import request_finished, request_started

from ..conf import settings as uistream_settings
from .registry import live_runs

__all__ = ["DRAIN_SECONDS", "INTERRUPTED_TEXT", "install", "requests_in_flight", "stop_gracefully"]

logger = logging.getLogger("uistream_app.shutdown")

#: What the client of an interrupted run is told (the ``error`` chunk's text).
INTERRUPTED_TEXT = "The server restarted before this answer was finished. Please send it again."

#: How long, once the runs are settled, the answers in flight may take to
#: send their last bytes before the server's own handler runs.
DRAIN_SECONDS = 5.0

_lock = threading.Lock()
_in_flight = 0
_installed = False
_signalled = False
_draining: asyncio.Task[None] | None = None  # held: the loop keeps only weak references


#: Futures waiting for no request to be in flight, with their loops.
_idle_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []


def _started(**kwargs: Any) -> None:
    global _in_flight
    with _lock:
        _in_flight += 1


def _finished(**kwargs: Any) -> None:
    global _in_flight
    with _lock:
        _in_flight = max(0, _in_flight - 1)
        waiters = _idle_waiters[:] if _in_flight == 0 else []
        if waiters:
            _idle_waiters.clear()
    for loop, future in waiters:  # request_finished may be sent from a worker thread
        loop.call_soon_threadsafe(_resolve, future)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


# Connected when the app is ready (apps.py imports this module), before the
# first request: every answer a drain waits for is counted.
request_started.connect(_started, dispatch_uid="uistream_app.shutdown.started")
request_finished.connect(_finished, dispatch_uid="uistream_app.shutdown.finished")


def requests_in_flight() -> int:
    """The HTTP requests of this process not answered in full yet."""
    return _in_flight


def install() -> None:
    """Put the SIGTERM handler in front of the server's own, once per
    process. Called by ``Runner.start`` from the event loop serving the
    requests; does nothing outside the main thread (a server in a thread,
    the WSGI portal), where signals can't be handled."""
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        global _signalled
        if _signalled or loop.is_closed():  # a second SIGTERM, or no loop left to drain: stop now
            _hand_over(previous, signum, frame)
            return
        _signalled = True

        def begin() -> None:
            global _draining
            _draining = loop.create_task(_drain_then_hand_over(previous, signum))

        # A signal handler may interrupt the loop anywhere: start from the loop.
        loop.call_soon_threadsafe(begin)

    signal.signal(signal.SIGTERM, on_sigterm)
    _installed = True


async def stop_gracefully(grace_seconds: float, drain_seconds: float = DRAIN_SECONDS) -> None:
    """Steps 1–3 of the module docstring: the runs of this process finish
    within ``grace_seconds`` or are interrupted, then the answers in flight
    get ``drain_seconds`` to go out."""
    deadline = time.monotonic() + max(0.0, grace_seconds)
    while (running := live_runs()) and (left := deadline - time.monotonic()) > 0:
        # Runs started meanwhile are waited for too: loop until none is left.
        await asyncio.wait([_ended(h.task) for h in running], timeout=left)
    if running:
        logger.warning("interrupting %d run(s) still running %.1f s after SIGTERM", len(running), grace_seconds)
    for handle in running:
        handle.task.get_loop().call_soon_threadsafe(handle.interrupt, INTERRUPTED_TEXT)
    if running:
        await asyncio.wait([_ended(h.task) for h in running])
    mcp = sys.modules.get("uistream_app.lifecycle.mcp")  # imported only where MCP_SERVERS is used
    if mcp is not None:
        await mcp.aclose_all()
    await _no_request_in_flight(drain_seconds)


def _ended(task: asyncio.Task[None]) -> asyncio.Future[Any]:
    """A future of the running loop done when ``task`` (of any loop) is."""
    loop = asyncio.get_running_loop()
    if task.get_loop() is loop:
        return task
    future: asyncio.Future[None] = loop.create_future()
    task.get_loop().call_soon_threadsafe(
        task.add_done_callback, lambda _task: loop.call_soon_threadsafe(_resolve, future)
    )
    return future


async def _no_request_in_flight(seconds: float) -> None:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    with _lock:
        if _in_flight == 0:
            return
        _idle_waiters.append((asyncio.get_running_loop(), future))
    try:
        await asyncio.wait_for(future, seconds)
    except TimeoutError:
        logger.warning("%d request(s) still in flight %.1f s after the runs ended", _in_flight, seconds)


async def _drain_then_hand_over(previous: Any, signum: int) -> None:
    try:
        await stop_gracefully(uistream_settings.SHUTDOWN_GRACE_SECONDS)
    except Exception:
        logger.exception("the graceful stop failed; stopping anyway")
    _hand_over(previous, signum, None)


def _hand_over(previous: Any, signum: int, frame: FrameType | None) -> None:
    """Give the signal to the handler that was there before ours."""
    if callable(previous):
        signal.signal(signal.SIGTERM, previous)
        previous(signum, frame)
    elif previous != signal.SIG_IGN:  # the default (or one set outside Python): die of it
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
