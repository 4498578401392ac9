"""Database helpers for tests: a conversation turn to record into, and a
query log for the thread that ``sync_to_async`` runs database work in.

Async tests run their ORM calls through ``sync_to_async`` (thread-sensitive),
which outside a request is one shared worker thread with its own connection;
``CaptureQueriesContext`` entered in the test's thread would not see them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connection

from uistream_app.models import Conversation, Message, Run
from uistream_app.recording import WRITER_EXECUTOR as LOG_WRITER_THREAD


def make_turn(
    *,
    chat_id: str = "chat-1",
    message_id: str = "msg-assistant",
    parts: list[Any] | None = None,
    owner: Any = None,
    **run_fields: Any,
) -> tuple[Run, Message]:
    """A conversation with a user message and the (empty, unless ``parts``)
    assistant message a run is about to build, and that run."""
    conversation = Conversation.objects.create(id=chat_id, owner=owner)
    Message.objects.create(
        id=f"{message_id}-user",
        conversation=conversation,
        role=Message.Role.USER,
        parts=[{"type": "text", "text": "Hello"}],
        position=0,
    )
    message = Message.objects.create(
        id=message_id, conversation=conversation, role=Message.Role.ASSISTANT, parts=parts or [], position=1
    )
    run = Run.objects.create(conversation=conversation, message=message, **run_fields)
    return run, message


amake_turn = sync_to_async(make_turn)


class QueryLog:
    """An ``execute_wrapper`` that keeps the SQL of every statement run, and
    can make one fail or stall (``before`` is called with the SQL first)."""

    def __init__(self, before: Callable[[str], None] | None = None) -> None:
        self.sql: list[str] = []
        self.before = before

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        self.sql.append(sql)
        if self.before is not None:
            self.before(sql)
        return execute(sql, params, many, context)

    def count(self, verb: str) -> int:
        return sum(1 for sql in self.sql if sql.lstrip().upper().startswith(verb))

    @property
    def writes(self) -> int:
        return self.count("INSERT") + self.count("UPDATE") + self.count("DELETE")


@asynccontextmanager
async def worker_queries(before: Callable[[str], None] | None = None) -> AsyncIterator[QueryLog]:
    """Log the statements the ``sync_to_async`` worker thread and the chunk
    log's writer thread run."""
    log = QueryLog(before)

    def install() -> None:
        connection.execute_wrappers.append(log)

    def remove() -> None:
        connection.execute_wrappers.remove(log)

    loop = asyncio.get_running_loop()
    await sync_to_async(install)()
    await loop.run_in_executor(LOG_WRITER_THREAD, install)
    try:
        yield log
    finally:
        await sync_to_async(remove)()
        await loop.run_in_executor(LOG_WRITER_THREAD, remove)
