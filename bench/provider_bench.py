"""CPU per streamed delta: our provider models against the official SDKs.

The question it answers: is reading a provider's stream with our own httpx
client and SSE parser (``runs._http``) cheaper or dearer, per delta, than
the official ``anthropic`` / ``openai`` SDKs' streams, which a model could
be built on instead?

A separate process serves, on 127.0.0.1, one synthetic streaming answer
per API (Anthropic Messages, OpenAI Responses, Chat Completions), each
holding ``--deltas`` text deltas, written in 16 KiB pieces as a busy
connection delivers them. This process reads each answer ``--rounds``
times with each reader, alternately (ours, the SDK's, ours…), and takes
its own CPU time (``time.process_time``) over every read: our model's
``stream()`` to its ``Finish``, or the SDK's ``create(stream=True)``
iterated to its end (the events the SDK parses into its typed objects).
It prints each reader's median CPU per delta and the ratio ours / SDK,
measured in the same process on the same bytes; absolute figures depend
on the machine, the ratio is the result.

    python bench/provider_bench.py [--deltas 20000] [--rounds 7]

Needs the official SDKs (``pip install anthropic openai``); a pair whose
SDK is not installed is skipped, saying so.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import HOST, free_port

from uistream_app.runs import UserMessage
from uistream_app.runs.anthropic import AnthropicModel
from uistream_app.runs.openai import OpenAIChatModel, OpenAIResponsesModel

PIECE = 16 * 1024
WORDS = ["The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", "."]


# -- the bodies ------------------------------------------------------------------


def _frame(obj: dict[str, Any], *, event: bool) -> str:
    data = json.dumps(obj, separators=(",", ":"))
    return (f"event: {obj['type']}\n" if event else "") + f"data: {data}\n\n"


def anthropic_body(deltas: int) -> bytes:
    usage = {"input_tokens": 10, "output_tokens": 1}
    out = [
        _frame(
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": "m",
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
            },
            event=True,
        ),
        _frame({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}, event=True),
    ]
    for n in range(deltas):
        delta = {"type": "text_delta", "text": WORDS[n % len(WORDS)]}
        out.append(_frame({"type": "content_block_delta", "index": 0, "delta": delta}, event=True))
    out += [
        _frame({"type": "content_block_stop", "index": 0}, event=True),
        _frame(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": deltas},
            },
            event=True,
        ),
        _frame({"type": "message_stop"}, event=True),
    ]
    return "".join(out).encode()


def responses_body(deltas: int) -> bytes:
    response = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "m",
        "status": "in_progress",
        "output": [],
        "usage": None,
    }
    item = {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
    out = [
        _frame({"type": "response.created", "sequence_number": 0, "response": response}, event=True),
        _frame(
            {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": item}, event=True
        ),
    ]
    for n in range(deltas):
        out.append(
            _frame(
                {
                    "type": "response.output_text.delta",
                    "sequence_number": n + 2,
                    "item_id": "msg_1",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": WORDS[n % len(WORDS)],
                    "logprobs": [],
                },
                event=True,
            )
        )
    text = "".join(WORDS[n % len(WORDS)] for n in range(deltas))
    done = {
        **item,
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }
    usage = {
        "input_tokens": 10,
        "output_tokens": deltas,
        "total_tokens": 10 + deltas,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    }
    out += [
        _frame(
            {"type": "response.output_item.done", "sequence_number": deltas + 2, "output_index": 0, "item": done},
            event=True,
        ),
        _frame(
            {
                "type": "response.completed",
                "sequence_number": deltas + 3,
                "response": {**response, "status": "completed", "output": [done], "usage": usage},
            },
            event=True,
        ),
    ]
    return "".join(out).encode()


def chat_body(deltas: int) -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        obj = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return "data: " + json.dumps(obj, separators=(",", ":")) + "\n\n"

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": WORDS[n % len(WORDS)]}) for n in range(deltas)]
    out += [chunk({}, "stop"), "data: [DONE]\n\n"]
    return "".join(out).encode()


# -- the server (its own process) -------------------------------------------------


async def serve(port: int, deltas: int) -> None:
    bodies = {
        "/v1/messages": anthropic_body(deltas),
        "/v1/responses": responses_body(deltas),
        "/v1/chat/completions": chat_body(deltas),
    }

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                length = 0
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                await reader.readexactly(length)
                body = bodies[path]
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    + f"content-length: {len(body)}\r\n\r\n".encode()
                )
                for start in range(0, len(body), PIECE):
                    writer.write(body[start : start + PIECE])
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, HOST, port)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


# -- the readers --------------------------------------------------------------------


async def read_ours(model: Any) -> None:
    async for _ in model.stream([UserMessage("hi")]):
        pass


def pairs(root: str) -> dict[str, tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]] | str]]:
    import httpx

    client = httpx.AsyncClient()
    anthropic_model = AnthropicModel("m", base_url=root + "/v1", api_key="k", client=client)
    responses_model = OpenAIResponsesModel("m", base_url=root + "/v1", api_key="k", client=client)
    chat_model = OpenAIChatModel("m", base_url=root + "/v1", api_key="k", client=client, include_usage=False)
    out: dict[str, tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]] | str]] = {}
    try:
        import anthropic

        sdk_anthropic = anthropic.AsyncAnthropic(api_key="k", base_url=root, max_retries=0)

        async def read_sdk_anthropic() -> None:
            stream = await sdk_anthropic.messages.create(
                model="m", max_tokens=4096, messages=[{"role": "user", "content": "hi"}], stream=True
            )
            async for _ in stream:
                pass

        out["anthropic messages"] = (lambda: read_ours(anthropic_model), read_sdk_anthropic)
    except ImportError:
        out["anthropic messages"] = (lambda: read_ours(anthropic_model), "the anthropic SDK is not installed")
    try:
        import openai

        sdk_openai = openai.AsyncOpenAI(api_key="k", base_url=root + "/v1", max_retries=0)

        async def read_sdk_responses() -> None:
            stream = await sdk_openai.responses.create(model="m", input="hi", stream=True)
            async for _ in stream:
                pass

        async def read_sdk_chat() -> None:
            stream = await sdk_openai.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            async for _ in stream:
                pass

        out["openai responses"] = (lambda: read_ours(responses_model), read_sdk_responses)
        out["openai chat completions"] = (lambda: read_ours(chat_model), read_sdk_chat)
    except ImportError:
        missing = "the openai SDK is not installed"
        out["openai responses"] = (lambda: read_ours(responses_model), missing)
        out["openai chat completions"] = (lambda: read_ours(chat_model), missing)
    return out


async def cpu_of(read: Callable[[], Awaitable[None]]) -> float:
    start = time.process_time()
    await read()
    return time.process_time() - start


async def measure(root: str, deltas: int, rounds: int) -> None:
    print(f"{deltas} deltas per answer, {rounds} rounds, median CPU of this process per delta")
    for name, (ours, sdk) in pairs(root).items():
        await ours()  # warm: connections, imports, caches
        if isinstance(sdk, str):
            mine = [await cpu_of(ours) for _ in range(rounds)]
            print(f"  {name:24} ours {statistics.median(mine) / deltas * 1e6:6.2f} µs   SDK: skipped ({sdk})")
            continue
        await sdk()
        mine, theirs = [], []
        for _ in range(rounds):
            mine.append(await cpu_of(ours))
            theirs.append(await cpu_of(sdk))
        ours_us = statistics.median(mine) / deltas * 1e6
        sdk_us = statistics.median(theirs) / deltas * 1e6
        print(f"  {name:24} ours {ours_us:6.2f} µs   SDK {sdk_us:6.2f} µs   ours/SDK {ours_us / sdk_us:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deltas", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.serve, args.deltas))
        return
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), "--deltas", str(args.deltas)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        if server.stdout.readline().strip() != "ready":
            raise SystemExit("the stream server did not start")
        asyncio.run(measure(f"http://{HOST}:{port}", args.deltas, args.rounds))
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
