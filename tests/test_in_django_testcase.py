"""A project's own tests of its chat view, written the way Django's
documentation shows them: a ``TestCase`` (each test in a transaction that is
rolled back) and its async test client. The run's log and stored message
must be written inside that transaction, where the test reads them, not
through a connection of their own that cannot see the rows the request made
(``UISTREAM["LOG_WRITER"] = "auto"``, the default: inline when the run's rows
were created inside a transaction no other connection sees yet). Outside
one, as on a server, "auto" is the writer's own thread, which the rest of
the suite runs too.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.test import AsyncClient, TestCase, override_settings

from uistream_app.models import ChunkBatch, Message, Run
from uistream_app.protocol.sse import SSEParser
from uistream_app.recording import WRITER_EXECUTOR, log_writes_inline, read_log
from uistream_app.testing import chat_body, user_message

from .db import worker_queries

#: The default; the suite's settings choose "thread".
WRITER = "auto"


async def post_chat(client: AsyncClient, chat_id: str, text: str) -> list[dict[str, Any]]:
    body = json.dumps(chat_body(chat_id, [user_message(text, id=f"{chat_id}-u1")]))
    response = await client.post("/api/chat", body, content_type="application/json")
    assert response.status_code == 200
    raw = b"".join([part async for part in response.streaming_content])
    return [json.loads(e.data) for e in SSEParser().feed(raw) if e.data != "[DONE]"]


class ChatViewInATestCase(TestCase):
    async def chat(self, chat_id: str, text: str) -> list[dict[str, Any]]:
        with override_settings(UISTREAM={**settings.UISTREAM, "LOG_WRITER": WRITER}):
            return await post_chat(self.async_client, chat_id, text)

    async def test_the_stored_run_is_visible_to_the_test(self) -> None:
        chunks = await self.chat("tc-1", "count to 3")
        message = await Message.objects.aget(pk=chunks[0]["messageId"])
        run = await Run.objects.aget(message=message)
        assert run.status == "completed"
        assert run.chunk_count == len(chunks)
        assert [p["text"] for p in message.parts if p["type"] == "text"] == ["1 2 3"]
        stored = await sync_to_async(read_log)(run)
        assert [entry.chunk for entry in stored] == chunks


# -- where the log is written outside a TestCase -----------------------------------------


def thread_name() -> str:
    return threading.current_thread().name


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("mode", "written_by"), [("auto", "writer"), ("thread", "writer"), ("inline", "orm")])
async def test_where_a_committed_runs_log_is_written(mode: str, written_by: str) -> None:
    """Rows committed as a server commits them: "auto" leaves the log to the
    writer thread, as "thread" does; "inline" writes it on the thread the
    request's ORM calls run on."""
    threads = {
        "writer": await asyncio.get_running_loop().run_in_executor(WRITER_EXECUTOR, thread_name),
        "orm": await sync_to_async(thread_name)(),
    }
    assert threads["writer"] != threads["orm"]
    table = ChunkBatch._meta.db_table
    inserted_on: list[str] = []

    def before(sql: str) -> None:
        if sql.lstrip().upper().startswith("INSERT") and table in sql:
            inserted_on.append(thread_name())

    with override_settings(UISTREAM={**settings.UISTREAM, "LOG_WRITER": mode}):
        async with worker_queries(before=before):
            chunks = await post_chat(AsyncClient(), f"where-{mode}", "count to 3")
    assert set(inserted_on) == {threads[written_by]}
    run = await Run.objects.aget(message_id=chunks[0]["messageId"])
    assert [entry.chunk for entry in await sync_to_async(read_log)(run)] == chunks


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("mode", "outside", "inside"), [("auto", False, True), ("thread", False, False), ("inline", True, True)]
)
def test_log_writes_inline_follows_the_connections_transaction(mode: str, outside: bool, inside: bool) -> None:
    with override_settings(UISTREAM={**settings.UISTREAM, "LOG_WRITER": mode}):
        assert log_writes_inline() is outside
        with transaction.atomic():
            assert log_writes_inline() is inside
