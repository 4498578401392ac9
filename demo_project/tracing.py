"""The demo's OpenTelemetry set-up: with ``OTEL_EXPORTER_OTLP_ENDPOINT``
set (a collector, e.g. ``http://127.0.0.1:4318``), every process of the
demo (the web server, a Celery worker) sends its spans there over OTLP
HTTP/protobuf, as service ``uistream-demo`` (``OTEL_SERVICE_NAME`` wins);
unset, nothing is configured and tracing costs next to nothing.

The exporter reads the standard variables itself (endpoint, headers,
timeout). The runs' spans are ``uistream_app.runs.telemetry``'s
(docs/operations.md, "Tracing"); a project adds the Django or ASGI
instrumentation for the request spans they nest under.
"""

from __future__ import annotations

import os
from typing import Any

SERVICE_NAME = "uistream-demo"


def configure_tracing() -> Any:
    """Install a tracer provider exporting over OTLP/HTTP when
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set; returns it (None when unset)."""
    if not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return None
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise ImportError(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set: the demo needs opentelemetry-sdk and "
            f"opentelemetry-exporter-otlp-proto-http (pip install -r requirements.txt) ({exc})"
        ) from exc
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or SERVICE_NAME})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider
