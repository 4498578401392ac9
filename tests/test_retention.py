"""Retention: ``manage.py uistream_prune`` on real rows (old, recent,
feedback-marked, running), ``--dry-run`` changing nothing, files a kept
message still points at, the setting's check (E050) and the deploy
warning when nothing prunes (W050)."""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path
from typing import Any

import pytest
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings
from django.utils import timezone

from uistream_app.checks import check_retention, check_settings
from uistream_app.conf import Retention, settings
from uistream_app.lifecycle.retention import BranchRow, Pruner, old_branch_rows
from uistream_app.models import ChunkBatch, Conversation, Feedback, Message, OwnerDay, Run, StoredFile
from uistream_app.recording import write_log

from .test_admin import admin_client, staff  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db

NOW = timezone.now()
OLD = NOW - dt.timedelta(days=120)
RECENT = NOW - dt.timedelta(days=2)
RETENTION = {"CHUNK_LOGS_DAYS": 30, "OLD_BRANCHES_DAYS": 90}


@pytest.fixture(autouse=True)
def retention(settings: Any, tmp_path: Path) -> None:
    settings.UISTREAM = {**settings.UISTREAM, "RETENTION": RETENTION}
    settings.MEDIA_ROOT = str(tmp_path / "media")


def prune(*args: str) -> str:
    out = io.StringIO()
    call_command("uistream_prune", *args, stdout=out)
    return out.getvalue()


class Chat:
    """A conversation built row by row: messages on and off the current
    branch, the runs that built the answers and their logs."""

    def __init__(self, key: str) -> None:
        self.conversation = Conversation.objects.create(pk=key, title=key)

    def message(
        self, key: str, parent: Message | None, *, current: bool = True, at: dt.datetime = OLD, role: str = ""
    ) -> Message:
        position = 0 if parent is None else parent.position + 1
        return Message.objects.create(
            pk=key,
            conversation=self.conversation,
            role=role or ("user" if position % 2 == 0 else "assistant"),
            parts=[{"type": "text", "text": key}],
            position=position,
            parent_key="" if parent is None else parent.pk,
            current=current,
            created_at=at,
            selected_at=at,
        )

    def run(self, message: Message, *, status: str = "completed", at: dt.datetime = OLD) -> Run:
        run = Run.objects.create(
            conversation=self.conversation,
            message=message,
            status=status,
            started_at=at,
            finished_at=None if status == "running" else at + dt.timedelta(seconds=3),
            chunk_count=3,
        )
        chunks = [{"type": "start", "messageId": message.pk}, {"type": "text-delta", "id": "t", "delta": "x"}]
        if status != "running":
            chunks.append({"type": "finish"})
        write_log(run, chunks, [0, 10, 20][: len(chunks)])
        return run


def rate(message: Message, run: Run | None = None, rating: str = "down", comment: str = "") -> Feedback:
    return Feedback.objects.create(message=message, run=run, rating=rating, comment=comment)


def keys(*models: Any) -> set[str]:
    return {str(m.pk) for m in models}


def stored_messages() -> set[str]:
    return set(Message.objects.values_list("pk", flat=True))


# -- old branches ---------------------------------------------------------------------------


def test_an_old_regenerated_answer_goes_with_its_run_and_log() -> None:
    chat = Chat("regenerated")
    question = chat.message("q", None)
    first = chat.message("a-v1", question, current=False)
    second = chat.message("a-v2", question)
    old_run, new_run = chat.run(first), chat.run(second)

    out = prune()

    assert stored_messages() == keys(question, second)
    assert not Run.objects.filter(pk=old_run.pk).exists()
    assert not ChunkBatch.objects.filter(run_id=old_run.pk).exists()
    assert Run.objects.filter(pk=new_run.pk).exists()
    assert "deleted 1 message in 1 conversation, 1 run (1 chunk log row), 0 files" in out


def test_a_branch_left_recently_stays_however_old_its_rows() -> None:
    chat = Chat("switched")
    question = chat.message("q", None)
    chat.message("a-v1", question, current=False)  # written long ago
    # ...and replaced two days ago, when its sibling was last selected.
    second = chat.message("a-v2", question, at=OLD)
    Message.objects.filter(pk=second.pk).update(selected_at=RECENT)

    prune()

    assert stored_messages() == {"q", "a-v1", "a-v2"}


def test_an_edited_question_goes_with_everything_that_followed_it() -> None:
    chat = Chat("edited")
    q0 = chat.message("q0", None)
    a0 = chat.message("a0", q0)
    old_q1 = chat.message("q1-v1", a0, current=False)
    old_a1 = chat.message("a1", old_q1, current=False)
    old_q2 = chat.message("q2", old_a1, current=False)
    old_a2 = chat.message("a2", old_q2, current=False)
    runs = [chat.run(old_a1), chat.run(old_a2)]
    new_q1 = chat.message("q1-v2", a0)

    prune()

    assert stored_messages() == keys(q0, a0, new_q1)
    assert not Run.objects.filter(pk__in=[r.pk for r in runs]).exists()


def test_feedback_keeps_its_message_and_the_branch_above_it() -> None:
    chat = Chat("rated")
    q0 = chat.message("q0", None)
    old_a0 = chat.message("a0-v1", q0, current=False)
    chat.message("a0-v2", q0)
    # An old branch two levels deep: its rated answer and its question stay,
    # a sibling branch under the same root and what followed the rated answer go.
    old_q1 = chat.message("q1", old_a0, current=False)
    rated = chat.message("a1-rated", old_q1, current=False)
    rated_run = chat.run(rated)
    rate(rated, rated_run, comment="wrong city")
    after = chat.message("q2-after", rated, current=False)
    other = chat.message("q1-other", old_a0, current=False)

    prune()

    assert stored_messages() == {"q0", "a0-v1", "a0-v2", "q1", "a1-rated"}
    assert not Message.objects.filter(pk__in=[after.pk, other.pk]).exists()
    assert Run.objects.filter(pk=rated_run.pk).exists()
    # A rated run keeps its log too, however old.
    assert ChunkBatch.objects.filter(run_id=rated_run.pk).exists()


def test_a_running_run_keeps_its_message_and_its_log() -> None:
    chat = Chat("running")
    question = chat.message("q", None)
    stuck = chat.message("a-v1", question, current=False)
    running = chat.run(stuck, status="running")
    chat.message("a-v2", question)

    prune()

    assert Message.objects.filter(pk=stuck.pk).exists()
    running.refresh_from_db()
    assert running.status == "running"
    assert ChunkBatch.objects.filter(run_id=running.pk).exists()


def test_the_current_branch_is_never_pruned() -> None:
    chat = Chat("current")
    q0 = chat.message("q0", None)
    a0 = chat.message("a0", q0)
    run = chat.run(a0)

    prune()

    assert stored_messages() == keys(q0, a0)
    assert Run.objects.filter(pk=run.pk).exists()


def test_old_branches_are_found_by_their_links_not_their_positions() -> None:
    """Rows off the branch at the positions of an old branch, but hanging
    under the current branch's row recently replaced, are a young subtree."""
    rows = [
        BranchRow("q", "", 0, True, OLD, OLD),
        BranchRow("a-v1", "q", 1, False, OLD, OLD),
        BranchRow("a-v2", "q", 1, True, RECENT, RECENT),
        BranchRow("u-v1", "a-v2", 2, False, OLD, OLD),  # replaced by u-v2 just now
        BranchRow("u-v2", "a-v2", 2, True, NOW, NOW),
        BranchRow("b", "a-v1", 2, False, OLD, OLD),
        BranchRow("c", "b", 3, False, OLD, OLD),
    ]
    cutoff = NOW - dt.timedelta(days=90)
    # a-v1 left when a-v2 was last selected (recently): it and its subtree stay.
    assert sorted(old_branch_rows(rows, set(), cutoff)) == []
    rows[2] = rows[2]._replace(selected_at=OLD, created_at=OLD)
    assert sorted(old_branch_rows(rows, set(), cutoff)) == ["a-v1", "b", "c"]
    assert sorted(old_branch_rows(rows, {"c"}, cutoff)) == []
    assert sorted(old_branch_rows(rows, {"b"}, cutoff)) == ["c"]


# -- files ----------------------------------------------------------------------------------


def stored_file(chat: Chat, message: Message, name: str) -> StoredFile:
    path = default_storage.save(f"uistream/{name}", ContentFile(b"bytes of " + name.encode()))
    return StoredFile.objects.create(
        conversation=chat.conversation, message=message, file=path, name=name, media_type="image/png", size=9, sha256=""
    )


def file_part(stored: StoredFile) -> dict[str, Any]:
    return {"type": "file", "mediaType": "image/png", "url": stored.url, "filename": stored.name}


def test_a_file_a_kept_message_points_at_moves_to_it(django_capture_on_commit_callbacks: Any) -> None:
    """An edit moved the file to the newer version; switching back to the
    older one left it there. Pruning the newer version keeps the file, on
    the older version now current, and deletes a file only the pruned one had."""
    chat = Chat("files")
    older = chat.message("q-v1", None)
    newer = chat.message("q-v2", None, current=False)
    shared = stored_file(chat, newer, "shared.png")
    own = stored_file(chat, newer, "own.png")
    Message.objects.filter(pk=older.pk).update(parts=[{"type": "text", "text": "look"}, file_part(shared)])
    Message.objects.filter(pk=newer.pk).update(parts=[file_part(shared), file_part(own)])

    with django_capture_on_commit_callbacks(execute=True):
        out = prune()

    shared.refresh_from_db()
    assert shared.message_id == older.pk
    assert default_storage.exists(shared.file.name)
    assert not StoredFile.objects.filter(pk=own.pk).exists()
    assert not default_storage.exists(own.file.name)
    assert "1 file; moved 1 file to a kept message" in out


# -- chunk logs -------------------------------------------------------------------------------


def test_old_chunk_logs_go_and_the_runs_stay() -> None:
    chat = Chat("logs")
    q0 = chat.message("q0", None)
    a0 = chat.message("a0", q0)
    q1 = chat.message("q1", a0, at=RECENT)
    a1 = chat.message("a1", q1, at=RECENT)
    q2 = chat.message("q2", a1, at=RECENT)
    a2 = chat.message("a2", q2, at=RECENT)
    old, recent, rated, running = chat.run(a0), chat.run(a1, at=RECENT), chat.run(a2), chat.run(a2, status="running")
    rate(a2, rated, rating="up")
    unrated_old_of_a_rated_answer = chat.run(a2)

    out = prune()

    assert not ChunkBatch.objects.filter(run_id=old.pk).exists()
    assert Run.objects.filter(pk=old.pk).exists()
    assert Message.objects.get(pk=a0.pk).parts == [{"type": "text", "text": "a0"}]
    left = set(ChunkBatch.objects.values_list("run_id", flat=True))
    assert left == {recent.pk, rated.pk, running.pk, unrated_old_of_a_rated_answer.pk}
    assert "chunk logs (of runs ended over 30 days ago): deleted 1 row of 1 run" in out


def test_a_pruned_log_is_said_on_the_run_page(admin_client: Any) -> None:
    from django.urls import reverse

    chat = Chat("inspected")
    answer = chat.message("a0", chat.message("q0", None))
    Message.objects.filter(pk=answer.pk).update(parts=[{"type": "text", "text": "the stored answer"}])
    run = chat.run(answer)
    prune()

    html = admin_client.get(reverse("admin:uistream_app_run_change", args=[run.pk])).content.decode()

    assert "The chunk log was pruned" in html
    assert "the stored answer" in html


# -- the dry run ---------------------------------------------------------------------------


def everything() -> tuple[set[Any], ...]:
    return (
        set(Message.objects.values_list("pk", "current")),
        set(Run.objects.values_list("pk", "status")),
        set(ChunkBatch.objects.values_list("pk", flat=True)),
        set(StoredFile.objects.values_list("pk", "message_id")),
    )


def test_a_dry_run_counts_and_changes_nothing() -> None:
    chat = Chat("dry")
    question = chat.message("q", None)
    chat.run(chat.message("a-v1", question, current=False))
    second = chat.message("a-v2", question)
    chat.run(second)
    newer = chat.message("q-v2", None, current=False)
    stored_file(chat, newer, "f.png")
    before = everything()

    out = prune("--dry-run")

    assert everything() == before
    assert out.splitlines() == [
        "old branches (off the current branch for over 90 days): would delete 2 messages in 1 conversation, "
        "1 run (1 chunk log row), 1 file",
        # The run of a-v2 only: a-v1's goes with its branch, counted once.
        "chunk logs (of runs ended over 30 days ago): would delete 1 row of 1 run",
    ]
    # The real prune deletes what the dry run counted.
    assert prune().replace("deleted", "would delete") == out


def test_batches_of_one_row_prune_the_same() -> None:
    chat = Chat("batches")
    question = chat.message("q", None)
    for n in range(3):
        chat.run(chat.message(f"a-v{n}", question, current=False))
    chat.message("a-last", question)

    report = Pruner(settings.RETENTION, batch=1).prune()

    assert (report.messages, report.runs, report.run_log_rows) == (3, 3, 3)
    assert stored_messages() == {"q", "a-last"}


def test_without_retention_nothing_is_pruned(settings: Any) -> None:
    settings.UISTREAM = {k: v for k, v in settings.UISTREAM.items() if k != "RETENTION"}
    chat = Chat("forever")
    question = chat.message("q", None)
    chat.run(chat.message("a-v1", question, current=False))
    chat.message("a-v2", question)
    before = everything()

    assert prune().startswith("Nothing to prune")
    assert everything() == before


def test_the_owners_days_before_yesterday_go_whatever_the_limits(settings: Any) -> None:
    settings.UISTREAM = {k: v for k, v in settings.UISTREAM.items() if k != "RETENTION"}
    today = timezone.localtime().date()
    for ago in (0, 1, 2, 30):
        OwnerDay.objects.create(owner_key=f"user:{ago}", day=today - dt.timedelta(days=ago), stored_bytes=ago + 1)

    assert prune("--dry-run").splitlines() == [
        "Nothing to prune: UISTREAM['RETENTION'] sets no limit (CHUNK_LOGS_DAYS, OLD_BRANCHES_DAYS).",
        "owners' days before yesterday (the storage cap's count): would delete 2 rows",
    ]
    assert OwnerDay.objects.count() == 4
    prune()
    assert set(OwnerDay.objects.values_list("owner_key", "stored_bytes")) == {("user:0", 1), ("user:1", 2)}


def test_a_bad_retention_stops_the_command(settings: Any) -> None:
    settings.UISTREAM = {**settings.UISTREAM, "RETENTION": {"CHUNK_LOGS_DAYS": "30"}}
    with pytest.raises(CommandError, match=r"\['CHUNK_LOGS_DAYS'\] = '30' must be a positive number"):
        prune()


# -- the setting and its checks ------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        [],
        {"CHUNK_LOG_DAYS": 30},
        {"CHUNK_LOGS_DAYS": 0},
        {"OLD_BRANCHES_DAYS": -1},
        {"OLD_BRANCHES_DAYS": True},
        {"CHUNK_LOGS_DAYS": "30"},
    ],
)
def test_a_bad_retention_is_e050(value: Any) -> None:
    with override_settings(UISTREAM={"RETENTION": value}):
        messages = check_settings()
        with pytest.raises(ImproperlyConfigured, match="RETENTION"):
            _ = settings.RETENTION
    assert [m.id for m in messages] == ["uistream_app.E050"]
    assert all(m.hint for m in messages)


def test_retention_is_typed_and_partial() -> None:
    with override_settings(UISTREAM={"RETENTION": {"OLD_BRANCHES_DAYS": 90}}):
        assert check_settings() == []
        partial = settings.RETENTION
    assert partial == Retention(chunk_logs_days=None, old_branches_days=90.0)
    assert partial.prunes
    with override_settings(UISTREAM={}):
        unset = settings.RETENTION
    assert unset == Retention()
    assert not unset.prunes


def test_check_deploy_warns_when_nothing_prunes() -> None:
    with override_settings(UISTREAM={}):
        [warning] = check_retention()
        assert warning.id == "uistream_app.W050"
        assert 'UISTREAM["RETENTION"]' in warning.hint
        assert "uistream_prune" in warning.hint
        # Only under --deploy: a plain check (and so runserver, migrate) stays quiet.
        assert "uistream_app.W050" not in {m.id for m in run_checks(include_deployment_checks=False)}
        assert "uistream_app.W050" in {m.id for m in run_checks(include_deployment_checks=True)}
    with override_settings(UISTREAM={"RETENTION": {"CHUNK_LOGS_DAYS": 30}}):
        assert check_retention() == []
