from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class UIStreamConfig(AppConfig):
    name = "uistream_app"
    label = "uistream_app"
    verbose_name = _("UI streams")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import (
            checks,  # noqa: F401  (registers the system checks)
            conf,  # noqa: F401  (connects the setting_changed reset)
            shutdown,  # noqa: F401  (counts the requests a graceful stop waits for)
        )
