"""Chat ids are per owner, through a real server (daphne and uvicorn, each
in its own process): two users and two anonymous visitors all use the
chat id ``shared``, each gets a chat of their own, and every endpoint
answers a chat id someone else holds exactly as it answers a free one:
nothing tells that the other chat exists, and nothing touches it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.conf import settings

from uistream_app.models import Conversation, Message, Run

from .server import demo_server, shared_database_url
from .test_chat_http import Browser, read_chunks, text_of, wait_for
from .test_consumer import user_cookie

pytestmark = pytest.mark.django_db(transaction=True)

SHARED = "shared"


@pytest.fixture(params=["daphne", "uvicorn"])
def base(request: pytest.FixtureRequest) -> Iterator[str]:
    env = {
        "DJANGO_SETTINGS_MODULE": "demo_project.settings",
        "DATABASE_URL": shared_database_url(),
        "UISTREAM_DEMO_DELAY_MS": "20",
        # The tests' own: the sessions this process signs in are valid there.
        "DJANGO_SECRET_KEY": settings.SECRET_KEY,
    }
    with demo_server(request.param, env) as server:
        yield server.url


def signed_in(base: str, username: str) -> Browser:
    _user, cookie = user_cookie(username)
    browser = Browser(base)
    browser.client.cookies.set(settings.SESSION_COOKIE_NAME, cookie.split("=", 1)[1])
    browser.token = browser.client.get("/api/csrf").json()["csrfToken"]
    return browser


def answer(response: httpx.Response) -> tuple[int, Any]:
    """What a client can tell from a response: its status and its body."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return response.status_code, response.json()
    return response.status_code, response.content


def answers_about(browser: Browser, chat_id: str, message_id: str) -> dict[str, tuple[int, Any]]:
    """Every endpoint that names a chat, asked about ``chat_id``, by
    ``browser``, except those that make one."""
    get, post = browser.client.get, browser.post
    return {
        "resume": answer(get(f"/api/chat/{chat_id}/stream")),
        "resume by index": answer(get(f"/api/chat/{chat_id}/stream?startIndex=0")),
        "stop": answer(post(f"/api/chat/{chat_id}/stop")),
        "stored message": answer(get(f"/api/chat/{chat_id}/messages/{message_id}/stream")),
        "regenerate": answer(post("/api/chat", {"id": chat_id, "messages": [], "trigger": "regenerate-message"})),
        "conversation": answer(get(f"/api/conversations/{chat_id}/")),
        "messages": answer(get(f"/api/conversations/{chat_id}/messages/")),
        "rename": answer(
            browser.client.patch(
                f"/api/conversations/{chat_id}/", json={"title": "mine"}, headers={"X-CSRFToken": browser.token}
            )
        ),
        "delete": answer(
            browser.client.delete(f"/api/conversations/{chat_id}/", headers={"X-CSRFToken": browser.token})
        ),
        "runs": answer(get(f"/api/runs/?conversation={chat_id}")),
        "search": answer(get(f"/api/conversations/?search={chat_id}")),
    }


def socket_resume(base: str, browser: Browser, chat_id: str) -> dict[str, Any]:
    from websockets.sync.client import connect

    cookie = "; ".join(f"{name}={value}" for name, value in browser.client.cookies.items())
    url = base.replace("http://", "ws://") + "/ws/chat/"
    with connect(url, origin=base, additional_headers={"Cookie": cookie}) as socket:  # type: ignore[arg-type]
        socket.send(json.dumps({"type": "resume", "requestId": "r", "id": chat_id, "headers": {}, "body": {}}))
        return dict(json.loads(socket.recv(timeout=15)))


def test_four_owners_one_chat_id_four_chats_and_nothing_tells(base: str) -> None:
    alice = signed_in(base, "alice")
    with alice.stream(SHARED, "count to 3000") as streaming:
        first, _ = read_chunks(streaming, stop=lambda cs: len(cs) >= 3)
        alices_answer = first[0]["messageId"]
        bob, visitor, other_visitor = signed_in(base, "bob"), Browser(base), Browser(base)
        visitor_chat = visitor.post("/api/chat", visitor.chat_body("own", "count to 1"))  # the visitor's session
        assert visitor_chat.status_code == 200

        # Asked about Alice's chat id, each endpoint answers Bob and the
        # visitor exactly as about an id nobody holds (a 404, or an empty list).
        for stranger in (bob, visitor):
            foreign = answers_about(stranger, SHARED, alices_answer)
            free = answers_about(stranger, "nobody-has-this", alices_answer)
            for endpoint, said in foreign.items():
                assert said == free[endpoint], endpoint
                if endpoint in ("runs", "search"):
                    assert said[0] == 200
                    assert said[1]["count"] == 0, endpoint
                else:
                    assert said[0] == 404, endpoint
            assert socket_resume(base, stranger, SHARED) == socket_resume(base, stranger, "nobody-has-this")

        # Making a chat of that id is theirs to do, as with a free id: in the
        # API (201), or by a first message (200), while Alice's reply streams.
        made = bob.post("/api/conversations/", {"id": SHARED})
        free = bob.post("/api/conversations/", {"id": "bob-free"})
        assert (made.status_code, free.status_code) == (201, 201)
        assert made.json()["id"] == SHARED
        assert made.json().keys() == free.json().keys()
        assert other_visitor.post("/api/conversations/", {"id": SHARED}).status_code == 201
        for owner in (bob, visitor, other_visitor):
            with owner.stream(SHARED, "count to 3", message_id="u1") as own:
                assert own.status_code == 200
                chunks, done = read_chunks(own)
            assert done
            assert text_of(chunks).split() == ["1", "2", "3"]
            # Each now sees their own chat under the id, Alice's nowhere.
            listed = owner.client.get(f"/api/conversations/{SHARED}/messages/").json()["results"]
            assert [m["role"] for m in listed] == ["user", "assistant"]
            assert alices_answer not in {m["id"] for m in listed}
            # Stopping their chat of the id does not stop Alice's run.
            assert owner.post(f"/api/chat/{SHARED}/stop").json() == {"stopped": False}

        more, _ = read_chunks(streaming, stop=lambda cs: len(cs) >= 3)
        assert more  # Alice's reply still streams
        assert alice.post(f"/api/chat/{SHARED}/stop").json() == {"stopped": True}
        read_chunks(streaming)
    wait_for(lambda: not Run.objects.filter(status="running").exists(), "the runs to end")

    chats = Conversation.objects.filter(client_id=SHARED)
    assert chats.count() == 4
    assert len({(c.owner_id, c.session_key) for c in chats}) == 4
    statuses = {c.owner.username if c.owner else "visitor": [] for c in chats}
    for run in Run.objects.filter(conversation__in=chats).select_related("conversation__owner"):
        statuses[run.conversation.owner.username if run.conversation.owner else "visitor"].append(run.status)
    assert statuses == {"alice": ["stopped"], "bob": ["completed"], "visitor": ["completed", "completed"]}
    alices = chats.get(owner__username="alice")
    assert list(alices.messages.values_list("role", flat=True)) == ["user", "assistant"]
    assert Message.objects.get(pk=alices_answer).conversation == alices
