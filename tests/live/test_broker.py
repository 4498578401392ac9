"""The broker's rules (``uistream_app.live.base``), once per backend."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from uistream_app.live import Broker, ChannelClosed, MemoryBroker, RunAlreadyActive, RunChannel, broker_from_config

from .conftest import make_chunks, other_tasks

pytestmark = pytest.mark.asyncio


def local_runs(broker: Broker) -> Any:
    """The runs a broker fans out in this process's memory: the memory
    broker's own, or the one inside the PostgreSQL broker; None for Redis."""
    if isinstance(broker, MemoryBroker):
        return broker._runs
    local = getattr(broker, "_local", None)
    return local._runs if isinstance(local, MemoryBroker) else None


# Every wait in this suite is on an event; this only turns a hang into a failure.
GUARD = 10


async def collect(broker: Broker, run_id: str, from_seq: int = 0) -> list[tuple[int, Any]]:
    async with asyncio.timeout(GUARD):
        return [item async for item in broker.subscribe(run_id, from_seq)]


def numbered(chunks: list[dict[str, Any]], start: int = 0) -> list[tuple[int, Any]]:
    return list(enumerate(chunks))[start:]


async def publish_in_batches(
    channel: RunChannel, chunks: list[dict[str, Any]], seed: int, checkpoints: dict[int, asyncio.Event] | None = None
) -> None:
    """Publish ``chunks`` in batches of 1 to 40, letting the loop run between
    batches; set ``checkpoints[n]`` once ``n`` chunks are out."""
    rng = random.Random(seed)
    position = 0
    while position < len(chunks):
        size = rng.randint(1, 40)
        await channel.publish(chunks[position : position + size])
        position = min(position + size, len(chunks))
        for mark, event in (checkpoints or {}).items():
            if position >= mark:
                event.set()
        await asyncio.sleep(0)


async def test_subscriber_gets_every_chunk_numbered_from_zero(broker: Broker) -> None:
    chunks = make_chunks(25)
    channel = await broker.open_run("conv", "run-1")
    await channel.publish(chunks[:1])
    await channel.publish(chunks[1:20])
    await channel.publish(chunks[20:])
    assert channel.next_seq == 25
    await channel.close()
    assert await collect(broker, "run-1") == numbered(chunks)


async def test_replay_then_live_has_no_gap_or_duplicate_under_concurrent_publishing(broker: Broker) -> None:
    chunks = make_chunks(1500)
    channel = await broker.open_run("conv", "run-1")
    marks = {n: asyncio.Event() for n in (1, 300, 900)}
    early = asyncio.create_task(collect(broker, "run-1"))  # attached before anything is published
    publisher = asyncio.create_task(publish_in_batches(channel, chunks, seed=1, checkpoints=marks))
    joined: dict[int, asyncio.Task[list[tuple[int, Any]]]] = {}
    async with asyncio.timeout(GUARD):
        for mark, event in marks.items():
            await event.wait()  # the run is mid-stream: this one replays, then follows
            joined[mark] = asyncio.create_task(collect(broker, "run-1"))
        resumed = asyncio.create_task(collect(broker, "run-1", from_seq=700))
        await publisher
    await channel.close()
    expected = numbered(chunks)
    assert await early == expected
    for mark, task in joined.items():
        assert await task == expected, f"subscriber that joined after {mark} chunks"
    assert await resumed == expected[700:]


async def test_two_subscribers_see_identical_sequences(broker: Broker) -> None:
    chunks = make_chunks(800)
    channel = await broker.open_run("conv", "run-1")
    first = asyncio.create_task(collect(broker, "run-1"))
    second = asyncio.create_task(collect(broker, "run-1"))
    await publish_in_batches(channel, chunks, seed=2)
    await channel.close()
    one, two = await first, await second
    assert one == two == numbered(chunks)


async def test_batches_concatenate_to_the_sequence(broker: Broker) -> None:
    chunks = make_chunks(300)
    channel = await broker.open_run("conv", "run-1")

    async def read_batches() -> list[tuple[int, Any]]:
        items: list[tuple[int, Any]] = []
        async for first, batch in broker.subscribe_batches("run-1", from_seq=5):
            assert first == 5 + len(items)
            assert batch
            items.extend(enumerate(batch, first))
        return items

    reader = asyncio.create_task(read_batches())
    await publish_in_batches(channel, chunks, seed=3)
    await channel.close()
    async with asyncio.timeout(GUARD):
        assert await reader == numbered(chunks, 5)


async def test_a_late_subscriber_to_a_finished_run_gets_it_all_then_ends(broker: Broker) -> None:
    chunks = make_chunks(40)
    channel = await broker.open_run("conv", "run-1")
    await channel.publish(chunks)
    await channel.close()
    assert await broker.active_run("conv") is None
    assert await collect(broker, "run-1") == numbered(chunks)
    assert await collect(broker, "run-1", from_seq=39) == numbered(chunks, 39)
    assert await collect(broker, "run-1", from_seq=40) == []
    assert await collect(broker, "run-1", from_seq=1000) == []


async def test_subscribing_to_an_unknown_run_ends_at_once(broker: Broker) -> None:
    assert await collect(broker, "no-such-run") == []


async def test_from_seq_must_not_be_negative(broker: Broker) -> None:
    with pytest.raises(ValueError, match="from_seq"):
        await anext(broker.subscribe("run-1", from_seq=-1))


async def test_a_run_closed_without_chunks_ends_its_waiting_subscriber(broker: Broker) -> None:
    channel = await broker.open_run("conv", "run-1")
    reader = asyncio.create_task(collect(broker, "run-1"))
    await asyncio.sleep(0)  # let it attach and park (its result is the same either way)
    await channel.close()
    assert await reader == []


async def test_open_run_twice_raises_run_already_active(broker: Broker) -> None:
    channel = await broker.open_run("conv", "run-1")
    with pytest.raises(RunAlreadyActive) as caught:
        await broker.open_run("conv", "run-2")
    assert caught.value.conversation_id == "conv"
    assert caught.value.active_run_id == "run-1"
    assert await broker.active_run("conv") == "run-1"
    # Other conversations are not affected.
    other = await broker.open_run("other-conv", "run-3")
    assert await broker.active_run("other-conv") == "run-3"
    await other.close()
    await channel.close()


async def test_open_runs_racing_for_one_conversation_let_one_win(broker: Broker) -> None:
    outcomes = await asyncio.gather(*(broker.open_run("conv", f"run-{i}") for i in range(8)), return_exceptions=True)
    winners = [o for o in outcomes if isinstance(o, RunChannel)]
    assert len(winners) == 1
    assert all(isinstance(o, RunAlreadyActive) for o in outcomes if o is not winners[0])
    assert await broker.active_run("conv") == winners[0].run_id
    await winners[0].close()


async def test_a_run_id_cannot_be_reused(broker: Broker) -> None:
    channel = await broker.open_run("conv", "run-1")
    await channel.close()
    with pytest.raises(ValueError, match="used before"):
        await broker.open_run("conv", "run-1")
    assert await broker.active_run("conv") is None


async def test_after_close_the_conversation_has_no_active_run(broker: Broker) -> None:
    assert await broker.active_run("conv") is None
    channel = await broker.open_run("conv", "run-1")
    assert await broker.active_run("conv") == "run-1"
    assert not channel.closed
    await channel.close()
    assert channel.closed
    assert await broker.active_run("conv") is None
    await channel.close()  # idempotent
    following = await broker.open_run("conv", "run-2")
    assert await broker.active_run("conv") == "run-2"
    await following.close()


async def test_publish_after_close_raises_channel_closed(broker: Broker) -> None:
    channel = await broker.open_run("conv", "run-1")
    await channel.close()
    with pytest.raises(ChannelClosed):
        await channel.publish(make_chunks(1))


async def test_the_channel_closes_as_a_context_manager_even_on_error(broker: Broker) -> None:
    channel = await broker.open_run("conv", "run-1")

    async def run() -> None:
        async with channel:
            await channel.publish(make_chunks(2))
            raise RuntimeError("model failed")

    with pytest.raises(RuntimeError, match="model failed"):
        await run()
    assert channel.closed
    assert await broker.active_run("conv") is None
    assert await collect(broker, "run-1") == numbered(make_chunks(2))


async def test_a_cancelled_run_task_still_closes_its_run(broker: Broker) -> None:
    # A client that disconnects cancels the run task (ON_DISCONNECT="cancel").
    published = asyncio.Event()

    async def run() -> None:
        async with await broker.open_run("conv", "run-1") as channel:
            await channel.publish(make_chunks(2))
            published.set()
            await asyncio.Event().wait()  # a model that never answers

    task = asyncio.create_task(run())
    async with asyncio.timeout(GUARD):
        await published.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await broker.active_run("conv") is None
    assert await collect(broker, "run-1") == numbered(make_chunks(2))


async def test_request_stop_sets_stop_requested(broker: Broker) -> None:
    channel = await broker.open_run("conv", "run-1")
    assert not channel.stop_requested.is_set()
    assert await broker.request_stop("other-conv") is False
    assert await broker.request_stop("conv") is True
    async with asyncio.timeout(GUARD):
        await channel.stop_requested.wait()
    # A stop is a request: the run still publishes its last words and closes.
    await channel.publish([{"type": "abort"}])
    await channel.close()
    assert await broker.request_stop("conv") is False
    assert await collect(broker, "run-1") == [(0, {"type": "abort"})]


async def test_stop_reaches_only_the_active_run(broker: Broker) -> None:
    first = await broker.open_run("conv", "run-1")
    await first.close()
    second = await broker.open_run("conv", "run-2")
    assert await broker.request_stop("conv") is True
    async with asyncio.timeout(GUARD):
        await second.stop_requested.wait()
    assert not first.stop_requested.is_set()
    await second.close()


async def test_steering_reaches_only_the_active_run_in_order(broker: Broker) -> None:
    first = await broker.open_run("conv", "run-1")
    await first.close()
    second = await broker.open_run("conv", "run-2")
    assert await broker.send_steering("conv", "run-1", {"id": "s0"}) is False  # ended
    assert await broker.send_steering("other-conv", "run-2", {"id": "s0"}) is False
    assert await broker.send_steering("conv", "run-2", {"id": "s1", "kind": "steer"}) is True
    assert await broker.send_steering("conv", "run-2", {"id": "s2", "kind": "queue"}) is True
    async with asyncio.timeout(GUARD):
        got = [await second.steering_requests.get(), await second.steering_requests.get()]
    assert got == [{"id": "s1", "kind": "steer"}, {"id": "s2", "kind": "queue"}]
    assert first.steering_requests.empty()
    assert not second.stop_requested.is_set()  # a steering message is not a stop
    await second.close()
    assert await broker.send_steering("conv", "run-2", {"id": "s3"}) is False


async def test_a_steering_outcome_is_read_by_every_waiter_and_stays(broker: Broker) -> None:
    assert await broker.steering_outcome("conv", "s1", wait=0) is None
    outcome = {"type": "delivered", "id": "s1", "stepNumber": 2}
    async with asyncio.timeout(GUARD):
        waiting = [asyncio.create_task(broker.steering_outcome("conv", "s1", wait=GUARD)) for _ in range(2)]
        await asyncio.sleep(0)  # let them start waiting (or not yet: the outcome stays, either way)
        await broker.report_steering("conv", "s1", outcome)
        assert await asyncio.gather(*waiting) == [outcome, outcome]
    assert await broker.steering_outcome("conv", "s1", wait=0) == outcome
    assert await broker.steering_outcome("conv", "s1", wait=GUARD) == outcome
    assert await broker.steering_outcome("other-conv", "s1", wait=0) is None


async def test_waiting_for_a_steering_outcome_that_never_comes_returns_none(broker: Broker) -> None:
    assert await broker.steering_outcome("conv", "never", wait=0.05) is None


async def test_closing_a_subscriber_mid_stream_leaks_nothing(broker: Broker, request: pytest.FixtureRequest) -> None:
    baseline = other_tasks()
    channel = await broker.open_run("conv", "run-1")
    await channel.publish(make_chunks(10))

    # One reader cancelled while it waits for the next chunk (a client that
    # disconnects), one closed at a yield (a view that stops reading).
    caught_up = asyncio.Event()

    async def read_until_cancelled() -> None:
        async for seq, _ in broker.subscribe("run-1"):
            if seq == 9:
                caught_up.set()

    reader = asyncio.create_task(read_until_cancelled())
    async with asyncio.timeout(GUARD):
        await caught_up.wait()
    await asyncio.sleep(0)  # let it reach its wait for more
    if local_runs(broker) is not None:
        assert local_runs(broker)["run-1"].waiters
    else:
        await wait_for_blocked_readers(request.getfixturevalue("redis_config"), present=True)
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader

    subscription = broker.subscribe("run-1")
    assert await anext(subscription) == (0, make_chunks(1)[0])
    await subscription.aclose()

    if local_runs(broker) is not None:
        assert local_runs(broker)["run-1"].waiters == []
    else:
        await wait_for_blocked_readers(request.getfixturevalue("redis_config"), present=False)

    # The run goes on for the others.
    await channel.publish(make_chunks(1, start=10))
    await channel.close()
    assert await collect(broker, "run-1") == numbered(make_chunks(11))
    assert other_tasks() == baseline
    if local_runs(broker) is None:
        for client in broker._clients.values():  # type: ignore[attr-defined]
            assert not client.redis.connection_pool._in_use_connections


async def wait_for_blocked_readers(config: dict[str, Any], *, present: bool) -> None:
    """Wait (bounded) until a connection of this test's broker is, or none
    is, blocked in XREAD on the server. The server learns of a blocking read,
    or of the socket redis-py closed when a read was cancelled, a moment
    after the client acted."""
    import redis.asyncio as aioredis

    name = config["OPTIONS"]["client_name"]
    admin = aioredis.Redis.from_url(config["URL"])
    try:
        async with asyncio.timeout(GUARD):
            while True:
                clients = await admin.client_list()
                # flag "b": waiting in a blocking command
                blocked = [c for c in clients if c.get("name") == name and "b" in c["flags"] and c["cmd"] == "xread"]
                if bool(blocked) == present:
                    return
                await asyncio.sleep(0.01)
    finally:
        await admin.aclose()


async def test_a_quiet_subscription_yields_keepalives_between_batches(broker: Broker) -> None:
    """``keepalive``: an empty batch ``(next_seq, [])`` after that long
    without news, never in place of a chunk, and nothing changes the
    sequence the chunks have."""
    chunks = make_chunks(3)
    channel = await broker.open_run("conv", "run-1")
    await channel.publish(chunks[:2])
    loop = asyncio.get_running_loop()
    subscription = broker.subscribe_batches("run-1", keepalive=0.05)
    try:
        assert await anext(subscription) == (0, chunks[:2])
        quiet_from = loop.time()
        assert await asyncio.wait_for(anext(subscription), 10) == (2, [])
        assert loop.time() - quiet_from >= 0.05
        assert await asyncio.wait_for(anext(subscription), 10) == (2, [])  # and again, while quiet
        await channel.publish(chunks[2:])
        got = await asyncio.wait_for(anext(subscription), 10)
        while got == (2, []):  # a keep-alive due just before the chunk came is fine
            got = await asyncio.wait_for(anext(subscription), 10)
        assert got == (2, chunks[2:])
        await channel.close()
        rest = [batch async for batch in subscription]
        assert all(batch == (3, []) for batch in rest)
    finally:
        await subscription.aclose()  # type: ignore[attr-defined]


async def test_no_keepalive_while_chunks_keep_coming(broker: Broker) -> None:
    """The quiet a keep-alive waits for is counted from the last news, not
    from the subscription's start: a stream whose chunks come more often
    than ``keepalive`` gets none, however long it runs."""
    channel = await broker.open_run("conv", "run-1")
    chunks = make_chunks(12)
    subscription = broker.subscribe_batches("run-1", keepalive=0.5)
    got: list[tuple[int, list[Any]]] = []
    try:
        for seq, chunk in enumerate(chunks):  # 1.2 s in all: more than twice the keep-alive
            waiting = asyncio.ensure_future(anext(subscription))
            await asyncio.sleep(0.1)  # the subscriber waits for the next chunk meanwhile
            await channel.publish([chunk])
            batch = await asyncio.wait_for(waiting, 10)
            got.append(batch)
            assert batch == (seq, [chunk])
    finally:
        await subscription.aclose()  # type: ignore[attr-defined]
        await channel.close()
    assert len(got) == len(chunks)


async def test_no_keepalive_unless_asked(broker: Broker) -> None:
    channel = await broker.open_run("conv", "run-1")
    subscription = broker.subscribe_batches("run-1")
    waiting = asyncio.ensure_future(anext(subscription))
    try:
        done, _ = await asyncio.wait({waiting}, timeout=0.2)
        assert not done  # nothing published: nothing yielded, not even an empty batch
        await channel.publish(make_chunks(1))
        assert await asyncio.wait_for(waiting, 10) == (0, make_chunks(1))
    finally:
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        await subscription.aclose()  # type: ignore[attr-defined]
        await channel.close()


async def test_end_orphan_ends_a_run_whose_process_died(broker: Broker) -> None:
    chunks = make_chunks(10)
    channel = await broker.open_run("conv", "run-1")  # its process "dies": never closed
    await channel.publish(chunks)
    await channel.flush()
    assert await broker.published("run-1") == chunks
    follower = asyncio.create_task(collect(broker, "run-1"))
    terminal = [{"type": "error", "errorText": "gone"}]

    await broker.end_orphan("conv", "run-1", terminal, 10)

    assert await follower == numbered(chunks + terminal)
    assert await broker.active_run("conv") is None
    assert await broker.published("run-1") == chunks + terminal
    await broker.end_orphan("conv", "run-1", terminal, 11)  # idempotent
    assert await broker.published("run-1") == chunks + terminal
    await (await broker.open_run("conv", "run-2")).close()


async def test_end_orphan_leaves_the_slot_of_another_run(broker: Broker) -> None:
    channel = await broker.open_run("conv", "run-2")
    await broker.end_orphan("conv", "run-1", [], 0)
    assert await broker.active_run("conv") == "run-2"
    assert await broker.published("run-1") is None
    await channel.close()


def another_process(request: pytest.FixtureRequest) -> Broker | None:
    """The broker of another process, on the same Redis or PostgreSQL
    database; None for the in-process broker, which nothing shares."""
    backend = request.node.callspec.params["broker"]
    if backend == "memory":
        return None
    return broker_from_config(request.getfixturevalue(f"{backend}_config"))


RESET_STEP = {"type": "reset-step"}


async def test_continue_orphan_goes_on_with_a_run_whose_process_died(
    broker: Broker, request: pytest.FixtureRequest
) -> None:
    chunks = make_chunks(10)
    gone = another_process(request) or broker
    dead = await gone.open_run("conv", "run-1")
    await dead.publish(chunks)
    await dead.flush()
    if gone is not broker:
        await gone.aclose()  # its process dies: the run is never closed
    log = [*chunks, RESET_STEP]  # the claimant's log: all of it, the dropped step's reset last

    channel = await broker.continue_orphan("conv", "run-1", log, 10)

    assert channel is not None
    assert channel.next_seq == 11
    assert await broker.active_run("conv") == "run-1"
    with pytest.raises(RunAlreadyActive):
        await broker.open_run("conv", "run-2")
    follower = asyncio.create_task(collect(broker, "run-1", 5))
    more = make_chunks(5, 100)
    await channel.publish(more)
    await channel.close()
    assert await follower == numbered(log + more, 5)
    assert await broker.active_run("conv") is None


async def test_continue_orphan_refuses_a_run_that_ended_or_a_chat_another_run_holds(broker: Broker) -> None:
    ended = await broker.open_run("conv", "run-1")
    await ended.publish(make_chunks(2))
    await ended.close()
    assert await broker.continue_orphan("conv", "run-1", [*make_chunks(2), RESET_STEP], 2) is None
    assert await broker.active_run("conv") is None

    holder = await broker.open_run("conv", "run-2")
    assert await broker.continue_orphan("conv", "run-3", [*make_chunks(3), RESET_STEP], 0) is None
    assert await broker.active_run("conv") == "run-2"
    await holder.close()


async def test_abandon_lets_go_of_a_run_another_process_took_over_and_leaves_it_to_that_one(
    broker: Broker, request: pytest.FixtureRequest
) -> None:
    previous_owner = another_process(request)
    if previous_owner is None:
        pytest.skip("no other process shares the in-process broker: abandon is close there")
    try:
        chunks = make_chunks(10)
        lost = await previous_owner.open_run("conv", "run-1")
        await lost.publish(chunks)
        await lost.flush()
        taken = await broker.continue_orphan("conv", "run-1", chunks, 10)  # while the owner was paused
        assert taken is not None

        await lost.abandon()

        with pytest.raises(ChannelClosed):
            await lost.publish(make_chunks(1, 50))
        assert await broker.active_run("conv") == "run-1"
        assert await previous_owner.active_run("conv") == "run-1"
        follower = asyncio.create_task(collect(broker, "run-1"))
        more = make_chunks(3, 10)
        await taken.publish(more)
        await taken.close()
        assert await follower == numbered(chunks + more)
        assert await broker.active_run("conv") is None
    finally:
        await previous_owner.aclose()
