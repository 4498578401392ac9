"""AG-UI shared state for runs that are not hand-written agents:
``SharedState`` holds it and says each change as the events AG-UI has for
it, ``STATE_SNAPSHOT`` and ``STATE_DELTA`` (an RFC 6902 JSON Patch);
``shared_state_source`` puts those events into a run's source events, as
the transient ``data-agui-event`` chunks that carry every AG-UI event with
no UI chunk of its own (AG-UI renderer rule 11), so they are logged,
published and rendered like everything else. The stored state
(``Run.state``) is the fold of the same events (``fold_state``), which is
what the client builds from them.

How a view uses it (``AGUIView.get_state`` / ``end_state``) and the order
of the events: docs/protocols.md, "AG-UI shared state".
"""

from __future__ import annotations

import copy
import inspect
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any, Final

from .. import events as ev
from .events import Event
from .patch import PatchError, _equal, apply_patch
from .renderer import CARRIER_TYPE

__all__ = [
    "SharedState",
    "diff",
    "fold_state",
    "shared_state_source",
]

_CARRIER_NAME: Final = CARRIER_TYPE.removeprefix("data-")


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def diff(old: Any, new: Any, path: str = "") -> list[dict[str, Any]]:
    """A JSON Patch that turns ``old`` into ``new``: objects are compared
    key by key (``add`` / ``remove`` / ``replace`` of what changed), any
    other value that differs is replaced whole. JavaScript's equality:
    ``true`` is not ``1``."""
    if isinstance(old, dict) and isinstance(new, dict):
        ops: list[dict[str, Any]] = []
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": f"{path}/{_escape(key)}"})
        for key, value in new.items():
            where = f"{path}/{_escape(key)}"
            if key not in old:
                ops.append({"op": "add", "path": where, "value": copy.deepcopy(value)})
            else:
                ops.extend(diff(old[key], value, where))
        return ops
    if _equal(old, new):
        return []
    return [{"op": "replace", "path": path, "value": copy.deepcopy(new)}]


class SharedState:
    """One run's shared state and the events that tell its changes.

    ``value`` is a copy of the state; ``set(new)`` and ``patch(ops)``
    change it and queue the ``STATE_DELTA`` that says so (a ``STATE_SNAPSHOT``
    when the state is not an object before and after: a patch of the whole
    document is not one every client applies); ``drain()`` hands the
    queued events over. Any thread may change it (a tool running in a
    worker thread)."""

    def __init__(self, value: Any) -> None:
        self._value = copy.deepcopy(value)
        self._queue: list[Event] = []
        self._lock = threading.Lock()

    @property
    def value(self) -> Any:
        with self._lock:
            return copy.deepcopy(self._value)

    def reset(self, value: Any) -> None:
        """Make ``value`` the state without saying so (nothing queued)."""
        with self._lock:
            self._value = copy.deepcopy(value)
            self._queue = []

    def snapshot(self) -> Event:
        """``STATE_SNAPSHOT`` of the state as it is."""
        with self._lock:
            return {"type": "STATE_SNAPSHOT", "snapshot": copy.deepcopy(self._value)}

    def set(self, value: Any) -> None:
        """Make ``value`` the state."""
        with self._lock:
            if isinstance(self._value, dict) and isinstance(value, dict):
                ops = diff(self._value, value)
                if ops:
                    self._queue.append({"type": "STATE_DELTA", "delta": ops})
            elif not _equal(self._value, value):
                self._queue.append({"type": "STATE_SNAPSHOT", "snapshot": copy.deepcopy(value)})
            self._value = copy.deepcopy(value)

    def patch(self, ops: list[dict[str, Any]]) -> None:
        """Apply the JSON Patch ``ops`` (whole, or not at all: ``PatchError``)
        and send it as it is."""
        with self._lock:
            self._value = apply_patch(self._value, ops)
            self._queue.append({"type": "STATE_DELTA", "delta": copy.deepcopy(list(ops))})

    def update(self, **fields: Any) -> None:
        """Set top-level keys of an object state."""
        value = self.value
        if not isinstance(value, dict):
            raise TypeError(f"update() needs an object state, not {type(value).__name__}")
        self.set({**value, **fields})

    def drain(self) -> list[Event]:
        """The events queued since the last drain."""
        with self._lock:
            out, self._queue = self._queue, []
        return out


def _carried(event: Event) -> ev.Data:
    return ev.Data(_CARRIER_NAME, dict(event), transient=True)


EndHook = Callable[[SharedState], "Awaitable[None] | None"]


async def shared_state_source(
    source: AsyncIterator[ev.Event],
    state: SharedState,
    *,
    start: Callable[[], Awaitable[Any]] | None = None,
    end: EndHook | None = None,
) -> AsyncGenerator[ev.Event, None]:
    """``source``'s events with the state's: its ``STATE_SNAPSHOT`` first,
    each change made meanwhile before the next event, and, when the source
    ends its message (``Done``: the run completed, an interrupt included),
    ``end(state)``'s changes right before that end. A run stopped, failed
    or cancelled sends no end changes. ``start()``, when given, is awaited
    first for the state's value (inside the run, so its failure is the
    run's); None there means no state: ``source`` as it is."""
    try:
        if start is not None:
            value = await start()
            if value is None:
                async for event in source:
                    yield event
                return
            state.reset(value)
        yield _carried(state.snapshot())
        async for event in source:
            if type(event) is ev.Done and end is not None:
                outcome = end(state)
                if inspect.isawaitable(outcome):
                    await outcome
            for change in state.drain():
                yield _carried(change)
            yield event
    finally:
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            await aclose()


def fold_state(chunks: Iterable[Mapping[str, Any]], state: Any = None) -> tuple[bool, Any]:
    """(whether any chunk set the state, the state they leave) from a run's
    chunks: each carried ``STATE_SNAPSHOT`` replaces it, each
    ``STATE_DELTA`` is applied; a delta that does not apply is skipped, as
    the renderer's client would refuse it (AG-UI verifier rule 12)."""
    seen = False
    for chunk in chunks:
        if chunk.get("type") != CARRIER_TYPE:
            continue
        seen_now, state = fold_chunk(chunk, state)
        seen = seen or seen_now
    return seen, state


def fold_chunk(chunk: Mapping[str, Any], state: Any) -> tuple[bool, Any]:
    """``fold_state`` for one ``data-agui-event`` chunk."""
    event = chunk.get("data")
    kind = event.get("type") if isinstance(event, dict) else None
    if kind == "STATE_SNAPSHOT":
        assert isinstance(event, dict)
        return True, copy.deepcopy(event.get("snapshot"))
    if kind == "STATE_DELTA":
        assert isinstance(event, dict)
        try:
            return True, apply_patch(state, event.get("delta"))
        except PatchError:
            return False, state
    return False, state
