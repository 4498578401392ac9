"""Per-run usage limits: what one run may spend before it is cut
(docs/operations.md, "Usage limits and budgets").

A view lists ``RunUsageLimit`` objects as it lists its throttles
(``usage_limits``, default ``UISTREAM["USAGE_LIMITS"]``); the runner wraps
the run's event source in ``limit_usage``, which sees every event the run
makes: the ``Usage`` of each model call (input and output tokens), each
tool call the model asks for, and the clock (wall time, a deadline from the
run's start). A run that crosses a limit ends with an ``error`` chunk whose
text names the limit, stored ``failed`` with ``error_code="usage_limit"``.

Token limits are checked when a model call reports its usage (the end of
each step, as pydantic-ai's ``UsageLimits`` does): a run stops before its
next model call, not in the middle of a sentence. A tool call over the
limit is refused before it executes. Pure Python: no Django here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from ..protocol.events import Event, ToolCall, Usage

__all__ = ["RunUsageLimit", "UsageLimitExceeded", "limit_usage", "load_usage_limits"]


@dataclass(frozen=True)
class RunUsageLimit:
    """What one run may spend; None: no limit on that measure.
    ``total_tokens`` is input plus output; ``wall_seconds`` runs from the
    run's start (its first event pulled)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    tool_calls: int | None = None
    wall_seconds: float | None = None


class UsageLimitExceeded(Exception):
    """A run crossed one of its ``RunUsageLimit``s. ``error_code`` is what
    the run is stored with; ``client_text`` what its ``error`` chunk says
    (the limit's name: nothing private)."""

    error_code = "usage_limit"

    def __init__(self, limit: str, allowed: float, used: float) -> None:
        self.limit = limit
        self.allowed = allowed
        self.used = used
        self.client_text = f"usage_limit: the run reached its {limit} limit ({_number(allowed)})"
        super().__init__(f"{self.client_text}; used {_number(used)}")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def load_usage_limits(value: Iterable[Any]) -> list[RunUsageLimit]:
    """``RunUsageLimit`` objects from a view's list or the setting (objects,
    or dicts of their fields)."""
    out: list[RunUsageLimit] = []
    names = {f.name for f in fields(RunUsageLimit)}
    for item in value:
        if isinstance(item, RunUsageLimit):
            out.append(item)
        elif isinstance(item, dict) and set(item) <= names:
            out.append(RunUsageLimit(**item))
        else:
            raise TypeError(f"a usage limit is a RunUsageLimit or a dict of its fields, not {item!r}")
    return out


class _Meter:
    def __init__(self, limits: Sequence[RunUsageLimit]) -> None:
        self.limits = limits
        self.input_tokens = 0
        self.output_tokens = 0
        self.tool_calls = 0

    def usage(self, event: Usage) -> None:
        self.input_tokens += event.input_tokens or 0
        self.output_tokens += event.output_tokens or 0
        for limit in self.limits:
            for name, used in (
                ("input_tokens", self.input_tokens),
                ("output_tokens", self.output_tokens),
                ("total_tokens", self.input_tokens + self.output_tokens),
            ):
                allowed = getattr(limit, name)
                if allowed is not None and used > allowed:
                    raise UsageLimitExceeded(name, allowed, used)

    def tool_call(self) -> None:
        self.tool_calls += 1
        for limit in self.limits:
            if limit.tool_calls is not None and self.tool_calls > limit.tool_calls:
                raise UsageLimitExceeded("tool_calls", limit.tool_calls, self.tool_calls)


async def limit_usage(source: AsyncIterator[Event], limits: Sequence[RunUsageLimit]) -> AsyncGenerator[Event, None]:
    """``source``'s events until one of ``limits`` is crossed, then
    ``UsageLimitExceeded`` (the stream adapters turn it into the ``error``
    chunk). The source is closed either way: its model call and tools end
    with it."""
    meter = _Meter(limits)
    walls = [limit.wall_seconds for limit in limits if limit.wall_seconds is not None]
    wall = min(walls) if walls else None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wall if wall is not None else None
    iterator = aiter(source)
    try:
        while True:
            try:
                if deadline is None:
                    event = await anext(iterator)
                else:
                    async with asyncio.timeout_at(deadline):
                        event = await anext(iterator)
            except StopAsyncIteration:
                return
            except TimeoutError:
                if deadline is not None and loop.time() >= deadline:
                    raise UsageLimitExceeded("wall_seconds", wall or 0, wall or 0) from None
                raise
            cls = type(event)
            if cls is ToolCall and not event.provider_executed:  # type: ignore[union-attr]
                meter.tool_call()  # refused before the client or the tools see it
            yield event
            if cls is Usage:
                # After it went by, so the encoder's total (the stored usage) holds it.
                meter.usage(event)  # type: ignore[arg-type]
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()
