"""Fixtures of the broker suite: one suite, every backend.

``broker`` is parametrized over ``memory``, ``redis`` and ``postgres``. The
Redis broker gets a key prefix and a client name of its own per test, and
its keys are deleted afterwards. When Redis cannot be reached its tests are
skipped, unless ``CI`` is "true": then they fail (``require_redis``). The
PostgreSQL broker runs on the test database (migrated, committed:
``transactional_db``) when the suite runs on PostgreSQL (``DATABASE_URL``),
and is skipped on SQLite.
"""

from __future__ import annotations

import asyncio
import functools
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from uistream_app.live import Broker, MemoryBroker, broker_from_config

from ..conftest import in_ci

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


def redis_url() -> str:
    """The Redis the tests use: $UISTREAM_TEST_REDIS_URL, else $REDIS_URL,
    else the local default."""
    return os.environ.get("UISTREAM_TEST_REDIS_URL") or os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL


@functools.cache
def _redis_problem(url: str) -> str | None:
    try:
        import redis
    except ImportError:
        return "the redis package is not installed (pip install redis)"
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=2, retry=None)
        try:
            client.ping()
        finally:
            client.close()
    except (redis.RedisError, OSError) as exc:
        return f"Redis at {url} cannot be reached: {exc}"
    return None


def require_redis() -> str:
    """The Redis URL for a test that needs Redis. Skips the test when Redis
    (or the redis package) is missing, except in CI (``CI=true``), where
    that is a failure."""
    url = redis_url()
    problem = _redis_problem(url)
    if problem is not None:
        if in_ci():
            pytest.fail(f"{problem} (CI=true: the Redis tests must run)")
        pytest.skip(problem)
    return url


@pytest.fixture
def redis_config() -> Iterator[dict[str, Any]]:
    """A ``BROKER`` setting for a test of its own: unique prefix and client
    name, short block timeout; every key under the prefix deleted after."""
    import redis

    url = require_redis()
    tag = uuid.uuid4().hex[:12]
    prefix = f"uistream-test:{tag}"
    yield {
        "BACKEND": "redis",
        "URL": url,
        "PREFIX": prefix,
        "BLOCK_SECONDS": 0.5,
        "OPTIONS": {"client_name": f"uistream-test-{tag}"},
    }
    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


POSTGRES_URL = pytest.StashKey[str]()


def require_postgres(request: pytest.FixtureRequest) -> str:
    """The URL of the test database, migrated and committed, when it is
    PostgreSQL; the test is skipped on SQLite. Call it from a sync fixture
    (Django refuses its set-up inside an event loop, and an async context
    does not see the test database's name)."""
    from django.db import connection

    from ..server import shared_database_url

    if connection.vendor != "postgresql":
        pytest.skip("the PostgreSQL broker needs the suite on PostgreSQL (DATABASE_URL=postgres://…)")
    request.getfixturevalue("transactional_db")
    url = request.node.stash[POSTGRES_URL] = shared_database_url()
    return url


@pytest.fixture(autouse=True)
def _postgres_database(request: pytest.FixtureRequest) -> None:
    """The database of the ``postgres`` leg of ``broker``, set up before
    the async fixtures run."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("broker") == "postgres":
        require_postgres(request)


@pytest.fixture
def postgres_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    """A ``BROKER`` setting on the test database, with short timeouts
    (``require_postgres`` first, in a sync fixture)."""
    return {
        "BACKEND": "postgres",
        "URL": request.node.stash[POSTGRES_URL],
        "POLL_SECONDS": 0.5,
        "ACTIVE_TTL": 3,
        "CONNECT_TIMEOUT": 2,
        "OPERATION_TIMEOUT": 2,
    }


@pytest_asyncio.fixture(
    params=["memory", "redis", pytest.param("postgres", marks=pytest.mark.django_db(transaction=True))]
)
async def broker(request: pytest.FixtureRequest) -> AsyncIterator[Broker]:
    """Each backend in turn, closed after the test."""
    instance: Broker
    if request.param == "memory":
        instance = MemoryBroker()
    elif request.param == "redis":
        instance = broker_from_config(request.getfixturevalue("redis_config"))
    else:
        instance = broker_from_config(request.getfixturevalue("postgres_config"))
    yield instance
    await instance.aclose()


def other_tasks() -> set[asyncio.Task[Any]]:
    """The tasks of the running loop besides the current one."""
    return asyncio.all_tasks() - {asyncio.current_task()}  # type: ignore[arg-type]


def make_chunks(count: int, start: int = 0) -> list[dict[str, Any]]:
    """Chunks that say their own position, so a gap or repeat shows."""
    return [{"type": "text-delta", "id": "text-0", "delta": f"word {i} "} for i in range(start, start + count)]
