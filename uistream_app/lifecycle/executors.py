"""Executors: where a run executes (``UISTREAM["EXECUTOR"]``,
docs/operations.md, "Executors").

``"inprocess"`` (the default) is ``runner.Runner``: the run is a task of the
web process that took the request. ``"celery"`` (``CeleryRunner``) and
``"tasks"`` (``tasks_executor.TasksRunner``, Django's background tasks) are
``WorkerRunner``s: the web process prepares the run (rows written, the
chat's slot taken with the broker), hands its broker channel off and
enqueues a task; a worker adopts the channel, rebuilds the ``PreparedRun``
through the store (``ConversationStore.load``) and executes it with
``Runner`` in its own event loop (``execute_in_worker``). Web processes only
relay the broker's stream, so resume, stop and ``ON_DISCONNECT`` work as
they do in-process; the broker must be one of many processes that can
hand a run off (Redis or PostgreSQL: a channel with ``hand_off()``, a
broker with ``adopt_run()``). What differs between the
engines is how a task is sent (``WorkerRunner.enqueue``) and what must be
installed (``check_engine``).

The task carries what the worker cannot read from the database
(``run_payload``): the hooks class's dotted path, the run id, the turn (its
kind and JSON extra), the checked approvals and client results, the owner
(user id or session key), the turn's context (its transport and extra
keys), the start chunk's metadata and the request's trace. The worker
starts the turn through the same ``ChatHooks.start_turn`` as the web
process, with an ``AdoptedRun``: its hooks get the same ``TurnContext``
(``on_worker`` set, no request). Celery is an optional extra
(``django-uistream[celery]``), imported only by ``CeleryRunner``.

A run executes at most once: the worker adopts its channel atomically
(``RedisBroker.adopt_run``, ``PostgresBroker.adopt_run``), so a task delivered twice (``acks_late`` after
a worker died, the visibility timeout, a Tasks backend's retry) runs once,
and a task whose run was settled or stopped while it waited does nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from ..conf import EXECUTORS, import_from_string
from ..conf import settings as uistream_settings
from ..live import get_broker
from ..models import Run
from ..owners import Owner
from ..protocol.events import Event
from ..runs import ClientToolResult, ToolApproval, telemetry
from .runner import RunHandle, Runner
from .store import PreparedRun, Turn
from .turns import AdoptedRun, RunNotActive, TurnContext, failing_source

__all__ = [
    "CeleryRunner",
    "WorkerRunHandle",
    "WorkerRunner",
    "celery_options",
    "execute_in_worker",
    "executor_class",
    "hands_off",
    "lease_seconds",
    "run_payload",
]

logger = logging.getLogger("uistream_app.executors")


def needs_a_shared_broker(engine: str) -> str:
    """The refusal of a worker executor on a broker that can't hand runs off."""
    return f"UISTREAM['EXECUTOR'] = {engine!r} needs a broker of many processes, Redis or PostgreSQL (check E020)."


#: The Celery task's name (``uistream_app.tasks``).
TASK_NAME: Final = "uistream_app.execute_run"


def hands_off(channel: Any) -> bool:
    """Whether ``channel``'s broker can hand the run to another process
    (``channel.hand_off()``, then ``broker.adopt_run()`` there, at most once):
    the Redis and PostgreSQL brokers' channels can."""
    return callable(getattr(channel, "hand_off", None))


def executor_class() -> type[Runner]:
    """The ``Runner`` class ``UISTREAM["EXECUTOR"]`` names (an alias or a
    dotted path); ``ImproperlyConfigured`` naming the key otherwise."""
    value = uistream_settings.EXECUTOR
    cls = import_from_string(EXECUTORS.get(value, value), "UISTREAM['EXECUTOR']") if isinstance(value, str) else value
    if not (isinstance(cls, type) and issubclass(cls, Runner)):
        raise ImproperlyConfigured(
            f"UISTREAM['EXECUTOR'] = {value!r} is neither 'inprocess', 'celery', 'tasks' nor the dotted path of a "
            "Runner subclass."
        )
    return cls


def lease_seconds() -> float:
    """How long a run may go unrenewed before it counts as orphaned:
    ``UISTREAM["LEASE_SECONDS"]`` (default 20)."""
    return uistream_settings.LEASE_SECONDS


def celery_options() -> dict[str, Any]:
    """The Celery configuration the executor is meant to run with, to merge
    into a project's Celery app (``app.conf.update(celery_options())``):
    no result backend, late acks, and a visibility timeout of one lease, so
    a task a dead worker held is delivered again before its run counts as
    orphaned (``adopt_run`` keeps it from running twice)."""
    return {
        "task_ignore_result": True,
        "task_acks_late": True,
        "worker_prefetch_multiplier": 1,
        "broker_transport_options": {"visibility_timeout": lease_seconds()},
    }


@dataclass(frozen=True, eq=False)
class WorkerRunHandle(RunHandle):
    """A run handed to a worker. ``task`` is the hand-off (enqueueing);
    cancelling the run asks the broker to stop it, wherever it runs."""

    conversation_id: str = ""
    elsewhere: ClassVar[bool] = True

    def cancel_unless_done(self) -> None:
        stop = asyncio.get_running_loop().create_task(get_broker().request_stop(self.conversation_id))
        _stopping.add(stop)
        stop.add_done_callback(_stopping.discard)


_stopping: set[asyncio.Task[bool]] = set()


def run_payload(hooks_class: type[Any], prepared: PreparedRun, metadata: Any) -> dict[str, Any]:
    """What the worker needs to rebuild ``prepared`` (JSON): the rows are
    in the database, the rest is here. ``Turn.extra`` values that are not
    JSON (AG-UI's parsed input) stay behind."""
    owner = prepared.owner
    context = prepared.setup.context.as_payload() if prepared.setup is not None else None
    extra: dict[str, Any] = {}
    for key, value in prepared.extra.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue
        extra[key] = value
    return {
        "hooks": f"{hooks_class.__module__}.{hooks_class.__qualname__}",
        "run_id": str(prepared.run.pk),
        "chat_id": prepared.chat_id,
        "conversation_id": prepared.conversation_id,
        "kind": prepared.turn.kind,
        "extra": extra,
        "with_thread": prepared.thread is not None,
        "approvals": {call: [a.approval_id, a.approved, a.reason] for call, a in prepared.approvals.items()},
        "client_results": {call: [r.output, r.is_error] for call, r in prepared.client_results.items()},
        "user_id": owner.user.pk if owner.user is not None else None,
        "session_key": owner.session_key,
        "context": context,
        "metadata": metadata,
        # The request's trace, continued by the run's span on the worker.
        "trace": telemetry.carrier(),
    }


class WorkerRunner(Runner):
    """The base of the executors whose runs execute on a worker (see the
    module docstring): the web process prepares the run, hands its broker
    channel off and enqueues ``run_payload`` with ``enqueue``; the worker's
    task calls ``execute_in_worker``. A subclass names its engine and
    says how a payload is enqueued; the rest is shared."""

    #: The executor's name in ``UISTREAM["EXECUTOR"]``, for messages.
    engine: ClassVar[str] = ""
    #: Seconds a run may take on the worker before it is cancelled there.
    time_limit: float = 900.0
    #: The worker builds the run's source (``execute_in_worker``).
    executes_here: ClassVar[bool] = False

    def __init__(self, hooks_class: type[Any]) -> None:
        self.hooks_class = hooks_class

    @classmethod
    def for_hooks(cls, hooks: Any) -> Runner:
        return cls(type(hooks))

    @classmethod
    def check_engine(cls) -> None:
        """Raise ``ImproperlyConfigured`` naming what is missing when runs
        cannot be enqueued (the engine's extra, its configuration)."""

    async def enqueue(self, payload: dict[str, Any]) -> None:
        """Send ``payload`` to a worker (the task's JSON argument). Called
        once per run, after the hand-off; an exception fails the run."""
        raise NotImplementedError(f"{type(self).__name__} must implement enqueue()")

    async def start(self, prepared: PreparedRun, source: AsyncIterator[Event], *, metadata: Any = None) -> RunHandle:
        channel = prepared.channel
        try:
            self.check_engine()
            if not hands_off(channel):
                raise ImproperlyConfigured(needs_a_shared_broker(self.engine))
        except ImproperlyConfigured as exc:
            # The run is prepared (its rows, the chat's slot): end it as
            # failed, in-band and stored, rather than leave it running.
            logger.exception("run %s cannot be handed to a worker", prepared.run.pk)
            return await Runner().start(prepared, failing_source(exc))
        payload = run_payload(self.hooks_class, prepared, metadata)
        if prepared.turn_record is not None and prepared.turn_record != prepared.run.turn:
            # ``Run.turn`` was stored with the run's row; the start chunk's
            # metadata, chosen since, joins it before any worker has the run:
            # a continuation of a run lost before its first log write sends
            # the same ``start`` (``ON_OWNER_LOST = "continue"``).
            await Run.objects.filter(pk=prepared.run.pk).aupdate(turn=prepared.turn_record)
        await channel.hand_off()  # type: ignore[attr-defined]
        name = f"uistream-enqueue-{payload['run_id']}"
        task = asyncio.get_running_loop().create_task(self.enqueue(payload), name=name)
        try:
            # Shielded: a request cancelled meanwhile does not leave the
            # task half sent.
            await asyncio.shield(task)
        except Exception:
            # Nothing will run it: the run fails here, in-band and stored,
            # and the chat is free again.
            logger.exception("run %s could not be enqueued", payload["run_id"])
            failure = RuntimeError("the run could not be handed to a worker")
            return await Runner().start(prepared, failing_source(failure))
        return WorkerRunHandle(prepared.run, task, prepared, conversation_id=prepared.conversation_id)


class CeleryRunner(WorkerRunner):
    """Runs on Celery workers (see the module docstring). Subclass it and
    name the subclass in ``UISTREAM["EXECUTOR"]`` to change the task's
    options: ``queue``, ``time_limit`` (seconds a run may take; a run over
    it is cancelled in the worker, and Celery's hard limit ends the task
    ``TIME_LIMIT_MARGIN`` later)."""

    engine: ClassVar[str] = "celery"
    queue: str | None = None

    @classmethod
    def check_engine(cls) -> None:
        _task()

    async def enqueue(self, payload: dict[str, Any]) -> None:
        task_function = _task()
        options: dict[str, Any] = {
            # A task that waited longer than a lease finds its run orphaned.
            "expires": lease_seconds(),
            "time_limit": self.time_limit + TIME_LIMIT_MARGIN,
            "soft_time_limit": self.time_limit + TIME_LIMIT_MARGIN / 2,
        }
        if self.queue:
            options["queue"] = self.queue
        kwargs = {"payload": payload, "time_limit": self.time_limit}
        await asyncio.to_thread(task_function.apply_async, kwargs=kwargs, **options)


#: Seconds between the executor's own time limit and Celery's hard one.
TIME_LIMIT_MARGIN: Final = 30.0


def _task() -> Any:
    try:  # Celery is an extra, and tasks.py (Celery's autodiscovery) imports it and this module
        from ..tasks import execute_run_task
    except ImportError as exc:  # tasks' MissingExtra names the extra
        raise ImproperlyConfigured(f"UISTREAM['EXECUTOR'] = 'celery' needs Celery: {exc}") from exc
    return execute_run_task


async def execute_in_worker(payload: dict[str, Any], *, time_limit: float | None = None) -> str:
    """Execute the run ``payload`` describes (``run_payload``), in the
    worker's event loop; returns what happened (``"executed"``,
    ``"not-active"`` when the run ended or was adopted before)."""
    broker = get_broker()
    adopt_run = getattr(broker, "adopt_run", None)
    if adopt_run is None:
        raise ImproperlyConfigured(
            "A run executes on a worker only with a broker of many processes, Redis or PostgreSQL (check E020)."
        )
    run_id, chat_id = payload["run_id"], payload["chat_id"]
    # A task enqueued before chat ids were per owner names no key: its
    # conversation's key was its chat id then (migration 0013).
    channel = await adopt_run(payload.get("conversation_id", chat_id), run_id)
    if channel is None:
        logger.info("run %s is not active any more (or was adopted before): nothing to execute", run_id)
        return "not-active"
    try:
        hooks = import_string(payload["hooks"])()
        owner = await _owner(payload)
        context = _context(payload, owner)
        turn = Turn(chat_id, payload["kind"], extra=payload["extra"])
        adopted = AdoptedRun(
            run_id,
            channel,
            approvals={call: ToolApproval(*value) for call, value in payload["approvals"].items()},
            client_results={call: ClientToolResult(*value) for call, value in payload["client_results"].items()},
            metadata=payload["metadata"],
        )
        with telemetry.continued(payload.get("trace")):
            handle = await hooks.start_turn(
                turn, context, version=7, with_thread=payload["with_thread"], adopted=adopted
            )
    except RunNotActive:
        await channel.close()
        return "not-active"
    except BaseException:
        # The worker stops (its task cancelled, its process told to end)
        # before the run began here: neither started nor ended, it is let go
        # of without its stream's end, so the sweep that finds its lease run
        # out continues it (``ON_OWNER_LOST = "continue"``) or settles it.
        await asyncio.shield(channel.abandon())
        raise
    try:
        async with asyncio.timeout(time_limit):
            await asyncio.wait([handle.task])
    except TimeoutError:
        logger.warning("run %s took longer than %s s: cancelled", run_id, time_limit)
        handle.cancel_unless_done()
        await asyncio.wait([handle.task])
    return "executed"


async def _owner(payload: dict[str, Any]) -> Owner:
    user_id = payload["user_id"]
    if user_id is None:
        return Owner.of_session(payload["session_key"])
    return Owner.of_user(await get_user_model()._default_manager.aget(pk=user_id))


def _context(payload: dict[str, Any], owner: Owner) -> TurnContext:
    """The turn's context as the web process built it, on the worker."""
    saved = payload.get("context") or {}
    return TurnContext(
        owner=owner,
        chat_id=payload["chat_id"],
        transport=saved.get("transport", "http"),
        extra=saved.get("extra") or {},
        request=None,
        on_worker=True,
    )
