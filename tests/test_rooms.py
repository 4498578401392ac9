"""The rooms keep their promises (docs/architecture.md, "Rooms"): no two
modules share a name, the faces define nothing and hand on the rooms' own
objects, and every path the README documents still imports.
"""

from __future__ import annotations

import ast
import importlib
from collections import defaultdict

import pytest

from .conftest import ROOT

PACKAGE = ROOT / "uistream_app"

#: Names two modules may share, and why: Django's own names in the API's
#: sub-app (``api/views.py``, ``api/urls.py`` beside the app's), and the
#: protocol's public paths (``protocol.events`` and ``protocol.agui.events``
#: are the neutral events and AG-UI's; ``runs.messages`` and
#: ``protocol.agui.messages`` keep their documented names).
SHARED_NAMES = {"__init__", "views", "urls", "events", "messages"}

FACES = {
    "asgi": {
        "CSRFOriginValidator": "transport.origin_check",
        "bounded_threads": "lifecycle.threads",
        "limit_request_bodies": "transport.body_limits",
    },
    "consumers": {
        "ChatConsumer": "transport.chat_consumer",
        # The frames' names it always offered: protocol.ws's.
        **dict.fromkeys(
            [
                "CLOSE_MESSAGE_TOO_BIG",
                "CLOSE_POLICY_VIOLATION",
                "PRIVATE_CLOSE_BASE",
                "AbortFrame",
                "ChatFrameRenderer",
                "FrameError",
                "ResumeFrame",
                "SendFrame",
                "check_frame",
            ],
            "protocol.ws",
        ),
    },
    "views": {
        "AGUIView": "transport.agui_views",
        "AGUI_SSE_HEADERS": "transport.agui_views",
        "CHAT_ID_HEADER": "transport.chat_views",
        "ChatQueueView": "transport.chat_views",
        "ChatSteerView": "transport.chat_views",
        "ChatStopView": "transport.chat_views",
        "ChatStreamView": "transport.chat_views",
        "ChatView": "transport.chat_views",
        "FileView": "transport.file_views",
        "RequestContext": "transport.pipeline",
        "SSE_HEADERS": "transport.pipeline",
        "StoredMessageStreamView": "transport.chat_views",
        "StreamView": "transport.pipeline",
        "TAIL_INDEX_HEADER": "transport.chat_views",
        "csrf_token_view": "transport.chat_views",
    },
}

#: The import paths README.md and docs/ tell a project to write.
DOCUMENTED = [
    "uistream_app.views.ChatView",
    "uistream_app.views.ChatStreamView",
    "uistream_app.views.ChatStopView",
    "uistream_app.views.AGUIView",
    "uistream_app.consumers.ChatConsumer",
    "uistream_app.asgi.bounded_threads",
    "uistream_app.asgi.limit_request_bodies",
    "uistream_app.middleware.SessionMiddleware",
    "uistream_app.middleware.OnTheLoop",
    "uistream_app.policies.ChatRateThrottle",
    "uistream_app.policies.AllowAnonymousSessions",
    "uistream_app.history.LastMessages",
    "uistream_app.history.HistoryStrategy",
    "uistream_app.hooks.ChatHooks",
    "uistream_app.errors.Codes",
    "uistream_app.owners.Owner",
    "uistream_app.testing.ScriptedModel",
    "uistream_app.runs.ChatModel",
    "uistream_app.runs.ModelError",
    "uistream_app.runs.ui_to_model_messages",
    "uistream_app.runs.openai.OpenAIChatModel",
    "uistream_app.protocol.ui.encoder.UIMessageEncoder",
    "uistream_app.recording.LogWriter",
    "uistream_app.recording.iter_log",
    "uistream_app.lifecycle.runner.Runner",
    "uistream_app.lifecycle.executors.CeleryRunner",
    "uistream_app.lifecycle.executors.celery_options",
    "uistream_app.lifecycle.attachments.attach_files",
    "uistream_app.tasks.execute_run_task",
]


def test_no_two_modules_share_a_name() -> None:
    where = defaultdict(list)
    for path in PACKAGE.rglob("*.py"):
        if "migrations" not in path.parts:
            where[path.stem].append(str(path.relative_to(PACKAGE)))
    shared = {name: sorted(paths) for name, paths in where.items() if len(paths) > 1 and name not in SHARED_NAMES}
    assert not shared, shared


@pytest.mark.parametrize("face", sorted(FACES))
def test_a_face_defines_nothing(face: str) -> None:
    tree = ast.parse((PACKAGE / f"{face}.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if isinstance(node, ast.ImportFrom):
            continue
        assert isinstance(node, ast.Assign), f"{face}.py: {ast.unparse(node)[:80]}"
        assert [t.id for t in node.targets if isinstance(t, ast.Name)] == ["__all__"], ast.unparse(node)[:80]


@pytest.mark.parametrize("face", sorted(FACES))
def test_a_face_hands_on_the_rooms_objects(face: str) -> None:
    module = importlib.import_module(f"uistream_app.{face}")
    assert sorted(module.__all__) == sorted(FACES[face])
    for name, home in FACES[face].items():
        assert getattr(module, name) is getattr(importlib.import_module(f"uistream_app.{home}"), name)


@pytest.mark.parametrize("path", DOCUMENTED)
def test_a_documented_path_imports(path: str) -> None:
    module, _, name = path.rpartition(".")
    assert getattr(importlib.import_module(module), name) is not None
