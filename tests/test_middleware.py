"""``uistream_app.middleware``: Django's seven default middleware on the
event loop. Through Django's ASGI handler (``AsyncClient``), the same visits
with Django's own classes and with ours give the same answers, cookies and
headers (a sign-in saved in the session, a CSRF refusal, a message carried
over a redirect, the slash redirect, the security headers), with sessions
kept in the database and with ``CSRF_USE_SESSIONS``; and ours hop to a
thread for none of their work on a request that needs none.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import SyncToAsync
from django.contrib import messages
from django.contrib.auth import get_user_model, login
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import get_token
from django.shortcuts import redirect
from django.test import AsyncClient, override_settings
from django.urls import path

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

DJANGO = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
OURS = [path.replace(path.rsplit(".", 1)[0], "uistream_app.middleware") for path in DJANGO]


def form(request: HttpRequest) -> HttpResponse:
    return HttpResponse(get_token(request))


def sign_in(request: HttpRequest) -> HttpResponse:
    user = get_user_model().objects.get(username=request.POST["username"])
    login(request, user)
    messages.success(request, f"welcome {user.get_username()}")
    return redirect("/mw/me/")


def me(request: HttpRequest) -> JsonResponse:
    return JsonResponse(
        {
            "user": request.user.get_username() if request.user.is_authenticated else None,
            "messages": [str(m) for m in messages.get_messages(request)],
        }
    )


async def ping(request: HttpRequest) -> HttpResponse:
    return HttpResponse(b"pong")


urlpatterns = [
    path("mw/form/", form),
    path("mw/sign-in/", sign_in),
    path("mw/me/", me),
    path("mw/ping/", ping),
]


@pytest.fixture
def hops() -> Iterator[list[str]]:
    """The sync calls sent to a thread while a test runs, by name."""
    seen: list[str] = []
    original = SyncToAsync.__call__

    async def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await original(self, *args, **kwargs)

    SyncToAsync.__call__ = counted  # type: ignore[method-assign]
    yield seen
    SyncToAsync.__call__ = original  # type: ignore[method-assign]


def _visible(response: Any) -> dict[str, Any]:
    """What a browser sees of a response: its status, headers and cookies
    (the cookies' values, random per visit, left out; the body is the
    caller's to add)."""
    headers = {k: v for k, v in response.headers.items() if k not in ("Set-Cookie", "Content-Length")}
    cookies = {
        name: (morsel["max-age"], morsel["samesite"], bool(morsel.value)) for name, morsel in response.cookies.items()
    }
    return {"status": response.status_code, "headers": headers, "cookies": cookies}


async def _visit(middleware: list[str], username: str, **extra: Any) -> list[dict[str, Any]]:
    with override_settings(MIDDLEWARE=middleware, ROOT_URLCONF=__name__, **extra):
        seen = []
        client = AsyncClient(enforce_csrf_checks=True)
        page = await client.get("/mw/form/")
        seen.append(_visible(page))
        token = page.content.decode()
        refused = await client.post("/mw/sign-in/", {"username": username})
        seen.append({**_visible(refused), "refused": b"CSRF" in refused.content})
        signed_in = await client.post("/mw/sign-in/", {"username": username}, headers={"X-CSRFToken": token})
        seen.append({**_visible(signed_in), "to": signed_in.get("Location")})
        first = await client.get("/mw/me/")
        seen.append({**_visible(first), "body": first.json()})
        again = await client.get("/mw/me/")
        seen.append({**_visible(again), "body": again.json()})
        slash = await client.get("/mw/me")
        seen.append({**_visible(slash), "to": slash.get("Location")})
        return seen


@pytest.mark.parametrize(
    "extra",
    [{}, {"CSRF_USE_SESSIONS": True}, {"SESSION_SAVE_EVERY_REQUEST": True}],
    ids=["defaults", "csrf-in-session", "save-every-request"],
)
async def test_our_middleware_answers_every_visit_as_djangos_does(extra: dict[str, Any]) -> None:
    await get_user_model().objects.acreate(username="ada")
    django = await _visit(DJANGO, "ada", **extra)
    ours = await _visit(OURS, "ada", **extra)
    assert ours == django
    # And the visits are what they say: a refusal without the token, the
    # sign-in kept by the session, the message shown once.
    assert [v["status"] for v in ours] == [200, 403, 302, 200, 200, 301]
    assert ours[1]["refused"] is True
    assert ours[3]["body"] == {"user": "ada", "messages": ["welcome ada"]}
    assert ours[4]["body"]["messages"] == []
    assert ours[0]["headers"]["X-Frame-Options"] == "DENY"


async def test_a_request_that_needs_no_thread_gets_none(hops: list[str]) -> None:
    counts = {}
    for name, middleware in (("none", []), ("django", DJANGO), ("ours", OURS)):
        with override_settings(MIDDLEWARE=middleware, ROOT_URLCONF=__name__):
            client = AsyncClient()
            await client.get("/mw/ping/")  # the session cookie is not needed: nothing reads it
            hops.clear()
            assert (await client.get("/mw/ping/")).content == b"pong"
            counts[name] = len(hops)
    # Django's seven hop to a thread for each of their methods (13 here);
    # ours add nothing to what the handler itself sends to a thread.
    assert counts["django"] >= counts["none"] + 13
    assert counts["ours"] == counts["none"]
