"""Steering a running answer: a user message sent to the chat's run while it
runs, wherever it runs (docs/operations.md, "Steering").

Two sides, one per process role:

* the sender (``send_steering``, called by the steer and queue endpoints
  and the WebSocket's frames once they checked the request): stores the
  message (``SteeringMessage``: its id is unique per chat, so a resend
  answers the first outcome, from any process), hands it to the chat's
  active run through the broker, and waits for its outcome;
* the run (``relay_steering``, started by ``Runner.start`` where the run
  executes: a web process or a Celery worker): takes what the broker
  brings into the run's ``SteeringInbox``, where the tool loop finds it at
  its step boundaries, and reports each outcome (stored, then through the
  broker to whoever waits).

Invariants: every message stored gets one outcome, the first one stored
stands; a message whose run ended before it could be taken is
``not-delivered``, ``finished``; nothing is written for a request refused
(the files are checked before the row is created).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from asgiref.sync import sync_to_async
from django.db import IntegrityError, transaction
from django.utils import timezone

from ..live import Broker, RunChannel, get_broker
from ..models import Conversation, Message, Run, SteeringMessage
from ..runs.messages import UserMessage
from ..runs.steering import STEERING_KINDS, SteeringInbox, SteeringKind, SteeringOutcome, SteeringRequest
from ..runs.ui_messages import ui_to_model_messages
from .attachments import StagedFiles, attach_files, decode_files

__all__ = ["SteeringSubmission", "relay_steering", "send_steering"]

logger = logging.getLogger("uistream_app.steering")

#: Seconds the sender waits on the broker before it looks whether the run
#: still runs (a message that reached the broker as its run closed gets
#: ``finished`` within this; the Redis broker waits at most its BLOCK_SECONDS).
WAIT_SLICE: Final = 5.0


@dataclass(frozen=True)
class SteeringSubmission:
    """What a client asked: ``kind`` (``steer`` or ``queue``), the
    message's ``id`` and the useChat user message (checked already)."""

    kind: SteeringKind
    id: str
    message: dict[str, Any]

    def __post_init__(self) -> None:
        if self.kind not in STEERING_KINDS:
            raise ValueError(f"a steering message is a steer or a queue, not {self.kind!r}")


# -- the sender ----------------------------------------------------------------------


async def send_steering(conversation: Conversation, submission: SteeringSubmission) -> SteeringOutcome:
    """Send ``submission`` to ``conversation``'s active run and return its
    outcome once known (see the module docstring). A file that breaks the
    rules of a user message's files is refused (``BadRequest``: 400, 413,
    415) before anything is written."""
    staged = await sync_to_async(decode_files)(submission.message, where="message")
    known = await SteeringMessage.objects.filter(conversation=conversation, client_id=submission.id).afirst()
    if known is not None:
        return await _outcome_of(known)
    broker = get_broker()
    run_id = await broker.active_run(conversation.pk)
    run = await Run.objects.filter(pk=run_id, conversation=conversation).afirst() if run_id else None
    if run is None or run.status != Run.Status.RUNNING:
        # No run going: nothing to deliver to (the SDK's answer to a
        # message sent after the end). Stored, so a resend says the same.
        finished = SteeringOutcome.not_delivered(submission.id, "finished")
        row = await _create(conversation, None, submission, None, finished)
        return finished if row is None else await _outcome_of(row)
    row = await _create(conversation, run, submission, staged, None)
    if row is None:  # the same id, sent at the same moment: the first one's outcome
        known = await SteeringMessage.objects.aget(conversation=conversation, client_id=submission.id)
        return await _outcome_of(known)
    request = {"id": submission.id, "kind": submission.kind, "parts": row.message.get("parts", [])}
    if not await broker.send_steering(str(conversation.pk), str(run.pk), request):
        return await _settle(row, SteeringOutcome.not_delivered(submission.id, "finished"))
    return await _await_outcome(broker, row)


async def _outcome_of(row: SteeringMessage) -> SteeringOutcome:
    """The stored outcome of ``row``, or the one its run reports."""
    if row.outcome is not None:
        return SteeringOutcome.from_wire(row.outcome)
    if row.run_id is None:
        return await _settle(row, SteeringOutcome.not_delivered(row.client_id, "finished"))
    return await _await_outcome(get_broker(), row)


async def _await_outcome(broker: Broker, row: SteeringMessage) -> SteeringOutcome:
    conversation_id, run_id = str(row.conversation_id), str(row.run_id)
    while True:
        data = await broker.steering_outcome(conversation_id, row.client_id, wait=WAIT_SLICE)
        if data is None and await broker.active_run(conversation_id) != run_id:
            # The run ended: its last word may have come meanwhile.
            data = await broker.steering_outcome(conversation_id, row.client_id, wait=0)
            if data is None:
                return await _settle(row, SteeringOutcome.not_delivered(row.client_id, "finished"))
        if data is not None:
            return await _settle(row, SteeringOutcome.from_wire(data))


async def _settle(row: SteeringMessage, outcome: SteeringOutcome) -> SteeringOutcome:
    """Store ``outcome`` unless one is stored already; the stored one."""
    await _store_outcome(row.conversation_id, row.client_id, outcome)
    stored = await SteeringMessage.objects.filter(pk=row.pk).values_list("outcome", flat=True).afirst()
    return SteeringOutcome.from_wire(stored) if stored else outcome


async def _store_outcome(conversation_id: Any, steering_id: str, outcome: SteeringOutcome) -> None:
    await SteeringMessage.objects.filter(
        conversation_id=conversation_id, client_id=steering_id, outcome__isnull=True
    ).aupdate(outcome=outcome.to_wire(), resolved_at=timezone.now())


@sync_to_async
def _create(
    conversation: Conversation,
    run: Run | None,
    submission: SteeringSubmission,
    staged: StagedFiles | None,
    outcome: SteeringOutcome | None,
) -> SteeringMessage | None:
    """The row, and for a run the message's files (written to storage
    before the transaction, as a chat message's are, and kept with the
    run's assistant message, where the steering part will be); None when
    the id was taken meanwhile (nothing kept)."""
    message = submission.message
    if run is not None and staged is not None:
        message = staged.write()
    try:
        with transaction.atomic():
            row = SteeringMessage.objects.create(
                conversation=conversation,
                run=run,
                client_id=submission.id,
                kind=submission.kind,
                message=message,
                outcome=outcome.to_wire() if outcome is not None else None,
                resolved_at=timezone.now() if outcome is not None else None,
            )
            if run is not None and staged is not None:
                staged.record(conversation, Message.objects.get(pk=run.message_id))
    except IntegrityError:
        if staged is not None:
            staged.discard()
        return None
    except BaseException:
        if staged is not None:
            staged.discard()  # nothing is kept of a message that was not stored
        raise
    return row


# -- the run -------------------------------------------------------------------------


async def relay_steering(channel: RunChannel, inbox: SteeringInbox, conversation_id: str) -> None:
    """Until cancelled (the run's end): each message the broker brings
    goes into ``inbox``, in order, and its outcome is reported when known.
    Cancelled, it hands what came meanwhile to the ended inbox (each gets
    ``finished``) and lets the reports finish."""
    broker = get_broker()
    reports: set[asyncio.Task[None]] = set()

    async def take(data: Mapping[str, Any]) -> None:
        request = await _request_of(data, conversation_id)
        if request is None:
            return
        outcome = inbox.send(request)
        report = asyncio.get_running_loop().create_task(_report(broker, conversation_id, request.id, outcome))
        reports.add(report)
        report.add_done_callback(reports.discard)

    try:
        while True:
            await take(await channel.steering_requests.get())
    finally:
        inbox.end("finished")  # idempotent: the run's own reason stands
        while not channel.steering_requests.empty():
            await asyncio.shield(take(channel.steering_requests.get_nowait()))
        if reports:
            await asyncio.shield(asyncio.gather(*reports, return_exceptions=True))


async def _request_of(data: Mapping[str, Any], conversation_id: str) -> SteeringRequest | None:
    steering_id, kind, parts = data.get("id"), data.get("kind"), data.get("parts")
    if not isinstance(steering_id, str) or kind not in STEERING_KINDS or not isinstance(parts, list):
        logger.warning("a steering request of another shape reached the run: dropped")
        return None
    parts = [p for p in parts if isinstance(p, dict) and p.get("type") in ("text", "file")]
    converted = ui_to_model_messages([{"role": "user", "parts": parts}])
    message = converted[0] if converted and isinstance(converted[0], UserMessage) else UserMessage("")
    attached = await attach_files([message], conversation_id)
    message = attached[0] if isinstance(attached[0], UserMessage) else message
    return SteeringRequest(steering_id, kind, parts, message)


async def _report(
    broker: Broker, conversation_id: str, steering_id: str, outcome: asyncio.Future[SteeringOutcome]
) -> None:
    result = await outcome
    try:
        await _store_outcome(conversation_id, steering_id, result)
    except Exception:
        logger.exception("could not store the outcome of steering message %s", steering_id)
    try:
        await broker.report_steering(conversation_id, steering_id, result.to_wire())
    except Exception:
        # The sender learns it from the stored row or the run's end.
        logger.exception("could not report the outcome of steering message %s", steering_id)
