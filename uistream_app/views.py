"""The HTTP endpoints of useChat: the chat POST, resume, stop, a stored
answer as a stream, and the CSRF token.

Each is a thin ``StreamView`` (``pipeline.py``): the pipeline authenticates
and throttles, the handler parses its request into a ``Turn``, the store
prepares the run, the runner starts it, and the response subscribes to it.
``ChatView`` is what a project subclasses (hooks in ``hooks.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import ClassVar

from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.middleware.csrf import get_token
from django.views.decorators.csrf import ensure_csrf_cookie

from .chat_request import chat_turn, parse_chat_request, valid_id
from .conf import settings as uistream_settings
from .errors import not_found
from .hooks import ChatHooks
from .live import get_broker
from .models import Run
from .pipeline import (
    SSE_HEADERS,
    RequestContext,
    StreamView,
    check_json_request,
    render_subscription,
    resolve_sdk_version,
    sse_response,
)
from .protocol.ui.render import UIStreamRenderer
from .protocol.ui.replay import replay_message
from .recording import load_log
from .runner import execute_run, live_runs
from .runs import model_name
from .sweeper import stop_dead_run

__all__ = [
    "SSE_HEADERS",
    "ChatStopView",
    "ChatStreamView",
    "ChatView",
    "StoredMessageStreamView",
    "csrf_token_view",
    "execute_run",
]


class ChatView(ChatHooks, StreamView):
    """useChat's endpoint: POST in, UI message stream out.

    Subclass it and set ``model`` / ``tools`` / ``system_prompt`` (or
    override the ``get_*`` hooks of ``ChatHooks``); defaults come from
    ``UISTREAM``.
    """

    http_method_names: ClassVar[list[str]] = ["post", "options"]  # type: ignore[misc]
    starts_runs: ClassVar[bool] = True

    def get_sdk_version(self) -> int:
        return resolve_sdk_version(self.request, int(self.sdk_version or uistream_settings.SDK_VERSION))

    async def post(self, request: HttpRequest, context: RequestContext) -> HttpResponseBase:
        max_bytes = check_json_request(request)
        chat = parse_chat_request(request.body, max_bytes=max_bytes)
        version = self.get_sdk_version()
        model = self.get_run_model()
        turn = chat_turn(chat)
        # Only a new message may give an anonymous visitor a session.
        claim = context.ensure_owner if turn.kind == "submit" and turn.edit_of is None else None
        prepared = await self.get_store().prepare(
            turn, context.owner, version=version, model_name=model_name(model), claim_owner=claim
        )
        source = self.get_source(prepared.history, prepared, model)
        handle = await self.get_runner().start(prepared, source, metadata=self.get_message_metadata(prepared))
        return self.stream_run(handle, UIStreamRenderer(version))


class ChatStreamView(StreamView):
    """GET ``chat/<chat_id>/stream``: useChat's resume. 204 when no run is
    active; else the whole run replayed from its first chunk, then live."""

    http_method_names: ClassVar[list[str]] = ["get", "options"]  # type: ignore[misc]
    sdk_version: int | None = None

    async def get(self, request: HttpRequest, context: RequestContext, chat_id: str) -> HttpResponseBase:
        conversation = await context.owned_conversation(chat_id)
        version = resolve_sdk_version(request, int(self.sdk_version or uistream_settings.SDK_VERSION))
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


class ChatStopView(StreamView):
    """POST ``chat/<chat_id>/stop``: end the active run as *stopped*; a
    run whose process is dead is settled (``interrupted``) at once.
    ``{"stopped": true}`` when the chat's run ended or is being stopped,
    ``false`` when nothing runs in it."""

    http_method_names: ClassVar[list[str]] = ["post", "options"]  # type: ignore[misc]

    async def post(self, request: HttpRequest, context: RequestContext, chat_id: str) -> HttpResponse:
        conversation = await context.owned_conversation(chat_id)
        run = await Run.objects.filter(conversation=conversation, status=Run.Status.RUNNING).afirst()
        if run is None:
            return JsonResponse({"stopped": False})
        stopped = await get_broker().request_stop(conversation.pk)
        if not any(handle.run.pk == run.pk for handle in live_runs()):
            # No run of this process: its process may be dead. A live one
            # ends on the request, or renews its lease; a dead one does neither.
            stopped = await stop_dead_run(run) or stopped
        return JsonResponse({"stopped": stopped})


class StoredMessageStreamView(StreamView):
    """GET ``chat/<chat_id>/messages/<message_id>/stream``: a stored
    assistant message as a stream again: the exact chunks of its run's log,
    or, for a message with no log, its parts replayed."""

    http_method_names: ClassVar[list[str]] = ["get", "options"]  # type: ignore[misc]

    async def get(
        self, request: HttpRequest, context: RequestContext, chat_id: str, message_id: str
    ) -> HttpResponseBase:
        conversation = await context.owned_conversation(chat_id)
        version = resolve_sdk_version(request, int(uistream_settings.SDK_VERSION))
        message = None
        if valid_id(message_id):
            message = await conversation.messages.with_client_id(message_id).filter(role="assistant").afirst()
        if message is None:
            raise not_found()
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
