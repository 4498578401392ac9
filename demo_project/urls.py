from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from .views import chat_page

urlpatterns = [
    path("", chat_page, name="chat-page"),
    path("admin/", admin.site.urls),
    path("api/agents/", include("demo_project.agents.urls")),
    path("api/", include("uistream_app.urls")),
]
