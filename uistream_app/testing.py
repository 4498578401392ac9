"""Test helpers for projects that use uistream.

``ScriptedModel`` stands in for a real model: enqueue what it should say,
step by step, and assert on what it was asked::

    from uistream_app.testing import ScriptedModel, call

    model = ScriptedModel(
        ["Let me check.", call("get_weather", {"city": "Paris"})],
        "It is sunny in Paris.",
    )
    # ... run your view or ToolLoop with it ...
    assert model.requests[1].messages[-1].content == '{"sky": "sunny"}'

See ``uistream_app.runs.scripted`` for the step shorthand.
"""

from __future__ import annotations

from .runs.scripted import ScriptedCall, ScriptedModel, ScriptedRequest, call, reasoning, text, usage

__all__ = ["ScriptedCall", "ScriptedModel", "ScriptedRequest", "call", "reasoning", "text", "usage"]
