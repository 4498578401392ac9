"""What a provider needs back on the next call that ``AssistantMessage``
does not carry.

``AssistantMessage`` holds a step's text, reasoning text and tool calls;
the Anthropic Messages API also wants a thinking block's signature back
(required when a tool loop continues with thinking on), and the Responses
API a reasoning item's id and encrypted content. A model that streamed a
step remembers those items here, keyed by the step's tool call ids (else
its reasoning text), and puts them back when that step is sent again.

The memory is per process: a step replayed from stored history in another
process goes out without them (its reasoning is then not sent; both APIs
accept that).
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

    @staticmethod
    def keys(call_ids: Sequence[str], reasoning: str) -> list[str]:
        keys = []
        if call_ids:
            keys.append("calls:" + "\x1f".join(call_ids))
        if reasoning:
            keys.append("text:" + reasoning)
        return keys

    def remember(self, call_ids: Sequence[str], reasoning: str, blocks: Sequence[dict[str, Any]]) -> None:
        if not blocks:
            return
        with self._lock:
            for key in self.keys(call_ids, reasoning):
                self._blocks[key] = tuple(blocks)
                self._blocks.move_to_end(key)
            while len(self._blocks) > self._size:
                self._blocks.popitem(last=False)

    def recall(self, call_ids: Sequence[str], reasoning: str) -> tuple[dict[str, Any], ...]:
        with self._lock:
            for key in self.keys(call_ids, reasoning):
                found = self._blocks.get(key)
                if found is not None:
                    return found
        return ()
