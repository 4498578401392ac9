"""MCP servers as tools: ``UISTREAM["MCP_SERVERS"]`` through the official
``mcp`` SDK (the extra ``django-uistream[mcp]``).

Each configured server (a command spoken to over stdio, or a streamable
HTTP URL) lends its tools to the loop as ``MCPTool``\\ s, plain ``Tool``\\ s
named ``<server>__<tool>`` (``__`` because every provider accepts
``^[a-zA-Z0-9_-]{1,64}$`` and nothing else), so approvals, timeouts and the
error policy are the loop's own (docs/operations.md, "MCP servers").

Why a thread of its own: an MCP session is a set of anyio tasks bound to
the event loop that opened it, and runs execute on several loops (the ASGI
server's, the WSGI portal's, a Celery worker's, a test's). So every session
lives on one loop in a daemon thread (``uistream-mcp``), one session per
server per process, opened on first use; a call from any loop is handed
over there and awaited (cancelling the call cancels the request). A session
whose server went away (its stdout closed, its HTTP endpoint gone) is
dropped at once and the next call opens a new one. ``close_all()`` closes
every session: the app calls it at shutdown (``shutdown.py``) and at exit.

A call's progress notifications (``notifications/progress`` for its
request) are the call's preliminary outputs (``{"progress", "total"?,
"message"?}``), streamed to the client as ai@7's ``tool-output-available``
with ``preliminary: true`` while the call runs; its result follows. A
server's ``notifications/tools/list_changed`` (or, from a 2026-07-28
server over stdio, a ``subscriptions/listen`` event) marks its tool list
stale: the next request's tools come from a fresh listing (the run under
way keeps the tools it started with). A 2026-07-28 server over HTTP is
not listened to: the stream would be a request held open, which its
graceful shutdown waits for.

The core never imports this module unless ``MCP_SERVERS`` is set; without
the SDK, using it raises ``ImproperlyConfigured`` naming the extra.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import logging
import os
import re
import threading
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from django.core.exceptions import ImproperlyConfigured

from ..conf import settings as uistream_settings
from ..protocol.redact import redact
from ..runs import Tool, ToolContext, ToolError
from .portal import loop_in_thread

__all__ = [
    "SEPARATOR",
    "MCPConfigError",
    "MCPServerConfig",
    "MCPServerError",
    "MCPTool",
    "close_all",
    "connection",
    "mcp_listed",
    "mcp_tools",
    "parse_servers",
    "warm_up",
]

logger = logging.getLogger("uistream_app.mcp")

T = TypeVar("T")

#: Between the server's name and the tool's in the name the model sees.
SEPARATOR: Final = "__"
#: A server's name: letters, digits, ``-`` and single ``_`` (never ``__``,
#: so the tool name splits back), at most 30 characters.
_SERVER_NAME: Final = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,29}")
_TOOL_NAME_CHARS: Final = re.compile(r"[^A-Za-z0-9_-]")
_MAX_TOOL_NAME: Final = 64
_KEYS: Final = frozenset(
    ("command", "args", "env", "cwd", "url", "headers", "timeout", "connect_timeout", "requires_approval", "tools")
)
DEFAULT_TIMEOUT: Final = 30.0
DEFAULT_CONNECT_TIMEOUT: Final = 10.0
#: After a server could not be reached, how long requests go on without
#: its tools before one tries again (a server that hangs on start must not
#: stall every request by its connect timeout).
RETRY_SECONDS: Final = 5.0

EXTRA_HINT: Final = "pip install django-uistream[mcp]"


class MCPConfigError(ValueError):
    """``MCP_SERVERS`` is malformed; the message names the entry and key."""


@dataclass(frozen=True, slots=True)
class MCPServerConfig:
    """One entry of ``MCP_SERVERS``, checked (``parse_servers``)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: tuple[tuple[str, str], ...] | None = None
    timeout: float = DEFAULT_TIMEOUT
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    #: True/False for every tool, or the names (the server's) of those that need it.
    requires_approval: bool | frozenset[str] = False
    #: The names (the server's) of the tools offered; None: all of them.
    tools: frozenset[str] | None = None

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"


def _number(name: str, key: str, value: Any, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise MCPConfigError(f"MCP_SERVERS[{name!r}][{key!r}] must be a positive number of seconds, not {value!r}")
    return float(value)


def _strings(name: str, key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise MCPConfigError(f"MCP_SERVERS[{name!r}][{key!r}] must be a list of strings")
    return tuple(value)


def _string_map(name: str, key: str, value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise MCPConfigError(f"MCP_SERVERS[{name!r}][{key!r}] must be a dict of strings to strings")
    return tuple(sorted(value.items()))


def parse_servers(value: Any) -> list[MCPServerConfig]:
    """The checked entries of ``MCP_SERVERS``: a dict of server name to
    ``{"command", "args"?, "env"?, "cwd"?}`` (stdio) or ``{"url",
    "headers"?}`` (streamable HTTP), each with ``timeout``?,
    ``connect_timeout``?, ``requires_approval``? (bool, or a list of the
    server's tool names) and ``tools``? (the tool names offered). Raises
    ``MCPConfigError`` naming the first problem."""
    if value is None:
        return []
    if not isinstance(value, dict):
        raise MCPConfigError(f"MCP_SERVERS must be a dict of server name to settings, not {type(value).__name__}")
    out: list[MCPServerConfig] = []
    for name, entry in value.items():
        if not isinstance(name, str) or not _SERVER_NAME.fullmatch(name):
            raise MCPConfigError(
                f"MCP_SERVERS name {name!r}: use 1-30 letters, digits, '-' or single '_' (the tools are named "
                f"<server>{SEPARATOR}<tool>)"
            )
        if not isinstance(entry, dict):
            raise MCPConfigError(f"MCP_SERVERS[{name!r}] must be a dict, not {type(entry).__name__}")
        unknown = sorted(set(entry) - _KEYS)
        if unknown:
            raise MCPConfigError(f"MCP_SERVERS[{name!r}] has unknown keys {unknown}; known: {sorted(_KEYS)}")
        command, url = entry.get("command"), entry.get("url")
        if (command is None) == (url is None):
            raise MCPConfigError(f"MCP_SERVERS[{name!r}] needs either 'command' (stdio) or 'url' (streamable HTTP)")
        if command is not None and (not isinstance(command, str) or not command):
            raise MCPConfigError(f"MCP_SERVERS[{name!r}]['command'] must be a non-empty string")
        if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
            raise MCPConfigError(f"MCP_SERVERS[{name!r}]['url'] must be an http:// or https:// URL")
        if command is None and any(k in entry for k in ("args", "env", "cwd")):
            raise MCPConfigError(f"MCP_SERVERS[{name!r}]: 'args', 'env' and 'cwd' are for a 'command' server")
        if url is None and "headers" in entry:
            raise MCPConfigError(f"MCP_SERVERS[{name!r}]: 'headers' are for a 'url' server")
        cwd = entry.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise MCPConfigError(f"MCP_SERVERS[{name!r}]['cwd'] must be a string")
        approval = entry.get("requires_approval", False)
        if not isinstance(approval, bool):
            approval = frozenset(_strings(name, "requires_approval", approval))
        tools = entry.get("tools")
        out.append(
            MCPServerConfig(
                name=name,
                command=command,
                args=_strings(name, "args", entry.get("args", [])),
                env=_string_map(name, "env", entry["env"]) if entry.get("env") is not None else None,
                cwd=cwd,
                url=url,
                headers=_string_map(name, "headers", entry["headers"]) if entry.get("headers") is not None else None,
                timeout=_number(name, "timeout", entry.get("timeout"), DEFAULT_TIMEOUT),
                connect_timeout=_number(name, "connect_timeout", entry.get("connect_timeout"), DEFAULT_CONNECT_TIMEOUT),
                requires_approval=approval,
                tools=frozenset(_strings(name, "tools", tools)) if tools is not None else None,
            )
        )
    return out


def _require_sdk() -> None:
    try:  # the mcp extra: this is where its absence is told
        import mcp  # noqa: F401
    except ImportError as exc:
        raise ImproperlyConfigured(f"UISTREAM['MCP_SERVERS'] needs the MCP SDK: {EXTRA_HINT} ({exc})") from exc


# -- the loop the sessions live on ---------------------------------------------------

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_pid = os.getpid()


def _mcp_loop() -> asyncio.AbstractEventLoop:
    """The sessions' event loop, in a daemon thread started on first use
    (again in a forked child, where the parent's thread does not run and
    its sessions are not this process's)."""
    global _loop
    _forget_a_parent()
    with _lock:
        if _loop is None or _loop.is_closed():
            _loop = loop_in_thread("uistream-mcp")
        return _loop


def _forget_a_parent() -> None:
    """In a forked child: drop the parent's loop and connections (its
    thread does not run here, its sessions are not this process's)."""
    global _loop, _pid
    if _pid == os.getpid():
        return
    with _lock, _registry.lock:
        if _pid != os.getpid():
            _loop = None
            _registry.connections.clear()
            _pid = os.getpid()


def _submit(coro: Awaitable[T]) -> concurrent.futures.Future[T]:
    async def wrapper() -> T:
        return await coro

    # A fresh context: the caller's may hold asgiref's executor of a request
    # thread that quits when the request ends.
    return contextvars.Context().run(asyncio.run_coroutine_threadsafe, wrapper(), _mcp_loop())


async def _on_mcp_loop(coro: Awaitable[T]) -> T:
    """Await ``coro`` on the sessions' loop from any other loop; cancelling
    the caller cancels it there."""
    result: T = await asyncio.wrap_future(_submit(coro))
    return result


def _blocking(coro: Awaitable[T], timeout: float) -> T:
    """``coro`` run on the sessions' loop, waited for from sync code."""
    future = _submit(coro)
    try:
        result: T = future.result(timeout)
    except BaseException:
        future.cancel()
        raise
    return result


# -- one server's session ---------------------------------------------------------------


class _WatchedRead:
    """The transport's read stream, telling ``on_closed`` when it ends (the
    server exited, or its connection went away): the session is then dead
    and the next call opens another. The SDK's ``ReadStream`` protocol."""

    def __init__(self, inner: Any, on_closed: Callable[[], None]) -> None:
        self._inner = inner
        self._on_closed = on_closed

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        import anyio  # the mcp extra's (it brings anyio)

        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_closed()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> Any:
        import anyio  # the mcp extra's (it brings anyio)

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _WatchedRead:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


@contextlib.asynccontextmanager
async def _transport(config: MCPServerConfig, on_closed: Callable[[], None]) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's transport for ``config``, its read stream watched."""
    async with contextlib.AsyncExitStack() as stack:
        if config.command is not None:
            from mcp.client.stdio import StdioServerParameters, stdio_client  # the mcp extra

            params = StdioServerParameters(
                command=config.command,
                args=list(config.args),
                env=dict(config.env) if config.env is not None else None,
                cwd=config.cwd,
            )
            read, write = await stack.enter_async_context(stdio_client(params))
        else:
            # The mcp extra (and the httpx2 it brings).
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            assert config.url is not None
            http_client = None
            if config.headers:
                timeout = httpx2.Timeout(DEFAULT_TIMEOUT, read=300.0)
                http_client = await stack.enter_async_context(
                    httpx2.AsyncClient(headers=dict(config.headers), timeout=timeout)
                )
            read, write = await stack.enter_async_context(streamable_http_client(config.url, http_client=http_client))
        yield _WatchedRead(read, on_closed), write


class _WatchedTransport:
    """``_transport`` as the SDK's ``Transport`` (an async context manager)."""

    def __init__(self, config: MCPServerConfig, on_closed: Callable[[], None]) -> None:
        self._cm = _transport(config, on_closed)

    async def __aenter__(self) -> tuple[Any, Any]:
        return await self._cm.__aenter__()

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._cm.__aexit__(*exc)


@dataclass(slots=True)
class _Session:
    client: Any
    owner: asyncio.Task[None]
    stop: asyncio.Event
    dead: bool = False


class MCPServerConnection:
    """This process's session with one MCP server (see the module
    docstring). Its coroutines run on the sessions' loop; ``call``,
    ``start_listing`` and ``tools_blocking`` are the ways in from elsewhere."""

    def __init__(self, config: MCPServerConfig) -> None:
        self.config = config
        self.name = config.name
        #: How many sessions this process opened with the server.
        self.sessions_opened = 0
        self._session: _Session | None = None
        self._connecting: asyncio.Lock | None = None
        self._tools: list[MCPTool] | None = None
        self._failed_at: float | None = None
        self._listing: concurrent.futures.Future[list[MCPTool]] | None = None
        self._listing_lock = threading.Lock()
        #: The server said its tools changed (``tools/list_changed``) since
        #: they were last listed.
        self.tools_changed = False

    # -- the session (on the sessions' loop) ---------------------------------------------

    async def _hold(self, session_box: list[_Session], ready: asyncio.Future[Any], stop: asyncio.Event) -> None:
        """The owner task: enters the SDK client, waits for ``stop``, leaves
        it (anyio wants both in one task)."""
        from mcp import Client  # the mcp extra

        def closed() -> None:
            if session_box:
                session_box[0].dead = True
            stop.set()

        async def notified(message: Any) -> None:
            from mcp_types import ToolListChangedNotification  # the mcp extra

            if isinstance(message, ToolListChangedNotification):
                logger.info("MCP server %r: its tools changed; the next request lists them again", self.name)
                self.tools_changed = True

        client = Client(_WatchedTransport(self.config, closed), read_timeout_seconds=None, message_handler=notified)
        try:
            async with client:
                if not ready.done():
                    ready.set_result(client)
                # Over HTTP a listen stream is a request held open, which a
                # server's graceful shutdown waits for: only a stdio
                # server's 2026-era changes are followed (its earlier-era
                # notifications come either way).
                listening = None
                if self.config.transport == "stdio":
                    listening = asyncio.get_running_loop().create_task(self._listen(client))
                try:
                    await stop.wait()
                finally:
                    if listening is not None:
                        listening.cancel()
                        await asyncio.gather(listening, return_exceptions=True)
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else ConnectionError(f"cancelled: {exc!r}"))
            elif not isinstance(exc, asyncio.CancelledError):
                logger.warning("MCP server %r: the session ended with an error (%s)", self.name, _describe(exc))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            if session_box:
                session_box[0].dead = True

    async def _listen(self, client: Any) -> None:
        """Follow the server's tool list changes: a 2026-07-28 server
        publishes them on a ``subscriptions/listen`` stream; an earlier one
        sends ``notifications/tools/list_changed`` (``notified`` in
        ``_hold``)."""
        from mcp.client.subscriptions import ListenNotSupportedError  # the mcp extra

        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    logger.info("MCP server %r: its tools changed; the next request lists them again", self.name)
                    self.tools_changed = True
        except ListenNotSupportedError:
            return
        except Exception as exc:  # noqa: BLE001 - the session goes on without it
            logger.info("MCP server %r: not following its tool list (%s)", self.name, _describe(exc))

    async def _open(self) -> _Session:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Any] = loop.create_future()
        stop = asyncio.Event()
        box: list[_Session] = []
        owner = loop.create_task(self._hold(box, ready, stop), name=f"uistream-mcp-{self.name}")
        try:
            client = await asyncio.wait_for(asyncio.shield(ready), self.config.connect_timeout)
        except BaseException:
            owner.cancel()
            await asyncio.gather(owner, return_exceptions=True)
            raise
        self.sessions_opened += 1
        session = _Session(client, owner, stop)
        box.append(session)
        if stop.is_set():  # it died while we looked away
            session.dead = True
        return session

    async def session(self) -> _Session:
        """The live session, opened (again) when there is none or it died."""
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            current = self._session
            if current is not None and not current.dead and not current.owner.done():
                return current
            if current is not None:
                await self._close_session(current)
                logger.info("MCP server %r: the session died; opening another", self.name)
            self._session = None
            self._session = await self._open()
            return self._session

    async def _close_session(self, session: _Session) -> None:
        session.dead = True
        session.stop.set()
        await asyncio.gather(session.owner, return_exceptions=True)

    async def close(self) -> None:
        """Close the session, if any (the server process exits)."""
        if self._session is not None:
            session, self._session = self._session, None
            await self._close_session(session)

    # -- tools ----------------------------------------------------------------------------

    async def list_tools(self) -> list[MCPTool]:
        """The server's tools as ``MCPTool``\\ s (every page), fetched now."""
        session = await self.session()
        remote: list[Any] = []
        cursor: str | None = None
        for _ in range(100):
            page = await session.client.list_tools(cursor=cursor)
            remote.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        tools: list[MCPTool] = []
        taken: set[str] = set()
        for item in remote:
            if self.config.tools is not None and item.name not in self.config.tools:
                continue
            name = tool_name(self.name, item.name)
            if name in taken:
                logger.warning("MCP server %r: two tools are named %r here; %r is left out", self.name, name, item.name)
                continue
            taken.add(name)
            tools.append(MCPTool(self, item, name))
        return tools

    def start_listing(self) -> concurrent.futures.Future[list[MCPTool]]:
        """Ask the server for its tools in the background (on the sessions'
        loop), unless that is already under way; the future of the answer."""
        with self._listing_lock:
            if self._listing is None:
                self._listing = _submit(self._list_and_keep())
            return self._listing

    async def _list_and_keep(self) -> list[MCPTool]:
        # Cleared before asking: a change announced while the list is on
        # its way is listed again next time.
        self.tools_changed = False
        try:
            tools = await asyncio.wait_for(self.list_tools(), self.config.connect_timeout + 5)
        except Exception as exc:
            logger.warning("MCP server %r: cannot list its tools (%s); offering none", self.name, _describe(exc))
            self._failed_at = time.monotonic()
            raise
        else:
            self._failed_at = None
            self._tools = tools
            return tools
        finally:
            with self._listing_lock:
                self._listing = None

    def listing_to_wait_for(self) -> concurrent.futures.Future[list[MCPTool]] | None:
        """The listing ``tools_blocking`` would wait for now (the first, or
        the one after the server said its tools changed), started; None
        when it would answer at once."""
        if self._tools is not None and not self.tools_changed:
            return None
        if self._tools is None and self._failed_at is not None:
            return None  # retried in the background: no request waits
        return self.start_listing()

    def tools_blocking(self) -> list[MCPTool]:
        """The server's tools for a request: listed once per process, then
        the same list. Only the first listing is waited for (up to the
        connect timeout; ``warm_up`` usually has it ready before the first
        chat): after a failure the server lends no tools, and is asked again
        in the background every ``RETRY_SECONDS``, so a server that is down
        never holds a request (or the event loop it runs on) up."""
        if self._tools is not None and self.tools_changed:
            # The server said its tools changed: wait for the new list as
            # for the first one; if it can't be had, the old one stands.
            try:
                return self.start_listing().result(self.config.connect_timeout + 10)
            except Exception:  # noqa: BLE001 - logged by the listing
                return self._tools
        if self._tools is not None:
            return self._tools
        if self._failed_at is not None:
            if time.monotonic() - self._failed_at >= RETRY_SECONDS:
                self.start_listing()
            return []
        try:
            return self.start_listing().result(self.config.connect_timeout + 10)
        except Exception:  # noqa: BLE001 - logged by the listing; a server that is down must not fail the request
            return []

    async def call_here(
        self, name: str, arguments: Mapping[str, Any], progress: Callable[[Any], None] | None = None
    ) -> Any:
        """Call the server's tool ``name`` (on the sessions' loop): its
        output; ``ToolError`` with our own words when the server can't be
        reached or dies; ``MCPServerError`` with the server's (redacted) text
        when it answers an error, which the loop masks for the model and the
        client and logs for staff, as any tool's exception. The call's
        progress notifications go to ``progress`` (see the module
        docstring)."""
        # The mcp extra.
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        try:
            session = await self.session()
        except Exception as exc:  # noqa: BLE001 - said to the model as the call's error
            logger.warning("MCP server %r: cannot connect (%s)", self.name, _describe(exc))
            raise ToolError(f"The MCP server {self.name!r} is unavailable.") from None

        async def reported(done: float, total: float | None, message: str | None) -> None:
            if progress is not None:
                progress(_progress_value(done, total, message))

        try:
            result = await session.client.call_tool(name, dict(arguments), progress_callback=reported)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                session.dead = True
                session.stop.set()
                raise ToolError(f"The MCP server {self.name!r} closed the connection during the call.") from None
            raise MCPServerError(f"The MCP server {self.name!r} answered an error: {redact(exc.message)}") from None
        except Exception as exc:  # noqa: BLE001 - said to the model as the call's error
            # The transport failed (an HTTP server gone away, a reply that is not MCP).
            logger.warning("MCP server %r: the call of %s failed (%s)", self.name, name, _describe(exc))
            session.dead = True
            session.stop.set()
            raise ToolError(f"The MCP server {self.name!r} is unavailable.") from None
        if result.is_error:
            said = redact(_content_text(result.content)) or "(no text)"
            raise MCPServerError(f"The MCP server {self.name!r}: its tool {name} failed: {said}")
        return _output(result)

    async def call(self, name: str, arguments: Mapping[str, Any], progress: Callable[[Any], None] | None = None) -> Any:
        """``call_here`` from any event loop (``progress`` is called on the
        caller's loop)."""
        forward = None
        if progress is not None:
            loop = asyncio.get_running_loop()

            def forward(value: Any) -> None:
                loop.call_soon_threadsafe(progress, value)

        return await _on_mcp_loop(self.call_here(name, arguments, forward))


def _progress_value(done: float, total: float | None, message: str | None) -> dict[str, Any]:
    """A progress notification as the call's preliminary output."""
    value: dict[str, Any] = {"progress": done}
    if total is not None:
        value["total"] = total
    if message is not None:
        value["message"] = redact(message)
    return value


class MCPServerError(Exception):
    """An MCP server answered a call with an error: an ``isError`` result or
    a JSON-RPC error. Its text is the server's (a traceback's last line,
    pydantic's validation text with its version, whatever the server
    quotes), so it is not a ``ToolError``: the loop logs it and the model
    and the client get the masked ``ERROR_TEXT``, as for a Python tool's
    exception."""


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _content_text(content: Iterable[Any]) -> str:
    return "\n".join(block.text for block in content if getattr(block, "type", None) == "text")


def _output(result: Any) -> Any:
    """A successful result as the tool's output: its structured content
    when it has one, else its text (one text block), else its content
    blocks as JSON."""
    if result.structured_content is not None:
        return result.structured_content
    blocks = list(result.content)
    if len(blocks) == 1 and getattr(blocks[0], "type", None) == "text":
        return blocks[0].text
    return [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in blocks]


def tool_name(server: str, remote: str) -> str:
    """``<server>__<tool>`` within the providers' rules: other characters
    become ``_``; a name past 64 characters is cut and given a checksum so
    it stays unique."""
    name = f"{server}{SEPARATOR}{_TOOL_NAME_CHARS.sub('_', remote)}"
    if len(name) > _MAX_TOOL_NAME:
        digest = f"{zlib.crc32(remote.encode()):08x}"
        name = name[: _MAX_TOOL_NAME - 9] + "_" + digest
    return name


class MCPTool(Tool):
    """A tool of an MCP server: its name is ``<server>__<tool>``, its
    schema the server's ``inputSchema``, its timeout and approval from the
    server's settings. Called, it asks the server over the process's
    session; the server's errors are the call's ``ToolError``."""

    def __init__(self, connection: MCPServerConnection, remote: Any, name: str) -> None:
        config = connection.config
        approval = config.requires_approval
        needs = approval if isinstance(approval, bool) else remote.name in approval
        remote_name = remote.name

        async def call_mcp_tool(**arguments: Any) -> Any:
            return await connection.call(remote_name, arguments)

        schema = dict(remote.input_schema or {})
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        super().__init__(
            call_mcp_tool,
            name=name,
            description=remote.description or remote.title or "",
            parameters=schema,
            timeout=config.timeout,
            requires_approval=needs,
        )
        self.server = connection.name
        self.remote_name = remote_name
        self.connection = connection
        # Its progress notifications stream as preliminary outputs: the
        # loop forwards them while the call runs.
        self.streams = True

    async def invoke(
        self,
        arguments: Mapping[str, Any],
        context: ToolContext | None = None,
        progress: Callable[[Any], None] | None = None,
    ) -> Any:
        """Ask the server (``MCPServerConnection.call``), its progress to
        ``progress``."""
        return await self.connection.call(self.remote_name, arguments, progress)

    def __repr__(self) -> str:
        return f"<MCPTool {self.name} ({self.server}: {self.remote_name})>"


# -- the process's connections ------------------------------------------------------------


@dataclass(slots=True)
class _Registry:
    connections: dict[str, MCPServerConnection] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


_registry = _Registry()


def connection(config: MCPServerConfig) -> MCPServerConnection:
    """The process's connection to the server ``config`` describes (a
    changed setting gets a new one; the old session is closed)."""
    _forget_a_parent()
    with _registry.lock:
        current = _registry.connections.get(config.name)
        if current is not None and current.config == config:
            return current
        _registry.connections[config.name] = fresh = MCPServerConnection(config)
    if current is not None:
        _submit(current.close())
    return fresh


def configured_servers(names: Sequence[str] | None = None) -> list[MCPServerConfig]:
    """The checked ``UISTREAM["MCP_SERVERS"]`` (those named in ``names``,
    when given)."""
    try:
        servers = list(uistream_settings.derived("MCP_SERVERS", parse_servers))
    except MCPConfigError as exc:
        raise ImproperlyConfigured(str(exc)) from None
    if names is not None:
        known = {s.name for s in servers}
        missing = [n for n in names if n not in known]
        if missing:
            raise ImproperlyConfigured(f"no MCP server named {missing} in UISTREAM['MCP_SERVERS']")
        servers = [s for s in servers if s.name in names]
    return servers


async def mcp_listed(names: Sequence[str] | None = None) -> None:
    """Wait, on the event loop but without holding it, for the tool
    listings that ``mcp_tools`` would wait for (a server's first, or the
    one after it said its tools changed), so that the sync ``get_tools``
    hook that follows finds them ready. The turn path awaits it before it
    asks the hooks: otherwise a new process's first chat (or the first
    after a change) held the event loop, every other stream of the process
    with it, while a server started and listed its tools (up to its
    ``connect_timeout``; 0.7 s for the demo's). Never raises: a setting
    that is wrong is the hook's to say, and a server that cannot list
    lends no tools."""
    try:
        servers = configured_servers(names)
        if servers:
            _require_sdk()
    except ImproperlyConfigured:
        return
    waits: list[asyncio.Future[list[MCPTool]]] = []
    timeout = 0.0
    for config in servers:
        listing = connection(config).listing_to_wait_for()
        if listing is not None:
            waiting = asyncio.wrap_future(listing)
            # Read, so that a failed listing (logged by it) is not also
            # reported as an exception nobody retrieved.
            waiting.add_done_callback(lambda done: done.cancelled() or done.exception())
            waits.append(waiting)
            timeout = max(timeout, config.connect_timeout + 10)
    if waits:
        # Not cancelled when the time is up: the listings go on for the next turn.
        await asyncio.wait(waits, timeout=timeout)


def mcp_tools(names: Sequence[str] | None = None) -> list[Tool]:
    """The tools of the configured MCP servers (of ``names`` only, when
    given), for a request's loop. Blocks only the first time per server
    and process, while the server starts and lists its tools."""
    servers = configured_servers(names)
    if not servers:
        return []
    _require_sdk()
    tools: list[Tool] = []
    for config in servers:
        tools.extend(connection(config).tools_blocking())
    return tools


def warm_up(**kwargs: Any) -> None:
    """Start listing every configured server's tools in the background, so
    the first chat finds them ready. Connected to ``request_started`` by the
    app (a serving process, from its first request; not ``manage.py``
    commands); does its work once per process."""
    global _warmed
    if _warmed:
        return
    if not uistream_settings.MCP_SERVERS:
        return
    _warmed = True
    try:
        _require_sdk()
        servers = configured_servers()
    except Exception:  # noqa: BLE001 - the check (E021) and the first request say what is wrong
        return
    for config in servers:
        connection(config).start_listing()


_warmed = False


def open_connections() -> list[MCPServerConnection]:
    """This process's connections (open or not), for operators and tests."""
    with _registry.lock:
        return list(_registry.connections.values())


async def _close_every(connections: list[MCPServerConnection]) -> None:
    await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)


def close_all(timeout: float = 10.0) -> None:
    """Close every session of this process (the stdio servers exit). Safe
    to call at any time, from sync code; new calls open sessions again."""
    connections = open_connections()
    loop = _loop
    if not connections or loop is None or loop.is_closed():
        return
    try:
        _blocking(_close_every(connections), timeout)
    except Exception:  # shutting down: log and go on
        logger.warning("closing the MCP sessions failed", exc_info=True)


async def aclose_all() -> None:
    """``close_all`` from async code (waits up to 10 seconds)."""
    connections = open_connections()
    loop = _loop
    if not connections or loop is None or loop.is_closed():
        return
    try:
        await asyncio.wait_for(_on_mcp_loop(_close_every(connections)), 10.0)
    except Exception:  # shutting down: log and go on
        logger.warning("closing the MCP sessions failed", exc_info=True)


atexit.register(close_all)
