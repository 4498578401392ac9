"""The ``django-stored`` target: plain Django storing what a new uistream chat stores and streaming
the same answer, the reference that says which part of uistream's figures is Django's own (issue 29).

    DJANGO_SETTINGS_MODULE=django_stored PYTHONPATH=.:bench:bench/server UISTREAM_DEMO_DELAY_MS=20 \
      .venv/bin/python -m uvicorn --factory django.core.asgi:get_asgi_application --port 8994 \
      --loop asyncio --http h11

This one module is the settings, the URLconf and the view; the ASGI application is Django's own,
``django.core.asgi.get_asgi_application()`` (uvicorn ``--factory``), with none of uistream's ASGI
wrappers (``bounded_threads``, ``limit_request_bodies``) or middleware and no ``gc.freeze()``.

Settings: ``bench_settings`` (the demo's, DEBUG off, the SQLite WAL database of the run) except

* ``MIDDLEWARE``: the demo's list names uistream's subclasses of Django's seven default middleware
  (``uistream_app.middleware``, which run them on the event loop); here each is replaced by the
  Django class it subclasses, so sessions, CSRF and authentication are Django's, hopping to a
  thread as Django does;
* ``ROOT_URLCONF``: this module, with ``GET /api/csrf`` (``{"csrfToken": ...}``, what the load
  client asks first) and ``POST /api/chat``;
* ``INSTALLED_APPS``: the same, with ``PlainDjango`` last. ``uistream_app`` stays installed for its
  models (the rows are its tables), but its ``ready()`` hooks uistream's process machinery to every
  request: the lease renewer and orphan sweeper (a thread that would also see this view's runs),
  the MCP servers' warm-up (the demo's starts a subprocess) and the graceful stop's request count.
  ``PlainDjango.ready()`` disconnects those four receivers, so plain Django runs none of it.

``POST /api/chat`` is what a careful Django developer writes with the ORM and an async view:
CSRF-protected (not exempt), the JSON body read, ``await request.auser()``, the anonymous session
created when the visitor has none (``session.asave()``, as uistream does for an anonymous visitor's
first chat), the chat's rows stored by ``bench/stored_chat.py``'s ``start_chat`` through
``sync_to_async`` (thread-sensitive, the default Django's docs tell users to keep), then a
``StreamingHttpResponse`` of the AI SDK UI message stream. The stream is the demo model's through
uistream, chunk for chunk: start, start-step, 15 reasoning deltas ("The user wants me to count to
N. I will say each number in turn.", one per word), the text deltas "1", " 2", … " N", text-end,
finish-step, finish, ``data: [DONE]``, with ``UISTREAM_DEMO_DELAY_MS`` slept before every delta.
After the last frame ``finish_chat`` stores the run's end and the answer's parts (step-start, the
reasoning, the text "1 2 … N", as uistream stores them), again through ``sync_to_async``.

What it does not do: no chunk log (a reload cannot resume), no broker, no caps, hooks or lease, and
nothing for a client that goes away: Django stops the response, so the run stays ``running`` and
the answer empty. It stores every chat under the session, an authenticated user's too (the load
client is one anonymous visitor).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from bench_settings import *  # noqa: F403
from bench_settings import INSTALLED_APPS as _DEMO_APPS
from bench_settings import MIDDLEWARE as _DEMO_MIDDLEWARE
from django.apps import AppConfig
from django.core.signals import request_finished, request_started
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse, StreamingHttpResponse
from django.middleware.csrf import get_token
from django.urls import path
from django.views.decorators.http import require_GET, require_POST

# ---- settings ------------------------------------------------------------------------------------

_DJANGOS = {
    "uistream_app.middleware.SecurityMiddleware": "django.middleware.security.SecurityMiddleware",
    "uistream_app.middleware.SessionMiddleware": "django.contrib.sessions.middleware.SessionMiddleware",
    "uistream_app.middleware.CommonMiddleware": "django.middleware.common.CommonMiddleware",
    "uistream_app.middleware.CsrfViewMiddleware": "django.middleware.csrf.CsrfViewMiddleware",
    "uistream_app.middleware.AuthenticationMiddleware": "django.contrib.auth.middleware.AuthenticationMiddleware",
    "uistream_app.middleware.MessageMiddleware": "django.contrib.messages.middleware.MessageMiddleware",
    "uistream_app.middleware.XFrameOptionsMiddleware": "django.middleware.clickjacking.XFrameOptionsMiddleware",
}
MIDDLEWARE = [_DJANGOS.get(name, name) for name in _DEMO_MIDDLEWARE]
assert not any(name.startswith("uistream_app.") for name in MIDDLEWARE), MIDDLEWARE
ROOT_URLCONF = __name__
INSTALLED_APPS = [*_DEMO_APPS, f"{__name__}.PlainDjango"]


class PlainDjango(AppConfig):
    """This module as an app (no models), to take uistream's request receivers off once every app
    is ready (see the module's docstring). A tree whose receivers are named otherwise keeps them."""

    name = __name__
    label = "django_stored"

    def ready(self) -> None:
        for signal, uid in (
            (request_started, "uistream_app.sweeper"),
            (request_started, "uistream_app.mcp"),
            (request_started, "uistream_app.shutdown.started"),
            (request_finished, "uistream_app.shutdown.finished"),
        ):
            signal.disconnect(dispatch_uid=uid)


if importlib.util.find_spec("stored_chat") is None:  # a tree from before bench/stored_chat.py: this checkout's
    sys.path.append(str(Path(__file__).resolve().parent.parent))

# ---- the view ------------------------------------------------------------------------------------

DELAY = max(0.0, float(os.environ.get("UISTREAM_DEMO_DELAY_MS") or 30) / 1000)  # the demo model's default: 30
MAX_COUNT = 5000
COUNT = re.compile(r"\bcount(?:\s+(?:from\s+1\s+))?\s+(?:up\s+)?to\s+(\d+)", re.IGNORECASE)


def words(text: str) -> list[str]:
    """Deltas of one word each, the space kept in front of the word (the demo model's)."""
    pieces = text.split(" ")
    return [p if i == 0 else " " + p for i, p in enumerate(pieces) if p or i == 0]


def plan(text: str) -> tuple[list[str], list[str]]:
    """(reasoning deltas, text deltas) answering the user's ``text``."""
    m = COUNT.search(text)
    if not m:
        return [], words('Ask me to "count to N".')
    n = min(int(m.group(1)), MAX_COUNT)
    reasoning = words(f"The user wants me to count to {n}. I will say each number in turn.")
    return reasoning, [str(i) if i == 1 else f" {i}" for i in range(1, n + 1)]


def sse(chunk: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


@require_GET
def csrf(request: HttpRequest) -> JsonResponse:
    """The CSRF token (and its cookie), for a client that is served no Django page."""
    return JsonResponse({"csrfToken": get_token(request)})


@require_POST
async def chat(request: HttpRequest) -> HttpResponse:
    # Imported here, not at the top: this module is the settings too, read before the models exist.
    from stored_chat import finish_chat, start_chat

    try:
        body = json.loads(request.body)
        chat_id, asked = str(body["id"]), body["messages"][-1]
        text = "".join(p.get("text", "") for p in asked["parts"] if p.get("type") == "text")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return HttpResponseBadRequest("a useChat request body is expected")
    await request.auser()
    session = request.session
    if session.session_key is None:  # an anonymous visitor's first chat
        await session.asave()
    run, answer = await sync_to_async(start_chat)(chat_id, session.session_key, asked)
    reasoning, deltas = plan(text)

    async def stream() -> AsyncIterator[bytes]:
        yield sse({"type": "start", "messageId": answer.pk})
        yield sse({"type": "start-step"})
        if reasoning:
            yield sse({"type": "reasoning-start", "id": "reasoning-0"})
            for delta in reasoning:
                await asyncio.sleep(DELAY)
                yield sse({"type": "reasoning-delta", "id": "reasoning-0", "delta": delta})
            yield sse({"type": "reasoning-end", "id": "reasoning-0"})
        yield sse({"type": "text-start", "id": "text-0"})
        for delta in deltas:
            await asyncio.sleep(DELAY)
            yield sse({"type": "text-delta", "id": "text-0", "delta": delta})
        yield sse({"type": "text-end", "id": "text-0"})
        yield sse({"type": "finish-step"})
        yield sse({"type": "finish", "finishReason": "stop"})
        yield b"data: [DONE]\n\n"
        parts: list[dict[str, Any]] = [{"type": "step-start"}]
        if reasoning:
            parts.append({"type": "reasoning", "text": "".join(reasoning), "state": "done"})
        parts.append({"type": "text", "text": "".join(deltas), "state": "done"})
        await sync_to_async(finish_chat)(run, answer, parts)

    return StreamingHttpResponse(
        stream(),
        content_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Vercel-AI-UI-Message-Stream": "v1", "X-Accel-Buffering": "no"},
    )


urlpatterns = [path("api/csrf", csrf), path("api/chat", chat)]
