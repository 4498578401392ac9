"""Two requests racing for one chat: the run slot is taken before anything
is written, so the loser leaves no trace (no user message without a reply,
no approval answered with no run to act on it)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from django.db import connections

from uistream_app.hooks import TurnContext
from uistream_app.models import Conversation, Message, Run
from uistream_app.owners import Owner
from uistream_app.testing import ScriptedModel, text
from uistream_app.transport.chat_request import BadRequest, ChatRequest, chat_turn
from uistream_app.views import ChatView

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


@pytest_asyncio.fixture(autouse=True)
async def _close_worker_connections() -> AsyncIterator[None]:
    """The store called outside a request does its database work on
    asgiref's shared worker thread, whose connection outlives the test;
    PostgreSQL won't drop the test database while it's open."""
    yield
    await sync_to_async(connections.close_all)()


def submit(chat_id: str, message_id: str, text: str) -> ChatRequest:
    message = {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}
    return ChatRequest(chat_id=chat_id, messages=[message])


async def start(chat: ChatRequest, owner: Owner) -> Any:
    """What the chat view does with a parsed request: the turn starts
    (``ChatHooks.start_turn``: the store prepares the run, the runner
    starts it)."""
    view = ChatView(model=ScriptedModel(text("Hello there.", words=True), delay=0.01))
    context = TurnContext(owner, chat.chat_id, "http")
    return await view.start_turn(chat_turn(chat), context, version=7)


async def test_two_first_messages_racing_for_one_chat_store_one_turn() -> None:
    owner = Owner.of_session("s" * 32)
    outcomes = await asyncio.gather(
        start(submit("race-1", "u-a", "first"), owner),
        start(submit("race-1", "u-b", "second"), owner),
        return_exceptions=True,
    )
    refused = [o for o in outcomes if isinstance(o, BadRequest)]
    started = [o for o in outcomes if not isinstance(o, BaseException)]
    assert len(started) == 1
    assert len(refused) == 1
    assert refused[0].status == 409
    await started[0].task

    def stored() -> list[tuple[str, str]]:
        messages = Conversation.objects.get(client_id="race-1").messages.order_by("position")
        return [(m.role, m.pk) for m in messages]

    turn = await sync_to_async(stored)()
    assert [role for role, _ in turn] == ["user", "assistant"]  # the loser's message is not there
    assert await Run.objects.filter(conversation__client_id="race-1").acount() == 1


async def test_a_refused_request_frees_the_slot_for_the_next_one() -> None:
    """A request the database work refuses (here: regenerating in a chat
    that holds no answer) releases the run slot it reserved."""
    owner = Owner.of_session("s" * 32)
    first = await start(submit("chat-a", "u-1", "hello"), owner)
    await first.task
    with pytest.raises(BadRequest):
        await start(ChatRequest(chat_id="chat-a", messages=[], trigger="regenerate-message", message_id="u-1"), owner)
    assert await Run.objects.filter(conversation__client_id="chat-a").acount() == 1
    with pytest.raises(BadRequest):
        await start(ChatRequest(chat_id="chat-b", messages=[], trigger="regenerate-message"), owner)
    assert not await Message.objects.filter(conversation__client_id="chat-b").aexists()
    again = await start(submit("chat-b", "u-2", "hello"), owner)
    await again.task
    assert await Run.objects.filter(conversation__client_id="chat-b", status="completed").acount() == 1


async def test_a_run_is_live_in_its_process_until_its_task_ends() -> None:
    from uistream_app.lifecycle.runner import live_runs

    handle = await start(submit("live-1", "u-1", "hello"), Owner.of_session("s" * 32))
    assert handle in live_runs()
    await handle.task  # its done callbacks ran before this await returns
    assert handle not in live_runs()


async def test_a_run_interrupted_then_stopped_ends_only_once_its_outcome_is_stored() -> None:
    """At shutdown a run is interrupted (``RunHandle.interrupt``); its
    client drops the stream on the error chunk, and that stops the run too,
    a second cancellation. The shutdown waits for the run's task and then
    lets the process exit, so the task must not end before the run's
    outcome is written, however slow that write is."""
    import threading
    import time

    from .db import worker_queries

    interrupted, writing = threading.Event(), threading.Event()

    def slow_outcome(sql: str) -> None:
        if interrupted.is_set() and sql.lstrip().upper().startswith("UPDATE") and "uistream_app_run" in sql:
            writing.set()
            time.sleep(0.3)

    view = ChatView(model=ScriptedModel(text(" ".join(["word"] * 500), words=True), delay=0.01))
    chat = submit("interrupted-1", "u-1", "a long answer")
    owner = Owner.of_session("s" * 32)
    handle = await view.start_turn(chat_turn(chat), TurnContext(owner, chat.chat_id, "http"), version=7)
    prepared = handle.prepared
    # The answer has begun (stored: the database has no event to wait on).
    while not await Run.objects.filter(pk=prepared.run.pk, first_chunk_at__isnull=False).aexists():  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    async with worker_queries(before=slow_outcome):
        interrupted.set()
        handle.interrupt("The server restarted.")
        assert await asyncio.get_running_loop().run_in_executor(None, writing.wait, 10)
        handle.task.cancel()  # the client's stop, while the outcome is being written
        with pytest.raises(asyncio.CancelledError):
            await handle.task
        run = await Run.objects.aget(pk=prepared.run.pk)
    assert run.status == "interrupted"
    assert run.finish_reason == "interrupted"


async def test_two_owners_first_messages_under_one_chat_id_start_two_chats() -> None:
    """Chat ids are per owner, and so is the run slot: two owners starting a
    chat of the same id at once each get theirs, neither a 409."""
    alice, bob = Owner.of_session("a" * 32), Owner.of_session("b" * 32)
    handles = await asyncio.gather(
        start(submit("same", "u-a", "first"), alice), start(submit("same", "u-b", "second"), bob)
    )
    await asyncio.gather(*(h.task for h in handles))
    assert handles[0].run.conversation_id != handles[1].run.conversation_id
    stored = Conversation.objects.filter(client_id="same").order_by("session_key").values_list("session_key", flat=True)
    assert [key async for key in stored] == ["a" * 32, "b" * 32]
    assert await Run.objects.filter(conversation__client_id="same", status="completed").acount() == 2


async def test_a_lone_message_to_a_chat_the_owner_has_goes_on_in_that_chat() -> None:
    """A client that sends only its new message, not the history (which
    reads like a chat's first message), still adds to the chat it has: the
    turn is stored after the first answer, in the same conversation."""
    owner = Owner.of_session("s" * 32)
    first = await start(submit("lone-1", "u-1", "hello"), owner)
    await first.task
    second = await start(submit("lone-1", "u-2", "again"), owner)
    await second.task
    assert second.run.conversation_id == first.run.conversation_id
    messages = Message.objects.filter(conversation__client_id="lone-1").order_by("position")
    assert [m.role async for m in messages] == ["user", "assistant", "user", "assistant"]


async def test_a_lone_message_while_the_chat_streams_is_refused_and_writes_nothing() -> None:
    owner = Owner.of_session("s" * 32)
    view = ChatView(model=ScriptedModel(text(" ".join(["word"] * 200), words=True), delay=0.01))
    chat = submit("lone-2", "u-1", "a long answer")
    streaming = await view.start_turn(chat_turn(chat), TurnContext(owner, chat.chat_id, "http"), version=7)
    with pytest.raises(BadRequest) as refused:
        await start(submit("lone-2", "u-2", "meanwhile"), owner)
    assert refused.value.status == 409
    streaming.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await streaming.task
    assert not await Message.objects.filter(pk="u-2").aexists()
    assert await Run.objects.filter(conversation__client_id="lone-2").acount() == 1
