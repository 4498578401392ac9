"""When each chunk arrived: a run's log folded into a fixed-size picture.

``TimelineBuilder`` is fed the log in ``seq`` order and keeps only a fixed
number of counters (chunks per time bucket), the steps, and the first
``MAX_TOOL_WAITS`` tool calls, so a 20,000-chunk run costs what a short one
does. ``render_svg`` draws the result server-side:

* the time to first chunk (the wait before anything reached the client);
* the steps (``start-step`` … ``finish-step``), one band each;
* chunk arrival: a bar per time bucket, its height the chunks in it;
* tool waits: from a call's complete input (``tool-input-available``) to
  its output, error or denial; a call still waiting at the end of the log
  (an approval, a stopped run) runs to the end, dashed;
* the end: ``finish``, ``error`` or ``abort``, where it happened.

Every label and tooltip (tool names come from the model) goes through
``format_html``; colours are presentation attributes, not ``style``, so the
picture needs no inline CSS (CSP) and reads the same anywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from ..protocol.ui.chunks import TERMINAL_CHUNKS

__all__ = ["Span", "Timeline", "TimelineBuilder", "ToolWait", "format_ms", "render_svg"]

MAX_TOOL_WAITS: Final = 200
MAX_STEPS: Final = 500
MAX_LANES: Final = 8
COLUMNS: Final = 240


@dataclass
class Span:
    """A step on the timeline; ``end_ms`` is ``None`` while it is open."""

    start_ms: int
    end_ms: int | None
    label: str


@dataclass
class ToolWait:
    """A tool call from its input to its outcome (``end_ms`` ``None`` while it waits)."""

    call_id: str
    tool_name: str
    start_ms: int
    end_ms: int | None = None
    outcome: str = "waiting"  # output, error, denied, approval, waiting


@dataclass
class Timeline:
    """A run's chunk arrivals in fixed-width buckets, with its steps, tool waits and end."""

    span_ms: int
    bucket_ms: float
    buckets: list[int]
    first_chunk_ms: int | None
    steps: list[Span] = field(default_factory=list)
    tool_waits: list[ToolWait] = field(default_factory=list)
    more_tool_waits: int = 0
    more_steps: int = 0
    end: tuple[str, int] | None = None
    chunks: int = 0
    last_ms: int = 0

    @property
    def busiest(self) -> int:
        """The most chunks in one bucket (the picture's scale)."""
        return max(self.buckets, default=0)


def format_ms(ms: float | None) -> str:
    """``850 ms``, ``1.25 s``, ``2 min 5 s``; ``–`` for None."""
    if ms is None:
        return "–"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.3g} s"
    minutes, seconds = divmod(ms / 1000, 60)
    return f"{minutes:.0f} min {seconds:.0f} s"


class TimelineBuilder:
    """Feed ``(seq, offset_ms, chunk)`` in order; ``build()`` the picture.
    ``span_ms`` is the length of the run (its last offset, or its duration):
    buckets are laid out before the first chunk arrives."""

    def __init__(self, span_ms: int, *, columns: int = COLUMNS, first_chunk_ms: int | None = None) -> None:
        self.span_ms = max(int(span_ms), 1)
        self.columns = columns
        self.bucket_ms = self.span_ms / columns
        self.buckets = [0] * columns
        self.first_chunk_ms = first_chunk_ms
        self.steps: list[Span] = []
        self.more_steps = 0
        self.waits: dict[str, ToolWait] = {}
        self.more_waits = 0
        self.names: dict[str, str] = {}
        self.end: tuple[str, int] | None = None
        self.count = 0
        self.last_ms = 0

    def feed(self, seq: int, offset_ms: int, chunk: Any) -> None:
        self.count += 1
        self.last_ms = max(self.last_ms, offset_ms)
        if self.first_chunk_ms is None:
            self.first_chunk_ms = offset_ms
        index = min(int(offset_ms / self.bucket_ms), self.columns - 1) if offset_ms > 0 else 0
        self.buckets[index] += 1
        t = chunk.get("type") if isinstance(chunk, dict) else None
        if t == "start-step":
            if len(self.steps) < MAX_STEPS:
                self.steps.append(Span(offset_ms, None, f"step {len(self.steps) + 1}"))
            else:
                self.more_steps += 1
        elif t == "finish-step":
            if self.steps and self.steps[-1].end_ms is None and not self.more_steps:
                self.steps[-1].end_ms = offset_ms
        elif t == "tool-input-start":
            if len(self.names) < MAX_TOOL_WAITS * 2:
                self.names[str(chunk.get("toolCallId"))] = str(chunk.get("toolName", "?"))
        elif t in ("tool-input-available", "tool-input-error"):
            call_id = str(chunk.get("toolCallId"))
            if t == "tool-input-error":
                # The tool never ran: no wait, but the call is shown.
                self._wait(call_id, chunk, offset_ms, end=offset_ms, outcome="input error")
            else:
                self._wait(call_id, chunk, offset_ms)
        elif t in ("tool-output-available", "tool-output-error", "tool-output-denied"):
            wait = self.waits.get(str(chunk.get("toolCallId")))
            if wait is not None and wait.end_ms is None and not chunk.get("preliminary"):
                wait.end_ms = offset_ms
                wait.outcome = {"tool-output-available": "output", "tool-output-error": "error"}.get(t, "denied")
        elif t == "tool-approval-request":
            wait = self.waits.get(str(chunk.get("toolCallId")))
            if wait is not None and wait.end_ms is None:
                wait.outcome = "approval"
        elif t in TERMINAL_CHUNKS:
            self.end = (t, offset_ms)

    def _wait(self, call_id: str, chunk: dict[str, Any], at: int, *, end: int | None = None, outcome: str = "") -> None:
        if call_id in self.waits:
            return
        if len(self.waits) >= MAX_TOOL_WAITS:
            self.more_waits += 1
            return
        name = str(chunk.get("toolName") or self.names.get(call_id, "?"))
        self.waits[call_id] = ToolWait(call_id, name, at, end, outcome or "waiting")

    def build(self) -> Timeline:
        return Timeline(
            span_ms=max(self.span_ms, self.last_ms, 1),
            bucket_ms=self.bucket_ms,
            buckets=self.buckets,
            first_chunk_ms=self.first_chunk_ms,
            steps=self.steps,
            tool_waits=list(self.waits.values()),
            more_tool_waits=self.more_waits,
            more_steps=self.more_steps,
            end=self.end,
            chunks=self.count,
            last_ms=self.last_ms,
        )


# -- drawing ------------------------------------------------------------------------

WIDTH: Final = 960
LEFT: Final = 56
RIGHT: Final = 16
PLOT: Final = WIDTH - LEFT - RIGHT
LABEL_Y: Final = 11
STEP_Y: Final = 18
STEP_H: Final = 16
HIST_Y: Final = 40
HIST_H: Final = 64
LANE_H: Final = 16
#: Roughly the width of one character of the 10px labels.
CHAR_W: Final = 5.6

COLOURS: Final = {
    "bar": "#417690",
    "step": "#dcebf3",
    "step-alt": "#c4dce9",
    "wait": "#e0a526",
    "wait-output": "#5f9c4d",
    "wait-error": "#ba2121",
    "wait-denied": "#8a8a8a",
    "wait-input error": "#ba2121",
    "first": "#f3d3a3",
    "end-finish": "#2b7a2b",
    "end-error": "#ba2121",
    "end-abort": "#8a6d3b",
    "axis": "#666666",
    "text": "#333333",
}


def _ticks(span_ms: int) -> list[int]:
    """About six round tick positions (1, 2, 5 × 10^k ms) from 0 to span."""
    raw = span_ms / 6
    magnitude = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return list(range(0, span_ms + 1, int(step)))


def _lanes(waits: list[ToolWait], span_ms: int) -> list[tuple[int, ToolWait]]:
    """Each wait on the first lane free at its start (greedy interval
    colouring); waits beyond ``MAX_LANES`` share the last lane."""
    ends: list[float] = []
    placed = []
    for wait in sorted(waits, key=lambda w: (w.start_ms, w.call_id)):
        end = wait.end_ms if wait.end_ms is not None else span_ms
        lane = next((i for i, last in enumerate(ends) if last <= wait.start_ms), None)
        if lane is None:
            lane = min(len(ends), MAX_LANES - 1)
            if lane == len(ends):
                ends.append(end)
        ends[lane] = max(end, wait.start_ms + 1)
        placed.append((lane, wait))
    return placed


def _n(value: float) -> str:
    """A coordinate: one decimal at most (``format_html`` takes strings)."""
    return f"{value:.1f}".removesuffix(".0")


def render_svg(timeline: Timeline) -> SafeString:
    """The timeline as an inline ``<svg>`` element (escaped throughout)."""
    span = timeline.span_ms

    def x(ms: float) -> float:
        return LEFT + PLOT * min(max(ms, 0), span) / span

    placed = _lanes(timeline.tool_waits, span)
    lanes = 1 + max((lane for lane, _ in placed), default=-1)
    lanes_y = HIST_Y + HIST_H + 8
    axis_y = lanes_y + lanes * LANE_H + 6
    height = axis_y + 24
    text = COLOURS["text"]
    pieces: list[SafeString] = []

    # Steps.
    pieces.append(format_html('<text x="4" y="{}" font-size="10" fill="{}">steps</text>', STEP_Y + 12, text))
    for index, step in enumerate(timeline.steps):
        start = x(step.start_ms)
        width = max(x(step.end_ms if step.end_ms is not None else timeline.last_ms) - start, 1.0)
        label = (
            format_html(
                '<text x="{}" y="{}" font-size="10" fill="{}">{}</text>', _n(start + 3), STEP_Y + 12, text, step.label
            )
            if width > 40
            else ""
        )
        pieces.append(
            format_html(
                '<g class="step"><rect x="{}" y="{}" width="{}" height="{}" fill="{}" stroke="#7aa7c2"'
                ' stroke-width="0.5"><title>{}: {} → {}</title></rect>{}</g>',
                _n(start),
                STEP_Y,
                _n(width),
                STEP_H,
                COLOURS["step" if index % 2 == 0 else "step-alt"],
                step.label,
                format_ms(step.start_ms),
                format_ms(step.end_ms) if step.end_ms is not None else "open",
                label,
            )
        )

    # Time to first chunk.
    first = timeline.first_chunk_ms
    if first is not None:
        at = x(first)
        label = f"first chunk +{format_ms(first)}"
        pieces.append(
            format_html(
                '<g class="first-chunk"><rect x="{}" y="{}" width="{}" height="{}" fill="{}">'
                "<title>time to first chunk: {}</title></rect>"
                '<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="#b36b00" stroke-dasharray="3 2"/>'
                '<text x="{}" y="{}" font-size="10" fill="#b36b00">{}</text></g>',
                LEFT,
                HIST_Y,
                _n(max(at - LEFT, 0.5)),
                HIST_H,
                COLOURS["first"],
                format_ms(first),
                _n(at),
                _n(at),
                LABEL_Y + 2,
                HIST_Y + HIST_H,
                _n(min(at + 3, WIDTH - RIGHT - len(label) * CHAR_W)),
                LABEL_Y,
                label,
            )
        )

    # Chunk arrival.
    pieces.append(format_html('<text x="4" y="{}" font-size="10" fill="{}">chunks</text>', HIST_Y + 36, text))
    busiest = timeline.busiest
    column = PLOT / len(timeline.buckets) if timeline.buckets else PLOT
    bars = []
    for index, count in enumerate(timeline.buckets):
        if not count:
            continue
        h = max(HIST_H * count / busiest, 1.0)
        start_ms = index * timeline.bucket_ms
        bars.append(
            (
                _n(LEFT + index * column),
                _n(HIST_Y + HIST_H - h),
                _n(max(column - 0.5, 0.5)),
                _n(h),
                f"{count} chunk" if count == 1 else f"{count} chunks",
                format_ms(start_ms),
                format_ms(start_ms + timeline.bucket_ms),
            )
        )
    pieces.append(
        format_html(
            '<g class="arrivals" fill="{}">{}</g>',
            COLOURS["bar"],
            format_html_join("", '<rect x="{}" y="{}" width="{}" height="{}"><title>{}, {} – {}</title></rect>', bars),
        )
    )

    # Tool waits.
    if placed:
        pieces.append(format_html('<text x="4" y="{}" font-size="10" fill="{}">tools</text>', lanes_y + 11, text))
    # Bars first, so each label can go where it overlaps nothing in its
    # lane: inside its bar, after it, before it, or (the tooltip has it)
    # nowhere.
    taken: dict[int, list[tuple[float, float]]] = {}
    bars_at = []
    for lane, wait in placed:
        start = x(wait.start_ms)
        end_ms = wait.end_ms if wait.end_ms is not None else timeline.last_ms
        width = max(x(end_ms) - start, 2.0)
        taken.setdefault(lane, []).append((start, start + width))
        bars_at.append((lane, wait, start, width, end_ms))
    for lane, wait, start, width, end_ms in bars_at:
        y = lanes_y + lane * LANE_H
        if wait.outcome == "input error":
            duration = "input error"
        elif wait.end_ms is None:
            duration = "no result in the log"
        else:
            duration = format_ms(end_ms - wait.start_ms)
        label = f"{wait.tool_name} · {duration}"
        room = len(label) * CHAR_W + 6
        others = [other for other in taken[lane] if other != (start, start + width)]
        spot = None
        if width >= room:
            spot = (start + 4, "start", "#ffffff", (start, start + width))
        else:
            for left, anchor in ((start + width + 3, "start"), (start - 3 - room, "end")):
                extent = (left, left + room)
                clear = all(extent[1] <= a or extent[0] >= b for a, b in others)
                if clear and extent[0] >= LEFT and extent[1] <= WIDTH - RIGHT:
                    spot = (left if anchor == "start" else start - 3, anchor, text, extent)
                    break
        label_html = ""
        if spot is not None:
            label_x, anchor, fill, extent = spot
            taken[lane].append(extent)
            label_html = format_html(
                '<text x="{}" y="{}" font-size="10" text-anchor="{}" fill="{}">{}</text>',
                _n(label_x),
                y + 11,
                anchor,
                fill,
                label,
            )
        pieces.append(
            format_html(
                '<g class="tool-wait"><rect x="{}" y="{}" width="{}" height="{}" rx="2" fill="{}"'
                ' fill-opacity="0.85"{}><title>{} ({}): {}, {}</title></rect>{}</g>',
                _n(start),
                y + 2,
                _n(width),
                LANE_H - 4,
                COLOURS.get(f"wait-{wait.outcome}", COLOURS["wait"]),
                mark_safe(' stroke="#8a6d00" stroke-dasharray="3 2"') if wait.end_ms is None else "",
                wait.tool_name,
                wait.call_id,
                wait.outcome,
                duration,
                label_html,
            )
        )

    # The end.
    if timeline.end is not None:
        kind, at_ms = timeline.end
        at = x(at_ms)
        colour = COLOURS.get(f"end-{kind}", COLOURS["axis"])
        label = f"{kind} +{format_ms(at_ms)}"
        pieces.append(
            format_html(
                '<g class="end"><line x1="{}" x2="{}" y1="{}" y2="{}" stroke="{}" stroke-width="2"/>'
                '<text x="{}" y="{}" font-size="10" text-anchor="end" fill="{}">{}</text></g>',
                _n(at),
                _n(at),
                LABEL_Y + 2,
                axis_y,
                colour,
                _n(max(at - 3, LEFT + len(label) * CHAR_W)),
                LABEL_Y,
                colour,
                label,
            )
        )

    # The axis.
    ticks = [(_n(x(t)), _n(x(t)), axis_y, axis_y + 4, _n(x(t)), axis_y + 15, format_ms(t)) for t in _ticks(span)]
    pieces.append(
        format_html(
            '<g class="axis" stroke="{}" fill="{}" font-size="10"><line x1="{}" x2="{}" y1="{}" y2="{}"/>{}</g>',
            COLOURS["axis"],
            COLOURS["axis"],
            LEFT,
            LEFT + PLOT,
            axis_y,
            axis_y,
            format_html_join(
                "",
                '<line x1="{}" x2="{}" y1="{}" y2="{}"/>'
                '<text x="{}" y="{}" text-anchor="middle" stroke="none">{}</text>',
                ticks,
            ),
        )
    )

    summary = f"{timeline.chunks} chunks over {format_ms(timeline.last_ms)}"
    return format_html(
        '<svg class="uistream-timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {}" width="{}" height="{}"'
        ' role="img" aria-label="{}" font-family="sans-serif"><title>{}</title>{}</svg>',
        WIDTH,
        height,
        WIDTH,
        height,
        summary,
        summary,
        mark_safe("".join(pieces)),  # every piece is format_html's output
    )
