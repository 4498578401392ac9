"""``uistream_sweep``: settle the orphaned runs now.

A ``running`` run whose heartbeat is older than ``UISTREAM["LEASE_SECONDS"]``
lost its process; every serving process settles such runs by itself (at
its start and every ``LEASE_SECONDS``), this command does it by hand: each
is stored ``interrupted``, its log completed and closed with an ``error``
chunk, its message rebuilt (docs/operations.md, "Leases and the sweeper").
Prints one line per settled run.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand

from ...lifecycle.leases import sweep


class Command(BaseCommand):
    help = "Settle running runs whose process died (heartbeat older than LEASE_SECONDS) as interrupted."

    def handle(self, *args: Any, **options: Any) -> None:
        settled = async_to_sync(sweep)()
        for run in settled:
            self.stdout.write(
                f"{run.run_id} (conversation {run.conversation_id}): interrupted, {run.chunk_count} chunks logged, "
                f"{run.recovered} recovered from the broker"
            )
        self.stdout.write(f"{len(settled)} orphaned run{'' if len(settled) == 1 else 's'} settled.")
