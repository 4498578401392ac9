"""A new project set up from the README alone, as a new user sets it up.

The package is built into a wheel and installed into a fresh virtualenv
with the README's own ``pip install`` line; ``django-admin startproject``
makes the project; the README's "Add it to your project" section
(``tests/readme_project.py`` reads it) writes its files and runs its
commands, down to ``manage.py runserver``, which serves ASGI through
daphne as the section says. Nothing of the test suite's settings or of
the demo reaches it: the project is its own process with its own
environment. Then the real ai@7 clients chat with it over HTTP and the
WebSocket, as a staff user and as another user; the README's hook picks
each one's tools; the conversations API, its schema and the admin answer
for what was sent.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import JS_DIR
from .readme_project import Command, FileText, steps
from .server import free_port

PASSWORD = "a long test password"
QUESTION = "Weather in Paris?"
ANSWER = "It is 18 °C in Paris."


@dataclass
class Project:
    """The project the README built, served."""

    root: Path
    python: Path
    env: dict[str, str]
    base: str
    log: Any
    users: dict[str, httpx.Client] = field(default_factory=dict)

    def manage(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self.python), "manage.py", *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check:
            assert result.returncode == 0, result.stdout + result.stderr
        return result

    def server_output(self) -> str:
        self.log.seek(0)
        return bytes(self.log.read()).decode(errors="replace")


def _clean_env(bin_dir: Path) -> dict[str, str]:
    """The environment of a shell a new user opens: none of the test run's
    Django settings, Python path or database variables."""
    keep = ("HOME", "LANG", "LC_ALL", "TMPDIR", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _wait_for(base: str, proc: subprocess.Popen[bytes], project: Project) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"{base}/api/csrf", timeout=1)
            return
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"runserver did not start: {project.server_output()[-3000:]}") from None
            time.sleep(0.1)


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> None:
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{shlex.join(argv)}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"


@pytest.fixture(scope="module")
def project(node: str, dists: tuple[Path, Path]) -> Iterator[Project]:
    """The README's project, built in a temporary folder and served by
    ``manage.py runserver`` on a free port."""
    with tempfile.TemporaryDirectory(prefix="uistream-readme-") as tmp, tempfile.TemporaryFile() as log:
        work = Path(tmp)
        wheel, _sdist = dists
        env_dir = work / "venv"
        # No pip of its own: this process's pip installs into it (``--python``), which saves
        # setting one up. Nor bytecode: a user's pip compiles, which changes nothing served.
        venv.EnvBuilder(with_pip=False).create(env_dir)
        bin_dir = env_dir / "bin"
        env = _clean_env(bin_dir)
        cwd = work
        server: subprocess.Popen[bytes] | None = None
        project = Project(cwd, bin_dir / "python", env, "", log)
        try:
            for step in steps():
                if isinstance(step, FileText):
                    path = cwd / step.path
                    text = path.read_text(encoding="utf-8") + "\n" + step.text if step.append else step.text
                    path.write_text(text, encoding="utf-8")
                    continue
                assert isinstance(step, Command)
                kind, argv = step.kind, list(step.argv)
                if kind == "pip-install":
                    # The package from this checkout's wheel, with the extras the README names.
                    argv = [
                        sys.executable,
                        "-m",
                        "pip",
                        "--python",
                        str(bin_dir / "python"),
                        "install",
                        "-q",
                        "--no-compile",
                        *(re.sub(r"^django-uistream(?=\[|$)", str(wheel), a) for a in argv[2:]),
                    ]
                    assert str(wheel) in " ".join(argv), "the README's pip line does not install django-uistream"
                    _run(argv, cwd, env)
                elif kind == "startproject":
                    _run([str(bin_dir / "django-admin"), *argv[1:]], cwd, env)
                elif kind == "cd":
                    cwd = cwd / argv[1]
                    project.root = cwd
                elif kind == "manage:createsuperuser":
                    _run(
                        [str(bin_dir / "python"), "manage.py", "createsuperuser", "--noinput"],
                        cwd,
                        {
                            **env,
                            "DJANGO_SUPERUSER_USERNAME": "ada",
                            "DJANGO_SUPERUSER_EMAIL": "ada@example.com",
                            "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
                        },
                    )
                elif kind == "manage:runserver":
                    port = free_port()
                    project.base = f"http://127.0.0.1:{port}"
                    server = subprocess.Popen(
                        [str(bin_dir / "python"), *argv[1:], f"127.0.0.1:{port}", "--noreload"],
                        cwd=cwd,
                        env=env,
                        stdout=log,
                        stderr=log,
                    )
                    _wait_for(project.base, server, project)
                elif kind.startswith("manage:"):
                    _run([str(bin_dir / "python"), *argv[1:]], cwd, env)
            assert server is not None, "the README's set-up serves nothing (no runserver)"
            # Another user, not staff: made the way a project makes users.
            project.manage(
                "shell",
                "-c",
                "from django.contrib.auth.models import User; "
                f"User.objects.create_user('grace', 'grace@example.com', {PASSWORD!r})",
            )
            yield project
        finally:
            if server is not None:  # a development server: how it shuts down is not this test's
                server.kill()
                server.wait(timeout=10)
            for client in project.users.values():
                client.close()


def login(project: Project, username: str) -> httpx.Client:
    """A browser signed in as ``username``: staff through the admin's login
    page (which rotates the CSRF token, as any login does); anyone else,
    for whom the project would have a login page of its own, through a
    session Django's test client makes in the project's database."""
    if username in project.users:
        return project.users[username]
    client = httpx.Client(base_url=project.base, timeout=30)
    if username == "ada":
        page = client.get("/admin/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token is not None, page.text[:500]
        answer = client.post(
            "/admin/login/?next=/admin/",
            data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": token.group(1), "next": "/admin/"},
        )
        assert answer.status_code == 302, answer.text[:500]
    else:
        made = project.manage(
            "shell",
            "-c",
            "from django.contrib.auth.models import User; from django.test import Client; "
            f"c = Client(); c.force_login(User.objects.get(username={username!r})); "
            "print(c.cookies['sessionid'].value)",
        )
        client.cookies.set("sessionid", made.stdout.strip().splitlines()[-1])
        client.get("/api/csrf").raise_for_status()  # the page's CSRF cookie
    project.users[username] = client
    return client


def cookie_header(client: httpx.Client) -> str:
    return "; ".join(f"{k}={v}" for k, v in client.cookies.items())


def node_client(node: str, script: str, payload: dict[str, Any]) -> dict[str, Any]:
    result = subprocess.run(
        [node, str(JS_DIR / script), json.dumps(payload)], capture_output=True, text=True, cwd=JS_DIR, timeout=90
    )
    assert result.returncode == 0, result.stderr
    out: dict[str, Any] = json.loads(result.stdout)
    return out


@dataclass
class Chats:
    """What the real clients were given: user → transport → the chat's
    final messages."""

    ids: dict[tuple[str, str], str]
    messages: dict[tuple[str, str], list[dict[str, Any]]]


@pytest.fixture(scope="module")
def chats(project: Project, node: str) -> Chats:
    """ada (staff) and grace each ask once with ai@7's DefaultChatTransport
    and once with its WebSocketChatTransport."""
    ids: dict[tuple[str, str], str] = {}
    messages: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for username in ("ada", "grace"):
        client = login(project, username)
        chat_id = f"http-{username}"
        out = node_client(
            node,
            "chat_client.mjs",
            {
                "base": project.base,
                "api": "/api/chat",
                "chatId": chat_id,
                "version": 7,
                "cookie": cookie_header(client),
                "csrf": client.cookies["csrftoken"],
                "steps": [{"send": QUESTION}],
            },
        )
        assert out["status"] == "ready", out
        ids[username, "http"], messages[username, "http"] = chat_id, out["messages"]
        chat_id = f"ws-{username}"
        out = node_client(
            node,
            "ws_client.mjs",
            {
                "scenario": "send",
                "url": project.base.replace("http://", "ws://") + "/ws/chat/",
                "cookie": cookie_header(client),
                "origin": project.base,
                "chatId": chat_id,
                "text": QUESTION,
            },
        )
        assert out["status"] == "ready", out
        ids[username, "websocket"], messages[username, "websocket"] = chat_id, out["messages"]
    return Chats(ids, messages)


def text_of(message: dict[str, Any]) -> str:
    return "".join(p["text"] for p in message["parts"] if p["type"] == "text")


@pytest.mark.parametrize("transport", ["http", "websocket"])
@pytest.mark.parametrize("username", ["ada", "grace"])
def test_the_real_client_chats_with_the_readme_project(chats: Chats, username: str, transport: str) -> None:
    user, assistant = chats.messages[username, transport]
    assert text_of(user) == QUESTION
    assert text_of(assistant) == ANSWER
    (weather,) = (p for p in assistant["parts"] if p["type"] == "tool-get_weather")
    assert weather["state"] == "output-available"
    assert weather["output"] == {"city": "Paris", "temperature": 18}


def test_the_conversations_api_lists_each_users_own_chats(project: Project, chats: Chats) -> None:
    for username in ("ada", "grace"):
        client = login(project, username)
        listed = client.get("/api/conversations/")
        assert listed.status_code == 200, listed.text
        assert {c["id"] for c in listed.json()["results"]} == {f"http-{username}", f"ws-{username}"}
        stored = client.get(f"/api/conversations/http-{username}/messages/").json()["results"]
        assert stored == chats.messages[username, "http"]
    # A browser asking for the API page gets an answer, never a server error.
    browser_accept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
    page = login(project, "grace").get("/api/conversations/", headers={"Accept": browser_accept})
    assert page.status_code == 200, page.text[:500]


def test_the_schema_is_served_to_staff(project: Project) -> None:
    schema = login(project, "ada").get("/api/schema/", headers={"Accept": "application/json"})
    assert schema.status_code == 200, schema.text[:2000]
    assert "/api/conversations/" in schema.json()["paths"]
    refused = login(project, "grace").get("/api/schema/")
    assert refused.status_code == 403
    assert refused.headers["content-type"].startswith("application/json")


def _run_page(client: httpx.Client, project: Project, chat_id: str) -> str:
    listing = client.get("/admin/uistream_app/run/", params={"q": chat_id})
    assert listing.status_code == 200
    found = re.search(r'href="(/admin/uistream_app/run/[0-9a-f-]{36}/change/)[^"]*"', listing.text)
    assert found is not None, f"no run of {chat_id} in the admin's run list"
    page = client.get(found.group(1))
    assert page.status_code == 200
    return page.text


def test_the_admin_shows_whose_run_it_was_and_what_it_was_offered(project: Project, chats: Chats) -> None:
    staff = login(project, "ada")
    listing = staff.get("/admin/uistream_app/run/")
    assert listing.status_code == 200
    assert "(ada)</a>" in listing.text  # the owner column: the user, linked to their admin page
    assert "(grace)</a>" in listing.text
    for (username, transport), chat_id in chats.ids.items():
        page = _run_page(staff, project, chat_id)
        assert f"({username})</a>" in page
        assert f'<code class="uistream-transport">{transport}</code>' in page
        assert "You are our support agent." in page
        assert "The weather in a city." in page  # get_weather's description, as offered
        assert ("refund_order" in page) is (username == "ada"), (username, transport)
        assert QUESTION in page  # the history the model was sent


def test_a_visitor_who_has_not_logged_in_is_told_the_setting(project: Project) -> None:
    visitor = httpx.Client(base_url=project.base, timeout=30)
    token = visitor.get("/api/csrf").json()["csrfToken"]
    refused = visitor.post(
        "/api/chat",
        json={"id": "anon", "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]},
        headers={"X-CSRFToken": token},
    )
    assert refused.status_code == 401
    error = refused.json()["error"]
    assert error["code"] == "not_authenticated"
    assert "ALLOW_ANONYMOUS" in error["message"]


def test_the_project_passes_its_checks(project: Project) -> None:
    checked = project.manage("check")
    assert "System check identified no issues" in checked.stdout + checked.stderr
    assert "Traceback" not in project.server_output()
