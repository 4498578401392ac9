"""``/api/agents/<fw>/chat`` (and its ``stream`` and ``stop``) for each
framework of the demo: the chat POST is the framework's ``ChatView``
subclass; resume and stop are the app's own views, which know nothing of
frameworks (stop cancels the run, and the adapter cancels the
framework's)."""

from __future__ import annotations

from django.urls import URLPattern, path

from uistream_app.views import ChatStopView, ChatStreamView, ChatView

from .langgraph_agent import LangGraphChatView
from .openai_agents_agent import OpenAIAgentsChatView
from .pydantic_ai_agent import PydanticAIChatView

app_name = "agents"

#: The framework's name in the URL → its chat view.
FRAMEWORKS: dict[str, type[ChatView]] = {
    "pydantic-ai": PydanticAIChatView,
    "langgraph": LangGraphChatView,
    "openai-agents": OpenAIAgentsChatView,
}


def _patterns(fw: str, view: type[ChatView]) -> list[URLPattern]:
    return [
        path(f"{fw}/chat", view.as_view(), name=f"{fw}-chat"),
        path(f"{fw}/chat/<path:chat_id>/stream", ChatStreamView.as_view(), name=f"{fw}-chat-stream"),
        path(f"{fw}/chat/<path:chat_id>/stop", ChatStopView.as_view(), name=f"{fw}-chat-stop"),
    ]


urlpatterns = [pattern for fw, view in FRAMEWORKS.items() for pattern in _patterns(fw, view)]
