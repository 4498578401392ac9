"""Settings of a second server process in the multi-process tests.

The test passes what must match its own process: ``DATABASE_URL`` (the
shared test database file) and ``UISTREAM_TEST_SETTINGS`` (the ``UISTREAM``
dict, as JSON: the same broker and key prefix).
"""

import json
import os

from tests.settings import *  # noqa: F403

UISTREAM = json.loads(os.environ["UISTREAM_TEST_SETTINGS"])

if os.environ.get("UISTREAM_TEST_CELERY_PREFIX"):
    # The Celery executor's tests: Celery's keys in Redis under the test's own prefix.
    CELERY_BROKER_URL = os.environ["REDIS_URL"]
    CELERY_BROKER_TRANSPORT_OPTIONS = {"global_keyprefix": os.environ["UISTREAM_TEST_CELERY_PREFIX"]}

if os.environ.get("UISTREAM_TEST_SPAN_FILE"):
    # The tracing tests: this process's spans, as JSON lines in a file the test reads.
    from tests.tracing_support import install_file_exporter

    install_file_exporter(os.environ["UISTREAM_TEST_SPAN_FILE"])

if os.environ.get("UISTREAM_TEST_LOG_LEVELS"):
    # A test that counts what the server logs: each record on one line,
    # its level and logger first.
    LOGGING = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"levels": {"format": "%(levelname)s %(name)s %(message)s"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "levels"}},
        "loggers": {"uistream_app": {"handlers": ["stderr"], "level": "INFO"}},
    }

if os.environ.get("UISTREAM_TEST_CSRF_TRUSTED_ORIGINS"):
    # The Origin check's tests: the origins trusted besides the server's own.
    CSRF_TRUSTED_ORIGINS = json.loads(os.environ["UISTREAM_TEST_CSRF_TRUSTED_ORIGINS"])

if os.environ.get("UISTREAM_TEST_RQ_QUEUE"):
    # The "tasks" executor's tests on RQ (django-tasks-rq): a backend "rq"
    # beside the demo's database one, with a queue of the test's own (the
    # runner, tests.tasks_runners.RQTasksRunner, names both).
    INSTALLED_APPS = [*INSTALLED_APPS, "django_rq"]  # noqa: F405
    # Jobs longer than a run's time limit; "default" is the connection
    # django-tasks-rq reads results through.
    RQ_QUEUES = {
        os.environ["UISTREAM_TEST_RQ_QUEUE"]: {"URL": os.environ["REDIS_URL"], "DEFAULT_TIMEOUT": 960},
        "default": {"URL": os.environ["REDIS_URL"]},
    }
    TASKS = {
        **TASKS,  # noqa: F405
        "rq": {"BACKEND": "django_tasks_rq.RQBackend", "QUEUES": [os.environ["UISTREAM_TEST_RQ_QUEUE"]]},
    }
