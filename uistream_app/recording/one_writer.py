"""One writer at a time on SQLite, in line on a gate of the process, a
turn before the log writer.

SQLite lets one connection write at a time. A connection that finds the
database locked (its ``BEGIN IMMEDIATE`` while another write transaction
is open) waits in SQLite's busy handler, which is not woken when the lock
is let go: it sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50 and then
100 ms at a time, trying between sleeps, until the connection's timeout.
Under a burst of new chats the lanes' turn transactions and the log
writer's rounds meet there, in no order: 200 new chats at once on one
process spent about 4 s in all in ``BEGIN``, up to 1.4 s for one turn
(docs/benchmarks.md, "One writer at a time"). The lock was busy, not idle,
for most of that: the log writer's rounds held it about as long as all
the turns' transactions together.

``one_writer()`` puts the process's own write transactions of uistream (a
turn's, ``lifecycle.store``; the log writer's rounds and the lease
renewal, which go ``background``) in line on a gate per database file:
each waits for the one before it, is woken the moment it ends, and a turn
that waits goes before a background writer that waits. A turn's first
delta waits for its transaction; the log is written behind the stream and
can wait (for at most ``BACKGROUND_DEFERS`` of its wait; what its clients
were sent is in the broker meanwhile). With the turns first, the burst's
first delta p99 fell by about a third; in arrival order alone, the waits
were as long as in SQLite's handler. A turn counts from its set-up's first
hop (``turn_coming``, ``ConversationStore.prepare``), not only once it is
at the gate: a burst's turns reach the gate one at a time (their hops
queue on one thread), and the log writer's rounds took the lock between
them (500 sockets' first messages: up to 0.47 s a wait, 1.7-3.8 s in all).

Writes of other code (Django's sessions, a project's) and of other
processes still meet SQLite's lock and its busy handler, as before. The
gate is waited for at most the connection's own timeout
(``OPTIONS["timeout"]``, 5 s when unset, as Python's ``sqlite3`` has it);
past that the writer goes ahead and meets SQLite's lock as it would have.

On other databases, and inside a transaction that is already open (a
test's, or a project's around ours: its writer holds the lock already),
it does nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from django.db import DEFAULT_DB_ALIAS, connections

__all__ = ["BACKGROUND_DEFERS", "one_writer", "turn_coming"]

#: Python's ``sqlite3.connect`` timeout when ``OPTIONS`` sets none, in seconds.
SQLITE_TIMEOUT: Final = 5.0
#: The longest a background writer lets the turns waiting go first, in seconds.
BACKGROUND_DEFERS: Final = 1.0


class _Gate:
    """The writers of one database file: one at a time; a turn that waits
    goes before a background writer that waits (for at most
    ``BACKGROUND_DEFERS`` of the background writer's wait)."""

    def __init__(self) -> None:
        self._condition = threading.Condition(threading.Lock())
        self._held = False
        self._turns_waiting = 0

    def acquire(self, timeout: float, *, background: bool) -> bool:
        now = time.monotonic()
        deadline = now + timeout
        defer_until = now + min(BACKGROUND_DEFERS, timeout)
        with self._condition:
            if not background:
                self._turns_waiting += 1
            try:
                while True:
                    now = time.monotonic()
                    turns = self._turns_waiting > 0 or _turns_coming[0] > 0
                    deferring = background and turns and now < defer_until
                    if not self._held and not deferring:
                        self._held = True
                        return True
                    if now >= deadline:
                        return False
                    self._condition.wait((defer_until if deferring else deadline) - now)
            finally:
                if not background:
                    self._turns_waiting -= 1

    def release(self) -> None:
        with self._condition:
            self._held = False
            self._condition.notify_all()

    def wake(self) -> None:
        with self._condition:
            self._condition.notify_all()


_gates: dict[str, _Gate] = {}
_gates_lock = threading.Lock()
#: The turns of this process on their way to their transaction (``turn_coming``).
_turns_coming = [0]


@contextmanager
def turn_coming() -> Iterator[None]:
    """Around a turn's set-up, from its first hop to the end of its
    transaction: a background writer that would take the write lock
    meanwhile lets it go first (for at most ``BACKGROUND_DEFERS``), as it
    does for a turn waiting at the gate. Under a burst of new chats the
    turns' hops queue on one thread, so a turn reaches the gate only once
    the one before it is through, and the log writer's round took the lock
    in between."""
    with _gates_lock:
        _turns_coming[0] += 1
    try:
        yield
    finally:
        with _gates_lock:
            _turns_coming[0] -= 1
            last = _turns_coming[0] == 0
            gates = list(_gates.values()) if last else []
        for gate in gates:
            gate.wake()


@contextmanager
def one_writer(using: str = DEFAULT_DB_ALIAS, *, background: bool = False) -> Iterator[None]:
    """Around a write transaction on ``using`` (the one a ``with
    transaction.atomic():`` inside it opens): on SQLite, in line with the
    process's other such transactions of that database file.
    ``background``: a writer behind the stream (the log writer's rounds,
    the lease renewal), which lets the turns waiting go first."""
    connection = connections[using]
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        yield
        return
    name = str(connection.settings_dict["NAME"])
    gate = _gates.get(name)
    if gate is None:
        with _gates_lock:
            gate = _gates.setdefault(name, _Gate())
    timeout = float(connection.settings_dict.get("OPTIONS", {}).get("timeout", SQLITE_TIMEOUT))
    held = gate.acquire(timeout, background=background)
    try:
        yield
    finally:
        if held:
            gate.release()
