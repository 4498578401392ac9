"""A ``DATABASE_URL=sqlite:///…`` server takes a burst of new chats: it
gets the default SQLite database's options (WAL, immediate transactions,
a busy timeout), without which most of a burst fails with "database is
locked"."""

from __future__ import annotations

import runpy
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.db import connection

from uistream_app.models import Run

from .server import demo_server
from .test_chat_http import Browser, SSEStream

pytestmark = pytest.mark.django_db(transaction=True)

SETTINGS = Path(__file__).resolve().parent.parent / "demo_project" / "settings.py"


def test_a_sqlite_url_gets_the_default_databases_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    default = runpy.run_path(str(SETTINGS))["DATABASES"]["default"]
    monkeypatch.setenv("DATABASE_URL", "sqlite:////srv/chats.sqlite3")
    from_url = runpy.run_path(str(SETTINGS))["DATABASES"]["default"]
    assert from_url["NAME"] == "/srv/chats.sqlite3"
    assert from_url["OPTIONS"] == default["OPTIONS"]
    assert "journal_mode=WAL" in from_url["OPTIONS"]["init_command"]


def test_twenty_new_chats_at_once_on_a_sqlite_url_all_succeed() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("about a SQLite DATABASE_URL")
    env = {
        "DJANGO_SETTINGS_MODULE": "demo_project.settings",
        "DATABASE_URL": f"sqlite:///{connection.settings_dict['NAME']}",
        "UISTREAM_DEMO_DELAY_MS": "1",
    }
    with demo_server("daphne", env) as server:
        browsers = [Browser(server.url) for _ in range(20)]

        def chat(i: int) -> tuple[int, list[dict], bool]:
            with browsers[i].stream(f"burst-{i}", "count to 20") as response:
                if response.status_code != 200:
                    return response.status_code, [], False
                chunks, done = SSEStream(response).read()
                return 200, chunks, done

        with ThreadPoolExecutor(20) as pool:
            results = list(pool.map(chat, range(20)))
    failed = [(i, status, chunks[-1:]) for i, (status, chunks, done) in enumerate(results) if not done]
    assert failed == []
    assert all(chunks[-1]["type"] == "finish" for _, chunks, _ in results)
    assert Run.objects.filter(status="completed").count() == 20
