"""Runs outlive their process: servers killed for real (SIGKILL) mid-answer.

Every server here is a process of its own (daphne or uvicorn) on the test
database (a file) with small ``HEARTBEAT_SECONDS`` / ``LEASE_SECONDS``. A
run whose process was killed is settled ``interrupted`` by whichever
process finds it: a restarted server (its sweep, or a new turn in the same
chat), the other server of a pair sharing a broker of many processes,
Redis or PostgreSQL (its sweep, or a stop). Judged by
what the clients received, the stored run and message, and a new turn.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import psycopg
import pytest
from django.db import connection, connections
from django.utils import timezone

from uistream_app.conf import DEFAULTS
from uistream_app.lifecycle.leases import renew_leases
from uistream_app.models import Message, Run
from uistream_app.recording import read_log

from .conftest import JS_DIR
from .db import make_turn
from .live.conftest import redis_config  # noqa: F401  (fixture)
from .server import demo_server, shared_database_url
from .test_chat_http import Browser, read_chunks, text_of, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

HEARTBEAT = 0.5
LEASE = 2.0
DELAY_MS = 20
ERROR_TEXT = DEFAULTS["ERROR_TEXT"]


def settings_env(broker: dict[str, Any] | None = None) -> dict[str, str]:
    uistream = {
        "ALLOW_ANONYMOUS": True,
        "MODEL": "demo_project.demo_model.make_model",
        "HEARTBEAT_SECONDS": HEARTBEAT,
        "LEASE_SECONDS": LEASE,
        "BROKER": broker or {"BACKEND": "memory"},
    }
    return {
        "DJANGO_SETTINGS_MODULE": "tests.server_settings",
        "DATABASE_URL": shared_database_url(),
        "UISTREAM_TEST_SETTINGS": json.dumps(uistream),
        "UISTREAM_DEMO_DELAY_MS": str(DELAY_MS),
    }


@contextmanager
def server_process(env: dict[str, str], kind: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A ``kind`` server in its own process (``demo_server``); its URL and
    the process (to kill)."""
    with demo_server(kind, env) as server:
        yield server.url, server.proc


def kill(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def same_visitor(browser: Browser, base: str) -> Browser:
    """``browser``'s session (stored in the shared database) on another server."""
    other = Browser.__new__(Browser)
    cookie = "; ".join(f"{name}={value}" for name, value in browser.client.cookies.items())
    other.client = httpx.Client(base_url=base, headers={"Cookie": cookie}, timeout=30)
    other.token = browser.token
    return other


def read_until_gone(response: httpx.Response) -> tuple[list[dict[str, Any]], bool]:
    """What is left of a stream whose server died: chunks until the
    connection broke (or ``[DONE]``)."""
    chunks: list[dict[str, Any]] = []
    try:
        while True:  # one chunk a call: what was read before the break is kept
            got, done = read_chunks(response, stop=lambda _: True)
            chunks += got
            if done or not got:
                return chunks, done
    except httpx.HTTPError:
        return chunks, False


def numbers(text: str) -> list[str]:
    return text.split()


def stored_text(message_id: str) -> str:
    parts = Message.objects.get(pk=message_id).parts
    return "".join(p["text"] for p in parts if p["type"] == "text")


def logged_text(run: Run) -> str:
    return text_of([e.chunk for e in read_log(run)])


def lease_expired(run: Run) -> bool:
    run.refresh_from_db()
    assert run.heartbeat_at is not None
    return (timezone.now() - run.heartbeat_at).total_seconds() > LEASE


def new_turn_works(browser: Browser, chat_id: str) -> None:
    with browser.stream(chat_id, "count to 3", message_id="u2") as response:
        assert response.status_code == 200, response.read()
        chunks, done = read_chunks(response)
    assert done
    assert numbers(text_of(chunks)) == ["1", "2", "3"]
    wait_for(lambda: Run.objects.filter(conversation__client_id=chat_id, status="completed").exists(), "the new run")


@pytest.mark.parametrize("kind", ["daphne", "uvicorn"])
def test_a_killed_servers_run_is_settled_by_the_next_server(kind: str) -> None:
    env = settings_env()
    with server_process(env, kind) as (url, proc):
        browser = Browser(url)
        with browser.stream("chat-k1", "count to 300") as response:
            received, _ = read_chunks(response, stop=lambda cs: len(numbers(text_of(cs))) >= 30)
            kill(proc)
            rest, done = read_until_gone(response)
    assert not done
    received_text = text_of(received + rest)
    run = Run.objects.get(conversation__client_id="chat-k1")
    assert run.status == "running"
    wait_for(lambda: lease_expired(run), "the killed run's lease to run out", timeout=LEASE + 10)

    with server_process(env, kind) as (url, _):
        again = same_visitor(browser, url)
        # The restarted server's first request is a new turn in that chat:
        # the orphan is settled first, not left running beside it.
        new_turn_works(again, "chat-k1")

    run.refresh_from_db()
    assert run.status == "interrupted"
    assert run.finished_at is not None
    log = [e.chunk for e in read_log(run)]
    assert log[-1] == {"type": "error", "errorText": ERROR_TEXT}
    assert Run.objects.filter(conversation__client_id="chat-k1", status="running").count() == 0
    # The message holds what the log holds, which is what the client got
    # but for at most FLUSH_EVERY_MS of deltas (the in-process broker died
    # with the process: nothing else holds what was not flushed).
    stored = stored_text(str(run.message_id))
    assert stored == logged_text(run)
    assert received_text.startswith(stored)
    missing = len(numbers(received_text)) - len(numbers(stored))
    assert 0 <= missing <= DEFAULTS["FLUSH_EVERY_MS"] // DELAY_MS + 2


def test_a_run_longer_than_its_lease_lives_while_its_process_renews_it() -> None:
    env = settings_env()
    with server_process(env, "uvicorn") as (url, _), server_process(env, "daphne") as (other, _):
        browser = Browser(url)
        same_visitor(browser, other).client.get("/api/csrf")  # the other process sweeps from now on
        with browser.stream("chat-k5", "count to 300") as response:  # 6 s: three leases
            chunks, done = read_chunks(response)
    assert done
    assert chunks[-1]["type"] == "finish"
    assert numbers(text_of(chunks)) == [str(n) for n in range(1, 301)]
    wait_for(lambda: not Run.objects.filter(status="running").exists(), "the run to be stored")
    run = Run.objects.get(conversation__client_id="chat-k5")
    assert run.status == "completed"
    assert [e.chunk for e in read_log(run)] == chunks  # and no sweeper's error chunk in it


@pytest.fixture(params=["redis", "postgres"])
def redis_pair(request: pytest.FixtureRequest) -> Iterator[tuple[str, subprocess.Popen[bytes], str]]:
    """Two servers sharing the database and a broker of many processes
    (Redis; or the PostgreSQL broker, on the database alone, when the suite
    runs on PostgreSQL): the first (the one to kill) and the second."""
    if request.param == "redis":
        broker = request.getfixturevalue("redis_config")
    elif connection.vendor != "postgresql":
        pytest.skip("the PostgreSQL broker needs the suite on PostgreSQL (DATABASE_URL=postgres://…)")
    else:
        broker = {"BACKEND": "postgres"}
    env = settings_env(broker)
    with server_process(env, "uvicorn") as (first, proc), server_process(env, "daphne") as (second, _):
        yield first, proc, second


def test_a_resumer_on_another_process_ends_with_the_error_and_loses_nothing(
    redis_pair: tuple[str, subprocess.Popen[bytes], str],
) -> None:
    first, proc, second = redis_pair
    browser = Browser(first)
    with browser.stream("chat-k2", "count to 300") as original:
        read_chunks(original, stop=lambda cs: len(numbers(text_of(cs))) >= 5)
        other = same_visitor(browser, second)
        with other.client.stream("GET", "/api/chat/chat-k2/stream") as resumed:
            assert resumed.status_code == 200
            head, _ = read_chunks(resumed, stop=lambda cs: len(numbers(text_of(cs))) >= 30)
            kill(proc)
            killed_at = time.monotonic()
            tail, done = read_chunks(resumed)
            ended_after = time.monotonic() - killed_at
    received = head + tail
    assert done
    assert received[-1] == {"type": "error", "errorText": ERROR_TEXT}
    assert ended_after < LEASE + 10
    run = Run.objects.get(conversation__client_id="chat-k2")
    assert run.status == "interrupted"
    # Not one number the resumer got is missing from what is stored: completed
    # from Redis's stream, or never ahead of the log (PostgreSQL).
    assert stored_text(str(run.message_id)) == text_of(received)
    assert [e.chunk for e in read_log(run)] == received
    new_turn_works(other, "chat-k2")


def test_stop_from_another_process_settles_a_dead_run_at_once(
    redis_pair: tuple[str, subprocess.Popen[bytes], str],
) -> None:
    first, proc, second = redis_pair
    browser = Browser(first)
    with browser.stream("chat-k3", "count to 300") as original:
        read_chunks(original, stop=lambda cs: len(numbers(text_of(cs))) >= 20)
        kill(proc)
    other = same_visitor(browser, second)
    answer = other.post("/api/chat/chat-k3/stop")
    assert answer.json() == {"stopped": True}
    run = Run.objects.get(conversation__client_id="chat-k3")
    assert run.status == "interrupted"  # when stop answers, not a lease later
    assert [e.chunk for e in read_log(run)][-1] == {"type": "error", "errorText": ERROR_TEXT}
    # Nothing runs any more: a second stop stops nothing, a new message is
    # not refused (the Redis slot would otherwise hold for ACTIVE_TTL).
    assert other.post("/api/chat/chat-k3/stop").json() == {"stopped": False}
    new_turn_works(other, "chat-k3")


@pytest.mark.node
def test_the_real_client_resuming_on_another_process_ends_with_the_error_and_keeps_what_we_store(
    node: str, redis_pair: tuple[str, subprocess.Popen[bytes], str], request: pytest.FixtureRequest
) -> None:
    first, proc, second = redis_pair
    browser = Browser(first)
    with browser.stream("chat-k4", "count to 300") as original:
        read_chunks(original, stop=lambda cs: len(numbers(text_of(cs))) >= 5)
        cookie = "; ".join(f"{k}={v}" for k, v in browser.client.cookies.items())
        payload = {"base": second, "cookie": cookie, "csrf": browser.token, "chatId": "chat-k4"}
        client = subprocess.Popen(
            [node, str(JS_DIR / "chat_client.mjs"), json.dumps({**payload, "steps": [{"resume": True}]})],
            cwd=JS_DIR,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # The run goes on for a while (the client starts meanwhile), then dies.
        read_chunks(original, stop=lambda cs: len(numbers(text_of(cs))) >= 60)
        kill(proc)
    out, err = client.communicate(timeout=LEASE + 30)
    assert client.returncode == 0, err
    result = json.loads(out)
    assert result["status"] == "error"
    assert result["error"] is not None
    run = Run.objects.get(conversation__client_id="chat-k4")
    assert run.status == "interrupted"
    (shown,) = result["messages"]
    assert shown == Message.objects.get(pk=run.message_id).as_ui_message()
    logged = len(numbers(text_of([e.chunk for e in read_log(run)])))
    if request.node.callspec.params["redis_pair"] == "redis":
        assert logged >= 60  # completed from Redis's stream
    else:
        # The PostgreSQL broker holds nothing the log does not: what the dead
        # process's writer had not stored (at most FLUSH_EVERY_MS of deltas)
        # is gone, and was sent to no one but the first process's client.
        assert logged >= 60 - DEFAULTS["FLUSH_EVERY_MS"] // DELAY_MS - 2


@pytest.mark.parametrize(
    ("backend", "policy"),
    [("memory", "interrupt"), ("redis", "interrupt"), ("redis", "continue"), ("postgres", "continue")],
)
def test_a_process_paused_past_its_lease_writes_nothing_into_the_run_it_lost(
    backend: str, policy: str, request: pytest.FixtureRequest
) -> None:
    """A daphne frozen (SIGSTOP) mid-answer for longer than its lease: the
    other process settles the run (or, with ``ON_OWNER_LOST = "continue"``,
    finishes it); thawed (SIGCONT), the first process finds its lease epoch
    gone, stops the run and writes nothing into it."""
    if backend == "postgres" and connection.vendor != "postgresql":
        pytest.skip("the PostgreSQL broker needs the suite on PostgreSQL (DATABASE_URL=postgres://…)")
    brokers = {"memory": None, "postgres": {"BACKEND": "postgres"}}
    env = settings_env(request.getfixturevalue("redis_config") if backend == "redis" else brokers[backend])
    env["UISTREAM_TEST_SETTINGS"] = json.dumps({**json.loads(env["UISTREAM_TEST_SETTINGS"]), "ON_OWNER_LOST": policy})
    ended = "completed" if policy == "continue" else "interrupted"
    with demo_server("daphne", env) as paused, demo_server("uvicorn", env) as sweeper:
        browser = Browser(paused.url)
        same_visitor(browser, sweeper.url).client.get("/api/csrf")  # the other process sweeps from now on
        with browser.stream("chat-p1", "count to 300") as original:
            head, _ = read_chunks(original, stop=lambda cs: len(numbers(text_of(cs))) >= 20)
            paused.signal(signal.SIGSTOP)
            try:
                run = Run.objects.get(conversation__client_id="chat-p1")
                wait_for(lambda: Run.objects.get(pk=run.pk).status == ended, f"the run {ended}", timeout=LEASE + 20)
                settled = Run.objects.get(pk=run.pk)
                log = read_log(run)
                message = Message.objects.get(pk=run.message_id).parts
            finally:
                paused.signal(signal.SIGCONT)
            # Thawed, it learns it lost the run (a fenced write or its
            # renewal, whichever comes first) and says so once.
            wait_for(lambda: "lost its lease" in paused.output(), "the paused process to give the run up")
            tail, done = read_until_gone(original)
        chunks = [e.chunk for e in log]
        if policy == "continue":
            assert chunks[-1]["type"] == "finish"
            assert [c["type"] for c in chunks].count("reset-step") == 1
            text = "".join(p["text"] for p in message if p["type"] == "text")
            assert numbers(text) == [str(n) for n in range(1, 301)]
        else:
            assert chunks[-1] == {"type": "error", "errorText": ERROR_TEXT}
        # Nothing more was written: not a chunk, not the message, not the outcome.
        after = read_log(run)
        assert after == log
        assert [e.seq for e in after] == list(range(len(after)))
        assert sum(e.chunk["type"] in ("finish", "error", "abort") for e in after) == 1
        assert Message.objects.get(pk=run.message_id).parts == message
        stored = Run.objects.get(pk=run.pk)
        assert (stored.status, stored.finished_at, stored.chunk_count) == (ended, settled.finished_at, len(log))
        output = paused.output()
        assert output.count("lost its lease") == 1
        assert "could not store chunks" not in output
        if backend == "redis":
            # The client reading from the paused process gets what the log
            # holds and nothing else, to an end: the sweeper's (interrupt);
            # continued, its frozen reads of the stream time out once it
            # thaws, and it says so (an error) after a prefix of the log.
            received = head + tail
            assert done
            if policy == "continue":
                assert received[:-1] == chunks[: len(received) - 1]
                assert received[-1]["type"] in ("error", "finish")
            else:
                assert received == chunks
        if backend == "postgres":
            # Its client read from its memory, which ends when it lets the run
            # go: all it was sent, then an error. The log holds all of that
            # but what its writer had not stored (at most FLUSH_EVERY_MS of
            # deltas) when it froze; the continuation goes on from the log.
            received = head + tail
            assert done
            assert received[-1] == {"type": "error", "errorText": ERROR_TEXT}
            logged = chunks.index({"type": "reset-step"})
            assert received[:logged] == chunks[:logged]
            assert 0 <= len(received) - 1 - logged <= DEFAULTS["FLUSH_EVERY_MS"] // DELAY_MS + 2
        # The paused process holds nothing of the chat: a new turn there works.
        new_turn_works(browser, "chat-p1")


def test_renewing_the_leases_never_deadlocks_with_a_log_writer_that_holds_some_of_the_runs() -> None:
    """The log writer updates several runs in one transaction, in its own
    order; the renewer once took them in one UPDATE that waited for a row
    the writer held while it held another the writer wanted next:
    PostgreSQL's "deadlock detected" (seen at C = 200 on two processes).
    Here the writer holds run 2, the renewer is made to wait for it, and
    the writer then takes run 1."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks: the suite on PostgreSQL (DATABASE_URL=postgres://…)")
    first = make_turn(chat_id="chat-l1", message_id="m1", id=uuid.UUID(int=1))[0]  # first in any scan
    second = make_turn(chat_id="chat-l2", message_id="m2", id=uuid.UUID(int=2))[0]
    params = connection.get_connection_params()
    writer = psycopg.connect(**{k: v for k, v in params.items() if k in {"dbname", "host", "port", "user", "password"}})
    renewed: list[int | BaseException] = []
    before = timezone.now()

    def renew() -> None:
        try:
            renewed.append(renew_leases({str(first.pk): first.lease_epoch, str(second.pk): second.lease_epoch}))
        except Exception as exc:  # noqa: BLE001  (the deadlock is the failure shown)
            renewed.append(exc)
        finally:
            connections.close_all()

    try:
        writer.execute("UPDATE uistream_app_run SET chunk_count = 1 WHERE id = %s", [second.pk])
        renewer = threading.Thread(target=renew)
        renewer.start()

        def renewer_waits() -> bool:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND query LIKE %s",
                    ["UPDATE%heartbeat_at%"],
                )
                return bool(cursor.fetchone()[0])

        wait_for(renewer_waits, "the renewer to wait for the writer's row")
        writer.execute("UPDATE uistream_app_run SET chunk_count = 1 WHERE id = %s", [first.pk])
        writer.commit()
        renewer.join(30)
    finally:
        writer.close()
    assert renewed == [set()]  # both renewed, neither lost
    assert all(run.heartbeat_at is not None and run.heartbeat_at >= before for run in Run.objects.all())
