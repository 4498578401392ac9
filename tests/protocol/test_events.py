from __future__ import annotations

import dataclasses

import pytest

from uistream_app.protocol import events as ev


def test_events_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ev.TextDelta("a").text = "b"  # type: ignore[misc]


@pytest.mark.parametrize(
    "event",
    [
        ev.TextDelta("a"),
        ev.TextEnd(),
        ev.ToolCall("c", "n", '{"a": 1}', dynamic=True),
        ev.ToolResult("c", {"x": [1]}, is_error=False),
        ev.Data("weather", {"t": 1}, id="w", transient=True),
        ev.Done(),
        ev.Usage(input_tokens=1),
    ],
)
def test_round_trip_through_json(event: ev.Event) -> None:
    as_dict = ev.event_to_dict(event)
    assert None not in as_dict.values()
    assert ev.event_from_dict(as_dict) == event


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"type": "nope"}, "unknown event type 'nope'"),
        ({"type": "text-delta", "txt": "a"}, "unknown fields"),
        ({"type": "text-delta"}, "text-delta:"),
        (["text-delta"], "JSON object"),
    ],
)
def test_bad_event_objects_are_named(obj: object, message: str) -> None:
    with pytest.raises(ev.EventFormatError, match=message):
        ev.event_from_dict(obj)  # type: ignore[arg-type]
