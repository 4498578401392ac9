"""Choosing the backend: ``broker_from_config``, ``get_broker``,
``reset_broker``, ``ping``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from uistream_app.live import (
    BrokerConfigError,
    MemoryBroker,
    broker_from_config,
    get_broker,
    ping,
    reset_broker,
)

from ..conftest import ROOT


class CustomBroker(MemoryBroker):
    """A backend named by dotted path."""

    @classmethod
    def from_config(cls, config: Any) -> CustomBroker:
        broker = cls()
        broker.config = config  # type: ignore[attr-defined]
        return broker


@pytest.fixture
def fresh_brokers() -> Iterator[None]:
    reset_broker()
    yield
    reset_broker()


def test_memory_is_the_default() -> None:
    assert isinstance(broker_from_config({}), MemoryBroker)
    assert isinstance(broker_from_config({"BACKEND": "memory"}), MemoryBroker)


def test_redis_is_chosen_by_name() -> None:
    pytest.importorskip("redis")
    broker = broker_from_config({"BACKEND": "redis", "URL": "redis://example.invalid:6379/2", "PREFIX": "chat"})
    assert type(broker).__name__ == "RedisBroker"
    assert broker.prefix == "chat"  # type: ignore[attr-defined]


def test_a_backend_can_be_a_dotted_path() -> None:
    config = {"BACKEND": "tests.live.test_config.CustomBroker", "COLOUR": "blue"}
    broker = broker_from_config(config)
    assert isinstance(broker, CustomBroker)
    assert broker.config == config  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("redis", "must be a dict"),
        ({"BACKEND": "kafka"}, "'kafka' is neither 'memory', 'redis', 'postgres'"),
        ({"BACKEND": "tests.live.nowhere.Broker"}, "cannot be imported"),
        ({"BACKEND": "tests.live.test_config.Nothing"}, "is neither"),
        ({"BACKEND": 3}, "must be 'memory'"),
    ],
)
def test_a_bad_backend_is_named(config: Any, message: str) -> None:
    with pytest.raises(BrokerConfigError, match=message):
        broker_from_config(config)


@pytest.mark.usefixtures("fresh_brokers")
def test_get_broker_caches_one_broker_per_setting(settings: Any) -> None:
    settings.UISTREAM = {}
    broker = get_broker()
    assert isinstance(broker, MemoryBroker)
    assert get_broker() is broker
    settings.UISTREAM = {"BROKER": {"BACKEND": "memory", "FINISHED_TTL": 5}}
    other = get_broker()
    assert other is not broker
    assert other.finished_ttl == 5  # type: ignore[attr-defined]
    settings.UISTREAM = {}
    assert get_broker() is broker
    reset_broker()
    assert get_broker() is not broker


@pytest.mark.usefixtures("fresh_brokers")
def test_override_settings_of_broker_gets_its_own_broker_and_keeps_the_old_one() -> None:
    # What reset_broker's docstring promises: a changed BROKER needs no
    # reset, and an override that leaves BROKER alone keeps the broker (and
    # the runs open in it).
    with override_settings(UISTREAM={}):
        broker = get_broker()
        with override_settings(UISTREAM={"BROKER": {"BACKEND": "memory", "FINISHED_TTL": 7}}):
            other = get_broker()
            assert other is not broker
            assert other.finished_ttl == 7  # type: ignore[attr-defined]
        assert get_broker() is broker
        with override_settings(UISTREAM={"MAX_STEPS": 3}):
            assert get_broker() is broker


@pytest.mark.usefixtures("fresh_brokers")
def test_get_broker_raises_improperly_configured(settings: Any) -> None:
    settings.UISTREAM = {"BROKER": {"BACKEND": "memory", "PREFIX": "x"}}
    with pytest.raises(ImproperlyConfigured, match="PREFIX"):
        get_broker()


@pytest.mark.asyncio
async def test_ping_of_the_memory_broker_always_succeeds(settings: Any) -> None:
    settings.UISTREAM = {}
    await ping()
    await ping({"BACKEND": "memory"})


def test_the_broker_imports_neither_django_nor_redis() -> None:
    code = (
        "import sys, uistream_app.live; "
        "loaded = [m for m in ('django', 'redis') if m in sys.modules]; "
        "assert not loaded, loaded"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"BACKEND": "postgres", "HOST": "db"}, "keys the postgres broker does not know: HOST"),
        ({"BACKEND": "postgres", "URL": ""}, r"\['URL'\] must be a postgres:// URL"),
        ({"BACKEND": "postgres", "DATABASE": 3}, r"\['DATABASE'\] must be the alias"),
        ({"BACKEND": "postgres", "URL": "postgres://db/x", "DATABASE": "default"}, "URL or DATABASE, not both"),
        ({"BACKEND": "postgres", "ACTIVE_TTL": 0}, r"\['ACTIVE_TTL'\] must be a number of seconds >= 0.3"),
        ({"BACKEND": "postgres", "POLL_SECONDS": "1"}, r"\['POLL_SECONDS'\] must be a number of seconds"),
    ],
)
def test_a_bad_postgres_setting_is_named(config: Any, message: str) -> None:
    with pytest.raises(BrokerConfigError, match=message):
        broker_from_config(config)


def test_the_postgres_broker_refuses_a_database_that_is_not_postgresql(settings: Any) -> None:
    from django.db import connection

    broker = broker_from_config({"BACKEND": "postgres"})
    if connection.vendor == "postgresql":
        assert "dbname=" in broker._dsn()  # type: ignore[attr-defined]
    else:
        with pytest.raises(BrokerConfigError, match=r"needs a PostgreSQL database; DATABASES\['default'\] is sqlite"):
            broker._dsn()  # type: ignore[attr-defined]


def test_the_log_writer_and_the_broker_name_one_channel() -> None:
    from uistream_app.live.postgres import LOG_CHANNEL
    from uistream_app.recording import log_writer

    assert log_writer.LOG_CHANNEL == LOG_CHANNEL
