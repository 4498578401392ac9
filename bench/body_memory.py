"""What a server holds for a big chat body: its RSS while it takes three
30 MiB bodies in a row, and after (issue 29).

    PYTHONPATH=.:bench .venv/bin/python bench/body_memory.py [--server uvicorn] [--kind files] [--mib 30]

One server process (``--server``: uvicorn, as the demo is measured, or
daphne) on the demo's settings and a fresh SQLite file (``ws_bench.Server``),
warmed up with ten "count to 20" chats of one visitor, then idle for a
second: its idle RSS. Then ``--bodies`` new chats one after another, each
a body of ``--mib`` MiB that the default ``MAX_REQUEST_BYTES`` (about
41 MiB) accepts:

* ``files`` (the default): three pictures as ``data:`` URLs (useChat's
  ``sendMessage({files})``: the attachments are moved to Django's storage)
  and "count to 3";
* ``text``: one text part of that size ending in "count to 3".

Each answer is read to ``[DONE]``; the server's RSS is sampled every 10 ms
from before the first body until ``--hold`` seconds after the last answer.
Printed, as ratios to the body's size: the peak RSS growth over idle, and
the growth still held ``--hold`` seconds after the last answer. Then what
was stored is checked (every run ``completed``, every answer the text it
streamed, every body's files in storage, byte for byte), and the idle RSS
in MiB.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
from ws_bench import PY, ROOT, Server

from uistream_app.testing import chat_body, user_message

WARM_UP = 10
#: The default ``MAX_FILE_BYTES`` (10 MiB) allows a picture of this many bytes in each of three parts.
PARTS = 3


def make_body(kind: str, mib: int) -> tuple[dict[str, Any], list[str]]:
    """A new chat's body of about ``mib`` MiB, and the SHA-256 of each file it carries."""
    chat_id = str(uuid.uuid4())
    if kind == "text":
        text = "x" * (mib * 1024 * 1024 - 64) + " count to 3"
        return chat_body(chat_id, [user_message(text, id=str(uuid.uuid4()))]), []
    raw_size = mib * 1024 * 1024 * 3 // 4 // PARTS
    files, digests = [], []
    for i in range(PARTS):
        raw = os.urandom(raw_size)
        digests.append(hashlib.sha256(raw).hexdigest())
        url = "data:image/png;base64," + base64.b64encode(raw).decode()
        files.append({"mediaType": "image/png", "url": url, "filename": f"picture-{i}.png"})
    return chat_body(chat_id, [user_message("count to 3", id=str(uuid.uuid4()), files=files)]), digests


def fresh_postgres(url: str) -> str:
    """A new database on the server of ``url``, named for this process; its URL."""
    import psycopg

    name = f"uistream_body_{os.getpid()}"
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"DROP DATABASE IF EXISTS {name}")
        connection.execute(f"CREATE DATABASE {name}")
    return url.rsplit("/", 1)[0] + "/" + name


def sample(server: Server, stop: threading.Event, samples: list[tuple[float, int]]) -> None:
    while not stop.is_set():
        samples.append((time.monotonic(), server.rss_kib()))
        time.sleep(0.01)


def chat(client: httpx.Client, content: bytes) -> str:
    """POST one body; the answer's text, read to ``[DONE]``."""
    text = []
    with client.stream(
        "POST", "/api/chat", content=content, headers={"content-type": "application/json"}, timeout=120
    ) as response:
        if response.status_code != 200:
            raise SystemExit(f"the server answered {response.status_code}: {response.read()[:500]!r}")
        frames = response.read().decode().split("\n\n")
    assert frames[-2] == "data: [DONE]", frames[-3:]
    for frame in frames:
        if frame.startswith("data: {"):
            chunk = json.loads(frame[6:])
            assert chunk["type"] != "error", chunk
            if chunk["type"] == "text-delta":
                text.append(chunk["delta"])
    return "".join(text)


STORED = """
import django, hashlib, json, sys; django.setup()
from uistream_app.models import Message, Run, StoredFile
chat_ids = json.loads(sys.argv[1])
out = {"statuses": sorted(set(Run.objects.values_list("status", flat=True))), "answers": [], "files": []}
for chat_id in chat_ids:
    answers = Message.objects.filter(conversation__client_id=chat_id, role="assistant")
    out["answers"].append(["".join(p.get("text", "") for p in m.parts if p.get("type") == "text") for m in answers])
    stored = StoredFile.objects.filter(conversation__client_id=chat_id).order_by("name")
    out["files"].append([hashlib.sha256(f.file.read()).hexdigest() for f in stored])
print(json.dumps(out))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=("uvicorn", "daphne"), default="uvicorn")
    parser.add_argument("--kind", choices=("files", "text"), default="files")
    parser.add_argument("--mib", type=int, default=30)
    parser.add_argument("--bodies", type=int, default=3)
    parser.add_argument("--hold", type=float, default=3.0)
    parser.add_argument(
        "--postgres",
        metavar="URL",
        help="a PostgreSQL server (postgres://user@host:port/db) to hold a fresh database of this run's, not SQLite",
    )
    args = parser.parse_args()

    server = Server(0, kind=args.server, label=args.server)
    # The anonymous visitor's storage cap (20 MiB a day) would refuse the
    # first body: lifted, as a site that takes big bodies would.
    with (server.dir / "ws_bench_settings.py").open("a") as settings:
        settings.write("UISTREAM = {**UISTREAM, 'MAX_STORED_BYTES_PER_SESSION_PER_DAY': None}\n")
        if args.postgres:
            database = fresh_postgres(args.postgres)
            # The demo's connection age (UISTREAM_DEMO_CONN_MAX_AGE, 60 unless set).
            age = int(os.environ.get("UISTREAM_DEMO_CONN_MAX_AGE", "60"))
            settings.write(
                "from demo_project.settings import _database_from_url\n"
                f"DATABASES = {{'default': {{**_database_from_url({database!r}), 'CONN_MAX_AGE': {age}}}}}\n"
            )
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        with httpx.Client(base_url=base, headers={"origin": base}) as client:
            token = client.get("/api/csrf").json()["csrfToken"]
            client.headers["x-csrftoken"] = token
            for i in range(WARM_UP):
                body = chat_body(str(uuid.uuid4()), [user_message("count to 20", id=f"warm-{i}")])
                assert chat(client, json.dumps(body).encode()).endswith(" 20")
            time.sleep(1.0)
            idle = server.rss_kib()
            bodies = [make_body(args.kind, args.mib) for _ in range(args.bodies)]
            contents = [json.dumps(body).encode() for body, _ in bodies]
            size = len(contents[0])
            samples: list[tuple[float, int]] = []
            stop = threading.Event()
            sampler = threading.Thread(target=sample, args=(server, stop, samples), daemon=True)
            sampler.start()
            answers = [chat(client, content) for content in contents]
            ended = time.monotonic()
            time.sleep(args.hold)
            held = server.rss_kib()
            stop.set()
            sampler.join()
        peak = max(rss for _, rss in samples)
        chat_ids = [body["id"] for body, _ in bodies]
        stored = subprocess.run(
            [PY, "-c", STORED, json.dumps(chat_ids)], cwd=ROOT, env=server.env, check=True, capture_output=True
        )
        facts = json.loads(stored.stdout)
    finally:
        server.stop()

    print(
        f"{args.server}: {args.bodies} bodies of {size / 2**20:.1f} MiB ({args.kind}), one after another "
        f"(Python {sys.version.split()[0]})"
    )
    print(f"  idle RSS {idle / 1024:.1f} MiB (after {WARM_UP} chats)")
    print(f"  peak RSS growth {(peak - idle) / 1024:.1f} MiB = {(peak - idle) * 1024 / size:.2f}x one body")
    print(
        f"  held {args.hold:.0f} s after the last answer {(held - idle) / 1024:.1f} MiB "
        f"= {(held - idle) * 1024 / size:.2f}x one body"
    )
    print(f"  last answer ended {ended - samples[0][0]:.1f} s after the first body was sent")
    ok = facts["statuses"] == ["completed"] and all(answer == "1 2 3" for answer in answers)
    ok = ok and all(texts == ["1 2 3"] for texts in facts["answers"])
    ok = ok and facts["files"] == [digests for _, digests in bodies]
    files = sum(len(digests) for digests in facts["files"])
    print(f"  stored: runs {facts['statuses']}, answers {facts['answers']}, {files} files as sent")
    print("  every answer stored complete" if ok else "  STORED ANSWERS DIFFER")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
