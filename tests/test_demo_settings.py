"""The demo's settings read the environment: a real provider when its key
is set, the offline model otherwise; DEBUG on and a public key unless told
otherwise, said on the demo's first line; DEBUG off only with a key of
one's own, and then no URL patterns on the 404 page."""

from __future__ import annotations

import json
import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from django.core.exceptions import ImproperlyConfigured

from uistream_app.runs import resolve_model
from uistream_app.runs.anthropic import AnthropicModel
from uistream_app.runs.openai import OpenAIChatModel, OpenAIResponsesModel

from .server import server_process

SETTINGS = Path(__file__).resolve().parent.parent / "demo_project" / "settings.py"
SWITCHES = ("ANTHROPIC_API_KEY", "ANTHROPIC_MODEL", "OPENAI_API_KEY", "OPENAI_MODEL", "OPENAI_API", "OPENAI_BASE_URL")
MAKE_MODEL = "demo_project.demo_model.make_model"


def demo_model_setting(monkeypatch: pytest.MonkeyPatch, **env: str) -> object:
    """``UISTREAM["MODEL"]`` of the demo's settings read afresh under ``env``."""
    for name in SWITCHES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(SETTINGS))["UISTREAM"]["MODEL"]


def test_without_keys_the_offline_model_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    assert demo_model_setting(monkeypatch) == MAKE_MODEL


def test_an_anthropic_key_picks_claude(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = demo_model_setting(monkeypatch, ANTHROPIC_API_KEY="sk-ant-test")
    assert isinstance(spec, str)
    assert spec.startswith("anthropic:claude-")
    model = resolve_model(spec)
    assert isinstance(model, AnthropicModel)
    assert model.api_key == "sk-ant-test"
    assert demo_model_setting(monkeypatch, ANTHROPIC_API_KEY="k", ANTHROPIC_MODEL="claude-x") == "anthropic:claude-x"


@pytest.mark.parametrize(
    ("api", "spec", "cls"),
    [
        (None, "openai:gpt-test", OpenAIChatModel),
        ("chat", "openai:gpt-test", OpenAIChatModel),
        ("responses", "openai-responses:gpt-test", OpenAIResponsesModel),
    ],
)
def test_an_openai_key_and_model_pick_chat_completions_or_responses(
    monkeypatch: pytest.MonkeyPatch, api: str | None, spec: str, cls: type
) -> None:
    env = {"OPENAI_API_KEY": "sk-oa-test", "OPENAI_MODEL": "gpt-test", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    if api is not None:
        env["OPENAI_API"] = api
    assert demo_model_setting(monkeypatch, **env) == spec
    model = resolve_model(spec)
    assert type(model) is cls
    assert model.url.startswith("http://127.0.0.1:9/v1/")  # type: ignore[attr-defined]


def test_openai_model_wins_over_an_anthropic_key_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"ANTHROPIC_API_KEY": "sk-ant", "OPENAI_API_KEY": "sk-oa", "OPENAI_MODEL": "gpt-test"}
    assert demo_model_setting(monkeypatch, **env) == "openai:gpt-test"


@pytest.mark.parametrize(("api", "cls"), [(None, OpenAIChatModel), ("responses", OpenAIResponsesModel)])
def test_a_keyless_compatible_server_still_works(monkeypatch: pytest.MonkeyPatch, api: str | None, cls: type) -> None:
    from demo_project.demo_model import make_model

    env = {"OPENAI_MODEL": "llama3.2", "OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}
    if api is not None:
        env["OPENAI_API"] = api
    assert demo_model_setting(monkeypatch, **env) == MAKE_MODEL
    model = make_model()
    assert type(model) is cls
    assert (model.model, model.api_key) == ("llama3.2", None)  # type: ignore[attr-defined]
    assert model.url.startswith("http://127.0.0.1:11434/v1/")  # type: ignore[attr-defined]


# -- the development configuration, and DEBUG off ---------------------------------------

ROOT = SETTINGS.parent.parent
#: A key for DEBUG off in these tests (not a secret: nothing is signed with it).
TEST_KEY = "uistream-test-key-" + "k" * 40


def demo_env(**env: str) -> dict[str, str]:
    """This process's environment without the demo's DEBUG and key switches, plus ``env``."""
    base = {k: v for k, v in os.environ.items() if k not in ("DJANGO_DEBUG", "DJANGO_SECRET_KEY")}
    return {**base, "DJANGO_SETTINGS_MODULE": "demo_project.settings", **env}


def test_debug_off_without_a_secret_key_refuses_to_start() -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=demo_env(DJANGO_DEBUG="0"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    # One line that names what to set, not a traceback.
    assert done.stderr.splitlines() == [
        "ImproperlyConfigured: DJANGO_DEBUG=0 needs DJANGO_SECRET_KEY: set it to a long random value of your own "
        "(python -c 'import secrets; print(secrets.token_urlsafe(50))')"
    ]


def test_debug_off_signs_with_the_given_key_and_debug_on_with_the_public_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DJANGO_SECRET_KEY", raising=False)
    monkeypatch.setenv("DJANGO_DEBUG", "0")
    with pytest.raises(ImproperlyConfigured, match="DJANGO_DEBUG=0 needs DJANGO_SECRET_KEY"):
        runpy.run_path(str(SETTINGS))
    monkeypatch.setenv("DJANGO_SECRET_KEY", TEST_KEY)
    off = runpy.run_path(str(SETTINGS))
    assert (off["DEBUG"], off["SECRET_KEY"]) == (False, TEST_KEY)
    monkeypatch.delenv("DJANGO_DEBUG")
    monkeypatch.delenv("DJANGO_SECRET_KEY")
    on = runpy.run_path(str(SETTINGS))
    assert (on["DEBUG"], on["SECRET_KEY"]) == (True, on["DEVELOPMENT_SECRET_KEY"])


def run_demo_script(tmp_path: Path, **env: str) -> tuple[list[str], list[str]]:
    """``scripts/demo`` in a copy of the scripts folder whose ``setup`` does
    nothing and whose Python records its arguments: the demo's output lines,
    and the commands it ran."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "demo", tmp_path / "scripts" / "demo")
    (tmp_path / "scripts" / "setup").write_text("#!/bin/sh\n")
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    python = tmp_path / "venv" / "bin" / "python"
    python.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path / "ran"}\n')
    for script in (tmp_path / "scripts" / "setup", python):
        script.chmod(0o755)
    done = subprocess.run(
        ["bash", str(tmp_path / "scripts" / "demo")],
        env={**demo_env(VENV=str(tmp_path / "venv"), **env)},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout.splitlines(), (tmp_path / "ran").read_text().splitlines()


def test_the_demo_says_first_that_it_is_a_development_configuration(tmp_path: Path) -> None:
    output, ran = run_demo_script(tmp_path)
    assert output[0] == (
        "uistream demo: a development configuration (DEBUG on, a public secret key), not for deployment; "
        'to run it otherwise set DJANGO_DEBUG=0, DJANGO_SECRET_KEY and DJANGO_ALLOWED_HOSTS (README, "The demo")'
    )
    assert ran == ["manage.py migrate --noinput", "manage.py runserver 127.0.0.1:8000"]


def test_the_demo_with_debug_off_says_so_and_still_serves_the_page_s_files(tmp_path: Path) -> None:
    output, ran = run_demo_script(tmp_path, DJANGO_DEBUG="0", DJANGO_SECRET_KEY=TEST_KEY)
    assert output[0].startswith("uistream demo: DEBUG off (DJANGO_DEBUG=0), the secret key of DJANGO_SECRET_KEY;")
    # runserver serves static files with DEBUG off only when told to.
    assert ran[-1] == "manage.py runserver --insecure 127.0.0.1:8000"


@pytest.mark.parametrize("server", ["daphne", "uvicorn"])
def test_with_debug_off_the_404_page_lists_no_url_patterns(server: str) -> None:
    env = {"DJANGO_SETTINGS_MODULE": "demo_project.settings", "DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": TEST_KEY}
    with server_process(server, env) as url:
        response = httpx.get(f"{url}/no-such-page", timeout=20)
    assert response.status_code == 404
    assert "<h1>Not Found</h1>" in response.text
    for leak in ("admin/", "api/agents/", "URLconf", "demo_project.urls", "DEBUG = True"):
        assert leak not in response.text


def test_with_debug_on_the_404_page_lists_them() -> None:
    # The other side of the test above: what DEBUG shows, so that its
    # assertions would see a leak.
    with server_process("daphne", {"DJANGO_SETTINGS_MODULE": "demo_project.settings", "DJANGO_DEBUG": "1"}) as url:
        response = httpx.get(f"{url}/no-such-page", timeout=20)
    assert response.status_code == 404
    assert "admin/" in response.text
    assert "demo_project.urls" in response.text


def demo_broker(**env: str) -> subprocess.CompletedProcess[str]:
    """The demo's ``UISTREAM["BROKER"]`` (printed as JSON) in a process of
    its own, with ``env`` added and neither REDIS_URL nor DATABASE_URL
    unless given."""
    base = {k: v for k, v in demo_env().items() if k not in ("REDIS_URL", "DATABASE_URL", "UISTREAM_DEMO_BROKER")}
    code = (
        "import json, django; django.setup(); from django.conf import settings; "
        "print(json.dumps(settings.UISTREAM.get('BROKER')))"
    )
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=60
    )


def last_line(done: subprocess.CompletedProcess[str]) -> object:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_the_demo_broker_is_chosen_by_uistream_demo_broker() -> None:
    postgres = demo_broker(UISTREAM_DEMO_BROKER="postgres", DATABASE_URL="postgres://postgres@127.0.0.1:5432/chat")
    assert postgres.returncode == 0, postgres.stderr
    assert last_line(postgres) == {"BACKEND": "postgres"}
    assert last_line(demo_broker()) is None  # the default: the in-process broker
    redis = demo_broker(REDIS_URL="redis://127.0.0.1:6379/0")
    assert last_line(redis) == {"BACKEND": "redis", "URL": "redis://127.0.0.1:6379/0"}
    # An explicit choice wins over REDIS_URL (Celery may still use Redis).
    both = demo_broker(
        UISTREAM_DEMO_BROKER="postgres",
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/chat",
        REDIS_URL="redis://127.0.0.1:6379/0",
    )
    assert last_line(both) == {"BACKEND": "postgres"}


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"UISTREAM_DEMO_BROKER": "postgres"}, "UISTREAM_DEMO_BROKER=postgres needs DATABASE_URL=postgres://"),
        (
            {"UISTREAM_DEMO_BROKER": "postgres", "DATABASE_URL": "sqlite:////tmp/demo.sqlite3"},
            "UISTREAM_DEMO_BROKER=postgres needs DATABASE_URL=postgres://",
        ),
        ({"UISTREAM_DEMO_BROKER": "redis"}, "UISTREAM_DEMO_BROKER=redis needs REDIS_URL="),
        ({"UISTREAM_DEMO_BROKER": "kafka"}, "UISTREAM_DEMO_BROKER=kafka is not one of memory, redis, postgres"),
    ],
)
def test_a_demo_broker_it_cannot_use_is_refused_in_one_line(env: dict[str, str], says: str) -> None:
    done = demo_broker(**env)
    assert done.returncode == 1
    assert says in done.stderr
    assert "ImproperlyConfigured" in done.stderr
