"""``RunRecorder``: batching, offsets, the stored message, the cancellation
path, failures; ``load_log`` and ``iter_log``.

Run on SQLite by default and on PostgreSQL with ``DATABASE_URL`` set.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from django.db import OperationalError, connection, connections
from django.test.utils import CaptureQueriesContext

from uistream_app.models import Conversation, Message, Run, RunChunk
from uistream_app.protocol import events as ev
from uistream_app.protocol.ui.chunks import Chunk
from uistream_app.protocol.ui.encoder import UIMessageEncoder
from uistream_app.protocol.ui.reader import read_ui_message
from uistream_app.recording import LogEntry, RunRecorder, iter_log, load_log

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
# The shape of ../shared/bench/workload.json (seeded there; rebuilt here
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


def stored_log(run: Run) -> list[RunChunk]:
    return list(RunChunk.objects.filter(run=run).order_by("seq"))


astored_log = sync_to_async(stored_log)


async def refreshed(obj: Any) -> Any:
    await obj.arefresh_from_db()
    return obj


# -- batching --------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_benchmark_run_writes_at_most_one_statement_per_50_chunks() -> None:
    """The real clock, the default interval, a producer as fast as it gets."""
    batches = list(benchmark_batches())
    chunks = flat(batches)
    run, message = await amake_turn()
    recorder = RunRecorder(run, message)
    started = time.perf_counter()
    async with worker_queries() as log:
        for batch in batches:
            await recorder.add(batch)
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
async def test_a_fast_producer_flushes_at_step_ends_only() -> None:
    """A clock that never moves: one flush per finish-step, one for the
    finish, then finish() itself (nothing left to insert)."""
    batches = list(benchmark_batches())
    run, message = await amake_turn()
    recorder = RunRecorder(run, message, clock=FakeClock())
    async with worker_queries() as log:
        for batch in batches:
            await recorder.add(batch)
        flushes = log.count("UPDATE")  # each flush updates the run's chunk_count once
        inserts = log.count("INSERT")
        await recorder.finish("completed")
    assert flushes == 51
    # One INSERT per flush, or two where the backend caps a statement's
    # parameters below a step's 252 rows (SQLite before Django 6.0: 999).
    assert 51 <= inserts <= 2 * 51
    # Then finish(): UPDATE message, run, conversation. SQLite adds a BEGIN
    # per transaction, which the budget test counts too.
    assert (log.count("INSERT"), log.count("UPDATE")) == (inserts, 54)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_slow_producer_flushes_every_interval() -> None:
    run, message = await amake_turn()
    clock = FakeClock()
    # 95, not 100: a fake clock's float sums land a hair either side of 100.
    recorder = RunRecorder(run, message, flush_every_ms=95, clock=clock)
    chunks: list[Chunk] = [{"type": "start"}, {"type": "start-step"}, {"type": "text-start", "id": "text-0"}]
    chunks += [{"type": "text-delta", "id": "text-0", "delta": f"{i} "} for i in range(95)]
    async with worker_queries() as log:
        for chunk in chunks:
            await recorder.add([chunk])
            clock.advance(10)
    # Chunk i is added at i x 10 ms: flushes after chunks 10, 20, ... 90.
    assert log.count("INSERT") == 9
    assert recorder.pending_flush_deadline() is not None
    assert (await refreshed(run)).chunk_count == 91
    await recorder.finish("completed")
    assert (await refreshed(run)).chunk_count == 98


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_pending_flush_deadline() -> None:
    run, message = await amake_turn()
    clock = FakeClock()
    recorder = RunRecorder(run, message, flush_every_ms=250, clock=clock)
    assert recorder.pending_flush_deadline() is None
    clock.advance(40)
    await recorder.add([{"type": "start"}, {"type": "start-step"}])
    assert recorder.pending_flush_deadline() == pytest.approx(1000.25)
    await recorder.flush()
    assert recorder.pending_flush_deadline() is None
    await recorder.flush()  # nothing pending: no write
    clock.advance(10)
    await recorder.add([{"type": "text-start", "id": "text-0"}])
    assert recorder.pending_flush_deadline() == pytest.approx(1000.04 + 0.25)
    assert (await refreshed(run)).chunk_count == 2


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_flush_writes_once_per_call() -> None:
    run, message = await amake_turn()
    recorder = RunRecorder(run, message, clock=FakeClock())
    async with worker_queries() as log:
        await recorder.flush()
        assert log.sql == []
        await recorder.add([{"type": "start"}, {"type": "start-step"}])
        assert log.sql == []
        await recorder.flush()
    assert (log.count("INSERT"), log.count("UPDATE")) == (1, 1)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_concurrent_flushes_write_each_chunk_once() -> None:
    run, message = await amake_turn()
    recorder = RunRecorder(run, message, clock=FakeClock())
    await recorder.add([{"type": "start"}, {"type": "start-step"}])
    await asyncio.gather(recorder.flush(), recorder.flush(), recorder.flush())
    await recorder.add([{"type": "text-start", "id": "text-0"}])
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
    await recorder.add([{"type": "start"}, {"type": "start-step"}])
    for i, step in enumerate([30, 0, 70, 5, 400]):
        clock.advance(step)
        await recorder.add([{"type": "text-start", "id": f"text-{i}"}, {"type": "text-end", "id": f"text-{i}"}])
    clock.advance(-1)  # a misbehaving clock does not make offsets go back
    await recorder.add([{"type": "finish-step"}])
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
    await recorder.add([{"type": "start"}])
    assert (await refreshed(run)).first_chunk_at is None
    await recorder.flush()
    stored = await refreshed(run)
    assert stored.first_chunk_at is not None
    assert stored.first_chunk_at == recorder.run.first_chunk_at


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
        await recorder.add([chunk])
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
        await recorder.add([chunk])
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
    await recorder.add(MIXED)
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
    await recorder.add(head)
    await recorder.add(tail)
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
    await recorder.add(MIXED)
    await recorder.finish("completed")
    async with worker_queries() as log:
        await recorder.finish("failed")
    assert log.sql == []
    assert recorder.finished
    with pytest.raises(RuntimeError, match="finished"):
        await recorder.add([{"type": "start"}])
    assert (await refreshed(run)).status == "completed"


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_second_finish_waits_for_the_first() -> None:
    run, message = await amake_turn()
    recorder = RunRecorder(run, message)
    await recorder.add(MIXED)
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
        await recorder.add(chunks)
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
    await recorder.add(chunks)
    await recorder.finish("completed")
    assert (await load_log(run))[3]["delta"] == "nul:\ufffd."
    assert (await refreshed(message)).parts[-1]["text"] == "nul:\ufffd."


# -- cancellation and failures ------------------------------------------------------------


def stall_inserts(seconds: float) -> Callable[[str], None]:
    def before(sql: str) -> None:
        if sql.lstrip().upper().startswith("INSERT"):
            time.sleep(seconds)

    return before


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_cancelled_run_task_stores_everything_from_finally() -> None:
    """The run task is cancelled (its client left) while a flush is in
    flight; the flush completes, and finish() in ``finally`` stores the rest."""
    batches = list(benchmark_batches(steps=3))
    run, message = await amake_turn()
    recorder = RunRecorder(run, message)
    added: list[Chunk] = []
    flushing = asyncio.Event()

    async def run_task() -> None:
        try:
            for batch in batches:
                added.extend(batch)
                if batch[-1]["type"] == "finish-step":
                    flushing.set()
                await recorder.add(batch)
                await asyncio.sleep(0)
        finally:
            await recorder.finish("cancelled")

    async with worker_queries(before=stall_inserts(0.2)):
        task = asyncio.create_task(run_task())
        await flushing.wait()
        await asyncio.sleep(0.05)  # the first step's flush is in its INSERT
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
    await recorder.add(MIXED[:5])
    writing = asyncio.Event()

    async def closer() -> None:
        writing.set()
        await recorder.finish("cancelled")

    async with worker_queries(before=stall_inserts(0.2)):
        task = asyncio.create_task(closer())
        await writing.wait()
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert await load_log(run) == MIXED[:5]
    run = await refreshed(run)
    assert (run.status, run.chunk_count) == ("cancelled", 5)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_failed_flush_keeps_its_chunks_for_the_next_write(caplog: pytest.LogCaptureFixture) -> None:
    run, message = await amake_turn()
    recorder = RunRecorder(run, message, clock=FakeClock())
    failures = [OperationalError("database is gone for a moment")]

    def before(sql: str) -> None:
        if failures and sql.lstrip().upper().startswith("INSERT"):
            raise failures.pop()

    async with worker_queries(before=before):
        with caplog.at_level(logging.ERROR, logger="uistream_app.recording"):
            await recorder.add(MIXED[:11])  # ends with finish-step: a flush, which fails
        assert "stay pending" in caplog.text
        assert await load_log(run) == []
        assert recorder.pending_flush_deadline() is not None
        await recorder.add(MIXED[11:])
        await recorder.finish("completed")
    assert await load_log(run) == MIXED
    assert [c.seq for c in await astored_log(run)] == list(range(len(MIXED)))
    assert (await refreshed(run)).chunk_count == len(MIXED)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_an_explicit_flush_raises_and_a_failed_finish_can_be_retried() -> None:
    run, message = await amake_turn()
    recorder = RunRecorder(run, message, clock=FakeClock())
    failures = [OperationalError("one"), OperationalError("two")]

    def before(sql: str) -> None:
        if failures and sql.lstrip().upper().startswith("INSERT"):
            raise failures.pop()

    await recorder.add(MIXED[:3])
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


def fill_log(n: int) -> Run:
    run, _ = make_turn()
    RunChunk.objects.bulk_create(
        RunChunk(run=run, seq=seq, offset_ms=seq * 2, chunk={"type": "text-delta", "id": "t", "delta": str(seq)})
        for seq in reversed(range(n))
    )
    return run


@pytest.mark.django_db
def test_iter_log_pages_by_key() -> None:
    run = fill_log(25)
    other = Run.objects.create(conversation=run.conversation)
    RunChunk.objects.create(run=other, seq=0, offset_ms=0, chunk={"type": "start"})
    with CaptureQueriesContext(connection) as queries:
        entries = list(iter_log(run, batch=10))
    assert [e.seq for e in entries] == list(range(25))
    assert entries[3] == LogEntry(3, 6, {"type": "text-delta", "id": "t", "delta": "3"})
    assert len(queries) == 3
    assert all("LIMIT 10" in q["sql"].upper() for q in queries.captured_queries)
    assert [e.seq for e in iter_log(run.pk, 5, start=20)] == [20, 21, 22, 23, 24]
    assert [e.seq for e in iter_log(str(run.pk), batch=25)] == list(range(25))
    assert list(iter_log(run, start=25)) == []


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
