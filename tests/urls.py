"""The demo's URLs plus views the tests configure in code."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from django.urls import path

from demo_project.urls import urlpatterns as demo_urlpatterns
from uistream_app.protocol import events as ev
from uistream_app.runs import ClientTool, ModelMessage, ToolMessage
from uistream_app.views import ChatView


class LocateModel:
    """Asks the browser where the user is, then answers from what it said."""

    name = "locate"

    async def stream(
        self, messages: Sequence[ModelMessage], tools: Sequence[Any] = (), options: Any = None
    ) -> AsyncIterator[ev.Event]:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            where = json.loads(last.content).get("city", "nowhere") if not last.is_error else "an unknown place"
            yield ev.TextDelta(f"You are in {where}.")
            yield ev.Finish("stop")
        else:
            yield ev.ToolCallStart("call_loc", "get_location")
            yield ev.ToolCall("call_loc", "get_location", "{}")
            yield ev.Finish("tool-calls")


class ClientToolChatView(ChatView):
    model = LocateModel()
    tools = (ClientTool("get_location", description="The user's location, from the browser."),)


urlpatterns = [
    *demo_urlpatterns,
    path("test-client-tools/chat", ClientToolChatView.as_view()),
]
