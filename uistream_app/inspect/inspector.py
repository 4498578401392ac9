"""The transcript inspector: a run's page in the admin.

What it shows, and what each part costs:

* the summary (status, finish reason, model, timing, usage, the owner,
  the AG-UI shared state the run left, ``Run.state``, as escaped JSON;
  the error detail, which staff alone ever see: the API and the wire
  never carry it);
* what the run was given and sent, as stored when it started (``Run.setup``:
  the model, the transport, the system prompt, the tools offered with
  their schemas, an agent's own; ``Run.history``: the messages), read
  from the run's row, so an old run shows what it was given, not today's
  settings;
* the verdict, the timeline and the message the log builds, from one pass
  over the log (``inspect.analysis.analyze_run``: ``iter_log`` pages of
  1,000 rows, nothing kept but counters);
* beside the message, its feedback (the rating, reason and comment) and
  its other attempts: the versions of the answer and, where the question
  was edited, of the question, each linking its run's page
  (``inspect.attempts``: a handful of queries);
* the chunk table, one page (``PER_PAGE`` rows by ``seq``: the log's
  unique index serves it, however deep the page);
* the wire of that page in every registered dialect, and downloads of the
  whole wire per dialect plus the log as JSON lines, streamed a page at a
  time (an async iterator under ASGI, so nothing is gathered first).

So a 20,000-chunk run opens in about 25 queries and the memory of one page.
A run whose log retention pruned (``uistream_prune``: a run that ended with
chunks and has none stored) says so, and shows its stored message instead
of the one its log would build.
Everything shown is escaped by the templates: a model answer holding
``<script>`` or ``</textarea>`` appears as text, and so do a system prompt
and a tool's description (a project may build them from what users wrote).
"""

from __future__ import annotations

import datetime
import math
from typing import TYPE_CHECKING, Any, Final

import orjson
from django.core.exceptions import PermissionDenied
from django.core.handlers.asgi import ASGIRequest
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.http import content_disposition_header
from django.utils.translation import gettext as _

from ..conf import settings as uistream_settings
from ..lifecycle.spend import PERIODS, cost_of, period_bounds, usage_report
from ..models import Feedback, Run
from ..protocol.redact import redact
from ..recording import read_log
from .analysis import analyze_run
from .attempts import attempts_of
from .formats import DIALECTS, astream_transcript, download_name, get_format, stream_transcript, transcript_formats
from .owner_views import owner_html
from .part_views import part_views, pretty_json
from .timeline import format_ms, render_svg

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

__all__ = ["PER_PAGE", "RunInspector"]

#: Chunk table rows per page.
PER_PAGE: Final = 200
#: Characters of a chunk's payload shown in its table cell.
PAYLOAD_PREVIEW: Final = 240


def _ms(delta: Any) -> int | None:
    return None if delta is None else int(delta.total_seconds() * 1000)


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def _payload(chunk: Any) -> tuple[str, str | None]:
    """A chunk's fields but ``type``: compact for the cell, and pretty when
    the compact form is cut."""
    fields = {k: v for k, v in chunk.items() if k != "type"} if isinstance(chunk, dict) else chunk
    try:
        compact = orjson.dumps(fields).decode()
    except TypeError:
        compact = repr(fields)
    if len(compact) <= PAYLOAD_PREVIEW:
        return compact, None
    return compact[:PAYLOAD_PREVIEW] + "…", pretty_json(fields)


class RunInspector:
    """The inspector's views, bound to the ``RunAdmin`` that serves them
    (its permissions and admin site)."""

    template_name = "admin/uistream_app/run/inspector.html"
    per_page = PER_PAGE

    def __init__(self, model_admin: ModelAdmin[Run]) -> None:
        self.model_admin = model_admin

    def get_run(self, request: HttpRequest, object_id: str) -> Run:
        """The run, with its conversation, owner and message in one query;
        404 when missing, 403 without the view permission."""
        queryset = (
            self.model_admin.get_queryset(request)
            .select_related("conversation", "conversation__owner", "message")
            .filter(pk=self._pk(object_id))
        )
        run = queryset.first()
        if run is None:
            raise Http404(_("No run with that id."))
        if not self.model_admin.has_view_or_change_permission(request, run):
            raise PermissionDenied
        return run

    @staticmethod
    def _pk(object_id: str) -> Any:
        try:
            return Run._meta.get_field("id").to_python(object_id)
        except Exception:  # noqa: BLE001 - any malformed id is simply not found
            raise Http404(_("No run with that id.")) from None

    # -- the page --------------------------------------------------------------------

    def view(self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        run = self.get_run(request, object_id)
        report = analyze_run(run)
        pages = max(math.ceil(report.rows / self.per_page), 1)
        if "seq" in request.GET:
            page = _int(request.GET.get("seq"), 0) // self.per_page + 1
        else:
            page = _int(request.GET.get("page"), 1)
        page = min(max(page, 1), pages)
        first = (page - 1) * self.per_page
        entries = read_log(run, first, first + self.per_page)
        rows = []
        previous = None
        for seq, offset_ms, chunk in entries:
            compact, full = _payload(chunk)
            rows.append(
                {
                    "seq": seq,
                    "offset_ms": offset_ms,
                    "gap_ms": None if previous is None else offset_ms - previous,
                    "type": chunk.get("type") if isinstance(chunk, dict) else "?",
                    "payload": compact,
                    "full": full,
                }
            )
            previous = offset_ms
        chunks = [chunk for _seq, _offset, chunk in entries]
        last_page = page == pages
        wires = []
        for name, dialect in DIALECTS.items():
            renderer = dialect.factory(run)
            body = renderer.render_many(chunks) + (renderer.done() if last_page else b"")
            wires.append(
                {
                    "name": name,
                    "label": dialect.label,
                    "text": body.decode("utf-8", "replace"),
                    "download": self.download_url(run, name),
                    "filename": download_name(run, name),
                }
            )
        downloads = [
            {"label": f.label, "url": self.download_url(run, f.name), "filename": download_name(run, f.name)}
            for f in transcript_formats()
        ]
        message = report.message
        log_pruned = self.log_pruned(run, report.rows)
        if log_pruned:
            message = run.message.as_ui_message() if run.message is not None else {"parts": []}
        stored_differs = not log_pruned and any(c.name == "message" and not c.ok for c in report.verdict.checks)
        feedback = Feedback.objects.filter(message_id=run.message_id).first() if run.message_id else None
        opts = self.model_admin.opts
        context = {
            **self.model_admin.admin_site.each_context(request),
            "opts": opts,
            "app_label": opts.app_label,
            "title": _("Run %(id)s") % {"id": str(run.pk)[:8]},
            "subtitle": str(run.conversation),
            "run": run,
            "has_delete_permission": self.model_admin.has_delete_permission(request, run),
            "conversation_url": reverse("admin:uistream_app_conversation_change", args=[run.conversation_id]),
            "delete_url": reverse("admin:uistream_app_run_delete", args=[run.pk]),
            "summary": self.summary(run, report.continues),
            "usage": pretty_json(run.usage) if run.usage else None,
            "decisions": pretty_json(run.decisions) if run.decisions else None,
            # AG-UI's shared state as the run left it ({} is a state too).
            "state": pretty_json(run.state) if run.state is not None else None,
            "cost": _cost(run),
            "owner": owner_html(run.conversation, self.model_admin.admin_site.name),
            "setup": setup_view(run.setup),
            "history": run.history or None,
            "history_json": pretty_json(run.history) if run.history else None,
            "sent": run.history.get("sent") if isinstance(run.history, dict) else None,
            "report": report,
            "log_pruned": log_pruned,
            "feedback": feedback,
            "attempts": attempts_of(run.message, self.model_admin.admin_site.name),
            "verdict": report.verdict,
            "types": report.types.most_common(),
            "timeline_svg": render_svg(report.timeline),
            "message_id": message.get("id", run.message_id or ""),
            "message_parts": part_views(message.get("parts", [])),
            "message_metadata": pretty_json(message["metadata"]) if message.get("metadata") is not None else None,
            "stored_parts": part_views(run.message.parts) if stored_differs and run.message is not None else None,
            "rows": rows,
            "page": page,
            "pages": pages,
            "page_links": self.page_links(page, pages),
            "first_seq": first,
            "wires": wires,
            "downloads": downloads,
            "show_error_detail": bool(request.user.is_staff and run.error_detail),
            # Redacted again: a row stored before details were redacted.
            "error_detail": redact(run.error_detail),
            **(extra_context or {}),
        }
        request.current_app = self.model_admin.admin_site.name
        return TemplateResponse(request, self.template_name, context)

    @staticmethod
    def log_pruned(run: Run, rows: int) -> bool:
        """Whether retention deleted the run's log: it ended having sent
        chunks (``chunk_count``) and none is stored."""
        return rows == 0 and run.chunk_count > 0 and run.status != Run.Status.RUNNING

    @staticmethod
    def summary(run: Run, continues: int = 0) -> list[tuple[str, str]]:
        rows = [
            (_("status"), run.status),
            (_("finish reason"), run.finish_reason or "–"),
            (_("model"), run.model or "–"),
            (_("AI SDK dialect served"), f"ai@{run.sdk_version}"),
            (_("trigger"), run.trigger or "–"),
            (_("started"), run.started_at.isoformat(timespec="milliseconds")),
            (_("time to first chunk"), format_ms(_ms(run.time_to_first_chunk))),
            (_("duration"), format_ms(_ms(run.duration))),
            (_("chunks"), str(run.chunk_count)),
            (_("error code"), run.error_code or "–"),
            (_("message"), run.message_id or "–"),
            (_("trace"), run.trace_id or "–"),
        ]
        if continues:
            rows.append((_("continues"), _("the message of %(n)d earlier run(s)") % {"n": continues}))
        return rows

    @staticmethod
    def page_links(page: int, pages: int) -> list[int | None]:
        """Page numbers to link: the ends and a window around ``page``
        (``None`` marks a gap)."""
        wanted = sorted({1, 2, pages - 1, pages, *range(page - 2, page + 3)} & set(range(1, pages + 1)))
        out: list[int | None] = []
        last = 0
        for number in wanted:
            if last and number - last > 1:
                out.append(None)
            out.append(number)
            last = number
        return out

    def download_url(self, run: Run, name: str) -> str:
        return reverse("admin:uistream_app_run_download", args=[run.pk, name])

    # -- downloads ---------------------------------------------------------------------

    def download(self, request: HttpRequest, object_id: str, name: str) -> HttpResponseBase:
        run = self.get_run(request, object_id)
        found = get_format(name)
        if found is None:
            raise Http404(_("No such transcript format."))
        body = astream_transcript(run, name) if isinstance(request, ASGIRequest) else stream_transcript(run, name)
        response = StreamingHttpResponse(body, content_type=f"{found.content_type}; charset=utf-8")
        disposition = content_disposition_header(True, download_name(run, name))
        if disposition is not None:
            response["Content-Disposition"] = disposition
        response["X-Content-Type-Options"] = "nosniff"
        return response


def _tool_views(tools: Any) -> list[dict[str, Any]]:
    """Stored tool records with their input schema as pretty JSON."""
    if not isinstance(tools, list):
        return []
    views = []
    for tool in tools:
        if isinstance(tool, dict):
            schema = tool.get("parameters")
            views.append({**tool, "schema": pretty_json(schema) if schema is not None else None})
    return views


def setup_view(setup: Any) -> dict[str, Any] | None:
    """``Run.setup`` for the template: the tools' schemas as pretty JSON,
    an agent's too. None for a run that has none (one stored before it
    was recorded, or started by a runner that does not record it)."""
    if not isinstance(setup, dict):
        return None
    view = {**setup, "tools": _tool_views(setup.get("tools"))}
    agent = setup.get("agent")
    if isinstance(agent, dict):
        view["agent"] = {**agent, "tools": _tool_views(agent.get("tools"))}
    return view


def _cost(run: Run) -> str | None:
    """The run's cost by ``UISTREAM["PRICES"]`` (None: no price for its model)."""
    if not run.usage or run.model not in uistream_settings.PRICES:
        return None
    return f"{cost_of(run.model, int(run.usage.get('input_tokens', 0)), int(run.usage.get('output_tokens', 0))):.6f}"


def usage_report_view(model_admin: ModelAdmin[Run], request: HttpRequest) -> HttpResponse:
    """The admin's usage report: every owner's runs, tokens and cost in one
    period (``?period=day|month&date=YYYY-MM-DD``, default this month),
    with the previous and next periods a click away."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    period = request.GET.get("period", "month")
    if period not in PERIODS:
        period = "month"
    try:
        day = datetime.date.fromisoformat(request.GET.get("date", ""))
        at = timezone.make_aware(datetime.datetime.combine(day, datetime.time(12)))
    except ValueError:
        at = timezone.now()
    start, end = period_bounds(period, at)
    previous = period_bounds(period, start - datetime.timedelta(seconds=1))[0]
    rows = usage_report(start, end)
    opts = model_admin.opts
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": opts,
        "app_label": opts.app_label,
        "title": _("Usage and cost"),
        "subtitle": f"{period} {start.date().isoformat()}",
        "period": period,
        "periods": PERIODS,
        "start": start,
        "end": end,
        "previous_date": previous.date().isoformat(),
        "next_date": end.date().isoformat(),
        "date": start.date().isoformat(),
        "rows": rows,
        "total_tokens": sum(r["spend"].tokens for r in rows),
        "total_cost": f"{sum(r['spend'].cost for r in rows):.6f}",
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, "admin/uistream_app/run/usage.html", context)
