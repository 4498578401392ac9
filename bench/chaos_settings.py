"""Settings of the fault soak's processes (``bench/chaos.py`` starts them):
two web servers (daphne, uvicorn) and a Celery worker, on one PostgreSQL
database and a Redis of the soak's own.

The demo's settings, with:

* ``UISTREAM_CHAOS_DATABASE_URL`` as the database and
  ``UISTREAM_CHAOS_REDIS_URL`` as the chunk broker and Celery's broker
  (Celery's keys under ``chaos:celery:``);
* the soak's own tools and URLs (``bench/chaos_project.py``): the demo's
  ``get_weather``, ``calculate`` and ``send_email``, each of whose runs
  leaves a mark in ``UISTREAM_CHAOS_DIR/calls/<tool call id>``, and a
  useChat endpoint whose runs execute on the Celery worker;
* ``UISTREAM_CHAOS_SETTINGS`` (JSON): more ``UISTREAM`` keys (the lease,
  the heartbeat, ``ON_OWNER_LOST``);
* DEBUG off, logging at WARNING.

Import it with ``bench/`` on ``sys.path`` (``PYTHONPATH=.:bench``).
"""

from __future__ import annotations

import json
import os

from demo_project.settings import *  # noqa: F403
from demo_project.settings import UISTREAM, _database_from_url

DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
DATABASES = {"default": _database_from_url(os.environ["UISTREAM_CHAOS_DATABASE_URL"])}
DATABASES["default"]["CONN_MAX_AGE"] = 60
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
ROOT_URLCONF = "chaos_project"

UISTREAM = {
    **UISTREAM,
    "EXECUTOR": "inprocess",  # the Celery endpoint of chaos_project picks the worker itself
    "BROKER": {"BACKEND": "redis", "URL": os.environ["UISTREAM_CHAOS_REDIS_URL"], "PREFIX": "chaos"},
    "TOOLS": ["chaos_project.get_weather", "chaos_project.calculate", "chaos_project.send_email"],
    "MAX_ACTIVE_RUNS_PER_SESSION": 100,
    "SHUTDOWN_GRACE_SECONDS": 2,
}
UISTREAM.pop("MCP_SERVERS", None)
UISTREAM.update(json.loads(os.environ.get("UISTREAM_CHAOS_SETTINGS") or "{}"))

CELERY_BROKER_URL = os.environ["UISTREAM_CHAOS_REDIS_URL"]
CELERY_BROKER_TRANSPORT_OPTIONS = {"global_keyprefix": "chaos:celery:"}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"levels": {"format": "%(asctime)s %(process)d %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "levels"}},
    "loggers": {"uistream_app": {"handlers": ["console"], "level": "WARNING"}},
}
