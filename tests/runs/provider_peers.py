"""Recorded provider streams with the AI SDK provider packages' answers.

The corpus is not part of the repository; docs/protocols.md, "Recorded
provider streams", says what it holds, where the tests look for it and what
they do without it. Each case holds a response body exactly as a provider (or the
AI SDK's own tests) sent it and what ``@ai-sdk/*``'s ``doStream`` and
ai@7's ``streamText`` → ``processUIMessageStream`` made of it.

``run_case`` serves the body from a real HTTP server on 127.0.0.1, runs
our model over it, and passes the events through the encoder and the
reader; ``Outcome`` holds what a comparison needs.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from uistream_app.protocol.events import Event, Finish, ReasoningDelta, TextDelta, ToolCall, Usage
from uistream_app.protocol.ui.reader import read_ui_message
from uistream_app.protocol.ui.stream import encode_events
from uistream_app.runs import ModelError, UserMessage

from .chat_server import ChatServer, Reply

PEER_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "peer-cases"
JS_DIR = Path(__file__).resolve().parents[1] / "js"
ABSENT = f"{PEER_DIR} is absent: the recorded provider streams are not in the repository (docs/protocols.md)"


@functools.cache
def load(name: str) -> dict[str, Any] | None:
    path = PEER_DIR / name
    if not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def params(name: str, *, skip: dict[str, str] | None = None) -> list[Any]:
    """One ``pytest.param`` per case (recorded, then inline), id'd by the
    case id; a single skipped param when the corpus is absent. ``skip``
    maps case ids to the reason we differ on purpose."""
    data = load(name)
    if data is None:
        if os.environ.get("CI") == "true":  # in CI the corpus is beside the checkout: its absence is a failure
            raise FileNotFoundError(f"{PEER_DIR / name}: {ABSENT}")
        return [pytest.param(None, id="corpus-absent", marks=pytest.mark.skip(reason=ABSENT))]
    out = []
    for case in [*data["cases"], *data.get("inline", {}).get("cases", [])]:
        reason = (skip or {}).get(case["id"])
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        out.append(pytest.param(case, id=case["id"], marks=marks))
    return out


def body_of(case: dict[str, Any]) -> bytes:
    """The bytes the oracle was served: an inline body verbatim, a recorded
    fixture as the API frames it (``event:`` and ``data:`` lines) or, for
    chat completions, as ``data:`` lines ending in ``[DONE]``."""
    if "sse" in case:
        return str(case["sse"]).encode()
    out = []
    for line in case["lines"]:
        try:
            kind = json.loads(line).get("type")
        except ValueError:
            kind = None  # a line the fixture holds on purpose: not JSON
        out.append(f"event: {kind}\ndata: {line}\n\n" if kind else f"data: {line}\n\n")
    body = "".join(out).encode()
    if "sseSha256" in case:
        assert hashlib.sha256(body).hexdigest() == case["sseSha256"], "not the bytes the oracle was served"
    return body


@dataclass
class Outcome:
    events: list[Event] = field(default_factory=list)
    error: ModelError | None = None
    message: dict[str, Any] = field(default_factory=dict)
    requests: list[Any] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, TextDelta))

    @property
    def reasoning(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, ReasoningDelta))

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [e for e in self.events if isinstance(e, ToolCall)]

    @property
    def finish(self) -> str | None:
        reasons = [e.reason for e in self.events if isinstance(e, Finish)]
        return reasons[-1] if reasons else None

    @property
    def usage(self) -> Usage | None:
        usages = [e for e in self.events if isinstance(e, Usage)]
        return usages[-1] if usages else None


async def run_case(make_model: Callable[[str], Any], body: bytes) -> Outcome:
    outcome = Outcome()
    async with ChatServer() as server:
        server.add(Reply(body=[body]))
        model = make_model(server.base_url)
        try:
            async for event in model.stream([UserMessage("hi")]):
                outcome.events.append(event)
        except ModelError as exc:
            outcome.error = exc
        outcome.requests = server.requests

    def source() -> Iterator[Event]:
        yield from outcome.events
        if outcome.error is not None:
            raise outcome.error

    outcome.message = read_ui_message(encode_events(source(), expose_errors=True))
    return outcome


def expected_usage(usage: dict[str, Any] | None) -> tuple[int, int, int, int]:
    """(input, output, reasoning, cache read) of an AI SDK usage; absent
    counts are 0."""
    usage = usage or {}
    given = usage.get("inputTokens") or {}
    taken = usage.get("outputTokens") or {}
    return (given.get("total") or 0, taken.get("total") or 0, taken.get("reasoning") or 0, given.get("cacheRead") or 0)


def our_usage(usage: Usage | None) -> tuple[int, int, int, int]:
    if usage is None:
        return (0, 0, 0, 0)
    return (
        usage.input_tokens or 0,
        usage.output_tokens or 0,
        usage.reasoning_tokens or 0,
        usage.cached_input_tokens or 0,
    )


def comparable(message: dict[str, Any], *, drop: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """A message's parts without what each side makes up on its own: the
    message id, the ids of text and reasoning parts (ai@7 numbers them
    from the provider's block ids, ours from the encoder's count) and the
    error text of a failed tool part (each runtime's JSON parser words its
    own; the corpus leaves out a provider tool's error, an object). ``drop`` names part keys a listed difference leaves
    out."""
    parts = []
    for part in message.get("parts", []):
        part = {k: v for k, v in part.items() if k not in drop}
        if part.get("type") in ("text", "reasoning"):
            part.pop("id", None)
        if part.get("state") == "output-error":
            part.pop("errorText", None)
        parts.append(part)
    return parts


def oracle(node: str, provider: str, body: bytes, directory: Path, tools: Sequence[str] = ()) -> dict[str, Any]:
    """What the real provider package (``anthropic`` or
    ``openai-responses``) and ai@7 make of ``body`` (tests/js/provider_oracle.mjs)."""
    path = directory / f"{provider}.sse"
    path.write_bytes(body)
    result = subprocess.run(
        [node, str(JS_DIR / "provider_oracle.mjs"), provider, str(path), *tools],
        capture_output=True,
        text=True,
        check=True,
        cwd=JS_DIR,
        timeout=60,
    )
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def oracle_request(
    node: str,
    provider: str,
    messages: list[dict[str, Any]],
    directory: Path,
    provider_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What the real provider package sends for the UIMessages ``messages``
    (ai@7's ``convertToModelMessages``, then the provider's request body,
    with streamText's ``provider_options``; tests/js/provider_oracle.mjs
    ``request``): ``{"body", "errors"}``."""
    path = directory / f"{provider}-messages.json"
    path.write_text(json.dumps(messages))
    options = [json.dumps(provider_options)] if provider_options is not None else []
    result = subprocess.run(
        [node, str(JS_DIR / "provider_oracle.mjs"), "request", provider, str(path), *options],
        capture_output=True,
        text=True,
        check=True,
        cwd=JS_DIR,
        timeout=60,
    )
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


async def collect(model: Any, messages: Any = None, **kwargs: Any) -> list[Any]:
    """Every event one ``stream()`` call of ``model`` yields (default: "hi")."""
    return [e async for e in model.stream(messages or [UserMessage("hi")], **kwargs)]


async def collect_until_error(model: Any) -> tuple[list[Any], BaseException]:
    """The events before the error a stream of ``model`` raises, and the error."""
    events: list[Any] = []

    async def drain() -> None:
        async for event in model.stream([UserMessage("hi")]):
            events.append(event)

    with pytest.raises(Exception) as info:  # noqa: PT011 - the callers check the type
        await drain()
    return events, info.value


def ended_in_error(outcome: Any, expect: dict[str, Any]) -> bool:
    """For a case the AI SDK reports as an error: ours raised after the same
    text, with no finish (True: nothing more to compare). Else, checks that
    ours did not fail and read the same text and reasoning (False)."""
    if expect["errors"]:
        assert outcome.error is not None, outcome.events
        assert outcome.text == expect["text"]
        assert outcome.finish is None
        return True
    assert outcome.error is None, outcome.error
    assert outcome.text == expect["text"]
    assert outcome.reasoning == expect["reasoning"]
    return False
