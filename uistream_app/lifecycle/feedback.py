"""What users thought of the answers: ``rate`` stores a user's feedback
on an assistant message (one per message, changed in place) with the run
that built it, and sends it on that run's trace when it was traced
(``runs.telemetry.record_feedback``: the GenAI conventions' evaluation
event, so a tracing backend that reads feedback scores shows it beside the
run's spans). ``unrate`` takes it back. Synchronous; the caller has checked
that the message is its owner's."""

from __future__ import annotations

from ..conf import settings as uistream_settings
from ..models import Feedback, Message, Run
from ..runs import telemetry

__all__ = ["rate", "unrate"]


def rate(message: Message, *, rating: str, reason: str = "", comment: str = "") -> tuple[Feedback, bool]:
    """Store ``message``'s feedback (a new one, or the owner's earlier one
    changed); returns it and whether it is new."""
    run = Run.objects.filter(message=message).order_by("-started_at").first()
    # In a transaction of its own, the row locked (update_or_create's).
    feedback, created = Feedback.objects.update_or_create(
        message=message, defaults={"rating": rating, "reason": reason, "comment": comment, "run": run}
    )
    if run is not None and run.trace_id:
        telemetry.record_feedback(
            trace_id=run.trace_id,
            span_id=run.span_id,
            run_id=str(run.pk),
            rating=rating,
            reason=reason,
            comment=comment,
            content=uistream_settings.TRACE_CONTENT,
        )
    return feedback, created


def unrate(message: Message) -> bool:
    """Delete ``message``'s feedback; returns whether it had any."""
    deleted, _ = Feedback.objects.filter(message=message).delete()
    return deleted > 0
