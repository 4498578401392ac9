"""``Runner``: the only code that starts a run (docs/architecture.md, "The flow").

``Runner.start(prepared, source)`` runs a ``PreparedRun``'s event source in
a task of its own: ``execute_run`` encodes it, records every chunk
(``RunRecorder``) and publishes it to the run's broker channel, and however
the run ends (done, failed, stopped, cancelled because its client left) the
log is closed with a terminal chunk, stored, and the slot released. The
responses are subscribers of the broker; they never touch the run.

``RunHandle`` and ``live_runs()`` live in ``registry`` (below this
module, the sweeper and the shutdown, which all use them) and are
re-exported here, where users have imported them from.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Coroutine
from typing import Any, ClassVar

from ..conf import settings as uistream_settings
from ..live import BrokerError, RunChannel
from ..models import Run
from ..protocol.events import Event
from ..protocol.ui.chunks import Chunk
from ..protocol.ui.encoder import UIMessageEncoder
from ..protocol.ui.stream import aencode_batches
from ..recording import CURRENT_RECORDER, STARTED_CALLS, LeaseLost, RunRecorder
from ..runs import telemetry
from ..runs.steering import SteeringInbox
from . import shutdown
from .leases import INTERRUPTED_FINISH_REASON, MESSAGE_FROM, ensure_renewer
from .registry import RunHandle, interruption_of, live_runs, on_lease_lost, track
from .steering_messages import relay_steering
from .store import PreparedRun
from .threads import in_lane

__all__ = ["RunHandle", "Runner", "execute_run", "live_runs"]

logger = logging.getLogger("uistream_app.runner")


class Runner:
    """Starts prepared runs in this process's event loop. Other executors
    (other processes, workers) plug in by overriding ``for_hooks`` and
    ``start`` (``UISTREAM["EXECUTOR"]``, ``executors.py``)."""

    #: Whether the runs this runner starts execute in this process, from
    #: the source ``start`` is given; an executor whose workers build their
    #: own (``CeleryRunner``) is given an empty one.
    executes_here: ClassVar[bool] = True

    @classmethod
    def for_hooks(cls, hooks: Any) -> Runner:
        """The runner of one endpoint (``ChatHooks.get_runner``). An
        executor that rebuilds runs in another process keeps ``hooks`` to
        name their class there."""
        return cls()

    async def start(self, prepared: PreparedRun, source: AsyncIterator[Event], *, metadata: Any = None) -> RunHandle:
        clock = RunClock()
        # A continuation goes on from the parts the message already holds:
        # their calls' outputs are sent, new part ids follow theirs.
        encoder = UIMessageEncoder(prepared.message.pk, metadata, continues=prepared.message.parts)
        if prepared.log_from:
            encoder.resume()  # a continued run: its log has begun the message
        if uistream_settings.MESSAGE_METADATA:
            # Read where the run executes (a worker too), as the SDK's
            # messageMetadata callback is called for start and finish.
            encoder.message_metadata = start_metadata(prepared.run, metadata)
            encoder.finish_metadata = functools.partial(_finish_metadata, prepared.run, encoder, clock)
        recorder = RunRecorder(prepared.run, prepared.message, inline=prepared.log_inline, first_seq=prepared.log_from)
        prepared.channel.when_followed = recorder.followed
        if prepared.setup is not None:
            # What this run was given, as the hooks chose it where it
            # executes (a worker's own choice there): stored with the log's
            # first write, so it costs the run no write of its own.
            recorder.store_with_run(setup=prepared.setup.record())
        if prepared.turn_record is not None:
            record = prepared.turn_record
            stored = prepared.run.turn
            if isinstance(stored, dict):
                # A continued run's: what its earlier owners stored stays
                # known (the calls they started, how much of the log the
                # stored message holds).
                record = {**record, **{k: stored[k] for k in (STARTED_CALLS, MESSAGE_FROM) if k in stored}}
            if record != stored:  # the turn's transaction stored it already, unless the metadata changed it
                recorder.store_with_run(turn=record)
        stopped = asyncio.Event()
        # The run's span (a child of the request's), current in its task.
        context, prepared.run.trace_id = telemetry.start_run(
            run_id=str(prepared.run.pk),
            conversation_id=prepared.conversation_id,
            model=prepared.run.model,
            owner_kind="user" if prepared.owner.user is not None else "anonymous",
            content=uistream_settings.TRACE_CONTENT,
        )
        prepared.run.span_id = telemetry.run_span_id(context)
        run: Coroutine[Any, Any, None] = execute_run(
            source,
            encoder,
            prepared.channel,
            recorder,
            error_text=uistream_settings.ERROR_TEXT,
            expose_errors=uistream_settings.EXPOSE_ERRORS,
            stopped=stopped,
            clock=clock,
            steering=prepared.steering,
        )
        task = asyncio.create_task(
            # The run's sync work goes to a shared lane, not the request's
            # thread: the run may outlive the request. A run whose rows
            # only this thread's transaction sees (a TestCase's: its log is
            # written inline) stays where the request's calls go.
            run if prepared.log_inline else in_lane(run),
            name=f"uistream-run-{prepared.run.pk}",
            context=context,
        )
        watcher = asyncio.create_task(_watch_stop(prepared.channel, task, stopped))
        # Messages sent to the run while it runs, from the broker to the loop.
        relay = asyncio.create_task(relay_steering(prepared.channel, prepared.steering, prepared.conversation_id))
        # A lost lease (a write fenced off, or the renewer finding another
        # epoch) stops the run: its model call is cancelled with the task.
        recorder.on_lease_lost = functools.partial(task.cancel)
        handle = RunHandle(prepared.run, task, prepared)
        on_lease_lost(handle, recorder.lose_lease)
        track(handle)
        shutdown.install()
        ensure_renewer()  # this process now holds a lease to renew
        task.add_done_callback(lambda _task: watcher.cancel())
        task.add_done_callback(lambda _task: relay.cancel())
        return handle


async def execute_run(
    source: AsyncIterator[Event],
    encoder: UIMessageEncoder,
    channel: RunChannel,
    recorder: RunRecorder,
    *,
    error_text: str,
    expose_errors: bool,
    stopped: asyncio.Event,
    clock: RunClock | None = None,
    steering: SteeringInbox | None = None,
) -> None:
    """Drive one run: encode the source, record every chunk, publish it.

    The chunks one source event produces are recorded and published
    together, recording first: whatever a subscriber was sent is in the log.
    However the run ends, ``steering`` (the run's inbox) ends with it: the
    messages still waiting are not delivered, for the reason the run's
    status gives (runs.steering rule 5).
    """
    failure: list[BaseException] = []
    status = "completed"
    CURRENT_RECORDER.set(recorder)  # this task's (the source's code can find it)
    try:
        async for batch in aencode_batches(
            source, encoder, error_text=error_text, expose_errors=expose_errors, on_error=failure.append
        ):
            # Recorded, then published, with no await in between: a
            # cancellation (stop, disconnect) can't split the two, and
            # publish takes its chunks before it first waits (RunChannel).
            if clock is not None and clock.first_chunk is None:
                clock.first_chunk = time.monotonic()
            await _record_and_publish(recorder, channel, batch)
        # A broker that failed after the last publish (Redis gone) is
        # raised here, before the run's outcome is stored.
        await channel.flush()
        if failure:
            status = "failed"
    except LeaseLost:
        status = "lost"  # add() refused a batch: another process owns the run now
    except asyncio.CancelledError:
        interrupted = interruption_of(asyncio.current_task())
        if recorder.lease_lost is not None:
            status = "lost"  # the run is its new owner's: nothing more is said here
        elif interrupted is not None:  # the process is stopping (RunHandle.interrupt)
            status = "interrupted"
            tail = encoder.error(interrupted)
        else:
            status = "stopped" if stopped.is_set() else "cancelled"
            tail = encoder.abort("stopped" if stopped.is_set() else None)
        if tail and status != "lost":
            await _to_the_end(_record_and_publish(recorder, channel, tail, closing=True))
        raise
    except Exception as exc:  # a failure of ours (recording, broker): still close cleanly
        if encoder.done and isinstance(exc, BrokerError):
            # The broker failed after the answer's terminal chunk was
            # logged (Redis lost after the last publish): the log and the
            # message are whole, so the run's status is its terminal
            # chunk's; only its live clients saw their stream break.
            logger.warning("run %s ended, then its broker failed: %s", recorder.run.pk, exc)
            status = "failed" if failure else "completed"
        else:
            logger.exception("run %s failed outside its source", recorder.run.pk)
            failure.append(exc)
            status = "failed"
            tail = encoder.error(error_text)
            if tail:
                await _to_the_end(_record_and_publish(recorder, channel, tail, closing=True))
    finally:
        if recorder.lease_lost is not None:
            status = "lost"
        error = failure[0] if failure else None
        # An interrupted answer did not finish; its log ends with the error
        # its client was shown (one terminal chunk), the run says why.
        reason = INTERRUPTED_FINISH_REASON if status == "interrupted" else None
        if steering is not None:
            steering.end("finished" if status == "completed" else "error" if status == "failed" else "aborted")
        telemetry.end_run(status, finish_reason=reason or encoder.finish_reason, usage=encoder.usage, error=error)
        # The task ends only once the outcome is stored: a shutdown waits
        # for the task, and then the process exits. A run whose lease was
        # lost stores nothing: its outcome is its new owner's to write.
        await _to_the_end(
            _let_go(channel)
            if status == "lost"
            else _finish(
                recorder,
                channel,
                status,
                finish_reason=reason,
                usage=dict(encoder.usage),
                error_code=_error_code(error),
                error_detail=repr(error) if error else "",
            )
        )


async def _to_the_end(work: Coroutine[Any, Any, None]) -> None:
    """Await ``work`` until it is done, however often this task is
    cancelled meanwhile, then raise the cancellation, if there was one.

    ``asyncio.shield`` alone keeps the work going but lets the task end at
    the next cancellation. That happens when a run that was interrupted at
    shutdown is then stopped too: its client drops the stream on the error
    chunk. The shutdown then saw the task end and let the process exit
    before the run's outcome was written, which left the run ``running``."""
    inner = asyncio.ensure_future(work)
    cancelled = False
    while not inner.done():
        try:
            await asyncio.shield(inner)
        except asyncio.CancelledError:
            if inner.cancelled():
                raise
            cancelled = True
    inner.result()
    if cancelled:
        raise asyncio.CancelledError


def _error_code(error: BaseException | None) -> str:
    """What ``Run.error_code`` says: the exception's own ``error_code``
    when it names one (a usage limit's ``usage_limit``), else its class."""
    if error is None:
        return ""
    code = getattr(error, "error_code", None)
    return code if isinstance(code, str) and code else type(error).__name__


class RunClock:
    """When a run started executing and sent its first chunk (monotonic
    seconds), for the timings of its finish metadata."""

    __slots__ = ("first_chunk", "started")

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.first_chunk: float | None = None


def start_metadata(run: Run, metadata: Any) -> Any:
    """The ``start`` chunk's metadata with ``MESSAGE_METADATA``: the model
    and when the answer began (ms since the epoch, as ``Date.now()``), under
    what the view's ``get_message_metadata`` gave (its keys win; a value
    that is not an object is sent as it is)."""
    if metadata is not None and not isinstance(metadata, dict):
        return metadata
    return {"model": run.model, "createdAt": int(run.started_at.timestamp() * 1000), **(metadata or {})}


#: The encoder's usage totals in the SDK's ``LanguageModelUsage`` names.
_USAGE_NAMES = {
    "input_tokens": "inputTokens",
    "output_tokens": "outputTokens",
    "reasoning_tokens": "reasoningTokens",
    "cached_input_tokens": "cachedInputTokens",
}


def _finish_metadata(run: Run, encoder: UIMessageEncoder, clock: RunClock) -> dict[str, Any]:
    """The ``finish`` chunk's metadata with ``MESSAGE_METADATA``: usage (the
    SDK's ``totalUsage`` names), the model, and timings in milliseconds
    (to the first chunk, and the whole answer)."""
    usage = {_USAGE_NAMES[name]: value for name, value in encoder.usage.items() if name in _USAGE_NAMES}
    if "inputTokens" in usage or "outputTokens" in usage:
        usage["totalTokens"] = usage.get("inputTokens", 0) + usage.get("outputTokens", 0)
    now = time.monotonic()
    timings = {"durationMs": round((now - clock.started) * 1000)}
    if clock.first_chunk is not None:
        timings["firstChunkMs"] = round((clock.first_chunk - clock.started) * 1000)
    return {"model": run.model, "usage": usage, "timings": timings}


async def _record_and_publish(
    recorder: RunRecorder, channel: RunChannel, chunks: list[Chunk], *, closing: bool = False
) -> None:
    """Log ``chunks`` (never waits), then publish them. For the closing
    chunks a failed publish is only logged: the log is what counts; and a
    lost lease says nothing at all (the run is another process's)."""
    try:
        recorder.add(chunks)
    except LeaseLost:
        if closing:
            return
        raise
    try:
        await channel.publish(chunks)
    except Exception:
        if not closing:
            raise
        logger.exception("could not publish the closing chunks of run %s", recorder.run.pk)


async def _let_go(channel: RunChannel) -> None:
    """A run whose lease another process took: its channel is let go of
    without a word more (``RunChannel.abandon``)."""
    try:
        await channel.abandon()
    except BrokerError as exc:
        logger.warning("could not let go of run %s in the broker: %s", channel.run_id, exc)


async def _finish(recorder: RunRecorder, channel: RunChannel, status: str, **fields: Any) -> None:
    try:
        await recorder.finish(status, **fields)
    except LeaseLost:
        # Fenced off at the last write: the run is another process's.
        await _let_go(channel)
        return
    finally:
        try:
            await channel.close()
        except BrokerError as exc:
            # The outcome is stored already (a broker failure is in it as
            # the run's error); the broker's keys expire by themselves.
            logger.warning("could not close run %s in the broker: %s", recorder.run.pk, exc)


async def _watch_stop(channel: RunChannel, task: asyncio.Task[None], stopped: asyncio.Event) -> None:
    await channel.stop_requested.wait()
    stopped.set()
    task.cancel()
