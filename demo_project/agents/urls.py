"""``/api/agents/<fw>/chat`` (and its ``stream``, ``stop``, ``steer`` and ``queue``) for each
framework of the demo: the chat POST is the framework's ``ChatView``
subclass; resume and stop are the app's own views, which know nothing of
frameworks (stop cancels the run, and the adapter cancels the
framework's).

Each framework's module is imported at its chat's first request, not when
the URLconf loads: the three frameworks together cost about three seconds
of CPU to import, which every server and worker process would otherwise
pay at start-up for a page most visitors never pick."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponseBase
from django.urls import URLPattern, path
from django.utils.module_loading import import_string
from django.views.decorators.csrf import csrf_exempt

from uistream_app.views import ChatQueueView, ChatSteerView, ChatStopView, ChatStreamView

app_name = "agents"

#: The framework's name in the URL → the dotted path of its chat view.
FRAMEWORKS: dict[str, str] = {
    "pydantic-ai": "demo_project.agents.pydantic_ai_agent.PydanticAIChatView",
    "langgraph": "demo_project.agents.langgraph_agent.LangGraphChatView",
    "openai-agents": "demo_project.agents.openai_agents_agent.OpenAIAgentsChatView",
}


def imported_on_first_request(dotted: str) -> Any:
    """The view of the ``ChatView`` subclass at ``dotted``, imported (in a
    thread, so the event loop keeps serving) when it is first asked for.
    CSRF stays the chat pipeline's, as on every chat view."""
    view: Any = None

    @csrf_exempt
    async def chat(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        nonlocal view
        if view is None:
            view = (await sync_to_async(import_string, thread_sensitive=False)(dotted)).as_view()
        response: HttpResponseBase = await view(request, *args, **kwargs)
        return response

    return chat


def _patterns(fw: str, dotted: str) -> list[URLPattern]:
    return [
        path(f"{fw}/chat", imported_on_first_request(dotted), name=f"{fw}-chat"),
        path(f"{fw}/chat/<path:chat_id>/stream", ChatStreamView.as_view(), name=f"{fw}-chat-stream"),
        path(f"{fw}/chat/<path:chat_id>/stop", ChatStopView.as_view(), name=f"{fw}-chat-stop"),
        # An agent's run takes no message mid-run: these answer not-delivered.
        path(f"{fw}/chat/<path:chat_id>/steer", ChatSteerView.as_view(), name=f"{fw}-chat-steer"),
        path(f"{fw}/chat/<path:chat_id>/queue", ChatQueueView.as_view(), name=f"{fw}-chat-queue"),
    ]


urlpatterns = [pattern for fw, dotted in FRAMEWORKS.items() for pattern in _patterns(fw, dotted)]
