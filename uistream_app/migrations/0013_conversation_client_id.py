"""Chat ids are the client's, unique within one owner's conversations: the
primary key becomes the server's (new rows get a random one), and the
client's chat id moves to ``client_id``. An existing row keeps its key (so
every foreign key to it stays valid) and gets its old id as its chat id,
under which its owner keeps finding it."""

from django.conf import settings
from django.db import migrations, models
from django.db.models import F

import uistream_app.models


def chat_ids_from_keys(apps, schema_editor):  # type: ignore[no-untyped-def]
    Conversation = apps.get_model("uistream_app", "Conversation")
    Conversation.objects.using(schema_editor.connection.alias).update(client_id=F("id"))


class Migration(migrations.Migration):
    dependencies = [
        ("uistream_app", "0012_run_stored_bytes"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="client_id",
            field=models.CharField(
                blank=True,
                db_index=True,
                help_text="The client's chat id (useChat's id, AG-UI's threadId): unique among its owner's conversations. Left empty, it is set to the primary key when the row is saved.",
                max_length=128,
                verbose_name="chat id",
            ),
        ),
        migrations.RunPython(chat_ids_from_keys, migrations.RunPython.noop, elidable=True),
        migrations.AlterField(
            model_name="conversation",
            name="id",
            field=models.CharField(
                default=uistream_app.models.new_conversation_key,
                help_text="The server's key of the conversation; clients know it by its chat id.",
                max_length=128,
                primary_key=True,
                serialize=False,
                verbose_name="id",
            ),
        ),
        migrations.AddConstraint(
            model_name="conversation",
            constraint=models.UniqueConstraint(
                condition=models.Q(("owner__isnull", False)),
                fields=("owner", "client_id"),
                name="uistream_conv_user_client_id_unique",
            ),
        ),
        migrations.AddConstraint(
            model_name="conversation",
            constraint=models.UniqueConstraint(
                condition=models.Q(("owner__isnull", True)),
                fields=("session_key", "client_id"),
                name="uistream_conv_session_client_id_unique",
            ),
        ),
    ]
