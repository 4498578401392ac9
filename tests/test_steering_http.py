"""Steering a running answer over HTTP (``POST chat/<id>/steer`` and
``queue``), through a real ASGI server with the demo's offline model: the
message changes the answer's course at the next step boundary, the stream
carries it where ``streamText`` puts it, the stored message holds it, and
every refusal is a JSON 4xx that writes nothing."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.core.cache import cache
from django.test import override_settings

from uistream_app.models import Message, Run, SteeringMessage, StoredFile
from uistream_app.testing import user_message

from .protocol.agui_oracles import assert_accepted
from .server import serve_demo
from .test_agui_http import AGUIStream, run_input, stream_agui, user
from .test_chat_http import Browser, read_chunks, run_finished, text_of, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from serve_demo(monkeypatch, 3)


def steps(chunks: list[dict]) -> list[str]:
    """The text of each step of a stream, in order."""
    out: list[str] = []
    for chunk in chunks:
        if chunk["type"] == "start-step":
            out.append("")
        elif chunk["type"] == "text-delta":
            out[-1] += chunk["delta"]
    return out


def test_a_steer_turns_the_count_round_at_the_next_step(server: str) -> None:
    browser = Browser(server)
    with browser.stream("chat-s", "count to 300 slowly") as response:
        head, _ = read_chunks(response, stop=lambda cs: " 10" in text_of(cs))
        answer = browser.post("/api/chat/chat-s/steer", {"id": "s1", "message": user_message("now count backwards")})
        rest, done = read_chunks(response)
    assert done
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"type": "delivered", "id": "s1", "stepNumber": 1}
    chunks = head + rest
    types = [c["type"] for c in chunks]
    at = types.index("steering-message")
    # Where streamText puts it: after the step and its tool call, before the next step.
    assert types[at - 2 : at + 2] == ["tool-output-available", "finish-step", "steering-message", "start-step"]
    said = [{"type": "text", "text": "now count backwards"}]
    assert chunks[at] == {"type": "steering-message", "id": "s1", "parts": said}
    assert steps(chunks) == [
        " ".join(str(i) for i in range(1, 51)),
        " ".join(str(i) for i in range(49, 0, -1)),
    ]
    wait_for(run_finished, "the run to end")
    stored = Message.objects.get(role="assistant").parts
    kinds = [p["type"] for p in stored]
    assert kinds[kinds.index("steering-message") - 1 : kinds.index("steering-message") + 2] == [
        "tool-pause",
        "steering-message",
        "step-start",
    ]
    assert stored[kinds.index("steering-message")] == {"type": "steering-message", "id": "s1", "parts": said}
    # A resend of the id answers the first outcome, whatever it says now.
    again = browser.post("/api/chat/chat-s/steer", {"id": "s1", "message": user_message("something else")})
    assert again.json() == {"type": "delivered", "id": "s1", "stepNumber": 1}
    assert SteeringMessage.objects.get().outcome == {"type": "delivered", "id": "s1", "stepNumber": 1}
    # No run going: not delivered, the run has finished.
    late = browser.post("/api/chat/chat-s/steer", {"id": "s2", "message": user_message("faster")})
    assert late.json() == {"type": "not-delivered", "id": "s2", "reason": "finished"}


def test_a_queued_message_is_answered_after_the_final_answer(server: str) -> None:
    browser = Browser(server)
    with browser.stream("chat-q", "count to 100 slowly") as response:
        head, _ = read_chunks(response, stop=lambda cs: " 5" in text_of(cs))
        answer = browser.post("/api/chat/chat-q/queue", {"id": "q1", "message": user_message("count to 3")})
        rest, done = read_chunks(response)
    assert done
    assert answer.json() == {"type": "delivered", "id": "q1", "stepNumber": 2}
    chunks = head + rest
    assert steps(chunks)[1:] == [" ".join(str(i) for i in range(51, 101)), "1 2 3"]
    wait_for(run_finished, "the run to end")
    assert Run.objects.get().status == "completed"


def test_a_steer_with_a_file_stores_it_with_the_answer(server: str) -> None:
    browser = Browser(server)
    data = base64.b64encode(b"backwards, please").decode()
    file_part = {"mediaType": "text/plain", "url": f"data:text/plain;base64,{data}", "filename": "a.txt"}
    message = user_message("now count backwards", files=[file_part])
    with browser.stream("chat-f", "count to 300 slowly") as response:
        read_chunks(response, stop=lambda cs: " 10" in text_of(cs))
        answer = browser.post("/api/chat/chat-f/steer", {"id": "s1", "message": message})
        rest, _ = read_chunks(response)
    assert answer.json()["type"] == "delivered"
    sent = next(c for c in rest if c["type"] == "steering-message")
    stored_file = StoredFile.objects.get()
    assert sent["parts"][0]["url"] == f"/api/files/{stored_file.pk}"
    assert stored_file.message.role == "assistant"
    assert browser.client.get(sent["parts"][0]["url"]).content == b"backwards, please"


def test_refusals_are_json_and_write_nothing(server: str) -> None:
    alice = Browser(server)
    exe = "data:application/x-msdownload;base64,AA=="
    with alice.stream("chat-r", "count to 300 slowly") as response:
        read_chunks(response, stop=lambda cs: len(cs) >= 3)
        mallory = Browser(server)
        cases = [
            (mallory.client.post("/api/chat/chat-r/steer", json={"message": user_message("hi")}), 403, "csrf_failed"),
            (mallory.post("/api/chat/chat-r/steer", {"message": user_message("hi")}), 404, "not_found"),
            (alice.post("/api/chat/chat-r/steer", {"id": "a/b", "message": user_message("hi")}), 400, "invalid"),
            (
                alice.post("/api/chat/chat-r/steer", {"message": {**user_message("hi"), "role": "assistant"}}),
                400,
                "invalid",
            ),
            (
                alice.post("/api/chat/chat-r/queue", {"message": {"id": "m", "role": "system", "parts": []}}),
                400,
                "forbidden_role",
            ),
            (
                alice.post(
                    "/api/chat/chat-r/steer",
                    {"message": user_message("x", files=[{"mediaType": "application/x-msdownload", "url": exe}])},
                ),
                415,
                "unsupported_media_type",
            ),
            (
                alice.client.post(
                    "/api/chat/chat-r/steer",
                    content=b"{",
                    headers={"X-CSRFToken": alice.token, "Content-Type": "application/json"},
                ),
                400,
                "invalid_json",
            ),
        ]
        for resp, status, code in cases:
            assert resp.status_code == status, resp.text
            assert resp.json()["error"]["code"] == code, resp.text
        assert alice.post("/api/chat/chat-r/stop").json() == {"stopped": True}
        read_chunks(response)
    assert not SteeringMessage.objects.exists()
    assert not StoredFile.objects.exists()


def test_an_agui_run_is_steered_through_its_chat(server: str) -> None:
    """AG-UI has no way to add a message to a run in progress: its thread
    is steered through the chat's endpoint, and its stream carries the
    delivered message as the CUSTOM event of a chunk AG-UI has no event for."""
    browser = Browser(server)
    body = run_input("thread-s", [user("count to 300 slowly")])
    with stream_agui(browser, body) as response:
        reader = AGUIStream(response)
        head = reader.read(stop=lambda es: sum(e["type"] == "TEXT_MESSAGE_CONTENT" for e in es) >= 10)
        answer = browser.post("/api/chat/thread-s/steer", {"id": "s1", "message": user_message("now count backwards")})
        rest = reader.read()
    assert answer.json()["type"] == "delivered"
    events = assert_accepted(head + rest)
    custom = [e for e in events if e["type"] == "CUSTOM"]
    said = [{"type": "text", "text": "now count backwards"}]
    assert [e["name"] for e in custom] == ["uistream:steering-message"]
    assert custom[0]["value"] == {"id": "s1", "parts": said}
    assert events[-1]["type"] == "RUN_FINISHED"
    texts = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert texts.endswith(" 3 2 1")


def test_an_agent_of_another_framework_takes_no_message_mid_run(server: str) -> None:
    """The adapters run their framework's own loop, which nothing can add a
    message to between two steps: the message waits for the run's end and
    is not delivered, ``finished``; the answer goes on unchanged."""
    browser = Browser(server)
    with browser.client.stream(
        "POST",
        "/api/agents/pydantic-ai/chat",
        json=browser.chat_body("chat-agent", "count to 200"),
        headers={"X-CSRFToken": browser.token},
    ) as response:
        head, _ = read_chunks(response, stop=lambda cs: " 10" in text_of(cs))
        answer = browser.post(
            "/api/agents/pydantic-ai/chat/chat-agent/steer", {"id": "s1", "message": user_message("stop at 20")}
        )
        rest, done = read_chunks(response)
    assert done
    assert answer.json() == {"type": "not-delivered", "id": "s1", "reason": "finished"}
    assert text_of(head + rest).split() == [str(i) for i in range(1, 201)]
    assert not any(c["type"] == "steering-message" for c in head + rest)
    row = SteeringMessage.objects.get()
    assert row.run_id == Run.objects.get().pk  # sent while the run ran


def test_a_steer_counts_as_a_chat_message_but_not_as_a_run_in_flight(server: str) -> None:
    """Throttled like a chat POST (the chat rate counts it), but not by
    ``MaxActiveRunsThrottle``: a steering message needs a run running."""
    throttles = ["uistream_app.policies.MaxActiveRunsThrottle", "uistream_app.policies.ChatRateThrottle"]
    limited = {"THROTTLE_CLASSES": throttles, "MAX_ACTIVE_RUNS_PER_OWNER": 1, "THROTTLE_RATES": {"chat": "2/min"}}
    with override_settings(UISTREAM={**settings.UISTREAM, **limited}):
        cache.clear()
        browser = Browser(server)
        with browser.stream("chat-t", "count to 300 slowly") as response:
            read_chunks(response, stop=lambda cs: " 10" in text_of(cs))
            first = browser.post("/api/chat/chat-t/steer", {"id": "s1", "message": user_message("backwards")})
            second = browser.post("/api/chat/chat-t/steer", {"id": "s2", "message": user_message("forwards")})
            read_chunks(response)
        cache.clear()
    assert first.json()["type"] == "delivered"
    assert second.status_code == 429
    assert second.json()["error"]["code"] == "throttled"
    assert list(SteeringMessage.objects.values_list("client_id", flat=True)) == ["s1"]
