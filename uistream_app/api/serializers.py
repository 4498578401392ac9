"""The API's JSON shapes. A message is the AI SDK's ``UIMessage`` exactly
(``Message.as_ui_message``), so ``useChat({ messages })`` takes the list
as it comes. A run never shows its ``error_detail``. Date-times are ISO
8601 whatever the project's ``DATETIME_FORMAT``: the schema says
``date-time``, the filters read that, and the front end parses it."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import ISO_8601, serializers

from ..conf import settings as uistream_settings
from ..errors import Codes
from ..inspect.formats import transcript_formats
from ..models import Conversation, Feedback, Message, Run
from ..protocol.jsonbody import MAX_DEPTH, NestingError, depth_ok, parse_json
from ..transport.chat_request import ID_RE

__all__ = [
    "BoundedJSONField",
    "ConversationSerializer",
    "FeedbackSerializer",
    "IsoDateTimeField",
    "RunSerializer",
    "UIMessageSerializer",
    "VersionSwitchSerializer",
]

#: The longest feedback comment kept (characters).
MAX_COMMENT_CHARS = 4000


class IsoDateTimeField(serializers.DateTimeField):
    """A date-time in ISO 8601, whatever the project's ``DATETIME_FORMAT``."""

    format = ISO_8601


class BoundedJSONField(serializers.JSONField):
    """DRF's ``JSONField``, nested at most ``max_depth`` levels: what a JSON
    body of ``MAX_DEPTH`` levels carries one level down, so that a form (the
    browsable API's, parsed here with orjson's rules rather than
    ``json.loads``, which recurses) stores nothing a JSON body could not."""

    default_error_messages = {  # noqa: RUF012 - DRF merges these per class
        **serializers.JSONField.default_error_messages,
        Codes.TOO_DEEP: f"Value is nested deeper than {MAX_DEPTH - 1} levels.",
    }
    max_depth = MAX_DEPTH - 1

    def to_internal_value(self, data: Any) -> Any:
        if self.binary or getattr(data, "is_json_string", False):
            try:
                data = parse_json(str(data))
            except NestingError:
                self.fail(Codes.TOO_DEEP)
            except ValueError:
                self.fail("invalid")
            if not depth_ok(data, self.max_depth):
                self.fail(Codes.TOO_DEEP)
            return data
        if not depth_ok(data, self.max_depth):
            self.fail(Codes.TOO_DEEP)
        return super().to_internal_value(data)


#: The model serializers' fields, with ``IsoDateTimeField`` for date-times
#: and ``BoundedJSONField`` for JSON.
FIELD_MAPPING: dict[type[models.Field[Any, Any]], type[serializers.Field[Any, Any, Any, Any]]] = {
    **serializers.ModelSerializer.serializer_field_mapping,
    models.DateTimeField: IsoDateTimeField,
    models.JSONField: BoundedJSONField,
}


class ConversationSerializer(serializers.ModelSerializer[Conversation]):
    id = serializers.RegexField(
        rf"^(?:{ID_RE.pattern})\Z",
        source="client_id",
        max_length=128,
        required=False,
        help_text="The chat id (useChat's `id`): letters, digits, '-' and '_'. Generated when left out.",
    )
    message_count = serializers.SerializerMethodField()
    serializer_field_mapping = FIELD_MAPPING

    class Meta:
        model = Conversation
        fields = ("id", "title", "created_at", "updated_at", "metadata", "message_count")
        read_only_fields = ("created_at", "updated_at")

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields = super().get_fields()
        if self.instance is not None and not isinstance(self.instance, (list, tuple)) and hasattr(self.instance, "pk"):
            fields["id"].read_only = True  # a chat keeps its id
        return fields

    def validate_metadata(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise serializers.ValidationError("metadata is a JSON object")
        return value

    def get_message_count(self, conversation: Conversation) -> int:
        annotated = getattr(conversation, "message_count", None)
        if annotated is not None:
            return int(annotated)
        return conversation.messages.current().count()


class UIMessageSerializer(serializers.Serializer[Message]):
    """One ``UIMessage``: ``id``, ``role``, ``metadata`` (only when set),
    ``parts``."""

    id = serializers.CharField(read_only=True)
    role = serializers.ChoiceField(choices=Message.Role.choices, read_only=True)
    metadata = serializers.JSONField(read_only=True, required=False)
    parts = serializers.ListField(child=serializers.DictField(), read_only=True)

    def to_representation(self, instance: Message) -> dict[str, Any]:
        return instance.as_ui_message()


class FeedbackSerializer(serializers.Serializer[Feedback]):
    """A rating of an answer, as sent (``rating``, an optional ``reason``
    of ``UISTREAM["FEEDBACK_REASONS"]`` and ``comment``) and as shown
    (``Feedback.as_json``)."""

    rating = serializers.ChoiceField(choices=Feedback.Rating.choices)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=64, default="")
    comment = serializers.CharField(
        required=False, allow_blank=True, max_length=MAX_COMMENT_CHARS, default="", trim_whitespace=True
    )

    def validate_reason(self, value: str) -> str:
        reasons = uistream_settings.FEEDBACK_REASONS
        if value and value not in reasons:
            allowed = ", ".join(reasons) if reasons else "none"
            raise serializers.ValidationError(f"{value!r} is not a feedback reason; use one of: {allowed}")
        return value

    def to_representation(self, instance: Feedback) -> dict[str, Any]:
        return instance.as_json()


class VersionSwitchSerializer(serializers.Serializer[Message]):
    """Which version of a message the current branch goes through (1 is
    the oldest)."""

    version = serializers.IntegerField(min_value=1)


def _ms(delta: Any) -> int | None:
    return None if delta is None else int(delta.total_seconds() * 1000)


class RunSerializer(serializers.ModelSerializer[Run]):
    conversation = serializers.CharField(
        source="conversation.ui_id", read_only=True, help_text="The chat id of the run's conversation."
    )
    time_to_first_chunk_ms = serializers.SerializerMethodField()
    duration_ms = serializers.SerializerMethodField()
    transcripts = serializers.SerializerMethodField()
    serializer_field_mapping = FIELD_MAPPING

    class Meta:
        model = Run
        fields = (
            "id",
            "conversation",
            "message",
            "status",
            "finish_reason",
            "error_code",
            "model",
            "usage",
            "state",
            "sdk_version",
            "trigger",
            "started_at",
            "first_chunk_at",
            "finished_at",
            "time_to_first_chunk_ms",
            "duration_ms",
            "chunk_count",
            "transcripts",
        )
        read_only_fields = fields

    def get_time_to_first_chunk_ms(self, run: Run) -> int | None:
        return _ms(run.time_to_first_chunk)

    def get_duration_ms(self, run: Run) -> int | None:
        return _ms(run.duration)

    @extend_schema_field(
        {"type": "object", "additionalProperties": {"type": "string", "format": "uri"}},
    )
    def get_transcripts(self, run: Run) -> dict[str, str]:
        """Format name → the URL of the run's transcript in it."""
        request = self.context.get("request")
        out = {}
        for found in transcript_formats():
            url = reverse("uistream:run-transcript", kwargs={"pk": run.pk, "transcript_format": found.name})
            out[found.name] = request.build_absolute_uri(url) if request is not None else url
        return out
