"""Starting a chat run: the part every transport shares.

``ChatRunMixin`` holds the hooks a project overrides (``get_model``,
``get_tools``, ``get_system_prompt``, ``get_source``…) and ``start_run``,
which applies a parsed request to the stored conversation (one
transaction), registers the run with the live-run broker and starts its
task. ``ChatView`` (HTTP) and ``ChatConsumer`` (WebSocket) both mix it in;
they differ only in how they read requests and deliver chunks.

``execute_run`` is the run task: encode, record, publish, and close the log
however the run ends.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.module_loading import import_string

from .chat_request import BadRequest, ChatRequest
from .conf import settings as uistream_settings
from .live import RunAlreadyActive, RunChannel, get_broker
from .models import Conversation, Message, Run
from .protocol.events import Event
from .protocol.ui.chunks import Chunk
from .protocol.ui.encoder import UIMessageEncoder
from .protocol.ui.stream import aencode_batches
from .recording import RunRecorder, log_writes_inline
from .runs import (
    ChatModel,
    ClientToolResult,
    SystemMessage,
    Tool,
    ToolApproval,
    ToolCallRequest,
    ToolLoop,
    model_name,
    ui_to_model_messages,
)

__all__ = ["ChatRunMixin", "StartedRun", "ToolAnswer", "execute_run", "new_message_id", "not_found"]

logger = logging.getLogger("uistream_app.chat")


def not_found(what: str = "chat") -> BadRequest:
    """The one answer for "missing" and "someone else's" alike, whatever
    was looked for (``what`` is kept for readers of the code): no oracle."""
    return BadRequest("not found: no such chat or message of yours", code="not_found", status=404)


def new_message_id() -> str:
    return "msg_" + secrets.token_urlsafe(18)


class ServerToolLoop(ToolLoop):
    """The tool loop of the chat endpoints: approval ids are unguessable
    (the server only accepts an answer that names the id it stored)."""

    def approval_id(self, call: ToolCallRequest) -> str:
        return "apv_" + secrets.token_urlsafe(18)


@dataclass
class StartedRun:
    run: Run
    message: Message
    task: asyncio.Task[None]


@dataclass(frozen=True)
class ToolAnswer:
    """What a continuation request says about one tool call of the message
    it continues, in no dialect's words; ``ChatRunMixin.continue_message``
    checks it against the stored message.

    ``kind``: ``approval`` (a person's decision: ``approval_id`` as the
    client named it, ``approved`` as sent, checked to be a bool, and an
    optional ``reason``), ``result`` (a client-side tool's ``output``, or
    with ``is_error`` its error text), or ``other`` (anything else said
    about the call: it answers nothing, and is refused unless the call is
    settled the same way already). ``record`` adds fields to the decision
    stored on the run (the dialect, the answer's status).
    """

    tool_call_id: str
    kind: Literal["approval", "result", "other"]
    approval_id: str = ""
    approved: Any = None
    reason: str | None = None
    output: Any = None
    is_error: bool = False
    record: Mapping[str, Any] = field(default_factory=dict)


class ChatRunMixin:
    """The hooks of a chat endpoint and the start of its runs."""

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

    def get_source(self, history: list[dict[str, Any]], chat: ChatRequest, model: ChatModel) -> AsyncIterator[Event]:
        """The run's event source. ``history`` is the stored conversation
        (UIMessages, oldest first) the model answers. The default runs a
        ``ToolLoop`` over the model and tools; return any async iterator of
        source events to run something else (an agent, a canned reply)."""
        messages = ui_to_model_messages(history)
        prompt = self.get_system_prompt()
        if prompt:
            messages.insert(0, SystemMessage(prompt))
        loop = ServerToolLoop(
            model,
            self.get_tools(),
            max_steps=self.get_max_steps(),
            error_text=uistream_settings.ERROR_TEXT,
        )
        return loop.run(messages, approvals=chat.approvals, client_results=chat.client_results)

    def get_message_metadata(self, chat: ChatRequest) -> Any:
        """Metadata for the assistant message's ``start`` chunk (None: none)."""
        return None

    async def start_run(self, chat: ChatRequest, owner: dict[str, Any], version: int, model: ChatModel) -> StartedRun:
        """Apply ``chat`` to the stored conversation, register the run with
        the broker and start its task. Raises ``BadRequest`` (404 for a chat
        that is not the owner's, 409 while another run streams) with
        nothing written."""
        broker = get_broker()
        # The chat's one run slot is taken before anything is written, so
        # two requests racing for one chat can't both write (the loser would
        # leave a user message without a reply, or an approval answered with
        # no run to act on it). Strangers get the 404 of any foreign chat,
        # not the 409, and can't hold the slot of a chat they don't own.
        await self._check_owned_or_new(chat.chat_id, owner)
        run_id = str(uuid.uuid4())
        try:
            channel = await broker.open_run(chat.chat_id, run_id)
        except RunAlreadyActive:
            raise BadRequest("a reply is still streaming in this chat", code="run_active", status=409) from None

        def prepare(request: ChatRequest) -> tuple[bool, tuple[Run, Message, list[dict[str, Any]], ChatRequest]]:
            # Where the log goes is asked on the thread (and connection) that
            # creates the run's rows, before prepare_run opens its transaction
            # (docs/recording.md, invariant 7).
            return log_writes_inline(), self.prepare_run(request, owner, version, model)

        try:
            inline, prepared = await sync_to_async(prepare, thread_sensitive=True)(replace(chat, run_id=run_id))
        except BaseException:
            await asyncio.shield(channel.close())  # nothing was published: the slot is free again
            raise
        run, message, history, chat = prepared
        # A continuation goes on from the parts the message already holds:
        # their calls' outputs (and denials) are sent, new part ids follow
        # theirs. A new message has no parts.
        encoder = UIMessageEncoder(message.pk, self.get_message_metadata(chat), continues=message.parts)
        recorder = RunRecorder(run, message, inline=inline)
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
        return StartedRun(run, message, task)

    async def _check_owned_or_new(self, chat_id: str, owner: dict[str, Any]) -> None:
        exists = await Conversation.objects.filter(pk=chat_id).exclude(**owner).aexists()
        if exists:
            raise not_found()

    # -- database work (one transaction, in a worker thread) ----------------------

    def prepare_run(
        self, chat: ChatRequest, owner: dict[str, Any], version: int, model: ChatModel
    ) -> tuple[Run, Message, list[dict[str, Any]], ChatRequest]:
        """Apply the request to the stored conversation and create the
        assistant message and its run. The stored conversation is the truth:
        the client's history only contributes its new user message."""
        with transaction.atomic():
            conversation = Conversation.objects.select_for_update().filter(pk=chat.chat_id).first()
            new = conversation is None
            if conversation is None:
                first = chat.last_message if chat.trigger == "submit-message" and not chat.is_continuation else None
                title = _title_from(first["parts"]) if first is not None else ""
                conversation = Conversation(pk=chat.chat_id, title=title, **owner)
                conversation.save(force_insert=True)
            elif not self._owns(conversation, owner):
                raise not_found()
            if chat.is_continuation:
                return self.prepare_continuation(conversation, chat, version, model)
            submitted: Message | None = None
            if chat.trigger == "regenerate-message":
                self.apply_regenerate(conversation, chat)
            else:
                submitted = self.apply_submit(conversation, chat, new=new)
            # A new chat holds just the submitted message: no need to read it back.
            stored = [submitted] if new and submitted is not None else list(conversation.messages.order_by("position"))
            if not stored or stored[-1].role != "user":
                raise BadRequest("there is no user message to answer", code="nothing_to_answer")
            position = stored[-1].position + 1
            message = Message.objects.create(
                pk=new_message_id(), conversation=conversation, role="assistant", parts=[], position=position
            )
            if not new:  # a new chat was saved with its title just now
                if not conversation.title:
                    conversation.title = _title_from(stored[-1].parts)
                conversation.updated_at = timezone.now()
                conversation.save(update_fields=["title", "updated_at"])
            run = create_run(chat, conversation, message, model, version, trigger=chat.trigger)
        return run, message, [m.as_ui_message() for m in stored], chat

    def prepare_continuation(
        self, conversation: Conversation, chat: ChatRequest, version: int, model: ChatModel
    ) -> tuple[Run, Message, list[dict[str, Any]], ChatRequest]:
        """The browser answered pending tool calls of the last assistant
        message: approvals (ai@6+) or client-side tool results.

        useChat sends the whole assistant message back; what it says new
        about each tool call (a state that differs from the stored one)
        becomes a ``ToolAnswer``, and ``continue_message`` checks and
        applies the answers. The message must be the stored last message
        (a 404 otherwise, as for any message that is not the owner's).
        """
        claimed = chat.last_message
        assert claimed is not None
        stored = list(conversation.messages.order_by("position"))
        target = stored[-1] if stored else None
        if target is None or target.role != "assistant" or target.pk != claimed["id"]:
            raise not_found("message")
        states = {p["toolCallId"]: p.get("state") for p in target.parts if _is_tool_part(p)}
        answers: list[ToolAnswer] = []
        for claim in claimed["parts"]:
            if not _is_tool_part(claim):
                continue
            call_id, claimed_state = claim.get("toolCallId"), claim.get("state")
            if call_id in states and claimed_state == states[call_id]:
                continue  # nothing new said about this call
            call = str(call_id)
            if claimed_state == "approval-responded":
                answer = claim.get("approval") if isinstance(claim.get("approval"), dict) else {}
                reason = answer.get("reason") if isinstance(answer.get("reason"), str) else None
                answers.append(
                    ToolAnswer(call, "approval", str(answer.get("id", "")), answer.get("approved"), reason=reason)
                )
            elif claimed_state in ("output-available", "output-error"):
                is_error = claimed_state == "output-error"
                output = claim.get("errorText") if is_error else claim.get("output")
                answers.append(ToolAnswer(call, "result", output=output, is_error=is_error))
            else:
                answers.append(ToolAnswer(call, "other"))
        return self.continue_message(conversation, stored, answers, chat, version, model)

    def continue_message(
        self,
        conversation: Conversation,
        stored: list[Message],
        answers: Sequence[ToolAnswer],
        chat: ChatRequest,
        version: int,
        model: ChatModel,
    ) -> tuple[Run, Message, list[dict[str, Any]], ChatRequest]:
        """Check ``answers`` against the stored last message (``stored[-1]``,
        an assistant message) and continue it: the one implementation of
        the continuation's rules, whatever dialect the answers came in.

        Server-authoritative: the stored message says which calls are
        pending and with which approval id; the client only contributes
        its decisions, each accepted once, for a call pending in the stored
        conversation (the caller checked ownership). The calls run with the
        *stored* arguments. Anything else is refused with nothing written:
        an answer for a call the message does not hold (400
        ``unknown_tool_call``), an approval id that does not match the
        pending one (409 ``approval_mismatch``, compared in constant time),
        an approval without a boolean decision or an error without its text
        (400), an answer for a call that is not pending that way (409
        ``not_pending``: an output for a server-side tool, an approval
        nobody asked for), one for a call already answered (409
        ``already_answered``: a replay), and a request that answers nothing
        (409 ``nothing_pending``). The same assistant message is continued
        (same id, as the SDK's own server does); the decisions are stored
        on the new run (``Run.decisions``, shown in the admin).
        """
        target = stored[-1]
        assert target.role == "assistant"
        client_tools = {t.name for t in self.get_tools() if t.client_side}
        known = {p["toolCallId"] for p in target.parts if _is_tool_part(p)}
        by_call: dict[str, ToolAnswer] = {}
        for answer in answers:
            if answer.tool_call_id in by_call:
                raise BadRequest(f"the tool call {answer.tool_call_id} is answered twice", code="invalid")
            by_call[answer.tool_call_id] = answer
        unknown = sorted(c for c in by_call if c not in known)
        if unknown:
            raise BadRequest(f"no such tool call in this message: {', '.join(unknown)}", code="unknown_tool_call")
        approvals: dict[str, ToolApproval] = {}
        results: dict[str, ClientToolResult] = {}
        decisions: list[dict[str, Any]] = []
        parts = [dict(p) for p in target.parts]
        now = timezone.now().isoformat()
        by = decided_by(conversation)
        for part in parts:
            found = by_call.get(part["toolCallId"]) if _is_tool_part(part) else None
            if found is None:
                continue
            answer, call_id, state = found, found.tool_call_id, part.get("state")
            if answer.kind == "approval" and state == "approval-requested":
                pending = part.get("approval") or {}
                if not secrets.compare_digest(answer.approval_id.encode(), str(pending.get("id", "")).encode()):
                    raise BadRequest(
                        f"the approval for {call_id} does not match the pending request",
                        code="approval_mismatch",
                        status=409,
                    )
                if not isinstance(answer.approved, bool):
                    raise BadRequest(f"the approval for {call_id} needs approved: true or false", code="invalid")
                reason = answer.reason
                approvals[call_id] = ToolApproval(pending["id"], answer.approved, reason)
                part["state"] = "approval-responded"
                part["approval"] = {**pending, "approved": answer.approved, **({"reason": reason} if reason else {})}
                decisions.append(
                    {
                        "toolCallId": call_id,
                        "approvalId": pending["id"],
                        "approved": answer.approved,
                        "reason": reason,
                        "decidedAt": now,
                        "decidedBy": by,
                        **answer.record,
                    }
                )
            elif answer.kind == "result" and state == "input-available" and _tool_name(part) in client_tools:
                if answer.is_error and not isinstance(answer.output, str):
                    raise BadRequest(f"the error of {call_id} needs an errorText", code="invalid")
                results[call_id] = ClientToolResult(answer.output, is_error=answer.is_error)
                outcome = "output-error" if answer.is_error else "output-available"
                decisions.append(
                    {"toolCallId": call_id, "clientResult": outcome, "decidedAt": now, "decidedBy": by, **answer.record}
                )
            elif state in ("approval-requested", "input-available"):
                raise BadRequest(f"the tool call {call_id} cannot be answered that way", code="not_pending", status=409)
            else:
                raise BadRequest(f"the tool call {call_id} was already answered", code="already_answered", status=409)
        if not approvals and not results:
            raise BadRequest(
                "nothing to continue: no pending tool call was answered", code="nothing_pending", status=409
            )
        target.parts = parts
        target.save(update_fields=["parts"])
        conversation.updated_at = timezone.now()
        conversation.save(update_fields=["updated_at"])
        run = create_run(chat, conversation, target, model, version, trigger="continue", decisions=decisions)
        history = [m.as_ui_message() for m in stored[:-1]] + [target.as_ui_message()]
        return run, target, history, replace(chat, approvals=approvals, client_results=results)

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
            if chat.is_continuation and chat.message_id not in (None, last["id"]):
                raise BadRequest("a continuation names the assistant message it continues", field="messageId")

    def apply_submit(self, conversation: Conversation, chat: ChatRequest, *, new: bool = False) -> Message | None:
        """Store the submitted user message (an edit first deletes the
        edited message and what follows it); returns it. ``new``: the
        conversation was created by this request and holds nothing yet."""
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
        elif not new and messages.filter(pk=last["id"]).exists():
            raise BadRequest("that message was already sent; regenerate or edit instead", code="duplicate", status=409)
        position = 0 if new else (messages.aggregate(Max("position"))["position__max"] or -1) + 1
        try:
            with transaction.atomic():
                return Message.objects.create(
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
    try:
        async for batch in aencode_batches(
            source, encoder, error_text=error_text, expose_errors=expose_errors, on_error=failure.append
        ):
            # Recorded, then published, with no await in between: a
            # cancellation (stop, disconnect) can't split the two, and
            # publish takes its chunks before it first waits (RunChannel).
            await _record_and_publish(recorder, channel, batch)
        if failure:
            status = "failed"
    except asyncio.CancelledError:
        status = "stopped" if stopped.is_set() else "cancelled"
        tail = encoder.abort("stopped" if stopped.is_set() else None)
        if tail:
            await asyncio.shield(_record_and_publish(recorder, channel, tail, closing=True))
        raise
    except Exception as exc:  # a failure of ours (recording, broker): still close cleanly
        logger.exception("run %s failed outside its source", recorder.run.pk)
        failure.append(exc)
        status = "failed"
        tail = encoder.error(error_text)
        if tail:
            await asyncio.shield(_record_and_publish(recorder, channel, tail, closing=True))
    finally:
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


async def _record_and_publish(
    recorder: RunRecorder, channel: RunChannel, chunks: list[Chunk], *, closing: bool = False
) -> None:
    """Log ``chunks`` (never waits), then publish them. For the closing
    chunks a failed publish is only logged: the log is what counts, and a
    subscriber that missed them will see the stored run."""
    recorder.add(chunks)
    try:
        await channel.publish(chunks)
    except Exception:
        if not closing:
            raise
        logger.exception("could not publish the closing chunks of run %s", recorder.run.pk)


async def _finish(recorder: RunRecorder, channel: RunChannel, status: str, **fields: Any) -> None:
    try:
        await recorder.finish(status, **fields)
    finally:
        await channel.close()


def create_run(
    chat: ChatRequest,
    conversation: Conversation,
    message: Message,
    model: ChatModel,
    version: int,
    *,
    trigger: str,
    decisions: list[dict[str, Any]] | None = None,
) -> Run:
    """The row of the run ``chat`` starts, under the id ``start_run``
    reserved with the broker (a new one when it reserved none)."""
    return Run.objects.create(
        **({"pk": chat.run_id} if chat.run_id else {}),
        conversation=conversation,
        message=message,
        status="running",
        model=model_name(model)[:200],
        sdk_version=version,
        trigger=trigger,
        decisions=decisions or [],
    )


def decided_by(conversation: Conversation) -> str:
    """Who answered a pending tool call of ``conversation``: its owner (only
    the owner gets that far), as the admin shows it. An anonymous visitor
    is named by a digest of the session key, never the key itself (the
    decisions are shown to staff and served by the API)."""
    if conversation.owner_id is not None:
        owner = conversation.owner
        name = owner.get_username() if owner is not None else ""
        return f"user {conversation.owner_id} ({name})" if name else f"user {conversation.owner_id}"
    digest = hashlib.sha256((conversation.session_key or "").encode()).hexdigest()[:12]
    return f"anonymous visitor {digest}"


def _is_tool_part(part: Any) -> bool:
    kind = part.get("type", "") if isinstance(part, dict) else ""
    return isinstance(kind, str) and (kind.startswith("tool-") or kind == "dynamic-tool") and "toolCallId" in part


def _tool_name(part: dict[str, Any]) -> str:
    kind = str(part.get("type", ""))
    return str(part.get("toolName", "")) if kind == "dynamic-tool" else kind.removeprefix("tool-")


def _title_from(parts: list[dict[str, Any]]) -> str:
    text = " ".join(p.get("text", "") for p in parts if p.get("type") == "text").strip()
    return (text[:77] + "…") if len(text) > 80 else text


async def _watch_stop(channel: RunChannel, task: asyncio.Task[None], stopped: asyncio.Event) -> None:
    await channel.stop_requested.wait()
    stopped.set()
    task.cancel()
