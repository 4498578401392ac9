"""The runs executing in this process: ``RunHandle`` and the set of them
(``live_runs()``), kept from ``Runner.start`` until each run's task ends.

A heartbeat renews their leases (``leases``), a SIGTERM settles them
(``shutdown``) and the runner adds to them and reads how a cancelled one was
meant to end. It holds no run logic of its own, so that all of those import
it and not each other (docs/architecture.md, "Rooms": imports run one way,
down). Invariant: a handle is in ``live_runs()`` from ``track(handle)`` until
its task is done, in whichever event loop it runs.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from ..models import Run
    from .store import PreparedRun

__all__ = ["RunHandle", "interruption_of", "live_runs", "lose_lease", "on_lease_lost", "track"]


@dataclass(frozen=True, eq=False)
class RunHandle:
    """A started run: its row and its task (cancel the task to cancel the
    run), and the ``PreparedRun`` it was started from."""

    run: Run
    task: asyncio.Task[None]
    prepared: PreparedRun | None = None
    #: Whether the run executes in another process (an executor's worker),
    #: so its first chunk may be a while coming.
    elsewhere: ClassVar[bool] = False

    @property
    def run_id(self) -> str:
        return str(self.run.pk)

    def cancel_unless_done(self) -> None:
        if not self.task.done():
            self.task.cancel()

    def interrupt(self, error_text: str) -> None:
        """End the run because this process is stopping (``shutdown``): it
        closes with an ``error`` chunk carrying ``error_text`` and is stored
        as ``interrupted``. Call it in the run's own event loop."""
        if not self.task.done():
            _INTERRUPTED[self.task] = error_text
            self.task.cancel()


#: The runs ``RunHandle.interrupt`` cancelled, with the text their clients get.
_INTERRUPTED: weakref.WeakKeyDictionary[asyncio.Task[None], str] = weakref.WeakKeyDictionary()


#: The runs executing in this process (every event loop), until their task
#: ends: what a heartbeat renews and a shutdown settles.
_LIVE: set[RunHandle] = set()


def live_runs() -> frozenset[RunHandle]:
    """The runs executing in this process right now."""
    return frozenset(_LIVE)


def track(handle: RunHandle) -> None:
    """Count ``handle`` among ``live_runs()`` until its task ends."""
    _LIVE.add(handle)
    handle.task.add_done_callback(lambda _task: _LIVE.discard(handle))


def interruption_of(task: asyncio.Task[None] | None) -> str | None:
    """The error text ``RunHandle.interrupt`` cancelled ``task`` with, or
    None when it was cancelled otherwise (or not at all)."""
    return _INTERRUPTED.get(task) if task is not None else None


#: What to call when a run's lease turns out lost (``RunRecorder.lose_lease``),
#: by the run's task.
_ON_LOST: weakref.WeakKeyDictionary[asyncio.Task[None], Callable[[Any], None]] = weakref.WeakKeyDictionary()


def on_lease_lost(handle: RunHandle, callback: Callable[[Any], None]) -> None:
    """Call ``callback(error)`` in the run's event loop when ``lose_lease``
    is called for ``handle`` (the renewer found the run's epoch gone)."""
    _ON_LOST[handle.task] = callback


def lose_lease(handle: RunHandle, error: Any) -> None:
    """The run of ``handle`` is another process's now: tell its recorder,
    in its own event loop (callable from any thread)."""
    callback = _ON_LOST.get(handle.task)
    if callback is not None and not handle.task.done():
        handle.task.get_loop().call_soon_threadsafe(callback, error)
