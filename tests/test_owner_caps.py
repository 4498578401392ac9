"""Owner caps, on by default and on every transport (``lifecycle.caps``):
the runs one owner has running at once, and the bytes their turns store
per day. A turn past a cap is a 429 (``throttled``; ``budget_exceeded``
with ``Retry-After`` for storage) that writes nothing, over HTTP, the
WebSocket and AG-UI alike."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db.models import Sum
from django.test import AsyncClient, override_settings
from django.urls import reverse
from django.utils import timezone

from uistream_app.conf import settings as uistream_settings
from uistream_app.lifecycle import caps
from uistream_app.lifecycle.caps import stored_bytes_of
from uistream_app.lifecycle.store import ConversationStore, Turn
from uistream_app.models import Conversation, Message, OwnerDay, Run, StoredFile
from uistream_app.owners import Owner
from uistream_app.testing import user_message

from .db import worker_queries
from .server import serve_demo
from .test_bad_input_everywhere import Page, agui_body, assert_error, chat_body, page_of
from .test_chat_http import Browser
from .test_consumer import DEMO, Socket, runs_finished, send_frame
from .test_files import body_with, file_part, png, send, stored_names

pytestmark = [pytest.mark.django_db(transaction=True)]

MiB = 1024 * 1024


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch, settings: Any, tmp_path: Path) -> None:
    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "1")
    settings.MEDIA_ROOT = str(tmp_path / "media")
    cache.clear()


async def written() -> tuple[int, int, int, int]:
    return (
        await Conversation.objects.acount(),
        await Message.objects.acount(),
        await Run.objects.acount(),
        await StoredFile.objects.acount(),
    )


def test_the_caps_are_on_by_default() -> None:
    caps = (
        uistream_settings.MAX_ACTIVE_RUNS_PER_USER,
        uistream_settings.MAX_ACTIVE_RUNS_PER_SESSION,
        uistream_settings.MAX_STORED_BYTES_PER_USER_PER_DAY,
        uistream_settings.MAX_STORED_BYTES_PER_SESSION_PER_DAY,
    )
    assert caps == (8, 2, 200 * MiB, 20 * MiB)


@pytest.mark.asyncio
async def test_one_run_too_many_at_once_is_refused_on_every_transport_and_writes_nothing() -> None:
    alice = await page_of("alice")
    with override_settings(UISTREAM={**DEMO, "MAX_ACTIVE_RUNS_PER_USER": 1}):
        long = await alice.post("/api/chat", chat_body("c1", text="count to 3000"))
        assert long.status_code == 200
        reader = aiter(long.streaming_content)
        await anext(reader)  # the run is running
        before = await written()
        error = assert_error(await alice.post("/api/chat", chat_body("c2")), 429, "throttled")
        assert "MAX_ACTIVE_RUNS_PER_USER" in error["message"]
        assert (error["limit"], error["allowed"]) == ("active_runs", 1)
        assert_error(await alice.post("/api/agui", agui_body("c3")), 429, "throttled")
        async with Socket(alice.cookie) as page:
            await page.send(send_frame("r1", "c4", "count to 2"))
            (refused,) = await page.until("r1")
        assert refused["code"] == "throttled"
        assert await written() == before
        assert (await alice.post("/api/chat/c1/stop", {})).json() == {"stopped": True}
        async for _ in reader:
            pass
        await runs_finished()
        again = await alice.post("/api/chat", chat_body("c2"))
        assert again.status_code == 200
        async for _ in again.streaming_content:
            pass
    await runs_finished()
    assert [r.status async for r in Run.objects.order_by("started_at")] == ["stopped", "completed"]


@pytest.mark.asyncio
async def test_an_anonymous_session_runs_two_at_once_by_default() -> None:
    anonymous = AsyncClient(enforce_csrf_checks=True)
    token = (await anonymous.get("/api/csrf")).json()["csrfToken"]
    visitor = Page(anonymous, "", token)
    with override_settings(UISTREAM=DEMO):
        readers = []
        for chat_id in ("s1", "s2"):
            response = await visitor.post("/api/chat", chat_body(chat_id, text="count to 3000"))
            assert response.status_code == 200
            readers.append(aiter(response.streaming_content))
            await anext(readers[-1])
        error = assert_error(await visitor.post("/api/chat", chat_body("s3")), 429, "throttled")
        assert "MAX_ACTIVE_RUNS_PER_SESSION" in error["message"]
        for chat_id in ("s1", "s2"):
            assert (await visitor.post(f"/api/chat/{chat_id}/stop", {})).json() == {"stopped": True}
        for reader in readers:
            async for _ in reader:
                pass
    await runs_finished()
    assert not await Conversation.objects.filter(pk="s3").aexists()


@pytest.mark.asyncio
async def test_a_turn_past_the_days_storage_is_refused_with_when_it_resets() -> None:
    alice = await page_of("alice")
    text = "x" * 4000
    with override_settings(UISTREAM={**DEMO, "MAX_STORED_BYTES_PER_USER_PER_DAY": 10_000}):
        first = await alice.post("/api/chat", chat_body("b1", text=text))
        assert first.status_code == 200
        async for _ in first.streaming_content:
            pass
        await runs_finished()
        stored = (await Run.objects.aget()).stored_bytes
        message = await Message.objects.aget(role="user")
        assert stored == stored_bytes_of({"parts": message.parts})
        assert 4000 < stored < 4100
        second = await alice.post("/api/chat", chat_body("b2", text=text))
        assert second.status_code == 200
        async for _ in second.streaming_content:
            pass
        await runs_finished()
        before = await written()
        refused = await alice.post("/api/chat", chat_body("b3", text=text))
        error = assert_error(refused, 429, "budget_exceeded")
        assert error["budget"] == "day:stored_bytes"
        assert "MAX_STORED_BYTES_PER_USER_PER_DAY" in error["message"]
        assert 1 <= int(refused["Retry-After"]) <= 24 * 3600 + 3600
        async with Socket(alice.cookie) as page:
            await page.send(send_frame("r1", "b4", text))
            (frame,) = await page.until("r1")
        assert frame["code"] == "budget_exceeded"
        assert_error(await alice.post("/api/agui", agui_body("b5", text=text)), 429, "budget_exceeded")
        # A short message still fits.
        fits = await alice.post("/api/chat", chat_body("b6", text="hi"))
        assert fits.status_code == 200
        async for _ in fits.streaming_content:
            pass
    await runs_finished()
    assert (await Conversation.objects.acount(), await Run.objects.acount()) == (before[0] + 1, before[2] + 1)


async def drain(response: Any) -> None:
    async for _ in response.streaming_content:
        pass
    await runs_finished()


async def delete_chat(page: Page, chat_id: str) -> None:
    path = reverse("uistream:conversation-detail", args=[chat_id])
    assert (await page.client.delete(path, headers={"X-CSRFToken": page.token})).status_code == 204


async def stored_today(username: str) -> int:
    """What the cap counted before ``OwnerDay``: the sum over the user's runs started today."""
    start = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    runs = Run.objects.filter(conversation__owner__username=username, started_at__gte=start)
    return (await runs.aaggregate(total=Sum("stored_bytes")))["total"] or 0


@pytest.mark.asyncio
@pytest.mark.parametrize("upsert", ["one statement", "the ORM's"])
async def test_the_days_storage_refuses_as_the_sum_of_the_days_runs_would(
    upsert: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many turns of varied sizes, some chats deleted: each turn is refused
    exactly when what the day's runs stored, and the turn, pass the cap."""
    if upsert == "the ORM's":  # the way of backends without INSERT … RETURNING
        monkeypatch.setattr(caps, "_UPSERT_RETURNING", frozenset())
    alice = await page_of("alice")
    limit = 12_000
    accepted: list[str] = []
    refused = 0
    with override_settings(UISTREAM={**DEMO, "MAX_STORED_BYTES_PER_USER_PER_DAY": limit}):
        for n in range(24):
            text = "x" * (300 + 97 * n)
            adding = stored_bytes_of(user_message(text, id=f"q{n}"))
            fits = await stored_today("alice") + adding <= limit
            response = await alice.post("/api/chat", chat_body(f"c{n}", f"q{n}", text=text))
            if fits:
                assert response.status_code == 200, (n, response.status_code)
                await drain(response)
                accepted.append(f"c{n}")
            else:
                assert_error(response, 429, "budget_exceeded")
                refused += 1
                if refused % 2:  # deleting a chat of today's frees what it stored
                    await delete_chat(alice, accepted.pop(0))
    assert len(accepted) >= 8
    assert refused >= 5
    (day,) = [row async for row in OwnerDay.objects.all()]
    assert day.stored_bytes == await stored_today("alice")
    # Runs deleted on their own (retention's way, the admin's) give theirs back too.
    await Run.objects.filter(conversation__client_id=accepted[-1]).adelete()
    await day.arefresh_from_db()
    assert day.stored_bytes == await stored_today("alice") > 0


@pytest.mark.asyncio
async def test_the_days_storage_starts_again_at_midnight_utc(monkeypatch: pytest.MonkeyPatch) -> None:
    alice = await page_of("alice")
    now = [datetime.datetime(2026, 12, 6, 23, 59, 50, tzinfo=datetime.UTC)]
    monkeypatch.setattr(timezone, "now", lambda: now[0])
    # The field keeps the callable it was given (``timezone.now`` as it was at import).
    monkeypatch.setattr(Run._meta.get_field("started_at"), "_get_default", lambda: now[0])
    owner_key = (await OwnerDay.objects.acreate(owner_key="unrelated", day=datetime.date(2026, 12, 5))).owner_key
    alice_id = (await get_user_model().objects.aget(username="alice")).pk
    await OwnerDay.objects.acreate(owner_key=f"user:{alice_id}", day=datetime.date(2026, 12, 4), stored_bytes=9_999)
    text = "x" * 4000
    with override_settings(UISTREAM={**DEMO, "MAX_STORED_BYTES_PER_USER_PER_DAY": 10_000}):
        for chat_id in ("d1", "d2"):
            await drain(await alice.post("/api/chat", chat_body(chat_id, text=text)))
        refused = await alice.post("/api/chat", chat_body("d3", text=text))
        assert assert_error(refused, 429, "budget_exceeded")["resets_at"] == "2026-12-07T00:00:00+00:00"
        assert refused["Retry-After"] == "10"

        now[0] = datetime.datetime(2026, 12, 7, 0, 0, 5, tzinfo=datetime.UTC)
        # A new day: yesterday's turns don't count, and the day before's row goes.
        for chat_id in ("e1", "e2"):
            await drain(await alice.post("/api/chat", chat_body(chat_id, text=text)))
        assert_error(await alice.post("/api/chat", chat_body("e3", text=text)), 429, "budget_exceeded")
        # Deleting yesterday's chat frees nothing today; today's, it does.
        await delete_chat(alice, "d1")
        assert_error(await alice.post("/api/chat", chat_body("e3", text=text)), 429, "budget_exceeded")
        await delete_chat(alice, "e1")
        await drain(await alice.post("/api/chat", chat_body("e3", text=text)))
    days = {(row.owner_key, row.day) async for row in OwnerDay.objects.all()}
    assert days == {
        (owner_key, datetime.date(2026, 12, 5)),
        (f"user:{alice_id}", datetime.date(2026, 12, 6)),
        (f"user:{alice_id}", datetime.date(2026, 12, 7)),
    }


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from serve_demo(monkeypatch, 0)


def test_by_default_an_anonymous_visitor_cannot_store_three_large_files_in_one_request(server: str) -> None:
    # Three files of 7 MiB: within MAX_FILE_BYTES and the body limit, past
    # the session's 20 MiB a day. Refused before a byte reaches storage.
    visitor = Browser(server)
    image = png(7 * MiB)
    parts = [file_part("image/png", image, f"{n}.png") for n in range(3)]
    status, body = send(visitor, body_with("big", "look", *parts))
    assert status == 429
    assert body["error"]["code"] == "budget_exceeded"
    assert "MAX_STORED_BYTES_PER_SESSION_PER_DAY" in body["error"]["message"]
    assert not Conversation.objects.exists()
    assert stored_names() == set()
    # Two of them fit, and are counted as the files' bytes.
    status, _ = send(visitor, body_with("two", "look", *parts[:2]))
    assert status == 200
    run = Run.objects.get()
    assert 2 * len(image) < run.stored_bytes < 2 * len(image) + 1000


@pytest.mark.asyncio
async def test_a_new_chats_statements_do_not_grow_with_the_owners_day() -> None:
    """A new chat's turn is five statements, and the same five after
    forty turns of the owner's day as after one: the caps read one row,
    not the day's runs (the day's first turn also deletes the owner's old
    days)."""
    owner = Owner.of_session("s" * 32)
    store = ConversationStore()

    async def new_chat(n: int) -> list[str]:
        turn = Turn(f"chat-{n}", "submit", message=user_message("count to 2", id=f"q{n}"))
        async with worker_queries() as log:
            prepared = await store.prepare(turn, owner, version=7, model_name="demo")
        await prepared.channel.close()
        await Run.objects.filter(pk=prepared.run.pk).aupdate(status="completed")
        return list(log.sql)

    first = await new_chat(0)
    second = await new_chat(1)
    for n in range(2, 40):
        await new_chat(n)
    assert await new_chat(40) == second
    assert len(first) == len(second) + 1  # the old days' DELETE
    # Five (and SQLite's BEGIN): the two messages in one insert (no savepoint), both caps in the day's upsert.
    assert [" ".join(sql.split()[:3]) for sql in second if not sql.startswith("BEGIN")] == [
        'SELECT c."id" FROM',  # the chat id looked up, written out (store._owned_chat_key)
        'INSERT INTO "uistream_app_conversation"',
        'INSERT INTO "uistream_app_message"',
        'INSERT INTO "uistream_app_run"',
        'INSERT INTO "uistream_app_ownerday"',
    ]
