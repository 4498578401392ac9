"""Spans for the tracing tests: an in-memory exporter behind a switch in
this process, and, for servers and workers in other processes, a file of
JSON lines they append to (``UISTREAM_TEST_SPAN_FILE``, read by
tests/server_settings.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult


class Switch(Sampler):
    """Records while ``on``: the provider this process installs once stays
    silent for the other tests of the session."""

    on = False

    def should_sample(
        self, parent_context: Any, trace_id: int, name: str, kind: Any = None, attributes: Any = None, *args: Any
    ) -> SamplingResult:
        if not self.on:
            return SamplingResult(Decision.DROP)
        return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)

    def get_description(self) -> str:
        return "uistream-test-switch"


SWITCH = Switch()
EXPORTER = InMemorySpanExporter()
_installed = False


def install_in_memory() -> TracerProvider:
    """The process's tracer provider, exporting to ``EXPORTER`` (set once)."""
    global _installed
    if not _installed:
        provider = TracerProvider(sampler=SWITCH)
        provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
        trace.set_tracer_provider(provider)
        _installed = True
    current = trace.get_tracer_provider()
    assert isinstance(current, TracerProvider), "another tracer provider was installed first"
    return current


class FileSpanExporter(SpanExporter):
    """Appends each span as one JSON line (one write: the pool processes
    of a worker share the file)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = "".join(json.dumps(span_record(span)) + "\n" for span in spans)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, lines.encode())
        finally:
            os.close(fd)
        return SpanExportResult.SUCCESS


def install_file_exporter(path: str) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
    trace.set_tracer_provider(provider)


def span_record(span: ReadableSpan) -> dict[str, Any]:
    """What the tests read of a span, the same for both exporters."""
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": format(context.trace_id, "032x"),
        "span_id": format(context.span_id, "016x"),
        "parent_id": format(span.parent.span_id, "016x") if span.parent is not None else None,
        "attributes": {key: list(v) if isinstance(v, tuple) else v for key, v in (span.attributes or {}).items()},
        "status": span.status.status_code.name,
        "events": [event.name for event in span.events],
    }


def read_span_file(path: str | Path) -> list[dict[str, Any]]:
    file = Path(path)
    if not file.exists():
        return []
    return [json.loads(line) for line in file.read_text().splitlines() if line.strip()]
