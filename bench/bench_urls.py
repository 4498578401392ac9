"""URLs of the HTTP benchmark server: the demo's, plus the bench's own.

* ``POST bench/chat``: ``WorkloadChatView``, the real ``ChatView`` with a
  ``ScriptedModel`` that replays ``bench/workload.json`` step by
  step with no delay and the workload's two tools answering with the
  recorded results (``loop_plugin``'s model and tools). Everything else is
  the app's: session, CSRF, ``ConversationStore.prepare``, ``ToolLoop``, encoder,
  ``RunRecorder`` (SQLite), broker, ``render_subscription``.
* ``POST bench/baseline``: a bare ``StreamingHttpResponse`` with the same
  headers, yielding the same SSE frames one frame per yield. The frames are
  made once, at import, by the project's own ``UIMessageEncoder`` and ai@7
  ``UIStreamRenderer`` from the same workload, under a message id as long as
  the ones ``ChatView`` makes, so both bodies have the same size.
* Diagnostics (``http_bench.py --diagnose``), to show what the log costs.
  ``POST bench/chat-nolog``: the workload view whose ``RunRecorder`` stores
  no chunk rows; it still reads every chunk, flushes at the same points
  (one thread hop, one transaction, the ``UPDATE`` of the run) and stores
  the message and the run at the end. ``POST bench/demo-nodb``: the demo's
  ``ChatView`` whose recorder makes no database call once the run row
  exists. To get there, ``uistream_app.lifecycle.runner.RunRecorder`` is replaced by a
  subclass that behaves exactly as the original unless the request came
  through one of these two views.
* ``GET bench/ping``: the runner's readiness probe.
* ``GET bench/queries``: the SQL statements every database connection of
  this process ran, by kind and table (counted by an ``execute_wrapper``
  installed on each new connection), and the latest ``Run``;
  ``?reset=1`` zeroes the counts after reading them.

Import it with ``bench/`` on ``sys.path`` (``bench_settings`` does).
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import orjson
from bench_common import WORKLOAD_PATH
from django.db import connections
from django.db.backends.signals import connection_created
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt
from loop_plugin import model_steps, recorded_tools
from uistream_plugin import source_events

from uistream_app.lifecycle import runner as runner_module
from uistream_app.lifecycle.store import ConversationStore, new_message_id
from uistream_app.lifecycle.turns import TurnSetup
from uistream_app.models import Run
from uistream_app.protocol.sse import DONE_FRAME
from uistream_app.protocol.ui.encoder import UIMessageEncoder
from uistream_app.protocol.ui.render import UIStreamRenderer
from uistream_app.recording import RunRecorder
from uistream_app.runs import ScriptedModel
from uistream_app.views import SSE_HEADERS, ChatView

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD: dict[str, Any] = orjson.loads(WORKLOAD_PATH.read_bytes())
STEPS = model_steps(WORKLOAD)
TOOLS = recorded_tools(WORKLOAD)


# -- the workload through the whole view ---------------------------------------------


def workload_model() -> ScriptedModel:
    """A fresh model per request (``ChatView.get_model`` calls it): the
    workload's steps, replayed with no delay."""
    model = ScriptedModel(name="workload")
    for step in STEPS:
        model.enqueue_events(step)
    return model


class WorkloadChatView(ChatView):
    model = workload_model
    tools = TOOLS
    max_steps = len(STEPS)


# -- diagnostics: the same views, writing less ------------------------------------------

#: "" (the app as it is), "no-chunk-rows" or "no-db"; set by the view, read
#: by the recorder (the run task copies the request's context).
_recorder_mode: ContextVar[str] = ContextVar("recorder_mode", default="")


class DiagnosticRecorder(RunRecorder):
    """``RunRecorder`` itself unless the request came through a diagnostic
    view: ``no-chunk-rows`` stores no chunk rows (the writer still makes
    its rounds, and ``finish`` stores the message and the run); ``no-db``
    makes no database call at all after the run row was created (the chunks
    are only read; the run stays ``running``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.mode = _recorder_mode.get()

    def _take(self, final: Any) -> Any:
        job = super()._take(final)
        if self.mode == "no-chunk-rows":  # counted as stored, never written
            job.first_seq += len(job.chunks)
            job.chunks, job.offsets = [], []
        return job

    def add(self, chunks: Any) -> None:
        if self.mode != "no-db":
            return super().add(chunks)
        for chunk in chunks:  # the reader's work stays
            self._read(chunk)
        return None

    async def flush(self) -> None:
        if self.mode != "no-db":
            return await super().flush()

    async def finish(self, status: str, **kwargs: Any) -> None:
        if self.mode != "no-db":
            return await super().finish(status, **kwargs)
        self._finished = True


runner_module.RunRecorder = DiagnosticRecorder  # type: ignore[misc]


class DiagnosticMixin:
    recorder_mode = ""

    async def handle(self, request: HttpRequest) -> Any:
        token = _recorder_mode.set(self.recorder_mode)
        try:
            return await super().handle(request)  # type: ignore[misc]
        finally:
            _recorder_mode.reset(token)


class NoLogChatView(DiagnosticMixin, WorkloadChatView):
    recorder_mode = "no-chunk-rows"


class DemoNoDBChatView(DiagnosticMixin, ChatView):
    recorder_mode = "no-db"


class _NoLeaseCheckStore(ConversationStore):
    async def settle_orphans(self, chat_id: str) -> None:
        return None


class NoLeaseCheckChatView(WorkloadChatView):
    """The workload view without the new turn's orphan check (the renewer
    thread is the process's: it runs for both)."""

    def get_store(self, setup: TurnSetup, *, with_thread: bool = False) -> ConversationStore:
        store = super().get_store(setup, with_thread=with_thread)
        return _NoLeaseCheckStore(
            client_tools=store.client_tools, choose_history=store.choose_history, with_thread=with_thread
        )


# -- the bare baseline -----------------------------------------------------------------


def baseline_frames() -> list[bytes]:
    encoder = UIMessageEncoder(new_message_id())  # as long as ChatView's ids
    render = UIStreamRenderer(7).render
    frames = [render(chunk) for event in source_events(WORKLOAD) for chunk in encoder.feed(event)]
    frames.append(DONE_FRAME)
    return frames


FRAMES = baseline_frames()


@csrf_exempt
async def baseline_view(request: HttpRequest) -> StreamingHttpResponse:
    async def body() -> AsyncIterator[bytes]:
        for frame in FRAMES:
            yield frame

    response = StreamingHttpResponse(body(), content_type="text/event-stream")
    for name, value in SSE_HEADERS.items():
        response[name] = value
    return response


# -- counting SQL statements -------------------------------------------------------------

_counts: Counter[str] = Counter()
_lock = threading.Lock()
_TABLE = re.compile(r'^\s*(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+"?([\w]+)"?', re.I)


def _count(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
    match = _TABLE.match(sql)
    key = f"{match.group(1).split()[0].upper()} {match.group(2)}" if match else sql.split(None, 1)[0].upper()
    with _lock:
        _counts[key] += 1
    return execute(sql, params, many, context)


def _install(sender: Any, connection: Any, **kwargs: Any) -> None:
    if _count not in connection.execute_wrappers:
        connection.execute_wrappers.append(_count)


connection_created.connect(_install)
for _connection in connections.all(initialized_only=True):
    _install(None, _connection)


def queries_view(request: HttpRequest) -> JsonResponse:
    with _lock:
        counts = dict(_counts)
        if request.GET.get("reset"):
            _counts.clear()
    run = Run.objects.order_by("-started_at").values("status", "chunk_count", "model").first()
    statuses = dict(Run.objects.values_list("status").annotate(n=Count("pk")).order_by())
    return JsonResponse({"counts": counts, "last_run": run, "runs": statuses, "frames": len(FRAMES)})


def ping_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse(b"ok")


urlpatterns = [
    path("bench/chat", WorkloadChatView.as_view(), name="bench-chat"),
    path("bench/chat-nolog", NoLogChatView.as_view(), name="bench-chat-nolog"),
    path("bench/demo-nodb", DemoNoDBChatView.as_view(), name="bench-demo-nodb"),
    path("bench/chat-nolease", NoLeaseCheckChatView.as_view(), name="bench-chat-nolease"),
    path("bench/baseline", baseline_view, name="bench-baseline"),
    path("bench/queries", queries_view, name="bench-queries"),
    path("bench/ping", ping_view, name="bench-ping"),
    path("", include("demo_project.urls")),
]
