"""What only the in-process broker has: forgetting finished runs, and
wake-ups across event loops and threads."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from uistream_app.live import BrokerConfigError, MemoryBroker, RunChannel

from .conftest import make_chunks

GUARD = 10


async def collect(broker: MemoryBroker, run_id: str) -> list[tuple[int, Any]]:
    async with asyncio.timeout(GUARD):
        return [item async for item in broker.subscribe(run_id)]


@pytest.mark.asyncio
async def test_a_finished_run_is_forgotten_after_finished_ttl() -> None:
    now = 1000.0
    broker = MemoryBroker(finished_ttl=60)
    broker._clock = lambda: now
    channel = await broker.open_run("conv", "run-1")
    await channel.publish(make_chunks(3))
    await channel.close()
    now += 59
    assert len(await collect(broker, "run-1")) == 3
    now += 1
    assert await collect(broker, "run-1") == []
    assert broker._runs == {}
    assert not broker._expiring


@pytest.mark.asyncio
async def test_with_no_finished_ttl_a_run_is_forgotten_at_close_but_attached_readers_finish() -> None:
    broker = MemoryBroker(finished_ttl=0)
    channel = await broker.open_run("conv", "run-1")
    await channel.publish(make_chunks(2))
    subscription = broker.subscribe("run-1")
    assert await anext(subscription) == (0, make_chunks(1)[0])
    await channel.publish(make_chunks(1, start=2))
    await channel.close()
    assert broker._runs == {}
    async with asyncio.timeout(GUARD):
        assert [seq async for seq, _ in subscription] == [1, 2]
    assert await collect(broker, "run-1") == []


def big_chunk(kib: int) -> dict[str, Any]:
    return {"type": "text-delta", "id": "text-0", "delta": "x" * (kib * 1024)}


async def finished_run(broker: MemoryBroker, run_id: str, kib: int) -> None:
    channel = await broker.open_run(f"conv-{run_id}", run_id)
    await channel.publish([big_chunk(kib)])
    await channel.close()


@pytest.mark.asyncio
async def test_finished_runs_are_kept_up_to_finished_max_bytes_oldest_forgotten_first() -> None:
    broker = MemoryBroker(finished_ttl=60, finished_max_bytes=300 * 1024)
    await finished_run(broker, "run-1", 100)
    await finished_run(broker, "run-2", 100)
    assert await broker.published("run-1") is not None
    await finished_run(broker, "run-3", 120)  # 320 KiB kept: one run too many
    assert await broker.published("run-1") is None
    assert await collect(broker, "run-1") == []
    assert [len(c["delta"]) for c in await broker.published("run-2") or []] == [100 * 1024]
    assert [len(c["delta"]) for c in await broker.published("run-3") or []] == [120 * 1024]


@pytest.mark.asyncio
async def test_a_run_larger_than_finished_max_bytes_is_forgotten_at_close_but_attached_readers_finish() -> None:
    broker = MemoryBroker(finished_ttl=60, finished_max_bytes=64 * 1024)
    await finished_run(broker, "small", 10)
    channel = await broker.open_run("conv", "big")
    await channel.publish([big_chunk(100)])
    subscription = broker.subscribe("big")
    assert (await anext(subscription))[0] == 0
    await channel.publish(make_chunks(1, start=1))
    await channel.close()
    assert await broker.published("big") is None
    async with asyncio.timeout(GUARD):
        assert [seq async for seq, _ in subscription] == [1]
    assert await broker.published("small") is not None  # a big run does not push out the small ones


@pytest.mark.asyncio
async def test_runs_whose_ttl_ended_no_longer_count_against_the_bound() -> None:
    now = 1000.0
    broker = MemoryBroker(finished_ttl=60, finished_max_bytes=250 * 1024)
    broker._clock = lambda: now
    await finished_run(broker, "run-1", 100)
    await finished_run(broker, "run-2", 100)
    now += 61  # both expire
    await finished_run(broker, "run-3", 100)
    await finished_run(broker, "run-4", 100)
    assert await broker.published("run-1") is None
    assert await broker.published("run-3") is not None
    assert await broker.published("run-4") is not None


@pytest.mark.asyncio
async def test_publishing_and_stopping_from_another_thread_and_loop() -> None:
    # An async view under WSGI runs in a loop of its own per request.
    broker = MemoryBroker()
    chunks = make_chunks(500)
    opened: dict[str, RunChannel] = {}
    ready = threading.Event()

    async def run_elsewhere() -> None:
        channel = await broker.open_run("conv", "run-1")
        opened["channel"] = channel
        ready.set()
        await channel.stop_requested.wait()
        stopped_at = channel.next_seq
        for start in range(stopped_at, len(chunks), 7):
            await channel.publish(chunks[start : start + 7])
            await asyncio.sleep(0)
        await channel.close()

    thread = threading.Thread(target=asyncio.run, args=(run_elsewhere(),))
    thread.start()
    try:
        assert await asyncio.to_thread(ready.wait, GUARD)
        reader = asyncio.create_task(collect(broker, "run-1"))
        await asyncio.sleep(0)  # one turn: the reader attaches and parks (no chunk yet)
        assert broker._runs["run-1"].waiters, "the reader should wait for the other loop's wake-up"
        assert await broker.request_stop("conv")
        assert await reader == list(enumerate(chunks))
    finally:
        await asyncio.to_thread(thread.join, GUARD)
    assert not thread.is_alive()
    assert await broker.active_run("conv") is None


@pytest.mark.parametrize("value", [-1, "60", None])
def test_finished_ttl_is_seconds(value: Any) -> None:
    with pytest.raises(BrokerConfigError, match="FINISHED_TTL"):
        MemoryBroker.from_config({"BACKEND": "memory", "FINISHED_TTL": value})


@pytest.mark.parametrize("value", [-1, "16MiB", 1.5, True, None])
def test_finished_max_bytes_is_a_whole_number_of_bytes(value: Any) -> None:
    with pytest.raises(BrokerConfigError, match="FINISHED_MAX_BYTES"):
        MemoryBroker.from_config({"BACKEND": "memory", "FINISHED_MAX_BYTES": value})


def test_finished_max_bytes_is_read_from_the_setting() -> None:
    assert MemoryBroker.from_config({"BACKEND": "memory"}).finished_max_bytes == 16 * 1024 * 1024
    assert MemoryBroker.from_config({"BACKEND": "memory", "FINISHED_MAX_BYTES": 0}).finished_max_bytes == 0


def test_unknown_keys_are_refused() -> None:
    with pytest.raises(BrokerConfigError, match="URL"):
        MemoryBroker.from_config({"BACKEND": "memory", "URL": "redis://"})
