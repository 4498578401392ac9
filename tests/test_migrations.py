"""Migrations that move stored data: 0003 moves the chunk log from a row per
chunk to a row per batch (a log stored before it reads back the same after
it, and back); 0005 makes message ids per chat."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("uistream_app", "0002_run_decisions")]
AFTER = [("uistream_app", "0003_chunk_batches")]


def migrate(targets: list[tuple[str, str]]) -> Any:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture
def at_0002() -> Iterator[Any]:
    apps = migrate(BEFORE)
    try:
        yield apps
    finally:
        migrate(executor_leaf())


def executor_leaf() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


@pytest.mark.django_db(transaction=True)
def test_a_log_of_rows_becomes_batches_and_back(at_0002: Any) -> None:
    apps = at_0002
    Conversation = apps.get_model("uistream_app", "Conversation")
    Run = apps.get_model("uistream_app", "Run")
    RunChunk = apps.get_model("uistream_app", "RunChunk")
    conversation = Conversation.objects.create(id="c1")
    long_run = Run.objects.create(conversation=conversation)
    short_run = Run.objects.create(conversation=conversation)
    chunks = [{"type": "text-delta", "id": "text-0", "delta": str(i)} for i in range(2_345)]
    RunChunk.objects.bulk_create(
        RunChunk(run=long_run, seq=i, offset_ms=i * 3, chunk=chunk) for i, chunk in enumerate(chunks)
    )
    RunChunk.objects.create(run=short_run, seq=0, offset_ms=7, chunk={"type": "start"})

    apps = migrate(AFTER)
    ChunkBatch = apps.get_model("uistream_app", "ChunkBatch")
    rows = list(ChunkBatch.objects.filter(run_id=long_run.pk).order_by("first_seq"))
    assert [(r.first_seq, r.last_seq) for r in rows] == [(0, 999), (1000, 1999), (2000, 2344)]
    assert [c for r in rows for c in r.chunks] == chunks
    assert [o for r in rows for o in r.offsets] == [i * 3 for i in range(2_345)]
    short = ChunkBatch.objects.get(run_id=short_run.pk)
    assert (short.first_seq, short.last_seq, short.offsets, short.chunks) == (0, 0, [7], [{"type": "start"}])

    apps = migrate(BEFORE)
    RunChunk = apps.get_model("uistream_app", "RunChunk")
    back = RunChunk.objects.filter(run_id=long_run.pk).order_by("seq")
    assert [(r.seq, r.offset_ms, r.chunk) for r in back] == [(i, i * 3, c) for i, c in enumerate(chunks)]


@pytest.mark.django_db(transaction=True)
def test_messages_stored_before_per_chat_ids_keep_their_ids() -> None:
    """Migration 0005 (message ids unique per chat) keeps every stored
    message under the id its client knows, and goes back."""
    apps = migrate([("uistream_app", "0004_admin_indexes")])
    try:
        Conversation = apps.get_model("uistream_app", "Conversation")
        Message = apps.get_model("uistream_app", "Message")
        chat = Conversation.objects.create(id="c1")
        Message.objects.create(id="u1", conversation=chat, role="user", position=0, parts=[{"type": "text"}])
        apps = migrate([("uistream_app", "0005_message_client_id")])
        from uistream_app.models import Message as Current

        stored = Current.objects.get(pk="u1")
        assert (stored.ui_id, stored.as_ui_message()["id"], stored.client_id) == ("u1", "u1", "")
        assert list(Current.objects.filter(conversation_id="c1").with_client_id("u1")) == [stored]
        apps = migrate([("uistream_app", "0004_admin_indexes")])
        assert apps.get_model("uistream_app", "Message").objects.get(pk="u1").parts == [{"type": "text"}]
    finally:
        migrate(executor_leaf())
