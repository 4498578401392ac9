"""Scaffolding until the pydantic_ai adapter lands (issue 16): the demo model answers."""

from __future__ import annotations

from uistream_app.views import ChatView


class PydanticAIChatView(ChatView):
    pass
