"""The fault soak's short form (``bench/chaos.py``, issue 30): daphne,
uvicorn and a Celery worker on PostgreSQL and a Redis of the soak's own,
clients on every transport, and a dozen faults (SIGKILL, SIGTERM,
SIGSTOP past the lease of each process, Redis killed and restarted,
connections cut mid-frame); then every invariant of a run checked on the
stored runs, their logs read by the real ai@7 client, and what every client
received.

Marked ``soak``: scripts/test runs it on its own, on PostgreSQL (in the
database named by ``DATABASE_URL`` with ``_chaos`` added, made if
missing). ``UISTREAM_CHAOS_SEED`` picks another seed; a failure prints the
command that replays it. Skipped without PostgreSQL, ``redis-server``,
Celery or Node.js, except in CI (``CI=true``), where that is a failure.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from urllib.parse import urlsplit, urlunsplit

import pytest

from .conftest import in_ci, node_binary
from .server import ROOT

pytestmark = pytest.mark.soak


def need(ready: bool, message: str) -> None:
    if not ready:
        if in_ci():
            pytest.fail(f"{message} (CI=true: the soak must run)")
        pytest.skip(message)


def soak_database_url() -> str:
    url = os.environ.get("DATABASE_URL", "")
    parts = urlsplit(url)
    need(parts.scheme in ("postgres", "postgresql"), "the soak needs PostgreSQL: DATABASE_URL=postgres://…")
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "_chaos"))


def test_every_run_keeps_its_invariants_through_faults() -> None:
    database_url = soak_database_url()
    need(bool(os.environ.get("UISTREAM_REDIS_SERVER") or shutil.which("redis-server")), "redis-server is needed")
    need(importlib.util.find_spec("celery") is not None, "Celery is needed (pip install 'django-uistream[celery]')")
    node = node_binary()
    need(node is not None and (ROOT / "tests" / "js" / "node_modules" / "ai7").is_dir(), "Node.js and tests/js")
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import chaos
    finally:
        sys.path.remove(str(ROOT / "bench"))

    options = chaos.Options(
        seed=int(os.environ.get("UISTREAM_CHAOS_SEED", "30")),
        rounds=1,
        runs=40,
        faults=9,
        cut_rate=0.1,
        database_url=database_url,
        verbose=False,
    )
    soak = chaos.Soak(options)
    soak.run()
    report = soak.report()
    assert not soak.violations, report
    assert soak.runs >= 40, report
    # Every kind of process fault was injected, and clients cut connections.
    assert {kind for kind, n in soak.fault_counts.items() if n} >= set(chaos.PROCESS_FAULTS), report
    assert sum(soak.fault_counts.values()) >= 12, report
    # The faults hit runs: some ended otherwise than completed.
    assert sum(n for outcome, n in soak.outcomes.items() if not outcome.startswith("completed")) > 0, report
