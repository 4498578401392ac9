"""The broker port: what a run publishes into and what a response reads from.

A run task holds a ``RunChannel`` and publishes numbered UI chunks (plain
JSON-serialisable dicts, the canonical log, docs/architecture.md); any number of
subscribers, in this process or another, read them back. The rules
every backend keeps (the shared suite in ``tests/live`` checks them) are
docs/operations.md, "Broker rules"; "rule N" here means those.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import aclosing
from types import TracebackType
from typing import Any, Protocol

from ..protocol.ui.chunks import Chunk

__all__ = [
    "Broker",
    "BrokerConfigError",
    "BrokerError",
    "BrokerUnavailable",
    "ChannelClosed",
    "Chunk",
    "RunAlreadyActive",
    "RunChannel",
    "RunLost",
    "chunks_of",
    "seconds_setting",
]


class BrokerError(Exception):
    """Base class of the broker's errors."""


class BrokerUnavailable(BrokerError):
    """The broker's server (Redis) cannot be reached."""


class BrokerConfigError(BrokerError, ValueError):
    """The ``BROKER`` setting names no usable backend or has a bad key."""


class RunAlreadyActive(BrokerError):
    """``open_run`` for a conversation that already has an active run.

    ``active_run_id`` is the run that holds the conversation (``None`` when
    it finished in the meantime: the caller may simply try again).
    """

    def __init__(self, conversation_id: str, active_run_id: str | None) -> None:
        self.conversation_id = conversation_id
        self.active_run_id = active_run_id
        super().__init__(f"Conversation {conversation_id!r} already has an active run ({active_run_id!r}).")


class ChannelClosed(BrokerError):
    """``publish`` on a channel that was closed."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"Run {run_id!r} is closed: nothing more can be published.")


class RunLost(BrokerError):
    """The run's stream vanished from the server while the run was live
    (a Redis restart or flush, or heartbeats that failed for longer than
    the run's time to live)."""


def seconds_setting(config: Mapping[str, Any], key: str, default: float, minimum: float) -> float:
    """``config[key]`` as seconds, at least ``minimum``; ``BrokerConfigError``
    naming the key otherwise."""
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= minimum:
        raise BrokerConfigError(f"UISTREAM['BROKER'][{key!r}] must be a number of seconds >= {minimum}, not {value!r}.")
    return float(value)


class RunChannel(ABC):
    """The run task's end of a live run. Make one with ``Broker.open_run``.

    Use it as an async context manager so the run is closed whatever
    happens to the task::

        async with await broker.open_run(conversation_id, run_id) as channel:
            await channel.publish(chunks)
    """

    run_id: str
    conversation_id: str
    #: Set when ``request_stop`` reached this run, from any process.
    stop_requested: asyncio.Event
    #: The steering messages ``send_steering`` sent this run, from any
    #: process, in the order they came (the JSON objects as sent).
    steering_requests: asyncio.Queue[dict[str, Any]]
    #: Called on the run's loop when a subscriber on another process starts
    #: following the run through the stored log (the PostgreSQL broker's
    #: followers, which lag by the log writer's interval): the runner sets
    #: it to have the recorder write sooner. Brokers without such
    #: followers never call it.
    when_followed: Callable[[], None] | None = None

    @property
    @abstractmethod
    def next_seq(self) -> int:
        """The sequence number the next published chunk gets (the number
        of chunks published so far)."""

    @property
    @abstractmethod
    def closed(self) -> bool: ...

    @abstractmethod
    async def publish(self, chunks: Sequence[Chunk]) -> None:
        """Append ``chunks`` in order, numbering them from ``next_seq``.

        Pass what one loop turn produced in one call. The in-memory backend
        appends and wakes the subscribers; the Redis backend queues the
        chunks for a writer that sends everything queued in one round trip
        (so the run does not wait on the network) and raises here a write
        that failed before. Raises ``ChannelClosed`` after ``close()``.

        A backend takes the chunks before its first ``await``: once called,
        a cancellation of the caller can't keep them from subscribers (the
        run task records a batch, then publishes it, and relies on this).
        """

    async def flush(self) -> None:
        """Wait until every published chunk can be read by any subscriber
        (anywhere); raise the error of a failed write."""
        return None

    @abstractmethod
    async def close(self) -> None:
        """Finish the run (after a ``flush()``): subscribers drain what was
        published and end, and the conversation has no active run any more.
        Idempotent."""

    async def abandon(self) -> None:
        """Let go of a run another process took over (its lease, docs/
        operations.md "Leases and the sweeper"): publish nothing more and end
        nothing its new owner holds. In-process subscribers of a broker no
        other process shares end here (the default: ``close``); a shared
        broker's stream is left to the new owner."""
        await self.close()

    async def __aenter__(self) -> RunChannel:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<{type(self).__name__} run={self.run_id!r} conversation={self.conversation_id!r} {state}>"


class Broker(Protocol):
    """The port both backends implement (``MemoryBroker``, ``RedisBroker``).

    A backend is built from its ``BROKER`` setting by a ``from_config``
    class method (see ``broker_from_config``).
    """

    async def open_run(self, conversation_id: str, run_id: str) -> RunChannel:
        """Register ``run_id`` as the active run of ``conversation_id`` and
        return its channel. ``RunAlreadyActive`` when the conversation
        already has one (atomic across processes); ``ValueError`` when
        ``run_id`` was used before."""
        ...

    async def active_run(self, conversation_id: str) -> str | None:
        """The id of the conversation's active run, or ``None``."""
        ...

    def subscribe(self, run_id: str, from_seq: int = 0) -> AsyncIterator[tuple[int, Chunk]]:
        """``(seq, chunk)`` from ``from_seq`` on: the replay, then the live
        tail, until the run is closed and everything was delivered."""
        ...

    def subscribe_batches(
        self, run_id: str, from_seq: int = 0, *, keepalive: float | None = None
    ) -> AsyncIterator[tuple[int, list[Chunk]]]:
        """Like ``subscribe``, but ``(first_seq, chunks)`` for everything
        available at each wake-up: one ``render_many`` and one write per
        batch instead of per chunk. With ``keepalive`` (seconds), an empty
        batch ``(next_seq, [])`` after that long without news, so that a
        transport can send a keep-alive without a timer of its own."""
        ...

    async def request_stop(self, conversation_id: str) -> bool:
        """Ask the conversation's active run to stop, wherever it runs;
        ``False`` when it has none."""
        ...

    async def send_steering(self, conversation_id: str, run_id: str, request: Mapping[str, Any]) -> bool:
        """Hand ``request`` (a JSON object) to run ``run_id``, wherever it
        runs, if it is still the conversation's active run: its channel's
        ``steering_requests`` gets it. ``False`` when it is not (it ended)."""
        ...

    async def report_steering(self, conversation_id: str, steering_id: str, outcome: Mapping[str, Any]) -> None:
        """Make the outcome of the conversation's steering message
        ``steering_id`` readable by ``steering_outcome``, in every process,
        for the time a finished run stays readable (``FINISHED_TTL``)."""
        ...

    async def steering_outcome(self, conversation_id: str, steering_id: str, wait: float) -> dict[str, Any] | None:
        """The outcome ``report_steering`` reported, waiting for it up to
        ``wait`` seconds (0: only look); ``None`` when there is none yet.
        Reading it leaves it there for other readers."""
        ...

    async def published(self, run_id: str) -> list[Chunk] | None:
        """Every chunk published for ``run_id`` so far, from seq 0, without
        waiting; ``None`` when the broker holds no such run (never opened
        here, or expired). The sweeper completes an orphan's log from it."""
        ...

    async def end_orphan(self, conversation_id: str, run_id: str, chunks: Sequence[Chunk], first_seq: int) -> None:
        """End a run whose process is gone: append ``chunks`` numbered from
        ``first_seq`` (only if that is the run's next seq), close the run
        so that its subscribers drain and end, and free the conversation's
        slot if this run still holds it. Idempotent; a run that is closed
        or unknown is left as it is (the slot is still freed)."""
        ...

    async def continue_orphan(
        self, conversation_id: str, run_id: str, log: Sequence[Chunk], first_seq: int
    ) -> RunChannel | None:
        """Go on with a run whose process is gone, here: ``log`` is its whole
        log as the claimant stored it (the half-done step's ``reset-step``
        last), of which the broker held the first ``first_seq`` chunks
        (``published``); the rest is appended, the run is the conversation's
        active run again, and the channel returned publishes on from
        ``len(log)``. None when the run ended in the broker, or another run
        holds the conversation's slot."""
        ...

    async def ping(self) -> None:
        """Raise ``BrokerUnavailable`` when the backend cannot be reached."""
        ...

    async def aclose(self) -> None:
        """Release connections. Runs still open are abandoned, not closed."""
        ...


async def chunks_of(batches: AsyncGenerator[tuple[int, list[Chunk]], None]) -> AsyncGenerator[tuple[int, Chunk], None]:
    """``subscribe`` in terms of ``subscribe_batches``: one ``(seq, chunk)``
    per chunk. Closing this closes ``batches`` at once (not when the
    garbage collector gets to it), so nothing outlives the subscription."""
    async with aclosing(batches):
        async for first, batch in batches:
            for offset, chunk in enumerate(batch):
                yield first + offset, chunk
