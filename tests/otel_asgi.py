"""The demo's ASGI application behind the OpenTelemetry ASGI
instrumentation (``opentelemetry-instrumentation-asgi``): every request
gets a server span, the parent of the run it starts (tests/test_tracing.py)."""

from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

from demo_project.asgi import application as demo_application

application = OpenTelemetryMiddleware(demo_application)
