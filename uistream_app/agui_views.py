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
(client-side tools are the project's ``ClientTool`` tools).

Human in the loop (the tool loop; AG-UI 1.0's interrupts): a run whose
model called a tool that needs approval ends ``RUN_FINISHED`` with an
``interrupt`` outcome, one interrupt per pending call, its ``id`` the
stored approval id (renderer rule 8), and right before it sends the thread
as ``MESSAGES_SNAPSHOT`` (rule 14: the stored conversation the run started
from, ``run_history``, with the run's messages folded in under the ids it
streamed), as AG-UI asks at an interrupt. The answer is a new run on the same
thread whose ``resume`` answers every open interrupt (``{interruptId,
status: "resolved", payload: {approved: true|false, reason?}}``, or
``status: "cancelled"``, a denial; ``protocol.agui.resume``). A run that
left a client-side tool's call unanswered ends as a success with the call
pending (``pendingToolCallIds``); the answer is a new run whose
``messages`` end with the ``tool`` message for it. Such a request carries
no new user message: it continues the interrupted assistant message (same
stored message, same id), through the same server checks as useChat's
continuation (``ChatRunMixin.continue_message``: each answer accepted once,
only for a call pending in the stored last message, only from the thread's
owner; the approved call runs with its stored arguments, a denied one is
reported to the model), and the decisions are stored on the new run
(``Run.decisions``, ``via: "agui"``). The continuation's stream is a
normal run (``RUN_STARTED`` … ``RUN_FINISHED``) that first sends the
stored conversation as ``MESSAGES_SNAPSHOT``, then ``TOOL_CALL_RESULT``
against the original call ids (renderer rule 13). Refused, with nothing
run or written: an ``interruptId`` that names no interrupt of the thread
(409 ``unknown_interrupt``), one of a message that is no longer the last
(409 ``stale``), one already answered (409 ``already_answered``), a
``resume`` that leaves an open interrupt unanswered (409
``interrupts_unanswered``, AG-UI's rule 3), a payload that is not an
approval's answer (400, naming ``resume[i].payload``), a new user message
while interrupts are open (409 ``interrupts_pending``, AG-UI's rule 4), and
another owner's thread (404). AG-UI asks for ``RUN_ERROR`` in these cases;
a request refused before anything ran gets the house's 4xx JSON instead,
which ``HttpAgent`` reports as a failed run all the same.

Set ``agent`` (a function of a ``RunContext``, see
``protocol.agui.handles``) to serve a hand-written agent instead of the
tool loop; its run records the agent's name as the model. An agent reads
``resume`` itself, with a new user message; continuations of stored
messages are the tool loop's.

Bad requests get ChatView's answers: 401, 403 (CSRF, in JSON), 404 (a
conversation that is not the owner's), 409 (a reply still streaming, a
message already sent), 413, 415, 400 naming the field, 406 when the client
does not accept ``text/event-stream``; nothing is written.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, cast

from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponseBase, StreamingHttpResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from .chat import ChatRunMixin, ToolAnswer
from .chat import _is_tool_part as _tool_part
from .chat_request import BadRequest, ChatRequest, valid_id
from .conf import settings as uistream_settings
from .live import get_broker
from .models import Conversation, Message, Run
from .protocol.agui.handles import Agent
from .protocol.agui.input import AGUIInput, AGUIInputError, parse_run_agent_input
from .protocol.agui.messages import MessageConversionError, fold_messages, ui_messages_to_agui, ui_user_message
from .protocol.agui.renderer import AGUIRenderer
from .protocol.agui.resume import ApprovalAnswer, ToolResultMessage, read_approval_answers, read_tool_results
from .protocol.agui.source import agent_source
from .protocol.events import Event
from .protocol.ui.render import UIStreamRenderer
from .protocol.ui.replay import replay_message
from .recording import load_log, read_log
from .runs import ChatModel
from .runs.messages import ModelMessage, ModelOptions, ToolSpec
from .runs.model import ModelEvent
from .views import OwnerMixin, PortalMixin, check_csrf, check_json_request, error_response, render_subscription

__all__ = [
    "AGUI_SSE_HEADERS",
    "AGUIContinuation",
    "AGUIView",
    "AgentModel",
    "agui_response",
    "render_stored_run",
    "stored_history",
    "stored_history_sync",
]

#: The SSE response headers (no ``X-Vercel-AI-UI-Message-Stream``: this is
#: not that protocol).
AGUI_SSE_HEADERS: dict[str, str] = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_ACCEPTED: tuple[str, ...] = ("text/event-stream", "text/*", "*/*")

#: The dialect recorded on an AG-UI run: its log is the canonical ai@7 one.
CANONICAL_SDK_VERSION = 7


#: Tool part states that settle a call: a tool message for one only echoes
#: the result the server sent.
_SETTLED: Final = frozenset(("output-available", "output-error", "output-denied"))


@dataclass(frozen=True)
class AGUIContinuation(ChatRequest):
    """A ``RunAgentInput`` that continues the thread's interrupted
    assistant message instead of adding a user message: its answers, read
    but not yet checked against the stored conversation."""

    resume_answers: tuple[ApprovalAnswer, ...] = ()
    tool_results: tuple[ToolResultMessage, ...] = ()

    @property
    def is_continuation(self) -> bool:
        return True


def _as_bad_request(exc: AGUIInputError) -> BadRequest:
    return BadRequest(exc.message, code=exc.code, field=exc.field, status=exc.status)


def _pending_approvals(message: Message | None) -> list[dict[str, Any]]:
    """The tool parts of ``message`` waiting for a person's approval."""
    if message is None or message.role != "assistant":
        return []
    return [p for p in message.parts if _tool_part(p) and p.get("state") == "approval-requested"]


def _part_for_interrupt(message: Message, interrupt_id: str) -> dict[str, Any] | None:
    """The tool part of ``message`` whose approval id is ``interrupt_id``
    (compared in constant time), whatever its state."""
    wanted = interrupt_id.encode()
    found = None
    for part in message.parts:
        approval = part.get("approval") if _tool_part(part) else None
        if isinstance(approval, dict) and secrets.compare_digest(str(approval.get("id", "")).encode(), wanted):
            found = part
    return found


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
    #: The stored conversation the run starts from (UI messages, the new
    #: user message or the continued message included): the renderer's
    #: history, snapshotted at an interrupt (renderer rule 14).
    run_history: list[dict[str, Any]] | None = None
    #: The same for a continuation, which also sends it as its first
    #: ``MESSAGES_SNAPSHOT`` (rule 13); None for a new message.
    continued_history: list[dict[str, Any]] | None = None

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
        self.run_history = prepared[2]
        return prepared

    def get_renderer(self, agui: AGUIInput, run_pk: str) -> AGUIRenderer:
        """The renderer of this response. ``RUN_STARTED`` names the stored run
        (``metadata.uistream.runId``) so a client can find it in the API; the
        renderer gets the stored conversation the run starts from, which a
        continuation sends first (rule 13) and a run that ends in an
        interrupt sends last (rule 14)."""
        history = self.run_history
        return AGUIRenderer(
            agui.thread_id,
            agui.run_id,
            parent_run_id=agui.parent_run_id,
            metadata={"uistream": {"runId": run_pk}},
            history=ui_messages_to_agui(history) if history is not None else None,
            continues=self.continued_history is not None,
        )

    # -- continuations (see the module docstring) ----------------------------------------

    def check_request(self, chat: ChatRequest) -> None:
        if not isinstance(chat, AGUIContinuation):  # a continuation is checked in its transaction
            super().check_request(chat)

    def apply_submit(self, conversation: Conversation, chat: ChatRequest, *, new: bool = False) -> Message | None:
        """AG-UI's rule 4: while the thread's last message waits for
        approvals, a new user message is refused; the run must resume."""
        if self.get_agent() is None and not new:
            last = conversation.messages.order_by("-position").first()
            waiting = [p["approval"]["id"] for p in _pending_approvals(last)]
            if waiting:
                raise BadRequest(
                    f"this thread waits for its open interrupts to be answered ({', '.join(waiting)}): "
                    "send them in resume before a new message",
                    code="interrupts_pending",
                    status=409,
                    field="resume",
                )
        return super().apply_submit(conversation, chat, new=new)

    def prepare_continuation(
        self, conversation: Conversation, chat: ChatRequest, version: int, model: ChatModel
    ) -> tuple[Run, Message, list[dict[str, Any]], ChatRequest]:
        """The AG-UI answers as ``ToolAnswer``\\ s for ``continue_message``,
        which checks and applies them. Found here, because only AG-UI names
        a call by its interrupt: which call each ``interruptId`` answers
        (409 ``unknown_interrupt`` for none in the thread, ``stale`` for one
        of an earlier message), whether every open interrupt is answered
        (409 ``interrupts_unanswered``), and which tool messages answer a
        call still open (the others echo results the server sent)."""
        if not isinstance(chat, AGUIContinuation):
            return super().prepare_continuation(conversation, chat, version, model)
        stored = list(conversation.messages.order_by("position"))
        target = stored[-1] if stored and stored[-1].role == "assistant" else None
        answers: list[ToolAnswer] = []
        for entry in chat.resume_answers:
            part = _part_for_interrupt(target, entry.interrupt_id) if target is not None else None
            if part is None:
                earlier = [m for m in stored if m is not target and m.role == "assistant"]
                if any(_part_for_interrupt(m, entry.interrupt_id) is not None for m in earlier):
                    raise BadRequest(
                        f"{entry.where} answers an interrupt of a message that is no longer the last in this thread",
                        code="stale",
                        status=409,
                        field=f"{entry.where}.interruptId",
                    )
                raise BadRequest(
                    f"{entry.where}.interruptId names no interrupt of this thread",
                    code="unknown_interrupt",
                    status=409,
                    field=f"{entry.where}.interruptId",
                )
            answers.append(
                ToolAnswer(
                    part["toolCallId"],
                    "approval",
                    entry.interrupt_id,
                    entry.approved,
                    entry.reason,
                    record={"via": "agui", "status": entry.status},
                )
            )
        answered = {entry.interrupt_id for entry in chat.resume_answers}
        open_ids = [p["approval"]["id"] for p in _pending_approvals(target)]
        unanswered = [i for i in open_ids if i not in answered]
        if unanswered:
            raise BadRequest(
                f"resume must answer every open interrupt of the thread; unanswered: {', '.join(unanswered)}",
                code="interrupts_unanswered",
                status=409,
                field="resume",
            )
        calls = {p["toolCallId"]: p for p in target.parts if _tool_part(p)} if target is not None else {}
        said: set[str] = set()
        for result in chat.tool_results:
            part = calls.get(result.tool_call_id)
            if part is None or part.get("state") in _SETTLED:
                continue  # the client's history: a result the server sent
            if result.tool_call_id in said:
                raise BadRequest(
                    f"{result.where} answers the tool call {result.tool_call_id} a second time",
                    field=f"{result.where}.toolCallId",
                )
            said.add(result.tool_call_id)
            try:
                output, is_error = result.text()
            except AGUIInputError as exc:
                raise _as_bad_request(exc) from None
            answers.append(
                ToolAnswer(result.tool_call_id, "result", output=output, is_error=is_error, record={"via": "agui"})
            )
        if target is None or not answers:
            raise BadRequest(
                "nothing to continue: no pending tool call of this thread was answered",
                code="nothing_pending",
                status=409,
            )
        prepared = self.continue_message(conversation, stored, answers, chat, version, model)
        self.continued_history = prepared[2]
        return prepared

    # -- the request -----------------------------------------------------------------

    async def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        try:
            return await self.handle(request)
        except BadRequest as exc:
            return error_response(exc)

    def parse(self, body: bytes, max_bytes: int) -> tuple[AGUIInput, ChatRequest]:
        """The checked input and the chat request it makes: the new user
        message, under the thread's id; or, for the tool loop, the
        continuation of the interrupted message (``resume``, or a last
        message that is a tool result). Raises ``BadRequest``."""
        try:
            agui = parse_run_agent_input(body, max_bytes=max_bytes)
        except AGUIInputError as exc:
            raise _as_bad_request(exc) from None
        if not valid_id(agui.thread_id):
            raise BadRequest("threadId must be 1-128 characters of letters, digits, '_' or '-'", field="threadId")
        last = agui.last_message
        where = f"messages[{len(agui.messages) - 1}]"
        continues = bool(agui.resume) or (last is not None and last["role"] == "tool")
        if continues and self.get_agent() is None:
            if last is not None and last["role"] == "user":
                raise BadRequest(
                    "a run that resumes continues the interrupted message: it takes no new user message",
                    field=f"{where}.role",
                )
            try:
                answers, results = read_approval_answers(agui), read_tool_results(agui)
            except AGUIInputError as exc:
                raise _as_bad_request(exc) from None
            return agui, AGUIContinuation(
                agui.thread_id,
                [],
                "submit-message",
                None,
                {"agui": agui},
                resume_answers=tuple(answers),
                tool_results=tuple(results),
            )
        if last is None:
            raise BadRequest("messages needs the new user message", field="messages")
        if last["role"] != "user":
            raise BadRequest(
                "the last message must be the new user message (or, to continue, a tool result; "
                "answers to interrupts go in resume)",
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
        max_bytes = check_json_request(request)
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
    run's. The renderer gets the thread as it stood when the run started
    (``stored_history``), so a continuation starts with its
    ``MESSAGES_SNAPSHOT`` and a run that ended in an interrupt ends with
    one, as they did live (renderer rules 13 and 14); when that thread is
    not known, neither snapshot is sent."""
    chunks = await load_log(run)
    if not chunks and run.message_id is not None:
        message = await Message.objects.aget(pk=run.message_id)
        chunks = replay_message(message.as_ui_message())
    history = await stored_history(run)
    renderer = AGUIRenderer(
        thread_id or run.conversation_id,
        run_id or str(run.pk),
        history=history,
        continues=history is not None and run.trigger == "continue",
    )
    return renderer.render_many(chunks) + renderer.done()


def stored_history_sync(run: Run) -> list[dict[str, Any]] | None:
    """The thread as a client held it when ``run`` started, as AG-UI
    messages; None when it is not known.

    The messages before the run's message are stored as they were: a
    conversation only changes at its end, and an edit or a regeneration
    deletes the run's message too. The run's own message, when the run
    continues it, is not: its row holds its latest state. It is rebuilt as
    the client built it, by rendering the message's earlier runs' logs in
    order and folding their events (``fold_messages``) onto the messages
    before it. Not known: a run whose message is gone, and a continuation
    of which an earlier run has no log (a message stored before logs)."""
    if run.message_id is None:
        return None
    message = Message.objects.filter(pk=run.message_id).first()
    if message is None:
        return None
    before = Message.objects.filter(conversation_id=message.conversation_id, position__lt=message.position)
    history = ui_messages_to_agui([m.as_ui_message() for m in before.order_by("position")])
    if run.trigger != "continue":
        return history
    earlier = Run.objects.filter(message_id=message.pk, started_at__lt=run.started_at).order_by("started_at", "pk")
    runs = list(earlier)
    if not runs:
        return None
    for previous in runs:
        chunks = [entry.chunk for entry in read_log(previous)]
        if not chunks:
            return None
        renderer = AGUIRenderer("", "", history=history, continues=previous.trigger == "continue", clock=lambda: 0)
        events = [e for chunk in chunks for e in renderer.events(chunk)] + renderer.close_events()
        history = fold_messages(events, history)
    return history


async def stored_history(run: Run) -> list[dict[str, Any]] | None:
    """``stored_history_sync`` from async code (one thread hop)."""
    return await sync_to_async(stored_history_sync)(run)


def agui_response(body: AsyncIterator[bytes]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    for name, value in AGUI_SSE_HEADERS.items():
        response[name] = value
    return response
