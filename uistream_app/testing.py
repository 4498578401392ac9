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

For AG-UI: drive a hand-written agent with ``run_agent`` on a
``RunContext`` (its events collect for ``drain()``), and check any AG-UI
stream against both clients' rules with ``verify_events`` /
``verify_sse`` (``AGUIVerificationError`` names the rule)::

    from uistream_app.testing import RunContext, run_agent, verify_events

    ctx = RunContext(thread_id="t1", run_id="r1")
    await run_agent(my_agent, ctx)
    verify_events(ctx.drain())
"""

from __future__ import annotations

from .protocol.agui.handles import RunContext, run_agent
from .protocol.agui.verifier import AGUIVerificationError, AGUIVerifier, verify_events, verify_sse
from .runs.scripted import ScriptedCall, ScriptedModel, ScriptedRequest, call, reasoning, text, usage

__all__ = [
    "AGUIVerificationError",
    "AGUIVerifier",
    "RunContext",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedRequest",
    "call",
    "reasoning",
    "run_agent",
    "text",
    "usage",
    "verify_events",
    "verify_sse",
]
