"""Settings of the HTTP benchmark server (``bench/http_bench.py`` starts it).

The demo's settings, with what a measurement needs changed:

* ``DEBUG`` off, so Django does not keep every query in memory;
* a file SQLite database in ``UISTREAM_BENCH_DIR`` (a temporary directory
  the runner makes, migrates and removes), so the ``RunRecorder`` really
  writes the log, as in the demo;
* ``ROOT_URLCONF = "bench_urls"``: the demo's URLs plus the workload chat
  view, the bare baseline view and the query counter (``bench/bench_urls.py``);
* logging at WARNING, so a run does not print per request.

The demo's model stays the default ``MODEL`` (``/api/chat``: "count to N",
paced by ``UISTREAM_DEMO_DELAY_MS``). Import it with ``bench/`` on
``sys.path`` (``PYTHONPATH=.:bench``), as the benchmark plug-ins are.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from demo_project.settings import *  # noqa: F403
from demo_project.settings import UISTREAM

DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

BENCH_DIR = Path(os.environ.get("UISTREAM_BENCH_DIR") or tempfile.mkdtemp(prefix="uistream-http-bench-"))
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": BENCH_DIR / "bench.sqlite3",
    }
}

ROOT_URLCONF = "bench_urls"

UISTREAM = {**UISTREAM, "ALLOW_ANONYMOUS": True}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"uistream_app": {"handlers": ["console"], "level": "WARNING"}},
}
