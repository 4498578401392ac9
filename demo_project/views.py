"""The demo's chat page at ``/``: the React app of ``frontend/``, built by
vite into ``demo_project/static/demo/`` (``scripts/setup`` builds it).

The page is a Django template so that it carries what the app needs from
Django: the CSRF token (and its cookie), and the URLs of the chat endpoints,
the conversations API and the admin, reversed rather than hard-coded. The
hashed names of the built files come from vite's ``manifest.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.csrf import ensure_csrf_cookie

from .agents.urls import FRAMEWORKS

#: Where ``npm run build`` (in ``frontend/``) writes the page.
BUILD_DIR = Path(__file__).resolve().parent / "static" / "demo"
#: The entry point named in ``frontend/vite.config.js``.
ENTRY = "src/main.jsx"

_cache: dict[str, Any] = {}


def built_assets() -> dict[str, Any] | None:
    """``{"js": path, "css": [paths]}`` relative to the static root, from
    the build's manifest; None when the page has not been built. Read again
    when the manifest changes (a rebuild while the server runs)."""
    manifest = BUILD_DIR / "manifest.json"
    try:
        stamp = manifest.stat().st_mtime_ns
    except FileNotFoundError:
        return None
    if _cache.get("stamp") != stamp:
        entry = json.loads(manifest.read_text())[ENTRY]
        _cache["assets"] = {
            "js": f"demo/{entry['file']}",
            "css": [f"demo/{path}" for path in entry.get("css", [])],
        }
        _cache["stamp"] = stamp
    assets: dict[str, Any] = _cache["assets"]
    return assets


@ensure_csrf_cookie
def chat_page(request: HttpRequest) -> HttpResponse:
    """The chat page; a page that says how to build it when it is missing.

    ``/?transport=ws``: the page's chats go over the WebSocket, whose
    handshake carries the session cookie but cannot set one, so an
    anonymous visitor gets their session here (over HTTP the first chat
    message makes it)."""
    if request.GET.get("transport") == "ws" and request.session.session_key is None:
        request.session.save()
    assets = built_assets()
    context = {
        "assets": assets,
        "chat_url": reverse("uistream:chat"),
        "conversations_url": reverse("uistream:conversation-list"),
        "runs_url": reverse("uistream:run-list"),
        "admin_url": reverse("admin:index"),
        # ``/?agent=<fw>``: the page talks to that framework's chat instead.
        "agent_urls": {fw: reverse(f"agents:{fw}-chat") for fw in FRAMEWORKS},
        "csrf_cookie_name": settings.CSRF_COOKIE_NAME,
    }
    return render(request, "demo/index.html", context, status=200 if assets else 503)
