"""The wire dialects a stored run can be rendered in, and the log as JSONL.

``DIALECTS`` maps a name to a ``Dialect``: a renderer factory (given the
``Run``, returning an object with ``render_many(chunks) -> bytes`` and
``done() -> bytes``, as ``UIStreamRenderer`` has), the file extension and
the content type of a download, and a label. The inspector shows, the API
serves and ``uistream_replay`` writes every dialect registered here, in
registration order; another protocol joins them all with one
``register_dialect`` call (AG-UI is registered below).

The canonical log itself downloads as JSON lines (``LOG_FORMAT``): one
``{"seq", "offsetMs", "chunk"}`` object a line, the chunk exactly as the
client was sent it in ai@7 terms.

Every writer here reads the log with ``iter_log`` a page at a time and
yields bytes per page: a run's whole wire is never in memory. ``stream_*``
are generators for a synchronous caller (WSGI, a command); ``astream_*``
are their async twins, for an ASGI response (Django would otherwise read a
synchronous iterator to its end before sending a byte).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Final, NamedTuple, Protocol

import orjson
from asgiref.sync import sync_to_async

from ..protocol.agui.renderer import AGUIRenderer
from ..protocol.ui.chunks import Chunk
from ..protocol.ui.render import UIStreamRenderer
from ..recording import LogEntry, iter_log
from ..recording.agui_history import stored_history_sync

if TYPE_CHECKING:
    from ..models import Run

__all__ = [
    "DIALECTS",
    "LOG_FORMAT",
    "Dialect",
    "TranscriptFormat",
    "TranscriptRenderer",
    "astream_transcript",
    "download_name",
    "get_format",
    "log_line",
    "register_dialect",
    "stream_transcript",
    "transcript_formats",
]

#: Rows read from the log per query (and rendered per write).
PAGE: Final = 1000


class TranscriptRenderer(Protocol):
    """What a dialect's factory returns: canonical chunks in, wire bytes out."""

    def render_many(self, chunks: Sequence[Chunk]) -> bytes: ...

    def done(self) -> bytes: ...


class Dialect(NamedTuple):
    """One wire a stored run can be rendered in."""

    factory: Callable[[Run], TranscriptRenderer]
    extension: str
    content_type: str
    label: str


#: name → ``Dialect``, in the order the inspector shows them.
DIALECTS: dict[str, Dialect] = {}

#: The name of the canonical log's JSON-lines download (not a dialect: it
#: carries each chunk's ``seq`` and offset, which no wire does).
LOG_FORMAT: Final = "jsonl"


def register_dialect(
    name: str,
    factory: Callable[[Run], TranscriptRenderer],
    extension: str = "sse",
    content_type: str = "text/event-stream",
    *,
    label: str | None = None,
) -> None:
    """Add a dialect (or replace the one of that ``name``). ``name`` is used
    in URLs and file names: letters, digits, ``-`` and ``_``."""
    if not name or not all(c.isalnum() or c in "-_" for c in name) or name == LOG_FORMAT:
        raise ValueError(f"a dialect name is letters, digits, '-' and '_' (and not {LOG_FORMAT!r}): {name!r}")
    DIALECTS[name] = Dialect(factory, extension, content_type, label or name)


def _ui_stream(version: int) -> Callable[[Run], TranscriptRenderer]:
    def factory(run: Run) -> TranscriptRenderer:
        return UIStreamRenderer(version)

    return factory


for _version in (7, 6, 5):
    register_dialect(f"ai{_version}", _ui_stream(_version), label=f"ai@{_version} SSE")


def _agui(run: Run) -> TranscriptRenderer:
    # The thread is the conversation and the run is the run, as the AG-UI
    # view names them; timestamps are the time of rendering. With the thread
    # as it stood when the run started, the snapshots the client got (a
    # continuation's first event, an interrupt's last but one) are there too.
    history = stored_history_sync(run)
    return AGUIRenderer(
        run.conversation.ui_id,
        str(run.pk),
        history=history,
        continues=history is not None and run.trigger == "continue",
    )


register_dialect("agui", _agui, label="AG-UI SSE")


class TranscriptFormat(NamedTuple):
    """A download: a dialect or the JSON-lines log."""

    name: str
    extension: str
    content_type: str
    label: str


def transcript_formats() -> list[TranscriptFormat]:
    """Every download: the dialects, then the log as JSON lines."""
    formats = [TranscriptFormat(name, d.extension, d.content_type, d.label) for name, d in DIALECTS.items()]
    formats.append(TranscriptFormat(LOG_FORMAT, "jsonl", "application/jsonl", "canonical log (JSON lines)"))
    return formats


def get_format(name: str) -> TranscriptFormat | None:
    """The transcript format called ``name``, if there is one."""
    return next((f for f in transcript_formats() if f.name == name), None)


def download_name(run: Run, name: str) -> str:
    """The file name a run's transcript in format ``name`` downloads as."""
    found = get_format(name)
    extension = found.extension if found is not None else "txt"
    return f"run-{run.pk}.{name}.{extension}"


def log_line(entry: LogEntry) -> bytes:
    """One line of the JSONL log."""
    return orjson.dumps({"seq": entry.seq, "offsetMs": entry.offset_ms, "chunk": entry.chunk}) + b"\n"


def _pages(run: Run, batch: int) -> Iterator[list[LogEntry]]:
    page: list[LogEntry] = []
    for entry in iter_log(run, batch):
        page.append(entry)
        if len(page) == batch:
            yield page
            page = []
    if page:
        yield page


class _Writer:
    """Bytes per page of the log, for one format."""

    def __init__(self, run: Run, name: str) -> None:
        if name == LOG_FORMAT:
            self.renderer: TranscriptRenderer | None = None
        else:
            dialect = DIALECTS.get(name)
            if dialect is None:
                raise KeyError(name)
            self.renderer = dialect.factory(run)

    def page(self, entries: list[LogEntry]) -> bytes:
        if self.renderer is None:
            return b"".join(log_line(entry) for entry in entries)
        return self.renderer.render_many([entry.chunk for entry in entries])

    def end(self) -> bytes:
        return b"" if self.renderer is None else self.renderer.done()


def stream_transcript(run: Run, name: str, *, batch: int = PAGE) -> Iterator[bytes]:
    """The run's whole wire in format ``name``, a page of the log at a time.
    Raises ``KeyError`` for an unknown name (before reading anything)."""
    writer = _Writer(run, name)
    return _stream(writer, _pages(run, batch))


def _stream(writer: _Writer, pages: Iterator[list[LogEntry]]) -> Iterator[bytes]:
    for page in pages:
        data = writer.page(page)
        if data:
            yield data
    tail = writer.end()
    if tail:
        yield tail


def astream_transcript(run: Run, name: str, *, batch: int = PAGE) -> AsyncIterator[bytes]:
    """``stream_transcript`` for an ASGI response: each page is read in the
    database thread, nothing is read ahead."""
    writer = _Writer(run, name)
    return _astream(writer, _pages(run, batch))


_END: Final = object()


async def _astream(writer: _Writer, pages: Iterator[list[LogEntry]]) -> AsyncIterator[bytes]:
    def next_page() -> object:
        return next(pages, _END)

    while True:
        page = await sync_to_async(next_page)()
        if page is _END:
            break
        assert isinstance(page, list)
        data = writer.page(page)
        if data:
            yield data
    tail = writer.end()
    if tail:
        yield tail
