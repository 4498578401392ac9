"""Human in the loop over AG-UI, enforced by the server.

A run whose model called a tool that needs approval ends ``RUN_FINISHED``
with an ``interrupt`` outcome; the real ``@ag-ui/client`` answers it with a
second ``runAgent`` carrying ``resume`` (approve, deny, cancel), or answers
a client-side tool's call with a ``tool`` message, and the same stored
assistant message is continued. Hand-made requests try to forge, replay,
steal and stale-answer interrupts, or send answers of the wrong shape, and
are refused with a 4xx JSON body, nothing run and nothing written.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from django.test import Client

from uistream_app.models import Conversation, Message, Run
from uistream_app.protocol.agui.messages import agui_user_message, fold_messages, ui_messages_to_agui
from uistream_app.protocol.agui.verifier import verify_sse
from uistream_app.protocol.ui.reader import UIMessageReader
from uistream_app.transport.agui_views import render_stored_run

from .protocol.agui_oracles import assert_accepted
from .test_admin import download_url
from .test_agui_http import (  # noqa: F401  (server: fixture)
    post_agui,
    run_client,
    run_input,
    server,
    stored_log,
    user,
    without_timestamps,
)
from .test_chat_http import Browser, run_finished, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

EMAIL = "email ada@example.com saying the build is green"
RESPONSE_SCHEMA = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved"],
}


def stored(thread: str) -> list[dict[str, Any]]:
    return [m.as_ui_message() for m in Conversation.objects.get(client_id=thread).messages.order_by("position")]


def as_agui(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A stored conversation as the messages an AG-UI client holds."""
    return [
        m
        for message in messages
        for m in (ui_messages_to_agui([message]) if message["role"] == "assistant" else [agui_user_message(message)])
    ]


def tool_parts(message: dict[str, Any], name: str = "send_email") -> list[dict[str, Any]]:
    return [p for p in message["parts"] if p["type"] == f"tool-{name}"]


def sends() -> int:
    """How many ``send_email`` calls ran: stored parts with its output."""
    return sum(
        1
        for m in Message.objects.filter(role="assistant")
        for p in m.parts
        if p.get("type") == "tool-send_email" and p.get("state") == "output-available"
    )


def database() -> Any:
    """Everything a refused request must leave as it was."""
    return (
        sorted((m.pk, m.role, m.position, m.parts) for m in Message.objects.all()),
        sorted((str(r.pk), r.status, r.trigger, r.decisions) for r in Run.objects.all()),
        sorted((c.pk, c.updated_at) for c in Conversation.objects.all()),
    )


# -- the real client --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "state"),
    [
        ({"approved": True}, "output-available"),
        ({"approved": False, "reason": "not today"}, "output-denied"),
        ("cancel", "output-denied"),
    ],
    ids=["approve", "deny", "cancel"],
)
def test_the_real_client_resumes_an_interrupted_run(node: str, server: str, answer: Any, state: str) -> None:
    browser = Browser(server)
    out = run_client(
        node,
        browser,
        f"{server}/api/agui",
        "hitl-1",
        [
            {"text": EMAIL, "messageId": "u1", "runId": "run-a"},
            {"answers": [answer], "runId": "run-b"},
        ],
    )
    first, second = out["runs"]
    for run in (first, second):
        assert (run["error"], run["failed"], run["runError"], run["warnings"]) == (None, None, None, [])
        assert_accepted(run["events"])
    # The first run ends waiting for the person, the interrupt naming the call.
    assert first["finished"]["outcome"] == "interrupt"
    (interrupt,) = first["finished"]["interrupts"]
    assert interrupt["id"].startswith("apv_")
    assert len(interrupt["id"]) > 20
    assert interrupt["reason"] == "tool_call"
    assert interrupt["responseSchema"] == RESPONSE_SCHEMA
    # The second one answers it and ends with nothing left open.
    assert second["finished"]["outcome"] == "success"
    assert second["pendingInterrupts"] == []
    results = [e for e in second["events"] if e["type"] == "TOOL_CALL_RESULT"]
    assert [r["toolCallId"] for r in results] == [interrupt["toolCallId"]]
    assert not [e for e in second["events"] if e["type"] == "TOOL_CALL_START"]  # the call is not sent again
    text = "".join(e["delta"] for e in second["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    if state == "output-available":
        assert '"status":"sent"' in results[0]["content"]
        assert text == "Done: the email to ada@example.com is sent (only pretend: this is the demo)."
    else:
        assert results[0]["metadata"] == {"uistream": {"outcome": "denied"}}
        assert text.startswith("I did not run send_email: The user denied this tool call.")
    wait_for(run_finished, "the runs to be stored")
    messages = stored("hitl-1")
    assert [m["role"] for m in messages] == ["user", "assistant"]  # the same message was continued
    (part,) = tool_parts(messages[1])
    assert part["state"] == state
    assert part["approval"]["id"] == interrupt["id"]
    assert part["approval"]["approved"] is (state == "output-available")
    # What the client holds is the stored conversation.
    assert out["messages"] == as_agui(messages)
    runs = list(Run.objects.order_by("started_at"))
    assert [(r.trigger, r.status, r.message_id) for r in runs] == [
        ("submit-message", "completed", messages[1]["id"]),
        ("continue", "completed", messages[1]["id"]),
    ]
    (decision,) = runs[1].decisions
    assert decision["approvalId"] == interrupt["id"]
    assert decision["toolCallId"] == interrupt["toolCallId"]
    assert decision["approved"] is (state == "output-available")
    assert decision["reason"] == (answer.get("reason") if isinstance(answer, dict) else None)
    assert (decision["via"], decision["status"]) == ("agui", "cancelled" if answer == "cancel" else "resolved")
    assert sends() == (1 if state == "output-available" else 0)


def ids(messages: list[dict[str, Any]]) -> list[str]:
    return [m["id"] for m in messages]


def test_the_interrupt_snapshots_the_thread_the_client_then_holds(node: str, server: str, admin_client: Client) -> None:
    browser = Browser(server)
    out = run_client(
        node,
        browser,
        f"{server}/api/agui",
        "hitl-snap",
        [
            {"text": EMAIL, "messageId": "u1", "runId": "run-a"},
            {"answers": [{"approved": True}], "runId": "run-b"},
        ],
    )
    first, second = out["runs"]
    for run in (first, second):
        assert (run["error"], run["failed"], run["runError"], run["warnings"]) == (None, None, None, [])
        assert_accepted(run["events"])
    # AG-UI's "state at the interrupt boundary": the thread, once, right before
    # the RUN_FINISHED that carries the interrupt.
    types = [e["type"] for e in first["events"]]
    assert types[-2:] == ["MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert types.count("MESSAGES_SNAPSHOT") == 1
    assert first["finished"]["outcome"] == "interrupt"
    (interrupt,) = first["finished"]["interrupts"]
    snapshot = first["events"][-2]["messages"]
    # Made of the ids the run streamed, in its order: the user's message, then
    # the messages this run opened (reasoning, text) and the call's parent.
    openers = ("TEXT_MESSAGE_START", "REASONING_MESSAGE_START", "TOOL_CALL_START")
    starts = [e for e in first["events"] if e["type"] in openers]
    streamed = list(dict.fromkeys(e.get("messageId") or e["parentMessageId"] for e in starts))
    assert len(streamed) >= 2
    assert ids(snapshot) == ["u1", *streamed]
    calls = [c for m in snapshot for c in m.get("toolCalls", ())]
    assert [c["id"] for c in calls] == [e["toolCallId"] for e in starts if "toolCallId" in e]
    assert [c["id"] for c in calls] == [interrupt["toolCallId"]]
    # The client holds the snapshot, each message once, and that is the stored
    # conversation as it stood at the interrupt (the first run's log builds the message).
    assert first["messages"] == snapshot
    assert len(set(ids(snapshot))) == len(snapshot)
    wait_for(run_finished, "the runs to be stored")
    runs = list(Run.objects.order_by("started_at"))
    reader = UIMessageReader()
    for chunk in stored_log(runs[0]):
        reader.feed(chunk)
    assert snapshot == as_agui([stored("hitl-snap")[0], reader.message])
    # Approving still works end to end.
    assert second["finished"]["outcome"] == "success"
    assert second["pendingInterrupts"] == []
    assert [e["toolCallId"] for e in second["events"] if e["type"] == "TOOL_CALL_RESULT"] == [interrupt["toolCallId"]]
    messages = stored("hitl-snap")
    assert [p["state"] for p in tool_parts(messages[1])] == ["output-available"]
    assert out["messages"] == second["messages"] == as_agui(messages)
    assert len(set(ids(out["messages"]))) == len(out["messages"])
    assert sends() == 1
    # A stored run renders as it streamed: the continuation's opening snapshot
    # and the interrupt's closing one included.
    assert [(r.trigger, r.status) for r in runs] == [("submit-message", "completed"), ("continue", "completed")]
    for run, live in zip(runs, (first, second), strict=True):
        again = without_timestamps(verify_sse(asyncio.run(render_stored_run(run, run_id=live["events"][0]["runId"]))))
        sent = without_timestamps(live["events"])
        del sent[0]["metadata"]  # the live RUN_STARTED names the stored run
        assert again == sent
        # The admin's AG-UI transcript is that stream too, snapshots included.
        download = admin_client.get(download_url(run, "agui"))
        assert download.status_code == 200
        shown = without_timestamps(verify_sse(b"".join(download.streaming_content)))
        assert shown == without_timestamps(verify_sse(asyncio.run(render_stored_run(run))))
    shown_first = verify_sse(b"".join(admin_client.get(download_url(runs[0], "agui")).streaming_content))
    assert shown_first[-2]["type"] == "MESSAGES_SNAPSHOT"
    assert shown_first[-2]["messages"] == snapshot


def test_two_interrupts_answered_apart_and_the_message_ids_go_on(node: str, server: str) -> None:
    browser = Browser(server)
    out = run_client(
        node,
        browser,
        f"{server}/api/agui-mailer",
        "hitl-2",
        [
            {"text": "write to ada@example.com and bob@example.com", "messageId": "u1", "runId": "run-a"},
            {"answers": [{"approved": True}, {"approved": False}], "runId": "run-b"},
        ],
    )
    first, second = out["runs"]
    assert [i["toolCallId"] for i in first["finished"]["interrupts"]] == ["mail_0", "mail_1"]
    assert second["error"] is None
    assert_accepted(second["events"])
    # Both runs said something: the continuation's text is a new message.
    starts = [e["messageId"] for run in (first, second) for e in run["events"] if e["type"] == "TEXT_MESSAGE_START"]
    assert len(set(starts)) == 2
    said = [m["content"] for m in out["messages"] if m["role"] == "assistant" and m.get("content")]
    assert said == ["Sending now.", "Done. mail_0: sent; mail_1: not sent."]
    wait_for(run_finished, "the runs to be stored")
    messages = stored("hitl-2")
    assert [p["state"] for p in tool_parts(messages[1])] == ["output-available", "output-denied"]
    assert out["messages"] == as_agui(messages)
    assert sends() == 1


def test_a_client_side_tool_answered_with_a_tool_message(node: str, server: str) -> None:
    browser = Browser(server)
    out = run_client(
        node,
        browser,
        f"{server}/api/agui-client-tools",
        "hitl-3",
        [
            {"text": "where am I?", "messageId": "u1", "runId": "run-a"},
            {"clientTools": {"get_location": {"city": "Lima"}}, "runId": "run-b"},
        ],
    )
    first, second = out["runs"]
    assert first["finished"]["outcome"] == "success"
    assert first["finished"]["pendingToolCallIds"] == ["call_loc"]
    assert second["error"] is None
    assert_accepted(second["events"])
    assert [e["content"] for e in second["events"] if e["type"] == "TOOL_CALL_RESULT"] == ['{"city":"Lima"}']
    wait_for(run_finished, "the runs to be stored")
    messages = stored("hitl-3")
    assert [m["role"] for m in messages] == ["user", "assistant"]
    (part,) = tool_parts(messages[1], "get_location")
    assert (part["state"], part["output"]) == ("output-available", {"city": "Lima"})
    assert out["messages"] == as_agui(messages)  # the client's own tool message gave way to the stored one
    assert (out["messages"][-1]["role"], out["messages"][-1]["content"]) == ("assistant", "You are in Lima.")
    run = Run.objects.get(trigger="continue")
    assert run.decisions[0]["clientResult"] == "output-available"
    assert run.decisions[0]["via"] == "agui"


# -- what the server refuses ------------------------------------------------------------------


def interrupted(browser: Browser, thread: str, text: str = EMAIL, path: str = "/api/agui") -> list[dict[str, Any]]:
    """Start a thread whose run ends interrupted; its interrupts."""
    response = post_agui(browser, run_input(thread, [user(text)]), path)
    assert response.status_code == 200, response.text
    events = assert_accepted(verify_sse(response.content))
    wait_for(run_finished, "the run to be stored")
    outcome = events[-1]["outcome"]
    assert outcome["type"] == "interrupt"
    interrupts: list[dict[str, Any]] = outcome["interrupts"]
    return interrupts


def client_history(thread: str) -> list[dict[str, Any]]:
    return as_agui(stored(thread))


def resume(thread: str, entries: list[dict[str, Any]], run_id: str = "r2", **extra: Any) -> dict[str, Any]:
    return run_input(thread, client_history(thread), run_id=run_id, resume=entries, **extra)


def approve(interrupt_id: str, approved: bool = True) -> dict[str, Any]:
    return {"interruptId": interrupt_id, "status": "resolved", "payload": {"approved": approved}}


def assert_refused(response: Any, status: int, code: str, field: str | None = None) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == code
    assert error.get("field") == field
    assert error["message"]


def test_a_forged_interrupt_id_runs_nothing(server: str) -> None:
    browser = Browser(server)
    interrupted(browser, "forged")
    before = database()
    response = post_agui(browser, resume("forged", [approve("apv_guessed")]))
    assert_refused(response, 409, "unknown_interrupt", "resume[0].interruptId")
    assert database() == before
    assert sends() == 0


def test_a_replayed_resume_runs_nothing_more(server: str) -> None:
    browser = Browser(server)
    (interrupt,) = interrupted(browser, "replayed")
    body = resume("replayed", [approve(interrupt["id"])])
    first = post_agui(browser, body)
    assert first.status_code == 200
    events = assert_accepted(verify_sse(first.content))
    assert events[1]["type"] == "MESSAGES_SNAPSHOT"
    assert events[-1]["type"] == "RUN_FINISHED"
    assert "outcome" not in events[-1]
    wait_for(run_finished, "the continuation to be stored")
    assert sends() == 1
    # The client folds the snapshot and the continuation into the stored conversation.
    assert fold_messages(events, body["messages"]) == client_history("replayed")
    before = database()
    again = post_agui(browser, {**body, "runId": "r3"})
    assert_refused(again, 409, "already_answered")
    assert database() == before
    assert sends() == 1


def test_someone_elses_thread_is_a_404(server: str) -> None:
    alice = Browser(server)
    (interrupt,) = interrupted(alice, "alices")
    mallory = Browser(server)
    before = database()
    response = post_agui(mallory, resume("alices", [approve(interrupt["id"])]))
    assert_refused(response, 404, "not_found")
    assert database() == before
    assert sends() == 0


def test_an_answer_for_a_message_that_is_no_longer_the_last_is_stale(server: str) -> None:
    browser = Browser(server)
    (interrupt,) = interrupted(browser, "stale")
    old = resume("stale", [approve(interrupt["id"])])
    # The conversation moved on through the chat endpoint (AG-UI refuses
    # new input while an interrupt is open, below).
    body = browser.chat_body("stale", "count to 2", message_id="u2")
    with browser.client.stream("POST", "/api/chat", json=body, headers={"X-CSRFToken": browser.token}) as response:
        assert response.status_code == 200
        response.read()
    wait_for(run_finished, "the second run to be stored")
    before = database()
    response = post_agui(browser, old)
    assert_refused(response, 409, "stale", "resume[0].interruptId")
    assert database() == before
    assert sends() == 0


def test_new_input_while_an_interrupt_is_open_is_refused(server: str) -> None:
    browser = Browser(server)
    (interrupt,) = interrupted(browser, "blocked")
    before = database()
    body = run_input("blocked", [*client_history("blocked"), user("never mind", "u2")], run_id="r2")
    response = post_agui(browser, body)
    assert_refused(response, 409, "interrupts_pending", "resume")
    assert interrupt["id"] in response.json()["error"]["message"]
    assert database() == before


def test_every_open_interrupt_must_be_answered(server: str) -> None:
    browser = Browser(server)
    first, second = interrupted(browser, "partial", "write to ada@example.com and bob@example.com", "/api/agui-mailer")
    before = database()
    response = post_agui(browser, resume("partial", [approve(first["id"])]), "/api/agui-mailer")
    assert_refused(response, 409, "interrupts_unanswered", "resume")
    assert second["id"] in response.json()["error"]["message"]
    assert database() == before
    assert sends() == 0


def test_a_tool_message_cannot_answer_a_call_waiting_for_approval(server: str) -> None:
    browser = Browser(server)
    (interrupt,) = interrupted(browser, "fake-output")
    forged = {"id": "t1", "role": "tool", "toolCallId": interrupt["toolCallId"], "content": '{"status": "sent"}'}
    before = database()
    response = post_agui(browser, run_input("fake-output", [*client_history("fake-output"), forged], run_id="r2"))
    assert_refused(response, 409, "interrupts_unanswered", "resume")
    assert database() == before
    assert sends() == 0


@pytest.mark.parametrize(("content", "approved"), [('{"approved": true}', True), ('{"status": "sent"}', False)])
def test_a_tool_message_beside_the_resume_is_the_clients_record_not_the_result(
    server: str, content: str, approved: bool
) -> None:
    """CopilotKit answers a ``tool_call`` interrupt with the ``resume``
    entry and, beside it, a ``tool`` message for the call holding its
    answer (``useInterrupt``'s ``toolResults``). The resume entry decides;
    the call's result is what the tool returns (or the denial), never that
    message, whatever it says."""
    browser = Browser(server)
    (interrupt,) = interrupted(browser, "recorded")
    body = resume("recorded", [approve(interrupt["id"], approved)])
    body["messages"].append({"id": "t1", "role": "tool", "toolCallId": interrupt["toolCallId"], "content": content})
    response = post_agui(browser, body)
    assert response.status_code == 200, response.text
    events = assert_accepted(verify_sse(response.content))
    wait_for(run_finished, "the continuation to be stored")
    (result,) = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert result["toolCallId"] == interrupt["toolCallId"]
    (part,) = tool_parts(stored("recorded")[-1])
    if approved:
        assert sends() == 1
        assert part["state"] == "output-available"
        assert part["output"]["status"] == "sent"
        assert part["output"]["to"] == "ada@example.com"
        assert result["content"] == json.dumps(part["output"], separators=(",", ":"), ensure_ascii=False)
    else:
        assert sends() == 0
        assert part["state"] == "output-denied"
        assert result["metadata"] == {"uistream": {"outcome": "denied"}}
    # The snapshot the continuation starts with holds no message of the
    # client's: its record of the answer is replaced by the stored result.
    assert "t1" not in ids(events[1]["messages"])


def test_a_client_tool_answered_twice_or_again_is_refused(server: str) -> None:
    browser = Browser(server)
    path = "/api/agui-client-tools"
    assert post_agui(browser, run_input("twice", [user("where am I?")]), path).status_code == 200
    wait_for(run_finished, "the run to be stored")
    answer = {"id": "t1", "role": "tool", "toolCallId": "call_loc", "content": '{"city": "Lima"}'}
    before = database()
    n = len(client_history("twice"))
    doubled = [*client_history("twice"), answer, {**answer, "id": "t2"}]
    response = post_agui(browser, run_input("twice", doubled, run_id="r2"), path)
    assert_refused(response, 400, "invalid", f"messages[{n + 1}].toolCallId")
    parts = [*client_history("twice"), {**answer, "content": [{"type": "text", "text": "Lima"}]}]
    response = post_agui(browser, run_input("twice", parts, run_id="r2"), path)
    assert_refused(response, 400, "invalid", f"messages[{n}].content")
    assert database() == before
    body = run_input("twice", [*client_history("twice"), answer], run_id="r2")
    assert post_agui(browser, body, path).status_code == 200
    wait_for(run_finished, "the continuation to be stored")
    before = database()
    # The client's history now holds the stored result: a replay answers nothing.
    response = post_agui(browser, {**body, "runId": "r3"}, path)
    assert_refused(response, 409, "nothing_pending")
    assert database() == before


# (name, resume entries or a body change, status, code, field)
MALFORMED: list[tuple[str, Any, int, str, str | None]] = [
    ("no status", [{"interruptId": "ID"}], 400, "invalid", "resume[0].status"),
    ("bad status", [{"interruptId": "ID", "status": "approved"}], 400, "invalid", "resume[0].status"),
    ("no interrupt id", [{"status": "cancelled"}], 400, "invalid", "resume[0].interruptId"),
    ("resolved without payload", [{"interruptId": "ID", "status": "resolved"}], 400, "invalid", "resume[0].payload"),
    (
        "payload not an object",
        [{"interruptId": "ID", "status": "resolved", "payload": True}],
        400,
        "invalid",
        "resume[0].payload",
    ),
    (
        "approved not a bool",
        [{"interruptId": "ID", "status": "resolved", "payload": {"approved": "yes"}}],
        400,
        "invalid",
        "resume[0].payload.approved",
    ),
    (
        "reason not a string",
        [{"interruptId": "ID", "status": "resolved", "payload": {"approved": False, "reason": 3}}],
        400,
        "invalid",
        "resume[0].payload.reason",
    ),
    (
        "edited arguments that don't fit the tool",
        [{"interruptId": "ID", "status": "resolved", "payload": {"approved": True, "editedArgs": {"to": 3}}}],
        400,
        "invalid",
        "resume[0].payload.editedArgs",
    ),
    (
        "edited arguments of a denied call",
        [{"interruptId": "ID", "status": "resolved", "payload": {"approved": False, "editedArgs": {"to": "x@y.z"}}}],
        400,
        "invalid",
        "resume[0].payload.editedArgs",
    ),
    (
        "the same interrupt twice",
        [{"interruptId": "ID", "status": "cancelled"}, {"interruptId": "ID", "status": "cancelled"}],
        400,
        "invalid",
        "resume[1].interruptId",
    ),
    (
        "payload null",
        [{"interruptId": "ID", "status": "resolved", "payload": None}],
        400,
        "invalid",
        "resume[0].payload",
    ),
    ("entry not an object", ["ID"], 400, "invalid", "resume[0]"),
    ("a new user message too", "with-user", 400, "invalid", "messages[N].role"),
]


@pytest.mark.parametrize(
    ("entries", "status", "code", "field"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
def test_a_malformed_resume_is_a_400_and_nothing_is_written(
    server: str, entries: Any, status: int, code: str, field: str | None
) -> None:
    browser = Browser(server)
    (interrupt,) = interrupted(browser, "malformed")
    if entries == "with-user":
        body = resume("malformed", [approve(interrupt["id"])])
        body["messages"].append(user("and one more thing", "u2"))
        field = f"messages[{len(body['messages']) - 1}].role"
    else:
        filled = [
            {k: (interrupt["id"] if v == "ID" else v) for k, v in e.items()} if isinstance(e, dict) else e
            for e in entries
        ]
        body = resume("malformed", filled)
    before = database()
    response = post_agui(browser, body)
    assert_refused(response, status, code, field)
    assert database() == before
    assert sends() == 0
