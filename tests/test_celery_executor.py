"""Runs on a Celery worker (``UISTREAM["EXECUTOR"] = "celery"``), through
real processes: daphne web servers and a ``celery -A demo_project worker``
in subprocesses, the same SQLite database file and Redis (a key prefix of
the test's own for both the chunk broker and Celery's queues).

Judged by what a client receives (the real ai@7 client where one is
involved), the stored run and message, and a new turn on the same chat.
Skipped without Redis or Celery, except in CI where that is a failure.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from uistream_app.models import Run
from uistream_app.protocol.sse import KEEPALIVE_FRAME

from .conftest import in_ci
from .live.conftest import redis_config  # noqa: F401  (fixture)
from .server import ROOT, SERVER_COMMANDS, free_port, shared_database_url
from .test_approvals import EMAIL
from .test_chat_http import Browser, read_chunks, text_of, wait_for
from .test_chat_real_client import run_client, stored_messages

pytestmark = pytest.mark.django_db(transaction=True)

DELAY_MS = "5"


def require_celery() -> None:
    try:
        import celery  # noqa: F401
    except ImportError:
        message = "Celery is not installed (pip install 'django-uistream[celery]')"
        if in_ci():
            pytest.fail(f"{message} (CI=true: the Celery tests must run)")
        pytest.skip(message)


class Process:
    """A server or worker subprocess, its output in a file (read on failure)."""

    def __init__(self, args: list[str], env: dict[str, str], unset: Iterable[str] = ()) -> None:
        """``args`` with this process's environment, ``env`` added and the
        variables ``unset`` removed."""
        self.log = tempfile.NamedTemporaryFile(prefix="uistream-celery-test-", suffix=".log", delete=False)  # noqa: SIM115
        environ = {name: value for name, value in {**os.environ, **env}.items() if name not in set(unset)}
        # A session of its own: a kill reaches a worker's pool processes too.
        self.proc = subprocess.Popen(
            args, cwd=ROOT, env=environ, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def environ(self) -> dict[str, str]:
        """The environment the process runs with, as the kernel has it."""
        raw = Path(f"/proc/{self.proc.pid}/environ").read_bytes()
        return dict(item.decode().partition("=")[::2] for item in raw.split(b"\0") if item)

    def output(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def wait_until(self, ready: Any, what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start: {self.output()[-3000:]}")
            time.sleep(0.05)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        self.kill(signal.SIGTERM)
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)


class Stack:
    """The processes of one test: web servers and workers sharing settings."""

    def __init__(self, uistream: dict[str, Any], redis: dict[str, Any] | None, tag: str) -> None:
        """``redis``: the Redis broker's setting, whose URL and prefix
        Celery's queues share; None for a stack without Redis."""
        self.env: dict[str, str] = {
            "DJANGO_SETTINGS_MODULE": "tests.server_settings",
            "DATABASE_URL": shared_database_url(),
            "UISTREAM_TEST_SETTINGS": json.dumps(uistream),
            "UISTREAM_DEMO_DELAY_MS": DELAY_MS,
            "UISTREAM_DEMO_EXECUTOR": "celery",
        }
        if redis is not None:
            self.env["REDIS_URL"] = redis["URL"]
            self.env["UISTREAM_TEST_CELERY_PREFIX"] = f"{redis['PREFIX']}:celery:"
        #: Variables of the test's environment the processes do not get.
        self.unset: set[str] = set()
        self.tag = tag
        self.processes: list[Process] = []

    def web(
        self,
        env_overrides: dict[str, str] | None = None,
        app: str = "demo_project.asgi:application",
        server: str = "daphne",
        **settings: Any,
    ) -> tuple[str, Process]:
        """A web server (``server``: daphne or uvicorn) of ``app``
        (``settings`` replace keys of its UISTREAM)."""
        env = {**self.env, **(env_overrides or {})}
        if settings:
            env["UISTREAM_TEST_SETTINGS"] = json.dumps({**json.loads(env["UISTREAM_TEST_SETTINGS"]), **settings})
        port = free_port()
        *command, _ = (arg.format(port=port) for arg in SERVER_COMMANDS[server])
        process = Process([sys.executable, *command, app], env, self.unset)
        self.processes.append(process)

        def listening() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return True
            except OSError:
                return False

        process.wait_until(listening, server)
        return f"http://127.0.0.1:{port}", process

    def worker(self) -> Process:
        process = Process(
            [
                *(sys.executable, "-m", "celery", "-A", "demo_project", "worker", "--loglevel=info"),
                *("-c", "2", "--without-gossip", "--without-mingle", "-n", f"uistream-test-{self.tag}@%h"),
            ],
            self.env,
        )
        self.processes.append(process)
        process.wait_until(lambda: " ready." in process.output(), "the Celery worker", timeout=60)
        return process

    def kill_worker(self, worker: Process) -> None:
        """SIGKILL to the worker and its pool, as when its host dies."""
        worker.kill(signal.SIGKILL)

    def close(self) -> None:
        for process in self.processes:
            process.close()


@pytest.fixture
def stack(redis_config: dict[str, Any]) -> Iterator[Stack]:
    require_celery()
    uistream = {
        "ALLOW_ANONYMOUS": True,
        "MODEL": "demo_project.demo_model.make_model",
        "TOOLS": [
            "demo_project.demo_model.get_weather",
            "demo_project.demo_model.calculate",
            "demo_project.demo_model.send_email",
        ],
        "BROKER": redis_config,
        "EXECUTOR": "celery",
        "ON_DISCONNECT": "finish",
        "LOG_WRITER": "thread",
    }
    stack = Stack(uistream, redis_config, redis_config["PREFIX"].rsplit(":", 1)[-1])
    try:
        yield stack
    finally:
        stack.close()


def visitor(browser: Browser, base: str) -> httpx.Client:
    """A client for ``base`` with ``browser``'s session and CSRF cookie."""
    cookie = "; ".join(f"{name}={value}" for name, value in browser.client.cookies.items())
    return httpx.Client(base_url=base, headers={"Cookie": cookie, "X-CSRFToken": browser.token}, timeout=30)


def answer_text(message: dict[str, Any]) -> str:
    return "".join(p["text"] for p in message["parts"] if p["type"] == "text")


def run_status(chat_id: str) -> list[str]:
    return list(
        Run.objects.filter(conversation__client_id=chat_id).order_by("started_at").values_list("status", flat=True)
    )


def settled(chat_id: str) -> bool:
    statuses = run_status(chat_id)
    return bool(statuses) and "running" not in statuses


_SERVER_IDS = re.compile(rb'"(msg_|apv_)[A-Za-z0-9_-]+"')


def without_server_ids(data: bytes) -> bytes:
    """A stream with the ids the server makes up at random replaced."""
    return _SERVER_IDS.sub(rb'"\1-"', data)


def test_the_real_client_chats_through_a_worker_as_in_process(node: str, stack: Stack) -> None:
    chats_through_a_worker_as_in_process(node, stack)


def chats_through_a_worker_as_in_process(node: str, stack: Stack) -> None:
    """Two turns of the real ai@7 client through a worker (the chat
    ``on-worker``) build what they build in-process, and are stored so."""
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
    weather = [p for p in stored[1]["parts"] if p["type"] == "tool-get_weather"]
    assert weather
    assert weather[0]["state"] == "output-available"

    # The same turns in-process build the same messages, but for the
    # message ids (the client's and the server's are made up at random).
    def shape(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**m, "id": "-"} for m in messages]

    assert shape(stored) == shape(stored_messages("in-process"))
    assert shape(on_worker["messages"]) == shape(here["messages"])


def test_a_worker_stream_is_the_in_process_stream(stack: Stack) -> None:
    worker_web, _ = stack.web()
    stack.worker()
    inprocess_web, _ = stack.web(EXECUTOR="inprocess")
    bodies = []
    for base, chat_id in ((worker_web, "bytes-worker"), (inprocess_web, "bytes-here")):
        browser = Browser(base)
        with browser.stream(chat_id, "What's the weather in Paris?") as response:
            assert response.status_code == 200
            assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
            bodies.append(response.read())
    on_worker, here = bodies
    # A run that waits for a worker starts with one keep-alive comment;
    # the rest is the in-process stream, but for the random ids.
    assert on_worker.startswith(KEEPALIVE_FRAME)
    assert without_server_ids(on_worker[len(KEEPALIVE_FRAME) :]) == without_server_ids(here)
    assert here.endswith(b"data: [DONE]\n\n")


def test_a_post_gets_its_headers_while_no_worker_runs_yet(stack: Stack) -> None:
    answers_once_a_worker_starts(stack)


def answers_once_a_worker_starts(stack: Stack, while_waiting: Callable[[], None] | None = None) -> None:
    """A POST while no worker runs gets its headers at once; the answer
    comes through the web process once a worker starts (the chat
    ``waiting``). ``while_waiting`` looks at the queued task."""
    web, _ = stack.web()
    browser = Browser(web)
    with browser.stream("waiting", "count to 5") as response:
        # No worker is running: the run waits in the queue, and the
        # response is already open.
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert Run.objects.get(conversation__client_id="waiting").status == "running"
        if while_waiting is not None:
            while_waiting()
        stack.worker()
        chunks, done = read_chunks(response)
    assert done
    assert text_of(chunks).split() == ["1", "2", "3", "4", "5"]
    assert chunks[-1]["type"] == "finish"
    wait_for(lambda: settled("waiting"), "the run to be stored")
    assert run_status("waiting") == ["completed"]


def test_killing_the_web_process_does_not_stop_the_run(stack: Stack) -> None:
    # Slow enough (400 deltas 30 ms apart) to outlast a restart.
    stack.env["UISTREAM_DEMO_DELAY_MS"] = "30"
    first, first_process = stack.web()
    stack.worker()
    browser = Browser(first)
    with browser.stream("outlives", "count to 400") as response:
        seen, done = read_chunks(response, stop=lambda cs: len(text_of(cs).split()) >= 20)
        assert not done
        first_process.kill(signal.SIGKILL)
    # The run goes on on the worker; a restarted web process resumes it.
    second, _ = stack.web()
    client = visitor(browser, second)
    with client.stream("GET", "/api/chat/outlives/stream") as resumed:
        assert resumed.status_code == 200  # 204 if no run were active
        replayed, done = read_chunks(resumed)
    assert done
    assert replayed[: len(seen)] == seen  # the replay starts where the first client started
    assert text_of(replayed).split() == [str(n) for n in range(1, 401)]
    assert replayed[-1]["type"] == "finish"
    wait_for(lambda: settled("outlives"), "the run to be stored")
    assert run_status("outlives") == ["completed"]
    stored = stored_messages("outlives")
    assert answer_text(stored[-1]).split() == [str(n) for n in range(1, 401)]

    # A new turn on the same chat.
    body = browser.chat_body("outlives", "count to 3", message_id="u2")
    answer = client.post("/api/chat", json=body)
    assert answer.status_code == 200
    assert b'"delta":"3"' in answer.content.replace(b" ", b"")
    wait_for(lambda: settled("outlives"), "the second run to be stored")
    assert run_status("outlives") == ["completed", "completed"]


def test_stop_through_the_web_process_stops_the_worker_run(stack: Stack) -> None:
    web, _ = stack.web()
    stack.worker()
    browser = Browser(web)
    stop_stops_the_worker_run(browser, lambda: browser.client)

    answer = browser.post("/api/chat", browser.chat_body("stopped", "count to 2", message_id="u2"))
    assert answer.status_code == 200
    wait_for(lambda: settled("stopped"), "the second run to be stored")
    assert run_status("stopped") == ["stopped", "completed"]


def stop_stops_the_worker_run(browser: Browser, stopper: Callable[[], httpx.Client]) -> None:
    """A stop sent through the client ``stopper`` makes once the chat has
    begun (the same web process or another, with the browser's session,
    which the chat's POST made) while a worker streams the chat
    ``stopped``: the stream ends ``abort``, the run is stored ``stopped``
    with what was sent."""
    with browser.stream("stopped", "count to 400") as response:
        received, _ = read_chunks(response, stop=lambda cs: len(text_of(cs).split()) >= 5)
        answer = stopper().post("/api/chat/stopped/stop", headers={"X-CSRFToken": browser.token})
        assert answer.json() == {"stopped": True}
        rest, done = read_chunks(response)
    assert done
    assert rest[-1] == {"type": "abort", "reason": "stopped"}
    wait_for(lambda: settled("stopped"), "the run to be stored")
    assert run_status("stopped") == ["stopped"]
    said = text_of(received + rest).split()
    assert 5 <= len(said) < 400
    assert answer_text(stored_messages("stopped")[-1]).split() == said


def test_killing_the_worker_settles_the_run_interrupted(stack: Stack) -> None:
    from uistream_app.conf import DEFAULTS

    if "LEASE_SECONDS" not in DEFAULTS:
        pytest.skip("needs the leases and the sweeper (issue 15, part A), not on this branch yet")
    killed_worker_run_settled(stack)


def killed_worker_run_settled(stack: Stack, after: Callable[[], None] | None = None) -> None:
    """A worker killed mid-run (the chat ``orphan``): the client gets a
    terminal chunk, the sweeper stores the run ``interrupted`` with what
    was sent, and a new turn runs on a new worker. ``after`` looks at the
    dead worker's task once the run is settled."""
    stack.env["UISTREAM_DEMO_DELAY_MS"] = "30"
    # Short leases, as in test_leases: the web process's sweeper finds the
    # dead worker's run within seconds rather than the default 20.
    settings = {**json.loads(stack.env["UISTREAM_TEST_SETTINGS"]), "HEARTBEAT_SECONDS": 0.5, "LEASE_SECONDS": 2}
    stack.env["UISTREAM_TEST_SETTINGS"] = json.dumps(settings)
    lease = float(settings["LEASE_SECONDS"])
    web, _ = stack.web()
    worker = stack.worker()
    browser = Browser(web)
    with browser.stream("orphan", "count to 400") as response:
        seen, done = read_chunks(response, stop=lambda cs: len(text_of(cs).split()) >= 10)
        assert not done
        stack.kill_worker(worker)
        rest, done = read_chunks(response)
    # The client is not left hanging: a terminal chunk, then [DONE].
    assert done
    assert rest[-1]["type"] in ("error", "abort")
    wait_for(lambda: settled("orphan"), "the run to be settled", timeout=lease + 15)
    assert run_status("orphan") == ["interrupted"]
    said = text_of(seen + rest).split()
    assert answer_text(stored_messages("orphan")[-1]).split() == said
    if after is not None:
        after()

    # A new worker; the task the dead one held is not run again, a new turn is.
    stack.worker()
    answer = browser.post("/api/chat", browser.chat_body("orphan", "count to 2", message_id="u2"))
    assert answer.status_code == 200
    wait_for(lambda: settled("orphan"), "the second run to be stored")
    assert run_status("orphan") == ["interrupted", "completed"]


def test_an_agui_run_through_a_worker_is_the_in_process_run(stack: Stack) -> None:
    worker_web, _ = stack.web()
    stack.worker()
    inprocess_web, _ = stack.web(EXECUTOR="inprocess")
    streams = []
    for base, thread in ((worker_web, "agui-worker"), (inprocess_web, "agui-here")):
        browser = Browser(base)
        body = {
            "threadId": thread,
            "runId": "r1",
            "messages": [{"id": "u1", "role": "user", "content": "What's the weather in Paris?"}],
        }
        response = browser.client.post(
            "/api/agui", json=body, headers={"X-CSRFToken": browser.token, "Accept": "text/event-stream"}
        )
        assert response.status_code == 200
        events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
        for event in events:
            event.pop("timestamp", None)
            event.pop("metadata", None)  # names the stored run
            event.pop("threadId", None)
        streams.append(json.loads(without_server_ids(json.dumps(events).encode())))
    on_worker, here = streams
    assert on_worker == here
    assert on_worker[-1]["type"] == "RUN_FINISHED"
    assert [e["type"] for e in on_worker].count("TOOL_CALL_START") == 1
    # The demo's shared state ({"turns": N}) goes through the worker too, and is stored there.
    assert [e["type"] for e in on_worker if e["type"].startswith("STATE_")] == ["STATE_SNAPSHOT", "STATE_DELTA"]
    wait_for(lambda: settled("agui-worker"), "the run to be stored")
    assert run_status("agui-worker") == ["completed"]
    assert Run.objects.get(conversation__client_id="agui-worker").state == {"turns": 1}


def test_a_run_that_cannot_be_enqueued_fails_in_band(stack: Stack) -> None:
    # Celery's broker is unreachable (the chunk broker is not).
    web, _ = stack.web({"REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"})
    browser = Browser(web)
    with browser.stream("unqueued", "count to 3") as response:
        assert response.status_code == 200
        chunks, done = read_chunks(response)
    assert done
    assert chunks[-1] == {"type": "error", "errorText": "An error occurred."}
    wait_for(lambda: settled("unqueued"), "the run to be stored")
    assert run_status("unqueued") == ["failed"]
    assert Run.objects.get(conversation__client_id="unqueued").error_detail


@pytest.mark.parametrize("approved", [True, False])
def test_an_approval_crosses_to_the_worker(node: str, stack: Stack, approved: bool) -> None:
    web, _ = stack.web()
    stack.worker()
    browser = Browser(web)
    steps = [{"send": EMAIL}, {"approve": approved}]
    out = run_client(node, web, browser, chatId="approval", version=7, steps=steps)
    assert out["error"] is None
    wait_for(lambda: settled("approval"), "the runs to be stored")
    assert run_status("approval") == ["completed", "completed"]
    messages = stored_messages("approval")
    assert out["messages"] == messages
    assert [m["role"] for m in messages] == ["user", "assistant"]  # the same message went on
    (part,) = [p for p in messages[1]["parts"] if p["type"] == "tool-send_email"]
    assert part["state"] == ("output-available" if approved else "output-denied")
    continued = Run.objects.get(conversation__client_id="approval", trigger="continue")
    assert continued.decisions[0]["approved"] is approved
