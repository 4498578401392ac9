"""The WebSocket consumer a project routes and subclasses (``routing.py``
routes it at ``ws/chat/``): ai@7's ``WebSocketChatTransport`` served by
Channels, and the frames' names it has always offered (``protocol.ws``'s). It
lives in ``transport/chat_consumer.py``, beside the HTTP views.
"""

from __future__ import annotations

from .protocol.ws import (
    CLOSE_MESSAGE_TOO_BIG,
    CLOSE_POLICY_VIOLATION,
    PRIVATE_CLOSE_BASE,
    AbortFrame,
    ChatFrameRenderer,
    FrameError,
    ResumeFrame,
    SendFrame,
    check_frame,
)
from .transport.chat_consumer import ChatConsumer

__all__ = [
    "CLOSE_MESSAGE_TOO_BIG",
    "CLOSE_POLICY_VIOLATION",
    "PRIVATE_CLOSE_BASE",
    "AbortFrame",
    "ChatConsumer",
    "ChatFrameRenderer",
    "FrameError",
    "ResumeFrame",
    "SendFrame",
    "check_frame",
]
