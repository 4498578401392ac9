"""Scaffolding until the langgraph adapter lands (issue 16): the demo model answers."""

from __future__ import annotations

from uistream_app.views import ChatView


class LangGraphChatView(ChatView):
    pass
