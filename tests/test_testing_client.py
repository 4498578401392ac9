"""The test clients of ``uistream_app.testing``, as a project's tests use
them: a useChat turn over HTTP and over the WebSocket, an AG-UI run, an
approval answered on each, another user's chat refused, and the same
clients inside Django's ``TestCase``.

The endpoints are the demo's (its offline model, paced at 0 ms) and the
README's example view; every assertion is on what a client or the
database holds once a turn has returned, with no waiting of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter  # type: ignore[import-untyped]
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import TestCase, override_settings
from django.urls import path

from uistream_app.consumers import ChatConsumer
from uistream_app.models import Conversation, Run
from uistream_app.protocol.agui.messages import agui_user_message, ui_messages_to_agui
from uistream_app.recording import read_log
from uistream_app.runs import tool
from uistream_app.testing import (
    AGUIClient,
    ChatClient,
    ScriptedModel,
    SocketChatClient,
    SocketClosed,
    call,
    chat_body,
    run_input,
    user_message,
)

EMAIL = "email ada@example.com saying the build is green"


def async_db(test: Callable[..., Any]) -> Any:
    """An async test on a database whose transactions commit (the runs'
    log writer has a connection of its own)."""
    return pytest.mark.asyncio(pytest.mark.django_db(transaction=True)(test))


@pytest.fixture(autouse=True)
def fast_demo_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "0")


@sync_to_async
def stored_conversation(chat_id: str) -> list[dict[str, Any]]:
    return [m.as_ui_message() for m in Conversation.objects.get(client_id=chat_id).messages.order_by("position")]


@sync_to_async
def stored_log(run_id: str) -> list[dict[str, Any]]:
    return [entry.chunk for entry in read_log(Run.objects.get(pk=run_id))]


async def a_user(name: str) -> Any:
    return await get_user_model().objects.acreate(username=name)


def without_id(message: dict[str, Any] | None) -> dict[str, Any]:
    assert message is not None
    return {**message, "id": None}


# -- the bodies --------------------------------------------------------------------------


def test_the_bodies_are_the_real_clients():
    assert user_message("hi") == {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    picture = {"mediaType": "image/png", "url": "data:image/png;base64,iVBORw0KGgo="}
    assert user_message("look", id="u2", files=[picture])["parts"] == [
        {"type": "file", **picture},
        {"type": "text", "text": "look"},
    ]
    assert chat_body("c1", "hi") == {"id": "c1", "messages": [user_message("hi")], "trigger": "submit-message"}
    assert chat_body("c1", [user_message("hi")], trigger="regenerate-message", message_id="a1", plan="pro") == {
        "plan": "pro",
        "id": "c1",
        "messages": [user_message("hi")],
        "trigger": "regenerate-message",
        "messageId": "a1",
    }
    assert run_input("t1", "hi") == {
        "threadId": "t1",
        "runId": "r1",
        "messages": [{"id": "u1", "role": "user", "content": "hi"}],
    }
    answer = [{"interruptId": "apv_1", "status": "cancelled"}]
    assert run_input("t1", [], run_id="r2", resume=answer)["resume"] == answer


# -- useChat over HTTP -------------------------------------------------------------------


@async_db
async def test_a_turn_gives_the_chunks_and_the_message_the_browser_builds():
    chat = ChatClient()
    result = await chat.send("count to 3")
    assert result.ok
    assert result.status == 200
    assert result.headers["content-type"] == "text/event-stream"
    assert result.chunks[0] == {"type": "start", "messageId": result.message["id"]}
    assert result.chunks[-1]["type"] == "finish"
    assert [p["type"] for p in result.message["parts"]] == ["step-start", "reasoning", "text"]
    assert result.text == "1 2 3"
    # The turn returned once its run was stored: nothing to wait for.
    run = await Run.objects.aget(pk=result.run_id)
    assert run.status == "completed"
    assert await stored_log(result.run_id) == result.chunks
    stored = await stored_conversation(chat.chat_id)
    assert stored[1] == result.message
    assert chat.messages() == stored


@async_db
async def test_the_next_turn_sends_the_history_and_continues_the_chat():
    chat = ChatClient()
    first = await chat.send("count to 2")
    second = await chat.send("count to 4")
    assert second.ok, second.error
    assert [m["role"] for m in second.body["messages"]] == ["user", "assistant", "user"]
    assert second.body["messages"][1] == first.message
    assert second.text == "1 2 3 4"
    assert chat.messages() == await stored_conversation(chat.chat_id)
    assert len(chat.messages()) == 4


@pytest.mark.parametrize(
    ("answer", "state"), [("approve", "output-available"), ("deny", "output-denied")], ids=["approve", "deny"]
)
@async_db
async def test_a_call_waits_for_a_person_then_runs_as_answered(answer: str, state: str):
    ada = await a_user("ada")
    chat = ChatClient()
    await chat.aforce_login(ada)
    asked = await chat.send(EMAIL)
    (pending,) = asked.approvals
    assert pending["type"] == "tool-send_email"
    assert pending["input"] == {"to": "ada@example.com", "body": "the build is green"}
    assert [c for c in asked.chunks if c["type"] == "tool-approval-request"] == [
        {"type": "tool-approval-request", "approvalId": pending["approval"]["id"], "toolCallId": pending["toolCallId"]}
    ]
    if answer == "approve":
        answered = await chat.approve()
    else:
        answered = await chat.deny(reason="not today")
    assert answered.ok, answered.error
    # useChat's continuation: the assistant message resent, its part answered.
    resent = answered.body["messages"][-1]
    assert answered.body["messageId"] == resent["id"] == asked.message["id"]
    assert resent["parts"][-1]["state"] == "approval-responded"
    # The same message, continued.
    assert answered.message["id"] == asked.message["id"]
    (email,) = answered.tool_parts("send_email")
    assert email["state"] == state
    assert email["approval"]["approved"] is (answer == "approve")
    if answer == "approve":
        assert email["output"]["status"] == "sent"
    else:
        assert email["approval"]["reason"] == "not today"
    assert answered.approvals == []
    stored = await stored_conversation(chat.chat_id)
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[1] == answered.message == chat.messages()[1]
    run = await Run.objects.aget(pk=answered.run_id)
    assert run.trigger == "continue"
    assert run.decisions[0]["approved"] is (answer == "approve")
    assert run.decisions[0]["decidedBy"] == f"user {ada.pk} (ada)"


@async_db
async def test_an_approval_may_edit_the_arguments():
    chat = ChatClient()
    await chat.send(EMAIL)
    edited = {"to": "bo@example.com", "body": "the build is red"}
    answered = await chat.approve(edited_input=edited)
    assert answered.body["messages"][-1]["parts"][-1]["input"] == edited
    (email,) = answered.tool_parts("send_email")
    assert email["state"] == "output-available"
    assert email["output"]["to"] == "bo@example.com"


@async_db
async def test_nothing_pending_is_a_lookup_error_before_anything_is_sent():
    chat = ChatClient()
    await chat.send("count to 1")
    with pytest.raises(LookupError, match="no approval is pending"):
        await chat.approve()
    assert await Run.objects.acount() == 1


@async_db
async def test_another_users_chat_id_is_a_new_chat_on_every_transport():
    """Chat ids are per owner: under Alice's chat id, Bob (HTTP), Carol
    (the WebSocket) and Dave (AG-UI) each start a chat of their own, and
    Alice's is as it was."""
    alice = ChatClient()
    await alice.aforce_login(await a_user("alice"))
    await alice.send("count to 2")

    bob = ChatClient(chat_id=alice.chat_id)
    await bob.aforce_login(await a_user("bob"))
    own = await bob.send("count to 2")
    assert own.ok, own.error
    assert [m["role"] for m in bob.messages()] == ["user", "assistant"]
    carol = ChatClient()
    await carol.aforce_login(await a_user("carol"))
    async with SocketChatClient(chat_id=alice.chat_id, client=carol.client) as socket:
        over_socket = await socket.send("count to 2")
    assert over_socket.ok, over_socket.error
    dave = ChatClient()
    await dave.aforce_login(await a_user("dave"))
    agui = await AGUIClient(thread_id=alice.chat_id, client=dave.client).run("count to 2")
    assert agui.ok, agui.error

    assert await Conversation.objects.filter(client_id=alice.chat_id).acount() == 4
    alices = await Conversation.objects.aget(owner__username="alice")
    assert [m.role async for m in alices.messages.order_by("position")] == ["user", "assistant"]
    assert await Run.objects.filter(conversation=alices).acount() == 1
    assert await Run.objects.acount() == 4


@async_db
async def test_an_anonymous_visitor_keeps_its_session_from_turn_to_turn():
    chat = ChatClient()
    await chat.send("count to 1")
    again = await chat.send("count to 2")
    assert again.ok, again.error
    conversation = await Conversation.objects.aget(client_id=chat.chat_id)
    assert conversation.session_key == chat.client.cookies[settings.SESSION_COOKIE_NAME].value


# -- the WebSocket -----------------------------------------------------------------------


@async_db
async def test_the_socket_gives_the_message_http_gives():
    question = "What's the weather in Paris?"
    over_http = await ChatClient().send(question)
    async with SocketChatClient() as socket:
        over_socket = await socket.send(question)
        assert over_socket.ok, over_socket.error
        assert over_socket.status is None
        assert without_id(over_socket.message) == without_id(over_http.message)
        assert [c["type"] for c in over_socket.chunks] == [c["type"] for c in over_http.chunks]
        (weather,) = over_socket.tool_parts("get_weather")
        assert weather["output"]["city"] == "Paris"
        assert await stored_log(over_socket.run_id) == over_socket.chunks
        assert socket.messages() == await stored_conversation(socket.chat_id)
        next_turn = await socket.send("count to 2")
    assert next_turn.text == "1 2"
    assert len(next_turn.body["messages"]) == 3


@async_db
async def test_a_socket_the_server_closes_is_an_assertion_error():
    async with SocketChatClient() as socket:
        with pytest.raises(SocketClosed) as closed:
            await socket.send_body({"id": socket.chat_id, "messages": [{"id": 7}]})
        assert closed.value.code == 1008  # rule 1: not a UI message
        assert socket.communicator is None
    with pytest.raises(SocketClosed, match="at the handshake"):
        await SocketChatClient(URLRouter([path("ws/chat/", RefusingConsumer.as_asgi())])).connect()
    # Where anonymous chats are off the socket opens, and its send is refused, saying why.
    no_visitors = override_settings(UISTREAM={**settings.UISTREAM, "ALLOW_ANONYMOUS": False})
    with no_visitors:
        async with SocketChatClient() as socket:
            refused = await socket.send("hi")
    assert refused.error is not None
    assert refused.error["code"] == "not_authenticated"
    assert "UISTREAM['ALLOW_ANONYMOUS'] = True" in refused.error["message"]
    assert await Conversation.objects.acount() == 0


class RefusingConsumer(ChatConsumer):
    """Refuses every socket at the handshake (``get_owner`` returns None)."""

    async def get_owner(self) -> Any:
        return None


@async_db
async def test_an_approval_over_the_socket():
    async with SocketChatClient() as socket:
        await socket.aforce_login(await a_user("ada"))
        asked = await socket.send(EMAIL)
        assert len(asked.approvals) == 1
        answered = await socket.approve(asked.approvals[0]["approval"]["id"])
    assert answered.message["id"] == asked.message["id"]
    assert answered.tool_parts("send_email")[0]["state"] == "output-available"
    assert (await stored_conversation(socket.chat_id))[1] == answered.message


# -- AG-UI -------------------------------------------------------------------------------


@async_db
async def test_an_agui_run_gives_its_events_and_the_stored_message():
    agent = AGUIClient()
    result = await agent.run("count to 3")
    assert result.ok, result.error
    types = [e["type"] for e in result.events]
    assert types[0] == "RUN_STARTED"
    assert types[-1] == "RUN_FINISHED"
    assert "TEXT_MESSAGE_CONTENT" in types
    assert result.text == "1 2 3"
    assert result.state == {"turns": 1}  # the demo's shared state
    stored = await stored_conversation(agent.thread_id)
    assert result.message == stored[1]
    assert result.messages[0] == agui_user_message(stored[0])
    assert result.messages[-1]["content"] == "1 2 3"
    second = await agent.run("count to 2")
    assert second.body["state"] == {"turns": 1}
    assert second.state == {"turns": 2}


@pytest.mark.parametrize("answer", ["approve", "deny", "cancel"])
@async_db
async def test_an_agui_interrupt_is_answered_with_resume(answer: str):
    agent = AGUIClient()
    asked = await agent.run(EMAIL)
    (interrupt,) = asked.interrupts
    assert interrupt["reason"] == "tool_call"
    assert agent.interrupts() == [interrupt]
    resumed = await getattr(agent, answer)()
    assert resumed.ok, resumed.error
    assert resumed.body["resume"][0]["interruptId"] == interrupt["id"]
    assert resumed.interrupts == []
    assert agent.interrupts() == []
    (result,) = resumed.of_type("TOOL_CALL_RESULT")
    assert result["toolCallId"] == interrupt["toolCallId"]
    stored = await stored_conversation(agent.thread_id)
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert resumed.message == stored[1]
    email = next(p for p in stored[1]["parts"] if p["type"] == "tool-send_email")
    assert email["state"] == ("output-available" if answer == "approve" else "output-denied")
    assert [m for m in resumed.messages if m["role"] != "tool"] == [
        agui_user_message(stored[0]),
        *(m for m in ui_messages_to_agui([stored[1]]) if m["role"] != "tool"),
    ]


# -- the README's example ------------------------------------------------------------------


@tool
def get_weather(city: str) -> dict:
    """The weather in a city.

    Args:
        city: The city's name.
    """
    return {"city": city, "temperature": 18}


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_weather_is_looked_up(settings, django_user_model):
    """README.md's example ("Testing your chat view"), word for word; its
    ``get_weather`` is the README's tool, defined above."""
    model = ScriptedModel([call("get_weather", {"city": "Paris"})], "It is 18 °C in Paris.")
    settings.UISTREAM = {**settings.UISTREAM, "MODEL": model, "TOOLS": [get_weather]}

    chat = ChatClient()  # POSTs to reverse("uistream:chat"), as useChat does
    await chat.aforce_login(await django_user_model.objects.acreate(username="ada"))
    result = await chat.send("Weather in Paris?")

    assert result.text == "It is 18 °C in Paris."
    (weather,) = result.tool_parts("get_weather")
    assert weather["output"] == {"city": "Paris", "temperature": 18}
    assert model.requests[1].messages[-1].content == '{"city": "Paris", "temperature": 18}'


# -- inside Django's TestCase ------------------------------------------------------------


@override_settings(UISTREAM={**settings.UISTREAM, "LOG_WRITER": "auto"})
class ClientsInATestCase(TestCase):
    """Each test in a transaction that is rolled back: the runs' rows are
    seen by the test's connection only, and written on it (the "auto" log
    writer; the suite's settings choose "thread")."""

    async def test_a_turn_and_its_approval(self) -> None:
        chat = ChatClient(client=self.async_client)
        await chat.aforce_login(await a_user("ada"))
        asked = await chat.send(EMAIL)
        run = await Run.objects.aget(pk=asked.run_id)
        assert run.status == "completed"
        answered = await chat.approve()
        assert answered.tool_parts("send_email")[0]["state"] == "output-available"
        assert await stored_conversation(chat.chat_id) == chat.messages()
        assert await stored_log(answered.run_id) == answered.chunks

    async def test_the_socket_and_agui(self) -> None:
        async with SocketChatClient(client=self.async_client) as socket:
            over_socket = await socket.send("count to 3")
        assert over_socket.text == "1 2 3"
        assert (await stored_conversation(socket.chat_id))[1] == over_socket.message
        agui = await AGUIClient(client=self.async_client).run("count to 2")
        assert agui.text == "1 2"
        assert agui.message is not None
