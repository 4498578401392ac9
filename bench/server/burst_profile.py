"""Where a burst's CPU goes, per delta, server by server (issue 29).

    python bench/server/burst_profile.py RESULTS_DIR

``run_servers.sh`` with ``PROFILE=1`` has ``load.py`` record each Django
server (uistream on daphne and on uvicorn, django-stored) under
``py-spy record --gil`` for the whole of each run, and prints this table
after its own. Each profile (``<target>.c<C>.r<round>.prof``, raw: one
stack a line, root first, then a count) is sorted into rows by the first
rule its stack matches (``ROWS``), and each row's share is multiplied by
that run's own CPU per delta (``cpu_us_per_text_delta`` of its JSON: the
server's CPU for the whole run over its text deltas, as the benchmark's
table has it), so the rows of a server add up to its CPU per delta. The
rows say whose code the time is spent in: the ASGI server's own (daphne
and Twisted, or uvicorn and h11), Django's, asgiref's hops, the event
loop's, uistream's rooms.

py-spy pauses the server for each sample, so a profiled run's timings
(first delta, gaps) are not the benchmark's; its CPU per delta is close to
an unprofiled run's (py-spy's own CPU is its own process's). Rounds of one
target and C are summed before the shares are taken.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/: profile_rows

from profile_rows import (
    WRAPPERS,
    Frame,
    calls,
    innermost,
    innermost_ours,
    innermost_under,
    raw_stacks,
    under,
)

_DAPHNE = ("daphne/", "twisted/", "autobahn/", "txaio/", "zope/", "incremental/")
_UVICORN = ("uvicorn/", "h11/", "httptools/")


def _any_under(*parts: str) -> Callable[[list[Frame]], bool]:
    return lambda stack: any(under(file, *parts) for _, file in stack)


#: (row, rule): a sample goes to the first row whose rule its stack matches.
ROWS: list[tuple[str, Callable[[list[Frame]], bool]]] = [
    ("Django's ORM and SQLite (turns, log, session; every thread)", _any_under("django/db/")),
    ("thread hops: asgiref, the lanes", innermost_under("asgiref/", "uistream_app/lifecycle/threads.py")),
    ("the server: daphne, Twisted, autobahn", innermost_under(*_DAPHNE)),
    ("the server: uvicorn, h11", innermost_under(*_UVICORN)),
    ("the demo's model (its deltas, its pacing's timers)", innermost_under("demo_project/")),
    ("uistream: the run (tool loop, encoder, recorder, broker)", calls("execute_run")),
    ("uistream: the log writer (less its SQL)", calls("_write_jobs", "LogWriter._run")),
    ("uistream: the response (subscription, rendering)", calls("render_subscription")),
    ("uistream: the set-up (view, pipeline, hooks, runner, store)", innermost_ours),
    ("uistream: the request's wrappers (lanes, body limits, middleware)", innermost_under(*WRAPPERS)),
    ("django-stored's view", innermost_under("django_stored.py", "stored_chat.py")),
    ("Django's request path: handler, middleware, session, CSRF, response", innermost_under("django/")),
    ("the event loop: asyncio's callbacks, timers, select", lambda stack: innermost(stack) == ""),
    ("the rest (other libraries, the GIL's waits)", lambda stack: True),
]


def _callback(frames: list[Frame]) -> list[Frame]:
    """On the event loop's thread, the frames of the callback it runs (a
    task's step, a protocol's ``data_received``, Twisted's reads and
    writes): those above the last ``Handle._run``. None above it, or none
    at all (``select``, the loop's own bookkeeping): an empty stack, the
    event loop's own. Other threads' stacks are whole."""
    runs = [i for i, (function, _) in enumerate(frames) if function == "Handle._run"]
    if runs:
        return frames[runs[-1] + 1 :]
    if any(function == "BaseEventLoop._run_once" for function, _ in frames):
        return []
    return frames


def read_profile(path: Path) -> Iterator[tuple[list[Frame], int]]:
    """The stacks of a raw py-spy profile (each cut to its callback on the
    event loop's thread) and their counts, less imports'."""
    for frames, count in raw_stacks(path):
        if not any(function == "_find_and_load" for function, _ in frames):
            yield _callback(frames), count


def rows_of(paths: list[Path]) -> dict[str, int]:
    counts = dict.fromkeys((row for row, _ in ROWS), 0)
    for path in paths:
        for frames, count in read_profile(path):
            for row, rule in ROWS:
                if rule(frames):
                    counts[row] += count
                    break
    return counts


def table(results: Path) -> str:
    runs: dict[tuple[str, int], list[tuple[Path, dict]]] = defaultdict(list)
    for prof in sorted(results.glob("*.prof")):
        match = re.fullmatch(r"(.+)\.c(\d+)\.r(\d+)\.prof", prof.name)
        result = prof.with_suffix(".json")
        if match is None or not result.exists():
            continue
        runs[(match[1], int(match[2]))].append((prof, json.loads(result.read_text())))
    if not runs:
        return f"no profiles in {results} (run_servers.sh with PROFILE=1)"
    columns = sorted(runs, key=lambda key: (key[1], key[0]))
    per_delta: dict[tuple[str, int], float] = {}
    shares: dict[tuple[str, int], dict[str, float]] = {}
    for key in columns:
        counts = rows_of([prof for prof, _ in runs[key]])
        total = sum(counts.values()) or 1
        shares[key] = {row: count / total for row, count in counts.items()}
        cpus = sorted(r["cpu_us_per_text_delta"] for _, r in runs[key])
        per_delta[key] = cpus[len(cpus) // 2]
    head = "| µs per delta (share) | " + " | ".join(f"{t} C={c}" for t, c in columns) + " |"
    lines = [head, "|---|" + "---:|" * len(columns)]
    for row, _ in ROWS:
        if not any(shares[key][row] for key in columns):
            continue
        cells = [
            f"{shares[key][row] * per_delta[key]:.1f} ({shares[key][row]:.0%})" if shares[key][row] else "–"
            for key in columns
        ]
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    totals = " | ".join(f"{per_delta[key]:.1f}" for key in columns)
    lines.append(f"| all (the runs' CPU per delta, median) | {totals} |")
    rounds = ", ".join(f"{t} C={c}: {len(runs[(t, c)])}" for t, c in columns)
    return "\n".join(lines) + f"\n\nprofiled runs: {rounds}\n"


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n\n")[1])
    print(table(Path(sys.argv[1])))


if __name__ == "__main__":
    main()
