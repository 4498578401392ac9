"""The WebSocket consumer a project routes and subclasses (``routing.py``
routes it at ``ws/chat/``): ai@7's ``WebSocketChatTransport`` served by
Channels. It lives in ``transport/chat_consumer.py``, beside the HTTP views.
"""

from __future__ import annotations

from .transport.chat_consumer import ChatConsumer, ChatFrameRenderer

__all__ = [
    "ChatConsumer",
    "ChatFrameRenderer",
]
