"""What an AG-UI continuation says: answers to tool approvals and results
of client-side tools, read from a checked ``RunAgentInput``.

This module only reads those answers; whether they answer anything pending
is the server's business (``lifecycle.store.apply_answers`` checks them
against the stored conversation). No I/O. Its rules are the AG-UI resume
rules of docs/protocols.md ("rule N" in this module means AG-UI resume rule
N there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .input import AGUIInput, AGUIInputError

__all__ = ["UNEDITED", "ApprovalAnswer", "ToolResultMessage", "read_approval_answers", "read_tool_results"]

#: ``ApprovalAnswer.edited_args`` of an answer that edits nothing.
UNEDITED: Any = object()


@dataclass(frozen=True)
class ApprovalAnswer:
    """One ``resume`` entry read as an approval decision."""

    interrupt_id: str
    approved: bool
    reason: str | None
    status: str  # "resolved" | "cancelled"
    where: str  # "resume[i]"
    #: ``payload.editedArgs``: the arguments the approved call should run
    #: with instead (``UNEDITED``: none sent).
    edited_args: Any = None

    @property
    def edits(self) -> bool:
        return self.edited_args is not UNEDITED


@dataclass(frozen=True)
class ToolResultMessage:
    """One ``tool`` message read as a tool call's result."""

    tool_call_id: str
    content: Any  # as sent: a string, or content parts
    error: str | None
    where: str  # "messages[i]"

    def text(self) -> tuple[str, bool]:
        """The result as a tool's output text and whether the call failed
        (rule 4); raises ``AGUIInputError`` when the content is not text."""
        if self.error is not None:
            return self.error, True
        if not isinstance(self.content, str):
            raise AGUIInputError(
                f"{self.where}.content: a client-side tool's result must be text", field=f"{self.where}.content"
            )
        return self.content, False


def read_approval_answers(agui: AGUIInput) -> list[ApprovalAnswer]:
    """Rules 1-3 over ``agui.resume``; raises ``AGUIInputError`` naming the
    entry (or its payload field) that is not an approval's answer."""
    answers: list[ApprovalAnswer] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(agui.resume):
        where = f"resume[{i}]"
        interrupt_id = entry["interruptId"]
        if interrupt_id in seen:
            raise AGUIInputError(
                f"{where} answers the same interrupt as resume[{seen[interrupt_id]}]", field=f"{where}.interruptId"
            )
        seen[interrupt_id] = i
        if entry["status"] == "cancelled":
            answers.append(ApprovalAnswer(interrupt_id, False, None, "cancelled", where, UNEDITED))
            continue
        payload = entry.get("payload")
        if not isinstance(payload, dict):
            raise AGUIInputError(
                f"{where}.payload must be an object {{approved: true|false, reason?: string}}",
                field=f"{where}.payload",
            )
        if not isinstance(payload.get("approved"), bool):
            raise AGUIInputError(f"{where}.payload.approved must be true or false", field=f"{where}.payload.approved")
        reason = payload.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise AGUIInputError(f"{where}.payload.reason must be a string", field=f"{where}.payload.reason")
        # Edited arguments are read here and checked by the server against
        # the tool (whether it allows edits, whether they fit its schema).
        edited = payload.get("editedArgs", UNEDITED)
        answers.append(ApprovalAnswer(interrupt_id, payload["approved"], reason or None, "resolved", where, edited))
    return answers


def read_tool_results(agui: AGUIInput) -> list[ToolResultMessage]:
    """Rule 4 over ``agui.messages``: every ``tool`` message, in order."""
    results: list[ToolResultMessage] = []
    for i, message in enumerate(agui.messages):
        if message["role"] != "tool":
            continue
        results.append(
            ToolResultMessage(message["toolCallId"], message["content"], message.get("error"), f"messages[{i}]")
        )
    return results
