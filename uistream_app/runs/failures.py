"""The exceptions a run raises, typed so callers can tell them apart:
``ModelError`` (a model call failed; it escapes the loop) and ``ToolError``
(a tool's message for the model and the person). See docs/operations.md
("Errors").
"""

from __future__ import annotations

from collections.abc import Iterable

from ..protocol.redact import redact

__all__ = [
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelResponseError",
    "ModelTimeoutError",
    "ScriptExhaustedError",
    "ToolError",
    "UnsupportedFileError",
]


class ModelError(Exception):
    """A model call failed. Its text is redacted (``protocol.redact``) as
    it is made: it goes to the log, ``Run.error_detail`` and a span, and a
    provider's error may echo the key it was sent."""

    retryable: bool = False

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact(arg) if isinstance(arg, str) else arg for arg in args))


class ModelHTTPError(ModelError):
    """The provider answered with a non-2xx status before streaming.
    ``body`` is its response text (for the log, not the wire), redacted:
    the configured keys, ``secrets`` (the model's own key) and anything
    shaped like a credential are ``[redacted]``."""

    def __init__(self, status_code: int, body: str = "", *, secrets: Iterable[str | None] = ()) -> None:
        body = redact(body, secrets)
        super().__init__(f"model provider answered HTTP {status_code}: {body[:500]}")
        self.status_code = status_code
        self.body = body
        self.retryable = status_code == 429 or status_code >= 500


class ModelTimeoutError(ModelError):
    """Connecting to the provider, or waiting for its next bytes, took
    longer than the configured timeout."""


class ModelConnectionError(ModelError):
    """The connection failed or dropped (including a stream cut off before
    the model finished)."""


class ModelResponseError(ModelError):
    """The provider sent something that is not a valid chat-completion
    stream (a line that is not JSON, an in-band error object)."""


class ScriptExhaustedError(ModelError):
    """A ``ScriptedModel`` was called with no step left in its queue."""


class ToolError(Exception):
    """Raised by a tool: the message is shown to the model and the user,
    unlike any other exception, whose text is masked."""


class UnsupportedFileError(ModelError):
    """A model that can't take an attached file of this media type (or gets
    only a URL it can't send): raised before the request, and its text is
    what the user sees in place of the masked error (``client_text``), so a
    file is never dropped silently."""

    def __init__(self, provider: str, media_type: str, filename: str | None = None, why: str = "") -> None:
        name = f" {filename}" if filename else ""
        text = f"{provider} can't take the attached file{name} of type {media_type}" + (f": {why}" if why else "")
        super().__init__(text)
        self.media_type = media_type
        self.client_text = text
