"""The fault soak's tools, views and URLs (``ROOT_URLCONF`` of
``bench/chaos_settings.py``).

The tools are the demo's, under the names its model calls, with a side
effect the soak can count: each execution appends one line (the tool's name
and the process id) to ``UISTREAM_CHAOS_DIR/calls/<message id>-<tool call
id>`` (the demo model numbers its calls per answer). A call whose file
holds two lines ran twice. ``get_weather`` only reads, so it is marked idempotent
where the tool decorator knows the word (the ``durable-runs`` work adds it);
``calculate`` and ``send_email`` (which needs a person's approval) are not.

``POST /api/celery/chat`` is useChat's endpoint with its runs executed on
the Celery worker (``CeleryRunner``); everything else is the demo's.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Any

from django.urls import include, path

import demo_project.demo_model as demo
from uistream_app.lifecycle.executors import CeleryRunner
from uistream_app.lifecycle.runner import Runner
from uistream_app.runs import ToolContext, tool
from uistream_app.views import ChatView

CALLS = Path(os.environ.get("UISTREAM_CHAOS_DIR", ".")) / "calls"
#: Tools that may run twice for one call, when the decorator can say so.
IDEMPOTENT: dict[str, Any] = {"idempotent": True} if "idempotent" in inspect.signature(tool).parameters else {}


def mark(context: ToolContext) -> None:
    """One execution of ``context``'s call, counted by ``bench/chaos.py``."""
    CALLS.mkdir(parents=True, exist_ok=True)
    message_id = getattr(context.runtime_context, "message_id", "unknown")
    with (CALLS / f"{message_id}-{context.tool_call_id}").open("a") as out:
        out.write(f"{context.tool_name} {os.getpid()}\n")


@tool(run_sync_in_thread=False, **IDEMPOTENT)
def get_weather(city: str, context: ToolContext) -> dict[str, Any]:
    """Get the current weather for a city (demo data: made up, but the same
    every time for the same city).

    Args:
        city: The city's name, e.g. "Paris".
    """
    mark(context)
    return demo.get_weather.function(city)


@tool(run_sync_in_thread=False)
def calculate(expression: str, context: ToolContext) -> dict[str, Any]:
    """Evaluate an arithmetic expression exactly.

    Args:
        expression: Numbers with + - * / // % ** (or ^) and parentheses, e.g. "12 * (3 + 4)".
    """
    mark(context)
    return demo.calculate.function(expression)


@tool(requires_approval=True, run_sync_in_thread=False, editable_arguments=True)
def send_email(to: str, body: str, context: ToolContext) -> dict[str, Any]:
    """Send an email (the soak only pretends to). Needs a person's approval.

    Args:
        to: The recipient's address.
        body: The text of the email.
    """
    mark(context)
    return demo.send_email.function(to, body)


class CeleryChatView(ChatView):
    """useChat's endpoint whose runs execute on a Celery worker."""

    def get_runner(self) -> Runner:
        return CeleryRunner(type(self))


urlpatterns = [
    path("api/celery/chat", CeleryChatView.as_view()),
    path("", include("demo_project.urls")),
]
