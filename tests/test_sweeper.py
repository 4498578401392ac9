"""The sweeper on stored rows: an orphan (a running run whose heartbeat is
older than ``LEASE_SECONDS``) is settled ``interrupted``, its log completed
from the broker and closed with an ``error`` chunk, its message rebuilt;
a live run is left alone; two sweepers settle an orphan once.

The same, through real servers killed for real, is ``test_leases.py``."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings
from django.core.management import call_command
from django.db import connections
from django.test import override_settings
from django.utils import timezone

from uistream_app.conf import settings as uistream_settings
from uistream_app.lifecycle.leases import settle, sweep
from uistream_app.live import MemoryBroker, get_broker
from uistream_app.models import Conversation, Message, Run
from uistream_app.recording import read_log, write_log

pytestmark = pytest.mark.django_db(transaction=True)

#: What a client of "count to 5" got before the process died: three numbers.
SENT = [
    {"type": "start", "messageId": "a1"},
    {"type": "start-step"},
    {"type": "text-start", "id": "t1"},
    {"type": "text-delta", "id": "t1", "delta": "1 "},
    {"type": "text-delta", "id": "t1", "delta": "2 "},
    {"type": "text-delta", "id": "t1", "delta": "3 "},
]


def orphan(chat_id: str = "c1", *, logged: int = len(SENT), heartbeat_age: float = 3600) -> Run:
    """A chat whose run's process died after sending ``SENT``: the log holds
    the first ``logged`` chunks, the message is still empty."""
    conversation = Conversation.objects.create(pk=chat_id, session_key="s1")
    Message.objects.create(
        pk=f"{chat_id}-u1",
        conversation=conversation,
        role="user",
        parts=[{"type": "text", "text": "count"}],
        position=0,
    )
    message = Message.objects.create(pk="a1", conversation=conversation, role="assistant", parts=[], position=1)
    run = Run.objects.create(
        conversation=conversation,
        message=message,
        status="running",
        heartbeat_at=timezone.now() - dt.timedelta(seconds=heartbeat_age),
    )
    write_log(run, SENT[:logged])
    return run


def terminal() -> dict[str, Any]:
    return {"type": "error", "errorText": uistream_settings.ERROR_TEXT}


def test_the_command_settles_an_orphan_from_its_log() -> None:
    run = orphan()
    out = io.StringIO()
    call_command("uistream_sweep", stdout=out)

    run.refresh_from_db()
    assert run.status == "interrupted"
    assert run.finish_reason == "interrupted"
    assert run.finished_at is not None
    assert [e.chunk for e in read_log(run)] == [*SENT, terminal()]
    assert run.chunk_count == len(SENT) + 1
    message = Message.objects.get(pk="a1")
    assert [(p["type"], p["text"]) for p in message.parts if p["type"] == "text"] == [("text", "1 2 3 ")]
    assert str(run.pk) in out.getvalue()
    assert "1 orphaned run settled" in out.getvalue()

    # Settled once: a second sweep finds nothing and adds nothing.
    out = io.StringIO()
    call_command("uistream_sweep", stdout=out)
    assert "0 orphaned runs settled" in out.getvalue()
    assert len(read_log(run)) == len(SENT) + 1


def test_a_run_within_its_lease_is_left_alone() -> None:
    run = orphan(heartbeat_age=uistream_settings.LEASE_SECONDS / 2)
    call_command("uistream_sweep", stdout=io.StringIO())
    run.refresh_from_db()
    assert run.status == "running"
    assert len(read_log(run)) == len(SENT)


def test_a_log_that_ended_already_gets_no_second_terminal_chunk() -> None:
    run = orphan()
    write_log(run, [{"type": "finish-step"}, {"type": "finish", "finishReason": "stop"}])
    call_command("uistream_sweep", stdout=io.StringIO())
    run.refresh_from_db()
    # Its process stored the answer's end and died before its outcome: the
    # answer is whole, so the run completed.
    assert (run.status, run.error_code, run.finish_reason) == ("completed", "", "stop")
    assert read_log(run)[-1].chunk == {"type": "finish", "finishReason": "stop"}


def test_a_log_that_ended_with_an_error_is_settled_interrupted() -> None:
    run = orphan()
    write_log(run, [{"type": "error", "errorText": "An error occurred."}])
    call_command("uistream_sweep", stdout=io.StringIO())
    run.refresh_from_db()
    assert (run.status, run.error_code) == ("interrupted", "Interrupted")
    assert [e.chunk["type"] for e in read_log(run)].count("error") == 1


@pytest_asyncio.fixture
async def _close_worker_connections() -> AsyncIterator[None]:
    yield
    await sync_to_async(connections.close_all)()


@pytest.mark.asyncio
@pytest.mark.usefixtures("_close_worker_connections")
async def test_the_log_is_completed_from_the_broker_and_resumers_end_with_the_error() -> None:
    # The broker holds all six chunks the client got; the log writer had
    # stored four when the process "died" (its channel is left open).
    run = await sync_to_async(orphan)(logged=4)
    broker = get_broker()
    assert isinstance(broker, MemoryBroker)
    channel = await broker.open_run("c1", str(run.pk))
    await channel.publish(SENT)
    resumer = broker.subscribe(str(run.pk))
    received = [chunk async for _, chunk in _until(resumer, len(SENT))]

    settled = await settle(str(run.pk))

    assert settled is not None
    assert settled.recovered == 2
    rest = [chunk async for _, chunk in resumer]
    assert received + rest == [*SENT, terminal()]
    await sync_to_async(run.refresh_from_db)()
    assert run.status == "interrupted"
    assert [e.chunk for e in await sync_to_async(read_log)(run)] == [*SENT, terminal()]
    # The chat's slot is free: a new run may start.
    assert await broker.active_run("c1") is None
    await (await broker.open_run("c1", "next-run")).close()


async def _until(stream: Any, count: int) -> AsyncIterator[Any]:
    for _ in range(count):
        yield await anext(stream)


@pytest.mark.asyncio
@pytest.mark.usefixtures("_close_worker_connections")
async def test_two_sweepers_racing_settle_an_orphan_once() -> None:
    run = await sync_to_async(orphan)()
    results = await asyncio.gather(sweep(), sweep(), settle(str(run.pk)))
    settled = [s for result in results for s in (result if isinstance(result, list) else [result]) if s is not None]
    assert len(settled) == 1
    log = await sync_to_async(read_log)(run)
    assert [e.chunk for e in log] == [*SENT, terminal()]


def test_a_run_from_before_leases_is_swept_by_its_age() -> None:
    # Migration 0006 gave runs a heartbeat; one started before has none.
    run = orphan()
    Run.objects.filter(pk=run.pk).update(heartbeat_at=None, started_at=timezone.now())
    call_command("uistream_sweep", stdout=io.StringIO())
    assert Run.objects.get(pk=run.pk).status == "running"  # started within a lease: it may live

    Run.objects.filter(pk=run.pk).update(started_at=timezone.now() - dt.timedelta(hours=1))
    call_command("uistream_sweep", stdout=io.StringIO())
    assert Run.objects.get(pk=run.pk).status == "interrupted"
    assert [e.chunk for e in read_log(run)] == [*SENT, terminal()]


@pytest.mark.asyncio
@pytest.mark.usefixtures("_close_worker_connections")
async def test_a_recorder_whose_lease_was_taken_writes_nothing_more() -> None:
    from uistream_app.lifecycle.leases import renew_leases
    from uistream_app.recording import LeaseLost, RunRecorder

    run = await sync_to_async(orphan)()
    message = await Message.objects.aget(pk="a1")
    recorder = RunRecorder(run, message, inline=False)
    lost: list[bool] = []
    recorder.on_lease_lost = lambda: lost.append(True)
    # Its process lives: the renewal under its epoch holds the run.
    assert await sync_to_async(renew_leases)({str(run.pk): recorder.epoch}) == set()
    await sync_to_async(Run.objects.filter(pk=run.pk).update)(heartbeat_at=timezone.now() - dt.timedelta(hours=1))

    settled = await settle(str(run.pk))  # a sweeper takes it (a new epoch) and settles it
    assert settled is not None
    log = await sync_to_async(read_log)(run)

    recorder.add([{"type": "text-delta", "id": "t1", "delta": "4 "}])
    with pytest.raises(LeaseLost):
        await recorder.flush()
    assert lost == [True]
    with pytest.raises(LeaseLost):
        recorder.add([{"type": "text-delta", "id": "t1", "delta": "5 "}])
    with pytest.raises(LeaseLost):
        await recorder.finish("completed")
    assert await sync_to_async(read_log)(run) == log
    stored = await Run.objects.aget(pk=run.pk)
    assert (stored.status, stored.chunk_count) == ("interrupted", len(SENT) + 1)
    assert stored.lease_epoch == recorder.epoch + 1
    # Its renewal says so, and renews nothing.
    assert await sync_to_async(renew_leases)({str(run.pk): recorder.epoch}) == {str(run.pk)}
    assert (await Run.objects.aget(pk=run.pk)).heartbeat_at == stored.heartbeat_at


@pytest.mark.asyncio
@pytest.mark.usefixtures("_close_worker_connections")
async def test_a_writer_frozen_in_its_transaction_does_not_keep_its_run_from_the_sweep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A process paused (SIGSTOP, a VM stall) while its log writer is inside
    a transaction holds the run's row locked, and a sweep skips locked rows.
    On PostgreSQL the server ends that transaction after half a lease, so
    the sweep takes the run over while the process is still frozen; the
    writer, thawed, writes nothing into it."""
    from uistream_app.recording import LeaseLost, RunRecorder, log_writer

    if connections["default"].vendor != "postgresql":
        pytest.skip("row locks and the server's idle-in-transaction timeout are PostgreSQL's")
    frozen, thaw = threading.Event(), threading.Event()
    store = log_writer._store

    def store_then_freeze(jobs: Any) -> None:
        store(jobs)  # its rows written, the run's row locked by the fenced update
        frozen.set()
        thaw.wait(30)

    with override_settings(UISTREAM={**django_settings.UISTREAM, "LEASE_SECONDS": 2, "HEARTBEAT_SECONDS": 0.5}):
        monkeypatch.setattr(log_writer, "_bounded", [None])
        run = await sync_to_async(orphan)(logged=0, heartbeat_age=0)
        recorder = RunRecorder(run, await Message.objects.aget(pk="a1"), inline=False)
        await sync_to_async(Run.objects.filter(pk=run.pk).update)(heartbeat_at=timezone.now() - dt.timedelta(hours=1))
        monkeypatch.setattr(log_writer, "_store", store_then_freeze)
        recorder.add([{"type": "text-delta", "id": "t1", "delta": "4 "}])
        writing = asyncio.ensure_future(recorder.flush())
        try:
            assert await sync_to_async(frozen.wait)(10)
            deadline = asyncio.get_running_loop().time() + 10
            while not await sweep():
                assert asyncio.get_running_loop().time() < deadline, "the frozen writer kept its run from the sweep"
                await asyncio.sleep(0.2)
            settled_log = await sync_to_async(read_log)(run)
            assert (await Run.objects.aget(pk=run.pk)).status == "interrupted"
        finally:
            monkeypatch.setattr(log_writer, "_store", store)
            thaw.set()
        with pytest.raises(Exception):  # noqa: B017, PT011 - the server ended its connection under it
            await writing
        with pytest.raises(LeaseLost):  # its chunk, tried again on a new connection
            await recorder.flush()
    # The frozen write went with its transaction: the log is the sweeper's alone.
    assert await sync_to_async(read_log)(run) == settled_log
    assert [e.chunk for e in settled_log] == [terminal()]
