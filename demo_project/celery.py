"""The demo's Celery app, for ``UISTREAM_DEMO_EXECUTOR=celery``:

    REDIS_URL=redis://127.0.0.1:6379/0 UISTREAM_DEMO_EXECUTOR=celery python manage.py runserver
    REDIS_URL=redis://127.0.0.1:6379/0 UISTREAM_DEMO_EXECUTOR=celery celery -A demo_project worker --loglevel=warning

Configured from the ``CELERY_*`` Django settings (demo_project/settings.py),
with the options the executor is meant to run with
(``uistream_app.lifecycle.executors.celery_options``).
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo_project.settings")

app = Celery("demo_project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _executor_options(sender: Celery, **kwargs: object) -> None:
    from uistream_app.lifecycle.executors import celery_options

    options = celery_options()
    # The project's own transport options (a key prefix) go on top.
    transport = {**options.pop("broker_transport_options"), **(sender.conf.broker_transport_options or {})}
    sender.conf.update(options, broker_transport_options=transport)


app.on_after_configure.connect(_executor_options)
