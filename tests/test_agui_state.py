"""AG-UI shared state: ``STATE_SNAPSHOT`` / ``STATE_DELTA`` from
``AGUIView.get_state`` / ``end_state``, through a real server and the real
``@ag-ui/client`` (whose ``fast-json-patch`` applies the deltas), the state
stored with the run (``Run.state``), and a replay that sends it first.

The endpoint is the demo's (``demo_project.agui.DemoAGUIView``):
``{"turns": N}`` per thread, N the runs of the thread that completed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings
from hypothesis import given, settings
from hypothesis import strategies as st

from uistream_app.models import Run
from uistream_app.protocol.agui.patch import apply_patch
from uistream_app.protocol.agui.state import SharedState, diff
from uistream_app.protocol.agui.verifier import verify_sse
from uistream_app.transport.agui_views import render_stored_run

from .protocol.agui_oracles import agui_client, assert_accepted
from .server import serve_demo
from .test_agui_http import AGUIStream, post_agui, run_client, run_input, stream_agui, user
from .test_chat_http import Browser, run_finished, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with override_settings(ROOT_URLCONF="demo_project.urls"):
        yield from serve_demo(monkeypatch, 1)


@pytest.fixture
def plain_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with override_settings(ROOT_URLCONF="tests.agui_urls"):
        yield from serve_demo(monkeypatch, 1)


def state_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in e.items() if k != "timestamp"}
        for e in events
        if e["type"] in ("STATE_SNAPSHOT", "STATE_DELTA")
    ]


def runs_of(thread: str) -> list[Run]:
    return list(Run.objects.filter(conversation__client_id=thread).order_by("started_at"))


def test_the_real_client_applies_snapshot_and_delta_and_holds_the_state_we_stored(node: str, server: str) -> None:
    browser = Browser(server)
    out = run_client(
        node,
        browser,
        f"{server}/api/agui",
        "thread-state",
        [
            {"text": "What's the weather in Oslo?", "messageId": "u1", "runId": "run-a"},
            {"text": "compute 6*7", "messageId": "u2", "runId": "run-b"},
            {"text": "hello", "messageId": "u3", "runId": "run-c"},
        ],
    )
    wait_for(run_finished, "the runs to be stored")
    stored = runs_of("thread-state")
    assert [r.status for r in stored] == ["completed"] * 3
    for n, (run, live) in enumerate(zip(stored, out["runs"], strict=True)):
        assert live["error"] is None
        assert live["warnings"] == []
        assert live["runError"] is None
        events = assert_accepted(live["events"])
        # The snapshot before anything of the answer (the canonical stream
        # opens its first step with its start), the delta right before RUN_FINISHED.
        assert [e["type"] for e in events[:2]] == ["RUN_STARTED", "STEP_STARTED"]
        assert {k: v for k, v in events[2].items() if k != "timestamp"} == {
            "type": "STATE_SNAPSHOT",
            "snapshot": {"turns": n},
        }
        assert events[-1]["type"] == "RUN_FINISHED"
        assert {k: v for k, v in events[-2].items() if k != "timestamp"} == {
            "type": "STATE_DELTA",
            "delta": [{"op": "replace", "path": "/turns", "value": n + 1}],
        }
        assert len(state_events(events)) == 2
        # What the client built from them is what we stored.
        assert live["state"] == {"turns": n + 1}
        assert run.state == live["state"]
    assert out["state"] == {"turns": 3}


def test_a_replay_renders_the_state_as_it_was_sent_and_the_client_ends_with_the_stored_one(
    node: str, server: str, tmp_path: Any
) -> None:
    browser = Browser(server)
    sent = []
    for i, text in enumerate(["hello", "compute 2+2"]):
        response = post_agui(browser, run_input("thread-replay", [user(text, f"u{i}")], run_id=f"r{i}"))
        assert response.status_code == 200
        sent.append(verify_sse(response.content))
        wait_for(run_finished, "the run to be stored")
    last = runs_of("thread-replay")[-1]
    assert last.state == {"turns": 2}
    replay = asyncio.run(render_stored_run(last, run_id="r1"))
    events = assert_accepted(verify_sse(replay))
    # What was sent, state first (the admin shows the wire as it was).
    assert (
        state_events(events)
        == state_events(sent[-1])
        == [
            {"type": "STATE_SNAPSHOT", "snapshot": {"turns": 1}},
            {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/turns", "value": 2}]},
        ]
    )
    path = tmp_path / "replay.sse"
    path.write_bytes(replay)
    read = json.loads(agui_client(node, "read", str(path)))
    assert read["error"] is None
    assert read["warnings"] == []
    assert read["state"] == last.state


def test_a_stored_state_the_log_does_not_carry_is_sent_first_on_replay(
    node: str, plain_server: str, tmp_path: Any
) -> None:
    # A run of an endpoint without state events, whose state was stored by
    # other means (an agent framework's adapter, an operator).
    browser = Browser(plain_server)
    response = post_agui(browser, run_input("thread-kept", [user("hello")]), path="/api/agui-mailer")
    assert response.status_code == 200
    wait_for(run_finished, "the run to be stored")
    run = Run.objects.get(conversation__client_id="thread-kept")
    Run.objects.filter(pk=run.pk).update(state={"cart": ["tea"], "step": 2})
    run.refresh_from_db()
    replay = asyncio.run(render_stored_run(run))
    events = assert_accepted(verify_sse(replay))
    assert events[0]["type"] == "RUN_STARTED"
    assert {k: v for k, v in events[1].items() if k != "timestamp"} == {
        "type": "STATE_SNAPSHOT",
        "snapshot": {"cart": ["tea"], "step": 2},
    }
    path = tmp_path / "replay.sse"
    path.write_bytes(replay)
    read = json.loads(agui_client(node, "read", str(path)))
    assert read["error"] is None
    assert read["warnings"] == []
    assert read["state"] == {"cart": ["tea"], "step": 2}


def test_a_stopped_run_leaves_the_state_where_it_was(server: str) -> None:
    browser = Browser(server)
    assert post_agui(browser, run_input("thread-stop", [user("hello", "u0")], run_id="r0")).status_code == 200
    wait_for(run_finished, "the first run to be stored")
    with stream_agui(browser, run_input("thread-stop", [user("count to 3000", "u1")], run_id="r1")) as response:
        stream = AGUIStream(response)
        first = stream.read(stop=lambda seen: any(e["type"] == "TEXT_MESSAGE_CONTENT" for e in seen))
        stopped = browser.client.post("/api/chat/thread-stop/stop", headers={"X-CSRFToken": browser.token})
        assert stopped.status_code in (200, 202, 204), stopped.text
        rest = stream.read()
    events = first + rest
    assert rest[-1]["type"] == "RUN_FINISHED"
    assert rest[-1]["outcome"] == {"type": "cancelled"}
    assert state_events(events) == [{"type": "STATE_SNAPSHOT", "snapshot": {"turns": 1}}]
    wait_for(run_finished, "the stopped run to be stored")
    runs = runs_of("thread-stop")
    assert [r.status for r in runs] == ["completed", "stopped"]
    assert runs[-1].state == {"turns": 1}
    # The next run starts from there.
    response = post_agui(browser, run_input("thread-stop", [user("hello", "u2")], run_id="r2"))
    assert state_events(verify_sse(response.content))[0] == {"type": "STATE_SNAPSHOT", "snapshot": {"turns": 1}}


def test_the_apps_own_endpoint_shares_no_state(plain_server: str) -> None:
    # The app's AGUIView has no get_state: no state events, nothing stored.
    browser = Browser(plain_server)
    response = post_agui(browser, run_input("thread-plain", [user("hello")]), path="/api/agui-mailer")
    assert response.status_code == 200
    assert state_events(verify_sse(response.content)) == []
    wait_for(run_finished, "the run to be stored")
    assert Run.objects.get(conversation__client_id="thread-plain").state is None


# -- SharedState --------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "~", "/", "a/b"]), inner),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(old=st.dictionaries(st.sampled_from(["a", "b", "~0", "x/y"]), json_values), new=json_values)
def test_a_change_is_said_as_events_that_rebuild_the_new_state(old: dict[str, Any], new: Any) -> None:
    state = SharedState(old)
    state.set(new)
    rebuilt: Any = old
    for event in state.drain():
        rebuilt = event["snapshot"] if event["type"] == "STATE_SNAPSHOT" else apply_patch(rebuilt, event["delta"])
    assert json.dumps(rebuilt, sort_keys=True) == json.dumps(new, sort_keys=True)
    assert state.value == new


def test_true_is_not_one_and_an_unchanged_state_says_nothing() -> None:
    assert diff({"a": 1}, {"a": True}) == [{"op": "replace", "path": "/a", "value": True}]
    state = SharedState({"turns": 1})
    state.set({"turns": 1})
    assert state.drain() == []


@pytest.fixture
def cart_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with override_settings(ROOT_URLCONF="tests.agui_state_urls"):
        yield from serve_demo(monkeypatch, 1)


def test_changes_made_during_the_run_reach_the_client_as_deltas(node: str, cart_server: str) -> None:
    browser = Browser(cart_server)
    out = run_client(
        node,
        browser,
        f"{cart_server}/api/agui-cart",
        "thread-cart",
        [
            {"text": "buy tea and milk", "messageId": "u1", "runId": "run-a"},
            {"text": "buy bread", "messageId": "u2", "runId": "run-b"},
        ],
    )
    wait_for(run_finished, "the runs to be stored")
    first, second = out["runs"]
    for live in (first, second):
        assert live["error"] is None
        assert live["warnings"] == []
        assert_accepted(live["events"])
    changes = state_events(first["events"])
    assert changes[0] == {"type": "STATE_SNAPSHOT", "snapshot": {"cart": [], "runs": 0}}
    assert [c["type"] for c in changes[1:]] == ["STATE_DELTA"] * 3  # tea, milk, the end
    # Each tool's change goes out before its result.
    types = [e["type"] for e in first["events"]]
    assert types.index("STATE_DELTA") < types.index("TOOL_CALL_RESULT")
    assert first["state"] == {"cart": ["tea", "milk"], "runs": 1}
    assert second["state"] == {"cart": ["tea", "milk", "bread"], "runs": 2}
    assert [r.state for r in runs_of("thread-cart")] == [first["state"], second["state"]]


def test_a_get_state_that_fails_fails_the_run_in_band(cart_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.agui_state_urls import CartView

    def broken(self: Any, run: Any) -> Any:
        raise RuntimeError("the state store is down")

    monkeypatch.setattr(CartView, "get_state", broken)
    browser = Browser(cart_server)
    response = post_agui(browser, run_input("thread-broken", [user("buy tea")]), path="/api/agui-cart")
    assert response.status_code == 200
    events = verify_sse(response.content)
    assert events[-1]["type"] == "RUN_ERROR"
    assert events[-1]["message"] == "An error occurred."  # masked
    wait_for(run_finished, "the run to be stored")
    run = Run.objects.get(conversation__client_id="thread-broken")
    assert run.status == "failed"
    assert run.state is None
