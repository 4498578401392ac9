"""Issue 34's "Done when", in real Chromium on the demo page: rate an
answer down with a comment, regenerate it, switch back to the first
attempt ("‹ 1/2 ›"), and after a reload find both attempts, the first one
shown with its rating pressed and its comment; in the database, the
``Feedback`` row holds the comment and the current branch is the first
attempt.

One demo server (``manage.py runserver``, as ``test_e2e_browser`` starts
it) on this process's test database, so the test reads what the page
stored with the ORM; one page; the demo model's shortest answer
("count to 3").
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from uistream_app.models import Feedback, Message

from .server import shared_database_url
from .test_admin_browser import chromium  # noqa: F401  (a fixture: Chromium, with the ORM usable beside it)
from .test_e2e_browser import (
    answer_text,
    chat_id,
    demo_env,
    demo_server,
    expect,
    last_answer,
    open_context,
    page,  # noqa: F401  (a fixture: a new visitor's page on this module's demo)
    send,
    wait_for_text,
    wait_ready,
    watch,
)

pytestmark = pytest.mark.django_db(transaction=True)

#: Text and markup a person may type: shown as typed, never as HTML.
COMMENT = 'It stops at 3 <b>already</b> & says "done"'


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[str]:
    """The demo on the test database (migrated by pytest-django): what the
    page stores, the test reads."""
    with demo_server(demo_env(DATABASE_URL=shared_database_url()), tmp_path / "server.log") as base:
        yield base


def answer_id(page: Any) -> str:
    found = last_answer(page).get_attribute("data-message-id")
    assert found
    return str(found)


def test_rate_down_regenerate_switch_back_and_find_both_after_a_reload(page: Any, demo: str, chromium: Any) -> None:
    page.goto(demo + "/")
    send(page, "count to 3")
    wait_for_text(page, "1 2 3")
    wait_ready(page)
    first = answer_id(page)
    answer = last_answer(page)
    up = answer.get_by_role("button", name="Rate up")
    down = answer.get_by_role("button", name="Rate down")
    expect(up).to_have_attribute("aria-pressed", "false")
    expect(down).to_have_attribute("aria-pressed", "false")
    # One version so far: nothing to switch between.
    expect(page.get_by_role("button", name="Previous version")).to_have_count(0)

    # A rating pressed again is taken back.
    up.click()
    expect(up).to_have_attribute("aria-pressed", "true")
    with page.expect_response(lambda r: r.url.endswith(f"/messages/{first}/feedback")) as taken_back:
        up.click()
    assert (taken_back.value.request.method, taken_back.value.status) == ("DELETE", 204)
    expect(up).to_have_attribute("aria-pressed", "false")

    # 1. Rated down, with a reason and a comment.
    down.click()
    expect(down).to_have_attribute("aria-pressed", "true")
    form = answer.get_by_role("form", name="Feedback")
    form.get_by_label("Reason").select_option("inaccurate")
    form.get_by_label("Comment").fill(COMMENT)
    with page.expect_response(lambda r: r.url.endswith(f"/messages/{first}/feedback")) as sent:
        form.get_by_role("button", name="Send feedback").click()
    assert sent.value.status == 200  # a change of the down rating the click stored
    assert sent.value.request.post_data_json == {"rating": "down", "reason": "inaccurate", "comment": COMMENT}
    expect(form).to_have_count(0)
    expect(answer.locator(".feedback-comment")).to_have_text(COMMENT)
    expect(answer.locator(".feedback-comment b")).to_have_count(0)

    # 2. Regenerated: a second attempt, "2/2", not rated.
    answer.get_by_role("button", name="Regenerate").click()
    expect(page.locator(".chat")).not_to_have_attribute("data-status", "ready")
    wait_ready(page)
    assert answer_text(page) == "1 2 3"
    second = answer_id(page)
    assert second != first
    versions = last_answer(page).get_by_role("group", name="Versions")
    expect(versions).to_contain_text("2/2")
    expect(versions.get_by_role("button", name="Next version")).to_be_disabled()
    expect(last_answer(page).get_by_role("button", name="Rate down")).to_have_attribute("aria-pressed", "false")

    # 3. Back to the first attempt, through the API.
    with page.expect_response(lambda r: r.url.endswith(f"/messages/{second}/versions")) as switched:
        versions.get_by_role("button", name="Previous version").click()
    assert switched.value.status == 200
    assert switched.value.json() == {"current": 1, "count": 2}
    expect(last_answer(page)).to_have_attribute("data-message-id", first)
    expect(last_answer(page).get_by_role("group", name="Versions")).to_contain_text("1/2")
    expect(last_answer(page).get_by_role("button", name="Rate down")).to_have_attribute("aria-pressed", "true")

    # 4. After a reload: the first attempt, "1/2", its rating and comment;
    # "Next version" shows the second, and "Previous version" the first again.
    page.reload()
    wait_ready(page)
    expect(page.locator(".message")).to_have_count(2)
    answer = last_answer(page)
    expect(answer).to_have_attribute("data-message-id", first)
    versions = answer.get_by_role("group", name="Versions")
    expect(versions).to_contain_text("1/2")
    expect(versions.get_by_role("button", name="Previous version")).to_be_disabled()
    expect(answer.get_by_role("button", name="Rate down")).to_have_attribute("aria-pressed", "true")
    expect(answer.get_by_role("button", name="Rate up")).to_have_attribute("aria-pressed", "false")
    expect(answer.locator(".feedback-comment")).to_have_text(COMMENT)
    expect(answer.locator(".feedback-reason")).to_have_text("Inaccurate")

    versions.get_by_role("button", name="Next version").click()
    expect(last_answer(page)).to_have_attribute("data-message-id", second)
    expect(last_answer(page).get_by_role("group", name="Versions")).to_contain_text("2/2")
    expect(last_answer(page).get_by_role("button", name="Rate down")).to_have_attribute("aria-pressed", "false")
    last_answer(page).get_by_role("button", name="Previous version").click()
    expect(last_answer(page)).to_have_attribute("data-message-id", first)
    expect(last_answer(page).get_by_role("group", name="Versions")).to_contain_text("1/2")
    expect(page.locator(".message")).to_have_count(2)

    # 5. In the database: the comment on the first attempt, which is the
    # current branch again; the second attempt is kept, off it.
    feedback = Feedback.objects.select_related("message").get(message__conversation__client_id=chat_id(page))
    assert (feedback.rating, feedback.reason, feedback.comment) == ("down", "inaccurate", COMMENT)
    assert feedback.message.ui_id == first
    stored = Message.objects.filter(conversation__client_id=chat_id(page))
    assert [(m.role, m.ui_id) for m in stored.current().order_by("position")] == [
        ("user", page.locator(".message.user").get_attribute("data-message-id")),
        ("assistant", first),
    ]
    assert stored.get(pk=second).current is False

    # 6. Staff, in the admin: the runs rated down, the run, its comment and
    # the other attempt, and the run exported as a dataset.
    admin_finds_the_rated_run(chromium, demo, feedback.run_id, second)

    # While an answer streams, the versions stay as they are.
    versions = page.locator(f".message.assistant[data-message-id='{first}']").get_by_role("group", name="Versions")
    send(page, "count to 20")
    expect(versions.get_by_role("button", name="Next version")).to_be_disabled()
    wait_for_text(page, " 20")
    wait_ready(page)
    expect(versions.get_by_role("button", name="Next version")).to_be_enabled()


def admin_finds_the_rated_run(chromium: Any, demo: str, run_id: Any, other_answer: str) -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import PBKDF2PasswordHasher

    # The password hashed as the demo hashes it (the tests' own hasher is
    # not among the demo's), so its login form takes it.
    user = get_user_model().objects.create_superuser("staff", "staff@example.com")
    hasher = PBKDF2PasswordHasher()
    user.password = hasher.encode("a staff password", hasher.salt())
    user.save(update_fields=["password"])
    context = open_context(chromium, accept_downloads=True)
    staff = watch(context.new_page())
    try:
        staff.goto(demo + "/admin/login/?next=/admin/uistream_app/run/")
        staff.get_by_label("Username").fill("staff")
        staff.get_by_label("Password").fill("a staff password")
        staff.get_by_role("button", name="Log in").click()
        staff.locator("#changelist-filter").get_by_role("link", name="rated down", exact=True).click()
        rows = staff.locator("#result_list tbody tr")
        expect(rows).to_have_count(1)
        rows.first.locator("th a, td a").first.click()
        expect(staff.locator("#feedback .uistream-feedback-comment")).to_have_text(COMMENT)
        expect(staff.locator("#feedback .uistream-feedback-comment b")).to_have_count(0)
        attempts = staff.locator("#attempts .uistream-versions li")
        expect(attempts).to_have_count(2)
        expect(attempts.filter(has_text=other_answer)).to_have_count(1)
        assert str(run_id) in staff.url

        staff.go_back()
        rows.first.locator("input.action-select").check()
        staff.locator("select[name=action]").select_option("export_dataset")
        with staff.expect_download() as download:
            staff.locator("#changelist-form button[name=index]").click()
        lines = Path(download.value.path()).read_text(encoding="utf-8").splitlines()
        (line,) = [json.loads(text) for text in lines]
        assert line["feedback"]["comment"] == COMMENT
        assert line["feedback"]["rating"] == "down"
        assert staff.errors == []
    finally:
        context.close()
