"""Every module that needs an extra says which one when it is missing:
``pip install 'django-uistream[<extra>]'``, through the one helper
(``errors.import_extra``), never a bare ``No module named …``.

Each case runs in a fresh interpreter where the extra's package is hidden
(``sys.modules[name] = None`` makes ``import name`` fail as if it were not
installed), with the test settings set up, so what is imported is what a
project without the extra would import.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import ROOT

#: Hidden in the interpreter: the extras whose absence is tested (and
#: ``django.tasks``, as on Django 5.2, where the backport is the API).
HIDDEN = ["channels", "redis", "celery", "langgraph", "django.tasks", "django_tasks", "django_tasks_db"]

#: The modules that need an extra, and the extra (and package) they name.
NEEDS_AN_EXTRA = {
    "uistream_app.consumers": ("channels", "channels"),
    "uistream_app.routing": ("channels", "channels"),
    "uistream_app.transport.chat_consumer": ("channels", "channels"),
    "uistream_app.live.redis_streams": ("redis", "redis"),
    "uistream_app.tasks": ("celery", "celery"),
    "uistream_app.lifecycle.tasks_executor": ("django_tasks", "tasks"),
    "uistream_app.adapters.langgraph": ("langgraph", "langgraph"),
}
#: What needs none of them: the ASGI wrappers, the HTTP views, the checks.
NEEDS_NONE = ["uistream_app.asgi", "uistream_app.views", "uistream_app.urls", "uistream_app.checks"]

SCRIPT = """
import importlib, json, os, sys
for name in {hidden!r}:
    sys.modules[name] = None
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
import django
django.setup()
answers = {{}}
for module in {modules!r}:
    try:
        importlib.import_module(module)
    except ImportError as exc:
        answers[module] = [type(exc).__name__, str(exc)]
    else:
        answers[module] = None
print(json.dumps(answers))
"""


@pytest.fixture
def imported_without_extras() -> dict[str, list[str] | None]:
    """Each module imported in one fresh interpreter without the extras:
    None, or the ``ImportError``'s class and text."""
    code = SCRIPT.format(hidden=HIDDEN, modules=[*NEEDS_NONE, *NEEDS_AN_EXTRA])
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    answers: dict[str, list[str] | None] = json.loads(result.stdout.splitlines()[-1])
    return answers


def test_a_module_that_needs_a_missing_extra_names_it(imported_without_extras: dict[str, list[str] | None]) -> None:
    for module, (package, extra) in NEEDS_AN_EXTRA.items():
        answer = imported_without_extras[module]
        assert answer is not None, f"{module} imported without {package}"
        kind, message = answer
        assert kind == "MissingExtra", (module, message)
        assert message.startswith(f"{package} is not installed: pip install 'django-uistream[{extra}]' ("), module
    # and what needs none of them still imports
    assert {module: imported_without_extras[module] for module in NEEDS_NONE} == dict.fromkeys(NEEDS_NONE)
