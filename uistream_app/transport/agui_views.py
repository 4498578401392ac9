"""POST ``agui``: an AG-UI ``RunAgentInput`` in, AG-UI events out.

``AGUIView`` is ``ChatView``'s twin for the second dialect, on the same
pipeline, store and runner: the run is stored, logged, stoppable and owned
like a chat run, and only the request's shape and the renderer differ.
Interrupts (approvals) and their resume: docs/architecture.md, "AG-UI
human in the loop". ``render_stored_run`` (``recording.agui_history``, with the
other stored-run readers, re-exported here) serves any stored run as the
AG-UI stream a client would have read.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable
from functools import partial
from typing import Any, ClassVar

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponseBase

from ..adapters import AgentAdapter, AgentModel, adapter_for
from ..conf import settings as uistream_settings
from ..errors import BadRequest, Codes, Conflict, NotAcceptable, from_status
from ..hooks import ChatHooks, TurnContext
from ..lifecycle.store import AnswerReader, PreparedRun, ToolAnswer, Turn, pending_approvals
from ..models import Conversation, Message
from ..protocol.agui.handles import Agent
from ..protocol.agui.input import AGUIInput, AGUIInputError, parse_run_agent_input
from ..protocol.agui.messages import MessageConversionError, ui_messages_to_agui, ui_user_message
from ..protocol.agui.renderer import AGUIRenderer
from ..protocol.agui.resume import ApprovalAnswer, ToolResultMessage, read_approval_answers, read_tool_results
from ..protocol.agui.source import agent_source
from ..protocol.agui.state import SharedState, shared_state_source
from ..protocol.events import Event
from ..protocol.ui.parts import SETTLED_TOOL_STATES, is_tool_part, tool_parts
from ..recording.agui_history import render_stored_run, stored_history, stored_history_sync, stored_state
from ..runs import ChatModel
from .chat_request import valid_id
from .pipeline import RequestContext, StreamView, check_json_request, release_body

__all__ = [
    "AGUI_SSE_HEADERS",
    "AGUIView",
    "AgentModel",
    "render_stored_run",
    "stored_history",
    "stored_history_sync",
    "stored_state",
]

#: The SSE response headers (no ``X-Vercel-AI-UI-Message-Stream``: this is
#: not that protocol).
AGUI_SSE_HEADERS: dict[str, str] = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_ACCEPTED: tuple[str, ...] = ("text/event-stream", "text/*", "*/*")

#: The dialect recorded on an AG-UI run: its log is the canonical ai@7 one.
CANONICAL_SDK_VERSION = 7


def _as_bad_request(exc: AGUIInputError) -> BadRequest:
    return from_status(exc.message, code=exc.code, field=exc.field, status=exc.status)


def _part_for_interrupt(message: Message, interrupt_id: str) -> dict[str, Any] | None:
    """The tool part of ``message`` whose approval id is ``interrupt_id``
    (compared in constant time), whatever its state."""
    wanted = interrupt_id.encode()
    found = None
    for part in message.parts:
        approval = part.get("approval") if is_tool_part(part) else None
        if isinstance(approval, dict) and secrets.compare_digest(str(approval.get("id", "")).encode(), wanted):
            found = part
    return found


def agent_name(agent: Any) -> str:
    name = getattr(agent, "name", None) or getattr(agent, "__name__", None) or type(agent).__name__
    return str(name)[:200]


def _accepts_sse(request: HttpRequest) -> bool:
    accept = request.headers.get("accept")
    if not accept:
        return True
    media = {item.split(";", 1)[0].strip().lower() for item in accept.split(",")}
    return any(kind in media for kind in _ACCEPTED)


class AGUIView(ChatHooks, StreamView):
    """AG-UI's endpoint: ``RunAgentInput`` in, AG-UI events out (see the
    module docstring). Configure it as ``ChatView`` (``model``, ``tools``,
    ``system_prompt``…), or set ``agent``."""

    http_method_names: ClassVar[list[str]] = ["post", "options"]  # type: ignore[misc]
    starts_runs: ClassVar[bool] = True
    #: A hand-written AG-UI agent (a function of a ``RunContext``), or an
    #: agent of a framework an adapter runs (as on ``ChatView``).
    agent: Agent | Any = None

    def get_adapter(self, agent: Any) -> AgentAdapter | None:
        """A framework agent's adapter; None for a hand-written agent."""
        return adapter_for(agent)

    def get_agent_model(self, agent: Any, adapter: AgentAdapter | None) -> ChatModel:
        if adapter is None:
            return AgentModel(agent_name(agent))
        return super().get_agent_model(agent, adapter)

    def get_source(self, history: list[dict[str, Any]], run: PreparedRun, model: ChatModel) -> AsyncIterator[Event]:
        """The run's events: a hand-written agent's (through
        ``agent_source``), else the adapter's or the tool loop's."""
        setup = run.setup
        source: AsyncIterator[Event]
        if setup is None or setup.agent is None or setup.adapter is not None:
            source = super().get_source(history, run, model)
        else:
            source = agent_source(
                setup.agent,
                run.extra["agui"],
                message_id=run.message_id,
                history=list(history),
                error_text=uistream_settings.ERROR_TEXT,
                expose_errors=uistream_settings.EXPOSE_ERRORS,
            )
        return self.with_shared_state(source, run)

    def shared_state(self, run: PreparedRun) -> SharedState | None:
        """The run's ``SharedState`` (kept in ``run.extra["state"]``), which
        ``get_state`` fills when the run starts; None where ``get_state`` is
        not overridden (most endpoints share no state)."""
        if type(self).get_state is AGUIView.get_state:
            return None
        state = run.extra.get("state")
        if not isinstance(state, SharedState):
            state = run.extra["state"] = SharedState(None)
        return state

    def with_shared_state(self, source: AsyncIterator[Event], run: PreparedRun) -> AsyncIterator[Event]:
        """``source`` with the run's state events (``shared_state_source``):
        ``get_state`` is called inside the run (its failure is the run's),
        ``end_state`` at its end. As it is where there is no state. An
        override of ``get_source`` that does not call this one's calls it."""
        state = self.shared_state(run)
        if state is None:
            return source
        start = partial(sync_to_async(self.get_state), run)
        return shared_state_source(source, state, start=start, end=partial(self.end_state, run))

    def get_state(self, run: PreparedRun) -> Any:
        """The AG-UI shared state at the start of ``run`` (called in a worker
        thread, so it may use the ORM), or None: this endpoint shares no
        state and sends no state events (the default). With a state, the
        run sends it as ``STATE_SNAPSHOT`` first, every change made through
        ``self.shared_state(run)`` (a ``SharedState``: ``set``, ``patch``,
        ``update``; also ``run.extra["state"]``) as a ``STATE_DELTA`` as it happens, and ``end_state``'s
        at its end; the state it leaves is stored (``Run.state``) and a
        replay sends it first (docs/protocols.md, "AG-UI shared state").
        ``stored_state(run)`` is where the thread's last run left it;
        the client's own ``state`` is ``run.extra["agui"].state``."""
        return None

    def end_state(self, run: PreparedRun, state: SharedState) -> Awaitable[None] | None:
        """Called when the run completes (its source ended its message, an
        interrupt included; not when it is stopped or fails), right before
        its end: change ``state`` here (it may be a coroutine function)."""
        return None

    def get_renderer(self, agui: AGUIInput, run: PreparedRun) -> AGUIRenderer:
        """The renderer of this response. ``RUN_STARTED`` names the stored run
        (``metadata.uistream.runId``) so a client can find it in the API; the
        renderer gets the stored thread the run starts from, which a
        continuation sends first and a run that ends in an interrupt sends
        last (docs/protocols.md, AG-UI renderer rules 13 and 14)."""
        return AGUIRenderer(
            agui.thread_id,
            agui.run_id,
            parent_run_id=agui.parent_run_id,
            metadata={"uistream": {"runId": str(run.run.pk)}},
            history=ui_messages_to_agui(run.thread) if run.thread is not None else None,
            continues=run.continues,
        )

    def parse(self, body: bytes, max_bytes: int) -> AGUIInput:
        """The checked input; raises ``BadRequest``."""
        try:
            agui = parse_run_agent_input(body, max_bytes=max_bytes)
        except AGUIInputError as exc:
            raise _as_bad_request(exc) from None
        if not valid_id(agui.thread_id):
            raise BadRequest("threadId must be 1-128 characters of letters, digits, '_' or '-'", field="threadId")
        return agui

    def get_turn(self, agui: AGUIInput, *, tool_loop: bool) -> Turn:
        """The turn ``agui`` asks for: the new user message, under the
        thread's id; or, for the tool loop (``tool_loop``: not a
        hand-written agent, which reads the answers itself), the
        continuation of the interrupted message (``resume``, or a last
        message that is a tool result). Raises ``BadRequest``."""
        last = agui.last_message
        where = f"messages[{len(agui.messages) - 1}]"
        # The store checks the answers for the tool loop and an adapter's
        # runs; a hand-written agent reads them itself.
        continues = bool(agui.resume) or (last is not None and last["role"] == "tool")
        if continues and tool_loop:
            if last is not None and last["role"] == "user":
                raise BadRequest(
                    "a run that resumes continues the interrupted message: it takes no new user message",
                    field=f"{where}.role",
                )
            try:
                answers, results = read_approval_answers(agui), read_tool_results(agui)
            except AGUIInputError as exc:
                raise _as_bad_request(exc) from None
            reader = interrupt_answers(tuple(answers), tuple(results))
            return Turn(agui.thread_id, "continue", answers=reader, extra={"agui": agui})
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
        return Turn(agui.thread_id, "submit", message=user, refuse_while_pending=tool_loop, extra={"agui": agui})

    async def post(self, request: HttpRequest, context: RequestContext) -> HttpResponseBase:
        max_bytes = check_json_request(request)
        if not _accepts_sse(request):
            raise NotAcceptable("this endpoint answers in text/event-stream")
        agui = self.parse(request.body, max_bytes)
        release_body(request)  # parsed: its bytes would be one more copy of the body while the turn is stored
        turn_context = TurnContext(context.owner, agui.thread_id, "agui", forwarded_extra(agui), request=request)
        await self._mcp_tools_listed()
        setup = self.setup_turn(turn_context)
        turn = self.get_turn(agui, tool_loop=setup.agent is None or setup.adapter is not None)
        claim = context.ensure_owner if turn.kind == "submit" else None
        handle = await self.start_turn(
            turn, turn_context, version=CANONICAL_SDK_VERSION, claim_owner=claim, with_thread=True, setup=setup
        )
        assert handle.prepared is not None
        return self.stream_run(handle, self.get_renderer(agui, handle.prepared), AGUI_SSE_HEADERS)


def forwarded_extra(agui: AGUIInput) -> dict[str, Any]:
    """``TurnContext.extra`` of an AG-UI run: its ``forwardedProps`` (an
    object; any other JSON value under the key ``"forwardedProps"``)."""
    props = agui.forwarded_props
    if props is None:
        return {}
    return props if isinstance(props, dict) else {"forwardedProps": props}


def interrupt_answers(
    resume_answers: tuple[ApprovalAnswer, ...], tool_results: tuple[ToolResultMessage, ...]
) -> AnswerReader:
    """The AG-UI answers as ``ToolAnswer``\\ s for the store, which checks and
    applies them. Found here, because only AG-UI names a call by its
    interrupt: which call each ``interruptId`` answers (409
    ``unknown_interrupt`` for none in the thread, ``stale`` for one of an
    earlier message), whether every open interrupt is answered (409
    ``interrupts_unanswered``), and which tool messages answer a call still
    open (the others echo results the server sent, or the client's record
    of its answer to a call's interrupt: AG-UI resume rule 5)."""

    def read(last: Message | None, conversation: Conversation) -> list[ToolAnswer]:
        target = last if last is not None and last.role == "assistant" else None
        answers = [_resume_answer(entry, target, conversation) for entry in resume_answers]
        answered = {entry.interrupt_id for entry in resume_answers}
        unanswered = [p["approval"]["id"] for p in pending_approvals(target) if p["approval"]["id"] not in answered]
        if unanswered:
            raise Conflict(
                f"resume must answer every open interrupt of the thread; unanswered: {', '.join(unanswered)}",
                code=Codes.INTERRUPTS_UNANSWERED,
                field="resume",
            )
        answers.extend(_result_answers(tool_results, target, resumed={a.tool_call_id for a in answers}))
        if target is None or not answers:
            raise Conflict(
                "nothing to continue: no pending tool call of this thread was answered", code=Codes.NOTHING_PENDING
            )
        return answers

    return read


def _resume_answer(entry: ApprovalAnswer, target: Message | None, conversation: Conversation) -> ToolAnswer:
    part = _part_for_interrupt(target, entry.interrupt_id) if target is not None else None
    if part is None:
        earlier = conversation.messages.current().filter(role="assistant").exclude(pk=target.pk if target else None)
        if any(_part_for_interrupt(m, entry.interrupt_id) is not None for m in earlier):
            raise Conflict(
                f"{entry.where} answers an interrupt of a message that is no longer the last in this thread",
                code=Codes.STALE,
                field=f"{entry.where}.interruptId",
            )
        raise Conflict(
            f"{entry.where}.interruptId names no interrupt of this thread",
            code=Codes.UNKNOWN_INTERRUPT,
            field=f"{entry.where}.interruptId",
        )
    return ToolAnswer(
        part["toolCallId"],
        "approval",
        entry.interrupt_id,
        entry.approved,
        entry.reason,
        record={"via": "agui", "status": entry.status},
        **(
            {"edited_input": entry.edited_args, "edit_field": f"{entry.where}.payload.editedArgs"}
            if entry.edits
            else {}
        ),
    )


def _result_answers(
    tool_results: tuple[ToolResultMessage, ...], target: Message | None, *, resumed: set[str]
) -> list[ToolAnswer]:
    """The client-side tools' results among ``tool_results``: the tool
    messages answering a call of ``target`` still open, but for the calls
    in ``resumed`` (answered by a ``resume`` entry of the same request)."""
    calls = {p["toolCallId"]: p for p in tool_parts(target.parts)} if target is not None else {}
    said: set[str] = set()
    answers: list[ToolAnswer] = []
    for result in tool_results:
        part = calls.get(result.tool_call_id)
        if part is None or part.get("state") in SETTLED_TOOL_STATES:
            continue  # the client's history: a result the server sent
        if result.tool_call_id in resumed:
            # The client's own record of its answer to a tool-bound
            # interrupt (CopilotKit adds one beside the resume entry): the
            # resume entry is the answer; the call's result is the tool's.
            continue
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
    return answers
