"""What a plain Django view stores for a new chat, the plainest way the ORM
allows: the reference that ``bench/request_floor.py``'s stored floor, the
server benchmark's ``django-stored`` target and ``bench/ws_bench.py``'s
stored bare consumer share (issue 29).

A new chat keeps what uistream keeps for one, without its pipeline, hooks,
broker, chunk log, caps or lease: the chat id looked up (is it the
visitor's already?), then in one transaction the conversation, the user's
message, an empty answer and the run; after the stream, in a second
transaction, the run's end and the answer's text. Sync functions: a view
calls them through ``sync_to_async`` (an async view) or directly (a thread).
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.utils import timezone

from uistream_app.models import Conversation, Message, Run

__all__ = ["finish_chat", "start_chat"]


def start_chat(client_id: str, session_key: str, asked: dict[str, Any]) -> tuple[Run, Message]:
    """The rows of a new chat of the anonymous session ``session_key`` whose
    first message is ``asked`` (useChat's, with ``id`` and ``parts``): its
    run (``running``) and its empty answer."""
    assert not Conversation.objects.filter(owner=None, session_key=session_key, client_id=client_id).exists()
    text = next((part.get("text", "") for part in asked["parts"] if part.get("type") == "text"), "")
    with transaction.atomic():
        chat = Conversation.objects.create(client_id=client_id, session_key=session_key, title=text[:200])
        _, answer = Message.objects.bulk_create(
            [
                Message(pk=asked["id"], conversation=chat, role="user", parts=asked["parts"], position=0),
                Message(pk=uuid.uuid4().hex, conversation=chat, role="assistant", parts=[], position=1),
            ]
        )
        run = Run.objects.create(
            pk=uuid.uuid4().hex, conversation=chat, message=answer, status="running", heartbeat_at=timezone.now()
        )
    return run, answer


def finish_chat(run: Run, answer: Message, parts: list[dict[str, Any]]) -> None:
    """The run's end (``completed``) and its answer's ``parts``, together."""
    with transaction.atomic():
        Run.objects.filter(pk=run.pk).update(status="completed", finish_reason="stop", finished_at=timezone.now())
        Message.objects.filter(pk=answer.pk).update(parts=parts)
