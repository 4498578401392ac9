"""``ConversationStore``: the only code that touches the database to turn
a request into a run (docs/architecture.md, "The flow").

A transport parses its request into a ``Turn`` (what is asked of the
conversation, in no dialect's words) and calls ``prepare``, which checks
ownership, takes the chat's run slot from the broker, applies the turn to
the stored conversation in one transaction and returns a ``PreparedRun``;
``Runner.start`` (``runner.py``) then runs it. The stored conversation is
the truth: of the client's history only the new user message is taken.
"""

from __future__ import annotations

import asyncio
import functools
import json
import secrets
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from asgiref.sync import sync_to_async
from django.db import IntegrityError, connections, router, transaction
from django.db.models import F
from django.utils import timezone

from ..errors import BadRequest, Codes, Conflict, not_found
from ..live import RunAlreadyActive, RunChannel, get_broker
from ..models import (
    Conversation,
    EncodedJSON,
    Message,
    MessageQuerySet,
    Run,
    StoredFile,
    StoredJSONEncoder,
    new_conversation_key,
    owned_sql,
)
from ..owners import Owner
from ..protocol.jsonbody import LARGE_JSON_BYTES
from ..protocol.ui.parts import is_tool_part, tool_name, tool_parts
from ..recording import log_writes_inline, one_writer
from ..recording.one_writer import turn_coming
from ..runs import ClientToolResult, ToolApproval
from ..runs.steering import SteeringInbox
from ..runs.tools import validate_json
from .attachments import StagedFiles, decode_files, has_file_parts, referenced_file_ids
from .branches import retire_from
from .caps import OwnerCaps, stored_bytes_of
from .leases import orphan_ids, settle_chat_orphans
from .threads import release_after_large_write

if TYPE_CHECKING:
    from .turns import TurnSetup

__all__ = [
    "AnswerReader",
    "ConversationStore",
    "HistoryChooser",
    "PreparedRun",
    "ToolAnswer",
    "Turn",
    "new_chat_id",
    "new_message_id",
]


def new_message_id() -> str:
    return "msg_" + secrets.token_urlsafe(18)


def new_chat_id() -> str:
    return secrets.token_urlsafe(16)


#: ``ToolAnswer.edited_input`` when the answer edits nothing.
_UNEDITED: Any = object()


@dataclass(frozen=True)
class ToolAnswer:
    """What a request says about one tool call of the message it continues.

    ``kind``: ``approval`` (a person's decision: the ``approval_id`` the
    client named, ``approved`` as sent, an optional ``reason``), ``result``
    (a client-side tool's ``output``, or with ``is_error`` its error text),
    or ``other`` (anything else said about the call: refused unless the call
    is settled that way already). ``record`` adds fields to the decision
    stored on the run (the dialect, the answer's status).
    """

    tool_call_id: str
    kind: Literal["approval", "result", "other"]
    approval_id: str = ""
    approved: Any = None
    reason: str | None = None
    output: Any = None
    is_error: bool = False
    record: dict[str, Any] = field(default_factory=dict)
    #: An approval's edited arguments (left out: none), and where the
    #: request said them (the error's ``field``).
    edited_input: Any = _UNEDITED
    edit_field: str = ""


#: Reads a continuation's answers against the stored last message (None
#: when the conversation is empty); raises ``BadRequest``. Each dialect
#: has its own (useChat: the resent assistant message; AG-UI: ``resume``).
AnswerReader = Callable[[Message | None, Conversation], list[ToolAnswer]]

#: Chooses the stored messages a turn's model sees, from the conversation's
#: messages ordered by position (the view's ``get_history`` hook).
HistoryChooser = Callable[[MessageQuerySet], list[Message]]


@dataclass(frozen=True)
class Turn:
    """What one request asks of a conversation.

    ``submit``: store ``message`` (a user UIMessage) and answer it;
    ``edit_of`` names the user message it makes a new version of (it and
    what follows leave the current branch, kept: ``branches``).
    ``regenerate``: answer again; ``edit_of`` names the assistant message
    to make a new version of (default: the last message, if the assistant's).
    ``continue``: the client answered pending tool calls of the last
    message; ``answers`` reads them.
    """

    chat_id: str
    kind: Literal["submit", "regenerate", "continue"]
    message: dict[str, Any] | None = None
    edit_of: str | None = None
    answers: AnswerReader | None = None
    #: AG-UI's rule: no new user message while an approval is pending.
    refuse_while_pending: bool = False
    #: What the transport read besides (useChat's extra body keys, the
    #: AG-UI input): for the view's hooks, never interpreted here.
    extra: dict[str, Any] = field(default_factory=dict)
    #: The request reads as a chat's first message (a submit sent with no
    #: earlier message): ``prepare`` then looks for the chat in the hop of
    #: the turn's transaction, not in a hop of its own. A guess only: a
    #: chat that exists after all takes the usual path.
    opens_chat: bool = False


@dataclass(frozen=True)
class PreparedRun:
    """A turn applied to the stored conversation: the rows of its run, what
    the model answers, and the run's reserved slot with the broker."""

    run: Run
    message: Message
    owner: Owner
    turn: Turn
    #: The stored messages the model sees (``get_history``), oldest first.
    history: list[dict[str, Any]]
    #: The whole stored thread the run starts from, when asked for (AG-UI's
    #: snapshots need it); else None.
    thread: list[dict[str, Any]] | None
    approvals: dict[str, ToolApproval]
    client_results: dict[str, ClientToolResult]
    channel: RunChannel
    #: Whether the chunk log is written on the connection that wrote these
    #: rows (see docs/architecture.md, "The chunk log").
    log_inline: bool
    #: A continuation's: what the run that asked for the pending calls saved
    #: (``Run.agent_state``: an agent framework's own state); else None.
    resume_state: Any = None
    #: What the endpoint's hooks chose for the turn (``turns.TurnSetup``,
    #: its ``context`` among it), set by ``ChatHooks.start_turn``.
    setup: TurnSetup | None = None
    #: The messages sent to the run while it runs (``runs.steering``):
    #: the tool loop takes them at its step boundaries; where the run
    #: executes, ``lifecycle.steering_messages`` fills it from the broker.
    steering: SteeringInbox = field(default_factory=SteeringInbox)
    #: How long the run's log is already: 0, or a continued run's log (its
    #: process died; this one numbers on from there, ``continuation``).
    log_from: int = 0
    #: A continued run's: the model calls its earlier owners made (they
    #: count against ``max_steps``: the run gets no fresh budget).
    steps_taken: int = 0
    #: What a process that continues the run needs (``Run.turn``,
    #: ``continuation.turn_record``), stored with its first chunks.
    turn_record: dict[str, Any] | None = None

    @property
    def chat_id(self) -> str:
        """The client's chat id (unique per owner only)."""
        return self.turn.chat_id

    @property
    def conversation_id(self) -> str:
        """The conversation's key: what the broker's slot and anything
        else the server keys by chat goes by."""
        return str(self.run.conversation_id)

    @property
    def message_id(self) -> str:
        return self.message.ui_id

    @property
    def continues(self) -> bool:
        return self.turn.kind == "continue"

    @property
    def extra(self) -> dict[str, Any]:
        return self.turn.extra


#: What ``Run.turn`` holds for a turn, given the turn, whether the store
#: loads the whole thread, and the answers it checked (``ChatHooks``
#: passes ``continuation.turn_record`` with its own class and set-up).
TurnRecorder = Callable[
    [Turn, bool, Mapping[str, ToolApproval], Mapping[str, ClientToolResult]], "dict[str, Any] | None"
]


def _check_chat(chat_id: str, owner: Owner) -> tuple[str | None, list[str]]:
    """Before a turn: the key of ``owner``'s conversation ``chat_id`` (None
    when the owner has none: a new chat, whoever else has a chat of that
    id) and the ids of its orphaned runs (``leases.orphan_ids``). One query
    for a new chat, two for an existing one. Synchronous."""
    if not owner.is_known:
        return None, []
    key = _owned_chat_key(chat_id, owner)
    if key is None:
        return None, []
    return key, orphan_ids(conversation_id=key)


def _owned_chat_key(chat_id: str, owner: Owner) -> str | None:
    """``Conversation.objects.owned_by(owner).with_client_id(chat_id)``'s
    first key, written out (``models.owned_sql``): building that query
    through the ORM cost 283 µs of a turn's set-up on SQLite, the statement
    written out 20 µs (docs/benchmarks.md, "Issue 29's targets, one by
    one")."""
    database = connections[router.db_for_read(Conversation)]
    quote = database.ops.quote_name
    fields = Conversation._meta
    whose, params = owned_sql(owner, "c", database)
    key = quote(str(fields.pk.column))
    with database.cursor() as cursor:
        cursor.execute(
            f"SELECT c.{key} FROM {quote(fields.db_table)} c "
            f"WHERE {whose} AND c.{quote(str(fields.get_field('client_id').column))} = %s ORDER BY c.{key} LIMIT 1",
            [*params, chat_id],
        )
        row = cursor.fetchone()
    return None if row is None else str(row[0])


def _all_messages(messages: MessageQuerySet) -> list[Message]:
    """The history of a store given no chooser: every stored message (a
    view always passes its own, ``ChatHooks.get_history``)."""
    return list(messages)


class ConversationStore:
    """Turns requests into runs (see the module docstring).

    ``client_tools``: names of the tools the client runs (a continuation
    may answer only those with results); ``choose_history``: the view's
    ``get_history``; ``with_thread``: also load the whole thread;
    ``editable_tools``: the tools whose arguments a person who approves a
    call may edit, by name, with the JSON Schema the edit must fit.
    """

    def __init__(
        self,
        *,
        client_tools: frozenset[str] = frozenset(),
        choose_history: HistoryChooser | None = None,
        with_thread: bool = False,
        editable_tools: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.client_tools = client_tools
        self.editable_tools = dict(editable_tools or {})
        self.choose_history = choose_history or _all_messages
        self.with_thread = with_thread

    async def prepare(
        self,
        turn: Turn,
        owner: Owner,
        *,
        version: int,
        model_name: str,
        claim_owner: Callable[[], Awaitable[Owner]] | None = None,
        record_turn: TurnRecorder | None = None,
    ) -> PreparedRun:
        """Apply ``turn`` for ``owner``; raises ``BadRequest`` (404 for a turn
        that needs a chat the owner does not have, 409 while another run
        streams in it) with nothing written and the slot free again.
        ``claim_owner`` is awaited before anything is written (it gives an
        anonymous visitor the session that will own the chat), and its
        owner is the one the turn is applied for.

        Chat ids are per owner: ``turn.chat_id`` names the owner's chat of
        that id, and another owner's chat of the same id is never looked at,
        so a submit to it starts a chat of the owner's own. The run slot is
        the conversation's key's (a new one's, made here), so two owners'
        chats of one id never share a slot, a stream or a stop signal.

        ``record_turn`` gives what the run row stores for a process that
        continues the run if this one dies (``Run.turn``), written with the
        row: a run lost before its first log write can be continued too."""
        with turn_coming():
            return await self._prepare(
                turn, owner, version=version, model_name=model_name, claim_owner=claim_owner, record_turn=record_turn
            )

    async def _prepare(
        self,
        turn: Turn,
        owner: Owner,
        *,
        version: int,
        model_name: str,
        claim_owner: Callable[[], Awaitable[Owner]] | None,
        record_turn: TurnRecorder | None,
    ) -> PreparedRun:
        opens_chat = turn.opens_chat and turn.kind == "submit" and turn.edit_of is None
        if not opens_chat:
            # The chat's orphans are found in the same hop to the database.
            key, orphans = await sync_to_async(_check_chat, thread_sensitive=True)(turn.chat_id, owner)
        # Attached files are decoded and checked (413, 415) before anything
        # is written, the visitor's session included (off the event loop:
        # base64 of a large file takes a while).
        files = None
        if turn.kind == "submit" and turn.message is not None and has_file_parts(turn.message):
            files = await sync_to_async(decode_files)(turn.message)
        if claim_owner is not None:
            owner = await claim_owner()
        # The two ways below into the slot differ only by the key and the check.
        in_slot = functools.partial(
            self._in_slot,
            turn=turn,
            owner=owner,
            version=version,
            model_name=model_name,
            files=files,
            record_turn=record_turn,
        )
        if opens_chat:
            # Likely a new chat: its slot, on the key a new chat gets (no
            # other request can hold it), then the ownership check and the
            # transaction in one hop to the database instead of two. Under
            # a burst every hop waits behind the others' (the database
            # thread is shared): 500 sockets' ownership checks alone took
            # 0.85-0.95 s of it (docs/benchmarks.md, "The socket's set-up").
            first = await in_slot(new_conversation_key(), check_first=True, new_chat=True)
            if isinstance(first, PreparedRun):
                return first
            key, orphans = first  # the owner has the chat after all: nothing written, the usual path
        new_chat = key is None
        if key is None:
            key = new_conversation_key()
        elif orphans:
            await self.settle_orphans(key)
        prepared = await in_slot(key, check_first=False, new_chat=new_chat)
        assert isinstance(prepared, PreparedRun)
        return prepared

    async def _in_slot(
        self, key: str, turn: Turn, owner: Owner, *, check_first: bool, **prepare: Any
    ) -> PreparedRun | tuple[str, list[str]]:
        """Take the run slot of conversation ``key``, then ``prepare_sync``
        in one hop to the database. The slot is taken before anything is
        written: of two requests racing for one chat, the loser writes
        nothing. ``check_first``: in the same hop, look for the owner's
        chat ``turn.chat_id`` first; when there is one, write nothing and
        return its key and orphans (the slot let go)."""
        run_id = str(uuid.uuid4())
        try:
            channel = await get_broker().open_run(key, run_id)
        except RunAlreadyActive:
            raise Conflict("a reply is still streaming in this chat", code=Codes.RUN_ACTIVE) from None
        try:
            prepared = await sync_to_async(self._checked_prepare_sync, thread_sensitive=True)(
                turn, owner, check_first, run_id=run_id, channel=channel, **prepare
            )
        except BaseException:
            await asyncio.shield(channel.close())
            raise
        if not isinstance(prepared, PreparedRun):
            await asyncio.shield(channel.close())
        return prepared

    def _checked_prepare_sync(
        self, turn: Turn, owner: Owner, check_first: bool, **prepare: Any
    ) -> PreparedRun | tuple[str, list[str]]:
        if check_first:
            key, orphans = _check_chat(turn.chat_id, owner)
            if key is not None:
                return key, orphans
        return self.prepare_sync(turn, owner, **prepare)

    async def load(
        self,
        run_id: str,
        owner: Owner,
        turn: Turn,
        *,
        approvals: dict[str, ToolApproval],
        client_results: dict[str, ClientToolResult],
        channel: RunChannel,
    ) -> PreparedRun | None:
        """The ``PreparedRun`` that ``prepare`` made for ``run_id``, rebuilt
        from the stored rows in another process (an executor's worker):
        what the database does not hold (the turn, the checked answers, the
        channel the worker adopted) is handed in. None when the run is not
        ``running`` any more (settled meanwhile)."""
        return await sync_to_async(self._load_sync, thread_sensitive=True)(
            run_id, owner, turn, approvals, client_results, channel
        )

    def _load_sync(
        self,
        run_id: str,
        owner: Owner,
        turn: Turn,
        approvals: dict[str, ToolApproval],
        client_results: dict[str, ClientToolResult],
        channel: RunChannel,
    ) -> PreparedRun | None:
        log_inline = log_writes_inline()
        # The executing process takes the run's lease under an epoch of its
        # own (docs/operations.md, "Leases and the sweeper"): from here on
        # only this process writes its log.
        if not Run.objects.filter(pk=run_id, status="running").update(
            lease_epoch=F("lease_epoch") + 1, heartbeat_at=timezone.now()
        ):
            return None
        run = Run.objects.select_related("message", "conversation").filter(pk=run_id, status="running").first()
        if run is None or run.message is None:
            return None
        message = run.message
        messages = run.conversation.messages.current().order_by("position")
        # As ``prepare`` chose it: a new answer is not part of its own
        # history, a continued message is.
        if turn.kind == "continue":
            before = messages.filter(position__lte=message.position)
        else:
            before = messages.filter(position__lt=message.position)
        history = self.choose_history(before)
        thread = None
        if self.with_thread:
            # ``prepare`` gives a new chat's thread as its history alone.
            thread_rows = list(messages)
            if len(thread_rows) == 2 and turn.kind == "submit" and message.position == 1:
                thread_rows = history
            thread = [m.as_ui_message() for m in thread_rows]
        return PreparedRun(
            run=run,
            message=message,
            owner=owner,
            turn=turn,
            history=[m.as_ui_message() for m in history],
            thread=thread,
            approvals=approvals,
            client_results=client_results,
            channel=channel,
            log_inline=log_inline,
            resume_state=_resume_state(message, run_id) if turn.kind == "continue" else None,
        )

    async def settle_orphans(self, conversation_id: str) -> None:
        """Called by ``prepare`` before it takes the chat's slot when the
        chat (the conversation of key ``conversation_id``) has runs whose
        process died: settle them (``leases``), so that a new turn never
        runs beside one, nor gets a 409 from its slot. (Whether there are
        any is asked in the ownership check's query hop; with none, this is
        not called.)"""
        await settle_chat_orphans(conversation_id)

    # -- the transaction ---------------------------------------------------------------

    def prepare_sync(
        self,
        turn: Turn,
        owner: Owner,
        *,
        run_id: str,
        channel: RunChannel,
        version: int,
        model_name: str,
        files: StagedFiles | None = None,
        new_chat: bool = False,
        record_turn: TurnRecorder | None = None,
    ) -> PreparedRun:
        """``prepare``'s transaction. ``new_chat``: the owner had no chat
        ``turn.chat_id`` when ``prepare`` looked (so the conversation is
        inserted without first being looked up again)."""
        log_inline = log_writes_inline()  # before this transaction opens
        # What a submit stores (its message, its files' bytes), counted once
        # against the day's storage cap (a file's data: URL counts nothing,
        # so it is the same count before the files are written and after).
        submitted = 0
        if turn.kind == "submit" and turn.message is not None:
            file_bytes = sum(len(decoded.data) for decoded in files.files) if files is not None else 0
            submitted = stored_bytes_of(turn.message, file_bytes)
        if files is None:
            return self._prepare_sync(
                turn, owner, run_id, channel, version, model_name, log_inline, None, new_chat, submitted, record_turn
            )
        # Before the files are written: a turn past the day's storage cap writes nothing.
        OwnerCaps.of(owner).check_stored_bytes(submitted)
        # The files' bytes go to storage before the transaction (which stays
        # short), and the message stored points at them; a failed
        # transaction takes them back out.
        try:
            turn = replace(turn, message=files.write())
            return self._prepare_sync(
                turn, owner, run_id, channel, version, model_name, log_inline, files, new_chat, submitted, record_turn
            )
        except BaseException:
            files.discard()
            raise

    def _prepare_sync(
        self,
        turn: Turn,
        owner: Owner,
        run_id: str,
        channel: RunChannel,
        version: int,
        model_name: str,
        log_inline: bool,
        files: StagedFiles | None,
        new_chat: bool,
        submitted: int,
        record_turn: TurnRecorder | None = None,
        server_key: bool = False,
    ) -> PreparedRun:
        applied: AnswersApplied | None = None
        try:
            with one_writer(), transaction.atomic():
                conversation, new = self._conversation(turn, owner, channel.conversation_id, new_chat)
                # A new chat's are the one just submitted (the query is not built: 80 µs).
                messages = Message.objects.none() if new else conversation.messages.current().order_by("position")
                resume_state = None
                stored = submitted
                if turn.kind == "continue":
                    message, applied, stored = self._continue(conversation, turn, owner)
                    history = self.choose_history(messages)
                    resume_state = _resume_state(message, run_id)
                else:
                    message, history = self._answer(conversation, messages, turn, new, files, server_key)
                approvals = applied.approvals if applied is not None else {}
                client_results = applied.results if applied is not None else {}
                run = _create_run(
                    run_id,
                    conversation,
                    message,
                    model_name,
                    version,
                    trigger=_TRIGGERS[turn.kind],
                    decisions=applied.decisions if applied is not None else [],
                    stored_bytes=stored,
                    turn=record_turn(turn, self.with_thread, approvals, client_results) if record_turn else None,
                )
                # After the row: the counts hold it, and a refusal rolls it back.
                OwnerCaps.of(owner).check_turn(run)
                release_after_large_write(stored)
                thread = None
                if self.with_thread:
                    thread = [m.as_ui_message() for m in (history if new else messages)]
        except _KeyTaken:
            # Another chat's message has the submitted one's id as its key
            # (ids are the client's): once more, under a key of the
            # server's (its id stays its client id). The usual turn pays
            # no savepoint for this.
            return self._prepare_sync(
                turn,
                owner,
                run_id,
                channel,
                version,
                model_name,
                log_inline,
                files,
                new_chat,
                submitted,
                record_turn,
                server_key=True,
            )
        return PreparedRun(
            run=run,
            message=message,
            owner=owner,
            turn=turn,
            history=[m.as_ui_message() for m in history],
            thread=thread,
            approvals=approvals,
            client_results=client_results,
            channel=channel,
            log_inline=log_inline,
            resume_state=resume_state,
        )

    def _conversation(self, turn: Turn, owner: Owner, key: str, new_chat: bool) -> tuple[Conversation, bool]:
        """The owner's conversation ``turn.chat_id``, locked; created under
        ``key`` (the slot ``prepare`` took) for a new chat's first message.
        404 for anything but a submit to a chat the owner does not have;
        409 when another request made the chat since ``prepare`` looked
        (its slot is not the one this turn holds). ``new_chat``: ``prepare``
        found none, so it is inserted at once; the unique client id per
        owner refuses it if another request made it since."""
        if not new_chat:
            conversation = Conversation.objects.select_for_update().owned_by(owner).with_client_id(turn.chat_id).first()
            if conversation is not None:
                if conversation.pk != key:
                    raise Conflict("a reply is still streaming in this chat", code=Codes.RUN_ACTIVE)
                return conversation, False
        if turn.kind != "submit" or turn.edit_of is not None:
            raise not_found()  # nothing to regenerate, edit or continue
        assert turn.message is not None
        conversation = Conversation(
            pk=key, client_id=turn.chat_id, title=_title_from(turn.message["parts"]), **owner.create_kwargs()
        )
        try:
            # No savepoint: a failed insert fails the whole transaction.
            conversation.save(force_insert=True)
        except IntegrityError:
            # The same owner's request for the same new chat won the race.
            raise Conflict("a reply is still streaming in this chat", code=Codes.RUN_ACTIVE) from None
        return conversation, True

    def _answer(
        self,
        conversation: Conversation,
        messages: MessageQuerySet,
        turn: Turn,
        new: bool,
        files: StagedFiles | None,
        server_key: bool,
    ) -> tuple[Message, list[Message]]:
        """A submit or regenerate: apply it, then make the (empty) assistant
        message that answers the last user message. Returns it and the
        history the model sees. ``server_key``: the submitted message is
        stored under a key of the server's (``_under_client_key``)."""
        if new:
            # A new chat holds just the submitted message: nothing to read
            # back, and its title was saved with the conversation just now.
            submitted, message = self._submit_new(conversation, turn, server_key)
            if files is not None:
                files.record(conversation, submitted)
            return message, [submitted]
        if turn.kind == "regenerate":
            self._regenerate(conversation, turn)
        else:
            submitted = self._submit(conversation, turn, server_key)
            if files is not None:
                files.record(conversation, submitted)
        history = self.choose_history(messages)
        if not history or history[-1].role != "user":
            raise BadRequest("there is no user message to answer", code=Codes.NOTHING_TO_ANSWER)
        answered = history[-1]
        message = Message.objects.create(
            pk=new_message_id(),
            conversation=conversation,
            role="assistant",
            parts=[],
            position=answered.position + 1,
            parent_key=answered.pk,
        )
        if not conversation.title:
            conversation.title = _title_from(history[-1].parts)
        conversation.updated_at = timezone.now()
        conversation.save(update_fields=["title", "updated_at"])
        return message, history

    def _submit_new(self, conversation: Conversation, turn: Turn, server_key: bool) -> tuple[Message, Message]:
        """A new chat's first message and the (empty) assistant message that
        answers it, inserted in one statement. ``server_key``: as
        ``_submit``'s."""
        message = turn.message
        assert message is not None
        with _parts_to_store(message) as parts, _bound_apart(parts) as apart:
            asked = Message(
                pk=message["id"],
                conversation=conversation,
                role="user",
                parts=parts,
                metadata=message.get("metadata"),
                position=0,
                parent_key="",
            )
            if server_key:
                asked.pk, asked.client_id = new_message_id(), message["id"]
            answer = Message(
                pk=new_message_id(),
                conversation=conversation,
                role="assistant",
                parts=[],
                position=1,
                parent_key=asked.pk,
            )
            with _under_client_key() if not server_key else nullcontext():
                # Bound apart, row by row (``_bound_apart``).
                Message.objects.bulk_create([asked, answer], batch_size=1 if apart else None)
        asked.parts = message["parts"]
        return asked, answer

    def _submit(self, conversation: Conversation, turn: Turn, server_key: bool) -> Message:
        """Store the submitted user message in a chat that has messages
        already (a new chat's: ``_submit_new``). An edit is a new version
        of the edited message: the edited one and what follows it leave
        the current branch, kept (``branches``)."""
        message = turn.message
        assert message is not None
        messages = conversation.messages.current()
        if turn.refuse_while_pending:
            _refuse_while_pending(messages.order_by("-position").first())
        kept: list[Any] = []
        if turn.edit_of is not None:
            edited = messages.with_client_id(turn.edit_of).filter(role="user").first()
            if edited is None:
                raise not_found()
            if turn.edit_of != message["id"]:
                raise BadRequest("an edit resends the edited message under its own id", field="messageId")
            # Files the edited message resends by their URL stay: they move
            # to the new message instead of going with the old one.
            kept = list(
                StoredFile.objects.filter(
                    conversation=conversation, pk__in=referenced_file_ids(message["parts"])
                ).values_list("pk", flat=True)
            )
            StoredFile.objects.filter(pk__in=kept).update(message=None)
            retire_from(conversation, edited.position)
            position, parent_key = edited.position, edited.parent_key
        else:
            if messages.with_client_id(message["id"]).exists():
                raise Conflict("that message was already sent; regenerate or edit instead", code=Codes.DUPLICATE)
            last = messages.order_by("-position").values_list("position", "pk").first()
            position, parent_key = (last[0] + 1, last[1]) if last is not None else (0, "")
        with _parts_to_store(message) as parts, _bound_apart(parts):
            fields = {
                "conversation": conversation,
                "role": "user",
                "parts": parts,
                "metadata": message.get("metadata"),
                "position": position,
                "parent_key": parent_key,
            }
            if server_key:
                created = Message.objects.create(pk=new_message_id(), client_id=message["id"], **fields)
            else:
                with _under_client_key():
                    created = Message.objects.create(pk=message["id"], **fields)
        created.parts = message["parts"]
        if kept:
            StoredFile.objects.filter(pk__in=kept).update(message=created)
        return created

    def _regenerate(self, conversation: Conversation, turn: Turn) -> None:
        """A new version of the answer: the one regenerated (and anything
        after it) leaves the current branch, kept (``branches``)."""
        messages = conversation.messages.current()
        if turn.edit_of is not None:
            target = messages.with_client_id(turn.edit_of).filter(role="assistant").first()
        else:
            target = messages.order_by("-position").first()
            if target is not None and target.role != "assistant":
                target = None
        if target is None:
            raise not_found()
        retire_from(conversation, target.position)

    def _continue(self, conversation: Conversation, turn: Turn, owner: Owner) -> tuple[Message, AnswersApplied, int]:
        """Check the answers against the stored last message and continue
        it (same message, same id, as the SDK's own server does). Returns
        it, the answers applied, and the bytes its parts grew by."""
        assert turn.answers is not None
        target = conversation.messages.current().order_by("-position").first()
        answers = turn.answers(target, conversation)
        if target is None or target.role != "assistant":
            raise not_found()
        staff = owner.user is not None and bool(getattr(owner.user, "is_staff", False))
        applied = apply_answers(
            target.parts,
            answers,
            self.client_tools,
            owner.describe(),
            decider="staff" if staff else "user",
            editable=self.editable_tools.get,
        )
        grown = stored_bytes_of({"parts": applied.parts}) - stored_bytes_of({"parts": target.parts})
        target.parts = applied.parts
        target.save(update_fields=["parts"])
        conversation.updated_at = timezone.now()
        conversation.save(update_fields=["updated_at"])
        return target, applied, max(0, grown)


_TRIGGERS = {"submit": "submit-message", "regenerate": "regenerate-message", "continue": "continue"}


@dataclass(frozen=True)
class AnswersApplied:
    """The continued message's new parts and what the new run acts on."""

    parts: list[dict[str, Any]]
    approvals: dict[str, ToolApproval]
    results: dict[str, ClientToolResult]
    decisions: list[dict[str, Any]]


def apply_answers(
    parts: Sequence[dict[str, Any]],
    answers: Sequence[ToolAnswer],
    client_tools: frozenset[str],
    decided_by: str,
    *,
    decider: str = "user",
    editable: Callable[[str], Mapping[str, Any] | None] | None = None,
) -> AnswersApplied:
    """The one implementation of a continuation's rules, whatever dialect
    the answers came in (docs/architecture.md, "Approvals"): each answer
    accepted once, only for a call pending in the stored message, approval
    ids compared in constant time; the calls run with the stored arguments.
    Returns new parts (the stored ones are not changed); raises
    ``BadRequest`` with nothing written. ``decider`` says who decided
    (``user``, ``staff``); ``editable`` maps a tool's name to the JSON
    Schema its arguments are edited against, None where a person may not
    edit them (an edited approval is refused then)."""
    by_call: dict[str, ToolAnswer] = {}
    for said in answers:
        if said.tool_call_id in by_call:
            raise BadRequest(f"the tool call {said.tool_call_id} is answered twice")
        by_call[said.tool_call_id] = said
    known = {p["toolCallId"] for p in parts if is_tool_part(p)}
    unknown = sorted(c for c in by_call if c not in known)
    if unknown:
        raise BadRequest(f"no such tool call in this message: {', '.join(unknown)}", code=Codes.UNKNOWN_TOOL_CALL)
    approvals: dict[str, ToolApproval] = {}
    results: dict[str, ClientToolResult] = {}
    decisions: list[dict[str, Any]] = []
    new_parts: list[dict[str, Any]] = []
    now = timezone.now().isoformat()
    for part in parts:
        found = by_call.get(part["toolCallId"]) if is_tool_part(part) else None
        if found is None:
            new_parts.append(part)
            continue
        answer = found
        stamp = {"toolCallId": answer.tool_call_id, "decidedAt": now, "decidedBy": decided_by, "decider": decider}
        state = part.get("state")
        if answer.kind == "approval" and state == "approval-requested":
            pending = part.get("approval") or {}
            approval = _check_approval(answer, pending)
            approvals[answer.tool_call_id] = approval
            decided = {**pending, "approved": approval.approved}
            if approval.reason:
                decided["reason"] = approval.reason
            edit = _check_edit(answer, part, approval, editable)
            answered = {**part, "state": "approval-responded", "approval": decided}
            if edit is not None:
                answered["input"] = edit  # what runs, and what the model sees it ran with
            new_parts.append(answered)
            decision = {
                **stamp,
                "approvalId": pending["id"],
                "approved": approval.approved,
                "reason": approval.reason,
                **answer.record,
            }
            if edit is not None:
                decision["input"] = edit
                decision["originalInput"] = part.get("input")
            decisions.append(decision)
        elif answer.kind == "result" and state == "input-available" and tool_name(part) in client_tools:
            if answer.is_error and not isinstance(answer.output, str):
                raise BadRequest(f"the error of {answer.tool_call_id} needs an errorText")
            results[answer.tool_call_id] = ClientToolResult(answer.output, is_error=answer.is_error)
            outcome = "output-error" if answer.is_error else "output-available"
            decisions.append({**stamp, "clientResult": outcome, **answer.record})
            new_parts.append(part)
        elif state in ("approval-requested", "input-available"):
            raise Conflict(f"the tool call {answer.tool_call_id} cannot be answered that way", code=Codes.NOT_PENDING)
        else:
            raise Conflict(f"the tool call {answer.tool_call_id} was already answered", code=Codes.ALREADY_ANSWERED)
    if not approvals and not results:
        raise Conflict("nothing to continue: no pending tool call was answered", code=Codes.NOTHING_PENDING)
    return AnswersApplied(new_parts, approvals, results, decisions)


def _resume_state(message: Message, run_id: str) -> Any:
    """What the latest earlier run of ``message`` saved for the run that
    answers its pending calls (None: nothing)."""
    return (
        Run.objects.filter(message=message)
        .exclude(pk=run_id)
        .order_by("-started_at")
        .values_list("agent_state", flat=True)
        .first()
    )


def _check_edit(
    answer: ToolAnswer,
    part: dict[str, Any],
    approval: ToolApproval,
    editable: Callable[[str], Mapping[str, Any] | None] | None,
) -> Any:
    """The edited arguments an approval runs with, checked; None when the
    answer edits nothing. Refused (400, nothing written): an edit of a
    denied call, of a tool that does not allow edits, or arguments that
    do not fit the tool's schema."""
    edited = answer.edited_input
    if edited is _UNEDITED or edited == part.get("input"):
        return None
    where = answer.edit_field or None
    call_id = answer.tool_call_id
    if not approval.approved:
        raise BadRequest(f"the call {call_id} is denied: there is nothing to edit", field=where)
    schema = editable(tool_name(part)) if editable is not None else None
    if schema is None:
        raise BadRequest(
            f"the arguments of {tool_name(part)} can't be edited: approve or deny the call as proposed",
            code=Codes.NOT_EDITABLE,
            field=where,
        )
    if not isinstance(edited, dict):
        raise BadRequest(f"the edited arguments of {call_id} must be an object", field=where)
    error = validate_json(schema, edited)
    if error is not None:
        raise BadRequest(f"the edited arguments of {call_id} don't fit {tool_name(part)}: {error}", field=where)
    return edited


def _check_approval(answer: ToolAnswer, pending: dict[str, Any]) -> ToolApproval:
    call_id = answer.tool_call_id
    if not secrets.compare_digest(answer.approval_id.encode(), str(pending.get("id", "")).encode()):
        raise Conflict(f"the approval for {call_id} does not match the pending request", code=Codes.APPROVAL_MISMATCH)
    if not isinstance(answer.approved, bool):
        raise BadRequest(f"the approval for {call_id} needs approved: true or false")
    return ToolApproval(pending["id"], answer.approved, answer.reason)


def pending_approvals(message: Message | None) -> list[dict[str, Any]]:
    """The tool parts of ``message`` waiting for a person's approval."""
    if message is None or message.role != "assistant":
        return []
    return [dict(p) for p in tool_parts(message.parts) if p.get("state") == "approval-requested"]


def _refuse_while_pending(last: Message | None) -> None:
    waiting = [p["approval"]["id"] for p in pending_approvals(last)]
    if waiting:
        raise Conflict(
            f"this thread waits for its open interrupts to be answered ({', '.join(waiting)}): "
            "send them in resume before a new message",
            code=Codes.INTERRUPTS_PENDING,
            field="resume",
        )


def _create_run(
    run_id: str,
    conversation: Conversation,
    message: Message,
    model_name: str,
    version: int,
    *,
    trigger: str,
    decisions: list[dict[str, Any]],
    stored_bytes: int = 0,
    turn: dict[str, Any] | None = None,
) -> Run:
    return Run.objects.create(
        pk=run_id,
        conversation=conversation,
        message=message,
        status="running",
        # The lease starts with the row: a process that dies before its
        # first renewal still leaves an orphan the sweeper can tell.
        heartbeat_at=timezone.now(),
        model=model_name[:200],
        sdk_version=version,
        trigger=trigger,
        decisions=decisions,
        stored_bytes=stored_bytes,
        turn=turn,
    )


class _KeyTaken(Exception):
    """A submitted message's id is another chat's message's key
    (``_under_client_key``)."""


@contextmanager
def _under_client_key() -> Iterator[None]:
    """An insert of a submitted message under its client's id as its key:
    an ``IntegrityError`` (another chat's message has that key; ids are
    the client's, unique within a chat) is ``_KeyTaken``, and the turn's
    transaction is made again with a key of the server's for it
    (``_prepare_sync``), so that the client's id is not revealed taken.
    Raised out of the transaction, which a failed insert spoils on
    PostgreSQL, rather than caught in a savepoint every turn would pay for."""
    try:
        yield
    except IntegrityError:
        raise _KeyTaken from None


@contextmanager
def _parts_to_store(message: dict[str, Any]) -> Iterator[EncodedJSON]:
    """The submitted ``message``'s parts as the row stores them: their JSON,
    made once. A message whose JSON is ``LARGE_JSON_BYTES`` or more has its
    own parts let go while the row is written (``message["parts"]`` is
    empty meanwhile) and parsed back from that JSON after, or after the
    write failed: while the database copies the row (twice on SQLite, the
    bound value and the row), Python holds the JSON alone, not the text and
    its JSON too; a 30 MiB text body peaked at four copies of itself, three
    now (``bench/body_memory.py``). The parts read back are the stored ones
    (``StoredJSONEncoder``'s NUL as U+FFFD), as a later turn reads them."""
    encoded = EncodedJSON(StoredJSONEncoder().encode(message["parts"]))
    if len(encoded.text) < LARGE_JSON_BYTES:
        yield encoded
        return
    message["parts"] = []
    try:
        yield encoded
    finally:
        message["parts"] = json.loads(encoded.text)


@contextmanager
def _bound_apart(parts: EncodedJSON) -> Iterator[bool]:
    """Around the write of a submitted message whose parts are ``parts``
    (``_parts_to_store``): when they are ``LARGE_JSON_BYTES`` or more of
    JSON and the database is PostgreSQL through psycopg 3 with Django's
    default cursor, the statements sent meanwhile bind their values on the
    server (Django's ``ServerBindingCursor``, which
    ``OPTIONS["server_side_binding"]`` would give every statement of a
    project): the JSON goes apart from the SQL, and the write costs two
    copies of it beside the one Python holds, psycopg's bytes of it and
    libpq's message. Django's default ``ClientCursor`` writes the value into
    the statement's text, quoted, through copies of psycopg's own, and
    libpq copies that statement: four copies at the peak (a 30 MiB text
    body peaked at five copies of itself, three now: ``bench/body_memory.py
    --postgres``). The statements are the ORM's, and the rows the same;
    what else runs meanwhile on this connection (a receiver of
    ``Message``'s save signals that a project connected) binds the same way.

    Yields whether the values are bound on the server. A bulk insert then
    inserts row by row (``batch_size=1``): for more than one row Django's
    ``bulk_create`` on PostgreSQL sends each column's values as one array
    (``UNNEST``), which psycopg builds through two more copies of the JSON.
    A connection whose cursor class is a project's own
    (``OPTIONS["cursor_factory"]``) is left as it is."""
    database = connections[router.db_for_write(Message)]
    if len(parts.text) < LARGE_JSON_BYTES or database.vendor != "postgresql":
        yield False
        return
    # Imported here: they import the PostgreSQL driver, which a project on
    # another database need not have.
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    if not is_psycopg3:
        yield False
        return
    from django.db.backends.postgresql.base import Cursor, ServerBindingCursor

    database.ensure_connection()
    driver = database.connection
    if driver.cursor_factory is not Cursor:
        yield driver.cursor_factory is ServerBindingCursor
        return
    driver.cursor_factory = ServerBindingCursor
    try:
        yield True
    finally:
        driver.cursor_factory = Cursor


def _title_from(parts: list[dict[str, Any]]) -> str:
    """A chat's title: its first words. A NUL is U+FFFD, as in the stored
    parts (``models.StoredJSONEncoder``): PostgreSQL refuses one in text."""
    text = " ".join(p.get("text", "") for p in parts if p.get("type") == "text").strip().replace("\x00", "\ufffd")
    return (text[:77] + "…") if len(text) > 80 else text
