"""System checks: misconfiguration surfaces at startup, each with a hint
(each id and its fix: docs/operations.md, "System checks").

| id     | what |
|--------|------|
| E001   | ``UISTREAM`` is not a dict, or has a key the app does not know |
| E002   | ``MODEL`` (or an entry of ``TOOLS``, or ``TOOL_APPROVAL``) cannot be imported |
| E003   | ``SDK_VERSION`` is not 5, 6 or 7 |
| E004   | ``ON_DISCONNECT`` is not "cancel" or "finish" |
| E014   | ``ON_OWNER_LOST`` is not "continue" or "interrupt" |
| E005   | a numeric setting (``conf.NUMERIC_SETTINGS``) is not a positive number |
| E006   | ``BROKER`` is not a valid broker setting |
| E007   | ``LOG_WRITER`` is not "auto", "thread" or "inline" |
| E008   | ``MODEL`` is unset and a routed chat endpoint has no model of its own |
| E009   | ``MODEL`` names neither a chat model nor a callable of no arguments returning one |
| E010   | a policy or history setting (``*_CLASSES``, ``THROTTLE_RATES``, a limit) is unusable |
| E011   | ``MODEL`` is a provider name (``"anthropic:…"``) that is malformed or whose API key is not set |
| E012   | ``LEASE_SECONDS`` is not more than twice ``HEARTBEAT_SECONDS`` |
| E013   | ``ALLOWED_MEDIA_TYPES`` is not a list of media types |
| E020   | ``EXECUTOR`` names no executor; "celery" or "tasks" without its engine or a broker of many processes |
| E022   | the "postgres" broker's ``DATABASE`` (default "default") is not a PostgreSQL database |
| E030   | ``USAGE_LIMITS`` holds something that is not a ``RunUsageLimit`` (or a dict of its fields) |
| E031   | ``BUDGETS`` is not ``{"day"|"month": {tokens, cost, reserve_tokens, reserve_cost}}`` of numbers |
| E032   | ``PRICES`` is not ``{model: {"input", "output"}}`` of numbers |
| E033   | ``HISTORY_STRATEGY`` cannot be imported or is not a ``HistoryStrategy`` |
| E021   | ``MCP_SERVERS`` is malformed, names a command that is not there, or the ``mcp`` SDK is not installed |
| E050   | ``RETENTION`` is not a dict of ``CHUNK_LOGS_DAYS`` and ``OLD_BRANCHES_DAYS`` (positive numbers or None) |
| W001   | ``GZipMiddleware`` is installed: it buffers streaming responses |
| W002   | the project has no ``ASGI_APPLICATION``: the chat views are async |
| W005   | ``runserver`` serves WSGI (no ``"daphne"`` first in ``INSTALLED_APPS``) |
| W006   | the Redis broker's ``ACTIVE_TTL`` lets a dead process's run expire before the sweeper finds it |
| W004   | ``MAX_REQUEST_BYTES`` can't carry one file of ``MAX_FILE_BYTES`` as base64 |
| W003   | the Redis or PostgreSQL broker cannot be reached (``check --deploy``) |
| W030   | a cost budget is set but ``PRICES`` is empty: every run costs 0 |
| W040   | anonymous chats are throttled by address and ``REST_FRAMEWORK["NUM_PROXIES"]`` is not set |
| W041   | anonymous chats are allowed with no throttle and no cap on a session's runs or storage |
| W050   | nothing is ever pruned: ``RETENTION`` sets no limit (``check --deploy``) |
"""

from __future__ import annotations

import asyncio
import re
import shutil
import sys
from collections.abc import Iterator
from typing import Any, Final

from django.conf import settings as django_settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.urls import URLPattern, URLResolver, get_resolver

from .conf import (
    DEFAULTS,
    LOG_WRITER_CHOICES,
    NUMERIC_SETTINGS,
    ON_DISCONNECT_CHOICES,
    ON_OWNER_LOST_CHOICES,
    SDK_VERSIONS,
    import_from_string,
    request_bytes_for,
    retention_problems,
)
from .conf import settings as uistream_settings
from .lifecycle.limits import load_usage_limits
from .live import BrokerConfigError, BrokerError, broker_from_config, ping

_GZIP = "django.middleware.gzip.GZipMiddleware"


@register(Tags.compatibility)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    user = getattr(django_settings, "UISTREAM", {})
    if not isinstance(user, dict):
        return [
            Error(
                "The UISTREAM setting must be a dict.",
                hint="Set UISTREAM = {...} with the keys listed in the README.",
                id="uistream_app.E001",
            )
        ]
    for key in sorted(set(user) - set(DEFAULTS)):
        errors.append(
            Error(
                f"UISTREAM has an unknown key {key!r}.",
                hint=f"Known keys: {', '.join(sorted(DEFAULTS))}.",
                id="uistream_app.E001",
            )
        )
    model = user.get("MODEL")
    if model is not None:
        errors.extend(_check_model_setting(model))
    tools = user.get("TOOLS", [])
    for tool in tools if isinstance(tools, (list, tuple)) else []:
        if isinstance(tool, str):
            try:
                import_from_string(tool, "UISTREAM['TOOLS']", entry=True)
            except ImproperlyConfigured as exc:
                errors.append(Error(str(exc), hint="Give the dotted path of a tool.", id="uistream_app.E002"))
    policy = user.get("TOOL_APPROVAL")
    if isinstance(policy, str):
        try:
            import_from_string(policy, "UISTREAM['TOOL_APPROVAL']")
        except ImproperlyConfigured as exc:
            errors.append(
                Error(
                    str(exc),
                    hint="Give the dotted path of an approval policy (a function, or a mapping of tool names).",
                    id="uistream_app.E002",
                )
            )
    if user.get("SDK_VERSION", 7) not in SDK_VERSIONS:
        errors.append(
            Error(
                f"UISTREAM['SDK_VERSION'] = {user['SDK_VERSION']!r} is not supported.",
                hint="Use 5, 6 or 7 (the major version of the client's `ai` package).",
                id="uistream_app.E003",
            )
        )
    if user.get("ON_DISCONNECT", "cancel") not in ON_DISCONNECT_CHOICES:
        errors.append(
            Error(
                f"UISTREAM['ON_DISCONNECT'] = {user['ON_DISCONNECT']!r} is not a policy.",
                hint='Use "cancel" (stop the model, store what was sent) or "finish".',
                id="uistream_app.E004",
            )
        )
    if user.get("ON_OWNER_LOST", DEFAULTS["ON_OWNER_LOST"]) not in ON_OWNER_LOST_CHOICES:
        errors.append(
            Error(
                f"UISTREAM['ON_OWNER_LOST'] = {user['ON_OWNER_LOST']!r} is not a policy.",
                hint='Use "interrupt" (the default: settle the run with what was sent) or "continue".',
                id="uistream_app.E014",
            )
        )
    if user.get("LOG_WRITER", DEFAULTS["LOG_WRITER"]) not in LOG_WRITER_CHOICES:
        errors.append(
            Error(
                f"UISTREAM['LOG_WRITER'] = {user['LOG_WRITER']!r} is not a way to write the log.",
                hint='Use "auto" (the default), "thread" or "inline".',
                id="uistream_app.E007",
            )
        )
    for key in sorted(NUMERIC_SETTINGS - _NUMBERS_CHECKED_ELSEWHERE):
        value = user.get(key, DEFAULTS[key])
        if value is None and DEFAULTS[key] is None:
            continue  # unset: derived (MAX_REQUEST_BYTES from MAX_FILE_BYTES)
        zero = key in _ZERO_ALLOWED
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (value == 0 and not zero):
            errors.append(
                Error(
                    f"UISTREAM[{key!r}] = {value!r} must be {'0 or ' if zero else ''}a positive number.",
                    hint=f"The default is {DEFAULTS[key]!r}.",
                    id="uistream_app.E005",
                )
            )
    errors.extend(_check_lease(user))
    errors.extend(_check_file_limits(user))
    errors.extend(
        Error(
            problem,
            hint='e.g. {"CHUNK_LOGS_DAYS": 30, "OLD_BRANCHES_DAYS": 90}; None (the default) keeps them forever.',
            id="uistream_app.E050",
        )
        for problem in retention_problems(user.get("RETENTION", DEFAULTS["RETENTION"]))
    )
    return errors


#: The owner caps: whole numbers of at least 1, or None (E010).
_COUNTS: Final = (
    "MAX_ACTIVE_RUNS_PER_USER",
    "MAX_ACTIVE_RUNS_PER_SESSION",
    "MAX_STORED_BYTES_PER_USER_PER_DAY",
    "MAX_STORED_BYTES_PER_SESSION_PER_DAY",
)
#: E005 holds every numeric setting to a positive number except these, whose
#: checks are stricter: SDK_VERSION is one of SDK_VERSIONS (E003); the counts
#: are whole numbers of at least 1, or None (E010).
_NUMBERS_CHECKED_ELSEWHERE: Final = frozenset(
    {"SDK_VERSION", "MAX_ACTIVE_RUNS_PER_OWNER", "HISTORY_MAX_MESSAGES", *_COUNTS}
)
#: Where 0 means something: SHUTDOWN_GRACE_SECONDS = 0 interrupts the runs at once.
_ZERO_ALLOWED: Final = frozenset({"SHUTDOWN_GRACE_SECONDS"})


def _check_file_limits(user: dict[str, Any]) -> list[CheckMessage]:
    """E013: ``ALLOWED_MEDIA_TYPES`` is not a list of media types; W004: a
    ``MAX_REQUEST_BYTES`` too small to carry one file of ``MAX_FILE_BYTES``
    as base64 (such a file would be refused as a body, 413 ``too_large``,
    never reaching the file's own limit)."""
    out: list[CheckMessage] = []
    types = user.get("ALLOWED_MEDIA_TYPES", DEFAULTS["ALLOWED_MEDIA_TYPES"])
    if not isinstance(types, (list, tuple)) or not all(isinstance(t, str) and "/" in t for t in types):
        out.append(
            Error(
                f"UISTREAM['ALLOWED_MEDIA_TYPES'] = {types!r} must be a list of media types.",
                hint='e.g. ["image/*", "application/pdf", "text/plain"] ("type/*" allows a whole major type).',
                id="uistream_app.E013",
            )
        )
    request, file = user.get("MAX_REQUEST_BYTES"), user.get("MAX_FILE_BYTES", DEFAULTS["MAX_FILE_BYTES"])
    if _number(request) and _number(file) and request < -(-file * 4 // 3):
        out.append(
            Warning(
                f"UISTREAM['MAX_REQUEST_BYTES'] = {request} can't carry one file of MAX_FILE_BYTES = {file} "
                "(a body sends it as base64: 4 bytes for every 3).",
                hint=f"Leave MAX_REQUEST_BYTES unset (derived: {request_bytes_for(int(file))}) or raise it.",
                id="uistream_app.W004",
            )
        )
    return out


_LEASE_KEYS: Final = ("HEARTBEAT_SECONDS", "LEASE_SECONDS")


def _check_lease(user: dict[str, Any]) -> list[CheckMessage]:
    """E012: a lease that one late heartbeat can outlast would have the
    sweeper settle runs that are alive."""
    heartbeat, lease = (user.get(key, DEFAULTS[key]) for key in _LEASE_KEYS)
    numbers = [v for v in (heartbeat, lease) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0]
    if len(numbers) < 2 or lease > 2 * heartbeat:  # E005 reports the rest
        return []
    return [
        Error(
            f"UISTREAM['LEASE_SECONDS'] = {lease!r} must be more than twice HEARTBEAT_SECONDS ({heartbeat!r}).",
            hint="A run whose heartbeat is late once would be settled as interrupted while it runs; "
            "the defaults are 5 and 20.",
            id="uistream_app.E012",
        )
    ]


def _check_model_setting(setting: Any) -> list[CheckMessage]:
    """E002 / E009 / E011 for a set ``MODEL``: ``hooks.model_setting_problem``,
    whose text a request that meets the same setting is answered with
    (daphne and uvicorn run no checks). A factory is inspected, not called
    (it may read keys or open clients): a required parameter or a return
    annotation without ``stream`` is E009. A provider-qualified name
    (``"anthropic:claude-…"``) is resolved: that reads the environment and
    sends nothing."""
    # At check time, not app loading (ready() imports this module): hooks
    # brings the request stack.
    from .hooks import model_setting_problem

    problem = model_setting_problem(setting)
    if problem is None:
        return []
    return [Error(problem.message, hint=problem.hint, id=problem.check_id)]


def _routed_views(resolver: URLResolver, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(route, view function) for every URL pattern, through includes."""
    for pattern in resolver.url_patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _routed_views(pattern, route)
        elif isinstance(pattern, URLPattern):
            yield route, pattern.callback


def _needs_model_setting(view: Any) -> bool:
    """Whether a routed view would read ``UISTREAM['MODEL']``: a ``ChatView``
    or ``AGUIView`` with no ``model`` (on the class or in ``as_view()``), no
    ``get_model`` of its own, and no ``agent``."""
    # When the check runs, not at app loading (ready() imports this module):
    # the views bring the whole request stack, and a project's hooks.
    from .hooks import ChatHooks
    from .transport.agui_views import AGUIView
    from .transport.chat_views import ChatView

    cls = getattr(view, "view_class", None)
    if not isinstance(cls, type) or not issubclass(cls, (ChatView, AGUIView)):
        return False
    initkwargs = getattr(view, "view_initkwargs", {})
    if initkwargs.get("model", cls.model) is not None or cls.get_model is not ChatHooks.get_model:
        return False
    agent = initkwargs.get("agent", cls.agent)
    return agent is None and cls.get_agent is ChatHooks.get_agent


@register(Tags.urls)
def check_routed_chat_models(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E008: without it, ``MODEL`` unset passes and the first chat POST is
    the 500 ``misconfigured`` (``get_model`` raises the same text)."""
    from .hooks import no_model_problem  # at check time, as _needs_model_setting

    user = getattr(django_settings, "UISTREAM", {})
    if not isinstance(user, dict) or user.get("MODEL") is not None:
        return []
    if not getattr(django_settings, "ROOT_URLCONF", None):
        return []
    try:
        routes = list(_routed_views(get_resolver()))
    except Exception:  # noqa: BLE001 - Django's own URL checks report a broken URLconf
        return []
    needing = [
        f"/{route} ({view.view_class.__module__}.{view.view_class.__qualname__})"
        for route, view in routes
        if _needs_model_setting(view)
    ]
    if not needing:
        return []
    problem = no_model_problem(needing)
    return [Error(problem.message, hint=problem.hint, id=problem.check_id)]


@register(Tags.compatibility)
def check_middleware(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if _GZIP in getattr(django_settings, "MIDDLEWARE", []):
        return [
            Warning(
                "GZipMiddleware compresses streaming responses in blocks, so chat "
                "chunks wait in its buffer instead of reaching the browser.",
                hint="Remove GZipMiddleware and compress at the reverse proxy, which can flush after every event.",
                id="uistream_app.W001",
            )
        ]
    return []


_RATE = re.compile(r"[0-9]+/(s|sec|m|min|h|hour|d|day)")


@register(Tags.compatibility)
def check_policies(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E010: policy classes that can't be imported, rates DRF can't read,
    limits that are not positive whole numbers. Each would otherwise be a
    500 on the first chat request."""
    user = getattr(django_settings, "UISTREAM", {})
    if not isinstance(user, dict):
        return []
    errors: list[CheckMessage] = []

    def error(message: str, hint: str) -> None:
        errors.append(Error(message, hint=hint, id="uistream_app.E010"))

    for key in ("AUTHENTICATION_CLASSES", "PERMISSION_CLASSES", "THROTTLE_CLASSES"):
        value = user.get(key, DEFAULTS[key])
        if not isinstance(value, (list, tuple)):
            error(f"UISTREAM[{key!r}] must be a list of classes or dotted paths.", f"The default is {DEFAULTS[key]!r}.")
            continue
        for item in value:
            if isinstance(item, str):
                try:
                    import_from_string(item, f"UISTREAM[{key!r}]", entry=True)
                except ImproperlyConfigured as exc:
                    error(str(exc), "Give a class's dotted path.")
    rates = user.get("THROTTLE_RATES", {})
    if not isinstance(rates, dict):
        error("UISTREAM['THROTTLE_RATES'] must be a dict of scope to rate.", 'For example {"chat": "5/min"}.')
    else:
        for scope, rate in rates.items():
            if rate is not None and not (isinstance(rate, str) and _RATE.fullmatch(rate)):
                error(
                    f"UISTREAM['THROTTLE_RATES'][{scope!r}] = {rate!r} is not a rate.",
                    'Write requests per period, as DRF does: "5/min", "100/hour", "1000/day".',
                )
    for key in ("MAX_ACTIVE_RUNS_PER_OWNER", "HISTORY_MAX_MESSAGES", *_COUNTS):
        value = user.get(key, DEFAULTS[key])
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            error(
                f"UISTREAM[{key!r}] = {value!r} must be a whole number of at least 1, or None.",
                f"The default is {DEFAULTS[key]!r}.",
            )
    return errors


@register(Tags.compatibility)
def check_broker(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    user = getattr(django_settings, "UISTREAM", {})
    config = user.get("BROKER", DEFAULTS["BROKER"]) if isinstance(user, dict) else DEFAULTS["BROKER"]
    try:
        broker = broker_from_config(config)
    except (BrokerConfigError, TypeError, ValueError, ImportError) as exc:
        return [
            Error(
                f"UISTREAM['BROKER'] is not a valid broker setting: {exc}",
                hint='Use {"BACKEND": "memory"}, {"BACKEND": "redis", "URL": "redis://127.0.0.1:6379/0"} or '
                '{"BACKEND": "postgres"}.',
                id="uistream_app.E006",
            )
        ]
    if isinstance(config, dict) and config.get("BACKEND") == "postgres" and "URL" not in config:
        return _check_postgres_database(config.get("DATABASE", "default"))
    ttl = getattr(broker, "active_ttl", None)  # the Redis broker's
    if isinstance(config, dict) and config.get("BACKEND") == "redis" and isinstance(ttl, float):
        return _check_redis_keys_outlive_the_sweep(user, ttl)
    return []


def _check_redis_keys_outlive_the_sweep(user: dict[str, Any], ttl: float) -> list[CheckMessage]:
    """W006: a dead process's run must still be in Redis when the sweeper
    comes for it. Its keys stop being refreshed (every third of
    ``ACTIVE_TTL``) when it dies, so they last at least two thirds of
    ``ACTIVE_TTL`` after; the sweeper finds the run within ``LEASE_SECONDS``
    plus one ``HEARTBEAT_SECONDS`` (its sweeps' period) after. Keys gone
    before that take with them the chunks its clients were sent and the log
    does not hold yet, and continuation (``ON_OWNER_LOST``) has nothing to
    go on from."""
    heartbeat, lease = (user.get(key, DEFAULTS[key]) for key in _LEASE_KEYS)
    if not all(_number(v) and v > 0 for v in (heartbeat, lease)):  # E005 reports these
        return []
    found_within = lease + heartbeat
    if ttl * 2 / 3 > found_within:
        return []
    return [
        Warning(
            f"UISTREAM['BROKER']['ACTIVE_TTL'] = {ttl!r} lets a dead process's run expire in Redis before the "
            f"sweeper finds it (within LEASE_SECONDS + HEARTBEAT_SECONDS = {found_within!r} s).",
            hint=f"Make ACTIVE_TTL more than {found_within * 1.5:g} (1.5 × that: its keys are refreshed every "
            "third of it), or shorten the lease; the defaults are 60, 20 and 5.",
            id="uistream_app.W006",
        )
    ]


def _check_postgres_database(alias: str) -> list[CheckMessage]:
    """E022: the PostgreSQL broker reads the chunk log and keeps its rows in
    the database ``DATABASE`` names, which must be a PostgreSQL one."""
    databases = getattr(django_settings, "DATABASES", {})
    engine = databases.get(alias, {}).get("ENGINE", "") if isinstance(databases, dict) else ""
    if "postgresql" in engine:
        return []
    what = f"is {engine!r}" if alias in databases else "is not in DATABASES"
    return [
        Error(
            f"UISTREAM['BROKER'] = 'postgres' needs a PostgreSQL database: DATABASES[{alias!r}] {what}.",
            hint="Run the project on PostgreSQL (DATABASES ENGINE 'django.db.backends.postgresql'), name its alias "
            "in UISTREAM['BROKER']['DATABASE'], or use the memory or Redis broker.",
            id="uistream_app.E022",
        )
    ]


@register(Tags.compatibility)
def check_executor(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E020: an executor that can't be used; runs on workers relay through
    the broker, so the "celery" and "tasks" executors need a broker of many
    processes, Redis or PostgreSQL (and their engine: Celery, or a ``TASKS``
    backend that takes the task)."""
    from .lifecycle.executors import CeleryRunner, WorkerRunner, executor_class  # at check time: the runner, store

    user = getattr(django_settings, "UISTREAM", {})
    if not isinstance(user, dict):
        return []
    value = user.get("EXECUTOR", DEFAULTS["EXECUTOR"])
    hint = (
        'Use "inprocess" (the default), "celery", "tasks" or the dotted path of a '
        "uistream_app.lifecycle.runner.Runner subclass."
    )
    try:
        cls = executor_class()
    except ImproperlyConfigured as exc:
        return [Error(str(exc), hint=hint, id="uistream_app.E020")]
    if not issubclass(cls, WorkerRunner):
        return []
    errors: list[CheckMessage] = []
    if issubclass(cls, CeleryRunner):
        try:  # the celery extra: whether it is installed is what is checked
            import celery  # noqa: F401
        except ImportError:
            errors.append(
                Error(
                    f"UISTREAM['EXECUTOR'] = {value!r} needs Celery, which is not installed.",
                    hint="pip install 'django-uistream[celery]'",
                    id="uistream_app.E020",
                )
            )
    else:
        try:
            cls.check_engine()
        except ImproperlyConfigured as exc:
            errors.append(
                Error(
                    str(exc),
                    hint="Name a backend of settings.TASKS that takes the task (its alias, queue and priority).",
                    id="uistream_app.E020",
                )
            )
    broker = user.get("BROKER", DEFAULTS["BROKER"])
    if not isinstance(broker, dict) or broker.get("BACKEND") not in ("redis", "postgres"):
        errors.append(
            Error(
                f"UISTREAM['EXECUTOR'] = {value!r} needs a broker of many processes (Redis or PostgreSQL): the "
                "worker publishes the run's chunks and the web processes relay them.",
                hint='Set UISTREAM["BROKER"] = {"BACKEND": "redis", "URL": "redis://…"} or {"BACKEND": "postgres"}.',
                id="uistream_app.E020",
            )
        )
    return errors


@register(Tags.compatibility)
def check_mcp_servers(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E021: ``MCP_SERVERS`` must parse (``lifecycle.mcp.parse_servers`` names the
    entry and key), its stdio commands must exist, and the SDK must be
    installed; otherwise the first request would find out."""
    from .lifecycle.mcp import (  # lifecycle/mcp.py is imported only where MCP_SERVERS is used
        EXTRA_HINT,
        MCPConfigError,
        parse_servers,
    )

    user = getattr(django_settings, "UISTREAM", {})
    if not isinstance(user, dict) or user.get("MCP_SERVERS") in (None, {}):
        return []
    hint = 'e.g. {"demo": {"command": "python", "args": ["server.py"]}, "web": {"url": "https://…/mcp"}}'
    try:
        servers = parse_servers(user["MCP_SERVERS"])
    except MCPConfigError as exc:
        return [Error(str(exc), hint=hint, id="uistream_app.E021")]
    errors: list[CheckMessage] = []
    for server in servers:
        if server.command is not None and shutil.which(server.command) is None:
            errors.append(
                Error(
                    f"UISTREAM['MCP_SERVERS'][{server.name!r}]['command'] = {server.command!r} is not an executable.",
                    hint="Give the server's program by absolute path, or one on PATH.",
                    id="uistream_app.E021",
                )
            )
    try:  # the mcp extra: whether it is installed is what is checked
        import mcp  # noqa: F401
    except ImportError:
        errors.append(
            Error(
                "UISTREAM['MCP_SERVERS'] needs the MCP SDK, which is not installed.",
                hint=EXTRA_HINT,
                id="uistream_app.E021",
            )
        )
    return errors


@register(Tags.compatibility, deploy=True)
def check_broker_reachable(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Only for a Redis or PostgreSQL broker, and only with ``--deploy``: a
    ping, so a deploy check says at once that resume and stop across
    processes will not work."""
    user = getattr(django_settings, "UISTREAM", {})
    config = user.get("BROKER") if isinstance(user, dict) else None
    if not isinstance(config, dict) or config.get("BACKEND") not in ("redis", "postgres"):
        return []
    name = "Redis" if config["BACKEND"] == "redis" else "PostgreSQL"
    try:
        asyncio.run(ping(config))
    except RuntimeError:
        return []  # inside a running event loop: cannot ping from here
    except BrokerError as exc:
        return [
            Warning(
                f"The {name} broker cannot be reached: {exc}",
                hint=f"Start {name} or fix UISTREAM['BROKER']; until then chats cannot start.",
                id="uistream_app.W003",
            )
        ]
    return []


@register(Tags.compatibility, deploy=True)
def check_retention(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W050, with ``--deploy`` only: every attempt is kept (a regenerate or
    an edit makes a new version, the older branch stays) and every run's
    chunk log too, so without ``RETENTION`` the tables only grow. A bad
    value is E050's to report."""
    try:
        retention = uistream_settings.RETENTION
    except ImproperlyConfigured:
        return []
    if retention.prunes:
        return []
    return [
        Warning(
            "Nothing is ever pruned: UISTREAM['RETENTION'] sets no limit, so every run's chunk log and every "
            "older version of a message (with its branch, runs and files) are kept forever.",
            hint='Set UISTREAM["RETENTION"] = {"CHUNK_LOGS_DAYS": 30, "OLD_BRANCHES_DAYS": 90} (days) and run '
            "`python manage.py uistream_prune` daily from cron (`--dry-run` says what it would delete).",
            id="uistream_app.W050",
        )
    ]


@register(Tags.compatibility)
def check_asgi(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if getattr(django_settings, "ASGI_APPLICATION", None) or "daphne" in django_settings.INSTALLED_APPS:
        return []
    return [
        Warning(
            "The uistream chat views are async and stream for as long as a model "
            "answers; served under WSGI each open chat holds a worker thread.",
            hint="Serve the project with an ASGI server (daphne, uvicorn) and set ASGI_APPLICATION.",
            id="uistream_app.W002",
        )
    ]


#: The apps whose ``runserver`` is Django's own, which serves WSGI.
_WSGI_RUNSERVERS: Final = frozenset({"django.core", "django.contrib.staticfiles"})


def _running_command() -> str | None:
    """The management command this process runs (``manage.py runserver``,
    ``django-admin runserver``, ``python -m django runserver``: the
    subcommand is always ``argv[1]``, as ``ManagementUtility`` reads it);
    None outside one (a server importing the project)."""
    return sys.argv[1] if len(sys.argv) > 1 else None


@register(Tags.compatibility)
def check_runserver_serves_asgi(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W005: ``runserver`` serving WSGI. Django's own ``runserver`` ignores
    ``ASGI_APPLICATION``; only daphne's (``"daphne"`` before
    ``django.contrib.staticfiles`` in ``INSTALLED_APPS``) serves ASGI. The
    check knows it runs for ``runserver`` from the command line
    (``_running_command``), so ``check``, ``migrate`` and a deploy served
    by uvicorn or daphne never see it; and which app's ``runserver`` that
    is from Django's command table. Silence it with
    ``SILENCED_SYSTEM_CHECKS = ["uistream_app.W005"]``."""
    from django.core.management import get_commands  # at check time: the table reads every app's commands

    if _running_command() != "runserver" or get_commands().get("runserver") not in _WSGI_RUNSERVERS:
        return []
    return [
        Warning(
            "runserver serves WSGI here: the chat views stream under WSGI, each open chat holding a thread "
            "for as long as it lasts (and the WebSocket transport is not served at all).",
            hint="Put \"daphne\" first in INSTALLED_APPS (pip install 'django-uistream[asgi]'): its runserver "
            "serves ASGI. Or serve the project with daphne or uvicorn.",
            id="uistream_app.W005",
        )
    ]


_BUDGET_KEYS = frozenset(("tokens", "cost", "reserve_tokens", "reserve_cost"))


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


@register(Tags.compatibility)
def check_usage_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``USAGE_LIMITS``, ``BUDGETS``, ``PRICES`` and ``HISTORY_STRATEGY``
    (docs/operations.md, "Usage limits and budgets", "History strategies"):
    a typo there would silently mean no limit, no budget or a free model."""
    from .history import load_strategy  # at check time, not app loading: it brings the models' rooms

    user = getattr(django_settings, "UISTREAM", {})
    if not isinstance(user, dict):
        return []  # E001
    errors: list[CheckMessage] = []
    try:
        load_usage_limits(user.get("USAGE_LIMITS") or ())
    except TypeError as exc:
        errors.append(Error(f"UISTREAM['USAGE_LIMITS']: {exc}", id="uistream_app.E030"))
    budgets = user.get("BUDGETS") or {}
    budget_shape = isinstance(budgets, dict) and all(
        period in ("day", "month")
        and isinstance(spec, dict)
        and set(spec) <= _BUDGET_KEYS
        and all(_number(v) for v in spec.values())
        for period, spec in budgets.items()
    )
    if not budget_shape:
        errors.append(
            Error(
                f"UISTREAM['BUDGETS'] = {budgets!r} is not a budget table.",
                hint='{"day": {"tokens": 200000}, "month": {"cost": 20.0}}: periods "day" and "month", '
                "keys tokens, cost, reserve_tokens, reserve_cost, numbers.",
                id="uistream_app.E031",
            )
        )
    prices = user.get("PRICES") or {}
    if not (
        isinstance(prices, dict)
        and all(
            isinstance(p, dict) and set(p) <= {"input", "output"} and all(_number(v) for v in p.values())
            for p in prices.values()
        )
    ):
        errors.append(
            Error(
                f"UISTREAM['PRICES'] = {prices!r} is not a price table.",
                hint='{"openai:gpt-4o": {"input": 2.5, "output": 10.0}}: per model, per million tokens.',
                id="uistream_app.E032",
            )
        )
    elif budget_shape and any("cost" in spec for spec in budgets.values()) and not prices:
        errors.append(
            Warning(
                "UISTREAM['BUDGETS'] sets a cost budget but UISTREAM['PRICES'] is empty: every run costs 0.",
                hint="Price the models your runs record (Run.model), per million input and output tokens.",
                id="uistream_app.W030",
            )
        )
    try:
        load_strategy(user.get("HISTORY_STRATEGY"))
    except ImproperlyConfigured as exc:
        errors.append(Error(str(exc), id="uistream_app.E033"))
    except TypeError as exc:
        errors.append(Error(f"UISTREAM['HISTORY_STRATEGY'] cannot be used: {exc}", id="uistream_app.E033"))
    return errors


def _throttle_classes(user: dict[str, Any]) -> list[type]:
    """The importable classes of ``THROTTLE_CLASSES`` (E010 reports the rest)."""
    value = user.get("THROTTLE_CLASSES", DEFAULTS["THROTTLE_CLASSES"])
    out: list[type] = []
    for item in value if isinstance(value, (list, tuple)) else ():
        try:
            cls = import_from_string(item, "THROTTLE_CLASSES", entry=True) if isinstance(item, str) else item
        except ImproperlyConfigured:
            continue
        if isinstance(cls, type):
            out.append(cls)
    return out


#: The session caps: with both off and no throttle, nothing bounds an anonymous visitor (W041).
_SESSION_CAPS: Final = ("MAX_ACTIVE_RUNS_PER_SESSION", "MAX_STORED_BYTES_PER_SESSION_PER_DAY")


@register(Tags.security)
def check_anonymous_throttles(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W040: a throttle that counts anonymous visitors by address (any of
    DRF's rate throttles: ``ChatRateThrottle``, ``AnonRateThrottle``…)
    with no word on the proxies in front (``REST_FRAMEWORK["NUM_PROXIES"]``
    unset). uistream's throttles then count the peer's address, which
    behind a proxy is the proxy's, one counter for every visitor; DRF's own
    believe ``X-Forwarded-For``, which the client writes. W041: anonymous
    chats with no throttle at all and the session caps off."""
    from rest_framework.throttling import SimpleRateThrottle  # at check time: DRF reads its settings

    from .policies import ChatRateThrottle  # at check time: it brings the models

    user = getattr(django_settings, "UISTREAM", {})
    if not isinstance(user, dict) or not user.get("ALLOW_ANONYMOUS", DEFAULTS["ALLOW_ANONYMOUS"]):
        return []
    throttles = _throttle_classes(user)
    out: list[CheckMessage] = []
    by_address = [cls for cls in throttles if issubclass(cls, SimpleRateThrottle)]
    rest_framework = getattr(django_settings, "REST_FRAMEWORK", {})
    if by_address and not (isinstance(rest_framework, dict) and "NUM_PROXIES" in rest_framework):
        believing = [cls.__name__ for cls in by_address if cls.get_ident is SimpleRateThrottle.get_ident]
        if believing:
            what = (
                f"{', '.join(believing)} (DRF's get_ident) believe the X-Forwarded-For header, which any client "
                "writes, so a visitor over its rate starts a new count with a header of its own"
            )
        else:
            what = (
                "they count the peer's address (REMOTE_ADDR): behind a reverse proxy that is the proxy's, "
                "one counter for every visitor"
            )
        out.append(
            Warning(
                "Anonymous chats are throttled by client address and REST_FRAMEWORK['NUM_PROXIES'] is not set: "
                f"{what}.",
                hint="Set REST_FRAMEWORK = {'NUM_PROXIES': N}, the number of proxies in front of the server that "
                "append to X-Forwarded-For (0: none, the peer's address is the client's).",
                id="uistream_app.W040",
            )
        )
    elif not throttles and all(user.get(key, DEFAULTS[key]) is None for key in _SESSION_CAPS):
        out.append(
            Warning(
                "Anonymous chats are allowed with no throttle and no cap: one visitor may start and store "
                "without bound.",
                hint=f"List {ChatRateThrottle.__module__}.ChatRateThrottle in UISTREAM['THROTTLE_CLASSES'] with a "
                "'chat' rate, or leave MAX_ACTIVE_RUNS_PER_SESSION and MAX_STORED_BYTES_PER_SESSION_PER_DAY at "
                "their defaults.",
                id="uistream_app.W041",
            )
        )
    return out
