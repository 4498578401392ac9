"""Timing admin pages in one process (``admin_bench.py``, ``branches_admin.py``):
each page requested through Django's test ``Client``, paired by round."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def measure(pages: list[tuple[str, Callable[[], Any]]], reps: int) -> list[tuple[str, list[float], int, int]]:
    """Each page's times (ms) over ``reps`` rounds of one request per page,
    after a warm-up request each; the body's bytes and the queries of one
    request."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    sizes, counts = [], []
    for _label, get in pages:
        get()
        with CaptureQueriesContext(connection) as queries:
            response = get()
        assert response.status_code == 200, response.status_code
        sizes.append(len(response.content))
        counts.append(len(queries))
    times: list[list[float]] = [[] for _ in pages]
    for _ in range(reps):
        for i, (_label, get) in enumerate(pages):
            started = time.perf_counter()
            response = get()
            times[i].append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, response.status_code
    return [(label, t, size, n) for (label, _get), t, size, n in zip(pages, times, sizes, counts, strict=True)]
