"""MCP servers as tools: real MCP server processes (the demo's, and
``tests/mcp_server.py``, both written with the ``mcp`` SDK's server API)
through the tool loop, a chat server and the real ai@7 useChat core.

What a user notices: the server's tools are callable under
``<server>__<tool>``; whatever goes wrong on the server's side (an error
result, a JSON-RPC error, a crash, a slow call) is that call's tool error
and the next call works; one server process serves every run of a process;
shutdown ends it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.checks import run_checks
from django.test import override_settings

from demo_project.demo_model import DemoModel
from uistream_app.hooks import ChatHooks
from uistream_app.lifecycle import mcp
from uistream_app.lifecycle.shutdown import stop_gracefully
from uistream_app.models import Run
from uistream_app.protocol.events import Event, TextDelta, ToolApprovalRequest, ToolCall, ToolResult
from uistream_app.protocol.ui.stream import encode_events
from uistream_app.runs import MASKED_TOOL_ERROR, ToolLoop, UserMessage
from uistream_app.runs.scripted import ScriptedModel, call

from .server import free_port, serve_demo
from .test_chat_http import Browser, wait_for
from .test_chat_real_client import run_client, stored_messages

ROOT = Path(__file__).resolve().parent.parent
DEMO_SERVER = {"command": sys.executable, "args": [str(ROOT / "demo_project" / "mcp_server.py")]}


@pytest.fixture(autouse=True)
def _closed_after() -> Iterator[None]:
    yield
    mcp.close_all()


@pytest.fixture
def starts(tmp_path: Path) -> Path:
    """The file every start of the test server appends its pid to."""
    return tmp_path / "starts.txt"


def server_settings(starts: Path, **extra: Any) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": [str(ROOT / "tests" / "mcp_server.py")],
        "env": {"MCP_TEST_STARTS": str(starts)},
        **extra,
    }


def started(starts: Path) -> list[int]:
    return [int(line) for line in starts.read_text().split()] if starts.exists() else []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); its state in /proc says it is gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def tools_of(servers: dict[str, Any]) -> list[Any]:
    with override_settings(UISTREAM={"MCP_SERVERS": servers}):
        return ChatHooks().get_tools()


def run_loop(model: Any, tools: list[Any], prompt: str) -> list[Event]:
    async def go() -> list[Event]:
        return [e async for e in ToolLoop(model, tools).run([UserMessage(prompt)])]

    return asyncio.run(go())


def results(events: list[Event]) -> list[ToolResult]:
    return [e for e in events if isinstance(e, ToolResult)]


def answer(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def whoami(tools: list[Any]) -> int:
    events = run_loop(ScriptedModel([call("tests__whoami")], "ok"), tools, "who?")
    (result,) = results(events)
    assert not result.is_error, result.content
    return int(result.content["result"])


# -- the demo's server through the loop ------------------------------------------------


def test_the_demo_phrase_rolls_the_demo_servers_die_through_the_loop() -> None:
    tools = tools_of({"demo": DEMO_SERVER})
    assert [t.name for t in tools] == ["demo__roll_die"]
    assert tools[0].parameters["properties"]["sides"]["type"] == "integer"
    events = run_loop(DemoModel(delay_ms=0), tools, "roll a die with 6 sides")
    (called,) = [e for e in events if isinstance(e, ToolCall)]
    assert called.tool_name == "demo__roll_die"
    assert json.loads(called.input) == {"sides": 6}
    (result,) = results(events)
    assert not result.is_error
    rolled = result.content["result"]
    assert 1 <= rolled <= 6
    assert answer(events).endswith(f"You rolled a {rolled}.")


def test_a_die_of_a_thousand_sides_lands_anywhere_from_1_to_1000() -> None:
    tools = tools_of({"demo": DEMO_SERVER})
    seen = set()
    for _ in range(5):
        (result,) = results(run_loop(DemoModel(delay_ms=0), tools, "roll a die with 1000 sides"))
        seen.add(result.content["result"])
    assert all(1 <= n <= 1000 for n in seen)
    assert len(seen) > 1  # five rolls of a d1000 that all agree: not a die


# -- the server's errors are the call's tool errors -------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments", "logged"),
    [
        pytest.param("fail", {"reason": "no luck"}, "fail says: no luck", id="an isError result"),
        pytest.param("strict", {"value": "x"}, "errors.pydantic.dev", id="pydantic's text"),
        pytest.param("protocol_error", {}, "answered an error: protocol_error refuses on purpose", id="JSON-RPC"),
        pytest.param("leak", {}, "Authorization: [redacted]", id="a credential quoted"),
    ],
)
def test_a_servers_error_is_the_calls_masked_tool_error_and_its_text_is_logged(
    starts: Path, caplog: pytest.LogCaptureFixture, tool: str, arguments: dict[str, Any], logged: str
) -> None:
    """The server's own text (pydantic's, with its version; a quoted
    header) is for staff, in the log, redacted; the model and the client
    get the masked text, as for a Python tool's exception."""
    tools = tools_of({"tests": server_settings(starts)})
    with caplog.at_level("ERROR", logger="uistream_app"):
        events = run_loop(ScriptedModel([call(f"tests__{tool}", arguments)], "ok"), tools, "go")
    (result,) = results(events)
    assert result.is_error
    assert result.content == MASKED_TOOL_ERROR
    assert logged in caplog.text
    assert "sk-proj-" not in caplog.text
    assert len(started(starts)) == 1  # the session survives the server's error


def test_arguments_that_break_the_servers_schema_never_reach_it(starts: Path) -> None:
    tools = tools_of({"tests": server_settings(starts)})
    events = run_loop(ScriptedModel([call("tests__echo", {"text": 5})], "ok"), tools, "echo")
    errors = [e for e in events if type(e).__name__ == "ToolInputError"]
    assert len(errors) == 1
    assert "text" in errors[0].error_text


def test_a_slow_call_times_out_as_a_tool_error_and_the_session_goes_on(starts: Path) -> None:
    # The timeout is every call's: long enough for a quick call on a busy
    # machine (0.5 s was not, under CI's load), far below the slow one.
    tools = tools_of({"tests": server_settings(starts, timeout=3)})
    events = run_loop(ScriptedModel([call("tests__sleep", {"seconds": 30})], "ok"), tools, "sleep")
    (result,) = results(events)
    assert result.is_error
    assert result.content == "Tool tests__sleep timed out after 3 seconds."
    assert whoami(tools) == started(starts)[0]
    assert len(started(starts)) == 1


def test_a_calls_progress_streams_as_preliminary_outputs_before_its_result(starts: Path) -> None:
    tools = tools_of({"tests": server_settings(starts)})
    events = run_loop(ScriptedModel([call("tests__count", {"steps": 3})], "ok"), tools, "count")
    said = [(r.content, r.preliminary) for r in results(events)]
    assert said == [
        ({"progress": 1.0, "total": 3.0, "message": "step 1"}, True),
        ({"progress": 2.0, "total": 3.0, "message": "step 2"}, True),
        ({"progress": 3.0, "total": 3.0, "message": "step 3"}, True),
        ({"result": "counted"}, None),
    ]
    # What the client is sent: ai@7's preliminary outputs, then the output.
    chunks = [c for c in encode_events(events) if c["type"] == "tool-output-available"]
    assert [(c["output"], c.get("preliminary")) for c in chunks] == [
        ({"progress": 1.0, "total": 3.0, "message": "step 1"}, True),
        ({"progress": 2.0, "total": 3.0, "message": "step 2"}, True),
        ({"progress": 3.0, "total": 3.0, "message": "step 3"}, True),
        ({"result": "counted"}, None),
    ]


def test_a_server_whose_tools_changed_lends_the_new_list_to_the_next_request(starts: Path) -> None:
    servers = {"tests": server_settings(starts)}
    before = {t.name for t in tools_of(servers)}
    assert "tests__grown" not in before
    tools = tools_of(servers)
    events = run_loop(ScriptedModel([call("tests__grow")], "ok"), tools, "grow")
    assert [r.content for r in results(events)] == [{"result": "grew"}]
    # The change comes on its own stream, beside the call's answer.
    wait_for(lambda: tools[0].connection.tools_changed, "the server's tool change to be heard")
    after = tools_of(servers)
    assert {t.name for t in after} == before | {"tests__grown"}
    events = run_loop(ScriptedModel([call("tests__grown")], "ok"), after, "use it")
    assert [r.content for r in results(events)] == [{"result": "grown here"}]
    assert len(started(starts)) == 1  # the same session: listed again, not reconnected


def test_a_server_that_dies_mid_call_is_a_tool_error_and_the_next_call_starts_it_again(starts: Path) -> None:
    tools = tools_of({"tests": server_settings(starts)})
    first = whoami(tools)
    events = run_loop(ScriptedModel([call("tests__crash")], "ok"), tools, "crash")
    (result,) = results(events)
    assert result.is_error
    assert result.content == "The MCP server 'tests' closed the connection during the call."
    second = whoami(tools)
    assert second != first
    assert started(starts) == [first, second]
    assert not alive(first)


def test_a_server_killed_between_runs_is_started_again_for_the_next_call(starts: Path) -> None:
    tools = tools_of({"tests": server_settings(starts)})
    first = whoami(tools)
    os.kill(first, 9)
    wait_for(lambda: not alive(first), "the server to die")
    # The session saw its server's stdout close: the next call opens another.
    wait_for(lambda: all(s.dead for s in _sessions()), "the session to notice")
    second = whoami(tools)
    assert second != first
    assert started(starts) == [first, second]


def _sessions() -> list[Any]:
    return [c._session for c in mcp.open_connections() if c._session is not None]


def test_a_turn_waits_for_a_servers_first_tool_list_without_holding_the_event_loop(starts: Path) -> None:
    """A new process's first chat waits for an MCP server to start and list
    its tools (the turn path awaits ``mcp_listed`` before it asks the
    hooks): the event loop serves everything else meanwhile, and the sync
    ``get_tools`` hook then answers from the list without waiting."""
    servers = {"tests": server_settings(starts)}

    async def first_turn() -> int:
        ticks = 0  # another request's work on the same loop
        listed = asyncio.ensure_future(mcp.mcp_listed())
        while not listed.done():
            await asyncio.sleep(0.01)
            ticks += 1
        await listed
        return ticks

    with override_settings(UISTREAM={"MCP_SERVERS": servers}):
        ticks = asyncio.run(first_turn())
        (conn,) = [c for c in mcp.open_connections() if c.name == "tests"]
        assert conn._tools is not None  # listed
        assert conn._listing is None  # nothing under way
        tools = ChatHooks().get_tools()
        assert conn._listing is None  # the hook started no listing to wait for
    # The loop went round while the server started (a Python process: far
    # longer than three of its turns); holding it, it would have gone
    # round once, after the listing.
    assert ticks >= 3
    assert {"tests__whoami", "tests__echo"} <= {t.name for t in tools}
    assert len(started(starts)) == 1


def test_a_server_that_cannot_start_lends_no_tools_and_the_request_goes_on() -> None:
    broken = {"broken": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(2)"]}}
    assert tools_of(broken) == []
    # Asked again in the background from now on: no request waits for it.
    (conn,) = [c for c in mcp.open_connections() if c.name == "broken"]
    assert conn._failed_at is not None
    assert tools_of(broken) == []
    assert conn._listing is None  # within RETRY_SECONDS: nothing started, nothing waited for


# -- one session per server per process ---------------------------------------------------


def test_one_server_process_serves_every_run_of_the_process(starts: Path) -> None:
    pids = set()
    for _ in range(3):
        # Each request asks for the tools again and runs on an event loop of its own.
        pids.add(whoami(tools_of({"tests": server_settings(starts)})))
    assert len(pids) == 1
    assert started(starts) == list(pids)


def test_approval_applies_to_an_mcp_tool_like_any_tool(starts: Path) -> None:
    tools = tools_of({"tests": server_settings(starts, requires_approval=["echo"])})
    by_name = {t.name: t for t in tools}
    assert by_name["tests__echo"].needs_approval({"text": "x"})
    assert not by_name["tests__whoami"].needs_approval({})
    events = run_loop(ScriptedModel([call("tests__echo", {"text": "hi"})], "ok"), tools, "echo")
    assert [type(e) for e in events if isinstance(e, ToolApprovalRequest | ToolResult)] == [ToolApprovalRequest]
    assert started(starts) == [whoami(tools)]  # listed, never called without approval


def test_a_view_chooses_its_servers() -> None:
    class NoServers(ChatHooks):
        mcp_servers = ()

    with override_settings(UISTREAM={"MCP_SERVERS": {"demo": DEMO_SERVER}}):
        assert NoServers().get_tools() == []


# -- shutdown ------------------------------------------------------------------------------


def test_a_graceful_stop_closes_the_sessions_and_the_servers_exit(starts: Path) -> None:
    tools = tools_of({"tests": server_settings(starts)})
    pid = whoami(tools)
    assert alive(pid)
    asyncio.run(stop_gracefully(0, 0))
    wait_for(lambda: not alive(pid), "the MCP server to exit")
    assert whoami(tools) != pid  # a later call opens a new session


# -- streamable HTTP ------------------------------------------------------------------------


def start_http_server(port: int, starts: Path) -> subprocess.Popen[bytes]:
    """``tests/mcp_server.py`` serving streamable HTTP on ``port``, listening."""
    env = {**os.environ, "MCP_TEST_STARTS": str(starts)}
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "mcp_server.py"), "--http", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            assert process.poll() is None, "the MCP server did not start"
            assert time.monotonic() < deadline, "the MCP server did not listen"
            time.sleep(0.05)


@pytest.fixture
def http_port() -> int:
    return free_port()


@pytest.fixture
def http_server(http_port: int, starts: Path) -> Iterator[str]:
    process = start_http_server(http_port, starts)
    try:
        yield f"http://127.0.0.1:{http_port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


def test_a_streamable_http_server_lends_its_tools_and_errors(http_server: str) -> None:
    tools = tools_of({"tests": {"url": http_server, "headers": {"X-Test": "1"}}})
    assert "tests__echo" in [t.name for t in tools]
    events = run_loop(ScriptedModel([call("tests__echo", {"text": "über"})], "ok"), tools, "echo")
    (result,) = results(events)
    assert not result.is_error
    assert result.content == {"result": "über"}
    events = run_loop(ScriptedModel([call("tests__fail", {"reason": "http"})], "ok"), tools, "fail")
    (result,) = results(events)
    assert result.is_error
    assert result.content == MASKED_TOOL_ERROR


# -- settings --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("servers", "says"),
    [
        ([], "must be a dict"),
        ({"a__b": {"command": "python"}}, "'a__b'"),
        ({"x": {"command": "python", "url": "http://h/mcp"}}, "either 'command'"),
        ({"x": {}}, "either 'command'"),
        ({"x": {"url": "ftp://h"}}, "http:// or https://"),
        ({"x": {"command": "python", "timeout": 0}}, "'timeout'"),
        ({"x": {"command": "python", "args": "server.py"}}, "'args'"),
        ({"x": {"command": "python", "colour": "red"}}, "unknown keys ['colour']"),
        ({"x": {"command": "no-such-program-here"}}, "is not an executable"),
    ],
)
def test_a_malformed_setting_is_e021(servers: Any, says: str) -> None:
    with override_settings(UISTREAM={"MCP_SERVERS": servers}):
        errors = [e for e in run_checks(tags=["compatibility"]) if e.id == "uistream_app.E021"]
    assert len(errors) == 1
    assert says in errors[0].msg


def test_the_demo_settings_pass_the_check() -> None:
    with override_settings(UISTREAM={"MCP_SERVERS": {"demo": DEMO_SERVER}}):
        assert [e for e in run_checks(tags=["compatibility"]) if e.id == "uistream_app.E021"] == []


def test_long_and_odd_tool_names_fit_every_provider() -> None:
    assert mcp.tool_name("demo", "roll_die") == "demo__roll_die"
    assert mcp.tool_name("fs", "read.file/v2") == "fs__read_file_v2"
    long = mcp.tool_name("server", "x" * 100)
    assert len(long) == 64
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", long)
    assert long != mcp.tool_name("server", "x" * 99)


# -- the demo phrase through a chat server and the real ai@7 client ----------------------


@pytest.mark.django_db(transaction=True)
def test_the_demo_phrase_through_a_chat_server_and_the_real_client(node: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from django.conf import settings as django_settings

    servers = {**django_settings.UISTREAM, "MCP_SERVERS": {"demo": DEMO_SERVER}}
    with override_settings(UISTREAM=servers):
        for base in serve_demo(monkeypatch, 1):
            browser = Browser(base)
            out = run_client(
                node, base, browser, chatId="dice", version=7, steps=[{"send": "roll a die with 20 sides"}]
            )
            assert out["error"] is None
            wait_for(lambda: not Run.objects.filter(status="running").exists(), "the run to be stored")
            stored = stored_messages("dice")
    assert out["messages"] == stored
    parts = stored[1]["parts"]
    (tool,) = [p for p in parts if p["type"].startswith("tool-") or p["type"] == "dynamic-tool"]
    assert tool["type"].endswith("roll_die")
    assert tool["state"] == "output-available"
    assert tool["input"] == {"sides": 20}
    rolled = tool["output"]["result"]
    assert 1 <= rolled <= 20
    said = "".join(p["text"] for p in parts if p["type"] == "text")
    assert said.endswith(f"You rolled a {rolled}.")


def test_without_the_sdk_the_app_imports_and_the_error_names_the_extra() -> None:
    code = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('mcp', 'mcp_types'):
            raise ImportError('blocked: ' + name)
sys.meta_path.insert(0, Block())
import os, django
os.environ['DJANGO_SETTINGS_MODULE'] = 'tests.settings'
django.setup()
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
import uistream_app.urls, uistream_app.hooks, uistream_app.lifecycle.mcp
from uistream_app.hooks import ChatHooks
with override_settings(UISTREAM={'MCP_SERVERS': {'demo': {'command': sys.executable}}}):
    print([e.hint for e in run_checks(tags=['compatibility']) if e.id == 'uistream_app.E021'])
    try:
        ChatHooks().get_tools()
    except ImproperlyConfigured as exc:
        print(exc)
assert 'mcp' not in sys.modules
"""
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    hints, error = result.stdout.splitlines()
    assert hints == "['pip install django-uistream[mcp]']"
    assert "pip install django-uistream[mcp]" in error


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded")
def test_a_forked_child_opens_sessions_of_its_own(starts: Path) -> None:
    # A server process that forks workers after it used MCP (a preloading
    # server): the parent's session lives on a thread the child has not got.
    tools = tools_of({"tests": server_settings(starts)})
    parent_server = whoami(tools)
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        try:
            signal.alarm(60)
            os.write(write_end, str(whoami(tools_of({"tests": server_settings(starts)}))).encode())
            mcp.close_all()
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        child_server = int(pipe.read() or 0)
    os.waitpid(child, 0)
    assert child_server not in (0, parent_server)
    assert started(starts) == [parent_server, child_server]
    assert whoami(tools) == parent_server  # the parent's session is untouched


def test_an_http_server_that_went_away_is_a_tool_error_and_a_new_session_follows_its_return(
    http_port: int, starts: Path
) -> None:
    process = start_http_server(http_port, starts)
    try:
        tools = tools_of({"tests": {"url": f"http://127.0.0.1:{http_port}/mcp"}})
        first = whoami(tools)
        process.terminate()
        process.wait(10)
        events = run_loop(ScriptedModel([call("tests__whoami")], "ok"), tools, "who?")
        (result,) = results(events)
        assert result.is_error
        assert result.content.startswith("The MCP server 'tests' ")
        process = start_http_server(http_port, starts)
        second = whoami(tools)
        assert second != first
        assert started(starts) == [first, second]
    finally:
        process.terminate()
        process.wait(10)
