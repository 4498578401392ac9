"""Settings of a second server process in the multi-process tests.

The test passes what must match its own process: ``DATABASE_URL`` (the
shared test database file) and ``UISTREAM_TEST_SETTINGS`` (the ``UISTREAM``
dict, as JSON: the same broker and key prefix).
"""

import json
import os

from tests.settings import *  # noqa: F403

UISTREAM = json.loads(os.environ["UISTREAM_TEST_SETTINGS"])
