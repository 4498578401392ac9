"""Settings of the uistream demo: runs offline on SQLite out of the box.

Environment switches: ``DATABASE_URL`` (postgres://user@host:port/name),
``REDIS_URL`` (the Redis live-run broker), ``UISTREAM_DEMO_EXECUTOR``
(``celery``: runs execute on Celery workers, with ``REDIS_URL`` as
Celery's broker too; see demo_project/celery.py),
``UISTREAM_DEMO_ON_OWNER_LOST`` (``continue`` / ``interrupt``: what becomes
of a run whose process died), ``OPENAI_MODEL`` /
``OPENAI_API_KEY`` / ``OPENAI_API`` / ``OPENAI_BASE_URL`` (a real OpenAI or
OpenAI-compatible model), ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_MODEL`` (a
real Claude model), ``DJANGO_DEBUG``, ``DJANGO_SECRET_KEY``,
``DJANGO_ALLOWED_HOSTS``, ``OTEL_EXPORTER_OTLP_ENDPOINT`` (traces to an
OpenTelemetry collector over OTLP/HTTP, service ``uistream-demo``).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

#: The key of the development configuration. It is public (it is in this
#: file), so anyone can sign a session cookie or a password reset link with
#: it: it is only used with DEBUG on.
DEVELOPMENT_SECRET_KEY = "uistream-demo-insecure-key-change-me"

# The demo starts as a development configuration: DEBUG on (tracebacks and
# the URL patterns on error pages) and the public key. DJANGO_DEBUG=0 turns
# DEBUG off, and then the key must come from the environment: the settings
# refuse to load without one rather than sign with the public key.
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
if os.environ.get("DJANGO_SECRET_KEY"):
    SECRET_KEY = os.environ["DJANGO_SECRET_KEY"]
elif DEBUG:
    SECRET_KEY = DEVELOPMENT_SECRET_KEY
else:
    raise ImproperlyConfigured(
        "DJANGO_DEBUG=0 needs DJANGO_SECRET_KEY: set it to a long random value of your own "
        "(python -c 'import secrets; print(secrets.token_urlsafe(50))')"
    )
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",")

INSTALLED_APPS = [
    # daphne first: `runserver` then serves ASGI, which streaming needs.
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "uistream_app",
]

# Django's seven, run on the event loop under ASGI (uistream_app.middleware):
# no hop to a thread unless the work may block.
MIDDLEWARE = [
    "uistream_app.middleware.SecurityMiddleware",
    "uistream_app.middleware.SessionMiddleware",
    "uistream_app.middleware.CommonMiddleware",
    "uistream_app.middleware.CsrfViewMiddleware",
    "uistream_app.middleware.AuthenticationMiddleware",
    "uistream_app.middleware.MessageMiddleware",
    "uistream_app.middleware.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "demo_project.urls"
ASGI_APPLICATION = "demo_project.asgi.application"
WSGI_APPLICATION = "demo_project.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # The demo's chat page (demo_project/templates/demo/index.html).
        "DIRS": [BASE_DIR / "demo_project" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


#: The options of every SQLite database of the demo, the default file and a
#: ``sqlite:///`` DATABASE_URL alike. WAL and immediate transactions: many
#: streams write their logs at once (without them a burst of new chats fails
#: with "database is locked"); the timeout lets a writer wait its turn.
SQLITE_OPTIONS: dict[str, object] = {
    "timeout": 20,
    "transaction_mode": "IMMEDIATE",
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}


def _database_from_url(url: str) -> dict[str, object]:
    parts = urlsplit(url)
    engines = {
        "postgres": "django.db.backends.postgresql",
        "postgresql": "django.db.backends.postgresql",
        "sqlite": "django.db.backends.sqlite3",
    }
    if parts.scheme not in engines:
        raise ValueError(f"DATABASE_URL scheme {parts.scheme!r} is not one of {sorted(engines)}")
    if parts.scheme == "sqlite":
        # sqlite:///relative.db, sqlite:////absolute/path.db
        return {
            "ENGINE": engines["sqlite"],
            "NAME": unquote(parts.path[1:]) or ":memory:",
            "OPTIONS": dict(SQLITE_OPTIONS),
        }
    return {
        "ENGINE": engines[parts.scheme],
        "NAME": unquote(parts.path.lstrip("/")),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
    }


if os.environ.get("DATABASE_URL"):
    DATABASES = {"default": _database_from_url(os.environ["DATABASE_URL"])}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": BASE_DIR / "db.sqlite3",
            "OPTIONS": dict(SQLITE_OPTIONS),
        }
    }
# Persistent connections: uistream's lanes (uistream_app.asgi.bounded_threads)
# bound the threads that hold one, so a connection is reused by the next
# request of its lane instead of opened and closed for every request
# (docs/operations.md, "Threads"). UISTREAM_DEMO_CONN_MAX_AGE=0 closes each
# at the end of its request, Django's default.
DATABASES["default"]["CONN_MAX_AGE"] = int(os.environ.get("UISTREAM_DEMO_CONN_MAX_AGE", "60"))
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True

AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# Where default_storage keeps the files users attach (uistream_app.lifecycle.attachments);
# a project may configure any storage backend in STORAGES["default"].
MEDIA_ROOT = os.environ.get("UISTREAM_MEDIA_ROOT") or str(BASE_DIR / "media")
# The built chat page (frontend/ → demo_project/static/demo/, by scripts/setup;
# not in git). Listed only once built: a missing directory is a warning
# (staticfiles.W004) at every command.
_BUILT_PAGE = BASE_DIR / "demo_project" / "static"
STATICFILES_DIRS = [_BUILT_PAGE] if _BUILT_PAGE.is_dir() else []
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The title of the OpenAPI schema of the conversations API (uistream_app.api)
# at /api/schema/. The API needs no REST_FRAMEWORK setting: its views set
# their schema class, renderers and the rest themselves.
SPECTACULAR_SETTINGS = {
    "TITLE": "uistream",
    "DESCRIPTION": "Conversations, their messages as UIMessages, and stored runs with their transcripts.",
    "VERSION": "1",
}

#: The Claude model the demo uses when ANTHROPIC_API_KEY is set and
#: ANTHROPIC_MODEL is not.
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-5"


def _demo_model() -> str:
    """``UISTREAM["MODEL"]`` from the environment. ``OPENAI_MODEL`` is the
    explicit switch, so it wins over an Anthropic key: with
    ``OPENAI_API_KEY`` it names the OpenAI model (``OPENAI_API=responses``
    for the Responses API, else Chat Completions; ``OPENAI_BASE_URL`` for
    another server); without a key, a keyless OpenAI-compatible server
    (``OPENAI_BASE_URL``: Ollama, vLLM…) through ``make_model``. Else
    ``ANTHROPIC_API_KEY`` picks Claude (``ANTHROPIC_MODEL``), and with
    neither the offline demo model answers."""
    openai_model = os.environ.get("OPENAI_MODEL")
    if openai_model and os.environ.get("OPENAI_API_KEY"):
        api = os.environ.get("OPENAI_API", "chat").strip().lower()
        return ("openai-responses:" if api == "responses" else "openai:") + openai_model
    if not openai_model and os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic:" + (os.environ.get("ANTHROPIC_MODEL") or DEFAULT_ANTHROPIC_MODEL)
    return "demo_project.demo_model.make_model"


UISTREAM: dict[str, object] = {
    # A provider name ("anthropic:claude-…", "openai:…") when a key is set,
    # else the offline demo model (see _demo_model).
    "MODEL": _demo_model(),
    "TOOLS": [
        "demo_project.demo_model.get_weather",
        "demo_project.demo_model.calculate",
        "demo_project.demo_model.send_email",
        "demo_project.demo_model.research",
    ],
    # Approves email to trusted.test and denies email to blocked.test by
    # itself; everything else asks the person (every transport: HTTP, WS, AG-UI).
    "TOOL_APPROVAL": "demo_project.demo_model.email_policy",
    # The demo page works without a login: visitors own chats by session.
    "ALLOW_ANONYMOUS": True,
    # A reload in the middle of an answer drops its connection: the answer
    # goes on and the page resumes it (useChat's resume). The Stop button
    # uses the stop endpoint, so stopping still stops.
    "ON_DISCONNECT": "finish",
}


def _has_mcp() -> bool:
    try:
        return importlib.util.find_spec("mcp") is not None
    except ImportError:
        return False


if _has_mcp():
    # The demo's own MCP server (demo_project/mcp_server.py, over stdio):
    # its roll_die joins the tools as demo__roll_die ("roll a die with 6 sides").
    UISTREAM["MCP_SERVERS"] = {
        "demo": {"command": sys.executable, "args": [str(BASE_DIR / "demo_project" / "mcp_server.py")], "timeout": 10}
    }
if os.environ.get("UISTREAM_DEMO_CHAT_RATE"):
    # One chat throttle (e.g. "5/min") for the useChat POST, WebSocket sends
    # and AG-UI runs, counted per owner across all three.
    UISTREAM["THROTTLE_CLASSES"] = ["uistream_app.policies.ChatRateThrottle"]
    UISTREAM["THROTTLE_RATES"] = {"chat": os.environ["UISTREAM_DEMO_CHAT_RATE"]}
if os.environ.get("UISTREAM_DEMO_NUM_PROXIES"):
    # The proxies in front of the demo that append to X-Forwarded-For: the
    # throttle counts the hop the outermost one saw; unset, the peer's
    # address (a client's own header chooses nothing).
    REST_FRAMEWORK = {"NUM_PROXIES": int(os.environ["UISTREAM_DEMO_NUM_PROXIES"])}
if os.environ.get("REDIS_URL"):
    UISTREAM["BROKER"] = {"BACKEND": "redis", "URL": os.environ["REDIS_URL"]}
if os.environ.get("UISTREAM_DEMO_EXECUTOR"):
    # "celery": every run executes on a worker (celery -A demo_project
    # worker); the web process only relays the broker's stream.
    UISTREAM["EXECUTOR"] = os.environ["UISTREAM_DEMO_EXECUTOR"]
    CELERY_BROKER_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
if os.environ.get("UISTREAM_DEMO_ON_OWNER_LOST"):
    # "continue": a run whose process died finishes on the process that
    # finds it (its half-done step run again); "interrupt" settles it.
    UISTREAM["ON_OWNER_LOST"] = os.environ["UISTREAM_DEMO_ON_OWNER_LOST"]

if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
    # Traces to an OpenTelemetry collector over OTLP/HTTP (demo_project/tracing.py).
    from demo_project.tracing import configure_tracing

    configure_tracing()

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"uistream_app": {"handlers": ["console"], "level": "INFO"}},
}
