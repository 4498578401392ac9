"""The admin: where an operator sees exactly what a user was sent.

* Conversations: owner, title, message count, last activity; search by id,
  title, owner, session, and the words of any message; the messages inline,
  read-only, rendered as the chat the user saw; the conversation's runs.
* Runs: status, finish reason, model, timing, chunk count, error code;
  filters by status and model. A run's page is the transcript inspector
  (``admin_views.RunInspector``): the message as the user saw it, the
  chunk table a page at a time, the arrival timeline, the wire in each
  dialect with downloads, and the verdict.

Both are view-only (what was sent is a record, not a draft); staff with the
delete permission may still delete a conversation or a run. The chunk log
has no admin of its own: a run's page is the way in, and it never loads a
log whole.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import Count, Exists, OuterRef, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.template.loader import render_to_string
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from . import admin_views
from .inspect.parts import part_views, pretty_json
from .inspect.timeline import format_ms
from .models import Conversation, Message, Run

__all__ = ["ConversationAdmin", "MessageInline", "RunAdmin", "RunInline"]

CSS = "uistream_app/inspector.css"


def _ms(delta: Any) -> int | None:
    return None if delta is None else int(delta.total_seconds() * 1000)


def owner_label(conversation: Conversation) -> str:
    if conversation.owner_id is not None and conversation.owner is not None:
        return str(conversation.owner)
    if conversation.session_key:
        return f"anonymous (session {conversation.session_key[:8]}…)"
    return "nobody"


def run_url(run: Run) -> str:
    return reverse("admin:uistream_app_run_change", args=[run.pk])


class OwnerKindFilter(admin.SimpleListFilter):
    title = _("owner")
    parameter_name = "owner_kind"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [("user", _("a signed-in user")), ("session", _("an anonymous session"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "user":
            return queryset.filter(owner__isnull=False)
        if self.value() == "session":
            return queryset.filter(owner__isnull=True)
        return queryset


class RunStatusFilter(admin.SimpleListFilter):
    """Conversations with a run in a given status (a failed one, say)."""

    title = _("has a run that is")
    parameter_name = "run_status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return list(Run.Status.choices)

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value:
            return queryset.filter(Exists(Run.objects.filter(conversation=OuterRef("pk"), status=value)))
        return queryset


class ReadOnlyInline:
    """An inline that shows stored rows and never adds, changes or deletes
    them (the log and the runs are what the client was sent)."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class MessageInline(ReadOnlyInline, admin.StackedInline):  # type: ignore[type-arg]
    """The conversation's messages as a chat: each message's parts rendered
    (``uistream_app/message.html``), never its raw JSON."""

    model = Message
    template = "admin/uistream_app/conversation/chat_inline.html"
    fields = ("bubble",)
    readonly_fields = ("bubble",)
    extra = 0
    can_delete = False
    show_change_link = False
    verbose_name_plural = _("messages")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Message]:
        # The run links of every message in one more query, not one each.
        return super().get_queryset(request).order_by("position").prefetch_related("runs")

    @admin.display(description=_("message"))
    def bubble(self, message: Message) -> SafeString:
        runs = [{"url": run_url(run), "short": str(run.pk)[:8], "status": run.status} for run in message.runs.all()]
        return render_to_string(
            "uistream_app/message.html",
            {
                "message": message,
                "parts": part_views(message.parts),
                "metadata": pretty_json(message.metadata) if message.metadata is not None else None,
                "runs": runs,
            },
        )


class RunInline(ReadOnlyInline, admin.TabularInline):  # type: ignore[type-arg]
    model = Run
    fields = ("inspect", "status", "finish_reason", "model", "started_at", "chunk_count", "error_code")
    readonly_fields = fields
    extra = 0
    can_delete = False
    verbose_name_plural = _("runs")
    ordering = ("started_at",)

    @admin.display(description=_("run"))
    def inspect(self, run: Run) -> SafeString:
        return format_html('<a href="{}">{}</a>', run_url(run), str(run.pk)[:8])


def _user_search_fields() -> tuple[str, ...]:
    user_model = get_user_model()
    names = {user_model.USERNAME_FIELD, user_model.get_email_field_name()}
    present = {f.name for f in user_model._meta.get_fields()}
    return tuple(f"owner__{name}" for name in sorted(names) if name in present)


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("display_title", "owner_display", "message_count", "last_activity", "created_at")
    list_select_related = ("owner",)
    list_filter = (OwnerKindFilter, RunStatusFilter, "updated_at")
    search_fields = ("=id", "title", "=session_key", *_user_search_fields(), "messages__parts")
    search_help_text = _("Chat id, title, owner, session key, or words from any message.")
    date_hierarchy = "updated_at"
    ordering = ("-updated_at",)
    fields = ("id", "title", "owner", "session_key", "created_at", "updated_at", "metadata_display")
    readonly_fields = fields
    inlines = (MessageInline, RunInline)
    list_per_page = 50

    class Media:
        css: ClassVar[dict[str, tuple[str, ...]]] = {"all": (CSS,)}

    def get_queryset(self, request: HttpRequest) -> QuerySet[Conversation]:
        queryset: QuerySet[Conversation] = super().get_queryset(request)
        return queryset.select_related("owner").annotate(_message_count=Count("messages"))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description=_("title"), ordering="title")
    def display_title(self, conversation: Conversation) -> str:
        return conversation.title or f"({conversation.id})"

    @admin.display(description=_("owner"), ordering="owner")
    def owner_display(self, conversation: Conversation) -> str:
        return owner_label(conversation)

    @admin.display(description=_("messages"), ordering="_message_count")
    def message_count(self, conversation: Conversation) -> int:
        return int(getattr(conversation, "_message_count", 0))

    @admin.display(description=_("last activity"), ordering="updated_at")
    def last_activity(self, conversation: Conversation) -> Any:
        return conversation.updated_at

    @admin.display(description=_("metadata"))
    def metadata_display(self, conversation: Conversation) -> SafeString:
        return format_html('<pre class="uistream-json">{}</pre>', pretty_json(conversation.metadata))


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = (
        "short_id",
        "conversation_link",
        "status_badge",
        "finish_reason",
        "model",
        "started_at",
        "first_chunk",
        "duration_display",
        "chunk_count",
        "error_code",
    )
    list_display_links = ("short_id",)
    list_select_related = ("conversation",)
    list_filter = ("status", "model", "finish_reason", "sdk_version", "started_at")
    search_fields = ("=conversation__id", "conversation__title", "model", "error_code")
    search_help_text = _("Chat id, conversation title, model, or error code.")
    date_hierarchy = "started_at"
    ordering = ("-started_at",)
    list_per_page = 50

    class Media:
        css: ClassVar[dict[str, tuple[str, ...]]] = {"all": (CSS,)}

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        info = (self.opts.app_label, self.opts.model_name)
        extra = [
            path(
                "<path:object_id>/download/<str:name>/",
                self.admin_site.admin_view(self.download_view),
                name="{}_{}_download".format(*info),
            ),
        ]
        return extra + list(super().get_urls())

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """A run's page is its transcript inspector."""
        return admin_views.RunInspector(self).view(request, object_id, extra_context)

    def download_view(self, request: HttpRequest, object_id: str, name: str) -> HttpResponseBase:
        return admin_views.RunInspector(self).download(request, object_id, name)

    @admin.display(description=_("run"), ordering="started_at")
    def short_id(self, run: Run) -> str:
        return str(run.pk)[:8]

    @admin.display(description=_("conversation"), ordering="conversation__title")
    def conversation_link(self, run: Run) -> SafeString:
        url = reverse("admin:uistream_app_conversation_change", args=[run.conversation_id])
        return format_html('<a href="{}">{}</a>', url, str(run.conversation))

    @admin.display(description=_("status"), ordering="status")
    def status_badge(self, run: Run) -> SafeString:
        return format_html('<span class="uistream-status uistream-status-{}">{}</span>', run.status, run.status)

    @admin.display(description=_("first chunk"), ordering="first_chunk_at")
    def first_chunk(self, run: Run) -> str:
        return format_ms(_ms(run.time_to_first_chunk))

    @admin.display(description=_("duration"), ordering="finished_at")
    def duration_display(self, run: Run) -> str:
        return format_ms(_ms(run.duration))
