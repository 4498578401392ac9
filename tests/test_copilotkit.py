"""CopilotKit, a client nobody here wrote, against the demo's AG-UI endpoint
(``/api/agui``, ``demo_project.agui.DemoAGUIView``).

The demo runs under uvicorn in its own process, on its own SQLite file and
its offline model. In front of it, CopilotKit's runtime
(``tests/copilotkit/runtime.mjs``: ``CopilotRuntime`` with an ``HttpAgent``
pointed at the endpoint, on the runtime's Node listener), driven:

- in Node by CopilotKit's own client core (``tests/copilotkit/runtime.test.mjs``,
  run here with the endpoint's address): a backend tool, the shared state,
  a frontend tool, an interrupt approved and one cancelled;
- in Chromium by a page on CopilotKit's React client
  (``tests/copilotkit/page/``, bundled by esbuild into ``tests/copilotkit/dist/``
  by ``scripts/setup``; the runtime serves it): a person asks, sees the tool
  calls and the state, lets the page run its tool, and approves an email in
  the page (and denies another), and the run goes on.

Each leaves no run ``running``. Needs ``tests/copilotkit/node_modules`` and
the built page (``scripts/setup``), Debian's ``chromium`` and
``playwright``; skipped without them, a failure in CI.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import node_binary
from .server import demo_server
from .test_chat_http import wait_for
from .test_e2e_browser import chromium, demo_env, expect, open_context, require, watch  # noqa: F401  (chromium: fixture)

ROOT = Path(__file__).resolve().parent.parent
KIT = ROOT / "tests" / "copilotkit"
PAGE = KIT / "dist"
#: What keeps CopilotKit's runtime and client from calling home.
QUIET = {"COPILOTKIT_TELEMETRY_DISABLED": "true", "DO_NOT_TRACK": "1"}


class Demo:
    """The demo's AG-UI endpoint, a session of one visitor on it (the
    runtime's: its cookies and CSRF token), and the runs stored."""

    def __init__(self, url: str, database: Path) -> None:
        self.url = url
        self.agui_url = f"{url}/api/agui"
        self.database = database
        with httpx.Client(base_url=url, timeout=20) as client:
            self.csrf = client.get("/api/csrf").json()["csrfToken"]
            self.cookie = "; ".join(f"{k}={v}" for k, v in client.cookies.items())

    def env(self) -> dict[str, str]:
        """What runtime.mjs and runtime.test.mjs read."""
        return {
            **os.environ,
            **QUIET,
            "UISTREAM_AGUI_URL": self.agui_url,
            "UISTREAM_COOKIE": self.cookie,
            "UISTREAM_CSRF": self.csrf,
        }

    def statuses(self, node: bool) -> list[str]:
        """The status of every stored run, oldest first: those of the Node
        test's threads (``ck-node-…``), or (``node=False``) the others."""
        with sqlite3.connect(self.database) as db:
            rows = db.execute(
                "SELECT r.status FROM uistream_app_run r"
                " JOIN uistream_app_conversation c ON c.id = r.conversation_id"
                f" WHERE c.client_id {'' if node else 'NOT '}LIKE 'ck-node-%' ORDER BY r.started_at"
            ).fetchall()
        return [str(status) for (status,) in rows]

    def settled(self, node: bool) -> list[str]:
        """``statuses`` once none of them is ``running`` (a run is stored
        as ended right after its last event is sent)."""
        wait_for(lambda: "running" not in self.statuses(node), "the runs to be stored as ended")
        return self.statuses(node)


@pytest.fixture(scope="module")
def copilotkit_node() -> str:
    """Node.js, with tests/copilotkit installed."""
    binary = node_binary()
    require(binary is not None, "Node.js is needed (apt-get install nodejs npm)")
    require(
        (KIT / "node_modules" / "@copilotkit" / "runtime").is_dir(),
        "tests/copilotkit is not installed: run scripts/setup",
    )
    assert binary is not None
    return binary


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """The demo under uvicorn, on a fresh SQLite file, pacing nothing."""
    workdir = tmp_path_factory.mktemp("copilotkit")
    database = workdir / "db.sqlite3"
    env = demo_env(DATABASE_URL=f"sqlite:///{database}", UISTREAM_DEMO_DELAY_MS="0")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True, capture_output=True
    )
    with demo_server("uvicorn", env) as server:
        yield Demo(server.url, database)


def test_copilotkit_runtime_and_client_core_against_the_endpoint(copilotkit_node: str, demo: Demo) -> None:
    result = subprocess.run(
        [copilotkit_node, "--test", "--test-reporter=spec", "runtime.test.mjs"],
        cwd=KIT,
        env=demo.env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # Every test ran: none skipped for want of the endpoint.
    assert "ℹ pass 4" in result.stdout, result.stdout
    assert "ℹ skipped 0" in result.stdout, result.stdout
    # weather, compute; the frontend tool's two runs; two interrupts, each resumed.
    assert demo.settled(node=True) == ["completed"] * 8


@pytest.fixture
def copilotkit_page(copilotkit_node: str, demo: Demo) -> Iterator[str]:
    """CopilotKit's runtime serving the built page: the page's address."""
    require(
        (PAGE / "app.js").is_file(),
        f"the CopilotKit page is not built ({PAGE / 'app.js'} is missing): run scripts/setup",
    )
    proc = subprocess.Popen(
        [copilotkit_node, "runtime.mjs"],
        cwd=KIT,
        env={**demo.env(), "UISTREAM_PAGE": str(PAGE)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("the CopilotKit runtime did not start: " + (proc.stderr.read() if proc.stderr else ""))
        yield str(json.loads(line)["origin"]) + "/"
    finally:
        proc.kill()
        proc.wait(timeout=10)


def send(page: Any, text: str) -> None:
    """Type ``text`` and send it once the chat takes it: the button says
    "Send" (not "Loading" before the runtime answered, not "Stop" while the
    client connects the agent or a run goes on) and is enabled.

    The chat takes a message by emptying its box. A click that lands as
    the button turns to "Stop" (the client starting to connect the agent,
    seen once on a loaded CI machine) is that button's, and sends nothing:
    the text stays in the box, and the click is made again on "Send". A
    message taken is never sent twice: its box is empty."""
    box = page.get_by_placeholder("Type a message...")
    box.fill(text)
    button = page.get_by_role("button", name="Send", exact=True)
    for attempt in range(3):
        expect(button).to_be_enabled()
        button.click()
        try:
            expect(box).to_have_value("", timeout=5_000)
            break
        except AssertionError:
            if attempt == 2:
                raise
    expect(page.locator(".copilotKitUserMessage", has_text=text)).to_be_visible()


def test_copilotkit_react_page_with_a_tool_the_state_and_an_interrupt(
    chromium: Any,
    demo: Demo,
    copilotkit_page: str,
) -> None:
    context = open_context(chromium)
    page = watch(context.new_page())
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text) if message.type == "error" else None)
    try:
        page.goto(copilotkit_page)
        turns = page.get_by_label("Turns")
        expect(turns).to_have_text("–")

        # A backend tool: its call, input and result in the chat, then the answer.
        send(page, "What's the weather in Paris?")
        weather = page.get_by_label("Tool call get_weather")
        expect(weather.get_by_label("Input")).to_have_text('{"city":"Paris"}')
        expect(weather.get_by_label("Result")).to_contain_text('"city":"Paris"')
        expect(page.get_by_text("In Paris it is")).to_be_visible()
        # The shared state, as the endpoint sent it (snapshot, then delta).
        expect(turns).to_have_text("1")

        # A frontend tool: the page runs it, and the run goes on from its result.
        send(page, "change the background to teal")
        expect(page.locator("main")).to_have_attribute("data-background", "teal")
        background = page.get_by_label("Tool call change_background")
        expect(background.get_by_label("Result")).to_have_text('{"color":"teal"}')
        expect(page.get_by_text("The background is teal now.")).to_be_visible()
        expect(turns).to_have_text("3")  # the call's run and its continuation

        # The interrupt: the run stops for a person; their answer resumes it.
        send(page, "email ada@example.com saying hello")
        approval = page.get_by_role("dialog", name="Approval")
        expect(approval).to_be_visible()
        email = page.get_by_label("Tool call send_email")
        expect(email.get_by_label("Input")).to_have_text('{"to":"ada@example.com","body":"hello"}')
        expect(email.get_by_label("Result")).to_have_count(0)
        expect(turns).to_have_text("4")
        approval.get_by_role("button", name="Approve").click()
        expect(approval).to_have_count(0)
        expect(email.get_by_label("Result")).to_contain_text('"status":"sent"')
        expect(page.get_by_text("Done: the email to ada@example.com is sent")).to_be_visible()
        expect(turns).to_have_text("5")

        # Denied in the page: the call is not run, and the answer says so.
        send(page, "email bob@example.com saying hi")
        approval.get_by_role("button", name="Deny").click()
        expect(approval).to_have_count(0)
        expect(page.get_by_text("I did not run send_email")).to_be_visible()
        denied = page.get_by_label("Tool call send_email").nth(1)
        expect(denied.get_by_label("Input")).to_have_text('{"to":"bob@example.com","body":"hi"}')
        expect(denied.get_by_label("Result")).to_contain_text("denied")
        expect(turns).to_have_text("7")

        assert page.errors == []
        assert console == []
    finally:
        context.close()
    # weather; the frontend tool's run and its continuation; each email's
    # run, which ended waiting for the person, and its continuation.
    assert demo.settled(node=False) == ["completed"] * 7
