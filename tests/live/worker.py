"""A second process for the Redis broker tests.

    python -m tests.live.worker CONFIG_JSON subscribe RUN_ID FROM_SEQ ANNOUNCE_AT
        prints "caught-up" once ANNOUNCE_AT chunks arrived, then, when the
        run ends, "done <JSON [[seq, chunk], ...]>"
    python -m tests.live.worker CONFIG_JSON stop CONVERSATION_ID
        prints the result of request_stop ("true" / "false")
    python -m tests.live.worker CONFIG_JSON run CONVERSATION_ID RUN_ID COUNT
        opens the run, publishes COUNT chunks, prints "ready" and waits to be
        killed (a crashed server process)

Every command ends with a line "django-loaded <true|false>": the broker must
work without Django.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from uistream_app.live import broker_from_config


def say(*parts: Any) -> None:
    print(*parts, flush=True)


async def main(config: dict[str, Any], command: str, *args: str) -> None:
    broker = broker_from_config(config)
    try:
        if command == "subscribe":
            run_id, from_seq, announce_at = args[0], int(args[1]), int(args[2])
            received: list[tuple[int, Any]] = []
            async for item in broker.subscribe(run_id, from_seq):
                received.append(item)
                if len(received) == announce_at:
                    say("caught-up")
            say("done", json.dumps(received))
        elif command == "stop":
            say(json.dumps(await broker.request_stop(args[0])))
        elif command == "run":
            conversation_id, run_id, count = args[0], args[1], int(args[2])
            channel = await broker.open_run(conversation_id, run_id)
            await channel.publish([{"type": "text-delta", "id": "text-0", "delta": f"{i} "} for i in range(count)])
            say("ready")
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until killed
        else:
            raise SystemExit(f"unknown command {command!r}")
    finally:
        await broker.aclose()
    say("django-loaded", json.dumps("django" in sys.modules))


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1]), sys.argv[2], *sys.argv[3:]))
