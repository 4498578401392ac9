"""The sync path: the chat views served by a WSGI server stream as they go.

A threaded ``wsgiref`` server on 127.0.0.1 serves the project's WSGI
application; the answer must arrive chunk by chunk (not buffered whole),
and a dropped connection must reach the run as under ASGI. Nobody is left
unaware of it: the first stream of a process logs how to serve ASGI.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest
from django.test import override_settings

from uistream_app.models import Message, Run
from uistream_app.transport import pipeline

from .server import serve_wsgi_demo
from .test_chat_http import Browser, read_chunks, text_of, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def wsgi_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from serve_wsgi_demo(monkeypatch, 5)


def test_wsgi_streams_chunk_by_chunk(wsgi_server: str) -> None:
    browser = Browser(wsgi_server)
    with browser.stream("wsgi-1", "count to 80") as response:
        assert response.status_code == 200
        assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        first, _ = read_chunks(response, stop=lambda cs: any(c["type"] == "text-delta" for c in cs))
        assert Run.objects.get().status == "running"  # not buffered: the model is still going
        rest, done = read_chunks(response)
    assert done
    assert text_of(first + rest).split() == [str(n) for n in range(1, 81)]
    wait_for(lambda: Run.objects.get().status == "completed", "the run to be stored")
    message = Message.objects.get(role="assistant")
    assert first[0] == {"type": "start", "messageId": message.pk}


def test_wsgi_disconnect_cancels_the_run(wsgi_server: str) -> None:
    browser = Browser(wsgi_server)
    with override_settings(
        UISTREAM={"ALLOW_ANONYMOUS": True, "ON_DISCONNECT": "cancel", "MODEL": "demo_project.demo_model.make_model"}
    ):
        with browser.stream("wsgi-2", "count to 2000") as response:
            read_chunks(response, stop=lambda cs: text_of(cs).count(" ") >= 5)
        wait_for(lambda: Run.objects.get().status != "running", "the run to end after the disconnect")
    assert Run.objects.get().status == "cancelled"


def test_streaming_under_wsgi_warns_once_per_process(
    wsgi_server: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(pipeline, "_wsgi_warned", threading.Lock())  # as a fresh process
    browser = Browser(wsgi_server)
    with caplog.at_level(logging.WARNING, logger="uistream_app.pipeline"):
        for chat_id in ("wsgi-3", "wsgi-4"):
            with browser.stream(chat_id, "count to 3") as response:
                assert read_chunks(response)[1]
        wait_for(lambda: not Run.objects.filter(status="running").exists(), "the runs to end")
    warnings = [r.getMessage() for r in caplog.records if r.name == "uistream_app.pipeline"]
    assert warnings == [
        "uistream is streaming under WSGI: each open stream holds a server thread for as long as it lasts. "
        'Serve ASGI: put "daphne" first in INSTALLED_APPS (runserver then serves ASGI), '
        "or serve the project with daphne or uvicorn (ASGI_APPLICATION)."
    ]
