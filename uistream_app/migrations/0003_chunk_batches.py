"""The chunk log as one row per stored batch (``ChunkBatch``) instead of one
row per chunk (``RunChunk``): existing logs are copied over, a run's
consecutive chunks in rows of at most 1,000, and back again on reversal."""

from typing import Any

import django.db.models.deletion
from django.db import migrations, models

import uistream_app.models

ROW_CHUNKS = 1000


def to_batches(apps: Any, schema_editor: Any) -> None:
    RunChunk = apps.get_model("uistream_app", "RunChunk")
    ChunkBatch = apps.get_model("uistream_app", "ChunkBatch")
    db = schema_editor.connection.alias
    run_ids = RunChunk.objects.using(db).order_by().values_list("run_id", flat=True).distinct()
    for run_id in run_ids.iterator():
        rows = RunChunk.objects.using(db).filter(run_id=run_id).order_by("seq")
        batch: list[Any] = []
        for row in rows.values_list("seq", "offset_ms", "chunk").iterator(chunk_size=ROW_CHUNKS):
            if batch and (len(batch) == ROW_CHUNKS or row[0] != batch[-1][0] + 1):
                _store(ChunkBatch, db, run_id, batch)
                batch = []
            batch.append(row)
        if batch:
            _store(ChunkBatch, db, run_id, batch)


def _store(ChunkBatch: Any, db: str, run_id: Any, batch: list[Any]) -> None:
    ChunkBatch.objects.using(db).create(
        run_id=run_id,
        first_seq=batch[0][0],
        last_seq=batch[-1][0],
        offsets=[offset for _seq, offset, _chunk in batch],
        chunks=[chunk for _seq, _offset, chunk in batch],
    )


def to_rows(apps: Any, schema_editor: Any) -> None:
    RunChunk = apps.get_model("uistream_app", "RunChunk")
    ChunkBatch = apps.get_model("uistream_app", "ChunkBatch")
    db = schema_editor.connection.alias
    for batch in ChunkBatch.objects.using(db).order_by("run_id", "first_seq").iterator(chunk_size=100):
        RunChunk.objects.using(db).bulk_create(
            RunChunk(run_id=batch.run_id, seq=batch.first_seq + i, offset_ms=offset, chunk=chunk)
            for i, (offset, chunk) in enumerate(zip(batch.offsets, batch.chunks, strict=True))
        )


class Migration(migrations.Migration):
    dependencies = [
        ("uistream_app", "0002_run_decisions"),
    ]

    operations = [
        migrations.CreateModel(
            name="ChunkBatch",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "run",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="chunk_batches",
                        to="uistream_app.run",
                        verbose_name="run",
                    ),
                ),
                ("first_seq", models.PositiveIntegerField(verbose_name="first sequence number")),
                ("last_seq", models.PositiveIntegerField(verbose_name="last sequence number")),
                (
                    "offsets",
                    models.JSONField(
                        help_text="Each chunk's milliseconds since the run started.", verbose_name="offsets (ms)"
                    ),
                ),
                (
                    "chunks",
                    models.JSONField(
                        encoder=uistream_app.models.StoredJSONEncoder,
                        help_text="The ai@7 UI message chunks.",
                        verbose_name="chunks",
                    ),
                ),
            ],
            options={
                "verbose_name": "chunk batch",
                "verbose_name_plural": "chunk batches",
                "ordering": ("run_id", "first_seq"),
                "constraints": [
                    models.UniqueConstraint(fields=("run", "first_seq"), name="uistream_chunkbatch_first_seq_unique"),
                    models.CheckConstraint(
                        condition=models.Q(("last_seq__gte", models.F("first_seq"))),
                        name="uistream_chunkbatch_seq_order",
                    ),
                ],
            },
        ),
        migrations.RunPython(to_batches, to_rows, elidable=True),
        migrations.DeleteModel(name="RunChunk"),
    ]
