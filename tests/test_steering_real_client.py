"""A steered answer as the real ai@7 chat sees it (``tests/js/steer_client.mjs``),
with the run in another process than the one the steering message reaches
(two daphne processes sharing Redis), and on a Celery worker; HTTP and the
WebSocket. The steering-message part must be where ai@7's own
``streamText`` puts it (the same script runs ``streamText`` with the SDK's
mock model and ``experimental_createSteering``: the oracle), and the
client's messages must be the stored ones."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from uistream_app.models import Run, SteeringMessage

from .conftest import JS_DIR
from .live.conftest import redis_config  # noqa: F401  (fixture)
from .test_celery_executor import Stack, require_celery, settled
from .test_chat_http import Browser, wait_for
from .test_chat_real_client import stored_messages
from .test_consumer import session_cookie

pytestmark = pytest.mark.django_db(transaction=True)

#: Long enough that the steer lands before the last step however the
#: processes are paced (8 steps of 50 numbers, 10 ms apart: the step limit
#: ends it; the demo's own "count to 300 slowly" is six).
COUNT = "count to 1000 slowly"
PACE = {"UISTREAM_DEMO_DELAY_MS": "10"}
DEMO_TOOLS = [
    "demo_project.demo_model.get_weather",
    "demo_project.demo_model.calculate",
    "demo_project.demo_model.pause",
]


def steer_client(node: str, **args: Any) -> dict[str, Any]:
    result = subprocess.run(
        [node, str(JS_DIR / "steer_client.mjs"), json.dumps(args)],
        capture_output=True,
        text=True,
        cwd=JS_DIR,
        timeout=90,
    )
    assert result.returncode == 0, result.stderr
    out: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    return out


@pytest.fixture(scope="module")
def oracle(node: str) -> dict[str, Any]:
    return run_oracle(node)


def run_oracle(node: str) -> dict[str, Any]:
    """What ai@7's streamText does with a steer sent while step 0's tool
    runs: the message's part types and its steering part."""
    return steer_client(
        node,
        scenario="oracle",
        steps=[["1 2 3", True], ["2 1", False]],
        steerAfterStep=0,
        steerText="now count backwards",
    )


def page(browser: Browser) -> dict[str, str]:
    """A page's cookie (a session and the CSRF cookie) and its token."""
    return {"cookie": f"{session_cookie()}; csrftoken={browser.client.cookies['csrftoken']}", "csrf": browser.token}


def check_steered(out: dict[str, Any], oracle: dict[str, Any], chat_id: str) -> None:
    """The steer landed at some step boundary N (when depends on the two
    processes' pace, not on what is checked): the part is where streamText
    puts it, and step N counts down from where step N-1 stopped."""
    assert out["error"] is None
    assert out["status"] == "ready"
    assert out["outcome"]["status"] == 200
    outcome = out["outcome"]["body"]
    assert outcome["type"] == "delivered", outcome
    assert outcome["id"] == "s1"
    answer = out["messages"][1]
    kinds = [p["type"] for p in answer["parts"] if p["type"] != "reasoning"]  # the demo model thinks aloud
    at = kinds.index("steering-message")
    assert kinds.count("steering-message") == 1
    assert kinds[:at].count("step-start") == outcome["stepNumber"]
    # The oracle's steer landed at step 1: the same parts around it.
    assert oracle["outcome"]["stepNumber"] == 1
    assert kinds[at - 3 : at + 3] == oracle["parts"]
    assert next(p for p in answer["parts"] if p["type"] == "steering-message") == oracle["steering"]
    texts = [p["text"] for p in answer["parts"] if p["type"] == "text"]
    before, after = texts[outcome["stepNumber"] - 1].split(), texts[outcome["stepNumber"]].split()
    last = int(before[-1])
    assert after == [str(n) for n in range(last - 1, last - 1 - len(after), -1)]
    assert len(after) == min(50, last - 1)
    wait_for(lambda: settled(chat_id), "the run to be stored")
    assert out["messages"] == stored_messages(chat_id)
    assert SteeringMessage.objects.get(client_id="s1").outcome == outcome


@pytest.fixture
def two_webs(redis_config: dict[str, Any]) -> Iterator[tuple[str, str]]:
    uistream = {
        "ALLOW_ANONYMOUS": True,
        "MODEL": "demo_project.demo_model.make_model",
        "TOOLS": DEMO_TOOLS,
        "BROKER": redis_config,
        "LOG_WRITER": "thread",
    }
    stack = Stack(uistream, redis_config, redis_config["PREFIX"].rsplit(":", 1)[-1])
    try:
        first, _ = stack.web(env_overrides=PACE)
        second, _ = stack.web(env_overrides=PACE)
        Browser(second)  # its first request (imports) before the one that matters
        yield first, second
    finally:
        stack.close()


@pytest.mark.parametrize(("transport", "over"), [("http", "http"), ("ws", "ws")])
def test_a_steer_reaches_a_run_in_another_process(
    node: str, oracle: dict[str, Any], two_webs: tuple[str, str], transport: str, over: str
) -> None:
    first, second = two_webs
    chat_id = f"steer-{transport}"
    out = steer_client(
        node,
        scenario="chat",
        transport=transport,
        base=first,
        steerBase=second,
        chatId=chat_id,
        text="count to 300 slowly",
        after=10,
        steer={"kind": "steer", "id": "s1", "text": "now count backwards", "over": over},
        **page(Browser(first)),
    )
    check_steered(out, oracle, chat_id)


@pytest.mark.parametrize("broker", ["redis", "postgres"])
def test_a_steer_reaches_a_run_on_a_celery_worker(
    node: str,
    oracle: dict[str, Any],
    redis_config: dict[str, Any],
    broker: str,
) -> None:
    """The web process hands the run off and the worker adopts and runs it;
    the steer goes to the web process. On the PostgreSQL broker (run in the
    suite's PostgreSQL leg), Redis is Celery's transport only."""
    require_celery()
    if broker == "postgres" and connection.vendor != "postgresql":
        pytest.skip("the PostgreSQL broker needs the suite on PostgreSQL (DATABASE_URL=postgres://…)")
    uistream = {
        "ALLOW_ANONYMOUS": True,
        "MODEL": "demo_project.demo_model.make_model",
        "TOOLS": DEMO_TOOLS,
        "BROKER": redis_config if broker == "redis" else {"BACKEND": "postgres"},
        "EXECUTOR": "celery",
        "ON_DISCONNECT": "finish",
        "LOG_WRITER": "thread",
    }
    chat_id = f"steer-celery-{broker}"
    stack = Stack(uistream, redis_config, redis_config["PREFIX"].rsplit(":", 1)[-1])
    try:
        web, _ = stack.web(env_overrides=PACE)
        stack.env.update(PACE)
        stack.worker()
        out = steer_client(
            node,
            scenario="chat",
            transport="http",
            base=web,
            steerBase=web,
            chatId=chat_id,
            text=COUNT,
            after=10,
            steer={"kind": "steer", "id": "s1", "text": "now count backwards", "over": "http"},
            **page(Browser(web)),
        )
        check_steered(out, oracle, chat_id)
        assert Run.objects.get().status == "completed"
    finally:
        stack.close()
