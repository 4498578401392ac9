"""The HTTP views of uistream in one place: what a project routes and
subclasses, as ``django.views.generic`` lists its own (docs/architecture.md,
"Rooms").

They live in ``transport/``: useChat's endpoints in
``transport/chat_views.py``, AG-UI's in ``transport/agui_views.py``, a stored
file's in ``transport/file_views.py``, and the one pipeline they share,
``StreamView``, in ``transport/pipeline.py``.
"""

from __future__ import annotations

from .transport.agui_views import AGUI_SSE_HEADERS, AGUIView
from .transport.chat_views import (
    CHAT_ID_HEADER,
    TAIL_INDEX_HEADER,
    ChatQueueView,
    ChatSteerView,
    ChatStopView,
    ChatStreamView,
    ChatView,
    StoredMessageStreamView,
    csrf_token_view,
)
from .transport.file_views import FileView
from .transport.pipeline import SSE_HEADERS, RequestContext, StreamView

__all__ = [
    "AGUI_SSE_HEADERS",
    "CHAT_ID_HEADER",
    "SSE_HEADERS",
    "TAIL_INDEX_HEADER",
    "AGUIView",
    "ChatQueueView",
    "ChatSteerView",
    "ChatStopView",
    "ChatStreamView",
    "ChatView",
    "FileView",
    "RequestContext",
    "StoredMessageStreamView",
    "StreamView",
    "csrf_token_view",
]
