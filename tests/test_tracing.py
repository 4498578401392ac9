"""OpenTelemetry traces of runs (docs/operations.md, "Tracing").

The project's ASGI application behind the OpenTelemetry ASGI
instrumentation, served over real TCP; the spans land in the SDK's
``InMemorySpanExporter``. Attribute names are the semantic conventions
package's constants. A run on a worker (Celery's, a Tasks backend's): the
real web server and worker processes of tests/test_celery_executor.py and
tests/test_tasks_executor.py, each writing its spans
to a file this test reads.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from django.test import Client, override_settings
from django.urls import path, reverse
from opentelemetry import trace
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
from opentelemetry.semconv._incubating.attributes import error_attributes as ERR
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as GA
from opentelemetry.trace import SpanKind
from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel

from demo_project.urls import urlpatterns as demo_urlpatterns
from uistream_app.adapters import AgentAdapter, AgentTurn
from uistream_app.models import Run
from uistream_app.protocol import events as ev
from uistream_app.runs import ModelMessage, ModelResponseError, ScriptedModel
from uistream_app.runs.scripted import call
from uistream_app.views import ChatView

from .live.conftest import redis_config  # noqa: F401  (fixture)
from .server import ROOT, ASGIServer
from .test_chat_http import Browser, read_chunks, text_of, wait_for
from .tracing_support import EXPORTER, SWITCH, install_in_memory, read_span_file, span_record

pytestmark = pytest.mark.django_db(transaction=True)

SETTINGS: dict[str, Any] = {
    "ALLOW_ANONYMOUS": True,
    "MODEL": "demo_project.demo_model.make_model",
    "TOOLS": [
        "demo_project.demo_model.get_weather",
        "demo_project.demo_model.calculate",
        "demo_project.demo_model.send_email",
    ],
    "LOG_WRITER": "thread",
}


class FailingModel:
    """Says a few words, then its provider's stream breaks."""

    name = "breaks"

    async def stream(
        self, messages: Sequence[ModelMessage], tools: Sequence[Any] = (), options: Any = None
    ) -> AsyncIterator[ev.Event]:
        yield ev.TextDelta("Let me see")
        raise ModelResponseError("the provider's stream ended in the middle of an event")


TRACER = trace.get_tracer("a-framework")


#: Set (in the server's thread) once ``wait_for_the_stop`` runs.
TOOL_STARTED = threading.Event()


async def wait_for_the_stop(place: str) -> str:
    """Look ``place`` up (a tool that never answers: the test stops the run while it waits)."""
    TOOL_STARTED.set()
    await asyncio.Event().wait()
    return "never"


def slow_tool_model() -> ScriptedModel:
    return ScriptedModel([call("wait_for_the_stop", {"place": "Lyon"})], "Done.", name="scripted")


class TracingAdapter(AgentAdapter):
    """An agent framework that makes spans of its own, as pydantic-ai and
    the Agents SDK do, with the API's current context."""

    framework = "spanning"

    async def run(self, turn: AgentTurn) -> AsyncIterator[ev.Event]:
        with TRACER.start_as_current_span("framework agent run"):
            yield ev.TextDelta(await self.model_request())
        yield ev.Done("stop")

    async def model_request(self) -> str:
        with TRACER.start_as_current_span("framework model request"):
            return "Hello from the framework."


class FrameworkChatView(ChatView):
    agent = TracingAdapter(object())


async def pydantic_ai_hello(messages: Any, info: Any) -> AsyncIterator[str]:
    yield "Hello from pydantic-ai."


instrumented_agent = Agent(FunctionModel(stream_function=pydantic_ai_hello))
instrumented_agent.instrument = True  # pydantic-ai's own OpenTelemetry instrumentation


class InstrumentedPydanticAIView(ChatView):
    agent = instrumented_agent


urlpatterns = [
    *demo_urlpatterns,
    path("framework/chat", FrameworkChatView.as_view()),
    path("pydantic-ai/chat", InstrumentedPydanticAIView.as_view()),
]


@pytest.fixture
def spans() -> Iterator[None]:
    """This process records spans for the test (and only for it)."""
    install_in_memory()
    EXPORTER.clear()
    SWITCH.on = True
    try:
        yield
    finally:
        SWITCH.on = False
        EXPORTER.clear()


@pytest.fixture
def server(spans: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The project behind the ASGI instrumentation, on 127.0.0.1."""
    from django.core.asgi import get_asgi_application

    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "1")
    srv = ASGIServer(OpenTelemetryMiddleware(get_asgi_application()))
    url = srv.start()
    try:
        with override_settings(UISTREAM=SETTINGS, ROOT_URLCONF=__name__):
            yield url
    finally:
        srv.stop()


def finished() -> list[dict[str, Any]]:
    return [span_record(span) for span in EXPORTER.get_finished_spans()]


def run_finished() -> bool:
    return Run.objects.exists() and not Run.objects.filter(status="running").exists()


def children(records: list[dict[str, Any]], parent: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in records if r["parent_id"] == parent["span_id"]]


def the(records: list[dict[str, Any]], prefix: str) -> dict[str, Any]:
    found = [r for r in records if r["name"].startswith(prefix)]
    assert len(found) == 1, [r["name"] for r in records]
    return found[0]


def request_span(records: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The ASGI instrumentation's server span of the request ``name``."""
    found_all = [r for r in records if r["kind"] == "SERVER" and r["name"] == name]
    assert len(found_all) == 1, [(r["name"], r["kind"]) for r in records]
    (found,) = found_all
    return found


def chat(server: str, chat_id: str, text: str, path: str = "/api/chat") -> list[dict[str, Any]]:
    browser = Browser(server)
    response = browser.post(path, browser.chat_body(chat_id, text))
    assert response.status_code == 200, response.text
    chunks = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
    wait_for(run_finished, "the run to be stored")
    # The server span ends once the response is sent, a moment after the client has it all.
    wait_for(lambda: any(r["kind"] == "SERVER" and r["name"] == f"POST {path}" for r in finished()), "the request span")
    return chunks


def test_a_two_step_tool_run_is_a_tree_under_the_request(server: str, django_user_model: Any) -> None:
    chunks = chat(server, "weather-1", "What's the weather in Paris?")
    call = next(c for c in chunks if c["type"] == "tool-input-available")
    records = finished()

    request = request_span(records, "POST /api/chat")
    agent = the(records, "invoke_agent")
    run = Run.objects.get()
    assert agent["parent_id"] == request["span_id"]
    assert agent["trace_id"] == request["trace_id"] == run.trace_id
    assert agent["name"] == "invoke_agent uistream-demo"
    assert agent["kind"] == "INTERNAL"
    assert agent["attributes"][GA.GEN_AI_OPERATION_NAME] == GA.GenAiOperationNameValues.INVOKE_AGENT.value
    # The conversation's key: chat ids are only unique per owner.
    assert agent["attributes"][GA.GEN_AI_CONVERSATION_ID] == run.conversation_id
    assert run.conversation.client_id == "weather-1"
    assert agent["attributes"]["uistream.owner.kind"] == "anonymous"
    assert agent["attributes"]["uistream.run.status"] == "completed"
    assert agent["attributes"][GA.GEN_AI_RESPONSE_FINISH_REASONS] == ["stop"]
    assert agent["attributes"][GA.GEN_AI_USAGE_INPUT_TOKENS] == run.usage["input_tokens"]
    assert agent["attributes"][GA.GEN_AI_USAGE_OUTPUT_TOKENS] == run.usage["output_tokens"]
    assert agent["status"] == "UNSET"

    steps = sorted(children(records, agent), key=lambda r: records.index(r))
    names = sorted(r["name"] for r in steps)
    assert names == ["chat uistream-demo", "chat uistream-demo", "execute_tool get_weather"]
    first, second = [r for r in steps if r["name"].startswith("chat")]
    tool = the(steps, "execute_tool")
    for model_call in (first, second):
        attributes = model_call["attributes"]
        assert model_call["kind"] == "CLIENT"
        assert attributes[GA.GEN_AI_OPERATION_NAME] == GA.GenAiOperationNameValues.CHAT.value
        assert attributes[GA.GEN_AI_REQUEST_MODEL] == "uistream-demo"
        assert attributes[GA.GEN_AI_USAGE_INPUT_TOKENS] > 0
        assert attributes[GA.GEN_AI_USAGE_OUTPUT_TOKENS] > 0
    # The first call asked for the tool, the second answered from it.
    assert first["attributes"][GA.GEN_AI_RESPONSE_FINISH_REASONS] == ["tool-calls"]
    assert second["attributes"][GA.GEN_AI_RESPONSE_FINISH_REASONS] == ["stop"]
    total_in = first["attributes"][GA.GEN_AI_USAGE_INPUT_TOKENS] + second["attributes"][GA.GEN_AI_USAGE_INPUT_TOKENS]
    assert total_in == run.usage["input_tokens"]

    assert tool["attributes"][GA.GEN_AI_OPERATION_NAME] == GA.GenAiOperationNameValues.EXECUTE_TOOL.value
    assert tool["attributes"][GA.GEN_AI_TOOL_NAME] == "get_weather"
    assert tool["attributes"][GA.GEN_AI_TOOL_CALL_ID] == call["toolCallId"]
    assert tool["attributes"]["uistream.tool.outcome"] == "success"
    # What the tool was given and gave back may be personal: not by default.
    for record in records:
        assert GA.GEN_AI_TOOL_CALL_ARGUMENTS not in record["attributes"]
        assert GA.GEN_AI_TOOL_CALL_RESULT not in record["attributes"]

    # The operator finds the trace from the run's page in the admin.
    admin = Client()
    admin.force_login(django_user_model.objects.create_superuser("root", "root@example.com", "pw"))
    page = admin.get(reverse("admin:uistream_app_run_change", args=[run.pk]))
    assert page.status_code == 200
    assert f"<dt>trace</dt><dd>{run.trace_id}</dd>" in page.content.decode()


def test_tool_content_is_traced_only_when_the_setting_allows(server: str) -> None:
    with override_settings(UISTREAM={**SETTINGS, "TRACE_CONTENT": True}):
        chunks = chat(server, "weather-2", "What's the weather in Oslo?")
    output = next(c for c in chunks if c["type"] == "tool-output-available")
    tool = the(finished(), "execute_tool")
    assert json.loads(tool["attributes"][GA.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"city": "Oslo"}
    assert json.loads(tool["attributes"][GA.GEN_AI_TOOL_CALL_RESULT]) == output["output"]


def test_a_failing_tool_call_says_why(server: str) -> None:
    chunks = chat(server, "divide", "compute 1/0")
    assert any(c["type"] == "tool-output-error" for c in chunks)
    tool = the(finished(), "execute_tool calculate")
    assert tool["status"] == "ERROR"
    assert tool["attributes"][ERR.ERROR_TYPE] == "ToolError"
    assert tool["attributes"]["uistream.tool.outcome"] == "error"


def test_a_failed_run(server: str) -> None:
    with override_settings(UISTREAM={**SETTINGS, "MODEL": f"{__name__}.FailingModel"}):
        chunks = chat(server, "broken", "hello")
    assert chunks[-1]["type"] == "error"
    run = Run.objects.get()
    assert run.status == "failed"
    records = finished()
    agent = the(records, "invoke_agent")
    assert agent["trace_id"] == run.trace_id
    assert agent["status"] == "ERROR"
    assert agent["attributes"]["uistream.run.status"] == "failed"
    assert agent["attributes"][ERR.ERROR_TYPE] == run.error_code == "ModelResponseError"
    (model_call,) = children(records, agent)
    assert model_call["name"] == "chat breaks"
    assert model_call["status"] == "ERROR"
    assert model_call["attributes"][ERR.ERROR_TYPE] == "ModelResponseError"
    # The exception's text stays out of the trace without TRACE_CONTENT.
    assert "exception" not in agent["events"]


def test_a_stopped_run(server: str) -> None:
    browser = Browser(server)
    with browser.stream("stopping", "count to 400") as response:
        read_chunks(response, stop=lambda cs: text_of(cs).count(" ") >= 5)
        assert browser.post("/api/chat/stopping/stop").json() == {"stopped": True}
        rest, _ = read_chunks(response)
    assert rest[-1] == {"type": "abort", "reason": "stopped"}
    wait_for(run_finished, "the run to be stored")
    assert Run.objects.get().status == "stopped"
    records = finished()
    agent = the(records, "invoke_agent")
    assert agent["attributes"]["uistream.run.status"] == "stopped"
    assert agent["status"] == "UNSET"  # stopped on purpose: not an error
    (model_call,) = children(records, agent)
    # The model call was cut short: it ended with the run, with no reason of its own.
    assert model_call["name"] == "chat uistream-demo"
    assert GA.GEN_AI_RESPONSE_FINISH_REASONS not in model_call["attributes"]
    assert model_call["status"] == "UNSET"


def test_a_run_stopped_while_a_tool_runs(server: str) -> None:
    TOOL_STARTED.clear()
    settings = {**SETTINGS, "MODEL": f"{__name__}.slow_tool_model", "TOOLS": [f"{__name__}.wait_for_the_stop"]}
    browser = Browser(server)
    with override_settings(UISTREAM=settings), browser.stream("stopping-tool", "Where?") as response:
        read_chunks(response, stop=lambda cs: any(c["type"] == "tool-input-available" for c in cs))
        assert TOOL_STARTED.wait(15)
        assert browser.post("/api/chat/stopping-tool/stop").json() == {"stopped": True}
        rest, _ = read_chunks(response)
    assert rest[-1] == {"type": "abort", "reason": "stopped"}
    wait_for(run_finished, "the run to be stored")
    records = finished()
    agent = the(records, "invoke_agent")
    assert agent["attributes"]["uistream.run.status"] == "stopped"
    tool = the(records, "execute_tool")
    assert tool["parent_id"] == agent["span_id"]
    assert tool["attributes"][GA.GEN_AI_TOOL_NAME] == "wait_for_the_stop"
    assert tool["attributes"]["uistream.tool.outcome"] == "cancelled"
    assert tool["status"] == "UNSET"  # stopping a run is no failure of its tool


def test_a_frameworks_own_spans_nest_under_the_run(server: str) -> None:
    chunks = chat(server, "framework", "hi", path="/framework/chat")
    assert text_of(chunks) == "Hello from the framework."
    records = finished()
    agent = the(records, "invoke_agent")
    framework_run = the(records, "framework agent run")
    assert framework_run["parent_id"] == agent["span_id"]
    assert the(records, "framework model request")["parent_id"] == framework_run["span_id"]


def test_pydantic_ais_own_spans_nest_under_the_run(server: str) -> None:
    chunks = chat(server, "pydantic-ai", "hi", path="/pydantic-ai/chat")
    assert text_of(chunks) == "Hello from pydantic-ai."
    records = finished()
    (ours,) = [r for r in records if "uistream.run.id" in r["attributes"]]
    assert ours["parent_id"] == request_span(records, "POST /pydantic-ai/chat")["span_id"]
    # pydantic-ai's agent run under the run's span, its model request under that.
    (agent_run,) = [r for r in records if r["parent_id"] == ours["span_id"]]
    assert agent_run["name"] == "invoke_agent agent"
    (model_request,) = [r for r in records if r["parent_id"] == agent_run["span_id"]]
    assert model_request["name"] == "chat function::pydantic_ai_hello"


def test_nothing_is_recorded_without_a_tracer_provider() -> None:
    # A fresh interpreter: the SDK installed, no provider configured. The
    # run's row gets no trace id, and the loop runs as without the package.
    code = """
import asyncio, django
django.setup()
from uistream_app.runs import telemetry
context, trace_id = telemetry.start_run(run_id="r", conversation_id="c", model="m", owner_kind="user")
assert telemetry.ENABLED and context is None and trace_id == "", (context, trace_id)
print("ok")
"""
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**_env(), "DJANGO_SETTINGS_MODULE": "tests.settings"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_the_core_runs_without_opentelemetry() -> None:
    # As if the extra were not installed: the tool loop over the demo model
    # and its tools streams the same events, and no hook fails.
    code = """
import asyncio, sys
sys.modules["opentelemetry"] = None
from uistream_app.runs import telemetry
assert telemetry.ENABLED is False
from uistream_app.runs import ToolLoop, UserMessage
from demo_project.demo_model import DEMO_TOOLS, DemoModel
async def main():
    loop = ToolLoop(DemoModel(delay_ms=0), DEMO_TOOLS)
    events = [type(e).__name__ async for e in loop.run([UserMessage("weather in Paris?")])]
    assert "ToolResult" in events and events[-1] == "Done", events
    assert telemetry.carrier() == {}
    with telemetry.continued({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}):
        pass
asyncio.run(main())
print("ok")
"""
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=_env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def _env() -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = str(ROOT)
    return env


# -- a run on a worker ----------------------------------------------------------


@pytest.mark.parametrize("executor", ["celery", "tasks"])
def test_a_run_on_a_worker_continues_the_requests_trace(
    tmp_path: Path, redis_config: dict[str, Any], executor: str
) -> None:
    from .test_celery_executor import Stack, require_celery
    from .test_tasks_executor import TasksStack, require

    span_file = tmp_path / "spans.jsonl"
    uistream = {**SETTINGS, "BROKER": redis_config, "EXECUTOR": executor, "ON_DISCONNECT": "finish"}
    tag = redis_config["PREFIX"].rsplit(":", 1)[-1]
    if executor == "celery":
        require_celery()
        stack = Stack(uistream, redis_config, tag)
    else:
        require("django_tasks_db", "django-tasks-db (pip install 'django-uistream[tasks]')")
        stack = TasksStack(uistream, redis_config, tag, "database")
    stack.env["UISTREAM_TEST_SPAN_FILE"] = str(span_file)
    try:
        web, _ = stack.web(app="tests.otel_asgi:application")
        stack.worker()
        # The caller's own trace context, as a browser's or a proxy's.
        caller_trace, caller_span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
        browser = Browser(web)
        response = browser.client.post(
            "/api/chat",
            json=browser.chat_body("on-worker", "What's the weather in Lima?"),
            headers={"X-CSRFToken": browser.token, "traceparent": f"00-{caller_trace}-{caller_span}-01"},
        )
        assert response.status_code == 200
        assert "tool-output-available" in response.text
        wait_for(run_finished, "the worker's run to be stored")
        wait_for(lambda: any(r["name"].startswith("invoke_agent") for r in read_span_file(span_file)), "the spans")
    finally:
        stack.close()

    records = read_span_file(span_file)
    request = request_span(records, "POST /api/chat")
    agent = the(records, "invoke_agent")
    assert request["trace_id"] == caller_trace
    assert request["parent_id"] == caller_span
    # Made in the worker, a child of the web process's request span.
    assert agent["parent_id"] == request["span_id"]
    assert agent["trace_id"] == caller_trace == Run.objects.get().trace_id
    names = sorted(r["name"] for r in children(records, agent))
    assert names == ["chat uistream-demo", "chat uistream-demo", "execute_tool get_weather"]


# -- under WSGI -----------------------------------------------------------------


def test_under_wsgi_the_run_is_a_child_of_the_request_span(spans: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # The run starts in the portal's event loop (another thread): the
    # request's span goes along. The span is the test's own, opened around
    # the WSGI call as a WSGI instrumentation would.
    from django.core.wsgi import get_wsgi_application

    from .server import _QuietHandler, _ThreadingWSGIServer

    django_app = get_wsgi_application()
    tracer = trace.get_tracer("a-wsgi-instrumentation")

    def application(environ: dict[str, Any], start_response: Any) -> Any:
        with tracer.start_as_current_span(f"{environ['REQUEST_METHOD']} {environ['PATH_INFO']}", kind=SpanKind.SERVER):
            return django_app(environ, start_response)

    import threading
    from wsgiref.simple_server import make_server

    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "1")
    server = make_server("127.0.0.1", 0, application, _ThreadingWSGIServer, _QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with override_settings(UISTREAM=SETTINGS):
            browser = Browser(f"http://127.0.0.1:{server.server_port}")
            response = browser.post("/api/chat", browser.chat_body("wsgi-trace", "What's the weather in Rome?"))
            assert response.status_code == 200
            wait_for(run_finished, "the run to be stored")
    finally:
        server.shutdown()
        server.server_close()
    records = finished()
    request = request_span(records, "POST /api/chat")
    agent = the(records, "invoke_agent")
    assert agent["parent_id"] == request["span_id"]
    assert sorted(r["name"] for r in children(records, agent)) == [
        "chat uistream-demo",
        "chat uistream-demo",
        "execute_tool get_weather",
    ]


def test_feedback_on_an_answer_is_an_evaluation_on_the_runs_trace(server: str) -> None:
    """A rating of an answer is the GenAI conventions' evaluation event, on
    a span under the run's own span, in the run's trace: a tracing backend
    shows the score beside the run. The comment is the user's words: only
    with TRACE_CONTENT."""
    browser = Browser(server)
    response = browser.post("/api/chat", browser.chat_body("rated-1", "count to 2"))
    assert response.status_code == 200, response.text
    wait_for(run_finished, "the run to be stored")
    run = Run.objects.get()
    wait_for(lambda: any(r["name"].startswith("invoke_agent") for r in finished()), "the run's span")
    agent = the(finished(), "invoke_agent")
    assert (run.trace_id, run.span_id) == (agent["trace_id"], agent["span_id"])
    answer = run.conversation.messages.get(role="assistant")
    url = f"/api/conversations/rated-1/messages/{answer.pk}/feedback"

    assert browser.post(url, {"rating": "down", "reason": "inaccurate", "comment": "wrong"}).status_code == 201
    with override_settings(UISTREAM={**SETTINGS, "TRACE_CONTENT": True}):
        assert browser.post(url, {"rating": "up", "comment": "fine after all"}).status_code == 200

    first, second = [span for span in EXPORTER.get_finished_spans() if span.name == "feedback"]
    for span in (first, second):
        record = span_record(span)
        assert (record["trace_id"], record["parent_id"]) == (run.trace_id, run.span_id)
        assert record["attributes"]["uistream.run.id"] == str(run.pk)
    (down,) = first.events
    (up,) = second.events
    assert down.name == up.name == "gen_ai.evaluation.result"
    assert dict(down.attributes or {}) == {
        GA.GEN_AI_EVALUATION_NAME: "user_feedback",
        GA.GEN_AI_EVALUATION_SCORE_LABEL: "down",
        GA.GEN_AI_EVALUATION_SCORE_VALUE: -1.0,
        "uistream.feedback.reason": "inaccurate",
    }
    assert dict(up.attributes or {}) == {
        GA.GEN_AI_EVALUATION_NAME: "user_feedback",
        GA.GEN_AI_EVALUATION_SCORE_LABEL: "up",
        GA.GEN_AI_EVALUATION_SCORE_VALUE: 1.0,
        GA.GEN_AI_EVALUATION_EXPLANATION: "fine after all",
    }


# -- the demo's exporter --------------------------------------------------------


def test_the_demo_sends_its_runs_to_an_otlp_collector() -> None:
    # A collector of our own on 127.0.0.1 receives what the demo's settings
    # configure when OTEL_EXPORTER_OTLP_ENDPOINT is set: OTLP over
    # HTTP/protobuf, service "uistream-demo", the run's span tree.
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    received: list[tuple[str, str, bytes]] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, self.headers["Content-Type"], body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    collector = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    code = """
import asyncio, django
django.setup()
from opentelemetry import trace
from uistream_app.runs import telemetry
from uistream_app.runs import ToolLoop, UserMessage
from demo_project.demo_model import DEMO_TOOLS, DemoModel
context, trace_id = telemetry.start_run(run_id="r1", conversation_id="c1", model="uistream-demo", owner_kind="user")
async def run():
    loop = ToolLoop(DemoModel(delay_ms=0), DEMO_TOOLS)
    async for _ in loop.run([UserMessage("weather in Paris?")]):
        pass
    telemetry.end_run("completed", finish_reason="stop", usage={})
context.run(asyncio.run, run())
trace.get_tracer_provider().shutdown()
print(trace_id)
"""
    try:
        env = {
            **_env(),
            "DJANGO_SETTINGS_MODULE": "demo_project.settings",
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.server_port}",
        }
        result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env)
    finally:
        collector.shutdown()
        collector.server_close()
    assert result.returncode == 0, result.stderr
    trace_id = result.stdout.strip()
    assert received
    spans: dict[str, tuple[str, str]] = {}  # span id → (name, parent span id)
    for path_, content_type, body in received:
        assert (path_, content_type) == ("/v1/traces", "application/x-protobuf")
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            assert resource["service.name"] == "uistream-demo"
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    assert span.trace_id.hex() == trace_id
                    spans[span.span_id.hex()] = (span.name, span.parent_span_id.hex())
    (root,) = [span_id for span_id, (name, parent) in spans.items() if not parent]
    assert spans[root][0] == "invoke_agent uistream-demo"
    assert sorted(name for name, parent in spans.values() if parent == root) == [
        "chat uistream-demo",
        "chat uistream-demo",
        "execute_tool get_weather",
    ]


def test_without_the_variable_the_demo_configures_nothing() -> None:
    code = """
import django
django.setup()
from opentelemetry import trace
print(type(trace.get_tracer_provider()).__name__)
"""
    env = {**_env(), "DJANGO_SETTINGS_MODULE": "demo_project.settings"}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ProxyTracerProvider"
