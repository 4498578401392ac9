"""``RunRecorder`` and its ``LogWriter``: batching, group commit, offsets,
the stored message, the cancellation path, failures; reading the log back
(``iter_log``, ``read_log``, ``load_log``) and ``write_log``.

Run on SQLite by default and on PostgreSQL with ``DATABASE_URL`` set.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import math
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from django.db import OperationalError, connection, connections
from django.test.utils import CaptureQueriesContext

from uistream_app.models import ChunkBatch, Conversation, Message, Run
from uistream_app.protocol import events as ev
from uistream_app.protocol.ui.chunks import Chunk
from uistream_app.protocol.ui.encoder import UIMessageEncoder
from uistream_app.protocol.ui.reader import read_ui_message
from uistream_app.recording import (
    MAX_ROW_CHUNKS,
    WRITER_EXECUTOR,
    LogEntry,
    LogWriter,
    RunRecorder,
    iter_log,
    load_log,
    read_log,
    write_log,
)

from .db import amake_turn, make_turn, worker_queries


@pytest_asyncio.fixture(autouse=True)
async def _close_worker_connections() -> AsyncIterator[None]:
    """The thread ``sync_to_async`` runs the ORM in keeps its own connection
    between tests; PostgreSQL won't drop the test database while it's open."""
    yield
    await sync_to_async(connections.close_all)()


class FakeClock:
    """A monotonic clock that moves only when told."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, ms: float) -> None:
        self.now += ms / 1000


# -- the standard benchmark run ------------------------------------------------------
#
# The shape of bench/workload.json (the standard workload; rebuilt here
# without it): 50 model steps, each reasoning (20 deltas) then text (200
# deltas); steps 1-49 also call two tools with 10 argument fragments each and
# get their results. Encoded, that is 12,576 chunks (12,577 SSE events with
# [DONE]).

WORDS = ["the", "run", "streams", "«quoted»", 'a "quote"', "tab\there", "line\n", "back\\slash", "ünïcode", "🚀"]


def benchmark_batches(steps: int = 50) -> Iterator[list[Chunk]]:
    """The chunks of the standard run, one list per source event (as the
    run task hands them to the recorder)."""
    encoder = UIMessageEncoder("msg-assistant")
    word = 0

    def words(n: int) -> str:
        nonlocal word
        word += n
        return " ".join(WORDS[(word + i) % len(WORDS)] for i in range(n)) + " "

    def events() -> Iterator[ev.Event]:
        for step in range(steps):
            for _ in range(20):
                yield ev.ReasoningDelta(words(7))
            yield ev.ReasoningEnd()
            for _ in range(200):
                yield ev.TextDelta(words(2))
            yield ev.TextEnd()
            if step < steps - 1:
                calls = [(f"call_{step}_{i}", "get_weather" if i == 0 else "search") for i in range(2)]
                for call_id, name in calls:
                    arguments = json.dumps({"query": words(6), "step": step})
                    yield ev.ToolCallStart(call_id, name)
                    size = math.ceil(len(arguments) / 10)
                    for i in range(10):
                        yield ev.ToolCallDelta(call_id, arguments[i * size : (i + 1) * size])
                    yield ev.ToolCall(call_id, name, arguments)
                for call_id, name in calls:
                    yield ev.ToolResult(call_id, {"ok": True, "data": words(20)}, tool_name=name)
                yield ev.Finish("tool-calls")
            else:
                yield ev.Finish("stop")
            yield ev.StepFinished(step)
        yield ev.Done()

    for event in events():
        batch = encoder.feed(event)
        if batch:
            yield batch


def flat(batches: list[list[Chunk]]) -> list[Chunk]:
    return [chunk for batch in batches for chunk in batch]


def test_benchmark_run_has_the_standard_shape() -> None:
    chunks = flat(list(benchmark_batches()))
    assert len(chunks) == 12_576
    assert sum(c["type"] == "finish-step" for c in chunks) == 50
    assert sum(c["type"] == "text-delta" for c in chunks) == 10_000


def stored_log(run: Run) -> list[LogEntry]:
    return read_log(run)


astored_log = sync_to_async(stored_log)


async def refreshed(obj: Any) -> Any:
    await obj.arefresh_from_db()
    return obj


def fail_inserts(*errors: Exception) -> Callable[[str], None]:
    """A ``before`` hook that makes the next INSERTs raise ``errors``, the
    last one first."""
    pending = list(errors)

    def before(sql: str) -> None:
        if pending and sql.lstrip().upper().startswith("INSERT"):
            raise pending.pop()

    return before


def stall_inserts(seconds: float, started: threading.Event | None = None) -> Callable[[str], None]:
    """A ``before`` hook that holds every INSERT for ``seconds`` (in the
    writer thread), setting ``started`` when one begins."""

    def before(sql: str) -> None:
        if sql.lstrip().upper().startswith("INSERT"):
            if started is not None:
                started.set()
            time.sleep(seconds)

    return before


# -- batching --------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_benchmark_run_writes_at_most_one_statement_per_50_chunks() -> None:
    """The real clock, the default interval, a producer as fast as it gets
    that lets the event loop run after each source event (as a run does)."""
    batches = list(benchmark_batches())
    chunks = flat(batches)
    run, message = await amake_turn()
    recorder = RunRecorder(run, message)
    started = time.perf_counter()
    async with worker_queries() as log:
        for batch in batches:
            recorder.add(batch)
            await asyncio.sleep(0)
        await recorder.finish("completed", usage={"inputTokens": 10})
    elapsed = time.perf_counter() - started
    budget = len(chunks) // 50 + 10
    print(
        f"\n{len(chunks)} chunks: {log.writes} writes ({log.count('INSERT')} INSERT, {log.count('UPDATE')} UPDATE),"
        f" {len(log.sql)} statements in all, {elapsed:.2f}s on {connection.vendor}"
    )
    assert len(log.sql) <= budget
    assert log.count("SELECT") == 0

    run = await refreshed(run)
    assert run.status == Run.Status.COMPLETED
    assert run.chunk_count == len(chunks)
    assert run.finish_reason == "stop"
    assert run.usage == {"inputTokens": 10}
    assert [c.chunk for c in await astored_log(run)] == chunks
    assert await load_log(run) == chunks
    message = await refreshed(message)
    assert message.as_ui_message() == read_ui_message(chunks)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_adding_never_waits_for_the_database() -> None:
    """``add`` is synchronous and returns with the database write still
    ahead: even a step end (written at once) is written by the writer's
    task, not by the caller."""
    run, message = await amake_turn()
    recorder = RunRecorder(run, message, clock=FakeClock())
    async with worker_queries(before=stall_inserts(0.2)) as log:
        recorder.add(MIXED[:11])  # ends with finish-step
        assert log.sql == []
        assert recorder.stored_count == 0
        await recorder.flush()
    assert recorder.stored_count == 11
    assert (log.count("INSERT"), log.count("UPDATE")) == (1, 1)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_step_end_is_written_at_once_other_chunks_wait_for_the_interval() -> None:
    run, message = await amake_turn()
    # An interval no test outlives: only a step end can trigger a write.
    recorder = RunRecorder(run, message, flush_every_ms=3_600_000)
    writer = LogWriter.for_running_loop()
    async with worker_queries() as log:
        recorder.add(MIXED[:10])  # a whole step but its finish-step
        for _ in range(20):
            await asyncio.sleep(0)
        assert log.sql == []
        recorder.add(MIXED[10:11])  # finish-step
        await writer.drain()
        assert (log.count("INSERT"), recorder.stored_count) == (1, 11)
        recorder.add(MIXED[11:17])
        for _ in range(20):
            await asyncio.sleep(0)
        assert (log.count("INSERT"), recorder.stored_count) == (1, 11)
        recorder.add(MIXED[17:])  # finish-step and finish: held for the run's end
        await recorder.finish("completed")
    assert (log.count("INSERT"), recorder.stored_count) == (2, len(MIXED))
    assert await load_log(run) == MIXED


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_slow_producer_is_written_after_the_interval_without_another_add() -> None:
    """Chunks that are not a step end wait for the interval, then the
    writer's timer stores them: no later ``add`` or ``flush`` is needed."""
    run, message = await amake_turn()
    recorder = RunRecorder(run, message, flush_every_ms=50)
    loop = asyncio.get_running_loop()
    async with worker_queries() as log:
        added_at = loop.time()
        recorder.add(MIXED[:3])
        await LogWriter.for_running_loop().drain()
        written_at = loop.time()
    assert log.count("INSERT") == 1
    assert recorder.stored_count == 3
    assert written_at - added_at >= 0.05  # it waited for the interval
    assert await load_log(run) == MIXED[:3]


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_flush_writes_once_per_call() -> None:
    run, message = await amake_turn()
    recorder = RunRecorder(run, message, clock=FakeClock())
    async with worker_queries() as log:
        await recorder.flush()
        assert log.sql == []
        recorder.add([{"type": "start"}, {"type": "start-step"}])
        assert log.sql == []
        await recorder.flush()
        await recorder.flush()  # nothing new: no write
    assert (log.count("INSERT"), log.count("UPDATE")) == (1, 1)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_runs_of_one_process_share_their_writes() -> None:
    """Group commit: the writer stores every recorder's pending rows in
    one transaction, one INSERT for all of them."""
    recorders = []
    for i in range(5):
        run, message = await amake_turn(chat_id=f"chat-{i}", message_id=f"msg-{i}")
        recorders.append(RunRecorder(run, message, flush_every_ms=3_600_000))
    async with worker_queries() as log:
        for recorder in recorders:
            recorder.add(MIXED[:11])  # each ends a step: each asks for a write
        await LogWriter.for_running_loop().drain()
    assert log.count("INSERT") == 1
    for recorder in recorders:
        assert await load_log(recorder.run) == MIXED[:11]
        assert (await refreshed(recorder.run)).chunk_count == 11


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_runs_step_end_is_stored_at_once_and_the_others_rows_when_due() -> None:
    """A step's end is stored at once, without the rows of other runs
    that are not due yet (at the end of a burst, every run's end would
    otherwise take every run's rows); those rows are not lost: they are
    stored when due (here: asked for), together."""
    ending_run, ending_message = await amake_turn(chat_id="chat-end", message_id="msg-end")
    ending = RunRecorder(ending_run, ending_message, flush_every_ms=3_600_000)
    others = []
    for i in range(3):
        run, message = await amake_turn(chat_id=f"chat-{i}", message_id=f"msg-{i}")
        others.append(RunRecorder(run, message, flush_every_ms=3_600_000))
    for recorder in others:
        recorder.add(MIXED[:3])  # no step end: due in an hour
    ending.add(MIXED[:11])  # ends a step: stored now
    await ending.flush()
    assert await load_log(ending_run) == MIXED[:11]
    for recorder in others:
        assert await load_log(recorder.run) == []
    async with worker_queries() as log:
        await asyncio.gather(*(recorder.flush() for recorder in others))
    assert log.count("INSERT") == 1
    for recorder in others:
        assert await load_log(recorder.run) == MIXED[:3]
        assert (await refreshed(recorder.run)).chunk_count == 3


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_one_runs_failure_is_not_the_others() -> None:
    """A shared write that fails is retried run by run: the run whose write
    fails keeps its rows pending (and its waiter gets the error); the
    others are stored."""
    first, first_message = await amake_turn(chat_id="chat-a", message_id="msg-a")
    second, second_message = await amake_turn(chat_id="chat-b", message_id="msg-b")
    failing = RunRecorder(first, first_message, clock=FakeClock())
    fine = RunRecorder(second, second_message, clock=FakeClock())
    before = fail_inserts(OperationalError("shared"), OperationalError("the first run's own"))

    failing.add(MIXED[:3])
    fine.add(MIXED[:4])
    async with worker_queries(before=before):
        outcomes = await asyncio.gather(failing.flush(), fine.flush(), return_exceptions=True)
    assert isinstance(outcomes[0], OperationalError)
    assert outcomes[1] is None
    assert await load_log(second) == MIXED[:4]
    assert await load_log(first) == []
    assert (failing.stored_count, failing.chunk_count) == (0, 3)
    await failing.finish("completed")
    assert await load_log(first) == MIXED[:3]


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_concurrent_flushes_write_each_chunk_once() -> None:
    run, message = await amake_turn()
    recorder = RunRecorder(run, message, clock=FakeClock())
    recorder.add([{"type": "start"}, {"type": "start-step"}])
    await asyncio.gather(recorder.flush(), recorder.flush(), recorder.flush())
    recorder.add([{"type": "text-start", "id": "text-0"}])
    await asyncio.gather(recorder.flush(), recorder.finish("completed"))
    assert [c.seq for c in await astored_log(run)] == [0, 1, 2]
    assert (await refreshed(run)).chunk_count == 3


# -- offsets and timing ----------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_offsets_are_monotonic_and_agree_with_the_timestamps() -> None:
    run, message = await amake_turn()
    clock = FakeClock()
    recorder = RunRecorder(run, message, flush_every_ms=50, clock=clock)
    clock.advance(120)
    recorder.add([{"type": "start"}, {"type": "start-step"}])
    for i, step in enumerate([30, 0, 70, 5, 400]):
        clock.advance(step)
        recorder.add([{"type": "text-start", "id": f"text-{i}"}, {"type": "text-end", "id": f"text-{i}"}])
    clock.advance(-1)  # a misbehaving clock does not make offsets go back
    recorder.add([{"type": "finish-step"}])
    clock.advance(2000)
    await recorder.finish("completed")

    log = await astored_log(run)
    offsets = [row.offset_ms for row in log]
    assert [row.seq for row in log] == list(range(len(log)))
    assert offsets == sorted(offsets)
    base = offsets[0] - 120
    assert 0 <= base < 5_000  # the moments between the run row and the recorder
    assert [o - base for o in offsets] == [120, 120, 150, 150, 150, 150, 220, 220, 225, 225, 625, 625, 625]
    run = await refreshed(run)
    assert run.first_chunk_at == run.started_at + timedelta(milliseconds=offsets[0])
    assert run.time_to_first_chunk == timedelta(milliseconds=offsets[0])
    assert run.duration == timedelta(milliseconds=base + 2624)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_first_chunk_at_is_stored_with_the_first_flush() -> None:
    run, message = await amake_turn()
    recorder = RunRecorder(run, message, clock=FakeClock())
    recorder.add([{"type": "start"}])
    assert (await refreshed(run)).first_chunk_at is None
    await recorder.flush()
    stored = await refreshed(run)
    assert stored.first_chunk_at is not None
    assert stored.first_chunk_at == recorder.run.first_chunk_at


async def _turns_of_the_loop(n: int) -> None:
    """Let the event loop run ``n`` times: what a runner does between its
    stream's last chunk and its ``finish()`` (the broker's flush, the
    finishing task)."""
    for _ in range(n):
        await asyncio.sleep(0)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_stream_that_ended_is_stored_with_its_outcome_in_one_write() -> None:
    """The last chunk (``finish``) asks for a write at once, as a step end
    does, but the run's ``finish()`` follows: the writer waits for it, and
    the log, the message and the run's end are one transaction, the run
    row updated once."""
    run, message = await amake_turn()
    recorder = RunRecorder(run, message, flush_every_ms=3_600_000)
    async with worker_queries() as log:
        recorder.add(MIXED)
        await _turns_of_the_loop(10)
        await recorder.finish("completed")
    run_updates = [sql for sql in log.sql if sql.lstrip().upper().startswith('UPDATE "UISTREAM_APP_RUN"')]
    assert len(run_updates) == 1
    assert log.count("INSERT") == 1
    assert await load_log(run) == MIXED
    stored = await refreshed(run)
    assert (stored.status, stored.chunk_count) == ("completed", len(MIXED))


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_stream_that_ended_is_stored_within_the_interval_if_its_outcome_never_comes() -> None:
    """Waiting for ``finish()`` is bounded: a run that never gets there
    (its task killed between the two) has its last chunks stored within
    ``flush_every_ms`` all the same."""
    run, message = await amake_turn()
    recorder = RunRecorder(run, message, flush_every_ms=50)
    recorder.add(MIXED)
    await LogWriter.for_running_loop().drain()
    assert await load_log(run) == MIXED
    stored = await refreshed(run)
    assert (stored.status, stored.chunk_count) == ("running", len(MIXED))


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_flush_after_the_last_chunk_is_not_held_back() -> None:
    """``flush()`` asks for the chunks now: it is not held for a
    ``finish()`` (an hour's interval here would be an hour's wait)."""
    run, message = await amake_turn()
    recorder = RunRecorder(run, message, flush_every_ms=3_600_000)
    recorder.add(MIXED)
    await recorder.flush()
    assert await load_log(run) == MIXED


# -- the stored message ------------------------------------------------------------------


MIXED: list[Chunk] = [
    {"type": "start", "messageId": "msg-assistant", "messageMetadata": {"model": "scripted"}},
    {"type": "start-step"},
    {"type": "reasoning-start", "id": "reasoning-0"},
    {"type": "reasoning-delta", "id": "reasoning-0", "delta": "Let me look"},
    {"type": "reasoning-end", "id": "reasoning-0"},
    {"type": "tool-input-start", "toolCallId": "call_0", "toolName": "get_weather"},
    {"type": "tool-input-delta", "toolCallId": "call_0", "inputTextDelta": '{"city": "Pa'},
    {"type": "tool-input-delta", "toolCallId": "call_0", "inputTextDelta": 'ris"}'},
    {"type": "tool-input-available", "toolCallId": "call_0", "toolName": "get_weather", "input": {"city": "Paris"}},
    {"type": "tool-output-available", "toolCallId": "call_0", "output": {"sky": "sunny"}},
    {"type": "finish-step"},
    {"type": "start-step"},
    {"type": "text-start", "id": "text-0"},
    {"type": "text-delta", "id": "text-0", "delta": "It is "},
    {"type": "text-delta", "id": "text-0", "delta": "sunny."},
    {"type": "text-end", "id": "text-0"},
    {"type": "data-weather", "id": "w1", "data": {"temp": 21}},
    {"type": "finish-step"},
    {"type": "finish", "finishReason": "stop", "messageMetadata": {"tokens": 42}},
]


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_finish_stores_the_message_the_reader_builds() -> None:
    run, message = await amake_turn(model="scripted")
    recorder = RunRecorder(run, message)
    for chunk in MIXED:
        recorder.add([chunk])
    expected = read_ui_message(MIXED)
    assert recorder.message_snapshot == expected
    await recorder.finish("completed")

    message = await refreshed(message)
    assert message.as_ui_message() == expected
    assert message.metadata == {"model": "scripted", "tokens": 42}
    assert message.parts[-1] == {"type": "data-weather", "id": "w1", "data": {"temp": 21}}
    assert recorder.message.parts == expected["parts"]
    run = await refreshed(run)
    assert (run.status, run.finish_reason, run.chunk_count) == ("completed", "stop", len(MIXED))
    assert run.finished_at is not None
    assert run.first_chunk_at is not None
    assert run.started_at <= run.first_chunk_at <= run.finished_at
    assert recorder.run.status == "completed"
    conversation = await Conversation.objects.aget(pk=run.conversation_id)
    assert conversation.updated_at == run.finished_at


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_message_with_parts_is_continued() -> None:
    """An approval answered: the run continues the stored assistant message."""
    earlier = read_ui_message(MIXED[:11])
    run, message = await amake_turn(parts=earlier["parts"])
    recorder = RunRecorder(run, message)
    for chunk in [{"type": "start", "messageId": "msg-assistant"}, *MIXED[11:]]:
        recorder.add([chunk])
    await recorder.finish("completed")
    message = await refreshed(message)
    continued = read_ui_message(
        MIXED[11:], message={"id": "msg-assistant", "role": "assistant", "parts": earlier["parts"]}
    )
    assert message.parts == continued["parts"]
    assert message.parts[: len(earlier["parts"])] == earlier["parts"]
    assert len(await load_log(run)) == len(MIXED) - 10


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_finish_reason_and_usage_arguments_win() -> None:
    run, message = await amake_turn(usage={"inputTokens": 1})
    recorder = RunRecorder(run, message)
    recorder.add(MIXED)
    await recorder.finish("completed", finish_reason="length")
    run = await refreshed(run)
    assert run.finish_reason == "length"
    assert run.usage == {"inputTokens": 1}  # kept when not given


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("status", "tail", "finish_reason"),
    [
        ("completed", [{"type": "finish-step"}, {"type": "finish", "finishReason": "stop"}], "stop"),
        ("failed", [{"type": "text-end", "id": "text-0"}, {"type": "error", "errorText": "An error occurred."}], ""),
        ("cancelled", [{"type": "text-end", "id": "text-0"}, {"type": "abort"}], ""),
        ("stopped", [{"type": "text-end", "id": "text-0"}, {"type": "abort", "reason": "stopped"}], ""),
    ],
)
async def test_each_status_is_stored_with_the_message_so_far(
    status: str, tail: list[Chunk], finish_reason: str
) -> None:
    run, message = await amake_turn()
    recorder = RunRecorder(run, message, clock=FakeClock())
    head: list[Chunk] = [
        {"type": "start", "messageId": "msg-assistant"},
        {"type": "start-step"},
        {"type": "text-start", "id": "text-0"},
        {"type": "text-delta", "id": "text-0", "delta": "Half an answ"},
    ]
    recorder.add(head)
    recorder.add(tail)
    await recorder.finish(
        status, error_code="ProviderError" if status == "failed" else "", error_detail="secret detail"
    )
    run = await refreshed(run)
    assert (run.status, run.finish_reason, run.chunk_count) == (status, finish_reason, 6)
    assert run.error_detail == "secret detail"
    assert run.error_code == ("ProviderError" if status == "failed" else "")
    message = await refreshed(message)
    assert message.parts[-1]["text"] == "Half an answ"
    assert message.as_ui_message() == read_ui_message(head + tail)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_finish_checks_the_status_and_clips_long_fields() -> None:
    run, message = await amake_turn()
    recorder = RunRecorder(run, message)
    with pytest.raises(ValueError, match="running"):
        await recorder.finish("running")
    with pytest.raises(ValueError, match="done"):
        await recorder.finish("done")
    await recorder.finish("failed", finish_reason="x" * 50, error_code="E" * 100)
    run = await refreshed(run)
    assert (run.finish_reason, run.error_code) == ("x" * 32, "E" * 64)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_finish_once_then_nothing_more() -> None:
    run, message = await amake_turn()
    recorder = RunRecorder(run, message)
    recorder.add(MIXED)
    await recorder.finish("completed")
    async with worker_queries() as log:
        await recorder.finish("failed")
    assert log.sql == []
    assert recorder.finished
    with pytest.raises(RuntimeError, match="finished"):
        recorder.add([{"type": "start"}])
    assert (await refreshed(run)).status == "completed"


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_second_finish_waits_for_the_first() -> None:
    run, message = await amake_turn()
    recorder = RunRecorder(run, message)
    recorder.add(MIXED)
    async with worker_queries(before=stall_inserts(0.1)):
        first = asyncio.create_task(recorder.finish("completed"))
        await asyncio.sleep(0)
        await recorder.finish("failed")
        assert first.done()
    assert (await refreshed(run)).status == "completed"
    assert len(await load_log(run)) == len(MIXED)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_chunk_the_reader_refuses_is_still_logged(caplog: pytest.LogCaptureFixture) -> None:
    run, message = await amake_turn()
    recorder = RunRecorder(run, message)
    chunks: list[Chunk] = [
        {"type": "start"},
        {"type": "start-step"},
        {"type": "text-start", "id": "text-0"},
        {"type": "text-delta", "id": "text-0", "delta": "kept"},
        {"type": "text-delta", "id": "text-9", "delta": "refused"},
        {"type": "text-delta", "id": "text-0", "delta": " and after"},
        {"type": "finish"},
    ]
    with caplog.at_level(logging.WARNING, logger="uistream_app.recording"):
        recorder.add(chunks)
    assert recorder.reader_error is not None
    assert "text-9" in caplog.text
    await recorder.finish("completed")
    assert await load_log(run) == chunks
    message = await refreshed(message)
    assert message.parts[-1]["text"] == "kept"


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_nul_in_a_chunk_does_not_lose_the_log() -> None:
    run, message = await amake_turn()
    recorder = RunRecorder(run, message)
    chunks: list[Chunk] = [
        {"type": "start"},
        {"type": "start-step"},
        {"type": "text-start", "id": "text-0"},
        {"type": "text-delta", "id": "text-0", "delta": "nul:\x00."},
        {"type": "text-end", "id": "text-0"},
        {"type": "finish-step"},
        {"type": "finish"},
    ]
    recorder.add(chunks)
    await recorder.finish("completed")
    assert (await load_log(run))[3]["delta"] == "nul:\ufffd."
    assert (await refreshed(message)).parts[-1]["text"] == "nul:\ufffd."


# -- cancellation and failures ------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_cancelled_run_task_stores_everything_from_finally() -> None:
    """The run task is cancelled (its client left) while the write of its
    first step is in flight and more chunks are pending; the write
    completes, and finish() in ``finally`` stores the rest."""
    batches = list(benchmark_batches(steps=3))
    run, message = await amake_turn()
    recorder = RunRecorder(run, message)
    added: list[Chunk] = []
    inserting = threading.Event()
    source_stalls = asyncio.Event()  # never set: the model goes quiet

    async def run_task() -> None:
        try:
            for i, batch in enumerate(batches):
                added.extend(batch)
                recorder.add(batch)
                if batch[-1]["type"] == "finish-step":
                    # A little more, then nothing: pending while the step's write runs.
                    recorder.add(batches[i + 1])
                    added.extend(batches[i + 1])
                    await source_stalls.wait()
                await asyncio.sleep(0)
        finally:
            await recorder.finish("cancelled")

    async with worker_queries(before=stall_inserts(0.2, inserting)):
        task = asyncio.create_task(run_task())
        assert await asyncio.to_thread(inserting.wait, 30)  # the first step's write is in its INSERT
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    assert 0 < len(added) < len(flat(batches))
    assert await load_log(run) == added
    run = await refreshed(run)
    assert (run.status, run.chunk_count) == ("cancelled", len(added))
    assert (await refreshed(message)).as_ui_message() == read_ui_message(added)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_finish_completes_when_its_caller_is_cancelled_again() -> None:
    run, message = await amake_turn()
    recorder = RunRecorder(run, message)
    recorder.add(MIXED[:5])
    inserting = threading.Event()

    async def closer() -> None:
        await recorder.finish("cancelled")

    async with worker_queries(before=stall_inserts(0.2, inserting)):
        task = asyncio.create_task(closer())
        assert await asyncio.to_thread(inserting.wait, 30)  # finish() is in its INSERT
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert await load_log(run) == MIXED[:5]
    run = await refreshed(run)
    assert (run.status, run.chunk_count) == ("cancelled", 5)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_failed_write_is_logged_and_retried_by_itself(caplog: pytest.LogCaptureFixture) -> None:
    run, message = await amake_turn()
    recorder = RunRecorder(run, message, flush_every_ms=50, clock=FakeClock())
    before = fail_inserts(OperationalError("database is gone for a moment"))

    async with worker_queries(before=before) as log:
        with caplog.at_level(logging.ERROR, logger="uistream_app.recording"):
            recorder.add(MIXED[:11])  # ends with finish-step: a write, which fails
            await LogWriter.for_running_loop().drain()  # ... then the retry
        assert "stay pending" in caplog.text
        assert log.count("INSERT") == 2
        assert await load_log(run) == MIXED[:11]
        recorder.add(MIXED[11:])
        await recorder.finish("completed")
    assert await load_log(run) == MIXED
    assert [c.seq for c in await astored_log(run)] == list(range(len(MIXED)))
    assert (await refreshed(run)).chunk_count == len(MIXED)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_an_explicit_flush_raises_and_a_failed_finish_can_be_retried() -> None:
    run, message = await amake_turn()
    recorder = RunRecorder(run, message, clock=FakeClock())
    before = fail_inserts(OperationalError("one"), OperationalError("two"))

    recorder.add(MIXED[:3])
    async with worker_queries(before=before):
        with pytest.raises(OperationalError):
            await recorder.flush()
        with pytest.raises(OperationalError):
            await recorder.finish("completed")
        assert not recorder.finished
        await recorder.finish("failed", error_code="OperationalError")
    assert await load_log(run) == MIXED[:3]
    assert (await refreshed(run)).status == "failed"


# -- reading the log back -----------------------------------------------------------------


def fill_log(n: int, row: int = 5) -> Run:
    """A run whose log holds ``n`` text deltas, written ``row`` at a time
    (one ``ChunkBatch`` row each)."""
    run, _ = make_turn()
    for first in range(0, n, row):
        seqs = range(first, min(first + row, n))
        write_log(run, [{"type": "text-delta", "id": "t", "delta": str(seq)} for seq in seqs], [s * 2 for s in seqs])
    return run


@pytest.mark.django_db
def test_iter_log_pages_by_key() -> None:
    run = fill_log(25)
    other = Run.objects.create(conversation=run.conversation)
    write_log(other, [{"type": "start"}])
    with CaptureQueriesContext(connection) as queries:
        entries = list(iter_log(run, batch=10))
    assert [e.seq for e in entries] == list(range(25))
    assert entries[3] == LogEntry(3, 6, {"type": "text-delta", "id": "t", "delta": "3"})
    # Windows [0, 10), [10, 20), [20, 30), then the empty read past the end.
    assert len(queries) == 4
    assert all('"first_seq" < ' in q["sql"] for q in queries.captured_queries)
    assert [e.seq for e in iter_log(run.pk, 5, start=20)] == [20, 21, 22, 23, 24]
    assert [e.seq for e in iter_log(run.pk, 4, start=7)] == list(range(7, 25))  # windows across rows
    assert [e.seq for e in iter_log(str(run.pk), batch=25)] == list(range(25))
    assert list(iter_log(run, start=25)) == []


@pytest.mark.django_db
def test_read_log_takes_a_range_across_rows() -> None:
    run = fill_log(25)
    assert [e.seq for e in read_log(run, 3, 12)] == list(range(3, 12))
    assert [e.offset_ms for e in read_log(run, 3, 6)] == [6, 8, 10]
    assert [e.seq for e in read_log(run, 20)] == list(range(20, 25))
    assert read_log(run, 30, 40) == []
    assert read_log(run, 5, 5) == []


@pytest.mark.django_db
def test_write_log_appends_and_splits_long_batches() -> None:
    run, _ = make_turn()
    chunks: list[Chunk] = [{"type": "text-delta", "id": "t", "delta": str(i)} for i in range(MAX_ROW_CHUNKS * 2 + 5)]
    assert write_log(run, chunks[:3]) == 3
    assert write_log(run, chunks[3:], range(3, len(chunks))) == len(chunks)
    rows = list(ChunkBatch.objects.filter(run=run).values_list("first_seq", "last_seq"))
    assert rows == [(0, 2), (3, MAX_ROW_CHUNKS + 2), (MAX_ROW_CHUNKS + 3, 2 * MAX_ROW_CHUNKS + 2), (2003, 2004)]
    assert [e.chunk for e in read_log(run)] == chunks
    run.refresh_from_db()
    assert run.chunk_count == len(chunks)
    with pytest.raises(ValueError, match="offsets"):
        write_log(run, chunks[:2], [0])


@pytest.mark.django_db
def test_iter_log_is_lazy() -> None:
    run = fill_log(30)
    with CaptureQueriesContext(connection) as queries:
        entries = iter_log(run, batch=10)
        assert len(queries) == 0
        next(entries)
        assert len(queries) == 1


@pytest.mark.django_db
def test_iter_log_refuses_an_empty_batch() -> None:
    with pytest.raises(ValueError, match="batch"):
        iter_log("00000000-0000-0000-0000-000000000000", batch=0)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_load_log() -> None:
    run = await sync_to_async(fill_log)(12)
    log = await load_log(run)
    assert [c["delta"] for c in log] == [str(i) for i in range(12)]
    assert [c["delta"] for c in await load_log(run.pk, start=10)] == ["10", "11"]
    assert await load_log(Run(conversation_id="x")) == []
    message = await Message.objects.aget(pk="msg-assistant")
    assert message.role == "assistant"


# -- where the log is written ----------------------------------------------------------


def thread_name() -> str:
    return threading.current_thread().name


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_one_round_writes_each_recorder_where_it_was_told() -> None:
    """A recorder told to write inline and one left to the writer thread
    share a round: each one's rows go through its own thread, and both
    logs are stored."""
    writer_thread = await asyncio.get_running_loop().run_in_executor(WRITER_EXECUTOR, thread_name)
    orm_thread = await sync_to_async(thread_name)()
    inline_run, inline_message = await amake_turn(chat_id="chat-inline", message_id="msg-inline")
    thread_run, thread_message = await amake_turn(chat_id="chat-thread", message_id="msg-thread")
    inline = RunRecorder(inline_run, inline_message, inline=True, flush_every_ms=3_600_000)
    threaded = RunRecorder(thread_run, thread_message, inline=False, flush_every_ms=3_600_000)
    inserted_on: list[str] = []

    def before(sql: str) -> None:
        if sql.lstrip().upper().startswith("INSERT"):
            inserted_on.append(thread_name())

    writer = LogWriter.for_running_loop()
    rounds = writer.rounds
    async with worker_queries(before=before):
        inline.add(MIXED[:11])
        threaded.add(MIXED[:11])
        await writer.drain()
    assert writer.rounds == rounds + 1
    assert sorted(inserted_on) == sorted([writer_thread, orm_thread])
    assert await load_log(inline_run) == MIXED[:11]
    assert await load_log(thread_run) == MIXED[:11]


@pytest.mark.django_db
@pytest.mark.parametrize(("mode", "inline"), [("auto", False), ("thread", False), ("inline", True)])
def test_a_recorder_not_told_follows_the_setting_and_auto_is_the_thread(settings: Any, mode: str, inline: bool) -> None:
    """Without ``inline=``, "auto" can't know where the run's rows were
    made, and takes the thread."""
    run, message = make_turn()
    settings.UISTREAM = {**settings.UISTREAM, "LOG_WRITER": mode}
    assert RunRecorder(run, message).inline is inline
    assert RunRecorder(run, message, inline=not inline).inline is not inline


def test_a_closed_loops_writer_is_forgotten() -> None:
    """The registry keeps no event loop alive (tests make one per test)."""
    loop = asyncio.new_event_loop()
    writer = loop.run_until_complete(_writer_of_running_loop())
    loop.close()
    ref = weakref.ref(loop)
    del loop
    gc.collect()
    assert ref() is None
    with pytest.raises(RuntimeError, match="gone"):
        _ = writer.loop


async def _writer_of_running_loop() -> LogWriter:
    return LogWriter.for_running_loop()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_writer_cancelled_mid_write_waits_for_the_thread() -> None:
    """Cancelling the writer's task (a loop shutting down) while its thread
    writes: the task waits for the write, so the rows count as stored and
    are not given back to be written twice."""
    run, message = await amake_turn()
    recorder = RunRecorder(run, message, clock=FakeClock())
    inserting = threading.Event()
    writer = LogWriter.for_running_loop()
    async with worker_queries(before=stall_inserts(0.2, inserting)) as log:
        recorder.add(MIXED[:11])  # ends a step: written at once
        assert await asyncio.to_thread(inserting.wait, 30)
        task = writer._task
        assert task is not None
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert recorder.stored_count == 11
        recorder.add(MIXED[11:])
        await recorder.finish("completed")
    assert log.count("INSERT") == 2
    assert await load_log(run) == MIXED


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_fields_of_the_run_go_with_its_first_chunks_not_in_a_write_of_their_own() -> None:
    """What a run records before its model starts (``Run.history``) does not
    make the model wait for the database: it is stored with the first
    chunks, in their transaction's one UPDATE of the run."""
    run, message = await amake_turn()
    recorder = RunRecorder(run, message, clock=FakeClock())
    async with worker_queries() as log:
        recorder.store_with_run(history={"strategy": "last", "sent": 3})
        for _ in range(20):
            await asyncio.sleep(0)
        assert log.sql == []
        recorder.add([{"type": "start"}, {"type": "start-step"}])
        await recorder.flush()
    assert (log.count("INSERT"), log.count("UPDATE")) == (1, 1)
    stored = await refreshed(run)
    assert stored.history == {"strategy": "last", "sent": 3}
    assert stored.first_chunk_at is not None


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_fields_of_a_run_that_ends_before_its_next_write_are_stored_with_its_end() -> None:
    run, message = await amake_turn()
    recorder = RunRecorder(run, message, clock=FakeClock())
    recorder.add([{"type": "start"}, {"type": "start-step"}])
    await recorder.flush()
    recorder.store_with_run(history={"strategy": "all", "sent": 1})
    await recorder.finish("failed", error_code="boom")
    stored = await refreshed(run)
    assert (stored.status, stored.history) == ("failed", {"strategy": "all", "sent": 1})
