"""Runs as a JSONL dataset: one line per run, what the model was given and
what it answered, with the owner's feedback. The admin's action ("Export
the selected runs as a JSONL dataset") and ``manage.py uistream_export``
write the same lines (docs/operations.md, "Feedback, attempts and
retention").

Each line is a JSON object (``DatasetLine``), its keys always present:

* ``run``, ``conversation`` (the chat id), ``conversation_key`` (the
  server's), ``message`` (the answer's id as the client knows it), ``owner``
  (``"user:<id>"``, ``"session:<digest>"``: never a session key), and the
  trace's ``trace_id`` / ``span_id`` ("" when not traced);
* ``status``, ``finish_reason``, ``error_code``, ``model``, ``usage``,
  ``trigger``, ``started_at``, ``finished_at``;
* ``setup``: what the run was given when it started (``Run.setup``: the
  system prompt, the tools offered with their schemas, the model, the
  transport), None for a run stored before it was recorded;
* ``history``: what the model was sent as the conversation (``Run.history``:
  the strategy, the stored messages kept, and ``sent``, the messages in the
  order sent, bounded by ``runs.given``), None likewise;
* ``answer``: the run's message as the AI SDK's ``UIMessage`` (as stored:
  for a run a later continuation added to, the message as it is now);
  None when the message was deleted;
* ``feedback``: ``Feedback.as_json()`` of the answer, or None.

Streamed: the runs are read ``CHUNK`` at a time (``QuerySet.iterator()``,
or ``aiterator()`` under ASGI) with their message, feedback and owner in
the same query, and each line is written as it is made, so an export of
any size holds one chunk of runs in memory.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any, Final, TypedDict

import orjson
from django.db.models import QuerySet

from ..models import Feedback, Message, Run
from ..owners import Owner

__all__ = ["CHUNK", "DatasetLine", "adataset_lines", "dataset_line", "dataset_lines", "dataset_runs"]

#: Runs read per query.
CHUNK: Final = 100


class DatasetLine(TypedDict):
    """One line of the dataset (the module docstring says what each holds)."""

    run: str
    conversation: str
    conversation_key: str
    message: str | None
    owner: str | None
    trace_id: str
    span_id: str
    status: str
    finish_reason: str
    error_code: str
    model: str
    usage: dict[str, Any]
    trigger: str
    started_at: str
    finished_at: str | None
    setup: Any
    history: Any
    answer: dict[str, Any] | None
    feedback: dict[str, Any] | None


def dataset_runs(runs: QuerySet[Run]) -> QuerySet[Run]:
    """``runs`` with what a line reads selected in the same query (and the
    records a list defers loaded), oldest first."""
    return (
        runs.defer(None)
        .select_related("conversation", "conversation__owner", "message", "message__feedback")
        .order_by("started_at", "pk")
    )


def _feedback(message: Message | None) -> Feedback | None:
    if message is None:
        return None
    try:
        return message.feedback
    except Feedback.DoesNotExist:
        return None


def dataset_line(run: Run) -> DatasetLine:
    """The line of ``run`` (selected as ``dataset_runs`` selects it)."""
    conversation = run.conversation
    owner = Owner.of_conversation(conversation)
    message = run.message
    feedback = _feedback(message)
    return {
        "run": str(run.pk),
        "conversation": conversation.ui_id,
        "conversation_key": str(conversation.pk),
        "message": message.ui_id if message is not None else None,
        "owner": owner.ident if owner.is_known else None,
        "trace_id": run.trace_id,
        "span_id": run.span_id,
        "status": run.status,
        "finish_reason": run.finish_reason,
        "error_code": run.error_code,
        "model": run.model,
        "usage": run.usage or {},
        "trigger": run.trigger,
        "started_at": run.started_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at is not None else None,
        "setup": run.setup,
        "history": run.history,
        "answer": message.as_ui_message() if message is not None else None,
        "feedback": feedback.as_json() if feedback is not None else None,
    }


def _encode(run: Run) -> bytes:
    line = dataset_line(run)
    try:
        return orjson.dumps(line) + b"\n"
    except TypeError:  # an integer past 64 bits, which JSON allows and orjson refuses
        return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def dataset_lines(runs: QuerySet[Run], *, chunk: int = CHUNK) -> Iterator[bytes]:
    """The dataset of ``runs``, a line (bytes, ending in a newline) per run."""
    for run in dataset_runs(runs).iterator(chunk_size=chunk):
        yield _encode(run)


async def adataset_lines(runs: QuerySet[Run], *, chunk: int = CHUNK) -> AsyncIterator[bytes]:
    """``dataset_lines`` for an ASGI response: a chunk of runs per query, in
    the database thread, nothing read ahead of what is sent."""
    async for run in dataset_runs(runs).aiterator(chunk_size=chunk):
        yield _encode(run)
