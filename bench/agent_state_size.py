"""What a pending call's saved framework state weighs when the history holds
a file (docs/adapters.md, "The adapter contract", rule 7, and LangGraph's
"State").

    .venv/bin/python bench/agent_state_size.py [--kb 100]

The demo's LangGraph graph and Agents SDK agent, on their offline test
models, answer "email a@b.c saying hi": the call waits for a person, and
the adapter saves the framework's state (a LangGraph checkpoint, the SDK's
``RunState``) as JSON for ``Run.agent_state``. Measured: that JSON's bytes
without a file, with a ``--kb`` kB image in the message, and the ratio of
the difference to the image's size. No database, no network.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench_settings")
os.environ.setdefault("UISTREAM_BENCH_DIR", tempfile.mkdtemp(prefix="uistream-state-size-"))
os.environ["UISTREAM_DEMO_DELAY_MS"] = "0"

import django  # noqa: E402

django.setup()

from demo_project.agents import langgraph_agent, openai_agents_agent  # noqa: E402
from uistream_app.adapters import AgentTurn, adapter_for  # noqa: E402
from uistream_app.runs.messages import FilePart, UserMessage  # noqa: E402


async def saved_size(agent: Any, data: bytes) -> int:
    saved: list[str] = []

    async def save(state: Any) -> None:
        saved.append(json.dumps(state))

    files = (FilePart("image/png", "/api/files/bench", "bench.png", load=lambda: data),) if data else ()
    turn = AgentTurn(
        history=[],
        messages=[UserMessage("email a@b.c saying hi", files)],
        chat_id="bench",
        run_id="bench",
        message_id="bench",
        save_state=save,
    )
    adapter = adapter_for(agent)
    assert adapter is not None
    async for _ in adapter.run(turn):
        pass
    (state,) = saved
    return len(state.encode())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=int, default=100, help="the image's size in kB")
    args = parser.parse_args()
    warnings.simplefilter("ignore", DeprecationWarning)
    image = os.urandom(args.kb * 1000)
    agents = {"langgraph": langgraph_agent.build_graph(), "openai-agents": openai_agents_agent.demo_agent}
    for name, agent in agents.items():
        bare = asyncio.run(saved_size(agent, b""))
        with_file = asyncio.run(saved_size(agent, image))
        added = with_file - bare
        print(
            f"{name}: {bare} bytes without a file, {with_file} with a {args.kb} kB image: "
            f"+{added} bytes, {added / len(image):.2f}× the image"
        )


if __name__ == "__main__":
    main()
