"""A steered answer on the PostgreSQL broker alone, as the real ai@7 chat
sees it (``tests/js/steer_client.mjs``): the steer goes to a process that
does not run the answer (a second web server; a web server whose run a
Celery worker adopted: ``test_steering_real_client``'s Celery test, its
``postgres`` case), and must change the answer's course where ai@7's
own ``streamText`` would (the checks and the oracle of
``test_steering_real_client``). Skipped unless the suite runs on
PostgreSQL (``DATABASE_URL``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection

from .server import demo_server
from .test_chat_http import Browser
from .test_chat_postgres import postgres_env
from .test_steering_real_client import DEMO_TOOLS, PACE, check_steered, oracle, page, steer_client  # noqa: F401

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.node]

STEER = {"kind": "steer", "id": "s1", "text": "now count backwards", "over": "http"}


@pytest.fixture(autouse=True)
def _postgres() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the PostgreSQL broker needs the suite on PostgreSQL (DATABASE_URL=postgres://…)")


def test_a_steer_sent_to_the_process_that_does_not_run_the_answer_changes_its_course(
    node: str, oracle: dict[str, Any]
) -> None:
    env = postgres_env()
    env["UISTREAM_TEST_SETTINGS"] = json.dumps({**json.loads(env["UISTREAM_TEST_SETTINGS"]), "TOOLS": DEMO_TOOLS})
    with demo_server("uvicorn", env) as first, demo_server("daphne", env) as second:
        Browser(second.url)  # its first request (imports) before the one that matters
        out = steer_client(
            node,
            scenario="chat",
            transport="http",
            base=first.url,
            steerBase=second.url,
            chatId="steer-pg",
            text="count to 300 slowly",
            after=10,
            steer=STEER,
            **page(Browser(first.url)),
        )
    check_steered(out, oracle, "steer-pg")
