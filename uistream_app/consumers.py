"""The WebSocket transport: ai@7's ``WebSocketChatTransport``, served by Channels.

``ChatConsumer`` is what a project routes (``uistream_app.routing``) and
subclasses: it has ``ChatView``'s hooks (``get_model``, ``get_tools``,
``get_system_prompt``, ``get_source``… from ``ChatRunMixin``) and starts
runs the same way (``start_run``, then ``execute_run`` in a task of its
own). It never encodes anything itself (DESIGN.md §6): each request is one
subscriber of the live-run broker, and what the broker delivers goes out as
frames. The frame vocabulary is ai@7's (``src/ui/websocket-chat-transport.ts``
of ai 7.0.173 is the truth; the TypedDicts below write it down once);
``ChatFrameRenderer`` turns canonical chunks into frame text and is pure.

Protocol rules, in the order a frame meets them:

1. A text frame holds one JSON object. A binary frame, text that is not
   JSON, or an object the transport's own ``safeValidateWebSocketChatTransportRequest``
   would refuse closes the socket with 1008 (policy violation): a
   ``type`` of ``send``, ``resume`` or ``abort``; a string ``requestId``;
   for ``send`` and ``resume`` a string ``id``, ``headers`` an object of
   strings and ``body`` an object; for ``resume`` an absent or
   non-negative integer ``lastSequence``; for ``send`` a ``trigger`` of
   ``submit-message`` / ``regenerate-message``, an absent or string
   ``messageId`` and ``messages`` a list of objects with a string ``id``,
   a ``role`` and a ``parts`` list. Deliberate additions: a frame longer
   than ``max_frame_bytes`` (``UISTREAM["MAX_REQUEST_BYTES"]``) closes with
   1009 (message too big), and a ``requestId`` longer than 256 characters,
   or one already in use on this socket, closes with 1008 (every response
   frame repeats it; two requests under one id would mix). Under daphne
   the codes arrive as 4008 and 4009: autobahn, daphne's WebSocket layer,
   lets an application close only with 1000 or 3000-4999, so the consumer
   falls back to the private-use twin of the code it meant (a 1008 there
   would become daphne's 1011, "internal error", which says the opposite).
2. What a send *says* is the server's business, as on HTTP: the request is
   parsed by ``parse_chat_request`` (the frame's ``body`` object plays the
   part of useChat's extra body keys) and ``check_request``; a refusal
   (bad message, someone else's chat, a reply still streaming…) is an
   ``error`` frame for that ``requestId`` with the reason as
   ``errorText``, nothing written, and the socket stays open. "Not found"
   has one text whatever was not found, so someone else's chat and a
   missing one read the same.
3. ``send`` starts a run and streams it: ``start``, then ``chunk`` frames
   with ``sequence`` from 0 and no gaps (the broker's numbering, so a
   resume numbers the same chunk the same), then ``end``. A run that fails
   says so in band (a masked ``error`` chunk) and still ends with ``end``.
4. ``resume`` replays the chat's active run from sequence 0 (or from
   ``lastSequence + 1`` when a client sends one) with its original
   ``messageId``, then follows it live, then ``end``. When there is
   nothing to resume, the chat is someone else's, or the id is not even
   well formed, the answer is ``no-active``. ``start`` goes out with the
   first chunk, so a run that ends in between is ``no-active`` too.
5. ``abort`` of a ``send`` stops the run that send started (stored as
   *stopped*, as the stop endpoint does) and ends its frames. ``abort``
   of a ``resume`` only ends that subscription: a ``Chat`` aborts its
   resume request whenever it starts another resume (React's StrictMode
   mounts twice), so treating it as stop would stop runs nobody asked to
   stop. ``abort`` of an unknown or finished request is ignored (it
   crossed the ``end`` on the wire).
6. Each request is a task of its own: ``receive`` only validates and
   dispatches, so an ``abort``, or a second chat on the same socket, is
   handled while a run streams. Nor does a frame wait on the database:
   Channels' per-message hop to the database thread (closing stale
   connections) is made by the request tasks instead. At most
   ``max_requests`` requests per socket at once (an ``error`` frame
   beyond that).
7. A socket that goes away is not a stop: the runs it started follow
   ``UISTREAM["ON_DISCONNECT"]`` (``cancel``: stored as *cancelled*;
   ``finish``: the run completes, and another socket can resume it).

Who acts: ``scope["user"]`` when authenticated (``AuthMiddlewareStack``),
else, with ``UISTREAM["ALLOW_ANONYMOUS"]``, the Django session of the
handshake's cookie, verified against the session store. A socket can't
set a cookie, so an anonymous socket *without* a session can't own
anything: it may connect (a ``resume`` answers ``no-active``), but a
``send`` gets an ``error`` frame until the page has a session (the HTTP
``chat`` endpoint makes one on the first message). Without
``ALLOW_ANONYMOUS`` an anonymous socket is refused at the handshake (HTTP
403). CSRF does not apply to WebSockets; the Origin check does:
the demo wraps the routes in ``AllowedHostsOriginValidator``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine, Iterable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Final, Literal, NotRequired, TypedDict

import orjson
from asgiref.sync import sync_to_async
from channels.consumer import get_handler_name  # type: ignore[import-untyped]
from channels.db import aclose_old_connections  # type: ignore[import-untyped]
from channels.generic.websocket import AsyncJsonWebsocketConsumer  # type: ignore[import-untyped]

from .chat import ChatRunMixin
from .chat_request import BadRequest, ChatRequest, parse_chat_request, valid_id
from .conf import settings as uistream_settings
from .live import BrokerError, get_broker
from .models import Conversation
from .protocol.ui.chunks import Chunk
from .protocol.ui.render import UIStreamRenderer

__all__ = [
    "CLOSE_MESSAGE_TOO_BIG",
    "CLOSE_POLICY_VIOLATION",
    "PRIVATE_CLOSE_BASE",
    "AbortFrame",
    "ChatConsumer",
    "ChatFrameRenderer",
    "FrameError",
    "ResumeFrame",
    "SendFrame",
    "check_frame",
]

logger = logging.getLogger("uistream_app.consumers")

#: RFC 6455 close codes the consumer uses.
CLOSE_POLICY_VIOLATION: Final = 1008
CLOSE_MESSAGE_TOO_BIG: Final = 1009
#: Where a server refuses 1008/1009 from an application (daphne: autobahn
#: accepts only 1000 and 3000-4999), the consumer closes with 4008/4009.
PRIVATE_CLOSE_BASE: Final = 4000

MAX_REQUEST_ID_LENGTH: Final = 256
MAX_SEQUENCE: Final = 2**53 - 1  # Number.isSafeInteger
TRIGGERS: Final = ("submit-message", "regenerate-message")
ROLES: Final = ("system", "user", "assistant")
NOT_FOUND_TEXT: Final = "chat or message not found"

# -- the wire: client → server -------------------------------------------------------


class SendFrame(TypedDict):
    type: Literal["send"]
    requestId: str
    id: str
    trigger: Literal["submit-message", "regenerate-message"]
    messageId: NotRequired[str]
    messages: list[dict[str, Any]]
    headers: dict[str, str]
    body: dict[str, Any]
    metadata: NotRequired[Any]


class ResumeFrame(TypedDict):
    type: Literal["resume"]
    requestId: str
    id: str
    lastSequence: NotRequired[int]
    headers: dict[str, str]
    body: dict[str, Any]
    metadata: NotRequired[Any]


class AbortFrame(TypedDict):
    type: Literal["abort"]
    requestId: str


# -- the wire: server → client (what ChatFrameRenderer writes) ----------------------


class StartFrame(TypedDict):
    type: Literal["start"]
    requestId: str


class ChunkFrame(TypedDict):
    type: Literal["chunk"]
    requestId: str
    sequence: int
    chunk: Chunk


class EndFrame(TypedDict):
    type: Literal["end"]
    requestId: str


class ErrorFrame(TypedDict):
    type: Literal["error"]
    requestId: str
    errorText: str


class NoActiveFrame(TypedDict):
    type: Literal["no-active"]
    requestId: str


class FrameError(ValueError):
    """A client frame the protocol refuses (rule 1): the socket closes with
    ``code``."""

    def __init__(self, message: str, code: int = CLOSE_POLICY_VIOLATION) -> None:
        super().__init__(message)
        self.code = code


def _is_sequence(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_SEQUENCE


def check_frame(frame: object) -> SendFrame | ResumeFrame | AbortFrame:
    """``frame`` (decoded JSON) as a request frame, or ``FrameError`` (rule 1)."""
    if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
        raise FrameError("a frame is a JSON object with a string type")
    kind = frame["type"]
    if kind not in ("send", "resume", "abort"):
        raise FrameError(f"unknown frame type {kind[:40]!r}")
    request_id = frame.get("requestId")
    if not isinstance(request_id, str):
        raise FrameError(f"{kind}: requestId must be a string")
    if len(request_id) > MAX_REQUEST_ID_LENGTH:
        raise FrameError(f"{kind}: requestId is longer than {MAX_REQUEST_ID_LENGTH} characters")
    if kind == "abort":
        return frame  # type: ignore[return-value]
    headers = frame.get("headers")
    if (
        not isinstance(frame.get("id"), str)
        or not isinstance(headers, dict)
        or not all(isinstance(v, str) for v in headers.values())
        or not isinstance(frame.get("body"), dict)
    ):
        raise FrameError(f"{kind}: id must be a string, headers an object of strings and body an object")
    if kind == "resume":
        if "lastSequence" in frame and not _is_sequence(frame["lastSequence"]):
            raise FrameError("resume: lastSequence must be a non-negative integer")
        return frame  # type: ignore[return-value]
    if frame.get("trigger") not in TRIGGERS:
        raise FrameError(f"send: trigger must be one of {', '.join(TRIGGERS)}")
    if "messageId" in frame and not isinstance(frame["messageId"], str):
        raise FrameError("send: messageId must be a string when present")
    messages = frame.get("messages")
    if not isinstance(messages, list):
        raise FrameError("send: messages must be a list of UI messages")
    for i, message in enumerate(messages):
        if (
            not isinstance(message, dict)
            or not isinstance(message.get("id"), str)
            or message.get("role") not in ROLES
            or not isinstance(message.get("parts"), list)
        ):
            raise FrameError(f"send: messages[{i}] must be a UI message (string id, role, parts list)")
    return frame  # type: ignore[return-value]


# -- rendering --------------------------------------------------------------------


def _json(value: str) -> str:
    return orjson.dumps(value).decode()


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode_json_text(text: str) -> Any:
    """JSON text as ``JSON.parse`` reads it. orjson first; the standard
    library for what only orjson refuses (a lone surrogate escape, which
    ``JSON.stringify`` writes): such a frame is well formed, and what it
    says is refused later, with an ``error`` frame."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except ValueError:
        raise FrameError("a frame is JSON") from None


class ChatFrameRenderer:
    """The server frames of one request, as JSON text. Pure: no I/O.

    A chunk's JSON is the ai@7 SSE renderer's (``UIStreamRenderer(7)``), so
    both wires carry the same bytes for the same chunk, including what
    orjson refuses and the renderer still writes.
    """

    __slots__ = ("_chunk_head", "_render", "request_id")

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self._chunk_head = '{"type":"chunk","requestId":' + _json(request_id) + ',"sequence":'
        self._render = UIStreamRenderer(7).render

    def _simple(self, kind: str) -> str:
        return '{"type":"' + kind + '","requestId":' + _json(self.request_id) + "}"

    def start(self) -> str:
        return self._simple("start")

    def end(self) -> str:
        return self._simple("end")

    def no_active(self) -> str:
        return self._simple("no-active")

    def error(self, error_text: str) -> str:
        return '{"type":"error","requestId":' + _json(self.request_id) + ',"errorText":' + _json(error_text) + "}"

    def chunks(self, first_seq: int, chunks: Iterable[Chunk]) -> list[str]:
        """One ``chunk`` frame per chunk, numbered from ``first_seq``."""
        head = self._chunk_head
        render = self._render
        # render() is `data: <json>\n\n`: the JSON is bytes 6 to -2.
        return [
            head + str(seq) + ',"chunk":' + render(chunk)[6:-2].decode() + "}"
            for seq, chunk in enumerate(chunks, first_seq)
        ]


# -- the consumer -------------------------------------------------------------------


@dataclass(eq=False)
class _Request:
    """One request of the socket, from its frame to its last frame."""

    request_id: str
    kind: Literal["send", "resume"]
    chat_id: str
    task: asyncio.Task[None] | None = None
    #: The run it streams, once known.
    run_id: str | None = None
    #: Forwarding frames: cancelling the task now loses nothing.
    streaming: bool = False
    aborted: bool = False


def _verified_session_key(session: Any) -> str | None:
    # Loading drops a key the store does not know (expired, forged): only a
    # real session owns anything.
    session.keys()
    key = session.session_key
    return key if isinstance(key, str) and key else None


class ChatConsumer(ChatRunMixin, AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """ai@7's ``WebSocketChatTransport`` endpoint (see the module docstring).

    Route it under an ``AuthMiddlewareStack`` (for ``scope["user"]`` and
    ``scope["session"]``) and an Origin check::

        AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))

    Subclass it like ``ChatView``: set ``model`` / ``tools`` /
    ``system_prompt`` or override the ``get_*`` hooks; the defaults come
    from ``UISTREAM``.
    """

    #: None: ``UISTREAM["ALLOW_ANONYMOUS"]``.
    allow_anonymous: bool | None = None
    #: None: ``UISTREAM["MAX_REQUEST_BYTES"]``.
    max_frame_bytes: int | None = None
    #: Requests one socket may have open at once.
    max_requests: int = 16

    owner: dict[str, Any]

    def __init__(self, **initkwargs: Any) -> None:
        for key, value in initkwargs.items():
            setattr(self, key, value)
        super().__init__()
        self.owner = {"owner": None, "session_key": None}
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

    def get_allow_anonymous(self) -> bool:
        """Whether a socket with no logged-in user may chat (by its session).
        Called at the handshake."""
        if self.allow_anonymous is not None:
            return self.allow_anonymous
        return bool(uistream_settings.ALLOW_ANONYMOUS)

    async def get_owner(self) -> dict[str, Any] | None:
        """Who this socket acts for, once, at the handshake: ``{"owner": user}``,
        ``{"owner": None, "session_key": key}`` (``key`` None: an anonymous
        socket without a session), or None to refuse the socket. Override
        to authenticate another way (a token in the query string, say)."""
        user = self.scope.get("user")
        if user is not None and user.is_authenticated:
            return {"owner": user}
        if not self.get_allow_anonymous():
            return None
        session = self.scope.get("session")
        key = await sync_to_async(_verified_session_key)(session) if session is not None else None
        return {"owner": None, "session_key": key}

    def get_chat_request(self, frame: SendFrame) -> ChatRequest:
        """The ``ChatRequest`` of a send frame: the frame's ``id``,
        ``messages``, ``trigger`` and ``messageId``, with its ``body``
        object as the extra keys (as useChat's ``body`` option is on
        HTTP), through the same strict parsing as HTTP. Override to read
        the frame's ``headers`` or ``metadata``. Raises ``BadRequest``."""
        data: dict[str, Any] = dict(frame["body"])
        data.update(id=frame["id"], messages=frame["messages"], trigger=frame["trigger"])
        if "messageId" in frame:
            data["messageId"] = frame["messageId"]
        try:
            body = orjson.dumps(data)
        except orjson.JSONEncodeError:
            raise BadRequest("the request holds text that is not valid Unicode (a lone surrogate)") from None
        # The frame was within max_frame_bytes, and this is part of it.
        return parse_chat_request(body, max_bytes=max(len(body), self.get_max_frame_bytes()))

    def get_max_frame_bytes(self) -> int:
        """The largest frame accepted (rule 1), in UTF-8 bytes."""
        return int(self.max_frame_bytes if self.max_frame_bytes is not None else uistream_settings.MAX_REQUEST_BYTES)

    def get_error_text(self, exc: BadRequest) -> str:
        """The ``errorText`` of a refused send (rule 2). Override to word
        refusals for your users; keep "not found" one answer."""
        return NOT_FOUND_TEXT if exc.code == "not_found" else exc.message

    # -- the socket -------------------------------------------------------------------

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels' dispatch less its database hop: Channels closes stale
        connections in the shared database thread before *every* message,
        so a frame (an abort) would queue behind every run's log writes.
        The request tasks make that hop instead, once per send or resume
        (rule 6)."""
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
            await self.send(text_data=renderer.error(f"at most {self.max_requests} requests at once per socket"))
            return
        request = _Request(request_id, frame["type"], frame["id"])
        self._requests[request_id] = request
        if frame["type"] == "send":
            work = self.serve_send(request, frame, renderer)
        else:
            work = self.serve_resume(request, frame, renderer)
        request.task = asyncio.create_task(self._guard(work, renderer), name=f"uistream-ws-{frame['type']}")
        request.task.add_done_callback(self._forget(request))

    def decode_frame(self, text_data: str | None) -> SendFrame | ResumeFrame | AbortFrame:
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
        await aclose_old_connections()
        try:
            chat = self.get_chat_request(frame)
            model = self.get_model()
            self.check_request(chat)
            if self.owner.get("owner") is None and not self.owner.get("session_key"):
                raise BadRequest(
                    "anonymous chats belong to a session, and this socket has none: "
                    "open the page over HTTP first (its first chat message makes one)",
                    code="no_session",
                    status=401,
                )
            started = await self.start_run(chat, self.owner, 7, model)
        except BadRequest as exc:
            await self.send(text_data=renderer.error(self.get_error_text(exc)))
            return
        request.run_id = str(started.run.pk)
        if request.aborted:
            await self._stop(request)
            return
        completed = False
        try:
            if not self._closed:
                completed = await self._forward(request, renderer, 0)
        finally:
            if not completed and not request.aborted and uistream_settings.ON_DISCONNECT == "cancel":
                started.task.cancel()

    async def serve_resume(self, request: _Request, frame: ResumeFrame, renderer: ChatFrameRenderer) -> None:
        """Rule 4 for one resume."""
        await aclose_old_connections()
        run_id = await self._active_run_of(frame["id"])
        if run_id is None or request.aborted or self._closed:
            if not request.aborted and not self._closed:
                await self.send(text_data=renderer.no_active())
            return
        request.run_id = run_id
        last = frame.get("lastSequence")
        await self._forward(request, renderer, 0 if last is None else last + 1)

    async def _active_run_of(self, chat_id: str) -> str | None:
        """The chat's active run when it is this socket's owner's, else None
        (missing and someone else's look the same)."""
        owner = self.owner
        if not valid_id(chat_id) or (owner.get("owner") is None and not owner.get("session_key")):
            return None
        if not await Conversation.objects.filter(pk=chat_id, **owner).aexists():
            return None
        return await get_broker().active_run(chat_id)

    async def _forward(self, request: _Request, renderer: ChatFrameRenderer, from_seq: int) -> bool:
        """Send the run's chunks from ``from_seq`` to its end as frames, then
        ``end``; True when the run's stream was delivered whole. A resume
        that finds nothing to replay answers ``no-active``."""
        assert request.run_id is not None
        send = self.send
        request.streaming = True  # from here on, cancelling the task loses nothing
        subscription = get_broker().subscribe_batches(request.run_id, from_seq)
        started = False
        try:
            async for first, chunks in subscription:
                if not started:
                    started = True
                    await send(text_data=renderer.start())
                for text in renderer.chunks(first, chunks):
                    await send(text_data=text)
        except BrokerError:
            logger.exception("the broker failed while run %s streamed to a socket", request.run_id)
            await send(text_data=renderer.error(uistream_settings.ERROR_TEXT))
            return False
        finally:
            aclose = getattr(subscription, "aclose", None)
            if aclose is not None:
                await aclose()
        if not started and request.kind == "resume":
            await send(text_data=renderer.no_active())
            return True
        if not started:
            await send(text_data=renderer.start())
        await send(text_data=renderer.end())
        return True

    async def _stop(self, request: _Request) -> None:
        """Stop the run a send started, if it is still the chat's active one
        (not a later run of another tab)."""
        broker = get_broker()
        try:
            if request.run_id is not None and await broker.active_run(request.chat_id) == request.run_id:
                await broker.request_stop(request.chat_id)
        except BrokerError:
            logger.exception("could not stop run %s", request.run_id)

    # -- bookkeeping --------------------------------------------------------------------

    async def _guard(self, work: Coroutine[Any, Any, None], renderer: ChatFrameRenderer) -> None:
        """A failure of ours ends the request with a masked ``error`` frame
        (the detail goes to the log), as a run's failure is masked."""
        try:
            await work
        except Exception:
            logger.exception("a chat socket request failed")
            if not self._closed:
                with suppress(Exception):  # the socket itself may be what failed
                    await self.send(text_data=renderer.error(uistream_settings.ERROR_TEXT))

    def _forget(self, request: _Request) -> Callable[[asyncio.Task[None]], None]:
        def done(task: asyncio.Task[None]) -> None:
            if self._requests.get(request.request_id) is request:
                del self._requests[request.request_id]

        return done

    def _spawn(self, work: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(work)
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)
