"""Stored runs as AG-UI: the stream a client would have read
(``render_stored_run``), the thread as it stood when a run started
(``stored_history``), and the shared state a thread's runs left
(``stored_state``).

Read by the AG-UI endpoint (``agui_views``: ``AGUIView.get_state``'s
``stored_state``), the inspector (``inspect.formats``) and the tests; they
read the chunk log (``log_reader``) and render it with
``protocol.agui.renderer``, as the endpoint did live.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from ..models import Conversation, Message, Run
from ..protocol.agui.messages import fold_messages, ui_messages_to_agui
from ..protocol.agui.renderer import AGUIRenderer
from ..protocol.agui.state import fold_state
from ..protocol.ui.replay import replay_message
from .log_reader import load_log, read_log

if TYPE_CHECKING:
    from ..lifecycle.store import PreparedRun

__all__ = ["render_stored_run", "stored_history", "stored_history_sync", "stored_state"]


async def render_stored_run(run: Run, *, thread_id: str | None = None, run_id: str | None = None) -> bytes:
    """A stored run as the AG-UI stream a client would have read: its
    canonical log rendered (or, for a message with no log, its parts
    replayed), so any conversation can be served in either dialect.
    ``thread_id`` defaults to the conversation's chat id, ``run_id`` to the
    run's. The renderer gets the thread as it stood when the run started
    (``stored_history``), so a continuation starts with its
    ``MESSAGES_SNAPSHOT`` and a run that ended in an interrupt ends with
    one, as they did live (renderer rules 13 and 14); when that thread is
    not known, neither snapshot is sent. The shared state goes first: the
    log's own state events as they were sent, or the stored ``Run.state``
    when the log carries none (rule 16)."""
    chunks = await load_log(run)
    if not chunks and run.message_id is not None:
        message = await Message.objects.aget(pk=run.message_id)
        chunks = replay_message(message.as_ui_message())
    history = await stored_history(run)
    # The log's own state events say the state first, as they did live; a
    # stored state the log does not carry goes out first instead (rule 16).
    carried = run.state is not None and fold_state(chunks)[0]
    state: dict[str, Any] = {"state": run.state} if run.state is not None and not carried else {}
    if thread_id is None:
        thread_id = await Conversation.objects.filter(pk=run.conversation_id).values_list("client_id", flat=True).aget()
    renderer = AGUIRenderer(
        thread_id,
        run_id or str(run.pk),
        history=history,
        continues=history is not None and run.trigger == "continue",
        **state,
    )
    return renderer.render_many(chunks) + renderer.done()


def stored_state(thread: PreparedRun | str) -> Any:
    """The AG-UI shared state the thread's latest run that has one left
    (``Run.state``), or None. ``thread``: the run being prepared (as
    ``get_state`` gets it), or a conversation's key
    (``PreparedRun.conversation_id``), never a thread id, which is only
    unique per owner. Sync (a worker thread, as ``get_state``)."""
    conversation_id = thread if isinstance(thread, str) else thread.conversation_id
    run = (
        Run.objects.filter(conversation_id=conversation_id, state__isnull=False)
        .order_by("-started_at", "-pk")
        .only("state")
        .first()
    )
    return run.state if run is not None else None


def stored_history_sync(run: Run) -> list[dict[str, Any]] | None:
    """The thread as a client held it when ``run`` started, as AG-UI
    messages; None when it is not known.

    The messages before the run's message are stored as they were: a
    branch only changes at its end, and an edit or a regeneration makes a
    new branch, keeping the run's (``Message.branch_before`` reads it). The run's own message, when the run
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
    # Its own branch's: an older attempt's history is what it answered.
    history = ui_messages_to_agui([m.as_ui_message() for m in message.branch_before()])
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
