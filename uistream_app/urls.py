"""URLs of the app: include them under a prefix, e.g. ``/api/``.

``chat`` is useChat's default ``api`` path, so ``useChat()`` pointed at
``/api/chat`` finds ``/api/chat/<id>/stream`` for resume by itself. Ids
are matched as paths, so an id the views refuse (one with a ``/`` or other
path characters) gets their JSON 404, not Django's page.
"""

from __future__ import annotations

from django.urls import include, path

from .api import urls as api_urls
from .api.schema import SchemaView
from .api.usage import UsageView
from .transport import agui_views, file_views
from .transport import chat_views as views

app_name = "uistream"

urlpatterns = [
    path("csrf", views.csrf_token_view, name="csrf"),
    path("chat", views.ChatView.as_view(), name="chat"),
    path("agui", agui_views.AGUIView.as_view(), name="agui"),
    path("chat/<path:chat_id>/stream", views.ChatStreamView.as_view(), name="chat-stream"),
    path("chat/<path:chat_id>/stop", views.ChatStopView.as_view(), name="chat-stop"),
    path("chat/<path:chat_id>/steer", views.ChatSteerView.as_view(), name="chat-steer"),
    path("chat/<path:chat_id>/queue", views.ChatQueueView.as_view(), name="chat-queue"),
    path(
        "chat/<path:chat_id>/messages/<path:message_id>/stream",
        views.StoredMessageStreamView.as_view(),
        name="message-stream",
    ),
    path("files/<str:file_id>", file_views.FileView.as_view(), name="file"),
    path("conversations/", include(api_urls.conversation_patterns)),
    path("runs/", include(api_urls.run_patterns)),
    path("usage/", UsageView.as_view(), name="usage"),
    path("schema/", SchemaView.as_view(), name="schema"),
]
