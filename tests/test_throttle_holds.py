"""The chat throttle holds through a real server, daphne and uvicorn: an
anonymous visitor's WebSocket send over the rate gets the ``throttled``
error frame (not ``internal``), and an ``X-Forwarded-For`` the client
writes itself chooses no new counter, unless the project says how many
proxies to trust (``REST_FRAMEWORK["NUM_PROXIES"]``; the demo's
``UISTREAM_DEMO_NUM_PROXIES``), and then only the hop those proxies wrote
counts."""

from __future__ import annotations

import time
from typing import Any

import pytest

from uistream_app.models import Conversation

from .server import demo_server, shared_database_url
from .test_chat_http import Browser
from .test_redis_outage import cookie_of, frames_until_the_end, socket_frame

pytestmark = pytest.mark.django_db(transaction=True)

WITHIN = 20.0


def env(rate: str, **extra: str) -> dict[str, str]:
    return {
        "DJANGO_SETTINGS_MODULE": "demo_project.settings",
        "DATABASE_URL": shared_database_url(),
        "UISTREAM_DEMO_DELAY_MS": "1",
        "UISTREAM_DEMO_CHAT_RATE": rate,
        # uvicorn believes X-Forwarded-For from the peers it trusts,
        # 127.0.0.1 by default: here the client is a stranger to it, as a
        # visitor on the internet is (daphne reads no proxy headers unless told).
        "FORWARDED_ALLOW_IPS": "192.0.2.1",
        **extra,
    }


@pytest.fixture(params=["daphne", "uvicorn"])
def server(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def chat(browser: Browser, chat_id: str, forwarded: str | None = None) -> Any:
    headers = {"X-CSRFToken": browser.token}
    if forwarded is not None:
        headers["X-Forwarded-For"] = forwarded
    body = browser.chat_body(chat_id, "count to 2")
    return browser.client.post("/api/chat", json=body, headers=headers)


def error_code(response: Any) -> str:
    assert response.headers["content-type"].startswith("application/json"), response.text
    return str(response.json()["error"]["code"])


def ws_connect(base: str, browser: Browser, forwarded: str | None = None) -> Any:
    from websockets.sync.client import connect

    headers = {"Cookie": cookie_of(browser)}
    if forwarded is not None:
        headers["X-Forwarded-For"] = forwarded
    return connect(base.replace("http://", "ws://") + "/ws/chat/", origin=base, additional_headers=headers)  # type: ignore[arg-type]


def ws_send(socket: Any, request_id: str, chat_id: str) -> list[dict[str, Any]]:
    socket.send(socket_frame("send", request_id, chat_id, "count to 2", "u1"))
    return frames_until_the_end(socket, request_id, time.monotonic() + WITHIN)


def test_an_anonymous_visitor_over_the_rate_is_throttled_on_the_socket_whatever_it_forwards(server: str) -> None:
    with demo_server(server, env("2/min")) as handle:
        visitor = Browser(handle.url)
        # The visitor's session, and the first of two.
        assert chat(visitor, "x-1", forwarded="10.0.0.1").status_code == 200
        with ws_connect(handle.url, visitor, forwarded="10.0.0.2") as socket:
            assert ws_send(socket, "q1", "x-2")[-1]["type"] == "end"
            refused = ws_send(socket, "q2", "x-3")
        # A header of its own choosing starts no new count.
        again = chat(visitor, "x-4", forwarded="10.0.0.3")
    assert [(f["type"], f.get("code")) for f in refused] == [("error", "throttled")]
    assert (again.status_code, error_code(again)) == (429, "throttled")
    assert int(again.headers["Retry-After"]) >= 1
    assert set(Conversation.objects.values_list("client_id", flat=True)) == {"x-1", "x-2"}


def test_behind_a_configured_proxy_the_hop_it_wrote_is_counted() -> None:
    # One proxy: the last hop is the address it saw; what the client put
    # before it is the client's and counts for nothing.
    with demo_server("daphne", env("1/min", UISTREAM_DEMO_NUM_PROXIES="1")) as handle:
        first, second = Browser(handle.url), Browser(handle.url)
        assert chat(first, "p-1", forwarded="6.6.6.6, 10.0.0.1").status_code == 200
        again = chat(first, "p-2", forwarded="7.7.7.7, 10.0.0.1")
        assert (again.status_code, error_code(again)) == (429, "throttled")
        assert chat(second, "p-3", forwarded="6.6.6.6, 10.0.0.2").status_code == 200
        with ws_connect(handle.url, first, forwarded="8.8.8.8, 10.0.0.1") as socket:
            refused = ws_send(socket, "q1", "p-4")
    assert [(f["type"], f.get("code")) for f in refused] == [("error", "throttled")]
    assert set(Conversation.objects.values_list("client_id", flat=True)) == {"p-1", "p-3"}
