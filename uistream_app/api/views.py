"""The API's views: DRF generics, each scoped to the request's owner
(``permissions.OwnedMixin``). See the package docstring for the routes.

Override points, DRF style: ``get_queryset`` (what the owner sees),
``perform_create`` / ``perform_update`` / ``perform_destroy`` (the side
effects), ``pagination_class`` and ``filter_backends`` (class attributes).
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.core.handlers.asgi import ASGIRequest
from django.db import IntegrityError, transaction
from django.db.models import Count, Q, QuerySet
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import APIException, NotFound, ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from ..conf import settings as uistream_settings
from ..errors import Codes
from ..inspect.formats import astream_transcript, download_name, get_format, stream_transcript, transcript_formats
from ..lifecycle.branches import switch_to, versions
from ..lifecycle.feedback import rate, unrate
from ..lifecycle.leases import settle_chat_orphans
from ..lifecycle.store import new_chat_id
from ..live import get_broker
from ..models import Conversation, Feedback, Message, Run
from ..policies import FeedbackRateThrottle
from .filters import ApiOrderingFilter, ApiSearchFilter, RunFilter, UpdatedRangeFilter
from .permissions import ChatOwner, OwnedMixin
from .serializers import (
    ConversationSerializer,
    FeedbackSerializer,
    RunSerializer,
    UIMessageSerializer,
    VersionSwitchSerializer,
)

__all__ = [
    "ConversationDetailView",
    "ConversationListView",
    "ConversationMessagesView",
    "FeedbackReasonsView",
    "MessageFeedbackView",
    "MessageVersionsView",
    "RunDetailView",
    "RunListView",
    "RunTranscriptView",
]


class Conflict(APIException):
    """409 in DRF's own shape (the API answers DRF's ``{"detail"}``),
    with the house's codes."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state."
    default_code = Codes.CONFLICT


def refuse_while_streaming(conversation: Conversation) -> None:
    """409 ``run_active`` while a reply streams in ``conversation``: what
    changes a conversation's messages waits for its run (a run whose
    process died is settled first: it holds the chat's slot until then)."""
    async_to_sync(settle_chat_orphans)(conversation.pk)
    if async_to_sync(get_broker().active_run)(conversation.pk) is not None:
        raise Conflict("a reply is still streaming in this chat; stop it first", code=Codes.RUN_ACTIVE)


class ConversationPagination(PageNumberPagination):
    page_size = 20
    page_size_query_param = "page_size"
    max_page_size = 100


class MessagePagination(PageNumberPagination):
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000


class RunPagination(ConversationPagination):
    pass


class ConversationListView(OwnedMixin, generics.ListCreateAPIView[Conversation]):
    """The owner's conversations, most recently active first; or a new one."""

    serializer_class = ConversationSerializer
    permission_classes = (ChatOwner,)
    pagination_class = ConversationPagination
    filter_backends = (UpdatedRangeFilter, ApiSearchFilter, ApiOrderingFilter)
    search_fields = ("title", "=client_id")
    ordering_fields = ("updated_at", "created_at", "title")
    ordering = ("-updated_at",)

    def get_queryset(self) -> QuerySet[Conversation]:
        return self.owned_conversations().annotate(message_count=Count("messages", filter=Q(messages__current=True)))

    def perform_create(self, serializer: BaseSerializer[Conversation]) -> None:
        # Chat ids are per owner: only the owner's own chat of that id is a
        # conflict; another owner's is not looked at, and nothing tells it exists.
        chat_id = serializer.validated_data.get("client_id") or new_chat_id()
        if self.owned_conversations().filter(client_id=chat_id).exists():
            raise Conflict("you have a conversation of that id already", code=Codes.DUPLICATE)
        owner = self.get_owner(create_session=True)
        try:
            with transaction.atomic():
                serializer.save(client_id=chat_id, **owner.create_kwargs())
        except IntegrityError:
            raise Conflict("you have a conversation of that id already", code=Codes.DUPLICATE) from None


class ConversationDetailView(OwnedMixin, generics.RetrieveUpdateDestroyAPIView[Conversation]):
    """One conversation: read it, rename it (``PATCH {"title": ...}``),
    delete it (409 while a reply is streaming: stop it first)."""

    serializer_class = ConversationSerializer
    permission_classes = (ChatOwner,)
    # The URL names the chat by the client's id, among the owner's.
    lookup_field = "client_id"
    lookup_url_kwarg = "pk"

    def get_queryset(self) -> QuerySet[Conversation]:
        return self.owned_conversations().annotate(message_count=Count("messages", filter=Q(messages__current=True)))

    def perform_destroy(self, instance: Conversation) -> None:
        refuse_while_streaming(instance)
        instance.delete()


class ConversationMessagesView(OwnedMixin, generics.ListAPIView[Message]):
    """The conversation's current branch, in order, as ``UIMessage``
    objects: pass ``results`` to ``useChat({ id, messages })`` to reload a
    chat. Beside them, by message id, the page's ``feedback`` (each rated
    answer's) and ``versions`` (``{"count", "current"}`` of each message
    with more than one: a regenerated answer, an edited question)."""

    serializer_class = UIMessageSerializer
    permission_classes = (ChatOwner,)
    pagination_class = MessagePagination

    def get_queryset(self) -> QuerySet[Message]:
        if getattr(self, "swagger_fake_view", False):
            return Message.objects.none()
        conversation = get_object_or_404(self.owned_conversations(), client_id=self.kwargs["pk"])
        return Message.objects.filter(conversation=conversation).current().order_by("position")

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        queryset = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(queryset)
        if page is None:
            return Response(self.get_serializer(queryset, many=True).data)
        rows = list(page)
        response = self.get_paginated_response(self.get_serializer(rows, many=True).data)
        by_key = {m.pk: m.ui_id for m in rows}
        response.data["feedback"] = {
            by_key[f.message_id]: f.as_json() for f in Feedback.objects.filter(message_id__in=list(by_key))
        }
        response.data["versions"] = {by_key[key]: v.as_json() for key, v in versions(rows).items()}
        return response


class _OneMessageMixin(OwnedMixin):
    """A view of one message of the owner's conversation ``pk``, named by
    the id its client knows (``message_id``)."""

    def owned_conversation(self) -> Conversation:
        return get_object_or_404(self.owned_conversations(), client_id=self.kwargs["pk"])

    def not_found(self) -> NotFound:
        return NotFound("no such message in this conversation")


# On the classes, not on their methods (``base_views``).
@extend_schema(responses={200: FeedbackSerializer, 201: FeedbackSerializer, 204: None, 404: OpenApiTypes.OBJECT})
class MessageFeedbackView(_OneMessageMixin, generics.GenericAPIView[Feedback]):
    """The owner's feedback on an answer (an assistant message, any of its
    versions): ``POST`` rates it (201, then 200 when it changes it),
    ``DELETE`` takes the rating back (204). Throttled per owner
    (``FeedbackRateThrottle``) besides the project's own throttles."""

    serializer_class = FeedbackSerializer
    permission_classes = (ChatOwner,)

    def get_throttles(self) -> list[Any]:
        return [*super().get_throttles(), FeedbackRateThrottle()]

    def rated_message(self) -> Message:
        message = (
            self.owned_conversation()
            .messages.filter(role="assistant")
            .with_client_id(self.kwargs["message_id"])
            .order_by("-current", "-created_at")
            .first()
        )
        if message is None:
            raise NotFound("no such answer in this conversation (only assistant messages are rated)")
        return message

    def post(self, request: Request, pk: str, message_id: str) -> Response:
        message = self.rated_message()
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        feedback, created = rate(message, **serializer.validated_data)
        return Response(feedback.as_json(), status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    def delete(self, request: Request, pk: str, message_id: str) -> Response:
        if not unrate(self.rated_message()):
            raise NotFound("this answer has no feedback")
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(responses={200: OpenApiTypes.OBJECT})
class FeedbackReasonsView(OwnedMixin, generics.GenericAPIView[Feedback]):
    """The reasons feedback may give (``UISTREAM["FEEDBACK_REASONS"]``)."""

    permission_classes = (ChatOwner,)
    serializer_class = FeedbackSerializer  # for the schema only

    def get(self, request: Request) -> Response:
        return Response({"reasons": list(uistream_settings.FEEDBACK_REASONS)})


@extend_schema(responses={200: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT, 409: OpenApiTypes.OBJECT})
class MessageVersionsView(_OneMessageMixin, generics.GenericAPIView[Message]):
    """The versions of a message of the current branch (a regenerated
    answer's, an edited question's), oldest first: ``GET`` lists them,
    ``POST {"version": N}`` makes the current branch go through version N,
    with what followed it when it was last current (409 while a reply
    streams in the chat)."""

    serializer_class = VersionSwitchSerializer
    permission_classes = (ChatOwner,)

    def current_message(self, conversation: Conversation) -> Message:
        message = conversation.messages.current().with_client_id(self.kwargs["message_id"]).first()
        if message is None:
            raise self.not_found()
        return message

    def get(self, request: Request, pk: str, message_id: str) -> Response:
        message = self.current_message(self.owned_conversation())
        found = list(message.versions())
        return Response(
            {
                "current": found.index(message) + 1,
                "results": [
                    {
                        "number": number,
                        "id": version.ui_id,
                        "current": version.current,
                        "createdAt": version.created_at.isoformat(),
                        "message": version.as_ui_message(),
                    }
                    for number, version in enumerate(found, 1)
                ],
            }
        )

    def post(self, request: Request, pk: str, message_id: str) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        number: int = serializer.validated_data["version"]
        with transaction.atomic():
            conversation = self.owned_conversations().select_for_update().filter(client_id=pk).first()
            if conversation is None:
                raise NotFound()
            # Under the row's lock: a turn that took the chat's slot first
            # is seen here; one that takes it later waits for this switch.
            refuse_while_streaming(conversation)
            found = list(self.current_message(conversation).versions())
            if number > len(found):
                raise ValidationError({"version": [f"this message has {len(found)} versions"]})
            switch_to(conversation, found[number - 1])
            conversation.save(update_fields=["updated_at"])
        return Response({"current": number, "count": len(found)})


class RunListView(OwnedMixin, generics.ListAPIView[Run]):
    """The owner's runs, newest first; filter by ``conversation``."""

    serializer_class = RunSerializer
    permission_classes = (ChatOwner,)
    pagination_class = RunPagination
    filter_backends = (RunFilter,)

    def get_queryset(self) -> QuerySet[Run]:
        return self.owned_runs().select_related("conversation").order_by("-started_at")


class RunDetailView(OwnedMixin, generics.RetrieveAPIView[Run]):
    """One stored run: status, timing, usage, links to its transcripts."""

    serializer_class = RunSerializer
    permission_classes = (ChatOwner,)

    def get_queryset(self) -> QuerySet[Run]:
        return self.owned_runs().select_related("conversation")


_FORMATS_HELP = "One of: " + ", ".join(f"`{f.name}` ({f.label})" for f in transcript_formats()) + "."


# On the class, not on ``get`` (``base_views``).
@extend_schema(
    parameters=[
        OpenApiParameter(
            "transcript_format", OpenApiTypes.STR, OpenApiParameter.PATH, required=True, description=_FORMATS_HELP
        )
    ],
    responses={
        (200, "text/event-stream"): OpenApiResponse(OpenApiTypes.STR, description="A UI message stream (SSE)."),
        (200, "application/jsonl"): OpenApiResponse(OpenApiTypes.STR, description="The log as JSON lines."),
        404: OpenApiResponse(description="No such run for this owner, or no such format."),
    },
)
class RunTranscriptView(OwnedMixin, generics.GenericAPIView[Run]):
    """The run's whole wire in one format, streamed from its log."""

    permission_classes = (ChatOwner,)
    serializer_class = RunSerializer  # for the schema's path parameter only

    def get_queryset(self) -> QuerySet[Run]:
        return self.owned_runs()

    def get(self, request: Request, pk: Any, transcript_format: str) -> StreamingHttpResponse:
        run = self.get_object()
        found = get_format(transcript_format)
        if found is None:
            names = ", ".join(f.name for f in transcript_formats())
            raise NotFound(f"unknown transcript format {transcript_format!r}; use one of {names}")
        body: Any
        if isinstance(request._request, ASGIRequest):
            body = astream_transcript(run, found.name)
        else:
            body = stream_transcript(run, found.name)
        response = StreamingHttpResponse(body, content_type=f"{found.content_type}; charset=utf-8")
        disposition = content_disposition_header(
            request.query_params.get("download") == "1", download_name(run, found.name)
        )
        if disposition is not None:
            response["Content-Disposition"] = disposition
        response["X-Content-Type-Options"] = "nosniff"
        return response
