"""The ``UISTREAM`` settings dict, read in one place.

``uistream_app.conf.settings.MAX_STEPS`` and friends return the project's
value or the default below, typed: one property per key, so callers never
cast. Values are cached and the cache is reset on Django's
``setting_changed`` signal, so ``override_settings`` works in tests.

Dotted paths (``MODEL``, ``TOOLS``, ``EXECUTOR``, the policy classes…) are
imported lazily, where they are used, and only through
``import_from_string`` (``settings.import_setting(key)`` and
``perform_import`` call it): an import that fails is an
``ImproperlyConfigured`` that names the key, the same text system checks
E002, E010, E020 and E033 report at startup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NoReturn, get_args, get_type_hints

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

__all__ = [
    "DEFAULTS",
    "NUMERIC_SETTINGS",
    "UIStreamSettings",
    "import_from_string",
    "perform_import",
    "request_bytes_for",
    "settings",
]

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
    # type): 415 for any other (uistream_app.lifecycle.attachments).
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
    # stream (uistream_app.lifecycle.threads; docs/operations.md, "Threads").
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
    # before they are interrupted (uistream_app.lifecycle.shutdown).
    "SHUTDOWN_GRACE_SECONDS": 5,
    # Where runs execute: "inprocess" (the web process that took the
    # request), "celery" (a Celery worker; needs the Redis broker), or the
    # dotted path of a Runner subclass (docs/operations.md, "Executors").
    "EXECUTOR": "inprocess",
    # What one run may spend: RunUsageLimit objects or dicts of their
    # fields (input_tokens, output_tokens, total_tokens, tool_calls,
    # wall_seconds); a view's usage_limits win (uistream_app.lifecycle.limits).
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
    "inprocess": "uistream_app.lifecycle.runner.Runner",
    "celery": "uistream_app.lifecycle.executors.CeleryRunner",
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
    """``settings.UISTREAM`` merged over ``DEFAULTS``, one typed property per
    key (corsheaders' ``conf.Settings``), so callers never cast. The raw
    values are cached until ``setting_changed``; each property turns its
    value into its type on every read (so a lazy ``ERROR_TEXT`` is
    translated for the request that reads it)."""

    def __init__(self) -> None:
        self._cache: dict[str, Any] = {}

    @property
    def user_settings(self) -> dict[str, Any]:
        value = getattr(django_settings, "UISTREAM", {})
        if not isinstance(value, dict):
            raise ImproperlyConfigured("The UISTREAM setting must be a dict.")
        return value

    def _get(self, name: str) -> Any:
        if name not in self._cache:
            self._cache[name] = self.user_settings.get(name, DEFAULTS[name])
        return self._cache[name]

    if not TYPE_CHECKING:  # to mypy an unknown name stays an error

        def __getattr__(self, name: str) -> NoReturn:
            raise AttributeError(f"Invalid uistream setting: {name!r}")

    def import_setting(self, name: str) -> Any:
        """The setting ``name`` with its dotted paths imported
        (``perform_import``); ``ImproperlyConfigured`` naming the key when
        an import fails."""
        return perform_import(getattr(self, name), f"UISTREAM[{name!r}]")

    def reload(self) -> None:
        self._cache.clear()

    # -- the chat --------------------------------------------------------------

    @property
    def MODEL(self) -> object:
        """A model, its class or factory, a dotted path, a provider name, or None."""
        return self._get("MODEL")

    @property
    def TOOLS(self) -> Sequence[object]:
        """``Tool`` objects, functions, or dotted paths to either."""
        value: Sequence[object] = self._get("TOOLS")
        return value

    @property
    def TOOL_APPROVAL(self) -> object:
        return self._get("TOOL_APPROVAL")

    @property
    def MAX_STEPS(self) -> int:
        return int(self._get("MAX_STEPS"))

    @property
    def SDK_VERSION(self) -> int:
        return int(self._get("SDK_VERSION"))

    @property
    def ERROR_TEXT(self) -> str:
        return str(self._get("ERROR_TEXT"))

    @property
    def EXPOSE_ERRORS(self) -> bool:
        return bool(self._get("EXPOSE_ERRORS"))

    @property
    def KEEPALIVE_SECONDS(self) -> float:
        return float(self._get("KEEPALIVE_SECONDS"))

    @property
    def ON_DISCONNECT(self) -> str:
        """One of ``ON_DISCONNECT_CHOICES`` (check E004)."""
        return str(self._get("ON_DISCONNECT"))

    @property
    def ALLOW_ANONYMOUS(self) -> bool:
        return bool(self._get("ALLOW_ANONYMOUS"))

    @property
    def MAX_REQUEST_BYTES(self) -> int:
        """The setting, or (None) derived from ``MAX_FILE_BYTES``."""
        value = self._get("MAX_REQUEST_BYTES")
        return request_bytes_for(self.MAX_FILE_BYTES) if value is None else int(value)

    @property
    def MAX_FILE_BYTES(self) -> int:
        return int(self._get("MAX_FILE_BYTES"))

    @property
    def ALLOWED_MEDIA_TYPES(self) -> Sequence[str]:
        value: Sequence[str] = self._get("ALLOWED_MEDIA_TYPES")
        return value

    @property
    def MESSAGE_METADATA(self) -> bool:
        return bool(self._get("MESSAGE_METADATA"))

    @property
    def TRACE_CONTENT(self) -> bool:
        return bool(self._get("TRACE_CONTENT"))

    # -- live runs, the log, processes -----------------------------------------

    @property
    def BROKER(self) -> Mapping[str, Any]:
        value: Mapping[str, Any] = self._get("BROKER")
        return value

    @property
    def FLUSH_EVERY_MS(self) -> float:
        return float(self._get("FLUSH_EVERY_MS"))

    @property
    def HEARTBEAT_SECONDS(self) -> float:
        return float(self._get("HEARTBEAT_SECONDS"))

    @property
    def LEASE_SECONDS(self) -> float:
        return float(self._get("LEASE_SECONDS"))

    @property
    def LOG_WRITER(self) -> str:
        """One of ``LOG_WRITER_CHOICES`` (check E007)."""
        return str(self._get("LOG_WRITER"))

    @property
    def SYNC_THREADS(self) -> int:
        return int(self._get("SYNC_THREADS"))

    @property
    def SHUTDOWN_GRACE_SECONDS(self) -> float:
        return float(self._get("SHUTDOWN_GRACE_SECONDS"))

    @property
    def EXECUTOR(self) -> object:
        """An ``EXECUTORS`` alias, a ``Runner`` subclass or its dotted path."""
        return self._get("EXECUTOR")

    @property
    def MCP_SERVERS(self) -> Mapping[str, Any]:
        """Checked by ``lifecycle.mcp.parse_servers`` (check E021)."""
        value: Mapping[str, Any] = self._get("MCP_SERVERS")
        return value

    # -- policies, history, spending -------------------------------------------

    @property
    def AUTHENTICATION_CLASSES(self) -> Sequence[object]:
        """Classes or dotted paths (``policies.load_classes``)."""
        value: Sequence[object] = self._get("AUTHENTICATION_CLASSES")
        return value

    @property
    def PERMISSION_CLASSES(self) -> Sequence[object]:
        value: Sequence[object] = self._get("PERMISSION_CLASSES")
        return value

    @property
    def THROTTLE_CLASSES(self) -> Sequence[object]:
        value: Sequence[object] = self._get("THROTTLE_CLASSES")
        return value

    @property
    def THROTTLE_RATES(self) -> Mapping[str, str | None]:
        value: Mapping[str, str | None] = self._get("THROTTLE_RATES") or {}
        return value

    @property
    def MAX_ACTIVE_RUNS_PER_OWNER(self) -> int | None:
        value = self._get("MAX_ACTIVE_RUNS_PER_OWNER")
        return None if value is None else int(value)

    @property
    def HISTORY_MAX_MESSAGES(self) -> int | None:
        value = self._get("HISTORY_MAX_MESSAGES")
        return None if value is None else int(value)

    @property
    def HISTORY_STRATEGY(self) -> object:
        """A strategy, its class, its dotted path, or None (``history.load_strategy``)."""
        return self._get("HISTORY_STRATEGY")

    @property
    def SCHEMA_PUBLIC(self) -> bool:
        return bool(self._get("SCHEMA_PUBLIC"))

    @property
    def USAGE_LIMITS(self) -> Sequence[object]:
        """``RunUsageLimit`` objects or dicts of their fields (``lifecycle.limits.load_usage_limits``)."""
        value: Sequence[object] = self._get("USAGE_LIMITS") or ()
        return value

    @property
    def BUDGETS(self) -> Mapping[str, Mapping[str, float]]:
        value: Mapping[str, Mapping[str, float]] = self._get("BUDGETS") or {}
        return value

    @property
    def PRICES(self) -> Mapping[str, Mapping[str, float]]:
        value: Mapping[str, Mapping[str, float]] = self._get("PRICES") or {}
        return value


def import_from_string(path: str, setting: str, *, entry: bool = False) -> Any:
    """The object the dotted ``path`` names: the one place a dotted path
    from a setting (or from a view's attribute standing in for one) is
    imported. ``setting`` names where it was written, ``"UISTREAM['EXECUTOR']"``
    or ``"'ChatView.tools'"``, and ``entry`` says it is one entry of a list,
    so the ``ImproperlyConfigured`` reads ``UISTREAM['EXECUTOR'] = 'x.Y'
    cannot be imported: …`` or ``UISTREAM['TOOLS'] entry 'x.y' cannot be
    imported: …``."""
    try:
        return import_string(path)
    except ImportError as exc:
        where = f"{setting} entry {path!r}" if entry else f"{setting} = {path!r}"
        raise ImproperlyConfigured(f"{where} cannot be imported: {exc}") from exc


def perform_import(value: object, setting: str) -> Any:
    """``value`` with its dotted paths imported (DRF's ``perform_import``):
    a string is imported, a list or tuple comes back as a list with each
    string entry imported, anything else is returned as it is."""
    if isinstance(value, str):
        return import_from_string(value, setting)
    if isinstance(value, list | tuple):
        return [import_from_string(item, setting, entry=True) if isinstance(item, str) else item for item in value]
    return value


def _is_number(annotation: object) -> bool:
    types = get_args(annotation) or (annotation,)
    return any(t in (int, float) for t in types) and all(t in (int, float, type(None)) for t in types)


#: The settings whose values are numbers: those whose property returns an
#: ``int`` or a ``float`` (or None). Read from the properties, so a numeric
#: key added with its property is in here (system check E005).
NUMERIC_SETTINGS: Final[frozenset[str]] = frozenset(
    name
    for name, member in vars(UIStreamSettings).items()
    if isinstance(member, property) and name in DEFAULTS and _is_number(get_type_hints(member.fget)["return"])
)

settings = UIStreamSettings()


def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting == "UISTREAM":
        settings.reload()


setting_changed.connect(_reload)
