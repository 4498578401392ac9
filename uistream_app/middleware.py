"""Django's seven default middleware, run on the event loop under ASGI.

Django runs a ``MiddlewareMixin`` middleware's ``process_request`` and
``process_response`` (and ``process_view``) under ASGI through
``sync_to_async``: a hop to a thread per method per request, about
0.1–0.15 ms of CPU each (asgiref's context copy and two thread wake-ups),
thirteen for the default seven, whether or not the method does anything
that blocks. Most of the time none does: they read and write headers and
cookies. Each class here is Django's own, subclassed, with the same
methods; under ASGI it calls them directly on the event loop, and hops to a
thread only for the work that may touch the database or read a form body:

- ``SessionMiddleware``: the response's session save (a session that was
  modified, or ``SESSION_SAVE_EVERY_REQUEST``);
- ``CsrfViewMiddleware``: with ``CSRF_USE_SESSIONS`` all of it; otherwise
  the check of an unsafe request to a view that is not ``csrf_exempt``
  (it may parse ``request.POST`` and render the failure view);
- ``MessageMiddleware``: storing messages that were read or added (the
  session storage loads the session);
- ``SecurityMiddleware``, ``CommonMiddleware``, ``XFrameOptionsMiddleware``,
  ``AuthenticationMiddleware``: never (``request.user`` stays lazy: it is
  loaded where it is first read, as with Django's own).

Under WSGI, or in a sync middleware chain, they are Django's classes
unchanged. Use them in place of Django's paths in ``MIDDLEWARE``
(docs/operations.md, "Threads"); each may be swapped on its own.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import middleware as auth
from django.contrib.messages import middleware as messages
from django.contrib.sessions import middleware as sessions
from django.http import HttpRequest, HttpResponseBase
from django.middleware import clickjacking, common, csrf, security

__all__ = [
    "AuthenticationMiddleware",
    "CommonMiddleware",
    "CsrfViewMiddleware",
    "MessageMiddleware",
    "OnTheLoop",
    "SecurityMiddleware",
    "SessionMiddleware",
    "XFrameOptionsMiddleware",
]

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


class OnTheLoop:
    """The ``__acall__`` of ``MiddlewareMixin``, calling ``process_request``
    and ``process_response`` in place unless ``request_blocks`` or
    ``response_blocks`` says the call may block."""

    get_response: Any

    def request_blocks(self, request: HttpRequest) -> bool:
        return False

    def response_blocks(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        return False

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        response = None
        process_request = getattr(self, "process_request", None)
        if process_request is not None:
            if self.request_blocks(request):
                response = await sync_to_async(process_request, thread_sensitive=True)(request)
            else:
                response = process_request(request)
        response = response or await self.get_response(request)
        process_response = getattr(self, "process_response", None)
        if process_response is not None:
            if self.response_blocks(request, response):
                response = await sync_to_async(process_response, thread_sensitive=True)(request, response)
            else:
                response = process_response(request, response)
        answer: HttpResponseBase = response
        return answer


class SecurityMiddleware(OnTheLoop, security.SecurityMiddleware):
    pass


class CommonMiddleware(OnTheLoop, common.CommonMiddleware):
    pass


class XFrameOptionsMiddleware(OnTheLoop, clickjacking.XFrameOptionsMiddleware):
    pass


class AuthenticationMiddleware(OnTheLoop, auth.AuthenticationMiddleware):
    pass


class SessionMiddleware(OnTheLoop, sessions.SessionMiddleware):
    def response_blocks(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        session = getattr(request, "session", None)
        if session is None:
            return False
        # Django's process_response reads these three, and saves (the
        # database, the cache, a file) only when the session was modified or
        # every request saves; is_empty reads no store.
        return bool(session.modified or settings.SESSION_SAVE_EVERY_REQUEST) and not session.is_empty()


class MessageMiddleware(OnTheLoop, messages.MessageMiddleware):
    def response_blocks(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        storage = getattr(request, "_messages", None)
        # BaseStorage.update stores only messages that were read or added.
        return storage is not None and bool(getattr(storage, "used", True) or getattr(storage, "added_new", True))


class CsrfViewMiddleware(OnTheLoop, csrf.CsrfViewMiddleware):
    def __init__(self, get_response: Any) -> None:
        super().__init__(get_response)
        if self.async_mode:
            # A coroutine function: Django's handler awaits it rather than
            # wrapping it in sync_to_async (BaseHandler.adapt_method_mode).
            self.process_view = self._aprocess_view  # type: ignore[method-assign, assignment]

    def request_blocks(self, request: HttpRequest) -> bool:
        return bool(settings.CSRF_USE_SESSIONS)

    def response_blocks(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        return bool(settings.CSRF_USE_SESSIONS)

    async def _aprocess_view(
        self, request: HttpRequest, callback: Any, callback_args: Any, callback_kwargs: Any
    ) -> HttpResponseBase | None:
        check = super().process_view
        skipped = getattr(request, "csrf_processing_done", False) or getattr(callback, "csrf_exempt", False)
        if settings.CSRF_USE_SESSIONS or (not skipped and request.method not in _SAFE_METHODS):
            return await sync_to_async(check, thread_sensitive=True)(request, callback, callback_args, callback_kwargs)
        return check(request, callback, callback_args, callback_kwargs)
