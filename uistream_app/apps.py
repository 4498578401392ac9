from __future__ import annotations

from django.apps import AppConfig
from django.core.signals import request_started
from django.utils.translation import gettext_lazy as _

from .conf import settings as uistream_settings  # (its import connects the setting_changed reset)


class UIStreamConfig(AppConfig):
    name = "uistream_app"
    label = "uistream_app"
    verbose_name = _("UI streams")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported once the app registry is ready: they import the models.
        from . import (
            checks,  # noqa: F401  (registers the system checks)
        )
        from .lifecycle import (
            caps,  # noqa: F401  (a deleted run gives its stored bytes back to its owner's day)
            continuation,  # noqa: F401  (it tells the sweeper how to continue a run)
            shutdown,  # noqa: F401  (counts the requests a graceful stop waits for)
        )
        from .lifecycle.leases import ensure_renewer

        # A serving process renews its runs' leases and sweeps orphans
        # from its first request on (not in manage.py commands).
        request_started.connect(ensure_renewer, dispatch_uid="uistream_app.sweeper")
        # And starts its MCP servers (UISTREAM["MCP_SERVERS"]) in the
        # background, so the first chat finds their tools listed.
        request_started.connect(_warm_up_mcp, dispatch_uid="uistream_app.mcp")


def _warm_up_mcp(**kwargs: object) -> None:
    if uistream_settings.MCP_SERVERS:  # lifecycle/mcp.py is imported only where it is used
        from .lifecycle.mcp import warm_up

        warm_up()
