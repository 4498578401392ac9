"""WebSocket routes of the app: ``ws/chat/``, ai@7's
``WebSocketChatTransport`` served by ``ChatConsumer``.

Put them behind Channels' auth and Origin check, as the demo's ``asgi.py``
does::

    from channels.auth import AuthMiddlewareStack
    from channels.routing import ProtocolTypeRouter, URLRouter
    from uistream_app.asgi import CSRFOriginValidator

    application = ProtocolTypeRouter({
        "http": get_asgi_application(),
        "websocket": CSRFOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    })

``CSRFOriginValidator`` compares the whole origin (scheme, host, port) as
Django's CSRF check does; Channels' ``AllowedHostsOriginValidator``
compares the host alone, so a page on another port or scheme of the same
host would open a socket with the visitor's cookie.

A project that subclasses ``ChatConsumer`` routes its own class instead.
"""

from __future__ import annotations

from django.urls import path

from .transport.chat_consumer import ChatConsumer

__all__ = ["websocket_urlpatterns"]

websocket_urlpatterns = [
    path("ws/chat/", ChatConsumer.as_asgi(), name="uistream-chat-ws"),
]
