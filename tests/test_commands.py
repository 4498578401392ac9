"""The management commands: ``uistream_replay``, ``uistream_validate`` and
``uistream_export_fixture`` (whose output passes the fixture tests of both
sides: Python re-encodes it byte for byte, the real clients read it)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from uistream_app.models import Run
from uistream_app.protocol import events as ev
from uistream_app.protocol.ui.reader import UIMessageReader
from uistream_app.protocol.ui.render import UIStreamRenderer
from uistream_app.recording import read_log

from .conftest import JS_DIR
from .test_admin import encode, make_full_run, store_run
from .ui_fixtures import FIXTURES, VERSIONS, canonical_chunks, fixture_dirs, render

pytestmark = pytest.mark.django_db


def run_command(*args: Any) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def log_of(run: Run) -> list[dict[str, Any]]:
    return [entry.chunk for entry in read_log(run)]


# -- uistream_replay -----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [7, 6, 5])
def test_replay_writes_the_wire(version: int) -> None:
    run = make_full_run()
    renderer = UIStreamRenderer(version)
    out, _ = run_command("uistream_replay", str(run.pk), "--format", f"ai{version}")
    assert out.encode() == renderer.render_many(log_of(run)) + renderer.done()


def test_replay_defaults_to_ai7_and_takes_an_id_prefix() -> None:
    run = make_full_run()
    out, _ = run_command("uistream_replay", str(run.pk)[:8])
    assert out.startswith('data: {"type":"start","messageId":"msg-1"}\n\n')
    assert out.endswith("data: [DONE]\n\n")
    lines, _ = run_command("uistream_replay", str(run.pk), "--format", "jsonl")
    assert [json.loads(line)["seq"] for line in lines.splitlines()] == list(range(run.chunk_count))


def test_replay_writes_bytes_to_a_binary_stdout() -> None:
    run = make_full_run()

    class BinaryStdout:
        """A console's stdout: text on top, the bytes underneath."""

        def __init__(self) -> None:
            self.buffer = io.BytesIO()

        def write(self, text: str) -> int:
            raise AssertionError("the wire goes to the buffer, not through the text layer")

        def flush(self) -> None:
            pass

    out = BinaryStdout()
    call_command("uistream_replay", str(run.pk), stdout=out)
    renderer = UIStreamRenderer(7)
    assert out.buffer.getvalue() == renderer.render_many(log_of(run)) + renderer.done()


def test_replay_refuses_what_it_cannot_find() -> None:
    run = make_full_run()
    with pytest.raises(CommandError, match="unknown format 'agui-someday'"):
        run_command("uistream_replay", str(run.pk), "--format", "agui-someday")
    with pytest.raises(CommandError, match="no run 00000000-0000-4000-8000-000000000000"):
        run_command("uistream_replay", "00000000-0000-4000-8000-000000000000")
    with pytest.raises(CommandError, match="neither a run id nor a prefix"):
        run_command("uistream_replay", "abc")
    with pytest.raises(CommandError, match="no run id starts with"):
        run_command("uistream_replay", "ffffffffff" if not str(run.pk).startswith("f") else "0000000000")


def test_an_ambiguous_prefix_is_refused() -> None:
    run = make_full_run()
    for suffix in ("1", "2"):
        Run.objects.create(id=uuid.UUID(f"abcdef12-0000-4000-8000-00000000000{suffix}"), conversation=run.conversation)
    with pytest.raises(CommandError, match="more than one run"):
        run_command("uistream_replay", "abcdef12")
    out, _ = run_command("uistream_replay", "abcdef12-0000-4000-8000-000000000002", "--format", "jsonl")
    assert out == ""  # a run with no log has no wire


# -- uistream_validate ---------------------------------------------------------------------------


@pytest.mark.parametrize("directory", fixture_dirs(), ids=lambda p: p.name)
@pytest.mark.parametrize("version", VERSIONS)
def test_every_golden_fixture_validates(directory: Path, version: int) -> None:
    out, _ = run_command("uistream_validate", str(directory / f"v{version}.sse"), "--sdk-version", str(version))
    assert out.rstrip().endswith("verdict: ok"), out


def test_a_download_validates(tmp_path: Path) -> None:
    run = make_full_run()
    for name in ("ai7", "jsonl"):
        path = tmp_path / f"run.{name}"
        with path.open("w") as f:
            call_command("uistream_replay", str(run.pk), "--format", name, stdout=f)
        out, _ = run_command("uistream_validate", str(path), "--format", "sse" if name == "ai7" else "jsonl")
        assert out.rstrip().endswith("verdict: ok"), out


def test_a_broken_stream_fails_with_its_problems(tmp_path: Path) -> None:
    path = tmp_path / "broken.sse"
    path.write_bytes(
        b'data: {"type":"start"}\n\n'
        b'data: {"type":"text-delta","id":"text-0","delta":"no start"}\n\n'
        b"data: {not json}\n\n"
        b'data: {"type":"finish","finishReason":"stop"}\n\n'
        b'data: {"type":"text-start","id":"text-1"}\n\n'
        b'data: {"type":"text'
    )
    out = io.StringIO()
    with pytest.raises(CommandError, match="check\\(s\\) failed") as failure:
        call_command("uistream_validate", str(path), stdout=out)
    assert failure.value.returncode == 1
    text = out.getvalue()
    assert "[FAIL] SSE framing" in text
    assert "data is not JSON" in text
    assert "does not end with data: [DONE]" in text
    assert "ends in the middle of an event" in text
    assert "[FAIL] the SDK's reader" in text
    assert 'missing text part with ID "text-0"' in text
    assert "[FAIL] the encoder's framing rules" in text
    assert "text-start after finish" in text


def test_validate_checks_the_target_clients_schema(tmp_path: Path) -> None:
    v7 = FIXTURES / "interrupted" / "v7.sse"
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("uistream_validate", str(v7), "--sdk-version", "5", stdout=out)
    assert "ai@5 has no finishReason 'interrupted'" in out.getvalue()
    verdict, _ = run_command("uistream_validate", str(v7), "--json")
    assert json.loads(verdict)["ok"] is True


def test_validate_reports_an_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="cannot read"):
        run_command("uistream_validate", str(tmp_path / "missing.sse"))


# -- uistream_export_fixture ----------------------------------------------------------------------


def test_export_writes_a_fixture_the_python_side_reproduces(tmp_path: Path) -> None:
    run = make_full_run()
    directory = tmp_path / "full-run"
    out, err = run_command("uistream_export_fixture", str(run.pk), str(directory), "--description", "Every part.")
    assert "events.jsonl" in out
    assert not err
    assert sorted(p.name for p in directory.iterdir()) == [
        "events.jsonl",
        "message.json",
        "scenario.json",
        "v5.sse",
        "v6.sse",
        "v7.sse",
    ]
    scenario = json.loads((directory / "scenario.json").read_text())
    assert scenario == {"description": "Every part.", "message_id": "msg-1"}
    # What tests/ui_fixtures.py and tests/protocol/test_fixtures.py do with a fixture.
    chunks = canonical_chunks(directory)
    assert chunks == log_of(run)
    for version in VERSIONS:
        assert render(chunks, version) == (directory / f"v{version}.sse").read_bytes()
    assert json.loads((directory / "message.json").read_text()) == run.message.as_ui_message()  # type: ignore[union-attr]


def test_export_of_a_failed_run_expects_its_error(tmp_path: Path) -> None:
    chunks = encode([ev.TextDelta("The answer is")], "msg-1")[:-3]
    chunks += [{"type": "text-end", "id": "text-0"}, {"type": "error", "errorText": "An error occurred."}]
    run = store_run(chunks, status="failed")
    run_command("uistream_export_fixture", str(run.pk), str(tmp_path / "failed"))
    scenario = json.loads((tmp_path / "failed" / "scenario.json").read_text())
    assert scenario["expect_error"] == "An error occurred."
    assert canonical_chunks(tmp_path / "failed") == chunks


def test_a_log_without_source_events_exports_its_chunks(tmp_path: Path) -> None:
    chunks = encode([ev.TextDelta("Partial")], "msg-1")[:-3]
    chunks += [{"type": "text-end", "id": "text-0"}, {"type": "abort", "reason": "stopped"}]
    run = store_run(chunks, status="stopped")
    directory = tmp_path / "stopped"
    _, err = run_command("uistream_export_fixture", str(run.pk), str(directory))
    assert "no source event sends a 'abort' chunk" in err
    lines = [json.loads(line) for line in (directory / "chunks.jsonl").read_text().splitlines()]
    assert lines == chunks
    # From the log as stored (PostgreSQL's jsonb reorders keys; equal, not byte-identical).
    assert (directory / "v7.sse").read_bytes() == render(log_of(run), 7)
    reader = UIMessageReader()
    reader.feed_all(chunks)
    assert json.loads((directory / "message.json").read_text()) == reader.message


def test_export_refuses_a_directory_with_files(tmp_path: Path) -> None:
    run = make_full_run()
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(CommandError, match="not empty"):
        run_command("uistream_export_fixture", str(run.pk), str(tmp_path))
    run_command("uistream_export_fixture", str(run.pk), str(tmp_path), "--force")
    assert (tmp_path / "keep.txt").read_text() == "mine"
    assert (tmp_path / "v7.sse").exists()
    with pytest.raises(CommandError, match="go together"):
        run_command("uistream_export_fixture", str(run.pk), str(tmp_path / "x"), "--node", "node")


@pytest.mark.node
def test_an_exported_fixture_passes_the_real_clients(node: str, tmp_path: Path) -> None:
    run = make_full_run()
    directory = tmp_path / "fixtures" / "full-run"
    run_command(
        "uistream_export_fixture",
        str(run.pk),
        str(directory),
        "--node",
        node,
        "--build-message",
        str(JS_DIR / "build_message.mjs"),
    )
    # The real ai@7 client builds what we stored.
    assert json.loads((directory / "message.json").read_text()) == run.message.as_ui_message()  # type: ignore[union-attr]
    result = subprocess.run(
        [node, "--test", "fixtures.test.mjs"],
        cwd=JS_DIR,
        env={**os.environ, "UISTREAM_FIXTURES": str(tmp_path / "fixtures")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "# fail 0" in result.stdout


def test_replay_writes_a_stored_run_as_agui() -> None:
    from uistream_app.testing import verify_sse

    run = make_full_run()
    out, _ = run_command("uistream_replay", str(run.pk), "--format", "agui")
    events = verify_sse(out.encode())  # the client's rules and ag-ui-validate's
    assert events[0]["type"] == "RUN_STARTED"
    assert events[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
