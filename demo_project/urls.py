from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from .agui import DemoAGUIView
from .views import chat_page

urlpatterns = [
    path("", chat_page, name="chat-page"),
    path("admin/", admin.site.urls),
    path("api/agents/", include("demo_project.agents.urls")),
    # The app's AG-UI endpoint with the demo's shared state ({"turns": N}).
    path("api/agui", DemoAGUIView.as_view(), name="demo-agui"),
    path("api/", include("uistream_app.urls")),
]
