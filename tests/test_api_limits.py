"""The conversations API reads its bodies with the chat body's limits
(``api.parsers.JSONBodyParser``), through daphne and uvicorn serving the
demo: nested past ``MAX_DEPTH`` (32 levels, 10,000 or 990 or 40 deep) is a
400 ``too_deep``, over Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (2.5 MiB) a
413 ``too_large``, both JSON, on every endpoint that takes a body, and
nothing is written. The admin shows a conversation stored before those
limits, however deep its metadata."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from uistream_app.api.parsers import max_body_bytes
from uistream_app.inspect.part_views import CUT_DEEPER
from uistream_app.models import Conversation

from .server import demo_server, shared_database_url
from .test_chat_http import Browser

pytestmark = pytest.mark.django_db(transaction=True)

MB = 1024 * 1024
DEEP = "the request body is nested deeper than 32 levels"


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def body_with_metadata(metadata: str) -> bytes:
    return ('{"title": "hostile", "metadata": {"a": ' + metadata + "}}").encode()


def refused(response: Any, status: int, detail: str) -> None:
    assert response.status_code == status, response.text[:300]
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"detail": detail}


@pytest.mark.parametrize("server_name", ["daphne", "uvicorn"])
def test_hostile_bodies_get_json_refusals_on_every_api_endpoint_and_write_nothing(server_name: str) -> None:
    env = {"DJANGO_SETTINGS_MODULE": "demo_project.settings", "DATABASE_URL": shared_database_url()}
    with demo_server(server_name, env) as server:
        browser = Browser(server.url)
        headers = {"X-CSRFToken": browser.token, "Content-Type": "application/json"}
        created = browser.client.post("/api/conversations/", content=body_with_metadata('"kept"'), headers=headers)
        assert created.status_code == 201, created.text[:300]
        chat_id = created.json()["id"]
        too_large = f"the request body is larger than {int(2.5 * MB)} bytes"
        hostile = {
            "10,000 deep": (body_with_metadata(nested(10_000)), 400, DEEP),
            "990 deep": (body_with_metadata(nested(990)), 400, DEEP),
            "33 deep": (body_with_metadata(nested(31)), 400, DEEP),
            "over 2.5 MiB": (body_with_metadata('"' + "x" * (3 * MB) + '"'), 413, too_large),
        }
        for name, (body, status, detail) in hostile.items():
            post = browser.client.post("/api/conversations/", content=body, headers=headers)
            refused(post, status, detail)
            for method in ("PUT", "PATCH"):
                url = f"/api/conversations/{chat_id}/"
                response = browser.client.request(method, url, content=body, headers=headers)
                refused(response, status, detail)
            assert Conversation.objects.count() == 1, name
        # As deep as a chat body may be is taken.
        ok = browser.client.patch(
            f"/api/conversations/{chat_id}/", content=body_with_metadata(nested(30)), headers=headers
        )
        assert ok.status_code == 200, ok.text[:300]
        # A form (the browsable API's) meets the same depth.
        form = browser.client.post(
            "/api/conversations/",
            data={"title": "form", "metadata": '{"a": ' + nested(990) + "}"},
            headers={"X-CSRFToken": browser.token},
        )
        assert form.status_code == 400, form.text[:300]
        assert form.json() == {"metadata": ["Value is nested deeper than 31 levels."]}
        # The stream endpoints read a body past Django's limit themselves
        # (up to MAX_REQUEST_BYTES): what they refuse it for is theirs, in
        # JSON, never Django's HTML 400.
        for path, field in [("/api/chat", "messages"), ("/api/agui", "messages")]:
            big = {"id": "big", "threadId": "big", "runId": "r1", "messages": "x" * (3 * MB)}
            response = browser.client.post(path, content=json.dumps(big).encode(), headers=headers)
            assert response.status_code == 400, response.text[:300]
            assert response.headers["content-type"] == "application/json"
            assert response.json()["error"]["field"] == field
        log = server.output()
    assert "Traceback" not in log, log[-3000:]
    (conversation,) = Conversation.objects.all()
    assert conversation.title == "hostile"
    assert conversation.metadata == {"a": json.loads(nested(30))}


def test_the_api_limit_is_the_smaller_of_ours_and_django_s(settings: Any) -> None:
    settings.UISTREAM = {"MAX_REQUEST_BYTES": 1 * MB}
    assert max_body_bytes() == 1 * MB
    settings.UISTREAM = {}
    assert max_body_bytes() == int(2.5 * MB)
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = None
    assert max_body_bytes() > 40 * MB  # MAX_REQUEST_BYTES, derived


def test_the_admin_shows_deep_metadata_stored_before_the_limits() -> None:
    staff = get_user_model().objects.create_superuser("staff", password="pw")
    # 300 levels: far past the admin's 32, and still inside what Django's
    # JSONField decodes on Python 3.11, whose json module counts each level
    # against the interpreter's recursion limit (1,000 frames, the test's
    # and the admin's own included); 3.12's limit is its C stack's.
    deep = json.loads(nested(300))
    Conversation.objects.create(pk="old-deep", title="from before", metadata={"a": deep, "b": "shown"})
    client = Client()
    client.force_login(staff)
    page = client.get("/admin/uistream_app/conversation/old-deep/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "shown" in text
    assert CUT_DEEPER in text
