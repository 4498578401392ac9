"""A broker that fails under a stream, without servers: what
``render_subscription`` makes of it in each dialect (the servers' side is
``tests/test_redis_outage.py``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from uistream_app.live import BrokerUnavailable, RunLost
from uistream_app.protocol.agui.renderer import AGUIRenderer
from uistream_app.protocol.ui.render import UIStreamRenderer
from uistream_app.transport.pipeline import StreamRenderer, render_subscription

ERROR_TEXT = "An error occurred."
SENT = [
    {"type": "start", "messageId": "a1"},
    {"type": "text-start", "id": "t0"},
    {"type": "text-delta", "id": "t0", "delta": "half an answer"},
]


class FailingBroker:
    """Hands over ``SENT``, then fails with ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.closed = False

    async def subscribe_batches(
        self, run_id: str, from_seq: int = 0, *, keepalive: float | None = None
    ) -> AsyncIterator[tuple[int, list[dict[str, Any]]]]:
        try:
            yield 0, list(SENT)
            raise self.error
        finally:
            self.closed = True


async def rendered(broker: FailingBroker, renderer: StreamRenderer) -> tuple[list[dict[str, Any]], bytes, list[bool]]:
    closes: list[bool] = []
    body = b"".join(
        [
            piece
            async for piece in render_subscription(
                broker,  # type: ignore[arg-type]
                "run-1",
                renderer,
                keepalive_seconds=10,
                on_close=closes.append,
            )
        ]
    )
    events = [json.loads(line[6:]) for line in body.decode().splitlines() if line.startswith("data: {")]
    return events, body, closes


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [5, 6, 7])
@pytest.mark.parametrize("error", [BrokerUnavailable("Redis at redis://x cannot be reached"), RunLost("gone")])
async def test_a_usechat_stream_ends_with_a_masked_error_and_done(version: int, error: Exception) -> None:
    broker = FailingBroker(error)
    events, body, closes = await rendered(broker, UIStreamRenderer(version))
    assert events[-1] == {"type": "error", "errorText": ERROR_TEXT}
    assert events[-2]["delta"] == "half an answer"
    assert body.endswith(b"data: [DONE]\n\n")
    assert b"redis://" not in body
    # Not a disconnect: ON_DISCONNECT must not cancel the run.
    assert closes == [True]
    assert broker.closed


@pytest.mark.asyncio
async def test_an_agui_stream_ends_with_run_error() -> None:
    events, _body, closes = await rendered(
        FailingBroker(BrokerUnavailable("down")), AGUIRenderer("thread-1", "run-1", clock=lambda: 0)
    )
    assert [e["type"] for e in events][-2:] == ["TEXT_MESSAGE_END", "RUN_ERROR"]
    assert events[-1]["message"] == ERROR_TEXT
    assert not [e for e in events if e["type"] == "RUN_FINISHED"]
    assert closes == [True]


class EndingBroker(FailingBroker):
    """Hands over ``SENT``, then ends as a stream that expired does."""

    async def subscribe_batches(
        self, run_id: str, from_seq: int = 0, *, keepalive: float | None = None
    ) -> AsyncIterator[tuple[int, list[dict[str, Any]]]]:
        try:
            yield 0, list(SENT)
        finally:
            self.closed = True


@pytest.mark.asyncio
async def test_a_stream_that_ends_without_its_end_tells_the_client() -> None:
    """A run whose process died and whose stream expired before it was
    settled: the client gets the masked error, not a bare ``[DONE]``."""
    events, body, _closes = await rendered(EndingBroker(RunLost("unused")), UIStreamRenderer(7))
    assert events[-1] == {"type": "error", "errorText": ERROR_TEXT}
    assert body.endswith(b"data: [DONE]\n\n")


@pytest.mark.asyncio
async def test_a_stream_that_ends_with_its_finish_gets_nothing_more() -> None:
    class Finished(EndingBroker):
        async def subscribe_batches(self, run_id: str, from_seq: int = 0, *, keepalive: float | None = None) -> Any:
            yield 0, [*SENT, {"type": "text-end", "id": "t0"}, {"type": "finish"}]

    events, _body, _closes = await rendered(Finished(RunLost("unused")), UIStreamRenderer(7))
    assert events[-1] == {"type": "finish"}
