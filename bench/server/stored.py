"""What a uistream server stored during a benchmark run, read from its database afterwards.

    python stored.py /tmp/srvbench/runs/<run>/bench.sqlite3
    python stored.py postgres://postgres@127.0.0.1:5432/srvbench_123_1

Prints one JSON object:

* ``rows``: the row count of every ``uistream_app_*`` table;
* ``runs``: the runs by status (``{"completed": 210}`` when all went well);
* ``count_chats``: the assistant messages that answer a "count to N" user message;
* ``answers_wrong``: how many of those do not hold exactly the expected answer, whose text parts
  joined are "1 2 … N" (the demo model's text deltas "1", " 2", … " N" as ``Message.parts`` stores
  them: reasoning and step parts aside), or whose run is not ``completed``;
* ``wrong_examples``: up to three of them (message id, what was wanted, what was found).

Raw SQL on the app's tables (``uistream_app_message``, ``uistream_app_run``), so it needs no Django
settings: ``sqlite3`` for a file, ``psycopg`` (the project's PostgreSQL driver) for a URL.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from collections import Counter
from typing import Any

COUNT = re.compile(r"\bcount(?:\s+(?:from\s+1\s+))?\s+(?:up\s+)?to\s+(\d+)", re.IGNORECASE)


def connect(target: str) -> tuple[Any, list[str]]:
    """A DB-API connection to ``target`` and the names of the app's tables."""
    if "://" in target:
        import psycopg  # the project's PostgreSQL driver

        conn: Any = psycopg.connect(target)
        rows = conn.execute(
            "select tablename from pg_tables where schemaname = 'public' and tablename like 'uistream_app_%'"
        ).fetchall()
    else:
        conn = sqlite3.connect(f"file:{target}?mode=ro", uri=True)
        rows = conn.execute(
            "select name from sqlite_master where type = 'table' and name like 'uistream_app_%'"
        ).fetchall()
    return conn, sorted(r[0] for r in rows)


def as_json(value: Any) -> Any:
    """A JSON column as Python: SQLite gives text, PostgreSQL's driver the value."""
    return json.loads(value) if isinstance(value, str | bytes) else value


def text_of(parts: Any) -> str:
    """The answer a message's parts hold: its text parts, joined."""
    return "".join(p.get("text", "") for p in parts or [] if isinstance(p, dict) and p.get("type") == "text")


def inspect(target: str) -> dict[str, Any]:
    conn, tables = connect(target)
    try:
        rows = {t[len("uistream_app_") :]: conn.execute(f'select count(*) from "{t}"').fetchone()[0] for t in tables}
        runs = Counter(status for (status,) in conn.execute("select status from uistream_app_run").fetchall())
        run_status = {
            message_id: status
            for message_id, status in conn.execute(
                "select message_id, status from uistream_app_run where message_id is not null"
            ).fetchall()
        }
        messages = conn.execute(
            "select conversation_id, position, id, role, parts from uistream_app_message"
            " order by conversation_id, position"
        ).fetchall()
    finally:
        conn.close()
    count_chats = 0
    wrong: list[dict[str, str]] = []
    asked: int | None = None
    chat = None
    for conversation_id, _position, message_id, role, parts in messages:
        if conversation_id != chat:
            chat, asked = conversation_id, None
        text = text_of(as_json(parts))
        if role == "user":
            m = COUNT.search(text)
            asked = int(m.group(1)) if m else None
        elif role == "assistant" and asked is not None:
            count_chats += 1
            want = " ".join(str(i) for i in range(1, asked + 1))
            status = run_status.get(message_id, "no run")
            if text != want or status != "completed":
                wrong.append(
                    {"message": message_id, "run": status, "want": f"{want[:20]}…{want[-12:]}", "got": text[:60]}
                )
    return {
        "rows": rows,
        "runs": dict(runs),
        "count_chats": count_chats,
        "answers_wrong": len(wrong),
        "wrong_examples": wrong[:3],
    }


if __name__ == "__main__":
    print(json.dumps(inspect(sys.argv[1])))
