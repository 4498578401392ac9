"""Stored UI messages ⇄ model messages.

Keeps the model messages' invariant: every tool call the model sees is
answered. The conversion rules are in docs/operations.md ("History").
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..protocol.ui.parts import is_tool_type, tool_name
from .loop import DENIED_TEXT, POLICY_DENIED_TEXT, ToolApproval
from .messages import (
    AssistantMessage,
    AssistantPart,
    CustomPart,
    FilePart,
    ModelMessage,
    ProviderApproval,
    ProviderToolCall,
    ProviderToolResult,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCallRequest,
    ToolMessage,
    UserMessage,
)
from .tools import tool_output_text

__all__ = ["approvals_from_ui", "model_to_ui_messages", "ui_to_model_messages"]

UIMessage = dict[str, Any]

_UNSETTLED = frozenset(("input-available", "approval-requested", "approval-responded"))


def _is_tool_part(part: Mapping[str, Any]) -> bool:
    return is_tool_type(part.get("type"))


def _arguments(part: Mapping[str, Any]) -> str:
    value = part.get("input")
    if isinstance(value, str):
        # Arguments are a JSON object; a string is the raw text of arguments
        # that did not parse (``tool-input-error`` sends it as ``input``).
        return value
    if value is not None:
        return json.dumps(value, ensure_ascii=False)
    raw = part.get("rawInput")
    if raw is None:
        return "{}"
    return raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)


def _text(parts: Iterable[Mapping[str, Any]], kind: str = "text") -> str:
    return "".join(str(p.get("text", "")) for p in parts if p.get("type") == kind)


_DATA_URL = re.compile(r"data:[^,]*;base64,(.*)", re.DOTALL)


def _data_loader(url: str) -> Callable[[], bytes] | None:
    match = _DATA_URL.fullmatch(url)
    if match is None:
        return None
    payload = match.group(1)

    def load() -> bytes:
        try:
            return base64.b64decode(payload)
        except (binascii.Error, ValueError):
            return b""

    return load


def _user_message(parts: Sequence[Mapping[str, Any]]) -> UserMessage:
    """A user message; its file parts as the port's ``FilePart`` objects: a
    ``data:`` URL's bytes read from it; any other URL (the app's
    ``/api/files/<id>``, which ``uistream_app.lifecycle.attachments.attach_files`` gives a
    loader from storage) kept as the URL. With files, ``parts`` keeps the
    order of text and files."""
    ordered: list[str | FilePart] = []
    for part in parts:
        kind = part.get("type")
        if kind == "text":
            ordered.append(str(part.get("text", "")))
        elif kind == "file" and isinstance(part.get("mediaType"), str):
            url = str(part.get("url", ""))
            filename = part.get("filename") if isinstance(part.get("filename"), str) else None
            ordered.append(FilePart(part["mediaType"], url, filename, load=_data_loader(url)))
    files = tuple(p for p in ordered if isinstance(p, FilePart))
    return UserMessage(_text(parts), files, tuple(ordered) if files else ())


def _steps(parts: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    steps: list[list[Mapping[str, Any]]] = [[]]
    for part in parts:
        if part.get("type") == "step-start":
            if steps[-1]:
                steps.append([])
            continue
        steps[-1].append(part)
    return [s for s in steps if s]


def _denial(part: Mapping[str, Any]) -> str:
    """What the model read when the call was denied (the loop's words): by
    the approval policy when the decision was automatic, else by the user."""
    approval = part.get("approval") or {}
    reason = approval.get("reason") if isinstance(approval, Mapping) else None
    automatic = isinstance(approval, Mapping) and approval.get("isAutomatic") is True
    text = POLICY_DENIED_TEXT if automatic else DENIED_TEXT
    return text + (f" Reason: {reason}" if reason else "")


def _reasoning_parts(step: Iterable[Mapping[str, Any]]) -> tuple[ReasoningPart, ...]:
    return tuple(
        ReasoningPart(str(p.get("text", "")), p["providerMetadata"])
        for p in step
        if p.get("type") == "reasoning" and isinstance(p.get("providerMetadata"), Mapping) and p["providerMetadata"]
    )


def _metadata(part: Mapping[str, Any], key: str = "providerMetadata") -> Mapping[str, Any]:
    value = part.get(key)
    return value if isinstance(value, Mapping) else {}


def _provider_parts(part: Mapping[str, Any]) -> list[AssistantPart]:
    """A provider-executed tool part as the call and, once it has one, its
    result (as ai@7's ``convertToModelMessages`` splits it); the person's
    answer rides on the call when it asked for approval."""
    call_id = str(part.get("toolCallId", ""))
    name = tool_name(part)
    state = part.get("state")
    if state == "input-streaming":
        return []
    approval = part.get("approval")
    decided = None
    if isinstance(approval, Mapping) and isinstance(approval.get("approved"), bool):
        decided = ProviderApproval(str(approval.get("id", "")), approval["approved"], approval.get("reason"))
    tool_input = part.get("input")
    if tool_input is None and state == "output-error":
        tool_input = part.get("rawInput")
    call_meta = _metadata(part, "callProviderMetadata")
    if not call_meta and state == "output-error":
        call_meta = _metadata(part, "resultProviderMetadata")
    out: list[AssistantPart] = [
        ProviderToolCall(call_id, name, tool_input, call_meta, part.get("type") == "dynamic-tool", decided)
    ]
    if state in ("output-available", "output-error"):
        failed = state == "output-error"
        output = _output_value(str(part.get("errorText", ""))) if failed else part.get("output")
        result_meta = _metadata(part, "resultProviderMetadata") or _metadata(part, "callProviderMetadata")
        out.append(ProviderToolResult(call_id, name, output, failed, result_meta))
    return out


def ui_to_model_messages(messages: Iterable[Mapping[str, Any]]) -> list[ModelMessage]:
    """The conversation as a model reads it (see the module rules)."""
    ui = list(messages)
    out: list[ModelMessage] = []
    for position, message in enumerate(ui):
        role = message.get("role")
        parts: Sequence[Mapping[str, Any]] = message.get("parts") or ()
        if role == "system":
            out.append(SystemMessage(_text(parts)))
        elif role == "user":
            out.append(_user_message(parts))
        elif role == "assistant":
            steps = _steps(parts)
            for number, step in enumerate(steps):
                last = position == len(ui) - 1 and number == len(steps) - 1
                calls: list[ToolCallRequest] = []
                results: list[ToolMessage] = []
                ordered: list[AssistantPart] = []
                for part in step:
                    kind = part.get("type")
                    if kind == "text":
                        ordered.append(TextPart(str(part.get("text", "")), _metadata(part)))
                        continue
                    if kind == "reasoning":
                        ordered.append(ReasoningPart(str(part.get("text", "")), _metadata(part)))
                        continue
                    if kind == "custom" and isinstance(part.get("kind"), str):
                        ordered.append(CustomPart(part["kind"], _metadata(part)))
                        continue
                    if not _is_tool_part(part):
                        continue
                    if part.get("providerExecuted"):
                        # A call the provider ran (web search…) is not the
                        # loop's to answer; the native providers send it
                        # back in their own form (see the module rules).
                        ordered.extend(_provider_parts(part))
                        continue
                    state = part.get("state")
                    call_id = str(part.get("toolCallId", ""))
                    name = tool_name(part)
                    if state == "output-available":
                        result = ToolMessage(call_id, tool_output_text(part.get("output")), False, name)
                    elif state == "output-error":
                        result = ToolMessage(call_id, str(part.get("errorText", "")), True, name)
                    elif state == "output-denied":
                        result = ToolMessage(call_id, _denial(part), True, name)
                    elif state in _UNSETTLED and last:
                        calls.append(
                            ToolCallRequest(call_id, name, _arguments(part), _metadata(part, "callProviderMetadata"))
                        )
                        ordered.append(calls[-1])
                        continue
                    else:
                        continue
                    calls.append(
                        ToolCallRequest(call_id, name, _arguments(part), _metadata(part, "callProviderMetadata"))
                    )
                    ordered.append(calls[-1])
                    results.append(result)
                content, reasoning = _text(step), _text(step, "reasoning")
                if content or reasoning or calls or ordered:
                    out.append(
                        AssistantMessage(content, tuple(calls), reasoning, _reasoning_parts(step), tuple(ordered))
                    )
                    out.extend(results)
                # A message steered into the run came between this step and
                # the next, which answered it: the model reads it as the
                # user's (as the SDK's convertToModelMessages does).
                for part in step:
                    if part.get("type") == "steering-message" and isinstance(part.get("parts"), list):
                        out.append(_user_message([p for p in part["parts"] if isinstance(p, Mapping)]))
    return out


def approvals_from_ui(messages: Sequence[Mapping[str, Any]]) -> dict[str, ToolApproval]:
    """The approval decisions (``approval-responded`` parts) of the last
    message, when it is an assistant message, by tool call id: what
    ``ToolLoop.run(approvals=...)`` takes on a continuation."""
    if not messages or messages[-1].get("role") != "assistant":
        return {}
    out: dict[str, ToolApproval] = {}
    for part in messages[-1].get("parts") or ():
        approval = part.get("approval")
        if _is_tool_part(part) and part.get("state") == "approval-responded" and isinstance(approval, Mapping):
            out[str(part["toolCallId"])] = ToolApproval(
                str(approval.get("id", "")), bool(approval.get("approved")), approval.get("reason")
            )
    return out


def _output_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def model_to_ui_messages(
    messages: Iterable[ModelMessage],
    *,
    id_factory: Callable[[], str] = lambda: uuid.uuid4().hex,
) -> list[UIMessage]:
    """Model messages as UI messages (the inverse of ``ui_to_model_messages``
    for conversations that follow its rules)."""
    out: list[UIMessage] = []
    current: UIMessage | None = None
    calls: dict[str, dict[str, Any]] = {}
    for message in messages:
        if isinstance(message, SystemMessage | UserMessage):
            current = None
            role = "system" if isinstance(message, SystemMessage) else "user"
            ui_parts: list[dict[str, Any]] = [{"type": "text", "text": message.content}]
            if isinstance(message, UserMessage):
                for file in message.files:
                    file_part = {"type": "file", "mediaType": file.media_type, "url": file.url}
                    if file.filename:
                        file_part["filename"] = file.filename
                    ui_parts.append(file_part)
            out.append({"id": id_factory(), "role": role, "parts": ui_parts})
        elif isinstance(message, AssistantMessage):
            if current is None:
                current = {"id": id_factory(), "role": "assistant", "parts": []}
                out.append(current)
                calls = {}
            parts: list[dict[str, Any]] = current["parts"]
            parts.append({"type": "step-start"})
            kept = message.reasoning_parts
            if kept and "".join(r.text for r in kept) == message.reasoning:
                for r in kept:
                    parts.append(
                        {
                            "type": "reasoning",
                            "text": r.text,
                            "state": "done",
                            "providerMetadata": dict(r.provider_metadata),
                        }
                    )
            elif message.reasoning:
                parts.append({"type": "reasoning", "text": message.reasoning, "state": "done"})
            if message.content:
                parts.append({"type": "text", "text": message.content, "state": "done"})
            for call in message.tool_calls:
                part: dict[str, Any] = {
                    "type": f"tool-{call.name}",
                    "toolCallId": call.id,
                    "state": "input-available",
                    "input": _output_value(call.arguments) if call.arguments.strip() else {},
                }
                parts.append(part)
                calls[call.id] = part
        else:
            part = calls.get(message.tool_call_id, {})
            if not part:
                continue
            if message.is_error:
                part["state"] = "output-error"
                part["errorText"] = message.content
            else:
                part["state"] = "output-available"
                part["output"] = _output_value(message.content)
    return out
