"""A stored run as a UI message stream fixture
(``fixtures/ui-message-stream/v1/<scenario>/``, see ``tests/ui_fixtures.py``).

A fixture's source is its ``events.jsonl``: the source events the encoder
turns into the stream. A stored run keeps the chunks, not the events, so
``events_from_chunks`` works back from the log to the events (each chunk
the encoder emits for an event maps back to that event; the chunks it adds
by itself, ``start-step``, ``text-start``…, map to nothing) and the
export proves the result: the events must re-encode to the very chunks in
the log. A log no events can produce (a stopped run's ``abort``, a run cut
off without ``finish``, an error whose text is not the masked one, chunk
types the encoder never sends) is exported as ``chunks.jsonl`` instead:
the canonical chunks themselves, one a line.

The ``.sse`` files are rendered from the re-encoded chunks when there are
events (byte for byte what the client was sent: on PostgreSQL the stored
JSON has its keys reordered), else from the log.

``message.json`` is what the Python reader (the ai@7 twin) builds from the
stream; given a Node.js and the repository's ``tests/js/build_message.mjs``
it is what the real clients build instead, with ``message.v6.json`` /
``message.v5.json`` where an older client builds something else (as
``python -m tests.ui_fixtures`` does).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ..protocol import events as ev
from ..protocol.ui.chunks import Chunk
from ..protocol.ui.encoder import UIMessageEncoder
from ..protocol.ui.reader import UIMessageReader
from ..protocol.ui.render import UIStreamRenderer
from ..protocol.ui.stream import encode_events

__all__ = ["ExportedFixture", "NotInvertible", "events_from_chunks", "reencode", "write_fixture"]

VERSIONS: Final = (7, 6, 5)


class NotInvertible(ValueError):
    """A log that no sequence of source events encodes to."""


class SourceFailure(Exception):
    """What the ``raise`` pseudo-event raises (as in tests/ui_fixtures.py)."""


def _put(out: dict[str, Any], **values: Any) -> dict[str, Any]:
    out.update({k: v for k, v in values.items() if v is not None})
    return out


def _event(chunk: Chunk) -> dict[str, Any] | None:
    """The source event (as ``event_to_dict`` writes it) behind one chunk,
    None for a chunk the encoder adds by itself."""
    t = chunk.get("type")
    get = chunk.get
    if t in ("start-step", "text-start", "reasoning-start"):
        return None
    if t == "text-delta":
        return {"type": "text-delta", "text": chunk["delta"]}
    if t == "text-end":
        return _put({"type": "text-end"}, provider_metadata=get("providerMetadata"), citations=get("citations"))
    if t == "reasoning-delta":
        return {"type": "reasoning-delta", "text": chunk["delta"]}
    if t == "reasoning-end":
        return _put({"type": "reasoning-end"}, provider_metadata=get("providerMetadata"))
    tool = {"tool_call_id": get("toolCallId")}
    if t == "tool-input-start":
        return _put(
            {"type": "tool-call-start", **tool, "tool_name": get("toolName")},
            provider_executed=get("providerExecuted"),
            dynamic=get("dynamic"),
            title=get("title"),
            provider_metadata=get("providerMetadata"),
        )
    if t == "tool-input-delta":
        return {"type": "tool-call-delta", **tool, "delta": chunk["inputTextDelta"]}
    if t == "tool-input-available":
        text = json.dumps(get("input"), ensure_ascii=False, separators=(",", ":"))
        return _put(
            {"type": "tool-call", **tool, "tool_name": get("toolName"), "input": text},
            provider_executed=get("providerExecuted"),
            dynamic=get("dynamic"),
            title=get("title"),
            provider_metadata=get("providerMetadata"),
        )
    if t == "tool-input-error":
        return _put(
            {
                "type": "tool-input-error",
                **tool,
                "tool_name": get("toolName"),
                "input": get("input"),
                "error_text": get("errorText"),
            },
            dynamic=get("dynamic"),
        )
    if t == "tool-output-available":
        # As JSON text: the encoder parses a string output, so a string
        # output must travel quoted to come back a string.
        content = json.dumps(get("output"), ensure_ascii=False)
        return _put(
            {"type": "tool-result", **tool, "content": content},
            preliminary=get("preliminary"),
            dynamic=get("dynamic"),
            provider_executed=get("providerExecuted"),
            provider_metadata=get("providerMetadata"),
        )
    if t == "tool-output-error":
        return _put(
            {"type": "tool-result", **tool, "content": get("errorText"), "is_error": True},
            dynamic=get("dynamic"),
            provider_executed=get("providerExecuted"),
            provider_metadata=get("providerMetadata"),
        )
    if t == "tool-output-denied":
        return {"type": "tool-denied", **tool}
    if t == "tool-approval-request":
        return _put({"type": "tool-approval-request", "approval_id": get("approvalId"), **tool}, reason=get("reason"))
    if t == "finish-step":
        return {"type": "step-finished"}
    if t == "finish":
        return _put({"type": "done"}, reason=get("finishReason"))
    if t == "error":
        # The fixture source raises here; the encoder masks it again.
        return {"type": "raise", "message": get("errorText")}
    if t == "source-url":
        return _put(
            {"type": "source-url", "source_id": get("sourceId"), "url": get("url")},
            title=get("title"),
            provider_metadata=get("providerMetadata"),
        )
    if t == "source-document":
        return _put(
            {"type": "source-document", "source_id": get("sourceId"), "media_type": get("mediaType")},
            title=get("title"),
            filename=get("filename"),
            provider_metadata=get("providerMetadata"),
        )
    if t == "file":
        return _put(
            {"type": "file", "url": get("url"), "media_type": get("mediaType")},
            provider_metadata=get("providerMetadata"),
        )
    if t == "custom":
        return _put({"type": "custom", "kind": get("kind")}, provider_metadata=get("providerMetadata"))
    if t == "message-metadata":
        return {"type": "message-metadata", "metadata": get("messageMetadata")}
    if isinstance(t, str) and t.startswith("data-"):
        out: dict[str, Any] = {"type": "data", "name": t[len("data-") :], "data": get("data")}
        return _put(out, id=get("id"), transient=True if get("transient") else None)
    raise NotInvertible(f"no source event sends a {t!r} chunk")


def events_from_chunks(chunks: Sequence[Chunk]) -> tuple[str | None, Any, list[dict[str, Any]]]:
    """``(message_id, message_metadata, events)`` for a log that opens with
    ``start``. Raises ``NotInvertible``; the result is unproven until
    ``reencode`` gives the log back."""
    if not chunks or chunks[0].get("type") != "start":
        raise NotInvertible("the log does not open with start")
    start = chunks[0]
    events = []
    steps = 0
    for chunk in chunks[1:]:
        event = _event(chunk)
        if event is None:
            continue
        if event["type"] == "step-finished":
            event["step"] = steps  # the loop's step index (the encoder ignores it)
            steps += 1
        events.append(event)
    return start.get("messageId"), start.get("messageMetadata"), events


def _source(lines: list[dict[str, Any]]) -> Iterator[ev.Event]:
    for line in lines:
        if line.get("type") == "raise":
            raise SourceFailure(line.get("message"))
        yield ev.event_from_dict(line)


def reencode(message_id: str | None, metadata: Any, events: list[dict[str, Any]]) -> list[Chunk]:
    """The chunks a fixture's events encode to (``tests/ui_fixtures.py``'s
    ``canonical_chunks``)."""
    return list(encode_events(_source(events), UIMessageEncoder(message_id, metadata)))


@dataclass
class ExportedFixture:
    """A fixture directory written by ``write_fixture``: which source it holds, why, and its files."""

    directory: Path
    source: str  # "events.jsonl" or "chunks.jsonl"
    reason: str = ""  # why not events.jsonl
    files: list[str] = field(default_factory=list)


def _render(chunks: Sequence[Chunk], version: int) -> bytes:
    renderer = UIStreamRenderer(version)
    return renderer.render_many(chunks) + renderer.done()


def _dump(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def _sdk_message(node: str, script: str, version: int, path: Path) -> dict[str, Any]:
    result = subprocess.run([node, script, str(version), str(path)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"ai@{version} rejected {path.name}: {result.stderr.strip() or result.stdout.strip()}")
    message: dict[str, Any] = json.loads(result.stdout)["message"]
    return message


def write_fixture(
    chunks: Sequence[Chunk],
    directory: Path,
    *,
    description: str,
    node: str | None = None,
    build_message: str | None = None,
) -> ExportedFixture:
    """Write the fixture files of ``chunks`` into ``directory`` (created;
    files of the same names are replaced). ``node`` and ``build_message``
    (the path of ``tests/js/build_message.mjs``): see the module docstring."""
    directory.mkdir(parents=True, exist_ok=True)
    scenario: dict[str, Any] = {"description": description}
    try:
        message_id, metadata, events = events_from_chunks(chunks)
        canonical = reencode(message_id, metadata, events)
        if canonical != list(chunks):
            first = next((i for i, (a, b) in enumerate(zip(canonical, chunks, strict=False)) if a != b), None)
            where = f"chunk {first}" if first is not None else f"the length ({len(canonical)} vs {len(chunks)})"
            raise NotInvertible(f"the events re-encode differently from {where} on")
        exported = ExportedFixture(directory, "events.jsonl")
        if message_id is not None:
            scenario["message_id"] = message_id
        if metadata is not None:
            scenario["message_metadata"] = metadata
        (directory / "events.jsonl").write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events))
    except NotInvertible as exc:
        canonical = list(chunks)
        exported = ExportedFixture(directory, "chunks.jsonl", reason=str(exc))
        (directory / "chunks.jsonl").write_text(
            "".join(json.dumps(c, ensure_ascii=False, separators=(",", ":")) + "\n" for c in canonical)
        )
    exported.files.append(exported.source)
    other = "chunks.jsonl" if exported.source == "events.jsonl" else "events.jsonl"
    (directory / other).unlink(missing_ok=True)

    reader = UIMessageReader()
    for chunk in canonical:
        if reader.failed:
            break
        try:
            reader.feed(chunk)
        except ValueError:
            break
    if reader.error_text is not None:
        scenario["expect_error"] = reader.error_text
    (directory / "scenario.json").write_text(_dump(scenario))
    exported.files.append("scenario.json")

    for version in VERSIONS:
        (directory / f"v{version}.sse").write_bytes(_render(canonical, version))
        exported.files.append(f"v{version}.sse")

    for stale in ("message.v6.json", "message.v5.json"):
        (directory / stale).unlink(missing_ok=True)
    if node and build_message:
        messages = {v: _sdk_message(node, build_message, v, directory / f"v{v}.sse") for v in VERSIONS}
        (directory / "message.json").write_text(_dump(messages[7]))
        exported.files.append("message.json")
        for version in (6, 5):
            if messages[version] != messages[7]:
                (directory / f"message.v{version}.json").write_text(_dump(messages[version]))
                exported.files.append(f"message.v{version}.json")
    else:
        (directory / "message.json").write_text(_dump(reader.message))
        exported.files.append("message.json")
    return exported
