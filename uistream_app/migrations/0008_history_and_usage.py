"""What a run's model was sent (``Run.history``) and the stored summary of
a conversation's older turns (``Conversation.history_summary``)."""

from django.db import migrations, models

import uistream_app.models


class Migration(migrations.Migration):
    dependencies = [("uistream_app", "0007_run_agent_state")]

    operations = [
        migrations.AddField(
            model_name="run",
            name="history",
            field=models.JSONField(
                blank=True,
                encoder=uistream_app.models.StoredJSONEncoder,
                help_text=(
                    "What the model was sent as the conversation: the strategy, the stored messages it kept, "
                    "the summary of older turns, the estimated tokens (uistream_app.history)."
                ),
                null=True,
                verbose_name="history sent",
            ),
        ),
        migrations.AddField(
            model_name="conversation",
            name="history_summary",
            field=models.JSONField(
                blank=True,
                encoder=uistream_app.models.StoredJSONEncoder,
                help_text=(
                    "The summary of older turns the model is sent instead of them (SummarizeOlder): its text, "
                    "the last message it covers, the model that wrote it."
                ),
                null=True,
                verbose_name="history summary",
            ),
        ),
    ]
