"""The demo's URLs plus an AG-UI endpoint whose tools change the shared
state during the run, for ``tests/test_agui_state.py``."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import Any

from django.urls import path

from demo_project.urls import urlpatterns as demo_urlpatterns
from uistream_app.hooks import TurnContext
from uistream_app.lifecycle.store import PreparedRun
from uistream_app.protocol import events as ev
from uistream_app.protocol.agui.state import SharedState
from uistream_app.runs import ChatModel, Tool, ToolMessage, UserMessage
from uistream_app.runs.messages import ModelMessage
from uistream_app.transport.agui_views import AGUIView, stored_state


class ShopperModel:
    """Asked to "buy A and B", calls ``add_to_cart`` once per item; after
    the results, says how many items the cart holds."""

    name = "shopper"

    async def stream(
        self, messages: Sequence[ModelMessage], tools: Sequence[Any] = (), options: Any = None
    ) -> AsyncIterator[ev.Event]:
        if isinstance(messages[-1], ToolMessage):
            yield ev.TextDelta(f"Added: {messages[-1].content}.")
            yield ev.Finish("stop")
            return
        prompt = next(m.content for m in reversed(messages) if isinstance(m, UserMessage))
        items = re.findall(r"\w+", prompt.removeprefix("buy").replace(" and ", " "))
        yield ev.TextDelta("Adding them.")
        for i, item in enumerate(items):
            yield ev.ToolCallStart(f"add_{i}", "add_to_cart")
            yield ev.ToolCall(f"add_{i}", "add_to_cart", f'{{"item": "{item}"}}')
        yield ev.Finish("tool-calls")


class CartView(AGUIView):
    """Shared state ``{"cart": [...], "runs": N}`` kept per thread; the
    tool adds to it while the run goes on."""

    def get_model(self, context: TurnContext) -> ChatModel:
        return ShopperModel()

    def get_state(self, run: PreparedRun) -> Any:
        return stored_state(run) or {"cart": [], "runs": 0}

    def get_source(self, history: list[dict[str, Any]], run: PreparedRun, model: ChatModel) -> AsyncIterator[ev.Event]:
        state = self.shared_state(run)
        assert state is not None

        def add_to_cart(item: str) -> str:
            """Put an item in the cart."""
            state.update(cart=[*state.value["cart"], item])
            return item

        # A tool made for this run (it holds the run's state): the set-up's
        # tools, for this run only.
        assert run.setup is not None
        run = replace(run, setup=replace(run.setup, tools=(Tool(add_to_cart, run_sync_in_thread=True),)))
        return super().get_source(history, run, model)

    def end_state(self, run: PreparedRun, state: SharedState) -> None:
        state.update(runs=state.value["runs"] + 1)


urlpatterns = [path("api/agui-cart", CartView.as_view()), *demo_urlpatterns]
