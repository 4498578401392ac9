"""Message ids are the client's, unique within a conversation: a message
whose id another conversation holds is stored under a key of the server's,
with the client's id in ``client_id``."""

from django.db import migrations, models
from django.db.models import Q


class Migration(migrations.Migration):
    dependencies = [("uistream_app", "0004_admin_indexes")]

    operations = [
        migrations.AddField(
            model_name="message",
            name="client_id",
            field=models.CharField(
                blank=True,
                default="",
                help_text="The id the client gave the message, when it differs from the primary key: message ids are the client's, unique within a conversation, and one another conversation already holds is stored under a key of the server's.",
                max_length=128,
                verbose_name="client id",
            ),
        ),
        migrations.AddConstraint(
            model_name="message",
            constraint=models.UniqueConstraint(
                condition=~Q(client_id=""),
                fields=("conversation", "client_id"),
                name="uistream_message_client_id_unique",
            ),
        ),
    ]
