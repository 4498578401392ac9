"""URLs of the app (DESIGN.md): include them under a prefix, e.g. ``/api/``.

``chat`` is useChat's default ``api`` path, so ``useChat()`` pointed at
``/api/chat`` finds ``/api/chat/<id>/stream`` for resume by itself.
"""

from __future__ import annotations

from django.urls import path

from . import views

app_name = "uistream"

urlpatterns = [
    path("csrf", views.csrf_token_view, name="csrf"),
    path("chat", views.ChatView.as_view(), name="chat"),
    path("chat/<str:chat_id>/stream", views.ChatStreamView.as_view(), name="chat-stream"),
    path("chat/<str:chat_id>/stop", views.ChatStopView.as_view(), name="chat-stop"),
    path(
        "chat/<str:chat_id>/messages/<str:message_id>/stream",
        views.StoredMessageStreamView.as_view(),
        name="message-stream",
    ),
]
