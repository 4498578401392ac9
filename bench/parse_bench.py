"""What reading useChat's request costs as a chat grows.

    PYTHONPATH=. .venv/bin/python bench/parse_bench.py [--turns 500]

useChat sends the whole history with every message. The body of turn
``--turns + 1`` (every earlier question and answer, each answer with
reasoning, text and a tool call) is parsed by ``parse_chat_request``, and,
as the reference in the same process, by ``orjson.loads`` alone; printed:
both medians and their ratio (the parser's cost over the JSON decoding
every server pays).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import django
import orjson


def history(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i in range(turns):
        messages.append({"id": f"u{i}", "role": "user", "parts": [{"type": "text", "text": "count to 3"}]})
        messages.append(
            {
                "id": f"a{i}",
                "role": "assistant",
                "parts": [
                    {"type": "step-start"},
                    {"type": "reasoning", "text": "The user wants me to count.", "state": "done"},
                    {"type": "text", "text": "1 2 3", "state": "done"},
                    {
                        "type": "tool-get_weather",
                        "toolCallId": f"c{i}",
                        "state": "output-available",
                        "input": {"city": "Paris"},
                        "output": {"temperature": 18, "sky": "clear"},
                    },
                ],
            }
        )
    messages.append({"id": "new", "role": "user", "parts": [{"type": "text", "text": "count to 3"}]})
    return messages


def median_seconds(work: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        work()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    django.setup()
    from uistream_app.transport.chat_request import parse_chat_request

    body = json.dumps({"id": "chat", "trigger": "submit-message", "messages": history(args.turns)}).encode()
    parse = median_seconds(lambda: parse_chat_request(body, max_bytes=len(body)), args.runs)
    decode = median_seconds(lambda: orjson.loads(body), args.runs)
    print(f"{2 * args.turns + 1} messages, {len(body) // 1024} KiB")
    print(f"parse_chat_request {parse * 1000:.2f} ms, orjson.loads {decode * 1000:.2f} ms: {parse / decode:.1f}x")


if __name__ == "__main__":
    main()
