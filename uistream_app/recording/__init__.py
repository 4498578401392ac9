"""The chunk log: every chunk a run's client was sent, stored in batches
behind the stream, and the assistant message built from it.

``RunRecorder`` (recorder.py) records one run; ``LogWriter`` (log_writer.py)
writes every recorder's batches; ``iter_log``, ``read_log`` and
``load_log`` (log_reader.py) read a stored log back. How they fit and the rules
they keep: docs/recording.md, "The chunk log".
"""

from __future__ import annotations

from .log_reader import LogEntry, iter_log, last_offset_ms, load_log, read_log
from .log_writer import MAX_ROW_CHUNKS, WRITER_EXECUTOR, LeaseLost, LogWriter, log_writes_inline, write_log
from .one_writer import one_writer
from .recorder import CURRENT_RECORDER, FINAL_STATUSES, FLUSH_AT, STARTED_CALLS, RunRecorder

__all__ = [
    "CURRENT_RECORDER",
    "FINAL_STATUSES",
    "FLUSH_AT",
    "MAX_ROW_CHUNKS",
    "STARTED_CALLS",
    "WRITER_EXECUTOR",
    "LeaseLost",
    "LogEntry",
    "LogWriter",
    "RunRecorder",
    "iter_log",
    "last_offset_ms",
    "load_log",
    "log_writes_inline",
    "one_writer",
    "read_log",
    "write_log",
]
