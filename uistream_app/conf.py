"""The ``UISTREAM`` settings dict, read in one place.

``uistream_app.conf.settings.MAX_STEPS`` and friends return the project's
value or the default below. Values are cached and the cache is reset on
Django's ``setting_changed`` signal, so ``override_settings`` works in
tests. Dotted paths (``MODEL``, ``TOOLS``) are imported lazily by
``import_setting``, with errors that name the key.
"""

from __future__ import annotations

from typing import Any, Final

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

__all__ = ["DEFAULTS", "UIStreamSettings", "request_bytes_for", "settings"]

DEFAULTS: Final[dict[str, Any]] = {
    # Dotted path of a chat model class or factory (or the object itself).
    # None: every routed ChatView / AGUIView must set its own (check E008).
    "MODEL": None,
    "TOOLS": [],
    # The runs' approval policy (ai@7's toolApproval): a function of a
    # call's ToolContext, or a mapping of tool names to statuses or
    # functions, or its dotted path; a view's ``tool_approval`` wins.
    "TOOL_APPROVAL": None,
    "MAX_STEPS": 8,
    "SDK_VERSION": 7,
    "ERROR_TEXT": "An error occurred.",
    "EXPOSE_ERRORS": False,
    "KEEPALIVE_SECONDS": 15,
    "ON_DISCONNECT": "cancel",
    "ALLOW_ANONYMOUS": False,
    # The largest request body or WebSocket frame; None: derived from
    # MAX_FILE_BYTES (``request_bytes_for``: room for three files of the
    # largest size in base64, plus 1 MiB of everything else).
    "MAX_REQUEST_BYTES": None,
    # The largest file a user may attach (its decoded bytes): 413 beyond.
    "MAX_FILE_BYTES": 10 * 1024 * 1024,
    # The media types a user may attach ("type/*" matches a whole major
    # type): 415 for any other (uistream_app.files).
    "ALLOWED_MEDIA_TYPES": ["image/*", "application/pdf", "text/plain"],
    "BROKER": {"BACKEND": "memory"},
    "FLUSH_EVERY_MS": 250,
    # Leases: every HEARTBEAT_SECONDS a serving process renews the
    # heartbeat of the runs it executes; a running run whose heartbeat is
    # older than LEASE_SECONDS is an orphan the sweeper settles.
    "HEARTBEAT_SECONDS": 5,
    "LEASE_SECONDS": 20,
    # Where the chunk log is written: "thread" (one writer thread per
    # process, its own database connection), "inline" (the thread-sensitive
    # executor of the code that started the run, as the ORM's own async
    # calls), or "auto": "inline" for a run whose rows were created inside
    # a transaction other connections can't see yet (a TestCase's), else
    # "thread".
    "LOG_WRITER": "auto",
    # The threads that requests (in an app wrapped by
    # uistream_app.asgi.bounded_threads) and runs share for their sync work
    # (ORM, sessions), instead of one per request for as long as its
    # stream (uistream_app.threads; docs/operations.md, "Threads").
    "SYNC_THREADS": 4,
    # The policies of the stream endpoints (classes or dotted paths, in
    # Django REST framework's shapes; a view's own attributes win).
    "AUTHENTICATION_CLASSES": ["uistream_app.policies.DjangoSessionAuthentication"],
    "PERMISSION_CLASSES": ["uistream_app.policies.AllowAnonymousSessions"],
    # Applied to the requests that start runs (useChat POST, WebSocket
    # send, AG-UI run); e.g. ["uistream_app.policies.ChatRateThrottle"].
    "THROTTLE_CLASSES": [],
    # Rates by throttle scope, e.g. {"chat": "5/min"}.
    "THROTTLE_RATES": {},
    # Runs streaming at once per owner (MaxActiveRunsThrottle); None: no cap.
    "MAX_ACTIVE_RUNS_PER_OWNER": None,
    # The stored messages a turn's model sees: the last N (whole turns),
    # None for all. A view's get_history() hook can choose otherwise.
    "HISTORY_MAX_MESSAGES": 100,
    # Whether anyone may read the OpenAPI schema (schema/); False: staff only.
    "SCHEMA_PUBLIC": False,
    # On SIGTERM, how long the runs of this process may go on to finish
    # before they are interrupted (uistream_app.shutdown).
    "SHUTDOWN_GRACE_SECONDS": 5,
    # Where runs execute: "inprocess" (the web process that took the
    # request), "celery" (a Celery worker; needs the Redis broker), or the
    # dotted path of a Runner subclass (docs/operations.md, "Executors").
    "EXECUTOR": "inprocess",
    # What one run may spend: RunUsageLimit objects or dicts of their
    # fields (input_tokens, output_tokens, total_tokens, tool_calls,
    # wall_seconds); a view's usage_limits win (uistream_app.limits).
    "USAGE_LIMITS": [],
    # What an owner may spend per period (DailyBudget, MonthlyBudget in
    # THROTTLE_CLASSES): {"day": {"tokens": N, "cost": X}, "month": {...}}.
    "BUDGETS": {},
    # Prices per model (Run.model), per million tokens: {"openai:gpt-4o":
    # {"input": 2.5, "output": 10.0}}; turns Run.usage into cost.
    "PRICES": {},
    # How a turn's history is chosen (uistream_app.history): a strategy
    # object or dotted path; None: LastMessages(HISTORY_MAX_MESSAGES).
    "HISTORY_STRATEGY": None,
    # MCP servers whose tools join every chat's tools, by name: {"demo":
    # {"command": ..., "args": [...]}} (stdio) or {"url": ...} (streamable
    # HTTP); needs django-uistream[mcp] (docs/operations.md, "MCP servers").
    "MCP_SERVERS": {},
    # True: every answer carries message metadata as the AI SDK's
    # messageMetadata option would put it: the model and when on ``start``,
    # usage, model and timings on ``finish`` (docs/protocols.md, "Message
    # metadata"). A view's get_message_metadata() adds to the start's.
    "MESSAGE_METADATA": False,
    # Whether the OpenTelemetry spans of tool calls carry their arguments and
    # results (they may hold personal data; docs/operations.md, "Tracing").
    "TRACE_CONTENT": False,
}

LOG_WRITER_CHOICES: Final = ("auto", "thread", "inline")

ON_DISCONNECT_CHOICES: Final = ("cancel", "finish")
#: ``EXECUTOR`` aliases.
EXECUTORS: Final = {
    "inprocess": "uistream_app.runner.Runner",
    "celery": "uistream_app.executors.CeleryRunner",
}
SDK_VERSIONS: Final = (5, 6, 7)
#: How many files of the largest size (``MAX_FILE_BYTES``) the derived
#: ``MAX_REQUEST_BYTES`` has room for, and the room left for the rest.
FILES_PER_REQUEST: Final = 3
REQUEST_SLACK_BYTES: Final = 1024 * 1024


def request_bytes_for(max_file_bytes: int) -> int:
    """The derived ``MAX_REQUEST_BYTES``: a body carries files as base64
    ``data:`` URLs (4 bytes for every 3), and useChat resends the earlier
    messages' files with each message, so room for ``FILES_PER_REQUEST``
    of the largest plus ``REQUEST_SLACK_BYTES``. 10 MiB files: 42,991,618
    bytes (about 41 MiB)."""
    return -(-max_file_bytes * 4 // 3) * FILES_PER_REQUEST + REQUEST_SLACK_BYTES


class UIStreamSettings:
    """Attribute access to ``settings.UISTREAM`` with defaults."""

    def __init__(self) -> None:
        self._cache: dict[str, Any] = {}

    @property
    def user_settings(self) -> dict[str, Any]:
        value = getattr(django_settings, "UISTREAM", {})
        if not isinstance(value, dict):
            raise ImproperlyConfigured("The UISTREAM setting must be a dict.")
        return value

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"Invalid uistream setting: {name!r}")
        if name not in self._cache:
            value = self.user_settings.get(name, DEFAULTS[name])
            if name == "MAX_REQUEST_BYTES" and value is None:
                value = request_bytes_for(int(self.MAX_FILE_BYTES))
            self._cache[name] = value
        return self._cache[name]

    def import_setting(self, name: str) -> Any:
        """The object a dotted-path setting names (or the value itself when
        it is not a string); ``ImproperlyConfigured`` naming the key when
        the import fails."""
        value = getattr(self, name)
        if isinstance(value, str):
            try:
                return import_string(value)
            except ImportError as exc:
                raise ImproperlyConfigured(f"UISTREAM[{name!r}] = {value!r} cannot be imported: {exc}") from exc
        return value

    def reload(self) -> None:
        self._cache.clear()


settings = UIStreamSettings()


def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting == "UISTREAM":
        settings.reload()


setting_changed.connect(_reload)
