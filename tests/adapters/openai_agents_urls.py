"""The demo's URLs plus an AG-UI endpoint running the demo's Agents SDK
agent, for ``tests/adapters/test_openai_agents.py``
(``override_settings(ROOT_URLCONF=...)``)."""

from __future__ import annotations

from django.urls import path

from demo_project.agents.openai_agents_agent import demo_agent
from demo_project.urls import urlpatterns as demo_urlpatterns
from uistream_app.views import AGUIView

urlpatterns = [
    *demo_urlpatterns,
    path("test-agui/openai-agents", AGUIView.as_view(agent=demo_agent)),
]
