"""Attachments (issue 20): a file a client sends is stored in Django's
default storage, never as base64 in the stored parts; its URL serves its
owner only; the limits refuse with nothing stored; deleting a conversation
deletes its files; a model reads them (the demo model's "describe the
attachment"). Over real servers: the in-thread ASGI server with the real
ai@7 client (a 3 MiB image), Channels' WebSocket consumer."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.files.storage import default_storage
from django.test import override_settings

from uistream_app.errors import NOT_FOUND_TEXT
from uistream_app.models import Conversation, Message, Run, StoredFile

from .server import serve_demo
from .test_chat_http import Browser, read_chunks, text_of, wait_for
from .test_chat_real_client import run_client
from .test_consumer import Socket, asession_cookie, runs_finished, send_frame

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def media_root(settings: Any, tmp_path: Path) -> Path:
    """A storage directory of the test's own (the default storage follows
    the setting), so what a test finds there is its own."""
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return tmp_path / "media"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from serve_demo(monkeypatch, 0)


def png(size: int = 0) -> bytes:
    """A real PNG (1×1, one pixel) padded to about ``size`` bytes with a
    private ancillary chunk, so decoders still read it."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    head = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", (1).to_bytes(4, "big") * 2 + bytes([8, 2, 0, 0, 0]))
    pixels = chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
    padding = chunk(b"prVt", os.urandom(max(0, size - 80))) if size else b""
    return head + padding + pixels + chunk(b"IEND", b"")


def data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def file_part(media_type: str, data: bytes, filename: str | None = "cat.png") -> dict[str, Any]:
    part = {"type": "file", "mediaType": media_type, "url": data_url(media_type, data)}
    if filename is not None:
        part["filename"] = filename
    return part


def body_with(chat_id: str, text: str, *files: dict[str, Any], message_id: str = "u1") -> dict[str, Any]:
    return {
        "id": chat_id,
        "trigger": "submit-message",
        "messages": [{"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}, *files]}],
    }


def send(browser: Browser, body: dict[str, Any]) -> tuple[int, Any]:
    with browser.client.stream("POST", "/api/chat", json=body, headers={"X-CSRFToken": browser.token}) as response:
        if response.status_code != 200:
            response.read()
            return response.status_code, response.json()
        chunks, done = read_chunks(response)
        assert done
        return 200, chunks


def idle() -> bool:
    return not Run.objects.filter(status="running").exists()


def stored_names() -> set[str]:
    """Every file under the storage's upload directory."""
    root = Path(django_settings.MEDIA_ROOT) / "uistream"
    return {str(p.relative_to(django_settings.MEDIA_ROOT)) for p in root.rglob("*") if p.is_file()}


def test_a_file_is_stored_in_storage_served_to_its_owner_and_described(server: str) -> None:
    owner, stranger = Browser(server), Browser(server)
    image = png()
    status, chunks = send(owner, body_with("att-1", "describe the attachment", file_part("image/png", image)))

    assert status == 200
    assert text_of(chunks) == f"You sent cat.png (image/png, {len(image)} bytes)."
    wait_for(idle, "the run to be stored")
    (stored,) = StoredFile.objects.all()
    assert (stored.name, stored.media_type, stored.size) == ("cat.png", "image/png", len(image))
    assert stored.sha256 == hashlib.sha256(image).hexdigest()
    assert stored.message_id == Message.objects.get(role="user").pk
    with default_storage.open(stored.file.name, "rb") as handle:
        assert handle.read() == image
    parts = Message.objects.get(role="user").parts
    assert "data:" not in json.dumps(parts)
    assert parts[1] == {
        "type": "file",
        "mediaType": "image/png",
        "filename": "cat.png",
        "url": f"/api/files/{stored.pk}",
    }

    mine = owner.client.get(parts[1]["url"])
    assert mine.status_code == 200
    assert mine.headers["content-type"] == "image/png"
    assert mine.headers["content-disposition"] == 'inline; filename="cat.png"'
    assert mine.headers["x-content-type-options"] == "nosniff"
    assert mine.content == image
    # The API's conversation (what a reload shows) points at it too.
    listed = owner.client.get("/api/conversations/att-1/messages/").json()
    api_parts = (listed["results"] if isinstance(listed, dict) else listed)[0]["parts"]
    assert api_parts[1]["url"] == parts[1]["url"]

    theirs = stranger.client.get(parts[1]["url"])
    missing = owner.client.get("/api/files/00000000-0000-4000-8000-000000000000")
    garbage = owner.client.get("/api/files/not-a-uuid")
    assert theirs.status_code == missing.status_code == garbage.status_code == 404
    assert (
        theirs.json() == missing.json() == garbage.json() == {"error": {"code": "not_found", "message": NOT_FOUND_TEXT}}
    )


def test_several_files_are_each_described_and_a_pdf_is_a_download(server: str) -> None:
    browser = Browser(server)
    pdf, text = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj<<>>endobj\n%%EOF\n", b"plain words\n"
    status, chunks = send(
        browser,
        body_with(
            "att-2",
            "Describe the attachment, please",
            file_part("application/pdf", pdf, "report.pdf"),
            file_part("text/plain", text, "notes.txt"),
        ),
    )
    assert status == 200
    assert text_of(chunks) == (
        f"You sent report.pdf (application/pdf, {len(pdf)} bytes). You sent notes.txt (text/plain, {len(text)} bytes)."
    )
    urls = [p["url"] for p in Message.objects.get(role="user").parts if p["type"] == "file"]
    assert [browser.client.get(u).content for u in urls] == [pdf, text]
    assert browser.client.get(urls[0]).headers["content-disposition"] == 'attachment; filename="report.pdf"'


@pytest.mark.parametrize(
    ("limits", "part", "status", "code"),
    [
        pytest.param({"MAX_FILE_BYTES": 1000}, file_part("image/png", png(1500)), 413, "file_too_large", id="413"),
        pytest.param({}, file_part("application/zip", b"PK\x03\x04", "a.zip"), 415, "unsupported_media_type", id="415"),
        pytest.param(
            {"ALLOWED_MEDIA_TYPES": ["application/pdf"]},
            file_part("image/png", png()),
            415,
            "unsupported_media_type",
            id="415 by setting",
        ),
        pytest.param(
            {}, {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,%%%"}, 400, "invalid", id="400"
        ),
    ],
)
def test_a_refused_file_names_its_part_and_nothing_is_stored(
    server: str, limits: dict[str, Any], part: dict[str, Any], status: int, code: str
) -> None:
    browser = Browser(server)
    with override_settings(UISTREAM={**django_settings.UISTREAM, **limits}):
        got, body = send(
            browser, body_with("refused", "look", file_part("application/pdf", b"%PDF-1.4", "fine.pdf"), part)
        )

    assert got == status
    assert body["error"]["code"] == code
    assert body["error"]["field"].startswith("message.parts[2]")
    assert (status == 400) or "message.parts[2]" in body["error"]["message"]
    assert not Conversation.objects.exists()
    assert not Message.objects.exists()
    assert not StoredFile.objects.exists()
    assert stored_names() == set()


def test_a_failed_transaction_takes_the_written_files_back_out(server: str) -> None:
    browser = Browser(server)
    assert send(browser, body_with("dup", "hello", file_part("image/png", png())))[0] == 200
    wait_for(idle, "the run to be stored")
    before = stored_names()
    # The same message again: refused (409) inside the store's transaction,
    # after its file was written.
    status, body = send(browser, body_with("dup", "hello", file_part("image/png", png())))
    assert (status, body["error"]["code"]) == (409, "duplicate")
    assert stored_names() == before
    assert StoredFile.objects.count() == 1


def test_deleting_a_conversation_deletes_its_files_from_storage(server: str) -> None:
    browser = Browser(server)
    for chat in ("keep", "gone"):
        assert send(browser, body_with(chat, "describe the attachment", file_part("image/png", png())))[0] == 200
        wait_for(idle, "the run to be stored")
    kept = StoredFile.objects.get(conversation__client_id="keep").file.name
    gone = StoredFile.objects.get(conversation__client_id="gone")
    url = Message.objects.get(conversation__client_id="gone", role="user").parts[1]["url"]

    deleted = browser.client.delete("/api/conversations/gone/", headers={"X-CSRFToken": browser.token})
    assert deleted.status_code == 204

    assert not default_storage.exists(gone.file.name)
    assert default_storage.exists(kept)
    assert browser.client.get(url).status_code == 404
    # The cascade from the model (the admin's delete) does the same.
    Conversation.objects.filter(client_id="keep").delete()
    assert not default_storage.exists(kept)
    assert stored_names() == set()


def test_a_3_mib_image_through_the_real_client(node: str, server: str, tmp_path: Path) -> None:
    """Over Django's DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MiB) and the old 1 MiB
    MAX_REQUEST_BYTES: the body is about 4 MiB of base64."""
    image = png(3 * 1024 * 1024)
    path = tmp_path / "big.png"
    path.write_bytes(image)
    browser = Browser(server)
    send_step = {
        "send": "describe the attachment",
        "files": [{"path": str(path), "mediaType": "image/png", "filename": "big.png"}],
    }
    out = run_client(node, server, browser, chatId="big", version=7, steps=[send_step])
    wait_for(idle, "the run to be stored")

    assert out["error"] is None
    answer = out["messages"][1]["parts"]
    assert [p["text"] for p in answer if p["type"] == "text"] == [f"You sent big.png (image/png, {len(image)} bytes)."]
    stored = StoredFile.objects.get()
    assert stored.size == len(image)
    user = Message.objects.get(role="user")
    assert "data:" not in json.dumps(user.parts)
    (sent,) = [p for p in user.parts if p["type"] == "file"]
    # The session the client was given with its first answer owns the chat.
    browser.client.cookies.set(django_settings.SESSION_COOKIE_NAME, Conversation.objects.get().session_key)
    assert browser.client.get(sent["url"]).content == image


@pytest.mark.asyncio
async def test_the_websocket_send_stores_files_too() -> None:
    image = png()
    frame = send_frame("r1", "ws-files", "describe the attachment")
    frame["messages"][0]["parts"].append(file_part("image/png", image, "ws.png"))
    async with Socket(await asession_cookie()) as page:
        await page.send(frame)
        frames = await page.until("r1")
    await runs_finished()
    text = "".join(f["chunk"]["delta"] for f in frames if f["type"] == "chunk" and f["chunk"]["type"] == "text-delta")
    assert text == f"You sent ws.png (image/png, {len(image)} bytes)."
    stored = await StoredFile.objects.aget()
    assert stored.size == len(image)
    user = await Message.objects.aget(role="user")
    assert user.parts[1]["url"] == f"/api/files/{stored.pk}"
    assert "data:" not in json.dumps(user.parts)

    async with Socket(await asession_cookie()) as page:
        too_big = send_frame("r2", "ws-big", "look")
        too_big["messages"][0]["parts"].append(file_part("application/zip", b"PK", "a.zip"))
        with override_settings(UISTREAM={**django_settings.UISTREAM, "ALLOW_ANONYMOUS": True}):
            await page.send(too_big)
            (error,) = await page.until("r2")
    assert error["type"] == "error"
    assert error["code"] == "unsupported_media_type"
    assert await StoredFile.objects.acount() == 1


def test_the_admin_lists_a_conversations_files_and_serves_them_to_staff(server: str) -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client

    image = png()
    assert send(Browser(server), body_with("admin-files", "hi", file_part("image/png", image, "seen.png")))[0] == 200
    wait_for(idle, "the run to be stored")
    stored = StoredFile.objects.get()
    staff = Client()
    staff.force_login(get_user_model().objects.create_superuser("boss", "boss@example.com", "pw"))

    # The admin's links name the conversation by its key (chat ids are per owner).
    key = stored.conversation_id
    page = staff.get(f"/admin/uistream_app/conversation/{key}/change/")
    link = f"/admin/uistream_app/conversation/{key}/files/{stored.pk}/"
    assert page.status_code == 200
    assert f'<a href="{link}">seen.png</a>' in page.content.decode()
    download = staff.get(link)
    assert download.status_code == 200
    assert download["Content-Disposition"] == 'attachment; filename="seen.png"'
    assert b"".join(download.streaming_content) == image
    assert Client().get(link).status_code == 302  # to the login page, not the file


def test_an_edit_that_resends_a_file_by_its_url_keeps_it(server: str) -> None:
    """After a reload the page holds the stored parts (``/api/files/<id>``);
    editing that message resends them: the file moves to the new message
    instead of being deleted with the old one, and the model still reads it."""
    browser = Browser(server)
    image = png(5000)
    assert send(browser, body_with("edit-files", "hello", file_part("image/png", image, "kept.png")))[0] == 200
    wait_for(idle, "the run to be stored")
    stored_parts = Message.objects.get(role="user").parts
    edited = {
        "id": "edit-files",
        "trigger": "submit-message",
        "messageId": "u1",
        "messages": [
            {
                "id": "u1",
                "role": "user",
                "parts": [{"type": "text", "text": "describe the attachment"}, stored_parts[1]],
            }
        ],
    }

    status, chunks = send(browser, edited)

    assert status == 200
    assert text_of(chunks) == f"You sent kept.png (image/png, {len(image)} bytes)."
    wait_for(idle, "the run to be stored")
    stored = StoredFile.objects.get()
    assert stored.message_id == Message.objects.current().get(role="user").pk
    assert default_storage.exists(stored.file.name)
    assert browser.client.get(stored_parts[1]["url"]).content == image


def test_an_ag_ui_image_part_is_stored_as_a_file(server: str) -> None:
    """AG-UI 1.0's media content parts (``image`` with a ``data`` source)
    become the same stored file part."""
    from .test_agui_http import post_agui, run_input

    browser = Browser(server)
    image = png(2000)
    message = {
        "id": "u1",
        "role": "user",
        "content": [
            {"type": "text", "text": "describe the attachment"},
            {
                "type": "image",
                "source": {"type": "data", "value": base64.b64encode(image).decode(), "mimeType": "image/png"},
            },
        ],
    }
    response = post_agui(browser, run_input("agui-files", [message]))
    assert response.status_code == 200, response.text
    wait_for(idle, "the run to be stored")
    deltas = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    text = "".join(e.get("delta", "") for e in deltas if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == f"You sent a file (image/png, {len(image)} bytes)."
    stored = StoredFile.objects.get()
    (part,) = [p for p in Message.objects.get(role="user").parts if p["type"] == "file"]
    assert part == {"type": "file", "mediaType": "image/png", "url": f"/api/files/{stored.pk}"}
    assert browser.client.get(part["url"]).content == image

    refused = dict(message, id="u2")
    refused["content"] = [
        {"type": "document", "source": {"type": "data", "value": "UEsDBA==", "mimeType": "application/zip"}}
    ]
    answer = post_agui(browser, run_input("agui-zip", [refused], run_id="r2"))
    assert answer.status_code == 415
    assert answer.json()["error"]["code"] == "unsupported_media_type"
    assert StoredFile.objects.count() == 1


@pytest.mark.parametrize(
    ("user", "ids"),
    [
        pytest.param({}, [], id="defaults"),
        pytest.param({"MAX_FILE_BYTES": 3 * 1024 * 1024, "MAX_REQUEST_BYTES": 4 * 1024 * 1024}, [], id="room for one"),
        pytest.param({"MAX_REQUEST_BYTES": 1024 * 1024}, ["uistream_app.W004"], id="no room for a 10 MiB file"),
        pytest.param({"ALLOWED_MEDIA_TYPES": "image/png"}, ["uistream_app.E013"], id="not a list"),
        pytest.param({"MAX_FILE_BYTES": 0}, ["uistream_app.E005"], id="not positive"),
    ],
)
def test_the_file_limits_are_checked(settings: Any, user: dict[str, Any], ids: list[str]) -> None:
    from uistream_app.checks import check_settings

    settings.UISTREAM = {**settings.UISTREAM, **user}
    assert [m.id for m in check_settings()] == ids
