"""Serving the async chat views under WSGI without buffering the answer.

Under WSGI, Django runs an async view in an event loop made for that one
call (``async_to_sync``) and, handed an async iterator to stream, buffers
all of it first (its "must consume asynchronous iterators" warning). A run
task started in that short-lived loop would die with it. So under WSGI the
views hand their work to the *portal*: one event loop in a daemon thread,
alive for the whole process, where runs live as they do under ASGI; the
response's chunks are pulled from it one at a time by a plain iterator that
the WSGI server writes as they come. Closing that iterator (the client went
away) closes the async one in the portal, with the same consequences as a
disconnect under ASGI.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import AsyncIterator, Awaitable, Iterator
from typing import Any, TypeVar

from ..runs import telemetry

__all__ = ["in_portal", "iterate_in_portal", "loop_in_thread", "portal_loop"]

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def loop_in_thread(name: str) -> asyncio.AbstractEventLoop:
    """A new event loop, running (forever) in a daemon thread named
    ``name`` once this returns."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.run_forever()

    threading.Thread(target=run, name=name, daemon=True).start()
    ready.wait()
    return loop


def portal_loop() -> asyncio.AbstractEventLoop:
    """The portal's event loop, started on first use."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            _loop = loop_in_thread("uistream-portal")
        return _loop


async def in_portal(awaitable: Awaitable[T]) -> T:
    """Await ``awaitable`` in the portal, from any other event loop."""

    # Of the caller's context only the trace goes along (the request's
    # span, the parent of a run started in the portal).
    trace_context = telemetry.current_context()

    async def wrapper() -> T:
        with telemetry.in_context(trace_context):
            return await awaitable

    # A fresh context: the caller's holds asgiref's executor of the WSGI
    # request thread, which quits when that request's sync bridge returns;
    # work in the portal (a run's database writes) must not be sent there.
    future = contextvars.Context().run(asyncio.run_coroutine_threadsafe, wrapper(), portal_loop())
    return await asyncio.wrap_future(future)


def iterate_in_portal(iterator: AsyncIterator[T]) -> Iterator[T]:
    """A plain iterator over an async one that lives in the portal: one item
    per ``next``, nothing read ahead; closing it closes the async one."""
    loop = portal_loop()

    async def pull() -> T:
        return await anext(iterator)

    try:
        while True:
            try:
                item = contextvars.Context().run(asyncio.run_coroutine_threadsafe, pull(), loop).result()
            except StopAsyncIteration:
                return
            yield item
    finally:
        aclose: Any = getattr(iterator, "aclose", None)
        if aclose is not None:
            contextvars.Context().run(asyncio.run_coroutine_threadsafe, aclose(), loop).result()
