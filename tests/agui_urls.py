"""The demo's URLs plus AG-UI endpoints serving hand-written agents, for
``tests/test_agui_http.py`` (``override_settings(ROOT_URLCONF=...)``)."""

from __future__ import annotations

import asyncio
import json

from django.urls import path

from demo_project.urls import urlpatterns as demo_urlpatterns
from uistream_app.agui_views import AGUIView
from uistream_app.protocol.agui.handles import RunContext

from .agui_fixtures import failing_agent, weather_research_agent


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


urlpatterns = [
    path("api/agui-agent", AGUIView.as_view(agent=weather_research_agent)),
    path("api/agui-failing", AGUIView.as_view(agent=failing_agent)),
    path("api/agui-echo", AGUIView.as_view(agent=echo_agent)),
    path("api/agui-slow", AGUIView.as_view(agent=slow_agent)),
    *demo_urlpatterns,
]
