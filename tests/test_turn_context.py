"""Hooks that know who is asking: the same ``TurnContext`` on every path.

``tests.context_views`` gives every user the weather tool and staff also
the refund tool (``get_tools(context)`` reads ``context.owner.user``), and
its model answers with what it was given. Through real servers (daphne in
a subprocess) and the real clients (ai@7's ``DefaultChatTransport`` and
``WebSocketChatTransport``, ``@ag-ui/client``'s ``HttpAgent``), with runs
in the web process and on a real Celery worker, each user gets the same
tools on HTTP, the WebSocket and AG-UI. In-process: the extra keys reach
``context.extra``, an override written without a context still works (and
warns), and a hook's failure once the run is prepared is the run's (on a
worker too), not a run left running.
"""

from __future__ import annotations

import json
import subprocess
import warnings
from typing import Any, ClassVar

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import AsyncClient, Client, override_settings
from django.urls import path

from uistream_app.hooks import ChatHooks, TurnContext
from uistream_app.models import Message, Run
from uistream_app.owners import Owner
from uistream_app.testing import ScriptedModel
from uistream_app.transport.chat_request import ChatRequest, chat_turn
from uistream_app.views import ChatView

from .conftest import JS_DIR
from .live.conftest import redis_config  # noqa: F401  (fixture)
from .test_agui_http import run_client as run_agui_client
from .test_celery_executor import Stack, settled, stack  # noqa: F401  (fixture)
from .test_chat_http import Browser, read_chunks, wait_for
from .test_chat_real_client import run_client as run_chat_client

pytestmark = pytest.mark.django_db(transaction=True)

APP = "tests.context_asgi:application"


def login(base: str, username: str, *, staff: bool) -> Browser:
    """A page of ``base`` signed in as a new user (the session shared
    through the database)."""
    user = get_user_model().objects.create_user(username, password="pw", is_staff=staff)
    client = Client()
    client.force_login(user)
    browser = Browser(base)
    browser.client.cookies.set(settings.SESSION_COOKIE_NAME, client.cookies[settings.SESSION_COOKIE_NAME].value)
    return browser


def cookie_of(browser: Browser) -> str:
    return "; ".join(f"{name}={value}" for name, value in browser.client.cookies.items())


def ws_send(node: str, base: str, browser: Browser, chat_id: str, text: str) -> dict[str, Any]:
    args = {
        "scenario": "send",
        "url": base.replace("http://", "ws://") + "/ws/per-user/",
        "origin": base,
        "cookie": cookie_of(browser),
        "chatId": chat_id,
        "text": text,
    }
    result = subprocess.run(
        [node, str(JS_DIR / "ws_client.mjs"), json.dumps(args)], capture_output=True, text=True, cwd=JS_DIR, timeout=90
    )
    assert result.returncode == 0, result.stderr
    out: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    return out


def answer_of(messages: list[dict[str, Any]]) -> str:
    assistant = [m for m in messages if m["role"] == "assistant"][-1]
    return "".join(p["text"] for p in assistant["parts"] if p["type"] == "text")


def agui_answer(out: dict[str, Any]) -> str:
    run = out["runs"][-1]
    assert run["error"] is None, run
    assert run["runError"] is None, run
    assistant = [m for m in out["messages"] if m["role"] == "assistant"][-1]
    content = assistant["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def answers_of_every_transport(node: str, base: str, browser: Browser, tag: str) -> dict[str, str]:
    """What the model said on each transport, for one user."""
    http = run_chat_client(
        node, base, browser, api="/test-per-user/chat", chatId=f"{tag}-http", version=7, steps=[{"send": "hi"}]
    )
    assert http["error"] is None, http
    socket = ws_send(node, base, browser, f"{tag}-ws", "hi")
    assert socket["status"] == "ready", socket
    agui = run_agui_client(
        node,
        browser,
        f"{base}/test-per-user/agui",
        f"{tag}-agui",
        [{"text": "hi", "messageId": "u1", "runId": "r1", "forwardedProps": {"plan": "pro"}}],
    )
    answers = {
        "http": answer_of(http["messages"]),
        "websocket": answer_of(socket["messages"]),
        "agui": agui_answer(agui),
    }
    wait_for(lambda: all(settled(f"{tag}-{kind}") for kind in ("http", "ws", "agui")), "the runs to be stored")
    return answers


@pytest.mark.parametrize("executor", ["inprocess", "celery"])
def test_a_users_tools_are_the_same_on_every_transport_and_executor(node: str, stack: Stack, executor: str) -> None:
    base, _ = stack.web(app=APP, EXECUTOR=executor)
    if executor == "celery":
        stack.worker()
    staff = answers_of_every_transport(node, base, login(base, f"ada-{executor}", staff=True), f"staff-{executor}")
    member = answers_of_every_transport(node, base, login(base, f"bob-{executor}", staff=False), f"member-{executor}")

    worker = executor == "celery"
    requests = {"http": "ASGIRequest", "websocket": "SocketRequest", "agui": "ASGIRequest"}
    for transport in ("http", "websocket", "agui"):
        # The request is the transport's; on a worker there is none.
        request = "none" if worker else requests[transport]
        plan = "pro" if transport == "agui" else "-"
        assert staff[transport] == (
            f"user=ada-{executor} transport={transport} worker={worker} request={request} plan={plan}"
            " | tools: get_weather, refund_order"
        )
        assert member[transport] == (
            f"user=bob-{executor} transport={transport} worker={worker} request={request} plan={plan}"
            " | tools: get_weather"
        )
    if worker:
        # A hook that fails on the worker fails the run there: in-band,
        # masked, stored; the chat is free again.
        browser = login(base, "cy", staff=False)
        with browser.client.stream(
            "POST",
            "/test-per-user/refusing",
            json=browser.chat_body("refused-on-worker", "hi"),
            headers={"X-CSRFToken": browser.token},
        ) as response:
            assert response.status_code == 200
            chunks, done = read_chunks(response)
        assert done
        assert chunks[-1] == {"type": "error", "errorText": "An error occurred."}
        wait_for(lambda: settled("refused-on-worker"), "the run to be stored")
        run = Run.objects.get(conversation__client_id="refused-on-worker")
        assert run.status == "failed"
        assert "no tools on a worker" in run.error_detail
    # Each turn stored once, as the client read it.
    assert Run.objects.filter(conversation__client_id=f"staff-{executor}-http", status="completed").count() == 1
    stored = Message.objects.get(conversation__client_id=f"staff-{executor}-ws", role="assistant")
    assert "refund_order" in stored.parts[-1]["text"]


# -- in-process ------------------------------------------------------------------------------------


class _Recording(ChatView):
    """Records the contexts its hooks were given."""

    seen: ClassVar[list[tuple[str, TurnContext]]] = []

    def get_tools(self, context: TurnContext) -> list[Any]:
        self.seen.append(("get_tools", context))
        return []

    def get_max_steps(self, context: TurnContext) -> int:
        self.seen.append(("get_max_steps", context))
        return 3


@pytest.mark.asyncio
async def test_every_hook_of_one_turn_gets_the_same_context_once() -> None:
    _Recording.seen = []
    view = _Recording(model=ScriptedModel("Hello."))
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    chat = ChatRequest("ctx-once", [message], extra={"plan": "team"})
    context = TurnContext(Owner.of_session("s" * 32), "ctx-once", "http", chat.extra)
    handle = await view.start_turn(chat_turn(chat), context, version=7)
    await handle.task
    assert [name for name, _ in _Recording.seen] == ["get_tools", "get_max_steps"]
    assert all(seen is context for _, seen in _Recording.seen)
    assert context.extra["plan"] == "team"
    with pytest.raises(TypeError):
        context.extra["plan"] = "free"  # type: ignore[index]
    assert handle.prepared.setup.context is context


def test_an_override_without_a_context_still_works_and_says_what_to_write() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        class OldStyle(ChatView):
            def get_system_prompt(self) -> str:
                return "old " + str(super().get_system_prompt())

            system_prompt = "prompt"

    assert [w.category for w in caught] == [DeprecationWarning]
    assert "OldStyle.get_system_prompt() takes no context: write `def get_system_prompt(self, context)`" in str(
        caught[0].message
    )
    assert caught[0].filename == __file__  # it points at the class statement
    context = TurnContext(Owner(), "c", "http")
    assert OldStyle().get_system_prompt(context) == "old prompt"
    assert OldStyle().setup_turn(context).system_prompt == "old prompt"


def test_an_old_style_hook_on_a_mixin_is_adapted_too() -> None:
    class OldMixin:
        def get_max_steps(self) -> int:
            return 2

    with pytest.warns(DeprecationWarning, match=r"Mixed\.get_max_steps\(\) takes no context"):

        class Mixed(OldMixin, ChatView):
            pass

    assert Mixed().setup_turn(TurnContext(Owner(), "c", "websocket")).max_steps == 2


def test_a_new_style_override_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        class NewStyle(ChatHooks):
            def get_system_prompt(self, context: TurnContext) -> str:
                return f"for {context.chat_id}"

    assert NewStyle().get_system_prompt(TurnContext(Owner(), "c-1", "agui")) == "for c-1"


class _FailingSource(ChatView):
    def get_source(self, history: Any, run: Any, model: Any) -> Any:
        raise RuntimeError("the source could not be built")


@pytest.mark.asyncio
async def test_a_source_that_cannot_be_built_fails_the_prepared_run() -> None:
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    chat = ChatRequest("no-source", [message])
    view = _FailingSource(model=ScriptedModel("never"))
    handle = await view.start_turn(
        chat_turn(chat), TurnContext(Owner.of_session("s" * 32), "no-source", "http"), version=7
    )
    await handle.task
    run = await Run.objects.aget(pk=handle.run.pk)
    assert run.status == "failed"
    assert "the source could not be built" in run.error_detail


class _BodyReading(ChatView):
    """Records what a hook finds of the request's body."""

    seen: ClassVar[list[tuple[bytes, dict[str, Any]]]] = []

    def get_max_steps(self, context: TurnContext) -> int:
        assert context.request is not None
        self.seen.append((context.request.body, dict(context.extra)))
        return 3


@pytest.mark.asyncio
async def test_a_hook_finds_the_bodys_fields_in_the_context_and_its_bytes_let_go() -> None:
    """The chat view lets go of the body's bytes once it has parsed them (a
    big body would otherwise be held twice while its turn is stored): a
    hook reads the body's own keys from ``context.extra``."""
    _BodyReading.seen = []
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    body = {"id": "ctx-body", "messages": [message], "plan": "team"}
    client = AsyncClient()
    with override_settings(ROOT_URLCONF=__name__):
        response = await client.post("/body-reading", data=json.dumps(body), content_type="application/json")
        assert response.status_code == 200
        async for _ in response.streaming_content:  # type: ignore[attr-defined]
            pass
    assert _BodyReading.seen == [(b"", {"plan": "team"})]
    stored = await Message.objects.filter(conversation__client_id="ctx-body", role="user").aget()
    assert stored.parts == message["parts"]


urlpatterns = [path("body-reading", _BodyReading.as_view(model=ScriptedModel("Hello.")))]
