"""The same hostile request gets the same answer from every endpoint: the
useChat POST, resume, stop, steer and queue, a stored answer's stream, AG-UI, and the
WebSocket (an ``error`` frame carrying the same ``code``, or the protocol's
close code where the frame itself is unreadable). Checks come in one order
everywhere (method, CSRF, authentication, body, then ownership), nothing
is written, and no answer tells whether another owner's chat or message
id exists."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import AsyncClient, override_settings

from uistream_app import testing
from uistream_app.errors import NOT_FOUND_TEXT
from uistream_app.models import Conversation, Message, Run, SteeringMessage
from uistream_app.protocol.agui.messages import agui_user_message

from .test_consumer import DEMO, Socket, runs_finished, send_frame, user_cookie

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

SSE = "text/event-stream"


@pytest.fixture(autouse=True)
def fast_demo_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "1")


def chat_body(chat_id: str, message_id: str = "u1", text: str = "count to 2") -> dict[str, Any]:
    return testing.chat_body(chat_id, [testing.user_message(text, id=message_id)])


def agui_body(thread: str, message_id: str = "u1", text: str = "count to 2") -> dict[str, Any]:
    return testing.run_input(thread, [agui_user_message(testing.user_message(text, id=message_id))])


@dataclass
class Page:
    """A signed-in browser page: its client, cookie and CSRF token."""

    client: AsyncClient
    cookie: str
    token: str

    async def post(self, path: str, body: Any, *, csrf: bool = True, content_type: str = "application/json") -> Any:
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        headers = {"X-CSRFToken": self.token} if csrf else {}
        return await self.client.post(path, data, content_type=content_type, headers=headers, HTTP_ACCEPT=SSE)


async def page_of(username: str) -> Page:
    user, _ = await sync_to_async(user_cookie)(username)
    client = AsyncClient(enforce_csrf_checks=True)
    await client.aforce_login(user)
    token = (await client.get("/api/csrf")).json()["csrfToken"]
    return Page(client, f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}", token)


@pytest_asyncio.fixture
async def bob_chat() -> None:
    """Bob's chat ``bob-chat``: his question ``bob-q`` and its answer ``bob-a``."""
    bob = await get_user_model().objects.acreate(username="bob")
    chat = await Conversation.objects.acreate(pk="bob-chat", owner=bob, title="bob's")
    await Message.objects.acreate(
        pk="bob-q", conversation=chat, role="user", position=0, parts=[{"type": "text", "text": "hi"}]
    )
    await Message.objects.acreate(pk="bob-a", conversation=chat, role="assistant", position=1, parts=[])


async def nothing_written() -> tuple[int, int, int]:
    return (await Conversation.objects.acount(), await Message.objects.acount(), await Run.objects.acount())


Request = Callable[[Page, str], Awaitable[Any]]

#: Each HTTP endpoint, asked about a chat id.
HTTP: dict[str, Request] = {
    "chat": lambda page, chat: page.post("/api/chat", chat_body(chat)),
    "agui": lambda page, chat: page.post("/api/agui", agui_body(chat)),
    "resume": lambda page, chat: page.client.get(f"/api/chat/{chat}/stream"),
    "stop": lambda page, chat: page.post(f"/api/chat/{chat}/stop", {}),
    "stored": lambda page, chat: page.client.get(f"/api/chat/{chat}/messages/bob-a/stream"),
    "steer": lambda page, chat: page.post(f"/api/chat/{chat}/steer", {"message": testing.user_message("faster")}),
    "queue": lambda page, chat: page.post(f"/api/chat/{chat}/queue", {"message": testing.user_message("then")}),
}
POSTS = ("chat", "agui", "stop", "steer", "queue")
BODIES = ("chat", "agui")


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json"
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code
    return error


async def bobs_chat_as_it_was() -> list[tuple[str, str]]:
    """Bob's chat ``bob-chat``, message by message: what another owner's
    requests must leave as it is."""
    chat = await Conversation.objects.aget(pk="bob-chat")
    return [(m.pk, m.role) async for m in chat.messages.order_by("position")]


@pytest.mark.parametrize("endpoint", list(HTTP))
async def test_another_owners_chat_id_is_answered_as_a_free_one(endpoint: str, bob_chat: None) -> None:
    """Chat ids are per owner: Bob's chat id, sent by Alice, names no chat
    of hers, exactly as a free id does: a message starts a chat of her own
    under it, anything else is the one 404. Bob's chat is not touched."""
    alice = await page_of("alice")
    bobs = await bobs_chat_as_it_was()
    with override_settings(UISTREAM=DEMO):
        foreign = await HTTP[endpoint](alice, "bob-chat")
        if endpoint in BODIES:
            async for _ in foreign.streaming_content:
                pass
        missing = await HTTP[endpoint](alice, "no-such-chat")
    if endpoint in BODIES:  # a message starts a chat of Alice's own
        assert (foreign.status_code, missing.status_code) == (200, 200)
        await runs_finished()
        alice_user = await get_user_model().objects.aget(username="alice")
        hers = Conversation.objects.filter(owner=alice_user).order_by("client_id").values_list("client_id", flat=True)
        assert [c async for c in hers] == ["bob-chat", "no-such-chat"]
    else:
        before = await nothing_written()
        assert_error(missing, 404, "not_found")
        assert missing.content == foreign.content
        assert await nothing_written() == before
    assert await bobs_chat_as_it_was() == bobs


@pytest.mark.parametrize("frame", ["send", "resume", "steer"])
async def test_over_the_websocket_too(frame: str, bob_chat: None) -> None:
    alice = await page_of("alice")
    before = await nothing_written()
    with override_settings(UISTREAM=DEMO):
        async with Socket(alice.cookie) as page:
            for rid, chat in (("a", "bob-chat"), ("b", "no-such-chat"), ("c", "../etc")):
                if frame == "send":
                    await page.send({**send_frame(rid, chat), "trigger": "regenerate-message", "messages": []})
                elif frame == "steer":
                    await page.send(
                        {"type": "steer", "requestId": rid, "id": chat, "message": testing.user_message("faster")}
                    )
                else:
                    await page.send({"type": "resume", "requestId": rid, "id": chat, "headers": {}, "body": {}})
                (answer,) = await page.until(rid)
                if frame == "send" and chat == "../etc":
                    # A send's id is a body field, refused as the POST's is (400 invalid, "id").
                    assert (answer["type"], answer["code"]) == ("error", "invalid")
                    assert answer["errorText"].startswith("id must be")
                else:
                    assert answer == {
                        "type": "error",
                        "requestId": rid,
                        "code": "not_found",
                        "errorText": NOT_FOUND_TEXT,
                    }
    assert await nothing_written() == before


@pytest.mark.parametrize("endpoint", ["resume", "stop", "stored", "steer"])
@pytest.mark.parametrize("chat", ["a%2Fb", "..%2F..%2Fadmin", "x" * 129, "a%20b"])
async def test_an_id_with_path_characters_is_the_same_json_404(endpoint: str, chat: str) -> None:
    alice = await page_of("alice")
    with override_settings(UISTREAM=DEMO):
        assert_error(await HTTP[endpoint](alice, chat), 404, "not_found")


@pytest.mark.parametrize("endpoint", list(HTTP))
async def test_the_wrong_method_is_a_json_405(endpoint: str) -> None:
    alice = await page_of("alice")
    path = {"chat": "/api/chat", "agui": "/api/agui", "resume": "/api/chat/c1/stream", "stop": "/api/chat/c1/stop"}
    path["stored"] = "/api/chat/c1/messages/m1/stream"
    path["steer"], path["queue"] = "/api/chat/c1/steer", "/api/chat/c1/queue"
    method = alice.client.get if endpoint in POSTS else alice.client.post
    with override_settings(UISTREAM=DEMO):
        response = await method(path[endpoint])
    assert_error(response, 405, "method_not_allowed")
    assert response["Allow"] in ("POST, OPTIONS", "GET, OPTIONS")


@pytest.mark.parametrize("endpoint", POSTS)
async def test_csrf_comes_before_authentication_and_ownership(endpoint: str, bob_chat: None) -> None:
    alice = await page_of("alice")
    before = await nothing_written()
    with override_settings(UISTREAM=DEMO):
        # Whose chat it is makes no difference: the CSRF check comes first.
        for chat in ("bob-chat", "alice-chat"):
            path = {"chat": "/api/chat", "agui": "/api/agui"}.get(endpoint, f"/api/chat/{chat}/{endpoint}")
            steering = {"message": testing.user_message("faster")}
            body = {"chat": chat_body(chat), "agui": agui_body(chat), "stop": {}}.get(endpoint, steering)
            assert_error(await alice.post(path, body, csrf=False), 403, "csrf_failed")
        # So does a visitor who is not signed in: 403, not 401.
        anonymous = AsyncClient(enforce_csrf_checks=True)
        await anonymous.get("/api/csrf")
        with override_settings(UISTREAM={**DEMO, "ALLOW_ANONYMOUS": False}):
            response = await anonymous.post(path, json.dumps(body), content_type="application/json")
        assert_error(response, 403, "csrf_failed")
    assert await nothing_written() == before


@pytest.mark.parametrize("endpoint", list(HTTP))
async def test_nobody_signed_in_is_a_json_401(endpoint: str, bob_chat: None) -> None:
    anonymous = AsyncClient(enforce_csrf_checks=True)
    token = (await anonymous.get("/api/csrf")).json()["csrfToken"]
    page = Page(anonymous, "", token)
    before = await nothing_written()
    with override_settings(UISTREAM={**DEMO, "ALLOW_ANONYMOUS": False}):
        error = assert_error(await HTTP[endpoint](page, "bob-chat"), 401, "not_authenticated")
    # The refusal names the switch that lets visitors chat (always, not only under DEBUG).
    assert error["message"] == (
        "log in to chat (anonymous chats are off; UISTREAM['ALLOW_ANONYMOUS'] = True "
        "lets visitors chat by their session)"
    )
    assert await nothing_written() == before


@pytest.mark.parametrize("endpoint", BODIES)
async def test_the_body_is_read_before_ownership(endpoint: str, bob_chat: None) -> None:
    """A malformed request about another owner's chat is refused for its
    body, as it would be about a missing one: the 404 comes last."""
    alice = await page_of("alice")
    path = f"/api/{endpoint}"
    with override_settings(UISTREAM={**DEMO, "MAX_REQUEST_BYTES": 1024 * 1024}):
        for chat in ("bob-chat", "no-such-chat"):
            assert_error(await alice.post(path, b"{nope"), 400, "invalid_json")
            body = chat_body(chat) if endpoint == "chat" else agui_body(chat)
            assert_error(
                await alice.post(path, json.dumps(body), content_type="text/html"), 415, "unsupported_media_type"
            )
            huge = json.dumps({**body, "pad": "x" * 2_000_000})
            assert_error(await alice.post(path, huge), 413, "too_large")


@pytest.mark.parametrize("endpoint", ["steer", "queue"])
async def test_a_steering_body_is_read_before_ownership(endpoint: str, bob_chat: None) -> None:
    alice = await page_of("alice")
    with override_settings(UISTREAM={**DEMO, "MAX_REQUEST_BYTES": 1024 * 1024}):
        for chat in ("bob-chat", "no-such-chat"):
            path = f"/api/chat/{chat}/{endpoint}"
            assert_error(await alice.post(path, b"{nope"), 400, "invalid_json")
            body = {"message": testing.user_message("faster")}
            assert_error(
                await alice.post(path, json.dumps(body), content_type="text/html"), 415, "unsupported_media_type"
            )
            assert_error(await alice.post(path, json.dumps({**body, "pad": "x" * 2_000_000})), 413, "too_large")
            error = assert_error(await alice.post(path, {"message": {"id": "m1", "role": "user"}}), 400, "invalid")
            assert error["field"] == "message.parts"
        # A well-formed one about another owner's chat is the one 404.
        assert_error(await alice.post(f"/api/chat/bob-chat/{endpoint}", body), 404, "not_found")
    assert not [row async for row in SteeringMessage.objects.all()]


@pytest.mark.parametrize("endpoint", BODIES)
async def test_another_owners_message_id_is_yours_to_use(endpoint: str, bob_chat: None) -> None:
    """Message ids are unique within a chat: reusing one of another owner's
    chats is not refused (a refusal would tell that the id exists)."""
    alice = await page_of("alice")
    with override_settings(UISTREAM=DEMO):
        body = chat_body("alice-chat", "bob-q") if endpoint == "chat" else agui_body("alice-chat", "bob-q")
        response = await alice.post(f"/api/{endpoint}", body)
        assert response.status_code == 200
        async for _ in response.streaming_content:
            pass
        await runs_finished()
        # And the client knows the message by its own id.
        messages = (await alice.client.get("/api/conversations/alice-chat/messages/")).json()["results"]
    assert messages[0]["id"] == "bob-q"
    bobs = await Message.objects.aget(pk="bob-q")
    assert bobs.conversation_id == "bob-chat"
    # A second send of it in the same chat is the duplicate it is.
    with override_settings(UISTREAM=DEMO):
        again = await alice.post("/api/chat", chat_body("alice-chat", "bob-q"))
    assert_error(again, 409, "duplicate")


@pytest.mark.parametrize("endpoint", BODIES)
async def test_a_nul_in_a_new_chats_first_words_is_answered(endpoint: str) -> None:
    """PostgreSQL refuses a NUL in a text column: the chat's title (its
    first words) holds it as U+FFFD, as the stored message does."""
    alice = await page_of("alice")
    text = "count\x00 to 2"
    with override_settings(UISTREAM=DEMO):
        body = chat_body("alice-chat", text=text) if endpoint == "chat" else agui_body("alice-chat", text=text)
        response = await alice.post(f"/api/{endpoint}", body)
        assert response.status_code == 200
        async for _ in response.streaming_content:
            pass
        await runs_finished()
    chat = await Conversation.objects.aget(client_id="alice-chat")
    assert chat.title == "count\ufffd to 2"
    asked = await chat.messages.aget(role="user")
    assert asked.parts == [{"type": "text", "text": "count\ufffd to 2"}]
    assert await Run.objects.filter(conversation=chat, status="completed").aexists()


async def test_a_websocket_frame_that_cannot_be_read_closes_the_socket() -> None:
    alice = await page_of("alice")
    with override_settings(UISTREAM={**DEMO, "MAX_REQUEST_BYTES": 10_000}):
        async with Socket(alice.cookie) as page:
            await page.send("{nope")
            assert await page.closed() in (1008, 4008)
        async with Socket(alice.cookie) as page:
            await page.send(send_frame("r1", "c1", "x" * 20_000))
            assert await page.closed() in (1009, 4009)


@pytest.mark.parametrize("endpoint", BODIES)
async def test_a_new_visitor_sending_another_owners_chat_id_starts_a_chat_of_their_own(
    endpoint: str, bob_chat: None
) -> None:
    """A visitor's first message under Bob's chat id is a new chat, theirs
    (their session is made for it, as for any first message); Bob's chat
    is not touched."""
    from django.contrib.sessions.models import Session

    bobs = await bobs_chat_as_it_was()
    anonymous = AsyncClient(enforce_csrf_checks=True)
    token = (await anonymous.get("/api/csrf")).json()["csrfToken"]
    page = Page(anonymous, "", token)
    with override_settings(UISTREAM=DEMO):
        response = await HTTP[endpoint](page, "bob-chat")
        assert response.status_code == 200
        async for _ in response.streaming_content:
            pass
    await runs_finished()
    assert await Session.objects.acount() == 1
    theirs = await Conversation.objects.aget(owner=None, client_id="bob-chat")
    assert theirs.pk != "bob-chat"
    assert theirs.session_key == anonymous.cookies[settings.SESSION_COOKIE_NAME].value
    assert await bobs_chat_as_it_was() == bobs
