"""The garbage collector's time in a server process, for ``ws_bench.py
--gc-stats``: the settings module of the benchmark's server calls
``install(path)``, and the benchmark reads ``path`` (JSON, rewritten every
0.2 s) before and after the load."""

from __future__ import annotations

import gc
import json
import os
import threading
import time
from typing import Any

_started = 0.0
#: Per generation: collections, seconds, the longest in seconds.
_stats: dict[str, list[float]] = {"count": [0, 0, 0], "seconds": [0.0, 0.0, 0.0], "longest": [0.0, 0.0, 0.0]}


def _callback(phase: str, info: dict[str, Any]) -> None:
    global _started
    if phase == "start":
        _started = time.perf_counter()
        return
    took = time.perf_counter() - _started
    generation = info["generation"]
    _stats["count"][generation] += 1
    _stats["seconds"][generation] += took
    _stats["longest"][generation] = max(_stats["longest"][generation], took)


def _dump(path: str) -> None:
    while True:
        time.sleep(0.2)
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w") as out:
            json.dump(_stats, out)
        os.replace(tmp, path)


def install(path: str) -> None:
    """Time every collection of this process and write the totals to ``path``."""
    gc.callbacks.append(_callback)
    threading.Thread(target=_dump, args=(path,), name="gc-probe", daemon=True).start()


def read(path: str) -> dict[str, list[float]]:
    """The totals ``install`` wrote (zeros before the first write)."""
    try:
        with open(path) as source:
            return json.load(source)  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return {"count": [0, 0, 0], "seconds": [0.0, 0.0, 0.0], "longest": [0.0, 0.0, 0.0]}
