"""Human in the loop, enforced by the server.

The real ai@7 (and ai@6) useChat core approves and denies the demo's
``send_email`` and runs a client-side tool; hand-made requests try to forge,
replay, steal and stale-answer approvals, and are refused with nothing run.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from uistream_app.models import Conversation, Message, Run
from uistream_app.owners import Owner

from .test_chat_http import Browser, read_chunks, wait_for
from .test_chat_real_client import run_client, server  # noqa: F401  (server: fixture)

pytestmark = pytest.mark.django_db(transaction=True)

EMAIL = "email ada@example.com saying the build is green"


def idle() -> bool:
    return not Run.objects.filter(status="running").exists()


def stored(chat_id: str) -> list[dict[str, Any]]:
    return [m.as_ui_message() for m in Conversation.objects.get(client_id=chat_id).messages.order_by("position")]


def email_part(message: dict[str, Any]) -> dict[str, Any]:
    return next(p for p in message["parts"] if p["type"] == "tool-send_email")


@pytest.mark.parametrize("version", [7, 6])
@pytest.mark.parametrize("approved", [True, False])
def test_a_person_approves_or_denies_in_the_real_client(node: str, server: str, version: int, approved: bool) -> None:
    browser = Browser(server)
    chat_id = f"apv-{version}-{approved}"
    out = run_client(
        node, server, browser, chatId=chat_id, version=version, steps=[{"send": EMAIL}, {"approve": approved}]
    )
    assert out["error"] is None
    wait_for(idle, "the runs to be stored")
    messages = stored(chat_id)
    assert [m["role"] for m in messages] == ["user", "assistant"]  # the same message was continued
    part = email_part(messages[1])
    assert part["state"] == ("output-available" if approved else "output-denied")
    assert part["approval"]["id"].startswith("apv_")
    assert len(part["approval"]["id"]) > 20
    assert part["approval"]["approved"] is approved
    if version == 7:
        assert out["messages"] == messages
    else:
        assert email_part(out["messages"][1])["state"] == part["state"]
    runs = list(Run.objects.order_by("started_at"))
    assert [r.trigger for r in runs] == ["submit-message", "continue"]
    assert runs[1].decisions[0]["approved"] is approved
    assert runs[1].decisions[0]["approvalId"] == part["approval"]["id"]


def test_the_admin_shows_who_decided_when_and_why(node: str, server: str, admin_client: Client) -> None:
    browser = Browser(server)
    steps = [{"send": EMAIL}, {"approve": False, "reason": "not <b>today</b>"}]
    out = run_client(node, server, browser, chatId="apv-admin", version=7, steps=steps)
    assert out["error"] is None
    wait_for(idle, "the runs to be stored")
    continued = Run.objects.get(trigger="continue")
    (decision,) = continued.decisions
    session_key = Conversation.objects.get(client_id="apv-admin").session_key
    assert decision["decidedBy"].startswith("anonymous visitor ")
    assert session_key
    assert session_key not in decision["decidedBy"]  # a digest, never the key
    assert decision["reason"] == "not <b>today</b>"
    html = admin_client.get(reverse("admin:uistream_app_run_change", args=[continued.pk])).content.decode()
    assert decision["decidedBy"] in html
    assert decision["decidedAt"] in html
    assert "not &lt;b&gt;today&lt;/b&gt;" in html  # escaped
    assert "<b>today</b>" not in html


def test_a_signed_in_users_decision_names_the_user(django_user_model: Any) -> None:
    user = django_user_model.objects.create_user("ada", password="pw")
    assert Owner.of_user(user).describe() == f"user {user.pk} (ada)"
    anonymous = Owner.of_session("k" * 32).describe()
    assert anonymous.startswith("anonymous visitor ")
    assert "k" * 32 not in anonymous
    assert anonymous != Owner.of_session("j" * 32).describe()


def test_a_pending_approval_survives_a_reload(node: str, server: str) -> None:
    browser = Browser(server)
    run_client(node, server, browser, chatId="apv-reload", version=7, steps=[{"send": EMAIL}])
    wait_for(idle, "the run to be stored")
    # A reload: what the page gets back is the stored message, approval pending.
    part = email_part(stored("apv-reload")[1])
    assert part["state"] == "approval-requested"
    assert part["input"] == {"to": "ada@example.com", "body": "the build is green"}


def test_a_client_side_tool_continues_the_same_message(node: str, server: str) -> None:
    browser = Browser(server)
    out = run_client(
        node,
        server,
        browser,
        chatId="client-tool",
        version=7,
        api="/test-client-tools/chat",
        clientTools={"get_location": {"city": "Lima"}},
        steps=[{"send": "where am I?"}, {"waitFinished": 2}],
    )
    assert out["error"] is None
    wait_for(idle, "the runs to be stored")
    messages = stored("client-tool")
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert out["messages"] == messages
    tool = next(p for p in messages[1]["parts"] if p["type"] == "tool-get_location")
    assert tool["state"] == "output-available"
    assert tool["output"] == {"city": "Lima"}
    assert "You are in Lima." in "".join(p.get("text", "") for p in messages[1]["parts"])


# -- what the server refuses -------------------------------------------------------


def pending_email(browser: Browser, chat_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Start a chat that ends waiting for approval; the messages as the
    browser holds them."""
    with browser.stream(chat_id, EMAIL) as response:
        read_chunks(response)
    wait_for(idle, "the run to be stored")
    messages = stored(chat_id)
    return messages[1], messages


def answer(messages: list[dict[str, Any]], approval_id: str, approved: bool = True) -> list[dict[str, Any]]:
    out = copy.deepcopy(messages)
    part = email_part(out[-1])
    part["state"] = "approval-responded"
    part["approval"] = {"id": approval_id, "approved": approved}
    return out


def continue_chat(browser: Browser, chat_id: str, messages: list[dict[str, Any]]) -> Any:
    body = {"id": chat_id, "trigger": "submit-message", "messageId": messages[-1]["id"], "messages": messages}
    return browser.post("/api/chat", body)


def sends() -> int:
    """How many runs went past their approval: a run whose log has the
    email's output."""
    return sum(
        1
        for m in Message.objects.filter(role="assistant")
        for p in m.parts
        if p.get("type") == "tool-send_email" and p.get("state") == "output-available"
    )


def test_a_forged_approval_id_runs_nothing(server: str) -> None:
    browser = Browser(server)
    _, messages = pending_email(browser, "forged")
    response = continue_chat(browser, "forged", answer(messages, "apv_guessed"))
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "approval_mismatch"
    assert email_part(stored("forged")[1])["state"] == "approval-requested"
    assert Run.objects.count() == 1
    assert sends() == 0


def test_a_replayed_approval_runs_nothing_more(server: str) -> None:
    browser = Browser(server)
    assistant, messages = pending_email(browser, "replayed")
    body = answer(messages, email_part(assistant)["approval"]["id"])
    with browser.client.stream(
        "POST",
        "/api/chat",
        json={"id": "replayed", "trigger": "submit-message", "messages": body},
        headers={"X-CSRFToken": browser.token},
    ) as first:
        assert first.status_code == 200
        read_chunks(first)
    wait_for(idle, "the continuation to be stored")
    assert sends() == 1
    again = continue_chat(browser, "replayed", body)
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "already_answered"
    assert sends() == 1
    assert Run.objects.count() == 2


def test_someone_elses_approval_is_a_404(server: str) -> None:
    alice = Browser(server)
    assistant, messages = pending_email(alice, "alices")
    mallory = Browser(server)
    mallory.client.get("/api/csrf")
    response = continue_chat(mallory, "alices", answer(messages, email_part(assistant)["approval"]["id"]))
    assert response.status_code == 404
    assert email_part(stored("alices")[1])["state"] == "approval-requested"
    assert sends() == 0


def test_a_stale_answer_for_an_older_message_is_refused(server: str) -> None:
    browser = Browser(server)
    assistant, messages = pending_email(browser, "stale")
    # The conversation moved on: a new question was asked since.
    with browser.client.stream(
        "POST",
        "/api/chat",
        json={
            "id": "stale",
            "trigger": "submit-message",
            "messages": [*messages, {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "count to 2"}]}],
        },
        headers={"X-CSRFToken": browser.token},
    ) as response:
        read_chunks(response)
    wait_for(idle, "the second run to be stored")
    response = continue_chat(browser, "stale", answer(messages, email_part(assistant)["approval"]["id"]))
    assert response.status_code == 404
    assert sends() == 0


def test_an_output_for_a_server_tool_is_refused(server: str) -> None:
    browser = Browser(server)
    _, messages = pending_email(browser, "fake-output")
    forged = copy.deepcopy(messages)
    part = email_part(forged[-1])
    part["state"] = "output-available"
    part["output"] = {"sent": True}
    response = continue_chat(browser, "fake-output", forged)
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "not_pending"
    assert sends() == 0
