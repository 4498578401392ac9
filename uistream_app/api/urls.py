"""The API's routes, included by ``uistream_app.urls`` under
``conversations/`` and ``runs/`` (their names live in the app's
``uistream`` namespace)."""

from __future__ import annotations

from django.urls import path

from . import views

conversation_patterns = [
    path("", views.ConversationListView.as_view(), name="conversation-list"),
    path("<str:pk>/", views.ConversationDetailView.as_view(), name="conversation-detail"),
    path("<str:pk>/messages/", views.ConversationMessagesView.as_view(), name="conversation-messages"),
]

run_patterns = [
    path("", views.RunListView.as_view(), name="run-list"),
    path("<uuid:pk>/", views.RunDetailView.as_view(), name="run-detail"),
    path(
        "<uuid:pk>/transcript/<str:transcript_format>/",
        views.RunTranscriptView.as_view(),
        name="run-transcript",
    ),
]
