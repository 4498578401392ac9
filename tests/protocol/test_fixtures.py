"""The golden UI message stream fixtures, from the Python side.

The Node side (tests/js/fixtures.test.mjs) proves the real ai@5/6/7 clients
read every ``.sse`` file into ``message*.json``; here we prove the Python
encoder and renderers reproduce those bytes exactly from the locked source
events, and that our reader builds the same message the real client built.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from uistream_app.protocol.ui.reader import UIMessageReader

from ..ui_fixtures import FIXTURES, SCENARIOS, VERSIONS, canonical_chunks, fixture_dirs, render, sse_chunks

DIRS = fixture_dirs()


def expected_message(directory: Path, version: int) -> object:
    specific = directory / f"message.v{version}.json"
    path = specific if specific.exists() else directory / "message.json"
    return json.loads(path.read_text())


def test_every_scenario_has_a_fixture() -> None:
    assert sorted(p.name for p in DIRS) == sorted(SCENARIOS)
    assert FIXTURES.is_dir()


@pytest.mark.parametrize("directory", DIRS, ids=lambda p: p.name)
@pytest.mark.parametrize("version", VERSIONS)
def test_source_reencodes_to_identical_bytes(directory: Path, version: int) -> None:
    expected = (directory / f"v{version}.sse").read_bytes()
    assert render(canonical_chunks(directory), version) == expected


@pytest.mark.parametrize("directory", DIRS, ids=lambda p: p.name)
@pytest.mark.parametrize("version", VERSIONS)
def test_reader_builds_the_message_the_real_client_built(directory: Path, version: int) -> None:
    if version != 7 and (directory / f"message.v{version}.json").exists():
        # The older client builds its own shape here (e.g. ai@5/6 keep a bad
        # input as ``rawInput``); our reader is the ai@7 twin, and Node proves
        # the real ai@{5,6} built message.v{N}.json.
        pytest.skip(f"ai@{version} builds a different message than ai@7 here")
    chunks = sse_chunks((directory / f"v{version}.sse").read_bytes())
    reader = UIMessageReader()
    for chunk in chunks:
        reader.feed(chunk)
    assert reader.message == expected_message(directory, version)
    scenario = json.loads((directory / "scenario.json").read_text())
    assert reader.error_text == scenario.get("expect_error")


def test_masked_error_never_leaks_the_provider_text() -> None:
    for version in VERSIONS:
        body = (FIXTURES / "model-error-mid-text" / f"v{version}.sse").read_bytes()
        assert b"secret" not in body
        assert b'"errorText":"An error occurred."' in body


def test_replayed_turn_comes_back_equal() -> None:
    directory = FIXTURES / "replayed-stored-turn"
    stored = json.loads((directory / "stored_message.json").read_text())
    # message.json was written by the real ai@7 client from v7.sse.
    assert json.loads((directory / "message.json").read_text()) == stored


def test_provider_parts_invert_to_the_events_that_made_them() -> None:
    """A run whose chunks carry provider metadata, citations and a custom
    part exports as the events that made it (the admin's fixture export),
    and those encode to the same chunks."""
    from uistream_app.inspect.fixture import events_from_chunks, reencode
    from uistream_app.protocol import events as ev
    from uistream_app.protocol.ui.encoder import UIMessageEncoder
    from uistream_app.protocol.ui.stream import encode_events

    cited = [{"source": {"type": "source", "sourceType": "url", "id": "u", "url": "https://a.example/"}}]
    source = [
        ev.Custom("anthropic.message_start", {"anthropic": {"id": "msg_1"}}),
        ev.ToolCallStart("srv_1", "web_search", provider_executed=True),
        ev.ToolCall("srv_1", "web_search", "{}", provider_executed=True),
        ev.ToolResult("srv_1", [], tool_name="web_search", provider_executed=True, provider_metadata={"x": {"y": 1}}),
        ev.TextDelta("Cold."),
        ev.TextEnd({"anthropic": {"citations": [{"type": "web_search_result_location"}]}}, cited),
        ev.ToolCall(
            "c1", "get_weather", '{"city":"Oslo"}', provider_metadata={"anthropic": {"caller": {"type": "direct"}}}
        ),
        ev.Done(),
    ]
    chunks = list(encode_events(source, UIMessageEncoder("m1")))
    message_id, metadata, events = events_from_chunks(chunks)
    assert reencode(message_id, metadata, events) == chunks
    assert {
        "type": "custom",
        "kind": "anthropic.message_start",
        "provider_metadata": {"anthropic": {"id": "msg_1"}},
    } in events
