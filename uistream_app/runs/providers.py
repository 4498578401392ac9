"""Choosing a model by name: ``"anthropic:claude-…"`` and friends.

``resolve_model(spec)`` turns a provider-qualified model name into a model
object, with the API key (and optionally the API root) taken from the
environment variables the official SDKs read:

=========================================  ==============================  =====================================
spec                                       model                           environment
=========================================  ==============================  =====================================
``anthropic:<model>``                      ``AnthropicModel``              ``ANTHROPIC_API_KEY``,
                                                                           ``ANTHROPIC_BASE_URL``
``openai:<model>``                         ``OpenAIChatModel``             ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``
``openai-chat:<model>``                    ``OpenAIChatModel`` (the same)  as above
``openai-responses:<model>``               ``OpenAIResponsesModel``        as above
``openai-compatible:<base_url>#<model>``   ``OpenAIChatModel``             ``OPENAI_COMPATIBLE_API_KEY``
                                                                           (optional: local servers need none)
=========================================  ==============================  =====================================

``shared_model(spec)`` is ``resolve_model(spec)`` made once per process and
shared by whoever names the same spec (``ChatHooks.get_model``, a history
strategy's ``summary_model``).

``is_model_spec(value)`` tells such a name from a dotted import path, so a
setting can accept both. Keyword arguments of ``resolve_model`` go to the
model's constructor (``max_retries``, ``thinking``, ``reasoning``…) and
win over the environment.

A spec that names no known provider, or a provider whose key is missing,
raises ``ModelSpecError`` saying what to set, so a misconfiguration fails
at startup rather than at the first chat.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from typing import Any, Final

from .anthropic import AnthropicModel
from .model import ChatModel
from .openai import OpenAIChatModel
from .openai_responses import OpenAIResponsesModel

__all__ = ["MODEL_SCHEMES", "ModelSpecError", "is_model_spec", "resolve_model", "shared_model"]

#: The provider prefixes ``resolve_model`` knows.
MODEL_SCHEMES: Final = ("anthropic", "openai", "openai-chat", "openai-responses", "openai-compatible")


_SPEC_FORMS: Final = (
    "Write it as 'anthropic:<model>', 'openai:<model>', 'openai-responses:<model>' "
    "or 'openai-compatible:<base_url>#<model>'."
)


class ModelSpecError(ValueError):
    """A model name that names no known provider, or lacks what it needs.
    ``hint`` says how to fix it (a system check shows it)."""

    def __init__(self, message: str, hint: str = _SPEC_FORMS) -> None:
        super().__init__(message)
        self.hint = hint


def is_model_spec(value: object) -> bool:
    """True when ``value`` is a ``provider:model`` name rather than, say, a
    dotted path to a model class."""
    if not isinstance(value, str) or ":" not in value:
        return False
    return value.split(":", 1)[0] in MODEL_SCHEMES


@functools.cache
def shared_model(spec: str) -> ChatModel:
    """The model a provider-qualified name names, made once per process:
    the provider models hold no per-request state (each call opens its own
    client), and their replay memory is per process anyway."""
    return resolve_model(spec)


def resolve_model(spec: str, *, env: Mapping[str, str] | None = None, **options: Any) -> ChatModel:
    """The model ``spec`` names (see the module docstring)."""
    env = os.environ if env is None else env
    scheme, sep, rest = spec.partition(":")
    if not sep or scheme not in MODEL_SCHEMES:
        raise ModelSpecError(
            f"{spec!r} names no known provider: use one of {', '.join(s + ':' for s in MODEL_SCHEMES)}"
        )
    rest = rest.strip()
    if scheme == "openai-compatible":
        base_url, hash_sign, model = rest.rpartition("#")
        if not hash_sign or not base_url or not model:
            raise ModelSpecError(f"{spec!r}: write it as 'openai-compatible:<base_url>#<model>'")
        kwargs: dict[str, Any] = {"base_url": base_url, "api_key": env.get("OPENAI_COMPATIBLE_API_KEY") or None}
        return _build("openai", model, kwargs, options)
    if not rest:
        raise ModelSpecError(f"{spec!r} names no model after {scheme + ':'!r}")
    prefix = "ANTHROPIC" if scheme == "anthropic" else "OPENAI"
    kwargs = {"api_key": env.get(f"{prefix}_API_KEY") or None}
    if env.get(f"{prefix}_BASE_URL"):
        kwargs["base_url"] = env[f"{prefix}_BASE_URL"]
    if kwargs["api_key"] is None and options.get("api_key") is None:
        raise ModelSpecError(
            f"{spec!r} needs an API key: set {prefix}_API_KEY in the environment",
            f"Set {prefix}_API_KEY in the environment of every process that serves chats "
            "(the web server and any worker), or give the model an api_key of your own.",
        )
    return _build(scheme, rest, kwargs, options)


def _build(scheme: str, model: str, kwargs: dict[str, Any], options: Mapping[str, Any]) -> ChatModel:
    # Typed as making a ``ChatModel``: mypy checks each model keeps the port.
    factory: Callable[..., ChatModel]
    if scheme == "anthropic":
        factory = AnthropicModel
    elif scheme == "openai-responses":
        factory = OpenAIResponsesModel
    else:
        factory = OpenAIChatModel
    return factory(model, **{**kwargs, **options})
