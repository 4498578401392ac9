"""The chat consumer: ai@7's WebSocket chat transport, served by Channels.

Two layers. The protocol rules run in this process through Channels'
``WebsocketCommunicator`` (the consumer behind ``AuthMiddlewareStack``, as
routed). Then the real ai@7 ``WebSocketChatTransport``, driven by the SDK's
own ``AbstractChat`` in Node (``tests/js/ws_client.mjs``), talks to daphne
in its own process, sharing the test database (a SQLite file): what the
client built must be what was stored.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from importlib import import_module
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.auth import AuthMiddlewareStack
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client, override_settings
from django.urls import path

from uistream_app.consumers import ChatConsumer
from uistream_app.errors import NOT_FOUND_TEXT
from uistream_app.models import Conversation, Message, Run
from uistream_app.protocol.ui.reader import UIMessageReader
from uistream_app.protocol.ws import ChatFrameRenderer, FrameError, check_frame
from uistream_app.recording import read_log
from uistream_app.routing import websocket_urlpatterns
from uistream_app.testing import ScriptedModel, user_message

from .conftest import JS_DIR
from .live.conftest import redis_config  # noqa: F401  (fixture)
from .server import subprocess_server

db = pytest.mark.django_db(transaction=True)
DEMO = {
    "ALLOW_ANONYMOUS": True,
    "MODEL": "demo_project.demo_model.make_model",
    "TOOLS": [
        "demo_project.demo_model.get_weather",
        "demo_project.demo_model.calculate",
        "demo_project.demo_model.send_email",
    ],
}


@pytest.fixture(autouse=True)
def fast_demo_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "2")


# -- helpers -------------------------------------------------------------------------


def routed(*patterns: Any) -> Any:
    """The consumer as the demo routes it, minus the Origin check."""
    return AuthMiddlewareStack(URLRouter(list(patterns) or websocket_urlpatterns))


def ended(frames: list[dict[str, Any]]) -> bool:
    return bool(frames) and frames[-1]["type"] in ("end", "error", "no-active")


class Socket:
    """One page's socket: the frames it received, by request id."""

    def __init__(
        self,
        cookie: str | None = None,
        *,
        app: Any = None,
        origin: bytes | None = b"http://127.0.0.1",
        host: bytes = b"127.0.0.1",
    ):
        headers = [(b"host", host)]
        if origin is not None:
            headers.append((b"origin", origin))
        if cookie is not None:
            headers.append((b"cookie", cookie.encode()))
        self.communicator = WebsocketCommunicator(app or routed(), "/ws/chat/", headers=headers)
        self.frames: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.close_code: int | None = None
        self.connected = False
        self.gone = False

    async def __aenter__(self) -> Socket:
        self.connected, _ = await self.communicator.connect(timeout=10)
        return self

    async def __aexit__(self, *exc: object) -> None:
        # Also after the server closed: the consumer ends on the disconnect.
        if self.connected and not self.gone:
            await self.disconnect()

    async def send(self, frame: dict[str, Any] | str | bytes) -> None:
        if isinstance(frame, dict):
            await self.communicator.send_json_to(frame)
        elif isinstance(frame, str):
            await self.communicator.send_to(text_data=frame)
        else:
            await self.communicator.send_to(bytes_data=frame)

    async def pump(self) -> None:
        message = await self.communicator.receive_output(timeout=20)
        if message["type"] == "websocket.close":
            self.close_code = message.get("code")
            return
        frame = json.loads(message["text"])
        self.frames[frame["requestId"]].append(frame)

    async def until(
        self, request_id: str, predicate: Callable[[list[dict[str, Any]]], bool] = ended
    ) -> list[dict[str, Any]]:
        while not predicate(self.frames[request_id]):
            assert self.close_code is None, f"the socket closed ({self.close_code})"
            await self.pump()
        return self.frames[request_id]

    async def closed(self) -> int:
        while self.close_code is None:
            await self.pump()
        return self.close_code

    async def disconnect(self) -> None:
        """The page goes away (no close frame from the server)."""
        self.gone = True
        await self.communicator.disconnect(timeout=10)


def send_frame(request_id: str, chat_id: str, text: str = "hello", message_id: str = "u1", **extra: Any) -> dict:
    return {
        "type": "send",
        "requestId": request_id,
        "id": chat_id,
        "trigger": "submit-message",
        "messages": [user_message(text, id=message_id)],
        "headers": {},
        "body": {},
        **extra,
    }


def resume_frame(request_id: str, chat_id: str, **extra: Any) -> dict[str, Any]:
    return {"type": "resume", "requestId": request_id, "id": chat_id, "headers": {}, "body": {}, **extra}


def chunks_of(frames: list[dict[str, Any]], first: int = 0) -> list[dict[str, Any]]:
    """The chunks of a request's frames, checking their numbering: from
    ``first``, no gap, no repeat."""
    chunk_frames = [f for f in frames if f["type"] == "chunk"]
    assert [f["sequence"] for f in chunk_frames] == list(range(first, first + len(chunk_frames)))
    return [f["chunk"] for f in chunk_frames]


def text_deltas(frames: list[dict[str, Any]]) -> int:
    return sum(1 for f in frames if f["type"] == "chunk" and f["chunk"]["type"] == "text-delta")


def text_of(chunks: list[dict[str, Any]]) -> str:
    return "".join(c["delta"] for c in chunks if c["type"] == "text-delta")


def session_cookie() -> str:
    store = import_module(settings.SESSION_ENGINE).SessionStore()
    store.create()
    return f"{settings.SESSION_COOKIE_NAME}={store.session_key}"


def user_cookie(username: str) -> tuple[Any, str]:
    user = get_user_model().objects.create_user(username, password="pw")
    client = Client()
    client.force_login(user)
    return user, f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


asession_cookie = sync_to_async(session_cookie)
auser_cookie = sync_to_async(user_cookie)


async def runs_finished() -> None:
    """Until no run is running: runs end in tasks of their own, and only
    the database says when they are stored."""
    for _ in range(1000):  # 20 s
        if not await Run.objects.filter(status="running").aexists():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out waiting for the runs to be stored")


def stored_log(run: Run) -> list[dict[str, Any]]:
    return [entry.chunk for entry in read_log(run)]


def read(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    reader = UIMessageReader()
    for chunk in chunks:
        reader.feed(chunk)
    return reader.message


# -- frames, without a socket ------------------------------------------------------------


def test_frames_are_written_as_the_transport_reads_them() -> None:
    renderer = ChatFrameRenderer('r"1')
    assert json.loads(renderer.start()) == {"type": "start", "requestId": 'r"1'}
    assert json.loads(renderer.end()) == {"type": "end", "requestId": 'r"1'}
    assert json.loads(renderer.no_active()) == {"type": "no-active", "requestId": 'r"1'}
    assert json.loads(renderer.error("no \u2028")) == {"type": "error", "requestId": 'r"1', "errorText": "no \u2028"}
    chunks = [{"type": "text-delta", "id": "text-0", "delta": "é\n"}, {"type": "text-end", "id": "text-0"}]
    frames = renderer.chunks(7, chunks)
    assert frames[0] == (
        '{"type":"chunk","requestId":"r\\"1","sequence":7,"chunk":{"type":"text-delta","id":"text-0","delta":"é\\n"}}'
    )
    assert [json.loads(f) for f in frames] == [
        {"type": "chunk", "requestId": 'r"1', "sequence": 7 + i, "chunk": c} for i, c in enumerate(chunks)
    ]
    # What orjson refuses still goes out as JSON (the SSE renderer's path).
    big = {"type": "data-n", "data": 2**70}
    assert json.loads(renderer.chunks(0, [big])[0])["chunk"] == big


TRANSPORT_SEND = {  # as WebSocketChatTransport writes it: undefined keys left out
    "type": "send",
    "requestId": "Xy12",
    "id": "chat-1",
    "trigger": "submit-message",
    "messages": [user_message("hi", id="u1")],
    "headers": {},
    "body": {},
}


@pytest.mark.parametrize(
    "frame",
    [
        TRANSPORT_SEND,
        {**TRANSPORT_SEND, "trigger": "regenerate-message", "messageId": "a1", "metadata": {"k": 1}},
        {"type": "resume", "requestId": "r", "id": "chat-1", "headers": {"a": "b"}, "body": {"x": [1]}},
        {"type": "resume", "requestId": "r", "id": "c", "headers": {}, "body": {}, "lastSequence": 0},
        {"type": "abort", "requestId": ""},
    ],
)
def test_check_frame_accepts_what_the_transport_sends(frame: dict[str, Any]) -> None:
    assert check_frame(frame) is frame


BAD_FRAMES: list[Any] = [
    [],
    "send",
    {"type": 1, "requestId": "r"},
    {"type": "hello", "requestId": "r"},
    {"type": "abort"},
    {"type": "abort", "requestId": 5},
    {"type": "abort", "requestId": "r" * 257},
    {**TRANSPORT_SEND, "headers": None},
    {**TRANSPORT_SEND, "headers": {"a": 1}},
    {**TRANSPORT_SEND, "body": []},
    {**TRANSPORT_SEND, "id": 3},
    {**TRANSPORT_SEND, "trigger": "resume-stream"},
    {**TRANSPORT_SEND, "messageId": None},
    {**TRANSPORT_SEND, "messages": {"id": "u1"}},
    {**TRANSPORT_SEND, "messages": [1]},
    {**TRANSPORT_SEND, "messages": [{"id": "u1", "role": "tool", "parts": []}]},
    {**TRANSPORT_SEND, "messages": [{"id": "u1", "role": "user"}]},
    {"type": "resume", "requestId": "r", "id": "c", "headers": {}, "body": {}, "lastSequence": -1},
    {"type": "resume", "requestId": "r", "id": "c", "headers": {}, "body": {}, "lastSequence": 1.5},
    {"type": "resume", "requestId": "r", "id": "c", "headers": {}, "body": {}, "lastSequence": None},
    {"type": "resume", "requestId": "r", "id": "c", "headers": {}, "body": {}, "lastSequence": True},
    {"type": "resume", "requestId": "r", "id": "c", "body": {}},
]


@pytest.mark.parametrize("frame", BAD_FRAMES)
def test_check_frame_refuses_what_the_transport_would(frame: Any) -> None:
    with pytest.raises(FrameError) as info:
        check_frame(frame)
    assert info.value.code == 1008


# -- the protocol, through WebsocketCommunicator ------------------------------------------


@db
@pytest.mark.asyncio
async def test_send_streams_numbered_chunks_and_stores_what_was_sent() -> None:
    async with Socket(await asession_cookie()) as page:
        assert page.connected
        await page.send(send_frame("r1", "chat-1", "What's the weather in Paris?"))
        frames = await page.until("r1")
    assert frames[0] == {"type": "start", "requestId": "r1"}
    assert frames[-1] == {"type": "end", "requestId": "r1"}
    chunks = chunks_of(frames)
    await runs_finished()
    run = await Run.objects.select_related("message").aget()
    assert run.status == "completed"
    assert chunks[0] == {"type": "start", "messageId": run.message.pk}
    assert any(c["type"] == "tool-input-available" and c["toolName"] == "get_weather" for c in chunks)
    assert await sync_to_async(stored_log)(run) == chunks
    assert run.message.as_ui_message() == read(chunks)


@db
@pytest.mark.asyncio
async def test_abort_stops_the_run_and_stores_it_as_stopped() -> None:
    async with Socket(await asession_cookie()) as page:
        await page.send(send_frame("r1", "chat-ab", "count to 3000"))
        await page.until("r1", lambda fs: text_deltas(fs) >= 5)
        await page.send({"type": "abort", "requestId": "r1"})
        await runs_finished()
        while not await page.communicator.receive_nothing(0.05):
            await page.pump()
        frames = page.frames["r1"]
    # Its frames just stop: the client has closed the request already.
    assert {f["type"] for f in frames} == {"start", "chunk"}
    run = await Run.objects.aget()
    assert run.status == "stopped"
    log = await sync_to_async(stored_log)(run)
    received = chunks_of(frames)
    assert log[: len(received)] == received
    assert log[-1] == {"type": "abort", "reason": "stopped"}
    assert len(text_of(log).split()) < 3000


@db
@pytest.mark.asyncio
async def test_a_steer_frame_steers_the_answer_and_is_answered_with_its_outcome() -> None:
    """Rule 8: a ``steer`` frame on the socket that streams the answer; its
    outcome comes back in one frame; with no run going, ``finished``; a
    frame without a message object closes the socket."""
    with override_settings(UISTREAM={**DEMO, "TOOLS": [*DEMO["TOOLS"], "demo_project.demo_model.pause"]}):
        async with Socket(await asession_cookie()) as page:
            await page.send(send_frame("r1", "chat-steer", "count to 300 slowly"))
            await page.until("r1", lambda fs: text_deltas(fs) >= 5)
            message = user_message("now count backwards", id="m2")
            await page.send(
                {"type": "steer", "requestId": "s", "id": "chat-steer", "steeringId": "s1", "message": message}
            )
            (answer,) = await page.until("s", lambda fs: len(fs) >= 1)
            chunks = chunks_of(await page.until("r1"))
            await runs_finished()
            await page.send({"type": "queue", "requestId": "q", "id": "chat-steer", "message": message})
            (late,) = await page.until("q", lambda fs: len(fs) >= 1)
            await page.send({"type": "steer", "requestId": "x", "id": "chat-steer", "message": "now"})
            assert await page.closed() in (1008, 4008)
    outcome = answer["outcome"]
    assert answer == {"type": "steering-outcome", "requestId": "s", "outcome": outcome}
    assert outcome["type"] == "delivered"
    at = next(i for i, c in enumerate(chunks) if c["type"] == "steering-message")
    said = [{"type": "text", "text": "now count backwards"}]
    assert chunks[at] == {"type": "steering-message", "id": "s1", "parts": said}
    assert [c["type"] for c in chunks[:at]].count("start-step") == outcome["stepNumber"]
    assert chunks[at + 1] == {"type": "start-step"}
    assert late["outcome"]["type"] == "not-delivered"
    assert late["outcome"]["reason"] == "finished"
    assert late["outcome"]["id"].startswith("steer-")


@db
@pytest.mark.asyncio
@pytest.mark.parametrize(("policy", "status", "count"), [("cancel", "cancelled", 3000), ("finish", "completed", 300)])
async def test_a_dropped_socket_follows_on_disconnect(policy: str, status: str, count: int) -> None:
    with override_settings(UISTREAM={**DEMO, "ON_DISCONNECT": policy}):
        async with Socket(await asession_cookie()) as page:
            await page.send(send_frame("r1", "chat-drop", f"count to {count}"))
            received = chunks_of(await page.until("r1", lambda fs: text_deltas(fs) >= 5))
            await page.disconnect()
        await runs_finished()
    run = await Run.objects.aget()
    assert run.status == status
    log = await sync_to_async(stored_log)(run)
    assert log[: len(received)] == received
    if policy == "finish":
        assert text_of(log).split() == [str(n) for n in range(1, 301)]
    else:
        assert log[-1] == {"type": "abort"}


@db
@pytest.mark.asyncio
async def test_resume_replays_from_sequence_0_with_the_same_message_id_then_follows() -> None:
    cookie = await asession_cookie()
    async with Socket(cookie) as first, Socket(cookie) as second:
        await first.send(send_frame("a", "chat-r", "count to 400"))
        await first.until("a", lambda fs: len(fs) >= 8)
        await second.send(resume_frame("b", "chat-r"))
        resumed = await second.until("b")
        original = await first.until("a")
        await runs_finished()
        await second.send(resume_frame("c", "chat-r"))
        after = await second.until("c")
    assert resumed[0] == {"type": "start", "requestId": "b"}
    assert resumed[-1] == {"type": "end", "requestId": "b"}
    assert chunks_of(resumed) == chunks_of(original)
    assert after == [{"type": "no-active", "requestId": "c"}]


@db
@pytest.mark.asyncio
async def test_resume_from_a_last_sequence_continues_the_numbering() -> None:
    cookie = await asession_cookie()
    async with Socket(cookie) as first, Socket(cookie) as second:
        await first.send(send_frame("a", "chat-ls", "count to 300"))
        await first.until("a", lambda fs: len(fs) >= 3)
        await second.send(resume_frame("b", "chat-ls", lastSequence=4))
        resumed = await second.until("b")
        original = await first.until("a")
    assert chunks_of(resumed, first=5) == chunks_of(original)[5:]
    await runs_finished()


@db
@pytest.mark.asyncio
async def test_someone_elses_chat_id_reads_as_a_free_one() -> None:
    """Chat ids are per owner: Alice's chat id, on Mallory's socket, names
    no chat of Mallory's, exactly as a free id does. Resuming or
    regenerating it is the one ``not_found``; a message starts Mallory's
    own chat under it, which streams beside Alice's run (their slots are
    apart), and neither touches the other."""
    alice, mallory = await asession_cookie(), await asession_cookie()
    async with Socket(alice) as page, Socket(mallory) as other:
        await page.send(send_frame("a", "chat-alice", "count to 300"))
        await page.until("a", lambda fs: len(fs) >= 3)
        await other.send(resume_frame("m1", "chat-alice"))
        await other.send(resume_frame("m2", "no-such-chat"))
        await other.send(resume_frame("m3", "../not an id"))
        regenerate = {**send_frame("m5", "chat-alice", "x"), "trigger": "regenerate-message", "messages": []}
        await other.send(regenerate)
        await other.send({**regenerate, "requestId": "m6", "id": "no-such-chat"})
        answers = {rid: await other.until(rid) for rid in ("m1", "m2", "m3", "m5", "m6")}
        await other.send(send_frame("m4", "chat-alice", "count to 3", message_id="m9"))
        own = await other.until("m4")
        await page.send({"type": "abort", "requestId": "a"})
        await runs_finished()
    for rid in ("m1", "m2", "m3", "m5", "m6"):
        assert answers[rid] == [{"type": "error", "requestId": rid, "code": "not_found", "errorText": NOT_FOUND_TEXT}]
    assert own[-1] == {"type": "end", "requestId": "m4"}
    assert text_of(chunks_of(own)).split() == ["1", "2", "3"]
    chats = {c.session_key: c async for c in Conversation.objects.filter(client_id="chat-alice")}
    assert len(chats) == 2
    alices, mallorys = chats[alice.split("=", 1)[1]], chats[mallory.split("=", 1)[1]]
    assert [m.role async for m in alices.messages.order_by("position")] == ["user", "assistant"]
    assert [m.ui_id async for m in mallorys.messages.filter(role="user")] == ["m9"]
    statuses = {r.conversation_id: r.status async for r in Run.objects.all()}
    # Alice's run was stopped by her abort, not by Mallory's chat of its id.
    assert statuses == {alices.pk: "stopped", mallorys.pk: "completed"}
    assert not await Conversation.objects.filter(client_id="no-such-chat").aexists()


@db
@pytest.mark.asyncio
async def test_two_chats_on_one_socket_and_an_abort_while_both_stream() -> None:
    async with Socket(await asession_cookie()) as page:
        await page.send(send_frame("long", "chat-long", "count to 3000"))
        await page.send(send_frame("short", "chat-short", "count to 40", message_id="u2"))
        await page.until("long", lambda fs: text_deltas(fs) >= 3)
        await page.until("short", lambda fs: text_deltas(fs) >= 3)
        await page.send({"type": "abort", "requestId": "long"})
        short = await page.until("short")
        await runs_finished()
    assert text_of(chunks_of(short)).split() == [str(n) for n in range(1, 41)]
    statuses = {r.conversation.client_id: r.status async for r in Run.objects.select_related("conversation")}
    assert statuses == {"chat-long": "stopped", "chat-short": "completed"}


@db
@pytest.mark.asyncio
async def test_a_refused_send_is_an_error_frame_and_the_socket_stays_open() -> None:
    async with Socket(await asession_cookie()) as page:
        system = {**send_frame("r1", "chat-e"), "messages": [{"id": "s1", "role": "system", "parts": []}]}
        await page.send(system)
        assert await page.until("r1") == [
            {
                "type": "error",
                "requestId": "r1",
                "code": "forbidden_role",
                "errorText": "system messages come from the server, not the client",
            }
        ]
        await page.send(send_frame("r2", "chat-e", "count to 3000"))
        await page.until("r2", lambda fs: len(fs) >= 2)
        await page.send(send_frame("r3", "chat-e", "again", message_id="u2"))
        assert await page.until("r3") == [
            {
                "type": "error",
                "requestId": "r3",
                "code": "run_active",
                "errorText": "a reply is still streaming in this chat",
            }
        ]
        await page.send({"type": "abort", "requestId": "r2"})
        await runs_finished()
    assert [r.status async for r in Run.objects.all()] == ["stopped"]


@db
@pytest.mark.asyncio
async def test_a_lone_surrogate_in_a_send_is_refused_and_writes_nothing() -> None:
    async with Socket(await asession_cookie()) as page:
        # JSON.stringify writes a lone surrogate as an escape: well formed
        # JSON, text that is not Unicode. A paired one is an emoji.
        frame = json.dumps(send_frame("r1", "chat-s", "half \ud83d of a pair"))
        assert "\\ud83d" in frame
        await page.send(frame)
        assert await page.until("r1") == [
            {
                "type": "error",
                "requestId": "r1",
                "code": "invalid_json",
                "errorText": "the request holds text that is not valid Unicode (a lone surrogate)",
            }
        ]
        await page.send(json.dumps(send_frame("r2", "chat-s", "a whole \ud83d\ude80 pair")))
        assert (await page.until("r2"))[-1]["type"] == "end"
        await runs_finished()
    stored = [m.parts async for m in Message.objects.filter(conversation__client_id="chat-s", role="user")]
    assert stored == [[{"type": "text", "text": "a whole \U0001f680 pair"}]]


@db
@pytest.mark.asyncio
@pytest.mark.parametrize(
    "frame",
    [
        *(b"\x00binary", "not json", "NaN", '{"type": "send"', "[" * 3000 + "]" * 3000),
        *(json.dumps(f) for f in BAD_FRAMES[:6]),
    ],
)
async def test_an_invalid_frame_closes_with_1008(frame: str | bytes) -> None:
    async with Socket(await asession_cookie()) as page:
        await page.send(frame)
        assert await page.closed() == 1008
    assert not await Conversation.objects.aexists()


@db
@pytest.mark.asyncio
async def test_a_request_id_in_use_closes_with_1008_and_the_run_follows_on_disconnect() -> None:
    with override_settings(UISTREAM={**DEMO, "ON_DISCONNECT": "cancel"}):
        async with Socket(await asession_cookie()) as page:
            await page.send(send_frame("r1", "chat-dup", "count to 3000"))
            await page.until("r1", lambda fs: len(fs) >= 2)
            await page.send(resume_frame("r1", "chat-dup"))
            assert await page.closed() == 1008
            await runs_finished()
    assert (await Run.objects.aget()).status == "cancelled"


@db
@pytest.mark.asyncio
async def test_a_frame_over_the_size_limit_closes_with_1009() -> None:
    with override_settings(UISTREAM={**DEMO, "MAX_REQUEST_BYTES": 2000}):
        async with Socket(await asession_cookie()) as page:
            await page.send(send_frame("r1", "chat-big", "é" * 1500))
            assert await page.closed() == 1009
    assert not await Conversation.objects.aexists()


@db
@pytest.mark.asyncio
async def test_too_many_requests_at_once() -> None:
    class Small(ChatConsumer):
        max_requests = 1

    app = routed(path("ws/chat/", Small.as_asgi()))
    async with Socket(await asession_cookie(), app=app) as page:
        await page.send(send_frame("r1", "chat-m", "count to 3000"))
        await page.until("r1", lambda fs: len(fs) >= 1)
        await page.send(resume_frame("r2", "chat-m"))
        assert await page.until("r2") == [
            {
                "type": "error",
                "requestId": "r2",
                "code": "too_many_requests",
                "errorText": "at most 1 requests at once per socket",
            }
        ]
        await page.send({"type": "abort", "requestId": "r1"})
        await runs_finished()


# -- who acts ------------------------------------------------------------------------


@db
@pytest.mark.asyncio
async def test_an_anonymous_socket_is_refused_unless_anonymous_visitors_may_chat() -> None:
    refusal = (
        "log in to chat (anonymous chats are off; UISTREAM['ALLOW_ANONYMOUS'] = True "
        "lets visitors chat by their session)"
    )
    with override_settings(UISTREAM={**DEMO, "ALLOW_ANONYMOUS": False}):
        # Accepted, so that each request learns why it is refused (a handshake
        # refused with a 403 reaches a browser as a bare close, 1006).
        async with Socket(await asession_cookie()) as anonymous:
            assert anonymous.connected
            await anonymous.send(send_frame("r1", "chat-a", "count to 3"))
            await anonymous.send(resume_frame("r2", "chat-a"))
            for request_id in ("r1", "r2"):
                assert await anonymous.until(request_id) == [
                    {"type": "error", "requestId": request_id, "code": "not_authenticated", "errorText": refusal}
                ]
        assert not await Conversation.objects.aexists()
        user, cookie = await auser_cookie("alice")
        async with Socket(cookie) as page:
            assert page.connected
            await page.send(send_frame("r1", "chat-u", "count to 3"))
            assert (await page.until("r1"))[-1]["type"] == "end"
        _, other = await auser_cookie("bob")
        async with Socket(other) as bob:
            await bob.send(resume_frame("r1", "chat-u"))
            assert await bob.until("r1") == [
                {"type": "error", "requestId": "r1", "code": "not_found", "errorText": NOT_FOUND_TEXT}
            ]
    conversation = await Conversation.objects.aget()
    assert conversation.owner_id == user.pk
    await runs_finished()


@db
@pytest.mark.asyncio
async def test_where_anyone_is_permitted_an_anonymous_socket_still_says_why_it_owns_nothing() -> None:
    # PERMISSION_CLASSES that let anyone in: the socket owns nothing where
    # anonymous chats are off, and its send says so (not "no session").
    uistream = {**DEMO, "ALLOW_ANONYMOUS": False, "PERMISSION_CLASSES": []}
    with override_settings(UISTREAM=uistream):
        async with Socket(await asession_cookie()) as anonymous:
            await anonymous.send(send_frame("r1", "chat-p", "count to 3"))
            (frame,) = await anonymous.until("r1")
    assert (frame["code"], frame["errorText"]) == (
        "not_authenticated",
        "log in to chat (anonymous chats are off; UISTREAM['ALLOW_ANONYMOUS'] = True "
        "lets visitors chat by their session)",
    )
    assert not await Conversation.objects.aexists()


@db
@pytest.mark.asyncio
@pytest.mark.parametrize("cookie", [None, "sessionid=thisisnosessionthestoreknows42"])
async def test_an_anonymous_socket_without_a_session_owns_nothing(cookie: str | None) -> None:
    async with Socket(cookie) as page:
        assert page.connected
        await page.send(resume_frame("r1", "chat-x"))
        assert await page.until("r1") == [
            {"type": "error", "requestId": "r1", "code": "not_found", "errorText": NOT_FOUND_TEXT}
        ]
        await page.send(send_frame("r2", "chat-x", "hi"))
        (answer,) = await page.until("r2")
    assert answer["type"] == "error"
    assert "session" in answer["errorText"]
    assert not await Conversation.objects.aexists()


@db
@pytest.mark.asyncio
async def test_the_demo_refuses_a_foreign_origin() -> None:
    from demo_project.asgi import application

    cookie = await asession_cookie()
    for origin, host, expected in [
        (b"http://127.0.0.1:8000", b"127.0.0.1:8000", True),
        (b"http://localhost", b"localhost", True),
        (b"http://127.0.0.1:9999", b"127.0.0.1:8000", False),
        (b"https://127.0.0.1:8000", b"127.0.0.1:8000", False),
        (b"http://localhost", b"127.0.0.1", False),
        (b"https://evil.example", b"127.0.0.1", False),
        (b"null", b"127.0.0.1", False),
        (None, b"127.0.0.1", False),
    ]:
        async with Socket(cookie, app=application, origin=origin, host=host) as page:
            assert page.connected is expected, (origin, host)


@db
@pytest.mark.asyncio
async def test_a_subclass_configures_the_run_like_chat_view() -> None:
    model = ScriptedModel("Hello from the script.")
    app = routed(path("ws/chat/", ChatConsumer.as_asgi(model=model, system_prompt="Be brief.")))
    async with Socket(await asession_cookie(), app=app) as page:
        await page.send(send_frame("r1", "chat-s", "hi"))
        chunks = chunks_of(await page.until("r1"))
    assert text_of(chunks) == "Hello from the script."
    assert model.requests[0].messages[0].content == "Be brief."
    await runs_finished()
    with pytest.raises(TypeError, match="not an attribute"):
        ChatConsumer.as_asgi(modle=model)


# -- the real ai@7 client against daphne ----------------------------------------------------


def daphne_env(uistream: dict[str, Any]) -> dict[str, str]:
    if connection.vendor != "sqlite":
        pytest.skip("the server process shares the test database through its file (SQLite)")
    return {
        "DJANGO_SETTINGS_MODULE": "tests.server_settings",
        "DATABASE_URL": f"sqlite:///{connection.settings_dict['NAME']}",
        "UISTREAM_TEST_SETTINGS": json.dumps(uistream),
        "UISTREAM_DEMO_DELAY_MS": "3",
    }


@pytest.fixture(scope="module")
def daphne(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    """daphne serving the demo's ASGI application (Origin check, auth,
    consumer), runs that finish when their socket drops (so the client
    can resume them)."""
    with django_db_blocker.unblock():
        env = daphne_env({**DEMO, "ON_DISCONNECT": "finish"})
    with subprocess_server(env) as base:
        yield base


def page_of(base: str, cookie: str) -> dict[str, str]:
    return {"url": base.replace("http://", "ws://") + "/ws/chat/", "origin": base, "cookie": cookie}


def ws_client(node: str, **args: Any) -> dict[str, Any]:
    result = subprocess.run(
        [node, str(JS_DIR / "ws_client.mjs"), json.dumps(args)],
        capture_output=True,
        text=True,
        cwd=JS_DIR,
        timeout=90,
    )
    assert result.returncode == 0, result.stderr
    out: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    return out


def wait_runs_finished(timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while Run.objects.filter(status="running").exists():
        assert time.monotonic() < deadline, "timed out waiting for the runs to be stored"
        time.sleep(0.02)


def stored_messages(chat_id: str) -> list[dict[str, Any]]:
    conversation = Conversation.objects.get(client_id=chat_id)
    return [m.as_ui_message() for m in conversation.messages.current().order_by("position")]


@db
def test_real_client_send(node: str, daphne: str) -> None:
    out = ws_client(
        node,
        scenario="send",
        chatId="ws-send",
        text="What's the weather in Paris?",
        **page_of(daphne, session_cookie()),
    )
    assert out["status"] == "ready", out["error"]
    assert out["finishes"] == [{"isAbort": False, "isDisconnect": False, "isError": False, "finishReason": "stop"}]
    wait_runs_finished()
    assert Run.objects.get().status == "completed"
    assert out["messages"] == stored_messages("ws-send")
    assert any(p["type"] == "tool-get_weather" for p in out["messages"][1]["parts"])


@db
def test_real_client_abort_mid_stream(node: str, daphne: str) -> None:
    out = ws_client(
        node, scenario="abort", chatId="ws-abort", text="count to 3000", after=10, **page_of(daphne, session_cookie())
    )
    assert out["finishes"][0]["isAbort"] is True
    wait_runs_finished()
    run = Run.objects.get()
    assert run.status == "stopped"
    assert stored_log(run)[-1] == {"type": "abort", "reason": "stopped"}
    client, stored = out["messages"], stored_messages("ws-abort")
    # The client stopped reading at once; the server stored up to the stop.
    assert client[0] == stored[0]
    assert client[1]["id"] == stored[1]["id"]
    client_text = "".join(p["text"] for p in client[1]["parts"] if p["type"] == "text")
    stored_text = "".join(p["text"] for p in stored[1]["parts"] if p["type"] == "text")
    assert len(client_text.split()) >= 10
    assert stored_text.startswith(client_text)
    assert len(stored_text.split()) < 3000


@db
def test_real_client_drop_and_resume(node: str, daphne: str) -> None:
    out = ws_client(
        node,
        scenario="drop-resume",
        chatId="ws-drop",
        text="count to 600",
        after=10,
        **page_of(daphne, session_cookie()),
    )
    assert out["statusAfterDrop"] == "error"
    assert out["finishes"][0]["isDisconnect"] is True
    assert out["sockets"] == 2
    assert out["status"] == "ready", out["error"]
    wait_runs_finished()
    assert Run.objects.get().status == "completed"
    stored = stored_messages("ws-drop")
    assert out["messages"] == stored
    text = "".join(p["text"] for p in stored[1]["parts"] if p["type"] == "text")
    assert text.split() == [str(n) for n in range(1, 601)]


@db
def test_real_client_two_tabs(node: str, daphne: str) -> None:
    out = ws_client(
        node, scenario="tabs", chatId="ws-tabs", text="count to 400", after=10, **page_of(daphne, session_cookie())
    )
    wait_runs_finished()
    stored = stored_messages("ws-tabs")
    assert out["a"]["status"] == out["b"]["status"] == "ready"
    assert out["a"]["messages"] == stored
    assert out["b"]["messages"] == stored


@db
@pytest.mark.parametrize("approved", [True, False])
def test_real_client_answers_an_approval_and_the_same_message_goes_on(node: str, daphne: str, approved: bool) -> None:
    chat_id = f"ws-approval-{approved}"
    text = "email bob@example.com saying the report is ready"
    out = ws_client(
        node, scenario="approval", chatId=chat_id, text=text, approved=approved, **page_of(daphne, session_cookie())
    )
    assert out["status"] == "ready", out["error"]
    wait_runs_finished()
    stored = stored_messages(chat_id)
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert out["messages"] == stored
    (part,) = [p for p in stored[1]["parts"] if p["type"] == "tool-send_email"]
    assert part["state"] == ("output-available" if approved else "output-denied")
    assert [r.trigger for r in Run.objects.order_by("started_at")] == ["submit-message", "continue"]


@db
def test_real_client_with_nothing_to_resume(node: str, daphne: str) -> None:
    cookie = session_cookie()
    Conversation.objects.create(pk="ws-none", session_key=cookie.split("=", 1)[1])
    out = ws_client(node, scenario="no-active", chatId="ws-none", **page_of(daphne, cookie))
    assert out == {"status": "ready", "error": None, "messages": [], "sockets": 1}


@db
def test_real_client_resuming_a_chat_it_does_not_own_fails_as_over_http(node: str, daphne: str) -> None:
    """The HTTP transport's resume of a missing or foreign chat is a 404,
    which useChat reports as an error; the WebSocket says the same."""
    out = ws_client(node, scenario="no-active", chatId="ws-missing", **page_of(daphne, session_cookie()))
    assert out == {"status": "error", "error": NOT_FOUND_TEXT, "messages": [], "sockets": 1}


@db
def test_daphne_closes_on_bad_frames_and_refuses_a_foreign_origin(node: str, daphne: str) -> None:
    page = page_of(daphne, session_cookie())
    frames = ["nope", "[]", json.dumps({"type": "send", "requestId": "r"}), {"binary": "abc"}]
    out = ws_client(node, scenario="raw", frames=frames, **page)
    # autobahn lets daphne's applications close with 1000 or 3000-4999
    # only: the consumer's 1008 arrives as its private-use twin.
    assert [c["code"] for c in out["closes"]] == [4008] * len(frames)
    assert ws_client(node, scenario="handshake", **page) == {"opened": True, "status": 101}
    assert ws_client(node, scenario="handshake", **{**page, "origin": "http://evil.example"}) == {
        "opened": False,
        "status": 403,
    }
    assert not Conversation.objects.exists()


@db
def test_real_client_two_tabs_on_two_processes_through_redis(
    node: str,
    redis_config: dict[str, Any],
) -> None:
    env = daphne_env({**DEMO, "BROKER": redis_config})
    cookie = session_cookie()
    with subprocess_server(env) as first, subprocess_server(env) as second:
        page = page_of(first, cookie)
        out = ws_client(
            node,
            scenario="tabs",
            chatId="ws-redis",
            text="count to 400",
            after=10,
            # Tab B is a page of the second process (the socket's Origin is
            # checked whole: another port is another site).
            url2=page_of(second, cookie)["url"],
            origin2=second,
            **page,
        )
        wait_runs_finished()
    stored = stored_messages("ws-redis")
    assert out["a"]["messages"] == stored
    assert out["b"]["messages"] == stored
