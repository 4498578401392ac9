"""The in-process broker: the default, for one server process.

A run is a list of chunks. Publishing is ``list.extend`` plus waking the
subscribers that wait for more; a subscriber reads the list from its own
position, so replay and live tail are the same code and cannot gap or
repeat at the seam. Nothing is copied and no task is started per chunk.

Its rules are docs/operations.md, "Memory broker rules" ("rule N" in this module
means those).
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import suppress
from typing import Any, Final

from ..protocol.jsonbody import json_size
from .base import BrokerConfigError, ChannelClosed, Chunk, RunAlreadyActive, RunChannel, chunks_of, seconds_setting

__all__ = ["MemoryBroker", "MemoryRunChannel"]

DEFAULT_FINISHED_TTL: Final = 60.0
#: The most a process keeps of finished runs' chunks, in bytes of their JSON.
DEFAULT_FINISHED_MAX_BYTES: Final = 16 * 1024 * 1024


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _call_in(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    """Run ``callback`` in ``loop``: now when that is the current loop,
    else scheduled thread-safely (and dropped when the loop is gone)."""
    if loop is _running_loop():
        callback()
        return
    with suppress(RuntimeError):  # that loop is closed: nobody waits any more
        loop.call_soon_threadsafe(callback)


class _Quiet:
    """A subscription's keep-alive: wakes the subscriber parked on
    ``parked`` once it has waited ``every`` seconds without news.

    One timer a subscription, moved on only when it fires, instead of one
    armed and cancelled for every wait: a stream waits once a delta, and
    200 streams' timers made and cancelled 10,000 times a second kept the
    event loop's timer heap busy (``bench/server/burst_profile.py``). As
    with a timer a wait, the quiet is counted from the first wait after
    the last news (a batch or a keep-alive handed over)."""

    __slots__ = ("due", "every", "fresh", "last", "loop", "parked", "timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, every: float) -> None:
        self.loop = loop
        self.every = every
        self.last = loop.time()
        self.fresh = True
        self.due = False
        self.parked: asyncio.Future[None] | None = None
        self.timer: asyncio.TimerHandle | None = loop.call_at(self.last + every, self._fire)

    def news(self) -> None:
        self.fresh = True
        self.due = False

    def park(self, future: asyncio.Future[None]) -> None:
        if self.fresh:
            self.fresh = False
            self.last = self.loop.time()
        self.parked = future

    def _fire(self) -> None:
        now = self.loop.time()
        if self.parked is None:  # busy with news: its next wait counts afresh
            at = now + self.every
        elif now < self.last + self.every:  # news, and a wait since
            at = self.last + self.every
        else:
            self.due = True
            _resolve(self.parked)
            at = now + self.every
        self.timer = self.loop.call_at(at, self._fire)

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class _Run:
    """One run's log and the subscribers parked on it."""

    __slots__ = ("chunks", "closed", "conversation_id", "run_id", "waiters")

    def __init__(self, conversation_id: str, run_id: str) -> None:
        self.conversation_id = conversation_id
        self.run_id = run_id
        self.chunks: list[Chunk] = []
        self.closed = False
        self.waiters: list[asyncio.Future[None]] = []

    def wake(self) -> None:
        waiters, self.waiters = self.waiters, []
        here = _running_loop()
        for future in waiters:
            loop = future.get_loop()
            if loop is here:
                if not future.done():
                    future.set_result(None)
            else:
                with suppress(RuntimeError):  # the subscriber's loop is closed
                    loop.call_soon_threadsafe(_resolve, future)


class MemoryRunChannel(RunChannel):
    def __init__(self, broker: MemoryBroker, run: _Run, loop: asyncio.AbstractEventLoop) -> None:
        self._broker = broker
        self._run = run
        self._loop = loop
        self.run_id = run.run_id
        self.conversation_id = run.conversation_id
        self.stop_requested = asyncio.Event()
        self.steering_requests: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    @property
    def next_seq(self) -> int:
        return len(self._run.chunks)

    @property
    def closed(self) -> bool:
        return self._run.closed

    async def publish(self, chunks: Sequence[Chunk]) -> None:
        run = self._run
        if run.closed:
            raise ChannelClosed(self.run_id)
        run.chunks.extend(chunks)
        if run.waiters:
            run.wake()

    async def close(self) -> None:
        run = self._run
        if run.closed:
            return
        run.closed = True
        run.wake()
        self._broker._finished(self)

    def _request_stop(self) -> None:
        _call_in(self._loop, self.stop_requested.set)


class MemoryBroker:
    """The in-process ``Broker``: ``{"BACKEND": "memory"}`` (the default).

    ``{"BACKEND": "memory", "FINISHED_TTL": 60, "FINISHED_MAX_BYTES": 16 MiB}``:
    seconds a finished run stays readable, and the most the finished runs
    kept may hold together (rule 3).
    """

    def __init__(
        self, *, finished_ttl: float = DEFAULT_FINISHED_TTL, finished_max_bytes: int = DEFAULT_FINISHED_MAX_BYTES
    ) -> None:
        if finished_ttl < 0:
            raise BrokerConfigError("FINISHED_TTL must be >= 0 seconds.")
        if isinstance(finished_max_bytes, bool) or not isinstance(finished_max_bytes, int) or finished_max_bytes < 0:
            raise BrokerConfigError(
                f"UISTREAM['BROKER']['FINISHED_MAX_BYTES'] must be a number of bytes >= 0, not {finished_max_bytes!r}."
            )
        self.finished_ttl = float(finished_ttl)
        self.finished_max_bytes = finished_max_bytes
        self._runs: dict[str, _Run] = {}
        self._active: dict[str, MemoryRunChannel] = {}
        #: Finished runs kept, oldest first: (forget at, run id, bytes).
        self._expiring: deque[tuple[float, str, int]] = deque()
        self._kept_bytes = 0
        self._kept_lock = threading.Lock()
        self._clock: Callable[[], float] = time.monotonic
        #: Steering outcomes by (conversation, steering id): (forget at, outcome).
        self._outcomes: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}
        #: Who waits for one: the futures ``report_steering`` resolves.
        self._outcome_waiters: dict[tuple[str, str], list[asyncio.Future[None]]] = {}

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> MemoryBroker:
        unknown = set(config) - {"BACKEND", "FINISHED_TTL", "FINISHED_MAX_BYTES"}
        if unknown:
            raise BrokerConfigError(
                f"UISTREAM['BROKER'] has keys the memory broker does not know: {', '.join(sorted(unknown))}."
            )
        return cls(
            finished_ttl=seconds_setting(config, "FINISHED_TTL", DEFAULT_FINISHED_TTL, minimum=0),
            finished_max_bytes=config.get("FINISHED_MAX_BYTES", DEFAULT_FINISHED_MAX_BYTES),
        )

    def __repr__(self) -> str:
        return f"<MemoryBroker runs={len(self._runs)} active={len(self._active)}>"

    async def open_run(self, conversation_id: str, run_id: str) -> MemoryRunChannel:
        self._sweep()
        if run_id in self._runs:
            raise ValueError(f"Run id {run_id!r} was used before: give each run a new id.")
        run = _Run(conversation_id, run_id)
        channel = MemoryRunChannel(self, run, asyncio.get_running_loop())
        # setdefault is one atomic step even with threads around.
        holder = self._active.setdefault(conversation_id, channel)
        if holder is not channel:
            raise RunAlreadyActive(conversation_id, holder.run_id)
        self._runs[run_id] = run
        return channel

    async def active_run(self, conversation_id: str) -> str | None:
        channel = self._active.get(conversation_id)
        return None if channel is None else channel.run_id

    def subscribe(self, run_id: str, from_seq: int = 0) -> AsyncGenerator[tuple[int, Chunk], None]:
        return chunks_of(self.subscribe_batches(run_id, from_seq))

    async def subscribe_batches(
        self, run_id: str, from_seq: int = 0, *, keepalive: float | None = None
    ) -> AsyncGenerator[tuple[int, list[Chunk]], None]:
        if from_seq < 0:
            raise ValueError(f"from_seq must be >= 0, not {from_seq}.")
        self._sweep()
        run = self._runs.get(run_id)
        if run is None:
            return
        chunks = run.chunks
        seq = from_seq
        loop = asyncio.get_running_loop()
        quiet = _Quiet(loop, keepalive) if keepalive is not None else None
        try:
            while True:
                available = len(chunks)
                if seq < available:
                    batch = chunks[seq:available]
                    first, seq = seq, available
                    if quiet is not None:
                        quiet.news()
                    yield first, batch
                    continue
                if run.closed:
                    # Everything published before close() is in the list.
                    if seq >= len(chunks):
                        return
                    continue
                future: asyncio.Future[None] = loop.create_future()
                run.waiters.append(future)
                if len(chunks) > seq or run.closed:  # rule 2: news while registering
                    with suppress(ValueError):  # a publisher (another thread) took the list
                        run.waiters.remove(future)
                    continue
                if quiet is not None:
                    quiet.park(future)
                try:
                    await future
                except BaseException:
                    # Cancelled while parked (which cancels the future too): a
                    # publisher that woke us removed the future, nobody else will.
                    future.cancel()
                    with suppress(ValueError):  # a publisher took the list meanwhile
                        run.waiters.remove(future)
                    raise
                finally:
                    if quiet is not None:
                        quiet.parked = None
                if quiet is not None and quiet.due and len(chunks) <= seq and not run.closed:
                    # The keep-alive, not a publisher, woke us.
                    with suppress(ValueError):
                        run.waiters.remove(future)
                    quiet.news()
                    yield seq, []
        finally:
            if quiet is not None:
                quiet.close()

    async def request_stop(self, conversation_id: str) -> bool:
        channel = self._active.get(conversation_id)
        if channel is None:
            return False
        channel._request_stop()
        return True

    async def send_steering(self, conversation_id: str, run_id: str, request: Mapping[str, Any]) -> bool:
        channel = self._active.get(conversation_id)
        if channel is None or channel.run_id != run_id:
            return False
        data = dict(request)
        _call_in(channel._loop, lambda: channel.steering_requests.put_nowait(data))
        return True

    async def report_steering(self, conversation_id: str, steering_id: str, outcome: Mapping[str, Any]) -> None:
        key = (conversation_id, steering_id)
        now = self._clock()
        # Forget the expired ones (a dict kept in insertion order: the oldest first).
        for old in [k for k, (until, _) in self._outcomes.items() if until <= now]:
            del self._outcomes[old]
        self._outcomes[key] = (now + max(self.finished_ttl, 60.0), dict(outcome))
        for future in self._outcome_waiters.pop(key, []):
            _call_in(future.get_loop(), functools.partial(_resolve, future))

    async def steering_outcome(self, conversation_id: str, steering_id: str, wait: float) -> dict[str, Any] | None:
        key = (conversation_id, steering_id)
        kept = self._outcomes.get(key)
        if kept is None and wait > 0:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._outcome_waiters.setdefault(key, []).append(future)
            try:
                await asyncio.wait_for(asyncio.shield(future), wait)
            except TimeoutError:
                pass
            finally:
                waiters = self._outcome_waiters.get(key)
                if waiters is not None and future in waiters:
                    waiters.remove(future)
                    if not waiters:
                        del self._outcome_waiters[key]
            kept = self._outcomes.get(key)
        return None if kept is None else dict(kept[1])

    async def published(self, run_id: str) -> list[Chunk] | None:
        self._sweep()
        run = self._runs.get(run_id)
        return None if run is None else list(run.chunks)

    async def end_orphan(self, conversation_id: str, run_id: str, chunks: Sequence[Chunk], first_seq: int) -> None:
        channel = self._active.get(conversation_id)
        if channel is None or channel.run_id != run_id:
            return
        run = channel._run
        if not run.closed and len(run.chunks) == first_seq:
            run.chunks.extend(chunks)
        await channel.close()

    async def continue_orphan(
        self, conversation_id: str, run_id: str, log: Sequence[Chunk], first_seq: int
    ) -> MemoryRunChannel | None:
        self._sweep()
        known = self._runs.get(run_id)
        if known is not None:
            holder = self._active.get(conversation_id)
            if known.closed or holder is None or holder.run_id != run_id:
                return None
            if len(known.chunks) == first_seq:
                known.chunks.extend(log[first_seq:])
            known.wake()
            return holder
        # Not known here (it ran in a process that is gone): the run is
        # opened with its whole log, so a resume from any index reads it.
        run = _Run(conversation_id, run_id)
        run.chunks.extend(log)
        channel = MemoryRunChannel(self, run, asyncio.get_running_loop())
        if self._active.setdefault(conversation_id, channel) is not channel:
            return None
        self._runs[run_id] = run
        return channel

    async def ping(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    def _forget(self, run_id: str) -> None:
        """Drop ``run_id`` without closing it (a broker built on this one
        whose run went elsewhere: refused by its server, or handed off)."""
        run = self._runs.pop(run_id, None)
        if run is not None:
            channel = self._active.get(run.conversation_id)
            if channel is not None and channel.run_id == run_id:
                del self._active[run.conversation_id]

    def _finished(self, channel: MemoryRunChannel) -> None:
        if self._active.get(channel.conversation_id) is channel:
            del self._active[channel.conversation_id]
        size = json_size(channel._run.chunks) if self.finished_ttl > 0 else 0
        with self._kept_lock:
            if self.finished_ttl <= 0 or size > self.finished_max_bytes:
                self._runs.pop(channel.run_id, None)
                return
            expiring = self._expiring
            expiring.append((self._clock() + self.finished_ttl, channel.run_id, size))
            self._kept_bytes += size
            while self._kept_bytes > self.finished_max_bytes:  # the oldest go first
                self._forget_oldest()

    def _sweep(self) -> None:
        expiring = self._expiring
        if not expiring:
            return
        now = self._clock()
        with self._kept_lock:
            while expiring and expiring[0][0] <= now:
                self._forget_oldest()

    def _forget_oldest(self) -> None:
        _, run_id, size = self._expiring.popleft()
        self._kept_bytes -= size
        self._runs.pop(run_id, None)
