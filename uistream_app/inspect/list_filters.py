"""Finding the bad ones: the admin's filters of runs and conversations, and
the conditions behind them, which ``manage.py uistream_export`` shares.

Each filter narrows the list with an ``Exists()`` subquery on an index,
never a join, so a row is listed once however many rows match it, and the
list's count and page stay what the admin's paging expects:

* feedback ("rated down", "rated down with a comment", "rated up", "no
  feedback"): a run by the feedback on its answer (``Feedback.message``,
  unique), a conversation by the feedback on any of its messages, every
  version included (``uistream_feedback_rating``: rating, newest first);
* outcome (failed, interrupted, stopped, usage limit, tool errors): a
  run's status on the (status, model) index, a usage limit its error code
  too; a conversation by its runs on the (conversation, started_at) index.
  Tool errors are a tool part in ``output-error`` in the run's answer: a
  containment test of the parts' JSON where the database has one
  (PostgreSQL's ``@>``), else a match of the stored JSON's text (SQLite),
  which reads each candidate message's parts;
* model: a run's own column (Django's field filter), a conversation by
  its runs;
* owner: a user, any signed-in user, or anonymous visitors. The choices
  list the owners of the newest conversations (a bounded read of the
  ``-updated_at`` index); ``?owner=<user id>`` picks any user;
* date: Django's own date filters (``started_at``, ``updated_at``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db import connections
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from ..lifecycle.limits import UsageLimitExceeded
from ..models import Conversation, Feedback, Message, Run
from ..owners import Owner

__all__ = [
    "FEEDBACK_CHOICES",
    "OUTCOME_CHOICES",
    "ConversationFeedbackFilter",
    "ConversationModelFilter",
    "ConversationOutcomeFilter",
    "ConversationOwnerFilter",
    "RunFeedbackFilter",
    "RunOutcomeFilter",
    "RunOwnerFilter",
    "feedback_q",
    "has_tool_error",
    "run_outcome_q",
]

#: ``?feedback=`` values, as the filters and ``uistream_export --rating`` name them.
FEEDBACK_CHOICES: Final = {
    "down": _("rated down"),
    "down_comment": _("rated down with a comment"),
    "up": _("rated up"),
    "none": _("no feedback"),
}
#: ``?outcome=`` values.
OUTCOME_CHOICES: Final = {
    "failed": _("failed"),
    "interrupted": _("interrupted"),
    "stopped": _("stopped"),
    "tool_error": _("a tool error"),
    "usage_limit": _("a usage limit"),
}
#: The tool part state of a tool that raised (``protocol/ui/parts.py``).
TOOL_ERROR_STATE: Final = "output-error"
#: The owners of this many of the newest conversations are offered as choices.
RECENT_CONVERSATIONS: Final = 200
OWNER_CHOICES: Final = 20


def _rated(feedback: QuerySet[Feedback], value: str) -> QuerySet[Feedback]:
    if value == "down":
        return feedback.filter(rating=Feedback.Rating.DOWN)
    if value == "down_comment":
        return feedback.filter(rating=Feedback.Rating.DOWN).exclude(comment="")
    if value == "up":
        return feedback.filter(rating=Feedback.Rating.UP)
    return feedback


def feedback_q(value: str, feedback: QuerySet[Feedback]) -> Q:
    """Rows that ``feedback`` (correlated to the outer row) has feedback of
    kind ``value`` (a ``FEEDBACK_CHOICES`` key; "none": none at all)."""
    if value == "none":
        return ~Q(Exists(feedback))
    return Q(Exists(_rated(feedback, value)))


def has_tool_error(messages: QuerySet[Message]) -> QuerySet[Message]:
    """Those of ``messages`` holding a tool part that ended in an error."""
    if connections[messages.db].features.supports_json_field_contains:
        return messages.filter(parts__contains=[{"state": TOOL_ERROR_STATE}])
    # JSON text as Django stores it (json.dumps: '": "'); an escaped quote
    # inside a text part can't end the match.
    return messages.filter(parts__icontains=f'"state": "{TOOL_ERROR_STATE}"')


def run_outcome_q(value: str, message: str = "message_id") -> Q:
    """Runs of the outcome ``value`` (an ``OUTCOME_CHOICES`` key); ``message``
    names the runs' message column in the query (``OuterRef`` for a subquery)."""
    if value == "tool_error":
        return Q(Exists(has_tool_error(Message.objects.filter(pk=OuterRef(message)))))
    if value == "usage_limit":
        return Q(status=Run.Status.FAILED, error_code=UsageLimitExceeded.error_code)
    if value in (Run.Status.FAILED, Run.Status.INTERRUPTED, Run.Status.STOPPED):
        return Q(status=value)
    return Q()


class _ChoiceFilter(admin.SimpleListFilter):
    #: The filter's values and their labels.
    options: ClassVar[dict[str, Any]]

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return list(self.options.items())

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value not in self.options:
            return queryset
        return queryset.filter(self.condition(value))

    def condition(self, value: str) -> Q:
        raise NotImplementedError


class RunFeedbackFilter(_ChoiceFilter):
    """Runs by the feedback on their answer."""

    title = _("feedback")
    parameter_name = "feedback"
    options = FEEDBACK_CHOICES

    def condition(self, value: str) -> Q:
        return feedback_q(value, Feedback.objects.filter(message_id=OuterRef("message_id")))


class ConversationFeedbackFilter(RunFeedbackFilter):
    """Conversations by the feedback on any of their messages (every version's)."""

    def condition(self, value: str) -> Q:
        return feedback_q(value, Feedback.objects.filter(message__conversation_id=OuterRef("pk")))


class RunOutcomeFilter(_ChoiceFilter):
    """Runs that went wrong, by how."""

    title = _("outcome")
    parameter_name = "outcome"
    options = OUTCOME_CHOICES

    def condition(self, value: str) -> Q:
        return run_outcome_q(value)


class ConversationOutcomeFilter(RunOutcomeFilter):
    """Conversations with a run that went wrong that way."""

    title = _("has a run with the outcome")

    def condition(self, value: str) -> Q:
        if value == "tool_error":
            answers = Message.objects.filter(conversation_id=OuterRef("pk"), role=Message.Role.ASSISTANT)
            return Q(Exists(has_tool_error(answers)))
        return Q(Exists(Run.objects.filter(run_outcome_q(value), conversation_id=OuterRef("pk"))))


class ConversationModelFilter(admin.SimpleListFilter):
    """Conversations with a run of a model (the models runs recorded)."""

    title = _("model")
    parameter_name = "model"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        models = Run.objects.exclude(model="").order_by("model").values_list("model", flat=True).distinct()
        return [(name, name) for name in models[:100]]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if not value:
            return queryset
        return queryset.filter(Exists(Run.objects.filter(conversation_id=OuterRef("pk"), model=value)))


class ConversationOwnerFilter(admin.SimpleListFilter):
    """A user's conversations (``?owner=<user id>``), any signed-in user's
    (``user``), or anonymous visitors' (``anonymous``)."""

    title = _("owner")
    parameter_name = "owner"
    #: The path from the filtered rows to their conversation.
    prefix: ClassVar[str] = ""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        recent = (
            Conversation.objects.filter(owner__isnull=False)
            .order_by("-updated_at")
            .values_list("owner_id", flat=True)[:RECENT_CONVERSATIONS]
        )
        ids = list(dict.fromkeys(recent))[:OWNER_CHOICES]
        chosen = self._user_id()
        if chosen is not None and chosen not in ids:
            ids.append(chosen)
        users = get_user_model()._default_manager.in_bulk(ids)
        choices: list[tuple[str, Any]] = [
            ("user", _("a signed-in user")),
            ("anonymous", _("an anonymous visitor")),
        ]
        choices += [(str(pk), Owner.of_user(users[pk]).describe()) for pk in ids if pk in users]
        return choices

    def _user_id(self) -> Any:
        value = self.value()
        if value in (None, "user", "anonymous"):
            return None
        try:
            return get_user_model()._meta.pk.to_python(value)
        except Exception:  # noqa: BLE001 - a malformed id is simply no user
            return None

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value == "user":
            return queryset.filter(**{f"{self.prefix}owner__isnull": False})
        if value == "anonymous":
            return queryset.filter(**{f"{self.prefix}owner__isnull": True})
        if value:
            user_id = self._user_id()
            return queryset.filter(**{f"{self.prefix}owner": user_id}) if user_id is not None else queryset.none()
        return queryset


class RunOwnerFilter(ConversationOwnerFilter):
    """Runs by their conversation's owner."""

    prefix = "conversation__"
