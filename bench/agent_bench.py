"""A pydantic-ai agent behind our chat view against behind pydantic-ai's own
``VercelAIAdapter`` (issue 16), on the standard workload's shape.

    PYTHONPATH=.:bench .venv/bin/python bench/agent_bench.py [--reps 5] [--warmup 1]

The agent is ``bench/workload_agent.py``'s: a ``pydantic_ai.Agent`` on a
``FunctionModel`` that replays ``bench/workload.json`` with no
delay (50 model steps, 1,000 reasoning deltas, 10,000 text deltas, 980
tool-argument fragments, 98 calls of two cheap tools that return the
recorded results, then the answer). The same agent object serves both
sides, in this one process, requests alternating A B A B:

* **ours**: ``POST /agent-bench/chat``, a ``ChatView`` whose ``agent`` is
  that agent (session, CSRF, ``ConversationStore.prepare``, the
  ``PydanticAIAdapter``, encoder, ``RunRecorder`` writing the chunk log to
  a file SQLite database, broker, ai@7 renderer). Its CPU counts until the
  run is stored ``completed``.
* **pydantic-ai**: ``POST /api/chat`` of a FastAPI app doing what
  the FastAPI peer of the server benchmark does (docs/benchmarks.md):
  ``VercelAIAdapter.dispatch_request(request, agent=agent, sdk_version=7)``.
  It stores nothing.

Both are called in process as ASGI applications (no sockets: a minimal
ASGI client here records when each body piece arrives), so the figures are
the servers' own work. Per request: CPU time of the whole process
(``time.process_time``: the event loop and the threads Django hops to,
the log writer's included) divided by the delta frames the client got
(text, reasoning and tool-input deltas), and the time to the first delta
frame. Ratios are paired per round (pydantic-ai / ours: above 1, ours is
cheaper or sooner).

Then, without HTTP, on the same script: the built-in loop (``ToolLoop``
over a ``ScriptedModel``, ``bench/loop_plugin.py``), the agent through the
``PydanticAIAdapter``, and the agent driven the same way with its events
only drained, each through the encoder and ai@7 renderer where it has
events to encode; per source event of the adapter. The adapter's own
cost per event is the difference of the last two.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench_settings")
os.environ.setdefault("UISTREAM_BENCH_DIR", tempfile.mkdtemp(prefix="uistream-agent-bench-"))

import django  # noqa: E402

django.setup()

from asgi_client import Answer, Browser, call  # noqa: E402
from asgiref.sync import sync_to_async  # noqa: E402
from bench_common import WORKLOAD_PATH  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.urls import include, path  # noqa: E402
from fastapi import FastAPI, Request  # noqa: E402
from fastapi.responses import Response  # noqa: E402
from loop_plugin import make as make_loop  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.ui.vercel_ai import VercelAIAdapter  # noqa: E402
from workload_agent import workload_agent  # noqa: E402

from uistream_app.adapters import AgentTurn  # noqa: E402
from uistream_app.adapters.pydantic_ai import PydanticAIAdapter  # noqa: E402
from uistream_app.models import Run  # noqa: E402
from uistream_app.protocol.ui.encoder import UIMessageEncoder  # noqa: E402
from uistream_app.protocol.ui.render import UIStreamRenderer  # noqa: E402
from uistream_app.protocol.ui.stream import aencode_events  # noqa: E402
from uistream_app.runs import UserMessage  # noqa: E402
from uistream_app.testing import chat_body, user_message  # noqa: E402
from uistream_app.views import ChatView  # noqa: E402

WORKLOAD: dict[str, Any] = json.loads(WORKLOAD_PATH.read_text())
AGENT = workload_agent(WORKLOAD)
PROMPT = "Run the workload."


class AgentBenchChatView(ChatView):
    agent = AGENT


urlpatterns = [
    path("agent-bench/chat", AgentBenchChatView.as_view()),
    path("", include("demo_project.urls")),
]

fastapi_app = FastAPI()


@fastapi_app.post("/api/chat")
async def pydantic_ai_chat(request: Request) -> Response:
    return await VercelAIAdapter.dispatch_request(request, agent=AGENT, sdk_version=7)


@sync_to_async
def running() -> bool:
    return Run.objects.filter(status="running").exists()


@dataclass
class Sample:
    cpu: float
    wall: float
    ttfd: float
    headers: float
    deltas: int


async def measure(send: Callable[[], Awaitable[Answer]], settle: Callable[[], Awaitable[bool]] | None) -> Sample:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    answer = await send()
    if settle is not None:
        while await settle():  # ours: until the run is stored  # noqa: ASYNC110 (a database row)
            await asyncio.sleep(0.001)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    if answer.status != 200 or answer.first_delta is None:
        raise RuntimeError(f"status {answer.status}: {b''.join(answer.body)[:500]!r}")
    return Sample(cpu, wall, answer.first_delta, answer.headers_at or 0.0, answer.deltas())


async def http_part(reps: int, warmup: int) -> None:
    ours_app, theirs_app = get_asgi_application(), fastapi_app
    browser = Browser(ours_app)
    await browser.start()
    counter = iter(range(10**6))

    async def ours() -> Answer:
        return await browser.post("/agent-bench/chat", chat_body(f"bench-{next(counter)}", PROMPT))

    async def theirs() -> Answer:
        body = json.dumps(chat_body("chat_perf", PROMPT)).encode()
        return await call(theirs_app, "POST", "/api/chat", body, {"content-type": "application/json"})

    for _ in range(warmup):
        await measure(ours, running)
        await measure(theirs, None)
    pairs: list[tuple[Sample, Sample]] = []
    for _ in range(reps):
        a = await measure(ours, running)
        b = await measure(theirs, None)
        pairs.append((a, b))
    ours_s, theirs_s = [a for a, _ in pairs], [b for _, b in pairs]
    print(
        f"HTTP (in-process ASGI), {reps} paired rounds, medians; deltas per answer: "
        f"ours {ours_s[0].deltas:,}, pydantic-ai {theirs_s[0].deltas:,}"
    )
    rows = [
        ("CPU per request", "ms", lambda s: s.cpu * 1000),
        ("CPU per delta", "µs", lambda s: s.cpu / s.deltas * 1e6),
        ("wall per request", "ms", lambda s: s.wall * 1000),
        ("time to headers", "ms", lambda s: s.headers * 1000),
        ("time to first delta", "ms", lambda s: s.ttfd * 1000),
    ]
    print(f"{'':22s}{'ours':>12s}{'pydantic-ai':>14s}{'pydantic-ai / ours':>22s}")
    for label, unit, value in rows:
        mine = statistics.median(value(s) for s in ours_s)
        peer = statistics.median(value(s) for s in theirs_s)
        ratio = statistics.median(value(b) / value(a) for a, b in pairs)
        print(f"{label:22s}{mine:9.2f} {unit:2s}{peer:11.2f} {unit:2s}{ratio:18.2f}x")


# -- the adapter's own overhead ------------------------------------------------------------


async def adapter_run() -> int:
    adapter = PydanticAIAdapter(AGENT)
    turn = AgentTurn(
        history=[user_message(PROMPT)],
        messages=[UserMessage(PROMPT)],
        chat_id="c",
        run_id="r",
        message_id="m",
    )
    render = UIStreamRenderer(7).render
    n = 0
    async for chunk in aencode_events(adapter.run(turn), UIMessageEncoder(WORKLOAD["message_id"])):
        render(chunk)
        n += 1
    return n


async def adapter_events() -> int:
    adapter = PydanticAIAdapter(AGENT)
    turn = AgentTurn(history=[], messages=[UserMessage(PROMPT)], chat_id="c", run_id="r", message_id="m")
    return sum([1 async for _ in adapter.run(turn)])


async def agent_drained() -> int:
    """The agent driven as the adapter drives it, its events only drained."""
    agent = AGENT
    n = 0
    async with agent.iter(PROMPT) as run:
        async for node in run:
            if Agent.is_model_request_node(node) or Agent.is_call_tools_node(node):
                async with node.stream(run.ctx) as stream:
                    async for _ in stream:
                        n += 1
    return n


LOOP = "built-in loop (ToolLoop + ScriptedModel) + encode"
DRAINED = "pydantic-ai agent drained (no translation)"
ADAPTER_ENCODED = "pydantic-ai agent + PydanticAIAdapter + encode"
ADAPTER_EVENTS = "PydanticAIAdapter events, no encode"


async def overhead_part(reps: int, warmup: int) -> None:
    loop_run = make_loop(WORKLOAD)
    events = await adapter_events()
    variants: dict[str, Callable[[], Awaitable[Any]]] = {
        LOOP: loop_run,
        DRAINED: agent_drained,
        ADAPTER_ENCODED: adapter_run,
        ADAPTER_EVENTS: adapter_events,
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    for i in range(warmup + reps):
        for name, fn in variants.items():
            t0 = time.process_time()
            await fn()
            if i >= warmup:
                times[name].append(time.process_time() - t0)
    print(f"\nIn process, no HTTP: {events:,} source events from the adapter per run, CPU medians of {reps}")
    for name, ts in times.items():
        t = statistics.median(ts)
        print(f"{name:52s}{t * 1000:9.1f} ms {t / events * 1e6:8.2f} µs/event")
    # Differences paired per round: a busy machine shifts whole rounds.
    own = statistics.median(a - b for a, b in zip(times[ADAPTER_EVENTS], times[DRAINED], strict=True))
    extra = statistics.median(a - b for a, b in zip(times[ADAPTER_ENCODED], times[LOOP], strict=True))
    for label, t in (
        ("the adapter's own translation (paired)", own),
        ("behind pydantic-ai, not the loop (paired)", extra),
    ):
        print(f"{label:52s}{t * 1000:9.1f} ms {t / events * 1e6:8.2f} µs/event")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--only", choices=["http", "overhead"])
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    settings.ROOT_URLCONF = sys.modules[__name__]
    if args.only != "overhead":
        asyncio.run(http_part(args.reps, args.warmup))
    if args.only != "http":
        asyncio.run(overhead_part(args.reps, args.warmup))


if __name__ == "__main__":
    main()
