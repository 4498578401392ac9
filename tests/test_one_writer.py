"""uistream's write transactions on SQLite take turns on a gate of the
process (``recording.one_writer``) instead of sleeping in SQLite's busy
handler: the next writer starts when the one before it ends, not at its
busy handler's next try, and a turn goes before the log writer."""

from __future__ import annotations

import sys
import threading
from typing import Any

import pytest
from django.db import connection, connections, transaction

from uistream_app.models import Conversation
from uistream_app.recording import one_writer

pytestmark = pytest.mark.django_db(transaction=True)


def _waits_in_one_writer(thread: threading.Thread) -> bool:
    """Whether ``thread`` waits in ``one_writer`` for the gate."""
    frame = sys._current_frames().get(thread.ident or 0)
    while frame is not None:
        if frame.f_code.co_name == "acquire" and frame.f_code.co_filename.endswith("one_writer.py"):
            return True
        frame = frame.f_back
    return False


def _until(condition: Any, what: str) -> None:
    """Wait for ``condition()`` (another thread's state), at most 10 s."""
    done = threading.Event()
    for _ in range(1000):
        if condition():
            return
        done.wait(0.01)
    raise AssertionError(f"waited 10 s for {what}")


@pytest.fixture
def sqlite() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the lock is SQLite's; other databases let writers through at once")


def _writer(name: str, order: list[str], entered: threading.Event, release: threading.Event) -> None:
    try:
        with one_writer(), transaction.atomic():
            order.append(f"{name} in")
            Conversation.objects.create(client_id=name, title=name)
            entered.set()
            release.wait(10)
            order.append(f"{name} out")
    finally:
        connections.close_all()


def test_a_writer_waits_for_the_one_before_it_and_starts_when_it_ends(sqlite: None) -> None:
    order: list[str] = []
    first_in, second_in, release_first, release_second = (threading.Event() for _ in range(4))
    first = threading.Thread(target=_writer, args=("first", order, first_in, release_first))
    second = threading.Thread(target=_writer, args=("second", order, second_in, release_second))
    first.start()
    assert first_in.wait(10)
    second.start()
    _until(lambda: _waits_in_one_writer(second), "the second writer to wait for the first")
    assert order == ["first in"]
    release_first.set()
    assert second_in.wait(10)
    release_second.set()
    first.join(10)
    second.join(10)
    assert order == ["first in", "first out", "second in", "second out"]
    assert sorted(Conversation.objects.values_list("client_id", flat=True)) == ["first", "second"]


def test_a_turn_that_waits_goes_before_the_log_writer(sqlite: None) -> None:
    """The log is written behind the stream; a turn's first delta waits
    for its transaction."""
    order: list[str] = []
    release = threading.Event()
    holder = _holder(threading.Event(), release)

    def write(name: str, background: bool) -> None:
        with one_writer(background=background):
            order.append(name)

    log_writer = threading.Thread(target=write, args=("log writer", True))
    turn = threading.Thread(target=write, args=("turn", False))
    log_writer.start()
    _until(lambda: _waits_in_one_writer(log_writer), "the log writer to wait")
    turn.start()
    _until(lambda: _waits_in_one_writer(turn), "the turn to wait")
    release.set()
    for thread in (holder, log_writer, turn):
        thread.join(10)
    assert order == ["turn", "log writer"]


def _holder(held: threading.Event, release: threading.Event) -> threading.Thread:
    """A thread of the process that holds the lock until ``release``."""

    def hold() -> None:
        with one_writer():
            held.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(10)
    return thread


def _long_timeout(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    settings_dict = connections["default"].settings_dict
    monkeypatch.setitem(settings_dict, "OPTIONS", {**settings_dict.get("OPTIONS", {}), "timeout": seconds})


def _through(work: Any) -> bool:
    """Whether ``work`` (on a thread of its own) is done within 10 s."""
    done = threading.Event()

    def run() -> None:
        try:
            work()
            done.set()
        finally:
            connections.close_all()

    threading.Thread(target=run).start()
    return done.wait(10)


def test_inside_an_open_transaction_it_does_not_wait(sqlite: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A project's transaction around ours: its writer may hold SQLite's
    lock already, so waiting for the process's lock could only deadlock."""
    _long_timeout(monkeypatch, 60)
    release = threading.Event()
    holder = _holder(threading.Event(), release)

    def nested() -> None:
        with transaction.atomic(), one_writer():
            assert connection.in_atomic_block

    try:
        assert _through(nested)
    finally:
        release.set()
        holder.join(10)


def test_past_the_connections_timeout_the_writer_goes_ahead(sqlite: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lock is waited for at most the connection's own ``timeout``: then
    the writer goes on to SQLite's lock, as it would without the gate."""
    _long_timeout(monkeypatch, 0.2)
    release = threading.Event()
    holder = _holder(threading.Event(), release)

    def late() -> None:
        with one_writer():
            assert not release.is_set()  # through while the holder still holds the lock

    try:
        assert _through(late)
    finally:
        release.set()
        holder.join(10)
