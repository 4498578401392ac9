"""Today's and yesterday's ``OwnerDay`` rows from the runs already stored,
so that the day's storage cap counts, on the day this is migrated, what
was stored before (it summed the day's runs; it reads these rows now)."""

import datetime
import hashlib

from django.db import migrations
from django.db.models import Sum
from django.db.models.functions import TruncDate
from django.utils import timezone


def _row_key(user_pk: object, session_key: str | None) -> str:
    # Owner.row_key_of, as it was written when this migration was.
    if user_pk is not None:
        return f"user:{user_pk}"
    return "session:" + hashlib.sha256((session_key or "").encode()).hexdigest()


def backfill(apps, schema_editor):  # type: ignore[no-untyped-def]
    Run = apps.get_model("uistream_app", "Run")
    OwnerDay = apps.get_model("uistream_app", "OwnerDay")
    tz = timezone.get_current_timezone()
    today = timezone.localtime(timezone.now()).replace(hour=0, minute=0, second=0, microsecond=0)
    since = timezone.make_aware(today.replace(tzinfo=None) - datetime.timedelta(days=1), tz)
    totals = (
        Run.objects.using(schema_editor.connection.alias)
        .filter(started_at__gte=since, stored_bytes__gt=0)
        .annotate(day=TruncDate("started_at", tzinfo=tz))
        .values("conversation__owner_id", "conversation__session_key", "day")
        .annotate(total=Sum("stored_bytes"))
        .order_by()
    )
    rows: dict[tuple[str, datetime.date], int] = {}
    for row in totals:
        key = (_row_key(row["conversation__owner_id"], row["conversation__session_key"]), row["day"])
        rows[key] = rows.get(key, 0) + row["total"]
    OwnerDay.objects.using(schema_editor.connection.alias).bulk_create(
        [OwnerDay(owner_key=owner_key, day=day, stored_bytes=total) for (owner_key, day), total in rows.items()],
        batch_size=500,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("uistream_app", "0019_owner_day"),
    ]

    operations = [
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
    ]
