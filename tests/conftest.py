from __future__ import annotations

import os
import shutil
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .packaging import build_dist

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


@pytest.fixture(scope="session")
def dists(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The ``(wheel, sdist)`` of this checkout, built once per test process
    (tests/packaging.py says how)."""
    return build_dist(tmp_path_factory.mktemp("dist"))


@pytest.fixture(autouse=True, scope="session")
def _no_sweeper_in_the_test_process() -> None:
    """The servers the tests start renew and sweep their own runs, with
    their own broker. This process has other settings (the in-process
    broker) and shares their database: its sweeper would settle their runs
    without the chunks their broker holds. So its renewer never starts
    (any value but None tells ``ensure_renewer`` one runs)."""
    import threading

    from uistream_app.lifecycle import leases as sweeper

    sweeper._renewer = threading.current_thread()


@pytest.fixture(autouse=True, scope="session")
def _lanes_let_go_of_the_test_database(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """The requests and runs of the in-thread test servers leave a
    connection open on each lane of this process (``uistream_app.lifecycle.threads``);
    they are closed before the test database is dropped (PostgreSQL refuses
    to drop a database while connections to it are open)."""
    yield
    from uistream_app.lifecycle.threads import close_connections

    with django_db_blocker.unblock():
        close_connections()


# -- running in parallel (pytest-xdist; scripts/test) ---------------------------------------------
#
# ``scripts/test`` runs the suite on several worker processes, each with its
# own test database (pytest-django names it per worker), ports chosen free,
# and Redis keys and Celery queues under a prefix of each test's own.

#: The modules whose module-scoped fixtures start a server or a browser, and
#: on how many workers each runs: its tests are split into that many groups,
#: each group whole on one worker, so the fixture starts once per group
#: (checked below). The demo in Chromium takes two: on one worker it would
#: be the last to finish.
ONE_WORKER_MODULES = {
    "tests/test_e2e_browser.py": 2,
    "tests/test_admin_browser.py": 1,
    "tests/test_feedback_browser.py": 1,
    "tests/test_copilotkit.py": 1,
    "tests/test_consumer.py": 1,
    "tests/test_media_types.py": 1,
    "tests/test_packaging.py": 1,
    "tests/test_readme_project.py": 1,
    "tests/test_steering_real_client.py": 1,
    "tests/test_steering_postgres.py": 1,
}

#: Modules that go to the same worker as a whole: test_packaging's and
#: test_readme_project's tests share the session's ``dists``, so the package
#: is built once, not once per worker.
SAME_WORKER = {"tests/test_packaging.py": "dists", "tests/test_readme_project.py": "dists"}

#: Modules whose tests start and kill processes (servers, Celery workers,
#: Redis, Chromium): sent to the workers first, so the last minute of the
#: run is not one worker alone on a long module.
SLOW_FIRST = (
    "tests/test_readme_project.py",
    "tests/test_celery_executor.py",
    "tests/test_e2e_browser.py",
    "tests/test_copilotkit.py",
    "tests/test_redis_outage.py",
    "tests/test_leases.py",
    "tests/test_shutdown.py",
    "tests/test_threads.py",
    "tests/test_consumer.py",
    "tests/test_admin_browser.py",
    "tests/test_feedback_browser.py",
    "tests/test_steering_real_client.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        info = getattr(item, "_fixtureinfo", None)
        if info is None or module in ONE_WORKER_MODULES:
            continue
        if any(d.scope == "module" for defs in info.name2fixturedefs.values() for d in defs):
            raise pytest.UsageError(f"{module} has a module-scoped fixture: list it in ONE_WORKER_MODULES")
    rank = {module: n for n, module in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: modules keep their order


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Each test is a unit of its own, but for the modules of
    ``ONE_WORKER_MODULES``, whose tests go in groups to one worker each, and
    those of ``SAME_WORKER``, which go together."""
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            if module in SAME_WORKER:
                return SAME_WORKER[module]
            groups = ONE_WORKER_MODULES.get(module)
            if groups is None:
                return nodeid
            return f"{module}#{zlib.crc32(nodeid.encode()) % groups}"

    return Scheduling(config, log)
