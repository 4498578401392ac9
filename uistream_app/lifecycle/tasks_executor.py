"""The ``"tasks"`` executor: runs on the workers of a ``django.tasks``
backend (``UISTREAM["EXECUTOR"] = "tasks"``, docs/operations.md,
"Executors").

``TasksRunner`` is ``WorkerRunner`` (``lifecycle/executors.py``) with the
task enqueued through Django's background-task API on the project's
``TASKS`` backend: the database backend (``django-tasks-db``, whose
``db_worker`` command is the worker), RQ's, or any other. The worker's
task, ``execute_run_task``, is Celery's twin: ``execute_in_worker`` in an
event loop of its own, adopting the run's broker channel at most once, so
a task a backend delivers twice runs once.

The API is ``django.tasks`` on Django 6 and the ``django-tasks`` backport
on Django 5.2, whichever this process has, as ``django-tasks-db`` chooses;
``django-uistream[tasks]`` installs the backend and the backport. Only
``UISTREAM["EXECUTOR"]`` (``conf.EXECUTORS``) and the workers, which read
the task's dotted path from the queue, import this module: the task is
made when it is imported, on the ``TASKS`` backend named ``"default"``.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any, ClassVar

from asgiref.sync import async_to_sync
from django.core.exceptions import ImproperlyConfigured

from ..errors import import_extra
from .executors import WorkerRunner, execute_in_worker

if find_spec("django.tasks") is not None:  # Django 6
    from django.tasks import task
    from django.tasks.backends.dummy import DummyBackend
    from django.tasks.backends.immediate import ImmediateBackend
    from django.tasks.exceptions import InvalidTask, InvalidTaskBackend
else:  # Django 5.2: the backport, the "tasks" extra's
    import_extra("django_tasks", "tasks")
    from django_tasks import task  # type: ignore[no-redef,unused-ignore]
    from django_tasks.backends.dummy import DummyBackend  # type: ignore[assignment]
    from django_tasks.backends.immediate import ImmediateBackend  # type: ignore[assignment]
    from django_tasks.exceptions import InvalidTaskBackendError as InvalidTaskBackend  # type: ignore[assignment]
    from django_tasks.exceptions import InvalidTaskError as InvalidTask  # type: ignore[assignment]

__all__ = ["TasksRunner", "execute_run_task"]


@task
def execute_run_task(payload: dict[str, Any], time_limit: float | None = None) -> str:
    """Execute one handed-off run (``lifecycle.executors.execute_in_worker``):
    ``"executed"``, or ``"not-active"`` when its run ended or was adopted
    before (the task's result, where the backend keeps results)."""
    return async_to_sync(execute_in_worker)(payload, time_limit=time_limit)


class TasksRunner(WorkerRunner):
    """Runs on a ``django.tasks`` backend's workers (see the module
    docstring). Subclass it and name the subclass in
    ``UISTREAM["EXECUTOR"]`` to choose where the task goes: ``backend``
    (an alias of ``TASKS``; None: ``"default"``), ``queue_name`` (one of
    the backend's ``QUEUES``), ``priority``; and ``time_limit``, the
    seconds a run may take before it is cancelled in the worker."""

    engine: ClassVar[str] = "tasks"
    backend: str | None = None
    queue_name: str | None = None
    priority: int | None = None

    @classmethod
    def get_task(cls) -> Any:
        """The task to enqueue: ``execute_run_task`` on this runner's
        backend, queue and priority (checked by the backend)."""
        return execute_run_task.using(backend=cls.backend, queue_name=cls.queue_name, priority=cls.priority)

    @classmethod
    def check_engine(cls) -> None:
        try:
            backend = cls.get_task().get_backend()
        except (InvalidTaskBackend, InvalidTask) as exc:  # no such alias in TASKS; a queue the backend lacks…
            raise ImproperlyConfigured(f"UISTREAM['EXECUTOR'] = {cls.engine!r} cannot enqueue its task: {exc}") from exc
        # Django's own two (ImmediateBackend is its default TASKS) have no
        # workers: the first would run the run inside the POST's enqueue,
        # its headers held until the answer ends; the second never runs it.
        if isinstance(backend, ImmediateBackend | DummyBackend):
            raise ImproperlyConfigured(
                f"UISTREAM['EXECUTOR'] = {cls.engine!r} cannot enqueue its task: the TASKS backend "
                f"{backend.alias!r} is {type(backend).__name__}, which has no workers: name one that has "
                "(django_tasks_db.DatabaseBackend, whose worker is manage.py db_worker)."
            )

    async def enqueue(self, payload: dict[str, Any]) -> None:
        await self.get_task().aenqueue(payload=payload, time_limit=self.time_limit)
