"""The PostgreSQL broker: live runs shared by many server processes that
have a PostgreSQL database and nothing else.

Configuration, tables and channels: docs/operations.md, "postgres"; its
rules are "PostgreSQL broker rules" there ("rule N" in this module means
those). In short:

- The process that runs a run fans it out to its own subscribers in
  memory (a ``MemoryBroker`` inside), as the in-process broker does.
- A subscriber on another process follows the run through the chunk log
  (``uistream_app_chunkbatch``), which it reads after each ``NOTIFY`` the
  log writer sends when it commits a batch (``LOG_CHANNEL``): it is never
  ahead of the log, so nothing it was sent can be lost.
- The chat's run slot, the broker's lease of the run, a stop asked of it
  and its adoption by a worker are a row of ``uistream_app_liverun``; a
  stop (and any other signal: a steering message) is also a ``NOTIFY`` on
  ``SIGNAL_CHANNEL`` that the owner process's listener hands to the run.
- A steering outcome is a row of ``uistream_app_livesteeringoutcome`` and
  a ``NOTIFY`` on ``OUTCOME_CHANNEL`` that wakes its waiters (rule 8).

The module imports no Django: with ``DATABASE`` (an alias of
``settings.DATABASES``) the connection parameters are read from Django on
first use; with ``URL`` (a ``postgres://`` URL or conninfo) Django is not
needed at all. The tables are the app's (migrations 0015 and 0017, and the chunk log);
they are read and written by their names.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from ..errors import import_extra
from .base import (
    BrokerConfigError,
    BrokerError,
    BrokerUnavailable,
    ChannelClosed,
    Chunk,
    RunAlreadyActive,
    RunChannel,
    chunks_of,
    seconds_setting,
)
from .memory import DEFAULT_FINISHED_MAX_BYTES, MemoryBroker, MemoryRunChannel

# The extra ``postgres``: without it, "pip install 'django-uistream[postgres]'".
import_extra("psycopg", "postgres")

import psycopg  # noqa: E402
from psycopg.conninfo import make_conninfo  # noqa: E402

__all__ = ["LOG_CHANNEL", "OUTCOME_CHANNEL", "SIGNAL_CHANNEL", "PostgresBroker", "PostgresRunChannel"]

logger = logging.getLogger("uistream_app.live")

#: The ``NOTIFY`` channel of the chunk log: its payload is the ids of the
#: runs whose log (or state) changed, comma-separated.
LOG_CHANNEL: Final = "uistream_log"
#: The ``NOTIFY`` channel of signals to a run: a JSON object
#: ``{"run": run id, "kind": "stop", ...}``.
SIGNAL_CHANNEL: Final = "uistream_signal"
#: The ``NOTIFY`` channel of steering outcomes: a JSON array
#: ``[conversation id, steering id]`` whose outcome was reported.
OUTCOME_CHANNEL: Final = "uistream_steering"
#: The ``NOTIFY`` channel of followers: a run id that a subscriber on
#: another process started reading from the log (rule 9).
FOLLOW_CHANNEL: Final = "uistream_follow"

RUNS_TABLE: Final = "uistream_app_liverun"
LOG_TABLE: Final = "uistream_app_chunkbatch"
OUTCOMES_TABLE: Final = "uistream_app_livesteeringoutcome"

DEFAULT_ACTIVE_TTL: Final = 30.0
DEFAULT_FINISHED_TTL: Final = 600.0
DEFAULT_POLL_SECONDS: Final = 5.0
DEFAULT_CONNECT_TIMEOUT: Final = 5.0
DEFAULT_OPERATION_TIMEOUT: Final = 10.0
CONFIG_KEYS: Final = frozenset(
    {
        "BACKEND",
        "DATABASE",
        "URL",
        "ACTIVE_TTL",
        "FINISHED_TTL",
        "POLL_SECONDS",
        "CONNECT_TIMEOUT",
        "OPERATION_TIMEOUT",
        "FINISHED_MAX_BYTES",
    }
)

#: Idle connections kept per event loop.
MAX_IDLE: Final = 4
#: Most log rows one read returns (each holds up to 1000 chunks).
READ_ROWS: Final = 64
#: Most run ids in one ``NOTIFY`` payload (PostgreSQL's limit is 8000 bytes).
NOTIFY_IDS: Final = 200

# -- SQL (rule 1: one open row per conversation, the partial unique index) ------

_EXPIRE_HOLDER = f"""
WITH gone AS (
  UPDATE {RUNS_TABLE} SET open = false, expires_at = now() + make_interval(secs => %(finished)s)
  WHERE conversation_id = %(conversation)s AND open AND expires_at <= now()
  RETURNING run_id
)
SELECT pg_notify('{LOG_CHANNEL}', run_id) FROM gone
"""

_INSERT = f"""
INSERT INTO {RUNS_TABLE} (run_id, conversation_id, open, expires_at, next_seq, handed_off, adopted, stop_requested,
  steering)
VALUES (%(run)s, %(conversation)s, true, now() + make_interval(secs => %(ttl)s), 0, false, false, false, '[]')
ON CONFLICT DO NOTHING
RETURNING run_id
"""

_WHY_NOT = f"""
SELECT run_id, open FROM {RUNS_TABLE} WHERE run_id = %(run)s OR (conversation_id = %(conversation)s AND open)
"""

_CLOSE = f"""
WITH ended AS (
  UPDATE {RUNS_TABLE} SET open = false, expires_at = now() + make_interval(secs => %(finished)s)
  WHERE run_id = %(run)s AND open
  RETURNING run_id
)
SELECT pg_notify('{LOG_CHANNEL}', run_id) FROM ended
"""

_ACTIVE = f"""
SELECT run_id FROM {RUNS_TABLE} WHERE conversation_id = %(conversation)s AND open AND expires_at > now()
"""

_STATE = f"""
SELECT open, expires_at <= now() FROM {RUNS_TABLE} WHERE run_id = %(run)s
"""

_READ_LOG = f"""
SELECT first_seq, last_seq, chunks::text FROM {LOG_TABLE}
WHERE run_id = %(run)s AND last_seq >= %(seq)s ORDER BY first_seq LIMIT {READ_ROWS}
"""

# A signal: marked on the row (so a run handed off, or a listener that was
# reconnecting, still finds it), and sent to the owner process.
_SIGNAL = f"""
WITH asked AS (
  UPDATE {RUNS_TABLE} SET stop_requested = stop_requested OR %(stop)s
  WHERE conversation_id = %(conversation)s AND open AND expires_at > now()
  RETURNING run_id
)
SELECT run_id, pg_notify('{SIGNAL_CHANNEL}', json_build_object('run', run_id, 'kind', %(kind)s::text,
  'payload', %(payload)s::jsonb)::text) FROM asked
"""

# Rule 4: the leases of this loop's runs, and the stops they missed.
_HEARTBEAT = f"""
UPDATE {RUNS_TABLE} SET expires_at = now() + make_interval(secs => %(ttl)s)
WHERE run_id = ANY(%(runs)s) AND open
RETURNING run_id, stop_requested
"""

_STOPS = f"""
SELECT run_id FROM {RUNS_TABLE} WHERE run_id = ANY(%(runs)s) AND open AND stop_requested
"""

_FORGET = f"""
DELETE FROM {RUNS_TABLE} WHERE NOT open AND expires_at < now()
"""

_FORGET_OUTCOMES = f"""
DELETE FROM {OUTCOMES_TABLE} WHERE expires_at < now()
"""

# Rule 8: a steering message for the run only while it is the chat's active
# run; kept on its row while it is handed off (its adopter takes it), sent to
# its process otherwise. The row's lock orders it against the adoption.
_STEER = f"""
WITH sent AS (
  UPDATE {RUNS_TABLE} SET steering = CASE WHEN handed_off AND NOT adopted
    THEN steering || jsonb_build_array(%(request)s::jsonb) ELSE steering END
  WHERE run_id = %(run)s AND conversation_id = %(conversation)s AND open AND expires_at > now()
  RETURNING run_id, handed_off AND NOT adopted AS kept
)
SELECT kept, CASE WHEN kept THEN NULL ELSE pg_notify('{SIGNAL_CHANNEL}', json_build_object('run', run_id,
  'kind', 'steer', 'payload', %(request)s::jsonb)::text) END FROM sent
"""

_REPORT = f"""
WITH kept AS (
  INSERT INTO {OUTCOMES_TABLE} (conversation_id, steering_id, outcome, expires_at)
  VALUES (%(conversation)s, %(steering)s, %(outcome)s::jsonb, now() + make_interval(secs => %(finished)s))
  ON CONFLICT (conversation_id, steering_id) DO UPDATE SET outcome = EXCLUDED.outcome, expires_at = EXCLUDED.expires_at
  RETURNING 1
)
SELECT pg_notify('{OUTCOME_CHANNEL}', json_build_array(%(conversation)s::text, %(steering)s::text)::text) FROM kept
"""

_OUTCOME = f"""
SELECT outcome::text FROM {OUTCOMES_TABLE}
WHERE conversation_id = %(conversation)s AND steering_id = %(steering)s AND expires_at > now()
"""

_HAND_OFF = f"""
UPDATE {RUNS_TABLE} SET handed_off = true, next_seq = %(seq)s WHERE run_id = %(run)s AND open
"""

# Rule 7: a run is adopted at most once, and only while it is open.
# The steering kept for it (rule 8) is read from the row it locked, so a
# message kept just before is in it and one sent just after is not.
_ADOPT = f"""
WITH held AS (
  SELECT run_id, steering FROM {RUNS_TABLE}
  WHERE run_id = %(run)s AND conversation_id = %(conversation)s AND open AND handed_off AND NOT adopted
    AND expires_at > now()
  FOR UPDATE
)
UPDATE {RUNS_TABLE} AS r SET adopted = true, expires_at = now() + make_interval(secs => %(ttl)s), steering = '[]'
FROM held WHERE r.run_id = held.run_id
RETURNING r.next_seq, r.stop_requested, held.steering::text
"""

# Rule 8: a run whose process is gone goes on here. Its row, still open
# (its lease run out or not), is this process's again: renewed, and no
# longer adoptable; the log changed (its ``reset-step``): followers read.
_RECLAIM = f"""
WITH taken AS (
  UPDATE {RUNS_TABLE} SET expires_at = now() + make_interval(secs => %(ttl)s), handed_off = false
  WHERE run_id = %(run)s AND conversation_id = %(conversation)s AND open
  RETURNING run_id, stop_requested
)
SELECT stop_requested, pg_notify('{LOG_CHANNEL}', run_id) FROM taken
"""

# The chat's other rows whose lease ran out (rule 1), not the run's own.
_EXPIRE_OTHERS = f"""
WITH gone AS (
  UPDATE {RUNS_TABLE} SET open = false, expires_at = now() + make_interval(secs => %(finished)s)
  WHERE conversation_id = %(conversation)s AND open AND expires_at <= now() AND run_id <> %(run)s
  RETURNING run_id
)
SELECT pg_notify('{LOG_CHANNEL}', run_id) FROM gone
"""


def _is_log_id(run_id: str) -> bool:
    """The chunk log is keyed by the ``Run`` row's UUID: any other id has
    no log to read."""
    try:
        uuid.UUID(run_id)
    except ValueError:
        return False
    return True


def _decode(text: str) -> list[Chunk]:
    chunks: list[Chunk] = orjson.loads(text)
    return chunks


@dataclass(eq=False)
class _Loop:
    """What the broker keeps per event loop: idle connections, the
    listener, the local runs it renews, and the followers it wakes."""

    loop: asyncio.AbstractEventLoop
    idle: list[psycopg.AsyncConnection[Any]] = field(default_factory=list)
    channels: dict[str, PostgresRunChannel] = field(default_factory=dict)
    followers: dict[str, set[asyncio.Event]] = field(default_factory=dict)
    #: Who waits for a steering outcome, by (conversation id, steering id).
    outcome_waiters: dict[tuple[str, str], set[asyncio.Event]] = field(default_factory=dict)
    listener: asyncio.Task[None] | None = None
    listening: asyncio.Event = field(default_factory=asyncio.Event)
    #: Set after each attempt of the listener to connect, whatever came of it.
    attempted: asyncio.Event = field(default_factory=asyncio.Event)
    failure: BaseException | None = None
    #: Callers between "I need the listener" and registering what needs it.
    holds: int = 0

    def busy(self) -> bool:
        return bool(self.channels or self.followers or self.outcome_waiters or self.holds)

    def wake(self, run_id: str) -> None:
        for event in self.followers.get(run_id, ()):
            event.set()

    def wake_all(self) -> None:
        """Every follower and every waiter for an outcome (they read again)."""
        for events in [*self.followers.values(), *self.outcome_waiters.values()]:
            for event in events:
                event.set()


class PostgresRunChannel(RunChannel):
    """A run's channel on the PostgreSQL broker: published chunks go to
    this process's subscribers in memory (``MemoryRunChannel``); other
    processes read them from the chunk log. ``flush`` has nothing to
    wait for: the log is the recorder's."""

    def __init__(
        self, broker: PostgresBroker, conversation_id: str, run_id: str, memory: MemoryRunChannel | None, next_seq: int
    ) -> None:
        self._broker = broker
        self._memory = memory
        self.conversation_id = conversation_id
        self.run_id = run_id
        self.stop_requested = memory.stop_requested if memory is not None else asyncio.Event()
        self.steering_requests = memory.steering_requests if memory is not None else asyncio.Queue()
        self._next_seq = next_seq
        self._closed = False
        self._loop = asyncio.get_running_loop()

    @property
    def next_seq(self) -> int:
        return self._next_seq

    @property
    def closed(self) -> bool:
        return self._closed

    async def publish(self, chunks: Sequence[Chunk]) -> None:
        if self._closed:
            raise ChannelClosed(self.run_id)
        self._next_seq += len(chunks)
        if self._memory is not None:
            await self._memory.publish(chunks)

    async def close(self) -> None:
        """End the run: this process's subscribers drain and end at once;
        the row is closed, which frees the chat's slot and ends the
        followers on other processes once they have read the log (rule 3)."""
        if self._closed:
            return
        self._closed = True
        if self._memory is not None:
            await self._memory.close()
        await self._broker._release(self)

    async def hand_off(self) -> None:
        """Leave the run open for another process to ``adopt_run`` (an
        executor's worker): stop renewing its lease and taking its signals
        here, without ending it. A stop asked meanwhile waits on its row
        (rule 7). Subscribers of this process follow it through the log
        from now on."""
        broker = self._broker
        state = broker._loops.get(self._loop)
        if state is not None:
            state.channels.pop(self.run_id, None)
        if self._memory is not None:
            broker._local._forget(self.run_id)
            self._memory = None
        async with broker._connection() as conn:
            await conn.execute(_HAND_OFF, {"seq": self._next_seq, "run": self.run_id})
        self._closed = True  # here: the adopter closes it

    async def abandon(self) -> None:
        """Let go of a run another process took over (a lost lease, rule 10):
        this process's subscribers end at once, its row is renewed and its
        signals taken here no more, and nothing is published or closed
        from here again. The row is left as it is: the new owner holds it."""
        self._closed = True
        broker = self._broker
        state = broker._loops.get(self._loop)
        if state is not None and state.channels.get(self.run_id) is self:
            del state.channels[self.run_id]
        memory, self._memory = self._memory, None
        if memory is not None:
            await memory.close()
            # Read from the log from now on (rule 2), unless the run is this
            # process's again (``continue_orphan``), with memory of its own.
            if broker._local._runs.get(self.run_id) is memory._run:
                broker._local._forget(self.run_id)
        if state is not None and state.loop is asyncio.get_running_loop():
            await broker._idle_check(state)

    def _signal(self, kind: str, payload: Any) -> None:
        handler = _SIGNALS.get(kind)
        if handler is None:
            logger.warning("run %s got a signal of an unknown kind %r", self.run_id, kind)
            return
        handler(self, payload)


def _on_stop(channel: PostgresRunChannel, payload: Any) -> None:
    channel.stop_requested.set()


def _on_steer(channel: PostgresRunChannel, payload: Any) -> None:
    if isinstance(payload, dict):
        channel.steering_requests.put_nowait(payload)
    else:
        logger.warning("Run %s was sent a steering message that is not a JSON object: dropped.", channel.run_id)


#: What a run does with each kind of signal (rule 5). A new kind is a
#: handler here and a statement that sends it (``_SIGNAL``, ``_STEER``).
_SIGNALS: Final[dict[str, Callable[[PostgresRunChannel, Any], None]]] = {"stop": _on_stop, "steer": _on_steer}


class PostgresBroker:
    """The ``Broker`` over PostgreSQL (see the module docstring):
    ``{"BACKEND": "postgres"}``, on the database ``DATABASE`` names
    (``"default"``) or the one of ``URL``."""

    def __init__(
        self,
        url: str | None = None,
        *,
        database: str = "default",
        active_ttl: float = DEFAULT_ACTIVE_TTL,
        finished_ttl: float = DEFAULT_FINISHED_TTL,
        poll_seconds: float = DEFAULT_POLL_SECONDS,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        operation_timeout: float = DEFAULT_OPERATION_TIMEOUT,
        finished_max_bytes: int = DEFAULT_FINISHED_MAX_BYTES,
    ) -> None:
        self.url = url
        self.database = database
        self.active_ttl = active_ttl
        self.finished_ttl = finished_ttl
        self.poll_seconds = poll_seconds
        self.connect_timeout = connect_timeout
        self.operation_timeout = operation_timeout
        self._local = MemoryBroker(finished_ttl=min(finished_ttl, 60.0), finished_max_bytes=finished_max_bytes)
        self._conninfo: str | None = None
        self._loops: dict[asyncio.AbstractEventLoop, _Loop] = {}

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> PostgresBroker:
        unknown = set(config) - CONFIG_KEYS
        if unknown:
            raise BrokerConfigError(
                f"UISTREAM['BROKER'] has keys the postgres broker does not know: {', '.join(sorted(unknown))}."
            )
        url = config.get("URL")
        database = config.get("DATABASE", "default")
        if url is not None and (not isinstance(url, str) or not url):
            raise BrokerConfigError("UISTREAM['BROKER']['URL'] must be a postgres:// URL.")
        if not isinstance(database, str) or not database:
            raise BrokerConfigError("UISTREAM['BROKER']['DATABASE'] must be the alias of a database in DATABASES.")
        if url is not None and "DATABASE" in config:
            raise BrokerConfigError("UISTREAM['BROKER'] takes URL or DATABASE, not both.")
        max_bytes = config.get("FINISHED_MAX_BYTES", DEFAULT_FINISHED_MAX_BYTES)
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise BrokerConfigError(
                f"UISTREAM['BROKER']['FINISHED_MAX_BYTES'] must be a number of bytes >= 0, not {max_bytes!r}."
            )
        return cls(
            url,
            database=database,
            active_ttl=seconds_setting(config, "ACTIVE_TTL", DEFAULT_ACTIVE_TTL, minimum=0.3),
            finished_ttl=seconds_setting(config, "FINISHED_TTL", DEFAULT_FINISHED_TTL, minimum=0.01),
            poll_seconds=seconds_setting(config, "POLL_SECONDS", DEFAULT_POLL_SECONDS, minimum=0.01),
            connect_timeout=seconds_setting(config, "CONNECT_TIMEOUT", DEFAULT_CONNECT_TIMEOUT, minimum=1),
            operation_timeout=seconds_setting(config, "OPERATION_TIMEOUT", DEFAULT_OPERATION_TIMEOUT, minimum=0.1),
            finished_max_bytes=max_bytes,
        )

    def __repr__(self) -> str:
        where = "URL" if self.url is not None else f"DATABASE={self.database!r}"
        return f"<PostgresBroker {where}>"

    # -- the port -------------------------------------------------------

    async def open_run(self, conversation_id: str, run_id: str) -> PostgresRunChannel:
        memory = await self._local.open_run(conversation_id, run_id)  # a local conflict costs no query
        state = self._state()
        state.holds += 1
        try:
            # Listening before the row exists: no stop asked after it is missed.
            await self._ensure_listening(state)
            async with self._connection() as conn:
                await conn.execute(_EXPIRE_HOLDER, {"finished": self.finished_ttl, "conversation": conversation_id})
                cursor = await conn.execute(
                    _INSERT, {"run": run_id, "conversation": conversation_id, "ttl": self.active_ttl}
                )
                if await cursor.fetchone() is None:
                    why = await conn.execute(_WHY_NOT, {"run": run_id, "conversation": conversation_id})
                    rows = await why.fetchall()
                    if any(row[0] == run_id for row in rows):
                        raise ValueError(f"Run id {run_id!r} was used before: give each run a new id.")
                    holder = next((row[0] for row in rows if row[1]), None)
                    raise RunAlreadyActive(conversation_id, holder)
        except BaseException:
            self._local._forget(run_id)
            state.holds -= 1
            await self._idle_check(state)
            raise
        channel = PostgresRunChannel(self, conversation_id, run_id, memory, 0)
        state.channels[run_id] = channel
        state.holds -= 1
        return channel

    async def adopt_run(self, conversation_id: str, run_id: str) -> PostgresRunChannel | None:
        """The channel of a run another process opened and handed off
        (``PostgresRunChannel.hand_off``), to publish into and close from
        here; None when the run is not active any more or was adopted
        before (each run is adopted at most once, rule 7)."""
        state = self._state()
        state.holds += 1
        try:
            await self._ensure_listening(state)
            async with self._connection() as conn:
                cursor = await conn.execute(
                    _ADOPT, {"run": run_id, "conversation": conversation_id, "ttl": self.active_ttl}
                )
                row = await cursor.fetchone()
            if row is None:
                return None
            channel = PostgresRunChannel(self, conversation_id, run_id, None, int(row[0]))
            if row[1]:
                channel.stop_requested.set()
            for request in json.loads(row[2] or "[]"):  # sent while it was handed off (rule 8)
                _on_steer(channel, request)
            state.channels[run_id] = channel
            return channel
        finally:
            state.holds -= 1
            await self._idle_check(state)

    async def active_run(self, conversation_id: str) -> str | None:
        local = await self._local.active_run(conversation_id)
        if local is not None:
            return local
        async with self._connection() as conn:
            row = await (await conn.execute(_ACTIVE, {"conversation": conversation_id})).fetchone()
        return None if row is None else str(row[0])

    def subscribe(self, run_id: str, from_seq: int = 0) -> AsyncGenerator[tuple[int, Chunk], None]:
        return chunks_of(self.subscribe_batches(run_id, from_seq))

    async def subscribe_batches(
        self, run_id: str, from_seq: int = 0, *, keepalive: float | None = None
    ) -> AsyncGenerator[tuple[int, list[Chunk]], None]:
        if from_seq < 0:
            raise ValueError(f"from_seq must be >= 0, not {from_seq}.")
        if await self._local.published(run_id) is not None:
            # Rule 2: the run is (or just was) this process's: memory.
            batches = self._local.subscribe_batches(run_id, from_seq, keepalive=keepalive)
            try:
                async for item in batches:
                    yield item
            finally:
                await batches.aclose()
            return
        async for item in self._follow(run_id, from_seq, keepalive):
            yield item

    async def request_stop(self, conversation_id: str) -> bool:
        if await self._local.request_stop(conversation_id):
            return True
        return bool(await self._send_signal(conversation_id, "stop", None))

    async def send_steering(self, conversation_id: str, run_id: str, request: Mapping[str, Any]) -> bool:
        if await self._local.send_steering(conversation_id, run_id, request):
            return True  # this process's run: memory
        params = {"run": run_id, "conversation": conversation_id, "request": json.dumps(dict(request))}
        async with self._connection() as conn:
            row = await (await conn.execute(_STEER, params)).fetchone()
        return row is not None

    async def report_steering(self, conversation_id: str, steering_id: str, outcome: Mapping[str, Any]) -> None:
        params = {
            "conversation": conversation_id,
            "steering": steering_id,
            "outcome": json.dumps(dict(outcome)),
            "finished": self.finished_ttl,
        }
        async with self._connection() as conn:
            await conn.execute(_REPORT, params)

    async def steering_outcome(self, conversation_id: str, steering_id: str, wait: float) -> dict[str, Any] | None:
        if wait <= 0:
            return await self._read_outcome(conversation_id, steering_id)
        state = self._state()
        key = (conversation_id, steering_id)
        event = asyncio.Event()
        state.outcome_waiters.setdefault(key, set()).add(event)
        try:
            # Listening before the first look: an outcome reported after it wakes us.
            await self._ensure_listening(state)
            outcome = await self._read_outcome(conversation_id, steering_id)
            if outcome is None:
                with suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await event.wait()
                if event.is_set():
                    outcome = await self._read_outcome(conversation_id, steering_id)
            return outcome
        finally:
            events = state.outcome_waiters.get(key)
            if events is not None:
                events.discard(event)
                if not events:
                    del state.outcome_waiters[key]
            await self._idle_check(state)

    async def _read_outcome(self, conversation_id: str, steering_id: str) -> dict[str, Any] | None:
        async with self._connection() as conn:
            cursor = await conn.execute(_OUTCOME, {"conversation": conversation_id, "steering": steering_id})
            row = await cursor.fetchone()
        outcome = None if row is None else json.loads(row[0])
        return outcome if isinstance(outcome, dict) else None

    async def published(self, run_id: str) -> list[Chunk] | None:
        # What another process published is in the chunk log already, up
        # to what its log writer stored: the broker holds nothing more.
        return await self._local.published(run_id)

    async def end_orphan(self, conversation_id: str, run_id: str, chunks: Sequence[Chunk], first_seq: int) -> None:
        state = self._loops.get(asyncio.get_running_loop())
        channel = state.channels.get(run_id) if state is not None else None
        if channel is not None:
            if channel._memory is not None:
                await self._local.end_orphan(conversation_id, run_id, chunks, first_seq)
            await channel.close()
            return
        # Another process's run: the sweeper stored its end in the log;
        # closing the row frees the slot and ends the followers (rule 3).
        async with self._connection() as conn:
            await conn.execute(_CLOSE, {"finished": self.finished_ttl, "run": run_id})

    async def continue_orphan(
        self, conversation_id: str, run_id: str, log: Sequence[Chunk], first_seq: int
    ) -> PostgresRunChannel | None:
        """Go on here with a run whose process is gone (rule 10). The log is
        the chunk log, which the claimant completed: the broker holds no
        more of it, so ``log[first_seq:]`` is in it already. The run's row
        (open, its lease run out or not; inserted again if it was forgotten)
        is this process's; None when the row was closed (the run ended) or
        another run holds the chat's slot. This process's subscribers read
        the whole log from memory, and what the channel publishes from
        ``len(log)`` on; other processes' followers read the log."""
        state = self._state()
        state.holds += 1
        try:
            await self._ensure_listening(state)
            params = {
                "run": run_id,
                "conversation": conversation_id,
                "ttl": self.active_ttl,
                "finished": self.finished_ttl,
            }
            async with self._connection() as conn:
                await conn.execute(_EXPIRE_OTHERS, params)
                row = await (await conn.execute(_RECLAIM, params)).fetchone()
                if row is None:
                    inserted = await (await conn.execute(_INSERT, params)).fetchone()
                    if inserted is None:
                        return None  # its row is closed, or another run's is open
                    row = (False,)
            previous = state.channels.get(run_id)
            if previous is not None:
                await previous.abandon()  # this process had it, and lost it while paused
            self._local._forget(run_id)  # what memory kept of it may differ from the log
            memory = await self._local.continue_orphan(conversation_id, run_id, log, first_seq)
            channel = PostgresRunChannel(self, conversation_id, run_id, memory, len(log))
            if row[0]:
                channel.stop_requested.set()
            state.channels[run_id] = channel
            return channel
        finally:
            state.holds -= 1
            await self._idle_check(state)

    async def ping(self) -> None:
        """One fresh connection and a query, no retries: is the database
        reachable now? (For the system check and health probes.)"""
        try:
            async with asyncio.timeout(self.connect_timeout + self.operation_timeout):
                conn = await psycopg.AsyncConnection.connect(self._dsn(), autocommit=True)
                try:
                    await conn.execute(f"SELECT 1 FROM {RUNS_TABLE} LIMIT 1")
                finally:
                    await conn.close()
        except (psycopg.OperationalError, OSError, TimeoutError) as exc:
            raise BrokerUnavailable(f"The broker's PostgreSQL database cannot be reached: {exc}") from exc

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        states, self._loops = self._loops, {}
        for state_loop, state in states.items():
            if state_loop is not loop:
                continue  # another (usually closed) loop's connections go with it
            state.channels.clear()
            state.followers.clear()
            task, state.listener = state.listener, None
            if task is not None and not task.done():
                task.cancel()
                await asyncio.wait([task])
            for conn in state.idle:
                with suppress(Exception):
                    await conn.close()
            state.idle.clear()

    # -- signals (rule 5) -----------------------------------------------

    async def _send_signal(self, conversation_id: str, kind: str, payload: Any) -> str | None:
        """Send ``kind`` (with JSON ``payload``) to the conversation's
        active run, wherever it runs; its run id, or None when it has none."""
        params = {
            "conversation": conversation_id,
            "stop": kind == "stop",
            "kind": kind,
            "payload": json.dumps(payload),
        }
        async with self._connection() as conn:
            row = await (await conn.execute(_SIGNAL, params)).fetchone()
        return None if row is None else str(row[0])

    # -- following another process's run (rules 2 and 3) -----------------

    async def _follow(
        self, run_id: str, from_seq: int, keepalive: float | None
    ) -> AsyncGenerator[tuple[int, list[Chunk]], None]:
        state = self._state()
        event = asyncio.Event()
        state.followers.setdefault(run_id, set()).add(event)
        loop = asyncio.get_running_loop()
        try:
            await self._ensure_listening(state)
            if _is_log_id(run_id):
                # Rule 9: its process writes the log sooner while it is followed.
                async with self._connection() as conn:
                    await conn.execute("SELECT pg_notify(%s, %s)", [FOLLOW_CHANNEL, run_id])
            seq = from_seq
            quiet_since = loop.time()
            while True:
                event.clear()
                async with self._connection() as conn:
                    # The row first, then the log: a run seen closed has its
                    # whole log committed (its process closes the row after
                    # the log's last write).
                    row = await (await conn.execute(_STATE, {"run": run_id})).fetchone()
                    if row is None:
                        return  # unknown here, or forgotten long ago
                    rows = []
                    if _is_log_id(run_id):
                        rows = await (await conn.execute(_READ_LOG, {"run": run_id, "seq": seq})).fetchall()
                batch: list[Chunk] = []
                for first, last, text in rows:
                    if first > seq:
                        break  # a gap: the row before it is not committed yet
                    batch += _decode(text)[seq - first :]
                    seq = last + 1
                if batch:
                    yield seq - len(batch), batch
                    quiet_since = loop.time()
                    continue
                is_open, expired = row
                if not is_open:
                    return
                if expired:
                    return  # its process is gone; the sweeper ends it in the log
                timeout = self.poll_seconds
                if keepalive is not None:
                    timeout = min(timeout, max(quiet_since + keepalive - loop.time(), 0))
                if not event.is_set():
                    with suppress(TimeoutError):
                        async with asyncio.timeout(timeout):
                            await event.wait()
                if state.failure is not None and not event.is_set():
                    raise BrokerUnavailable(f"The broker's PostgreSQL database cannot be reached: {state.failure}")
                if keepalive is not None and not event.is_set() and loop.time() - quiet_since >= keepalive:
                    yield seq, []
                    quiet_since = loop.time()
        finally:
            events = state.followers.get(run_id)
            if events is not None:
                events.discard(event)
                if not events:
                    del state.followers[run_id]
            await self._idle_check(state)

    # -- the loop's listener (rules 4 and 5) ------------------------------

    def _state(self) -> _Loop:
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None:
            for old in [old for old in self._loops if old.is_closed()]:
                del self._loops[old]
            state = self._loops[loop] = _Loop(loop)
        return state

    async def _ensure_listening(self, state: _Loop) -> None:
        """Start this loop's listener unless it runs; return once it
        listens (``BrokerUnavailable`` when it cannot). The caller holds
        the state busy (``holds``, a channel or a follower)."""
        for _ in range(3):
            if state.listener is None or state.listener.done():
                state.listening.clear()
                state.failure = None
                state.listener = state.loop.create_task(self._listen(state), name="uistream-pg-listener")
            if state.listening.is_set():
                return
            state.attempted.clear()
            waiter = asyncio.ensure_future(state.attempted.wait())
            try:
                await asyncio.wait(
                    [waiter, state.listener],
                    timeout=self.connect_timeout + self.operation_timeout,
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                waiter.cancel()
            if state.listening.is_set():
                return
            if state.failure is not None or not state.listener.done():
                break
            # It ended because it was idle a moment ago: start another.
        raise BrokerUnavailable(f"The broker's PostgreSQL database cannot be reached: {state.failure or 'timed out'}")

    async def _idle_check(self, state: _Loop) -> None:
        """Stop this loop's listener when nothing needs it any more (so no
        task or connection outlives the runs and followers)."""
        if state.busy():
            return
        task, state.listener = state.listener, None
        state.listening.clear()
        if task is None or task.done() or task is asyncio.current_task():
            return
        task.cancel()
        await asyncio.wait([task])

    async def _listen(self, state: _Loop) -> None:
        """LISTEN while this loop has runs or followers; renew the leases of
        its runs every third of ``ACTIVE_TTL``; reconnect after a failure
        (and wake every follower, which reads again)."""
        interval = self.active_ttl / 3
        failing = False
        while True:
            try:
                conn = await self._connect()
            except BrokerUnavailable as exc:
                state.failure = exc
                state.listening.clear()
                state.attempted.set()
                state.wake_all()
                if not failing:
                    logger.warning("The PostgreSQL broker cannot listen: %s", exc)
                failing = True
                if not state.busy():
                    return
                await asyncio.sleep(min(interval, 1.0))
                continue
            try:
                await conn.execute(f"LISTEN {LOG_CHANNEL}")
                await conn.execute(f"LISTEN {SIGNAL_CHANNEL}")
                await conn.execute(f"LISTEN {OUTCOME_CHANNEL}")
                await conn.execute(f"LISTEN {FOLLOW_CHANNEL}")
                state.failure = None
                state.listening.set()
                state.attempted.set()
                if failing:
                    logger.info("The PostgreSQL broker listens again.")
                    failing = False
                state.wake_all()  # what was sent while nobody listened
                await self._renew(state, stops_only=True)
                beat_at = state.loop.time() + interval
                while state.busy():
                    wait = max(beat_at - state.loop.time(), 0.0)
                    async for note in conn.notifies(timeout=min(wait, self.poll_seconds)):
                        self._dispatch(state, note.channel, note.payload)
                    if state.loop.time() >= beat_at:
                        await self._renew(state)
                        beat_at = state.loop.time() + interval
                return
            except (psycopg.Error, OSError, BrokerUnavailable) as exc:
                state.failure = exc
                state.listening.clear()
                state.attempted.set()
                state.wake_all()
                level = logging.DEBUG if failing else logging.WARNING
                logger.log(level, "The PostgreSQL broker's listener failed: %s", exc)
                failing = True
                await asyncio.sleep(min(interval, 1.0))
            finally:
                state.listening.clear()
                with suppress(Exception):
                    await conn.close()

    def _dispatch(self, state: _Loop, channel: str, payload: str) -> None:
        if channel == LOG_CHANNEL:
            for run_id in payload.split(","):
                state.wake(run_id)
        elif channel == SIGNAL_CHANNEL:
            try:
                signal = json.loads(payload)
                target = state.channels.get(signal["run"])
                if target is not None:
                    target._signal(signal["kind"], signal.get("payload"))
            except (ValueError, KeyError, TypeError):
                logger.warning("The PostgreSQL broker got a signal it cannot read: %r", payload[:200])
        elif channel == FOLLOW_CHANNEL:
            followed = state.channels.get(payload)
            if followed is not None and followed.when_followed is not None:
                followed.when_followed()
        elif channel == OUTCOME_CHANNEL:
            with suppress(ValueError, TypeError):
                conversation_id, steering_id = json.loads(payload)
                for event in state.outcome_waiters.get((conversation_id, steering_id), ()):
                    event.set()

    async def _renew(self, state: _Loop, *, stops_only: bool = False) -> None:
        runs = list(state.channels)
        async with self._connection() as conn:
            if runs:
                sql = _STOPS if stops_only else _HEARTBEAT
                rows = await (await conn.execute(sql, {"runs": runs, "ttl": self.active_ttl})).fetchall()
                for row in rows:
                    channel = state.channels.get(row[0])
                    if channel is not None and (stops_only or row[1]):
                        channel.stop_requested.set()
                if not stops_only and len(rows) < len(runs):
                    lost = set(runs) - {row[0] for row in rows}
                    logger.warning(
                        "Runs %s no longer hold their rows in the broker (was the process paused for longer than "
                        "ACTIVE_TTL?).",
                        ", ".join(sorted(lost)),
                    )
            if not stops_only:
                await conn.execute(_FORGET)
                await conn.execute(_FORGET_OUTCOMES)

    async def _release(self, channel: PostgresRunChannel) -> None:
        state = self._loops.get(channel._loop)
        try:
            async with self._connection() as conn:
                await conn.execute(_CLOSE, {"finished": self.finished_ttl, "run": channel.run_id})
        finally:
            if state is not None:
                state.channels.pop(channel.run_id, None)
                if state.loop is asyncio.get_running_loop():
                    await self._idle_check(state)

    # -- connections ------------------------------------------------------

    def _dsn(self) -> str:
        if self._conninfo is None:
            self._conninfo = self._resolve_dsn()
        return self._conninfo

    def _resolve_dsn(self) -> str:
        if self.url is not None:
            return make_conninfo(self.url, connect_timeout=max(int(self.connect_timeout), 1))
        # DATABASE: Django's connection parameters, read on first use.
        from django.db import connections  # no Django until used (module docstring)

        wrapper = connections[self.database]
        if wrapper.vendor != "postgresql":
            raise BrokerConfigError(
                f"UISTREAM['BROKER'] = 'postgres' needs a PostgreSQL database; DATABASES[{self.database!r}] is "
                f"{wrapper.vendor}."
            )
        params = wrapper.get_connection_params()
        keep = {key: value for key, value in params.items() if isinstance(value, (str, int)) and key != "context"}
        keep.pop("prepare_threshold", None)
        keep.pop("autocommit", None)
        keep["connect_timeout"] = max(int(self.connect_timeout), 1)
        return make_conninfo("", **keep)

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        try:
            async with asyncio.timeout(self.connect_timeout + 1):
                return await psycopg.AsyncConnection.connect(self._dsn(), autocommit=True)
        except (psycopg.OperationalError, OSError, TimeoutError) as exc:
            raise BrokerUnavailable(f"The broker's PostgreSQL database cannot be reached: {exc}") from exc

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A connection of this loop's idle ones (or a new one), given back
        after use; one that failed or was interrupted is closed. Connection
        trouble and a query over ``OPERATION_TIMEOUT`` are
        ``BrokerUnavailable``."""
        state = self._state()
        conn = None
        while state.idle:
            candidate = state.idle.pop()
            if not candidate.closed and not candidate.broken:
                conn = candidate
                break
        if conn is None:
            conn = await self._connect()
        keep = False
        try:
            async with asyncio.timeout(self.operation_timeout):
                yield conn
            keep = True
        except (psycopg.OperationalError, OSError, TimeoutError) as exc:
            raise BrokerUnavailable(f"The broker's PostgreSQL database cannot be reached: {exc}") from exc
        except psycopg.Error as exc:
            raise BrokerError(f"The PostgreSQL broker's query failed: {exc}") from exc
        except (BrokerError, ValueError):
            keep = True  # ours, raised after a query that completed
            raise
        finally:
            if keep and len(state.idle) < MAX_IDLE and not conn.broken:
                state.idle.append(conn)
            else:
                with suppress(Exception):
                    await conn.close()
