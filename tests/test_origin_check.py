"""The WebSocket's Origin check (``uistream_app.asgi.CSRFOriginValidator``)
and its hostile frames, through daphne and uvicorn serving the demo's ASGI
application: a handshake from another port or scheme of the same host is
refused, the server's own origin and a ``CSRF_TRUSTED_ORIGINS`` one are
let in; a frame nested past what the parser reads closes the socket with
the protocol's code (docs/protocols.md, rule 1), and one that holds a lone
surrogate beside deep nesting is the ``error`` frame: no traceback in the
server's log, nothing written."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from uistream_app.models import Conversation, Run
from uistream_app.transport.origin_check import origin_allowed, request_origin

from .server import ServerProcess, demo_server, shared_database_url
from .test_chat_http import Browser

SERVERS = ["daphne", "uvicorn"]
TRUSTED = ["https://*.example.com", "http://trusted.test:8443"]
#: How each server hands on the consumer's 1008 (autobahn takes 4008 from daphne's applications).
POLICY_CLOSE = {"daphne": 4008, "uvicorn": 1008}


def scope(host: str | None, scheme: str = "ws", **headers: str) -> dict[str, Any]:
    raw = [(name.replace("_", "-").encode(), value.encode()) for name, value in headers.items()]
    if host is not None:
        raw.append((b"host", host.encode()))
    return {"type": "websocket", "path": "/ws/chat/", "scheme": scheme, "headers": raw}


@override_settings(ALLOWED_HOSTS=["chat.test", "127.0.0.1"], CSRF_TRUSTED_ORIGINS=TRUSTED)
@pytest.mark.parametrize(
    ("origin", "handshake", "allowed"),
    [
        ("http://chat.test", scope("chat.test"), True),
        ("https://chat.test", scope("chat.test", "wss"), True),
        ("http://chat.test:8000", scope("chat.test:8000"), True),
        pytest.param("http://chat.test:9999", scope("chat.test:8000"), False, id="another port"),
        pytest.param("http://chat.test", scope("chat.test:8000"), False, id="the default port of another"),
        pytest.param("https://chat.test", scope("chat.test"), False, id="https to a ws handshake"),
        pytest.param("http://chat.test", scope("chat.test", "wss"), False, id="http to a wss handshake"),
        pytest.param("http://evil.test", scope("evil.test"), False, id="a host not in ALLOWED_HOSTS"),
        pytest.param("null", scope("chat.test"), False, id="null"),
        pytest.param("http://chat.test", scope(None), False, id="no Host"),
        ("https://example.com", scope("chat.test"), True),
        ("https://a.b.example.com", scope("chat.test"), True),
        pytest.param("http://a.example.com", scope("chat.test"), False, id="a trusted wildcard's other scheme"),
        pytest.param("https://badexample.com", scope("chat.test"), False, id="not a subdomain"),
        ("http://trusted.test:8443", scope("chat.test"), True),
        pytest.param("http://trusted.test", scope("chat.test"), False, id="a trusted origin's other port"),
    ],
)
def test_the_origin_is_compared_whole_as_django_csrf_does(
    origin: str, handshake: dict[str, Any], allowed: bool
) -> None:
    assert origin_allowed(origin, handshake) is allowed


@override_settings(
    ALLOWED_HOSTS=["chat.test"], SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https"), USE_X_FORWARDED_HOST=True
)
def test_a_proxy_django_trusts_names_the_origin() -> None:
    behind = scope("internal:8001", x_forwarded_proto="https", x_forwarded_host="chat.test")
    assert request_origin(behind) == "https://chat.test"
    assert origin_allowed("https://chat.test", behind)
    assert not origin_allowed("http://chat.test", behind)


def server_env() -> dict[str, str]:
    uistream = {"ALLOW_ANONYMOUS": True, "MODEL": "demo_project.demo_model.make_model"}
    return {
        "DJANGO_SETTINGS_MODULE": "tests.server_settings",
        "DATABASE_URL": shared_database_url(),
        "UISTREAM_TEST_SETTINGS": json.dumps(uistream),
        "UISTREAM_TEST_CSRF_TRUSTED_ORIGINS": json.dumps(TRUSTED),
        "UISTREAM_DEMO_DELAY_MS": "1",
    }


def open_socket(server: ServerProcess, origin: str, cookie: str, host: str = "127.0.0.1") -> ClientConnection:
    """A socket to ``server`` by the name ``host`` (its Host header), from ``origin``."""
    url = server.url.replace("http://127.0.0.1", f"ws://{host}") + "/ws/chat/"
    return connect(url, origin=origin, additional_headers={"Cookie": cookie}, open_timeout=10)  # type: ignore[arg-type]


def handshake_status(server: ServerProcess, origin: str, cookie: str, host: str = "127.0.0.1") -> int:
    try:
        with open_socket(server, origin, cookie, host):
            return 101
    except InvalidStatus as exc:
        return exc.response.status_code


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def send_text(body: str) -> str:
    return (
        '{"type":"send","requestId":"r1","id":"deep","trigger":"submit-message","headers":{},'
        '"messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"hi"}]}],"body":' + body + "}"
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("server_name", SERVERS)
def test_a_real_server_refuses_another_port_or_scheme_and_hostile_frames(server_name: str) -> None:
    with demo_server(server_name, server_env()) as server:
        browser = Browser(server.url)  # a visitor of the page, with its session cookie
        cookie = "; ".join(f"{name}={value}" for name, value in browser.client.cookies.items())
        port = server.url.rsplit(":", 1)[1]
        other_port = "9999" if port != "9999" else "9998"

        assert handshake_status(server, server.url, cookie) == 101
        assert handshake_status(server, f"http://127.0.0.1:{other_port}", cookie) == 403
        assert handshake_status(server, f"https://127.0.0.1:{port}", cookie) == 403
        assert handshake_status(server, "http://127.0.0.1", cookie) == 403
        assert handshake_status(server, f"http://localhost:{port}", cookie) == 403
        # A CSRF_TRUSTED_ORIGINS origin, exact and by wildcard.
        assert handshake_status(server, "http://trusted.test:8443", cookie) == 101
        assert handshake_status(server, "https://chat.example.com", cookie) == 101
        assert handshake_status(server, "http://chat.example.com", cookie) == 403
        # The page's own origin under another name of ALLOWED_HOSTS.
        assert handshake_status(server, f"http://localhost:{port}", cookie, host="localhost") == 101

        # Nested past what the parser reads: the protocol's close code.
        with open_socket(server, server.url, cookie) as socket:
            socket.send(send_text(nested(10_000)))
            with pytest.raises(ConnectionClosed) as closed:
                socket.recv(timeout=10)
            assert closed.value.rcvd is not None
            assert closed.value.rcvd.code == POLICY_CLOSE[server_name]
        # Readable, deep, with a lone surrogate after the nesting: the
        # ``error`` frame of a body that is not Unicode, the socket still open.
        with open_socket(server, server.url, cookie) as socket:
            socket.send(send_text('{"a":' + nested(900) + ',"s":"\\ud800"}'))
            assert json.loads(socket.recv(timeout=10)) == {
                "type": "error",
                "requestId": "r1",
                "code": "invalid_json",
                "errorText": "the request holds text that is not valid Unicode (a lone surrogate)",
            }
            socket.send(send_text('{"a":' + nested(900) + "}").replace('"r1"', '"r2"'))
            answer = json.loads(socket.recv(timeout=10))
            assert (answer["requestId"], answer["code"]) == ("r2", "too_deep")
        log = server.output()
    assert "Traceback" not in log, log[-3000:]
    assert "RecursionError" not in log
    assert not Conversation.objects.exists()
    assert not Run.objects.exists()
