"""The models: ``__str__``, ``as_ui_message``, ordering, constraints,
cascades, the JSON encoder, and migrations in step with the models."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.utils import timezone

from uistream_app.models import ChunkBatch, Conversation, Message, Run, StoredJSONEncoder

from .db import make_turn

pytestmark = pytest.mark.django_db


def test_migrations_match_the_models() -> None:
    out = StringIO()
    call_command("makemigrations", "uistream_app", check=True, dry_run=True, stdout=out, stderr=out)
    assert "No changes detected" in out.getvalue()


# -- __str__ ---------------------------------------------------------------------


def test_conversation_str_is_its_title_else_its_id() -> None:
    assert str(Conversation(id="abc")) == "abc"
    assert str(Conversation(id="abc", title="Weather in Paris")) == "Weather in Paris"


def test_message_str() -> None:
    assert str(Message(id="m1", role="assistant", position=1)) == "assistant m1"


def test_run_str() -> None:
    run_id = uuid.uuid4()
    assert str(Run(id=run_id, status=Run.Status.STOPPED)) == f"{run_id} (stopped)"


def test_chunk_batch_str() -> None:
    run_id = uuid.uuid4()
    batch = ChunkBatch(run_id=run_id, first_seq=3, last_seq=9, offsets=[0] * 7, chunks=[{"type": "text-delta"}] * 7)
    assert str(batch) == f"{run_id} #3–9"


# -- Message ---------------------------------------------------------------------


def test_as_ui_message_leaves_metadata_out_when_none() -> None:
    parts = [{"type": "text", "text": "Hi", "state": "done"}]
    message = Message(id="m1", role="assistant", parts=parts, position=1)
    assert message.as_ui_message() == {"id": "m1", "role": "assistant", "parts": parts}
    assert list(message.as_ui_message()) == ["id", "role", "parts"]


def test_as_ui_message_with_metadata() -> None:
    message = Message(id="m1", role="user", parts=[], metadata={"model": "x"}, position=0)
    ui = message.as_ui_message()
    assert ui == {"id": "m1", "role": "user", "metadata": {"model": "x"}, "parts": []}
    assert list(ui) == ["id", "role", "metadata", "parts"]


def test_message_defaults_round_trip() -> None:
    conversation = Conversation.objects.create(id="c")
    Message.objects.create(id="m", conversation=conversation, role="user", position=0)
    stored = Message.objects.get(pk="m")
    assert stored.parts == []
    assert stored.metadata is None
    assert stored.as_ui_message() == {"id": "m", "role": "user", "parts": []}


def test_messages_are_ordered_by_position() -> None:
    conversation = Conversation.objects.create(id="c")
    for position, message_id in [(2, "c2"), (0, "a0"), (1, "b1")]:
        Message.objects.create(id=message_id, conversation=conversation, role="user", position=position)
    assert [m.id for m in conversation.messages.all()] == ["a0", "b1", "c2"]


def test_position_is_unique_per_conversation() -> None:
    first, second = Conversation.objects.create(id="c1"), Conversation.objects.create(id="c2")
    Message.objects.create(id="m1", conversation=first, role="user", position=0)
    Message.objects.create(id="m2", conversation=second, role="user", position=0)
    with pytest.raises(IntegrityError), transaction.atomic():
        Message.objects.create(id="m3", conversation=first, role="assistant", position=0)


# -- Conversation ------------------------------------------------------------------


def test_conversations_are_ordered_by_recent_activity() -> None:
    old = Conversation.objects.create(id="old")
    new = Conversation.objects.create(id="new")
    Conversation.objects.filter(pk=old.pk).update(updated_at=timezone.now() - timedelta(days=1))
    assert [c.id for c in Conversation.objects.all()] == [new.id, old.id]


def test_conversation_owner_and_defaults() -> None:
    user = get_user_model().objects.create_user("ada")
    conversation = Conversation.objects.create(id="c", owner=user)
    assert list(user.uistream_conversations.all()) == [conversation]  # type: ignore[attr-defined]
    stored = Conversation.objects.get(client_id="c")
    assert (stored.title, stored.session_key, stored.metadata) == ("", "", {})
    anonymous = Conversation.objects.create(id="anon", session_key="s" * 40)
    assert anonymous.owner is None


def test_deleting_the_owner_deletes_the_conversations() -> None:
    user = get_user_model().objects.create_user("ada")
    Conversation.objects.create(id="c", owner=user)
    user.delete()
    assert not Conversation.objects.exists()


# -- Run and ChunkBatch -----------------------------------------------------------


def test_run_defaults() -> None:
    run, _ = make_turn()
    run.refresh_from_db()
    assert isinstance(run.id, uuid.UUID)
    assert run.status == Run.Status.RUNNING
    assert (run.finish_reason, run.error_code, run.error_detail, run.model, run.trigger) == ("", "", "", "", "")
    assert run.usage == {}
    assert run.sdk_version == 7
    assert run.chunk_count == 0
    assert run.first_chunk_at is None
    assert run.finished_at is None


def test_run_statuses() -> None:
    assert Run.Status.values == ["running", "completed", "failed", "cancelled", "stopped", "interrupted"]


def test_run_timing_properties() -> None:
    start = timezone.now()
    run = Run(started_at=start)
    assert run.time_to_first_chunk is None
    assert run.duration is None
    run.first_chunk_at = start + timedelta(milliseconds=120)
    run.finished_at = start + timedelta(seconds=3)
    assert run.time_to_first_chunk == timedelta(milliseconds=120)
    assert run.duration == timedelta(seconds=3)


def test_runs_are_newest_first() -> None:
    run, _ = make_turn()
    later = Run.objects.create(conversation=run.conversation, started_at=run.started_at + timedelta(seconds=1))
    assert list(run.conversation.runs.all()) == [later, run]


def batch(run: Run, first: int, chunks: list[dict[str, Any]]) -> ChunkBatch:
    return ChunkBatch.objects.create(
        run=run, first_seq=first, last_seq=first + len(chunks) - 1, offsets=[0] * len(chunks), chunks=chunks
    )


def test_batches_are_ordered_by_first_seq_and_unique_per_run() -> None:
    run, _ = make_turn()
    other, _ = make_turn(chat_id="chat-2", message_id="msg-2")
    for first in (4, 0, 2):
        batch(run, first, [{"type": "start-step", "n": first}, {"type": "finish-step", "n": first + 1}])
    batch(other, 0, [{"type": "start"}])
    assert [b.first_seq for b in run.chunk_batches.all()] == [0, 2, 4]
    assert [c["n"] for b in ChunkBatch.objects.filter(run=run) for c in b.chunks] == list(range(6))
    with pytest.raises(IntegrityError), transaction.atomic():
        batch(run, 2, [{"type": "finish"}])


def test_a_batch_cannot_end_before_it_starts() -> None:
    run, _ = make_turn()
    with pytest.raises(IntegrityError), transaction.atomic():
        ChunkBatch.objects.create(run=run, first_seq=5, last_seq=4, offsets=[], chunks=[])


def test_batch_ordering_does_not_join_the_run() -> None:
    run, _ = make_turn()
    sql = str(ChunkBatch.objects.filter(run=run).query)
    assert "JOIN" not in sql.upper()


def test_chunk_batches_are_append_only() -> None:
    run, _ = make_turn()
    stored = batch(run, 0, [{"type": "start"}])
    stored.offsets = [10]
    with pytest.raises(ValueError, match="append-only"):
        stored.save()


def test_deleting_a_conversation_deletes_its_messages_runs_and_log() -> None:
    run, _ = make_turn()
    batch(run, 0, [{"type": "start"}])
    run.conversation.delete()
    assert not Message.objects.exists()
    assert not Run.objects.exists()
    assert not ChunkBatch.objects.exists()


def test_deleting_the_message_keeps_the_run() -> None:
    run, message = make_turn()
    message.delete()
    run.refresh_from_db()
    assert run.message is None


# -- JSON --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a\x00b", "a\ufffdb"),
        ({"k\x00": ["\x00"]}, {"k\ufffd": ["\ufffd"]}),
        # A literal backslash followed by "u0000" is not a NUL.
        ("\\u0000", "\\u0000"),
        ("\\\x00", "\\\ufffd"),
        ("plain", "plain"),
    ],
)
def test_stored_json_encoder_replaces_nul(value: object, expected: object) -> None:
    assert json.loads(json.dumps(value, cls=StoredJSONEncoder)) == expected


def test_nul_is_stored_on_every_backend() -> None:
    run, message = make_turn()
    message.parts = [{"type": "text", "text": "a\x00b"}]
    message.save()
    batch(run, 0, [{"type": "text-delta", "id": "t", "delta": "\x00"}])
    message.refresh_from_db()
    assert message.parts == [{"type": "text", "text": "a\ufffdb"}]
    assert ChunkBatch.objects.get().chunks[0]["delta"] == "\ufffd"
