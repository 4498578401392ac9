"""The admin: where an operator sees exactly what a user was sent.

* Conversations: owner, title, message count, last activity; search by
  chat id, title, owner or session key, each through an index (a search of
  the words of every message is opt-in: it reads every message's JSON); the
  current branch's messages inline, read-only, rendered as the chat the
  user saw ("3 versions" where a message has more), and the conversation's
  runs, each a page at a time (the newest first, so a 1,000-message chat
  opens as fast as a short one).
* Runs: status, finish reason, model, timing, chunk count, error code. A
  run's page is the transcript inspector
  (``inspect.inspector.RunInspector``): the message as the user saw it with
  its feedback and its other attempts, the chunk table a page at a time,
  the arrival timeline, the wire in each dialect with downloads, and the
  verdict. The action "Export the selected runs as a JSONL dataset"
  downloads them as ``manage.py uistream_export`` writes them
  (``inspect.dataset``).
* Finding the bad ones: both lists filter by feedback, outcome (failed,
  interrupted, stopped, a tool error, a usage limit), model, owner and
  date (``inspect.list_filters``: ``Exists()`` subqueries on indexes).

Both are view-only (what was sent is a record, not a draft); staff with the
delete permission may still delete a conversation or a run. The chunk log
has no admin of its own: a run's page is the way in, and it never loads a
log whole.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth import get_user_model
from django.core.handlers.asgi import ASGIRequest
from django.db import connections
from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce, Lower
from django.forms.models import BaseInlineFormSet
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    QueryDict,
    StreamingHttpResponse,
)
from django.template.loader import render_to_string
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import content_disposition_header
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from .inspect import inspector as admin_views
from .inspect.dataset import adataset_lines, dataset_lines
from .inspect.list_filters import (
    ConversationFeedbackFilter,
    ConversationModelFilter,
    ConversationOutcomeFilter,
    ConversationOwnerFilter,
    RunFeedbackFilter,
    RunOutcomeFilter,
    RunOwnerFilter,
)
from .inspect.owner_views import owner_html
from .inspect.part_views import part_views, pretty_json
from .inspect.timeline import format_ms
from .lifecycle.branches import versions
from .models import Conversation, Message, Run, StoredFile
from .protocol.media_types import OCTET_STREAM, served_media_type

__all__ = [
    "ConversationAdmin",
    "InlinePage",
    "MessageInline",
    "MessagePageFormSet",
    "MessageTextSearch",
    "PagedInline",
    "PagedInlineFormSet",
    "RunAdmin",
    "RunInline",
]

CSS = "uistream_app/inspector.css"


def _ms(delta: Any) -> int | None:
    return None if delta is None else int(delta.total_seconds() * 1000)


#: A run's JSON records a list never shows: the records of what it was
#: given and sent (up to about 150 KB a run), an agent's saved state.
RUN_RECORDS: Final = ("setup", "history", "agent_state", "state", "decisions", "usage", "error_detail")


def run_url(run: Run) -> str:
    return reverse("admin:uistream_app_run_change", args=[run.pk])


class ReadOnlyInline:
    """An inline that shows stored rows and never adds, changes or deletes
    them (the log and the runs are what the client was sent)."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _page_number(value: str | None) -> int:
    try:
        return max(int(value), 1) if value is not None else 1
    except ValueError:
        return 1


@dataclass(frozen=True)
class InlinePage:
    """The page of an inline's rows on show, and the links to the others.

    Pages count from the newest rows: page 1 (the default) is the newest
    ``per_page``; ``first`` and ``last`` number the rows shown from the
    oldest, 1-based, as a reader counts messages."""

    number: int
    pages: int
    total: int
    first: int
    last: int
    #: ``(number, href)`` for each page to link; ``(None, "")`` marks a gap.
    links: tuple[tuple[int | None, str], ...]
    newer: str
    older: str


class PagedInlineFormSet(BaseInlineFormSet):  # type: ignore[type-arg]
    """An inline formset that shows one page of its rows.

    ``PagedInline.get_formset`` sets the class attributes from the request;
    ``get_queryset`` reads the page (a count, the page's keys, the page's
    rows: three queries however many rows there are) and ``page`` says
    which it is, for the template's links."""

    page_param: ClassVar[str] = "page"
    per_page: ClassVar[int] = 50
    newest_first: ClassVar[tuple[str, ...]] = ("-pk",)
    display_order: ClassVar[tuple[str, ...]] = ("pk",)
    requested_page: ClassVar[int] = 1
    query: ClassVar[QueryDict | None] = None
    anchor: ClassVar[str] = ""

    def get_queryset(self) -> Any:
        if not hasattr(self, "_queryset"):
            rows: QuerySet[Any] = super().get_queryset()
            total = rows.count()
            pages = max(math.ceil(total / self.per_page), 1)
            number = min(self.requested_page, pages)
            start = (number - 1) * self.per_page
            keys = list(rows.order_by(*self.newest_first).values_list("pk", flat=True)[start : start + self.per_page])
            self._queryset = rows.filter(pk__in=keys).order_by(*self.display_order)
            shown = len(keys)
            self._page = InlinePage(
                number=number,
                pages=pages,
                total=total,
                first=total - start - shown + 1 if shown else 0,
                last=total - start,
                links=tuple(
                    (n, self.page_href(n) if n is not None else "")
                    for n in admin_views.RunInspector.page_links(number, pages)
                ),
                newer=self.page_href(number - 1) if number > 1 else "",
                older=self.page_href(number + 1) if number < pages else "",
            )
        return self._queryset

    @property
    def page(self) -> InlinePage:
        self.get_queryset()
        return self._page

    def page_href(self, number: int) -> str:
        query = self.query.copy() if self.query is not None else QueryDict(mutable=True)
        query[self.page_param] = str(number)
        return f"?{query.urlencode()}#{self.anchor}"


class PagedInline(ReadOnlyInline):
    """A read-only inline shown a page at a time (``?<page_param>=N``, 1 the
    newest), so a conversation's page costs the same at 10 messages and at
    10,000. Override ``per_page`` to show more or fewer rows a page."""

    formset: Any = PagedInlineFormSet
    page_param: ClassVar[str]
    per_page: ClassVar[int] = 50
    #: The order that makes page 1 the newest rows.
    newest_first: ClassVar[tuple[str, ...]]
    #: The order of the rows within a page.
    display_order: ClassVar[tuple[str, ...]]

    def get_formset(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        formset = super().get_formset(request, obj, **kwargs)  # type: ignore[misc]
        attrs = {
            "page_param": self.page_param,
            "per_page": self.per_page,
            "newest_first": self.newest_first,
            "display_order": self.display_order,
            "requested_page": _page_number(request.GET.get(self.page_param)),
            "query": request.GET.copy(),
            "anchor": f"{formset.get_default_prefix()}-group",
        }
        return type(formset.__name__, (formset,), attrs)


class MessagePageFormSet(PagedInlineFormSet):
    """A page of messages, each told how many versions it has: one query
    for the page (``lifecycle.branches.versions``), not one a message."""

    def get_queryset(self) -> Any:
        fresh = not hasattr(self, "_queryset")
        rows = super().get_queryset()
        if fresh:
            counts = versions(rows)  # evaluates the page: its rows are the forms' instances
            for message in rows:
                message.uistream_versions = counts.get(message.pk)
        return rows


class MessageInline(PagedInline, admin.StackedInline):  # type: ignore[type-arg]
    """The conversation's current branch as a chat: each message's parts
    rendered (``uistream_app/message.html``), never its raw JSON, with
    "n versions" where it has more (the other versions are off the branch:
    a run's page links them); 50 a page, the newest first
    (``?messages_page=N`` for older ones)."""

    model = Message
    formset = MessagePageFormSet
    page_param = "messages_page"
    newest_first = ("-position",)
    display_order = ("position",)
    template = "admin/uistream_app/conversation/chat_inline.html"
    fields = ("bubble",)
    readonly_fields = ("bubble",)
    extra = 0
    can_delete = False
    show_change_link = False
    verbose_name_plural = _("messages")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Message]:
        # The run links of the page's messages in one more query, not one each.
        return super().get_queryset(request).filter(current=True).prefetch_related("runs")

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
                "versions": getattr(message, "uistream_versions", None),
            },
        )


class RunInline(PagedInline, admin.TabularInline):  # type: ignore[type-arg]
    """The conversation's runs, each linking to its transcript inspector;
    25 a page (a run a turn: the turns of a page of messages), the newest
    first (``?runs_page=N`` for older ones)."""

    model = Run
    template = "admin/uistream_app/conversation/runs_inline.html"
    page_param = "runs_page"
    per_page = 25
    newest_first = ("-started_at", "-pk")
    display_order = ("started_at", "pk")
    fields = ("inspect", "status", "finish_reason", "model", "started_at", "chunk_count", "error_code")
    readonly_fields = fields
    extra = 0
    can_delete = False
    verbose_name_plural = _("runs")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Run]:
        # A page of 25 runs shows none of their records.
        return super().get_queryset(request).defer(*RUN_RECORDS)

    @admin.display(description=_("run"))
    def inspect(self, run: Run) -> SafeString:
        return format_html('<a href="{}">{}</a>', run_url(run), str(run.pk)[:8])


class FileInline(ReadOnlyInline, admin.TabularInline):  # type: ignore[type-arg]
    """The files users attached in the conversation (``StoredFile``), each
    linking to its bytes (``ConversationAdmin.file_view``: staff read them
    there, the owner at ``/api/files/<id>``)."""

    model = StoredFile
    fields = ("download", "media_type", "size", "message", "sha256", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    verbose_name_plural = _("files")

    @admin.display(description=_("file"))
    def download(self, stored: StoredFile) -> SafeString:
        url = reverse("admin:uistream_app_conversation_file", args=[stored.conversation_id, stored.pk])
        return format_html('<a href="{}">{}</a>', url, stored.name or str(stored.pk))


def _user_search_fields() -> tuple[str, ...]:
    user_model = get_user_model()
    names = {user_model.USERNAME_FIELD, user_model.get_email_field_name()}
    present = {f.name for f in user_model._meta.get_fields()}
    return tuple(name for name in sorted(names) if name in present)


def _next_string(value: str) -> str | None:
    """The least string above every string that starts with ``value`` in
    code point order (``None`` when there is none)."""
    stripped = value.rstrip(chr(0x10FFFF))
    if not stripped:
        return None
    following = ord(stripped[-1]) + 1
    if 0xD800 <= following <= 0xDFFF:  # no string holds a lone surrogate: the next is U+E000
        following = 0xE000
    return stripped[:-1] + chr(following)


def prefix_q(name: str, value: str, vendor: str) -> Q:
    """Rows whose ``name`` starts with ``value``, in a form an index on
    ``name`` serves.

    SQLite's ``LIKE`` (what ``startswith`` becomes) is case-insensitive and
    so never uses an index of the default collation; a range in code point
    order does, and is the same prefix test. Elsewhere ``startswith`` is
    left alone: PostgreSQL's ``varchar_pattern_ops`` indexes serve it, and
    a range under a linguistic collation would not be a prefix test."""
    if vendor != "sqlite":
        return Q(**{f"{name}__startswith": value})
    upper = _next_string(value)
    match = Q(**{f"{name}__gte": value})
    return match & Q(**{f"{name}__lt": upper}) if upper is not None else match


def _ascii_lower(value: str) -> str:
    # SQLite's LOWER() folds ASCII letters only; fold the term the same way.
    return "".join(c.lower() if c.isascii() else c for c in value)


class MessageTextSearch(admin.SimpleListFilter):
    """Opt in to search the words of every message as well: a scan of the
    JSON of all messages, so off unless asked for (the search itself is
    ``ConversationAdmin.get_search_results``)."""

    title = _("search also")
    parameter_name = "search_messages"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [("1", _("the words of messages (slow)"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("display_title", "owner_display", "message_count", "last_activity", "created_at")
    list_select_related = ("owner",)
    list_filter = (
        ConversationFeedbackFilter,
        ConversationOutcomeFilter,
        ConversationModelFilter,
        ConversationOwnerFilter,
        "updated_at",
        MessageTextSearch,
    )
    # What the search box searches is get_search_results; these name it for
    # the admin (which shows the box only when search_fields is set).
    search_fields = ("client_id", "id", "title", "session_key", *(f"owner__{name}" for name in _user_search_fields()))
    search_help_text = _(
        "The start of a chat id, a title, or an owner's username or email; or a whole session key. "
        "Choose “search also: the words of messages” to search what was said too (slow)."
    )
    date_hierarchy = "updated_at"
    ordering = ("-updated_at",)
    fields = (
        "client_id",
        "id",
        "title",
        "owner_display",
        "created_at",
        "updated_at",
        "metadata_display",
        "history_summary_display",
    )
    readonly_fields = fields
    inlines = (MessageInline, FileInline, RunInline)
    list_per_page = 50

    class Media:
        css: ClassVar[dict[str, tuple[str, ...]]] = {"all": (CSS,)}

    def get_queryset(self, request: HttpRequest) -> QuerySet[Conversation]:
        queryset: QuerySet[Conversation] = super().get_queryset(request)
        # A count per row shown (the position index serves it), not a join
        # of every message grouped before the page is cut.
        count = (
            Message.objects.filter(conversation=OuterRef("pk"), current=True)
            .order_by()
            .values("conversation")
            .annotate(n=Count("pk"))
            .values("n")
        )
        return queryset.select_related("owner").annotate(_message_count=Coalesce(Subquery(count), 0))

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Conversation], search_term: str
    ) -> tuple[QuerySet[Conversation], bool]:
        """Conversations whose chat id (or key), title (any case), owner's username
        or email (any case) start with the term, or whose session key is
        it: each an index lookup (the title through ``Lower("title")``, the
        owner through the user table and then the owner index). With
        ``search_messages=1`` also those with a message holding the term
        (a scan of every message)."""
        term = search_term.strip()
        if not term:
            return queryset, False
        vendor = connections[queryset.db].vendor
        users = get_user_model()._default_manager.filter(
            Q.create([(f"{name}__istartswith", term) for name in _user_search_fields()], connector=Q.OR)
        )
        if vendor == "sqlite":
            title = prefix_q("title_lower", _ascii_lower(term), vendor)
        else:
            title = Q(title_lower__startswith=term.lower())
        chat_id = prefix_q("client_id", term, vendor) | prefix_q("pk", term, vendor)
        match = chat_id | Q(session_key=term) | title | Q(owner__in=users.values("pk"))
        if request.GET.get(MessageTextSearch.parameter_name) == "1":
            match |= Q(Exists(Message.objects.filter(conversation=OuterRef("pk"), parts__icontains=term)))
        return queryset.alias(title_lower=Lower("title")).filter(match), False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        info = (self.opts.app_label, self.opts.model_name)
        extra = [
            path(
                "<path:object_id>/files/<uuid:file_id>/",
                self.admin_site.admin_view(self.file_view),
                name="{}_{}_file".format(*info),
            )
        ]
        return extra + super().get_urls()

    def file_view(self, request: HttpRequest, object_id: str, file_id: Any) -> HttpResponseBase:
        """A file of the conversation, for staff who may view it: always a
        download (a file a user sent is never shown as a page of the admin)."""
        conversation = self.get_object(request, object_id)
        if conversation is None or not self.has_view_permission(request, conversation):
            raise Http404
        stored = StoredFile.objects.filter(conversation=conversation, pk=file_id).first()
        if stored is None:
            raise Http404
        try:
            handle = stored.file.storage.open(stored.file.name or "", "rb")
        except FileNotFoundError:
            raise Http404 from None
        # A type that does not parse (a row from before types were checked)
        # would break the header: such a file is bytes, like any download.
        media_type = served_media_type(stored.media_type)
        response = FileResponse(
            handle,
            as_attachment=True,
            filename=stored.name or str(stored.pk),
            content_type=str(media_type) if media_type else OCTET_STREAM,
        )
        response["X-Content-Type-Options"] = "nosniff"
        return response

    @admin.display(description=_("title"), ordering="title")
    def display_title(self, conversation: Conversation) -> str:
        return conversation.title or f"({conversation.ui_id})"

    @admin.display(description=_("owner"), ordering="owner")
    def owner_display(self, conversation: Conversation) -> SafeString:
        """The owner: a user linked to their admin page, a visitor by the
        fingerprint of the session (never its key)."""
        return owner_html(conversation, self.admin_site.name)

    @admin.display(description=_("messages"), ordering="_message_count")
    def message_count(self, conversation: Conversation) -> int:
        return int(getattr(conversation, "_message_count", 0))

    @admin.display(description=_("last activity"), ordering="updated_at")
    def last_activity(self, conversation: Conversation) -> Any:
        return conversation.updated_at

    @admin.display(description=_("metadata"))
    def metadata_display(self, conversation: Conversation) -> SafeString:
        return format_html('<pre class="uistream-json">{}</pre>', pretty_json(conversation.metadata))

    @admin.display(description=_("history summary"))
    def history_summary_display(self, conversation: Conversation) -> SafeString | str:
        """The summary the model is sent instead of the older turns (``SummarizeOlder``)."""
        summary = conversation.history_summary
        if not isinstance(summary, dict):
            return "–"
        return format_html(
            '<pre class="uistream-json">{}</pre><p class="help">{}</p>',
            summary.get("text", ""),
            _("covers %(n)s messages, through %(id)s; written by %(model)s at %(at)s")
            % {
                "n": summary.get("covers"),
                "id": summary.get("through"),
                "model": summary.get("model"),
                "at": summary.get("created_at"),
            },
        )


class RunChangeList(ChangeList):
    """The run list, which loads none of a run's records (``RUN_RECORDS``):
    fifty runs a page, each row then costs what its columns show."""

    def get_queryset(self, request: HttpRequest, exclude_parameters: Any = None) -> QuerySet[Any]:
        return super().get_queryset(request, exclude_parameters).defer(*RUN_RECORDS)


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = (
        "short_id",
        "conversation_link",
        "owner_display",
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
    list_select_related = ("conversation", "conversation__owner")
    list_filter = (
        RunFeedbackFilter,
        RunOutcomeFilter,
        "status",
        "model",
        RunOwnerFilter,
        "started_at",
        "finish_reason",
        "sdk_version",
    )
    search_fields = ("=conversation__client_id", "=conversation__id", "conversation__title", "model", "error_code")
    search_help_text = _("Chat id, conversation title, model, or error code.")
    date_hierarchy = "started_at"
    ordering = ("-started_at",)
    list_per_page = 50
    #: The changelist links the usage report.
    change_list_template = "admin/uistream_app/run/change_list.html"
    actions = ("export_dataset",)

    class Media:
        css: ClassVar[dict[str, tuple[str, ...]]] = {"all": (CSS,)}

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return RunChangeList

    @admin.action(description=_("Export the selected runs as a JSONL dataset"), permissions=["view"])
    def export_dataset(self, request: HttpRequest, queryset: QuerySet[Run]) -> StreamingHttpResponse:
        """A download of the selected runs (all those the filters leave, with
        "select all"), a line each, as ``manage.py uistream_export`` writes
        them: streamed, a chunk of runs per query (``inspect.dataset``)."""
        body = adataset_lines(queryset) if isinstance(request, ASGIRequest) else dataset_lines(queryset)
        response = StreamingHttpResponse(body, content_type="application/jsonl; charset=utf-8")
        name = f"uistream-runs-{timezone.now().strftime('%Y%m%d-%H%M%S')}.jsonl"
        response["Content-Disposition"] = content_disposition_header(True, name) or "attachment"
        response["X-Content-Type-Options"] = "nosniff"
        return response

    def get_urls(self) -> list[URLPattern]:
        info = (self.opts.app_label, self.opts.model_name)
        extra = [
            path("usage/", self.admin_site.admin_view(self.usage_view), name="{}_{}_usage".format(*info)),
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

    def usage_view(self, request: HttpRequest) -> HttpResponse:
        """Usage and cost per owner and period (``usage/``)."""
        return admin_views.usage_report_view(self, request)

    def download_view(self, request: HttpRequest, object_id: str, name: str) -> HttpResponseBase:
        return admin_views.RunInspector(self).download(request, object_id, name)

    @admin.display(description=_("run"), ordering="started_at")
    def short_id(self, run: Run) -> str:
        return str(run.pk)[:8]

    @admin.display(description=_("conversation"), ordering="conversation__title")
    def conversation_link(self, run: Run) -> SafeString:
        url = reverse("admin:uistream_app_conversation_change", args=[run.conversation_id])
        return format_html('<a href="{}">{}</a>', url, str(run.conversation))

    @admin.display(description=_("owner"), ordering="conversation__owner")
    def owner_display(self, run: Run) -> SafeString:
        """The conversation's owner, as the conversation list shows it."""
        return owner_html(run.conversation, self.admin_site.name)

    @admin.display(description=_("status"), ordering="status")
    def status_badge(self, run: Run) -> SafeString:
        return format_html('<span class="uistream-status uistream-status-{}">{}</span>', run.status, run.status)

    @admin.display(description=_("first chunk"), ordering="first_chunk_at")
    def first_chunk(self, run: Run) -> str:
        return format_ms(_ms(run.time_to_first_chunk))

    @admin.display(description=_("duration"), ordering="finished_at")
    def duration_display(self, run: Run) -> str:
        return format_ms(_ms(run.duration))
