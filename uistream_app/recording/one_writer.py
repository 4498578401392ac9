"""One writer at a time on SQLite, waiting its turn on a lock of the
process instead of in SQLite's busy handler.

SQLite lets one connection write at a time. A connection that finds the
database locked (its ``BEGIN IMMEDIATE`` while another write transaction
is open) waits in SQLite's busy handler, which is not woken when the lock
is let go: it sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50 and then
100 ms at a time, trying between sleeps, until the connection's timeout.
Under a burst of new chats, the lanes' turn transactions and the log
writer's rounds meet there. A writer that has slept through a few rounds
sleeps on while the lock is free, and a turn's first delta waits with it:
200 new chats at once on one process (``bench/server/run_servers.sh``)
spent seconds in ``BEGIN``, up to 1.4 s for one turn, most of it asleep
beside a free lock (docs/benchmarks.md, "One writer at a time").

``one_writer()`` puts the process's own write transactions of uistream (a
turn's, ``lifecycle.store``; the log writer's rounds) in line on a
``threading.Lock`` per database file instead: each waits for the one
before it and starts the moment it ends. Writes of other code (Django's
sessions, a project's) and of other processes still meet SQLite's lock and
its busy handler, as before. The lock is waited for at most the
connection's own timeout (``OPTIONS["timeout"]``, 5 s when unset, as
Python's ``sqlite3`` has it); past that the writer goes ahead and meets
SQLite's lock as it would have.

On other databases, and inside a transaction that is already open (a
test's, or a project's around ours: its writer holds the lock already),
it does nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, connections

__all__ = ["one_writer"]

#: Python's ``sqlite3.connect`` timeout when ``OPTIONS`` sets none, in seconds.
SQLITE_TIMEOUT = 5.0

_locks: dict[str, threading.Lock] = {}
_locks_lock = threading.Lock()


@contextmanager
def one_writer(using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """Around a write transaction on ``using`` (the one a ``with
    transaction.atomic():`` inside it opens): on SQLite, in line with the
    process's other such transactions of that database file."""
    connection = connections[using]
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        yield
        return
    name = str(connection.settings_dict["NAME"])
    lock = _locks.get(name)
    if lock is None:
        with _locks_lock:
            lock = _locks.setdefault(name, threading.Lock())
    timeout = float(connection.settings_dict.get("OPTIONS", {}).get("timeout", SQLITE_TIMEOUT))
    held = lock.acquire(timeout=timeout)
    try:
        yield
    finally:
        if held:
            lock.release()
