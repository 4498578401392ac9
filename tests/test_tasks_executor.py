"""Runs on the workers of a ``django.tasks`` backend
(``UISTREAM["EXECUTOR"] = "tasks"``), through real processes: daphne web
servers, and the database backend's own worker (``django-tasks-db``'s
``db_worker`` command) in subprocesses, killed for real; the same test
database and the live broker (a parameter: Redis today).

Judged as the Celery executor's tests judge it: what a client receives
(the real ai@7 client where one is involved), the stored run and message,
and the task rows the backend keeps. Skipped without django-tasks-db or
Redis, except in CI where that is a failure.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from uistream_app.models import Run

from .conftest import in_ci
from .live.conftest import redis_config  # noqa: F401  (fixture)
from .test_celery_executor import Process, Stack, answer_text, run_status, settled, visitor
from .test_chat_http import Browser, read_chunks, text_of, wait_for
from .test_chat_real_client import run_client, stored_messages

pytestmark = pytest.mark.django_db(transaction=True)


def require_tasks_db() -> None:
    try:
        import django_tasks_db  # noqa: F401
    except ImportError:
        message = "django-tasks-db is not installed (pip install 'django-uistream[tasks]')"
        if in_ci():
            pytest.fail(f"{message} (CI=true: the Tasks executor's tests must run)")
        pytest.skip(message)


class TasksStack(Stack):
    """Web servers and ``db_worker`` processes on one test database."""

    def __init__(self, uistream: dict[str, Any], broker: dict[str, Any], tag: str) -> None:
        super().__init__(uistream, broker, tag)
        self.env["UISTREAM_DEMO_EXECUTOR"] = "tasks"
        del self.env["UISTREAM_TEST_CELERY_PREFIX"]
        self.workers = 0

    def worker(self) -> Process:
        self.workers += 1
        worker_id = f"uistream-test-{self.tag}-{self.workers}"
        process = Process(
            [
                *(sys.executable, "-m", "django", "db_worker", "--no-reload", "--no-startup-delay"),
                *("--interval", "0.05", "--worker-id", worker_id, "--verbosity", "2"),
            ],
            self.env,
        )
        self.processes.append(process)
        process.wait_until(lambda: f"worker_id={worker_id}" in process.output(), "the db_worker", timeout=60)
        return process


@pytest.fixture(params=["redis"])
def broker_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The live broker the web processes relay the worker's stream through."""
    config: dict[str, Any] = request.getfixturevalue(f"{request.param}_config")
    return config


@pytest.fixture
def stack(broker_config: dict[str, Any]) -> Iterator[TasksStack]:
    require_tasks_db()
    uistream = {
        "ALLOW_ANONYMOUS": True,
        "MODEL": "demo_project.demo_model.make_model",
        "TOOLS": ["demo_project.demo_model.get_weather", "demo_project.demo_model.calculate"],
        "BROKER": broker_config,
        "EXECUTOR": "tasks",
        "ON_DISCONNECT": "finish",
        "LOG_WRITER": "thread",
    }
    stack = TasksStack(uistream, broker_config, broker_config.get("PREFIX", "t").rsplit(":", 1)[-1])
    try:
        yield stack
    finally:
        stack.close()


def task_rows(chat_id: str) -> list[dict[str, Any]]:
    """The backend's rows of the tasks that carried this chat's runs, oldest first."""
    from django_tasks_db.models import DBTaskResult

    rows = DBTaskResult.objects.order_by("enqueued_at").values("status", "return_value", "args_kwargs", "task_path")
    return [row for row in rows if row["args_kwargs"]["kwargs"]["payload"]["chat_id"] == chat_id]


def test_a_post_gets_its_headers_at_once_and_the_worker_answers_through_the_web_process(stack: TasksStack) -> None:
    web, _ = stack.web()
    browser = Browser(web)
    with browser.stream("waiting", "count to 5") as response:
        # No worker runs yet: the task waits in the database, and the
        # response is already open.
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert Run.objects.get(conversation__client_id="waiting").status == "running"
        (queued,) = task_rows("waiting")
        assert queued["status"] == "READY"
        assert queued["task_path"] == "uistream_app.lifecycle.tasks_executor.execute_run_task"
        stack.worker()
        chunks, done = read_chunks(response)
    assert done
    assert text_of(chunks).split() == ["1", "2", "3", "4", "5"]
    assert chunks[-1]["type"] == "finish"
    wait_for(lambda: settled("waiting"), "the run to be stored")
    assert run_status("waiting") == ["completed"]
    wait_for(lambda: task_rows("waiting")[0]["status"] == "SUCCESSFUL", "the task to finish")
    assert task_rows("waiting")[0]["return_value"] == "executed"


def test_the_real_client_chats_through_a_worker_as_in_process(node: str, stack: TasksStack) -> None:
    worker_web, _ = stack.web()
    stack.worker()
    inprocess_web, _ = stack.web(EXECUTOR="inprocess")
    steps = [{"send": "What's the weather in Oslo?"}, {"send": "compute 6*7"}]
    on_worker = run_client(node, worker_web, Browser(worker_web), chatId="on-worker", version=7, steps=steps)
    here = run_client(node, inprocess_web, Browser(inprocess_web), chatId="in-process", version=7, steps=steps)

    assert on_worker["error"] is None
    assert on_worker["finished"] == 2
    wait_for(lambda: settled("on-worker") and settled("in-process"), "the runs to be stored")
    assert run_status("on-worker") == ["completed", "completed"]
    stored = stored_messages("on-worker")
    assert on_worker["messages"] == stored
    assert [row["return_value"] for row in task_rows("on-worker")] == ["executed", "executed"]

    def shape(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**m, "id": "-"} for m in messages]

    assert shape(stored) == shape(stored_messages("in-process"))
    assert shape(on_worker["messages"]) == shape(here["messages"])


def test_a_stop_through_another_web_process_stops_the_worker_run(stack: TasksStack) -> None:
    web, _ = stack.web()
    other, _ = stack.web()
    stack.worker()
    browser = Browser(web)
    with browser.stream("stopped", "count to 400") as response:
        received, _ = read_chunks(response, stop=lambda cs: len(text_of(cs).split()) >= 5)
        answer = visitor(browser, other).post("/api/chat/stopped/stop")
        assert answer.json() == {"stopped": True}
        rest, done = read_chunks(response)
    assert done
    assert rest[-1] == {"type": "abort", "reason": "stopped"}
    wait_for(lambda: settled("stopped"), "the run to be stored")
    assert run_status("stopped") == ["stopped"]
    said = text_of(received + rest).split()
    assert 5 <= len(said) < 400
    assert answer_text(stored_messages("stopped")[-1]).split() == said


def test_killing_the_worker_settles_the_run_interrupted(stack: TasksStack) -> None:
    stack.env["UISTREAM_DEMO_DELAY_MS"] = "30"
    # Short leases, as in test_leases: the web process's sweeper finds the
    # dead worker's run within seconds rather than the default 20.
    settings = {**json.loads(stack.env["UISTREAM_TEST_SETTINGS"]), "HEARTBEAT_SECONDS": 0.5, "LEASE_SECONDS": 2}
    stack.env["UISTREAM_TEST_SETTINGS"] = json.dumps(settings)
    web, _ = stack.web()
    worker = stack.worker()
    browser = Browser(web)
    with browser.stream("orphan", "count to 400") as response:
        seen, done = read_chunks(response, stop=lambda cs: len(text_of(cs).split()) >= 10)
        assert not done
        worker.kill(signal.SIGKILL)
        rest, done = read_chunks(response)
    # The client is not left hanging: a terminal chunk, then [DONE].
    assert done
    assert rest[-1]["type"] in ("error", "abort")
    wait_for(lambda: settled("orphan"), "the run to be settled", timeout=settings["LEASE_SECONDS"] + 15)
    assert run_status("orphan") == ["interrupted"]
    said = text_of(seen + rest).split()
    assert answer_text(stored_messages("orphan")[-1]).split() == said
    # The backend still has the dead worker's task as running: it delivers
    # no task twice by itself. A new worker and a new turn on the chat.
    assert [row["status"] for row in task_rows("orphan")] == ["RUNNING"]
    stack.worker()
    answer = browser.post("/api/chat", browser.chat_body("orphan", "count to 2", message_id="u2"))
    assert answer.status_code == 200
    wait_for(lambda: settled("orphan"), "the second run to be stored")
    assert run_status("orphan") == ["interrupted", "completed"]


def test_a_task_delivered_twice_runs_once(stack: TasksStack) -> None:
    from uistream_app.lifecycle.tasks_executor import execute_run_task

    stack.env["UISTREAM_DEMO_DELAY_MS"] = "20"
    web, _ = stack.web()
    stack.worker()
    stack.worker()
    browser = Browser(web)
    with browser.stream("twice", "count to 60") as response:
        seen, _ = read_chunks(response, stop=lambda cs: len(text_of(cs).split()) >= 3)
        # The same task again while its run streams, as a backend that
        # delivers at least once may: the second worker finds the run adopted.
        (first,) = task_rows("twice")
        execute_run_task.enqueue(**first["args_kwargs"]["kwargs"])
        wait_for(lambda: [row["status"] for row in task_rows("twice")][1:] == ["SUCCESSFUL"], "the second delivery")
        rest, done = read_chunks(response)
    assert done
    assert text_of(seen + rest).split() == [str(n) for n in range(1, 61)]
    wait_for(lambda: settled("twice"), "the run to be stored")
    assert run_status("twice") == ["completed"]
    assert answer_text(stored_messages("twice")[-1]).split() == [str(n) for n in range(1, 61)]
    wait_for(lambda: task_rows("twice")[0]["status"] == "SUCCESSFUL", "the first delivery")
    assert [row["return_value"] for row in task_rows("twice")] == ["executed", "not-active"]
    # And a task whose run ended before it was delivered does nothing either.
    execute_run_task.enqueue(**first["args_kwargs"]["kwargs"])
    wait_for(lambda: [row["status"] for row in task_rows("twice")][2:] == ["SUCCESSFUL"], "the late delivery")
    assert task_rows("twice")[2]["return_value"] == "not-active"
    assert run_status("twice") == ["completed"]
