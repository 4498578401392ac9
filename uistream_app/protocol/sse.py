"""Server-Sent Events framing and an incremental parser, with no I/O.

What is written and how it is read back (``data:`` events, comments,
``[DONE]``, the WHATWG parsing rules) are the SSE rules of
docs/protocols.md. ``SSEParser.feed`` takes bytes split anywhere, including
inside a UTF-8 sequence or between ``\\r`` and ``\\n``.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Final

__all__ = [
    "DONE",
    "DONE_FRAME",
    "KEEPALIVE_FRAME",
    "SSEEvent",
    "SSEParser",
    "comment_frame",
    "data_frame",
    "parse_sse",
]

DONE: Final = "[DONE]"
DONE_FRAME: Final = b"data: [DONE]\n\n"
KEEPALIVE_FRAME: Final = b": keep-alive\n\n"


def data_frame(payload: bytes) -> bytes:
    """One event carrying ``payload`` (UTF-8 bytes). A payload with line
    breaks is split over several ``data:`` lines so it arrives intact."""
    if b"\n" in payload or b"\r" in payload:
        lines = payload.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        return b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"
    return b"data: " + payload + b"\n\n"


def comment_frame(text: str = "keep-alive") -> bytes:
    """A comment event: clients ignore it, proxies see bytes flowing."""
    if "\n" in text or "\r" in text:
        raise ValueError("an SSE comment is one line")
    return b": " + text.encode() + b"\n\n"


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event: its joined ``data`` lines and its fields."""

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


class SSEParser:
    """Feed bytes, get the events completed by them.

    ``comments`` collects comment lines (without the colon) for callers that
    care about keep-alives; ``close()`` reports whether the stream ended in
    the middle of an event (the SDK would drop it).
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self._buffer = ""
        self._pending_cr = False
        self._data: list[str] = []
        self._has_data = False
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None
        self._started = False
        self._dirty = False
        self.comments: list[str] = []

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events that ``chunk`` (bytes split anywhere) completes."""
        text = self._decoder.decode(chunk)
        if not self._started and text:
            self._started = True
            if text.startswith("\ufeff"):
                text = text[1:]
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]
        self._pending_cr = False
        self._buffer += text
        out: list[SSEEvent] = []
        buffer = self._buffer
        start = 0
        n = len(buffer)
        while start < n:
            nl = buffer.find("\n", start)
            cr = buffer.find("\r", start)
            if nl == -1 and cr == -1:
                break
            if cr != -1 and (nl == -1 or cr < nl):
                end = cr
                if cr + 1 < n:
                    nxt = cr + 2 if buffer[cr + 1] == "\n" else cr + 1
                else:
                    # A lone CR at the end: the LF may be in the next read.
                    self._pending_cr = True
                    nxt = cr + 1
            else:
                end = nl
                nxt = nl + 1
            self._line(buffer[start:end], out)
            start = nxt
        self._buffer = buffer[start:]
        return out

    def close(self) -> bool:
        """End of input. True if the stream ended cleanly (no event cut off
        before its blank line, no partial UTF-8 sequence)."""
        try:
            self._decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            return False
        return not self._buffer and not self._dirty

    def _line(self, line: str, out: list[SSEEvent]) -> None:
        if not line:
            if self._has_data:
                out.append(SSEEvent("\n".join(self._data), self._event or "message", self._id, self._retry))
            self._data = []
            self._has_data = False
            self._event = ""
            self._dirty = False
            return
        self._dirty = True
        if line[0] == ":":
            self.comments.append(line[1:].lstrip(" ") if line.startswith(": ") else line[1:])
            self._dirty = self._has_data
            return
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
            self._has_data = True
        elif field == "event":
            self._event = value
        elif field == "id":
            if "\0" not in value:
                self._id = value
        elif field == "retry" and value.isdigit():
            self._retry = int(value)


def parse_sse(body: bytes) -> list[SSEEvent]:
    """Every event of a complete body. Raises ``ValueError`` when the body
    ends inside an event or a UTF-8 sequence."""
    parser = SSEParser()
    events = parser.feed(body)
    if not parser.close():
        raise ValueError("the stream ends in the middle of an event")
    return events
