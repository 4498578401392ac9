"""Scaffolding until the openai_agents adapter lands (issue 16): the demo model answers."""

from __future__ import annotations

from uistream_app.views import ChatView


class OpenAIAgentsChatView(ChatView):
    pass
