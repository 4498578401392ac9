"""The body limit, an ASGI wrapper a project puts around its application
(``uistream_app.asgi`` lists it beside ``bounded_threads``).

``limit_request_bodies(app)`` refuses an HTTP request body larger than
``UISTREAM["MAX_REQUEST_BYTES"]`` with the pipeline's own 413 JSON answer
(``{"error": {"code": "too_large", …}}``) as soon as it passes the limit,
and stops reading it: Django's ASGI handler spools a whole body before a
view runs, so a view's check comes only after every byte has arrived, and
a chunked body (no ``Content-Length``) meets Django's own
``DATA_UPLOAD_MAX_MEMORY_SIZE`` first, answered with an HTML 400.

The bytes a server reads before the guard sees them depend on the server:
uvicorn hands the body over as it arrives and stops reading the socket
while the application does not ask for more, so little more than the limit
is read; daphne reads the whole body before the application starts (see
docs/operations.md, "Body limits", for what to put in front of it).

On glibc it also fixes ``malloc``'s mmap threshold at
``MMAP_THRESHOLD_BYTES`` (``release_large_blocks``), so the memory of a big
body goes back to the system once the request is done with it, and after a
request whose body was that large it gives back the heap's free pages
(``trim_heap``).
"""

from __future__ import annotations

import ctypes
import functools
import json
import logging
import os
import platform
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ..conf import settings as uistream_settings
from ..errors import PayloadTooLarge

__all__ = ["MMAP_THRESHOLD_BYTES", "limit_request_bodies", "release_large_blocks", "too_large", "trim_heap"]

logger = logging.getLogger(__name__)

#: Blocks this large or larger are mapped and unmapped one by one (glibc's
#: ``M_MMAP_THRESHOLD``, set by ``release_large_blocks``).
MMAP_THRESHOLD_BYTES = 1024 * 1024
_M_MMAP_THRESHOLD = -3  # malloc.h

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def too_large(max_bytes: int) -> PayloadTooLarge:
    """The one refusal of a body over ``max_bytes`` (the views raise it too)."""
    return PayloadTooLarge(f"the request body is larger than {max_bytes} bytes")


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name.lower() == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return None


async def _refuse(send: Send, max_bytes: int) -> None:
    body = json.dumps(too_large(max_bytes).as_dict()).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                # The rest of the body is never read: the connection can't
                # carry another request.
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


@functools.cache
def _glibc() -> bool:
    return platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


@functools.cache
def release_large_blocks() -> bool:
    """Have glibc's ``malloc`` map each block of ``MMAP_THRESHOLD_BYTES`` or
    more on its own, so freeing it gives the memory back to the system; once
    per process, and only on glibc, where the environment does not set
    ``MALLOC_MMAP_THRESHOLD_`` already. Whether it was set.

    glibc starts at 128 KiB but raises the threshold to the largest mapped
    block freed so far, up to 32 MiB: after one big body, the next bodies'
    strings come from the heap, whose freed middle a process keeps. Three
    30 MiB bodies left about three bodies' worth held for good
    (``bench/body_memory.py``); with the threshold fixed, nothing. The cost
    is a ``mmap``/``munmap`` pair per such block, which only bodies, files
    and long histories make."""
    if not _glibc() or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        return bool(ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
    except (OSError, AttributeError) as exc:  # pragma: no cover - a C library without mallopt
        logger.debug("mallopt is not available: %s", exc)
        return False


def trim_heap() -> bool:
    """Give the free pages of glibc's heaps back to the system
    (``malloc_trim(0)``), on glibc only; whether it did.

    A big body's smaller blocks (under the mmap threshold) are freed where
    they lie in the heap, and glibc gives back only a heap's top by itself.
    After three 30 MiB bodies on daphne about one body's worth was held
    this way three seconds later, in one run of three before 84fdc90 and
    in all three with pictures after; ``malloc_trim`` then gave it back
    (``bench/body_memory.py``). It takes under 2 ms of a 150 MiB process,
    after each request with a body of ``MMAP_THRESHOLD_BYTES`` or more."""
    if not _glibc():
        return False
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError) as exc:  # pragma: no cover - glibc has it
        logger.debug("malloc_trim is not available: %s", exc)
        return False
    return True


def limit_request_bodies(app: ASGIApp, *, max_bytes: int | None = None) -> ASGIApp:
    """``app`` with HTTP request bodies limited to ``max_bytes`` (None:
    ``UISTREAM["MAX_REQUEST_BYTES"]``, read at each request).

    A declared ``Content-Length`` over the limit is refused before the
    application runs. Otherwise the body is counted as the application
    reads it; the message that passes the limit is answered with the 413
    (unless a response has started) and the application sees the client
    disconnect, so it stops reading. WebSocket and lifespan scopes pass
    through untouched (the consumer limits its own frames).

    It calls ``release_large_blocks()``: the bodies it lets through are
    given back to the system once freed; and ``trim_heap()`` when a request
    whose body was that large is over.
    """
    release_large_blocks()

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        limit = uistream_settings.MAX_REQUEST_BYTES if max_bytes is None else max_bytes
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await _refuse(send, limit)
            return

        received = 0
        refused = False
        response_started = False

        async def limited_receive() -> Message:
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    refused = True
                    if not response_started:
                        await _refuse(send, limit)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal response_started
            if refused and not response_started:
                return  # the 413 went out in its place
            if message["type"] == "http.response.start":
                response_started = True
            await send(message)

        try:
            await app(scope, limited_receive, guarded_send)
        finally:
            if received >= MMAP_THRESHOLD_BYTES:
                trim_heap()

    return guarded
