"""The demo's AG-UI endpoint (``/api/agui``): the app's ``AGUIView`` (the
tool loop over the demo's model and tools) with AG-UI shared state, and one
tool the page runs: ``change_background`` (``CHANGE_BACKGROUND``, a
``ClientTool``; CopilotKit's ``useFrontendTool`` of that name answers it).

The state is ``{"turns": N}``: how many runs of the thread completed. Each
run starts with a ``STATE_SNAPSHOT`` of it (where the thread's last run
left it, ``Run.state``) and, when it completes, ends with a
``STATE_DELTA`` ``[{"op": "replace", "path": "/turns", "value": N + 1}]``
right before ``RUN_FINISHED``; a run that is stopped or fails leaves it as
it was.
"""

from __future__ import annotations

from typing import Any

from uistream_app.hooks import TurnContext
from uistream_app.lifecycle.store import PreparedRun
from uistream_app.protocol.agui.state import SharedState
from uistream_app.runs import ClientTool, Tool
from uistream_app.transport.agui_views import AGUIView, stored_state

#: A tool the client runs: the model asks, the page changes its background
#: and answers with the call's result (``{"color": ...}``).
CHANGE_BACKGROUND = ClientTool(
    "change_background",
    description="Change the page's background colour.",
    parameters={
        "type": "object",
        "properties": {"color": {"type": "string", "description": "A CSS colour name or #rgb value."}},
        "required": ["color"],
    },
)


class DemoAGUIView(AGUIView):
    """``AGUIView`` keeping ``{"turns": N}`` per thread (the module
    docstring), with the demo's tools and ``CHANGE_BACKGROUND``."""

    def get_tools(self, context: TurnContext) -> list[Tool]:
        return [*super().get_tools(context), CHANGE_BACKGROUND]

    def get_state(self, run: PreparedRun) -> Any:
        stored = stored_state(run)
        turns = stored.get("turns") if isinstance(stored, dict) else None
        return {"turns": turns if isinstance(turns, int) else 0}

    def end_state(self, run: PreparedRun, state: SharedState) -> None:
        state.update(turns=state.value["turns"] + 1)
