"""POST ``agui``: an AG-UI ``RunAgentInput`` in, AG-UI events out.

``AGUIView`` is ``ChatView``'s twin for the second dialect, on the same
machinery (``ChatRunMixin.start_run``, ``execute_run``, the recorder, the
broker): the run is stored like a chat run (same models, same canonical
log, shown in the admin and the API), a stop through ``chat/<threadId>/stop``
ends it ``RUN_FINISHED`` with outcome ``cancelled``, a dropped connection
follows ``ON_DISCONNECT``, and the conversation belongs to its owner. Only
the request's shape and the renderer differ.

The request (``protocol.agui.input``): ``threadId`` names the stored
conversation (the chat id rule applies); ``messages`` is the client's
history, of which, as in the chat view, only the new user message (the
last one, which must be a user message) is taken: the stored conversation
is the truth. System and developer messages are read and not stored (the
server owns the prompt, ``get_system_prompt``). ``tools``, ``context``,
``state``, ``forwardedProps`` and ``resume`` reach a hand-written agent
through its ``RunContext``; the default source, the tool loop over the
project's model and tools, does not offer the client's tools to the model
(a client-side tool needs a continuation, which AG-UI runs do not take
yet).

Set ``agent`` (a function of a ``RunContext``, see
``protocol.agui.handles``) to serve a hand-written agent instead of the
tool loop; its run records the agent's name as the model.

Bad requests get ChatView's answers: 401, 403 (CSRF, in JSON), 404 (a
conversation that is not the owner's), 409 (a reply still streaming, a
message already sent), 413, 415, 400 naming the field, 406 when the client
does not accept ``text/event-stream``; nothing is written.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, ClassVar, cast

from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponseBase, StreamingHttpResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from .chat import ChatRunMixin
from .chat_request import BadRequest, ChatRequest, valid_id
from .conf import settings as uistream_settings
from .live import get_broker
from .models import Message, Run
from .protocol.agui.handles import Agent
from .protocol.agui.input import AGUIInput, AGUIInputError, parse_run_agent_input
from .protocol.agui.messages import MessageConversionError, ui_user_message
from .protocol.agui.renderer import AGUIRenderer
from .protocol.agui.source import agent_source
from .protocol.events import Event
from .protocol.ui.render import UIStreamRenderer
from .protocol.ui.replay import replay_message
from .recording import load_log
from .runs import ChatModel
from .runs.messages import ModelMessage, ModelOptions, ToolSpec
from .runs.model import ModelEvent
from .views import OwnerMixin, PortalMixin, check_csrf, error_response, render_subscription

__all__ = ["AGUI_SSE_HEADERS", "AGUIView", "AgentModel", "agui_response", "render_stored_run"]

#: The SSE response headers (no ``X-Vercel-AI-UI-Message-Stream``: this is
#: not that protocol).
AGUI_SSE_HEADERS: dict[str, str] = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_ACCEPTED: tuple[str, ...] = ("text/event-stream", "text/*", "*/*")

#: The dialect recorded on an AG-UI run: its log is the canonical ai@7 one.
CANONICAL_SDK_VERSION = 7


class AgentModel:
    """Stands in for the model on a hand-written agent's run, so the run
    records the agent's name. It is never asked to stream."""

    def __init__(self, name: str) -> None:
        self.name = name

    def stream(
        self,
        messages: Sequence[ModelMessage],
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> AsyncIterator[ModelEvent]:
        raise ImproperlyConfigured(f"{self.name} is a hand-written AG-UI agent, not a model")


def agent_name(agent: Any) -> str:
    name = getattr(agent, "name", None) or getattr(agent, "__name__", None) or type(agent).__name__
    return str(name)[:200]


def _accepts_sse(request: HttpRequest) -> bool:
    accept = request.headers.get("accept")
    if not accept:
        return True
    media = {item.split(";", 1)[0].strip().lower() for item in accept.split(",")}
    return any(kind in media for kind in _ACCEPTED)


@method_decorator(csrf_exempt, name="dispatch")
class AGUIView(PortalMixin, OwnerMixin, ChatRunMixin, View):
    """AG-UI's endpoint: ``RunAgentInput`` in, AG-UI events out (see the
    module docstring). Configure it as ``ChatView`` (``model``, ``tools``,
    ``system_prompt``…), or set ``agent``."""

    http_method_names: ClassVar[list[str]] = ["post", "options"]  # type: ignore[misc]
    agent: Agent | None = None

    agui_input: AGUIInput
    assistant_message_id: str | None = None

    # -- hooks ---------------------------------------------------------------------

    def get_agent(self) -> Agent | None:
        """The hand-written agent this request runs, or None for the tool
        loop. Called once per request; override to choose per user."""
        # Through the class, so a plain function is not bound as a method.
        value: Agent | None = self.__dict__.get("agent", type(self).agent)
        return value

    def get_source(self, history: list[dict[str, Any]], chat: ChatRequest, model: ChatModel) -> AsyncIterator[Event]:
        """The run's events: the agent's (through ``agent_source``), or the
        tool loop's when there is no agent."""
        agent = self.get_agent()
        if agent is None:
            return super().get_source(history, chat, model)
        return agent_source(
            agent,
            self.agui_input,
            message_id=self.assistant_message_id,
            history=history,
            error_text=uistream_settings.ERROR_TEXT,
            expose_errors=bool(uistream_settings.EXPOSE_ERRORS),
        )

    def prepare_run(self, *args: Any, **kwargs: Any) -> Any:
        # The handles name their messages after the assistant message the
        # run builds (handles rule 8), known once it exists.
        prepared = super().prepare_run(*args, **kwargs)
        self.assistant_message_id = prepared[1].pk
        return prepared

    def get_renderer(self, agui: AGUIInput, run_pk: str) -> AGUIRenderer:
        """The renderer of this response. ``RUN_STARTED`` names the stored run
        (``metadata.uistream.runId``) so a client can find it in the API."""
        return AGUIRenderer(
            agui.thread_id,
            agui.run_id,
            parent_run_id=agui.parent_run_id,
            metadata={"uistream": {"runId": run_pk}},
        )

    # -- the request -----------------------------------------------------------------

    async def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        try:
            return await self.handle(request)
        except BadRequest as exc:
            return error_response(exc)

    def parse(self, body: bytes, max_bytes: int) -> tuple[AGUIInput, ChatRequest]:
        """The checked input and the chat request it makes: the new user
        message, under the thread's id. Raises ``BadRequest``."""
        try:
            agui = parse_run_agent_input(body, max_bytes=max_bytes)
        except AGUIInputError as exc:
            raise BadRequest(exc.message, code=exc.code, field=exc.field, status=exc.status) from None
        if not valid_id(agui.thread_id):
            raise BadRequest("threadId must be 1-128 characters of letters, digits, '_' or '-'", field="threadId")
        last = agui.last_message
        where = f"messages[{len(agui.messages) - 1}]"
        if last is None:
            raise BadRequest("messages needs the new user message", field="messages")
        if last["role"] != "user":
            raise BadRequest(
                "the last message must be the new user message (continuations are not taken here)",
                field=f"{where}.role",
            )
        if not valid_id(last["id"]):
            raise BadRequest(
                "a message id must be 1-128 characters of letters, digits, '_' or '-'", field=f"{where}.id"
            )
        try:
            user = ui_user_message(last, where)
        except MessageConversionError as exc:
            raise BadRequest(str(exc), field=exc.field) from None
        return agui, ChatRequest(agui.thread_id, [user], "submit-message", None, {"agui": agui})

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
        if not _accepts_sse(request):
            raise BadRequest("this endpoint answers in text/event-stream", code="not_acceptable", status=406)
        await self.get_owner(request)  # 401 before anything else is looked at
        csrf_failure = await sync_to_async(check_csrf)(request)
        if csrf_failure is not None:
            raise csrf_failure
        agui, chat = self.parse(request.body, max_bytes)
        agent = self.get_agent()
        model: ChatModel = AgentModel(agent_name(agent)) if agent is not None else self.get_model()
        self.check_request(chat)
        owner = await self.get_owner(request)
        if owner.get("owner") is None and owner.get("session_key") is None:
            # Only a valid request may create the anonymous visitor's session.
            owner = await self.get_owner(request, create_session=True)
        self.agui_input = agui
        started = await self.start_run(chat, owner, CANONICAL_SDK_VERSION, model)
        task = started.task
        policy = uistream_settings.ON_DISCONNECT

        def on_close(completed: bool) -> None:
            if not completed and policy == "cancel" and not task.done():
                task.cancel()

        renderer = self.get_renderer(agui, str(started.run.pk))
        body = render_subscription(
            get_broker(),
            str(started.run.pk),
            # render_subscription only calls render_many() and done(), which
            # AGUIRenderer has: the dialect is the renderer's business.
            cast(UIStreamRenderer, renderer),
            keepalive_seconds=float(uistream_settings.KEEPALIVE_SECONDS),
            on_close=on_close,
        )
        return agui_response(body)


async def render_stored_run(run: Run, *, thread_id: str | None = None, run_id: str | None = None) -> bytes:
    """A stored run as the AG-UI stream a client would have read: its
    canonical log rendered (or, for a message with no log, its parts
    replayed), so any conversation can be served in either dialect.
    ``thread_id`` defaults to the conversation's id, ``run_id`` to the
    run's."""
    chunks = await load_log(run)
    if not chunks and run.message_id is not None:
        message = await Message.objects.aget(pk=run.message_id)
        chunks = replay_message(message.as_ui_message())
    renderer = AGUIRenderer(thread_id or run.conversation_id, run_id or str(run.pk))
    return renderer.render_many(chunks) + renderer.done()


def agui_response(body: AsyncIterator[bytes]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    for name, value in AGUI_SSE_HEADERS.items():
        response[name] = value
    return response
