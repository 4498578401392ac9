"""Shared by the uistream commands: finding a run, writing bytes."""

from __future__ import annotations

import uuid

from django.core.management.base import CommandError, OutputWrapper

from ...models import Run

#: The shortest id prefix a command accepts (the admin shows 8 characters).
MIN_PREFIX = 6


def find_run(value: str) -> Run:
    """The run with id ``value``, or the only run whose id starts with it
    (at least ``MIN_PREFIX`` hex digits, as the admin lists them)."""
    text = value.strip().lower()
    try:
        run_id = uuid.UUID(text)
    except ValueError:
        run_id = None
    if run_id is not None:
        run = Run.objects.filter(pk=run_id).first()
        if run is None:
            raise CommandError(f"no run {run_id}")
        return run
    digits = text.replace("-", "")
    if not MIN_PREFIX <= len(digits) < 32 or any(c not in "0123456789abcdef" for c in digits):
        raise CommandError(f"{value!r} is neither a run id nor a prefix of one ({MIN_PREFIX}+ hex digits)")
    # The ids starting with the prefix are one range, whether the column
    # is a native uuid (compared bytewise) or 32 hex digits (as text).
    low, high = uuid.UUID(digits.ljust(32, "0")), uuid.UUID(digits.ljust(32, "f"))
    matches = list(Run.objects.filter(pk__gte=low, pk__lte=high).order_by("pk")[:2])
    if len(matches) > 1:
        raise CommandError(f"{value!r} matches more than one run; give more of the id")
    if not matches:
        raise CommandError(f"no run id starts with {value!r}")
    return matches[0]


def write_bytes(stdout: OutputWrapper, data: bytes) -> None:
    """``data`` as it is when the output is a real file (UTF-8 whatever the
    locale); decoded for a text-only stream (``call_command(stdout=...)``)."""
    buffer = getattr(stdout, "buffer", None)
    if buffer is not None:
        buffer.write(data)
        buffer.flush()
    else:
        stdout.write(data.decode("utf-8"), ending="")
