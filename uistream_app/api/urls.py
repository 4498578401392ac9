"""The API's routes, included by ``uistream_app.urls`` under
``conversations/`` and ``runs/`` (their names live in the app's
``uistream`` namespace)."""

from __future__ import annotations

from django.urls import path

from . import views

conversation_patterns = [
    path("", views.ConversationListView.as_view(), name="conversation-list"),
    path("feedback-reasons", views.FeedbackReasonsView.as_view(), name="feedback-reasons"),
    path("<str:pk>/", views.ConversationDetailView.as_view(), name="conversation-detail"),
    path("<str:pk>/messages/", views.ConversationMessagesView.as_view(), name="conversation-messages"),
    path(
        "<str:pk>/messages/<str:message_id>/feedback",
        views.MessageFeedbackView.as_view(),
        name="message-feedback",
    ),
    path(
        "<str:pk>/messages/<str:message_id>/versions",
        views.MessageVersionsView.as_view(),
        name="message-versions",
    ),
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
