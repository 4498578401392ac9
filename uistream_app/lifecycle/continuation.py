"""Continuing a run whose process is gone (``UISTREAM["ON_OWNER_LOST"] =
"continue"``; docs/operations.md, "Continuing a run whose process is gone").

A sweep that claims an orphan (``leases``) hands it here first. The run's
log is its history: the steps it completed (model output, tool calls with
their results, approvals) stay as they are; the step its process left
half-done is dropped with a ``reset-step`` chunk, in the log and on the
broker's stream (numbered on from the log), as ai@7 drops it on the client,
and runs again. What of that step is known is not done twice:

- a step whose model output holds complete tool calls keeps that output:
  it is sent again after the ``reset-step`` (``Continued.replay``), with
  the results the log holds (a call whose result is in the log never runs
  twice);
- a call of it with no result may have started: it runs again only when
  its tool is ``idempotent``; any other gets a tool error the model reads
  (``INTERRUPTED_TOOL_TEXT``);
- a step with no complete call runs again from its model call.

The run is then set up again through the one turn path,
``ChatHooks.start_turn``, with an ``AdoptedRun`` that carries the
``Continued`` plan: the endpoint's hooks (their class is stored with the
run, ``Run.turn``) get a ``TurnContext`` built from what the run's turn
recorded, and the tool loop runs on from the rebuilt history in this
process. Runs of an agent adapter store no ``Run.turn``: they are settled
``interrupted`` as before.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from ..live import get_broker
from ..models import Conversation, Message, Run
from ..owners import Owner
from ..protocol.events import Event, ReasoningDelta, StepFinished, TextDelta, ToolCall, ToolDenied, ToolResult
from ..protocol.jsonbody import is_json
from ..protocol.ui.chunks import TERMINAL_CHUNKS, Chunk
from ..protocol.ui.reader import UIMessageReader, UIMessageStreamError
from ..recording import STARTED_CALLS, iter_log, last_offset_ms, write_log
from ..runs import ClientToolResult, ToolApproval
from . import leases
from .leases import MESSAGE_FROM, stored_message
from .turns import AdoptedRun, TurnContext

if TYPE_CHECKING:
    from ..runs import Tool
    from .store import PreparedRun, Turn
    from .turns import TurnSetup

__all__ = [
    "INTERRUPTED_TOOL_TEXT",
    "RESET_STEP",
    "Continued",
    "continue_orphan",
    "half_step",
    "replayed",
    "turn_record",
]

logger = logging.getLogger("uistream_app.sweeper")

#: What the model reads for a call that may have started before its process
#: died, of a tool that is not ``idempotent``.
INTERRUPTED_TOOL_TEXT: Final = (
    "This tool call was interrupted before it finished (the server running it stopped); it was not run again."
)
#: ai@7's chunk that drops every part since the last ``start-step``.
RESET_STEP: Final[Chunk] = {"type": "reset-step"}
#: Tool part states whose call the model finished saying.
_COMPLETE: Final = frozenset(
    ("input-available", "approval-requested", "approval-responded", "output-available", "output-error", "output-denied")
)


def turn_record(
    hooks_class: type[Any],
    setup: TurnSetup | None,
    turn: Turn,
    with_thread: bool,
    approvals: Mapping[str, ToolApproval],
    client_results: Mapping[str, ClientToolResult],
    metadata: Any = None,
) -> dict[str, Any] | None:
    """What a process that continues a run of ``turn`` needs besides its
    rows (``Run.turn``, JSON): the hooks class, the turn's kind and extra
    keys, the context's transport, the checked answers and the start
    chunk's metadata. None for an agent adapter's run (it can't continue).
    The owner is the conversation's; nothing here is a credential. Made
    with the run's row (``ConversationStore.prepare``), so a run lost
    before its first log write can be continued too; stored again, with
    the metadata, with its first chunks."""
    if setup is None or setup.adapter is not None or setup.agent is not None:
        return None
    return {
        "hooks": f"{hooks_class.__module__}.{hooks_class.__qualname__}",
        "kind": turn.kind,
        "extra": _json_only(turn.extra),
        "with_thread": with_thread,
        "approvals": {call: [a.approval_id, a.approved, a.reason] for call, a in approvals.items()},
        "client_results": {call: [r.output, r.is_error] for call, r in client_results.items()},
        "transport": setup.context.transport,
        "context_extra": _json_only(setup.context.extra),
        "metadata": metadata if is_json(metadata) else None,
    }


def _json_only(values: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if is_json(value)}


# -- the log: what is kept, what is dropped -------------------------------------------------


def half_step(log: Sequence[Chunk]) -> int | None:
    """Where the step the log leaves half-done starts (its last
    ``start-step``, when no ``finish-step`` follows it, nor a ``reset-step``
    that dropped it already: a takeover whose own process died before it
    began the step again), or None."""
    for index in range(len(log) - 1, -1, -1):
        kind = log[index].get("type")
        if kind == "finish-step" or kind == "reset-step":
            return None
        if kind == "start-step":
            return index
    return None


def _read(message: Message, chunks: Iterable[Chunk], run_id: Any) -> dict[str, Any]:
    continued = message.as_ui_message() if message.parts and message.role == Message.Role.ASSISTANT else None
    reader = UIMessageReader(message=continued, message_id=message.pk)
    for chunk in chunks:
        try:
            reader.feed(chunk)
        except UIMessageStreamError as exc:
            logger.warning("run %s: the log holds a chunk the SDK would refuse: %s", run_id, exc)
            break
    return reader.message


@dataclass(frozen=True)
class Continued:
    """How a continued run goes on: its log's length (the run numbers on
    from it) and the parts of the dropped half-done step (empty: none, or
    nothing of it is kept)."""

    log_length: int
    dropped: tuple[dict[str, Any], ...] = ()
    #: The calls its earlier owners began to run (``Run.turn["started"]``,
    #: ``RunRecorder.record_call``): one that has no result and was
    #: answered first thing in the run (an approved call) is not run again
    #: unless its tool is idempotent.
    started: frozenset[str] = frozenset()
    #: The steps its log completed (its ``finish-step`` chunks): with the
    #: replayed one, they count against ``max_steps``.
    steps: int = 0

    def replay(self, tools: Iterable[Tool]) -> tuple[list[Event], list[dict[str, Any]]]:
        """What is sent again of the dropped step (events, after the
        ``reset-step``), and the parts the model's history gets for it: the
        step's text and complete calls, when it has any; each call's logged
        result; for a call with none, nothing (an idempotent tool's call:
        the loop runs it again) or ``INTERRUPTED_TOOL_TEXT`` as its error."""
        if not any(_is_call(p) and p.get("state") in _COMPLETE for p in self.dropped):
            return [], []
        by_name = {tool.name: tool for tool in tools}
        events: list[Event] = []
        parts: list[dict[str, Any]] = [{"type": "step-start"}]
        for part in self.dropped:
            kind = part.get("type")
            if kind == "text" and part.get("text"):
                events.append(TextDelta(part["text"]))
                parts.append({"type": "text", "text": part["text"]})
            elif kind == "reasoning" and part.get("text"):
                events.append(ReasoningDelta(part["text"]))
                parts.append({"type": "reasoning", "text": part["text"]})
            elif _is_call(part) and part.get("state") in _COMPLETE:
                events_of, kept = _replayed_call(part, by_name)
                events += events_of
                parts.append(kept)
        return events, parts

    def apply(self, prepared: PreparedRun, tools: Iterable[Tool]) -> tuple[PreparedRun, list[Event]]:
        """``prepared`` with the replayed step added to its history's last
        (the continued assistant) message, and numbering on from the log;
        and the events to send first."""
        tools = list(tools)
        events, parts = self.replay(tools)
        history = list(prepared.history)
        if history and history[-1].get("role") == "assistant":
            last = dict(history[-1])
            answered, kept = self._started_calls(last.get("parts", []), tools)
            if parts or answered:
                last["parts"] = [*kept, *parts]
                history[-1] = last
                events = [*answered, *events]
        # The replayed step's model call was made: it is one of the run's steps.
        steps = self.steps + (1 if parts else 0)
        return replace(prepared, history=history, log_from=self.log_length, steps_taken=steps), events

    def _started_calls(
        self, parts: Sequence[dict[str, Any]], tools: Iterable[Tool]
    ) -> tuple[list[Event], list[dict[str, Any]]]:
        """The continued message's calls that an earlier owner started and
        that have no result (an approved call, run first thing in its run):
        a call of a tool that is not idempotent gets ``INTERRUPTED_TOOL_TEXT``
        as its error (its events, and the parts with it); any other is left
        to the loop, which runs it again."""
        if not self.started:
            return [], list(parts)
        by_name = {tool.name: tool for tool in tools}
        events: list[Event] = []
        kept: list[dict[str, Any]] = []
        for part in parts:
            call_id = str(part.get("toolCallId")) if _is_call(part) else None
            if call_id in self.started and part.get("state") in ("input-available", "approval-responded"):
                name = str(part.get("toolName") if part.get("type") == "dynamic-tool" else part["type"][len("tool-") :])
                tool = by_name.get(name)
                if tool is None or not (tool.idempotent or tool.client_side):
                    events.append(ToolResult(call_id, INTERRUPTED_TOOL_TEXT, is_error=True, tool_name=name))
                    part = {**part, "state": "output-error", "errorText": INTERRUPTED_TOOL_TEXT}
            kept.append(part)
        return events, kept


def _is_call(part: Mapping[str, Any]) -> bool:
    kind = part.get("type")
    return isinstance(kind, str) and (kind == "dynamic-tool" or kind.startswith("tool-"))


def _replayed_call(part: dict[str, Any], tools: Mapping[str, Tool]) -> tuple[list[Event], dict[str, Any]]:
    dynamic = part.get("type") == "dynamic-tool"
    name = str(part.get("toolName") if dynamic else part["type"][len("tool-") :])
    call_id = str(part.get("toolCallId"))
    provider = part.get("providerExecuted") is True or None
    base: dict[str, Any] = {
        k: part[k] for k in ("type", "toolCallId", "toolName", "input", "providerExecuted") if k in part
    }
    events: list[Event] = [
        ToolCall(call_id, name, json.dumps(part.get("input")), provider_executed=provider, dynamic=dynamic or None)
    ]
    state = part.get("state")
    if state == "output-available":
        events.append(ToolResult(call_id, part.get("output"), tool_name=name, provider_executed=provider))
        return events, {**base, "state": "output-available", "output": part.get("output")}
    if state == "output-error":
        text = str(part.get("errorText", ""))
        events.append(ToolResult(call_id, text, is_error=True, tool_name=name, provider_executed=provider))
        return events, {**base, "state": "output-error", "errorText": text}
    if state == "output-denied":
        events.append(ToolDenied(call_id))
        return events, dict(part)
    tool = tools.get(name)
    if state == "approval-requested" or (tool is not None and (tool.idempotent or tool.client_side)):
        # Never started (it awaits a person), or harmless to run again, or
        # the browser's to run: the loop decides as it would have.
        return events, {**base, "state": "input-available"}
    events.append(ToolResult(call_id, INTERRUPTED_TOOL_TEXT, is_error=True, tool_name=name))
    return events, {**base, "state": "output-error", "errorText": INTERRUPTED_TOOL_TEXT}


async def replayed(events: Sequence[Event], source: AsyncIterator[Event]) -> AsyncIterator[Event]:
    """``events`` (the kept part of the dropped step, its step then ended),
    then ``source``'s."""
    for event in events:
        yield event
    if events:
        yield StepFinished()
    async with aclosing(source) as rest:  # type: ignore[type-var]
        async for event in rest:
            yield event


# -- the continuation --------------------------------------------------------------------


def _store_continued(run: Run, published: list[Chunk] | None) -> tuple[list[Chunk], int, Continued] | None:
    """In one transaction, under the claimant's epoch: the log completed
    from the broker's stream, the half-done step dropped (``reset-step``),
    the message rebuilt from the whole log. None when the log ended
    already or the run is not the claimant's (then it is settled as
    before). Synchronous."""
    with transaction.atomic():
        held = Run.objects.select_for_update().filter(pk=run.pk, status=Run.Status.RUNNING, lease_epoch=run.lease_epoch)
        stored = stored_message(run) if held.exists() else None
        if stored is None:
            return None
        # The message as stored: as it was before the run, or (an earlier
        # takeover's) with the log's first ``held_from`` chunks read already.
        message, held_from = stored
        log = [entry.chunk for entry in iter_log(run)]
        # What the broker holds (a stream that expired, or a broker that never
        # held the run, holds nothing: it is given the whole log).
        first_seq = len(published) if published is not None else 0
        recovered = published[len(log) :] if published is not None and len(published) > len(log) else []
        complete = log + recovered
        turn = Run.objects.filter(pk=run.pk).values_list("turn", flat=True).first()
        turn = turn if isinstance(turn, dict) else {}
        started = frozenset(str(call) for call in turn.get(STARTED_CALLS) or ())
        if not complete:
            # Lost before its first chunk was written (a worker's run whose
            # task no worker started, or one its worker or web process began):
            # it starts over here, from the stored message. No tool that is
            # not idempotent ran: it runs only once its call is logged.
            Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now())
            return [], 0, Continued(0, started=started)
        if complete[-1].get("type") in TERMINAL_CHUNKS:
            return None
        dropped: tuple[dict[str, Any], ...] = ()
        added = list(recovered)
        if half_step(complete) is not None:
            before = _read(message, complete[held_from:], run.pk)["parts"]
            after = _read(message, [*complete[held_from:], RESET_STEP], run.pk)["parts"]
            dropped = tuple(before[len(after) :])
            added.append(RESET_STEP)
        if added:
            now_ms = int((timezone.now() - run.started_at).total_seconds() * 1000)
            offsets = [last_offset_ms(run)] * len(recovered) + [max(now_ms, 0)] * (len(added) - len(recovered))
            write_log(run, added, offsets)
        complete = log + added
        built = _read(message, complete[held_from:], run.pk)
        Message.objects.filter(pk=message.pk).update(parts=built["parts"], metadata=built.get("metadata"))
        # The message holds the whole log now: a later rebuild (another
        # takeover, a settle) reads only what comes after it.
        turn = {**turn, MESSAGE_FROM: len(complete)}
        Run.objects.filter(pk=run.pk).update(chunk_count=len(complete), heartbeat_at=timezone.now(), turn=turn)
    steps = sum(chunk.get("type") == "finish-step" for chunk in complete)
    return complete, min(first_seq, len(complete)), Continued(len(complete), dropped, started, steps)


async def continue_orphan(run: Run, published: list[Chunk] | None) -> bool:
    """Go on with ``run``, an orphan this process claimed (``leases``), in
    this process; False when it can't (no ``Run.turn``: an agent's run, or
    one from before continuation; the log ended; the broker ended the run):
    the caller settles it ``interrupted``."""
    record = run.turn
    if not isinstance(record, dict) or "hooks" not in record:
        return False
    stored = await sync_to_async(_store_continued)(run, published)
    if stored is None:
        return False
    log, first_seq, plan = stored
    conversation = await Conversation.objects.aget(pk=run.conversation_id)
    channel = await get_broker().continue_orphan(str(run.conversation_id), str(run.pk), log, first_seq)
    if channel is None:
        return False
    from .store import Turn  # the store imports the sweeper (``leases``), which imports this lazily

    owner = await _owner(conversation)
    context = TurnContext(
        owner=owner,
        chat_id=conversation.client_id,
        transport=record.get("transport", "http"),
        extra=record.get("context_extra") or {},
        request=None,
        on_worker=False,
    )
    turn = Turn(conversation.client_id, "continue", extra=record.get("extra") or {})
    adopted = AdoptedRun(
        str(run.pk),
        channel,
        approvals={call: ToolApproval(*value) for call, value in (record.get("approvals") or {}).items()},
        client_results={call: ClientToolResult(*value) for call, value in (record.get("client_results") or {}).items()},
        metadata=record.get("metadata"),
        continued=plan,
    )
    hooks = import_string(record["hooks"])()
    try:
        await hooks.start_turn(
            turn, context, version=run.sdk_version, with_thread=bool(record.get("with_thread")), adopted=adopted
        )
    except Exception:
        await channel.abandon()  # the sweeper settles it, and ends the stream
        raise
    return True


async def _owner(conversation: Conversation) -> Owner:
    if conversation.owner_id is not None:
        from django.contrib.auth import get_user_model

        return Owner.of_user(await get_user_model()._default_manager.aget(pk=conversation.owner_id))
    return Owner.of_session(conversation.session_key or "")


leases.set_continuer(continue_orphan)
