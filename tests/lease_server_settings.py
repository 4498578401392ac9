"""Settings of the server processes of ``test_leases.py``: the second
server's (``server_settings``) with the options the test process gives the
same SQLite file (tests/settings.py), so that processes writing at once
wait for each other instead of failing with "database is locked"."""

from tests.server_settings import *  # noqa: F403

DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}  # noqa: F405
