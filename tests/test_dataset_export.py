"""Runs as a JSONL dataset: the admin's action ("Export the selected runs
as a JSONL dataset", staff only, streamed) and ``manage.py uistream_export``
with its filters write the same lines, each read back with ``json.loads``."""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import AsyncClient, Client
from django.urls import reverse
from django.utils import timezone

from uistream_app.models import Feedback, Run

from .test_admin import admin_client, staff  # noqa: F401  (fixtures)
from .test_admin_feedback import Chat, rate

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:uistream_app_run_changelist")

SETUP = {
    "model": "demo",
    "transport": "http",
    "system_prompt": "You are terse.",
    "tools": [{"name": "get_weather", "description": "The weather.", "parameters": {"type": "object"}}],
}
HISTORY = {
    "strategy": "LastMessages(100)",
    "stored_messages": 1,
    "messages": ["q"],
    "sent": [{"role": "user", "text": "Weather in Paris?"}],
}


@pytest.fixture
def runs(django_user_model: Any) -> dict[str, Run]:
    ada = django_user_model.objects.create_user("ada", "ada@example.com", "pw")
    chat = Chat("exported", owner=ada)
    rated = chat.answer(chat.ask("Weather in Paris?"), "It is 18 °C.", key="a1", model="gpt-a")
    Run.objects.filter(pk=rated.pk).update(
        setup=SETUP, history=HISTORY, usage={"input_tokens": 12, "output_tokens": 5}, trace_id="a" * 32
    )
    rate(rated, "down", comment="It is raining </script>.", reason="inaccurate")
    failed = chat.answer(chat.ask("And Rome?"), key="a2", model="gpt-b", status="failed", error_code="ModelError")
    liked = chat.answer(chat.ask("Thanks"), key="a3", model="gpt-a")
    rate(liked, "up")
    Run.objects.filter(pk=liked.pk).update(started_at=timezone.now() - dt.timedelta(days=40))
    visitor = Chat("anonymous", session_key="k" * 32)
    unrated = visitor.answer(visitor.ask("Hi"), key="a4", model="gpt-a")
    return {"rated": rated, "failed": failed, "liked": liked, "unrated": unrated}


def read_lines(data: bytes) -> list[dict[str, Any]]:
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.decode().splitlines()]


def export(*args: str) -> tuple[bytes, str]:
    class Stdout(io.StringIO):
        def __init__(self) -> None:
            super().__init__()
            self.buffer = io.BytesIO()

    out, err = Stdout(), io.StringIO()
    call_command("uistream_export", *args, stdout=out, stderr=err)
    return out.buffer.getvalue(), err.getvalue()


def post_action(client: Client, pks: list[Any], **query: str) -> Any:
    url = CHANGELIST + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")
    return client.post(url, {"action": "export_dataset", "_selected_action": [str(pk) for pk in pks], "index": "0"})


# -- a line -----------------------------------------------------------------------------------


def test_a_line_holds_what_the_model_was_given_and_what_it_answered(runs: dict[str, Run]) -> None:
    data, err = export()
    lines = {line["run"]: line for line in read_lines(data)}
    assert err.strip() == "exported 4 runs to standard output"
    line = lines[str(runs["rated"].pk)]
    ada = runs["rated"].conversation.owner
    assert line == {
        "run": str(runs["rated"].pk),
        "conversation": "exported",
        "conversation_key": "exported",
        "message": "a1",
        "owner": f"user:{ada.pk}",
        "trace_id": "a" * 32,
        "span_id": "",
        "status": "completed",
        "finish_reason": "",
        "error_code": "",
        "model": "gpt-a",
        "usage": {"input_tokens": 12, "output_tokens": 5},
        "trigger": "",
        "started_at": runs["rated"].started_at.isoformat(),
        "finished_at": runs["rated"].finished_at.isoformat(),
        "setup": SETUP,
        "history": HISTORY,
        "answer": {"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": "It is 18 °C."}]},
        "feedback": Feedback.objects.get(message_id="a1").as_json(),
    }
    assert line["feedback"]["comment"] == "It is raining </script>."
    visitor = lines[str(runs["unrated"].pk)]
    assert visitor["owner"].startswith("session:")
    assert "k" * 8 not in visitor["owner"]  # a digest, never the session key
    assert (visitor["feedback"], visitor["setup"], visitor["history"]) == (None, None, None)


# -- the command ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--rating", "down"], ["rated"]),
        (["--rating", "up"], ["liked"]),
        (["--rating", "none"], ["failed", "unrated"]),
        (["--model", "gpt-b"], ["failed"]),
        (["--model", "gpt-a", "--model", "gpt-b", "--status", "failed"], ["failed"]),
        (["--status", "completed", "--rating", "down"], ["rated"]),
        (["--until", str(timezone.localdate() - dt.timedelta(days=10))], ["liked"]),
        (["--since", str(timezone.localdate() - dt.timedelta(days=10)), "--model", "gpt-a"], ["rated", "unrated"]),
        (["--since", (timezone.now() + dt.timedelta(hours=1)).isoformat()], []),
    ],
)
def test_the_command_filters(runs: dict[str, Run], args: list[str], expected: list[str]) -> None:
    data, _ = export(*args)
    exported = {line["run"] for line in read_lines(data)} if data else set()
    assert exported == {str(runs[name].pk) for name in expected}


def test_the_command_writes_a_file_oldest_run_first(runs: dict[str, Run], tmp_path: Path) -> None:
    path = tmp_path / "down.jsonl"
    data, err = export("--output", str(path))
    assert data == b""
    assert err.strip() == f"exported 4 runs to {path}"
    lines = read_lines(path.read_bytes())
    assert lines[0]["run"] == str(runs["liked"].pk)  # forty days old
    assert [line["started_at"] for line in lines] == sorted(line["started_at"] for line in lines)


def test_the_command_refuses_what_it_cannot_read(runs: dict[str, Run], tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="neither a date"):
        export("--since", "last week")
    with pytest.raises(CommandError, match="cannot write"):
        export("--output", str(tmp_path / "no" / "such" / "dir.jsonl"))


# -- the admin's action ----------------------------------------------------------------------------


def test_the_action_downloads_the_selected_runs(admin_client: Client, runs: dict[str, Run]) -> None:
    chosen = [runs["rated"].pk, runs["failed"].pk]
    response = post_action(admin_client, chosen)
    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Type"] == "application/jsonl; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="uistream-runs-')
    lines = read_lines(b"".join(response.streaming_content))
    assert {line["run"] for line in lines} == {str(pk) for pk in chosen}
    # The same lines the command writes.
    by_command, _ = export("--model", "gpt-b")
    assert [line for line in lines if line["model"] == "gpt-b"] == read_lines(by_command)


def test_the_action_exports_all_the_filtered_runs(admin_client: Client, runs: dict[str, Run]) -> None:
    url = CHANGELIST + "?feedback=down"
    response = admin_client.post(
        url,
        {"action": "export_dataset", "select_across": "1", "index": "0", "_selected_action": [str(runs["rated"].pk)]},
    )
    assert [line["run"] for line in read_lines(b"".join(response.streaming_content))] == [str(runs["rated"].pk)]


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_action_streams_under_asgi(staff: Any, runs: dict[str, Run]) -> None:
    client = AsyncClient()
    await client.aforce_login(staff)
    response = await client.post(
        CHANGELIST, {"action": "export_dataset", "_selected_action": [str(runs["rated"].pk)], "index": "0"}
    )
    assert response.status_code == 200
    chunks = [chunk async for chunk in response.streaming_content]  # type: ignore[attr-defined]
    assert [line["run"] for line in read_lines(b"".join(chunks))] == [str(runs["rated"].pk)]


def test_the_action_is_for_staff_only(runs: dict[str, Run], django_user_model: Any) -> None:
    chosen = [runs["rated"].pk]
    member = django_user_model.objects.create_user("member", "member@example.com", "pw")
    client = Client()
    client.force_login(member)
    refused = post_action(client, chosen)
    assert refused.status_code == 302
    assert "/login/" in refused["Location"]
    # Staff, but without the permission to view runs: no list, no export.
    member.is_staff = True
    member.save()
    assert post_action(client, chosen).status_code == 403
    member.user_permissions.add(Permission.objects.get(codename="view_run"))
    allowed = post_action(client, chosen)
    assert allowed.status_code == 200
    assert [line["run"] for line in read_lines(b"".join(allowed.streaming_content))] == [str(runs["rated"].pk)]
