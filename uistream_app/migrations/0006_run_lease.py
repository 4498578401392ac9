"""Leases: a run's process renews ``heartbeat_at``; a running run whose
heartbeat is older than ``LEASE_SECONDS`` is an orphan, settled
``interrupted``."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("uistream_app", "0005_message_client_id"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="heartbeat_at",
            field=models.DateTimeField(
                blank=True,
                help_text="When the process running it last said it lives; older than LEASE_SECONDS: orphaned.",
                null=True,
                verbose_name="heartbeat at",
            ),
        ),
        migrations.AlterField(
            model_name="run",
            name="status",
            field=models.CharField(
                choices=[
                    ("running", "running"),
                    ("completed", "completed"),
                    ("failed", "failed"),
                    ("cancelled", "cancelled"),
                    ("stopped", "stopped"),
                    ("interrupted", "interrupted"),
                ],
                db_index=True,
                default="running",
                max_length=16,
                verbose_name="status",
            ),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["status", "heartbeat_at"], name="uistream_run_lease"),
        ),
    ]
