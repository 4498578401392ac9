"""The WebSocket handshake's Origin check, by the rule of Django's CSRF
check: ``CSRFOriginValidator(app)`` is what a project wraps its
``websocket`` routes in (``uistream_app.asgi`` exports it; the demo's
``asgi.py`` uses it).

A WebSocket gets no CSRF protection: a page of any site may open one to
this server, and the browser sends this site's cookies with it. Only the
``Origin`` header tells the handshake where the page came from, so it must
name this site exactly: scheme, host and port. Channels'
``AllowedHostsOriginValidator`` compares the host alone, so a page served
from ``http://127.0.0.1:9999`` (another program on the machine) or over
plain ``http`` of an ``https`` site opens a socket with the visitor's
cookie. The rule here is ``CsrfViewMiddleware``'s, for the same reason:

1. The request's own origin is trusted: ``http`` for ``ws``, ``https``
   for ``wss`` (``SECURE_PROXY_SSL_HEADER`` honoured, as
   ``request.is_secure()`` does), with the host and port of the ``Host``
   header, which must be one of ``ALLOWED_HOSTS`` (``USE_X_FORWARDED_HOST``
   honoured, as ``request.get_host()`` does).
2. So is each origin of ``CSRF_TRUSTED_ORIGINS``, exactly; one with a
   wildcard (``https://*.example.com``) trusts that scheme on
   ``example.com`` and its subdomains.
3. Anything else, no ``Origin`` and ``null`` included, is refused before
   the handshake completes: the client sees a 403 (a browser, a close
   with 1006).

HTTP and lifespan scopes pass through untouched.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings as django_settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest
from django.utils.http import is_same_domain

__all__ = ["CSRFOriginValidator", "origin_allowed", "request_origin"]

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def request_origin(scope: Scope) -> str | None:
    """The origin the WebSocket handshake ``scope`` was made to, as Django
    reads an HTTP request's (rule 1); None when its host is not one of
    ``ALLOWED_HOSTS`` or it names none."""
    secure = scope.get("scheme") == "wss"
    # Django's own reading of the host and the scheme, proxies' headers
    # included, on the handshake seen as the GET request it is.
    http_scope = {**scope, "type": "http", "method": "GET", "scheme": "https" if secure else "http"}
    request = ASGIRequest(http_scope, io.BytesIO())
    try:
        host = request.get_host()
    except (DisallowedHost, KeyError):  # KeyError: no Host header and no server in the scope
        return None
    return f"{'https' if request.is_secure() else 'http'}://{host}"


def origin_allowed(origin: str, scope: Scope) -> bool:
    """Whether a handshake from ``origin`` to ``scope`` may go on (rules 1
    and 2)."""
    if origin == request_origin(scope):
        return True
    trusted: list[str] = list(getattr(django_settings, "CSRF_TRUSTED_ORIGINS", ()))
    if origin in trusted:
        return True
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    for pattern in trusted:
        if "*" not in pattern:
            continue
        allowed = urlsplit(pattern)
        if allowed.scheme == parts.scheme and is_same_domain(parts.netloc, allowed.netloc.lstrip("*")):
            return True
    return False


class CSRFOriginValidator:
    """ASGI middleware: WebSocket handshakes whose ``Origin`` passes
    ``origin_allowed`` reach ``app``; the others are refused (403). See
    the module docstring for the rule."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        origin = _header(scope, b"origin")
        if origin is not None and origin_allowed(origin, scope):
            await self.app(scope, receive, send)
            return
        logger.info("refused a WebSocket handshake to %s from origin %r", scope.get("path", ""), (origin or "")[:200])
        message = await receive()
        if message["type"] == "websocket.connect":
            # A close before the accept: the server answers the handshake 403.
            await send({"type": "websocket.close"})
