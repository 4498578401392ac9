"""Stream adapters: a source of events becomes a stream of chunks.

Both twins keep the same contract (encoder rule 9 and the stream adapters
in docs/protocols.md):

* one source item is pulled per chunk demanded, never more: nothing is read
  ahead, so closing the chunk stream closes the source (and the model call
  behind it) at once;
* an exception from the source ends the message with an ``error`` chunk
  whose text is masked (``error_text``, "An error occurred." by default);
  the exception itself goes to the log and to ``on_error`` for the
  recorder, never to the wire unless ``expose_errors`` is set (or the
  exception has a ``client_text``: a usage limit's names the limit);
* a source that stops without ``Done`` still gets its ``finish``, so the
  client's stream always ends framed.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Callable, Iterable, Iterator

from ..events import Event
from .chunks import Chunk
from .encoder import MASKED_ERROR_TEXT, UIMessageEncoder

__all__ = ["aencode_batches", "aencode_events", "encode_events"]

logger = logging.getLogger("uistream_app.protocol")

ErrorHook = Callable[[BaseException], None]


def _error_chunks(
    encoder: UIMessageEncoder,
    exc: Exception,
    error_text: str,
    expose_errors: bool,
    on_error: ErrorHook | None,
) -> list[Chunk]:
    logger.warning("ui message source failed; the wire carries the masked text", exc_info=exc)
    if on_error is not None:
        on_error(exc)
    # An exception may carry a text meant for the client (a usage limit
    # names the limit it crossed); any other is masked.
    client_text = getattr(exc, "client_text", None)
    if isinstance(client_text, str) and client_text:
        return encoder.error(client_text)
    return encoder.error(str(exc) if expose_errors else error_text)


async def aencode_batches(
    source: AsyncIterable[Event],
    encoder: UIMessageEncoder | None = None,
    *,
    error_text: str = MASKED_ERROR_TEXT,
    expose_errors: bool = False,
    on_error: ErrorHook | None = None,
) -> AsyncGenerator[list[Chunk], None]:
    """Like ``aencode_events``, one list per source event: the chunks one
    event produces travel together (a transport may write them at once).
    Empty lists are not yielded."""
    encoder = encoder if encoder is not None else UIMessageEncoder()
    iterator = aiter(source)
    feed = encoder.feed
    try:
        while not encoder.done:
            try:
                event = await anext(iterator)
            except StopAsyncIteration:
                break
            except Exception as exc:  # noqa: BLE001 - any source failure ends the message masked
                yield _error_chunks(encoder, exc, error_text, expose_errors, on_error)
                return
            batch = feed(event)
            if batch:
                yield batch
        tail = encoder.finish()
        if tail:
            yield tail
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()


async def aencode_events(
    source: AsyncIterable[Event],
    encoder: UIMessageEncoder | None = None,
    *,
    error_text: str = MASKED_ERROR_TEXT,
    expose_errors: bool = False,
    on_error: ErrorHook | None = None,
) -> AsyncIterator[Chunk]:
    """Encode an async event source chunk by chunk (see the module docstring)."""
    batches = aencode_batches(source, encoder, error_text=error_text, expose_errors=expose_errors, on_error=on_error)
    try:
        async for batch in batches:
            for chunk in batch:
                yield chunk
    finally:
        await batches.aclose()


def encode_events(
    source: Iterable[Event],
    encoder: UIMessageEncoder | None = None,
    *,
    error_text: str = MASKED_ERROR_TEXT,
    expose_errors: bool = False,
    on_error: ErrorHook | None = None,
) -> Iterator[Chunk]:
    """The synchronous twin of ``aencode_events`` (WSGI, scripts, tests)."""
    encoder = encoder if encoder is not None else UIMessageEncoder()
    iterator = iter(source)
    feed = encoder.feed
    try:
        while not encoder.done:
            try:
                event = next(iterator)
            except StopIteration:
                break
            except Exception as exc:  # noqa: BLE001
                yield from _error_chunks(encoder, exc, error_text, expose_errors, on_error)
                return
            yield from feed(event)
        yield from encoder.finish()
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()
