"""Fenced leases: ``Run.lease_epoch``, the fencing token each claimant of a
run takes (docs/operations.md, "Leases and the sweeper"); runs that exist
already hold epoch 1, the one their starting process holds. And
``Run.turn``, what a process continuing a run whose own died needs."""

from django.db import migrations, models

import uistream_app.models


class Migration(migrations.Migration):
    dependencies = [
        ("uistream_app", "0014_message_versions_and_feedback"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="turn",
            field=models.JSONField(
                blank=True,
                encoder=uistream_app.models.StoredJSONEncoder,
                help_text=(
                    "What a process that continues this run after its own died needs besides the rows: the "
                    "endpoint's hooks class, the turn's kind and extra keys, its transport, the checked answers "
                    "(ON_OWNER_LOST)."
                ),
                null=True,
                verbose_name="turn",
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="lease_epoch",
            field=models.PositiveIntegerField(
                default=1,
                help_text=(
                    "The fencing token of the run's lease: taken (raised by one) by each process that claims the "
                    "run, the one that starts it first; the log, the message and the outcome are written only under "
                    "the epoch their writer holds."
                ),
                verbose_name="lease epoch",
            ),
        ),
    ]
