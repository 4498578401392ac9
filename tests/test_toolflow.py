"""Streaming tool progress and approval policies through the real ai@7
useChat core (``tests/js/chat_client.mjs``) against the demo server, and
through AG-UI: what the client builds, what is stored, what the model read,
and who decided.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from uistream_app.inspect.analysis import message_before
from uistream_app.models import Conversation, Message, Run
from uistream_app.protocol.agui.verifier import verify_sse

from .protocol.agui_oracles import assert_accepted
from .test_agui_approvals import approve, interrupted, resume
from .test_agui_http import post_agui, run_input, stored_log, user
from .test_approvals import answer, continue_chat, idle, pending_email
from .test_chat_http import Browser, read_chunks, wait_for
from .test_chat_real_client import run_client, server  # noqa: F401  (server: fixture)
from .test_consumer import Socket, asession_cookie, chunks_of, runs_finished, send_frame

pytestmark = pytest.mark.django_db(transaction=True)

PROGRESS = [
    {"status": "searching", "step": 1, "of": 3, "source": "encyclopedia"},
    {"status": "searching", "step": 2, "of": 3, "source": "news archive"},
    {"status": "searching", "step": 3, "of": 3, "source": "journal index"},
]
FINAL = {
    "status": "done",
    "topic": "tides",
    "summary": "Tides: three sources agree, as far as a demo can tell.",
    "sources": ["encyclopedia entry on tides", "news archive entry on tides", "journal index entry on tides"],
}
TRUSTED_REASON = "trusted.test is on the demo's list of trusted domains"
BLOCKED_REASON = "blocked.test is on the demo's list of blocked domains"


def stored(chat_id: str) -> list[dict[str, Any]]:
    return [m.as_ui_message() for m in Conversation.objects.get(client_id=chat_id).messages.order_by("position")]


def parts_of(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [p for p in message["parts"] if p["type"] == kind]


def text(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")


def emails_sent(chat_id: str) -> int:
    return sum(
        1
        for m in Message.objects.filter(conversation__client_id=chat_id, role="assistant")
        for p in m.parts
        if p.get("type") == "tool-send_email" and p.get("state") == "output-available"
    )


# -- streaming tool progress -----------------------------------------------------


def test_research_shows_progress_then_one_part_with_the_final_output(node: str, server: str) -> None:
    browser = Browser(server)
    out = run_client(node, server, browser, chatId="research-7", version=7, steps=[{"send": "research tides"}])
    assert out["error"] is None
    assert out["finished"] == 1
    wait_for(idle, "the run to be stored")
    messages = stored("research-7")
    assert out["messages"] == messages  # the stored message is what the client built
    (part,) = parts_of(messages[1], "tool-research")
    assert part["state"] == "output-available"
    assert part["input"] == {"topic": "tides"}
    assert part["output"] == FINAL
    assert "preliminary" not in part
    # While it streamed, the chat showed the three progress values (then the
    # final one once as preliminary too, as the AI SDK itself sends it).
    (shown,) = out["progress"].values()
    assert shown[:3] == PROGRESS
    assert shown[3:] in ([], [FINAL])
    # The model's next step read the final output only.
    answer_text = text(messages[1])
    assert answer_text.startswith(f"Research finished. {FINAL['summary']}")
    assert "searching" not in answer_text
    run = Run.objects.get()
    chunks = stored_log(run)
    outputs = [c for c in chunks if c["type"] == "tool-output-available"]
    assert [c["output"] for c in outputs if c.get("preliminary")][:3] == PROGRESS
    assert [c["output"] for c in outputs if not c.get("preliminary")] == [FINAL]
    assert outputs[-1] == {"type": "tool-output-available", "toolCallId": part["toolCallId"], "output": FINAL}


@pytest.mark.parametrize("version", [6, 5])
def test_older_clients_end_with_the_final_output_too(node: str, server: str, version: int) -> None:
    browser = Browser(server)
    chat_id = f"research-{version}"
    out = run_client(node, server, browser, chatId=chat_id, version=version, steps=[{"send": "research tides"}])
    assert out["error"] is None
    (part,) = parts_of(out["messages"][1], "tool-research")
    assert (part["state"], part["output"]) == ("output-available", FINAL)
    assert not part.get("preliminary")
    assert out["progress"][part["toolCallId"]][:3] == PROGRESS


def test_agui_gets_the_progress_as_activity_and_one_result(server: str) -> None:
    browser = Browser(server)
    response = post_agui(browser, run_input("research-agui", [user("research tides")]))
    assert response.status_code == 200, response.text
    events = assert_accepted(verify_sse(response.content))
    activity = [e for e in events if e["type"] == "ACTIVITY_SNAPSHOT"]
    assert [e["content"]["output"] for e in activity][:3] == PROGRESS
    assert {e["activityType"] for e in activity} == {"tool-progress"}
    assert len({e["messageId"] for e in activity}) == 1  # one activity message, replaced
    (result,) = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert result["toolCallId"] == activity[0]["content"]["toolCallId"]
    assert '"status":"done"' in result["content"]


# -- approval policies -----------------------------------------------------------


def test_the_policy_approves_a_trusted_address_by_itself(node: str, server: str) -> None:
    browser = Browser(server)
    steps = [{"send": "email ada@trusted.test saying the build is green"}]
    out = run_client(node, server, browser, chatId="policy-ok", version=7, steps=steps)
    assert out["error"] is None
    assert out["finished"] == 1  # nobody was asked
    wait_for(idle, "the run to be stored")
    messages = stored("policy-ok")
    assert out["messages"] == messages
    (part,) = parts_of(messages[1], "tool-send_email")
    assert part["state"] == "output-available"
    assert part["output"]["to"] == "ada@trusted.test"
    assert part["approval"]["isAutomatic"] is True
    assert part["approval"]["approved"] is True
    assert part["approval"]["reason"] == TRUSTED_REASON
    (run,) = Run.objects.all()
    (decision,) = run.decisions
    assert (decision["decider"], decision["decidedBy"]) == ("policy", "approval policy")
    assert (decision["approved"], decision["reason"]) == (True, TRUSTED_REASON)
    assert decision["approvalId"] == part["approval"]["id"]
    assert decision["toolCallId"] == part["toolCallId"]
    # On the wire, as streamText sends it: the request marked automatic, the
    # server's own response with the reason, then the output.
    kinds = [
        c["type"]
        for c in stored_log(run)
        if c["type"].startswith("tool-approval") or c["type"] == "tool-output-available"
    ]
    assert kinds == ["tool-approval-request", "tool-approval-response", "tool-output-available"]
    request, response = [c for c in stored_log(run) if c["type"].startswith("tool-approval")]
    assert request == {
        "type": "tool-approval-request",
        "approvalId": part["approval"]["id"],
        "toolCallId": part["toolCallId"],
        "isAutomatic": True,
    }
    assert response == {
        "type": "tool-approval-response",
        "approvalId": part["approval"]["id"],
        "approved": True,
        "reason": TRUSTED_REASON,
    }


def test_the_policy_denies_a_blocked_address_and_nothing_is_sent(node: str, server: str) -> None:
    browser = Browser(server)
    steps = [{"send": "email eve@blocked.test saying the build is green"}]
    out = run_client(node, server, browser, chatId="policy-no", version=7, steps=steps)
    assert out["error"] is None
    wait_for(idle, "the run to be stored")
    messages = stored("policy-no")
    assert out["messages"] == messages
    (part,) = parts_of(messages[1], "tool-send_email")
    assert part["state"] == "output-denied"
    assert part["approval"] == {
        "id": part["approval"]["id"],
        "isAutomatic": True,
        "approved": False,
        "reason": BLOCKED_REASON,
    }
    assert emails_sent("policy-no") == 0
    assert text(messages[1]).startswith("I did not run send_email: The tool call was denied by the approval policy.")
    (run,) = Run.objects.all()
    assert [(d["decider"], d["approved"], d["reason"]) for d in run.decisions] == [("policy", False, BLOCKED_REASON)]
    kinds = [c["type"] for c in stored_log(run) if c["type"].startswith(("tool-approval", "tool-output"))]
    assert kinds == ["tool-approval-request", "tool-approval-response", "tool-output-denied"]


def test_any_other_address_still_asks_the_person(node: str, server: str) -> None:
    browser = Browser(server)
    steps = [{"send": "email ada@example.com saying the build is green"}, {"approve": True}]
    out = run_client(node, server, browser, chatId="policy-ask", version=7, steps=steps)
    assert out["error"] is None
    wait_for(idle, "the runs to be stored")
    messages = stored("policy-ask")
    assert out["messages"] == messages
    (part,) = parts_of(messages[1], "tool-send_email")
    assert part["state"] == "output-available"
    assert "isAutomatic" not in part["approval"]
    first, continued = Run.objects.order_by("started_at")
    assert first.decisions == []
    (decision,) = continued.decisions
    assert decision["decider"] == "user"
    assert decision["decidedBy"].startswith("anonymous visitor ")


# -- edited arguments --------------------------------------------------------------


def test_a_person_edits_the_arguments_they_approve(node: str, server: str) -> None:
    browser = Browser(server)
    edited = {"to": "bob@example.com", "body": "the build is red"}
    steps = [{"send": "email ada@example.com saying the build is green"}, {"approve": True, "edit": edited}]
    out = run_client(node, server, browser, chatId="edit-ok", version=7, steps=steps)
    assert out["error"] is None
    wait_for(idle, "the runs to be stored")
    messages = stored("edit-ok")
    assert out["messages"] == messages
    (part,) = parts_of(messages[1], "tool-send_email")
    assert part["input"] == edited
    assert part["state"] == "output-available"
    assert part["output"]["to"] == "bob@example.com"  # the edited call is what ran
    assert part["output"]["characters"] == len("the build is red")
    assert "bob@example.com" in text(messages[1])
    continued = Run.objects.get(trigger="continue")
    (decision,) = continued.decisions
    assert decision["input"] == edited
    assert decision["originalInput"] == {"to": "ada@example.com", "body": "the build is green"}
    assert decision["decider"] == "user"
    # The admin's inspector rebuilds the message the continuation started from.
    before, _ = message_before(continued)
    assert before is not None
    (pending,) = parts_of(before, "tool-send_email")
    assert (pending["state"], pending["input"]) == ("approval-responded", edited)


def test_an_edit_to_a_blocked_address_is_still_denied_by_the_policy(node: str, server: str) -> None:
    browser = Browser(server)
    edited = {"to": "eve@blocked.test", "body": "hi"}
    steps = [{"send": "email ada@example.com saying hi"}, {"approve": True, "edit": edited}]
    out = run_client(node, server, browser, chatId="edit-blocked", version=7, steps=steps)
    assert out["error"] is None
    wait_for(idle, "the runs to be stored")
    messages = stored("edit-blocked")
    assert out["messages"] == messages
    (part,) = parts_of(messages[1], "tool-send_email")
    assert part["state"] == "output-denied"
    assert (part["input"], part["approval"]["approved"], part["approval"]["reason"]) == (edited, False, BLOCKED_REASON)
    assert emails_sent("edit-blocked") == 0
    # The person approved, the policy overruled them: both on the run.
    decisions = Run.objects.get(trigger="continue").decisions
    assert [(d["decider"], d["approved"]) for d in decisions] == [("user", True), ("policy", False)]
    assert decisions[1]["reason"] == BLOCKED_REASON
    assert decisions[0]["approvalId"] == decisions[1]["approvalId"] == part["approval"]["id"]


def edit(messages: list[dict[str, Any]], approval_id: str, arguments: Any) -> list[dict[str, Any]]:
    out = answer(messages, approval_id)
    next(p for p in out[-1]["parts"] if p["type"] == "tool-send_email")["input"] = arguments
    return out


def test_an_edit_of_a_tool_that_does_not_allow_it_is_refused(server: str) -> None:
    browser = Browser(server)
    with browser.client.stream(
        "POST",
        "/test-locked-email/chat",
        json=browser.chat_body("locked", "email ada@example.com saying hi"),
        headers={"X-CSRFToken": browser.token},
    ) as response:
        read_chunks(response)
    wait_for(idle, "the run to be stored")
    messages = stored("locked")
    (part,) = parts_of(messages[1], "tool-send_email")
    index = messages[1]["parts"].index(part)
    body = {
        "id": "locked",
        "trigger": "submit-message",
        "messages": edit(messages, part["approval"]["id"], {"to": "bob@example.com", "body": "hi"}),
    }
    response = browser.post("/test-locked-email/chat", body)
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "not_editable"
    assert error["field"] == f"messages[1].parts[{index}].input"
    # Nothing written, nothing run: the call still waits as it was.
    assert stored("locked") == messages
    assert Run.objects.count() == 1
    assert emails_sent("locked") == 0


@pytest.mark.parametrize(
    ("arguments", "approved", "says"),
    [
        ({"to": 3, "body": "hi"}, True, "don't fit send_email"),
        ({"to": "bob@example.com"}, True, "`body` is required"),
        ({"to": "bob@example.com", "body": "hi"}, False, "nothing to edit"),
    ],
)
def test_an_edit_that_does_not_fit_is_refused(server: str, arguments: Any, approved: bool, says: str) -> None:
    browser = Browser(server)
    assistant, messages = pending_email(browser, "bad-edit")
    body = edit(messages, parts_of(assistant, "tool-send_email")[0]["approval"]["id"], arguments)
    body[-1]["parts"] = copy.deepcopy(body[-1]["parts"])
    next(p for p in body[-1]["parts"] if p["type"] == "tool-send_email")["approval"]["approved"] = approved
    response = continue_chat(browser, "bad-edit", body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"
    assert says in response.json()["error"]["message"]
    assert stored("bad-edit") == messages
    assert Run.objects.count() == 1


def test_agui_approves_with_edited_arguments(server: str) -> None:
    browser = Browser(server)
    (interrupt,) = interrupted(browser, "agui-edit")
    entry = approve(interrupt["id"])
    entry["payload"]["editedArgs"] = {"to": "bob@example.com", "body": "edited"}
    response = post_agui(browser, resume("agui-edit", [entry]))
    assert response.status_code == 200, response.text
    events = assert_accepted(verify_sse(response.content))
    (result,) = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert '"to":"bob@example.com"' in result["content"]
    wait_for(idle, "the continuation to be stored")
    (part,) = parts_of(stored("agui-edit")[1], "tool-send_email")
    assert part["input"] == {"to": "bob@example.com", "body": "edited"}
    (decision,) = Run.objects.get(trigger="continue").decisions
    assert decision["originalInput"] == {"to": "ada@example.com", "body": "the build is green"}
    assert (decision["input"], decision["via"]) == ({"to": "bob@example.com", "body": "edited"}, "agui")


# -- the WebSocket transport gets the same policy ------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("address", "outcome"), [("ada@trusted.test", "output-available"), ("eve@blocked.test", "output-denied")]
)
async def test_the_websocket_runs_the_same_policy(address: str, outcome: str) -> None:
    async with Socket(await asession_cookie()) as page:
        await page.send(send_frame("r1", f"ws-policy-{outcome}", f"email {address} saying hi"))
        frames = await page.until("r1")
    chunks = chunks_of(frames)
    request = next(c for c in chunks if c["type"] == "tool-approval-request")
    response = next(c for c in chunks if c["type"] == "tool-approval-response")
    assert request["isAutomatic"] is True
    assert response["approved"] is (outcome == "output-available")
    await runs_finished()
    messages = await sync_to_async(stored)(f"ws-policy-{outcome}")
    (part,) = parts_of(messages[1], "tool-send_email")
    assert part["state"] == outcome
    run = await Run.objects.aget()
    assert [d["decider"] for d in run.decisions] == ["policy"]


@pytest.mark.parametrize(("address", "outcome"), [("ada@trusted.test", None), ("eve@blocked.test", "denied")])
def test_agui_runs_the_same_policy_without_an_interrupt(server: str, address: str, outcome: str | None) -> None:
    browser = Browser(server)
    thread = f"agui-policy-{outcome}"
    response = post_agui(browser, run_input(thread, [user(f"email {address} saying hi")]))
    assert response.status_code == 200, response.text
    events = assert_accepted(verify_sse(response.content))
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1].get("outcome", {}).get("type", "success") == "success"  # nobody is asked
    (result,) = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert result.get("metadata", {}).get("uistream", {}).get("outcome") == outcome
    decisions = [e for e in events if e["type"] == "CUSTOM" and e["name"] == "uistream:tool-approval-response"]
    assert [d["value"]["approved"] for d in decisions] == [outcome is None]
    wait_for(idle, "the run to be stored")
    assert [d["decider"] for d in Run.objects.get().decisions] == ["policy"]


def test_a_staff_users_decision_is_recorded_as_staff(server: str, django_user_model: Any) -> None:
    from django.conf import settings
    from django.test import Client

    staff = django_user_model.objects.create_user("root", password="pw", is_staff=True)
    login = Client()
    login.force_login(staff)
    browser = Browser(server)
    browser.client.cookies.set(settings.SESSION_COOKIE_NAME, login.cookies[settings.SESSION_COOKIE_NAME].value)
    assistant, messages = pending_email(browser, "staff-chat")
    approval_id = parts_of(assistant, "tool-send_email")[0]["approval"]["id"]
    response = continue_chat(browser, "staff-chat", answer(messages, approval_id))
    assert response.status_code == 200, response.text
    wait_for(idle, "the continuation to be stored")
    (decision,) = Run.objects.get(trigger="continue").decisions
    assert (decision["decider"], decision["decidedBy"]) == ("staff", f"user {staff.pk} (root)")
