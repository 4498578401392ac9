"""A user's files reach the agents of the three frameworks as bytes, in each
framework's own types: pydantic-ai's ``BinaryContent``, LangChain's
standard content blocks, the Agents SDK's ``input_image`` /
``input_file`` items. The files are sent by the real ai@7 client, stored,
and read back through the stored file's loader on every turn (the second
turn's history carries the first turn's files). A file of another chat is
never read: the run fails with the text the user sees, and the agent's
model is never called."""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from agents.models.chatcmpl_converter import Converter
from langchain_core.messages import HumanMessage, convert_to_openai_messages
from pydantic_ai import Agent
from pydantic_ai.messages import BinaryContent, DocumentUrl, ImageUrl, ModelMessage, ModelRequest, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from demo_project.agents import langgraph_agent, openai_agents_agent
from uistream_app.adapters import AgentTurn
from uistream_app.adapters.langgraph import to_langchain_messages
from uistream_app.adapters.openai_agents import input_items
from uistream_app.adapters.pydantic_ai import PydanticAIAdapter, model_history
from uistream_app.models import Run, StoredFile
from uistream_app.runs import UnsupportedFileError
from uistream_app.runs.messages import FilePart, UserMessage
from uistream_app.runs.openai import user_content
from uistream_app.testing import user_message

from ..server import serve_demo
from ..test_chat_http import Browser, read_chunks, run_finished, wait_for
from ..test_chat_real_client import run_client
from .common import record_pydantic_ai_calls, stored

pytestmark = pytest.mark.django_db(transaction=True)

#: A real 1×1 PNG and a small PDF, as a user would attach them.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")
PDF = b"%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from serve_demo(monkeypatch, 0)


@pytest.fixture
def pydantic_ai_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[ModelMessage]]:
    """What the pydantic-ai demo agent's FunctionModel was sent, call by call."""
    return record_pydantic_ai_calls(monkeypatch)


def _pydantic_ai_files(messages: list[ModelMessage]) -> list[tuple[str, bytes]]:
    """The files of the first user prompt pydantic-ai's model was sent."""
    prompt = next(p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, UserPromptPart))
    assert isinstance(prompt.content, list)
    files = [c for c in prompt.content if not isinstance(c, str)]
    assert all(isinstance(f, BinaryContent) for f in files), files
    return [(f.media_type, f.data) for f in files if isinstance(f, BinaryContent)]


def _langchain_files(messages: list[Any]) -> list[tuple[str, bytes]]:
    """The files of the first ``HumanMessage`` the LangChain model was sent."""
    human = next(m for m in messages if isinstance(m, HumanMessage))
    assert isinstance(human.content, list)
    blocks = [b for b in human.content if isinstance(b, dict) and b.get("type") != "text"]
    assert [b["type"] for b in blocks] == ["image", "file"]
    return [(b["mime_type"], base64.b64decode(b["base64"])) for b in blocks]


def _from_data_url(url: str) -> tuple[str, bytes]:
    head, _, payload = url.partition(",")
    assert head.endswith(";base64")
    return head[len("data:") : -len(";base64")], base64.b64decode(payload)


def _agents_sdk_files(items: list[dict[str, Any]]) -> list[tuple[str, bytes]]:
    """The files of the first user item the Agents SDK's model was given."""
    user = next(i for i in items if i.get("role") == "user")
    out = []
    for piece in user["content"]:
        if piece["type"] == "input_image":
            out.append(_from_data_url(piece["image_url"]))
        elif piece["type"] == "input_file":
            assert piece["filename"] == "notes.pdf"
            out.append(_from_data_url(piece["file_data"]))
    return out


@pytest.mark.node
@pytest.mark.parametrize("framework", ["pydantic-ai", "langgraph", "openai-agents"])
def test_the_agent_gets_each_files_bytes_on_every_turn(
    node: str, server: str, tmp_path: Path, framework: str, pydantic_ai_calls: list[list[ModelMessage]]
) -> None:
    (tmp_path / "cat.png").write_bytes(PNG)
    (tmp_path / "notes.pdf").write_bytes(PDF)
    files = [
        {"path": str(tmp_path / "cat.png"), "mediaType": "image/png", "filename": "cat.png"},
        {"path": str(tmp_path / "notes.pdf"), "mediaType": "application/pdf", "filename": "notes.pdf"},
    ]
    langgraph_agent.SEEN.clear()
    agents_sdk_inputs = openai_agents_agent.demo_model.inputs
    agents_sdk_inputs.clear()
    browser = Browser(server)
    chat_id = f"files-{framework}"
    out = run_client(
        node,
        server,
        browser,
        api=f"/api/agents/{framework}/chat",
        chatId=chat_id,
        version=7,
        steps=[{"send": "what are these?", "files": files}, {"send": "count to 2"}],
    )
    assert out["error"] is None
    wait_for(run_finished, "the runs to be stored")
    messages = stored(chat_id)
    # The client keeps its data: URLs; the store keeps the files and points at them.
    assert [m["role"] for m in out["messages"]] == [m["role"] for m in messages] == ["user", "assistant"] * 2
    assert out["messages"][1:] == messages[1:]
    assert [p["url"] for p in messages[0]["parts"] if p["type"] == "file"] == [
        f.url for f in StoredFile.objects.order_by("name")
    ]
    assert StoredFile.objects.count() == 2
    assert [r.status for r in Run.objects.order_by("started_at")] == ["completed", "completed"]
    if framework == "pydantic-ai":
        first, last = pydantic_ai_calls[0], pydantic_ai_calls[-1]
        got = [_pydantic_ai_files(first), _pydantic_ai_files(last)]
    elif framework == "langgraph":
        got = [_langchain_files(langgraph_agent.SEEN[0]), _langchain_files(langgraph_agent.SEEN[-1])]
    else:
        got = [_agents_sdk_files(agents_sdk_inputs[0]), _agents_sdk_files(agents_sdk_inputs[-1])]
    # The first turn's prompt and, a turn later, its history: the bytes sent.
    assert got == [[("image/png", PNG), ("application/pdf", PDF)]] * 2


def test_another_chats_file_is_not_read_and_the_user_is_told(
    server: str, pydantic_ai_calls: list[list[ModelMessage]]
) -> None:
    browser = Browser(server)
    api = "/api/agents/pydantic-ai/chat"
    picture = {
        "mediaType": "image/png",
        "filename": "cat.png",
        "url": "data:image/png;base64," + base64.b64encode(PNG).decode(),
    }
    first = browser.post(api, {"id": "files-mine", "messages": [user_message("look", files=[picture])]})
    assert first.status_code == 200
    wait_for(run_finished, "the first run to end")
    (kept,) = StoredFile.objects.all()
    calls_before = len(pydantic_ai_calls)
    # The same owner, another chat: the part names the first chat's file.
    borrowed = {"mediaType": "image/png", "filename": "cat.png", "url": kept.url}
    with browser.client.stream(
        "POST",
        api,
        json={"id": "files-other", "messages": [user_message("and this?", files=[borrowed])]},
        headers={"X-CSRFToken": browser.token},
    ) as response:
        assert response.status_code == 200
        chunks, done = read_chunks(response)
    assert done
    (error,) = [c for c in chunks if c["type"] == "error"]
    assert error["errorText"] == (
        "This agent (pydantic-ai) can't take the attached file cat.png of type image/png: its bytes are not available"
    )
    wait_for(run_finished, "the second run to end")
    assert Run.objects.get(conversation__client_id="files-other").status == "failed"
    assert len(pydantic_ai_calls) == calls_before  # the model was never called


# -- the conversion, without a server -------------------------------------------------


def _turn(*messages: UserMessage) -> AgentTurn:
    return AgentTurn(history=[], messages=list(messages), chat_id="c", run_id="r", message_id="m")


def test_a_public_url_goes_as_the_frameworks_url_type_and_text_keeps_its_place() -> None:
    photo = FilePart("image/jpeg", "https://example.com/photo.jpg", "photo.jpg")
    paper = FilePart("application/pdf", "https://example.com/paper.pdf")
    message = UserMessage("before after", (photo, paper), ("before", photo, "after", paper))
    _, prompt = model_history(_turn(message))
    assert prompt == [
        "before",
        ImageUrl("https://example.com/photo.jpg", media_type="image/jpeg"),
        "after",
        DocumentUrl("https://example.com/paper.pdf", media_type="application/pdf"),
    ]
    (human,) = to_langchain_messages([message])
    assert [(b["type"], b.get("url"), b.get("text")) for b in human.content if isinstance(b, dict)] == [
        ("text", None, "before"),
        ("image", "https://example.com/photo.jpg", None),
        ("text", None, "after"),
        ("file", "https://example.com/paper.pdf", None),
    ]


CONVERTERS = {
    "pydantic-ai": lambda message: model_history(_turn(message)),
    "langgraph": lambda message: to_langchain_messages([message]),
    "openai-agents": lambda message: input_items([message]),
}


@pytest.mark.parametrize("framework", list(CONVERTERS))
def test_a_file_with_neither_bytes_nor_a_public_url_fails_the_run(framework: str) -> None:
    lost = FilePart("image/png", f"/api/files/{uuid.uuid4()}", "cat.png")
    convert = CONVERTERS[framework]
    with pytest.raises(UnsupportedFileError, match=r"cat\.png of type image/png: its bytes are not available") as info:
        convert(UserMessage("look", (lost,)))
    assert info.value.client_text.startswith("This agent (")


def test_the_adapters_hand_over_what_the_loader_reads() -> None:
    """An adapter's run reads each file once, through its loader."""
    reads: list[str] = []

    def load() -> bytes:
        reads.append("png")
        return PNG

    message = UserMessage("look", (FilePart("image/png", "/api/files/x", "cat.png", load=load),))
    history = [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "look"}]}]

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        (request,) = messages
        assert isinstance(request, ModelRequest)
        (part,) = request.parts
        assert isinstance(part, UserPromptPart)
        assert part.content == ["look", BinaryContent(PNG, media_type="image/png")]
        yield "A cat."

    adapter = PydanticAIAdapter(Agent(FunctionModel(stream_function=stream)))
    turn = AgentTurn(history=history, messages=[message], chat_id="c", run_id="r", message_id="m")

    async def collect() -> list[Any]:
        return [e async for e in adapter.run(turn)]

    events = asyncio.run(collect())
    assert "A cat." in "".join(getattr(e, "text", "") for e in events)
    assert reads == ["png"]


def test_the_frameworks_own_converters_send_the_files_as_our_openai_model_does() -> None:
    """LangChain's ``convert_to_openai_messages`` and the Agents SDK's
    chat-completions ``Converter`` read the blocks and items the adapters
    build, and send the files as the built-in OpenAI model (checked
    against ``@ai-sdk/openai``) does: the bytes reach a provider."""
    png = FilePart("image/png", "/api/files/a", "cat.png", load=lambda: PNG)
    pdf = FilePart("application/pdf", "/api/files/b", "notes.pdf", load=lambda: PDF)
    message = UserMessage("look", (png, pdf), ("look", png, pdf))
    ours = user_content(message)
    assert [c["type"] for c in ours] == ["text", "image_url", "file"]
    (langchain,) = convert_to_openai_messages(to_langchain_messages([message]))
    assert langchain["content"] == ours
    (sdk,) = Converter.items_to_messages(input_items([message]))
    for part in sdk["content"]:
        if part["type"] == "image_url":
            assert part["image_url"].pop("detail") == "auto"  # the SDK's default
    assert sdk["content"] == ours
