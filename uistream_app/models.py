"""What uistream stores: conversations, their messages, the runs that built
the assistant messages, and each run's chunk log.

The chunk log (``ChunkBatch`` rows) is the canonical log (docs/architecture.md): the
ai@7 chunks the client was sent, numbered from 0, each with its time offset
from the run's start. It is append-only and written in batches (one row per
batch) by
``uistream_app.recording.RunRecorder``, which also derives the stored
assistant message from it, so ``Message.parts`` is what the browser built.

JSON columns go through ``StoredJSONEncoder``: PostgreSQL's ``jsonb`` refuses
the NUL character, which a model or a tool can emit and which the client was
sent, so it is stored as U+FFFD rather than failing the write and losing the
log. On PostgreSQL ``jsonb`` also reorders object keys; the stored values are
equal (``==``) to what was sent, not byte-identical.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from django.conf import settings
from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Q
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from .owners import Owner

__all__ = [
    "ChunkBatch",
    "Conversation",
    "ConversationQuerySet",
    "EncodedJSON",
    "Feedback",
    "Message",
    "OwnerDay",
    "Run",
    "RunQuerySet",
    "SteeringMessage",
    "StoredFile",
    "StoredJSONEncoder",
    "UncheckedJSONField",
    "new_conversation_key",
]

# An escaped NUL that is not itself an escaped backslash followed by "u0000".
_ESCAPED_NUL: Final = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


@dataclass(frozen=True)
class EncodedJSON:
    """A value already encoded by ``StoredJSONEncoder``, given to a JSON
    column as its JSON (``text``) so that the field does not encode it
    again: a store that needs the JSON itself (to let go of the value while
    the row is written) makes it once."""

    text: str


class StoredJSONEncoder(json.JSONEncoder):
    """``json.JSONEncoder`` that writes NUL as U+FFFD (PostgreSQL's ``jsonb``
    rejects ``\\u0000``; the same rule on every backend keeps them alike).
    An ``EncodedJSON`` is written as its text."""

    def encode(self, o: Any) -> str:
        if isinstance(o, EncodedJSON):
            return o.text
        text = super().encode(o)
        if "\\u0000" in text:
            text = _ESCAPED_NUL.sub(r"\1\\ufffd", text)
        return text


class UncheckedJSONField(models.JSONField):
    """``JSONField`` with no check constraint: on SQLite (and MariaDB,
    Oracle) Django gives a ``JSONField`` column a ``CHECK`` that the value
    is JSON, which SQLite tests by parsing it, copying it twice, in every
    insert: a 30 MiB text a client sent cost six copies of itself while its
    message was stored, four without the check (``bench/body_memory.py``).
    Used for the columns that hold what a client sent (a message's parts
    and metadata). Every value is written through this field, so it is
    JSON from the encoder: the check guards nothing Django writes. The
    column's type and what it reads back are unchanged; PostgreSQL's
    ``jsonb`` has no such check, and its migration is a no-op."""

    def db_check(self, connection: BaseDatabaseWrapper) -> None:
        return None


class ConversationQuerySet(models.QuerySet["Conversation"]):
    def owned_by(self, owner: Owner) -> ConversationQuerySet:
        """The conversations of ``owner`` (none for an owner who can own nothing)."""
        if not owner.is_known:
            return self.none()
        return self.filter(**owner.filter_kwargs())

    def with_client_id(self, client_id: str) -> ConversationQuerySet:
        """The conversation the client knows as ``client_id`` (filter by
        owner first: a chat id is only unique within one owner's)."""
        return self.filter(client_id=client_id)


def owned_sql(owner: Owner, alias: str, database: BaseDatabaseWrapper) -> tuple[str, list[Any]]:
    """``ConversationQuerySet.owned_by``'s condition written out, on the
    conversation table named ``alias`` in the statement, and its
    parameters (``Owner.filter_kwargs``: the user's, or an anonymous
    session's with no user). For the statements on every turn's path
    whose building through the ORM cost more than running them
    (``lifecycle.caps``, ``lifecycle.store``). ``owner`` must be known
    (``Owner.is_known``): one who can own nothing has no condition.
    ``database``: the connection the statement runs on (its quoting)."""
    if not owner.is_known:
        raise ValueError("an owner who can own nothing has no condition")
    quote = database.ops.quote_name
    fields = Conversation._meta
    owner_field = fields.get_field("owner")
    owner_column = f"{alias}.{quote(str(owner_field.column))}"
    if owner.user is not None:
        # As the ORM passes it (a UUID primary key is text on SQLite).
        return f"{owner_column} = %s", [owner_field.get_db_prep_value(owner.user.pk, database)]
    session_column = f"{alias}.{quote(str(fields.get_field('session_key').column))}"
    return f"{owner_column} IS NULL AND {session_column} = %s", [owner.session_key or ""]


class RunQuerySet(models.QuerySet["Run"]):
    def owned_by(self, owner: Owner) -> RunQuerySet:
        """The runs of ``owner``'s conversations."""
        if not owner.is_known:
            return self.none()
        return self.filter(**owner.filter_kwargs("conversation__"))


class MessageQuerySet(models.QuerySet["Message"]):
    def with_client_id(self, client_id: str) -> MessageQuerySet:
        """The message the client knows as ``client_id`` (filter by
        conversation first: a client id is only unique within one, and
        among its current branch: the versions of one message share it)."""
        return self.filter(Q(client_id=client_id) | Q(pk=client_id, client_id=""))

    def current(self) -> MessageQuerySet:
        """The messages of the conversations' current branches: what
        ``useChat`` loads and what a model's history is built from."""
        return self.filter(current=True)


def new_conversation_key() -> str:
    """A conversation's primary key: the server's, never a client's."""
    return uuid.uuid4().hex


class Conversation(models.Model):
    """A chat: the client's chat id, its owner, and its messages.

    Chat ids are the client's, unique within one owner's conversations (a
    user's, or an anonymous session's): two owners may each have a chat
    ``"abc"``, and neither can tell the other's exists. The primary key is
    the server's (``new_conversation_key``); everything keyed by a chat on
    the server (the broker's run slot, its stop signal) uses it, and
    everything a client sees shows ``client_id``."""

    id = models.CharField(
        _("id"),
        max_length=128,
        primary_key=True,
        default=new_conversation_key,
        help_text=_("The server's key of the conversation; clients know it by its chat id."),
    )
    client_id = models.CharField(
        _("chat id"),
        max_length=128,
        blank=True,
        # The admin's search by the start of a chat id, across owners.
        db_index=True,
        help_text=_(
            "The client's chat id (useChat's id, AG-UI's threadId): unique among its owner's conversations. "
            "Left empty, it is set to the primary key when the row is saved."
        ),
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="uistream_conversations",
        verbose_name=_("owner"),
    )
    session_key = models.CharField(
        _("session key"),
        max_length=40,
        blank=True,
        db_index=True,
        help_text=_("The session that owns the conversation when its owner is anonymous."),
    )
    history_summary = models.JSONField(
        _("history summary"),
        null=True,
        blank=True,
        encoder=StoredJSONEncoder,
        help_text=_(
            "The summary of older turns the model is sent instead of them (SummarizeOlder): its text, "
            "the last message it covers, the model that wrote it."
        ),
    )
    title = models.CharField(_("title"), max_length=200, blank=True)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)
    metadata = models.JSONField(_("metadata"), default=dict, blank=True, encoder=StoredJSONEncoder)

    objects = ConversationQuerySet.as_manager()

    class Meta:
        verbose_name = _("conversation")
        verbose_name_plural = _("conversations")
        ordering = ("-updated_at",)
        indexes = (
            models.Index(fields=["owner", "-updated_at"], name="uistream_conv_owner_recent"),
            # The admin: its list (newest first) and its title search.
            models.Index(fields=["-updated_at"], name="uistream_conv_recent"),
            models.Index(models.Func("title", function="LOWER"), name="uistream_conv_title_lower"),
        )
        constraints = (
            # Each serves its owner's lookups by chat id as well.
            models.UniqueConstraint(
                fields=["owner", "client_id"],
                condition=Q(owner__isnull=False),
                name="uistream_conv_user_client_id_unique",
            ),
            models.UniqueConstraint(
                fields=["session_key", "client_id"],
                condition=Q(owner__isnull=True),
                name="uistream_conv_session_client_id_unique",
            ),
        )

    def __str__(self) -> str:
        return self.title or self.ui_id

    def save(self, *args: Any, **kwargs: Any) -> None:
        # A row made without a chat id (the admin, a fixture) is known to
        # the client by its key, as every conversation was before 0013.
        if not self.client_id:
            self.client_id = str(self.pk)
            update_fields = kwargs.get("update_fields")
            if update_fields is not None:
                kwargs["update_fields"] = {*update_fields, "client_id"}
        super().save(*args, **kwargs)

    @property
    def ui_id(self) -> str:
        """The id the client knows the conversation by (its chat id)."""
        return self.client_id or str(self.pk)


class Message(models.Model):
    """One ``UIMessage`` of a conversation, at its position.

    Every attempt is kept: a regenerated answer and an edited question are
    new versions of the message at their position, and what followed the
    older version stays on its branch. The messages form a tree
    (``parent_key``: the message before this one on its branch); the
    conversation's current branch is the rows with ``current`` set, one at
    each position, and only they are what a client loads and a model is
    sent. Versions of one message share its parent, its position and the
    id the client knows it by (``ui_id``)."""

    class Role(models.TextChoices):
        SYSTEM = "system", _("system")
        USER = "user", _("user")
        ASSISTANT = "assistant", _("assistant")

    id = models.CharField(
        _("id"),
        max_length=128,
        primary_key=True,
        help_text=_("The UIMessage id; an assistant message's is the stream's start.messageId."),
    )
    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.CASCADE,
        related_name="messages",
        verbose_name=_("conversation"),
    )
    role = models.CharField(_("role"), max_length=16, choices=Role.choices)
    parts = UncheckedJSONField(_("parts"), default=list, blank=True, encoder=StoredJSONEncoder)
    metadata = UncheckedJSONField(_("metadata"), null=True, blank=True, encoder=StoredJSONEncoder)
    position = models.PositiveIntegerField(_("position"))
    created_at = models.DateTimeField(_("created at"), default=timezone.now)
    client_id = models.CharField(
        _("client id"),
        max_length=128,
        blank=True,
        default="",
        help_text=_(
            "The id the client gave the message, when it differs from the primary key: message ids are "
            "the client's, unique within a conversation, and one another conversation already holds is "
            "stored under a key of the server's."
        ),
    )

    parent_key = models.CharField(
        _("parent"),
        max_length=128,
        blank=True,
        default="",
        help_text=_(
            "The key of the message before this one on its branch (empty for a conversation's first). A plain "
            "key, not a foreign key: a branch a thousand messages long would cascade a thousand levels deep."
        ),
    )
    current = models.BooleanField(
        _("on the current branch"),
        default=True,
        help_text=_("Part of the conversation's current branch: loaded by clients and sent to the model."),
    )
    selected_at = models.DateTimeField(
        _("selected at"),
        default=timezone.now,
        help_text=_(
            "When the message last joined the current branch; switching to an older version follows, below "
            "it, the replies most recently selected."
        ),
    )

    objects = MessageQuerySet.as_manager()

    class Meta:
        verbose_name = _("message")
        verbose_name_plural = _("messages")
        ordering = ("position",)
        indexes = (
            # A message's versions, and a branch's rows below a position.
            models.Index(fields=["conversation", "position"], name="uistream_message_versions"),
        )
        constraints = (
            models.UniqueConstraint(
                fields=["conversation", "position"],
                condition=Q(current=True),
                name="uistream_message_current_position_unique",
            ),
            models.UniqueConstraint(
                fields=["conversation", "client_id"],
                condition=Q(current=True) & ~Q(client_id=""),
                name="uistream_message_current_client_id_unique",
            ),
        )

    def __str__(self) -> str:
        return f"{self.role} {self.id}"

    @property
    def ui_id(self) -> str:
        """The id the client knows the message by."""
        return self.client_id or self.id

    def versions(self) -> MessageQuerySet:
        """The versions of this message (itself among them), oldest first."""
        return Message.objects.filter(
            conversation_id=self.conversation_id, position=self.position, parent_key=self.parent_key
        ).order_by("created_at", "pk")

    def branch_before(self) -> list[Message]:
        """The messages before this one on its own branch, in order (its
        ancestors): the current rows before it when it is current; else its
        parents, followed up from it (one query either way)."""
        if self.current:
            return list(
                Message.objects.filter(
                    conversation_id=self.conversation_id, current=True, position__lt=self.position
                ).order_by("position")
            )
        rows = {
            m.pk: m for m in Message.objects.filter(conversation_id=self.conversation_id, position__lt=self.position)
        }
        chain: list[Message] = []
        key = self.parent_key
        while key in rows:
            chain.append(rows[key])
            key = rows[key].parent_key
        chain.reverse()
        return chain

    def as_ui_message(self) -> dict[str, Any]:
        """The message as the AI SDK's ``UIMessage`` JSON: ``id``, ``role``,
        ``metadata`` (only when set) and ``parts``."""
        message: dict[str, Any] = {"id": self.ui_id, "role": self.role}
        if self.metadata is not None:
            message["metadata"] = self.metadata
        message["parts"] = self.parts
        return message


class Run(models.Model):
    """One streamed answer: the assistant message it built, how it ended,
    and its timing. ``error_detail`` is for operators, never for clients."""

    class Status(models.TextChoices):
        RUNNING = "running", _("running")
        COMPLETED = "completed", _("completed")
        FAILED = "failed", _("failed")
        #: The client went away.
        CANCELLED = "cancelled", _("cancelled")
        #: Stopped on purpose through the stop endpoint.
        STOPPED = "stopped", _("stopped")
        #: The process that ran it died or shut down before the run ended.
        INTERRUPTED = "interrupted", _("interrupted")

    id = models.UUIDField(_("id"), primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.CASCADE,
        related_name="runs",
        verbose_name=_("conversation"),
    )
    message = models.ForeignKey(
        Message,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="runs",
        verbose_name=_("message"),
        help_text=_("The assistant message the run built."),
    )
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.RUNNING, db_index=True)
    finish_reason = models.CharField(_("finish reason"), max_length=32, blank=True)
    error_code = models.CharField(_("error code"), max_length=64, blank=True)
    error_detail = models.TextField(_("error detail"), blank=True, help_text=_("Never sent to clients."))
    model = models.CharField(_("model"), max_length=200, blank=True)
    usage = models.JSONField(_("usage"), default=dict, blank=True, encoder=StoredJSONEncoder)
    sdk_version = models.PositiveSmallIntegerField(
        _("SDK version"), default=7, help_text=_("The AI SDK dialect the originating client was served.")
    )
    trigger = models.CharField(_("trigger"), max_length=32, blank=True)
    started_at = models.DateTimeField(_("started at"), default=timezone.now)
    first_chunk_at = models.DateTimeField(_("first chunk at"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)
    chunk_count = models.PositiveIntegerField(_("chunk count"), default=0)
    stored_bytes = models.PositiveBigIntegerField(
        _("stored bytes"),
        default=0,
        help_text=_(
            "What the run's turn stored for its owner: the submitted message's parts (JSON) and its files, in "
            "bytes; counted against the owner's MAX_STORED_BYTES_PER_*_PER_DAY."
        ),
    )
    heartbeat_at = models.DateTimeField(
        _("heartbeat at"),
        null=True,
        blank=True,
        help_text=_("When the process running it last said it lives; older than LEASE_SECONDS: orphaned."),
    )
    turn = models.JSONField(
        _("turn"),
        null=True,
        blank=True,
        encoder=StoredJSONEncoder,
        help_text=_(
            "What a process that continues this run after its own died needs besides the rows: the endpoint's "
            "hooks class, the turn's kind and extra keys, its transport, the checked answers (ON_OWNER_LOST)."
        ),
    )
    lease_epoch = models.PositiveIntegerField(
        _("lease epoch"),
        default=1,
        help_text=_(
            "The fencing token of the run's lease: taken (raised by one) by each process that claims the run, "
            "the one that starts it first; the log, the message and the outcome are written only under the "
            "epoch their writer holds."
        ),
    )
    trace_id = models.CharField(
        _("trace id"),
        max_length=32,
        blank=True,
        help_text=_("The OpenTelemetry trace of the run (32 hex digits), when it was traced."),
    )
    span_id = models.CharField(
        _("span id"),
        max_length=16,
        blank=True,
        help_text=_("The run's own span in that trace (16 hex digits): what feedback on its answer is sent under."),
    )
    decisions = models.JSONField(
        _("decisions"),
        default=list,
        blank=True,
        encoder=StoredJSONEncoder,
        help_text=_(
            "What the owner answered before this run: approvals (approved, reason, when) and client tool results."
        ),
    )
    agent_state = models.JSONField(
        _("agent state"),
        null=True,
        blank=True,
        encoder=StoredJSONEncoder,
        help_text=_(
            "What an agent framework keeps to resume this run's pending calls (a LangGraph checkpoint, "
            "an Agents SDK RunState), saved by its adapter; the run that answers them reads it."
        ),
    )
    history = models.JSONField(
        _("history sent"),
        null=True,
        blank=True,
        encoder=StoredJSONEncoder,
        help_text=_(
            "What the model was sent as the conversation: the strategy, the stored messages it kept, "
            "the summary of older turns, the estimated tokens (uistream_app.history), and the messages "
            "themselves, bounded (uistream_app.runs.given)."
        ),
    )
    setup = models.JSONField(
        _("set-up"),
        null=True,
        blank=True,
        encoder=StoredJSONEncoder,
        help_text=_(
            "What the run was given when it started, as the hooks chose it where it executed: the model, "
            "the transport, the system prompt, the tools offered (names, descriptions, input schemas), or "
            "what an agent's adapter knows of its own (TurnSetup.record). For staff: never sent to clients."
        ),
    )
    state = models.JSONField(
        _("shared state"),
        null=True,
        blank=True,
        encoder=StoredJSONEncoder,
        help_text=_("The AG-UI shared state as this run left it (sent first when the run is replayed)."),
    )

    objects = RunQuerySet.as_manager()

    class Meta:
        verbose_name = _("run")
        verbose_name_plural = _("runs")
        ordering = ("-started_at",)
        indexes = (
            models.Index(fields=["conversation", "-started_at"], name="uistream_run_conv_recent"),
            models.Index(fields=["status", "model"], name="uistream_run_status_model"),
            models.Index(fields=["status", "heartbeat_at"], name="uistream_run_lease"),
        )

    def __str__(self) -> str:
        return f"{self.id} ({self.status})"

    @property
    def time_to_first_chunk(self) -> timedelta | None:
        if self.first_chunk_at is None:
            return None
        return self.first_chunk_at - self.started_at

    @property
    def duration(self) -> timedelta | None:
        if self.finished_at is None:
            return None
        return self.finished_at - self.started_at


class OwnerDay(models.Model):
    """What one owner's turns stored on one calendar day (in ``TIME_ZONE``):
    the ``Run.stored_bytes`` of the owner's runs started that day, summed
    as they are created and less those deleted that day, so that the day's
    storage cap (``lifecycle.caps``) reads one row per turn instead of
    every run of the day. ``owner_key`` is ``Owner.row_key``: a user's pk,
    or a digest of an anonymous session's key (never the key itself). Rows
    of days before yesterday are deleted (``lifecycle.caps``)."""

    owner_key = models.CharField(_("owner"), max_length=80)
    day = models.DateField(_("day"))
    stored_bytes = models.PositiveBigIntegerField(_("stored bytes"), default=0)

    class Meta:
        verbose_name = _("owner's day")
        verbose_name_plural = _("owners' days")
        ordering = ("-day", "owner_key")
        constraints = (models.UniqueConstraint(fields=["owner_key", "day"], name="uistream_ownerday_unique"),)
        # Old days are deleted by date, across owners.
        indexes = (models.Index(fields=["day"], name="uistream_ownerday_day"),)

    def __str__(self) -> str:
        return f"{self.owner_key} {self.day}: {self.stored_bytes} bytes"


class Feedback(models.Model):
    """What a message's owner thought of an assistant message: up or
    down, with an optional reason (``UISTREAM["FEEDBACK_REASONS"]``) and
    comment; one per message, changed in place. ``run`` is the run that
    built the answer rated (the last, when a continuation added to it)."""

    class Rating(models.TextChoices):
        UP = "up", _("up")
        DOWN = "down", _("down")

    message = models.OneToOneField(
        Message, on_delete=models.CASCADE, related_name="feedback", verbose_name=_("message")
    )
    run = models.ForeignKey(
        Run,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="feedback",
        verbose_name=_("run"),
    )
    rating = models.CharField(_("rating"), max_length=8, choices=Rating.choices)
    reason = models.CharField(_("reason"), max_length=64, blank=True)
    comment = models.TextField(_("comment"), blank=True)
    created_at = models.DateTimeField(_("created at"), default=timezone.now)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("feedback")
        verbose_name_plural = _("feedback")
        ordering = ("-updated_at",)
        indexes = (models.Index(fields=["rating", "-updated_at"], name="uistream_feedback_rating"),)

    def __str__(self) -> str:
        return f"{self.rating} on {self.message_id}"

    def as_json(self) -> dict[str, Any]:
        """The feedback as the messages API and the feedback endpoint show it."""
        return {
            "rating": self.rating,
            "reason": self.reason,
            "comment": self.comment,
            "createdAt": self.created_at.isoformat(),
            "updatedAt": self.updated_at.isoformat(),
        }


class SteeringMessage(models.Model):
    """A message sent to a run while it ran (``POST chat/<id>/steer`` or
    ``queue``): its id (the client's, unique per conversation), what was
    sent, and, once known, its outcome in the SDK's shape (``delivered``
    with the step number, or ``not-delivered`` with a reason). A resend of
    the id answers the stored outcome, from any process. A delivered one
    is also a ``steering-message`` part of the run's assistant message."""

    class Kind(models.TextChoices):
        STEER = "steer", _("steer")
        QUEUE = "queue", _("queue")

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="steering_messages", verbose_name=_("conversation")
    )
    run = models.ForeignKey(
        Run,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="steering_messages",
        verbose_name=_("run"),
    )
    client_id = models.CharField(_("id"), max_length=128)
    kind = models.CharField(_("kind"), max_length=8, choices=Kind.choices)
    message = models.JSONField(_("message"), encoder=StoredJSONEncoder)
    outcome = models.JSONField(_("outcome"), null=True, blank=True)
    created_at = models.DateTimeField(_("created at"), default=timezone.now)
    resolved_at = models.DateTimeField(_("resolved at"), null=True, blank=True)

    class Meta:
        verbose_name = _("steering message")
        verbose_name_plural = _("steering messages")
        ordering = ("created_at",)
        constraints = (
            models.UniqueConstraint(fields=["conversation", "client_id"], name="uistream_steering_unique_id"),
        )

    def __str__(self) -> str:
        return f"{self.kind} {self.client_id}"


class ChunkBatch(models.Model):
    """Consecutive chunks of a run's canonical log, as one write of
    ``RunRecorder`` stored them: ``chunks[i]`` has sequence number
    ``first_seq + i`` and was sent ``offsets[i]`` ms after the run started.

    One row per flush (a few per second at most, one per step for a fast
    model), not one per chunk: a row per delta was most of a run's CPU
    (bench/http_bench.py). Append-only: rows are never changed. Read the log
    through ``uistream_app.recording`` (``iter_log``, ``read_log``,
    ``load_log``), which hands out one ``LogEntry`` per chunk.
    """

    run = models.ForeignKey(
        Run,
        on_delete=models.CASCADE,
        related_name="chunk_batches",
        verbose_name=_("run"),
        # The (run, first_seq) unique index serves every lookup by run; a
        # second index on run alone would only slow down the inserts.
        db_index=False,
    )
    first_seq = models.PositiveIntegerField(_("first sequence number"))
    last_seq = models.PositiveIntegerField(_("last sequence number"))
    offsets = models.JSONField(_("offsets (ms)"), help_text=_("Each chunk's milliseconds since the run started."))
    chunks = models.JSONField(_("chunks"), encoder=StoredJSONEncoder, help_text=_("The ai@7 UI message chunks."))

    class Meta:
        verbose_name = _("chunk batch")
        verbose_name_plural = _("chunk batches")
        # run_id, not run: ordering by the relation would join Run for its ordering.
        ordering = ("run_id", "first_seq")
        constraints = (
            models.UniqueConstraint(fields=["run", "first_seq"], name="uistream_chunkbatch_first_seq_unique"),
            models.CheckConstraint(
                condition=models.Q(last_seq__gte=models.F("first_seq")), name="uistream_chunkbatch_seq_order"
            ),
        )

    def __str__(self) -> str:
        return f"{self.run_id} #{self.first_seq}–{self.last_seq}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise ValueError("ChunkBatch rows are append-only; a stored chunk is never changed.")
        super().save(*args, **kwargs)


class StoredFile(models.Model):
    """A file a user sent with a message: its bytes live in Django's default
    storage (``file``), never in ``Message.parts``, whose part points at
    ``/api/files/<id>`` instead (``uistream_app.lifecycle.attachments``). Deleting the row,
    however it happens (a conversation's cascade, the API, the admin),
    deletes the stored bytes once the transaction commits."""

    id = models.UUIDField(_("id"), primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="files", verbose_name=_("conversation")
    )
    message = models.ForeignKey(
        Message,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="files",
        verbose_name=_("message"),
    )
    file = models.FileField(_("file"), max_length=300)
    name = models.CharField(_("name"), max_length=255, blank=True, help_text=_("The filename the client gave."))
    media_type = models.CharField(_("media type"), max_length=255)
    size = models.PositiveBigIntegerField(_("size"), help_text=_("Bytes."))
    sha256 = models.CharField(_("SHA-256"), max_length=64)
    created_at = models.DateTimeField(_("created at"), default=timezone.now)

    class Meta:
        verbose_name = _("file")
        verbose_name_plural = _("files")
        ordering = ("created_at",)

    def __str__(self) -> str:
        return self.name or str(self.id)

    @property
    def url(self) -> str:
        """The owner-checked URL the stored part carries."""
        return self.url_of(self.pk)

    @staticmethod
    def url_of(file_id: uuid.UUID | str) -> str:
        """The URL of the stored file ``file_id``, a row or not yet
        (``lifecycle.attachments.file_url``): the app's ``files/<id>`` route (where the
        project included the app: ``/api/files/<id>`` in the demo)."""
        try:
            return reverse("uistream:file", args=[str(file_id)])
        except NoReverseMatch:
            return f"/api/files/{file_id}"


class LiveRun(models.Model):
    """A run in flight as the PostgreSQL broker knows it
    (``uistream_app.live.postgres``; docs/operations.md, "postgres"): the
    chat's run slot (one open row per conversation), its lease in the
    broker (``expires_at``, refreshed by the process that runs it), a stop
    asked of it, and whether a worker adopted it. The broker reads and
    writes this table with its own connections, by its name
    (``uistream_app_liverun``); other brokers leave it empty. A closed row
    is kept ``FINISHED_TTL`` so that late subscribers on other processes
    see the run ended, then deleted."""

    run_id = models.CharField(_("run id"), max_length=64, primary_key=True)
    conversation_id = models.CharField(_("conversation key"), max_length=64)
    open = models.BooleanField(_("open"), default=True)
    expires_at = models.DateTimeField(_("expires at"), help_text=_("Open past this: its process is gone."))
    next_seq = models.PositiveIntegerField(
        _("next sequence number"), default=0, help_text=_("Chunks published before a hand-off.")
    )
    handed_off = models.BooleanField(_("handed off"), default=False)
    adopted = models.BooleanField(_("adopted"), default=False)
    stop_requested = models.BooleanField(_("stop requested"), default=False)
    steering = models.JSONField(
        _("steering waiting"),
        default=list,
        help_text=_("Steering messages sent while the run was handed off, for its adopter."),
    )

    class Meta:
        verbose_name = _("live run")
        verbose_name_plural = _("live runs")
        constraints = (
            models.UniqueConstraint(
                fields=["conversation_id"], condition=Q(open=True), name="uistream_liverun_one_open_per_chat"
            ),
        )

    def __str__(self) -> str:
        return f"{self.run_id} ({'open' if self.open else 'closed'})"


class LiveSteeringOutcome(models.Model):
    """The outcome of a steering message as the PostgreSQL broker keeps it
    for every process's waiters (``report_steering``; docs/operations.md,
    "PostgreSQL broker rules"), until ``expires_at`` (``FINISHED_TTL``).
    The broker reads and writes this table by its name
    (``uistream_app_livesteeringoutcome``); the outcome that stands is
    ``SteeringMessage.outcome``."""

    conversation_id = models.CharField(_("conversation key"), max_length=64)
    steering_id = models.CharField(_("steering message id"), max_length=255)
    outcome = models.JSONField(_("outcome"))
    expires_at = models.DateTimeField(_("expires at"))

    class Meta:
        verbose_name = _("live steering outcome")
        verbose_name_plural = _("live steering outcomes")
        constraints = (
            models.UniqueConstraint(
                fields=["conversation_id", "steering_id"], name="uistream_livesteering_one_per_message"
            ),
        )

    def __str__(self) -> str:
        return f"{self.conversation_id}/{self.steering_id}"
