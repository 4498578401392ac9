"""The URLconf of ``bench/otel_bench.py``: the standard workload's chat
view alone (``bench_urls.WorkloadChatView``'s twin). Not ``bench_urls``
itself: that includes the demo's URLs, whose pydantic-ai agent imports
``opentelemetry`` (pydantic-ai depends on it), which the ``absent`` arm
makes unimportable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from bench_common import WORKLOAD_PATH
from django.urls import path
from loop_plugin import model_steps, recorded_tools

from uistream_app.runs import ScriptedModel
from uistream_app.views import ChatView

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD: dict[str, Any] = orjson.loads(WORKLOAD_PATH.read_bytes())
STEPS = model_steps(WORKLOAD)


def workload_model() -> ScriptedModel:
    """A fresh model per request: the workload's steps with no delay."""
    model = ScriptedModel(name="workload")
    for step in STEPS:
        model.enqueue_events(step)
    return model


class WorkloadChatView(ChatView):
    model = workload_model
    tools = recorded_tools(WORKLOAD)
    max_steps = len(STEPS)


urlpatterns = [path("bench/chat", WorkloadChatView.as_view())]
