"""Every malformed or hostile chat request: a 4xx JSON body naming the
problem, and nothing written. Never a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import AsyncClient, RequestFactory, override_settings

from uistream_app.models import Conversation, Message, Run
from uistream_app.protocol.jsonbody import LARGE_JSON_BYTES, is_json
from uistream_app.testing import chat_body, user_message
from uistream_app.transport.pipeline import resolve_sdk_version

pytestmark = pytest.mark.django_db(transaction=True)


def body(**changes: Any) -> dict[str, Any]:
    """useChat's body for "hi" in ``chat-1``, with ``changes``."""
    return {**chat_body("chat-1", "hi"), **changes}


def raw(data: Any) -> bytes:
    return json.dumps(data).encode()


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


JSON = "application/json"

# (name, method, content type, body bytes, status, error code, field)
CASES: list[tuple[str, str, str | None, bytes, int, str, str | None]] = [
    ("empty body", "post", JSON, b"  \n", 400, "empty", None),
    ("not json", "post", JSON, b"{nope", 400, "invalid_json", None),
    ("invalid utf-8", "post", JSON, b'{"id": "\xff\xfe"}', 400, "invalid_json", None),
    ("a json array", "post", JSON, b"[]", 400, "invalid_json", None),
    ("a json string", "post", JSON, b'"hello"', 400, "invalid_json", None),
    # text/plain carrying JSON is accepted (WorkflowChatTransport sends it): test_workflow_transport.py
    ("wrong content type", "post", "text/html", raw(body()), 415, "unsupported_media_type", None),
    ("binary content type", "post", "application/octet-stream", raw(body()), 415, "unsupported_media_type", None),
    ("form encoded", "post", "application/x-www-form-urlencoded", b"id=chat-1", 415, "unsupported_media_type", None),
    # A body without id starts a chat the server names: test_workflow_transport.py
    ("id null", "post", JSON, raw(body(id=None)), 400, "invalid", "id"),
    ("id not a string", "post", JSON, raw(body(id=42)), 400, "invalid", "id"),
    ("id with path characters", "post", JSON, raw(body(id="../admin")), 400, "invalid", "id"),
    ("id too long", "post", JSON, raw(body(id="a" * 129)), 400, "invalid", "id"),
    ("empty id", "post", JSON, raw(body(id="")), 400, "invalid", "id"),
    ("missing messages", "post", JSON, raw({"id": "chat-1"}), 400, "invalid", "messages"),
    ("messages not a list", "post", JSON, raw(body(messages={"0": user_message("hi")})), 400, "invalid", "messages"),
    ("message not an object", "post", JSON, raw(body(messages=["hi"])), 400, "invalid", "messages[0]"),
    (
        "message without id",
        "post",
        JSON,
        raw(body(messages=[{"role": "user", "parts": []}])),
        400,
        "invalid",
        "messages[0].id",
    ),
    (
        "message id with slash",
        "post",
        JSON,
        raw(body(messages=[user_message("hi", id="a/b")])),
        400,
        "invalid",
        "messages[0].id",
    ),
    (
        "unknown role",
        "post",
        JSON,
        raw(body(messages=[{**user_message("hi"), "role": "robot"}])),
        400,
        "invalid",
        "messages[0].role",
    ),
    (
        "client system message",
        "post",
        JSON,
        raw(body(messages=[{**user_message("hi"), "role": "system"}, user_message("hi", id="u2")])),
        400,
        "forbidden_role",
        "messages[0].role",
    ),
    (
        "parts not a list",
        "post",
        JSON,
        raw(body(messages=[{**user_message("hi"), "parts": "hi"}])),
        400,
        "invalid",
        "messages[0].parts",
    ),
    (
        "part without type",
        "post",
        JSON,
        raw(body(messages=[{**user_message("hi"), "parts": [{"text": "hi"}]}])),
        400,
        "invalid",
        "messages[0].parts[0].type",
    ),
    (
        "text part without text",
        "post",
        JSON,
        raw(body(messages=[{**user_message("hi"), "parts": [{"type": "text", "text": 3}]}])),
        400,
        "invalid",
        "messages[0].parts[0].text",
    ),
    (
        "tool part from the user",
        "post",
        JSON,
        raw(body(messages=[{**user_message("hi"), "parts": [{"type": "tool-send_email", "toolCallId": "c1"}]}])),
        400,
        "invalid",
        "messages[0].parts[0].type",
    ),
    (
        "metadata not an object",
        "post",
        JSON,
        raw(body(messages=[{**user_message("hi"), "metadata": [1]}])),
        400,
        "invalid",
        "messages[0].metadata",
    ),
    ("unknown trigger", "post", JSON, raw(body(trigger="delete-everything")), 400, "invalid", "trigger"),
    ("messageId with path characters", "post", JSON, raw(body(messageId="../x")), 400, "invalid", "messageId"),
    ("deeply nested json", "post", JSON, raw(body(extra=nested(100))), 400, "too_deep", None),
    (
        "nesting beyond the parser",
        "post",
        JSON,
        b'{"id": "c", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        400,
        "too_deep",
        None,
    ),
    ("no messages at all", "post", JSON, raw(body(messages=[])), 400, "invalid", "messages"),
    (
        "continuing a message that does not exist",
        "post",
        JSON,
        raw(body(messages=[user_message("hi"), {"id": "a1", "role": "assistant", "parts": []}])),
        404,
        "not_found",
        None,
    ),
    (
        "regenerate a message that does not exist",
        "post",
        JSON,
        raw(body(trigger="regenerate-message", messageId="nope")),
        404,
        "not_found",
        None,
    ),
    ("unsupported sdk version", "post", JSON, raw(body()), 400, "bad_sdk_version", "v"),
    ("wrong method", "get", None, b"", 405, "method_not_allowed", None),
    ("wrong method put", "put", JSON, raw(body()), 405, "method_not_allowed", None),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("name", "method", "ctype", "data", "status", "code", "field"), CASES, ids=[c[0] for c in CASES]
)
async def test_bad_request(
    name: str, method: str, ctype: str | None, data: bytes, status: int, code: str, field: str | None
) -> None:
    client = AsyncClient()
    path = "/api/chat?v=9" if code == "bad_sdk_version" else "/api/chat"
    kwargs: dict[str, Any] = {}
    if ctype is not None:
        kwargs["content_type"] = ctype
    if method == "get":
        response = await client.get(path)
    else:
        response = await getattr(client, method)(path, data=data, **kwargs)
    assert response.status_code == status, response.content
    assert response["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == code
    assert error["message"]
    if field is not None:
        assert error.get("field") == field
    assert await Conversation.objects.acount() == 0
    assert await Message.objects.acount() == 0
    assert await Run.objects.acount() == 0


@pytest.mark.asyncio
async def test_an_unknown_sdk_version_in_the_header_is_refused_as_in_the_query() -> None:
    client = AsyncClient()
    with override_settings(UISTREAM={"ALLOW_ANONYMOUS": True}):
        response = await client.post(
            "/api/chat", data=raw(body()), content_type=JSON, headers={"x-uistream-sdk-version": "9"}
        )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_sdk_version"
    assert await Run.objects.acount() == 0


@pytest.mark.parametrize(
    ("query", "header", "version"),
    [("", None, 7), ("", "5", 5), ("?v=6", "5", 6), ("?chat=1", "6", 6), ("?v=", "5", 5), ("?v=5", None, 5)],
)
def test_the_sdk_version_comes_from_the_query_then_the_header_then_the_default(
    query: str, header: str | None, version: int
) -> None:
    """The dialect a client gets: ``?v=`` first, ``x-uistream-sdk-version``
    when the query names none, else the view's default."""
    headers = {"x-uistream-sdk-version": header} if header is not None else {}
    request = RequestFactory().post(f"/api/chat{query}", headers=headers)
    assert resolve_sdk_version(request, 7) == version


@pytest.mark.asyncio
async def test_oversized_body_is_refused_before_it_is_read() -> None:
    client = AsyncClient()
    with override_settings(UISTREAM={"ALLOW_ANONYMOUS": True, "MAX_REQUEST_BYTES": 1000}):
        response = await client.post(
            "/api/chat", data=raw(body(messages=[user_message("x" * 2000)])), content_type=JSON
        )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"
    assert await Conversation.objects.acount() == 0


@pytest.mark.asyncio
async def test_anonymous_visitors_need_allow_anonymous() -> None:
    with override_settings(UISTREAM={"ALLOW_ANONYMOUS": False, "MODEL": "demo_project.demo_model.make_model"}):
        response = await AsyncClient().post("/api/chat", data=raw(body()), content_type=JSON)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    assert await Conversation.objects.acount() == 0


@pytest.mark.asyncio
async def test_regenerating_someone_elses_message_is_a_404_and_changes_nothing() -> None:
    other = await get_user_model().objects.acreate(username="other")
    conversation = await Conversation.objects.acreate(pk="theirs", owner=other)
    await Message.objects.acreate(pk="their-user", conversation=conversation, role="user", position=0, parts=[])
    await Message.objects.acreate(
        pk="their-answer",
        conversation=conversation,
        role="assistant",
        position=1,
        parts=[{"type": "text", "text": "secret"}],
    )
    me = await get_user_model().objects.acreate(username="me")
    client = AsyncClient()
    await client.aforce_login(me)
    for chat_id in ("theirs", "mine"):
        response = await client.post(
            "/api/chat",
            data=raw(body(id=chat_id, trigger="regenerate-message", messageId="their-answer")),
            content_type=JSON,
        )
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    assert await Message.objects.filter(conversation=conversation).acount() == 2
    assert await Run.objects.acount() == 0
    assert not await Conversation.objects.filter(client_id="mine").aexists()


#: JSON that orjson refuses, as the tail of a body; a body this long or longer
#: is read by the standard library's parser (``jsonbody.LARGE_JSON_BYTES``).
BAD_JSON_TAILS = {
    "NaN": b'"n": NaN}',
    "Infinity": b'"n": -Infinity}',
    "a number past a double": b'"n": 1e400}',
    "a lone surrogate escape": b'"n": "\\ud800"}',
    "invalid utf-8": b'"n": "\xff"}',
    "trailing data": b'"n": 1} {}',
    "nested past 1,024 levels": b'"n": ' + b"[" * 3000 + b"]" * 3000 + b"}",
}


@pytest.mark.asyncio
@pytest.mark.parametrize("size", ["small", "large"])
@pytest.mark.parametrize("tail", list(BAD_JSON_TAILS), ids=list(BAD_JSON_TAILS))
async def test_a_large_body_is_read_as_strictly_as_a_small_one(tail: str, size: str) -> None:
    padding = b"x" * (LARGE_JSON_BYTES if size == "large" else 10)
    data = b'{"id": "chat-1", "pad": "' + padding + b'", ' + BAD_JSON_TAILS[tail]
    with override_settings(UISTREAM={"ALLOW_ANONYMOUS": True}):
        response = await AsyncClient().post("/api/chat", data=data, content_type=JSON)
    assert response.status_code == 400, response.content
    too_deep = tail == "nested past 1,024 levels"
    assert response.json()["error"]["code"] == ("too_deep" if too_deep else "invalid_json")
    assert await Conversation.objects.acount() == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("escaped", [True, False], ids=["escaped as a surrogate pair", "as UTF-8"])
async def test_a_large_body_with_an_emoji_is_read_whole(escaped: bool) -> None:
    text = "count to 3 " + "x" * LARGE_JSON_BYTES + " \U0001f680 é"
    data = json.dumps(chat_body("chat-big", [user_message(text, id="u-big")]), ensure_ascii=escaped).encode()
    assert (b"\\ud83d\\ude80" in data) is escaped
    with override_settings(UISTREAM={"ALLOW_ANONYMOUS": True, "MODEL": "demo_project.demo_model.make_model"}):
        response = await AsyncClient().post("/api/chat", data=data, content_type=JSON)
        assert response.status_code == 200
        answer = b"".join([chunk async for chunk in response.streaming_content])
    assert b'"delta":" 3"' in answer
    stored = await Message.objects.aget(id="u-big")
    assert stored.parts == [{"type": "text", "text": text}]


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        (None, True),
        ("text", True),
        (3, True),
        (2.5, True),
        (True, True),
        ({"a": [1, "b", None]}, True),
        ({1: "a key JSON turns into a string"}, True),
        ({"a": {1, 2}}, False),
        (object(), False),
        (b"bytes", False),
        ([float("nan")], True),  # json.dumps writes NaN, as the JSONField does
    ],
)
def test_is_json_says_what_a_json_field_stores_as_it_is(value: Any, stored: bool) -> None:
    """What a turn's record keeps of its metadata and extras (a value that
    is not JSON is left out rather than failing the run's write)."""
    assert is_json(value) is stored
