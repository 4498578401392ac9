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
from typing import Any

__all__ = ["ReplayMemory"]


class ReplayMemory:
    """Provider items of recent assistant steps (Anthropic thinking blocks
    with their signatures, Responses reasoning items with their encrypted
    content), so the next call can send them back; bounded (least recently
    used dropped first), safe across threads."""

    def __init__(self, size: int = 512) -> None:
        self._size = size
        self._blocks: OrderedDict[str, tuple[dict[str, Any], ...]] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, call_ids: Sequence[str], blocks: Sequence[dict[str, Any]]) -> None:
        """Keep ``blocks`` for the step that made the calls ``call_ids``
        (a step without calls is not kept: see the module docstring)."""
        if not call_ids:
            return
        key = "\x1f".join(call_ids)
        with self._lock:
            if not blocks:
                # Nothing to send back for this step: forget what an
                # earlier step with the same calls left.
                self._blocks.pop(key, None)
                return
            self._blocks[key] = tuple(blocks)
            self._blocks.move_to_end(key)
            while len(self._blocks) > self._size:
                self._blocks.popitem(last=False)

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
            return found
