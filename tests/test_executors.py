"""The executor setting (``UISTREAM["EXECUTOR"]``): which runner a view
gets, its system check (E020), and the core without Celery installed."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from uistream_app.checks import check_executor
from uistream_app.lifecycle.executors import CeleryRunner, executor_class
from uistream_app.lifecycle.runner import Runner
from uistream_app.views import ChatView

from .live.conftest import redis_config  # noqa: F401  (fixture)
from .server import ROOT

REDIS = {"BACKEND": "redis", "URL": "redis://127.0.0.1:6379/0"}


class LoudRunner(Runner):
    """A project's own executor, named by dotted path."""


class ShopView(ChatView):
    pass


def tasks_runner(**options: object) -> str:
    """A ``TasksRunner`` subclass with ``options``, as a project names one
    in ``EXECUTOR``: its dotted path (a class of this module's)."""
    from uistream_app.lifecycle.tasks_executor import TasksRunner

    name = "Tasks" + "".join(f"{key}{value}" for key, value in options.items()).title().replace("_", "")
    globals()[name] = type(name, (TasksRunner,), {**options, "__module__": __name__})
    return f"{__name__}.{name}"


def test_the_default_runs_in_process() -> None:
    with override_settings(UISTREAM={}):
        runner = ShopView().get_runner()
        assert type(runner) is Runner
        assert check_executor() == []


def test_celery_names_the_view_class_for_the_worker() -> None:
    with override_settings(UISTREAM={"EXECUTOR": "celery", "BROKER": REDIS}):
        runner = ShopView().get_runner()
        assert check_executor() == []
    assert isinstance(runner, CeleryRunner)
    assert runner.hooks_class is ShopView


def test_tasks_names_the_view_class_for_the_worker_and_the_default_backend() -> None:
    pytest.importorskip("django_tasks_db")
    from uistream_app.lifecycle.tasks_executor import TasksRunner, execute_run_task

    with override_settings(UISTREAM={"EXECUTOR": "tasks", "BROKER": REDIS}):
        runner = ShopView().get_runner()
        assert check_executor() == []
    assert type(runner) is TasksRunner
    assert runner.hooks_class is ShopView
    task = runner.get_task()
    assert task.backend == "default"
    assert task.queue_name == "default"
    # What a worker imports from the queue: the task itself.
    assert task.module_path == "uistream_app.lifecycle.tasks_executor.execute_run_task"
    assert task.func is execute_run_task.func


def test_a_tasks_runner_subclass_names_its_backend_queue_and_priority() -> None:
    pytest.importorskip("django_tasks_db")
    path = tasks_runner(backend="default", queue_name="default", priority=10)
    with override_settings(UISTREAM={"EXECUTOR": path, "BROKER": REDIS}):
        runner = ShopView().get_runner()
        assert check_executor() == []
    task = runner.get_task()  # type: ignore[attr-defined]
    assert (task.backend, task.queue_name, task.priority) == ("default", "default", 10)


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"backend": "nowhere"}, "nowhere"),  # an alias settings.TASKS lacks
        ({"queue_name": "elsewhere"}, "elsewhere"),  # a queue the backend does not serve
    ],
)
def test_e020_for_a_tasks_backend_that_refuses_the_task(options: dict[str, object], problem: str) -> None:
    pytest.importorskip("django_tasks_db")
    path = tasks_runner(**options)
    with override_settings(UISTREAM={"EXECUTOR": path, "BROKER": REDIS}):
        (message,) = check_executor()
    assert message.id == "uistream_app.E020"
    assert problem in message.msg
    assert message.msg.startswith("UISTREAM['EXECUTOR'] = 'tasks' cannot enqueue its task")
    assert "settings.TASKS" in (message.hint or "")


@pytest.mark.parametrize("backend", ["ImmediateBackend", "DummyBackend"])
def test_e020_for_django_s_own_backends_which_have_no_workers(backend: str) -> None:
    pytest.importorskip("django_tasks_db")
    from importlib.util import find_spec

    api = "django.tasks" if find_spec("django.tasks") else "django_tasks"
    module = backend.removesuffix("Backend").lower()
    tasks = {"default": {"BACKEND": f"{api}.backends.{module}.{backend}"}}
    with override_settings(UISTREAM={"EXECUTOR": "tasks", "BROKER": REDIS}, TASKS=tasks):
        (message,) = check_executor()
    assert message.id == "uistream_app.E020"
    assert f"'default' is {backend}, which has no workers" in message.msg


def test_a_dotted_path_names_a_runner_class() -> None:
    with override_settings(UISTREAM={"EXECUTOR": f"{__name__}.LoudRunner"}):
        assert type(ShopView().get_runner()) is LoudRunner
        assert check_executor() == []


def test_celery_options_hold_a_task_for_one_lease() -> None:
    from uistream_app.lifecycle.executors import celery_options

    with override_settings(UISTREAM={}):
        assert celery_options()["broker_transport_options"] == {"visibility_timeout": 20.0}
    with override_settings(UISTREAM={"HEARTBEAT_SECONDS": 5, "LEASE_SECONDS": 45}):
        assert celery_options()["broker_transport_options"] == {"visibility_timeout": 45.0}


@pytest.mark.parametrize(
    "uistream",
    [
        {"EXECUTOR": "threads"},
        {"EXECUTOR": "collections.OrderedDict"},
        # The worker publishes the chunks, the web processes relay them.
        {"EXECUTOR": "celery"},
        {"EXECUTOR": "celery", "BROKER": {"BACKEND": "memory"}},
        {"EXECUTOR": "tasks"},
    ],
)
def test_e020(uistream: dict[str, object]) -> None:
    with override_settings(UISTREAM=uistream):
        messages = check_executor()
        assert [m.id for m in messages] == ["uistream_app.E020"]
        assert all(m.hint for m in messages)
        if uistream["EXECUTOR"] not in ("celery", "tasks"):
            with pytest.raises(ImproperlyConfigured, match="EXECUTOR"):
                executor_class()


def test_the_core_imports_without_celery_and_names_the_extra() -> None:
    script = """
import sys
sys.modules["celery"] = None  # as if it were not installed
import django
django.setup()
from django.test import override_settings
from django.core.exceptions import ImproperlyConfigured
import uistream_app.transport.chat_views, uistream_app.lifecycle.executors
from uistream_app.lifecycle.executors import _task
from uistream_app.checks import check_executor
with override_settings(UISTREAM={"EXECUTOR": "celery", "BROKER": {"BACKEND": "redis"}}):
    print([(m.id, m.hint) for m in check_executor()])
try:
    _task()
except ImproperlyConfigured as exc:
    print(exc)
"""
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"DJANGO_SETTINGS_MODULE": "tests.settings", "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    check_line, error_line = result.stdout.strip().splitlines()
    assert check_line == "[('uistream_app.E020', \"pip install 'django-uistream[celery]'\")]"
    assert "pip install 'django-uistream[celery]'" in error_line


@pytest.mark.asyncio
async def test_a_handed_off_run_is_adopted_once(redis_config: dict[str, object]) -> None:
    from uistream_app.live import RedisBroker, broker_from_config

    web = broker_from_config(redis_config)
    worker = broker_from_config(redis_config)
    assert isinstance(web, RedisBroker)
    assert isinstance(worker, RedisBroker)
    try:
        channel = await web.open_run("chat-1", "run-1")
        await channel.publish([{"type": "start"}])
        await channel.flush()
        await channel.hand_off()
        assert await web.active_run("chat-1") == "run-1"  # still held

        adopted = await worker.adopt_run("chat-1", "run-1")
        assert adopted is not None
        # A second delivery of the task finds it taken.
        assert await worker.adopt_run("chat-1", "run-1") is None
        assert adopted.next_seq == 1  # goes on after what was published
        await adopted.publish([{"type": "finish"}])
        # A stop through any process reaches the adopted run.
        assert await web.request_stop("chat-1") is True
        async with asyncio.timeout(10):
            await adopted.stop_requested.wait()
        await adopted.close()

        received = [chunk async for _, chunk in web.subscribe("run-1")]
        assert received == [{"type": "start"}, {"type": "finish"}]
        assert await web.active_run("chat-1") is None
        # Neither a closed run nor one never opened can be adopted.
        assert await worker.adopt_run("chat-1", "run-1") is None
        assert await worker.adopt_run("chat-2", "run-2") is None
    finally:
        await web.aclose()
        await worker.aclose()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("executor", "detail"),
    [
        # Check E020's cases: the Celery executor on the in-process broker, a
        # Tasks backend alias that settings.TASKS lacks.
        ("celery", "a broker of many processes, Redis or PostgreSQL"),
        ("tasks-nowhere", "cannot enqueue its task"),
    ],
)
def test_a_run_the_executor_cannot_take_fails_in_band(
    monkeypatch: pytest.MonkeyPatch, executor: str, detail: str
) -> None:
    from uistream_app.models import Run

    from .server import serve_demo
    from .test_chat_http import Browser, read_chunks, run_finished, wait_for

    if executor == "tasks-nowhere":
        pytest.importorskip("django_tasks_db")
        executor = tasks_runner(backend="nowhere")
    uistream = {"ALLOW_ANONYMOUS": True, "MODEL": "demo_project.demo_model.make_model", "EXECUTOR": executor}
    with override_settings(UISTREAM=uistream):
        for url in serve_demo(monkeypatch, 1):
            browser = Browser(url)
            with browser.stream("misconfigured", "count to 3") as response:
                assert response.status_code == 200
                chunks, done = read_chunks(response)
            assert done
            assert chunks[-1] == {"type": "error", "errorText": "An error occurred."}
            wait_for(run_finished, "the run to be stored")
            run = Run.objects.get()
            assert run.status == "failed"
            assert detail in run.error_detail
            # Nothing holds the chat.
            assert browser.client.get("/api/chat/misconfigured/stream").status_code == 204
