"""What only the Redis broker has: other processes, keys and their time to
live, crashes, an unreachable server."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from uistream_app.live import (
    BrokerConfigError,
    BrokerUnavailable,
    RunLost,
    broker_from_config,
    ping,
)

from ..conftest import ROOT
from .conftest import make_chunks

redis = pytest.importorskip("redis")
aioredis = pytest.importorskip("redis.asyncio")

from uistream_app.live.redis_streams import MAX_BATCH, MAX_PENDING, RedisBroker, RedisRunChannel  # noqa: E402

GUARD = 10


@pytest_asyncio.fixture
async def broker(redis_config: dict[str, Any]) -> AsyncIterator[RedisBroker]:
    instance = RedisBroker.from_config(redis_config)
    yield instance
    await instance.aclose()


@pytest_asyncio.fixture
async def admin(redis_config: dict[str, Any]) -> AsyncIterator[Any]:
    """A plain client, to look at the keys."""
    client = aioredis.Redis.from_url(redis_config["URL"])
    yield client
    await client.aclose()


def rich_chunks(count: int) -> list[dict[str, Any]]:
    """Chunks with what JSON round trips could get wrong: non-ASCII text,
    nested input, floats, null, booleans."""
    chunks: list[dict[str, Any]] = []
    for i in range(count):
        if i % 7 == 3:
            chunks.append(
                {
                    "type": "tool-input-available",
                    "toolCallId": f"call-{i}",
                    "toolName": "calculate",
                    "input": {"expression": f"{i} * 1.5", "naïve": [1, 2.5, None, True, {"k": "🚀"}]},
                }
            )
        else:
            chunks.append({"type": "text-delta", "id": "text-0", "delta": f"mot {i} — «{i}»\n\t\\ "})
    return chunks


class Worker:
    """``tests/live/worker.py`` in a process of its own."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, config: dict[str, Any], *args: str) -> Worker:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.live.worker",
            json.dumps(config),
            *args,
            cwd=ROOT,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=2**24,  # the "done" line carries the whole run
        )
        return cls(process)

    async def line(self) -> str:
        assert self.process.stdout is not None
        assert self.process.stderr is not None
        async with asyncio.timeout(GUARD):
            line = await self.process.stdout.readline()
            if not line:
                error = await self.process.stderr.read()
                raise AssertionError(f"the worker ended early:\n{error.decode()}")
        return line.decode().rstrip("\n")

    async def finish(self) -> None:
        assert await self.line() == "django-loaded false"
        async with asyncio.timeout(GUARD):
            await self.process.communicate()  # closes the pipes with the loop still running
        assert self.process.returncode == 0

    async def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
        await self.process.communicate()


@pytest_asyncio.fixture
async def workers() -> AsyncIterator[list[Worker]]:
    """Start workers with ``Worker.start`` and append them here: whatever
    the test's outcome, none outlives it."""
    started: list[Worker] = []
    yield started
    for worker in started:
        await worker.kill()


@pytest.mark.asyncio
@pytest.mark.parametrize("from_seq", [0, 250, 731])
async def test_a_subscriber_in_another_process_resumes_identically(
    broker: RedisBroker, redis_config: dict[str, Any], workers: list[Worker], from_seq: int
) -> None:
    chunks = rich_chunks(1000)
    channel = await broker.open_run("conv", "run-1")
    for start in range(0, 500, 37):
        await channel.publish(chunks[start : min(start + 37, 500)])
    if from_seq > 500:
        await channel.publish(chunks[500:800])
    published = channel.next_seq
    worker = await Worker.start(redis_config, "subscribe", "run-1", str(from_seq), str(published - from_seq))
    workers.append(worker)
    # The worker replayed everything published so far: now the live tail.
    assert await worker.line() == "caught-up"
    for start in range(published, 1000, 50):
        await channel.publish(chunks[start : start + 50])
    await channel.close()
    done, _, payload = (await worker.line()).partition(" ")
    assert done == "done"
    received = [(seq, chunk) for seq, chunk in json.loads(payload)]
    assert received == list(enumerate(chunks))[from_seq:]
    await worker.finish()


@pytest.mark.asyncio
async def test_request_stop_from_another_process_reaches_the_run(
    broker: RedisBroker, redis_config: dict[str, Any], workers: list[Worker]
) -> None:
    channel = await broker.open_run("conv", "run-1")
    worker = await Worker.start(redis_config, "stop", "conv")
    workers.append(worker)
    assert await worker.line() == "true"
    await worker.finish()
    async with asyncio.timeout(GUARD):
        await channel.stop_requested.wait()
    await channel.close()
    worker = await Worker.start(redis_config, "stop", "conv")
    workers.append(worker)
    assert await worker.line() == "false"
    await worker.finish()


@pytest.mark.asyncio
async def test_a_stop_requested_before_the_run_listens_is_not_lost(broker: RedisBroker) -> None:
    channel = await broker.open_run("conv", "run-1")
    assert isinstance(channel, RedisRunChannel)
    await channel._stop_watcher()
    assert await broker.request_stop("conv") is True
    channel._start_watcher()
    async with asyncio.timeout(GUARD):
        await channel.stop_requested.wait()
    await channel.close()


@pytest.mark.asyncio
async def test_a_crashed_run_frees_its_conversation_and_ends_its_subscribers(
    broker: RedisBroker, redis_config: dict[str, Any], workers: list[Worker]
) -> None:
    config = {**redis_config, "ACTIVE_TTL": 1.0, "BLOCK_SECONDS": 0.2}
    worker = await Worker.start(config, "run", "conv", "run-1", "5")
    workers.append(worker)
    assert await worker.line() == "ready"
    assert await broker.active_run("conv") == "run-1"
    fast = RedisBroker.from_config(config)
    try:
        subscription = fast.subscribe("run-1")
        first_five = [await anext(subscription) for _ in range(5)]
        assert [seq for seq, _ in first_five] == [0, 1, 2, 3, 4]
        await worker.kill()  # no close(), no more heartbeats
        async with asyncio.timeout(GUARD):
            assert [item async for item in subscription] == []  # ends once the stream expired
    finally:
        await fast.aclose()
    assert await broker.active_run("conv") is None
    channel = await broker.open_run("conv", "run-2")
    await channel.close()


@pytest.mark.asyncio
async def test_keys_entry_ids_and_time_to_live(broker: RedisBroker, admin: Any) -> None:
    prefix = broker.prefix
    active, stream, stop = f"{prefix}:conv:conv:active", f"{prefix}:run:run-1:chunks", f"{prefix}:run:run-1:stop"
    channel = await broker.open_run("conv", "run-1")
    assert await admin.get(active) == b"run-1"
    assert 50_000 < await admin.pttl(active) <= 60_000
    assert 50_000 < await admin.pttl(stream) <= 60_000
    await channel.publish(make_chunks(3))
    await channel.flush()
    await channel.publish(make_chunks(MAX_BATCH + 88, start=3))  # two entries
    await channel.flush()
    entries = await admin.xrange(stream)
    assert [entry_id for entry_id, _ in entries] == [b"0-1", b"1-2", f"1-{2 + MAX_BATCH}".encode(), b"1-602"]
    assert entries[0][1] == {b"conversation": b"conv"}
    assert json.loads(entries[1][1][b"c"]) == make_chunks(3)

    await broker.request_stop("conv")
    await channel.close()
    assert not await admin.exists(active)
    assert not await admin.exists(stop)
    last_id, last_fields = (await admin.xrevrange(stream, count=1))[0]
    assert (last_id, last_fields) == (b"2-0", {b"end": b"1"})
    assert 590_000 < await admin.pttl(stream) <= 600_000


@pytest.mark.asyncio
async def test_heartbeats_keep_a_live_run_alive(
    redis_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch, admin: Any
) -> None:
    beats = 0
    four_beats = asyncio.Event()
    heartbeat = RedisRunChannel._heartbeat

    async def counting(self: RedisRunChannel) -> None:
        nonlocal beats
        await heartbeat(self)
        beats += 1
        if beats == 4:
            four_beats.set()

    monkeypatch.setattr(RedisRunChannel, "_heartbeat", counting)
    broker = RedisBroker.from_config({**redis_config, "ACTIVE_TTL": 0.3})
    try:
        channel = await broker.open_run("conv", "run-1")
        async with asyncio.timeout(GUARD):
            await four_beats.wait()  # four refreshes 0.1 s apart: longer than the 0.3 s TTL
        assert await broker.active_run("conv") == "run-1"
        assert await admin.exists(f"{broker.prefix}:run:run-1:chunks")
        await channel.close()
    finally:
        await broker.aclose()


@pytest.mark.asyncio
async def test_publishing_is_group_commit(broker: RedisBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each round trip is one call of the append script; its entries are
    # its (entry id, chunks) pairs after the owner token.
    pipelines: list[int] = []
    channel = await broker.open_run("conv", "run-1")
    assert isinstance(channel, RedisRunChannel)
    append = channel._client.append

    async def recording(keys: Any = None, args: Any = None, client: Any = None) -> Any:
        pipelines.append((len(args) - 1) // 2)
        return await append(keys=keys, args=args, client=client)

    monkeypatch.setattr(channel._client, "append", recording)
    reader = asyncio.create_task(collect_redis(broker, "run-1"))
    # Published in one loop turn: one round trip, one entry.
    for i in range(100):
        await channel.publish(make_chunks(1, start=i))
    await channel.flush()
    assert pipelines == [1]
    # More than a stream entry holds: still one round trip.
    await channel.publish(make_chunks(2 * MAX_BATCH + 1, start=100))
    await channel.flush()
    assert pipelines == [1, 3]
    # A backlog of MAX_PENDING makes publish wait for the writer.
    await channel.publish(make_chunks(MAX_PENDING, start=100 + 2 * MAX_BATCH + 1))
    assert not channel._pending
    assert channel._flushed_seq == channel.next_seq
    monkeypatch.undo()
    await channel.close()
    assert await reader == list(enumerate(make_chunks(channel.next_seq)))


async def collect_redis(broker: RedisBroker, run_id: str) -> list[tuple[int, Any]]:
    async with asyncio.timeout(GUARD):
        return [item async for item in broker.subscribe(run_id)]


@pytest.mark.asyncio
async def test_a_retried_write_that_had_landed_counts_as_done(broker: RedisBroker) -> None:
    channel = await broker.open_run("conv", "run-1")
    assert isinstance(channel, RedisRunChannel)
    await channel.publish(make_chunks(3))
    await channel.flush()
    # As if the reply to the first attempt was lost and redis-py sent it again.
    channel._next_seq = channel._flushed_seq = 0
    await channel.publish(make_chunks(3))
    await channel.flush()
    await channel.close()
    assert [seq async for seq, _ in broker.subscribe("run-1")] == [0, 1, 2]


@pytest.mark.asyncio
async def test_what_orjson_refuses_still_round_trips(broker: RedisBroker) -> None:
    chunks = [{"type": "data-x", "data": {"lone": "\ud800", "big": 2**70}}]
    channel = await broker.open_run("conv", "run-1")
    await channel.publish(chunks)
    await channel.close()
    assert [chunk async for _, chunk in broker.subscribe("run-1")] == chunks


@pytest.mark.asyncio
async def test_publishing_into_a_vanished_stream_raises_run_lost(broker: RedisBroker, admin: Any) -> None:
    channel = await broker.open_run("conv", "run-1")
    await admin.delete(f"{broker.prefix}:run:run-1:chunks")  # a Redis restart, say
    await channel.publish(make_chunks(1))  # queued: the write fails in the background
    with pytest.raises(RunLost):
        await channel.flush()
    with pytest.raises(RunLost):  # broken for good: a later chunk would follow a gap
        await channel.publish(make_chunks(1))
    await channel.close()  # reported already: close just ends the run
    assert await broker.active_run("conv") is None


@pytest.mark.asyncio
async def test_a_chunk_that_is_not_json_is_reported_to_the_run(broker: RedisBroker) -> None:
    channel = await broker.open_run("conv", "run-1")
    await channel.publish([{"type": "data-x", "data": {1, 2}}])  # a set
    with pytest.raises(TypeError):
        await channel.flush()
    await channel.close()
    assert await broker.active_run("conv") is None


@pytest.mark.asyncio
async def test_close_raises_a_failed_write_nobody_saw(broker: RedisBroker, admin: Any) -> None:
    channel = await broker.open_run("conv", "run-1")
    await admin.delete(f"{broker.prefix}:run:run-1:chunks")
    await channel.publish(make_chunks(1))
    with pytest.raises(RunLost):
        await channel.close()
    assert channel.closed
    assert await broker.active_run("conv") is None


@pytest.mark.asyncio
async def test_subscribers_end_when_their_stream_expires(broker: RedisBroker, admin: Any) -> None:
    channel = await broker.open_run("conv", "run-1")
    fast = RedisBroker.from_config({"URL": broker.url, "PREFIX": broker.prefix, "BLOCK_SECONDS": 0.05})
    try:
        subscription = fast.subscribe("run-1")
        waiting = asyncio.ensure_future(anext(subscription))
        await admin.delete(f"{broker.prefix}:run:run-1:chunks")
        async with asyncio.timeout(GUARD):
            with pytest.raises(StopAsyncIteration):
                await waiting
    finally:
        await fast.aclose()
        await channel.close()


@pytest.mark.asyncio
async def test_more_subscriptions_than_redis_py_s_default_pool_all_get_the_run(
    redis_config: dict[str, Any], admin: Any
) -> None:
    """redis-py pools 100 connections by default, and each subscription
    blocks one: the 101st failed with ``MaxConnectionsError``. Every
    subscriber here is blocked in Redis at once before anything is
    published (``CLIENT LIST``, by the broker's client name)."""
    name = f"uistream-pool-{redis_config['PREFIX'].rsplit(':', 1)[-1]}"
    broker = RedisBroker.from_config({**redis_config, "OPTIONS": {"client_name": name}})
    count = 150
    try:
        channel = await broker.open_run("conv", "run-1")
        readers = [asyncio.create_task(collect_redis(broker, "run-1")) for _ in range(count)]

        async def blocked() -> int:
            clients = await admin.client_list()
            return sum(1 for c in clients if c.get("name") == name and c.get("cmd") == "xread")

        async with asyncio.timeout(GUARD):
            while await blocked() < count:
                failed = [task for task in readers if task.done()]
                if failed:
                    await failed[0]  # raises what ended it
                await asyncio.sleep(0.02)  # polling CLIENT LIST, not waiting for luck
        await channel.publish(make_chunks(3))
        await channel.close()
        async with asyncio.timeout(GUARD):
            got = await asyncio.gather(*readers)
        assert got == [list(enumerate(make_chunks(3)))] * count
    finally:
        await broker.aclose()


def test_the_pool_size_is_redis_s_maxclients_unless_options_say_otherwise(redis_config: dict[str, Any]) -> None:
    assert RedisBroker.from_config(redis_config).options["max_connections"] == 10_000
    sized = RedisBroker.from_config({**redis_config, "OPTIONS": {"max_connections": 50}})
    assert sized.options["max_connections"] == 50


@pytest.mark.asyncio
async def test_ping_reaches_redis(broker: RedisBroker, redis_config: dict[str, Any]) -> None:
    await broker.ping()
    await ping(redis_config)


def test_one_broker_serves_successive_event_loops(redis_config: dict[str, Any]) -> None:
    # get_broker() caches the broker for the process; tests and
    # async_to_sync run each piece in a new loop (rule 8).
    broker = RedisBroker.from_config(redis_config)

    async def produce() -> None:
        try:
            channel = await broker.open_run("conv", "run-1")
            await channel.publish(make_chunks(3))
            await channel.close()
        finally:
            await broker.aclose()  # this loop's connections, before the loop goes

    async def consume() -> list[int]:
        try:
            return [seq async for seq, _ in broker.subscribe("run-1")]
        finally:
            await broker.aclose()

    asyncio.run(produce())
    assert asyncio.run(consume()) == [0, 1, 2]


@pytest.mark.asyncio
async def test_an_unreachable_redis_raises_broker_unavailable() -> None:
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    url = "redis://user:s3cret@127.0.0.1:1/0"  # nothing listens on port 1
    config = {"BACKEND": "redis", "URL": url, "OPTIONS": {"retry": Retry(NoBackoff(), 0)}}
    broker = broker_from_config(config)
    try:
        attempts = [
            broker.open_run("conv", "run-1"),
            broker.active_run("conv"),
            broker.request_stop("conv"),
            anext(broker.subscribe("run-1")),
            broker.ping(),
            ping(config),
        ]
        for attempt in attempts:
            with pytest.raises(BrokerUnavailable, match=r"127\.0\.0\.1") as caught:
                await attempt
            assert "s3cret" not in str(caught.value)
    finally:
        await broker.aclose()


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"PREFX": "x"}, "PREFX"),
        ({"ACTIVE_TTL": 0}, "ACTIVE_TTL"),
        ({"ACTIVE_TTL": 0.001}, "ACTIVE_TTL"),
        ({"BLOCK_SECONDS": True}, "BLOCK_SECONDS"),
        ({"FINISHED_TTL": "long"}, "FINISHED_TTL"),
        ({"BLOCK_SECONDS": 10, "OPTIONS": {"socket_timeout": 5}}, "socket_timeout"),
        ({"URL": ""}, "URL"),
        ({"OPTIONS": []}, "OPTIONS"),
    ],
)
def test_bad_settings_name_the_key(config: dict[str, Any], message: str) -> None:
    with pytest.raises(BrokerConfigError, match=message):
        broker_from_config({"BACKEND": "redis", **config})


@pytest.mark.asyncio
async def test_a_late_batch_of_a_run_taken_over_never_reaches_its_clients(broker: RedisBroker) -> None:
    # The run's process froze past its lease with a batch queued; another
    # process claimed the run (fence_orphan), read what the stream holds
    # and continued it. The frozen process's batch, landing after that,
    # is refused: the clients get the continuer's chunk of that number.
    old = await broker.open_run("conv", "run-1")
    await old.publish(make_chunks(2))
    await old.flush()
    await broker.fence_orphan("run-1")
    published = await broker.published("run-1")
    assert published == make_chunks(2)
    await old.publish([{"type": "text-delta", "id": "t", "delta": " must"}])  # the late batch
    with pytest.raises(RunLost, match="taken over"):
        await old.flush()
    continued = await broker.continue_orphan("conv", "run-1", [*published, {"type": "reset-step"}], len(published))
    assert continued is not None
    await continued.publish([{"type": "finish"}])
    await continued.close()
    received = [chunk async for _, chunk in broker.subscribe("run-1")]
    assert received == [*make_chunks(2), {"type": "reset-step"}, {"type": "finish"}]


@pytest.mark.asyncio
async def test_a_run_never_taken_over_appends_as_before(broker: RedisBroker) -> None:
    adopted = await broker.open_run("conv", "run-1")
    await adopted.publish(make_chunks(3))
    await adopted.close()
    assert [chunk async for _, chunk in broker.subscribe("run-1")] == make_chunks(3)
