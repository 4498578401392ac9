"""The ASGI application of tests/test_turn_context.py's servers: the demo's
HTTP (``tests.urls`` routes the per-user views) and, beside the demo's
chat socket, ``/ws/per-user/`` for ``PerUserConsumer``, behind the same
Origin check and auth stack."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.server_settings")
django_application = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from tests.context_views import PerUserConsumer  # noqa: E402
from uistream_app.asgi import CSRFOriginValidator, bounded_threads, limit_request_bodies  # noqa: E402
from uistream_app.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": bounded_threads(limit_request_bodies(django_application)),
        "websocket": CSRFOriginValidator(
            AuthMiddlewareStack(URLRouter([path("ws/per-user/", PerUserConsumer.as_asgi()), *websocket_urlpatterns]))
        ),
    }
)
