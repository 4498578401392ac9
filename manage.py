#!/usr/bin/env python
"""Django's command-line utility for the uistream demo project."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo_project.settings")
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        if settings.configured:
            raise
        # The settings module refused to load (demo_project/settings.py:
        # DJANGO_DEBUG=0 without DJANGO_SECRET_KEY): its message says what
        # to set, and the traceback would only bury it under Django's frames.
        sys.exit(f"ImproperlyConfigured: {exc}")


if __name__ == "__main__":
    main()
