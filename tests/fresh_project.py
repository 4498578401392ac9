"""A project as ``django-admin startproject`` makes it, with the app added
the way the README says (``"uistream_app"`` in ``INSTALLED_APPS``,
``path("api/", include("uistream_app.urls"))``) and nothing else: no
``rest_framework`` app, no ``drf_spectacular``, no ``REST_FRAMEWORK``.

Each project runs in a process of its own. DRF reads most of its settings
when its classes are defined (``APIView.renderer_classes =
api_settings.DEFAULT_RENDERER_CLASSES``), and drf-spectacular's
``@extend_schema`` picks its base schema class when a views module is
imported, so ``override_settings`` in the test process can't show what a
project's own settings do; and a changed ``INSTALLED_APPS`` there resets
the app registry under every other test. ``serve()`` starts the project's
process, which migrates its database, signs in the users the requests name
and answers each request through Django's test client.

Run as ``python -m tests.fresh_project`` (by ``serve``): requests as JSON on
stdin, replies as JSON on stdout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict

ROOT = Path(__file__).resolve().parent.parent

#: The users a request may be made as: a staff user and one who is not.
USERS = {"staff": {"is_staff": True}, "alice": {}}

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


class Request(TypedDict):
    path: str
    method: NotRequired[str]
    #: A name of ``USERS``; anonymous when left out.
    user: NotRequired[str]
    headers: NotRequired[dict[str, str]]
    #: Sent as ``application/json``.
    json: NotRequired[Any]
    #: Django's CSRF check as a browser meets it (the test client skips it).
    enforce_csrf: NotRequired[bool]


@dataclass(frozen=True)
class Reply:
    status: int
    content_type: str
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


@dataclass(frozen=True)
class Served:
    replies: list[Reply]
    #: The process's standard error: tracebacks, drf-spectacular's warnings.
    stderr: str


def make_project(directory: Path, *, apps: Sequence[str] = (), settings: str = "", urls: str = "") -> Path:
    """A new project ``proj`` in ``directory`` with the app installed and
    routed, plus ``apps`` after it in ``INSTALLED_APPS`` and ``settings`` /
    ``urls`` appended to its ``settings.py`` / ``urls.py``."""
    subprocess.run(
        [sys.executable, "-m", "django", "startproject", "proj", str(directory)],
        check=True,
        capture_output=True,
    )
    installed = ["uistream_app", *apps]
    with (directory / "proj" / "settings.py").open("a") as f:
        f.write(f"\nINSTALLED_APPS += {installed!r}\n{settings}\n")
    with (directory / "proj" / "urls.py").open("a") as f:
        f.write('\nfrom django.urls import include\n\nurlpatterns += [path("api/", include("uistream_app.urls"))]\n')
        f.write(f"{urls}\n")
    return directory


def serve(project: Path, requests: Sequence[Request]) -> Served:
    """The replies of ``project`` (``make_project``) to ``requests``, in order,
    on a new database (its SQLite file, made again) for them all."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "proj.settings",
        # The app of this checkout, whatever is installed.
        "PYTHONPATH": os.pathsep.join([str(project), str(ROOT)]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.fresh_project"],
        cwd=ROOT,
        env=env,
        input=json.dumps(list(requests)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise AssertionError(f"the project's process failed:\n{done.stderr}")
    replies = [Reply(**reply) for reply in json.loads(done.stdout)]
    return Served(replies, done.stderr)


def _main() -> None:
    import django

    django.setup()

    from django.conf import settings

    # A file, not memory: the app's lease renewer reads it from a thread of its own.
    Path(settings.DATABASES["default"]["NAME"]).unlink(missing_ok=True)

    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()
    call_command("migrate", verbosity=0)
    # No passwords: the clients sign in with force_login, and hashing one
    # would cost a second of the process's start.
    users = {name: get_user_model().objects.create_user(name, **extra) for name, extra in USERS.items()}
    clients: dict[tuple[str | None, bool], Client] = {}
    replies = []
    for request in json.load(sys.stdin):
        key = (request.get("user"), bool(request.get("enforce_csrf")))
        client = clients.get(key)
        if client is None:
            client = clients[key] = Client(enforce_csrf_checks=key[1], raise_request_exception=False)
            if key[0] is not None:
                client.force_login(users[key[0]])
        kwargs: dict[str, Any] = {"headers": request.get("headers", {})}
        if "json" in request:
            kwargs.update(data=json.dumps(request["json"]), content_type="application/json")
        response = client.generic(request.get("method", "GET"), request["path"], **kwargs)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        replies.append(
            {
                "status": response.status_code,
                "content_type": response.get("Content-Type", ""),
                "text": body.decode("utf-8", "replace"),
            }
        )
    json.dump(replies, sys.stdout)


if __name__ == "__main__":
    _main()
