"""The demo's process starts without the agent frameworks, MCP and
OpenTelemetry (issue 29: they cost most of an idle process's memory) and
imports each when it is first used: a framework's chat at its first
request, MCP and OpenTelemetry at the first turn.

In a fresh interpreter, the demo's ASGI application (``demo_project.asgi``,
its URLconf loaded as it loads it) on a database of its own, served
in-process through httpx's ASGI transport: what is imported at start-up,
then a chat with the demo model and one with each framework.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

#: The packages a start-up must not import (OpenTelemetry's API: the
#: ``opentelemetry`` namespace package itself has no code, and finding
#: whether the extra is installed imports it).
LAZY = ["pydantic_ai", "langgraph", "agents", "mcp", "opentelemetry.trace"]
#: The demo's framework chats (demo_project/agents/urls.py) and the package each imports.
FRAMEWORKS = {"pydantic-ai": "pydantic_ai", "langgraph": "langgraph", "openai-agents": "agents"}

SCRIPT = """
import asyncio, json, sys, uuid
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
LAZY = {lazy!r}
FRAMEWORKS = {frameworks!r}
loaded = lambda: sorted(name for name in LAZY if name in sys.modules)
import demo_project.asgi
out = {{"start-up": loaded()}}
import httpx
from uistream_app.testing import chat_body, user_message

async def chat(client, path):
    body = chat_body(str(uuid.uuid4()), [user_message("count to 3", id=str(uuid.uuid4()))])
    response = await client.post(path, content=json.dumps(body), headers={{"content-type": "application/json"}})
    assert response.status_code == 200, response.text[:500]
    chunks = [json.loads(f[6:]) for f in response.text.split("\\n\\n") if f.startswith("data: {{")]
    return "".join(c["delta"] for c in chunks if c["type"] == "text-delta")

async def main():
    transport = httpx.ASGITransport(app=demo_project.asgi.application)
    base = "http://localhost"
    async with httpx.AsyncClient(transport=transport, base_url=base, headers={{"origin": base}}) as client:
        client.headers["x-csrftoken"] = (await client.get("/api/csrf")).json()["csrfToken"]
        out["demo"] = [await chat(client, "/api/chat"), loaded()]
        for fw in FRAMEWORKS:
            out[fw] = [await chat(client, f"/api/agents/{{fw}}/chat"), loaded()]

asyncio.run(main())
print(json.dumps(out))
"""


def test_the_demo_starts_without_frameworks_mcp_or_opentelemetry_and_imports_each_when_used(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    pytest.importorskip("opentelemetry.trace")
    settings = tmp_path / "demo_imports_settings.py"
    settings.write_text(
        "from demo_project.settings import *  # noqa: F403\n"
        "from demo_project.settings import DATABASES\n"
        f"DATABASES = {{'default': {{**DATABASES['default'], 'NAME': {str(tmp_path / 'db.sqlite3')!r}}}}}\n"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "demo_imports_settings",
        "PYTHONPATH": os.pathsep.join((str(ROOT), str(tmp_path))),
        "UISTREAM_DEMO_DELAY_MS": "0",
    }
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OPENAI_API_KEY", "OPENAI_MODEL", "ANTHROPIC_API_KEY", "REDIS_URL"):
        env.pop(name, None)
    code = SCRIPT.format(lazy=LAZY, frameworks=list(FRAMEWORKS))
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[:3000]
    out = json.loads(result.stdout.splitlines()[-1])

    assert out["start-up"] == []
    answer, loaded = out["demo"]
    assert answer == "1 2 3"
    assert {"mcp", "opentelemetry.trace"} <= set(loaded)  # the demo's MCP server's tools, the run's span
    assert not set(loaded) & set(FRAMEWORKS.values())
    for fw, package in FRAMEWORKS.items():
        answer, loaded = out[fw]
        assert answer == "1 2 3", fw
        assert package in loaded, fw
