"""A run whose process died finishes on another (``ON_OWNER_LOST =
"continue"``): servers killed for real (SIGKILL) mid-answer, the other
server of a Redis pair continuing the run, the real ai@7 clients (useChat's
resume by chat id, WorkflowChatTransport's by ``startIndex``) reading it
there; and the continuation's rules on a stored log, through the one turn
path with a scripted model: the half-done step dropped with ``reset-step``,
a call whose result is logged never run twice, one that may have started
run again only when its tool is idempotent."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from django.db import connection, connections
from django.db.models import F
from django.utils import timezone

from uistream_app.hooks import TurnContext
from uistream_app.lifecycle import continuation, leases
from uistream_app.lifecycle.continuation import INTERRUPTED_TOOL_TEXT
from uistream_app.lifecycle.executors import WorkerRunner, execute_in_worker
from uistream_app.lifecycle.leases import sweep
from uistream_app.lifecycle.registry import RunHandle, live_runs
from uistream_app.lifecycle.runner import Runner
from uistream_app.live import get_broker, reset_broker
from uistream_app.models import Conversation, Message, Run
from uistream_app.owners import Owner
from uistream_app.protocol.ui.reader import UIMessageReader
from uistream_app.recording import read_log, write_log
from uistream_app.runs import ToolContext, tool
from uistream_app.runs.messages import ToolMessage
from uistream_app.testing import ScriptedModel, call
from uistream_app.transport.chat_request import ChatRequest, chat_turn
from uistream_app.views import ChatView

from .conftest import JS_DIR
from .live.conftest import redis_config  # noqa: F401  (fixture)
from .test_chat_http import Browser, read_chunks, text_of
from .test_leases import LEASE, kill, numbers, same_visitor, server_process, settings_env

pytestmark = pytest.mark.django_db(transaction=True)


async def run_to_end(run_id: Any) -> None:
    """Wait for the run this process goes on with to end (it may have ended
    already: a continuation with nothing left to do ends at once)."""
    handles = [h for h in live_runs() if h.run_id == str(run_id)]
    if handles:
        await asyncio.wait([handles[0].task], timeout=30)
    assert not [h for h in live_runs() if h.run_id == str(run_id)]


def continuing_env(broker: dict[str, Any]) -> dict[str, str]:
    env = settings_env(broker)
    uistream = json.loads(env["UISTREAM_TEST_SETTINGS"])
    env["UISTREAM_TEST_SETTINGS"] = json.dumps({**uistream, "ON_OWNER_LOST": "continue"})
    return env


def node_client(node: str, script: str, payload: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [node, str(JS_DIR / script), json.dumps(payload)],
        cwd=JS_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def built_by_the_sdk_reader(node: str, chunks: list[dict[str, Any]], path: Path) -> dict[str, Any]:
    """The message ai@7's own reader builds of ``chunks`` (build_message.mjs)."""
    path.write_text("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n")
    done = subprocess.run(
        [node, str(JS_DIR / "build_message.mjs"), "7", str(path)],
        cwd=JS_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    built = json.loads(done.stdout)
    assert (built["ok"], built["error"]) == (True, None)
    return dict(built["message"])


@pytest.mark.node
@pytest.mark.parametrize("backend", ["redis", "postgres"])
def test_a_killed_runs_answer_finishes_on_the_other_process_and_the_real_clients_show_it_whole(
    node: str, backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """On Redis; or on the PostgreSQL broker alone (no Redis anywhere), when
    the suite runs on PostgreSQL."""
    if backend == "redis":
        broker = request.getfixturevalue("redis_config")
    elif connection.vendor != "postgresql":
        pytest.skip("the PostgreSQL broker needs the suite on PostgreSQL (DATABASE_URL=postgres://…)")
    else:
        broker = {"BACKEND": "postgres"}
    env = continuing_env(broker)
    with server_process(env, "uvicorn") as (first, proc), server_process(env, "daphne") as (second, _):
        browser = Browser(first)
        other = same_visitor(browser, second)
        other.client.get("/api/csrf")  # the second process sweeps from now on
        with browser.stream("chat-c1", "count to 300") as original:
            read_chunks(original, stop=lambda cs: len(numbers(text_of(cs))) >= 5)
            cookie = "; ".join(f"{k}={v}" for k, v in browser.client.cookies.items())
            page = {"base": second, "cookie": cookie, "csrf": browser.token, "chatId": "chat-c1"}
            by_chat = node_client(node, "chat_client.mjs", {**page, "steps": [{"resume": True}]})
            by_index = node_client(
                node, "workflow_client.mjs", {**page, "steps": [{"tail": {"startIndex": 3, "runId": "chat-c1"}}]}
            )
            # The run goes on for a while (the clients start meanwhile), then its process dies.
            read_chunks(original, stop=lambda cs: len(numbers(text_of(cs))) >= 60)
            kill(proc)
        out, err = by_chat.communicate(timeout=LEASE + 60)
        assert by_chat.returncode == 0, err
        tail_out, tail_err = by_index.communicate(timeout=LEASE + 60)
        assert by_index.returncode == 0, tail_err

    run = Run.objects.get(conversation__client_id="chat-c1")
    assert run.status == "completed"
    log = read_log(run)
    chunks = [e.chunk for e in log]
    assert [e.seq for e in log] == list(range(len(log)))
    # The half-done step was dropped once, then the answer ran again, whole.
    assert [c["type"] for c in chunks].count("reset-step") == 1
    assert chunks[-1]["type"] == "finish"
    assert sum(c["type"] in ("finish", "error", "abort") for c in chunks) == 1
    stored = Message.objects.get(pk=run.message_id).as_ui_message()
    shown_text = "".join(p["text"] for p in stored["parts"] if p["type"] == "text")
    assert numbers(shown_text) == [str(n) for n in range(1, 301)]
    # What ai@7's reader builds of the whole log is what we stored.
    assert built_by_the_sdk_reader(node, chunks, tmp_path / "log.sse") == stored
    # useChat resuming by chat id on the other process shows the whole answer.
    result = json.loads(out)
    assert result["status"] == "ready", result
    assert result["messages"][-1] == stored
    # WorkflowChatTransport from startIndex 3 read the log on from there.
    (tail,) = json.loads(tail_out)["tails"]
    assert tail == chunks[3:]


# -- the rules, on a stored log -----------------------------------------------------------

RAN: list[str] = []
#: What the run's stored record held when each call's tool ran, by call id
#: (``_note_stored``).
AT_CALL: dict[str, tuple[list[str], list[str]]] = {}


def _continuing(settings: Any, on_owner_lost: str = "continue", **more: Any) -> None:
    """A test's ``ON_OWNER_LOST`` (and other settings), with no tool run
    or noted yet."""
    settings.UISTREAM = {**getattr(settings, "UISTREAM", {}), "ON_OWNER_LOST": on_owner_lost, **more}
    RAN.clear()
    AT_CALL.clear()


@tool
def charge(amount: int) -> str:
    """Charge the card (not idempotent)."""
    RAN.append(f"charge {amount}")
    return "charged"


@tool(idempotent=True)
def lookup(city: str) -> str:
    """Look the weather up (idempotent)."""
    RAN.append(f"lookup {city}")
    return f"sunny in {city}"


@tool(idempotent=True)
def convert(value: int) -> int:
    """Convert a value (idempotent)."""
    RAN.append(f"convert {value}")
    return value * 2


FINAL = ScriptedModel()


class ToolHooks(ChatView):
    model = FINAL
    tools = (charge, lookup, convert)


def calls(*ids: str) -> list[dict[str, Any]]:
    names = {"c1": ("convert", {"value": 21}), "c2": ("charge", {"amount": 5}), "c3": ("lookup", {"city": "Paris"})}
    return [
        {"type": "tool-input-available", "toolCallId": i, "toolName": names[i][0], "input": names[i][1]} for i in ids
    ]


#: A run that finished one step, then had its model call three tools:
#: convert's result was logged, charge and lookup had started, no result.
LOGGED = [
    {"type": "start", "messageId": "a1"},
    {"type": "start-step"},
    {"type": "text-start", "id": "text-0"},
    {"type": "text-delta", "id": "text-0", "delta": "Let me see."},
    {"type": "text-end", "id": "text-0"},
    {"type": "finish-step"},
    {"type": "start-step"},
    {"type": "text-start", "id": "text-1"},
    {"type": "text-delta", "id": "text-1", "delta": "Working on it."},
    {"type": "text-end", "id": "text-1"},
    *calls("c1", "c2", "c3"),
    {"type": "tool-output-available", "toolCallId": "c1", "output": 42},
]


@pytest_asyncio.fixture
async def _close_worker_connections() -> AsyncIterator[None]:
    yield
    await sync_to_async(connections.close_all)()


def orphan_with_tools() -> Run:
    conversation = Conversation.objects.create(pk="k1", client_id="chat-t1", session_key="s1")
    Message.objects.create(
        pk="u1", conversation=conversation, role="user", parts=[{"type": "text", "text": "go"}], position=0
    )
    message = Message.objects.create(pk="a1", conversation=conversation, role="assistant", parts=[], position=1)
    run = Run.objects.create(
        conversation=conversation,
        message=message,
        status="running",
        heartbeat_at=timezone.now() - dt.timedelta(hours=1),
        turn={
            "hooks": f"{ToolHooks.__module__}.{ToolHooks.__qualname__}",
            "kind": "submit",
            "extra": {},
            "with_thread": False,
            "approvals": {},
            "client_results": {},
            "transport": "http",
            "context_extra": {},
            "metadata": None,
        },
    )
    write_log(run, LOGGED)
    return run


@pytest.mark.asyncio
@pytest.mark.usefixtures("_close_worker_connections")
async def test_the_half_done_step_is_dropped_and_its_calls_are_not_run_twice(settings: Any) -> None:
    _continuing(settings)
    FINAL.enqueue("All done.")
    run = await sync_to_async(orphan_with_tools)()

    (settled,) = await sweep(may_continue=True)
    assert settled.continued
    await run_to_end(str(run.pk))

    stored = await Run.objects.aget(pk=run.pk)
    assert stored.status == "completed"
    log = [e.chunk for e in await sync_to_async(read_log)(run)]
    # The logged chunks, untouched; the half-done step dropped; then the step again.
    assert log[: len(LOGGED)] == LOGGED
    assert log[len(LOGGED)] == {"type": "reset-step"}
    rest = log[len(LOGGED) + 1 :]
    outputs = {c["toolCallId"]: c for c in rest if c["type"].startswith("tool-output")}
    assert outputs["c1"] == {"type": "tool-output-available", "toolCallId": "c1", "output": 42}  # from the log
    assert outputs["c2"] == {"type": "tool-output-error", "toolCallId": "c2", "errorText": INTERRUPTED_TOOL_TEXT}
    assert outputs["c3"]["output"] == "sunny in Paris"  # idempotent: run again
    # Only the idempotent call without a result ran; the logged one did not run twice.
    assert RAN == ["lookup Paris"]
    assert rest[-1]["type"] == "finish"
    # The stored message is what a reader of the whole log builds.
    reader = UIMessageReader(message_id="a1")
    for chunk in log:
        reader.feed(chunk)
    message = await Message.objects.aget(pk="a1")
    assert message.parts == reader.message["parts"]
    texts = [p["text"] for p in message.parts if p["type"] == "text"]
    assert texts == ["Let me see.", "Working on it.", "All done."]
    # The model went on from the whole history: the replayed step's calls and their results.
    (request,) = FINAL.requests
    answered = {m.tool_call_id: (m.content, m.is_error) for m in request.messages if isinstance(m, ToolMessage)}
    assert answered == {"c1": ("42", False), "c2": (INTERRUPTED_TOOL_TEXT, True), "c3": ("sunny in Paris", False)}


# -- a worker's run lost before its first log write -----------------------------------------


class NoWorkerRunner(WorkerRunner):
    """A worker executor whose task no worker ever starts: the worker that
    would have taken it was lost first."""

    engine = "test"
    enqueued: ClassVar[list[dict[str, Any]]] = []

    async def enqueue(self, payload: dict[str, Any]) -> None:
        NoWorkerRunner.enqueued.append(payload)


class GatedModel(ScriptedModel):
    """Answers once ``gate`` is set (an answer that is still going on)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        await self.gate.wait()
        async for event in super().stream(*args, **kwargs):
            yield event


LATE = GatedModel()


class LateHooks(ChatView):
    model = LATE


def hand_runs_to_no_worker(settings: Any, redis_config: dict[str, Any]) -> None:
    """Runs handed to a worker that never takes them (``NoWorkerRunner``), on
    Redis, continued when their lease runs out; the late model gated."""
    settings.UISTREAM = {
        **getattr(settings, "UISTREAM", {}),
        "BROKER": redis_config,
        "EXECUTOR": f"{NoWorkerRunner.__module__}.{NoWorkerRunner.__qualname__}",
        "ON_OWNER_LOST": "continue",
    }
    reset_broker()
    NoWorkerRunner.enqueued.clear()
    LATE.gate = asyncio.Event()


@pytest.mark.asyncio
@pytest.mark.usefixtures("_close_worker_connections")
async def test_a_worker_run_lost_before_its_first_chunk_is_continued_from_the_start(
    settings: Any, redis_config: dict[str, Any]
) -> None:
    hand_runs_to_no_worker(settings, redis_config)
    LATE.enqueue("Here is the answer.")
    message = {"id": "u-late", "role": "user", "parts": [{"type": "text", "text": "hello"}]}
    owner = Owner.of_session("s" * 32)
    handed = await LateHooks().start_turn(
        chat_turn(ChatRequest(chat_id="late-1", messages=[message])), TurnContext(owner, "late-1", "http"), version=7
    )
    run_id = handed.prepared.run.pk
    assert len(NoWorkerRunner.enqueued) == 1
    # Nothing was written for it: no worker started it, and its lease ran out.
    assert await sync_to_async(read_log)(handed.prepared.run) == []
    await Run.objects.filter(pk=run_id).aupdate(heartbeat_at=timezone.now() - dt.timedelta(hours=1))

    (settled,) = await sweep(may_continue=True)
    assert settled.continued
    (handle,) = [h for h in live_runs() if h.run_id == str(run_id)]
    # The task, delivered late to a worker while the run goes on here,
    # finds the run taken: it does not run it a second time.
    conversation_id = str(handed.prepared.conversation_id)
    assert await get_broker().adopt_run(conversation_id, str(run_id)) is None
    LATE.gate.set()
    await asyncio.wait([handle.task], timeout=30)

    stored = await Run.objects.select_related("message").aget(pk=run_id)
    assert stored.status == "completed"
    log = [e.chunk for e in await sync_to_async(read_log)(stored)]
    assert log[0]["type"] == "start"
    assert log[-1]["type"] == "finish"
    assert "".join(c["delta"] for c in log if c["type"] == "text-delta") == "Here is the answer."
    assert [p["text"] for p in stored.message.parts if p["type"] == "text"] == ["Here is the answer."]
    reset_broker()


@pytest.mark.asyncio
@pytest.mark.usefixtures("_close_worker_connections")
async def test_a_worker_run_whose_worker_began_it_and_was_lost_before_its_first_write_starts_over(
    settings: Any, redis_config: dict[str, Any]
) -> None:
    # Its worker adopted it and was lost before the run's first log write:
    # no tool that is not idempotent ran (one runs only once its call is
    # logged), so the run starts over here and its answer completes.
    hand_runs_to_no_worker(settings, redis_config)
    LATE.enqueue("Here is the answer.")
    message = {"id": "u-began", "role": "user", "parts": [{"type": "text", "text": "hello"}]}
    owner = Owner.of_session("s" * 32)
    handed = await LateHooks().start_turn(
        chat_turn(ChatRequest(chat_id="began-1", messages=[message])), TurnContext(owner, "began-1", "http"), version=7
    )
    run_id = str(handed.prepared.run.pk)
    # The worker that took the task (and was then lost).
    assert await get_broker().adopt_run(str(handed.prepared.conversation_id), run_id) is not None
    await Run.objects.filter(pk=run_id).aupdate(heartbeat_at=timezone.now() - dt.timedelta(hours=1))

    (settled,) = await sweep(may_continue=True)
    assert settled.continued
    (handle,) = [h for h in live_runs() if h.run_id == run_id]
    LATE.gate.set()
    await asyncio.wait([handle.task], timeout=30)
    stored = await Run.objects.select_related("message").aget(pk=run_id)
    assert stored.status == "completed"
    assert [p["text"] for p in stored.message.parts if p["type"] == "text"] == ["Here is the answer."]
    reset_broker()


# -- a call of a tool that is not idempotent is logged before it runs ------------------------


def _note_stored(context: ToolContext) -> None:
    """Note in ``AT_CALL`` what the run's stored record held as this call's
    tool ran: its log's tool calls, and the calls ``Run.turn`` says were
    started."""
    run = Run.objects.get(pk=context.runtime_context.run.pk)
    logged = [c["toolCallId"] for c in (e.chunk for e in read_log(run)) if c["type"] == "tool-input-available"]
    AT_CALL[context.tool_call_id] = (logged, list((run.turn or {}).get("started", [])))


@tool
def pay(amount: int, context: ToolContext) -> str:
    """Pay (not idempotent)."""
    _note_stored(context)
    RAN.append(f"pay {amount}")
    return "paid"


PAYING = ScriptedModel()


class PayHooks(ChatView):
    model = PAYING
    tools = (pay, lookup)


async def _turn(hooks: ChatView, chat_id: str, request: ChatRequest | None = None) -> Any:
    """A turn of one visitor's chat ``chat_id``: ``request``, or a new
    message "pay"."""
    if request is None:
        message = {"id": f"u-{chat_id}", "role": "user", "parts": [{"type": "text", "text": "pay"}]}
        request = ChatRequest(chat_id=chat_id, messages=[message])
    owner = Owner.of_session("p" * 32)
    return await hooks.start_turn(chat_turn(request), TurnContext(owner, chat_id, "http"), version=7)


@pytest.mark.asyncio
@pytest.mark.usefixtures("_close_worker_connections")
async def test_a_tool_that_is_not_idempotent_runs_only_once_its_call_is_stored(settings: Any) -> None:
    # A flush interval far longer than the run: only the call's own write
    # can have stored its chunks by the time its tool runs.
    _continuing(settings, FLUSH_EVERY_MS=60_000)
    PAYING.enqueue(["Paying.", call("pay", {"amount": 5}, id="p1")], "Paid.")
    handle = await _turn(PayHooks(), "pay-1")
    await asyncio.wait([handle.task], timeout=30)
    assert RAN == ["pay 5"]
    # The call was in the run's log before the tool ran.
    assert AT_CALL["p1"] == (["p1"], [])
    assert (await Run.objects.aget(pk=handle.run.pk)).status == "completed"


@pytest.mark.asyncio
@pytest.mark.usefixtures("_close_worker_connections")
async def test_with_interrupt_a_tool_call_costs_no_write_of_its_own(settings: Any) -> None:
    # No run is continued: no call can run twice, so none waits for the log.
    _continuing(settings, "interrupt", FLUSH_EVERY_MS=60_000)
    PAYING.enqueue(["Paying.", call("pay", {"amount": 6}, id="p2")], "Paid.")
    handle = await _turn(PayHooks(), "pay-2")
    await asyncio.wait([handle.task], timeout=30)
    assert RAN == ["pay 6"]
    assert AT_CALL["p2"] == ([], [])


@tool(requires_approval=True)
def approved_pay(amount: int, context: ToolContext) -> str:
    """Pay, once a person approved it (not idempotent)."""
    _note_stored(context)
    RAN.append(f"approved_pay {amount}")
    return "paid"


APPROVING = ScriptedModel()


class ApprovingHooks(ChatView):
    model = APPROVING
    tools = (approved_pay,)


@pytest.mark.asyncio
@pytest.mark.usefixtures("_close_worker_connections")
async def test_an_approved_call_is_among_the_started_calls_before_it_runs(settings: Any) -> None:
    _continuing(settings, FLUSH_EVERY_MS=60_000)
    APPROVING.enqueue(call("approved_pay", {"amount": 3}, id="ap1"), "Paid.")
    first = await _turn(ApprovingHooks(), "approve-1")
    await asyncio.wait([first.task], timeout=30)
    assert RAN == []  # it waits for a person
    messages = [m.as_ui_message() async for m in Message.objects.filter(conversation_id=first.run.conversation_id)]
    (part,) = [p for p in messages[-1]["parts"] if p.get("toolCallId") == "ap1"]
    part.update(state="approval-responded", approval={**part["approval"], "approved": True})
    request = ChatRequest(chat_id="approve-1", messages=messages, message_id=messages[-1]["id"])
    then = await _turn(ApprovingHooks(), "approve-1", request)
    await asyncio.wait([then.task], timeout=30)
    assert RAN == ["approved_pay 3"]
    # Its call is an earlier run's, not in this run's log: this run stored
    # it among its started calls before the tool ran.
    assert AT_CALL["ap1"] == ([], ["ap1"])


class TakenModel(ScriptedModel):
    """Streams its step, then another process takes the run over (a sweep
    that found its lease run out while this one was paused)."""

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        async for event in super().stream(*args, **kwargs):
            yield event
        await Run.objects.filter(status="running", conversation__client_id="taken-1").aupdate(
            lease_epoch=F("lease_epoch") + 1
        )


TAKEN = TakenModel()


class TakenHooks(ChatView):
    model = TAKEN
    tools = (pay,)


@pytest.mark.asyncio
@pytest.mark.usefixtures("_close_worker_connections")
async def test_a_process_that_lost_the_run_does_not_run_its_tool(settings: Any) -> None:
    _continuing(settings)
    TAKEN.enqueue(["Paying.", call("pay", {"amount": 7}, id="t1")], "Paid.")
    handle = await _turn(TakenHooks(), "taken-1")
    await asyncio.wait([handle.task], timeout=30)
    assert RAN == []  # the call's write found the epoch gone: the tool never ran
    stored = await Run.objects.aget(pk=handle.run.pk)
    # Nothing of this process's landed after the takeover: the run is its new owner's.
    assert stored.status == "running"
    assert await sync_to_async(read_log)(stored) == []


# -- a web process's run lost before its first log write -------------------------------------


class LostRunner(Runner):
    """The web process died as soon as the turn was prepared: the run's
    rows are written, its task never ran."""

    async def start(self, prepared: Any, source: Any, *, metadata: Any = None) -> RunHandle:
        await source.aclose()
        return RunHandle(prepared.run, asyncio.create_task(asyncio.sleep(0)), prepared)


class LostHooks(ChatView):
    model = LATE

    def get_runner(self) -> Runner:
        return LostRunner()


@pytest.mark.asyncio
@pytest.mark.usefixtures("_close_worker_connections")
async def test_a_web_run_lost_before_its_first_write_is_continued(settings: Any, redis_config: dict[str, Any]) -> None:
    settings.UISTREAM = {**getattr(settings, "UISTREAM", {}), "BROKER": redis_config, "ON_OWNER_LOST": "continue"}
    reset_broker()
    LATE.gate = asyncio.Event()
    LATE.gate.set()
    LATE.enqueue("The whole answer.")
    handed = await _turn(LostHooks(), "lost-web-1")
    run_id = str(handed.run.pk)
    assert await sync_to_async(read_log)(handed.run) == []
    await Run.objects.filter(pk=run_id).aupdate(heartbeat_at=timezone.now() - dt.timedelta(hours=1))

    (settled,) = await sweep(may_continue=True)
    assert settled.continued
    await run_to_end(run_id)
    stored = await Run.objects.select_related("message").aget(pk=run_id)
    assert stored.status == "completed"
    assert [p["text"] for p in stored.message.parts if p["type"] == "text"] == ["The whole answer."]
    reset_broker()


# -- an approved call its run began, then lost -----------------------------------------------


def approved_orphan(started: list[str]) -> Run:
    """A chat whose answer asked to charge the card, a person approved it,
    and the run that went on with it lost its process: its log has its
    ``start``; ``started``: whether the call's tool was about to run."""
    conversation = Conversation.objects.create(pk="k2", client_id="chat-ap", session_key="s2")
    Message.objects.create(
        pk="u2", conversation=conversation, role="user", parts=[{"type": "text", "text": "charge"}], position=0
    )
    message = Message.objects.create(
        pk="a2",
        conversation=conversation,
        role="assistant",
        parts=[{"type": "step-start"}, approved_part()],
        position=1,
    )
    run = Run.objects.create(
        conversation=conversation,
        message=message,
        status="running",
        trigger="continue",
        heartbeat_at=timezone.now() - dt.timedelta(hours=1),
        turn={
            "hooks": f"{ToolHooks.__module__}.{ToolHooks.__qualname__}",
            "kind": "continue",
            "extra": {},
            "with_thread": False,
            "approvals": {"c9": ["apv_9", True, None]},
            "client_results": {},
            "transport": "http",
            "context_extra": {},
            "metadata": None,
            "started": started,
        },
    )
    write_log(run, [{"type": "start", "messageId": "a2"}])
    return run


@pytest.mark.asyncio
@pytest.mark.usefixtures("_close_worker_connections")
@pytest.mark.parametrize(("started", "ran"), [(["c9"], []), ([], ["charge 9"])])
async def test_an_approved_call_that_may_have_run_is_not_run_again(
    settings: Any, started: list[str], ran: list[str]
) -> None:
    _continuing(settings)
    FINAL.requests.clear()
    FINAL.enqueue("All done.")
    run = await sync_to_async(approved_orphan)(started)

    (settled,) = await sweep(may_continue=True)
    assert settled.continued
    await run_to_end(str(run.pk))
    stored = await Run.objects.select_related("message").aget(pk=run.pk)
    assert stored.status == "completed"
    # Started (its call was stored before its tool ran): not run again, the
    # model reads that it was interrupted. Never started: it runs, once.
    assert ran == RAN
    (charged,) = [p for p in stored.message.parts if p.get("toolCallId") == "c9"]
    if started:
        assert (charged["state"], charged["errorText"]) == ("output-error", INTERRUPTED_TOOL_TEXT)
    else:
        assert (charged["state"], charged["output"]) == ("output-available", "charged")
    log = [e.chunk for e in await sync_to_async(read_log)(stored)]
    reader = UIMessageReader(
        message={"id": "a2", "role": "assistant", "parts": [{"type": "step-start"}, approved_part()]},
        message_id="a2",
    )
    for chunk in log:
        reader.feed(chunk)
    assert stored.message.parts == reader.message["parts"]


def approved_part() -> dict[str, Any]:
    return {
        "type": "tool-charge",
        "toolCallId": "c9",
        "state": "approval-responded",
        "input": {"amount": 9},
        "approval": {"id": "apv_9", "approved": True},
    }


# -- the step budget goes on -----------------------------------------------------------------


class TwoStepHooks(ChatView):
    model = ScriptedModel()
    tools = (convert,)
    max_steps = 2


class ThreeStepHooks(TwoStepHooks):
    model = ScriptedModel()
    max_steps = 3


def _tool_step(call_id: str) -> list[dict[str, Any]]:
    return [
        {"type": "start-step"},
        {"type": "tool-input-available", "toolCallId": call_id, "toolName": "convert", "input": {"value": 1}},
        {"type": "tool-output-available", "toolCallId": call_id, "output": 2},
        {"type": "finish-step"},
    ]


def two_steps_orphan(hooks: type[ChatView]) -> Run:
    """A run whose model called a tool twice (two steps done), then lost
    its process before its next model call."""
    conversation = Conversation.objects.create(pk="k3", client_id="chat-steps", session_key="s3")
    Message.objects.create(
        pk="u3", conversation=conversation, role="user", parts=[{"type": "text", "text": "go"}], position=0
    )
    message = Message.objects.create(pk="a3", conversation=conversation, role="assistant", parts=[], position=1)
    run = Run.objects.create(
        conversation=conversation,
        message=message,
        status="running",
        heartbeat_at=timezone.now() - dt.timedelta(hours=1),
        turn={"hooks": f"{hooks.__module__}.{hooks.__qualname__}", "kind": "submit", "transport": "http"},
    )
    write_log(run, [{"type": "start", "messageId": "a3"}, *_tool_step("s1"), *_tool_step("s2")])
    return run


@pytest.mark.asyncio
@pytest.mark.usefixtures("_close_worker_connections")
@pytest.mark.parametrize(("hooks", "calls_made", "reason"), [(TwoStepHooks, 0, "length"), (ThreeStepHooks, 1, "stop")])
async def test_a_continued_run_has_only_the_steps_its_budget_left(
    settings: Any, hooks: type[ChatView], calls_made: int, reason: str
) -> None:
    settings.UISTREAM = {**getattr(settings, "UISTREAM", {}), "ON_OWNER_LOST": "continue"}
    model = hooks.model
    model.requests.clear()
    if not model.remaining:
        model.enqueue("Done.")
    run = await sync_to_async(two_steps_orphan)(hooks)

    (settled,) = await sweep(may_continue=True)
    assert settled.continued
    await run_to_end(str(run.pk))
    stored = await Run.objects.aget(pk=run.pk)
    # Two of its steps were spent before its process died: with max_steps 2
    # it ends as the loop ends a run at its limit, without calling the model.
    assert len(model.requests) == calls_made
    log = [e.chunk for e in await sync_to_async(read_log)(stored)]
    assert log[-1] == {"type": "finish", "finishReason": reason}
    assert stored.status == "completed"


# -- a run taken over twice ------------------------------------------------------------------


def test_a_run_taken_over_twice_stores_the_message_its_whole_log_builds() -> None:
    conversation = Conversation.objects.create(pk="k4", client_id="chat-twice", session_key="s4")
    Message.objects.create(
        pk="u4", conversation=conversation, role="user", parts=[{"type": "text", "text": "go"}], position=0
    )
    message = Message.objects.create(pk="a4", conversation=conversation, role="assistant", parts=[], position=1)
    stale = timezone.now() - dt.timedelta(hours=1)
    run = Run.objects.create(
        conversation=conversation, message=message, status="running", heartbeat_at=stale, turn={"kind": "submit"}
    )

    def half(text_id: str, text: str) -> list[dict[str, Any]]:
        return [
            {"type": "start-step"},
            {"type": "text-start", "id": text_id},
            {"type": "text-delta", "id": text_id, "delta": text},
        ]

    def built_by_a_reader() -> list[dict[str, Any]]:
        reader = UIMessageReader(message_id="a4")
        for entry in read_log(run):
            reader.feed(entry.chunk)
        return reader.message["parts"]

    def take_over() -> Run:
        Run.objects.filter(pk=run.pk).update(heartbeat_at=stale)
        claimed = leases._claim(str(run.pk), None)
        assert claimed is not None
        return claimed

    write_log(run, [{"type": "start", "messageId": "a4"}, *half("text-0", "Hal")])
    # The first process died mid-step; a sweep took the run over.
    assert continuation._store_continued(take_over(), None) is not None
    # The process that took it died before it said anything: the next
    # takeover finds the half-done step dropped already.
    assert continuation._store_continued(take_over(), None) is not None
    assert [e.chunk["type"] for e in read_log(run)].count("reset-step") == 1
    # The one that went on with it finished a step, began another, and died too.
    done = [*half("text-0", "Whole."), {"type": "text-end", "id": "text-0"}, {"type": "finish-step"}]
    write_log(run, [*done, *half("text-1", "Aga")])
    assert continuation._store_continued(take_over(), None) is not None
    assert Message.objects.get(pk="a4").parts == built_by_a_reader()
    # And a third sweep settles it: the message is still what the whole log builds.
    leases._store_settled(take_over(), None, "An error occurred.")
    stored = Message.objects.get(pk="a4").parts
    assert stored == built_by_a_reader()
    assert [p.get("text") for p in stored if p["type"] == "text"] == ["Whole."]


class StoppingHooks(LateHooks):
    """A worker told to stop while it starts the run (its task cancelled)."""

    async def start_turn(self, *args: Any, **kwargs: Any) -> Any:
        raise asyncio.CancelledError


@pytest.mark.asyncio
@pytest.mark.usefixtures("_close_worker_connections")
async def test_a_worker_stopped_while_it_starts_a_run_leaves_it_to_be_continued(
    settings: Any, redis_config: dict[str, Any]
) -> None:
    hand_runs_to_no_worker(settings, redis_config)
    LATE.gate.set()
    LATE.enqueue("Here is the answer.")
    handed = await _turn(LateHooks(), "stopping-1")
    (payload,) = NoWorkerRunner.enqueued
    payload = {**payload, "hooks": f"{StoppingHooks.__module__}.{StoppingHooks.__qualname__}"}
    with pytest.raises(asyncio.CancelledError):
        await execute_in_worker(payload)
    run_id = str(handed.run.pk)
    await Run.objects.filter(pk=run_id).aupdate(heartbeat_at=timezone.now() - dt.timedelta(hours=1))

    # The stream was not ended: the sweep goes on with the run.
    (settled,) = await sweep(may_continue=True)
    assert settled.continued
    await run_to_end(run_id)
    stored = await Run.objects.select_related("message").aget(pk=run_id)
    assert stored.status == "completed"
    assert [p["text"] for p in stored.message.parts if p["type"] == "text"] == ["Here is the answer."]
    reset_broker()
