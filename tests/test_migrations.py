"""Migrations that move stored data: 0003 moves the chunk log from a row per
chunk to a row per batch (a log stored before it reads back the same after
it, and back); 0005 makes message ids per chat; 0013 makes chat ids per
owner; 0020 counts the day's stored bytes of the runs stored before it; 0021
drops the ``JSON_VALID`` check from a message's JSON columns."""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import override_settings
from django.utils import timezone

from uistream_app.errors import Throttled
from uistream_app.lifecycle.caps import OwnerCaps
from uistream_app.models import OwnerDay
from uistream_app.owners import Owner

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
        # Through 0005, to today's tables (today's model reads them).
        apps = migrate(executor_leaf())
        from uistream_app.models import Message as Current

        stored = Current.objects.get(pk="u1")
        assert (stored.ui_id, stored.as_ui_message()["id"], stored.client_id) == ("u1", "u1", "")
        assert list(Current.objects.filter(conversation_id="c1").with_client_id("u1")) == [stored]
        apps = migrate([("uistream_app", "0004_admin_indexes")])
        assert apps.get_model("uistream_app", "Message").objects.get(pk="u1").parts == [{"type": "text"}]
    finally:
        migrate(executor_leaf())


@pytest.mark.django_db(transaction=True)
def test_conversations_stored_before_per_owner_chat_ids_keep_their_ids_and_rows() -> None:
    """Migration 0013 (chat ids unique per owner) keeps each stored chat
    under its key, so its messages, runs and files still point at it, and
    gives it its old id as the chat id its owner finds it by; after it, a
    second owner can have a chat of the same id."""
    from django.contrib.auth import get_user_model

    alice = get_user_model().objects.create_user("alice-m")
    bob = get_user_model().objects.create_user("bob-m")
    apps = migrate([("uistream_app", "0012_run_stored_bytes")])
    try:
        Conversation = apps.get_model("uistream_app", "Conversation")
        Message = apps.get_model("uistream_app", "Message")
        Run = apps.get_model("uistream_app", "Run")
        StoredFile = apps.get_model("uistream_app", "StoredFile")
        chat = Conversation.objects.create(id="c1", owner_id=alice.pk)
        Conversation.objects.create(id="anon-1", session_key="s" * 32)
        message = Message.objects.create(id="u1", conversation=chat, role="user", position=0, parts=[])
        run = Run.objects.create(conversation=chat, message=message)
        StoredFile.objects.create(conversation=chat, message=message, file="f", media_type="text/plain", size=1)
        # Through 0013, to today's tables (today's model reads them).
        migrate(executor_leaf())
        from uistream_app.models import Conversation as Current
        from uistream_app.owners import Owner

        stored = Current.objects.owned_by(Owner.of_user(alice)).with_client_id("c1").get()
        assert (stored.pk, stored.ui_id) == ("c1", "c1")
        assert [m.pk for m in stored.messages.all()] == ["u1"]
        assert [str(r.pk) for r in stored.runs.all()] == [str(run.pk)]
        assert stored.files.count() == 1
        anonymous = Current.objects.owned_by(Owner.of_session("s" * 32)).with_client_id("anon-1").get()
        assert anonymous.pk == "anon-1"
        bobs = Current.objects.create(client_id="c1", owner=bob)
        assert bobs.pk != "c1"
        assert Current.objects.owned_by(Owner.of_user(bob)).with_client_id("c1").get() == bobs
        bobs.delete()
        apps = migrate([("uistream_app", "0012_run_stored_bytes")])
        assert apps.get_model("uistream_app", "Message").objects.get(pk="u1").conversation_id == "c1"
    finally:
        migrate(executor_leaf())


@pytest.mark.django_db(transaction=True)
def test_messages_stored_before_versions_are_one_current_branch() -> None:
    """Migration 0014 (every attempt kept) puts every stored message on its
    conversation's current branch, each one's parent the message before it,
    so a stored chat loads, regenerates and edits as before; and goes back."""
    apps = migrate([("uistream_app", "0013_conversation_client_id")])
    try:
        Conversation = apps.get_model("uistream_app", "Conversation")
        Message = apps.get_model("uistream_app", "Message")
        for key in ("c1", "c2"):
            chat = Conversation.objects.create(id=key, client_id=key)
            for position, role in enumerate(["user", "assistant", "user", "assistant"]):
                Message.objects.create(
                    id=f"{key}-m{position}", conversation=chat, role=role, position=position, parts=[]
                )
        migrate(executor_leaf())
        from uistream_app.models import Message as Current

        rows = Current.objects.filter(conversation_id="c2").order_by("position")
        assert [(m.pk, m.parent_key, m.current) for m in rows] == [
            ("c2-m0", "", True),
            ("c2-m1", "c2-m0", True),
            ("c2-m2", "c2-m1", True),
            ("c2-m3", "c2-m2", True),
        ]
        last = rows.last()
        assert last is not None
        assert [m.pk for m in last.branch_before()] == ["c2-m0", "c2-m1", "c2-m2"]
        assert [m.pk for m in last.versions()] == ["c2-m3"]
        apps = migrate([("uistream_app", "0013_conversation_client_id")])
        assert apps.get_model("uistream_app", "Message").objects.count() == 8
    finally:
        migrate(executor_leaf())


@pytest.mark.django_db(transaction=True)
def test_the_days_storage_stored_before_owner_days_still_counts() -> None:
    """0020: what today's runs stored before the cap read ``OwnerDay`` rows
    is in today's row (and yesterday's in yesterday's), per owner, so the
    day of the upgrade refuses as before it."""
    alice = get_user_model().objects.create(username="alice")
    apps = migrate([("uistream_app", "0019_owner_day")])
    try:
        Conversation = apps.get_model("uistream_app", "Conversation")
        Run = apps.get_model("uistream_app", "Run")
        now = timezone.now()
        today = now.replace(hour=0, minute=0, second=0, microsecond=0)
        hers = Conversation.objects.create(id="a", client_id="a", owner_id=alice.pk)
        visitors = Conversation.objects.create(id="v", client_id="v", session_key="k" * 32)
        for chat, at, stored in (
            (hers, now, 100),
            (hers, today, 20),
            (hers, today - datetime.timedelta(seconds=1), 7),
            (hers, today - datetime.timedelta(days=3), 5_000),
            (visitors, now, 3),
        ):
            Run.objects.create(conversation=chat, started_at=at, stored_bytes=stored)
        migrate(executor_leaf())
        yesterday = (today - datetime.timedelta(days=1)).date()
        assert {(r.owner_key, r.day, r.stored_bytes) for r in OwnerDay.objects.all()} == {
            (f"user:{alice.pk}", today.date(), 120),
            (f"user:{alice.pk}", yesterday, 7),
            ("session:" + hashlib.sha256(b"k" * 32).hexdigest(), today.date(), 3),
        }
        with override_settings(UISTREAM={"MAX_STORED_BYTES_PER_USER_PER_DAY": 200}):
            OwnerCaps.of(Owner.of_user(alice)).check_stored_bytes(80)
            with pytest.raises(Throttled, match="storage cap reached: this turn would store 81 bytes, and 120"):
                OwnerCaps.of(Owner.of_user(alice)).check_stored_bytes(81)
    finally:
        migrate(executor_leaf())


@pytest.mark.django_db(transaction=True)
def test_messages_stored_before_the_unchecked_columns_read_back_the_same() -> None:
    """0021 drops the ``JSON_VALID`` check from a message's ``parts`` and
    ``metadata`` (SQLite remakes the table): the messages stored before it
    read back the same, new ones are stored as before, and it goes back."""
    apps = migrate([("uistream_app", "0020_owner_day_backfill")])
    parts = [{"type": "text", "text": 'caf\u00e9 \U0001f600 "quoted" \\ back'}, {"type": "step-start"}]
    try:
        Conversation = apps.get_model("uistream_app", "Conversation")
        Message = apps.get_model("uistream_app", "Message")
        chat = Conversation.objects.create(id="c1", client_id="c1")
        Message.objects.create(id="u1", conversation=chat, role="user", position=0, parts=parts, metadata={"a": [1]})
        Message.objects.create(id="a1", conversation=chat, role="assistant", position=1, parts=[], parent_key="u1")
        migrate(executor_leaf())
        from uistream_app.models import Message as Current

        rows = Current.objects.filter(conversation_id="c1").order_by("position")
        assert [(m.pk, m.parts, m.metadata, m.current) for m in rows] == [
            ("u1", parts, {"a": [1]}, True),
            ("a1", [], None, True),
        ]
        Current.objects.create(id="u2", conversation_id="c1", role="user", position=2, parts=parts, parent_key="a1")
        assert Current.objects.filter(parts__0__text=parts[0]["text"]).count() == 2
        if connection.vendor == "sqlite":
            with connection.cursor() as cursor:
                cursor.execute("SELECT sql FROM sqlite_master WHERE name = 'uistream_app_message'")
                assert "JSON_VALID" not in cursor.fetchone()[0]
        apps = migrate([("uistream_app", "0020_owner_day_backfill")])
        assert apps.get_model("uistream_app", "Message").objects.get(pk="u2").parts == parts
    finally:
        migrate(executor_leaf())
