"""Settings for the test suite: the demo's settings on a throwaway database.

``DATABASE_URL`` switches the suite to PostgreSQL (CI runs both).
"""

import os

from demo_project.settings import *  # noqa: F403

SECRET_KEY = "uistream-tests"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
if not os.environ.get("DATABASE_URL"):
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
LOGGING = {"version": 1, "disable_existing_loggers": False}
