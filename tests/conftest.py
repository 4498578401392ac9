from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
JS_DIR = ROOT / "tests" / "js"


def node_binary() -> str | None:
    """The Node.js the JS tests use: $UISTREAM_NODE, else ``node``."""
    return os.environ.get("UISTREAM_NODE") or shutil.which("node")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def node() -> str:
    """Node.js with the pinned `ai` packages installed; skipped outside CI
    when missing, a failure in CI."""
    binary = node_binary()
    ready = binary is not None and (JS_DIR / "node_modules" / "ai7").is_dir()
    if not ready:
        message = "Node.js with tests/js/node_modules is needed (run `npm ci` in tests/js)"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    assert binary is not None
    return binary


@pytest.fixture(autouse=True, scope="session")
def _no_sweeper_in_the_test_process() -> None:
    """The servers the tests start renew and sweep their own runs, with
    their own broker. This process has other settings (the in-process
    broker) and shares their database: its sweeper would settle their runs
    without the chunks their broker holds. So its renewer never starts
    (any value but None tells ``ensure_renewer`` one runs)."""
    import threading

    from uistream_app import sweeper

    sweeper._renewer = threading.current_thread()


@pytest.fixture(autouse=True, scope="session")
def _lanes_let_go_of_the_test_database(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """The requests and runs of the in-thread test servers leave a
    connection open on each lane of this process (``uistream_app.threads``);
    they are closed before the test database is dropped (PostgreSQL refuses
    to drop a database while connections to it are open)."""
    yield
    from uistream_app.threads import close_connections

    with django_db_blocker.unblock():
        close_connections()
