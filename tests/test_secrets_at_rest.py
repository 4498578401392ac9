"""No credential is stored or logged (issue 31): a provider whose error
echoes the request's headers, ``Authorization`` and ``x-api-key``
included, fails the run through a real server, and neither the stored
``Run.error_detail``, the log, nor the run's page in the admin holds the
key; a row stored before details were redacted is redacted when shown."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from uistream_app.models import Run
from uistream_app.protocol.redact import REDACTED, redact
from uistream_app.runs.anthropic import AnthropicModel
from uistream_app.runs.openai import OpenAIChatModel

from .runs.chat_server import ChatServer, Reply
from .server import serve_demo
from .test_chat_http import Browser, read_chunks, wait_for
from .test_providers_real_client import FakeProvider, use_model

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def provider() -> Iterator[ChatServer]:
    with FakeProvider() as chat:
        yield chat


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from serve_demo(monkeypatch, 0)


def staff_client() -> Client:
    staff = Client()
    staff.force_login(get_user_model().objects.create_superuser("boss", "boss@example.com", "pw"))
    return staff


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_provider_error_echoing_the_key_stores_logs_and_shows_no_key(
    api: str,
    server: str,
    provider: ChatServer,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A key shaped like OpenAI's, and one shaped like nothing (known only
    # as the configured value).
    key = f"sk-proj-{secrets.token_urlsafe(32)}" if api == "openai" else f"plain{secrets.token_hex(16)}"
    monkeypatch.setenv("ANTHROPIC_API_KEY", key if api == "anthropic" else "")
    provider.add(Reply(401, echo=True))
    model: Any = (
        OpenAIChatModel("gpt-test", base_url=provider.base_url, api_key=key, max_retries=0)
        if api == "openai"
        else AnthropicModel("claude-test", base_url=provider.base_url, api_key=key, max_retries=0)
    )
    use_model(settings, model)
    browser = Browser(server)

    with caplog.at_level("DEBUG"), browser.stream("leaky", "hello") as response:
        chunks, _done = read_chunks(response)
        wait_for(lambda: not Run.objects.filter(status="running").exists(), "the run to be stored")

    # The provider did get the key, and echoed it.
    sent = provider.requests[0].headers
    assert key in (sent.get("authorization", "") + sent.get("x-api-key", ""))
    assert [c["errorText"] for c in chunks if c["type"] == "error"] == ["An error occurred."]
    run = Run.objects.get()
    assert run.status == "failed"
    assert "401" in run.error_detail
    assert REDACTED in run.error_detail
    assert key not in run.error_detail
    assert "401" in caplog.text  # the failure is logged, without the key
    assert key not in caplog.text
    page = staff_client().get(f"/admin/uistream_app/run/{run.pk}/change/")
    assert page.status_code == 200
    assert "Error detail" in page.content.decode()
    assert key not in page.content.decode()


def test_a_detail_stored_before_redaction_is_redacted_on_the_runs_page(server: str) -> None:
    browser = Browser(server)
    with browser.stream("old", "count to 2") as response:
        read_chunks(response)
    wait_for(lambda: not Run.objects.filter(status="running").exists(), "the run to be stored")
    key = f"sk-ant-api03-{secrets.token_urlsafe(32)}"
    detail = f"ModelHTTPError('model provider answered HTTP 401: {json.dumps({'x-api-key': key})}')"
    Run.objects.update(status="failed", error_detail=detail)
    page = staff_client().get(f"/admin/uistream_app/run/{Run.objects.get().pk}/change/").content.decode()
    assert key not in page
    assert "model provider answered HTTP 401" in page
    assert REDACTED in page


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Authorization: Bearer abcdefghijklmnop\nx-request-id: 7", "x-request-id: 7"),
        ('{"headers": {"x-api-key": "k-1234567890", "accept": "json"}}', '"accept": "json"'),
        ("{'Cookie': 'sessionid=abc; csrftoken=def', 'Host': 'api'}", "'Host': 'api'"),
        ('{"detail": "{\\"authorization\\": \\"Bearer zzzzzzzz\\"}"}', '{"detail": '),
        ("GET https://api.example/v1?key=AIzaSyA1234567890123456789012345678901&alt=sse", "&alt=sse"),
        ("Incorrect API key provided: sk-proj-abcdefghijklmnopqrstuvwx.", "Incorrect API key provided: "),
        ("Proxy-Authorization: Basic dXNlcjpwYXNzd29yZA==", "Proxy-Authorization: "),
    ],
)
def test_redact_replaces_the_credential_and_keeps_the_rest(text: str, kept: str) -> None:
    out = redact(text)
    assert REDACTED in out
    assert kept in out
    for secret in ("abcdefghijklmnop", "k-1234567890", "sessionid=abc", "zzzzzzzz", "AIzaSy", "sk-proj", "dXNlcj"):
        assert secret not in out


def test_redact_replaces_a_configured_keys_value_wherever_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "unshaped-value-42")
    assert redact("the server said unshaped-value-42 is wrong") == f"the server said {REDACTED} is wrong"
    assert redact("a given one: secret-of-the-model", ["secret-of-the-model", None]) == f"a given one: {REDACTED}"
    assert redact("model provider answered HTTP 401: invalid x-api-key") == (
        "model provider answered HTTP 401: invalid x-api-key"
    )
