"""The fallback for what a provider needs back on the next call when an
``AssistantMessage`` does not carry it.

The Anthropic Messages API wants a thinking block's signature back
(required when a tool loop continues with thinking on), and the Responses
API a reasoning item's id and encrypted content. ``AssistantMessage``
carries them in ``reasoning_parts`` (the tool loop and
``ui_to_model_messages`` fill them from the events and the stored parts);
a message built without them (by hand, or by code that predates them)
still gets them from here: a model that streamed a step remembers those
items, keyed by the step's tool call ids, and puts them back when that
step is sent again. Call ids are unique, so one conversation's items never
go out in another's request (a key made of reasoning text could collide
across conversations).

The memory is per process: a step it does not hold, and whose message has
no ``reasoning_parts``, goes out without its reasoning (both APIs accept
that).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Final

from ..protocol.jsonbody import json_size

__all__ = ["ReplayMemory"]

#: The most a ``ReplayMemory`` holds, in bytes of its items' JSON.
DEFAULT_MAX_BYTES: Final = 8 * 1024 * 1024


class ReplayMemory:
    """Provider items of recent assistant steps (Anthropic thinking blocks
    with their signatures, Responses reasoning items with their encrypted
    content), so the next call can send them back; bounded by count
    (``size`` steps) and by bytes (``max_bytes`` of the items' JSON), least
    recently used dropped first; a step larger than ``max_bytes`` is not
    kept. Safe across threads."""

    def __init__(self, size: int = 512, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._size = size
        self._max_bytes = max_bytes
        self._blocks: OrderedDict[str, tuple[tuple[dict[str, Any], ...], int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def remember(self, call_ids: Sequence[str], blocks: Sequence[dict[str, Any]]) -> None:
        """Keep ``blocks`` for the step that made the calls ``call_ids``
        (a step without calls is not kept: see the module docstring)."""
        if not call_ids:
            return
        key = "\x1f".join(call_ids)
        kept = tuple(blocks)
        size = json_size(kept) if kept else 0
        with self._lock:
            self._forget(key)
            if not kept or size > self._max_bytes:
                # Nothing to send back for this step (or too much to keep):
                # what an earlier step with the same calls left is gone too.
                return
            self._blocks[key] = (kept, size)
            self._bytes += size
            while len(self._blocks) > self._size or self._bytes > self._max_bytes:
                _, (_, dropped) = self._blocks.popitem(last=False)
                self._bytes -= dropped

    def recall(self, call_ids: Sequence[str]) -> tuple[dict[str, Any], ...]:
        """The blocks kept for the step that made the calls ``call_ids``."""
        if not call_ids:
            return ()
        key = "\x1f".join(call_ids)
        with self._lock:
            found = self._blocks.get(key)
            if found is None:
                return ()
            self._blocks.move_to_end(key)
            return found[0]

    def _forget(self, key: str) -> None:
        found = self._blocks.pop(key, None)
        if found is not None:
            self._bytes -= found[1]
