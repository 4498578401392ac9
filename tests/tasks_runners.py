"""The ``"tasks"`` executor as a project configures it for another backend
(tests/test_tasks_executor.py): a ``TasksRunner`` subclass naming the
``TASKS`` alias and the queue, named by dotted path in ``EXECUTOR``."""

from __future__ import annotations

import os

from uistream_app.lifecycle.tasks_executor import TasksRunner


class RQTasksRunner(TasksRunner):
    backend = "rq"
    queue_name = os.environ.get("UISTREAM_TEST_RQ_QUEUE")
