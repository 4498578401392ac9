"""System checks: misconfiguration surfaces at startup, each with a hint.

| id     | what |
|--------|------|
| E001   | ``UISTREAM`` is not a dict, or has a key the app does not know |
| E002   | ``MODEL`` (or an entry of ``TOOLS``) cannot be imported |
| E003   | ``SDK_VERSION`` is not 5, 6 or 7 |
| E004   | ``ON_DISCONNECT`` is not "cancel" or "finish" |
| E005   | a numeric setting is not a positive number |
| W001   | ``GZipMiddleware`` is installed: it buffers streaming responses |
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.utils.module_loading import import_string

from .conf import DEFAULTS, ON_DISCONNECT_CHOICES, SDK_VERSIONS

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
    for key in ("MODEL",):
        value = user.get(key)
        if isinstance(value, str):
            try:
                import_string(value)
            except ImportError as exc:
                errors.append(
                    Error(
                        f"UISTREAM[{key!r}] = {value!r} cannot be imported: {exc}",
                        hint="Give the dotted path of a chat model class or factory.",
                        id="uistream_app.E002",
                    )
                )
    tools = user.get("TOOLS", [])
    for tool in tools if isinstance(tools, (list, tuple)) else []:
        if isinstance(tool, str):
            try:
                import_string(tool)
            except ImportError as exc:
                errors.append(
                    Error(
                        f"UISTREAM['TOOLS'] entry {tool!r} cannot be imported: {exc}",
                        hint="Give the dotted path of a tool.",
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
    for key in ("MAX_STEPS", "KEEPALIVE_SECONDS", "MAX_REQUEST_BYTES", "FLUSH_EVERY_MS"):
        value = user.get(key, DEFAULTS[key])
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            errors.append(
                Error(
                    f"UISTREAM[{key!r}] = {value!r} must be a positive number.",
                    hint=f"The default is {DEFAULTS[key]!r}.",
                    id="uistream_app.E005",
                )
            )
    return errors


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
