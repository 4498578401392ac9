"""The HTTP endpoints of useChat: the chat POST, resume, stop, a stored
answer as a stream, and the CSRF token.

Each is a thin ``StreamView`` (``pipeline.py``): the pipeline authenticates
and throttles, the handler parses its request into a ``Turn``, the store
prepares the run, the runner starts it, and the response subscribes to it.
``ChatView`` is what a project subclasses (hooks in ``hooks.py``).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Iterable
from typing import ClassVar, Final

from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.middleware.csrf import get_token
from django.views.decorators.csrf import ensure_csrf_cookie

from ..conf import settings as uistream_settings
from ..errors import BadRequest, Gone, not_found
from ..hooks import ChatHooks, TurnContext
from ..lifecycle.leases import stop_dead_run
from ..lifecycle.runner import execute_run, live_runs
from ..lifecycle.steering_messages import send_steering
from ..lifecycle.store import new_chat_id
from ..live import get_broker
from ..models import Conversation, Message, Run
from ..owners import Owner
from ..protocol.jsonbody import json_text
from ..protocol.ui.chunks import TERMINAL_CHUNKS, Chunk
from ..protocol.ui.render import UIStreamRenderer, downgrade
from ..protocol.ui.replay import replay_message
from ..recording import load_log
from ..runs.steering import SteeringKind
from .chat_request import ChatRequest, chat_turn, parse_chat_request, parse_steering_request, valid_id
from .pipeline import (
    RUN_ID_HEADER,
    SSE_HEADERS,
    RequestContext,
    StreamView,
    check_json_request,
    release_body,
    render_subscription,
    resolve_sdk_version,
    sse_response,
)

__all__ = [
    "CHAT_ID_HEADER",
    "SSE_HEADERS",
    "TAIL_INDEX_HEADER",
    "ChatQueueView",
    "ChatSteerView",
    "ChatStopView",
    "ChatStreamView",
    "ChatView",
    "StoredMessageStreamView",
    "csrf_token_view",
    "execute_run",
]

#: The chat a POST went to, on its response: a body without ``id`` learns
#: the chat id the server chose (or found), which stop and the stored
#: conversation are under.
CHAT_ID_HEADER: Final = "x-uistream-chat-id"
#: On a ``?startIndex=`` read: the index of the run's last stored chunk
#: (``-1`` for none yet), which a negative ``startIndex`` counts back from.
TAIL_INDEX_HEADER: Final = "x-workflow-stream-tail-index"
#: How many of a body's message ids are looked up to find its chat.
CHAT_LOOKUP_IDS: Final = 100
_START_INDEX_RE: Final = re.compile(r"-?[0-9]{1,15}")


def _taken_body(request: HttpRequest) -> bytes | str:
    """``request``'s body, taken from it to be parsed (``request.body`` is
    empty after this: the hooks read the body's keys from
    ``TurnContext.extra``): a big body as its text, its bytes let go, so
    that one copy of it is held while it is parsed and none while its turn
    is stored (``protocol.jsonbody.json_text``)."""
    body = request.body
    release_body(request)
    return json_text(body)


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
        max_bytes = check_json_request(request, also_text=True)
        chat = parse_chat_request(_taken_body(request), max_bytes=max_bytes, require_id=False)
        version = self.get_sdk_version()
        if not chat.chat_id:
            chat = ChatRequest(
                await self.get_chat_id(chat, context.owner), chat.messages, chat.trigger, chat.message_id, chat.extra
            )
        turn = chat_turn(chat)
        # Only a new message may give an anonymous visitor a session.
        claim = context.ensure_owner if turn.kind == "submit" and turn.edit_of is None else None
        turn_context = TurnContext(context.owner, chat.chat_id, "http", chat.extra, request=request)
        handle = await self.start_turn(turn, turn_context, version=version, claim_owner=claim)
        return self.stream_run(handle, UIStreamRenderer(version), {**SSE_HEADERS, CHAT_ID_HEADER: chat.chat_id})

    async def get_chat_id(self, chat: ChatRequest, owner: Owner) -> str:
        """The chat of a body that names none (``WorkflowChatTransport``'s):
        the owner's conversation that holds the most of the body's message
        ids (the history it sends back), the most recent on a tie; else a
        new id. Only the owner's conversations are looked at, so a body
        can't reach another owner's chat by quoting its message ids."""
        ids = [m["id"] for m in chat.messages[-CHAT_LOOKUP_IDS:] if valid_id(m.get("id"))]
        if ids and owner.is_known:
            found = await (
                Message.objects.filter(conversation__in=Conversation.objects.owned_by(owner), current=True)
                .filter(Q(client_id__in=ids) | Q(pk__in=ids, client_id=""))
                .values("conversation", "conversation__client_id")
                .annotate(held=Count("pk"))
                .order_by("-held", "-conversation__updated_at")
                .values_list("conversation__client_id", flat=True)
                .afirst()
            )
            if found is not None:
                return str(found)
        return new_chat_id()


class ChatStreamView(StreamView):
    """GET ``chat/<chat_id>/stream``: useChat's resume. 204 when no run is
    active; else the whole run replayed from its first chunk, then live.

    With ``?startIndex=N`` (``WorkflowChatTransport``'s reconnect), the
    segment may also be the id of a run of the requester's, and the run is
    served from its N-th event (docs/protocols.md, "Reconnecting by index")."""

    http_method_names: ClassVar[list[str]] = ["get", "options"]  # type: ignore[misc]
    sdk_version: int | None = None

    async def get(self, request: HttpRequest, context: RequestContext, chat_id: str) -> HttpResponseBase:
        if "startIndex" in request.GET:
            return await self.get_from_index(request, context, chat_id)
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
            keepalive_seconds=uistream_settings.KEEPALIVE_SECONDS,
        )
        return sse_response(body)

    async def get_from_index(self, request: HttpRequest, context: RequestContext, segment: str) -> HttpResponseBase:
        start = parse_start_index(request.GET.get("startIndex", ""))
        version = resolve_sdk_version(request, int(self.sdk_version or uistream_settings.SDK_VERSION))
        run = await owned_run(context, segment)
        if run is None:
            return HttpResponse(status=204)  # a chat that never ran: nothing to read
        return await stream_from_index(run, start, version)


def parse_start_index(raw: str) -> int:
    """``startIndex`` as an integer (negative: counted from the end)."""
    if _START_INDEX_RE.fullmatch(raw) is None:
        raise BadRequest(f"startIndex must be an integer, not {raw[:40]!r}", field="startIndex")
    return int(raw)


async def owned_run(context: RequestContext, segment: str) -> Run | None:
    """The run ``segment`` names: a run of the requester's by its id; else
    ``segment`` is a chat id (the one 404 unless it is the requester's) and
    the run is its active one, or its latest (a reconnect may come after
    the end); ``None`` for a chat with no run at all."""
    try:
        run_id: uuid.UUID | None = uuid.UUID(segment)
    except ValueError:
        run_id = None
    if run_id is not None:
        run = await Run.objects.owned_by(context.owner).filter(pk=run_id).afirst()
        if run is not None:
            return run
    conversation = await context.owned_conversation(segment)
    active = await get_broker().active_run(conversation.pk)
    run = await Run.objects.filter(pk=active, conversation=conversation).afirst() if active else None
    if run is None:
        run = await Run.objects.filter(conversation=conversation).order_by("-started_at").afirst()
    return run


def _event_seqs(chunks: Iterable[Chunk], version: int) -> list[int]:
    """The seqs of the chunks that are events of a stream for ai@``version``
    (ai@5/6 are not sent some ai@7 chunks): event k is chunk ``seqs[k]``."""
    chunks = list(chunks)
    if version == 7:
        return list(range(len(chunks)))
    return [seq for seq, chunk in enumerate(chunks) if downgrade(chunk, version) is not None]


class _SkipEvents:
    """A renderer that leaves out the first ``count`` events it would write
    (an index past the events a live run has sent so far)."""

    def __init__(self, renderer: UIStreamRenderer, count: int) -> None:
        self.renderer = renderer
        self.count = count

    def render_many(self, chunks: Iterable[Chunk]) -> bytes:
        if self.count <= 0:
            return self.renderer.render_many(chunks)
        out = []
        for chunk in chunks:
            frame = self.renderer.render(chunk)
            if frame and self.count > 0:
                self.count -= 1
            elif frame:
                out.append(frame)
        return b"".join(out)

    def done(self) -> bytes:
        return self.renderer.done()


async def stream_from_index(run: Run, start: int, version: int) -> HttpResponseBase:
    """``run`` from its event ``start`` on (docs/protocols.md, "Reconnecting
    by index"). Event k is the (k+1)-th JSON ``data:`` event of the POST
    that started the run (for ai@7, chunk k of its log). A run still
    running is read from the broker (its log may lag) and followed live;
    an ended one from its log, which is complete once its status is stored.
    A run that ended without ``finish`` answers 410 ``run_ended`` once
    nothing is left to send: the transport reconnects at once, for ever,
    after every response that did not carry a ``finish``."""
    if version == 7 and run.status != Run.Status.RUNNING:
        return await _ended_from_index(run, start)
    broker = get_broker()
    run_id = str(run.pk)
    chunks: list[Chunk] | None = None
    if run.status == Run.Status.RUNNING:
        chunks = await broker.published(run_id)
    live = chunks is not None
    if not live and run.status == Run.Status.RUNNING and await broker.active_run(str(run.conversation_id)) == run_id:
        # A broker that keeps no copy of another process's run (postgres)
        # follows it through its log: live, not gone.
        chunks = await load_log(run)
        live = True
    if chunks is None:
        chunks = await load_log(run)
        if run.status == Run.Status.RUNNING and chunks and chunks[-1].get("type") not in TERMINAL_CHUNKS:
            # Its process is gone and the broker forgot it (the sweeper will
            # settle it): the client is told, as a resume is.
            chunks = [*chunks, {"type": "error", "errorText": uistream_settings.ERROR_TEXT}]
    seqs = _event_seqs(chunks, version)
    tail = len(seqs) - 1
    first = max(0, tail + 1 + start) if start < 0 else start
    if not live and first > tail and (not chunks or chunks[-1].get("type") != "finish"):
        raise _run_ended(tail)
    from_seq = seqs[first] if first <= tail else len(chunks)
    renderer = UIStreamRenderer(version)
    if version == 5:
        renderer.render_many(chunks[:from_seq])  # what ai@5's renderer remembers (its dynamic calls)
    skipping = _SkipEvents(renderer, max(0, first - (tail + 1)))
    headers = {**SSE_HEADERS, RUN_ID_HEADER: run_id, TAIL_INDEX_HEADER: str(tail)}
    if live:
        body = render_subscription(
            broker,
            run_id,
            skipping,
            keepalive_seconds=uistream_settings.KEEPALIVE_SECONDS,
            from_seq=from_seq,
        )
        return sse_response(body, headers)
    rest = chunks[from_seq:]

    async def ended() -> AsyncIterator[bytes]:
        yield skipping.render_many(rest) + skipping.done()

    return sse_response(ended(), headers)


async def _ended_from_index(run: Run, start: int) -> HttpResponseBase:
    """``stream_from_index`` for an ended run read by ai@7, whose events are
    its log's chunks: the stored ``chunk_count`` is the tail, and only the
    chunks sent are loaded (plus the last one, whose type decides a read
    past the end), so a reconnect near the end of a long log reads little."""
    tail = run.chunk_count - 1
    first = max(0, tail + 1 + start) if start < 0 else start
    loaded = await load_log(run, start=min(first, tail)) if tail >= 0 else []
    if first > tail and (not loaded or loaded[-1].get("type") != "finish"):
        raise _run_ended(tail)
    rest = loaded if first <= tail else []
    renderer = UIStreamRenderer(7)

    async def body() -> AsyncIterator[bytes]:
        yield renderer.render_many(rest) + renderer.done()

    return sse_response(body(), {**SSE_HEADERS, RUN_ID_HEADER: str(run.pk), TAIL_INDEX_HEADER: str(tail)})


def _run_ended(tail: int) -> Gone:
    return Gone(headers={TAIL_INDEX_HEADER: str(tail)})


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


class ChatSteerView(StreamView):
    """POST ``chat/<chat_id>/steer``: a user message for the chat's running
    answer, delivered at its next step boundary (ai@7's ``steer``);
    ``ChatQueueView`` (``queue``): when the model gave its final answer.
    The body is ``{"id"?, "message"}`` (a useChat user message, checked as
    a chat message is, files included); the answer, once known, is the
    SDK's outcome: ``{"type": "delivered", "id", "stepNumber"}`` or
    ``{"type": "not-delivered", "id", "reason"}`` (``finished`` when no run
    is going). Owner-only (404), CSRF, and the chat throttles less those
    that count runs in flight (docs/operations.md, "Steering")."""

    http_method_names: ClassVar[list[str]] = ["post", "options"]  # type: ignore[misc]
    kind: ClassVar[SteeringKind] = "steer"

    def get_throttle_classes(self) -> list[type]:
        return self.get_steering_throttle_classes()

    async def post(self, request: HttpRequest, context: RequestContext, chat_id: str) -> HttpResponse:
        max_bytes = check_json_request(request)
        submission = parse_steering_request(_taken_body(request), kind=self.kind, max_bytes=max_bytes)
        conversation = await context.owned_conversation(chat_id)
        outcome = await send_steering(conversation, submission)
        return JsonResponse(outcome.to_wire())


class ChatQueueView(ChatSteerView):
    """POST ``chat/<chat_id>/queue``: ``ChatSteerView``'s ``queue``."""

    kind: ClassVar[SteeringKind] = "queue"


class StoredMessageStreamView(StreamView):
    """GET ``chat/<chat_id>/messages/<message_id>/stream``: a stored
    assistant message as a stream again: the exact chunks of its run's log,
    or, for a message with no log, its parts replayed."""

    http_method_names: ClassVar[list[str]] = ["get", "options"]  # type: ignore[misc]

    async def get(
        self, request: HttpRequest, context: RequestContext, chat_id: str, message_id: str
    ) -> HttpResponseBase:
        conversation = await context.owned_conversation(chat_id)
        version = resolve_sdk_version(request, uistream_settings.SDK_VERSION)
        message = None
        if valid_id(message_id):
            message = await conversation.messages.current().with_client_id(message_id).filter(role="assistant").afirst()
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
