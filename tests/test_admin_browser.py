"""The admin in real Chromium: the inspector and the conversation page
render (styles applied, reasoning folded until opened, the timeline drawn),
a model answer full of markup stays text and runs nothing, and the
screenshots are checked pixel by pixel, not just saved.

Needs Debian's ``chromium`` (``apt-get install chromium``) and the
``playwright`` package; skipped without them (a failure in CI). Set
``UISTREAM_SCREENSHOTS=DIR`` to keep the screenshots (docs/inspector.png
comes from here).
"""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import django.db
import pytest
from django.test import Client
from django.urls import reverse

from uistream_app.inspect.formats import DIALECTS

from .conftest import in_ci
from .test_admin import add_turns, make_full_run

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

pytestmark = pytest.mark.django_db(transaction=True)


# -- a small PNG reader (8-bit RGB/RGBA, not interlaced: what Chromium writes) ----------------


def decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """``(width, height, rows)``, each row ``width * 3`` bytes of RGB."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        payload = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = payload
        elif kind == b"IDAT":
            idat += payload
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    if depth != 8 or colour not in (2, 6) or interlace != 0:
        raise ValueError(f"an unexpected PNG: depth {depth}, colour type {colour}, interlace {interlace}")
    channels = 3 if colour == 2 else 4
    stride = width * channels
    raw = zlib.decompress(idat)
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        line = raw[y * (stride + 1) : (y + 1) * (stride + 1)]
        filter_type, row = line[0], bytearray(line[1:])
        for i in range(stride):
            left = row[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if filter_type == 1:
                row[i] = (row[i] + left) & 0xFF
            elif filter_type == 2:
                row[i] = (row[i] + up) & 0xFF
            elif filter_type == 3:
                row[i] = (row[i] + (left + up) // 2) & 0xFF
            elif filter_type == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                predictor = left if pa <= pb and pa <= pc else (up if pb <= pc else corner)
                row[i] = (row[i] + predictor) & 0xFF
        previous = row
        if channels == 4:
            rgb = bytearray()
            for i in range(0, stride, 4):
                rgb += row[i : i + 3]
            rows.append(bytes(rgb))
        else:
            rows.append(bytes(row))
    return width, height, rows


def colour_share(rows: list[bytes], rgb: tuple[int, int, int], tolerance: int = 12) -> float:
    """The share of pixels within ``tolerance`` of ``rgb``."""
    hits = total = 0
    for row in rows:
        for i in range(0, len(row), 3):
            total += 1
            if all(abs(row[i + k] - rgb[k]) <= tolerance for k in range(3)):
                hits += 1
    return hits / total if total else 0.0


def distinct_colours(rows: list[bytes], step: int = 7) -> int:
    seen = set()
    for row in rows[::step]:
        for i in range(0, len(row), 3 * step):
            seen.add(row[i : i + 3])
    return len(seen)


def hex_rgb(value: str) -> tuple[int, int, int]:
    return int(value[1:3], 16), int(value[3:5], 16), int(value[5:7], 16)


# -- the browser ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if in_ci():
            pytest.fail("playwright is not installed")
        pytest.skip("playwright is not installed")
    if not (os.path.exists(CHROMIUM) or shutil.which("chromium")):
        if in_ci():
            pytest.fail(f"{CHROMIUM} is missing (apt-get install chromium)")
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    # Playwright's sync API keeps an event loop in this thread for as long
    # as it runs; the database work of the tests (and of their fixtures)
    # around the page actions is plain synchronous ORM use.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                yield browser
            finally:
                browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def page(django_db_setup: Any, chromium: Any, live_server: Any, django_user_model: Any) -> Iterator[Any]:
    # ``django_db_setup`` first: a live server started before the test
    # database exists takes SQLite's ":memory:" NAME for an in-memory
    # database and shares this thread's connection with its threads.
    name = str(django.db.connection.settings_dict["NAME"])
    assert name != ":memory:", "the live server would share one SQLite connection between threads"
    staff = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(staff)
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, device_scale_factor=1)
    context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}])
    page = context.new_page()
    page.dialogs = []
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    try:
        yield page
    finally:
        context.close()


def keep(name: str, png: bytes) -> None:
    directory = os.environ.get("UISTREAM_SCREENSHOTS")
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
        (Path(directory) / name).write_bytes(png)


def test_the_inspector_in_chromium(page: Any, live_server: Any) -> None:
    from uistream_app.inspect.timeline import COLOURS

    run = make_full_run()
    response = page.goto(live_server.url + reverse("admin:uistream_app_run_change", args=[run.pk]))
    assert response.status == 200
    assert page.locator("h1").inner_text().startswith("Run ")

    # Styles are applied (the stylesheet is served and read).
    card = page.locator(".uistream-tool-output-available").first
    assert card.evaluate("e => getComputedStyle(e).borderLeftColor") == "rgb(95, 156, 77)"

    # The reasoning is folded, and opens.
    reasoning = page.locator("#message details.uistream-reasoning")
    assert reasoning.evaluate("e => e.open") is False
    assert not reasoning.locator(".uistream-text").is_visible()
    reasoning.locator("summary").click()
    assert reasoning.locator(".uistream-text").is_visible()

    # Markup in the answer is text; nothing ran.
    answer = page.locator("#message .uistream-text").nth(1).inner_text()
    assert "</textarea><script>alert('xss')</script>" in answer
    assert page.locator("#message script").count() == 0
    assert page.locator("img[onerror]").count() == 0
    assert page.locator("a[href^='javascript:']").count() == 0
    assert page.dialogs == []
    assert page.errors == []

    # The timeline is drawn, with its steps, arrivals and tool waits.
    svg = page.locator("svg.uistream-timeline")
    box = svg.bounding_box()
    assert box is not None
    assert box["width"] >= 600
    assert box["height"] > 100
    assert svg.locator("g.step").count() == 2
    assert svg.locator("g.tool-wait").count() == 4
    timeline = decode_png(svg.screenshot())
    assert timeline[0] >= 600
    assert colour_share(timeline[2], hex_rgb(COLOURS["bar"])) > 0.002  # arrival bars
    assert colour_share(timeline[2], hex_rgb(COLOURS["first"])) > 0.01  # time to first chunk
    assert colour_share(timeline[2], (0x5F, 0x9C, 0x4D), tolerance=40) > 0.005  # a tool that answered
    keep("timeline.png", svg.screenshot())

    # The whole page: sized, not blank, the status badge and tool cards in colour.
    png = page.screenshot(full_page=True)
    width, height, rows = decode_png(png)
    assert width == 1280
    assert height > 1500
    assert distinct_colours(rows) > 40
    assert colour_share(rows, (0x2B, 0x7A, 0x2B), tolerance=10) > 0  # the "completed" badge
    keep("inspector.png", png)

    # The wire shows each dialect; the downloads are links to the whole run.
    assert page.locator("details.uistream-wire").count() == len(DIALECTS)  # ai7, ai6, ai5, agui
    assert 'data: {"type":"start","messageId":"msg-1"}' in page.locator("details.uistream-wire pre").first.inner_text()
    href = page.locator(".uistream-downloads a").first.get_attribute("href")
    download = page.request.get(live_server.url + href)
    assert download.ok
    assert download.body().endswith(b"data: [DONE]\n\n")


def test_the_conversation_page_in_chromium(page: Any, live_server: Any) -> None:
    make_full_run(title="<script>alert('title')</script>")
    page.goto(live_server.url + reverse("admin:uistream_app_conversation_changelist"))
    assert "<script>alert('title')</script>" in page.locator("#result_list").inner_text()
    page.goto(live_server.url + reverse("admin:uistream_app_conversation_change", args=["chat-1"]))
    user = page.locator(".uistream-role-user")
    assistant = page.locator(".uistream-chat .uistream-role-assistant")
    assert "What is the weather in Paris?" in user.inner_text()
    user_box, assistant_box = user.bounding_box(), assistant.bounding_box()
    assert user_box is not None
    assert assistant_box is not None
    assert user_box["x"] > assistant_box["x"]  # the user's bubble sits on the right, as in a chat
    assert assistant.locator(".uistream-tool").count() == 4
    assert page.dialogs == []
    assert page.errors == []
    png = assistant.screenshot()
    width, height, rows = decode_png(png)
    assert width > 300
    assert height > 300
    assert colour_share(rows, (0x5F, 0x9C, 0x4D), tolerance=20) > 0  # the answered tool's green edge
    assert colour_share(rows, (0xBA, 0x21, 0x21), tolerance=20) > 0  # the failed tools' red edge
    keep("conversation.png", page.screenshot(full_page=True))


def test_a_long_conversation_pages_in_chromium(page: Any, live_server: Any) -> None:
    runs = add_turns("long", 60)
    page.goto(live_server.url + reverse("admin:uistream_app_conversation_change", args=["long"]))
    chat = page.locator(".uistream-chat > li")
    assert chat.count() == 50
    assert "question #035" in chat.first.inner_text()
    assert "answer #059" in chat.last.inner_text()

    # "older" goes back a page, to the messages before, and keeps them in view.
    page.locator("#messages-group .uistream-inline-pages").first.get_by_role("link", name="older").click()
    page.wait_for_url("**messages_page=2#messages-group")
    assert "question #010" in chat.first.inner_text()
    assert "answer #034" in chat.last.inner_text()
    assert page.evaluate("window.scrollY") > 0
    keep("conversation-older.png", page.screenshot())
    page.locator("#messages-group .uistream-inline-pages").first.get_by_role("link", name="3").click()
    page.wait_for_url("**messages_page=3#messages-group")
    assert "question #000" in chat.first.inner_text()

    # A run in the table opens its transcript inspector.
    page.locator("#runs-group").get_by_role("link", name=str(runs[59].pk)[:8]).click()
    page.wait_for_url(f"**/run/{runs[59].pk}/change/")
    assert page.locator("h1").inner_text().startswith("Run ")
    assert page.dialogs == []
    assert page.errors == []
