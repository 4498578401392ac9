"""The messages an AG-UI client builds from a stream: ``fold_messages``.

``fold_messages`` is the Python twin of ``@ag-ui/client`` 1.0's reducer for
the events ``AGUIRenderer`` makes. The renderer folds its own events with it
for the ``MESSAGES_SNAPSHOT`` it sends at an interrupt;
``protocol.agui.messages`` folds a stored message's replay with it to serve
a stored conversation in AG-UI's words. Its own module because both of
those import it: a renderer that imported ``messages`` would import itself.
Its rules are the AG-UI reducer rules of docs/protocols.md ("rule N" in
this module means AG-UI reducer rule N there). The input is never mutated.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from .events import Event
from .patch import PatchError, apply_patch

__all__ = ["fold_messages"]


def _merge_metadata(target: dict[str, Any], event: Event) -> None:
    metadata = event.get("metadata")
    if isinstance(metadata, dict):
        target["metadata"] = {**target.get("metadata", {}), **metadata}


def _apply_snapshot(held: list[dict[str, Any]], snapshot: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rule 6."""
    by_id = {m["id"]: m for m in snapshot}
    roles = {m.get("role") for m in snapshot}
    kept = [
        by_id.get(m.get("id"), m)
        for m in held
        if m.get("id") in by_id or (m.get("role") in ("reasoning", "activity") and m.get("role") not in roles)
    ]
    seen = {m.get("id") for m in kept}
    return kept + [m for m in snapshot if m["id"] not in seen]


def fold_messages(events: Iterable[Event], messages: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The messages a client holds after ``events`` (AG-UI reducer rules,
    docs/protocols.md), starting from ``messages`` (not modified)."""
    out: list[dict[str, Any]] = copy.deepcopy(messages) if messages else []
    by_id: dict[str, dict[str, Any]] = {m["id"]: m for m in out if isinstance(m.get("id"), str)}
    for event in events:
        kind = event.get("type")
        if kind in ("TEXT_MESSAGE_START", "REASONING_MESSAGE_START"):
            _open_message(out, by_id, event)
        elif kind in ("TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT"):
            _append_content(by_id, event)
        elif kind == "TOOL_CALL_START":
            _start_tool_call(out, by_id, event)
        elif kind == "TOOL_CALL_ARGS":
            _append_arguments(out, event)
        elif kind == "TOOL_CALL_RESULT":
            _insert_result(out, by_id, event)
        elif kind == "ACTIVITY_SNAPSHOT":
            _activity_snapshot(out, by_id, event)
        elif kind == "ACTIVITY_DELTA":
            _activity_delta(out, by_id, event)
        elif kind == "MESSAGES_SNAPSHOT":
            out = _apply_snapshot(out, copy.deepcopy(event["messages"]))
            by_id = {m["id"]: m for m in out if isinstance(m.get("id"), str)}
    return out


def _open_message(out: list[dict[str, Any]], by_id: dict[str, dict[str, Any]], event: Event) -> None:
    """Rules 1 and 2 (a start), with rule 5."""
    message = by_id.get(event["messageId"])
    if message is None:
        role = "reasoning" if event["type"] == "REASONING_MESSAGE_START" else event.get("role", "assistant")
        message = {"id": event["messageId"], "role": role, "content": ""}
        if "name" in event:
            message["name"] = event["name"]
        tag = event.get("subagentRunId")
        if tag is not None:
            message["subagentRunId"] = tag
        out.append(message)
        by_id[message["id"]] = message
    _merge_metadata(message, event)


def _activity_snapshot(out: list[dict[str, Any]], by_id: dict[str, dict[str, Any]], event: Event) -> None:
    """Rule 7 (a snapshot)."""
    message_id = event["messageId"]
    held = by_id.get(message_id)
    if held is not None and event.get("replace", True) is False:
        if held.get("role") == "activity":
            _merge_metadata(held, event)
        return
    message: dict[str, Any] = {
        "id": message_id,
        "role": "activity",
        "activityType": event["activityType"],
        "content": copy.deepcopy(event["content"]),
    }
    tag = event.get("subagentRunId")
    if tag is not None:
        message["subagentRunId"] = tag
    if held is None:
        out.append(message)
    else:
        if held.get("role") == "activity" and "metadata" in held:
            message["metadata"] = held["metadata"]
        out[next(i for i, m in enumerate(out) if m is held)] = message
    by_id[message_id] = message
    _merge_metadata(message, event)


def _activity_delta(out: list[dict[str, Any]], by_id: dict[str, dict[str, Any]], event: Event) -> None:
    """Rule 7 (a delta): a patch that does not apply changes nothing."""
    held = by_id.get(event["messageId"])
    if held is None or held.get("role") != "activity":
        return
    _merge_metadata(held, event)
    try:
        content = apply_patch(copy.deepcopy(held.get("content") or {}), event.get("patch") or [])
    except PatchError:
        return
    message = {**held, "content": content, "activityType": event["activityType"]}
    out[next(i for i, m in enumerate(out) if m is held)] = message
    by_id[message["id"]] = message


def _append_content(by_id: dict[str, dict[str, Any]], event: Event) -> None:
    """Rules 1 and 2 (content)."""
    message = by_id.get(event["messageId"])
    if message is not None and message.get("role") != "activity":
        content = message.get("content")
        message["content"] = (content if isinstance(content, str) else "") + event["delta"]
        _merge_metadata(message, event)


def _start_tool_call(out: list[dict[str, Any]], by_id: dict[str, dict[str, Any]], event: Event) -> None:
    """Rule 3 (a start), with rule 5."""
    call_id = event["toolCallId"]
    parent_id = event.get("parentMessageId")
    target = by_id.get(parent_id) if parent_id is not None else None
    if target is None or target.get("role") != "assistant":
        key = call_id if parent_id is None or target is not None else parent_id
        target = {"id": key, "role": "assistant", "toolCalls": []}
        tag = event.get("subagentRunId")
        if tag is not None:
            target["subagentRunId"] = tag
        out.append(target)
        by_id[key] = target
    call: dict[str, Any] = {"id": call_id, "type": "function", "function": {"name": event["toolCallName"]}}
    call["function"]["arguments"] = ""
    _merge_metadata(call, event)
    target.setdefault("toolCalls", []).append(call)


def _append_arguments(out: list[dict[str, Any]], event: Event) -> None:
    """Rule 3 (arguments)."""
    for message in out:
        for call in message.get("toolCalls") or ():
            if call["id"] == event["toolCallId"]:
                call["function"]["arguments"] += event["delta"]


def _insert_result(out: list[dict[str, Any]], by_id: dict[str, dict[str, Any]], event: Event) -> None:
    """Rule 4, with rule 5."""
    result: dict[str, Any] = {
        "id": event["messageId"],
        "toolCallId": event["toolCallId"],
        "role": event.get("role", "tool"),
        "content": event["content"],
    }
    tag = event.get("subagentRunId")
    if tag is not None:
        result["subagentRunId"] = tag
    _merge_metadata(result, event)
    at = next(
        (
            i
            for i, m in enumerate(out)
            if m.get("role") == "assistant" and any(c["id"] == event["toolCallId"] for c in m.get("toolCalls") or ())
        ),
        None,
    )
    if at is None:
        out.append(result)
    else:
        at += 1
        while at < len(out) and out[at].get("role") == "tool":
            at += 1
        out.insert(at, result)
    by_id[result["id"]] = result
