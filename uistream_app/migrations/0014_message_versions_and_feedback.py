"""Every attempt is kept: messages form a tree (``Message.parent_key``)
whose current branch is the rows with ``current`` set, and an assistant
message may carry its owner's ``Feedback``. An existing message's parent
is the one before it in its conversation; every existing row is on the
current branch."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models
from django.db.models.functions import Coalesce


def parents_from_positions(apps, schema_editor):  # type: ignore[no-untyped-def]
    Message = apps.get_model("uistream_app", "Message")
    before = Message.objects.filter(
        conversation_id=models.OuterRef("conversation_id"), position=models.OuterRef("position") - 1
    ).values("pk")[:1]
    Message.objects.using(schema_editor.connection.alias).filter(position__gt=0).update(
        parent_key=Coalesce(models.Subquery(before), models.Value(""))
    )


class Migration(migrations.Migration):
    dependencies = [
        ("uistream_app", "0013_conversation_client_id"),
    ]

    operations = [
        migrations.CreateModel(
            name="Feedback",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "rating",
                    models.CharField(choices=[("up", "up"), ("down", "down")], max_length=8, verbose_name="rating"),
                ),
                ("reason", models.CharField(blank=True, max_length=64, verbose_name="reason")),
                ("comment", models.TextField(blank=True, verbose_name="comment")),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now, verbose_name="created at")),
                ("updated_at", models.DateTimeField(auto_now=True, verbose_name="updated at")),
            ],
            options={
                "verbose_name": "feedback",
                "verbose_name_plural": "feedback",
                "ordering": ("-updated_at",),
            },
        ),
        migrations.RemoveConstraint(
            model_name="message",
            name="uistream_message_position_unique",
        ),
        migrations.RemoveConstraint(
            model_name="message",
            name="uistream_message_client_id_unique",
        ),
        migrations.AddField(
            model_name="message",
            name="current",
            field=models.BooleanField(
                default=True,
                help_text="Part of the conversation's current branch: loaded by clients and sent to the model.",
                verbose_name="on the current branch",
            ),
        ),
        migrations.AddField(
            model_name="message",
            name="parent_key",
            field=models.CharField(
                blank=True,
                default="",
                help_text="The key of the message before this one on its branch (empty for a conversation's first). A plain key, not a foreign key: a branch a thousand messages long would cascade a thousand levels deep.",
                max_length=128,
                verbose_name="parent",
            ),
        ),
        migrations.AddField(
            model_name="message",
            name="selected_at",
            field=models.DateTimeField(
                default=django.utils.timezone.now,
                help_text="When the message last joined the current branch; switching to an older version follows, below it, the replies most recently selected.",
                verbose_name="selected at",
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="span_id",
            field=models.CharField(
                blank=True,
                help_text="The run's own span in that trace (16 hex digits): what feedback on its answer is sent under.",
                max_length=16,
                verbose_name="span id",
            ),
        ),
        migrations.RunPython(parents_from_positions, migrations.RunPython.noop, elidable=True),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(fields=["conversation", "position"], name="uistream_message_versions"),
        ),
        migrations.AddConstraint(
            model_name="message",
            constraint=models.UniqueConstraint(
                condition=models.Q(("current", True)),
                fields=("conversation", "position"),
                name="uistream_message_current_position_unique",
            ),
        ),
        migrations.AddConstraint(
            model_name="message",
            constraint=models.UniqueConstraint(
                condition=models.Q(("current", True), models.Q(("client_id", ""), _negated=True)),
                fields=("conversation", "client_id"),
                name="uistream_message_current_client_id_unique",
            ),
        ),
        migrations.AddField(
            model_name="feedback",
            name="message",
            field=models.OneToOneField(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="feedback",
                to="uistream_app.message",
                verbose_name="message",
            ),
        ),
        migrations.AddField(
            model_name="feedback",
            name="run",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="feedback",
                to="uistream_app.run",
                verbose_name="run",
            ),
        ),
        migrations.AddIndex(
            model_name="feedback",
            index=models.Index(fields=["rating", "-updated_at"], name="uistream_feedback_rating"),
        ),
    ]
