"""SIGTERM to a real daphne or uvicorn process with open streams
(``uistream_app.lifecycle.shutdown``): every client gets a terminal ``error`` chunk
and the end of its stream, every run is settled (none left ``running``),
the stored messages are what the clients got, and a new server on the same
database carries on the same chats. Runs that can finish within
``SHUTDOWN_GRACE_SECONDS`` do, even those whose client left
(``ON_DISCONNECT="finish"``)."""

from __future__ import annotations

import json
import signal
import subprocess
from contextlib import ExitStack
from typing import Any

import pytest

from uistream_app.lifecycle.shutdown import INTERRUPTED_TEXT
from uistream_app.models import Conversation, Message, Run
from uistream_app.protocol.ui.reader import UIMessageReader

from .conftest import JS_DIR
from .server import ServerProcess, demo_server, shared_database_url
from .test_chat_http import Browser, SSEStream, text_of, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

SERVERS = ["daphne", "uvicorn"]
INTERRUPTED = {"type": "error", "errorText": INTERRUPTED_TEXT}


def server_env(**uistream: Any) -> dict[str, str]:
    settings = {"ALLOW_ANONYMOUS": True, "MODEL": "demo_project.demo_model.make_model", **uistream}
    return {
        "DJANGO_SETTINGS_MODULE": "tests.server_settings",
        "DATABASE_URL": shared_database_url(),
        "UISTREAM_TEST_SETTINGS": json.dumps(settings),
        "UISTREAM_DEMO_DELAY_MS": "20",
    }


def stored_answer(chat_id: str) -> dict[str, Any]:
    return Message.objects.get(conversation__client_id=chat_id, role="assistant").as_ui_message()


def built_by_reader(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    reader = UIMessageReader()
    for chunk in chunks:
        reader.feed(chunk)
    return reader.message


def stop(server: ServerProcess) -> int:
    server.signal(signal.SIGTERM)
    return server.wait(timeout=60)


def carry_on(server: str, env: dict[str, str], browsers: dict[str, Browser]) -> None:
    """A new server on the same database answers a new turn on each chat."""
    with demo_server(server, env) as again:
        for chat_id, browser in browsers.items():
            browser.client.base_url = again.url  # the same visitor, the new process
            with browser.stream(chat_id, "count to 3", message_id="u2") as response:
                assert response.status_code == 200
                chunks, done = SSEStream(response).read()
            assert done
            assert chunks[-1]["type"] == "finish"
            assert text_of(chunks) == "1 2 3"
        wait_for(lambda: not Run.objects.filter(status="running").exists(), "the new runs to be stored")
    for chat_id in browsers:
        roles = [m.role for m in Conversation.objects.get(client_id=chat_id).messages.order_by("position")]
        assert roles == ["user", "assistant", "user", "assistant"]


@pytest.mark.parametrize("server", SERVERS)
def test_sigterm_ends_five_open_streams_with_an_error_chunk_and_settles_their_runs(server: str) -> None:
    env = server_env(SHUTDOWN_GRACE_SECONDS=0.5)
    browsers: dict[str, Browser] = {}
    got: dict[str, list[dict[str, Any]]] = {}
    with demo_server(server, env) as process, ExitStack() as streams:
        readers = {}
        for chat_id in (f"{server}-term-{i}" for i in range(5)):
            browser = browsers[chat_id] = Browser(process.url)
            response = streams.enter_context(browser.stream(chat_id, "count to 5000"))
            assert response.status_code == 200
            readers[chat_id] = SSEStream(response)
            got[chat_id], _ = readers[chat_id].read(stop=lambda cs: text_of(cs).count(" ") >= 3)
        stop(process)
        for chat_id, reader in readers.items():
            rest, done = reader.read()
            got[chat_id] += rest
            assert done, f"{chat_id}: the stream ended without [DONE]"
    for chunks in got.values():
        assert chunks[-1] == INTERRUPTED
        assert len(text_of(chunks).split()) < 5000
    assert not Run.objects.filter(status="running").exists()
    assert sorted(Run.objects.values_list("status", flat=True)) == ["interrupted"] * 5
    for chat_id, chunks in got.items():
        assert stored_answer(chat_id) == built_by_reader(chunks)
        run = Run.objects.get(conversation__client_id=chat_id)
        assert run.chunk_count == len(chunks)
    carry_on(server, env, browsers)


@pytest.mark.parametrize("server", SERVERS)
def test_runs_that_finish_within_the_grace_period_complete_even_without_their_client(server: str) -> None:
    env = server_env(SHUTDOWN_GRACE_SECONDS=30, ON_DISCONNECT="finish")
    with demo_server(server, env) as process:
        staying, leaving = Browser(process.url), Browser(process.url)
        with staying.stream(f"{server}-stay", "count to 60") as kept:
            reader = SSEStream(kept)
            head, _ = reader.read(stop=lambda cs: text_of(cs).count(" ") >= 3)
            with leaving.stream(f"{server}-leave", "count to 60") as dropped:
                SSEStream(dropped).read(stop=lambda cs: text_of(cs).count(" ") >= 3)
            # The second client has gone; its run goes on (ON_DISCONNECT="finish").
            process.signal(signal.SIGTERM)
            rest, done = reader.read()
        assert process.wait(timeout=60) is not None
    assert done
    assert (head + rest)[-1]["type"] == "finish"
    assert text_of(head + rest) == " ".join(str(n) for n in range(1, 61))
    assert dict(Run.objects.values_list("conversation__client_id", "status")) == {
        f"{server}-stay": "completed",
        f"{server}-leave": "completed",
    }
    assert stored_answer(f"{server}-leave")["parts"][-1]["text"].endswith("59 60")


def test_the_real_client_shows_the_interruption_and_keeps_what_was_stored(node: str) -> None:
    env = server_env(SHUTDOWN_GRACE_SECONDS=0.5)
    with demo_server("uvicorn", env) as process:
        browser = Browser(process.url)
        cookie = "; ".join(f"{k}={v}" for k, v in browser.client.cookies.items())
        payload = {
            "base": process.url,
            "cookie": cookie,
            "csrf": browser.token,
            "chatId": "real-term",
            "version": 7,
            "steps": [{"send": "count to 5000"}],
        }
        client = subprocess.Popen(
            [node, str(JS_DIR / "chat_client.mjs"), json.dumps(payload)],
            cwd=JS_DIR,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_for(
                lambda: Run.objects.filter(conversation__client_id="real-term", first_chunk_at__isnull=False).exists(),
                "the client's answer to be streaming",
            )
            stop(process)
            stdout, stderr = client.communicate(timeout=60)
            server_log = process.output()
        finally:
            if client.poll() is None:
                client.kill()
    assert client.returncode == 0, stderr
    out = json.loads(stdout)
    assert out["status"] == "error"
    assert out["error"] == INTERRUPTED_TEXT
    run = Run.objects.get(conversation__client_id="real-term")
    assert run.status == "interrupted", server_log
    assert run.finish_reason == "interrupted"  # ai@7's word: the answer did not finish
    stored = [m.as_ui_message() for m in Conversation.objects.get(client_id="real-term").messages.order_by("position")]
    assert out["messages"] == stored
    assert stored[-1]["parts"]  # what was streamed before the stop is kept
