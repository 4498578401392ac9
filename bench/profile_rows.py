"""Where a request's CPU goes, by who does the work: Django's own, or
uistream's (issue 29).

A py-spy ``--gil`` profile in its raw format (one stack a line, root first,
``function (file:line)`` frames joined by ``;``, then a space and a count)
sorted into rows by the first rule that its stack matches (``ROWS``):

* **Django's ORM and the database**, split by whose rows: the chat's (the
  turn's transaction, the log writer's, the stored floor's) or the
  request's own (the session, the user);
* **thread hops**: asgiref's ``sync_to_async`` and the lanes;
* **uistream**, by room: the run, the log writer, the response, the set-up;
* **the stored floor's view** (``bench/stored_chat.py`` and the view);
* **Django's request path**: its handler, middleware, session, CSRF, URL
  resolving, the streaming response;
* the rest: the event loop and the benchmark's client.

Samples of imports and of the benchmark's set-up are left out. The rows
are what ``bench/request_floor.py --profile`` prints, as shares and as CPU
per request, for the stored floor and the chat side by side: the
difference is uistream's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

__all__ = [
    "ROWS",
    "WRAPPERS",
    "Frame",
    "calls",
    "classify",
    "frames_of",
    "innermost",
    "innermost_ours",
    "innermost_under",
    "raw_stacks",
    "read_profile",
    "under",
]

#: A frame: (function, file as py-spy names it: relative to its
#: ``site-packages`` or ``sys.path`` entry, e.g. ``django/db/models/query.py``).
Frame = tuple[str, str]

#: Ours, but around every request (the floor's too): the demo's ASGI
#: wrappers and the middleware adapter.
WRAPPERS = ("uistream_app/lifecycle/threads.py", "uistream_app/transport/body_limits.py", "uistream_app/middleware.py")


def under(file: str, *parts: str) -> bool:
    """Whether ``file`` is in one of ``parts`` (a folder ``x/`` or a file)."""
    return any(file.startswith(part) or f"/{part}" in file for part in parts)


def _stdlib(file: str) -> bool:
    return file.startswith("<") or file.split("/")[0].removesuffix(".py") in sys.stdlib_module_names


def _ours(file: str) -> bool:
    return under(file, "uistream_app/", "demo_project/") and not under(file, *WRAPPERS)


def innermost(stack: list[Frame]) -> str:
    """The file of the innermost frame that is not the standard library's."""
    for _, file in reversed(stack):
        if not _stdlib(file):
            return file
    return ""


def _rows_of_the_chat(stack: list[Frame]) -> bool:
    files = [file for _, file in stack]
    return any(under(f, "django/db/") for f in files) and any(_ours(f) or under(f, "stored_chat.py") for f in files)


def _orm(stack: list[Frame]) -> bool:
    return any(under(file, "django/db/") for _, file in stack)


def _session_or_user(stack: list[Frame]) -> bool:
    return _orm(stack) and any(under(file, "django/contrib/sessions/", "django/contrib/auth/") for _, file in stack)


def calls(*names: str) -> Callable[[list[Frame]], bool]:
    return lambda stack: any(function in names for function, _ in stack)


def innermost_under(*parts: str) -> Callable[[list[Frame]], bool]:
    return lambda stack: under(innermost(stack), *parts)


def innermost_ours(stack: list[Frame]) -> bool:
    return _ours(innermost(stack))


def _stored_floor(stack: list[Frame]) -> bool:
    function, file = next(
        ((f, p) for f, p in reversed(stack) if under(p, "request_floor.py", "stored_chat.py")), ("", "")
    )
    return under(file, "stored_chat.py") or "stored_floor" in function


#: (row, rule): a sample goes to the first row whose rule its stack matches.
ROWS: list[tuple[str, Callable[[list[Frame]], bool]]] = [
    ("Django's ORM and the database: the session, the user", _session_or_user),
    ("Django's ORM and the database: the chat's rows", _rows_of_the_chat),
    ("Django's ORM and the database: Django's async queries (the session's)", _orm),
    ("thread hops: asgiref, the lanes", innermost_under("asgiref/", "uistream_app/lifecycle/threads.py")),
    ("uistream: the run (model, tool loop, encoder, recorder, broker)", calls("execute_run")),
    ("uistream: the log writer", calls("_write_jobs", "LogWriter._run")),
    ("uistream: the response (subscription, rendering)", calls("render_subscription")),
    ("uistream: the set-up (view, pipeline, hooks, runner, store)", innermost_ours),
    ("uistream: the request's wrappers (lanes, body limits, middleware)", innermost_under(*WRAPPERS)),
    ("the stored floor's view", _stored_floor),
    ("Django's request path: handler, middleware, session, CSRF, response", innermost_under("django/")),
    ("the rest: the event loop, libraries, the client", lambda stack: True),
]


def frames_of(stack: str) -> list[Frame]:
    """A raw profile's stack, root first, as frames."""
    frames = []
    for frame in stack.split(";"):
        function, _, where = frame.partition(" (")
        frames.append((function, where.rpartition(":")[0]))
    return frames


def raw_stacks(path: str | Path) -> Iterator[tuple[list[Frame], int]]:
    """Every stack of a raw py-spy profile (one a line, root first, then a
    space and a count) and its count."""
    for line in Path(path).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack:
            yield frames_of(stack), int(count)


def read_profile(path: str | Path) -> Iterable[tuple[list[Frame], int]]:
    """The stacks of a raw py-spy profile and their counts, less the
    imports' and the set-up's."""
    for frames, count in raw_stacks(path):
        if not any(function in ("_find_and_load", "_setup", "_install_floor") for function, _ in frames):
            yield frames, count


def classify(path: str | Path) -> dict[str, float]:
    """Each row's share of the profile's samples (0 to 1), in ``ROWS`` order."""
    counts = dict.fromkeys((row for row, _ in ROWS), 0)
    total = 0
    for frames, count in read_profile(path):
        for row, rule in ROWS:
            if rule(frames):
                counts[row] += count
                break
        total += count
    return {row: count / total if total else 0.0 for row, count in counts.items()}
