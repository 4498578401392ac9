"""``resolve_model``: a provider-qualified name becomes the model it names,
keys from the environment, misconfiguration named at once."""

from __future__ import annotations

import pytest

from uistream_app.runs import ModelSpecError, is_model_spec, resolve_model
from uistream_app.runs.anthropic import AnthropicModel
from uistream_app.runs.openai import OpenAIChatModel, OpenAIResponsesModel


def test_anthropic_takes_its_key_and_root_from_the_environment() -> None:
    env = {"ANTHROPIC_API_KEY": "sk-ant", "ANTHROPIC_BASE_URL": "http://proxy.test/v1"}
    model = resolve_model("anthropic:claude-sonnet-4-5", env=env, max_tokens=2048)
    assert isinstance(model, AnthropicModel)
    assert (model.model, model.api_key, model.url, model.max_tokens) == (
        "claude-sonnet-4-5",
        "sk-ant",
        "http://proxy.test/v1/messages",
        2048,
    )


@pytest.mark.parametrize(
    ("spec", "cls", "path"),
    [
        ("openai:gpt-4.1", OpenAIChatModel, "/chat/completions"),
        ("openai-chat:gpt-4.1", OpenAIChatModel, "/chat/completions"),
        ("openai-responses:gpt-5", OpenAIResponsesModel, "/responses"),
    ],
)
def test_openai_chat_and_responses(spec: str, cls: type, path: str) -> None:
    model = resolve_model(spec, env={"OPENAI_API_KEY": "sk-oa"})
    assert type(model) is cls
    assert model.api_key == "sk-oa"  # type: ignore[attr-defined]
    assert model.url == "https://api.openai.com/v1" + path  # type: ignore[attr-defined]


def test_openai_compatible_names_its_root_and_needs_no_key() -> None:
    model = resolve_model("openai-compatible:http://localhost:11434/v1#llama3.2:3b", env={})
    assert isinstance(model, OpenAIChatModel)
    assert (model.model, model.url, model.api_key) == (
        "llama3.2:3b",
        "http://localhost:11434/v1/chat/completions",
        None,
    )


def test_keyword_arguments_win_over_the_environment() -> None:
    model = resolve_model("openai:gpt-4.1", env={}, api_key="sk-given", max_retries=0)
    assert (model.api_key, model.max_retries) == ("sk-given", 0)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("openai-responses:gpt-5", "OPENAI_API_KEY"),
        ("gemini:flash", "no known provider"),
        ("anthropic:", "names no model"),
        ("openai-compatible:http://localhost:8000/v1", "openai-compatible:<base_url>#<model>"),
    ],
)
def test_misconfiguration_says_what_to_set(spec: str, says: str) -> None:
    with pytest.raises(ModelSpecError, match=says):
        resolve_model(spec, env={})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("anthropic:claude-sonnet-4-5", True),
        ("openai-compatible:http://h/v1#m", True),
        ("demo_project.demo_model.DemoModel", False),
        ("myproject.models:make_model", False),
        (None, False),
    ],
)
def test_a_spec_is_told_from_a_dotted_path(value: object, expected: bool) -> None:
    assert is_model_spec(value) is expected


@pytest.mark.parametrize("cls", [AnthropicModel, OpenAIChatModel, OpenAIResponsesModel])
def test_a_misspelt_keyword_is_refused_by_name(cls: type) -> None:
    with pytest.raises(TypeError, match="max_retry"):
        cls("m", max_retry=1)
    assert cls("m", max_retries=1).max_retries == 1
