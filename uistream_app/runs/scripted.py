"""``ScriptedModel``: a deterministic model whose answers are written in
code, for tests (public in ``uistream_app.testing``) and benchmarks. It
keeps the model port's contract; see docs/operations.md ("The scripted
model") for the step format.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from ..protocol.events import (
    Finish,
    ReasoningDelta,
    ReasoningEnd,
    TextDelta,
    TextEnd,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from .failures import ScriptExhaustedError
from .messages import ModelMessage, ModelOptions, ToolSpec
from .model import ModelEvent

__all__ = ["ScriptedCall", "ScriptedModel", "ScriptedRequest", "Step", "call", "reasoning", "text", "usage"]


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    """A tool call in a script; ``ScriptedModel`` numbers the ones with no
    id (``call_0``, ``call_1``… over the model's life)."""

    name: str
    arguments: str
    id: str | None = None
    fragments: int = 1


@dataclass(frozen=True, slots=True)
class ScriptedRequest:
    """What one ``stream`` call was given."""

    messages: tuple[ModelMessage, ...]
    tools: tuple[ToolSpec, ...]
    options: ModelOptions | None


StepItem: TypeAlias = "ModelEvent | str | ScriptedCall | BaseException | Iterable[StepItem]"
Step: TypeAlias = "str | ScriptedCall | ModelEvent | Iterable[StepItem]"


def call(
    name: str, arguments: Mapping[str, Any] | str | None = None, *, id: str | None = None, fragments: int = 1
) -> ScriptedCall:
    """A tool call. ``arguments``: a mapping (sent as compact JSON) or the
    raw text (to script invalid JSON); ``fragments`` splits it into that
    many argument deltas."""
    raw = arguments if isinstance(arguments, str) else json.dumps(dict(arguments or {}), ensure_ascii=False)
    return ScriptedCall(name, raw, id, max(1, fragments))


def _split(content: str, words: bool) -> list[str]:
    if not words:
        return [content]
    out: list[str] = []
    for i, word in enumerate(content.split(" ")):
        out.append(word if i == 0 else " " + word)
    return [w for w in out if w]


def text(content: str, *, words: bool = False, end: bool = False) -> list[ModelEvent]:
    """Text deltas: one, or one per word (``words=True``); ``end`` adds a
    ``TextEnd``."""
    out: list[ModelEvent] = [TextDelta(w) for w in _split(content, words)]
    if end:
        out.append(TextEnd())
    return out


def reasoning(content: str, *, words: bool = False, end: bool = True) -> list[ModelEvent]:
    """Reasoning deltas, then a ``ReasoningEnd`` (unless ``end=False``)."""
    out: list[ModelEvent] = [ReasoningDelta(w) for w in _split(content, words)]
    if end:
        out.append(ReasoningEnd())
    return out


def usage(input_tokens: int | None = None, output_tokens: int | None = None) -> Usage:
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens)


_Compiled: TypeAlias = "list[ModelEvent | BaseException]"


class ScriptedModel:
    """A model that replays enqueued steps (docs/operations.md, "The
    scripted model")."""

    def __init__(self, *steps: Step, delay: float = 0.0, name: str = "scripted") -> None:
        self.name = name
        self.delay = delay
        self.requests: list[ScriptedRequest] = []
        self.open_streams = 0
        self._queue: deque[_Compiled] = deque()
        self._call_ids = 0
        self.enqueue(*steps)

    def enqueue(self, *steps: Step) -> ScriptedModel:
        """Add steps to the queue, one per future model call."""
        for step in steps:
            self._queue.append(self._compile(step))
        return self

    def enqueue_events(self, events: Sequence[ModelEvent | BaseException]) -> ScriptedModel:
        """Add one step replayed exactly as given (no shorthand, no implicit
        ``Finish``): the fast path for benchmarks and recorded runs."""
        self._queue.append(list(events))
        return self

    @property
    def remaining(self) -> int:
        """Steps still queued."""
        return len(self._queue)

    def _compile(self, step: Step) -> _Compiled:
        out: _Compiled = []
        # A lone text, call or event is a step of one item.
        single = isinstance(step, str | ScriptedCall | BaseException | ModelEvent)
        self._flatten([step] if single else step, out)  # type: ignore[arg-type]
        if not any(isinstance(e, Finish) for e in out):
            called = any(isinstance(e, ToolCall) for e in out)
            out.append(Finish("tool-calls" if called else "stop"))
        return out

    def _flatten(self, items: Iterable[StepItem], out: _Compiled) -> None:
        for item in items:
            if isinstance(item, str):
                out.append(TextDelta(item))
            elif isinstance(item, ScriptedCall):
                call_id = item.id
                if call_id is None:
                    call_id = f"call_{self._call_ids}"
                    self._call_ids += 1
                out.append(ToolCallStart(call_id, item.name))
                size = -(-len(item.arguments) // item.fragments) or 1
                for i in range(0, max(len(item.arguments), 1), size):
                    piece = item.arguments[i : i + size]
                    if piece:
                        out.append(ToolCallDelta(call_id, piece))
                out.append(ToolCall(call_id, item.name, item.arguments))
            elif isinstance(item, BaseException | ModelEvent):
                out.append(item)
            else:
                self._flatten(item, out)

    async def stream(
        self,
        messages: Sequence[ModelMessage],
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> AsyncGenerator[ModelEvent, None]:
        self.requests.append(ScriptedRequest(tuple(messages), tuple(tools), options))
        if not self._queue:
            raise ScriptExhaustedError(
                f"ScriptedModel {self.name!r} was called {len(self.requests)} times "
                f"but only {len(self.requests) - 1} steps were enqueued"
            )
        events = self._queue.popleft()
        delay = self.delay
        self.open_streams += 1
        try:
            for event in events:
                if delay:
                    await asyncio.sleep(delay)
                if isinstance(event, BaseException):
                    raise event
                yield event
        finally:
            self.open_streams -= 1
