"""A hand-written AG-UI agent as a source of events for the canonical log.

``SourceEventConverter`` maps one AG-UI event to source events
(``protocol.events``); ``agent_source`` runs an agent and yields them, so
its run is stored, resumable and served in either dialect. The mapping
("rule N" here): docs/agents.md, "From AG-UI events to the log".
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, Final

from .. import events as ev
from ..ui.encoder import MASKED_ERROR_TEXT
from .events import Event
from .handles import Agent, RunContext, run_agent
from .input import AGUIInput
from .renderer import CARRIER_TYPE, now_ms

__all__ = ["CARRIER_NAME", "SourceEventConverter", "agent_source"]

#: The data part name carrying AG-UI events (``data-agui-event``).
CARRIER_NAME: Final = CARRIER_TYPE.removeprefix("data-")


class SourceEventConverter:
    """AG-UI events in, source events out (the module's rules 1-5)."""

    def __init__(self) -> None:
        self._had_text = False
        self._had_reasoning = False
        self._calls: dict[str, tuple[str, list[str]]] = {}
        self._after_result = False

    def _split(self, out: list[ev.Event]) -> None:
        if self._after_result:
            self._after_result = False
            out.append(ev.StepFinished())

    def feed(self, event: Event) -> list[ev.Event]:
        """The source events one AG-UI event stands for (often one, sometimes none)."""
        kind = event.get("type")
        out: list[ev.Event] = []
        if kind == "TEXT_MESSAGE_START":
            self._split(out)
            self._had_text = False
        elif kind == "TEXT_MESSAGE_CONTENT":
            self._had_text = True
            out.append(ev.TextDelta(event["delta"]))
        elif kind == "TEXT_MESSAGE_END":
            if not self._had_text:
                out.append(ev.TextDelta(""))
            out.append(ev.TextEnd())
        elif kind == "REASONING_MESSAGE_START":
            self._split(out)
            self._had_reasoning = False
        elif kind == "REASONING_MESSAGE_CONTENT":
            self._had_reasoning = True
            out.append(ev.ReasoningDelta(event["delta"]))
        elif kind == "REASONING_MESSAGE_END":
            if not self._had_reasoning:
                out.append(ev.ReasoningDelta(""))
            out.append(ev.ReasoningEnd())
        elif kind in ("REASONING_START", "REASONING_END", "RUN_STARTED", "RUN_ERROR"):
            pass
        elif kind == "TOOL_CALL_START":
            self._split(out)
            self._calls[event["toolCallId"]] = (event["toolCallName"], [])
            out.append(ev.ToolCallStart(event["toolCallId"], event["toolCallName"]))
        elif kind == "TOOL_CALL_ARGS":
            call = self._calls.get(event["toolCallId"])
            if call is not None:
                call[1].append(event["delta"])
            out.append(ev.ToolCallDelta(event["toolCallId"], event["delta"]))
        elif kind == "TOOL_CALL_END":
            name, args = self._calls.pop(event["toolCallId"], ("", []))
            out.append(ev.ToolCall(event["toolCallId"], name, "".join(args)))
        elif kind == "TOOL_CALL_RESULT":
            metadata = event.get("metadata")
            flags: Any = metadata.get("uistream") if isinstance(metadata, dict) else None
            is_error = isinstance(flags, dict) and flags.get("outcome") == "error"
            out.append(ev.ToolResult(event["toolCallId"], event["content"], is_error=is_error))
            self._after_result = True
        elif kind == "RUN_FINISHED":
            if "result" in event:
                out.append(ev.Data(CARRIER_NAME, {"type": "RUN_FINISHED", "result": event["result"]}, transient=True))
            out.append(ev.Done())
        else:
            carried = {k: v for k, v in event.items() if k != "timestamp"}
            out.append(ev.Data(CARRIER_NAME, carried, transient=True))
        return out


class _End:
    pass


_END: Final = _End()


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def agent_source(
    agent: Agent,
    input: AGUIInput | None = None,
    *,
    thread_id: str | None = None,
    run_id: str | None = None,
    message_id: str | None = None,
    history: list[dict[str, Any]] | None = None,
    error_text: str = MASKED_ERROR_TEXT,
    expose_errors: bool = False,
    clock: Callable[[], int] | None = now_ms,
    on_event: Callable[[Event], None] | None = None,
) -> AsyncIterator[ev.Event]:
    """The source events of one run of ``agent`` (the module docstring).
    ``message_id`` should be the assistant message the run builds, so the
    handles' ids are the ids the renderer gives. ``on_event`` sees every
    event the handles emit (a log, a test); ``clock`` stamps them."""
    queue: asyncio.Queue[ev.Event | _End | _Failure] = asyncio.Queue()
    converter = SourceEventConverter()

    def sink(event: Event) -> None:
        if on_event is not None:
            on_event(event)
        for item in converter.feed(event):
            queue.put_nowait(item)

    context = RunContext(
        input, thread_id=thread_id, run_id=run_id, message_id=message_id, history=history, sink=sink, clock=clock
    )
    return _pump(agent, context, queue, error_text, expose_errors)


async def _pump(
    agent: Agent,
    context: RunContext,
    queue: asyncio.Queue[ev.Event | _End | _Failure],
    error_text: str,
    expose_errors: bool,
) -> AsyncGenerator[ev.Event, None]:
    async def drive() -> None:
        try:
            await run_agent(agent, context, error_text=error_text, expose_errors=expose_errors)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which raises it
            queue.put_nowait(_Failure(exc))
        else:
            queue.put_nowait(_END)

    task = asyncio.create_task(drive(), name=f"uistream-agui-agent-{context.run_id}")
    try:
        while True:
            item = await queue.get()
            if isinstance(item, _End):
                return
            if isinstance(item, _Failure):
                raise item.error
            yield item
    finally:
        if not task.done():
            context.cancel()
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)
