"""Steering: user messages sent to a run while it runs (ai@7's ``Steering``).

A ``SteeringInbox`` is the run's end of it, as the SDK's ``SteeringRun``
(ai/src/generate-text/steering.ts): whoever receives the messages
(``uistream_app.lifecycle.steering_messages``, from the broker) ``send``s them in
and awaits their outcome; the tool loop takes them at its step
boundaries. No I/O and no Django here.

The rules, as ``streamText`` keeps them (docs/operations.md, "Steering"):

1. ``steer``: delivered at the next step boundary, after the current step
   and its tool calls: the next model call sees it as a user message after
   everything before it. A run whose model answered without tool calls
   goes on for another step to deliver it, unless a stop condition (the
   step limit) ends the run first.
2. ``queue``: delivered when the model gave a final answer without tool
   calls (one per such answer, in order, after any waiting ``steer``); not
   after an answer cut short (finish reason ``length`` or
   ``content-filter``).
3. An id names a message: sent again with the same id, the first
   message's outcome is the answer, whatever the second one says.
4. Every message gets one outcome: ``delivered`` with the number of the
   step whose model call received it, or ``not-delivered`` with a reason:
   ``finished`` (the run ended before it could be delivered, or it came
   after the end), ``stop-condition`` (the step limit ended the run),
   ``waiting-for-tool-results`` (the run ended to wait for an approval or
   a client's tool), ``aborted`` (stopped, or its client went away),
   ``error`` (the run failed).
5. The loop ends the inbox at its own ends (1, 2 and the waiting end);
   whoever runs the loop ends it for the others (a failure, a
   cancellation): ``end`` is idempotent, so the first reason stands.
6. A source that never takes messages (an agent of another framework)
   leaves them waiting; they are ``not-delivered``, ``finished`` at the
   run's end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from .messages import UserMessage

__all__ = [
    "NOT_DELIVERED_REASONS",
    "STEERING_KINDS",
    "NotDeliveredReason",
    "SteeringInbox",
    "SteeringKind",
    "SteeringOutcome",
    "SteeringRequest",
]

SteeringKind: TypeAlias = Literal["steer", "queue"]
STEERING_KINDS: Final = ("steer", "queue")
NotDeliveredReason: TypeAlias = Literal["finished", "stop-condition", "waiting-for-tool-results", "aborted", "error"]
#: The SDK's reasons, less ``removed-by-prepare-step`` (there is no
#: ``prepareStep`` here that could drop a message).
NOT_DELIVERED_REASONS: Final = frozenset(("finished", "stop-condition", "waiting-for-tool-results", "aborted", "error"))


@dataclass(frozen=True, slots=True)
class SteeringOutcome:
    """What became of a steering message (rule 4). ``to_wire`` is the
    SDK's ``SteeringOutcome`` without its ``message`` (the client has it)."""

    id: str
    delivered: bool
    step_number: int | None = None
    reason: str | None = None

    @classmethod
    def of_delivery(cls, id: str, step_number: int) -> SteeringOutcome:
        return cls(id, True, step_number=step_number)

    @classmethod
    def not_delivered(cls, id: str, reason: NotDeliveredReason) -> SteeringOutcome:
        return cls(id, False, reason=reason)

    def to_wire(self) -> dict[str, Any]:
        if self.delivered:
            return {"type": "delivered", "id": self.id, "stepNumber": self.step_number}
        return {"type": "not-delivered", "id": self.id, "reason": self.reason}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> SteeringOutcome:
        """The outcome ``to_wire`` wrote; ``ValueError`` for anything else."""
        kind, id = data.get("type"), data.get("id")
        if not isinstance(id, str):
            raise ValueError("a steering outcome has a string id")
        if kind == "delivered" and type(data.get("stepNumber")) is int:
            return cls.of_delivery(id, data["stepNumber"])
        if kind == "not-delivered" and data.get("reason") in NOT_DELIVERED_REASONS:
            return cls.not_delivered(id, data["reason"])
        raise ValueError(f"not a steering outcome: {dict(data)!r}")


@dataclass(frozen=True, slots=True)
class SteeringRequest:
    """One steering message: its id, ``steer`` or ``queue``, its UI parts
    (text and files, what the ``steering-message`` chunk carries) and the
    user message the model reads."""

    id: str
    kind: SteeringKind
    parts: Sequence[Mapping[str, Any]]
    message: UserMessage


class SteeringInbox:
    """The run side of steering (see the module rules). One per run."""

    __slots__ = ("_outcomes", "_pending", "_queued", "_state", "listening")

    def __init__(self) -> None:
        self._state: Literal["open", "ended"] = "open"
        self._pending: list[SteeringRequest] = []
        self._queued: list[SteeringRequest] = []
        self._outcomes: dict[str, asyncio.Future[SteeringOutcome]] = {}
        #: Set by a source that takes messages (the tool loop) when it
        #: starts; a run whose source never does answers ``finished`` at
        #: its end (rule 6).
        self.listening = False

    @property
    def ended(self) -> bool:
        return self._state == "ended"

    # -- the sender's side ---------------------------------------------------------

    def send(self, request: SteeringRequest) -> asyncio.Future[SteeringOutcome]:
        """Add ``request`` (rule 3: an id sent before gets the first
        outcome); the future resolves with its outcome."""
        known = self._outcomes.get(request.id)
        if known is not None:
            return known
        outcome: asyncio.Future[SteeringOutcome] = asyncio.get_running_loop().create_future()
        self._outcomes[request.id] = outcome
        if self._state == "ended":
            outcome.set_result(SteeringOutcome.not_delivered(request.id, "finished"))
        else:
            (self._pending if request.kind == "steer" else self._queued).append(request)
        return outcome

    # -- the run's side --------------------------------------------------------------

    def has_pending(self) -> bool:
        """Whether a ``steer`` waits for the next step."""
        return self._state == "open" and bool(self._pending)

    def promote_queued(self) -> bool:
        """Move the oldest queued message to the next step (rule 2);
        False when none is queued."""
        if self._state != "open" or not self._queued:
            return False
        self._pending.append(self._queued.pop(0))
        return True

    def take(self, step_number: int) -> list[SteeringRequest]:
        """The messages waiting for step ``step_number``, resolved as
        delivered to it: the caller puts them in that step's input."""
        if self._state != "open" or not self._pending:
            return []
        taken, self._pending = self._pending, []
        for request in taken:
            self._resolve(SteeringOutcome.of_delivery(request.id, step_number))
        return taken

    def end(self, reason: NotDeliveredReason) -> None:
        """No more deliveries: every message still waiting is
        ``not-delivered`` for ``reason``, and later ones for ``finished``.
        Idempotent (rule 5)."""
        if self._state == "ended":
            return
        self._state = "ended"
        left, self._pending, self._queued = [*self._pending, *self._queued], [], []
        for request in left:
            self._resolve(SteeringOutcome.not_delivered(request.id, reason))

    def _resolve(self, outcome: SteeringOutcome) -> None:
        future = self._outcomes.get(outcome.id)
        if future is not None and not future.done():
            future.set_result(outcome)
