"""Small gaps the real ai@7 client noticed (issue 19, part 5), through its
useChat core (``tests/js/chat_client.mjs``) against a real server:

* a continuation (after an approval) begins with ``start``, as
  ``streamText``'s does, its answers before the model's step;
* with ``MESSAGE_METADATA``, the answer carries metadata on ``start`` and
  ``finish`` as the SDK's ``messageMetadata`` option puts it, and the
  client merges the two into what we store.

(Runs settled ``interrupted`` store ai@7's ``interrupted`` finish reason:
``test_shutdown.py`` and ``test_sweeper.py``.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from uistream_app.models import Run
from uistream_app.recording import read_log

from .server import serve_demo
from .test_chat_http import Browser, wait_for
from .test_chat_real_client import run_client, stored_messages

pytestmark = pytest.mark.django_db(transaction=True)

EMAIL = "email ada@example.com saying the build is green"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from serve_demo(monkeypatch, 1)


def settled() -> None:
    wait_for(lambda: not Run.objects.filter(status="running").exists(), "the runs to be stored")


def chunks_of(run: Run) -> list[dict[str, Any]]:
    return [entry.chunk for entry in read_log(run)]


@pytest.mark.parametrize("approved", [True, False])
def test_a_continuation_begins_with_start_like_stream_texts(node: str, server: str, approved: bool) -> None:
    browser = Browser(server)
    chat_id = f"cont-{approved}"
    out = run_client(node, server, browser, chatId=chat_id, version=7, steps=[{"send": EMAIL}, {"approve": approved}])
    assert out["error"] is None
    settled()
    _first, continuation = Run.objects.filter(conversation__client_id=chat_id).order_by("started_at")
    answer = stored_messages(chat_id)[-1]
    sent = chunks_of(continuation)
    # start (the same message), then the answer to the pending call, and
    # only then the model's step: streamText's order.
    assert sent[0] == {"type": "start", "messageId": answer["id"]}
    assert sent[1]["type"] == ("tool-output-available" if approved else "tool-output-denied")
    assert sent[2]["type"] == "start-step"
    assert sent[-1]["type"] == "finish"
    # The client continued the same message and built what we stored.
    assert out["messages"] == stored_messages(chat_id)
    assert [m["role"] for m in out["messages"]] == ["user", "assistant"]


def test_message_metadata_on_start_and_finish(node: str, server: str) -> None:
    with override_settings(UISTREAM={**settings.UISTREAM, "MESSAGE_METADATA": True}):
        browser = Browser(server)
        out = run_client(node, server, browser, chatId="meta", version=7, steps=[{"send": "count to 4"}])
        assert out["error"] is None
        settled()
    run = Run.objects.get(conversation__client_id="meta")
    sent = chunks_of(run)
    start, finish = sent[0], sent[-1]
    assert start["type"] == "start"
    assert start["messageMetadata"] == {"model": run.model, "createdAt": int(run.started_at.timestamp() * 1000)}
    assert finish["type"] == "finish"
    meta = finish["messageMetadata"]
    assert meta["model"] == run.model
    # The usage the run stored, in the SDK's names.
    assert meta["usage"] == {
        "inputTokens": run.usage["input_tokens"],
        "outputTokens": run.usage["output_tokens"],
        "totalTokens": run.usage["input_tokens"] + run.usage["output_tokens"],
    }
    assert 0 <= meta["timings"]["firstChunkMs"] <= meta["timings"]["durationMs"]
    # The client merged start's and finish's metadata; we stored the same.
    answer = out["messages"][-1]
    assert answer["metadata"] == {**start["messageMetadata"], **meta}
    assert out["messages"] == stored_messages("meta")


def test_without_the_setting_no_metadata_is_sent(node: str, server: str) -> None:
    browser = Browser(server)
    out = run_client(node, server, browser, chatId="no-meta", version=7, steps=[{"send": "count to 2"}])
    settled()
    sent = chunks_of(Run.objects.get(conversation__client_id="no-meta"))
    assert "messageMetadata" not in sent[0]
    assert "messageMetadata" not in sent[-1]
    assert "metadata" not in out["messages"][-1]
