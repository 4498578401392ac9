"""The Celery task of the ``"celery"`` executor (``lifecycle/executors.py``).

Imported by a worker's ``app.autodiscover_tasks()`` and, lazily, by
``CeleryRunner``; nothing else imports Celery. The task is sync, as Celery
tasks are, and runs the run in an event loop of its own through
``async_to_sync``: the ORM's thread-sensitive calls come back to the task's
thread, whose database connections Celery's Django fix-up closes after
each task.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync

from .errors import import_extra
from .lifecycle.executors import TASK_NAME, execute_in_worker

# The "celery" executor's extra: without it, "pip install 'django-uistream[celery]'".
import_extra("celery", "celery")

from celery import shared_task  # noqa: E402

__all__ = ["execute_run_task"]


@shared_task(name=TASK_NAME, acks_late=True, ignore_result=True)  # type: ignore[untyped-decorator]
def execute_run_task(payload: dict[str, Any], time_limit: float | None = None) -> str:
    """Execute one handed-off run (``lifecycle.executors.execute_in_worker``)."""
    return async_to_sync(execute_in_worker)(payload, time_limit=time_limit)
