"""Hostile media types (issue 31) through a real server, daphne and
uvicorn: a file part whose ``mediaType`` is not one media type, or whose
``data:`` URL names another type than the part, is a 400 JSON naming the
part on every path (the useChat POST, AG-UI, the WebSocket send) with
nothing stored; what is stored is the normalised type; and a row stored
before types were parsed is served, by the files view and the admin, as
an ``application/octet-stream`` download instead of a 500."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.test import Client

from uistream_app.models import Conversation, Message, Run, StoredFile

from .server import ServerProcess, demo_server, shared_database_url
from .test_chat_http import Browser, wait_for
from .test_consumer import session_cookie
from .test_files import body_with, data_url, png

pytestmark = pytest.mark.django_db(transaction=True)

IMAGE = png()
#: The four inputs of the issue: a header injected through the type, a
#: comma after SVG's type (which passed the "SVG is a download" rule), two
#: types in one (served as HTML), and HTML in a data: URL declared an image.
HOSTILE = {
    "crlf": ({"mediaType": "image/png\r\nX-Injected: 1", "url": data_url("image/png", IMAGE)}, "mediaType"),
    "svg comma": ({"mediaType": "image/svg+xml,x", "url": data_url("image/png", IMAGE)}, "mediaType"),
    "two types": ({"mediaType": "image/png, text/html", "url": data_url("image/png", IMAGE)}, "mediaType"),
    "data url type": (
        {"mediaType": "image/png", "url": data_url("text/html", b"<script>alert(1)</script>")},
        "url",
    ),
}


@pytest.fixture(scope="module", params=["daphne", "uvicorn"])
def server(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    django_db_setup: None,
    django_db_blocker: Any,
) -> Iterator[ServerProcess]:
    """The demo's ASGI application under ``request.param`` in its own
    process (one per module and server), sharing the test's database, with
    a storage directory of its own (``media``)."""
    media = tmp_path_factory.mktemp("media")
    with django_db_blocker.unblock():
        database = shared_database_url()
    env = {
        "DJANGO_SETTINGS_MODULE": "tests.server_settings",
        "DATABASE_URL": database,
        "UISTREAM_TEST_SETTINGS": json.dumps(django_settings.UISTREAM),
        "UISTREAM_MEDIA_ROOT": str(media),
        "UISTREAM_DEMO_DELAY_MS": "1",
    }
    with demo_server(request.param, env) as process:
        process.media = media  # type: ignore[attr-defined]
        yield process


def stored_nothing(media: Path) -> bool:
    files = [p for p in media.rglob("*") if p.is_file()] if media.exists() else []
    return not (Conversation.objects.exists() or Message.objects.exists() or StoredFile.objects.exists() or files)


def file_part(hostile: dict[str, str]) -> dict[str, Any]:
    return {"type": "file", "filename": "cat.png", **hostile}


def test_a_hostile_media_type_is_a_400_naming_the_part_and_stores_nothing(server: ServerProcess) -> None:
    browser = Browser(server.url)
    media: Path = server.media  # type: ignore[attr-defined]
    for name, (hostile, key) in HOSTILE.items():
        response = browser.post("/api/chat", body_with("hostile", "look", file_part(hostile)))
        assert response.status_code == 400, (name, response.text)
        assert response.headers["content-type"] == "application/json"
        error = response.json()["error"]
        assert (error["code"], error["field"]) == ("invalid", f"message.parts[1].{key}"), name
        assert error["message"].startswith(f"message.parts[1].{key}: "), error
    assert stored_nothing(media)

    # AG-UI's media part becomes the same file part, refused the same way.
    from .test_agui_http import run_input

    message = {
        "id": "u1",
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "source": {"type": "data", "value": "AAAA", "mimeType": "image/png, text/html"}},
        ],
    }
    response = browser.client.post(
        "/api/agui",
        json=run_input("hostile-agui", [message]),
        headers={"X-CSRFToken": browser.token, "Accept": "text/event-stream"},
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["field"] == "message.parts[1].mediaType"

    # The WebSocket send: an error frame with the same code, the socket open.
    from websockets.sync.client import connect

    url = server.url.replace("http://", "ws://") + "/ws/chat/"
    with connect(url, origin=server.url, additional_headers={"Cookie": session_cookie()}) as socket:  # type: ignore[arg-type]
        hostile, _key = HOSTILE["crlf"]
        frame = {"type": "send", "requestId": "q1", "headers": {}, "body": {}}
        socket.send(json.dumps({**frame, **body_with("hostile-ws", "look", file_part(hostile))}))
        answer = json.loads(socket.recv(timeout=20))
        assert (answer["type"], answer["requestId"], answer["code"]) == ("error", "q1", "invalid")
    assert stored_nothing(media)


#: Types rows may hold from before they were parsed, and how each is served.
LEGACY = {
    "image/png\r\nX-Injected: 1": "application/octet-stream",
    "image/svg+xml,x": "application/octet-stream",
    "image/png, text/html": "application/octet-stream",
    "TEXT/HTML": "text/html",
    "image/svg+xml": "image/svg+xml",
}


def test_the_normalised_type_is_stored_and_a_legacy_type_served_as_a_download(server: ServerProcess) -> None:
    browser = Browser(server.url)
    text = b"plain words\n"
    part = {
        "type": "file",
        "filename": "notes.txt",
        "mediaType": "Text/Plain;Charset=UTF-8",
        "url": f"data:text/plain;charset=utf-8;base64,{base64.b64encode(text).decode()}",
    }
    response = browser.post("/api/chat", body_with("files", "look", part))
    assert response.status_code == 200, response.text
    wait_for(lambda: not Run.objects.filter(status="running").exists(), "the run to be stored")
    stored = StoredFile.objects.get()
    (sent,) = [p for p in Message.objects.get(role="user").parts if p["type"] == "file"]
    assert stored.media_type == sent["mediaType"] == "text/plain; charset=UTF-8"
    served = browser.client.get(sent["url"])
    assert served.headers["content-type"] == "text/plain; charset=UTF-8"
    assert served.headers["content-disposition"] == 'inline; filename="notes.txt"'
    assert served.content == text

    staff = Client()
    staff.force_login(get_user_model().objects.create_superuser("boss", "boss@example.com", "pw"))
    admin = httpx.Client(base_url=server.url)
    admin.cookies.set(django_settings.SESSION_COOKIE_NAME, staff.cookies[django_settings.SESSION_COOKIE_NAME].value)
    admin_url = f"/admin/uistream_app/conversation/{stored.conversation_id}/files/{stored.pk}/"
    for legacy, content_type in LEGACY.items():
        # As a row stored before types were parsed holds it.
        StoredFile.objects.filter(pk=stored.pk).update(media_type=legacy)
        for response in (browser.client.get(sent["url"]), admin.get(admin_url)):
            assert response.status_code == 200, (legacy, str(response.url), response.text[:300])
            assert response.headers["content-type"] == content_type, legacy
            assert response.headers["content-disposition"] == 'attachment; filename="notes.txt"'
            assert response.headers["x-content-type-options"] == "nosniff"
            assert "x-injected" not in response.headers
            assert response.content == text
