"""Authentication, permission and throttle classes, DRF's shapes, on every
transport: a chat throttle counted per owner across the useChat POST, the
WebSocket and AG-UI; DRF's own classes and a project's own, unchanged; a
cap on the runs one owner streams at once; token clients without CSRF."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import AsyncClient, override_settings
from django.urls import include, path
from rest_framework.authentication import BaseAuthentication
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle

from demo_project import urls as demo_urls
from uistream_app.models import Conversation, Run
from uistream_app.views import ChatView

from .test_bad_input_everywhere import Page, agui_body, assert_error, chat_body, page_of
from .test_consumer import DEMO, Socket, asession_cookie, runs_finished, send_frame

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

CHAT_THROTTLE = {
    **DEMO,
    "THROTTLE_CLASSES": ["uistream_app.policies.ChatRateThrottle"],
    "THROTTLE_RATES": {"chat": "3/min"},
}


@pytest.fixture(autouse=True)
def fresh_counters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "1")
    cache.clear()


async def drain(response: Any) -> None:
    async for _ in response.streaming_content:
        pass


async def test_one_chat_throttle_counts_an_owner_across_http_websocket_and_agui() -> None:
    alice = await page_of("alice")
    bob = await page_of("bob")
    with override_settings(UISTREAM=CHAT_THROTTLE):
        first = await alice.post("/api/chat", chat_body("a1"))
        assert first.status_code == 200
        await drain(first)
        second = await alice.post("/api/agui", agui_body("a2"))
        assert second.status_code == 200
        await drain(second)
        async with Socket(alice.cookie) as page:
            await page.send(send_frame("r1", "a3", "count to 2"))
            assert (await page.until("r1"))[-1]["type"] == "end"
            await page.send(send_frame("r2", "a4", "count to 2"))
            (refused,) = await page.until("r2")
        assert refused["type"] == "error"
        assert refused["code"] == "throttled"
        for path, body in (("/api/chat", chat_body("a5")), ("/api/agui", agui_body("a5"))):
            response = await alice.post(path, body)
            error = assert_error(response, 429, "throttled")
            assert 1 <= int(response["Retry-After"]) <= 60
            assert error["message"] == f"too many requests: try again in {response['Retry-After']} seconds"
        # Another owner has a counter of their own; resume and stop are not throttled.
        other = await bob.post("/api/chat", chat_body("b1"))
        assert other.status_code == 200
        await drain(other)
        assert (await alice.client.get("/api/chat/a1/stream")).status_code == 204
        assert (await alice.post("/api/chat/a1/stop", {})).status_code == 200
    await runs_finished()
    assert not await Conversation.objects.filter(client_id__in=["a4", "a5"]).aexists()


class OnePerMinute(UserRateThrottle):
    """A project's own throttle, written for DRF."""

    rate = "1/min"


async def test_drf_classes_work_unchanged() -> None:
    anonymous = AsyncClient(enforce_csrf_checks=True)
    token = (await anonymous.get("/api/csrf")).json()["csrfToken"]
    visitor = Page(anonymous, "", token)
    alice = await page_of("alice")
    drf = {
        **DEMO,
        "PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
        "THROTTLE_CLASSES": ["tests.test_policies.OnePerMinute"],
    }
    with override_settings(UISTREAM=drf):
        # DEMO allows anonymous chats, but IsAuthenticated does not.
        assert_error(await visitor.post("/api/chat", chat_body("v1")), 401, "not_authenticated")
        ok = await alice.post("/api/chat", chat_body("a1"))
        assert ok.status_code == 200
        await drain(ok)
        throttled = await alice.post("/api/agui", agui_body("a2"))
        assert_error(throttled, 429, "throttled")
        assert int(throttled["Retry-After"]) >= 1
    await runs_finished()


async def test_a_cap_on_the_runs_an_owner_streams_at_once() -> None:
    alice = await page_of("alice")
    capped = {
        **DEMO,
        "THROTTLE_CLASSES": ["uistream_app.policies.MaxActiveRunsThrottle"],
        "MAX_ACTIVE_RUNS_PER_OWNER": 1,
    }
    with override_settings(UISTREAM=capped):
        long = await alice.post("/api/chat", chat_body("c1", text="count to 3000"))
        assert long.status_code == 200
        reader = aiter(long.streaming_content)
        await anext(reader)  # the run is streaming
        response = await alice.post("/api/chat", chat_body("c2"))
        assert_error(response, 429, "throttled")
        assert response["Retry-After"] == "1"
        assert (await alice.post("/api/chat/c1/stop", {})).json() == {"stopped": True}
        async for _ in reader:
            pass
        await runs_finished()
        again = await alice.post("/api/chat", chat_body("c2"))
        assert again.status_code == 200
        await drain(again)
    await runs_finished()
    assert [r.status async for r in Run.objects.order_by("started_at")] == ["stopped", "completed"]


class HeaderTokenAuthentication(BaseAuthentication):
    """A token client's authentication: ``Authorization: Token <username>``
    (a test stand-in for DRF's ``TokenAuthentication``)."""

    def authenticate(self, request: Any) -> tuple[Any, None] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header.startswith("Token "):
            return None
        user = get_user_model().objects.filter(username=header.removeprefix("Token ")).first()
        return (user, None) if user is not None else None

    def authenticate_header(self, request: Any) -> str:
        return "Token"


async def test_a_token_client_without_cookies_needs_no_csrf_token() -> None:
    await get_user_model().objects.acreate(username="carol")
    tokens = {
        **DEMO,
        "ALLOW_ANONYMOUS": False,
        "AUTHENTICATION_CLASSES": ["tests.test_policies.HeaderTokenAuthentication"],
    }
    client = AsyncClient(enforce_csrf_checks=True)
    body = json.dumps(chat_body("t1"))
    with override_settings(UISTREAM=tokens):
        ok = await client.post(
            "/api/chat", body, content_type="application/json", headers={"Authorization": "Token carol"}
        )
        assert ok.status_code == 200
        await drain(ok)
        # The same request carrying a session cookie could be a forged one: CSRF applies.
        client.cookies["sessionid"] = "whatever"
        forged = await client.post(
            "/api/chat", body, content_type="application/json", headers={"Authorization": "Token carol"}
        )
        assert_error(forged, 403, "csrf_failed")
        client.cookies.pop("sessionid")
        # Without its token it is a browser-like request again: CSRF comes first.
        assert_error(await client.post("/api/chat", body, content_type="application/json"), 403, "csrf_failed")
        wrong = await client.post(
            "/api/chat", body, content_type="application/json", headers={"Authorization": "Token nobody"}
        )
        assert_error(wrong, 401, "not_authenticated")
    await runs_finished()
    conversation = await Conversation.objects.select_related("owner").aget(client_id="t1")
    assert conversation.owner.username == "carol"


async def test_the_throttle_counts_anonymous_visitors_by_address() -> None:
    """A session is shed with a cookie (and a first request has none), so
    anonymous visitors are counted by their address, as DRF's
    ``AnonRateThrottle`` counts them."""
    anonymous = AsyncClient(enforce_csrf_checks=True)
    token = (await anonymous.get("/api/csrf")).json()["csrfToken"]
    visitor = Page(anonymous, "", token)
    with override_settings(UISTREAM={**CHAT_THROTTLE, "THROTTLE_RATES": {"chat": "1/min"}}):
        first = await visitor.post("/api/chat", chat_body("v1"))
        assert first.status_code == 200
        await drain(first)
        assert_error(await visitor.post("/api/chat", chat_body("v2")), 429, "throttled")
        # Dropping the cookie does not start a new count.
        newcomer = AsyncClient(enforce_csrf_checks=True)
        token = (await newcomer.get("/api/csrf")).json()["csrfToken"]
        answer = await Page(newcomer, "", token).post("/api/chat", chat_body("v3"))
    await runs_finished()
    assert_error(answer, 429, "throttled")


class AnonOnePerMinute(AnonRateThrottle):
    """DRF's own anonymous throttle, as a project would list it."""

    rate = "1/min"


async def test_drfs_own_anonymous_throttle_works_on_the_socket() -> None:
    """DRF's ``AnonRateThrottle`` reads ``request.headers``: a socket's
    send is throttled by it (the ``throttled`` frame), not failed."""
    with override_settings(UISTREAM={**DEMO, "THROTTLE_CLASSES": ["tests.test_policies.AnonOnePerMinute"]}):
        async with Socket(await asession_cookie()) as page:
            await page.send(send_frame("r1", "s1", "count to 2"))
            assert (await page.until("r1"))[-1]["type"] == "end"
            await page.send(send_frame("r2", "s2", "count to 2"))
            (refused,) = await page.until("r2")
    await runs_finished()
    assert refused["code"] == "throttled"
    assert [c.client_id async for c in Conversation.objects.all()] == ["s1"]


# -- refusals that name their fix ---------------------------------------------------------


class MembersOnlyChatView(ChatView):
    """A view that keeps anonymous visitors out whatever UISTREAM says."""

    allow_anonymous = False


class OfficeHoursChatView(ChatView):
    def get_allow_anonymous(self) -> bool:
        return False


urlpatterns = [
    path("members/chat", MembersOnlyChatView.as_view()),
    path("office/chat", OfficeHoursChatView.as_view()),
    path("", include(demo_urls)),
]


@pytest.mark.parametrize(
    ("url", "switch"),
    [
        ("/members/chat", "anonymous chats are off; 'MembersOnlyChatView.allow_anonymous' = True lets visitors"),
        ("/office/chat", "anonymous chats are off: 'OfficeHoursChatView.get_allow_anonymous()' returned False"),
        ("/api/chat", "anonymous chats are off; UISTREAM['ALLOW_ANONYMOUS'] = True lets visitors"),
    ],
)
async def test_the_anonymous_refusal_names_the_switch_that_is_off(url: str, switch: str) -> None:
    anonymous = AsyncClient(enforce_csrf_checks=True)
    token = (await anonymous.get("/api/csrf")).json()["csrfToken"]
    uistream = {**DEMO, "ALLOW_ANONYMOUS": url != "/api/chat"}  # the views' own switch wins over the setting
    with override_settings(ROOT_URLCONF="tests.test_policies", UISTREAM=uistream):
        response = await Page(anonymous, "", token).post(url, chat_body("v1"))
    error = assert_error(response, 401, "not_authenticated")
    assert error["message"].startswith(f"log in to chat ({switch}")
    assert not await Conversation.objects.aexists()


STALE = (
    "CSRF verification failed: the token sent in X-CSRFToken does not match the CSRF cookie: it is stale "
    "(a login or logout rotates it); send a fresh one, from GET /api/csrf (its csrfToken) or the csrftoken cookie"
)


async def test_a_token_a_login_rotated_is_called_stale_and_a_fresh_one_works() -> None:
    await get_user_model().objects.acreate_user("carol", password="pw", is_staff=True)
    page = AsyncClient(enforce_csrf_checks=True)
    old = (await page.get("/api/csrf")).json()["csrfToken"]
    # A real login (the admin's form), which rotates the CSRF secret.
    login = await page.post(
        "/admin/login/", {"username": "carol", "password": "pw", "csrfmiddlewaretoken": old, "next": "/admin/"}
    )
    assert login.status_code == 302
    with override_settings(UISTREAM=DEMO):
        stale = await Page(page, "", old).post("/api/chat", chat_body("c1"))
        assert assert_error(stale, 403, "csrf_failed")["message"] == STALE
        # No token at all: as before.
        missing = await Page(page, "", old).post("/api/chat", chat_body("c1"), csrf=False)
        assert assert_error(missing, 403, "csrf_failed")["message"] == (
            "CSRF verification failed: send the X-CSRFToken header"
        )
        # Not a token (a client sending an unset variable).
        bogus = await Page(page, "", "undefined").post("/api/chat", chat_body("c1"))
        assert assert_error(bogus, 403, "csrf_failed")["message"] == (
            "CSRF verification failed: CSRF token from the 'X-Csrftoken' HTTP header has incorrect length: "
            "send the token from GET /api/csrf (its csrfToken) or the csrftoken cookie"
        )
        assert not await Conversation.objects.aexists()
        fresh = (await page.get("/api/csrf")).json()["csrfToken"]
        ok = await Page(page, "", fresh).post("/api/chat", chat_body("c1"))
        assert ok.status_code == 200
        await drain(ok)
    await runs_finished()


async def test_no_csrf_cookie_says_where_to_get_one() -> None:
    cookieless = AsyncClient(enforce_csrf_checks=True)
    with override_settings(UISTREAM=DEMO):
        response = await Page(cookieless, "", "x" * 32).post("/api/chat", chat_body("c1"))
    assert assert_error(response, 403, "csrf_failed")["message"] == (
        "CSRF verification failed: CSRF cookie not set: GET /api/csrf first "
        "(it sets the cookie, and gives the token to send in X-CSRFToken)"
    )
