"""The conversations API: the permission matrix (owner, another user, staff,
anonymous with and without ``ALLOW_ANONYMOUS``), CSRF for session owners,
create / rename / delete, messages as useChat's ``UIMessage`` list, runs
and their transcripts, filters and paging, constant query counts, and the
OpenAPI schema.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from uistream_app.models import Conversation, Message, Run
from uistream_app.protocol import events as ev
from uistream_app.protocol.ui.render import UIStreamRenderer
from uistream_app.recording import read_log

from .test_admin import encode, make_full_run, store_run
from .test_api_without_drf_settings import API_PATHS

pytestmark = pytest.mark.django_db

NO_ANONYMOUS = {"UISTREAM": {"ALLOW_ANONYMOUS": False}}


def conversations() -> str:
    return reverse("uistream:conversation-list")


def conversation(chat_id: str) -> str:
    return reverse("uistream:conversation-detail", args=[chat_id])


def messages(chat_id: str) -> str:
    return reverse("uistream:conversation-messages", args=[chat_id])


def run_url(run: Run) -> str:
    return reverse("uistream:run-detail", args=[run.pk])


def transcript(run: Run, name: str) -> str:
    return reverse("uistream:run-transcript", args=[run.pk, name])


def content(response: Any) -> bytes:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content)
    return bytes(response.content)


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def bob(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("bob", password="pw")


@pytest.fixture
def staff(django_user_model: Any) -> Any:
    return django_user_model.objects.create_superuser("root", "root@example.com", "pw")


def client_for(user: Any = None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_login(user)
    return client


def anonymous_owner() -> tuple[APIClient, str]:
    """An anonymous visitor who created a conversation (and so a session)."""
    client = APIClient()
    response = client.post(conversations(), {"title": "mine"}, format="json")
    assert response.status_code == 201, response.content
    return client, response.json()["id"]


# -- the permission matrix -------------------------------------------------------------------

OBJECT_REQUESTS: dict[str, Callable[[APIClient, str, Run], Any]] = {
    "retrieve": lambda c, chat, run: c.get(conversation(chat)),
    "rename": lambda c, chat, run: c.patch(conversation(chat), {"title": "renamed"}, format="json"),
    "delete": lambda c, chat, run: c.delete(conversation(chat)),
    "messages": lambda c, chat, run: c.get(messages(chat)),
    "run": lambda c, chat, run: c.get(run_url(run)),
    "transcript": lambda c, chat, run: c.get(transcript(run, "ai7")),
}
OK = {"retrieve": 200, "rename": 200, "delete": 204, "messages": 200, "run": 200, "transcript": 200}


@pytest.mark.parametrize("action", OBJECT_REQUESTS)
@pytest.mark.parametrize("who", ["owner", "other user", "staff", "anonymous", "anonymous, not allowed"])
def test_permission_matrix(action: str, who: str, alice: Any, bob: Any, staff: Any) -> None:
    run = make_full_run(owner=alice)
    make_full_run(owner=staff, chat_id="chat-staff", message_id="msg-staff")  # staff own something too
    clients = {
        "owner": lambda: client_for(alice),
        "other user": lambda: client_for(bob),
        "staff": lambda: client_for(staff),
        "anonymous": lambda: anonymous_owner()[0],  # has a session, owns another chat
        "anonymous, not allowed": lambda: client_for(),
    }
    expected = {"owner": OK[action], "anonymous, not allowed": 403}.get(who, 404)
    if who == "anonymous, not allowed":
        with override_settings(**NO_ANONYMOUS):
            response = OBJECT_REQUESTS[action](clients[who](), "chat-1", run)
    else:
        response = OBJECT_REQUESTS[action](clients[who](), "chat-1", run)
    assert response.status_code == expected, content(response)
    if expected == 404:
        # The same answer as for a chat that does not exist.
        assert Conversation.objects.filter(client_id="chat-1", title="Weather in Paris").exists()


def test_lists_show_only_ones_own(alice: Any, bob: Any, staff: Any) -> None:
    make_full_run(owner=alice)
    make_full_run(owner=bob, chat_id="chat-bob", message_id="msg-bob")
    make_full_run(owner=staff, chat_id="chat-staff", message_id="msg-staff")
    anon, anon_chat = anonymous_owner()
    for user, chat_id in ((alice, "chat-1"), (bob, "chat-bob"), (staff, "chat-staff")):
        client = client_for(user)
        assert [c["id"] for c in client.get(conversations()).json()["results"]] == [chat_id]
        runs = client.get(reverse("uistream:run-list")).json()["results"]
        assert [r["conversation"] for r in runs] == [chat_id]
    assert [c["id"] for c in anon.get(conversations()).json()["results"]] == [anon_chat]
    assert APIClient().get(conversations()).json()["results"] == []  # no session: owns nothing
    with override_settings(**NO_ANONYMOUS):
        assert APIClient().get(conversations()).status_code == 403


def test_an_anonymous_session_owns_the_chats_it_made_through_the_chat_view(alice: Any) -> None:
    client = APIClient()
    client.get(conversations())
    session = client.session
    session.save()
    key = session.session_key
    assert key is not None
    client.cookies["sessionid"] = key
    store_run(encode([ev.TextDelta("hi"), ev.Done()], "m-anon"), session_key=key, chat_id="c-anon")
    assert [c["id"] for c in client.get(conversations()).json()["results"]] == ["c-anon"]
    assert client.get(messages("c-anon")).status_code == 200
    assert client_for(alice).get(messages("c-anon")).status_code == 404


def test_csrf_is_enforced_for_session_owners(alice: Any) -> None:
    anon = APIClient(enforce_csrf_checks=True)
    assert anon.post(conversations(), {"title": "x"}, format="json").status_code == 403
    token = Client().get(reverse("uistream:csrf"))
    anon.cookies["csrftoken"] = token.cookies["csrftoken"].value
    created = anon.post(conversations(), {"title": "x"}, format="json", HTTP_X_CSRFTOKEN=token.json()["csrfToken"])
    assert created.status_code == 201
    chat_id = created.json()["id"]
    assert anon.delete(conversation(chat_id)).status_code == 403  # no token: refused
    assert Conversation.objects.filter(client_id=chat_id).exists()
    user = APIClient(enforce_csrf_checks=True)
    user.force_login(alice)
    assert user.post(conversations(), {"title": "x"}, format="json").status_code == 403


# -- conversations ---------------------------------------------------------------------------------


def test_create_rename_delete(alice: Any) -> None:
    client = client_for(alice)
    created = client.post(conversations(), {"id": "my-chat_1", "title": "First", "metadata": {"a": 1}}, format="json")
    assert created.status_code == 201
    assert created.json() | {"created_at": None, "updated_at": None} == {
        "id": "my-chat_1",
        "title": "First",
        "metadata": {"a": 1},
        "message_count": 0,
        "created_at": None,
        "updated_at": None,
    }
    assert Conversation.objects.get(client_id="my-chat_1").owner == alice
    generated = client.post(conversations(), {}, format="json").json()["id"]
    assert len(generated) >= 16
    assert Conversation.objects.filter(client_id=generated, owner=alice).exists()
    assert client.post(conversations(), {"id": "my-chat_1"}, format="json").status_code == 409
    bad = client.post(conversations(), {"id": "no spaces/here"}, format="json")
    assert bad.status_code == 400
    assert "id" in bad.json()
    assert client.post(conversations(), {"metadata": [1]}, format="json").status_code == 400

    renamed = client.patch(conversation("my-chat_1"), {"title": "Renamed", "id": "other"}, format="json")
    assert renamed.status_code == 200
    assert renamed.json()["title"] == "Renamed"
    assert renamed.json()["id"] == "my-chat_1"  # a chat keeps its id
    assert Conversation.objects.get(client_id="my-chat_1").title == "Renamed"

    assert client.delete(conversation("my-chat_1")).status_code == 204
    assert not Conversation.objects.filter(client_id="my-chat_1").exists()
    assert client.get(conversation("my-chat_1")).status_code == 404


def test_a_chat_with_a_reply_streaming_is_not_deleted(alice: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    make_full_run(owner=alice)

    class Busy:
        async def active_run(self, conversation_id: str) -> str | None:
            return "run-1" if conversation_id == "chat-1" else None

    monkeypatch.setattr("uistream_app.api.views.get_broker", lambda: Busy())
    response = client_for(alice).delete(conversation("chat-1"))
    assert response.status_code == 409
    assert "stop it first" in response.json()["detail"]
    assert Conversation.objects.filter(client_id="chat-1").exists()


def test_messages_are_uimessages_for_use_chat(alice: Any) -> None:
    run = make_full_run(owner=alice)
    Message.objects.filter(pk="msg-1-user").update(metadata=None)
    data = client_for(alice).get(messages("chat-1")).json()
    assert data["count"] == 2
    user, assistant = data["results"]
    assert user == {
        "id": "msg-1-user",
        "role": "user",
        "parts": [{"type": "text", "text": "What is the weather in Paris?"}],
    }
    assert assistant["id"] == "msg-1"
    assert assistant["role"] == "assistant"
    assert assistant["metadata"] == {"model": "demo"}
    assert assistant["parts"] == run.message.parts  # type: ignore[union-attr]
    assert list(assistant) == ["id", "role", "metadata", "parts"]


def test_conversation_filters_search_ordering_and_paging(alice: Any) -> None:
    for n in range(25):
        Conversation.objects.create(pk=f"c{n:02}", owner=alice, title=f"Topic {n:02}")
    Conversation.objects.filter(client_id="c03").update(title="Weather talk")
    client = client_for(alice)
    page = client.get(conversations()).json()
    assert page["count"] == 25
    assert len(page["results"]) == 20
    assert page["next"]
    assert len(client.get(conversations(), {"page": "2"}).json()["results"]) == 5
    assert len(client.get(conversations(), {"page_size": "5"}).json()["results"]) == 5
    assert [c["id"] for c in client.get(conversations(), {"search": "weather"}).json()["results"]] == ["c03"]
    titles = [
        c["title"] for c in client.get(conversations(), {"ordering": "title", "page_size": "3"}).json()["results"]
    ]
    assert titles == ["Topic 00", "Topic 01", "Topic 02"]
    latest = Conversation.objects.order_by("-updated_at").first()
    assert latest is not None
    after = client.get(conversations(), {"updated_after": latest.updated_at.isoformat()}).json()
    assert after["count"] == 0
    bad = client.get(conversations(), {"updated_after": "yesterday"})
    assert bad.status_code == 400
    assert "updated_after" in bad.json()


# -- runs ------------------------------------------------------------------------------------------


def test_a_run_never_shows_its_error_detail(alice: Any) -> None:
    run = make_full_run(owner=alice, status="failed", error_code="Boom", error_detail="secret <provider> text")
    data = client_for(alice).get(run_url(run)).json()
    assert data["error_code"] == "Boom"
    assert "error_detail" not in data
    assert "secret" not in json.dumps(data)
    assert data["status"] == "failed"
    assert data["chunk_count"] == run.chunk_count
    assert data["time_to_first_chunk_ms"] == 350
    assert data["duration_ms"] > 350
    assert set(data["transcripts"]) == {"ai7", "ai6", "ai5", "agui", "jsonl"}
    assert data["transcripts"]["ai5"].endswith(transcript(run, "ai5"))


def test_a_run_shows_its_shared_state_to_its_owner_only(alice: Any, bob: Any) -> None:
    run = make_full_run(owner=alice)
    assert client_for(alice).get(run_url(run)).json()["state"] is None
    Run.objects.filter(pk=run.pk).update(state={"todo": ["buy milk"], "done": 1})
    assert client_for(alice).get(run_url(run)).json()["state"] == {"todo": ["buy milk"], "done": 1}
    (listed,) = client_for(alice).get(reverse("uistream:run-list")).json()["results"]
    assert listed["state"] == {"todo": ["buy milk"], "done": 1}
    assert client_for(bob).get(run_url(run)).status_code == 404
    assert client_for(bob).get(reverse("uistream:run-list")).json()["count"] == 0


@pytest.mark.parametrize("version", [7, 6, 5])
def test_transcripts_are_the_wire(alice: Any, version: int) -> None:
    run = make_full_run(owner=alice)
    chunks = [entry.chunk for entry in read_log(run)]
    renderer = UIStreamRenderer(version)
    response = client_for(alice).get(transcript(run, f"ai{version}"))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream; charset=utf-8"
    assert content(response) == renderer.render_many(chunks) + renderer.done()


def test_transcript_as_json_lines_and_as_a_download(alice: Any) -> None:
    run = make_full_run(owner=alice)
    client = client_for(alice)
    lines = content(client.get(transcript(run, "jsonl"))).decode().splitlines()
    assert json.loads(lines[-1])["chunk"] == {"type": "finish", "finishReason": "stop"}
    download = client.get(transcript(run, "ai7"), {"download": "1"})
    assert download["Content-Disposition"] == f'attachment; filename="run-{run.pk}.ai7.sse"'
    missing = client.get(transcript(run, "agui-someday"))
    assert missing.status_code == 404
    assert "use one of ai7, ai6, ai5, agui, jsonl" in missing.json()["detail"]


def test_run_filters(alice: Any) -> None:
    make_full_run(owner=alice)
    store_run(
        encode([ev.TextDelta("x"), ev.Done()], "m2"), owner=alice, chat_id="chat-2", message_id="m2", status="failed"
    )
    client = client_for(alice)
    runs = reverse("uistream:run-list")
    assert [r["conversation"] for r in client.get(runs, {"conversation": "chat-2"}).json()["results"]] == ["chat-2"]
    assert [r["status"] for r in client.get(runs, {"status": "failed"}).json()["results"]] == ["failed"]
    assert client.get(runs, {"model": "nope"}).json()["count"] == 0
    assert client.get(runs, {"status": "exploded"}).status_code == 400


# -- query counts --------------------------------------------------------------------------------------


def test_conversation_list_queries_do_not_grow(alice: Any, django_assert_num_queries: Any) -> None:
    client = client_for(alice)
    make_full_run(owner=alice)
    client.get(conversations())  # the session is loaded the same way each time
    with CaptureQueriesContext(connection) as one:
        assert client.get(conversations()).json()["count"] == 1
    for n in range(2, 31):
        store_run(encode([ev.TextDelta("hi"), ev.Done()], f"m{n}"), owner=alice, chat_id=f"c{n}", message_id=f"m{n}")
    with django_assert_num_queries(len(one.captured_queries)):
        data = client.get(conversations(), {"page_size": "30"}).json()
    assert data["count"] == 30
    assert all(c["message_count"] == 2 for c in data["results"])


def test_message_list_queries_do_not_grow(alice: Any, django_assert_num_queries: Any) -> None:
    client = client_for(alice)
    make_full_run(owner=alice)
    client.get(messages("chat-1"))
    with CaptureQueriesContext(connection) as one:
        assert client.get(messages("chat-1")).json()["count"] == 2
    for n in range(2, 16):
        store_run(encode([ev.TextDelta(f"answer {n}"), ev.Done()], f"m{n}"), owner=alice, message_id=f"m{n}")
    with django_assert_num_queries(len(one.captured_queries)):
        assert client.get(messages("chat-1")).json()["count"] == 30


def test_run_list_queries_do_not_grow(alice: Any, django_assert_num_queries: Any) -> None:
    client = client_for(alice)
    runs = reverse("uistream:run-list")
    make_full_run(owner=alice)
    client.get(runs)
    with CaptureQueriesContext(connection) as one:
        client.get(runs)
    for n in range(2, 31):
        store_run(encode([ev.TextDelta("hi"), ev.Done()], f"m{n}"), owner=alice, chat_id=f"c{n}", message_id=f"m{n}")
    with django_assert_num_queries(len(one.captured_queries)):
        assert client.get(runs, {"page_size": "30"}).json()["count"] == 30


# -- the schema -----------------------------------------------------------------------------------------


def test_the_openapi_schema(staff: Any) -> None:
    response = client_for(staff).get(reverse("uistream:schema"), {"format": "json"})
    assert response.status_code == 200
    schema = json.loads(content(response))
    paths = schema["paths"]
    assert set(paths) >= API_PATHS, sorted(paths)
    assert not any(p.startswith("/api/chat") for p in paths)  # not DRF views
    params = {p["name"] for p in paths["/api/conversations/"]["get"]["parameters"]}
    assert {"search", "ordering", "page", "page_size", "updated_after", "updated_before"} <= params
    run_fields = schema["components"]["schemas"]["Run"]["properties"]
    assert "error_detail" not in run_fields
    assert "transcripts" in run_fields
    assert run_fields["state"]["readOnly"] is True
    assert "AG-UI shared state" in run_fields["state"]["description"]
    assert set(schema["components"]["schemas"]["UIMessage"]["properties"]) == {"id", "role", "metadata", "parts"}


@pytest.mark.parametrize("query", [{}, {"format": "json"}, {"format": "yaml"}])
def test_the_schema_is_for_staff_by_default(query: dict[str, str], alice: Any, django_user_model: Any) -> None:
    url = reverse("uistream:schema")
    anonymous = APIClient().get(url, query)
    assert anonymous.status_code == 403
    assert anonymous["Content-Type"] == "application/json"
    assert anonymous.json() == {"detail": "Authentication credentials were not provided."}
    signed_in = client_for(alice).get(url, query)
    assert signed_in.status_code == 403
    assert signed_in.json() == {"detail": "You do not have permission to perform this action."}
    # Staff, not only superusers.
    clerk = django_user_model.objects.create_user("clerk", password="pw", is_staff=True)
    response = client_for(clerk).get(url, query)
    assert response.status_code == 200
    assert b"/api/conversations/" in content(response)


def test_schema_public_opens_the_schema_to_anyone() -> None:
    with override_settings(UISTREAM={"SCHEMA_PUBLIC": True}):
        response = APIClient().get(reverse("uistream:schema"), {"format": "json"})
    assert response.status_code == 200
    assert "/api/runs/" in json.loads(content(response))["paths"]


def test_the_schema_validates_without_warnings() -> None:
    out = io.StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    assert "/api/runs/{id}/transcript/{transcript_format}/" in out.getvalue()
