"""Settings of the HTTP benchmark server (``bench/http_bench.py`` starts it).

The demo's settings, with what a measurement needs changed:

* ``DEBUG`` off, so Django does not keep every query in memory;
* a file SQLite database in ``UISTREAM_BENCH_DIR`` (a temporary directory
  the runner makes, migrates and removes), so the ``RunRecorder`` really
  writes the log, as in the demo. ``UISTREAM_BENCH_SQLITE`` picks its
  configuration: ``wal`` (the default here) is what Django's docs advise
  for concurrent writers (WAL journal, ``synchronous=NORMAL``,
  ``transaction_mode`` IMMEDIATE, a 20 s busy timeout); ``default`` is the
  demo's (rollback journal, deferred transactions, 5 s), under which
  concurrent new chats fail with "database is locked";
* ``UISTREAM_BENCH_DATABASE_URL`` (``postgres://user@host:port/name``, as the
  demo's ``DATABASE_URL``), when set, is the database instead: the
  many-process server benchmark (``bench/server/procs.sh``) makes a fresh
  PostgreSQL database per run;
* persistent connections as the demo's (``CONN_MAX_AGE`` 60, health
  checks on: the lanes bound the threads that hold them);
  ``UISTREAM_BENCH_CONN_MAX_AGE`` sets another age (0: a connection per
  request, Django's default);
* ``ROOT_URLCONF = "bench_urls"``: the demo's URLs plus the workload chat
  view, the bare baseline view and the query counter (``bench/bench_urls.py``);
* ``UISTREAM_BENCH_FLUSH_MS``, when set, is ``UISTREAM["FLUSH_EVERY_MS"]``;
  ``UISTREAM_BENCH_SETTINGS`` (JSON) sets more ``UISTREAM`` keys;
* logging at WARNING, so a run does not print per request.

The demo's model stays the default ``MODEL`` (``/api/chat``: "count to N",
paced by ``UISTREAM_DEMO_DELAY_MS``). Import it with ``bench/`` on
``sys.path`` (``PYTHONPATH=.:bench``), as the benchmark plug-ins are.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from demo_project.settings import *  # noqa: F403
from demo_project.settings import UISTREAM, _database_from_url

DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

BENCH_DIR = Path(os.environ.get("UISTREAM_BENCH_DIR") or tempfile.mkdtemp(prefix="uistream-http-bench-"))
SQLITE_MODE = os.environ.get("UISTREAM_BENCH_SQLITE", "wal")
SQLITE_CONFIGS: dict[str, dict[str, object]] = {
    "wal": {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    },
    "default": {},
}
SQLITE_OPTIONS = SQLITE_CONFIGS[SQLITE_MODE]
_CONN_MAX_AGE = int(os.environ.get("UISTREAM_BENCH_CONN_MAX_AGE", DATABASES["default"].get("CONN_MAX_AGE", 0)))  # noqa: F405
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": BENCH_DIR / "bench.sqlite3",
        "OPTIONS": SQLITE_OPTIONS,
    }
}
if os.environ.get("UISTREAM_BENCH_DATABASE_URL"):
    DATABASES = {"default": _database_from_url(os.environ["UISTREAM_BENCH_DATABASE_URL"])}
DATABASES["default"]["CONN_MAX_AGE"] = _CONN_MAX_AGE
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True

ROOT_URLCONF = "bench_urls"

# The load clients (bench/server/load.py, bench/http_bench.py) are one
# anonymous visitor with many chats at once: the session's caps are raised
# past any burst they send, not removed, so every turn still pays for
# their check (lifecycle/caps.py).
UISTREAM = {
    **UISTREAM,
    "ALLOW_ANONYMOUS": True,
    "MAX_ACTIVE_RUNS_PER_SESSION": 100_000,
    "MAX_STORED_BYTES_PER_SESSION_PER_DAY": 1 << 40,
}
if os.environ.get("UISTREAM_BENCH_FLUSH_MS"):
    UISTREAM["FLUSH_EVERY_MS"] = int(os.environ["UISTREAM_BENCH_FLUSH_MS"])
# More UISTREAM keys, as JSON (bench/lease_bench.py: leases and the broker).
UISTREAM.update(json.loads(os.environ.get("UISTREAM_BENCH_SETTINGS") or "{}"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"uistream_app": {"handlers": ["console"], "level": "WARNING"}},
}

if os.environ.get("UISTREAM_BENCH_GC_DEBUG"):  # diagnosis: log every collection of the oldest generation
    import gc
    import sys
    import time as _time

    _gc_started = [0.0]

    def _gc_callback(phase: str, info: dict[str, int]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            _gc_started[0] = _time.perf_counter()
        else:
            ms = (_time.perf_counter() - _gc_started[0]) * 1000
            print(f"gc gen2: {ms:.1f} ms, {info.get('collected')} collected", file=sys.stderr, flush=True)

    gc.callbacks.append(_gc_callback)

# bench/executor_bench.py: the Redis broker under a prefix of the run's own,
# and the executor ("celery": Celery's queues in the same Redis, same prefix).
if os.environ.get("UISTREAM_BENCH_REDIS_URL"):
    UISTREAM["BROKER"] = {
        "BACKEND": "redis",
        "URL": os.environ["UISTREAM_BENCH_REDIS_URL"],
        "PREFIX": os.environ["UISTREAM_BENCH_REDIS_PREFIX"],
    }
if os.environ.get("UISTREAM_BENCH_EXECUTOR"):
    UISTREAM["EXECUTOR"] = os.environ["UISTREAM_BENCH_EXECUTOR"]
    CELERY_BROKER_URL = os.environ["UISTREAM_BENCH_REDIS_URL"]
    CELERY_BROKER_TRANSPORT_OPTIONS = {"global_keyprefix": os.environ["UISTREAM_BENCH_REDIS_PREFIX"] + ":celery:"}
