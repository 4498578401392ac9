"""ASGI entry point of the demo (daphne / uvicorn): Django for HTTP, the
chat consumer for WebSockets at ``/ws/chat/``.

``limit_request_bodies`` answers a request body over
``UISTREAM["MAX_REQUEST_BYTES"]`` with a 413 as soon as it passes the
limit (docs/operations.md, "Body limits"). ``bounded_threads`` runs the
requests' sync work (sessions, the ORM) on ``UISTREAM["SYNC_THREADS"]``
shared threads, not a thread per open stream (docs/operations.md,
"Threads").

WebSockets get no CSRF protection, so the Origin check stands in for it:
``CSRFOriginValidator`` refuses a handshake whose ``Origin`` is not the
server's own (scheme, host of ``ALLOWED_HOSTS`` and port) nor one of
``CSRF_TRUSTED_ORIGINS``, or that has none. ``AuthMiddlewareStack`` gives the
consumer the session and user of the handshake's cookies.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo_project.settings")

# Set up Django (apps, settings) before anything imports models.
django_application = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from uistream_app.asgi import CSRFOriginValidator, bounded_threads, limit_request_bodies  # noqa: E402
from uistream_app.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": bounded_threads(limit_request_bodies(django_application)),
        "websocket": CSRFOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)

if os.environ.get("UISTREAM_GC_FREEZE", "1") == "1":
    # The objects made at start-up (Django, the apps, the URLconf and what
    # it imports) live as long as the process: move them out of the garbage
    # collector's sight, so that a full collection under load walks only
    # what requests made. bench/http_bench.py (UISTREAM_BENCH_GC_DEBUG=1)
    # shows the longest pause with 200 open streams.
    import gc

    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 - imports the views now, not on the first request
    gc.collect()
    gc.freeze()

# A collection every 700 new container objects (Python's default) is, with
# 500 open streams, a full collection of 125-170 ms four or five times a
# run, each stalling every stream at once; at 10,000 none came in a run, and
# the collector's share of the CPU fell from 11-13% to 1-2%
# (bench/ws_bench.py --gc-stats; docs/operations.md, "gc.freeze()").
# UISTREAM_GC_THRESHOLD=0 leaves Python's.
_gc_threshold = int(os.environ.get("UISTREAM_GC_THRESHOLD", "10000"))
if _gc_threshold > 0:
    import gc

    gc.set_threshold(_gc_threshold, *gc.get_threshold()[1:])
