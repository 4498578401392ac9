"""The PostgreSQL broker across processes: what the shared suite
(``test_broker.py``) can't see from one broker instance.

Each ``PostgresBroker`` instance here stands for a server process: it has
its memory of its own runs, its own connections and its own listener, and
shares only the database with the others. The chunk log is written as the
log writer writes it (``write_log``, which sends the same ``NOTIFY``), into
real ``Run`` rows. Skipped unless the suite runs on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async

from uistream_app.live import BrokerUnavailable, RunAlreadyActive, broker_from_config
from uistream_app.live.postgres import PostgresBroker
from uistream_app.recording import write_log

from ..db import make_turn
from .conftest import POSTGRES_URL, make_chunks, require_postgres

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

GUARD = 10


@pytest.fixture(autouse=True)
def _postgres(request: pytest.FixtureRequest, settings: Any) -> None:
    require_postgres(request)
    # The project's broker setting: what makes the log writer send its NOTIFY.
    settings.UISTREAM = {"BROKER": {"BACKEND": "postgres"}}


@pytest_asyncio.fixture(autouse=True)
async def _orm_let_go() -> AsyncIterator[None]:
    """The ORM calls of a test run on ``sync_to_async``'s thread, whose
    connection would outlive the test and keep the test database from
    being dropped: closed after each test."""
    yield
    from django.db import connections

    await sync_to_async(connections.close_all)()


def config(request: pytest.FixtureRequest, **extra: Any) -> dict[str, Any]:
    return {
        "BACKEND": "postgres",
        "URL": request.node.stash[POSTGRES_URL],
        # Longer than GUARD: a follower that missed a NOTIFY fails the test
        # instead of being rescued by its poll.
        "POLL_SECONDS": 60,
        "ACTIVE_TTL": 3,
        "CONNECT_TIMEOUT": 2,
        "OPERATION_TIMEOUT": 2,
        **extra,
    }


@pytest_asyncio.fixture
async def two(request: pytest.FixtureRequest) -> AsyncIterator[tuple[PostgresBroker, PostgresBroker]]:
    """Two processes' brokers on one database."""
    first = broker_from_config(config(request))
    second = broker_from_config(config(request))
    assert isinstance(first, PostgresBroker)
    assert isinstance(second, PostgresBroker)
    yield first, second
    await first.aclose()
    await second.aclose()


async def a_run(chat_id: str) -> tuple[str, str]:
    """A stored run to log into: (conversation key, run id)."""
    run, _ = await sync_to_async(make_turn)(chat_id=chat_id, message_id=f"{chat_id}-answer")
    return str(run.conversation_id), str(run.pk)


async def log(run_id: str, chunks: list[dict[str, Any]]) -> None:
    """Store ``chunks`` in the run's log, as the log writer of the process
    that runs it does (one transaction, a NOTIFY at its commit)."""
    from uistream_app.models import Run

    run = await Run.objects.aget(pk=run_id)
    await sync_to_async(write_log)(run, chunks)


async def collect(broker: PostgresBroker, run_id: str, from_seq: int = 0) -> list[tuple[int, Any]]:
    async with asyncio.timeout(GUARD):
        return [item async for item in broker.subscribe(run_id, from_seq)]


async def test_a_follower_on_another_process_reads_the_run_from_the_log_woken_by_its_writer(
    two: tuple[PostgresBroker, PostgresBroker],
) -> None:
    owner, other = two
    conversation, run_id = await a_run("chat-f1")
    chunks = make_chunks(60)
    channel = await owner.open_run(conversation, run_id)
    await channel.publish(chunks[:25])
    await log(run_id, chunks[:25])
    follower = asyncio.create_task(collect(other, run_id))
    resumer = asyncio.create_task(collect(other, run_id, from_seq=20))
    for start in range(25, 60, 7):  # the writer's rounds, while they follow
        await channel.publish(chunks[start : start + 7])
        await log(run_id, chunks[start : start + 7])
    await channel.close()
    assert await follower == list(enumerate(chunks))
    assert await resumer == list(enumerate(chunks))[20:]
    # Once closed, a late follower reads it whole and ends.
    assert await collect(other, run_id) == list(enumerate(chunks))


async def test_a_follower_is_never_ahead_of_the_log(two: tuple[PostgresBroker, PostgresBroker]) -> None:
    owner, other = two
    conversation, run_id = await a_run("chat-f2")
    channel = await owner.open_run(conversation, run_id)
    await channel.publish(make_chunks(10))  # sent to the owner's own subscribers only
    await log(run_id, make_chunks(4))
    subscription = other.subscribe_batches(run_id)
    try:
        assert await asyncio.wait_for(anext(subscription), GUARD) == (0, make_chunks(4))
        waiting = asyncio.ensure_future(anext(subscription))
        done, _ = await asyncio.wait({waiting}, timeout=0.3)
        assert not done  # what the log lacks, the follower lacks
        await log(run_id, make_chunks(6, start=4))
        assert await asyncio.wait_for(waiting, GUARD) == (4, make_chunks(6, start=4))
    finally:
        await subscription.aclose()  # type: ignore[attr-defined]
        await channel.close()


async def test_one_run_per_chat_across_processes_and_a_stop_reaches_the_owner(
    two: tuple[PostgresBroker, PostgresBroker],
) -> None:
    owner, other = two
    channel = await owner.open_run("chat-s1", "run-1")
    with pytest.raises(RunAlreadyActive) as refused:
        await other.open_run("chat-s1", "run-2")
    assert refused.value.active_run_id == "run-1"
    assert await other.active_run("chat-s1") == "run-1"
    with pytest.raises(ValueError, match="used before"):
        await other.open_run("chat-s2", "run-1")
    assert await other.request_stop("chat-s1") is True
    async with asyncio.timeout(GUARD):
        await channel.stop_requested.wait()
    await channel.close()
    assert await other.active_run("chat-s1") is None
    assert await other.request_stop("chat-s1") is False
    await (await other.open_run("chat-s1", "run-2")).close()


async def test_a_handed_off_run_is_adopted_once_and_a_stop_asked_meanwhile_waits_for_it(
    request: pytest.FixtureRequest, two: tuple[PostgresBroker, PostgresBroker]
) -> None:
    web, worker = two
    conversation, run_id = await a_run("chat-h1")
    channel = await web.open_run(conversation, run_id)
    await channel.publish(make_chunks(2))
    await channel.hand_off()  # type: ignore[attr-defined]
    assert await worker.adopt_run(conversation, "no-such-run") is None
    assert await web.request_stop(conversation) is True  # before any worker has it

    adopted = await worker.adopt_run(conversation, run_id)
    assert adopted is not None
    assert adopted.next_seq == 2
    assert adopted.stop_requested.is_set()
    third = broker_from_config(config(request))
    try:
        assert await third.adopt_run(conversation, run_id) is None  # a task delivered twice runs once
    finally:
        await third.aclose()
    # The web process follows it through the log now, like any other.
    follower = asyncio.create_task(collect(web, run_id))
    await log(run_id, make_chunks(5))
    await adopted.publish(make_chunks(3, start=2))
    await adopted.close()
    assert await follower == list(enumerate(make_chunks(5)))
    assert await worker.adopt_run(conversation, run_id) is None
    assert await web.active_run(conversation) is None


async def test_a_steering_message_reaches_the_run_on_the_other_process_and_its_outcome_every_waiter(
    two: tuple[PostgresBroker, PostgresBroker],
) -> None:
    owner, other = two
    channel = await owner.open_run("chat-st1", "run-1")
    assert await other.send_steering("chat-st1", "run-9", {"id": "s0"}) is False  # not the active run
    assert await other.send_steering("chat-st1", "run-1", {"id": "s1", "kind": "steer"}) is True
    assert await other.send_steering("chat-st1", "run-1", {"id": "s2", "kind": "queue"}) is True
    async with asyncio.timeout(GUARD):
        got = [await channel.steering_requests.get(), await channel.steering_requests.get()]
    assert got == [{"id": "s1", "kind": "steer"}, {"id": "s2", "kind": "queue"}]
    assert not channel.stop_requested.is_set()

    # The run (on ``owner``) reports; waiters on both processes read it.
    waiting = [asyncio.create_task(b.steering_outcome("chat-st1", "s1", wait=GUARD)) for b in (other, other, owner)]
    outcome = {"id": "s1", "status": "delivered", "step": 1}
    await owner.report_steering("chat-st1", "s1", outcome)
    async with asyncio.timeout(GUARD):
        assert await asyncio.gather(*waiting) == [outcome] * 3
    assert await other.steering_outcome("chat-st1", "s1", wait=0) == outcome  # still there
    await channel.close()
    assert await other.send_steering("chat-st1", "run-1", {"id": "s3"}) is False  # ended


async def test_a_steering_message_sent_while_the_run_is_handed_off_waits_for_its_adopter(
    two: tuple[PostgresBroker, PostgresBroker],
) -> None:
    web, worker = two
    conversation, run_id = await a_run("chat-st2")
    channel = await web.open_run(conversation, run_id)
    await channel.hand_off()  # type: ignore[attr-defined]
    assert await web.send_steering(conversation, run_id, {"id": "s1"}) is True  # before any worker has it
    assert await worker.send_steering(conversation, run_id, {"id": "s2"}) is True
    adopted = await worker.adopt_run(conversation, run_id)
    assert adopted is not None
    assert await web.send_steering(conversation, run_id, {"id": "s3"}) is True  # after: sent to the worker
    async with asyncio.timeout(GUARD):
        got = [await adopted.steering_requests.get() for _ in range(3)]
    assert got == [{"id": "s1"}, {"id": "s2"}, {"id": "s3"}]
    await adopted.close()


async def test_a_follower_on_another_process_is_announced_to_the_run(
    two: tuple[PostgresBroker, PostgresBroker],
) -> None:
    """Rule 9: the run's process hears of it (and its recorder writes sooner)."""
    owner, other = two
    conversation, run_id = await a_run("chat-f1")
    channel = await owner.open_run(conversation, run_id)
    followed = asyncio.Event()
    channel.when_followed = followed.set
    assert not followed.is_set()
    follower = asyncio.create_task(collect(other, run_id))
    async with asyncio.timeout(GUARD):
        await followed.wait()
    await log(run_id, make_chunks(2))
    await channel.close()
    assert await follower == list(enumerate(make_chunks(2)))


async def test_a_dead_process_frees_its_chat_after_active_ttl_and_its_followers_end(
    request: pytest.FixtureRequest,
) -> None:
    dead = broker_from_config(config(request, ACTIVE_TTL=0.5))
    alive = broker_from_config(config(request, ACTIVE_TTL=0.5))
    assert isinstance(dead, PostgresBroker)
    assert isinstance(alive, PostgresBroker)
    try:
        conversation, run_id = await a_run("chat-d1")
        await dead.open_run(conversation, run_id)
        await log(run_id, make_chunks(3))
        follower = asyncio.create_task(collect(alive, run_id))
        await asyncio.sleep(1.0)  # three renewals
        assert await alive.active_run(conversation) == run_id
        await dead.aclose()  # the process dies: its run is never closed, its lease no longer renewed
        async with asyncio.timeout(GUARD):
            # The lease runs out on the database's clock: nothing to wait on but it.
            while await alive.active_run(conversation) is not None:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        await (await alive.open_run(conversation, "the-next-run")).close()
        assert await follower == list(enumerate(make_chunks(3)))
    finally:
        await alive.aclose()


async def test_end_orphan_on_another_process_ends_the_followers_with_what_the_sweeper_logged(
    two: tuple[PostgresBroker, PostgresBroker],
) -> None:
    dying, sweeper = two
    conversation, run_id = await a_run("chat-o1")
    await dying.open_run(conversation, run_id)
    await log(run_id, make_chunks(4))
    follower = asyncio.create_task(collect(sweeper, run_id))
    terminal = [{"type": "error", "errorText": "gone"}]
    assert await sweeper.published(run_id) is None  # the broker holds nothing the log does not
    await log(run_id, terminal)  # the sweeper's steps 2-4
    await sweeper.end_orphan(conversation, run_id, [], 5)
    assert await follower == list(enumerate(make_chunks(4) + terminal))
    assert await sweeper.active_run(conversation) is None
    await sweeper.end_orphan(conversation, run_id, [], 5)  # idempotent


async def test_continued_elsewhere_the_paused_process_ends_its_own_readers_and_then_follows_the_log(
    two: tuple[PostgresBroker, PostgresBroker],
) -> None:
    paused, survivor = two
    conversation, run_id = await a_run("chat-c1")
    lost = await paused.open_run(conversation, run_id)
    await lost.publish(make_chunks(6))
    await log(run_id, make_chunks(4))  # its writer stored 4 of them when it froze
    reader = asyncio.create_task(collect(paused, run_id))  # its own client, from memory
    reset = {"type": "reset-step"}
    await log(run_id, [reset])  # the claimant's, on the survivor
    taken = await survivor.continue_orphan(conversation, run_id, [*make_chunks(4), reset], 4)
    assert taken is not None

    await lost.abandon()  # thawed, it learns it lost the run

    assert await reader == list(enumerate(make_chunks(6)))  # what it was sent, then its end
    assert await paused.active_run(conversation) == run_id  # the row is the survivor's, open
    follower = asyncio.create_task(collect(paused, run_id))  # a reconnect there: the log
    more = make_chunks(3, 10)
    await taken.publish(more)
    await log(run_id, more)
    await taken.close()
    assert await follower == list(enumerate([*make_chunks(4), reset, *more]))
    assert await survivor.active_run(conversation) is None


class Proxy:
    """A TCP proxy to PostgreSQL on a port of its own: the database as the
    broker sees it, taken away (every connection cut, the port refusing)
    and given back."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in list(self.writers):
            writer.transport.abort()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self.writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self.writers -= {writer, up_writer}


async def test_the_database_going_away_fails_fast_and_the_first_call_after_works(
    request: pytest.FixtureRequest, two: tuple[PostgresBroker, PostgresBroker]
) -> None:
    owner, _ = two
    url = urlsplit(request.node.stash[POSTGRES_URL])
    proxy = Proxy((url.hostname or "127.0.0.1", url.port or 5432))
    await proxy.start()
    netloc = url.netloc.rsplit("@", 1)
    proxied = urlunsplit(url._replace(netloc=f"{netloc[0]}@127.0.0.1:{proxy.port}"))
    other = broker_from_config(config(request, URL=proxied))
    try:
        conversation, run_id = await a_run("chat-u1")
        channel = await owner.open_run(conversation, run_id)
        await log(run_id, make_chunks(3))
        subscription = other.subscribe_batches(run_id)
        assert await asyncio.wait_for(anext(subscription), GUARD) == (0, make_chunks(3))
        waiting = asyncio.ensure_future(anext(subscription))
        await asyncio.sleep(0.1)

        await proxy.stop()
        # The follower ends with the broker's error, not a hang; a new run
        # or a stop is refused as unavailable within the bound.
        with pytest.raises(BrokerUnavailable):
            await asyncio.wait_for(waiting, GUARD)
        await subscription.aclose()  # type: ignore[attr-defined]
        with pytest.raises(BrokerUnavailable):
            await asyncio.wait_for(other.open_run("chat-u2", "run-u2"), GUARD)
        with pytest.raises(BrokerUnavailable):
            await asyncio.wait_for(other.request_stop(conversation), GUARD)
        with pytest.raises(BrokerUnavailable):
            await asyncio.wait_for(other.ping(), GUARD)

        await proxy.start()  # the same port, back
        assert await other.request_stop(conversation) is True  # the first call after works
        async with asyncio.timeout(GUARD):
            await channel.stop_requested.wait()
        await channel.close()
        assert await collect(other, run_id) == list(enumerate(make_chunks(3)))  # type: ignore[arg-type]
    finally:
        await other.aclose()
        with contextlib.suppress(Exception):
            await proxy.stop()
