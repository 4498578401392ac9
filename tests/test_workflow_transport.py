"""``WorkflowChatTransport`` (``@workflow/ai``, pinned) against ``/api/chat``
unchanged, and the rules it relies on (docs/protocols.md, "Reconnecting by
index"): its id-less ``text/plain`` POST, ``x-workflow-run-id``, and
``GET chat/<run id or chat id>/stream?startIndex=N``.

The transport is driven from node (``tests/js/workflow_client.mjs``, under
ai@7's useChat core) through ``CuttingProxy``, a TCP proxy in this process
that cuts responses in the middle of an event where a test says, so the
transport's own reconnects are what is tested.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from uistream_app.models import Conversation, Run
from uistream_app.protocol.sse import SSEParser
from uistream_app.recording import read_log

from .conftest import JS_DIR
from .server import serve_demo
from .test_chat_http import Browser, read_chunks, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

_REQUEST_LINE = re.compile(rb"(GET|POST|OPTIONS) (/\S*) HTTP/1\.1\r\n")
_KEEP_ALIVE = re.compile(rb"(?i)connection: keep-alive")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from serve_demo(monkeypatch, 2)


@dataclass
class Cut:
    """What the proxy does to one response: pass ``after_events`` whole
    ``data:`` events and the first bytes of the next, wait until
    ``when()`` (if given), then close both sides."""

    after_events: int
    when: Callable[[], bool] | None = None


class CuttingProxy:
    """127.0.0.1 → the server, one request per connection (it turns
    keep-alive into ``connection: close``), cutting the responses its
    ``cuts`` name by the request's number (0: the first request seen).
    ``hold`` names requests it forwards only once their predicate holds.
    ``requests`` is every request line it saw, in order."""

    def __init__(
        self,
        upstream: str,
        cuts: dict[int, Cut] | None = None,
        hold: dict[int, Callable[[], bool]] | None = None,
    ) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.cuts = cuts or {}
        self.hold = hold or {}
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(self.upstream)
        first = client.recv(65536)
        match = _REQUEST_LINE.search(first)
        with self._lock:
            number = len(self.requests)
            self.requests.append((match.group(1).decode(), match.group(2).decode()) if match else ("?", "?"))
        if number in self.hold:
            wait_for(self.hold[number], f"the proxy's hold on request {number}", timeout=30)
        upstream.sendall(_KEEP_ALIVE.sub(b"connection: close", first))
        threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
        self._respond(upstream, client, self.cuts.get(number))

    @staticmethod
    def _pipe(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass

    @staticmethod
    def _respond(upstream: socket.socket, client: socket.socket, cut: Cut | None) -> None:
        sent = b""
        try:
            while data := upstream.recv(65536):
                if cut is None:
                    client.sendall(data)
                    continue
                sent += data
                starts = [m.start() for m in re.finditer(rb"data: ", sent)]
                if len(starts) <= cut.after_events:
                    client.sendall(data)
                    continue
                # Mid-event: the next event's first bytes, never its end.
                end = starts[cut.after_events] + len(b'data: {"')
                client.sendall(data[: len(data) - (len(sent) - end)])
                if cut.when is not None:
                    wait_for(cut.when, "the proxy's cut", timeout=30)
                break
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()


@pytest.fixture
def proxy_factory(server: str) -> Iterator[Callable[..., CuttingProxy]]:
    made: list[CuttingProxy] = []

    def make(**kw: Any) -> CuttingProxy:
        proxy = CuttingProxy(server, **kw)
        made.append(proxy)
        return proxy

    yield make
    for proxy in made:
        proxy.close()


def run_workflow_client(node: str, base: str, browser: Browser, steps: list[dict[str, Any]]) -> dict[str, Any]:
    cookie = "; ".join(f"{k}={v}" for k, v in browser.client.cookies.items())
    payload = {"base": base, "cookie": cookie, "csrf": browser.token, "steps": steps}
    result = subprocess.run(
        [node, str(JS_DIR / "workflow_client.mjs"), json.dumps(payload)],
        capture_output=True,
        text=True,
        cwd=JS_DIR,
        timeout=90,
    )
    assert result.returncode == 0, result.stderr
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def visitor(server: str) -> Browser:
    """A browser whose visitor already has a session (one earlier answer,
    in chat ``earlier``), so a node client given its cookies and this test
    are the same owner."""
    browser = Browser(server)
    with browser.stream("earlier", "count to 1") as response:
        read_chunks(response)
    wait_for(lambda: not Run.objects.filter(status="running").exists(), "the earlier answer to be stored")
    assert "sessionid" in browser.client.cookies
    return browser


def transport_runs() -> list[Run]:
    """The runs of the chats the transport started (not ``earlier``)."""
    return list(Run.objects.exclude(conversation__client_id="earlier"))


def stored_chunks(run: Run) -> list[dict[str, Any]]:
    return [entry.chunk for entry in read_log(run)]


def stored_messages(chat_id: str) -> list[dict[str, Any]]:
    conversation = Conversation.objects.get(client_id=chat_id)
    return [m.as_ui_message() for m in conversation.messages.order_by("position")]


def run_ended(status: str = "completed") -> Callable[[], bool]:
    return lambda: Run.objects.filter(status=status).exists()


def text_post(browser: Browser, body: Any, *, csrf: bool = True) -> httpx.Response:
    """The transport's POST: a JSON string body with no content type set,
    which fetch sends as ``text/plain;charset=UTF-8``."""
    headers = {"content-type": "text/plain;charset=UTF-8"}
    if csrf:
        headers["x-csrftoken"] = browser.token
    return browser.client.post("/api/chat", content=json.dumps(body).encode(), headers=headers)


def user(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def events(response: httpx.Response) -> list[str]:
    parser = SSEParser()
    return [event.data for event in parser.feed(response.content)]


# -- the real transport --------------------------------------------------------------


def test_the_transport_survives_two_cuts_mid_event_and_one_after_the_run_finished(
    node: str, server: str, proxy_factory: Callable[..., CuttingProxy], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Paced (the model reads this at each call) so that the first two cuts
    # come while the run streams: those reconnects follow it live.
    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "15")
    browser = Browser(server)
    proxy = proxy_factory(
        cuts={
            0: Cut(after_events=15),  # the POST
            1: Cut(after_events=20),  # its first reconnect
            2: Cut(after_events=10, when=run_ended()),  # the second, once the run has ended
        }
    )
    out = run_workflow_client(node, proxy.url, browser, [{"send": "count to 60"}])

    assert out["error"] is None
    assert out["finished"] == 1
    [run] = Run.objects.all()
    assert out["runIds"] == [str(run.pk)]
    chat_id = out["chatIds"][0]
    assert Conversation.objects.filter(client_id=chat_id).exists()
    # Each reconnect asked for the run by id, from the events it had whole.
    assert proxy.requests == [
        ("POST", "/api/chat"),
        ("GET", f"/api/chat/{run.pk}/stream?startIndex=15"),
        ("GET", f"/api/chat/{run.pk}/stream?startIndex=35"),
        ("GET", f"/api/chat/{run.pk}/stream?startIndex=45"),
    ]
    # Nothing lost, nothing twice: the client built what we stored.
    assert out["messages"] == stored_messages(chat_id)
    assert run.status == "completed"
    assert stored_chunks(run)[-1]["type"] == "finish"


def test_the_transport_reads_the_last_five_chunks_of_a_finished_run(node: str, server: str) -> None:
    browser = visitor(server)
    out = run_workflow_client(
        node,
        server,
        browser,
        [{"send": "count to 5"}, {"tail": {"startIndex": -5}}],
    )
    assert out["error"] is None
    [run] = transport_runs()
    log = stored_chunks(run)
    # By chat id (the transport's default URL): the chat's latest run.
    assert out["tails"] == [log[-5:]]
    by_run = run_workflow_client(node, server, browser, [{"tail": {"startIndex": -5, "runId": str(run.pk)}}])
    assert by_run["tails"] == [log[-5:]]


def test_a_run_stopped_while_the_client_is_cut_off_settles_within_three_reconnects(
    node: str, server: str, proxy_factory: Callable[..., CuttingProxy]
) -> None:
    browser = visitor(server)
    stopped = threading.Event()

    def stop_once_cut_off() -> bool:
        # The reconnect is held here until the run was stopped through the
        # stop endpoint (the chat id is the one the server chose).
        if not stopped.is_set():
            chat_id = Conversation.objects.exclude(client_id="earlier").values_list("client_id", flat=True).get()
            assert browser.post(f"/api/chat/{chat_id}/stop").json() == {"stopped": True}
            wait_for(run_ended("stopped"), "the run to be stored as stopped")
            stopped.set()
        return True

    proxy = proxy_factory(cuts={0: Cut(after_events=10)}, hold={1: stop_once_cut_off})
    out = run_workflow_client(node, proxy.url, browser, [{"send": "count to 2000"}])

    [run] = transport_runs()
    assert run.status == "stopped"
    reconnects = proxy.requests[1:]
    assert 1 <= len(reconnects) <= 3
    # The first read the rest (ending in the abort), the next was past it.
    log = stored_chunks(run)
    assert log[-1]["type"] == "abort"
    assert reconnects == [
        ("GET", f"/api/chat/{run.pk}/stream?startIndex=10"),
        ("GET", f"/api/chat/{run.pk}/stream?startIndex={len(log)}"),
    ]
    # The client saw the abort, then the run's end, and stopped asking.
    assert out["error"] is not None
    assert "410" in out["error"]
    assert "run_ended" in out["error"]
    assert out["messages"][-1]["role"] == "assistant"


# -- the rules, over HTTP --------------------------------------------------------------


def test_a_text_plain_body_without_id_starts_a_chat_and_names_it(server: str) -> None:
    browser = Browser(server)
    first = text_post(browser, {"messages": [user("u1", "count to 3")]})
    assert first.status_code == 200
    assert first.headers["content-type"].startswith("text/event-stream")
    [run] = Run.objects.all()
    assert first.headers["x-workflow-run-id"] == str(run.pk)
    chat_id = first.headers["x-uistream-chat-id"]
    assert run.conversation.client_id == chat_id
    assert events(first)[-1] == "[DONE]"
    wait_for(run_ended(), "the run to be stored")

    # The next turn sends the history back, still without id: same chat.
    history = stored_messages(chat_id)
    second = text_post(browser, {"messages": [*history, user("u2", "count to 2")]})
    assert second.status_code == 200
    assert second.headers["x-uistream-chat-id"] == chat_id
    assert second.headers["x-workflow-run-id"] != first.headers["x-workflow-run-id"]
    wait_for(lambda: not Run.objects.filter(status="running").exists(), "the second run to be stored")
    assert [m["id"] for m in stored_messages(chat_id)][:3] == ["u1", history[1]["id"], "u2"]
    assert Conversation.objects.count() == 1


def test_another_owners_message_ids_start_a_new_chat(server: str) -> None:
    alice, mallory = Browser(server), Browser(server)
    first = text_post(alice, {"messages": [user("u1", "count to 2")]})
    alices = first.headers["x-uistream-chat-id"]
    wait_for(run_ended(), "the run to be stored")
    theirs = text_post(mallory, {"messages": [*stored_messages(alices), user("u2", "count to 2")]})
    assert theirs.status_code == 200
    assert theirs.headers["x-uistream-chat-id"] != alices
    assert len(stored_messages(alices)) == 2


def test_text_plain_without_the_csrf_token_is_refused_and_writes_nothing(server: str) -> None:
    browser = Browser(server)
    response = text_post(browser, {"messages": [user("u1", "hi")]}, csrf=False)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "csrf_failed"
    assert not Conversation.objects.exists()
    assert not Run.objects.exists()


def test_a_body_with_id_keeps_its_chat_and_gets_the_run_header(server: str) -> None:
    browser = Browser(server)
    with browser.stream("mine", "count to 2") as response:
        read_chunks(response)
    [run] = Run.objects.all()
    assert response.headers["x-workflow-run-id"] == str(run.pk)
    assert response.headers["x-uistream-chat-id"] == "mine"
    assert run.conversation.client_id == "mine"


@pytest.mark.parametrize("version", [7, 6, 5])
def test_start_index_reads_the_posts_numbering_with_the_tail_index(server: str, version: int) -> None:
    browser = Browser(server)
    body = browser.chat_body("idx", "What's the weather in Paris? Then count to 8")
    headers = {"X-CSRFToken": browser.token}
    with browser.client.stream("POST", f"/api/chat?v={version}", json=body, headers=headers) as response:
        posted, done = read_chunks(response)
    assert done
    run_id = response.headers["x-workflow-run-id"]
    wait_for(run_ended(), "the run to be stored")
    tail = str(len(posted) - 1)

    for start, expected in [(0, posted), (7, posted[7:]), (-5, posted[-5:]), (-1000, posted)]:
        params = {"startIndex": start, "v": version}
        got = browser.client.get(f"/api/chat/{run_id}/stream", params=params)
        assert got.status_code == 200
        assert got.headers["x-workflow-stream-tail-index"] == tail
        assert got.headers["x-workflow-run-id"] == run_id
        assert got.headers["x-vercel-ai-ui-message-stream"] == "v1"
        data = events(got)
        assert data[-1] == "[DONE]"
        assert [json.loads(d) for d in data[:-1]] == expected
    # Past the end of a finished run: 200 and only [DONE], never 204.
    past = browser.client.get(f"/api/chat/{run_id}/stream", params={"startIndex": len(posted), "v": version})
    assert past.status_code == 200
    assert events(past) == ["[DONE]"]
    # The chat id reads its latest run the same way.
    by_chat = browser.client.get("/api/chat/idx/stream", params={"startIndex": -2, "v": version})
    assert [json.loads(d) for d in events(by_chat)[:-1]] == posted[-2:]
    # Without startIndex, the resume is today's: nothing runs, 204.
    assert browser.client.get("/api/chat/idx/stream").status_code == 204


def test_a_live_run_is_followed_from_its_index(server: str) -> None:
    browser = Browser(server)
    with browser.stream("live", "count to 300") as response:
        first, _ = read_chunks(response, stop=lambda chunks: len(chunks) >= 12)
        run_id = response.headers["x-workflow-run-id"]
        with browser.client.stream("GET", "/api/chat/live/stream?startIndex=10") as again:
            assert again.status_code == 200
            assert int(again.headers["x-workflow-stream-tail-index"]) >= 11
            followed, done = read_chunks(again)
        rest, _ = read_chunks(response)
    assert done
    assert followed == (first + rest)[10:]
    assert followed[-1]["type"] == "finish"
    assert again.headers["x-workflow-run-id"] == run_id


def test_a_run_that_ended_without_finish_answers_410_once_nothing_is_left(server: str) -> None:
    browser = Browser(server)
    with browser.stream("stop-me", "count to 2000") as response:
        read_chunks(response, stop=lambda chunks: len(chunks) >= 5)
        assert browser.post("/api/chat/stop-me/stop").json() == {"stopped": True}
        read_chunks(response)
    wait_for(run_ended("stopped"), "the run to be stored as stopped")
    run = Run.objects.get()
    log = stored_chunks(run)
    assert log[-1]["type"] == "abort"
    last = len(log) - 1
    at_last = browser.client.get(f"/api/chat/{run.pk}/stream", params={"startIndex": last})
    assert at_last.status_code == 200
    data = events(at_last)
    assert data[-1] == "[DONE]"
    assert [json.loads(d) for d in data[:-1]] == [log[-1]]
    past = browser.client.get(f"/api/chat/{run.pk}/stream", params={"startIndex": last + 1})
    assert past.status_code == 410
    assert past.json()["error"]["code"] == "run_ended"
    assert past.headers["x-workflow-stream-tail-index"] == str(last)


def test_another_owners_run_id_is_404(server: str) -> None:
    alice, mallory = Browser(server), Browser(server)
    with alice.stream("alices", "count to 2") as response:
        read_chunks(response)
    run_id = response.headers["x-workflow-run-id"]
    wait_for(run_ended(), "the run to be stored")
    theirs = mallory.client.get(f"/api/chat/{run_id}/stream", params={"startIndex": 0})
    assert theirs.status_code == 404
    assert theirs.json()["error"]["code"] == "not_found"
    assert alice.client.get(f"/api/chat/{run_id}/stream", params={"startIndex": 0}).status_code == 200


@pytest.mark.parametrize("raw", ["", "abc", "1.5", "1e3", "--1", "9" * 30])
def test_a_bad_start_index_is_400_naming_it(server: str, raw: str) -> None:
    browser = Browser(server)
    with browser.stream("bad-index", "count to 2") as response:
        read_chunks(response)
    run_id = response.headers["x-workflow-run-id"]
    got = browser.client.get(f"/api/chat/{run_id}/stream", params={"startIndex": raw})
    assert got.status_code == 400
    error = got.json()["error"]
    assert error["field"] == "startIndex"
    assert "startIndex" in error["message"]


def test_an_older_clients_numbering_skips_what_it_is_not_sent(server: str) -> None:
    """ai@5 is not sent ``tool-approval-request``: its event k is not chunk
    k of the log, and the index counts what that client was sent."""
    browser = Browser(server)
    body = browser.chat_body("old", "email ada@example.com saying hello")
    headers = {"X-CSRFToken": browser.token}
    with browser.client.stream("POST", "/api/chat?v=5", json=body, headers=headers) as response:
        posted, done = read_chunks(response)
    assert done
    wait_for(run_ended(), "the run to be stored")
    run = Run.objects.get()
    assert len(stored_chunks(run)) > len(posted)  # the log holds what ai@5 was not sent
    for start in (-3, len(posted) - 3):
        got = browser.client.get(f"/api/chat/{run.pk}/stream", params={"startIndex": start, "v": 5})
        assert got.headers["x-workflow-stream-tail-index"] == str(len(posted) - 1)
        assert [json.loads(d) for d in events(got)[:-1]] == posted[-3:]


def test_an_approval_through_the_transport_continues_the_same_chat(node: str, server: str) -> None:
    """The continuation the chat sends by itself carries no chat id either:
    the server finds the chat by the message ids it sends back."""
    browser = visitor(server)
    out = run_workflow_client(
        node, server, browser, [{"send": "email ada@example.com saying hello"}, {"approve": True}]
    )
    assert out["error"] is None
    assert out["finished"] == 2
    assert len(set(out["chatIds"])) == 1
    chat_id = out["chatIds"][0]
    wait_for(lambda: not Run.objects.filter(status="running").exists(), "the runs to be stored")
    assert Run.objects.filter(conversation__client_id=chat_id).count() == 2
    stored = stored_messages(chat_id)
    assert out["messages"] == stored
    [call] = [p for p in stored[-1]["parts"] if p["type"] == "tool-send_email"]
    assert call["state"] == "output-available"
