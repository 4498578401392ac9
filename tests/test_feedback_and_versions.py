"""What users thought of the answers, and every attempt kept (issue 34),
through a real server serving the demo, as a page's requests make them:

* an answer's owner rates it (201), changes the rating (200) and takes it
  back (204); the messages page shows it; anything else is a 4xx JSON
  that writes nothing, and another owner's answer is a 404;
* a regenerate and an edit make new versions, the older branch kept with
  what followed it; the API lists a message's versions and switches the
  current branch, which is what a reload loads;
* the model is sent the current branch only (the provider's request body).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from uistream_app import testing
from uistream_app.models import Feedback, Message, Run
from uistream_app.runs.openai import OpenAIChatModel

from .runs.chat_server import DONE, ChatServer, Reply, chunk
from .server import serve_demo
from .test_chat_http import Browser, read_chunks, run_finished, text_of, wait_for
from .test_providers_real_client import FakeProvider

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from serve_demo(monkeypatch, 0)


def turn(browser: Browser, body: dict[str, Any]) -> str:
    """Send one turn and read its answer to the end; returns its text."""
    with browser.client.stream("POST", "/api/chat", json=body, headers={"X-CSRFToken": browser.token}) as response:
        assert response.status_code == 200, response.read()
        chunks, done = read_chunks(response)
    assert done
    wait_for(run_finished, "the run to be stored")
    return text_of(chunks)


def page(browser: Browser, chat_id: str) -> dict[str, Any]:
    response = browser.client.get(f"/api/conversations/{chat_id}/messages/")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def texts(messages: list[dict[str, Any]]) -> list[str]:
    return ["".join(p.get("text", "") for p in m["parts"] if p["type"] == "text") for m in messages]


def feedback_url(chat_id: str, message_id: str) -> str:
    return f"/api/conversations/{chat_id}/messages/{message_id}/feedback"


def versions_url(chat_id: str, message_id: str) -> str:
    return f"/api/conversations/{chat_id}/messages/{message_id}/versions"


def regenerate(browser: Browser, chat_id: str, held: list[dict[str, Any]]) -> str:
    """useChat's ``regenerate()``: the history without the last answer."""
    body = testing.chat_body(chat_id, held[:-1], trigger="regenerate-message", message_id=held[-1]["id"])
    return turn(browser, body)


def test_an_answer_is_rated_changed_and_taken_back_by_its_owner_only(server: str) -> None:
    alice = Browser(server)
    turn(alice, testing.chat_body("rated", "count to 3"))
    question, answer = page(alice, "rated")["results"]

    first = alice.post(feedback_url("rated", answer["id"]), {"rating": "down", "reason": "inaccurate", "comment": "no"})
    assert first.status_code == 201, first.text
    assert {k: first.json()[k] for k in ("rating", "reason", "comment")} == {
        "rating": "down",
        "reason": "inaccurate",
        "comment": "no",
    }
    changed = alice.post(feedback_url("rated", answer["id"]), {"rating": "up"})
    assert changed.status_code == 200, changed.text
    stored = Feedback.objects.get()
    assert (stored.rating, stored.comment, stored.message_id) == ("up", "", answer["id"])
    assert stored.run == Run.objects.get()
    assert page(alice, "rated")["feedback"] == {answer["id"]: changed.json()}

    # Anything else is a 4xx JSON, naming the problem, and changes nothing.
    refused = {
        "no such rating": (feedback_url("rated", answer["id"]), {"rating": "meh"}, 400, "rating"),
        "no such reason": (feedback_url("rated", answer["id"]), {"rating": "down", "reason": "x"}, 400, "reason"),
        "a comment too long": (
            feedback_url("rated", answer["id"]),
            {"rating": "down", "comment": "x" * 4001},
            400,
            "comment",
        ),
        "not a JSON object": (feedback_url("rated", answer["id"]), ["down"], 400, ""),
        "a question": (feedback_url("rated", question["id"]), {"rating": "down"}, 404, ""),
        "no such message": (feedback_url("rated", "nope"), {"rating": "down"}, 404, ""),
        "no such chat": (feedback_url("other", answer["id"]), {"rating": "down"}, 404, ""),
    }
    for name, (url, body, status, field) in refused.items():
        response = alice.post(url, body)
        assert response.status_code == status, (name, response.text)
        assert response.headers["content-type"].startswith("application/json"), name
        if field:
            assert field in response.json(), (name, response.json())
    mallory = Browser(server)
    assert mallory.post(feedback_url("rated", answer["id"]), {"rating": "down"}).status_code == 404
    assert (
        mallory.client.delete(feedback_url("rated", answer["id"]), headers={"X-CSRFToken": mallory.token}).status_code
        == 404
    )
    no_csrf = alice.client.post(feedback_url("rated", answer["id"]), json={"rating": "down"})
    assert no_csrf.status_code == 403
    assert list(Feedback.objects.values_list("rating", "comment")) == [("up", "")]

    delete = alice.client.delete(feedback_url("rated", answer["id"]), headers={"X-CSRFToken": alice.token})
    assert delete.status_code == 204
    again = alice.client.delete(feedback_url("rated", answer["id"]), headers={"X-CSRFToken": alice.token})
    assert again.status_code == 404
    assert page(alice, "rated")["feedback"] == {}


def test_every_attempt_is_kept_and_the_current_branch_switches(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    browser = Browser(server)
    turn(browser, testing.chat_body("tries", "count to 3"))
    first = page(browser, "tries")["results"]
    regenerate(browser, "tries", first)
    second = page(browser, "tries")
    a1, a2 = first[1]["id"], second["results"][1]["id"]
    assert a1 != a2
    assert second["versions"] == {a2: {"count": 2, "current": 2}}

    listed = browser.client.get(versions_url("tries", a2)).json()
    assert listed["current"] == 2
    assert [(v["number"], v["id"], v["current"]) for v in listed["results"]] == [(1, a1, False), (2, a2, True)]

    # Back to the first answer, and a turn on top of it.
    switched = browser.post(versions_url("tries", a2), {"version": 1})
    assert switched.json() == {"current": 1, "count": 2}
    assert [m["id"] for m in page(browser, "tries")["results"]] == ["u1", a1]
    held = page(browser, "tries")["results"]
    turn(browser, testing.chat_body("tries", [*held, testing.user_message("count to 2", id="u2")]))
    branch_one = [m["id"] for m in page(browser, "tries")["results"]]
    assert branch_one[:3] == ["u1", a1, "u2"]

    # To the second answer: what followed the first stays on its branch...
    browser.post(versions_url("tries", a1), {"version": 2})
    assert [m["id"] for m in page(browser, "tries")["results"]] == ["u1", a2]
    # ...and comes back with it.
    browser.post(versions_url("tries", a2), {"version": 1})
    assert [m["id"] for m in page(browser, "tries")["results"]] == branch_one

    # An edit of the question is a version of it, under the same id.
    edited = testing.user_message("count to 4", id="u1")
    assert turn(browser, testing.chat_body("tries", [edited], message_id="u1")).startswith("1")
    now = page(browser, "tries")
    assert next(m["id"] for m in now["results"]) == "u1"
    assert texts(now["results"])[0] == "count to 4"
    assert now["versions"]["u1"] == {"count": 2, "current": 2}
    browser.post(versions_url("tries", "u1"), {"version": 1})
    assert [m["id"] for m in page(browser, "tries")["results"]] == branch_one
    # u1 and its edit, the two answers to u1 and the one to its edit, u2 and its answer.
    assert Message.objects.count() == 7
    assert Message.objects.current().count() == 4

    # A version that isn't, and a switch while a reply streams.
    assert browser.post(versions_url("tries", "u1"), {"version": 3}).status_code == 400
    assert browser.post(versions_url("tries", "u1"), {"version": 0}).status_code == 400
    assert browser.post(versions_url("tries", "nope"), {"version": 1}).status_code == 404
    held = page(browser, "tries")["results"]
    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "20")  # a minute of answer: it streams until stopped
    body = testing.chat_body("tries", [*held, testing.user_message("count to 3000", id="u3")])
    with browser.client.stream("POST", "/api/chat", json=body, headers={"X-CSRFToken": browser.token}) as response:
        read_chunks(response, stop=lambda chunks: any(c["type"] == "text-delta" for c in chunks))
        busy = browser.post(versions_url("tries", "u1"), {"version": 2})
        assert busy.status_code == 409, busy.text
        assert "streaming" in busy.json()["detail"]
        assert browser.post("/api/chat/tries/stop", {}).json() == {"stopped": True}
    wait_for(run_finished, "the run to be stopped")
    assert [m["id"] for m in page(browser, "tries")["results"]][: len(branch_one)] == branch_one


@pytest.fixture
def provider() -> Iterator[ChatServer]:
    with FakeProvider() as chat:
        yield chat


def said(text: str) -> Reply:
    return Reply(body=[chunk({"role": "assistant", "content": text}), chunk(finish="stop"), DONE])


def test_the_model_is_sent_the_current_branch_only(server: str, provider: ChatServer, settings: Any) -> None:
    settings.UISTREAM = {
        **settings.UISTREAM,
        "MODEL": OpenAIChatModel("gpt-test", base_url=provider.base_url, api_key="k", max_retries=0),
    }
    provider.add(said("First answer."), said("Second answer."), said("Third answer."))
    browser = Browser(server)
    turn(browser, testing.chat_body("sent", "one"))
    regenerate(browser, "sent", page(browser, "sent")["results"])
    second = page(browser, "sent")["results"]
    assert texts(second) == ["one", "Second answer."]
    browser.post(versions_url("sent", second[1]["id"]), {"version": 1})
    held = page(browser, "sent")["results"]
    assert texts(held) == ["one", "First answer."]

    turn(browser, testing.chat_body("sent", [*held, testing.user_message("two", id="u2")]))

    sent = provider.requests[-1].json()["messages"]
    assert [
        (m["role"], m["content"] if isinstance(m["content"], str) else m["content"][0]["text"])
        for m in sent
        if m["role"] != "system"
    ] == [
        ("user", "one"),
        ("assistant", "First answer."),
        ("user", "two"),
    ]
