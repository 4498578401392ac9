"""The WebSocket transport: ai@7's ``WebSocketChatTransport``, served by Channels.

``ChatConsumer`` is what a project routes (``uistream_app.routing``) and
subclasses: it has ``ChatView``'s hooks (``ChatHooks``), the same policies
(permission and throttle classes, applied to each send through a
``SocketRequest``) and starts runs through the same store and runner; each
request is one subscriber of the live-run broker. The frames are
``protocol.ws``'s; the rules it follows are docs/protocols.md, "WebSocket
chat transport" (rule numbers below are theirs).

Who acts: ``scope["user"]`` when authenticated (``AuthMiddlewareStack``),
else, with ``UISTREAM["ALLOW_ANONYMOUS"]``, the Django session of the
handshake's cookie, verified against the session store. A socket can't set
a cookie, so an anonymous socket without a session owns nothing until the
page has one. Where anonymous chats are off, an anonymous socket is still
accepted and owns nothing: each of its sends and resumes is refused by the
permission classes with the ``error`` frame (``not_authenticated``) whose
text names the switch (``policies.anonymous_refusal``), which a handshake
refused with a 403 could not say (a browser sees only a close, 1006).
CSRF does not apply to WebSockets; the Origin check does (the demo wraps
the routes in ``uistream_app.asgi.CSRFOriginValidator``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from asgiref.sync import sync_to_async

from ..conf import settings as uistream_settings
from ..errors import NOT_FOUND_TEXT, BadRequest, Codes, NotAuthenticated, import_extra, not_found
from ..hooks import ChatHooks, TurnContext
from ..lifecycle.steering_messages import send_steering
from ..live import BrokerError, get_broker
from ..models import Conversation
from ..owners import Owner
from ..policies import Policies, SocketRequest, anonymous_refusal, check_policies
from ..protocol.jsonbody import has_surrogate_escape
from ..protocol.ui.chunks import TERMINAL_CHUNKS, Chunk
from ..protocol.ws import (
    CLOSE_MESSAGE_TOO_BIG,
    CLOSE_POLICY_VIOLATION,
    PRIVATE_CLOSE_BASE,
    AbortFrame,
    ChatFrameRenderer,
    FrameError,
    ResumeFrame,
    SendFrame,
    SteerFrame,
    check_frame,
    decode_json_text,
)
from .chat_request import ChatRequest, chat_turn, check_chat_request, check_steering_request, valid_id

# Channels is the extra ``channels``: without it, importing this module (and
# ``consumers``, ``routing``) says "pip install 'django-uistream[channels]'".
import_extra("channels", "channels")

from channels import db as channels_db  # type: ignore[import-untyped]  # noqa: E402
from channels.consumer import get_handler_name  # type: ignore[import-untyped]  # noqa: E402
from channels.generic.websocket import AsyncJsonWebsocketConsumer  # type: ignore[import-untyped]  # noqa: E402

__all__ = ["ChatConsumer"]

logger = logging.getLogger("uistream_app.consumers")


@dataclass(eq=False)
class _Request:
    """One request of the socket, from its frame to its last frame."""

    request_id: str
    kind: Literal["send", "resume", "steer", "queue"]
    chat_id: str
    task: asyncio.Task[None] | None = None
    #: The run it streams, once known, and its conversation's key (what
    #: the broker knows the chat by: chat ids are only unique per owner).
    run_id: str | None = None
    conversation_id: str | None = None
    #: Forwarding frames: cancelling the task now loses nothing.
    streaming: bool = False
    aborted: bool = False
    #: The frame held a lone surrogate escape (text that is not Unicode).
    unpaired_surrogates: bool = False


def _has_lone_surrogate(value: Any) -> bool:
    """Whether a decoded frame holds a surrogate code point (which only an
    unpaired escape such as ``"\\ud800"`` decodes to). Iterative: a frame
    nested a thousand levels deep must not exhaust the stack."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _close_then_check(request: SocketRequest, view: Any, permissions: list[type], throttles: list[type]) -> None:
    # Looked up on Channels' module when called: its test communicator
    # replaces it there while a test's transaction must stay open.
    channels_db.close_old_connections()
    if permissions or throttles:
        check_policies(request, view, permissions, throttles)


def _check_throttles(request: SocketRequest, consumer: Any) -> None:
    throttles = consumer.get_steering_throttle_classes()
    if throttles:
        check_policies(request, consumer, [], throttles)


def _verified_session_key(session: Any) -> str | None:
    # Loading drops a key the store does not know (expired, forged): only a
    # real session owns anything.
    session.keys()
    key = session.session_key
    return key if isinstance(key, str) and key else None


class ChatConsumer(ChatHooks, Policies, AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """ai@7's ``WebSocketChatTransport`` endpoint (see the module docstring).

    Route it under an ``AuthMiddlewareStack`` (for ``scope["user"]`` and
    ``scope["session"]``) and an Origin check::

        CSRFOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))

    Subclass it like ``ChatView``: set ``model`` / ``tools`` /
    ``system_prompt`` or override the ``get_*`` hooks; the defaults come
    from ``UISTREAM``.
    """

    #: None: ``UISTREAM["MAX_REQUEST_BYTES"]``.
    max_frame_bytes: int | None = None
    #: Requests one socket may have open at once.
    max_requests: int = 16
    #: Sends start runs: the run throttles apply to them (``Policies``).
    starts_runs: ClassVar[bool] = True

    owner: Owner

    def __init__(self, **initkwargs: Any) -> None:
        for key, value in initkwargs.items():
            setattr(self, key, value)
        super().__init__()
        self.owner = Owner()
        self._requests: dict[str, _Request] = {}
        self._side_tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    @classmethod
    def as_asgi(cls, **initkwargs: Any) -> Any:
        """The ASGI application of the consumer. ``initkwargs`` set the
        consumer's attributes per route, as ``as_view`` does
        (``ChatConsumer.as_asgi(model=..., system_prompt=...)``); a name the
        class lacks is a ``TypeError`` here, at import time."""
        for key in initkwargs:
            if not hasattr(cls, key):
                raise TypeError(f"{cls.__name__}.as_asgi() got {key!r}, which is not an attribute of the class.")
        return super().as_asgi(**initkwargs)

    # -- hooks ---------------------------------------------------------------------

    async def get_owner(self) -> Owner | None:
        """Who this socket acts for, once, at the handshake: the user, the
        anonymous session (``Owner()`` without a key: a socket without a
        session, or any anonymous socket where anonymous chats are off,
        which owns nothing and whose requests the permission classes
        refuse), or None to refuse the socket. Override to authenticate
        another way (a token in the query string, say)."""
        user = self.scope.get("user")
        if user is not None and user.is_authenticated:
            return Owner.of_user(user)
        if not self.get_allow_anonymous():
            return Owner()  # accepted, so that its sends learn why they are refused
        session = self.scope.get("session")
        key = await sync_to_async(_verified_session_key)(session) if session is not None else None
        return Owner.of_session(key)

    async def check_policies(self, *, throttle: bool) -> SocketRequest:
        """The permission classes (and, for a send, the throttle classes) of
        the HTTP endpoints, on this socket's user, session and address;
        returns the request they judged (a send's ``TurnContext.request``).
        Its thread first closes the stale database connections, the hop
        Channels makes before every message (rule 6): one hop for both.
        An override that does not call this one closes them itself."""
        request = SocketRequest(self.scope, self.owner.user)
        permissions = self.get_permission_classes()
        throttles = self.get_throttle_classes() if throttle else []
        await sync_to_async(_close_then_check)(request, self, permissions, throttles)
        return request

    def get_chat_request(self, frame: SendFrame) -> ChatRequest:
        """The ``ChatRequest`` of a send frame: the frame's ``id``,
        ``messages``, ``trigger`` and ``messageId``, with its ``body``
        object as the extra keys (as useChat's ``body`` option is on
        HTTP), through the same strict checks as HTTP. Override to read
        the frame's ``headers`` or ``metadata``. Raises ``BadRequest``."""
        data: dict[str, Any] = dict(frame["body"])
        data.update(id=frame["id"], messages=frame["messages"], trigger=frame["trigger"])
        if "messageId" in frame:
            data["messageId"] = frame["messageId"]
        return check_chat_request(data)

    def get_max_frame_bytes(self) -> int:
        """The largest frame accepted (rule 1), in UTF-8 bytes."""
        return int(self.max_frame_bytes if self.max_frame_bytes is not None else uistream_settings.MAX_REQUEST_BYTES)

    def get_error_text(self, exc: BadRequest) -> str:
        """The ``errorText`` of a refused send (rule 2). Override to word
        refusals for your users; keep "not found" one answer."""
        return NOT_FOUND_TEXT if exc.code == Codes.NOT_FOUND else exc.message

    # -- the socket -------------------------------------------------------------------

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels' dispatch less its database hop: Channels closes stale
        connections in the shared database thread before *every* message,
        so a frame (an abort) would queue behind every run's log writes.
        The request tasks make that hop instead, once per send or resume,
        together with the policy check (``check_policies``, rule 6)."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def connect(self) -> None:
        owner = await self.get_owner()
        if owner is None:
            await self.close()  # before accept: the handshake gets a 403
            return
        self.owner = owner
        await self.accept()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        if self._closed:
            return
        try:
            frame = self.decode_frame(text_data)
        except FrameError as exc:
            logger.info("closing a chat socket (%s): %s", exc.code, exc)
            await self._close(exc.code)
            return
        if frame["type"] == "abort":
            self.abort(frame["requestId"])
            return
        request_id = frame["requestId"]
        if request_id in self._requests:
            logger.info("closing a chat socket: requestId %r is already in use", request_id[:40])
            await self._close(CLOSE_POLICY_VIOLATION)
            return
        renderer = ChatFrameRenderer(request_id)
        if len(self._requests) >= self.max_requests:
            await self.send(
                text_data=renderer.error(
                    f"at most {self.max_requests} requests at once per socket", Codes.TOO_MANY_REQUESTS
                )
            )
            return
        # JSON text reaches a lone surrogate only through an escape (the
        # socket's text is Unicode); only then is the frame looked at again.
        text = text_data or ""
        unpaired = frame["type"] == "send" and has_surrogate_escape(text)
        request = _Request(
            request_id, frame["type"], frame["id"], unpaired_surrogates=unpaired and _has_lone_surrogate(frame)
        )
        self._requests[request_id] = request
        if frame["type"] == "send":
            work = self.serve_send(request, frame, renderer)
        elif frame["type"] == "resume":
            work = self.serve_resume(request, frame, renderer)
        else:
            work = self.serve_steering(request, frame, renderer)
        request.task = asyncio.create_task(self._guard(work, renderer), name=f"uistream-ws-{frame['type']}")
        request.task.add_done_callback(self._forget(request))

    def decode_frame(self, text_data: str | None) -> SendFrame | ResumeFrame | AbortFrame | SteerFrame:
        """Rule 1: the frame, or ``FrameError``."""
        if text_data is None:
            raise FrameError("frames are text")
        max_bytes = self.get_max_frame_bytes()
        if len(text_data) > max_bytes // 4 and len(text_data.encode("utf-8", "surrogatepass")) > max_bytes:
            raise FrameError(f"a frame is at most {max_bytes} bytes", CLOSE_MESSAGE_TOO_BIG)
        return check_frame(decode_json_text(text_data))

    def abort(self, request_id: str) -> None:
        """Rule 5. Returns at once; the stop itself is a task."""
        request = self._requests.get(request_id)
        if request is None or request.aborted:
            return
        request.aborted = True
        if request.streaming and request.task is not None:
            request.task.cancel()
        if request.kind == "send" and request.run_id is not None:
            self._spawn(self._stop(request))
        # A send still starting its run stops it as soon as it has one.

    async def disconnect(self, code: int) -> None:
        """Rule 7: end every request; the runs this socket started follow
        ``ON_DISCONNECT``. Requests still starting their run finish that
        first (cancelling it half-way would leave its rows behind)."""
        self._closed = True
        requests = list(self._requests.values())
        for request in requests:
            if request.streaming and request.task is not None:
                request.task.cancel()
        pending = [r.task for r in requests if r.task is not None]
        pending.extend(self._side_tasks)
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    async def _close(self, code: int) -> None:
        self._closed = True
        for request in self._requests.values():
            if request.streaming and request.task is not None:
                request.task.cancel()
        try:
            await self.close(code)
        except Exception:  # noqa: BLE001 - the server's refusal of the code, whatever its class
            # daphne hands the code to autobahn, whose sendClose() takes
            # only 1000 or 3000-4999 from an application (and raises before
            # closing anything): the private-use twin says the same, 4008
            # for 1008.
            await self.close(PRIVATE_CLOSE_BASE + code % 1000)

    # -- requests -----------------------------------------------------------------------

    async def serve_send(self, request: _Request, frame: SendFrame, renderer: ChatFrameRenderer) -> None:
        """Rules 2, 3 and 5 for one send."""
        try:
            socket_request = await self.check_policies(throttle=True)
            if request.unpaired_surrogates:
                # The HTTP endpoints' answer to the same body (orjson refuses it).
                raise BadRequest(
                    "the request holds text that is not valid Unicode (a lone surrogate)", code=Codes.INVALID_JSON
                )
            chat = self.get_chat_request(frame)
            turn = chat_turn(chat)
            if not self.owner.is_known and not self.get_allow_anonymous():
                # Permission classes that let anyone in (AllowAny): the
                # socket still owns nothing, and says why.
                raise NotAuthenticated(anonymous_refusal(self))
            if not self.owner.is_known:
                raise NotAuthenticated(
                    "anonymous chats belong to a session, and this socket has none: "
                    "open the page over HTTP first (its first chat message makes one)",
                    code=Codes.NO_SESSION,
                )
            context = TurnContext(self.owner, chat.chat_id, "websocket", chat.extra, request=socket_request)
            handle = await self.start_turn(turn, context, version=7)
        except BadRequest as exc:
            await self.send(text_data=renderer.error(self.get_error_text(exc), exc.code))
            return
        request.run_id = handle.run_id
        request.conversation_id = str(handle.run.conversation_id)
        if request.aborted:
            await self._stop(request)
            return
        completed = False
        try:
            if not self._closed:
                completed = await self._forward(request, renderer, 0)
        finally:
            if not completed and not request.aborted and uistream_settings.ON_DISCONNECT == "cancel":
                handle.cancel_unless_done()

    async def serve_resume(self, request: _Request, frame: ResumeFrame, renderer: ChatFrameRenderer) -> None:
        """Rule 4 for one resume: a chat that is not this socket's owner's is
        the ``not_found`` error the HTTP resume answers with a 404."""
        try:
            await self.check_policies(throttle=False)
            request.conversation_id = await self._conversation_key(frame["id"])
            run_id = await get_broker().active_run(request.conversation_id)
        except BadRequest as exc:
            if not request.aborted and not self._closed:
                await self.send(text_data=renderer.error(self.get_error_text(exc), exc.code))
            return
        if run_id is None or request.aborted or self._closed:
            if not request.aborted and not self._closed:
                await self.send(text_data=renderer.no_active())
            return
        request.run_id = run_id
        last = frame.get("lastSequence")
        await self._forward(request, renderer, 0 if last is None else last + 1)

    async def serve_steering(self, request: _Request, frame: SteerFrame, renderer: ChatFrameRenderer) -> None:
        """Rule 8: a message for the chat's running answer (``steer`` or
        ``queue``), checked and delivered as ``POST chat/<id>/steer`` does
        it; the answer is one ``steering-outcome`` frame, or an ``error``
        frame with the HTTP refusal's code. An ``abort`` of it only stops
        waiting: the message stays sent."""
        try:
            await self.check_policies(throttle=False)
            await sync_to_async(_check_throttles)(SocketRequest(self.scope, self.owner.user), self)
            data: dict[str, Any] = {"message": frame["message"]}
            if "steeringId" in frame:
                data["id"] = frame["steeringId"]
            submission = check_steering_request(data, kind=frame["type"])
            conversation = await self._owned_conversation(frame["id"])
            request.streaming = True  # only waiting from here: cancelling loses nothing
            outcome = await send_steering(conversation, submission)
        except BadRequest as exc:
            if not request.aborted and not self._closed:
                await self.send(text_data=renderer.error(self.get_error_text(exc), exc.code))
            return
        if not request.aborted and not self._closed:
            await self.send(text_data=renderer.steering_outcome(outcome.to_wire()))

    async def _owned_conversation(self, chat_id: str) -> Conversation:
        conversation = None
        if valid_id(chat_id):
            conversation = await Conversation.objects.owned_by(self.owner).with_client_id(chat_id).afirst()
        if conversation is None:
            raise not_found()
        return conversation

    async def _conversation_key(self, chat_id: str) -> str:
        """The key of this socket's owner's chat ``chat_id``; ``not_found``
        when the owner has none of that id (another owner's is not looked at)."""
        key = None
        if valid_id(chat_id):
            owned = Conversation.objects.owned_by(self.owner).with_client_id(chat_id)
            key = await owned.values_list("pk", flat=True).afirst()
        if key is None:
            raise not_found()
        return key

    async def _forward(self, request: _Request, renderer: ChatFrameRenderer, from_seq: int) -> bool:
        """Send the run's chunks from ``from_seq`` to its end as frames, then
        ``end``; True when the request ended on its own (the run's stream
        delivered whole, or a broker failure reported), False when it was
        cut. A resume that finds nothing to replay answers ``no-active``."""
        assert request.run_id is not None
        send = self.send
        request.streaming = True  # from here on, cancelling the task loses nothing
        subscription = get_broker().subscribe_batches(request.run_id, from_seq)
        started = False
        last: Chunk | None = None
        try:
            async for first, chunks in subscription:
                if not started:
                    started = True
                    await send(text_data=renderer.start())
                if chunks:
                    last = chunks[-1]
                for text in renderer.chunks(first, chunks):
                    await send(text_data=text)
        except BrokerError:
            # Redis gone: the request ends with a masked error the client
            # sees at once (the HTTP stream's in-band error chunk).
            logger.exception("the broker failed while run %s streamed to a socket", request.run_id)
            await send(text_data=renderer.error(uistream_settings.ERROR_TEXT, Codes.BROKER_UNAVAILABLE))
            # Not a disconnect, so ON_DISCONNECT does not apply: the run's
            # own failed publish settles it (``lifecycle.runner.execute_run``).
            return True
        finally:
            aclose = getattr(subscription, "aclose", None)
            if aclose is not None:
                await aclose()
        if not started and request.kind == "resume":
            await send(text_data=renderer.no_active())
            return True
        if not started:
            await send(text_data=renderer.start())
        if last is not None and last.get("type") not in TERMINAL_CHUNKS:
            # The run's stream ended without its end (as render_subscription
            # says it over HTTP): the client is told, not left with an ``end``.
            await send(text_data=renderer.error(uistream_settings.ERROR_TEXT, Codes.RUN_LOST))
            return True
        await send(text_data=renderer.end())
        return True

    async def _stop(self, request: _Request) -> None:
        """Stop the run a send started, if it is still the chat's active one
        (not a later run of another tab)."""
        broker = get_broker()
        try:
            key = request.conversation_id
            if request.run_id is not None and key is not None and await broker.active_run(key) == request.run_id:
                await broker.request_stop(key)
        except BrokerError:
            logger.exception("could not stop run %s", request.run_id)

    # -- bookkeeping --------------------------------------------------------------------

    async def _guard(self, work: Coroutine[Any, Any, None], renderer: ChatFrameRenderer) -> None:
        """A failure of ours ends the request with a masked ``error`` frame
        (the detail goes to the log), as a run's failure is masked."""
        try:
            await work
        except Exception as exc:
            logger.exception("a chat socket request failed")
            # A broker that fails before the request streams is the HTTP
            # endpoints' 503: the same code, nothing written.
            code = Codes.BROKER_UNAVAILABLE if isinstance(exc, BrokerError) else Codes.INTERNAL
            if not self._closed:
                with suppress(Exception):  # the socket itself may be what failed
                    await self.send(text_data=renderer.error(uistream_settings.ERROR_TEXT, code))

    def _forget(self, request: _Request) -> Callable[[asyncio.Task[None]], None]:
        def done(task: asyncio.Task[None]) -> None:
            if self._requests.get(request.request_id) is request:
                del self._requests[request.request_id]

        return done

    def _spawn(self, work: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(work)
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)
