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

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple, NoReturn, TypeVar, get_args, get_type_hints

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

__all__ = [
    "DEFAULTS",
    "DESCRIPTIONS",
    "NUMERIC_SETTINGS",
    "RETENTION_KEYS",
    "Retention",
    "UIStreamSettings",
    "import_from_string",
    "perform_import",
    "request_bytes_for",
    "retention_problems",
    "settings",
]

#: Every key of ``UISTREAM`` and its default; what each means is in
#: ``DESCRIPTIONS`` below.
DEFAULTS: Final[dict[str, Any]] = {
    "MODEL": None,
    "TOOLS": [],
    "TOOL_APPROVAL": None,
    "MAX_STEPS": 8,
    "SDK_VERSION": 7,
    "ERROR_TEXT": "An error occurred.",
    "EXPOSE_ERRORS": False,
    "KEEPALIVE_SECONDS": 15,
    "ON_DISCONNECT": "cancel",
    "ALLOW_ANONYMOUS": False,
    "MAX_REQUEST_BYTES": None,
    "MAX_FILE_BYTES": 10 * 1024 * 1024,
    "ALLOWED_MEDIA_TYPES": ["image/*", "application/pdf", "text/plain"],
    "BROKER": {"BACKEND": "memory"},
    "FLUSH_EVERY_MS": 250,
    "HEARTBEAT_SECONDS": 5,
    "LEASE_SECONDS": 20,
    "ON_OWNER_LOST": "interrupt",
    "LOG_WRITER": "auto",
    "SYNC_THREADS": 4,
    "AUTHENTICATION_CLASSES": ["uistream_app.policies.DjangoSessionAuthentication"],
    "PERMISSION_CLASSES": ["uistream_app.policies.AllowAnonymousSessions"],
    "THROTTLE_CLASSES": [],
    "THROTTLE_RATES": {},
    "MAX_ACTIVE_RUNS_PER_OWNER": None,
    "MAX_ACTIVE_RUNS_PER_USER": 8,
    "MAX_ACTIVE_RUNS_PER_SESSION": 2,
    "MAX_STORED_BYTES_PER_USER_PER_DAY": 200 * 1024 * 1024,
    "MAX_STORED_BYTES_PER_SESSION_PER_DAY": 20 * 1024 * 1024,
    "HISTORY_MAX_MESSAGES": 100,
    "FEEDBACK_REASONS": ["inaccurate", "unhelpful", "incomplete", "harmful", "other"],
    "SCHEMA_PUBLIC": False,
    "SHUTDOWN_GRACE_SECONDS": 5,
    "EXECUTOR": "inprocess",
    "USAGE_LIMITS": [],
    "BUDGETS": {},
    "PRICES": {},
    "HISTORY_STRATEGY": None,
    "MCP_SERVERS": {},
    "MESSAGE_METADATA": False,
    "TRACE_CONTENT": False,
    "RETENTION": {"CHUNK_LOGS_DAYS": None, "OLD_BRANCHES_DAYS": None},
}

#: What each key of ``DEFAULTS`` means, in Markdown, one table cell each: the
#: settings reference (docs/reference/settings.md, and the documentation
#: site's page) is generated from it and ``DEFAULTS``, so the two are the one
#: place a setting is described. Links are written from the repository's
#: root (``docs/operations.md#brokers``), as README.md writes them.
DESCRIPTIONS: Final[Mapping[str, str]] = {
    "MODEL": (
        "The chat model of `ChatView` / `AGUIView` when the view sets none: a provider name "
        '(`"anthropic:claude-…"`, `"openai-responses:…"`, `"openai:…"`, `"openai-compatible:<base_url>#<model>"`; '
        "a missing API key is check `E011`), or a dotted path (or the object itself) of a model class, a model "
        "instance, or a function returning a model. A class or function is called once per request. A model is "
        "anything with `stream(messages, tools, options)` (`uistream_app.runs.ChatModel`). `None`: every routed "
        "chat view must bring its own `model` or `get_model()` (check `E008`)."
    ),
    "TOOLS": (
        "The tools the model may call when the view sets none: `Tool` objects, plain functions, or dotted paths "
        "to either."
    ),
    "TOOL_APPROVAL": (
        "The runs' approval policy (ai@7's `toolApproval`) when the view sets none (`tool_approval`): a function "
        "of a call's `ToolContext`, a mapping of tool names to statuses or functions, or a dotted path to either "
        "(see [Approval policies](docs/operations.md#approval-policies)). It wins over each tool's "
        "`requires_approval`."
    ),
    "MAX_STEPS": (
        "Model calls per run. A run whose every step called a tool ends after this many with finish reason `length`."
    ),
    "SDK_VERSION": (
        "The `ai` major version (5, 6 or 7) whose stream dialect a response speaks, unless the request says "
        "otherwise (`?v=5` / `?v=6`, or the `x-uistream-sdk-version` header)."
    ),
    "ERROR_TEXT": (
        "What the wire says when something fails after the headers went out (an `error` chunk, AG-UI "
        "`RUN_ERROR`, a failed tool's result). The detail goes to the log and the `Run` row."
    ),
    "EXPOSE_ERRORS": (
        "Put the real exception text on the wire instead of `ERROR_TEXT`. Development only: an exception may "
        "quote secrets."
    ),
    "KEEPALIVE_SECONDS": (
        "After this much silence a stream sends an SSE comment, so proxies and load balancers with idle "
        "timeouts keep the connection open."
    ),
    "ON_DISCONNECT": (
        'When the client goes away mid-answer: `"cancel"` stops the model and stores the run as `cancelled` '
        'with what was sent; `"finish"` lets the run complete in the background, so a reload with '
        "`useChat({ resume: true })` picks the answer up. A stop request (`POST chat/<id>/stop`) always stops, "
        "as `stopped`."
    ),
    "ALLOW_ANONYMOUS": (
        "Anonymous visitors may chat; their conversations are owned by their session (created by their first "
        "valid request). Off, an anonymous request is 401 `not_authenticated`, whose message names this setting "
        "(or the view's own `allow_anonymous` where that is the switch); an anonymous socket is accepted and each "
        "send gets that `error` frame."
    ),
    "MAX_REQUEST_BYTES": (
        "The largest request body (HTTP: 413 JSON, see [Body limits](docs/operations.md#body-limits)) or "
        "WebSocket frame. `None`: derived from `MAX_FILE_BYTES` (`request_bytes_for`), room for three files of "
        "that size in base64 plus 1 MiB (42,991,618 bytes, about 41 MiB, for 10 MiB files), since useChat "
        "resends the earlier messages' files. A set value too small for one file in base64 is `W004`."
    ),
    "MAX_FILE_BYTES": (
        "The largest file a user may attach (its decoded bytes): 413 `file_too_large` naming the part, nothing "
        "stored (see [Files](docs/operations.md#files))."
    ),
    "ALLOWED_MEDIA_TYPES": (
        "The media types a user may attach (`type/*`: a whole major type); any other file part is 415 "
        "`unsupported_media_type`, nothing stored (`E013` when not a list of media types)."
    ),
    "BROKER": (
        'The live-run broker: `{"BACKEND": "memory"}` for one process, `{"BACKEND": "redis", "URL": …}` for '
        "several (see [Brokers](docs/operations.md#brokers); check `E006`)."
    ),
    "FLUSH_EVERY_MS": (
        "The longest a sent chunk waits before the log writer stores it. Step and run ends are stored at once."
    ),
    "HEARTBEAT_SECONDS": (
        "How often a serving process renews the lease (`Run.heartbeat_at`) of the runs it executes. See "
        "[Leases and the sweeper](docs/operations.md#leases-and-the-sweeper)."
    ),
    "LEASE_SECONDS": (
        "A `running` run whose heartbeat is older than this lost its process: the sweeper settles it "
        "`interrupted`. More than twice `HEARTBEAT_SECONDS` (`E012`)."
    ),
    "ON_OWNER_LOST": (
        "What the process that finds a run whose own process is gone (its lease ran out) does with it: "
        '`"interrupt"` settles it `interrupted` with what was sent; `"continue"` goes on with it, its completed '
        "steps kept and the half-done one dropped (`reset-step`) and run again, so the answer finishes "
        '(docs/operations.md, "Continuing a run whose process is gone"). An agent adapter\'s run is interrupted '
        "either way (`E014`)."
    ),
    "LOG_WRITER": (
        'Where the chunk log is written (see [The log writer](docs/operations.md#the-log-writer)): `"thread"` '
        '(one writer thread per process, with its own database connection), `"inline"` (the thread-sensitive '
        'executor of the code that started the run, as the ORM\'s own async calls), or `"auto"`: inline for a '
        "run whose rows were created inside a transaction other connections can't see yet (a `TestCase`'s), "
        "else the thread (`E007`)."
    ),
    "SYNC_THREADS": (
        "The threads (lanes) that requests in an application wrapped by `uistream_app.asgi.bounded_threads`, "
        "and runs, share for their sync work (ORM, sessions), instead of one per request for as long as its "
        "stream (see [Threads](docs/operations.md#threads))."
    ),
    "AUTHENTICATION_CLASSES": (
        "Authentication classes of the stream endpoints, in DRF's shape (`authenticate(request)`), classes or "
        "dotted paths: the user Django's `AuthenticationMiddleware` found, by default. A view's "
        "`authentication_classes` wins. CSRF is checked before them for every unsafe request except one with "
        "no session cookie that sends an `Authorization` header."
    ),
    "PERMISSION_CLASSES": (
        "Permission classes (`has_permission(request, view)`): by default a signed-in user, or anyone where "
        "`ALLOW_ANONYMOUS`; e.g. DRF's `IsAuthenticated`. A refusal is 401 when nobody was authenticated, else "
        "403. The WebSocket runs them on each frame. A view's `permission_classes` wins."
    ),
    "THROTTLE_CLASSES": (
        "Throttle classes of the requests that start runs (useChat POST, WebSocket send, AG-UI run): "
        "`ChatRateThrottle` (scope `chat`, per user, or per address for anonymous visitors), "
        "`MaxActiveRunsThrottle`, `DailyBudget` / `MonthlyBudget`, DRF's own. 429 JSON with `Retry-After`; an "
        "`error` frame with code `throttled` on the WebSocket. They count in Django's default cache: several "
        "processes need a shared cache."
    ),
    "THROTTLE_RATES": (
        'Rates by scope, as DRF writes them (`{"chat": "5/min"}`); a scope missing here falls back to DRF\'s '
        "`DEFAULT_THROTTLE_RATES`, and no rate at all means no limit."
    ),
    "MAX_ACTIVE_RUNS_PER_OWNER": (
        "With `MaxActiveRunsThrottle`: how many runs one owner may have streaming at once (counted from the "
        "`Run` rows still `running`); `None`: no cap."
    ),
    "MAX_ACTIVE_RUNS_PER_USER": (
        "How many runs one signed-in user may have running at once, across all their chats and every transport "
        "(counted from the `Run` rows still `running`, the new one included): a turn past it is 429 `throttled`, "
        "nothing written (see [Owner caps](docs/operations.md#owner-caps)). On by default, whatever "
        "`THROTTLE_CLASSES` holds; `None`: no cap."
    ),
    "MAX_ACTIVE_RUNS_PER_SESSION": ("`MAX_ACTIVE_RUNS_PER_USER` for an anonymous visitor's session. `None`: no cap."),
    "MAX_STORED_BYTES_PER_USER_PER_DAY": (
        "How many bytes one signed-in user's turns may store per calendar day (`TIME_ZONE`): the submitted "
        "messages' parts as JSON and their files (`Run.stored_bytes`). A turn that would pass it is 429 "
        "`budget_exceeded` with `Retry-After` the seconds until midnight, nothing written. `None`: no cap."
    ),
    "MAX_STORED_BYTES_PER_SESSION_PER_DAY": (
        "`MAX_STORED_BYTES_PER_USER_PER_DAY` for an anonymous visitor's session (20 MiB: two files of the "
        "default `MAX_FILE_BYTES`). `None`: no cap."
    ),
    "HISTORY_MAX_MESSAGES": (
        "The stored messages a turn's model sees: the last N, starting at a user message (whole turns; a view's "
        "`history_max_messages` or `get_history()` wins); `None` for all."
    ),
    "FEEDBACK_REASONS": (
        "The reasons a user may give with feedback on an answer "
        "(`POST conversations/<id>/messages/<message id>/feedback`'s `reason`; listed at "
        "`conversations/feedback-reasons`): short codes, shown as they are. An empty list: no reason is taken."
    ),
    "SCHEMA_PUBLIC": (
        "Anyone may read the OpenAPI schema at `schema/`. By default only staff may; anyone else gets DRF's 403 (JSON)."
    ),
    "SHUTDOWN_GRACE_SECONDS": (
        "On SIGTERM, how long the runs of the process may go on to finish before they are interrupted (see "
        "[Shutdown](docs/operations.md#shutdown)); `0`: interrupt at once."
    ),
    "EXECUTOR": (
        'Where runs execute (see [Executors](docs/operations.md#executors)): `"inprocess"` (the web process '
        'that took the request), `"celery"` (Celery workers; needs the Redis broker), or the dotted path of a '
        "`uistream_app.lifecycle.runner.Runner` subclass (`E020`)."
    ),
    "USAGE_LIMITS": (
        "What one run may spend: `RunUsageLimit` objects (or dicts of their fields: `input_tokens`, "
        "`output_tokens`, `total_tokens`, `tool_calls`, `wall_seconds`); a view's `usage_limits` wins. A run "
        "over it ends with the in-band error `usage_limit`. See "
        "[Usage limits and budgets](docs/operations.md#usage-limits-and-budgets)."
    ),
    "BUDGETS": (
        "What one owner may spend per period, read by `DailyBudget` / `MonthlyBudget` in `THROTTLE_CLASSES` "
        '(429 with when it resets): `{"day": {"tokens": 200000}, "month": {"cost": 20.0, "reserve_cost": 0.05}}` '
        "(`E031`)."
    ),
    "PRICES": (
        "Prices per model name (as `Run.model` records it), per million tokens: "
        '`{"openai:gpt-4o": {"input": 2.5, "output": 10.0}}`; they turn `Run.usage` into cost. A model with no '
        "price costs 0 (`E032`, and `W030` for a cost budget with no prices)."
    ),
    "HISTORY_STRATEGY": (
        "How a turn's history is chosen: a `uistream_app.history` strategy (`AllMessages`, `LastMessages`, "
        "`TokenBudget`, `SummarizeOlder`), its class, or a dotted path; a view's `history_strategy` wins; "
        "`None`: `LastMessages(HISTORY_MAX_MESSAGES)`. See "
        "[History strategies](docs/operations.md#history-strategies)."
    ),
    "MCP_SERVERS": (
        'MCP servers whose tools join every chat\'s tools as `<server>__<tool>`, by name: `{"demo": {"command": '
        '…, "args": […]}}` (stdio) or `{"url": …}` (streamable HTTP) (see '
        "[MCP servers](docs/operations.md#mcp-servers)); needs `django-uistream[mcp]` (check `E021`)."
    ),
    "MESSAGE_METADATA": (
        "Answers carry message metadata as the AI SDK's `messageMetadata` option puts it: the model and "
        "`createdAt` on `start` (under the view's `get_message_metadata()`), usage, model and timings on "
        "`finish` (see [Message metadata](docs/protocols.md#message-metadata))."
    ),
    "TRACE_CONTENT": (
        "Whether the OpenTelemetry spans of tool calls carry their arguments and results "
        "(`gen_ai.tool.call.arguments` / `.result`), which may hold personal data (`django-uistream[otel]`; see "
        "[Tracing](docs/operations.md#tracing))."
    ),
    "RETENTION": (
        "How long `manage.py uistream_prune` keeps what piles up, in days: `CHUNK_LOGS_DAYS`, the chunk logs of "
        "runs that ended longer ago (the `ChunkBatch` rows; the run and its message stay); `OLD_BRANCHES_DAYS`, "
        "the messages off the current branch (older versions of regenerated answers and edited questions, what "
        "followed them, their runs and files). `None`: kept forever. Whatever feedback marks is kept, and a "
        "`running` run is never touched (see "
        "[Feedback, attempts and retention](docs/operations.md#feedback-attempts-and-retention); `E050`, and "
        "`W050` under `check --deploy` while both are `None`)."
    ),
}

LOG_WRITER_CHOICES: Final = ("auto", "thread", "inline")

ON_DISCONNECT_CHOICES: Final = ("cancel", "finish")
ON_OWNER_LOST_CHOICES: Final = ("continue", "interrupt")
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


#: The keys of ``RETENTION``, each a number of days or None (kept forever).
RETENTION_KEYS: Final = ("CHUNK_LOGS_DAYS", "OLD_BRANCHES_DAYS")


class Retention(NamedTuple):
    """``UISTREAM["RETENTION"]``, typed: how many days ``uistream_prune``
    keeps runs' chunk logs and the messages off the current branch (None:
    forever). A named tuple, not a dataclass: docs/mkdocs_hooks.py reads
    this module on its own, outside ``sys.modules``, where a dataclass
    can't resolve its annotations."""

    chunk_logs_days: float | None = None
    old_branches_days: float | None = None

    @property
    def prunes(self) -> bool:
        """Whether anything is ever pruned (check W050 says when not)."""
        return self.chunk_logs_days is not None or self.old_branches_days is not None


def retention_problems(value: object) -> list[str]:
    """What is wrong with a ``RETENTION`` value, one sentence each (empty:
    nothing): the text of check E050 and of the ``ImproperlyConfigured``
    that ``settings.RETENTION`` raises, so a command run where no checks
    ran says the same."""
    if not isinstance(value, Mapping):
        return [f"UISTREAM['RETENTION'] = {value!r} must be a dict of {', '.join(RETENTION_KEYS)}."]
    problems = [
        f"UISTREAM['RETENTION'] has an unknown key {key!r}." for key in sorted(set(value) - set(RETENTION_KEYS))
    ]
    for key in RETENTION_KEYS:
        days = value.get(key)
        if days is not None and (isinstance(days, bool) or not isinstance(days, int | float) or not days > 0):
            problems.append(f"UISTREAM['RETENTION'][{key!r}] = {days!r} must be a positive number of days, or None.")
    return problems


_T = TypeVar("_T")


class UIStreamSettings:
    """``settings.UISTREAM`` merged over ``DEFAULTS``, one typed property per
    key (corsheaders' ``conf.Settings``), so callers never cast. The raw
    values are cached until ``setting_changed``; each property turns its
    value into its type on every read (so a lazy ``ERROR_TEXT`` is
    translated for the request that reads it)."""

    def __init__(self) -> None:
        self._cache: dict[str, Any] = {}
        self._derived: dict[tuple[str, Callable[[Any], Any]], Any] = {}

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

    def derived(self, name: str, make: Callable[[Any], _T]) -> _T:
        """``make`` of the setting ``name``'s raw value, made once until the
        setting changes (what a request would otherwise parse again each
        time: the MCP servers, the broker's key). An exception is not kept."""
        key = (name, make)
        try:
            value: _T = self._derived[key]
        except KeyError:
            value = self._derived[key] = make(self._get(name))
        return value

    def reload(self) -> None:
        self._cache.clear()
        self._derived.clear()

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
    def ON_OWNER_LOST(self) -> str:
        """One of ``ON_OWNER_LOST_CHOICES`` (check E014)."""
        return str(self._get("ON_OWNER_LOST"))

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
    def FEEDBACK_REASONS(self) -> Sequence[str]:
        value: Sequence[str] = self._get("FEEDBACK_REASONS") or ()
        return tuple(str(reason) for reason in value)

    @property
    def MAX_ACTIVE_RUNS_PER_OWNER(self) -> int | None:
        value = self._get("MAX_ACTIVE_RUNS_PER_OWNER")
        return None if value is None else int(value)

    @property
    def MAX_ACTIVE_RUNS_PER_USER(self) -> int | None:
        return self._count("MAX_ACTIVE_RUNS_PER_USER")

    @property
    def MAX_ACTIVE_RUNS_PER_SESSION(self) -> int | None:
        return self._count("MAX_ACTIVE_RUNS_PER_SESSION")

    @property
    def MAX_STORED_BYTES_PER_USER_PER_DAY(self) -> int | None:
        return self._count("MAX_STORED_BYTES_PER_USER_PER_DAY")

    @property
    def MAX_STORED_BYTES_PER_SESSION_PER_DAY(self) -> int | None:
        return self._count("MAX_STORED_BYTES_PER_SESSION_PER_DAY")

    def _count(self, name: str) -> int | None:
        value = self._get(name)
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

    # -- what is kept -------------------------------------------------------------

    @property
    def RETENTION(self) -> Retention:
        """``ImproperlyConfigured`` naming the key for a bad value (check E050)."""
        return self.derived("RETENTION", _retention)


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


def _retention(value: object) -> Retention:
    if value is None:
        value = {}
    problems = retention_problems(value)
    if problems:
        raise ImproperlyConfigured(" ".join(problems))
    assert isinstance(value, Mapping)
    days = {key: None if value.get(key) is None else float(value[key]) for key in RETENTION_KEYS}
    return Retention(chunk_logs_days=days["CHUNK_LOGS_DAYS"], old_branches_days=days["OLD_BRANCHES_DAYS"])


settings = UIStreamSettings()


def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting == "UISTREAM":
        settings.reload()


setting_changed.connect(_reload)
