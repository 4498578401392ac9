"""What a run was given, as the JSON stored with it: the model messages it
was sent and the tools it was offered, for the admin's run page
(``Run.history["sent"]``, ``Run.setup["tools"]``).

The record is bounded and holds no secret: never a file's bytes (a file is
its media type, name, size and a reference: a ``data:`` URL is not kept,
another URL loses its query, fragment and user info, where signatures and
tokens travel), never a provider's opaque metadata (reasoning signatures,
encrypted reasoning). Every text is cut at ``MAX_TEXT_CHARS``, a schema
past ``MAX_SCHEMA_CHARS`` is left out, and the messages' texts are kept up
to ``MAX_SENT_CHARS`` in all, from the newest: what is cut or left out is
said in the record (a marker in the text, an ``omitted`` entry, a
``parameters_cut`` size), never dropped silently.

The limits: 64,000 characters of messages (about 16,000 tokens by the
house's estimate of four characters a token) keeps a whole turn of the
default history (the last 100 messages of a chat) and the newest part of a
long-context one, and keeps a run row under about 150 KB, which the
admin's page of one run reads in one query (lists never load it). The
stored messages of the conversation stay where they are; this record is
what one run saw, which an edit or a regeneration later takes off the
conversation's current branch.

No Django here: the record is built where the run starts (``runs/`` is
pure) and stored by the caller.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import orjson

from .messages import AssistantMessage, FilePart, ModelMessage, SystemMessage, ToolSpec, UserMessage
from .tools import Tool

__all__ = [
    "MAX_PROMPT_CHARS",
    "MAX_SCHEMA_CHARS",
    "MAX_SENT_CHARS",
    "MAX_TEXT_CHARS",
    "MAX_TOOLS",
    "clip",
    "file_reference",
    "messages_record",
    "tools_record",
]

#: Characters of one text kept (a message's text, a call's arguments, a
#: tool's result or description).
MAX_TEXT_CHARS: Final = 8_000
#: Characters of the system prompt kept (stored once, with the set-up).
MAX_PROMPT_CHARS: Final = 20_000
#: Characters of the sent messages' texts kept in all, from the newest.
MAX_SENT_CHARS: Final = 64_000
#: Characters of one tool's input schema (as JSON) kept; a larger one is left out, its size said.
MAX_SCHEMA_CHARS: Final = 8_000
#: Tools kept; OpenAI's chat API takes no more than 128 either.
MAX_TOOLS: Final = 128
#: Characters of a file's reference kept.
MAX_URL_CHARS: Final = 500


def clip(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """``text``, cut at ``limit`` characters with a marker that says how
    many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[… {len(text) - limit} more characters not stored]"


def file_reference(url: str) -> str:
    """Where a file part points, without what must not be stored: a
    ``data:`` URL (the bytes themselves) becomes ``""``; another URL loses
    its user info, query and fragment (where a presigned URL carries its
    signature)."""
    if not url or url.startswith("data:"):
        return ""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))[:MAX_URL_CHARS]


def _file(part: FilePart) -> dict[str, Any]:
    record: dict[str, Any] = {"media_type": part.media_type, "filename": part.filename, "size": part.size}
    record["url"] = file_reference(part.url)
    if part.url.startswith("data:"):
        record["inline"] = True  # its bytes came in the message; not stored here
    return record


def _message(message: ModelMessage) -> dict[str, Any]:
    if isinstance(message, SystemMessage):
        return {"role": "system", "text": clip(message.content)}
    if isinstance(message, UserMessage):
        record: dict[str, Any] = {"role": "user", "text": clip(message.content)}
        if message.files:
            record["files"] = [_file(f) for f in message.files]
        return record
    if isinstance(message, AssistantMessage):
        record = {"role": "assistant", "text": clip(message.content)}
        if message.reasoning:
            record["reasoning"] = clip(message.reasoning)
        if message.tool_calls:
            record["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": clip(c.arguments)} for c in message.tool_calls
            ]
        return record
    return {
        "role": "tool",
        "tool_call_id": message.tool_call_id,
        "tool_name": message.tool_name,
        "text": clip(message.content),
        "is_error": message.is_error,
    }


def _size(record: dict[str, Any]) -> int:
    size = len(record.get("text", "")) + len(record.get("reasoning", ""))
    return size + sum(len(c["arguments"]) + len(c["name"]) for c in record.get("tool_calls", ()))


def messages_record(
    messages: Sequence[ModelMessage], *, system_prompt: str | None = None, max_chars: int = MAX_SENT_CHARS
) -> list[dict[str, Any]]:
    """``messages`` as stored with the run (see the module docstring).

    A leading ``SystemMessage`` that is ``system_prompt`` is recorded as
    ``{"role": "system", "system_prompt": True}``: the prompt is stored once,
    with the run's set-up. The other leading system messages (a summary of
    older turns) are kept; then the newest messages whose texts fit in
    ``max_chars`` (the newest always), after an ``{"omitted": n,
    "characters": c}`` entry when older ones did not."""
    head: list[dict[str, Any]] = []
    rest = list(messages)
    if system_prompt and rest and rest[0] == SystemMessage(system_prompt):
        head.append({"role": "system", "system_prompt": True})
        rest.pop(0)
    while rest and isinstance(rest[0], SystemMessage):
        head.append(_message(rest.pop(0)))
    budget = max_chars - sum(_size(r) for r in head)
    tail: list[dict[str, Any]] = []
    omitted = characters = 0
    for message in reversed(rest):
        record = _message(message)
        size = _size(record)
        if omitted or (tail and size > budget):
            omitted += 1
            characters += size
            continue
        tail.append(record)
        budget -= size
    if omitted:
        head.append({"omitted": omitted, "characters": characters})
    return head + tail[::-1]


def _json(value: Any) -> tuple[Any, int]:
    """``value`` as plain JSON (what is not JSON becomes its ``str``) and
    the characters of its text. orjson: once per tool and turn, on the
    turn's path."""
    data = orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS)
    size = len(data) if len(data) <= MAX_SCHEMA_CHARS else len(data.decode())  # bytes ≥ characters
    return orjson.loads(data), size


def tools_record(tools: Iterable[Tool | ToolSpec]) -> tuple[list[dict[str, Any]], int]:
    """The tools as the model was told of them (name, description, input
    schema), with what the loop does about each (runs in the browser, asks
    a person first); and how many past ``MAX_TOOLS`` were left out."""
    out: list[dict[str, Any]] = []
    omitted = 0
    for tool in tools:
        if len(out) >= MAX_TOOLS:
            omitted += 1
            continue
        spec = tool.spec if isinstance(tool, Tool) else tool
        record: dict[str, Any] = {"name": spec.name, "description": clip(spec.description or "")}
        schema, size = _json(dict(spec.parameters))
        if size <= MAX_SCHEMA_CHARS:
            record["parameters"] = schema
        else:
            record["parameters_cut"] = size
        if isinstance(tool, Tool):
            if tool.client_side:
                record["client_side"] = True
            rule = tool.requires_approval
            if rule:
                record["requires_approval"] = True if rule is True else "a rule decides"
        out.append(record)
    return out, omitted
