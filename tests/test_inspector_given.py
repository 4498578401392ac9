"""The admin shows who owns a run and what it was given: the owner on the
run list and the run page (a user linked, a visitor by a fingerprint of
the session, never its key), and on the run page the model, the
transport, the system prompt, the tools offered with their descriptions
and schemas, and the messages sent, as stored when the run started.

Real runs through the views (``ChatClient``, ``SocketChatClient``), a
scripted model or ``tests.context_views``' echo model; the admin read
with Django's async test client, as staff.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated, Any

import pytest
from asgiref.sync import sync_to_async
from channels.auth import AuthMiddlewareStack
from channels.routing import URLRouter
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import AsyncClient, Client
from django.test.utils import CaptureQueriesContext
from django.urls import path, reverse

from uistream_app.models import Conversation, Run
from uistream_app.owners import Owner
from uistream_app.runs import Tool
from uistream_app.testing import AGUIClient, ChatClient, ScriptedModel, SocketChatClient, call, user_message
from uistream_app.views import ChatView

from .context_views import ContextEchoModel, PerUserConsumer
from .live.conftest import redis_config  # noqa: F401  (fixture)
from .test_admin import admin_client, staff  # noqa: F401  (fixtures)
from .test_celery_executor import Stack, settled, stack  # noqa: F401  (fixture)
from .test_chat_http import read_chunks, wait_for
from .test_files import data_url, media_root, png  # noqa: F401  (fixture)
from .test_turn_context import APP as CONTEXT_APP
from .test_turn_context import login
from .urls import ScriptedAdapter
from .urls import urlpatterns as test_urlpatterns

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls(__name__)]

HOSTILE_PROMPT = "You help with orders. </pre><script>alert('prompt')</script>"
HOSTILE_DESCRIPTION = "Look up an order. <img src=x onerror=alert('tool')>"


def lookup_order(order_id: Annotated[str, "The order's id, </textarea><b>like A-1</b>"]) -> dict[str, Any]:
    """Look up an order."""
    return {"order": order_id, "status": "shipped"}


class OrdersView(ChatView):
    """A support chat whose prompt and tool description hold markup."""

    model = ContextEchoModel()
    system_prompt = HOSTILE_PROMPT
    tools = (Tool(lookup_order, description=HOSTILE_DESCRIPTION),)


def order_model() -> ScriptedModel:
    """Each turn: look the order up, then say what the tool said."""
    return ScriptedModel([call("lookup_order", {"order_id": "A-1"}, id="call_a1")], "Order A-1 has shipped.")


class ToolCallingView(ChatView):
    model = order_model
    system_prompt = "You track orders."
    tools = (Tool(lookup_order),)


class UndescribedAdapter(ScriptedAdapter):
    """An adapter whose framework moved what ``describe`` reads."""

    def describe(self) -> Any:
        raise AttributeError("no such attribute any more")


urlpatterns = [
    *test_urlpatterns,
    path("test-given/orders", OrdersView.as_view()),
    path("test-given/tracking", ToolCallingView.as_view()),
    path("test-given/undescribed", ChatView.as_view(agent=UndescribedAdapter(object()))),
]


async def a_user(username: str, *, staff: bool = False) -> Any:
    return await get_user_model().objects.acreate_user(username, password="pw", is_staff=staff)


async def signed_in(path: str, user: Any) -> ChatClient:
    chat = ChatClient(path)
    await chat.aforce_login(user)
    return chat


async def staff_client() -> AsyncClient:
    client = AsyncClient()
    root = await get_user_model().objects.acreate_superuser("root", "root@example.com", "pw")
    await client.aforce_login(root)
    return client


async def page(client: AsyncClient, run_id: str | None) -> str:
    response = await client.get(reverse("admin:uistream_app_run_change", args=[run_id]))
    assert response.status_code == 200
    return response.content.decode()


def section(html: str, anchor: str) -> str:
    """The inspector's ``<section id=anchor>``."""
    match = re.search(rf'<section id="{anchor}".*?</section>', html, re.DOTALL)
    assert match is not None, f"no section {anchor}"
    return match.group(0)


def escaped(text: str) -> str:
    """``text`` as Django's templates escape it."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("'", "&#x27;")


def fingerprint(session_key: str) -> str:
    return hashlib.sha256(session_key.encode()).hexdigest()[:12]


# -- per user ---------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_each_users_run_shows_the_tools_prompt_model_and_transport_it_was_given() -> None:
    ada = await a_user("ada", staff=True)
    bob = await a_user("bob")
    admin = await staff_client()
    run_list = reverse("admin:uistream_app_run_changelist")

    by_ada = await (await signed_in("/test-per-user/chat", ada)).send("hi")
    assert by_ada.ok, by_ada.error
    list_queries = await sync_to_async(run_list_queries)()
    by_bob = await (await signed_in("/test-per-user/chat", bob)).send("hello there")
    assert by_bob.ok, by_bob.error

    given = section(await page(admin, by_ada.run_id), "given")
    assert '<code class="uistream-tool-name">get_weather</code>' in given
    assert '<code class="uistream-tool-name">refund_order</code>' in given
    assert "Refund an order (staff only)." in given
    assert "&quot;order_id&quot;" in given  # its input schema
    assert "user=ada transport=http worker=False request=ASGIRequest plan=-" in given
    assert "context-echo" in given
    assert '<code class="uistream-transport">http</code>' in given
    assert "run on a worker" not in given
    summary = section(await page(admin, by_ada.run_id), "summary")
    assert f"user {ada.pk} (ada)" in summary
    assert reverse("admin:auth_user_change", args=[ada.pk]) in summary
    assert '<pre class="uistream-sent-text">hi</pre>' in summary

    given = section(await page(admin, by_bob.run_id), "given")
    assert '<code class="uistream-tool-name">get_weather</code>' in given
    assert "refund_order" not in given
    assert "user=bob transport=http" in given
    assert '<pre class="uistream-sent-text">hello there</pre>' in await page(admin, by_bob.run_id)

    # The run list names each run's owner, linked, in as many queries for two owners as for one.
    listed = (await admin.get(run_list)).content.decode()
    for user in (ada, bob):
        assert f'href="{reverse("admin:auth_user_change", args=[user.pk])}">user {user.pk} ({user.username})</a>' in (
            listed
        )
    assert await sync_to_async(run_list_queries)() == list_queries


def run_list_queries() -> int:
    """The queries of one GET of the run list, as root, after a first one
    (which fills the process's caches)."""
    client = Client()
    client.force_login(get_user_model().objects.get(username="root"))
    url = reverse("admin:uistream_app_run_changelist")
    assert client.get(url).status_code == 200
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


@pytest.mark.asyncio
async def test_an_anonymous_run_shows_a_fingerprint_never_the_session_key() -> None:
    visitor = ChatClient("/test-per-user/chat")
    result = await visitor.send("hi")
    assert result.ok, result.error
    key = visitor.client.cookies[settings.SESSION_COOKIE_NAME].value
    assert len(key) == 32
    admin = await staff_client()
    conversation = await Conversation.objects.aget(client_id=visitor.chat_id)  # the admin names it by its key
    pages = [
        await page(admin, result.run_id),
        (await admin.get(reverse("admin:uistream_app_run_changelist"))).content.decode(),
        (await admin.get(reverse("admin:uistream_app_conversation_changelist"))).content.decode(),
        (await admin.get(reverse("admin:uistream_app_conversation_change", args=[conversation.pk]))).content.decode(),
    ]
    for html in pages:
        assert f"anonymous visitor {fingerprint(key)}" in html
        assert key[:8] not in html  # not the key, nor a part of it
    assert Owner.of_session(key).describe() == f"anonymous visitor {fingerprint(key)}"


# -- escaping, and what an old run was given -------------------------------------------------------


@pytest.mark.asyncio
async def test_a_hostile_prompt_and_tool_description_are_shown_as_text() -> None:
    result = await ChatClient("/test-given/orders").send("where is <b>my</b> order?")
    assert result.ok, result.error
    html = await page(await staff_client(), result.run_id)
    given = section(html, "given")
    assert escaped(HOSTILE_PROMPT) in given
    assert escaped(HOSTILE_DESCRIPTION) in given
    assert escaped("The order's id, </textarea><b>like A-1</b>") in given
    for raw in ("<script>alert('prompt')", "<img src=x onerror", "</textarea><b>like", "<b>my</b>"):
        assert raw not in html, raw
    assert "where is &lt;b&gt;my&lt;/b&gt; order?" in section(html, "summary")


@pytest.mark.asyncio
async def test_an_old_run_keeps_the_prompt_and_tools_it_was_given(monkeypatch: pytest.MonkeyPatch) -> None:
    chat = ChatClient("/test-given/orders")
    old = await chat.send("first")
    assert old.ok, old.error
    monkeypatch.setattr(OrdersView, "system_prompt", "A new prompt for new runs.")
    monkeypatch.setattr(OrdersView, "tools", ())
    new = await chat.send("second")
    assert new.ok, new.error
    admin = await staff_client()
    then = section(await page(admin, old.run_id), "given")
    assert escaped(HOSTILE_PROMPT) in then
    assert "A new prompt for new runs." not in then
    assert '<code class="uistream-tool-name">lookup_order</code>' in then
    now = section(await page(admin, new.run_id), "given")
    assert "A new prompt for new runs." in now
    assert "lookup_order" not in now


@pytest.mark.asyncio
async def test_the_messages_sent_show_tool_calls_results_and_earlier_turns() -> None:
    chat = ChatClient("/test-given/tracking")
    first = await chat.send("where is A-1?")
    assert first.text == "Order A-1 has shipped.", first.error
    second = await chat.send("and now?")
    assert second.ok, second.error

    stored = await Run.objects.aget(pk=second.run_id)
    # The second turn's model was sent the prompt, then the first turn whole, then the question.
    assert [m.get("role") for m in stored.history["sent"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert stored.history["sent"][0] == {"role": "system", "system_prompt": True}
    admin = await staff_client()
    history = section(await page(admin, second.run_id), "summary")
    assert '<pre class="uistream-sent-text">where is A-1?</pre>' in history
    assert "<code>lookup_order</code> <code>{&quot;order_id&quot;: &quot;A-1&quot;}</code>" in history
    assert '<li class="uistream-sent-tool"><span class="uistream-role">tool</span> <code>lookup_order</code>' in history
    assert "&quot;status&quot;: &quot;shipped&quot;" in history
    assert '<pre class="uistream-sent-text">Order A-1 has shipped.</pre>' in history
    assert '<pre class="uistream-sent-text">and now?</pre>' in history
    assert "the system prompt (under" in history
    # The first run was sent its own turn only.
    earlier = section(await page(admin, first.run_id), "summary")
    assert "where is A-1?" in earlier
    assert "and now?" not in earlier


@pytest.mark.asyncio
async def test_a_file_is_stored_by_reference_never_its_bytes(media_root: Any) -> None:
    picture = png(3000)
    encoded = data_url("image/png", picture)
    files = [{"mediaType": "image/png", "url": encoded, "filename": "cat.png"}]
    result = await ChatClient("/test-given/orders").send(user_message("what is in <this> picture?", files=files))
    assert result.ok, result.error
    stored = await Run.objects.aget(pk=result.run_id)
    (user,) = [m for m in stored.history["sent"] if m.get("role") == "user"]
    (file,) = user["files"]
    assert file["filename"] == "cat.png"
    assert file["media_type"] == "image/png"
    assert file["size"] == len(picture)
    assert re.fullmatch(r"/api/files/[0-9a-f-]{36}", file["url"]), file
    assert encoded.split(",", 1)[1][:40] not in json.dumps(stored.history)
    html = await page(await staff_client(), result.run_id)
    assert f"<code>cat.png</code> image/png, {len(picture)} bytes <code>{file['url']}</code>" in html
    assert encoded.split(",", 1)[1][:40] not in html


# -- other transports -------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_websocket_run_shows_websocket() -> None:
    application = AuthMiddlewareStack(URLRouter([path("ws/per-user/", PerUserConsumer.as_asgi())]))
    ada = await a_user("ada", staff=True)
    async with SocketChatClient(application, "/ws/per-user/") as socket:
        await socket.aforce_login(ada)
        result = await socket.send("hi over the socket")
    assert result.ok, result.error
    html = await page(await staff_client(), result.run_id)
    given = section(html, "given")
    assert '<code class="uistream-transport">websocket</code>' in given
    assert "user=ada transport=websocket worker=False request=SocketRequest" in given
    assert '<code class="uistream-tool-name">refund_order</code>' in given
    assert '<pre class="uistream-sent-text">hi over the socket</pre>' in html


@pytest.mark.asyncio
async def test_an_agui_run_shows_agui() -> None:
    agent = AGUIClient("/test-per-user/agui")
    await agent.aforce_login(await a_user("bob"))
    result = await agent.run("hi over AG-UI", forwardedProps={"plan": "pro"})
    assert result.ok, result.error
    run = await Run.objects.aget(conversation__client_id=agent.thread_id)
    given = section(await page(await staff_client(), str(run.pk)), "given")
    assert '<code class="uistream-transport">agui</code>' in given
    assert "user=bob transport=agui worker=False request=ASGIRequest plan=pro" in given
    assert "refund_order" not in given


@pytest.mark.asyncio
async def test_an_agent_run_says_the_agent_chose_its_tools() -> None:
    result = await ChatClient("/test-agent/chat").send("wipe the disk")
    assert result.ok, result.error
    html = await page(await staff_client(), result.run_id)
    given = section(html, "given")
    assert "scripted:object" in given  # the adapter, by its name
    assert "the agent chooses its own instructions and tools; this adapter does not tell them" in given
    assert '<pre class="uistream-sent-text">wipe the disk</pre>' in section(html, "summary")


def test_a_worker_run_shows_the_worker_and_the_transport_the_turn_came_over(stack: Stack, admin_client: Client) -> None:
    base, _ = stack.web(app=CONTEXT_APP, EXECUTOR="celery")
    stack.worker()
    browser = login(base, "ada", staff=True)
    with browser.client.stream(
        "POST",
        "/test-per-user/chat",
        json=browser.chat_body("given-on-worker", "hi from afar"),
        headers={"X-CSRFToken": browser.token},
    ) as response:
        assert response.status_code == 200
        _, done = read_chunks(response)
    assert done
    wait_for(lambda: settled("given-on-worker"), "the run to be stored")
    run = Run.objects.get(conversation__client_id="given-on-worker")
    html = admin_client.get(reverse("admin:uistream_app_run_change", args=[run.pk])).content.decode()
    given = section(html, "given")
    assert '<code class="uistream-transport">http</code>' in given
    assert "run on a worker" in given
    # What the worker's hooks chose there (no request on a worker).
    assert "user=ada transport=http worker=True request=none plan=-" in given
    assert '<code class="uistream-tool-name">refund_order</code>' in given
    assert '<pre class="uistream-sent-text">hi from afar</pre>' in html


@pytest.mark.asyncio
async def test_an_adapter_that_cannot_describe_its_agent_does_not_fail_the_run() -> None:
    result = await ChatClient("/test-given/undescribed").send("wipe the disk")
    assert result.ok, result.error
    assert result.text == "I will ask first."
    run = await Run.objects.aget(pk=result.run_id)
    assert run.status == "completed"
    assert run.setup["agent"]["note"] == "the adapter could not describe the agent (AttributeError)"
