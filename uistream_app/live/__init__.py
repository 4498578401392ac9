"""The LiveRun broker: fan-out, resume and stop for runs in flight.

A chat run executes in its own task and publishes numbered UI chunks into a
``RunChannel``; an HTTP response or a WebSocket is one subscriber; a resume,
from any process, replays from seq 0 without gap or duplicate and then
follows live; a stop request reaches the run wherever it runs. The rules
are in ``base``; the backends are ``MemoryBroker`` (one process, the
default) and ``RedisBroker`` (many processes). ``get_broker()`` returns the
one the ``UISTREAM["BROKER"]`` setting names; ``PostgresBroker`` (many
processes on PostgreSQL alone) is the third::

    UISTREAM = {"BROKER": {"BACKEND": "memory"}}  # the default
    UISTREAM = {"BROKER": {"BACKEND": "redis", "URL": "redis://127.0.0.1:6379/0", "PREFIX": "uistream"}}
    UISTREAM = {"BROKER": {"BACKEND": "postgres"}}  # the DATABASES["default"] the chunk log is in

``BACKEND`` is ``"memory"``, ``"redis"``, ``"postgres"`` or the dotted path of a class with
a ``from_config(config)`` class method. The broker imports no Django:
only ``get_broker()`` reads the settings, and lazily.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, cast

from .base import (
    Broker,
    BrokerConfigError,
    BrokerError,
    BrokerUnavailable,
    ChannelClosed,
    Chunk,
    RunAlreadyActive,
    RunChannel,
    RunLost,
)
from .memory import MemoryBroker, MemoryRunChannel

if TYPE_CHECKING:
    from .postgres import PostgresBroker, PostgresRunChannel
    from .redis_streams import RedisBroker, RedisRunChannel

__all__ = [
    "BACKENDS",
    "PING_TIMEOUT",
    "Broker",
    "BrokerConfigError",
    "BrokerError",
    "BrokerUnavailable",
    "ChannelClosed",
    "Chunk",
    "MemoryBroker",
    "MemoryRunChannel",
    "PostgresBroker",
    "PostgresRunChannel",
    "RedisBroker",
    "RedisRunChannel",
    "RunAlreadyActive",
    "RunChannel",
    "RunLost",
    "broker_from_config",
    "get_broker",
    "ping",
    "reset_broker",
]

#: ``BACKEND`` aliases.
BACKENDS: Final[Mapping[str, str]] = {
    "memory": "uistream_app.live.memory.MemoryBroker",
    "redis": "uistream_app.live.redis_streams.RedisBroker",
    "postgres": "uistream_app.live.postgres.PostgresBroker",
}


def __getattr__(name: str) -> Any:
    # The Redis backend needs the optional ``redis`` package: import it on
    # first use only.
    if name in ("RedisBroker", "RedisRunChannel"):
        from . import redis_streams

        return getattr(redis_streams, name)
    if name in ("PostgresBroker", "PostgresRunChannel"):  # the optional ``psycopg`` package, likewise
        from . import postgres

        return getattr(postgres, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def broker_from_config(config: Mapping[str, Any]) -> Broker:
    """A new broker for one ``BROKER`` setting value; ``BrokerConfigError``
    naming what is wrong."""
    if not isinstance(config, Mapping):
        raise BrokerConfigError(f"UISTREAM['BROKER'] must be a dict, not {type(config).__name__}.")
    backend = config.get("BACKEND", "memory")
    if not isinstance(backend, str):
        raise BrokerConfigError("UISTREAM['BROKER']['BACKEND'] must be 'memory', 'redis', 'postgres' or a dotted path.")
    path = BACKENDS.get(backend, backend)
    module_name, _, class_name = path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), class_name) if module_name else None
    except ImportError as exc:  # for "redis" without the package, the text names the extra (MissingExtra)
        raise BrokerConfigError(f"UISTREAM['BROKER']['BACKEND'] = {backend!r} cannot be imported: {exc}") from exc
    except AttributeError:
        cls = None
    if cls is None or not callable(getattr(cls, "from_config", None)):
        raise BrokerConfigError(
            f"UISTREAM['BROKER']['BACKEND'] = {backend!r} is neither 'memory', 'redis', 'postgres' nor the dotted path "
            "of a class with a from_config(config) class method."
        )
    return cast(Broker, cls.from_config(config))


_brokers: dict[str, Broker] = {}
_lock = threading.Lock()


def _config_key(config: Any) -> str:
    return json.dumps(config, sort_keys=True, default=repr)


def get_broker() -> Broker:
    """The broker of the current ``UISTREAM["BROKER"]`` setting, one
    instance per distinct setting value (so the in-memory broker is shared
    by the whole process). ``ImproperlyConfigured`` for a bad setting."""
    # The broker imports no Django (module docstring): only here, on use.
    from django.core.exceptions import ImproperlyConfigured

    from ..conf import settings

    config = settings.BROKER
    key = settings.derived("BROKER", _config_key)
    broker = _brokers.get(key)
    if broker is None:
        with _lock:
            broker = _brokers.get(key)
            if broker is None:
                try:
                    broker = _brokers[key] = broker_from_config(config)
                except BrokerConfigError as exc:
                    raise ImproperlyConfigured(str(exc)) from exc
    return broker


def reset_broker() -> None:
    """Forget the cached brokers. Nothing calls it on ``setting_changed``:
    the cache is keyed by the ``BROKER`` value, so a changed value (an
    ``override_settings``) already gets a broker of its own and the old
    value its old broker back, while forgetting the in-memory broker on any
    ``UISTREAM`` change would strand the runs open in it (a test server's
    thread shares the process). Runs open in a forgotten in-memory broker
    are unreachable after this: reset between runs, not during them."""
    with _lock:
        _brokers.clear()


#: Seconds ``ping()`` waits for an answer.
PING_TIMEOUT: Final = 5.0


async def ping(config: Mapping[str, Any] | None = None) -> None:
    """Raise ``BrokerUnavailable`` when the broker of ``config`` (default:
    the ``BROKER`` setting) does not answer within ``PING_TIMEOUT`` seconds.

    Uses a broker of its own, closed before returning, so it can run in any
    event loop (a system check's ``asyncio.run``) without touching the
    cached one.
    """
    if config is None:
        from ..conf import settings  # no Django in the broker until used (module docstring)

        config = settings.BROKER
    broker = broker_from_config(config)
    try:
        async with asyncio.timeout(PING_TIMEOUT):
            await broker.ping()
    except TimeoutError as exc:
        raise BrokerUnavailable(f"The broker did not answer within {PING_TIMEOUT} s.") from exc
    finally:
        await broker.aclose()
