"""The demo picks its model from the environment: a real provider when its
key is set, the offline model otherwise."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from uistream_app.runs import resolve_model
from uistream_app.runs.anthropic import AnthropicModel
from uistream_app.runs.openai import OpenAIChatModel, OpenAIResponsesModel

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
