"""The demo's URLs plus AG-UI endpoints serving hand-written agents and
test models, for ``tests/test_agui_http.py`` and
``tests/test_agui_approvals.py`` (``override_settings(ROOT_URLCONF=...)``)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

from django.urls import path

from demo_project.demo_model import send_email
from demo_project.urls import urlpatterns as demo_urlpatterns
from uistream_app.protocol import events as ev
from uistream_app.protocol.agui.handles import RunContext
from uistream_app.runs import AssistantMessage, ClientTool, ModelMessage, ToolMessage, UserMessage
from uistream_app.views import AGUIView

from .agui_fixtures import failing_agent, weather_research_agent
from .urls import LocateModel


async def echo_agent(ctx: RunContext) -> None:
    """Says, as JSON, what of the request reached it."""
    seen = {
        "tools": [t["name"] for t in ctx.tools],
        "context": ctx.context,
        "state": ctx.state,
        "forwardedProps": ctx.forwarded_props,
        "history": [m["role"] for m in ctx.history],
        "messages": [m["role"] for m in ctx.input.messages],
    }
    ctx.state = {**(ctx.state or {}), "echoed": True}
    ctx.publish_state()
    ctx.say(json.dumps(seen, sort_keys=True))


async def slow_agent(ctx: RunContext) -> None:
    """Counts slowly inside a subagent: the stop and disconnect tests."""
    with ctx.subagent("counter"), ctx.assistant_message() as message:
        for n in range(1, 401):
            message.delta(f" {n}")
            await asyncio.sleep(0.005)


class MailerModel:
    """Says a sentence, then asks to email every address in the user's
    message (``send_email``: each call needs a person's approval); after
    the answers, says what became of each. Text in both runs, and as many
    interrupts as addresses."""

    name = "mailer"

    async def stream(
        self, messages: Sequence[ModelMessage], tools: Sequence[Any] = (), options: Any = None
    ) -> AsyncIterator[ev.Event]:
        if isinstance(messages[-1], ToolMessage):
            start = max(i for i, m in enumerate(messages) if isinstance(m, AssistantMessage))
            said = [
                f"{m.tool_call_id}: {'not sent' if m.is_error else 'sent'}"
                for m in messages[start + 1 :]
                if isinstance(m, ToolMessage)
            ]
            yield ev.TextDelta("Done. " + "; ".join(said) + ".")
            yield ev.Finish("stop")
            return
        prompt = next(m.content for m in reversed(messages) if isinstance(m, UserMessage))
        yield ev.TextDelta("Sending now.")
        for i, address in enumerate(re.findall(r"[\w.]+@[\w.]+", prompt)):
            yield ev.ToolCallStart(f"mail_{i}", "send_email")
            yield ev.ToolCall(f"mail_{i}", "send_email", json.dumps({"to": address, "body": "hi"}))
        yield ev.Finish("tool-calls")


urlpatterns = [
    path(
        "api/agui-client-tools",
        AGUIView.as_view(model=LocateModel(), tools=(ClientTool("get_location", description="The user's location."),)),
    ),
    path("api/agui-mailer", AGUIView.as_view(model=MailerModel(), tools=(send_email,))),
    path("api/agui-agent", AGUIView.as_view(agent=weather_research_agent)),
    path("api/agui-failing", AGUIView.as_view(agent=failing_agent)),
    path("api/agui-echo", AGUIView.as_view(agent=echo_agent)),
    path("api/agui-slow", AGUIView.as_view(agent=slow_agent)),
    *demo_urlpatterns,
]
