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
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, ClassVar

from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse, StreamingHttpResponse
from django.middleware.csrf import CsrfViewMiddleware, get_token
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.utils.module_loading import import_string
from django.views import View
from django.views.decorators.csrf import csrf_exempt, ensure_csrf_cookie

from .chat_request import BadRequest, ChatRequest, parse_chat_request, valid_id
from .conf import SDK_VERSIONS
from .conf import settings as uistream_settings
from .live import Broker, RunAlreadyActive, RunChannel, get_broker
from .models import Conversation, Message, Run
from .protocol.events import Event
from .protocol.sse import KEEPALIVE_FRAME
from .protocol.ui.chunks import Chunk
from .protocol.ui.encoder import UIMessageEncoder
from .protocol.ui.render import UIStreamRenderer
from .protocol.ui.replay import replay_message
from .protocol.ui.stream import aencode_batches
from .recording import RunRecorder, load_log
from .runs import ChatModel, SystemMessage, Tool, ToolLoop, model_name, ui_to_model_messages

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


def not_found(what: str = "chat") -> BadRequest:
    # The same answer for "missing" and "someone else's" (no oracle).
    return BadRequest(f"{what} not found", code="not_found", status=404)


def new_message_id() -> str:
    return "msg_" + secrets.token_urlsafe(18)


# -- ownership -----------------------------------------------------------------


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
    subscription = broker.subscribe_batches(run_id)
    render_many = renderer.render_many
    completed = False
    pending: asyncio.Future[tuple[int, list[Chunk]]] | None = None
    try:
        while True:
            pending = asyncio.ensure_future(anext(subscription))
            while True:
                done, _ = await asyncio.wait((pending,), timeout=keepalive_seconds)
                if done:
                    break
                yield KEEPALIVE_FRAME
            try:
                _seq, chunks = pending.result()
            except StopAsyncIteration:
                pending = None
                break
            pending = None
            frames = render_many(chunks)
            if frames:
                yield frames
        completed = True
        yield renderer.done()
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
            await asyncio.gather(pending, return_exceptions=True)
        aclose = getattr(subscription, "aclose", None)
        if aclose is not None:
            await aclose()
        if on_close is not None:
            result = on_close(completed)
            if asyncio.iscoroutine(result):
                await result


def sse_response(body: AsyncIterator[bytes]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    for name, value in SSE_HEADERS.items():
        response[name] = value
    return response


# -- the run task --------------------------------------------------------------


async def execute_run(
    source: AsyncIterator[Event],
    encoder: UIMessageEncoder,
    channel: RunChannel,
    recorder: RunRecorder,
    *,
    error_text: str,
    expose_errors: bool,
    stopped: asyncio.Event,
) -> None:
    """Drive one run: encode the source, record every chunk, publish it.

    The chunks one source event produces are recorded and published
    together. Recording comes first: whatever a subscriber was sent is in
    the log. However the run ends (done, failed, stopped, cancelled because
    its client left), the log is closed with a terminal chunk, stored, and
    the broker released.
    """
    failure: list[BaseException] = []
    status = "completed"
    flusher = asyncio.create_task(_flush_when_due(recorder), name=f"uistream-flush-{recorder.run.pk}")
    try:
        async for batch in aencode_batches(
            source, encoder, error_text=error_text, expose_errors=expose_errors, on_error=failure.append
        ):
            await recorder.add(batch)
            await channel.publish(batch)
        if failure:
            status = "failed"
    except asyncio.CancelledError:
        status = "stopped" if stopped.is_set() else "cancelled"
        tail = encoder.abort("stopped" if stopped.is_set() else None)
        if tail:
            await asyncio.shield(_record_and_publish(recorder, channel, tail))
        raise
    except Exception as exc:  # a failure of ours (recording, broker): still close cleanly
        logger.exception("run %s failed outside its source", recorder.run.pk)
        failure.append(exc)
        status = "failed"
        tail = encoder.error(error_text)
        if tail:
            await asyncio.shield(_record_and_publish(recorder, channel, tail))
    finally:
        flusher.cancel()
        await asyncio.gather(flusher, return_exceptions=True)
        error = failure[0] if failure else None
        await asyncio.shield(
            _finish(
                recorder,
                channel,
                status,
                usage=dict(encoder.usage),
                error_code=type(error).__name__ if error else "",
                error_detail=repr(error) if error else "",
            )
        )


async def _flush_when_due(recorder: RunRecorder, idle: float = 0.25) -> None:
    """While the source stalls (a slow model, a long tool), chunks already
    sent still reach the database within ``FLUSH_EVERY_MS``: ``add`` only
    flushes when it is called."""
    while True:
        deadline = recorder.pending_flush_deadline()  # on time.monotonic
        if deadline is None:
            await asyncio.sleep(idle)
            continue
        delay = deadline - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        if recorder.pending_flush_deadline() is not None:
            try:
                await recorder.flush()
            except Exception:  # logged; finish() retries what is pending
                logger.exception("periodic flush of run %s failed", recorder.run.pk)
                await asyncio.sleep(idle)


async def _record_and_publish(recorder: RunRecorder, channel: RunChannel, chunks: list[Chunk]) -> None:
    await recorder.add(chunks)
    try:
        await channel.publish(chunks)
    except Exception:  # the log is what counts; a subscriber will see the stored run
        logger.exception("could not publish the closing chunks of run %s", recorder.run.pk)


async def _finish(recorder: RunRecorder, channel: RunChannel, status: str, **fields: Any) -> None:
    try:
        await recorder.finish(status, **fields)
    finally:
        await channel.close()


# -- the views -------------------------------------------------------------------


@method_decorator(csrf_exempt, name="dispatch")
class ChatView(OwnerMixin, View):
    """useChat's endpoint: POST in, UI message stream out.

    Subclass it and set ``model`` / ``tools`` / ``system_prompt`` (or
    override the ``get_*`` hooks); the defaults come from ``UISTREAM``.
    """

    http_method_names: ClassVar[list[str]] = ["post", "options"]  # type: ignore[misc]

    model: Any = None
    tools: Sequence[Any] | None = None
    system_prompt: str | None = None
    max_steps: int | None = None
    sdk_version: int | None = None

    # -- hooks ---------------------------------------------------------------

    def get_model(self) -> ChatModel:
        """The chat model of this request's run. Called once per request;
        override to pick a model per user or per conversation."""
        # Read through the class so a plain function is not bound as a method.
        value = self.__dict__.get("model", type(self).model)
        if value is None:
            value = uistream_settings.import_setting("MODEL")
        if value is None:
            raise ImproperlyConfigured(
                f"'{type(self).__name__}' should either include a `model` attribute, "
                "set UISTREAM['MODEL'], or override the `get_model()` method."
            )
        if isinstance(value, type) or (callable(value) and not isinstance(value, ChatModel)):
            value = value()
        if isinstance(value, ChatModel):
            return value
        raise ImproperlyConfigured(f"'{type(self).__name__}': the model {value!r} has no stream() method.")

    def get_tools(self) -> list[Tool]:
        """The tools the model may call (``Tool`` objects, functions, or
        dotted paths to either)."""
        raw = self.tools if self.tools is not None else uistream_settings.TOOLS
        tools: list[Tool] = []
        for item in raw:
            value = import_string(item) if isinstance(item, str) else item
            tools.append(value if isinstance(value, Tool) else Tool(value))
        return tools

    def get_system_prompt(self) -> str | None:
        return self.system_prompt

    def get_max_steps(self) -> int:
        return int(self.max_steps if self.max_steps is not None else uistream_settings.MAX_STEPS)

    def get_sdk_version(self) -> int:
        return resolve_sdk_version(self.request, int(self.sdk_version or uistream_settings.SDK_VERSION))

    def get_source(self, history: list[dict[str, Any]], chat: ChatRequest, model: ChatModel) -> AsyncIterator[Event]:
        """The run's event source. ``history`` is the stored conversation
        (UIMessages, oldest first) the model answers. The default runs a
        ``ToolLoop`` over the model and tools; return any async iterator of
        source events to run something else (an agent, a canned reply)."""
        messages = ui_to_model_messages(history)
        prompt = self.get_system_prompt()
        if prompt:
            messages.insert(0, SystemMessage(prompt))
        loop = ToolLoop(
            model,
            self.get_tools(),
            max_steps=self.get_max_steps(),
            error_text=uistream_settings.ERROR_TEXT,
        )
        return loop.run(messages)

    def get_message_metadata(self, chat: ChatRequest) -> Any:
        """Metadata for the assistant message's ``start`` chunk (None: none)."""
        return None

    # -- the request ------------------------------------------------------------

    async def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        try:
            return await self.handle(request)
        except BadRequest as exc:
            return error_response(exc)

    async def handle(self, request: HttpRequest) -> HttpResponseBase:
        max_bytes = int(uistream_settings.MAX_REQUEST_BYTES)
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > max_bytes:
            raise BadRequest(f"the request body is larger than {max_bytes} bytes", code="too_large", status=413)
        content_type = request.content_type or ""
        if content_type != "application/json":
            raise BadRequest(
                f"send application/json, not {content_type or 'nothing'!r}", code="unsupported_media_type", status=415
            )
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
            if chat.trigger == "regenerate-message" or chat.message_id is not None:
                raise not_found("message")  # a new visitor has nothing to regenerate or edit
            # Only a valid request may create the anonymous visitor's session.
            owner = await self.get_owner(request, create_session=True)
        broker = get_broker()
        if await broker.active_run(chat.chat_id) is not None:
            # Checked again atomically by open_run below.
            await self._check_owned_or_new(chat.chat_id, owner)
            raise BadRequest("a reply is still streaming in this chat", code="run_active", status=409)
        prepared = await sync_to_async(self.prepare_run, thread_sensitive=True)(chat, owner, version, model)
        run, message, history = prepared
        try:
            channel = await broker.open_run(chat.chat_id, str(run.pk))
        except RunAlreadyActive:
            await sync_to_async(self.discard_run)(run, message)
            raise BadRequest("a reply is still streaming in this chat", code="run_active", status=409) from None
        encoder = UIMessageEncoder(message.pk, self.get_message_metadata(chat))
        recorder = RunRecorder(run, message)
        stopped = asyncio.Event()
        source = self.get_source(history, chat, model)
        task = asyncio.create_task(
            execute_run(
                source,
                encoder,
                channel,
                recorder,
                error_text=uistream_settings.ERROR_TEXT,
                expose_errors=bool(uistream_settings.EXPOSE_ERRORS),
                stopped=stopped,
            ),
            name=f"uistream-run-{run.pk}",
        )
        watcher = asyncio.create_task(_watch_stop(channel, task, stopped))
        task.add_done_callback(lambda _t: watcher.cancel())
        policy = uistream_settings.ON_DISCONNECT

        def on_close(completed: bool) -> None:
            if not completed and policy == "cancel" and not task.done():
                task.cancel()

        body = render_subscription(
            broker,
            str(run.pk),
            UIStreamRenderer(version),
            keepalive_seconds=float(uistream_settings.KEEPALIVE_SECONDS),
            on_close=on_close,
        )
        return sse_response(body)

    async def _check_owned_or_new(self, chat_id: str, owner: dict[str, Any]) -> None:
        exists = await Conversation.objects.filter(pk=chat_id).exclude(**owner).aexists()
        if exists:
            raise not_found()

    # -- database work (one transaction, in a worker thread) ----------------------

    def prepare_run(
        self, chat: ChatRequest, owner: dict[str, Any], version: int, model: ChatModel
    ) -> tuple[Run, Message, list[dict[str, Any]]]:
        """Apply the request to the stored conversation and create the
        assistant message and its run. The stored conversation is the truth:
        the client's history only contributes its new user message."""
        with transaction.atomic():
            conversation = Conversation.objects.select_for_update().filter(pk=chat.chat_id).first()
            if conversation is None:
                conversation = Conversation(pk=chat.chat_id, **owner)
                conversation.save(force_insert=True)
            elif not self._owns(conversation, owner):
                raise not_found()
            if chat.trigger == "regenerate-message":
                self.apply_regenerate(conversation, chat)
            else:
                self.apply_submit(conversation, chat)
            stored = list(conversation.messages.order_by("position"))
            if not stored or stored[-1].role != "user":
                raise BadRequest("there is no user message to answer", code="nothing_to_answer")
            position = stored[-1].position + 1
            message = Message.objects.create(
                pk=new_message_id(), conversation=conversation, role="assistant", parts=[], position=position
            )
            if not conversation.title:
                conversation.title = _title_from(stored[-1].parts)
            conversation.updated_at = timezone.now()
            conversation.save(update_fields=["title", "updated_at"])
            run = Run.objects.create(
                conversation=conversation,
                message=message,
                status="running",
                model=model_name(model)[:200],
                sdk_version=version,
                trigger=chat.trigger,
            )
        return run, message, [m.as_ui_message() for m in stored]

    @staticmethod
    def _owns(conversation: Conversation, owner: dict[str, Any]) -> bool:
        if owner.get("owner") is not None:
            return bool(conversation.owner_id == owner["owner"].pk)
        return bool(conversation.owner_id is None and conversation.session_key == owner.get("session_key"))

    def check_request(self, chat: ChatRequest) -> None:
        """Shape rules that need no database: a submit ends with the new user
        message (continuing an assistant message is the approvals' and client
        tools' business: not accepted here)."""
        if chat.trigger == "submit-message":
            last = chat.last_message
            if last is None:
                raise BadRequest("submit-message needs the new user message in messages", field="messages")
            if last["role"] != "user":
                raise BadRequest(
                    "submit-message needs the new user message last in messages",
                    field=f"messages[{len(chat.messages) - 1}]",
                )

    def apply_submit(self, conversation: Conversation, chat: ChatRequest) -> None:
        last = chat.last_message
        assert last is not None  # check_request
        messages = conversation.messages
        if chat.message_id is not None:
            # An edit: the edited user message and everything after it go.
            edited = messages.filter(pk=chat.message_id, role="user").first()
            if edited is None:
                raise not_found("message")
            if chat.message_id != last["id"]:
                raise BadRequest("an edit resends the edited message under its own id", field="messageId")
            messages.filter(position__gte=edited.position).delete()
        elif messages.filter(pk=last["id"]).exists():
            raise BadRequest("that message was already sent; regenerate or edit instead", code="duplicate", status=409)
        position = (messages.aggregate(Max("position"))["position__max"] or -1) + 1
        try:
            with transaction.atomic():
                Message.objects.create(
                    pk=last["id"],
                    conversation=conversation,
                    role="user",
                    parts=last["parts"],
                    metadata=last.get("metadata"),
                    position=position,
                )
        except IntegrityError:
            raise BadRequest("that message id is already taken", code="duplicate", status=409) from None

    def apply_regenerate(self, conversation: Conversation, chat: ChatRequest) -> None:
        messages = conversation.messages
        if chat.message_id is not None:
            target = messages.filter(pk=chat.message_id, role="assistant").first()
        else:
            target = messages.order_by("-position").first()
            if target is not None and target.role != "assistant":
                target = None
        if target is None:
            raise not_found("message")
        messages.filter(position__gte=target.position).delete()

    def discard_run(self, run: Run, message: Message) -> None:
        with transaction.atomic():
            run.delete()
            message.delete()


def _title_from(parts: list[dict[str, Any]]) -> str:
    text = " ".join(p.get("text", "") for p in parts if p.get("type") == "text").strip()
    return (text[:77] + "…") if len(text) > 80 else text


async def _watch_stop(channel: RunChannel, task: asyncio.Task[None], stopped: asyncio.Event) -> None:
    await channel.stop_requested.wait()
    stopped.set()
    task.cancel()


class ChatStreamView(OwnerMixin, View):
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
class ChatStopView(OwnerMixin, View):
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


class StoredMessageStreamView(OwnerMixin, View):
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
