"""The Redis broker: live runs shared by many server processes.

Configuration and keys: docs/operations.md, "redis"; its rules are
"Redis broker rules" there ("rule N" in this module means those).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Final, NoReturn, cast
from urllib.parse import urlsplit, urlunsplit

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
    RunLost,
    chunks_of,
    seconds_setting,
)

# The extra ``redis``: without it, "pip install 'django-uistream[redis]'".
import_extra("redis", "redis")

from redis.asyncio import Redis  # noqa: E402
from redis.asyncio.retry import Retry  # noqa: E402
from redis.backoff import ExponentialBackoff, NoBackoff  # noqa: E402
from redis.commands.core import AsyncScript  # noqa: E402
from redis.exceptions import ConnectionError as RedisConnectionError  # noqa: E402
from redis.exceptions import RedisError, ResponseError  # noqa: E402
from redis.exceptions import TimeoutError as RedisTimeoutError  # noqa: E402

__all__ = ["RedisBroker", "RedisRunChannel"]

logger = logging.getLogger("uistream_app.live")

DEFAULT_URL: Final = "redis://127.0.0.1:6379/0"
DEFAULT_PREFIX: Final = "uistream"
DEFAULT_ACTIVE_TTL: Final = 60.0
DEFAULT_FINISHED_TTL: Final = 600.0
DEFAULT_BLOCK_SECONDS: Final = 5.0
#: Added to BLOCK_SECONDS for the default socket timeout (rule 10).
SOCKET_TIMEOUT_MARGIN: Final = 5.0
#: The connections a loop's client may open (``OPTIONS["max_connections"]``
#: replaces it). Each open subscription and each run's watcher holds one
#: for a blocking read, so redis-py's own 100 would fail the 101st with
#: ``MaxConnectionsError``; this is Redis's own default ``maxclients``.
DEFAULT_MAX_CONNECTIONS: Final = 10_000
CONFIG_KEYS: Final = frozenset({"BACKEND", "URL", "PREFIX", "ACTIVE_TTL", "FINISHED_TTL", "BLOCK_SECONDS", "OPTIONS"})

#: A command's retries on a dead connection, and their backoff (rule 12).
RETRIES: Final = 2
RETRY_BACKOFF_BASE: Final = 0.05
RETRY_BACKOFF_CAP: Final = 0.4

#: Most chunks in one stream entry (a longer flush makes several).
MAX_BATCH: Final = 512
#: Queued chunks past which ``publish`` waits for the flusher (rule 11).
MAX_PENDING: Final = 4096
#: Most entries one ``XREAD`` returns.
READ_COUNT: Final = 64

HEADER_ID: Final = b"0-1"
END_ID: Final = b"2-0"

_UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OSError)

# KEYS: active, stream. ARGV: run id, ttl ms, conversation id.
# {1}: opened; {0, holder}: the conversation is held; {-1}: run id used.
# A repeat of an open that landed (rule 12) finds its own run active: {1}.
_OPEN = """
if redis.call('exists', KEYS[2]) == 1 then
  if redis.call('get', KEYS[1]) == ARGV[1] then return {1} end
  return {-1}
end
if not redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {0, redis.call('get', KEYS[1])}
end
redis.call('xadd', KEYS[2], '0-1', 'conversation', ARGV[3])
redis.call('pexpire', KEYS[2], ARGV[2])
return {1}
"""

# KEYS: active, stream. ARGV: run id, ttl ms. 1: refreshed; 0: not ours.
_HEARTBEAT = """
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('pexpire', KEYS[1], ARGV[2])
redis.call('pexpire', KEYS[2], ARGV[2])
return 1
"""

# KEYS: active, stream, stop list. ARGV: run id, finished ttl ms, entry id
# of the chunks, the chunks ('' for none). Ends a run: its own ``close()``
# (no chunks), or the sweeper's for a run whose process died (what the
# stream lacks, then the end).
_CLOSE = """
if redis.call('exists', KEYS[2]) == 1 then
  if #redis.call('xrange', KEYS[2], '2-0', '2-0') == 0 then
    if ARGV[4] ~= '' then redis.pcall('xadd', KEYS[2], ARGV[3], 'c', ARGV[4]) end
    redis.call('xadd', KEYS[2], '2-0', 'end', '1')
  end
  redis.call('pexpire', KEYS[2], ARGV[2])
end
redis.call('del', KEYS[3])
if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) end
return 1
"""


# KEYS: active, steering list. ARGV: run id, ttl ms, the request (JSON).
# 1: queued for the run; 0: the run is not the conversation's active one.
_STEER = """
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('rpush', KEYS[2], ARGV[3])
redis.call('pexpire', KEYS[2], ARGV[2])
return 1
"""


# KEYS: stream, owner. ARGV: the writer's owner token ('' for a run never
# taken over), then each batch's entry id and chunks. Appends a run's
# chunks (rule 2: a refused repeat was written before). 1: appended; 0:
# the stream is gone (Redis lost it); -1: the run was taken over by a
# process that claimed it after this writer's lease ran out (rule 16).
_APPEND = """
local owner = redis.call('get', KEYS[2])
if owner and owner ~= ARGV[1] then return -1 end
if redis.call('exists', KEYS[1]) == 0 then return 0 end
for i = 2, #ARGV, 2 do
  local reply = redis.pcall('xadd', KEYS[1], ARGV[i], 'c', ARGV[i + 1])
  if type(reply) == 'table' and reply.err and not string.find(reply.err, 'equal or smaller', 1, true) then
    return redis.error_reply(reply.err)
  end
end
return 1
"""


def _reconnecting_retry() -> Retry:
    """Rule 12: a command whose connection turns out dead (Redis restarted
    while it idled in the pool) reconnects and goes again, twice at most;
    against a Redis that is down that costs 0.3 s before
    ``BrokerUnavailable``. Only connection errors: a timeout means a Redis
    that hangs, and retrying it would hold a request for another
    ``socket_timeout``."""
    return Retry(ExponentialBackoff(cap=RETRY_BACKOFF_CAP, base=RETRY_BACKOFF_BASE), RETRIES, (RedisConnectionError,))


# KEYS: active, stream, claim. ARGV: run id, claim ttl ms, active ttl ms.
# {1, next seq}: adopted; {0}: the run is not (or no longer) active; {-1}:
# another process adopted it already (a redelivered task).
_ADOPT = """
if redis.call('get', KEYS[1]) ~= ARGV[1] or redis.call('exists', KEYS[2]) == 0 then return {0} end
if #redis.call('xrange', KEYS[2], '2-0', '2-0') > 0 then return {0} end
if not redis.call('set', KEYS[3], '1', 'NX', 'PX', ARGV[2]) then return {-1} end
redis.call('pexpire', KEYS[1], ARGV[3])
redis.call('pexpire', KEYS[2], ARGV[3])
local top = redis.call('xrevrange', KEYS[2], '+', '-', 'COUNT', 1)
local id = top[1][1]
if string.sub(id, 1, 2) == '1-' then return {1, tonumber(string.sub(id, 3)) + 1} end
return {1, 0}
"""

#: How long a run stays adopted (no second process may adopt it): longer
#: than any run, so a task delivered twice executes once.
ADOPTED_TTL: Final = 24 * 3600.0


def _redacted(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _encode(chunks: Sequence[Chunk]) -> bytes:
    try:
        return orjson.dumps(chunks)
    except TypeError:
        # What orjson refuses (a lone surrogate, an integer beyond 64 bits)
        # the json module writes, and reads back the same (``_decode``).
        return json.dumps(chunks, default=lambda value: orjson.loads(orjson.dumps(value))).encode()


def _decode(data: bytes) -> list[Chunk]:
    try:
        chunks: list[Chunk] = orjson.loads(data)
    except orjson.JSONDecodeError:
        chunks = json.loads(data)
    return chunks


# KEYS: active, stream, adopted, owner. ARGV: run id, ttl ms, conversation
# id, entry id of the chunks, the chunks ('' for none), adopted ttl ms,
# the claimant's owner token. Takes over a run whose process died to go on
# with it here (rule 15): {1} when the run is (again) this stream's live
# run, its missing chunks appended, and adopted (a worker's task delivered
# late does not run it again); {0} when the stream has ended, the
# conversation's slot is another run's, or another claimant fenced the run
# since. A run a worker adopted is taken too, its log empty or not: a tool
# that is not idempotent runs only once its call is in the log
# (``RunRecorder.record_call``), so an empty log means none ran.
_CONTINUE = """
local holder = redis.call('get', KEYS[1])
if holder and holder ~= ARGV[1] then return {0} end
local owner = redis.call('get', KEYS[4])
if owner and owner ~= ARGV[7] then return {0} end
local exists = redis.call('exists', KEYS[2]) == 1
if exists and #redis.call('xrange', KEYS[2], '2-0', '2-0') > 0 then return {0} end
redis.call('set', KEYS[3], '1', 'PX', ARGV[6])
if not exists then
  redis.call('xadd', KEYS[2], '0-1', 'conversation', ARGV[3])
end
if ARGV[5] ~= '' then redis.pcall('xadd', KEYS[2], ARGV[4], 'c', ARGV[5]) end
redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('pexpire', KEYS[2], ARGV[2])
return {1}
"""


class _Client:
    """The redis client and scripts of one event loop (rule 8)."""

    __slots__ = ("adopt_run", "append", "close_run", "continue_run", "heartbeat", "open_run", "redis", "steer")

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self.adopt_run: AsyncScript = redis.register_script(_ADOPT)
        self.open_run: AsyncScript = redis.register_script(_OPEN)
        self.heartbeat: AsyncScript = redis.register_script(_HEARTBEAT)
        self.close_run: AsyncScript = redis.register_script(_CLOSE)
        self.steer: AsyncScript = redis.register_script(_STEER)
        self.continue_run: AsyncScript = redis.register_script(_CONTINUE)
        self.append: AsyncScript = redis.register_script(_APPEND)


class RedisRunChannel(RunChannel):
    def __init__(self, broker: RedisBroker, client: _Client, conversation_id: str, run_id: str) -> None:
        self._broker = broker
        self._client = client
        self.conversation_id = conversation_id
        self.run_id = run_id
        self.stop_requested = asyncio.Event()
        self.steering_requests: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._next_seq = 0
        self._flushed_seq = 0
        self._pending: list[Chunk] = []
        self._flusher: asyncio.Task[None] | None = None
        self._failure: Exception | None = None
        self._failure_reported = False
        self._closed = False
        self._active_key = broker._active_key(conversation_id)
        self._stream_key = broker._stream_key(run_id)
        self._owner_key = broker._owner_key(run_id)
        #: Set on a channel that took the run over (``continue_orphan``).
        self._owner_token = ""
        self._stop_key = broker._stop_key(run_id)
        self._steer_key = broker._steer_key(run_id)
        self._watcher: asyncio.Task[None] | None = None
        self._watching = True

    @property
    def next_seq(self) -> int:
        return self._next_seq

    @property
    def closed(self) -> bool:
        return self._closed

    async def publish(self, chunks: Sequence[Chunk]) -> None:
        """Queue ``chunks`` for the flusher (rule 11) and return; wait only
        when ``MAX_PENDING`` chunks are queued already."""
        if self._closed:
            raise ChannelClosed(self.run_id)
        if self._failure is not None:
            self._raise_failure()
        if not chunks:
            return
        self._pending.extend(chunks)
        self._next_seq += len(chunks)
        if self._flusher is None or self._flusher.done():
            loop = asyncio.get_running_loop()
            self._flusher = loop.create_task(self._flush(), name=f"uistream-run-flusher:{self.run_id}")
        if len(self._pending) >= MAX_PENDING:
            await self.flush()

    async def flush(self) -> None:
        """Wait until everything published is in Redis; raise what made a
        write fail (then the channel is broken: every later ``publish``
        raises it too)."""
        flusher = self._flusher
        if flusher is not None:
            # shield: a run task cancelled here must not cut a write in half.
            await asyncio.shield(flusher)
        if self._failure is not None:
            self._raise_failure()

    async def close(self) -> None:
        """Flush, then end the run (rule 6). Raises a failed write only if
        no ``publish`` or ``flush`` reported it already."""
        if self._closed:
            return
        self._closed = True
        self._broker._channels.discard(self)
        try:
            if not self._failure_reported:
                await self.flush()
        finally:
            await self._stop_watcher()
            with self._broker._unavailable():
                await self._client.close_run(
                    keys=[self._active_key, self._stream_key, self._stop_key],
                    args=[self.run_id, int(self._broker.finished_ttl * 1000), "", ""],
                )

    async def hand_off(self) -> None:
        """Leave the run open for another process to ``adopt_run`` (an
        executor's worker): stop refreshing its keys and watching for stops
        here, without ending it. Its keys live ``ACTIVE_TTL`` from the last
        refresh; a stop requested meanwhile waits in its list."""
        self._broker._channels.discard(self)
        await self._stop_watcher()

    async def abandon(self) -> None:
        """The run is another process's now (a lost lease): stop refreshing
        its keys and watching for stops, drop what is queued and not yet
        written, and never write its end marker (its new owner does)."""
        self._closed = True
        self._pending = []
        self._broker._channels.discard(self)
        await self._stop_watcher()

    def _raise_failure(self) -> NoReturn:
        assert self._failure is not None
        self._failure_reported = True
        raise self._failure

    async def _flush(self) -> None:
        """Write what is queued, one pipeline at a time, until nothing is."""
        append = self._client.append
        while self._pending and self._failure is None:
            chunks, self._pending = self._pending, []
            first = self._flushed_seq
            try:
                args: list[Any] = [self._owner_token]
                for start in range(0, len(chunks), MAX_BATCH):
                    batch = chunks[start : start + MAX_BATCH]
                    args += [f"1-{first + start + len(batch) - 1}", _encode(batch)]
                with self._broker._unavailable():
                    reply = await append(keys=[self._stream_key, self._owner_key], args=args)
                if reply == 0:
                    raise RunLost(f"The stream of run {self.run_id!r} is gone from Redis.")
                if reply == -1:
                    raise RunLost(f"Run {self.run_id!r} was taken over by another process.")
            except Exception as exc:  # noqa: BLE001 - any failure is the run task's to raise, not this task's
                self._failure = exc
                self._pending = []
                return
            self._flushed_seq = first + len(chunks)

    def _start_watcher(self) -> None:
        loop = asyncio.get_running_loop()
        self._watching = True
        self._watcher = loop.create_task(self._watch(), name=f"uistream-run-watcher:{self.run_id}")

    async def _stop_watcher(self) -> None:
        task, self._watcher = self._watcher, None
        if task is None or task.done():
            return
        if task.get_loop() is not asyncio.get_running_loop():
            task.get_loop().call_soon_threadsafe(task.cancel)
            return
        # Cancelling a BLPOP makes redis-py close that connection (rule 7).
        # asyncio.wait, not await: the watcher's CancelledError is not ours,
        # and close() often runs in a run task that is being cancelled
        # already (a client went away), which must still close the run.
        # On Python 3.11 redis-py can swallow the cancellation of a blocked
        # read (its timeout helper); the flag ends the loop at the next turn,
        # and the wait is bounded by one block, so close() never hangs.
        self._watching = False
        task.cancel()
        await asyncio.wait([task], timeout=self._broker.block_seconds + 1)

    async def _watch(self) -> None:
        """Rules 4 and 5: refresh the keys, and wait for stop requests in
        between."""
        loop = asyncio.get_running_loop()
        interval = self._broker.active_ttl / 3
        beat_at = loop.time() + interval
        redis = self._client.redis
        failing = False
        while self._watching:
            try:
                wait = beat_at - loop.time()
                # BLPOP rounds its timeout down to milliseconds, and 0 means
                # "block forever": never ask it to wait less than 10 ms.
                if wait >= 0.01:
                    wait = min(wait, self._broker.block_seconds)  # within the socket timeout
                    popped = await redis.blpop([self._stop_key, self._steer_key], timeout=wait)
                    if popped is not None and _text(popped[0]) == self._steer_key:
                        self._steered(popped[1])
                    elif popped is not None:
                        self.stop_requested.set()
                    continue
                await self._heartbeat()
                beat_at = loop.time() + interval
                if failing:
                    logger.info("Run %s reaches Redis again.", self.run_id)
                    failing = False
            except (RedisError, OSError) as exc:
                # The watcher must outlive any Redis trouble (or stop and the
                # refresh die with it); log once per outage, not per retry.
                log = logger.debug if failing else logger.warning
                log("Run %s cannot refresh its keys in Redis: %s", self.run_id, exc)
                failing = True
                await asyncio.sleep(min(interval, 1.0))
                beat_at = loop.time()

    def _steered(self, data: bytes | str) -> None:
        try:
            request = orjson.loads(data)
        except orjson.JSONDecodeError:
            logger.warning("Run %s was sent a steering message that is not JSON: dropped.", self.run_id)
            return
        if isinstance(request, dict):
            self.steering_requests.put_nowait(request)

    async def _heartbeat(self) -> None:
        held = await self._client.heartbeat(
            keys=[self._active_key, self._stream_key],
            args=[self.run_id, int(self._broker.active_ttl * 1000)],
        )
        if not held:
            logger.warning(
                "Run %s no longer holds conversation %s: its key expired (was the process paused for longer "
                "than ACTIVE_TTL?).",
                self.run_id,
                self.conversation_id,
            )


class RedisBroker:
    """The ``Broker`` over Redis streams (see the module docstring)."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        prefix: str = DEFAULT_PREFIX,
        active_ttl: float = DEFAULT_ACTIVE_TTL,
        finished_ttl: float = DEFAULT_FINISHED_TTL,
        block_seconds: float = DEFAULT_BLOCK_SECONDS,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self.url = url
        self.prefix = prefix
        self.active_ttl = active_ttl
        self.finished_ttl = finished_ttl
        self.block_seconds = block_seconds
        self.options: dict[str, Any] = {
            "socket_timeout": block_seconds + SOCKET_TIMEOUT_MARGIN,
            "retry": _reconnecting_retry(),
            "max_connections": DEFAULT_MAX_CONNECTIONS,
            **(options or {}),
        }
        socket_timeout = self.options["socket_timeout"]
        if socket_timeout is not None and socket_timeout <= block_seconds:
            raise BrokerConfigError(
                f"UISTREAM['BROKER']['OPTIONS']['socket_timeout'] ({socket_timeout} s) must exceed BLOCK_SECONDS "
                f"({block_seconds} s): blocking reads would time out."
            )
        self._clients: dict[asyncio.AbstractEventLoop, _Client] = {}
        #: The owner tokens of the orphans this process fenced (rule 16).
        self._fences: dict[str, str] = {}
        self._channels: set[RedisRunChannel] = set()

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> RedisBroker:
        unknown = set(config) - CONFIG_KEYS
        if unknown:
            raise BrokerConfigError(
                f"UISTREAM['BROKER'] has keys the redis broker does not know: {', '.join(sorted(unknown))}."
            )
        url = config.get("URL", DEFAULT_URL)
        prefix = config.get("PREFIX", DEFAULT_PREFIX)
        options = config.get("OPTIONS", {})
        if not isinstance(url, str) or not url:
            raise BrokerConfigError("UISTREAM['BROKER']['URL'] must be a redis:// URL.")
        if not isinstance(prefix, str) or not prefix:
            raise BrokerConfigError("UISTREAM['BROKER']['PREFIX'] must be a non-empty string.")
        if not isinstance(options, Mapping):
            raise BrokerConfigError("UISTREAM['BROKER']['OPTIONS'] must be a dict.")
        return cls(
            url,
            prefix=prefix,
            # The watcher wakes every third of ACTIVE_TTL; Redis counts in ms.
            active_ttl=seconds_setting(config, "ACTIVE_TTL", DEFAULT_ACTIVE_TTL, minimum=0.1),
            finished_ttl=seconds_setting(config, "FINISHED_TTL", DEFAULT_FINISHED_TTL, minimum=0.01),
            block_seconds=seconds_setting(config, "BLOCK_SECONDS", DEFAULT_BLOCK_SECONDS, minimum=0.01),
            options=options,
        )

    def __repr__(self) -> str:
        return f"<RedisBroker {_redacted(self.url)} prefix={self.prefix!r}>"

    # -- keys -----------------------------------------------------------

    def _active_key(self, conversation_id: str) -> str:
        return f"{self.prefix}:conv:{conversation_id}:active"

    def _stream_key(self, run_id: str) -> str:
        return f"{self.prefix}:run:{run_id}:chunks"

    def _stop_key(self, run_id: str) -> str:
        return f"{self.prefix}:run:{run_id}:stop"

    def _steer_key(self, run_id: str) -> str:
        return f"{self.prefix}:run:{run_id}:steer"

    def _outcome_key(self, conversation_id: str, steering_id: str) -> str:
        return f"{self.prefix}:conv:{conversation_id}:steering:{steering_id}"

    def _adopted_key(self, run_id: str) -> str:
        return f"{self.prefix}:run:{run_id}:adopted"

    def _owner_key(self, run_id: str) -> str:
        return f"{self.prefix}:run:{run_id}:owner"

    # -- the port -------------------------------------------------------

    async def open_run(self, conversation_id: str, run_id: str) -> RedisRunChannel:
        client = self._client()
        with self._unavailable():
            reply = await client.open_run(
                keys=[self._active_key(conversation_id), self._stream_key(run_id)],
                args=[run_id, int(self.active_ttl * 1000), conversation_id],
            )
        if reply[0] == -1:
            raise ValueError(f"Run id {run_id!r} was used before: give each run a new id.")
        if reply[0] == 0:
            holder = reply[1].decode() if len(reply) > 1 and reply[1] is not None else None
            raise RunAlreadyActive(conversation_id, holder)
        channel = RedisRunChannel(self, client, conversation_id, run_id)
        self._channels.add(channel)
        channel._start_watcher()
        return channel

    async def adopt_run(self, conversation_id: str, run_id: str) -> RedisRunChannel | None:
        """The channel of a run another process opened and handed off
        (``RedisRunChannel.hand_off``), to publish into and close from here;
        None when the run is not active any more or was adopted before
        (each run is adopted at most once)."""
        client = self._client()
        with self._unavailable():
            reply = await client.adopt_run(
                keys=[self._active_key(conversation_id), self._stream_key(run_id), self._adopted_key(run_id)],
                args=[run_id, int(ADOPTED_TTL * 1000), int(self.active_ttl * 1000)],
            )
        if reply[0] != 1:
            return None
        channel = RedisRunChannel(self, client, conversation_id, run_id)
        channel._next_seq = channel._flushed_seq = int(reply[1])
        self._channels.add(channel)
        channel._start_watcher()
        return channel

    async def active_run(self, conversation_id: str) -> str | None:
        with self._unavailable():
            value = await self._client().redis.get(self._active_key(conversation_id))
        return None if value is None else _text(value)

    def subscribe(self, run_id: str, from_seq: int = 0) -> AsyncGenerator[tuple[int, Chunk], None]:
        return chunks_of(self.subscribe_batches(run_id, from_seq))

    async def subscribe_batches(
        self, run_id: str, from_seq: int = 0, *, keepalive: float | None = None
    ) -> AsyncGenerator[tuple[int, list[Chunk]], None]:
        if from_seq < 0:
            raise ValueError(f"from_seq must be >= 0, not {from_seq}.")
        redis = self._client().redis
        key = self._stream_key(run_id)
        last_id = HEADER_ID if from_seq == 0 else f"1-{from_seq - 1}".encode()
        next_seq = from_seq
        block_seconds = self.block_seconds if keepalive is None else min(self.block_seconds, keepalive)
        block_ms = max(int(block_seconds * 1000), 10)
        loop = asyncio.get_running_loop()
        quiet_since = subscribed_at = loop.time()
        with self._unavailable():
            pipe = redis.pipeline(transaction=False)
            pipe.exists(key)
            pipe.xread({key: last_id}, count=READ_COUNT)
            exists, reply = await pipe.execute()
        if not exists:
            return
        while True:
            if reply:
                first = next_seq
                batch: list[Chunk] = []
                ended = False
                for entry_id, fields in reply[0][1]:
                    if entry_id == END_ID:
                        ended = True
                        break
                    last = int(entry_id[2:])  # b"1-<seq>"
                    chunks = _decode(fields[b"c"])
                    start = last - len(chunks) + 1
                    if start > next_seq:
                        raise BrokerError(f"Run {run_id!r} has a gap: seq {next_seq} is missing.")
                    batch += chunks[next_seq - start :] if start < next_seq else chunks
                    next_seq = last + 1
                    last_id = entry_id
                if batch:
                    yield first, batch
                    quiet_since = loop.time()
                if ended:
                    return
            elif keepalive is not None and loop.time() - quiet_since >= keepalive:
                yield next_seq, []
                quiet_since = loop.time()
            with self._unavailable():
                reply = await redis.xread({key: last_id}, count=READ_COUNT, block=block_ms)
                if not reply and not await redis.exists(key):
                    if await self._restarted_since(loop.time() - subscribed_at):
                        # Rule 13: the stream went with the server, not
                        # with the run's process.
                        raise RunLost(f"Redis restarted while run {run_id!r} was live: its stream is gone.")
                    return  # expired: the run's process died (rule 7)

    async def _restarted_since(self, seconds: float) -> bool:
        """Rule 13: did the server start less than ``seconds`` ago? (False
        when it won't say: ``INFO`` renamed away.)"""
        try:
            info = await self._client().redis.info("server")
        except ResponseError:
            return False
        uptime = info.get("uptime_in_seconds")
        return isinstance(uptime, int) and uptime < seconds

    async def request_stop(self, conversation_id: str) -> bool:
        redis = self._client().redis
        with self._unavailable():
            run_id = await redis.get(self._active_key(conversation_id))
            if run_id is None:
                return False
            stop_key = self._stop_key(_text(run_id))
            pipe = redis.pipeline(transaction=True)
            pipe.rpush(stop_key, b"stop")
            pipe.pexpire(stop_key, int(self.active_ttl * 1000))
            await pipe.execute()
        return True

    async def send_steering(self, conversation_id: str, run_id: str, request: Mapping[str, Any]) -> bool:
        client = self._client()
        with self._unavailable():
            queued = await client.steer(
                keys=[self._active_key(conversation_id), self._steer_key(run_id)],
                args=[run_id, int(self.active_ttl * 1000), orjson.dumps(dict(request))],
            )
        return bool(queued)

    async def report_steering(self, conversation_id: str, steering_id: str, outcome: Mapping[str, Any]) -> None:
        # A list of one: ``steering_outcome`` waits on it with BLMOVE from
        # the list to itself, which reads without taking (rule 14).
        key = self._outcome_key(conversation_id, steering_id)
        with self._unavailable():
            pipe = self._client().redis.pipeline(transaction=True)
            pipe.delete(key)
            pipe.rpush(key, orjson.dumps(dict(outcome)))
            pipe.pexpire(key, int(self.finished_ttl * 1000))
            await pipe.execute()

    async def steering_outcome(self, conversation_id: str, steering_id: str, wait: float) -> dict[str, Any] | None:
        key = self._outcome_key(conversation_id, steering_id)
        redis = self._client().redis
        with self._unavailable():
            if wait > 0:
                # Within the socket timeout, and never 0 (BLMOVE's "for ever").
                seconds = max(min(wait, self.block_seconds), 0.01)
                # Seconds as a float (Redis 6+); redis-py's hint says int.
                data = await redis.blmove(key, key, seconds, "LEFT", "RIGHT")  # type: ignore[arg-type]
            else:
                data = await redis.lindex(key, 0)
        if data is None:
            return None
        outcome = orjson.loads(data)
        return outcome if isinstance(outcome, dict) else None

    async def published(self, run_id: str) -> list[Chunk] | None:
        redis = self._client().redis
        with self._unavailable():
            entries = cast(
                "list[tuple[bytes, dict[bytes, bytes]]]",
                await redis.xrange(self._stream_key(run_id), b"1-0", b"(" + END_ID),
            )
            if not entries and not await redis.exists(self._stream_key(run_id)):
                return None
        chunks: list[Chunk] = []
        for entry_id, fields in entries:
            batch = _decode(fields[b"c"])
            start = int(entry_id[2:]) - len(batch) + 1
            if start > len(chunks):
                raise BrokerError(f"Run {run_id!r} has a gap: seq {len(chunks)} is missing.")
            chunks += batch[len(chunks) - start :]
        return chunks

    async def fence_orphan(self, run_id: str) -> None:
        """Take the stream of ``run_id``, an orphan the caller claimed, from
        the process that ran it (rule 16): chunks that process still
        appends (a batch queued before it froze, landing late) are refused
        from now on, so what ``published`` reads next stays the stream's
        prefix. Only ``continue_orphan`` of this broker appends as the new
        owner."""
        token = uuid.uuid4().hex
        with self._unavailable():
            await self._client().redis.set(self._owner_key(run_id), token, px=int(ADOPTED_TTL * 1000))
        self._fences[run_id] = token

    async def end_orphan(self, conversation_id: str, run_id: str, chunks: Sequence[Chunk], first_seq: int) -> None:
        self._fences.pop(run_id, None)
        client = self._client()
        last = first_seq + len(chunks) - 1
        with self._unavailable():
            await client.close_run(
                keys=[self._active_key(conversation_id), self._stream_key(run_id), self._stop_key(run_id)],
                args=[run_id, int(self.finished_ttl * 1000), f"1-{max(last, 0)}", _encode(chunks) if chunks else b""],
            )

    async def continue_orphan(
        self, conversation_id: str, run_id: str, log: Sequence[Chunk], first_seq: int
    ) -> RedisRunChannel | None:
        client = self._client()
        chunks = list(log[first_seq:])
        last = len(log) - 1
        token = self._fences.pop(run_id, "")
        with self._unavailable():
            reply = await client.continue_run(
                keys=[
                    self._active_key(conversation_id),
                    self._stream_key(run_id),
                    self._adopted_key(run_id),
                    self._owner_key(run_id),
                ],
                args=[
                    run_id,
                    int(self.active_ttl * 1000),
                    conversation_id,
                    f"1-{max(last, 0)}",
                    _encode(chunks) if chunks else b"",
                    int(ADOPTED_TTL * 1000),
                    token,
                ],
            )
        if reply[0] != 1:
            return None
        channel = RedisRunChannel(self, client, conversation_id, run_id)
        channel._owner_token = token
        channel._next_seq = channel._flushed_seq = len(log)
        self._channels.add(channel)
        channel._start_watcher()
        return channel

    async def ping(self) -> None:
        """One attempt on a fresh connection, no retries: is the server
        reachable now? (For the system check and health probes.)"""
        options = {**self.options, "retry": Retry(NoBackoff(), 0), "single_connection_client": True}
        redis = Redis.from_url(self.url, **options)
        try:
            with self._unavailable():
                await redis.ping()
        finally:
            await redis.aclose()

    async def aclose(self) -> None:
        for channel in list(self._channels):
            await channel._stop_watcher()
        self._channels.clear()
        clients, self._clients = self._clients, {}
        loop = asyncio.get_running_loop()
        for client_loop, client in clients.items():
            if client_loop is loop:
                await client.redis.aclose()
            # A client of another (usually closed) loop cannot be closed
            # from here; its sockets go with its loop.

    # -- helpers --------------------------------------------------------

    def _client(self) -> _Client:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            for old in [old for old in self._clients if old.is_closed()]:
                del self._clients[old]
            client = self._clients[loop] = _Client(Redis.from_url(self.url, **self.options))
        return client

    @contextmanager
    def _unavailable(self) -> Iterator[None]:
        try:
            yield
        except _UNREACHABLE as exc:
            raise BrokerUnavailable(f"Redis at {_redacted(self.url)} cannot be reached: {exc}") from exc
