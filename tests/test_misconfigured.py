"""A misconfigured ``MODEL`` under any server: the system check's text in the
house's JSON (500 ``misconfigured``), logged once per process.

daphne and uvicorn run no system checks, so the first chat is where a bad
``UISTREAM["MODEL"]`` shows; it must say what ``manage.py check`` would
(E002, E008, E009, E011), on HTTP, AG-UI and the WebSocket, and through a
real daphne. A factory that is not one (a tool function, a function
returning a dict) is caught by the check where its signature tells, and
by the first request where only its result does.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.test import AsyncClient, override_settings

from uistream_app import hooks
from uistream_app.checks import check_routed_chat_models, check_settings
from uistream_app.models import Conversation, Run
from uistream_app.protocol import events as ev
from uistream_app.testing import chat_body, run_input, user_message

from .server import demo_server, shared_database_url
from .test_consumer import Socket, asession_cookie, send_frame

db = pytest.mark.django_db(transaction=True)

#: The masked text a client gets unless the project exposes errors.
MASKED = "the server is misconfigured: its log says which setting to fix (manage.py check reports it too)"

CALLS: list[str] = []


def get_weather(city: str) -> dict[str, Any]:
    """A tool, named as the model by mistake."""
    CALLS.append("get_weather")
    return {"city": city, "weather": "sunny"}


def weather_report() -> dict[str, Any]:
    """A factory of no arguments annotated with what it returns: not a model."""
    CALLS.append("weather_report")
    return {"weather": "sunny"}


def unannotated_report():  # type: ignore[no-untyped-def]
    """Only calling it tells that it returns no model."""
    CALLS.append("unannotated_report")
    return {"weather": "sunny"}


class EchoModel:
    async def stream(self, messages: Any, tools: Any = (), options: Any = None) -> Any:
        yield ev.TextDelta("echo")
        yield ev.Finish("stop")


def make_echo() -> EchoModel:
    CALLS.append("make_echo")
    return EchoModel()


class NeedsAName:
    """A model class whose instances need an argument ``get_model`` can't give."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def stream(self, messages: Any, tools: Any = (), options: Any = None) -> Any:
        yield ev.Finish("stop")


HERE = "tests.test_misconfigured"
E009 = "is neither a chat model nor a callable returning one"
SHAPE_HINT = (
    "Give a class or object with a stream(messages, tools, options) method, "
    "or a function of no arguments returning one."
)

#: MODEL → (the check's id, the text a request that meets it is answered with).
BAD_MODELS: dict[str, tuple[str | None, str]] = {
    "no.such.Model": (
        "uistream_app.E002",
        "UISTREAM['MODEL'] = 'no.such.Model' cannot be imported: No module named 'no'. "
        "Give the dotted path of a chat model class or factory.",
    ),
    "math.pi": (
        "uistream_app.E009",
        f"UISTREAM['MODEL'] = 'math.pi' {E009}: it is a float, which is neither a model nor callable. {SHAPE_HINT}",
    ),
    f"{HERE}.get_weather": (
        "uistream_app.E009",
        f"UISTREAM['MODEL'] = '{HERE}.get_weather' {E009}: it is called with no arguments, "
        f"and it requires 'city'. {SHAPE_HINT}",
    ),
    f"{HERE}.weather_report": (
        "uistream_app.E009",
        f"UISTREAM['MODEL'] = '{HERE}.weather_report' {E009}: it is annotated to return dict, "
        f"which has no stream() method. {SHAPE_HINT}",
    ),
    f"{HERE}.NeedsAName": (
        "uistream_app.E009",
        f"UISTREAM['MODEL'] = '{HERE}.NeedsAName' {E009}: its instances are made with no arguments, "
        f"and it requires 'name'. {SHAPE_HINT}",
    ),
    # The check can't tell without calling it: the first request does.
    f"{HERE}.unannotated_report": (
        None,
        f"UISTREAM['MODEL'] = '{HERE}.unannotated_report' {E009}: it returned {{'weather': 'sunny'}}, "
        f"which has no stream() method. {SHAPE_HINT}",
    ),
    "anthropic:claude-sonnet-4-5": (
        "uistream_app.E011",
        "UISTREAM['MODEL'] = 'anthropic:claude-sonnet-4-5' cannot be used: 'anthropic:claude-sonnet-4-5' needs "
        "an API key: set ANTHROPIC_API_KEY in the environment. Set ANTHROPIC_API_KEY in the environment of every "
        "process that serves chats (the web server and any worker), or give the model an api_key of your own.",
    ),
}


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """No provider key, nothing logged yet in this process, no factory called."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setattr(hooks, "_reported", set())
    CALLS.clear()


async def post_chat(client: AsyncClient, chat_id: str = "c1") -> Any:
    body = chat_body(chat_id, [user_message("hi")])
    return await client.post("/api/chat", json.dumps(body), content_type="application/json")


# -- the check says it first -------------------------------------------------------------


@pytest.mark.parametrize("model", sorted(BAD_MODELS))
def test_the_check_reports_what_the_request_is_answered(model: str) -> None:
    check_id, text = BAD_MODELS[model]
    with override_settings(UISTREAM={"MODEL": model}):
        messages = check_settings()
    if check_id is None:
        assert messages == []
    else:
        (message,) = messages
        assert message.id == check_id
        assert text.startswith(message.msg)
        assert text.endswith(f" {message.hint}")
    assert CALLS == []  # a factory is inspected, never called by the check


@pytest.mark.parametrize("model", [f"{HERE}.make_echo", f"{HERE}.EchoModel", EchoModel(), make_echo])
def test_a_real_model_or_factory_passes_and_is_not_called(model: object) -> None:
    with override_settings(UISTREAM={"MODEL": model}):
        assert check_settings() == []
    assert CALLS == []


# -- HTTP, AG-UI and the WebSocket answer it ----------------------------------------------


@db
@pytest.mark.asyncio
@pytest.mark.parametrize("model", sorted(BAD_MODELS))
async def test_a_chat_post_is_the_json_500_with_the_checks_text(model: str) -> None:
    _, text = BAD_MODELS[model]
    with override_settings(DEBUG=True, UISTREAM={"MODEL": model, "ALLOW_ANONYMOUS": True}):
        response = await post_chat(AsyncClient())
    assert (response.status_code, response["Content-Type"]) == (500, "application/json")
    assert json.loads(response.content) == {"error": {"code": "misconfigured", "message": text}}
    assert not await Conversation.objects.aexists()  # refused before anything was written


@db
@pytest.mark.asyncio
async def test_model_unset_says_e008_at_the_first_request() -> None:
    with override_settings(UISTREAM={"ALLOW_ANONYMOUS": True}):
        (check,) = check_routed_chat_models()
        with override_settings(DEBUG=True):
            response = await post_chat(AsyncClient())
    assert check.id == "uistream_app.E008"
    message = json.loads(response.content)["error"]["message"]
    assert response.status_code == 500
    assert message.startswith(
        "UISTREAM['MODEL'] is not set, and this chat endpoint has no model of its own: "
        "uistream_app.transport.chat_views.ChatView. Set UISTREAM['MODEL'] to a provider name"
    )
    assert message.endswith(check.hint)


@db
@pytest.mark.asyncio
async def test_masked_without_debug_and_logged_once_per_process(caplog: pytest.LogCaptureFixture) -> None:
    _, text = BAD_MODELS["no.such.Model"]
    client = AsyncClient()
    with override_settings(DEBUG=False, UISTREAM={"MODEL": "no.such.Model", "ALLOW_ANONYMOUS": True}):
        with caplog.at_level(logging.ERROR):
            first, second = await post_chat(client, "c1"), await post_chat(client, "c2")
        with override_settings(UISTREAM={"MODEL": "no.such.Model", "ALLOW_ANONYMOUS": True, "EXPOSE_ERRORS": True}):
            exposed = await post_chat(client, "c3")
    for response in (first, second):
        assert response.status_code == 500
        assert json.loads(response.content) == {"error": {"code": "misconfigured", "message": MASKED}}
    assert json.loads(exposed.content)["error"]["message"] == text
    # One record for the process, and none of Django's per-request "Internal Server Error".
    logged = [(r.name, r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.ERROR]
    assert logged == [("uistream_app.hooks", "ERROR", f"A chat turn cannot start: {text}")]


@db
@pytest.mark.asyncio
async def test_agui_is_the_same_json_500() -> None:
    _, text = BAD_MODELS[f"{HERE}.get_weather"]
    body = run_input("t1", "hi")
    with override_settings(DEBUG=True, UISTREAM={"MODEL": f"{HERE}.get_weather", "ALLOW_ANONYMOUS": True}):
        response = await AsyncClient().post(
            "/api/agui", json.dumps(body), content_type="application/json", headers={"Accept": "text/event-stream"}
        )
    assert response.status_code == 500
    assert json.loads(response.content) == {"error": {"code": "misconfigured", "message": text}}
    assert CALLS == []  # the tool was not called as a factory


@db
@pytest.mark.asyncio
async def test_the_websocket_answers_an_error_frame() -> None:
    _, text = BAD_MODELS[f"{HERE}.unannotated_report"]
    uistream = {"MODEL": f"{HERE}.unannotated_report", "ALLOW_ANONYMOUS": True}
    with override_settings(DEBUG=True, UISTREAM=uistream):
        async with Socket(await asession_cookie()) as page:
            await page.send(send_frame("r1", "chat-m"))
            frames = await page.until("r1")
            # The socket stays open: a second send is answered the same way.
            await page.send(send_frame("r2", "chat-m"))
            again = await page.until("r2")
    assert frames == [{"type": "error", "requestId": "r1", "code": "misconfigured", "errorText": text}]
    assert again[-1]["code"] == "misconfigured"
    assert not await Run.objects.aexists()


# -- under a real daphne, which runs no checks --------------------------------------------

DAPHNE_MODEL = "myproject.chat.get_weather"


@pytest.fixture
def misconfigured_daphne(transactional_db: None) -> Iterator[Any]:
    """One daphne (for the one test that needs it), on the test database,
    serving the test URLs with a MODEL that does not import; its log
    records one a line, level first."""
    env = {
        "DATABASE_URL": shared_database_url(),
        "DJANGO_SETTINGS_MODULE": "tests.server_settings",
        "UISTREAM_TEST_SETTINGS": json.dumps({"MODEL": DAPHNE_MODEL, "ALLOW_ANONYMOUS": True}),
        "UISTREAM_TEST_LOG_LEVELS": "1",
        "DJANGO_DEBUG": "1",
    }
    with demo_server("daphne", env) as server:
        yield server


def test_daphne_answers_json_and_logs_once(misconfigured_daphne: Any) -> None:
    text = (
        f"UISTREAM['MODEL'] = '{DAPHNE_MODEL}' cannot be imported: No module named 'myproject'. "
        "Give the dotted path of a chat model class or factory."
    )
    with httpx.Client(base_url=misconfigured_daphne.url, timeout=20) as client:
        token = client.get("/api/csrf").json()["csrfToken"]
        headers = {"X-CSRFToken": token}
        answers = [
            client.post("/api/chat", json=chat_body("d1", [user_message("hi")]), headers=headers),
            client.post("/api/chat", json=chat_body("d2", [user_message("hi")]), headers=headers),
            client.post("/api/agui", json=run_input("d3", "hi"), headers={**headers, "Accept": "text/event-stream"}),
        ]
    for response in answers:
        assert (response.status_code, response.headers["content-type"]) == (500, "application/json")
        assert response.json() == {"error": {"code": "misconfigured", "message": text}}
    # Three requests, one misconfiguration: one line in the log.
    output = misconfigured_daphne.output()
    errors = [line for line in output.splitlines() if line.startswith("ERROR ")]
    assert errors == [f"ERROR uistream_app.hooks A chat turn cannot start: {text}"]
    assert "Internal Server Error" not in output  # Django's own line per 5xx (DEBUG shows it on the console)
