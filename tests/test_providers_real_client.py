"""Issue 17's promise, through the real client: a project sets
``UISTREAM["MODEL"]`` to an Anthropic or OpenAI Responses model and chats
with tools, reasoning and approvals through useChat.

The project's ASGI application runs behind a real server; its model is
``AnthropicModel`` (thinking on) or ``OpenAIResponsesModel`` whose
``base_url`` is a fake provider on 127.0.0.1 (``tests/runs/chat_server``)
answering with streams of the API's own shape and recording every request
body. The real ai@7 useChat core (``tests/js/chat_client.mjs``) asks for an
email, is shown the reasoning and the call awaiting approval, approves it,
and reads the answer. What can fail is what the provider is sent on the
continuation: the signed thinking block (Anthropic) or the encrypted
reasoning item (Responses), and the email's result in the API's own form.
The models are given a replay memory that keeps nothing, so what goes back
comes from the stored conversation, as it would in another process.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from uistream_app.models import Conversation, Run, StoredFile
from uistream_app.runs._memory import ReplayMemory
from uistream_app.runs.anthropic import AnthropicModel
from uistream_app.runs.openai import OpenAIChatModel, OpenAIResponsesModel

from .conftest import JS_DIR
from .runs import test_anthropic as anthropic
from .runs import test_openai_responses as responses
from .runs.chat_server import DONE, ChatServer, Reply, chunk
from .server import serve_demo
from .test_chat_http import Browser, wait_for
from .test_chat_real_client import run_client

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.node]

EMAIL = "email ada@example.com saying the build is green"
CALL_INPUT = {"to": "ada@example.com", "body": "the build is green"}
# What the demo's send_email returns for CALL_INPUT.
SENT = {
    "status": "sent",
    "to": "ada@example.com",
    "characters": 18,
    "note": "The demo only pretends to send email.",
}
TOOL_NAMES = ["get_weather", "calculate", "send_email", "research", "pause"]


class FakeProvider:
    """``ChatServer`` on an event loop of its own thread, so the server
    under test (another thread) can call it while the test waits on the
    client. Replies are scripted before the client starts."""

    def __init__(self) -> None:
        self.chat = ChatServer()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fake-provider", daemon=True)

    def __enter__(self) -> ChatServer:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.chat.__aenter__(), self.loop).result(timeout=10)
        return self.chat

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.chat.__aexit__(None, None, None), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


@pytest.fixture
def provider() -> Iterator[ChatServer]:
    with FakeProvider() as chat:
        yield chat


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from serve_demo(monkeypatch, 0)


def use_model(settings: Any, model: AnthropicModel | OpenAIResponsesModel) -> None:
    model.memory = ReplayMemory(size=0)  # nothing kept in this process
    settings.UISTREAM = {**settings.UISTREAM, "MODEL": model}


def idle() -> bool:
    return not Run.objects.filter(status="running").exists()


def stored(chat_id: str) -> list[dict[str, Any]]:
    return [m.as_ui_message() for m in Conversation.objects.get(client_id=chat_id).messages.order_by("position")]


def approve_email(node: str, server: str, chat_id: str) -> dict[str, Any]:
    out = run_client(
        node, server, Browser(server), chatId=chat_id, version=7, steps=[{"send": EMAIL}, {"approve": True}]
    )
    wait_for(idle, "the runs to be stored")
    return out


def assert_the_user_saw_and_we_stored(out: dict[str, Any], chat_id: str, reasoning: str, answer: str) -> None:
    assert out["error"] is None
    assert out["finished"] == 2
    messages = stored(chat_id)
    assert out["messages"] == messages
    assert [m["role"] for m in messages] == ["user", "assistant"]  # the approval continued the same message
    parts = messages[1]["parts"]
    assert [p["text"] for p in parts if p["type"] == "reasoning"] == [reasoning]
    (email,) = [p for p in parts if p["type"] == "tool-send_email"]
    assert email["state"] == "output-available"
    assert email["input"] == CALL_INPUT
    assert email["output"] == SENT
    assert email["approval"]["approved"] is True
    assert [p["text"] for p in parts if p["type"] == "text"][-1] == answer
    assert [r.status for r in Run.objects.order_by("started_at")] == ["completed", "completed"]


def test_an_anthropic_model_with_thinking_chats_approves_and_answers(
    node: str, server: str, provider: ChatServer, settings: Any
) -> None:
    a = anthropic
    thought = "The user wants an email sent; send_email needs a person's approval."
    provider.add(
        Reply(
            body=[
                a.start("msg_1"),
                *a.thinking(0, thought, "sig-turn-1"),
                *a.text(1, "I'll send it ", "once you approve."),
                *a.tool_use(2, "toolu_1", "send_email", '{"to": "ada@exa', 'mple.com", "body": "the build is green"}'),
                *a.end("tool_use"),
            ]
        ),
        Reply(body=[a.start("msg_2"), *a.text(0, "Sent to ", "ada@example.com."), *a.end()]),
    )
    thinking = {"type": "enabled", "budget_tokens": 1024}
    use_model(settings, AnthropicModel("claude-test", base_url=provider.base_url, api_key="k", thinking=thinking))

    out = approve_email(node, server, "anthropic-e2e")

    assert_the_user_saw_and_we_stored(out, "anthropic-e2e", thought, "Sent to ada@example.com.")
    assert len(provider.requests) == 2
    first, second = (r.json() for r in provider.requests)
    assert first["thinking"] == thinking
    assert [t["name"] for t in first["tools"]] == TOOL_NAMES
    assert provider.requests[1].headers["x-api-key"] == "k"
    assert second["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": EMAIL}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": thought, "signature": "sig-turn-1"},
                {"type": "text", "text": "I'll send it once you approve."},
                {"type": "tool_use", "id": "toolu_1", "name": "send_email", "input": CALL_INPUT},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": json.dumps(SENT)}]},
    ]


def test_an_openai_responses_model_with_reasoning_chats_approves_and_answers(
    node: str, server: str, provider: ChatServer, settings: Any
) -> None:
    r = responses
    summary = "The user wants an email sent; it needs approval."
    provider.add(
        Reply(
            body=[
                r.created("resp_1"),
                *r.reasoning(0, "rs_1", [summary], "enc-turn-1"),
                *r.function_call(
                    1, "call_1", "send_email", '{"to": "ada@exa', 'mple.com", "body": "the build is green"}'
                ),
                r.completed(),
            ]
        ),
        Reply(body=[r.created("resp_2"), *r.message(0, "msg_2", "Sent to ", "ada@example.com."), r.completed()]),
    )
    reasoning = {"effort": "low", "summary": "auto"}
    use_model(
        settings, OpenAIResponsesModel("gpt-test", base_url=provider.base_url, api_key="sk-k", reasoning=reasoning)
    )

    out = approve_email(node, server, "responses-e2e")

    assert_the_user_saw_and_we_stored(out, "responses-e2e", summary, "Sent to ada@example.com.")
    assert len(provider.requests) == 2
    first, second = (req.json() for req in provider.requests)
    assert first["reasoning"] == reasoning
    assert first["include"] == ["reasoning.encrypted_content"]
    assert [t["name"] for t in first["tools"]] == TOOL_NAMES
    assert provider.requests[1].headers["authorization"] == "Bearer sk-k"
    assert second["input"] == [
        {"role": "user", "content": [{"type": "input_text", "text": EMAIL}]},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": summary}],
            "encrypted_content": "enc-turn-1",
        },
        {"type": "function_call", "call_id": "call_1", "name": "send_email", "arguments": json.dumps(CALL_INPUT)},
        {"type": "function_call_output", "call_id": "call_1", "output": json.dumps(SENT)},
    ]


def test_a_provider_error_mid_stream_reaches_the_client_masked_and_the_run_fails(
    node: str, server: str, provider: ChatServer, settings: Any
) -> None:
    a = anthropic
    overloaded = a.ev({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded (secret)"}})
    provider.add(Reply(body=[a.start(), *a.text(0, "Let me"), overloaded]))
    use_model(settings, AnthropicModel("claude-test", base_url=provider.base_url, api_key="k", max_retries=0))

    out = run_client(node, server, Browser(server), chatId="overloaded", version=7, steps=[{"send": "hello"}])
    wait_for(idle, "the run to be stored")

    assert out["error"] == "An error occurred."
    assert "secret" not in json.dumps(out)
    assert len(provider.requests) == 1  # output had started: not retried
    run = Run.objects.get()
    assert run.status == "failed"
    assert "overloaded_error" in run.error_detail
    assert "Let me" in json.dumps(stored("overloaded"))


# -- files (issue 20): what each API is sent for an attached file, against the SDK's own provider ----

PNG_BYTES = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
PDF_BYTES = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
TXT_BYTES = "notes: caf\u00e9\n".encode()


def sdk_request(node: str, api: str, messages: list[dict[str, Any]], tmp_path: Any) -> dict[str, Any]:
    """What the AI SDK's own provider package sends for ``messages`` (the
    UIMessages the client holds, files as ``data:`` URLs)."""
    path = tmp_path / f"{api}-messages.json"
    path.write_text(json.dumps(messages))
    result = subprocess.run(
        [node, str(JS_DIR / "provider_oracle.mjs"), "request", api, str(path)],
        capture_output=True,
        text=True,
        cwd=JS_DIR,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def send_files(node: str, server: str, chat_id: str, files: list[tuple[str, str, bytes]], tmp_path: Any) -> Any:
    steps_files = []
    for name, media_type, data in files:
        (tmp_path / name).write_bytes(data)
        steps_files.append({"path": str(tmp_path / name), "mediaType": media_type, "filename": name})
    out = run_client(
        node,
        server,
        Browser(server),
        chatId=chat_id,
        version=7,
        steps=[{"send": "what are these?", "files": steps_files}],
    )
    wait_for(idle, "the run to be stored")
    return out


def assert_files_came_from_storage(chat_id: str) -> None:
    (user, _) = stored(chat_id)
    assert "data:" not in json.dumps(user["parts"])
    assert len(StoredFile.objects.filter(conversation__client_id=chat_id)) == sum(
        p["type"] == "file" for p in user["parts"]
    )


@pytest.mark.parametrize(
    ("api", "field"), [("openai-chat", "messages"), ("openai-responses", "input"), ("anthropic", "messages")]
)
def test_attached_files_reach_each_api_as_the_sdk_sends_them(
    node: str, server: str, provider: ChatServer, settings: Any, tmp_path: Any, api: str, field: str
) -> None:
    files = [("cat.png", "image/png", PNG_BYTES), ("report.pdf", "application/pdf", PDF_BYTES)]
    if api == "anthropic":
        files.append(("notes.txt", "text/plain", TXT_BYTES))
        provider.add(Reply(body=[anthropic.start(), *anthropic.text(0, "Three files."), *anthropic.end()]))
        model: Any = AnthropicModel("claude-test", base_url=provider.base_url, api_key="k")
    elif api == "openai-responses":
        provider.add(
            Reply(body=[responses.created(), *responses.message(0, "msg_1", "Two files."), responses.completed()])
        )
        model = OpenAIResponsesModel("gpt-test", base_url=provider.base_url, api_key="k")
    else:
        provider.add(Reply(body=[chunk({"role": "assistant", "content": "Two files."}), chunk(finish="stop"), DONE]))
        model = OpenAIChatModel("gpt-test", base_url=provider.base_url, api_key="k")
    settings.UISTREAM = {**settings.UISTREAM, "MODEL": model}

    out = send_files(node, server, f"files-{api}", files, tmp_path)

    assert out["error"] is None
    assert_files_came_from_storage(f"files-{api}")
    sdk = sdk_request(node, api, out["messages"][:1], tmp_path)
    assert sdk["body"] is not None, sdk["errors"]
    (request,) = provider.requests
    assert request.json()[field] == sdk["body"][field]


@pytest.mark.parametrize("api", ["openai-chat", "openai-responses"])
def test_a_file_the_api_cant_take_is_an_error_the_user_sees(
    node: str, server: str, provider: ChatServer, settings: Any, tmp_path: Any, api: str
) -> None:
    model: Any
    if api == "openai-responses":
        model = OpenAIResponsesModel("gpt-test", base_url=provider.base_url, api_key="k")
    else:
        model = OpenAIChatModel("gpt-test", base_url=provider.base_url, api_key="k")
    settings.UISTREAM = {**settings.UISTREAM, "MODEL": model}

    out = send_files(node, server, f"refused-{api}", [("notes.txt", "text/plain", TXT_BYTES)], tmp_path)

    # The SDK's own provider refuses the same file.
    assert "text/plain" in " ".join(sdk_request(node, api, out["messages"][:1], tmp_path)["errors"])
    assert out["error"] is not None
    assert "notes.txt" in out["error"]
    assert "text/plain" in out["error"]
    assert provider.requests == []  # nothing was sent without it
    assert Run.objects.get().status == "failed"
