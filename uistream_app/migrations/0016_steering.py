"""Messages sent to a run while it runs (``SteeringMessage``): what was sent
and its outcome, one per id and chat."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

import uistream_app.models


class Migration(migrations.Migration):
    dependencies = [
        ("uistream_app", "0015_live_run"),
    ]

    operations = [
        migrations.CreateModel(
            name="SteeringMessage",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("client_id", models.CharField(max_length=128, verbose_name="id")),
                (
                    "kind",
                    models.CharField(
                        choices=[("steer", "steer"), ("queue", "queue")], max_length=8, verbose_name="kind"
                    ),
                ),
                ("message", models.JSONField(encoder=uistream_app.models.StoredJSONEncoder, verbose_name="message")),
                ("outcome", models.JSONField(blank=True, null=True, verbose_name="outcome")),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now, verbose_name="created at")),
                ("resolved_at", models.DateTimeField(blank=True, null=True, verbose_name="resolved at")),
                (
                    "conversation",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="steering_messages",
                        to="uistream_app.conversation",
                        verbose_name="conversation",
                    ),
                ),
                (
                    "run",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="steering_messages",
                        to="uistream_app.run",
                        verbose_name="run",
                    ),
                ),
            ],
            options={
                "verbose_name": "steering message",
                "verbose_name_plural": "steering messages",
                "ordering": ("created_at",),
                "constraints": [
                    models.UniqueConstraint(fields=("conversation", "client_id"), name="uistream_steering_unique_id")
                ],
            },
        ),
    ]
