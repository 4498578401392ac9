"""``StreamView``: the one request pipeline of every stream endpoint
(docs/architecture.md, "The request pipeline").

In the order every endpoint meets them: the method (405), CSRF for
cookie-authenticated unsafe requests (403), authentication, permissions
(401/403) and throttles (429) in ``initial()``, then the subclass's handler
reads its body and checks ownership (404 for missing and foreign alike).
Every refusal is a ``BadRequest`` (one of the classes of ``errors``) and
becomes the same JSON body in ``handle_exception()``. Per-request state
lives in a ``RequestContext`` handed to the handler, never on the view.
"""

from __future__ import annotations

import asyncio
import io
import logging
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Protocol

from asgiref.sync import sync_to_async
from django.conf import settings as django_settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse, StreamingHttpResponse
from django.http.request import HttpHeaders
from django.middleware.csrf import REASON_CSRF_TOKEN_MISSING, CsrfViewMiddleware
from django.urls import NoReverseMatch, reverse
from django.utils.decorators import classonlymethod
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import APIException
from rest_framework.request import Request

from ..conf import SDK_VERSIONS
from ..conf import settings as uistream_settings
from ..errors import (
    BadRequest,
    Codes,
    CsrfFailed,
    MethodNotAllowed,
    Misconfigured,
    ServiceUnavailable,
    UnsupportedMediaType,
    not_found,
)
from ..lifecycle.portal import in_portal, iterate_in_portal
from ..lifecycle.runner import RunHandle
from ..live import Broker, BrokerError, get_broker
from ..models import Conversation
from ..owners import Owner
from ..policies import Policies, check_policies, translate_api_exception
from ..protocol.sse import KEEPALIVE_FRAME
from ..protocol.ui.chunks import TERMINAL_CHUNKS, Chunk
from .body_limits import too_large
from .chat_request import valid_id

__all__ = [
    "RUN_ID_HEADER",
    "SSE_HEADERS",
    "RequestContext",
    "StreamRenderer",
    "StreamView",
    "broker_unavailable",
    "check_json_request",
    "csrf_applies",
    "release_body",
    "render_subscription",
    "resolve_sdk_version",
    "sse_response",
]

#: The headers the SDK's own server sends (minus hop-by-hop ``connection``).
SSE_HEADERS: dict[str, str] = {
    "Cache-Control": "no-cache",
    "X-Vercel-AI-UI-Message-Stream": "v1",
    "X-Accel-Buffering": "no",
}
SDK_VERSION_HEADER = "x-uistream-sdk-version"
_SDK_VERSION_META = HttpHeaders.to_wsgi_name(SDK_VERSION_HEADER)
#: The run a POST started, on every response that streams a run (the
#: header ``WorkflowChatTransport`` reads to reconnect by run id).
RUN_ID_HEADER = "x-workflow-run-id"
SAFE_METHODS = frozenset(("GET", "HEAD", "OPTIONS"))

logger = logging.getLogger("uistream_app.pipeline")


class StreamRenderer(Protocol):
    """Canonical chunks → the bytes of one dialect's stream."""

    def render_many(self, chunks: Iterable[Chunk]) -> bytes: ...

    def done(self) -> bytes: ...


@dataclass
class RequestContext:
    """One request's state: the request, DRF's view of it, and its owner
    (a visitor without a session owns nothing until ``ensure_owner``)."""

    request: HttpRequest
    api_request: Request
    owner: Owner
    allow_anonymous: bool

    async def ensure_owner(self) -> Owner:
        """The owner, giving an anonymous visitor a session first: only a
        request that passed every check may create one."""
        if not self.owner.is_known and self.owner.user is None and self.allow_anonymous:
            session = self.request.session
            if session.session_key is None:
                await session.asave()
            self.owner = Owner.of_session(session.session_key)
        return self.owner

    async def owned_conversation(self, chat_id: str) -> Conversation:
        """The owner's conversation of chat id ``chat_id``; the one 404
        otherwise (another owner's chat of that id is not looked at)."""
        conversation = None
        if valid_id(chat_id):
            conversation = await Conversation.objects.owned_by(self.owner).with_client_id(chat_id).afirst()
        if conversation is None:
            raise not_found()
        return conversation


def _no_response(request: HttpRequest) -> HttpResponse:
    return HttpResponse()


class _CsrfCheck(CsrfViewMiddleware):
    """Django's CSRF check, answering with the reason of a refusal instead
    of its page (as DRF's ``CSRFCheck``)."""

    def _reject(self, request: HttpRequest, reason: str) -> Any:
        return reason


def csrf_applies(request: HttpRequest) -> bool:
    """Whether ``request`` needs Django's CSRF check: an unsafe request a
    cookie may authenticate, that is every one except one that carries no
    session cookie and authenticates with an ``Authorization`` header (a
    token client, which a forged cross-site request can't be). The API
    applies the same rule (``api.permissions.OwnedMixin``)."""
    if request.method in SAFE_METHODS:
        return False
    return django_settings.SESSION_COOKIE_NAME in request.COOKIES or "authorization" not in request.headers


def check_csrf(request: HttpRequest) -> None:
    """Django's own CSRF check, answered in JSON, where ``csrf_applies``;
    the refusal says which case it is (``csrf_refusal``)."""
    if not csrf_applies(request):
        return
    reason = _CsrfCheck(_no_response).process_view(request, _no_response, (), {})
    if reason is not None:
        raise csrf_refusal(str(reason))


def csrf_refusal(reason: str) -> CsrfFailed:
    """403 ``csrf_failed`` for Django's ``reason``, told apart: no token
    sent (the default text: send the header); a token that no longer
    matches the cookie (a login or logout rotates it: the page holds a
    stale one) or is not a token at all, and no CSRF cookie: where a fresh
    token comes from (``fresh_csrf_token``); an Origin or Referer refused:
    Django's reason, with the setting that trusts an origin."""
    header = _csrf_header()
    if reason == REASON_CSRF_TOKEN_MISSING:
        return CsrfFailed()  # "send the X-CSRFToken header"
    if reason.startswith("CSRF token from") and reason.endswith(" incorrect."):
        return CsrfFailed(
            f"CSRF verification failed: the token sent in {header} does not match the CSRF cookie: it is stale "
            f"(a login or logout rotates it); send a fresh one, from {fresh_csrf_token()}"
        )
    if reason.startswith("CSRF token from"):  # incorrect length, invalid characters
        return CsrfFailed(f"CSRF verification failed: {reason.rstrip('.')}: send the token from {fresh_csrf_token()}")
    if reason.startswith("CSRF cookie"):  # not set, or not a secret
        endpoint = _csrf_endpoint()
        first = f"GET {endpoint} first" if endpoint else "load a page Django renders first"
        return CsrfFailed(
            f"CSRF verification failed: {reason.rstrip('.')}: {first} "
            f"(it sets the cookie, and gives the token to send in {header})"
        )
    if reason.startswith(("Origin checking failed", "Referer checking failed")):
        return CsrfFailed(
            f"CSRF verification failed: {reason.rstrip('.')} (CSRF_TRUSTED_ORIGINS lists the origins trusted)"
        )
    return CsrfFailed(f"CSRF verification failed: {reason}")


def _csrf_header() -> str:
    """The request header the token goes in, as clients write it."""
    name = str(django_settings.CSRF_HEADER_NAME)
    if name == "HTTP_X_CSRFTOKEN":
        return "X-CSRFToken"
    return HttpHeaders.parse_header_name(name) or name


def _csrf_endpoint() -> str | None:
    """The path of the app's ``csrf`` endpoint (``uistream:csrf``), where routed."""
    try:
        return reverse("uistream:csrf")
    except NoReverseMatch:
        return None


def fresh_csrf_token() -> str:
    """Where a client gets a current token: ``GET`` the app's ``csrf``
    endpoint where it is routed, and the CSRF cookie where a script can
    read one."""
    sources = []
    endpoint = _csrf_endpoint()
    if endpoint is not None:
        sources.append(f"GET {endpoint} (its csrfToken)")
    if not django_settings.CSRF_USE_SESSIONS and not django_settings.CSRF_COOKIE_HTTPONLY:
        sources.append(f"the {django_settings.CSRF_COOKIE_NAME} cookie")
    if not sources:
        sources.append("a page Django renders ({% csrf_token %})")
    return " or ".join(sources)


def check_json_request(request: HttpRequest, *, also_text: bool = False) -> int:
    """A JSON body's checks: its declared size within ``MAX_REQUEST_BYTES``
    (413) and a JSON content type (415) before a byte of it is read, then
    its actual size (413 too: a chunked body declares none, and Django's
    own ``DATA_UPLOAD_MAX_MEMORY_SIZE`` would answer it with an HTML 400).
    Returns the size limit, for the parser.

    ``also_text``: ``text/plain`` carrying JSON is accepted too (what
    ``WorkflowChatTransport`` sends: a string body with no content type).
    CSRF was checked before, whatever the type: a cross-site form can send
    ``text/plain`` without a preflight, so the check is what keeps it out."""
    max_bytes = uistream_settings.MAX_REQUEST_BYTES
    length = request.META.get("CONTENT_LENGTH")
    if length is not None and length.isdigit() and int(length) > max_bytes:
        raise too_large(max_bytes)
    content_type = request.content_type or ""
    if content_type != "application/json" and not (also_text and content_type == "text/plain"):
        raise UnsupportedMediaType(f"send application/json, not {content_type or 'nothing'!r}")
    try:
        body = _read_body(request, max_bytes)  # once here; the handler's read is the cached bytes
    except RequestDataTooBig:
        raise too_large(max_bytes) from None
    if len(body) > max_bytes:
        raise too_large(max_bytes)
    return max_bytes


def _read_body(request: HttpRequest, max_bytes: int) -> bytes:
    """The body, read under our own limit (``MAX_REQUEST_BYTES``) in place of
    Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (2.5 MiB by default), which a
    message with a 3 MiB image passes: ``request.body`` would refuse it
    however the project sized ours. Cached where ``request.body`` looks."""
    if hasattr(request, "_body") or getattr(request, "_read_started", False):
        return request.body
    body = request.read(max_bytes + 1)
    request._body = body  # what request.body returns from now on
    request._stream = io.BytesIO(body)  # as Django's own body does
    return body


def release_body(request: HttpRequest) -> None:
    """Let go of ``request``'s body: the chat views call it once they have
    parsed the body (its bytes would otherwise be one more copy of it, up
    to ``MAX_REQUEST_BYTES``, while the turn is stored and answered), and
    again when the answer ends. A Django request sits in reference cycles
    (``request.auser``, the messages storage), so it is freed by the next
    full garbage collection, not when its response ends. After this,
    ``request.body`` is empty: the hooks read the body's fields from
    ``TurnContext.extra``."""
    if getattr(request, "_body", None):
        request._body = b""
        request._stream = io.BytesIO()


def resolve_sdk_version(request: HttpRequest, default: int) -> int:
    """The client's AI SDK major version: ``?v=``, the header, else ``default``."""
    # From ``META`` (and the query string only when there is one): the
    # request's ``GET`` and ``headers`` are parsed whole on first use, for
    # one key of each, on every chat's path.
    raw = (request.META.get("QUERY_STRING") and request.GET.get("v")) or request.META.get(_SDK_VERSION_META)
    if raw is None:
        return default
    try:
        version = int(raw)
    except ValueError:
        version = -1
    if version not in SDK_VERSIONS:
        raise BadRequest(
            f"unsupported SDK version {raw!r}; use one of {', '.join(map(str, SDK_VERSIONS))}",
            code=Codes.BAD_SDK_VERSION,
            field="v",
        )
    return version


def broker_unavailable(exc: BrokerError) -> ServiceUnavailable:
    """The answer to a request that needs the broker while it fails (Redis
    gone): 503, ``broker_unavailable``; the detail goes to the log."""
    logger.warning("the broker failed: %s", exc)
    return ServiceUnavailable(headers={"Retry-After": "5"})


async def render_subscription(
    broker: Broker,
    run_id: str,
    renderer: StreamRenderer,
    *,
    keepalive_seconds: float,
    on_close: Callable[[bool], Any] | None = None,
    from_seq: int = 0,
) -> AsyncGenerator[bytes, None]:
    """Replay (from ``from_seq``) then live chunks of ``run_id`` as bytes, a keep-alive comment
    after ``keepalive_seconds`` of silence, the renderer's end at the end.
    What the broker hands over together goes out in one write.
    ``on_close(completed)`` runs however the response ends (a disconnect
    closes this generator: ``completed`` is then False).

    A broker that fails mid-stream (Redis gone) ends the stream in band: a
    masked ``error`` chunk in the renderer's dialect, then its end, so the
    client sees an error and the response body is complete."""
    subscription = broker.subscribe_batches(run_id, from_seq, keepalive=keepalive_seconds)
    render_many = renderer.render_many
    completed = False
    last: Chunk | None = None
    try:
        try:
            async for _seq, chunks in subscription:
                if not chunks:
                    yield KEEPALIVE_FRAME
                    continue
                last = chunks[-1]
                frames = render_many(chunks)
                if frames:
                    yield frames
            if last is not None and last.get("type") not in TERMINAL_CHUNKS:
                # The run's stream ended without its end (its process died
                # and the stream expired before the sweeper settled it): the
                # client is told, never left with a bare end of stream.
                logger.warning("run %s's stream ended without a terminal chunk", run_id)
                yield render_many([{"type": "error", "errorText": uistream_settings.ERROR_TEXT}])
        except BrokerError:
            logger.exception("the broker failed while run %s streamed", run_id)
            yield render_many([{"type": "error", "errorText": uistream_settings.ERROR_TEXT}])
        # Also after a broker failure: the client was told and was not lost,
        # so ON_DISCONNECT does not apply; the run's own failed publish
        # settles it (``lifecycle.runner.execute_run``).
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


def sse_response(body: AsyncIterator[bytes], headers: dict[str, str] = SSE_HEADERS) -> StreamingHttpResponse:
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    for name, value in headers.items():
        response[name] = value
    return response


def is_wsgi(request: HttpRequest) -> bool:
    return "wsgi.input" in request.META


#: Said once per process, at the first stream served under WSGI.
WSGI_WARNING: Final = (
    "uistream is streaming under WSGI: each open stream holds a server thread for as long as it lasts. "
    'Serve ASGI: put "daphne" first in INSTALLED_APPS (runserver then serves ASGI), '
    "or serve the project with daphne or uvicorn (ASGI_APPLICATION)."
)
#: Taken by the first stream under WSGI, and never released: the warning's once.
_wsgi_warned = threading.Lock()


def warn_wsgi_once() -> None:
    """Log ``WSGI_WARNING`` the first time this process streams under WSGI:
    nothing else tells (``runserver`` without daphne serves WSGI, and check
    W002 only fires without ``ASGI_APPLICATION``)."""
    if _wsgi_warned.acquire(blocking=False):
        logger.warning(WSGI_WARNING)


class StreamView(Policies, View):
    """The base of every stream endpoint (see the module docstring).

    Subclasses define async handlers ``post(request, context, **kwargs)`` /
    ``get(...)``. Policies are class attributes, as in DRF (``Policies``).
    """

    http_method_names: ClassVar[list[str]] = ["options"]  # type: ignore[misc]

    @classonlymethod
    def as_view(cls, **initkwargs: Any) -> Any:
        # CSRF is the pipeline's (answered in JSON), not the middleware's.
        return csrf_exempt(super().as_view(**initkwargs))

    def initial(self, request: HttpRequest) -> RequestContext:
        """CSRF, authentication, permissions, throttles (sync: sessions,
        users and throttle caches are). Raises ``BadRequest``."""
        check_csrf(request)
        api_request = Request(request, authenticators=self.get_authenticators())
        try:
            user = api_request.user
        except APIException as exc:
            raise translate_api_exception(exc) from None
        check_policies(api_request, self, self.get_permission_classes(), self.get_throttle_classes())
        if user is not None and user.is_authenticated:
            owner = Owner.of_user(user)
        else:
            session = getattr(request, "session", None)
            owner = Owner.of_session(session.session_key if session is not None else None)
        return RequestContext(request, api_request, owner, self.get_allow_anonymous())

    # -- the request ------------------------------------------------------------------

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        if not is_wsgi(request):
            return self.handle(request, *args, **kwargs)

        # Under WSGI the run must live in the portal's long-lived loop, and
        # the answer stream through a plain iterator (``portal``).
        async def bridged() -> HttpResponseBase:
            response: HttpResponseBase = await in_portal(self.handle(request, *args, **kwargs))
            if isinstance(response, StreamingHttpResponse) and response.is_async:
                warn_wsgi_once()
                response.streaming_content = iterate_in_portal(response.streaming_content)  # type: ignore[arg-type]
            return response

        return bridged()

    async def handle(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        try:
            method = (request.method or "").lower()
            if method == "options":
                response: HttpResponseBase = self.options(request, *args, **kwargs)
                return await response if asyncio.iscoroutine(response) else response
            handler = getattr(self, method, None) if method in self.http_method_names else None
            if handler is None:
                allowed = ", ".join(m.upper() for m in self.http_method_names if hasattr(self, m))
                raise MethodNotAllowed(f"use {allowed}", headers={"Allow": allowed})
            context = await sync_to_async(self.initial)(request)
            return await handler(request, context, *args, **kwargs)  # type: ignore[no-any-return]
        except BadRequest as exc:
            return self.handle_exception(exc)
        except BrokerError as exc:
            # Before any byte of an answer: nothing was written (the store
            # takes the run's slot from the broker before it writes).
            return self.handle_exception(broker_unavailable(exc))

    def handle_exception(self, exc: BadRequest) -> HttpResponse:
        """Every refusal as the same JSON body (and its headers)."""
        response = JsonResponse(exc.as_dict(), status=exc.status)
        for name, value in exc.headers.items():
            response[name] = value
        if isinstance(exc, Misconfigured):
            # Logged once per process (hooks.misconfigured), not per request
            # as Django's handler logs every 5xx: the flag its log_response reads.
            response._has_been_logged = True  # type: ignore[attr-defined]
        return response

    def stream_run(
        self, handle: RunHandle, renderer: StreamRenderer, headers: dict[str, str] = SSE_HEADERS
    ) -> StreamingHttpResponse:
        """The answer of a request that started ``handle``: its run's
        chunks, rendered; a dropped connection follows ``ON_DISCONNECT``."""
        policy = uistream_settings.ON_DISCONNECT
        headers = {**headers, RUN_ID_HEADER: handle.run_id}

        request = self.request

        def on_close(completed: bool) -> None:
            release_body(request)
            if not completed and policy == "cancel":
                handle.cancel_unless_done()

        body = render_subscription(
            get_broker(),
            handle.run_id,
            renderer,
            keepalive_seconds=uistream_settings.KEEPALIVE_SECONDS,
            on_close=on_close,
        )
        if handle.elsewhere:
            # A run that waits for a worker: some servers (daphne) send the
            # headers only with the first body bytes, so send some at once.
            return sse_response(_keepalive_first(body), headers)
        return sse_response(body, headers)


async def _keepalive_first(body: AsyncGenerator[bytes, None]) -> AsyncIterator[bytes]:
    yield KEEPALIVE_FRAME
    async with aclosing(body):  # its on_close runs when the response ends
        async for data in body:
            yield data
