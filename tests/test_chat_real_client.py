"""useChat's own core (``AbstractChat`` + ``DefaultChatTransport`` of the
pinned ai@5, 6 and 7) chatting with the view over a real server.

What the real client builds from our stream must be what we stored, for
every client version; regenerate replaces the answer in both places.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from uistream_app.models import Conversation, Run

from .conftest import JS_DIR
from .server import serve_demo
from .test_chat_http import Browser, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from serve_demo(monkeypatch, 1)


def run_client(node: str, base: str, browser: Browser, **options: Any) -> dict[str, Any]:
    cookie = "; ".join(f"{k}={v}" for k, v in browser.client.cookies.items())
    payload = {"base": base, "cookie": cookie, "csrf": browser.token, **options}
    result = subprocess.run(
        [node, str(JS_DIR / "chat_client.mjs"), json.dumps(payload)],
        capture_output=True,
        text=True,
        cwd=JS_DIR,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def stored_messages(chat_id: str) -> list[dict[str, Any]]:
    conversation = Conversation.objects.get(client_id=chat_id)
    return [m.as_ui_message() for m in conversation.messages.current().order_by("position")]


@pytest.mark.parametrize("version", [7, 6, 5])
def test_the_real_client_builds_what_we_store(node: str, server: str, version: int) -> None:
    browser = Browser(server)
    chat_id = f"real-{version}"
    out = run_client(
        node,
        server,
        browser,
        chatId=chat_id,
        version=version,
        steps=[{"send": "What's the weather in Oslo?"}, {"send": "compute 6*7"}],
    )
    assert out["error"] is None
    assert out["finished"] == 2
    wait_for(lambda: not Run.objects.filter(status="running").exists(), "the runs to be stored")
    stored = stored_messages(chat_id)
    assert [m["role"] for m in stored] == ["user", "assistant", "user", "assistant"]
    if version == 7:
        assert out["messages"] == stored
    else:
        # Older clients build the same turns; compare what they show.
        assert [m["id"] for m in out["messages"]] == [m["id"] for m in stored]
        assert [text(m) for m in out["messages"]] == [text(m) for m in stored]
    answer = stored[1]
    tool_parts = [p for p in answer["parts"] if p["type"] == "tool-get_weather"]
    assert tool_parts
    assert tool_parts[0]["state"] == "output-available"


def test_regenerate_replaces_the_answer_in_the_client_and_the_database(node: str, server: str) -> None:
    browser = Browser(server)
    out = run_client(
        node, server, browser, chatId="regen", version=7, steps=[{"send": "count to 3"}, {"regenerate": True}]
    )
    assert out["error"] is None
    wait_for(lambda: not Run.objects.filter(status="running").exists(), "the runs to be stored")
    stored = stored_messages("regen")
    assert out["messages"] == stored
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert Run.objects.count() == 2
    # The first answer is kept, off the current branch, with its run.
    first, second = Run.objects.order_by("started_at")
    assert first.message is not None
    assert not first.message.current
    assert second.message is not None
    assert second.message.current
    assert [m.pk for m in second.message.versions()] == [first.message.pk, second.message.pk]


def text(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")
