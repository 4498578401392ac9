"""The ASGI wrappers a project puts around its application (its
``asgi.py``; the demo's does)::

    from uistream_app.asgi import CSRFOriginValidator, bounded_threads, limit_request_bodies

    application = ProtocolTypeRouter({
        "http": bounded_threads(limit_request_bodies(get_asgi_application())),
        "websocket": CSRFOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    })

``bounded_threads`` (``lifecycle/threads.py``) runs every HTTP request's
sync work on the lanes the runs share (docs/operations.md, "Threads");
``limit_request_bodies`` (``transport/body_limits.py``) refuses a body over
``MAX_REQUEST_BYTES`` as soon as it passes it (docs/operations.md, "Body
limits"); ``CSRFOriginValidator`` (``transport/origin_check.py``) lets a
WebSocket handshake through only from the site's own origin (scheme, host
and port) or one of ``CSRF_TRUSTED_ORIGINS``, as Django's CSRF check
compares origins (docs/operations.md, "The WebSocket's Origin check").
"""

from __future__ import annotations

from .lifecycle.threads import bounded_threads
from .transport.body_limits import limit_request_bodies
from .transport.origin_check import CSRFOriginValidator

__all__ = [
    "CSRFOriginValidator",
    "bounded_threads",
    "limit_request_bodies",
]
