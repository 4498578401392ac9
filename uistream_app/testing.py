"""Test helpers for projects that use uistream: a scripted model, test
clients that drive your endpoints in-process, and the request bodies they
send.

``ScriptedModel`` stands in for a real model: enqueue what it should say,
step by step, and assert on what it was asked::

    from uistream_app.testing import ScriptedModel, call

    model = ScriptedModel(
        ["Let me check.", call("get_weather", {"city": "Paris"})],
        "It is sunny in Paris.",
    )
    # ... run your view or ToolLoop with it ...
    assert model.requests[1].messages[-1].content == '{"sky": "sunny"}'

See ``uistream_app.runs.scripted`` for the step shorthand.

Test clients
------------

What Channels' ``WebsocketCommunicator`` is to a consumer and
``django.test.Client`` to a view, these are to a chat endpoint. Each speaks
one transport as its real client does and keeps the conversation as that
client holds it, so the next turn sends the history and an approval resends
the assistant message with its part answered:

* ``ChatClient``: useChat's ``DefaultChatTransport``, an HTTP POST of its
  body to ``ChatView`` (through Django's ``AsyncClient``: the URLconf, the
  middleware, the session);
* ``SocketChatClient``: ai@7's ``WebSocketChatTransport``, the same turns
  as ``send`` frames to ``ChatConsumer`` (through Channels'
  ``WebsocketCommunicator``); Channels is imported when it connects;
* ``AGUIClient``: ``@ag-ui/client``'s ``HttpAgent``, a ``RunAgentInput``
  POSTed to ``AGUIView``; approvals are answered with ``resume``.

A turn returns once its run is stored: its log, its message and how it
ended are in the database, and the chat is free for the next turn (a
run's stream ends only after its outcome is stored; a run of this
process's is also waited for until its task has ended). The
result holds the chunks the client read (each SSE ``data:`` event, or each
``chunk`` frame) and the assistant ``UIMessage`` they build (read by
``UIMessageReader``, the twin of the SDK's ``processUIMessageStream``),
or, for a request the endpoint refused, its ``error``
(``{"code", "message", "field"?}``)::

    import pytest
    from uistream_app.testing import ChatClient

    @pytest.mark.asyncio
    @pytest.mark.django_db(transaction=True)
    async def test_an_email_waits_for_approval(django_user_model):
        chat = ChatClient()  # POSTs to reverse("uistream:chat"); or ChatClient("/support/chat")
        await chat.aforce_login(await django_user_model.objects.acreate(username="ada"))
        asked = await chat.send("email ada@example.com saying hi")
        assert asked.approvals[0]["input"]["to"] == "ada@example.com"
        sent = await chat.approve()
        assert sent.tool_parts("send_email")[0]["state"] == "output-available"

``SocketChatClient`` is used as ``async with SocketChatClient() as ws:``
and has the same ``send`` / ``approve`` / ``deny``; ``AGUIClient`` has
``run`` / ``approve`` / ``deny`` / ``cancel``. Log a client in with
``aforce_login(user)`` (``force_login`` outside an event loop), as with
Django's client; clients built on one ``AsyncClient``
(``SocketChatClient(client=chat.client)``) share its session. A visitor
that is not logged in is an anonymous session, as on the demo: the
socket client makes one first when its client has none, as the page that
opened the socket would have. Inside Django's ``TestCase`` (every test in
a transaction that is rolled back) keep ``UISTREAM["LOG_WRITER"]`` at its
default, ``"auto"``, so that a run's log is written inside the test's
transaction (docs/operations.md, "The log writer"). The clients drive the
endpoints only through what they answer on the wire (the body, the
frames, the run id header), never through their hooks.

Bodies: ``user_message``, ``chat_body`` and ``run_input`` build the
requests as the real clients do, for tests that send their own.

For AG-UI agents: drive a hand-written agent with ``run_agent`` on a
``RunContext`` (its events collect for ``drain()``), and check any AG-UI
stream against both clients' rules with ``verify_events`` /
``verify_sse`` (``AGUIVerificationError`` names the rule)::

    from uistream_app.testing import RunContext, run_agent, verify_events

    ctx = RunContext(thread_id="t1", run_id="r1")
    await run_agent(my_agent, ctx)
    verify_events(ctx.drain())
"""

from __future__ import annotations

import asyncio
import copy
import json
import secrets
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from unittest import mock

from asgiref.sync import sync_to_async
from django.conf import settings as django_settings
from django.http import HttpResponseBase, StreamingHttpResponse
from django.test import AsyncClient
from django.urls import reverse

from .errors import import_extra
from .protocol.agui.events import Event
from .protocol.agui.handles import RunContext, run_agent
from .protocol.agui.messages import agui_user_message
from .protocol.agui.patch import apply_patch
from .protocol.agui.reducer import fold_messages
from .protocol.agui.verifier import AGUIVerificationError, AGUIVerifier, verify_events, verify_sse
from .protocol.sse import SSEParser
from .protocol.ui.chunks import Chunk
from .protocol.ui.parts import ToolPart, is_tool_part, tool_name
from .protocol.ui.reader import UIMessageReader
from .runs.scripted import ScriptedCall, ScriptedModel, ScriptedRequest, call, reasoning, text, usage

__all__ = [
    "AGUIClient",
    "AGUIRunResult",
    "AGUIVerificationError",
    "AGUIVerifier",
    "ChatClient",
    "RunContext",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedRequest",
    "SocketChatClient",
    "SocketClosed",
    "TurnResult",
    "call",
    "chat_body",
    "reasoning",
    "run_agent",
    "run_input",
    "text",
    "usage",
    "user_message",
    "verify_events",
    "verify_sse",
]

#: The run a POST started, on its response (docs/protocols.md, "useChat
#: requests", rule 7); a client reads it, as ``WorkflowChatTransport`` does.
RUN_ID_HEADER = "x-workflow-run-id"
#: What Django's test client calls its server, which its test settings allow.
TEST_ORIGIN = "http://testserver"
#: The longest a turn may take, in seconds, unless a client says otherwise.
DEFAULT_TIMEOUT = 30.0

# -- the bodies --------------------------------------------------------------------------


def user_message(text: str, *, id: str = "u1", files: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """A user ``UIMessage`` as useChat's ``sendMessage({text, files})``
    makes it: the file parts first, then the text. A file part is
    ``{"type": "file", "mediaType", "url", "filename"?}`` (a ``data:`` URL
    uploads the bytes)."""
    parts = [{"type": "file", **file} for file in files]
    parts.append({"type": "text", "text": text})
    return {"id": id, "role": "user", "parts": parts}


def chat_body(
    chat_id: str,
    messages: str | Sequence[Mapping[str, Any]],
    *,
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message",
    message_id: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """useChat's request body (``DefaultChatTransport``):
    ``{...extra, id, messages, trigger, messageId?}``. ``messages`` is the
    whole history the client holds, or a text: one user message
    ``user_message(text)``. ``message_id`` is useChat's ``messageId``: the
    message a regenerate, an edit or an approval's continuation is about.
    ``extra`` is useChat's ``body`` option (the view's ``run.extra``)."""
    held = [user_message(messages)] if isinstance(messages, str) else [dict(m) for m in messages]
    body: dict[str, Any] = {**extra, "id": chat_id, "messages": held, "trigger": trigger}
    if message_id is not None:
        body["messageId"] = message_id
    return body


def run_input(
    thread_id: str,
    messages: str | Sequence[Mapping[str, Any]],
    *,
    run_id: str = "r1",
    resume: Sequence[Mapping[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """AG-UI's ``RunAgentInput``: ``{threadId, runId, messages, resume?,
    ...extra}`` (``state``, ``tools``, ``context``, ``forwardedProps``…).
    ``messages`` are AG-UI messages, or a text: one user message
    ``{"id": "u1", "role": "user", "content": text}``."""
    held = [agui_user_message(user_message(messages))] if isinstance(messages, str) else [dict(m) for m in messages]
    body: dict[str, Any] = {"threadId": thread_id, "runId": run_id, "messages": held, **extra}
    if resume is not None:
        body["resume"] = [dict(entry) for entry in resume]
    return body


def _new_id(prefix: str) -> str:
    """A fresh id of the kind the AI SDK's ``generateId`` makes (16 random
    characters of ``[A-Za-z0-9_-]``, which every endpoint accepts)."""
    return prefix + secrets.token_hex(8)


# -- the results -------------------------------------------------------------------------


def _text_of(message: Mapping[str, Any] | None) -> str:
    if message is None:
        return ""
    return "".join(p.get("text", "") for p in message.get("parts", ()) if p.get("type") == "text")


@dataclass
class TurnResult:
    """One useChat turn as its client saw it.

    ``chunks``: the UI message chunks read (ai@7's), in order; ``message``:
    the assistant ``UIMessage`` they build, continuing the resent one for a
    continuation (None when nothing streamed). ``error``: a refusal, the
    endpoint's ``{"code", "message", "field"?}`` (a WebSocket ``error``
    frame's ``code`` and ``errorText``); an error *during* the answer is an
    ``error`` chunk instead, as on the wire. ``status``: the HTTP status
    (None on a WebSocket, which has none). ``run_id``: the stored ``Run``.
    ``body``: the request sent."""

    chat_id: str
    status: int | None
    chunks: list[Chunk] = field(default_factory=list)
    message: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    run_id: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether the endpoint took the turn (its answer may still end in an error chunk)."""
        return self.error is None and (self.status is None or 200 <= self.status < 300)

    @property
    def text(self) -> str:
        """The message's text parts, joined."""
        return _text_of(self.message)

    def tool_parts(self, name: str | None = None) -> list[ToolPart]:
        """The message's tool parts (of the tool ``name``), in order."""
        parts = self.message["parts"] if self.message is not None else []
        return [p for p in parts if is_tool_part(p) and (name is None or tool_name(p) == name)]

    @property
    def approvals(self) -> list[ToolPart]:
        """The tool parts waiting for a person (``approval-requested``)."""
        return [p for p in self.tool_parts() if p.get("state") == "approval-requested"]


@dataclass
class AGUIRunResult:
    """One AG-UI run as its client saw it.

    ``events``: the AG-UI events read (checked against both real clients'
    rules unless the client was made with ``verify=False``); ``messages``:
    the thread as the client holds it after them (``fold_messages``, the
    twin of ``@ag-ui/client``'s reducer). ``message``: the ``UIMessage``
    stored for the run (an AG-UI stream carries no UI parts; this is what a
    useChat client reloading the chat gets). ``error``: a refusal's
    ``{"code", "message", "field"?}``; a failure during the run is a
    ``RUN_ERROR`` event (``run_error``)."""

    thread_id: str
    status: int
    events: list[Event] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    message: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    run_id: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and 200 <= self.status < 300

    def of_type(self, kind: str) -> list[Event]:
        """The events of one type (``"TOOL_CALL_RESULT"``…), in order."""
        return [event for event in self.events if event.get("type") == kind]

    @property
    def finished(self) -> Event | None:
        """The ``RUN_FINISHED`` event, if the run finished."""
        found = self.of_type("RUN_FINISHED")
        return found[-1] if found else None

    @property
    def run_error(self) -> Event | None:
        found = self.of_type("RUN_ERROR")
        return found[-1] if found else None

    @property
    def interrupts(self) -> list[dict[str, Any]]:
        """The interrupts the run ended with (an approval each), else ``[]``."""
        outcome = (self.finished or {}).get("outcome")
        if isinstance(outcome, dict) and outcome.get("type") == "interrupt":
            return list(outcome.get("interrupts", []))
        return []

    @property
    def state(self) -> Any:
        """The shared state the client holds after the run: the last
        ``STATE_SNAPSHOT`` with the ``STATE_DELTA``\\ s after it applied."""
        state: Any = None
        for event in self.events:
            if event.get("type") == "STATE_SNAPSHOT":
                state = event.get("snapshot")
            elif event.get("type") == "STATE_DELTA":
                state = apply_patch(state, event.get("delta"))
        return state

    @property
    def text(self) -> str:
        """The text of the last assistant message the client holds."""
        for held in reversed(self.messages):
            if held.get("role") == "assistant":
                content = held.get("content")
                return content if isinstance(content, str) else ""
        return ""


class SocketClosed(AssertionError):
    """The server closed the socket (a frame it refuses: docs/protocols.md,
    "WebSocket chat transport", rule 1), or refused the handshake."""

    def __init__(self, code: int | None, during: str) -> None:
        super().__init__(f"the server closed the socket with {code} {during}")
        self.code = code


# -- what every client shares ------------------------------------------------------------


class _Session:
    """The Django test client a chat client sends with: its cookies (the
    session) and who is logged in."""

    def __init__(self, client: AsyncClient | None, headers: Mapping[str, str] | None, timeout: float) -> None:
        self.client = client if client is not None else AsyncClient()
        #: Sent with every request (an ``Authorization`` header, say).
        self.headers = dict(headers or {})
        self.timeout = timeout

    def force_login(self, user: Any, backend: str | None = None) -> None:
        """Log ``user`` in (outside an event loop; in one, ``aforce_login``)."""
        self.client.force_login(user, backend)

    async def aforce_login(self, user: Any, backend: str | None = None) -> None:
        await self.client.aforce_login(user, backend)

    def logout(self) -> None:
        self.client.logout()

    async def alogout(self) -> None:
        await self.client.alogout()

    def _error_of(self, response: HttpResponseBase) -> dict[str, Any]:
        """A refusal's error: the endpoint's JSON ``error``, else what the
        response says (a page of Django's own, from a middleware)."""
        content = getattr(response, "content", b"")
        if response.get("Content-Type", "").startswith("application/json"):
            data = json.loads(content)
            if isinstance(data, dict) and isinstance(data.get("error"), dict):
                return dict(data["error"])
            return {"code": None, "message": data}
        return {"code": None, "message": content.decode("utf-8", "replace")[:2000]}


async def _body_of(response: StreamingHttpResponse) -> bytes:
    content = response.streaming_content
    if isinstance(content, AsyncIterator):
        return b"".join([bytes(piece) async for piece in content])
    assert isinstance(content, Iterator)
    return b"".join(bytes(piece) for piece in content)


def _sse_data(raw: bytes) -> list[Any]:
    """The JSON of every SSE ``data:`` event but ``[DONE]``."""
    parser = SSEParser()
    events = parser.feed(raw)
    if not parser.close():
        raise AssertionError("the stream ended in the middle of an event")
    return [json.loads(event.data) for event in events if event.data != "[DONE]"]


def _read_message(request: Mapping[str, Any], chunks: Sequence[Chunk]) -> dict[str, Any] | None:
    """The assistant message ``chunks`` build, as the SDK reads them: onto
    the request's last message when that is the assistant's (a
    continuation), else a new one. The chunks are checked against ai@7's
    schema, as the client checks them."""
    if not chunks:
        return None
    messages = request.get("messages") or []
    last = messages[-1] if messages and request.get("trigger", "submit-message") == "submit-message" else None
    reader = UIMessageReader(
        message=last if last is not None and last.get("role") == "assistant" else None, validate=True
    )
    reader.feed_all(chunks)
    return reader.message


async def _settle(run_id: str | None) -> None:
    """Until the run's task in this process has ended (its outcome is
    stored before its stream ends; the task ends right after)."""
    if not run_id:
        return
    # Function-level: the runner imports the models, and this module is
    # imported before Django's apps are loaded (a settings module, a conftest).
    from .lifecycle.runner import live_runs

    loop = asyncio.get_running_loop()
    tasks = [h.task for h in live_runs() if h.run_id == run_id and h.task.get_loop() is loop]
    if tasks:
        await asyncio.wait(tasks)


@sync_to_async
def _stored_run_id(message_id: str) -> str | None:
    # Function-level: the models need Django's apps loaded (see _settle).
    from .models import Run

    run = Run.objects.filter(message_id=message_id).order_by("-started_at").only("pk").first()
    return str(run.pk) if run is not None else None


@sync_to_async
def _stored_message(run_id: str) -> dict[str, Any] | None:
    from .models import Run

    run = Run.objects.select_related("message").filter(pk=run_id).first()
    return run.message.as_ui_message() if run is not None and run.message is not None else None


class _Chat(_Session):
    """A useChat client over some transport: the conversations it holds,
    and the turns it sends."""

    def __init__(
        self,
        *,
        chat_id: str | None,
        body: Mapping[str, Any] | None,
        client: AsyncClient | None,
        headers: Mapping[str, str] | None,
        timeout: float,
    ) -> None:
        super().__init__(client, headers, timeout)
        #: The chat a turn goes to unless it names another.
        self.chat_id = chat_id or _new_id("chat-")
        #: Extra body keys of every request (useChat's ``body`` option).
        self.body = dict(body or {})
        self._held: dict[str, list[dict[str, Any]]] = {}

    def messages(self, chat_id: str | None = None) -> list[dict[str, Any]]:
        """The chat as this client holds it: every message it sent and read."""
        return copy.deepcopy(self._held.get(chat_id or self.chat_id, []))

    async def send(
        self, message: str | Mapping[str, Any], *, chat_id: str | None = None, body: Mapping[str, Any] | None = None
    ) -> TurnResult:
        """Send a user message (a text, or a ``UIMessage`` such as
        ``user_message(text, files=...)``) with the history, as
        ``sendMessage`` does."""
        chat_id = chat_id or self.chat_id
        user = user_message(message, id=_new_id("u-")) if isinstance(message, str) else dict(message)
        request = chat_body(chat_id, [*self._held.get(chat_id, []), user], **{**self.body, **(body or {})})
        return await self.send_body(request)

    async def approve(
        self,
        approval_id: str | None = None,
        *,
        chat_id: str | None = None,
        reason: str | None = None,
        edited_input: Any = None,
    ) -> TurnResult:
        """Approve a pending call (by its approval id; None: every pending
        one) and send the continuation, as ``addToolApprovalResponse`` and
        ``sendAutomaticallyWhen`` do. ``edited_input``: the arguments as
        the person edited them, sent as the part's ``input`` (for a tool
        that allows edits)."""
        return await self._answer(chat_id, approval_id, approved=True, reason=reason, edited=edited_input)

    async def deny(
        self, approval_id: str | None = None, *, chat_id: str | None = None, reason: str | None = None
    ) -> TurnResult:
        """Deny a pending call (None: every pending one); see ``approve``."""
        return await self._answer(chat_id, approval_id, approved=False, reason=reason, edited=None)

    async def send_body(self, body: Mapping[str, Any]) -> TurnResult:
        """Send a request body as it is (``chat_body(...)``, or one made by
        hand). A turn the endpoint took updates the chat this client holds."""
        request = dict(body)
        result = await self._turn(request)
        if result.ok and result.message is not None:
            sent = list(request.get("messages") or [])
            if sent and sent[-1].get("role") == "assistant" and sent[-1].get("id") == result.message.get("id"):
                sent.pop()  # the continued message, now read anew
            self._held[str(request.get("id"))] = [*sent, result.message]
        return result

    async def _answer(
        self, chat_id: str | None, approval_id: str | None, *, approved: bool, reason: str | None, edited: Any
    ) -> TurnResult:
        chat_id = chat_id or self.chat_id
        held = self.messages(chat_id)
        last = held[-1] if held and held[-1].get("role") == "assistant" else None
        pending = [
            part
            for part in (last["parts"] if last is not None else [])
            if is_tool_part(part)
            and part.get("state") == "approval-requested"
            and (approval_id is None or part.get("approval", {}).get("id") == approval_id)
        ]
        if last is None or not pending:
            raise LookupError(f"no approval {approval_id or ''} is pending in chat {chat_id!r}".replace("  ", " "))
        for part in pending:
            # ai@7's addToolApprovalResponse: the part answered in place.
            part["state"] = "approval-responded"
            part["approval"] = {**part["approval"], "approved": approved}
            if reason is not None:
                part["approval"]["reason"] = reason
            if edited is not None:
                part["input"] = edited
        return await self.send_body(chat_body(chat_id, held, message_id=last["id"], **self.body))

    async def _turn(self, request: dict[str, Any]) -> TurnResult:
        raise NotImplementedError


class ChatClient(_Chat):
    """useChat over HTTP, in-process: each turn a POST of its body to the
    chat view through Django's ``AsyncClient`` (see the module docstring).

    ``path``: the view's URL (default ``reverse("uistream:chat")``);
    ``chat_id``: the chat turns go to unless they name one (default a new
    id); ``body``: extra keys of every request; ``client``: the
    ``AsyncClient`` to send with (``TestCase.async_client``; default a new
    one); ``headers``: sent with every request. CSRF is not checked, as
    Django's test client does not check it."""

    def __init__(
        self,
        path: str | None = None,
        *,
        chat_id: str | None = None,
        body: Mapping[str, Any] | None = None,
        client: AsyncClient | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__(chat_id=chat_id, body=body, client=client, headers=headers, timeout=timeout)
        self.path = path

    async def _turn(self, request: dict[str, Any]) -> TurnResult:
        chat_id = str(request.get("id", ""))
        async with asyncio.timeout(self.timeout):
            response: HttpResponseBase = await self.client.post(
                self.path or reverse("uistream:chat"),
                json.dumps(request),
                content_type="application/json",
                headers=self.headers,
            )
            headers = {name.lower(): value for name, value in response.items()}
            if not isinstance(response, StreamingHttpResponse):
                error = self._error_of(response)
                return TurnResult(chat_id, response.status_code, error=error, headers=headers, body=request)
            chunks = _sse_data(await _body_of(response))
            run_id = headers.get(RUN_ID_HEADER)
            await _settle(run_id)
        return TurnResult(
            chat_id,
            response.status_code,
            chunks,
            _read_message(request, chunks),
            run_id=run_id,
            headers=headers,
            body=request,
        )


def _keep_connections() -> None:
    """In place of ``close_old_connections`` while a socket closes."""


class SocketChatClient(_Chat):
    """ai@7's ``WebSocketChatTransport``, in-process: each turn a ``send``
    frame to the chat consumer through Channels' ``WebsocketCommunicator``,
    its ``chunk`` frames read until ``end`` (docs/protocols.md, "WebSocket
    chat transport"). Use it as ``async with SocketChatClient() as ws:``
    (or ``connect()`` / ``disconnect()``; a turn connects if needed).

    ``application``: the ASGI application the socket opens (default the
    app's ``websocket_urlpatterns`` behind Channels' ``AuthMiddlewareStack``;
    or your project's ``asgi.application``, or your consumer routed the
    same way); ``path``: where it is routed. The handshake carries the
    client's cookies, ``Host: testserver`` and ``Origin:
    http://testserver``, which the Origin check
    (``uistream_app.asgi.CSRFOriginValidator``) lets in where
    ``ALLOWED_HOSTS`` has ``testserver`` (Django's test runner adds it).
    The other arguments are ``ChatClient``'s; ``headers`` go in every
    ``send`` frame's
    ``headers``. Log in before the socket connects (a login later
    reconnects it at the next turn)."""

    def __init__(
        self,
        application: Any = None,
        path: str = "/ws/chat/",
        *,
        chat_id: str | None = None,
        body: Mapping[str, Any] | None = None,
        client: AsyncClient | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__(chat_id=chat_id, body=body, client=client, headers=headers, timeout=timeout)
        self.application = application
        self.path = path
        self.communicator: Any = None

    async def __aenter__(self) -> SocketChatClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.disconnect()

    async def aforce_login(self, user: Any, backend: str | None = None) -> None:
        await super().aforce_login(user, backend)
        await self.disconnect()  # the next turn's handshake carries the new session

    async def alogout(self) -> None:
        await super().alogout()
        await self.disconnect()

    async def connect(self) -> None:
        """Open the socket (once). Raises ``SocketClosed`` when the
        handshake is refused."""
        if self.communicator is not None:
            return
        # Function-level: Channels is an extra, whose absence names it.
        import_extra("channels", "channels")
        from channels.auth import AuthMiddlewareStack  # type: ignore[import-untyped]
        from channels.routing import URLRouter  # type: ignore[import-untyped]
        from channels.testing import WebsocketCommunicator  # type: ignore[import-untyped]

        from .routing import websocket_urlpatterns

        await self._ensure_session()
        cookies = "; ".join(f"{name}={morsel.value}" for name, morsel in self.client.cookies.items())
        # The Host of Django's test client, so the Origin is the handshake's own.
        headers = [(b"host", b"testserver"), (b"origin", TEST_ORIGIN.encode()), (b"cookie", cookies.encode())]
        application = self.application or AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        communicator = WebsocketCommunicator(application, self.path, headers=headers)
        self.communicator = communicator
        connected, code = await communicator.connect(timeout=self.timeout)
        if not connected:
            await self.disconnect()  # the consumer ends on the page's going away
            raise SocketClosed(code, "at the handshake")

    async def disconnect(self) -> None:
        """Close the socket (the page goes away); its runs follow
        ``ON_DISCONNECT``, as for a real socket."""
        communicator, self.communicator = self.communicator, None
        if communicator is None:
            return
        # Channels' communicator keeps the consumer from closing the
        # database connections while it sends or receives, as a test's
        # transaction (a TestCase's) needs, but not while it waits for the
        # consumer to end, when a consumer closes them (its
        # websocket_disconnect): the same patch, there too.
        with mock.patch("channels.db.close_old_connections", _keep_connections):
            await communicator.disconnect(timeout=self.timeout)

    async def _ensure_session(self) -> None:
        """An anonymous visitor's session, as the page that opened the
        socket would have one: a socket can't set a cookie, and without a
        session an anonymous socket owns nothing."""
        cookie = self.client.cookies.get(django_settings.SESSION_COOKIE_NAME)
        if cookie is None or not cookie.value:
            await self.client.asession()  # makes one in the session engine, and its cookie

    async def _turn(self, request: dict[str, Any]) -> TurnResult:
        await self.connect()
        request_id = _new_id("req-")
        frame: dict[str, Any] = {
            "type": "send",
            "requestId": request_id,
            "id": request.get("id"),
            "trigger": request.get("trigger", "submit-message"),
            "messages": request.get("messages"),
            "headers": dict(self.headers),
            # useChat's extra body keys travel in the frame's body object.
            "body": {k: v for k, v in request.items() if k not in ("id", "trigger", "messages", "messageId")},
        }
        if "messageId" in request:
            frame["messageId"] = request["messageId"]
        chat_id = str(request.get("id", ""))
        chunks: list[Chunk] = []
        error: dict[str, Any] | None = None
        async with asyncio.timeout(self.timeout):
            await self.communicator.send_to(text_data=json.dumps(frame))
            while True:
                output = await self.communicator.receive_output(timeout=self.timeout)
                if output["type"] == "websocket.close":
                    await self.disconnect()  # the consumer ends on the disconnect that follows a close
                    raise SocketClosed(output.get("code"), f"after the send of {request_id}")
                reply = json.loads(output["text"])
                if reply.get("requestId") != request_id:
                    continue  # another request's (the transport ignores it too)
                if reply["type"] == "chunk":
                    if reply["sequence"] != len(chunks):
                        # The transport throws on a gap ("Out-of-order WebSocket chat chunk sequence.").
                        raise AssertionError(f"chunk frame {reply['sequence']} came where {len(chunks)} was due")
                    chunks.append(reply["chunk"])
                elif reply["type"] == "error":
                    error = {"code": reply.get("code"), "message": reply.get("errorText", "")}
                    break
                elif reply["type"] in ("end", "no-active"):
                    break
            run_id = await _stored_run_id(chunks[0]["messageId"]) if chunks and chunks[0]["type"] == "start" else None
            await _settle(run_id)
        return TurnResult(chat_id, None, chunks, _read_message(request, chunks), error, run_id, body=request)


class AGUIClient(_Session):
    """``@ag-ui/client``'s ``HttpAgent``, in-process: each run a POST of a
    ``RunAgentInput`` to the AG-UI view through Django's ``AsyncClient``,
    with the thread the client holds (its messages and state); an
    interrupted run is answered with ``resume`` (docs/architecture.md,
    "AG-UI human in the loop").

    ``path``: the view's URL (default ``reverse("uistream:agui")``);
    ``thread_id``: the thread runs go to unless they name one (default a
    new id); ``verify``: check every stream against both real clients'
    rules (``AGUIVerificationError``); the other arguments are
    ``ChatClient``'s."""

    def __init__(
        self,
        path: str | None = None,
        *,
        thread_id: str | None = None,
        client: AsyncClient | None = None,
        headers: Mapping[str, str] | None = None,
        verify: bool = True,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__(client, headers, timeout)
        self.path = path
        self.thread_id = thread_id or _new_id("thread-")
        self.verify = verify
        self._held: dict[str, list[dict[str, Any]]] = {}
        self._state: dict[str, Any] = {}
        self._interrupts: dict[str, list[dict[str, Any]]] = {}

    def messages(self, thread_id: str | None = None) -> list[dict[str, Any]]:
        """The thread's messages as this client holds them."""
        return copy.deepcopy(self._held.get(thread_id or self.thread_id, []))

    def interrupts(self, thread_id: str | None = None) -> list[dict[str, Any]]:
        """The interrupts the thread's last run ended with, still open."""
        return copy.deepcopy(self._interrupts.get(thread_id or self.thread_id, []))

    async def run(
        self,
        message: str | Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
        resume: Sequence[Mapping[str, Any]] | None = None,
        **extra: Any,
    ) -> AGUIRunResult:
        """Run the agent on the thread: with a new user message (a text,
        or an AG-UI message), or with none (a ``resume``; or, for a
        client-side tool, ``messages=[*agent.messages(), tool_message]``).
        ``extra``: more ``RunAgentInput`` keys (``tools``, ``context``,
        ``forwardedProps``, ``messages``…), in place of the client's."""
        thread_id = thread_id or self.thread_id
        messages = self.messages(thread_id)
        if message is not None:
            new = agui_user_message(user_message(message, id=_new_id("u-"))) if isinstance(message, str) else message
            messages.append(dict(new))
        fields: dict[str, Any] = {
            "messages": messages,
            "state": copy.deepcopy(self._state.get(thread_id, {})),
            "tools": [],
            "context": [],
            "forwardedProps": {},
            **extra,
        }
        body = run_input(thread_id, fields.pop("messages"), run_id=_new_id("run-"), resume=resume, **fields)
        return await self.run_body(body)

    async def approve(
        self,
        interrupt_id: str | None = None,
        *,
        thread_id: str | None = None,
        reason: str | None = None,
        edited_args: Any = None,
    ) -> AGUIRunResult:
        """Resume the thread approving an open interrupt (None: every open
        one; the server wants every open one answered in one run)."""
        payload: dict[str, Any] = {"approved": True}
        if reason is not None:
            payload["reason"] = reason
        if edited_args is not None:
            payload["editedArgs"] = edited_args
        return await self._resume(thread_id, interrupt_id, {"status": "resolved", "payload": payload})

    async def deny(
        self, interrupt_id: str | None = None, *, thread_id: str | None = None, reason: str | None = None
    ) -> AGUIRunResult:
        """Resume the thread denying an open interrupt (None: every open one)."""
        payload: dict[str, Any] = {"approved": False}
        if reason is not None:
            payload["reason"] = reason
        return await self._resume(thread_id, interrupt_id, {"status": "resolved", "payload": payload})

    async def cancel(self, interrupt_id: str | None = None, *, thread_id: str | None = None) -> AGUIRunResult:
        """Resume the thread with an interrupt ``cancelled`` (a denial)."""
        return await self._resume(thread_id, interrupt_id, {"status": "cancelled"})

    async def run_body(self, body: Mapping[str, Any]) -> AGUIRunResult:
        """POST a ``RunAgentInput`` as it is (``run_input(...)``, or one made
        by hand). A run the endpoint took updates the thread this client holds."""
        request = dict(body)
        thread_id = str(request.get("threadId", ""))
        async with asyncio.timeout(self.timeout):
            response: HttpResponseBase = await self.client.post(
                self.path or reverse("uistream:agui"),
                json.dumps(request),
                content_type="application/json",
                headers={"Accept": "text/event-stream", **self.headers},
            )
            headers = {name.lower(): value for name, value in response.items()}
            if not isinstance(response, StreamingHttpResponse):
                error = self._error_of(response)
                return AGUIRunResult(thread_id, response.status_code, error=error, headers=headers, body=request)
            raw = await _body_of(response)
            events: list[Event] = verify_sse(raw) if self.verify else _sse_data(raw)
            run_id = headers.get(RUN_ID_HEADER)
            await _settle(run_id)
            message = await _stored_message(run_id) if run_id else None
        result = AGUIRunResult(
            thread_id,
            response.status_code,
            events,
            fold_messages(events, request.get("messages") or []),
            message,
            run_id=run_id,
            headers=headers,
            body=request,
        )
        self._held[thread_id] = copy.deepcopy(result.messages)
        if any(event.get("type") in ("STATE_SNAPSHOT", "STATE_DELTA") for event in events):
            self._state[thread_id] = result.state
        self._interrupts[thread_id] = result.interrupts
        return result

    async def _resume(self, thread_id: str | None, interrupt_id: str | None, answer: dict[str, Any]) -> AGUIRunResult:
        thread_id = thread_id or self.thread_id
        open_ = self._interrupts.get(thread_id, [])
        chosen = [i for i in open_ if interrupt_id is None or i.get("id") == interrupt_id]
        if not chosen:
            raise LookupError(f"no interrupt {interrupt_id or ''} is open in thread {thread_id!r}".replace("  ", " "))
        resume = [{"interruptId": i["id"], **copy.deepcopy(answer)} for i in chosen]
        return await self.run(thread_id=thread_id, resume=resume)
