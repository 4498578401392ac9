"""The admin: the conversation list and chat, the run list, and the
transcript inspector (every part kind, escaping, downloads, paging, the
verdict, query counts, and a 20,000-chunk run within a memory bound).

``make_full_run`` and ``store_run`` are shared with the API, command and
browser tests.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import tracemalloc
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pytest
from django.db import connection
from django.test import AsyncClient, Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from uistream_app.inspect.analysis import analyze_run
from uistream_app.inspect.formats import DIALECTS, register_dialect, stream_transcript
from uistream_app.inspect.timeline import render_svg
from uistream_app.models import ChunkBatch, Conversation, Message, Run
from uistream_app.protocol import events as ev
from uistream_app.protocol.sse import DONE, parse_sse
from uistream_app.protocol.ui.chunks import Chunk
from uistream_app.protocol.ui.encoder import UIMessageEncoder
from uistream_app.protocol.ui.reader import UIMessageReader, UIMessageStreamError
from uistream_app.protocol.ui.render import UIStreamRenderer
from uistream_app.protocol.ui.stream import encode_events
from uistream_app.recording import read_log, write_log

pytestmark = pytest.mark.django_db

# -- building stored runs --------------------------------------------------------------

XSS_TEXT = "Here </textarea><script>alert('xss')</script> done"
XSS_MARKERS = ("<script>alert", "</textarea><script", "<img src=x onerror", "<b>bold tool</b>")

EVERY_PART: list[ev.Event] = [
    ev.ReasoningDelta("The user wants the weather. <script>alert('reasoning')</script>"),
    ev.TextDelta(XSS_TEXT),
    ev.ToolCallStart("call_1", "get_weather"),
    ev.ToolCallDelta("call_1", '{"city":'),
    ev.ToolCallDelta("call_1", ' "Paris"}'),
    ev.ToolCall("call_1", "get_weather", '{"city": "Paris"}'),
    ev.ToolCall("call_2", "calculate", '{"expression": 1+}'),
    ev.ToolCallStart("call_3", "<b>bold tool</b>", dynamic=True),
    ev.ToolCall("call_3", "<b>bold tool</b>", '{"q": "</textarea>"}', dynamic=True),
    ev.Finish("tool-calls"),
    ev.ToolResult("call_1", '{"temperature": 18, "sky": "clear"}'),
    ev.ToolResult("call_3", "boom <img src=x onerror=alert(2)>", is_error=True),
    ev.StepFinished(0),
    ev.TextDelta("It is 18 °C in Paris."),
    ev.SourceUrl("src-1", "https://example.com/weather", title="Weather <i>service</i>"),
    ev.SourceUrl("src-2", "javascript:alert(3)", title="a javascript: link"),
    ev.SourceDocument("doc-1", "application/pdf", "Design notes", filename="design.pdf"),
    ev.File("data:image/png;base64,iVBORw0KGgo=", "image/png"),
    ev.Data("weather", {"city": "Paris", "note": "<script>alert(4)</script>"}, id="w-1"),
    ev.MessageMetadata({"model": "demo"}),
    ev.ToolCallStart("call_4", "send_email"),
    ev.ToolCall("call_4", "send_email", '{"to": "ada@example.com", "body": "Hi"}'),
    ev.ToolApprovalRequest("approval-1", "call_4"),
    ev.Finish("stop"),
    ev.StepFinished(1),
    ev.Done(),
]


def encode(events: Iterable[ev.Event], message_id: str) -> list[Chunk]:
    return list(encode_events(iter(events), UIMessageEncoder(message_id)))


def store_run(
    chunks: Sequence[Chunk],
    *,
    owner: Any = None,
    session_key: str = "",
    chat_id: str = "chat-1",
    message_id: str = "msg-1",
    title: str = "Weather in Paris",
    status: str = "completed",
    offsets: Sequence[int] | None = None,
    user_text: str = "What is the weather in Paris?",
    model: str = "demo",
    error_detail: str = "",
    error_code: str = "",
) -> Run:
    """A conversation (made if missing) with a user message and the
    assistant message ``chunks`` build, the run that built it, and its log,
    stored as ``RunRecorder`` stores them."""
    conversation, _ = Conversation.objects.get_or_create(
        pk=chat_id, defaults={"owner": owner, "session_key": session_key, "title": title}
    )
    position = conversation.messages.count()
    Message.objects.create(
        id=f"{message_id}-user",
        conversation=conversation,
        role="user",
        parts=[{"type": "text", "text": user_text}],
        position=position,
    )
    reader = UIMessageReader()
    for chunk in chunks:
        try:
            reader.feed(chunk)
        except UIMessageStreamError:
            break  # the recorder keeps the message as built up to a refused chunk
    built = reader.message
    message = Message.objects.create(
        id=message_id,
        conversation=conversation,
        role="assistant",
        parts=built["parts"],
        metadata=built.get("metadata"),
        position=position + 1,
    )
    started = timezone.now() - dt.timedelta(seconds=30)
    if offsets is None:
        offsets = [120 + 15 * i for i in range(len(chunks))]
    last = offsets[-1] if offsets else 0
    finish_reason = next((c.get("finishReason", "") for c in chunks if c.get("type") == "finish"), "")
    run = Run.objects.create(
        conversation=conversation,
        message=message,
        status=status,
        finish_reason=finish_reason or "",
        model=model,
        started_at=started,
        first_chunk_at=started + dt.timedelta(milliseconds=offsets[0]) if chunks else None,
        finished_at=None if status == "running" else started + dt.timedelta(milliseconds=last + 5),
        chunk_count=len(chunks),
        usage={"input_tokens": 12, "output_tokens": 30},
        error_detail=error_detail,
        error_code=error_code,
    )
    write_log(run, chunks, offsets)
    return run


def make_full_run(**kwargs: Any) -> Run:
    """A completed run with every part kind (and markup everywhere)."""
    chunks = encode(EVERY_PART, kwargs.get("message_id", "msg-1"))
    offsets = []
    at = 350
    for chunk in chunks:
        if chunk["type"] == "tool-output-available":
            at += 1800  # a slow tool
        offsets.append(at)
        at += 20
    return store_run(chunks, offsets=offsets, **kwargs)


@pytest.fixture
def staff(django_user_model: Any) -> Any:
    return django_user_model.objects.create_superuser("root", "root@example.com", "pw")


@pytest.fixture
def admin_client(staff: Any) -> Client:
    client = Client()
    client.force_login(staff)
    return client


def inspector_url(run: Run) -> str:
    return reverse("admin:uistream_app_run_change", args=[run.pk])


def download_url(run: Run, name: str) -> str:
    return reverse("admin:uistream_app_run_download", args=[run.pk, name])


def body(response: Any) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode()
    return str(response.content.decode())


def assert_no_raw_markup(html: str) -> None:
    for marker in XSS_MARKERS:
        assert marker not in html, marker


# -- the inspector -------------------------------------------------------------------------


def test_the_inspector_shows_every_part_kind(admin_client: Client) -> None:
    run = make_full_run()
    response = admin_client.get(inspector_url(run))
    assert response.status_code == 200
    html = body(response)
    # The message as the user saw it.
    assert '<details class="uistream-reasoning">' in html  # reasoning folded
    assert "The user wants the weather." in html
    assert "It is 18 °C in Paris." in html
    assert 'class="uistream-tool uistream-tool-output-available"' in html  # get_weather: input and output
    assert "&quot;temperature&quot;: 18" in html
    assert 'class="uistream-tool uistream-tool-output-error"' in html  # calculate's bad input, the failed tool
    assert "Invalid JSON in arguments of calculate" in html
    assert "boom &lt;img src=x onerror=alert(2)&gt;" in html
    assert 'class="uistream-tool uistream-tool-approval-requested"' in html  # send_email
    assert "approval-1" in html
    assert '<a href="https://example.com/weather"' in html
    assert "Weather &lt;i&gt;service&lt;/i&gt;" in html
    assert 'href="javascript:' not in html  # a javascript: source stays text
    assert "Design notes" in html
    assert "application/pdf" in html
    assert '<img class="uistream-image" src="data:image/png;base64,iVBORw0KGgo="' in html
    assert "data-weather" in html
    assert "&quot;model&quot;: &quot;demo&quot;" in html  # metadata
    # Summary, verdict, timeline, chunks, wire.
    assert "uistream-status-completed" in html
    assert "Verdict" in html
    assert '<span class="uistream-ok">ok</span>' in html
    assert '<svg class="uistream-timeline"' in html
    assert 'class="tool-wait"' in html
    assert "get_weather" in html
    assert 'id="seq-0"' in html
    for name, dialect in DIALECTS.items():
        assert dialect.label in html
        assert download_url(run, name) in html
    assert download_url(run, "jsonl") in html
    assert_no_raw_markup(html)


def test_the_verdict_is_ok_for_an_encoded_run() -> None:
    run = make_full_run()
    report = analyze_run(run)
    assert report.verdict.ok, report.verdict.lines()
    assert report.rows == run.chunk_count
    assert report.message["parts"] == run.message.parts  # type: ignore[union-attr]
    assert {c.name for c in report.verdict.checks} == {
        "schema",
        "reader",
        "framing",
        "bookkeeping",
        "ending",
        "message",
    }


def test_the_verdict_names_what_is_wrong(admin_client: Client) -> None:
    chunks = [
        {"type": "start", "messageId": "msg-1"},
        {"type": "text-delta", "id": "text-0", "delta": "no start"},
        {"type": "finish", "finishReason": "sideways"},
    ]
    run = store_run(chunks, status="failed")
    Message.objects.filter(pk="msg-1").update(parts=[{"type": "text", "text": "something else"}])
    report = analyze_run(Run.objects.select_related("message").get(pk=run.pk))
    failed = {c.name: c for c in report.verdict.failed}
    assert set(failed) == {"schema", "reader", "framing", "ending", "message"}
    assert "unknown finishReason 'sideways'" in failed["schema"].problems[0]
    assert failed["reader"].problems[0].startswith("#1: ")
    assert any("outside a step" in p for p in failed["framing"].problems)
    assert "status failed but the log ends with finish" in failed["ending"].problems[0]
    html = body(admin_client.get(inspector_url(run)))
    assert "5 checks failed" in html
    assert "The stored message (it differs)" in html


def test_error_detail_is_shown_to_staff(admin_client: Client) -> None:
    run = make_full_run(status="failed", error_code="ProviderError", error_detail="upstream said <secret>")
    kept = [entry for entry in read_log(run) if entry.chunk["type"] != "finish"]
    ChunkBatch.objects.filter(run=run).delete()
    write_log(run, [entry.chunk for entry in kept], [entry.offset_ms for entry in kept])
    html = body(admin_client.get(inspector_url(run)))
    assert "Error detail" in html
    assert "upstream said &lt;secret&gt;" in html


def test_the_run_page_shows_the_shared_state_the_run_left_escaped(admin_client: Client) -> None:
    run = make_full_run()
    assert "shared state" not in body(admin_client.get(inspector_url(run)))  # a run without one
    Run.objects.filter(pk=run.pk).update(state={"todo": ["<script>alert(1)</script>"], "step": 2})
    html = body(admin_client.get(inspector_url(run)))
    assert "shared state" in html
    shown = html.split('id="shared-state">', 1)[1].split("</pre>", 1)[0]
    assert "&quot;todo&quot;" in shown
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in shown
    assert "&quot;step&quot;: 2" in shown
    assert "<script>alert(1)" not in html
    Run.objects.filter(pk=run.pk).update(state={})
    assert '<pre class="uistream-json" id="shared-state">{}</pre>' in body(admin_client.get(inspector_url(run)))


def test_the_inspector_needs_the_view_permission(django_user_model: Any) -> None:
    run = make_full_run()
    clerk = django_user_model.objects.create_user("clerk", password="pw", is_staff=True)
    client = Client()
    client.force_login(clerk)
    assert client.get(inspector_url(run)).status_code == 403
    assert client.get(download_url(run, "ai7")).status_code == 403
    anonymous = Client().get(inspector_url(run))
    assert anonymous.status_code == 302
    assert "/login/" in anonymous["Location"]


def test_an_unknown_run_or_format_is_a_404(admin_client: Client) -> None:
    run = make_full_run()
    assert admin_client.get(reverse("admin:uistream_app_run_change", args=["not-a-uuid"])).status_code == 404
    missing = "00000000-0000-4000-8000-000000000000"
    assert admin_client.get(reverse("admin:uistream_app_run_change", args=[missing])).status_code == 404
    assert admin_client.get(download_url(run, "nope")).status_code == 404


@pytest.mark.parametrize("version", [7, 6, 5])
def test_downloads_are_the_exact_wire(admin_client: Client, version: int) -> None:
    run = make_full_run()
    chunks = [entry.chunk for entry in read_log(run)]
    renderer = UIStreamRenderer(version)
    expected = renderer.render_many(chunks) + renderer.done()
    response = admin_client.get(download_url(run, f"ai{version}"))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="run-{run.pk}.ai{version}.sse"'
    assert b"".join(response.streaming_content) == expected  # type: ignore[attr-defined]


def test_the_log_downloads_as_json_lines(admin_client: Client) -> None:
    run = make_full_run()
    response = admin_client.get(download_url(run, "jsonl"))
    lines = [json.loads(line) for line in body(response).splitlines()]
    assert [line["seq"] for line in lines] == list(range(run.chunk_count))
    assert lines[0]["chunk"] == {"type": "start", "messageId": "msg-1"}
    assert all(isinstance(line["offsetMs"], int) for line in lines)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_downloads_stream_asynchronously_under_asgi(staff: Any) -> None:
    run = await sync(make_full_run)()
    client = AsyncClient()
    await client.aforce_login(staff)
    response = await client.get(download_url(run, "ai7"))
    assert response.status_code == 200
    parts = [part async for part in response.streaming_content]  # type: ignore[attr-defined]
    events = parse_sse(b"".join(parts))
    assert events[-1].data == DONE
    assert len(events) == run.chunk_count + 1


def sync(func: Any) -> Any:
    from asgiref.sync import sync_to_async

    return sync_to_async(func)


def test_a_registered_dialect_joins_the_inspector_and_the_downloads(admin_client: Client) -> None:
    class Upper:
        def render_many(self, chunks: Sequence[Chunk]) -> bytes:
            return b"".join(f"{c['type'].upper()}\n".encode() for c in chunks)

        def done(self) -> bytes:
            return b"END\n"

    register_dialect("shout", lambda run: Upper(), "txt", "text/plain", label="SHOUTING")
    try:
        run = make_full_run()
        html = body(admin_client.get(inspector_url(run)))
        assert "SHOUTING" in html
        assert download_url(run, "shout") in html
        download = body(admin_client.get(download_url(run, "shout")))
        assert download.startswith("START\nSTART-STEP\n")
        assert download.endswith("FINISH\nEND\n")
    finally:
        del DIALECTS["shout"]


def test_the_chunk_table_pages_by_seq(admin_client: Client) -> None:
    chunks = encode([*(ev.TextDelta(f"{n} ") for n in range(450)), ev.Done()], "msg-1")
    run = store_run(chunks)
    html = body(admin_client.get(inspector_url(run)))
    assert 'id="seq-0"' in html
    assert 'id="seq-199"' in html
    assert 'id="seq-200"' not in html
    html = body(admin_client.get(inspector_url(run) + "?page=3"))
    assert 'id="seq-400"' in html
    assert f'id="seq-{len(chunks) - 1}"' in html
    assert 'id="seq-399"' not in html
    assert "data: [DONE]" in html  # the last page's wire ends the stream
    html = body(admin_client.get(inspector_url(run) + "?seq=250"))
    assert 'id="seq-250"' in html
    assert 'id="seq-200"' in html
    html = body(admin_client.get(inspector_url(run) + "?page=99"))
    assert 'id="seq-400"' in html  # clamped to the last page
    html = body(admin_client.get(inspector_url(run) + "?page=x"))
    assert 'id="seq-0"' in html


def test_a_running_run_and_an_empty_log_open(admin_client: Client) -> None:
    chunks = encode([ev.TextDelta("still going")], "msg-1")[:-3]  # no end yet
    run = store_run(chunks, status="running")
    report = analyze_run(run)
    assert report.verdict.ok, report.verdict.lines()
    assert admin_client.get(inspector_url(run)).status_code == 200
    empty = store_run([], chat_id="chat-2", message_id="msg-2", status="cancelled")
    html = body(admin_client.get(inspector_url(empty)))
    assert "The log is empty." in html


def test_the_timeline_shows_first_chunk_steps_and_tool_waits() -> None:
    run = make_full_run()
    timeline = analyze_run(run).timeline
    assert timeline.first_chunk_ms == 350
    assert [s.label for s in timeline.steps] == ["step 1", "step 2"]
    waits = {w.tool_name: w for w in timeline.tool_waits}
    assert waits["get_weather"].outcome == "output"
    assert waits["get_weather"].end_ms - waits["get_weather"].start_ms >= 1800  # type: ignore[operator]
    assert waits["<b>bold tool</b>"].outcome == "error"
    assert waits["send_email"].outcome == "approval"
    assert waits["send_email"].end_ms is None
    assert timeline.end is not None
    assert timeline.end[0] == "finish"
    svg = str(render_svg(timeline))
    assert "&lt;b&gt;bold tool&lt;/b&gt;" in svg
    assert "<b>bold tool</b>" not in svg
    assert "first chunk +350 ms" in svg


# -- the lists and the conversation page -----------------------------------------------------


def test_the_conversation_list_and_search(admin_client: Client, staff: Any) -> None:
    make_full_run(owner=staff, title="<script>alert('title')</script>")
    store_run(
        encode([ev.TextDelta("Bonjour"), ev.Done()], "msg-2"),
        chat_id="chat-2",
        message_id="msg-2",
        session_key="s" * 32,
        title="French",
        user_text="Say hello in French, please",
    )
    url = reverse("admin:uistream_app_conversation_changelist")
    html = body(admin_client.get(url))
    assert "&lt;script&gt;alert(&#x27;title&#x27;)&lt;/script&gt;" in html
    assert "<script>alert('title')" not in html
    assert "root" in html
    # A visitor by a fingerprint of the session key, never the key (nor a part of it).
    fingerprint = hashlib.sha256(("s" * 32).encode()).hexdigest()[:12]
    assert f"anonymous visitor {fingerprint}" in html
    assert "ssssssss" not in html
    # The words of a message only when asked for: it reads every message.
    assert "/chat-2/" not in body(admin_client.get(url, {"q": "in French"}))
    found = body(admin_client.get(url, {"q": "in French", "search_messages": "1"}))
    assert "/chat-2/" in found
    assert "/chat-1/" not in found
    found = body(admin_client.get(url, {"q": "chat-1"}))
    assert "/chat-1/" in found
    assert "/chat-2/" not in found
    found = body(admin_client.get(url, {"owner": "anonymous"}))
    assert "/chat-2/" in found
    assert "/chat-1/" not in found


def test_the_conversation_page_renders_the_chat(admin_client: Client) -> None:
    run = make_full_run()
    html = body(admin_client.get(reverse("admin:uistream_app_conversation_change", args=["chat-1"])))
    assert 'class="uistream-chat"' in html
    assert 'class="uistream-message uistream-role-user"' in html
    assert "What is the weather in Paris?" in html
    assert '<details class="uistream-reasoning">' in html
    assert 'class="uistream-tool uistream-tool-output-available"' in html
    assert inspector_url(run) in html  # the message links to its run
    assert '"parts"' not in html  # rendered, not raw JSON
    assert_no_raw_markup(html)


def test_the_run_list_and_its_filters(admin_client: Client) -> None:
    make_full_run()
    store_run(
        encode([ev.TextDelta("x"), ev.Done()], "msg-2"),
        chat_id="chat-2",
        message_id="msg-2",
        status="failed",
        model="gpt-test",
        error_code="Boom",
    )
    url = reverse("admin:uistream_app_run_changelist")
    html = body(admin_client.get(url))
    assert "uistream-status-completed" in html
    assert "uistream-status-failed" in html
    assert "Boom" in html
    assert "350 ms" in html
    failed = body(admin_client.get(url, {"status__exact": "failed"}))
    assert "uistream-status-failed" in failed
    assert "uistream-status-completed" not in failed
    by_model = body(admin_client.get(url, {"model": "gpt-test"}))
    assert "Boom" in by_model
    assert "uistream-status-completed" not in by_model


# -- query counts ---------------------------------------------------------------------------


def count_queries(client: Client, url: str) -> int:
    """The queries of one GET of ``url``, after a first one: the first
    request a process serves fills its caches (content types), and which
    test a process runs first depends on how the suite is split."""
    assert client.get(url).status_code == 200
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
        assert response.status_code == 200
        body(response)
    return len(queries)


def test_conversation_list_queries_do_not_grow(admin_client: Client, staff: Any) -> None:
    url = reverse("admin:uistream_app_conversation_changelist")
    make_full_run(owner=staff)
    one = count_queries(admin_client, url)
    for n in range(2, 31):
        store_run(encode([ev.TextDelta("hi"), ev.Done()], f"m{n}"), chat_id=f"chat-{n}", message_id=f"m{n}")
    assert Conversation.objects.count() == 30
    assert count_queries(admin_client, url) == one


def test_run_list_queries_do_not_grow(admin_client: Client) -> None:
    url = reverse("admin:uistream_app_run_changelist")
    make_full_run()
    one = count_queries(admin_client, url)
    for n in range(2, 31):
        store_run(encode([ev.TextDelta("hi"), ev.Done()], f"m{n}"), chat_id=f"chat-{n}", message_id=f"m{n}")
    assert count_queries(admin_client, url) == one


def test_conversation_page_queries_do_not_grow_with_messages(admin_client: Client) -> None:
    url = reverse("admin:uistream_app_conversation_change", args=["chat-1"])
    make_full_run()
    one = count_queries(admin_client, url)
    for n in range(2, 16):
        store_run(encode([ev.TextDelta(f"answer {n}"), ev.Done()], f"m{n}"), message_id=f"m{n}")
    assert Message.objects.filter(conversation__client_id="chat-1").count() == 30
    assert count_queries(admin_client, url) == one


# -- a long run ---------------------------------------------------------------------------------


def long_run(deltas: int, chat_id: str) -> Run:
    events: list[ev.Event] = [ev.ReasoningDelta("Counting.")]
    events += [ev.TextDelta(f"{n} ") for n in range(deltas)]
    events += [ev.Done()]
    return store_run(encode(events, f"msg-{chat_id}"), chat_id=chat_id, message_id=f"msg-{chat_id}")


def peak_memory(func: Any) -> tuple[int, Any]:
    """Peak traced memory (bytes) while ``func()`` runs, and its result."""
    tracemalloc.start()
    try:
        result = func()
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, result


def open_page(client: Client, run: Run) -> str:
    response = client.get(inspector_url(run))
    assert response.status_code == 200
    html = body(response)
    assert 'id="seq-199"' in html
    return html


def test_a_20000_chunk_run_opens_quickly_in_bounded_memory(admin_client: Client) -> None:
    small = long_run(2_000, "small")
    big = long_run(20_000, "big")
    assert big.chunk_count > 20_000
    open_page(admin_client, small)  # warm caches (templates, imports) before measuring

    small_peak, _ = peak_memory(lambda: open_page(admin_client, small))
    with CaptureQueriesContext(connection) as queries:
        big_peak, _ = peak_memory(lambda: open_page(admin_client, big))
    whole_log_peak, _ = peak_memory(lambda: [entry.chunk for entry in read_log(big)])
    # Ten times the chunks cost about the message's own text more (the page
    # shows it), not ten times the memory; loading the log whole would
    # cost several times what the page does.
    assert big_peak < small_peak + 1024 * 1024, (big_peak, small_peak)
    assert big_peak * 2 < whole_log_peak, (big_peak, whole_log_peak)
    # One query per 1,000 chunks of the log, plus a constant few; each
    # bounded to a window of sequence numbers (or to one row).
    log_reads = [q for q in queries.captured_queries if "uistream_app_chunkbatch" in q["sql"]]
    # the pages, the empty read that ends them, the last offset, the table page
    assert len(log_reads) == -(-big.chunk_count // 1000) + 3
    assert all('"first_seq" < ' in q["sql"] or "LIMIT 1" in q["sql"] for q in log_reads)
    # And the download streams it page by page.
    pieces = list(stream_transcript(big, "ai7"))
    assert len(pieces) == -(-big.chunk_count // 1000) + 1


# -- real runs ---------------------------------------------------------------------------------


@pytest.fixture
def demo_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The demo project behind a real ASGI server (its offline model)."""
    from .server import serve_demo

    yield from serve_demo(monkeypatch, 1)


@pytest.mark.django_db(transaction=True)
def test_real_runs_of_the_demo_get_a_clean_verdict(demo_server: str, staff: Any) -> None:
    """The demo model through the real HTTP path: a tool call, a long
    count, an approval and its continuation (read onto the message it
    continues, as the browser reads it)."""
    from .test_approvals import answer, continue_chat, email_part, idle, pending_email
    from .test_chat_http import Browser, read_chunks, wait_for

    browser = Browser(demo_server)
    for chat_id, text in (("weather", "What is the weather in Paris?"), ("count", "count to 40")):
        with browser.stream(chat_id, text, message_id=f"u-{chat_id}") as response:
            assert response.status_code == 200
            read_chunks(response)
    wait_for(idle, "the runs to be stored")
    part, messages = pending_email(browser, "email")
    response = continue_chat(browser, "email", answer(messages, email_part(part)["approval"]["id"]))
    assert response.status_code == 200
    wait_for(idle, "the continuation to be stored")
    runs = list(Run.objects.select_related("message").order_by("started_at"))
    assert [r.trigger for r in runs][-2:] == ["submit-message", "continue"]
    for run in runs:
        report = analyze_run(run)
        assert report.verdict.ok, (run.trigger, report.verdict.lines())
    continuation = analyze_run(runs[-1])
    assert continuation.continues == 1
    assert email_part(continuation.message)["state"] == "output-available"
    first = analyze_run(runs[-2])
    assert next(c for c in first.verdict.checks if c.name == "message").note == "a later run continued the message"
    client = Client()
    client.force_login(staff)
    html = body(client.get(inspector_url(runs[-1])))
    assert '<span class="uistream-ok">ok</span>' in html
    assert "the message of 1 earlier run(s)" in html
    assert "&quot;approved&quot;: true" in html  # the decision the continuation acted on


# -- a long conversation: its page a page at a time ----------------------------------------------


def add_turns(chat_id: str, turns: int, *, title: str = "A long chat", prefix: str = "") -> list[Run]:
    """``turns`` turns (a user message, an assistant message, the run that
    built it) on conversation ``chat_id``, made if missing; message ids
    ``t000u``/``t000a`` (after ``prefix``) count the turns from the first."""
    conversation, _ = Conversation.objects.get_or_create(pk=chat_id, defaults={"title": title})
    started = timezone.now() - dt.timedelta(days=1)
    messages = []
    for n in range(turns):
        messages.append(
            Message(
                id=f"{prefix}t{n:03d}u",
                conversation=conversation,
                role="user",
                parts=[{"type": "text", "text": f"question #{n:03d}"}],
                position=2 * n,
            )
        )
        messages.append(
            Message(
                id=f"{prefix}t{n:03d}a",
                conversation=conversation,
                role="assistant",
                parts=[{"type": "text", "text": f"answer #{n:03d}"}],
                position=2 * n + 1,
            )
        )
    Message.objects.bulk_create(messages)
    return Run.objects.bulk_create(
        Run(conversation=conversation, message_id=f"{prefix}t{n:03d}a", started_at=started + dt.timedelta(seconds=n))
        for n in range(turns)
    )


def conversation_url(chat_id: str) -> str:
    return reverse("admin:uistream_app_conversation_change", args=[chat_id])


def message_ids(html: str) -> set[str]:
    return {f"t{n:03d}{role}" for n in range(1000) for role in "ua" if f"<code>t{n:03d}{role}</code>" in html}


def test_a_long_conversation_opens_on_its_newest_messages_and_links_to_the_rest(admin_client: Client) -> None:
    add_turns("long", 60)  # 120 messages: pages of 50, 50 and 20
    html = body(admin_client.get(conversation_url("long")))
    assert message_ids(html) == {f"t{n:03d}{r}" for n in range(35, 60) for r in "ua"}
    assert html.index("question #035") < html.index("answer #059")  # a page reads as the chat did
    assert "71–120 of 120" in html
    assert 'href="?messages_page=2#messages-group"' in html
    assert 'href="?messages_page=3#messages-group"' in html

    older = body(admin_client.get(conversation_url("long"), {"messages_page": "2"}))
    assert message_ids(older) == {f"t{n:03d}{r}" for n in range(10, 35) for r in "ua"}
    assert "21–70 of 120" in older
    assert 'href="?messages_page=1#messages-group"' in older  # back to the newest
    oldest = body(admin_client.get(conversation_url("long"), {"messages_page": "3"}))
    assert message_ids(oldest) == {f"t{n:03d}{r}" for n in range(10) for r in "ua"}
    assert "1–20 of 120" in oldest
    # A page past the end is the oldest; a page that is no number, the newest.
    assert message_ids(body(admin_client.get(conversation_url("long"), {"messages_page": "99"}))) == message_ids(oldest)
    assert message_ids(body(admin_client.get(conversation_url("long"), {"messages_page": "x"}))) == message_ids(html)


def test_a_short_conversation_has_no_page_links(admin_client: Client) -> None:
    add_turns("short", 3)
    html = body(admin_client.get(conversation_url("short")))
    assert len(message_ids(html)) == 6
    assert "messages_page=" not in html
    assert "runs_page=" not in html


def test_every_run_of_a_long_conversation_links_to_its_inspector(admin_client: Client) -> None:
    runs = add_turns("long", 60)
    newest = body(admin_client.get(conversation_url("long")))  # runs: pages of 25, 25 and 10

    def runs_on(html: str) -> set[Any]:
        table = html[html.index('id="runs-group"') :]
        return {r.pk for r in runs if inspector_url(r) in table}

    assert runs_on(newest) == {r.pk for r in runs[35:]}
    older = body(admin_client.get(conversation_url("long"), {"runs_page": "2", "messages_page": "2"}))
    assert runs_on(older) == {r.pk for r in runs[10:35]}
    assert message_ids(older) == {f"t{n:03d}{r}" for n in range(10, 35) for r in "ua"}  # its own page
    oldest = body(admin_client.get(conversation_url("long"), {"runs_page": "3"}))
    assert runs_on(oldest) == {r.pk for r in runs[:10]}
    # Each page link keeps the other inline's page.
    assert 'href="?runs_page=1&amp;messages_page=2#runs-group"' in older
    assert 'href="?runs_page=2#runs-group"' in newest


def test_a_message_on_an_older_page_stays_text(admin_client: Client) -> None:
    add_turns("long", 60)
    Message.objects.filter(pk="t000a").update(parts=[{"type": "text", "text": XSS_TEXT}])
    html = body(admin_client.get(conversation_url("long"), {"messages_page": "3"}))
    assert "Here &lt;/textarea&gt;&lt;script&gt;alert(&#x27;xss&#x27;)&lt;/script&gt; done" in html
    assert_no_raw_markup(html)


def test_conversation_page_queries_do_not_grow_with_messages_or_runs(admin_client: Client) -> None:
    add_turns("short", 5, prefix="s")  # 10 messages
    add_turns("long", 100)  # 200 messages, 100 runs
    few = count_queries(admin_client, conversation_url("short"))
    assert count_queries(admin_client, conversation_url("long")) == few
    assert count_queries(admin_client, conversation_url("long") + "?messages_page=3&runs_page=2") == few


# -- searching conversations ---------------------------------------------------------------------


@pytest.fixture
def searchable(django_user_model: Any) -> None:
    ada = django_user_model.objects.create_user("ada", "ada.lovelace@example.com")
    grace = django_user_model.objects.create_user("grace", "grace@example.org")
    Conversation.objects.create(pk="c-weather-1", title="Weather in Paris", owner=ada)
    Conversation.objects.create(pk="c-recipes-2", title="Recipes for soup", owner=grace)
    Conversation.objects.create(pk="c-anon-3", title="Anonymous questions", session_key="k" * 32)
    Message.objects.create(
        id="m-1", conversation_id="c-recipes-2", role="user", parts=[{"type": "text", "text": "weather?"}], position=0
    )


@pytest.mark.usefixtures("searchable")
@pytest.mark.parametrize(
    ("q", "found"),
    [
        ("weather", {"c-weather-1"}),  # title, any case, from its start
        ("RECIPES FOR", {"c-recipes-2"}),
        ("ada", {"c-weather-1"}),  # owner's username
        ("Grace", {"c-recipes-2"}),
        ("ada.lovelace@", {"c-weather-1"}),  # owner's email
        ("c-anon", {"c-anon-3"}),  # chat id, from its start
        ("c-", {"c-weather-1", "c-recipes-2", "c-anon-3"}),
        ("c-recipes-2", {"c-recipes-2"}),
        ("k" * 32, {"c-anon-3"}),  # a whole session key
        ("k" * 8, set()),
        ("Paris", set()),  # a word inside a title is not the start of it
        ("soup", set()),
    ],
)
def test_search_finds_conversations_by_id_title_owner_and_session(
    admin_client: Client, q: str, found: set[str]
) -> None:
    html = body(admin_client.get(reverse("admin:uistream_app_conversation_changelist"), {"q": q}))
    shown = {chat_id for chat_id in ("c-weather-1", "c-recipes-2", "c-anon-3") if f"/{chat_id}/change/" in html}
    assert shown == found


@pytest.mark.usefixtures("searchable")
def test_search_in_messages_is_opt_in(admin_client: Client) -> None:
    url = reverse("admin:uistream_app_conversation_changelist")
    assert "/c-recipes-2/change/" not in body(admin_client.get(url, {"q": "weather?"}))
    html = body(admin_client.get(url, {"q": "weather?", "search_messages": "1"}))
    assert "/c-recipes-2/change/" in html
    assert 'name="search_messages" value="1"' in html  # kept by the search box for the next search


@pytest.mark.skipif(connection.vendor != "sqlite", reason="an SQLite query plan")
@pytest.mark.usefixtures("searchable")
def test_the_search_reads_conversations_through_indexes_only() -> None:
    from django.contrib import admin
    from django.test import RequestFactory

    model_admin = admin.site._registry[Conversation]
    request = RequestFactory().get("/", {"q": "weather"})
    queryset, duplicates = model_admin.get_search_results(request, model_admin.get_queryset(request), "weather")
    plan = queryset.explain()
    assert not duplicates
    assert "MULTI-INDEX OR" in plan
    for index in ("sqlite_autoindex_uistream_app_conversation_1", "uistream_conv_title_lower"):
        assert index in plan
    assert "SCAN uistream_app_conversation" not in plan


@pytest.mark.parametrize("title", ["naïve \ud7ff end", "top \U0010ffff", "100% sure_thing"])
def test_search_by_a_title_prefix_at_the_edges_of_unicode_and_like(admin_client: Client, title: str) -> None:
    Conversation.objects.create(pk="edge", title=title)
    Conversation.objects.create(pk="other", title="100 percent")
    prefix = title.split(" ", 1)[0] + " " + title.split(" ", 1)[1][:1]
    html = body(admin_client.get(reverse("admin:uistream_app_conversation_changelist"), {"q": prefix}))
    assert "/edge/change/" in html
    assert "/other/change/" not in html
