"""The demo's URLs plus views the tests configure in code."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from django.urls import path

from demo_project.demo_model import send_email
from demo_project.urls import urlpatterns as demo_urlpatterns
from tests.context_views import PerUserAGUIView, PerUserChatView, WorkerRefusingChatView
from uistream_app.adapters import AgentAdapter, AgentTurn
from uistream_app.protocol import events as ev
from uistream_app.runs import ClientTool, ModelMessage, Tool, ToolMessage
from uistream_app.views import ChatView


class LocateModel:
    """Asks the browser where the user is, then answers from what it said."""

    name = "locate"

    async def stream(
        self, messages: Sequence[ModelMessage], tools: Sequence[Any] = (), options: Any = None
    ) -> AsyncIterator[ev.Event]:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            where = json.loads(last.content).get("city", "nowhere") if not last.is_error else "an unknown place"
            yield ev.TextDelta(f"You are in {where}.")
            yield ev.Finish("stop")
        else:
            yield ev.ToolCallStart("call_loc", "get_location")
            yield ev.ToolCall("call_loc", "get_location", "{}")
            yield ev.Finish("tool-calls")


class ClientToolChatView(ChatView):
    model = LocateModel()
    tools = (ClientTool("get_location", description="The user's location, from the browser."),)


class ScriptedAdapter(AgentAdapter):
    """An adapter with no framework behind it: asks to approve ``wipe``,
    saves the state a framework would, and answers from the decision and
    the state it gets back (tests/test_adapters.py)."""

    framework = "scripted"

    async def run(self, turn: AgentTurn) -> AsyncIterator[ev.Event]:
        if not turn.continues:
            yield ev.TextDelta("I will ask first.")
            yield ev.ToolCallStart("call_wipe", "wipe")
            yield ev.ToolCallDelta("call_wipe", '{"disk": "C"}')
            yield ev.ToolCall("call_wipe", "wipe", '{"disk": "C"}')
            await turn.save_state({"checkpoint": 1, "pending": "call_wipe"})
            yield ev.ToolApprovalRequest(turn.approval_id(), "call_wipe")
            yield ev.Done("tool-calls")
            return
        state = turn.resume_state or {}
        decision = turn.approvals.get(state.get("pending", ""))
        if decision is not None and decision.approved:
            yield ev.ToolResult("call_wipe", {"wiped": "C"}, tool_name="wipe")
            yield ev.TextDelta(f"Wiped (checkpoint {state['checkpoint']}).")
        else:
            yield ev.ToolDenied("call_wipe")
            yield ev.TextDelta(f"Not wiped (checkpoint {state.get('checkpoint')}).")
        yield ev.Done("stop")


class ScriptedAgentChatView(ChatView):
    agent = ScriptedAdapter(object())


class LockedEmailChatView(ChatView):
    """The demo's chat, but its ``send_email`` does not let a person edit
    the arguments of a call they approve."""

    tools = (Tool(send_email.function, name="send_email", requires_approval=True),)


urlpatterns = [
    *demo_urlpatterns,
    path("test-locked-email/chat", LockedEmailChatView.as_view()),
    path("test-client-tools/chat", ClientToolChatView.as_view()),
    path("test-agent/chat", ScriptedAgentChatView.as_view()),
    path("test-per-user/chat", PerUserChatView.as_view()),
    path("test-per-user/agui", PerUserAGUIView.as_view()),
    path("test-per-user/refusing", WorkerRefusingChatView.as_view()),
]
