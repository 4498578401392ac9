"""AG-UI rendering: uistream's ``AGUIRenderer`` against the official
``ag-ui-protocol`` path (events as its pydantic models, framed by its
``EventEncoder``), on the shape of the standard workload (docs/benchmarks.md):
one 50-step tool-loop run, 1,000 reasoning deltas, 10,000 text deltas, 980
tool-argument fragments, 98 tool calls and results.

    .venv/bin/python -m bench.agui_bench

Three variants are timed interleaved (paired ratios):
* ``uistream``: ``AGUIRenderer.render_many`` over the canonical chunks;
* ``official-encode``: the same events built as ag-ui-protocol models
  (``model_validate``) and framed by ``EventEncoder.encode``; the mapping
  (ours) is untimed, so this is the package's cost alone;
* ``uistream+validate``: ours, with each event also validated by the
  package (what using it as a checker in the hot path would cost).
"""

from __future__ import annotations

import statistics
import time

from ag_ui.core import Event
from ag_ui.encoder import EventEncoder
from pydantic import TypeAdapter

from uistream_app.protocol import events as ev
from uistream_app.protocol.agui.renderer import AGUIRenderer
from uistream_app.protocol.ui.encoder import UIMessageEncoder
from uistream_app.protocol.ui.stream import encode_events


def workload() -> list[ev.Event]:
    out: list[ev.Event] = []
    for step in range(50):
        out += [ev.ReasoningDelta(f"thought {i} ") for i in range(20)]
        out += [ev.TextDelta(f"word{i} ") for i in range(200)]
        if step < 49:
            for call in range(2):
                cid = f"call_{step}_{call}"
                out.append(ev.ToolCallStart(cid, "get_weather"))
                frags = ['{"ci', 'ty": ', '"Par', 'is", "', 'unit": "c"', "}", "", "", "", ""][: 10 if call else 9]
                out += [ev.ToolCallDelta(cid, f) for f in frags if f]
                out.append(ev.ToolCall(cid, "get_weather", "".join(frags)))
            out.append(ev.Finish("tool_calls"))
            out += [ev.ToolResult(f"call_{step}_{c}", '{"temperature": 18}') for c in range(2)]
            out.append(ev.StepFinished(step))
    out.append(ev.Done())
    return out


def main(samples: int = 15) -> None:
    chunks = list(encode_events(workload(), UIMessageEncoder("msg-1")))
    renderer = AGUIRenderer("t", "r", clock=lambda: 1764460800000)
    events = [e for c in chunks for e in renderer.events(c)]
    adapter = TypeAdapter(Event)
    encoder = EventEncoder()

    def ours() -> int:
        r = AGUIRenderer("t", "r", clock=lambda: 1764460800000)
        return len(r.render_many(chunks))

    def official() -> int:
        return sum(len(encoder.encode(adapter.validate_python(e))) for e in events)

    def ours_validated() -> int:
        r = AGUIRenderer("t", "r", clock=lambda: 1764460800000)
        out = r.render_many(chunks)
        for e in events:
            adapter.validate_python(e)
        return len(out)

    variants = {"uistream": ours, "official-encode": official, "uistream+validate": ours_validated}
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(samples):
        for name, fn in variants.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    print(f"{len(chunks)} chunks -> {len(events)} AG-UI events, {ours():,} bytes")
    for name, ts in times.items():
        paired = statistics.median(t / b for t, b in zip(ts, times["uistream"], strict=True))
        print(f"{name:20s} median {statistics.median(ts) * 1000:8.1f} ms   x{paired:5.2f} (paired)")


if __name__ == "__main__":
    main()
