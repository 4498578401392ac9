"""Live runs: the model port, tools, the tool loop, and providers.

No Django here (a test enforces it): a run is usable from any Python
program. The pieces:

* ``model``: the ``ChatModel`` port (``stream(messages, tools, options)`` →
  async iterator of source events) and its contract;
* ``messages``: the conversation as a model reads it;
* ``tools``: ``@tool`` / ``Tool`` over plain functions, schema from hints;
* ``loop``: ``ToolLoop``, model ⇄ tools until done, as source events;
* ``scripted``: ``ScriptedModel`` for tests and benchmarks;
* ``openai``: ``OpenAIChatModel``, chat-completions over httpx, and
  ``OpenAIResponsesModel``, the Responses API (``openai_responses``);
* ``anthropic``: ``AnthropicModel``, the Anthropic Messages API;
* ``providers``: ``resolve_model("anthropic:claude-…")``, a model by name;
* ``ui_messages``: stored UI messages ⇄ model messages;
* ``failures``: the typed failures.
"""

from __future__ import annotations

from .failures import (
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeoutError,
    ScriptExhaustedError,
    ToolError,
    UnsupportedFileError,
)
from .loop import DEFAULT_MAX_STEPS, MASKED_TOOL_ERROR, ClientToolResult, ToolApproval, ToolApprovalPolicy, ToolLoop
from .messages import (
    AssistantMessage,
    AssistantPart,
    CustomPart,
    FilePart,
    ModelMessage,
    ModelOptions,
    ProviderApproval,
    ProviderToolCall,
    ProviderToolResult,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCallRequest,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from .model import ChatModel, ModelEvent, model_name
from .providers import MODEL_SCHEMES, ModelSpecError, is_model_spec, resolve_model, shared_model
from .scripted import ScriptedModel
from .tools import ApprovalStatus, ClientTool, Tool, ToolArgumentsError, ToolContext, tool
from .ui_messages import approvals_from_ui, model_to_ui_messages, ui_to_model_messages

__all__ = [
    "DEFAULT_MAX_STEPS",
    "MASKED_TOOL_ERROR",
    "MODEL_SCHEMES",
    "ApprovalStatus",
    "AssistantMessage",
    "AssistantPart",
    "ChatModel",
    "ClientTool",
    "ClientToolResult",
    "CustomPart",
    "FilePart",
    "ModelConnectionError",
    "ModelError",
    "ModelEvent",
    "ModelHTTPError",
    "ModelMessage",
    "ModelOptions",
    "ModelResponseError",
    "ModelSpecError",
    "ModelTimeoutError",
    "ProviderApproval",
    "ProviderToolCall",
    "ProviderToolResult",
    "ReasoningPart",
    "ScriptExhaustedError",
    "ScriptedModel",
    "SystemMessage",
    "TextPart",
    "Tool",
    "ToolApproval",
    "ToolApprovalPolicy",
    "ToolArgumentsError",
    "ToolCallRequest",
    "ToolContext",
    "ToolError",
    "ToolLoop",
    "ToolMessage",
    "ToolSpec",
    "UnsupportedFileError",
    "UserMessage",
    "approvals_from_ui",
    "is_model_spec",
    "model_name",
    "model_to_ui_messages",
    "resolve_model",
    "shared_model",
    "tool",
    "ui_to_model_messages",
]
