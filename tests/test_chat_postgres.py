"""Two web processes on PostgreSQL alone (``BROKER = {"BACKEND": "postgres"}``,
no Redis): a chat started on one is resumed, followed, stopped and guarded
from the other.

Both servers are processes of their own (uvicorn and daphne) on the test
database; the second follows the first's run through the chunk log. The
resumer is the real ai@7 useChat core (``tests/js/chat_client.mjs``).
Skipped unless the suite runs on PostgreSQL (``DATABASE_URL``).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from uistream_app.models import LiveRun, Message, Run
from uistream_app.recording import read_log

from .conftest import JS_DIR
from .server import demo_server, shared_database_url
from .test_celery_executor import Stack
from .test_chat_http import Browser, read_chunks, text_of, wait_for
from .test_leases import numbers, same_visitor
from .test_steering_real_client import DEMO_TOOLS, PACE, check_steered, page, run_oracle, steer_client

pytestmark = pytest.mark.django_db(transaction=True)

DELAY_MS = 10


def postgres_env() -> dict[str, str]:
    uistream = {
        "ALLOW_ANONYMOUS": True,
        "MODEL": "demo_project.demo_model.make_model",
        "BROKER": {"BACKEND": "postgres"},
    }
    return {
        "DJANGO_SETTINGS_MODULE": "tests.server_settings",
        "DATABASE_URL": shared_database_url(),
        "UISTREAM_TEST_SETTINGS": json.dumps(uistream),
        "UISTREAM_DEMO_DELAY_MS": str(DELAY_MS),
        "REDIS_URL": "",
    }


@pytest.fixture
def postgres_pair() -> Iterator[tuple[str, str]]:
    """Two servers sharing the PostgreSQL test database and nothing else."""
    if connection.vendor != "postgresql":
        pytest.skip("the PostgreSQL broker needs the suite on PostgreSQL (DATABASE_URL=postgres://…)")
    env = postgres_env()
    with demo_server("uvicorn", env) as first, demo_server("daphne", env) as second:
        yield first.url, second.url


@pytest.mark.node
def test_the_real_client_resumes_on_the_other_process_what_the_first_one_answers(
    node: str, postgres_pair: tuple[str, str]
) -> None:
    first, second = postgres_pair
    browser = Browser(first)
    # Long enough (about 10 s) for the client to start while it streams.
    with browser.stream("chat-p1", "count to 1000") as original:
        head, _ = read_chunks(original, stop=lambda cs: len(numbers(text_of(cs))) >= 5)
        cookie = "; ".join(f"{k}={v}" for k, v in browser.client.cookies.items())
        payload: dict[str, Any] = {
            "base": second,
            "cookie": cookie,
            "csrf": browser.token,
            "chatId": "chat-p1",
            "steps": [{"resume": True}],
        }
        client = subprocess.run(
            [node, str(JS_DIR / "chat_client.mjs"), json.dumps(payload)],
            cwd=JS_DIR,
            capture_output=True,
            text=True,
            timeout=60,
        )
        tail, done = read_chunks(original)
    assert done
    assert client.returncode == 0, client.stderr
    result = json.loads(client.stdout)
    assert result["status"] == "ready", result
    assert result["error"] is None
    run = Run.objects.get(conversation__client_id="chat-p1")
    wait_for(lambda: Run.objects.get(pk=run.pk).status == "completed", "the run to be stored")
    (shown,) = result["messages"]
    # What the resumer built on the other process is what the first one
    # sent and stored: every number, in order, once.
    assert shown == Message.objects.get(pk=run.message_id).as_ui_message()
    shown_text = "".join(p["text"] for p in shown["parts"] if p["type"] == "text")
    assert numbers(shown_text) == [str(n) for n in range(1, 1001)]
    assert text_of(head + tail) == shown_text
    # The chat's slot was freed on the way out.
    assert not LiveRun.objects.filter(conversation_id=run.conversation_id, open=True).exists()


def test_the_other_process_refuses_a_second_turn_stops_the_run_and_resumes_by_index(
    postgres_pair: tuple[str, str],
) -> None:
    first, second = postgres_pair
    browser = Browser(first)
    with browser.stream("chat-p2", "count to 2000") as original:
        head, _ = read_chunks(original, stop=lambda cs: len(numbers(text_of(cs))) >= 10)
        other = same_visitor(browser, second)

        # One run per chat, across processes.
        refused = other.post("/api/chat", other.chat_body("chat-p2", "and again", message_id="u2"))
        assert refused.status_code == 409
        assert refused.json()["error"]["code"] == "run_active"

        # A reconnect by index on the other process: from chunk N on, as the
        # first process numbered them.
        run = Run.objects.get(conversation__client_id="chat-p2")
        with other.client.stream("GET", f"/api/chat/{run.pk}/stream?startIndex=3") as by_index:
            assert by_index.status_code == 200
            from_three, _ = read_chunks(by_index, stop=lambda cs: len(cs) >= 20)
        assert from_three[:7] == head[3:10]

        # A stop from the other process ends the run where it runs.
        assert other.post("/api/chat/chat-p2/stop").json() == {"stopped": True}
        tail, done = read_chunks(original)
    assert done
    received = head + tail
    assert received[-1]["type"] == "abort"
    assert len(numbers(text_of(received))) < 2000
    wait_for(lambda: Run.objects.get(pk=run.pk).status == "stopped", "the run to be stored stopped")
    assert [e.chunk for e in read_log(run)] == received
    # The chat is free again, on either process.
    with other.stream("chat-p2", "count to 3", message_id="u3") as again:
        assert again.status_code == 200, again.read()
        chunks, done = read_chunks(again)
    assert done
    assert numbers(text_of(chunks)) == ["1", "2", "3"]


class ThreadedProxy:
    """``tests.live.test_postgres.Proxy`` on an event loop of its own
    thread: the broker's database, as two server processes reach it,
    taken away and given back while the test (sync) watches."""

    def __init__(self, target: tuple[str, int]) -> None:
        import asyncio
        import threading

        from .live.test_postgres import Proxy

        self.loop = asyncio.new_event_loop()
        self.proxy = Proxy(target)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def _call(self, coroutine: Any) -> Any:
        import asyncio

        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=10)

    def start(self) -> int:
        self._call(self.proxy.start())
        return self.proxy.port

    def stop(self) -> None:
        self._call(self.proxy.stop())

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


def test_the_broker_s_database_going_away_ends_a_follower_in_band_refuses_503_and_the_first_request_after_works(
    request: pytest.FixtureRequest,
) -> None:
    from urllib.parse import urlsplit, urlunsplit

    from uistream_app.models import Conversation

    from .test_redis_outage import sse_chunks

    if connection.vendor != "postgresql":
        pytest.skip("the PostgreSQL broker needs the suite on PostgreSQL (DATABASE_URL=postgres://…)")
    url = urlsplit(shared_database_url())
    proxy = ThreadedProxy((url.hostname or "127.0.0.1", url.port or 5432))
    request.addfinalizer(proxy.close)
    port = proxy.start()
    user = url.netloc.rsplit("@", 1)[0]
    broker = {
        "BACKEND": "postgres",
        "URL": urlunsplit(url._replace(netloc=f"{user}@127.0.0.1:{port}")),
        "CONNECT_TIMEOUT": 2,
        "OPERATION_TIMEOUT": 2,
    }
    env = {
        **postgres_env(),
        "UISTREAM_TEST_SETTINGS": json.dumps(
            {**json.loads(postgres_env()["UISTREAM_TEST_SETTINGS"]), "BROKER": broker}
        ),
    }
    with demo_server("uvicorn", env) as first, demo_server("daphne", env) as second:
        browser = Browser(first.url)
        with browser.stream("chat-u1", "count to 2000") as original:
            read_chunks(original, stop=lambda cs: len(numbers(text_of(cs))) >= 5)
            other = same_visitor(browser, second.url)
            with other.client.stream("GET", "/api/chat/chat-u1/stream") as follower:
                assert follower.status_code == 200
                head, _ = read_chunks(follower, stop=lambda cs: len(numbers(text_of(cs))) >= 3)
                proxy.stop()  # the broker's database is gone (the ORM's connections are not)
                tail, done = read_chunks(follower)
            # The follower on the other process ended in band: the masked
            # error, then the stream's normal end.
            assert done
            assert tail[-1] == {"type": "error", "errorText": "An error occurred."}
            assert text_of(head + tail).startswith(text_of(head))

            # While it is gone: a new chat on either process is refused with
            # the 503 JSON, and nothing is written.
            for base in (first.url, second.url):
                refused = same_visitor(browser, base).post("/api/chat", browser.chat_body("chat-u2", "count to 3"))
                assert refused.status_code == 503, refused.text[:200]
                assert refused.headers["content-type"] == "application/json"
                assert refused.json()["error"]["code"] == "broker_unavailable"
            assert not Conversation.objects.filter(client_id="chat-u2").exists()

            proxy.start()  # back, on the same port
            # The first request after works, on the process that was refused.
            again = same_visitor(browser, second.url).post("/api/chat", browser.chat_body("chat-u2", "count to 3"))
            assert again.status_code == 200, again.text[:200]
            assert text_of(sse_chunks(again.content)) == "1 2 3"


@pytest.mark.node
def test_a_steer_sent_to_the_other_process_reaches_the_run_and_its_outcome_comes_back(node: str) -> None:
    """The steering message crosses processes on PostgreSQL alone: the run
    on the first process, the steer (and the wait for its outcome) on the
    second, for the real ai@7 client."""
    if connection.vendor != "postgresql":
        pytest.skip("the PostgreSQL broker needs the suite on PostgreSQL (DATABASE_URL=postgres://…)")
    uistream = {
        "ALLOW_ANONYMOUS": True,
        "MODEL": "demo_project.demo_model.make_model",
        "TOOLS": DEMO_TOOLS,
        "BROKER": {"BACKEND": "postgres"},
        "LOG_WRITER": "thread",
    }
    stack = Stack(uistream, None, "steer-pg")
    stack.unset.add("REDIS_URL")
    try:
        first, _ = stack.web(env_overrides=PACE, server="uvicorn")
        second, _ = stack.web(env_overrides=PACE)
        Browser(second)  # its first request (imports) before the one that matters
        out = steer_client(
            node,
            scenario="chat",
            transport="http",
            base=first,
            steerBase=second,
            chatId="steer-pg",
            text="count to 300 slowly",
            after=10,
            steer={"kind": "steer", "id": "s1", "text": "now count backwards", "over": "http"},
            **page(Browser(first)),
        )
        check_steered(out, run_oracle(node), "steer-pg")
    finally:
        stack.close()
