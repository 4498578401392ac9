"""The HTTP transport: useChat's POST in, a UI message stream out.

``ChatView`` is what a project subclasses. It is configured by class
attributes that default from ``UISTREAM`` and small ``get_*`` hooks, with
one override point per side effect (DRF's generics are the model):

* ``get_model()``, ``get_tools()``, ``get_system_prompt()``,
  ``get_max_steps()``: what the run uses;
* ``get_source(history, ...)``: the event source of the run (a ``ToolLoop``
  by default; return any async iterator of source events);
* ``get_sdk_version()``: which client dialect to render (``?v=``, the
  ``x-uistream-sdk-version`` header, then ``SDK_VERSION``).

The view never encodes anything itself (DESIGN.md §6): the run executes in
its own task (``execute_run``), which encodes, records (``RunRecorder``)
and publishes to the live-run broker; the response is one subscriber that
renders what the broker delivers. Resume (``ChatStreamView``) is another
subscriber, from any process. ``ChatStopView`` ends the run as *stopped*,
which a dropped connection is not (``ON_DISCONNECT``).

Errors in three tiers: a misconfigured view raises ``ImproperlyConfigured``;
a bad request gets a 4xx JSON body naming the problem and writes nothing;
a failure after the headers went out is an in-band, masked ``error`` chunk
whose detail goes to the log and the ``Run`` row.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse, StreamingHttpResponse
from django.middleware.csrf import CsrfViewMiddleware, get_token
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt, ensure_csrf_cookie

from .chat import ChatRunMixin, execute_run, not_found
from .chat_request import BadRequest, parse_chat_request, valid_id
from .conf import SDK_VERSIONS
from .conf import settings as uistream_settings
from .live import Broker, get_broker
from .models import Conversation, Message, Run
from .portal import in_portal, iterate_in_portal
from .protocol.sse import KEEPALIVE_FRAME
from .protocol.ui.render import UIStreamRenderer
from .protocol.ui.replay import replay_message
from .recording import load_log

__all__ = [
    "SSE_HEADERS",
    "ChatStopView",
    "ChatStreamView",
    "ChatView",
    "StoredMessageStreamView",
    "csrf_token_view",
    "execute_run",
]

logger = logging.getLogger("uistream_app.views")

#: The headers the SDK's own server sends (minus hop-by-hop ``connection``).
SSE_HEADERS: dict[str, str] = {
    "Cache-Control": "no-cache",
    "X-Vercel-AI-UI-Message-Stream": "v1",
    "X-Accel-Buffering": "no",
}
SDK_VERSION_HEADER = "x-uistream-sdk-version"


def error_response(exc: BadRequest) -> JsonResponse:
    return JsonResponse(exc.as_dict(), status=exc.status)


# -- ownership -----------------------------------------------------------------


def is_wsgi(request: HttpRequest) -> bool:
    return "wsgi.input" in request.META


class PortalMixin:
    """Under WSGI, run the (async) handler in the portal and stream its
    answer through a plain iterator (see ``uistream_app.portal``)."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        handler = super().dispatch  # type: ignore[misc]
        if not is_wsgi(request):
            return handler(request, *args, **kwargs)

        async def bridged() -> HttpResponseBase:
            response: HttpResponseBase = await in_portal(handler(request, *args, **kwargs))
            if isinstance(response, StreamingHttpResponse) and response.is_async:
                response.streaming_content = iterate_in_portal(response.streaming_content)  # type: ignore[arg-type]
            return response

        return bridged()


class OwnerMixin:
    """Answers in JSON, including a wrong method. Who the request acts for: the user, or with ``ALLOW_ANONYMOUS`` the
    session. Every path (post, resume, stop, stored streams) goes through
    ``get_owned_conversation``."""

    allow_anonymous: bool | None = None

    def http_method_not_allowed(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        allowed = self._allowed_methods()  # type: ignore[attr-defined]
        response = JsonResponse(
            {"error": {"code": "method_not_allowed", "message": f"use {', '.join(allowed)}"}}, status=405
        )
        response["Allow"] = ", ".join(allowed)
        if self.view_is_async:  # type: ignore[attr-defined]

            async def answer() -> HttpResponse:
                return response

            return answer()
        return response

    def get_allow_anonymous(self) -> bool:
        if self.allow_anonymous is not None:
            return self.allow_anonymous
        return bool(uistream_settings.ALLOW_ANONYMOUS)

    async def get_owner(self, request: HttpRequest, *, create_session: bool = False) -> dict[str, Any]:
        """``{"owner": user}`` or ``{"owner": None, "session_key": key}``;
        raises ``BadRequest`` (401) when nobody may act."""
        user = await request.auser()
        if user.is_authenticated:
            return {"owner": user}
        if not self.get_allow_anonymous():
            raise BadRequest("log in to chat", code="not_authenticated", status=401)
        session = request.session
        if session.session_key is None:
            if not create_session:
                return {"owner": None, "session_key": None}
            await session.asave()
        return {"owner": None, "session_key": session.session_key}

    async def get_owned_conversation(self, request: HttpRequest, chat_id: str) -> Conversation:
        if not valid_id(chat_id):
            raise not_found()
        owner = await self.get_owner(request)
        if owner.get("owner") is None and owner.get("session_key") is None:
            raise not_found()
        conversation = await Conversation.objects.filter(pk=chat_id, **owner).afirst()
        if conversation is None:
            raise not_found()
        return conversation


def _no_response(request: HttpRequest) -> HttpResponse:
    return HttpResponse()


def check_csrf(request: HttpRequest) -> BadRequest | None:
    """Django's own CSRF check, answered in JSON (the views are
    ``csrf_exempt`` only so that a failure is a JSON 403, not a page)."""
    failure = CsrfViewMiddleware(_no_response).process_view(request, _no_response, (), {})
    if failure is None:
        return None
    return BadRequest("CSRF verification failed: send the X-CSRFToken header", code="csrf_failed", status=403)


# -- streaming -----------------------------------------------------------------


def resolve_sdk_version(request: HttpRequest, default: int) -> int:
    raw = request.GET.get("v") or request.headers.get(SDK_VERSION_HEADER)
    if raw is None:
        return default
    try:
        version = int(raw)
    except ValueError:
        version = -1
    if version not in SDK_VERSIONS:
        raise BadRequest(
            f"unsupported SDK version {raw!r}; use one of {', '.join(map(str, SDK_VERSIONS))}",
            code="bad_sdk_version",
            field="v",
        )
    return version


async def render_subscription(
    broker: Broker,
    run_id: str,
    renderer: UIStreamRenderer,
    *,
    keepalive_seconds: float,
    on_close: Callable[[bool], Any] | None = None,
) -> AsyncIterator[bytes]:
    """Replay then live chunks of ``run_id`` as SSE bytes, with a keep-alive
    comment after ``keepalive_seconds`` of silence and ``[DONE]`` at the end.
    The chunks the broker hands over together (one source event's, or a
    replay's backlog) go out in one write; nothing waits for more.
    ``on_close(completed)`` runs however the response ends (a disconnect
    closes this generator: ``completed`` is then False)."""
    subscription = broker.subscribe_batches(run_id, keepalive=keepalive_seconds)
    render_many = renderer.render_many
    completed = False
    try:
        async for _seq, chunks in subscription:
            if not chunks:
                yield KEEPALIVE_FRAME
                continue
            frames = render_many(chunks)
            if frames:
                yield frames
        completed = True
        yield renderer.done()
    finally:
        aclose = getattr(subscription, "aclose", None)
        if aclose is not None:
            await aclose()
        if on_close is not None:
            result = on_close(completed)
            if asyncio.iscoroutine(result):
                await result


def check_json_request(request: HttpRequest) -> int:
    """The checks every JSON endpoint makes before it reads a byte of the
    body: its declared size within ``MAX_REQUEST_BYTES`` (413) and a JSON
    content type (415). Returns the size limit, for the parser."""
    max_bytes = int(uistream_settings.MAX_REQUEST_BYTES)
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_bytes:
        raise BadRequest(f"the request body is larger than {max_bytes} bytes", code="too_large", status=413)
    content_type = request.content_type or ""
    if content_type != "application/json":
        raise BadRequest(
            f"send application/json, not {content_type or 'nothing'!r}", code="unsupported_media_type", status=415
        )
    return max_bytes


def sse_response(body: AsyncIterator[bytes]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    for name, value in SSE_HEADERS.items():
        response[name] = value
    return response


# -- the views -------------------------------------------------------------------


@method_decorator(csrf_exempt, name="dispatch")
class ChatView(PortalMixin, OwnerMixin, ChatRunMixin, View):
    """useChat's endpoint: POST in, UI message stream out.

    Subclass it and set ``model`` / ``tools`` / ``system_prompt`` (or
    override the ``get_*`` hooks); the defaults come from ``UISTREAM``.
    """

    http_method_names: ClassVar[list[str]] = ["post", "options"]  # type: ignore[misc]

    def get_sdk_version(self) -> int:
        return resolve_sdk_version(self.request, int(self.sdk_version or uistream_settings.SDK_VERSION))

    # -- the request ------------------------------------------------------------

    async def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        try:
            return await self.handle(request)
        except BadRequest as exc:
            return error_response(exc)

    async def handle(self, request: HttpRequest) -> HttpResponseBase:
        max_bytes = check_json_request(request)
        await self.get_owner(request)  # 401 before anything else is looked at
        csrf_failure = await sync_to_async(check_csrf)(request)
        if csrf_failure is not None:
            raise csrf_failure
        chat = parse_chat_request(request.body, max_bytes=max_bytes)
        version = self.get_sdk_version()
        model = self.get_model()
        self.check_request(chat)
        owner = await self.get_owner(request)
        if owner.get("owner") is None and owner.get("session_key") is None:
            if chat.trigger == "regenerate-message" or chat.message_id is not None or chat.is_continuation:
                raise not_found("message")  # a new visitor has nothing to regenerate or edit
            # Only a valid request may create the anonymous visitor's session.
            owner = await self.get_owner(request, create_session=True)
        started = await self.start_run(chat, owner, version, model)
        task = started.task
        policy = uistream_settings.ON_DISCONNECT

        def on_close(completed: bool) -> None:
            if not completed and policy == "cancel" and not task.done():
                task.cancel()

        body = render_subscription(
            get_broker(),
            str(started.run.pk),
            UIStreamRenderer(version),
            keepalive_seconds=float(uistream_settings.KEEPALIVE_SECONDS),
            on_close=on_close,
        )
        return sse_response(body)


class ChatStreamView(PortalMixin, OwnerMixin, View):
    """GET ``chat/<chat_id>/stream``: useChat's resume. 204 when no run is
    active; else the whole run replayed from its first chunk, then live."""

    http_method_names: ClassVar[list[str]] = ["get", "options"]  # type: ignore[misc]
    sdk_version: int | None = None

    async def get(self, request: HttpRequest, chat_id: str) -> HttpResponseBase:
        try:
            conversation = await self.get_owned_conversation(request, chat_id)
            version = resolve_sdk_version(request, int(self.sdk_version or uistream_settings.SDK_VERSION))
        except BadRequest as exc:
            return error_response(exc)
        broker = get_broker()
        run_id = await broker.active_run(conversation.pk)
        if run_id is None:
            return HttpResponse(status=204)
        body = render_subscription(
            broker,
            run_id,
            UIStreamRenderer(version),
            keepalive_seconds=float(uistream_settings.KEEPALIVE_SECONDS),
        )
        return sse_response(body)


@method_decorator(csrf_exempt, name="dispatch")
class ChatStopView(PortalMixin, OwnerMixin, View):
    """POST ``chat/<chat_id>/stop``: end the active run as *stopped*."""

    http_method_names: ClassVar[list[str]] = ["post", "options"]  # type: ignore[misc]

    async def post(self, request: HttpRequest, chat_id: str) -> HttpResponse:
        try:
            conversation = await self.get_owned_conversation(request, chat_id)
            failure = await sync_to_async(check_csrf)(request)
            if failure is not None:
                raise failure
        except BadRequest as exc:
            return error_response(exc)
        stopped = await get_broker().request_stop(conversation.pk)
        return JsonResponse({"stopped": stopped})


class StoredMessageStreamView(PortalMixin, OwnerMixin, View):
    """GET ``chat/<chat_id>/messages/<message_id>/stream``: a stored
    assistant message as a stream again: the exact chunks of its run's log,
    or, for a message with no log, its parts replayed."""

    http_method_names: ClassVar[list[str]] = ["get", "options"]  # type: ignore[misc]

    async def get(self, request: HttpRequest, chat_id: str, message_id: str) -> HttpResponseBase:
        try:
            conversation = await self.get_owned_conversation(request, chat_id)
            version = resolve_sdk_version(request, int(uistream_settings.SDK_VERSION))
            message = await Message.objects.filter(conversation=conversation, pk=message_id, role="assistant").afirst()
            if message is None:
                raise not_found("message")
        except BadRequest as exc:
            return error_response(exc)
        run = await Run.objects.filter(message=message).order_by("-started_at").afirst()
        chunks = await load_log(run) if run is not None else []
        if not chunks:
            chunks = replay_message(message.as_ui_message())
        renderer = UIStreamRenderer(version)

        async def body() -> AsyncIterator[bytes]:
            yield renderer.render_many(chunks) + renderer.done()

        return sse_response(body())


@ensure_csrf_cookie
def csrf_token_view(request: HttpRequest) -> JsonResponse:
    """GET ``csrf``: the CSRF token (and its cookie) for clients that POST
    with a session cookie but are not served a Django page."""
    return JsonResponse({"csrfToken": get_token(request)})
