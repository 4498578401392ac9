"""Settings for the test suite: the demo's settings on a throwaway database.

``DATABASE_URL`` switches the suite to PostgreSQL (CI runs both).
"""

import os
import tempfile

# The suite runs on the offline demo model whatever the shell holds: the
# demo would pick a real provider from these (and the servers the tests
# start inherit this process's environment).
for _name in (
    "OPENAI_MODEL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_MODEL",
):
    os.environ.pop(_name, None)

from demo_project.settings import *  # noqa: E402, F403

SECRET_KEY = "uistream-tests"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
if not os.environ.get("DATABASE_URL"):
    # A file, not memory: the streaming tests' server thread (and, for the
    # multi-process tests, a second server process) share it.
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": ":memory:",
            "TEST": {"NAME": os.path.join(tempfile.gettempdir(), f"uistream-test-{os.getpid()}.sqlite3")},
            "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"},
        }
    }
# The suite's own processes keep Django's default, a connection per request
# (the demo's servers that tests start as processes keep the demo's
# persistent ones): the threads of the in-process test servers would
# otherwise hold connections that PostgreSQL counts against dropping the
# test database.
DATABASES["default"]["CONN_MAX_AGE"] = 0
LOGGING = {"version": 1, "disable_existing_loggers": False}

ROOT_URLCONF = "tests.urls"

# Attachments go to a directory of this run (the servers it starts inherit
# the variable, so they share it).
# (Made only when the variable is unset: every server process reads these
# settings too.)
if not os.environ.get("UISTREAM_MEDIA_ROOT"):
    os.environ["UISTREAM_MEDIA_ROOT"] = tempfile.mkdtemp(prefix="uistream-media-")
MEDIA_ROOT = os.environ["UISTREAM_MEDIA_ROOT"]

# The suite exercises the log writer as servers run it (its own thread and
# connection; tests are transactional where they write). The "auto" default,
# inline inside a TestCase's transaction, has tests of its own
# (test_in_django_testcase).
UISTREAM = {**UISTREAM, "LOG_WRITER": "thread"}  # noqa: F405
# The demo's MCP server is started only by the tests that use it (tests/test_mcp.py).
UISTREAM.pop("MCP_SERVERS", None)
