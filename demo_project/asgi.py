"""ASGI entry point of the demo (daphne / uvicorn): Django for HTTP, the
chat consumer for WebSockets at ``/ws/chat/``.

WebSockets get no CSRF protection, so the Origin check stands in for it:
``AllowedHostsOriginValidator`` refuses a handshake whose ``Origin`` is not
one of ``ALLOWED_HOSTS`` (or has none). ``AuthMiddlewareStack`` gives the
consumer the session and user of the handshake's cookies.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo_project.settings")

# Set up Django (apps, settings) before anything imports models.
django_application = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from uistream_app.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_application,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
