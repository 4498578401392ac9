"""Runs on the workers of a ``django.tasks`` backend
(``UISTREAM["EXECUTOR"] = "tasks"``), through real processes: daphne web
servers, and the database backend's own worker (``django-tasks-db``'s
``db_worker`` command) in subprocesses, killed for real; the same test
database and the live broker (a parameter: Redis; and, for the database
backend, PostgreSQL alone: ``postgres_stack``, which no Redis is given to).

Judged as the Celery executor's tests judge it: what a client receives
(the real ai@7 client where one is involved), the stored run and message,
and the task rows the backend keeps. Skipped without django-tasks-db or
Redis, except in CI where that is a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import in_ci
from .live.conftest import redis_config  # noqa: F401  (fixture)
from .server import ROOT
from .test_celery_executor import (
    Process,
    Stack,
    answer_text,
    answers_once_a_worker_starts,
    chats_through_a_worker_as_in_process,
    killed_worker_run_settled,
    run_status,
    settled,
    stop_stops_the_worker_run,
    visitor,
)
from .test_chat_http import Browser, read_chunks, text_of, wait_for
from .test_chat_real_client import run_client, stored_messages

pytestmark = pytest.mark.django_db(transaction=True)


#: The backends the executor is tested on: the database backend
#: (django-tasks-db, its ``db_worker``), and RQ (django-tasks-rq, django-rq's
#: ``rqworker``), a queue on Redis that forks a process per job.
BACKENDS = ["database", "rq"]


def require(module: str, package: str) -> None:
    try:
        __import__(module)
    except ImportError:
        message = f"{package} is not installed"
        if in_ci():
            pytest.fail(f"{message} (CI=true: the Tasks executor's tests must run)")
        pytest.skip(message)


class TasksStack(Stack):
    """Web servers and the backend's workers on one test database."""

    def __init__(self, uistream: dict[str, Any], broker: dict[str, Any], tag: str, backend: str) -> None:
        super().__init__(uistream, broker if broker["BACKEND"] == "redis" else None, tag)
        self.env["UISTREAM_DEMO_EXECUTOR"] = "tasks"
        self.env.pop("UISTREAM_TEST_CELERY_PREFIX", None)
        self.backend = backend
        self.queue = f"uistream-test-{tag}"
        if backend == "rq":
            # A TASKS backend "rq" with a queue of this test's own, which the
            # runner names (tests/tasks_runners.py, tests/server_settings.py).
            self.env["UISTREAM_TEST_RQ_QUEUE"] = self.queue
            uistream = {**uistream, "EXECUTOR": "tests.tasks_runners.RQTasksRunner"}
            self.env["UISTREAM_TEST_SETTINGS"] = json.dumps(uistream)
        self.workers = 0

    def worker(self) -> Process:
        self.workers += 1
        name = f"{self.queue}-{self.workers}"
        if self.backend == "database":
            command = ["db_worker", "--no-reload", "--no-startup-delay", "--interval", "0.05", "--worker-id", name]
            ready = f"worker_id={name}"
        else:
            command = ["rqworker", self.queue, "--job-class", "django_tasks_rq.Job", "--name", name]
            ready = f"Listening on {self.queue}"
        # --skip-checks: the web processes run them; a worker's start is then
        # its imports.
        process = Process(
            [sys.executable, "-m", "django", *command, "--verbosity", "2", "--skip-checks"], self.env, self.unset
        )
        self.processes.append(process)
        process.wait_until(lambda: ready in process.output(), f"the {self.backend} worker", timeout=60)
        return process

    def kill_worker(self, worker: Process) -> None:
        """SIGKILL to the worker and every process under it, as when its
        host dies: RQ's work horse, which runs the job, is a child in a
        process group of its own, which a kill of the worker's group misses."""
        for pid in descendants(worker.proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        worker.kill(signal.SIGKILL)

    def deliver_again(self, chat_id: str) -> str:
        """Enqueue once more the task that carried the chat's last run, as
        a backend that delivers at least once may, and wait for it: what it
        returned."""
        script = DELIVER_AGAIN.format(backend=self.backend, chat_id=chat_id, queue=self.queue)
        result = subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        answer: str = json.loads(result.stdout.splitlines()[-1])
        return answer

    def close(self) -> None:
        super().close()
        if self.backend == "rq":
            import redis

            client = redis.Redis.from_url(self.env["REDIS_URL"])
            try:
                for key in client.scan_iter(match=f"rq:*{self.queue}*", count=1000):
                    if client.type(key) == b"zset":
                        for job_id in client.zrange(key, 0, -1):
                            client.delete(b"rq:job:" + job_id, b"rq:results:" + job_id)
                    client.delete(key)
            finally:
                client.close()


def descendants(pid: int) -> list[int]:
    """The processes under ``pid`` (children, theirs…), from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


#: Run in a process of the stack's settings (``deliver_again``).
DELIVER_AGAIN = """
import json, time
import django
django.setup()
from uistream_app.lifecycle.tasks_executor import execute_run_task

def carried(kwargs):
    return kwargs["payload"]["chat_id"] == {chat_id!r}

if {backend!r} == "database":
    from django_tasks_db.models import DBTaskResult
    rows = DBTaskResult.objects.order_by("-enqueued_at")
    kwargs = next(row.args_kwargs["kwargs"] for row in rows if carried(row.args_kwargs["kwargs"]))
    task = execute_run_task
else:
    import django_rq
    from rq.registry import FinishedJobRegistry, StartedJobRegistry
    queue = django_rq.get_queue({queue!r})
    ids = [*StartedJobRegistry(queue=queue).get_job_ids(), *FinishedJobRegistry(queue=queue).get_job_ids()]
    kwargs = next(job.kwargs for job in map(queue.fetch_job, ids) if job is not None and carried(job.kwargs))
    task = execute_run_task.using(backend="rq", queue_name={queue!r})
result = task.enqueue(**kwargs)
while result.status not in ("SUCCESSFUL", "FAILED"):
    time.sleep(0.05)
    result.refresh()
print(json.dumps(result.return_value if result.status == "SUCCESSFUL" else result.status))
"""


@pytest.fixture(params=["redis"])
def broker_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The live broker the web processes relay the worker's stream through."""
    config: dict[str, Any] = request.getfixturevalue(f"{request.param}_config")
    return config


def make_stack(broker_config: dict[str, Any], backend: str) -> TasksStack:
    require("django_tasks_db", "django-tasks-db (pip install 'django-uistream[tasks]')")
    if backend == "rq":
        require("django_tasks_rq", "django-tasks-rq")
    uistream = {
        "ALLOW_ANONYMOUS": True,
        "MODEL": "demo_project.demo_model.make_model",
        "TOOLS": ["demo_project.demo_model.get_weather", "demo_project.demo_model.calculate"],
        "BROKER": broker_config,
        "EXECUTOR": "tasks",
        "ON_DISCONNECT": "finish",
        "LOG_WRITER": "thread",
    }
    tag = broker_config.get("PREFIX", uuid.uuid4().hex[:12]).rsplit(":", 1)[-1]
    return TasksStack(uistream, broker_config, tag, backend)


@pytest.fixture(params=BACKENDS)
def stack(request: pytest.FixtureRequest, broker_config: dict[str, Any]) -> Iterator[TasksStack]:
    stack = make_stack(broker_config, request.param)
    try:
        yield stack
    finally:
        stack.close()


@pytest.fixture
def database_stack(broker_config: dict[str, Any]) -> Iterator[TasksStack]:
    stack = make_stack(broker_config, "database")
    try:
        yield stack
    finally:
        stack.close()


def task_rows(chat_id: str) -> list[dict[str, Any]]:
    """The database backend's rows of the tasks that carried this chat's runs, oldest first."""
    from django_tasks_db.models import DBTaskResult

    rows = DBTaskResult.objects.order_by("enqueued_at").values("status", "return_value", "args_kwargs", "task_path")
    return [row for row in rows if row["args_kwargs"]["kwargs"]["payload"]["chat_id"] == chat_id]


def test_a_post_gets_its_headers_at_once_and_the_worker_answers_through_the_web_process(stack: TasksStack) -> None:
    def queued() -> None:
        if stack.backend == "database":
            (row,) = task_rows("waiting")
            assert row["status"] == "READY"
            assert row["task_path"] == "uistream_app.lifecycle.tasks_executor.execute_run_task"

    answers_once_a_worker_starts(stack, queued)
    assert run_status("waiting") == ["completed"]
    if stack.backend == "database":
        wait_for(lambda: task_rows("waiting")[0]["status"] == "SUCCESSFUL", "the task to finish")
        assert task_rows("waiting")[0]["return_value"] == "executed"


def test_the_real_client_chats_through_a_worker_as_in_process(node: str, database_stack: TasksStack) -> None:
    chats_through_a_worker_as_in_process(node, database_stack)
    # One task per turn, each executed once.
    wait_for(lambda: {row["status"] for row in task_rows("on-worker")} == {"SUCCESSFUL"}, "the tasks to finish")
    assert [row["return_value"] for row in task_rows("on-worker")] == ["executed", "executed"]


def test_a_stop_through_another_web_process_stops_the_worker_run(stack: TasksStack) -> None:
    web, _ = stack.web()
    other, _ = stack.web()
    stack.worker()
    browser = Browser(web)
    stop_stops_the_worker_run(browser, lambda: visitor(browser, other))


def test_killing_the_worker_settles_the_run_interrupted(stack: TasksStack) -> None:
    def still_running() -> None:
        if stack.backend == "database":
            # The backend keeps the dead worker's task as running: it never
            # delivers it again by itself.
            assert [row["status"] for row in task_rows("orphan")] == ["RUNNING"]

    killed_worker_run_settled(stack, still_running)


def test_a_task_delivered_twice_runs_once(stack: TasksStack) -> None:
    stack.env["UISTREAM_DEMO_DELAY_MS"] = "20"
    web, _ = stack.web()
    stack.worker()
    stack.worker()
    browser = Browser(web)
    with browser.stream("twice", "count to 100") as response:
        seen, _ = read_chunks(response, stop=lambda cs: len(text_of(cs).split()) >= 3)
        # The same task again while its run streams: the other worker
        # finds the run adopted and does nothing.
        assert stack.deliver_again("twice") == "not-active"
        rest, done = read_chunks(response)
    assert done
    assert text_of(seen + rest).split() == [str(n) for n in range(1, 101)]
    wait_for(lambda: settled("twice"), "the run to be stored")
    assert run_status("twice") == ["completed"]
    assert answer_text(stored_messages("twice")[-1]).split() == [str(n) for n in range(1, 101)]
    # Nor does a task whose run ended before it was delivered.
    assert stack.deliver_again("twice") == "not-active"
    assert run_status("twice") == ["completed"]
    if stack.backend == "database":
        rows = task_rows("twice")
        assert [row["return_value"] for row in rows] == ["executed", "not-active", "not-active"]


@pytest.fixture
def postgres_stack() -> Iterator[TasksStack]:
    """The database backend on PostgreSQL alone: the PostgreSQL broker on
    the test database (``BROKER = {"BACKEND": "postgres"}``), no Redis
    anywhere (``REDIS_URL`` is not in the processes' environment), and
    leases short enough (as in test_leases) for a dead worker's run to be
    found within seconds."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("the PostgreSQL broker needs the suite on PostgreSQL (DATABASE_URL=postgres://…)")
    stack = make_stack({"BACKEND": "postgres"}, "database")
    settings = {**json.loads(stack.env["UISTREAM_TEST_SETTINGS"]), "HEARTBEAT_SECONDS": 0.5, "LEASE_SECONDS": 2}
    stack.env["UISTREAM_TEST_SETTINGS"] = json.dumps(settings)
    stack.env["UISTREAM_DEMO_DELAY_MS"] = "10"
    stack.unset.add("REDIS_URL")
    try:
        yield stack
    finally:
        stack.close()


@pytest.mark.node
def test_on_postgresql_alone_a_chat_on_one_web_process_is_resumed_stopped_and_guarded_on_the_other(
    node: str, postgres_stack: TasksStack
) -> None:
    """Issue 33's done-when: two web processes (daphne, uvicorn) and a
    ``db_worker`` on PostgreSQL alone."""
    stack = postgres_stack
    first, _ = stack.web()
    second, _ = stack.web(server="uvicorn")
    worker = stack.worker()
    # Nothing can fall back on Redis: no process has a URL of it.
    for process in stack.processes:
        environ = process.environ()
        assert "REDIS_URL" not in environ
        assert not [name for name, value in environ.items() if "redis://" in value]
    browser = Browser(first)

    # A chat started on the first process: the second refuses a second
    # turn while it runs, and the real ai@7 client resumes it there.
    with browser.stream("pg-resumed", "count to 1000") as original:
        head, _ = read_chunks(original, stop=lambda cs: len(text_of(cs).split()) >= 5)
        # The same visitor on the second process (the session the POST made).
        other = visitor(browser, second)
        refused = other.post("/api/chat", json=browser.chat_body("pg-resumed", "and again", message_id="u2"))
        assert refused.status_code == 409
        assert refused.json()["error"]["code"] == "run_active"
        resumed = run_client(node, second, browser, chatId="pg-resumed", version=7, steps=[{"resume": True}])
        tail, done = read_chunks(original)
    assert done
    assert resumed["error"] is None
    assert resumed["status"] == "ready"
    wait_for(lambda: settled("pg-resumed"), "the run to be stored")
    assert run_status("pg-resumed") == ["completed"]
    (shown,) = resumed["messages"]
    # The resumer's answer is the stored one, whole: every number once, in
    # order, as the first process sent them.
    assert shown == stored_messages("pg-resumed")[-1]
    assert answer_text(shown).split() == [str(n) for n in range(1, 1001)]
    assert text_of(head + tail) == answer_text(shown)

    # A stop through the second process stops the worker's run.
    stop_stops_the_worker_run(browser, lambda: other)

    # A worker killed mid-run: the first process's stream and a resumer on
    # the second end in-band, the run is settled interrupted with what was
    # sent, and the backend keeps the dead worker's task as running.
    with browser.stream("orphan", "count to 1000") as response:
        seen, _ = read_chunks(response, stop=lambda cs: len(text_of(cs).split()) >= 10)
        with other.stream("GET", "/api/chat/orphan/stream") as follower:
            assert follower.status_code == 200
            followed, _ = read_chunks(follower, stop=lambda cs: len(text_of(cs).split()) >= 10)
            stack.kill_worker(worker)
            rest, done = read_chunks(response)
            followed_rest, followed_done = read_chunks(follower)
    assert done
    assert followed_done
    assert rest[-1]["type"] in ("error", "abort")
    assert followed_rest[-1] == rest[-1]
    wait_for(lambda: settled("orphan"), "the run to be settled", timeout=15)
    assert run_status("orphan") == ["interrupted"]
    said = text_of(seen + rest).split()
    assert 10 <= len(said) < 1000
    assert answer_text(stored_messages("orphan")[-1]).split() == said
    assert text_of(followed + followed_rest).split() == said
    assert [row["status"] for row in task_rows("orphan")] == ["RUNNING"]

    # A new worker runs a new turn, posted to the second process.
    stack.worker()
    with other.stream("POST", "/api/chat", json=browser.chat_body("orphan", "count to 2", message_id="u2")) as answer:
        assert answer.status_code == 200
        chunks, done = read_chunks(answer)
    assert done
    assert text_of(chunks).split() == ["1", "2"]
    wait_for(lambda: settled("orphan"), "the second run to be stored")
    assert run_status("orphan") == ["interrupted", "completed"]
