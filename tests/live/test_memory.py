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


def test_unknown_keys_are_refused() -> None:
    with pytest.raises(BrokerConfigError, match="URL"):
        MemoryBroker.from_config({"BACKEND": "memory", "URL": "redis://"})
