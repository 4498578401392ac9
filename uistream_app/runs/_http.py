"""The HTTP side every provider model shares: one request, retried where
safe, and the server-sent events of its answer.

``HTTPModelBase`` holds the keyword arguments the provider models have in
common (``HTTPOptions``; a subclass adds its own and passes the rest on
with ``**options: Unpack[HTTPOptions]``) and the request cycle: ``_open`` sends the JSON body and returns the
open 2xx response, retrying 429, 5xx (Anthropic's 529 "overloaded"
included) and failed connects with backoff or the server's
``Retry-After``, but only before the first byte of a successful response;
``sse_events`` yields the response's events with transport failures typed
(``failures``). A subclass sets ``path`` and ``default_base_url`` and writes
``api_body`` and ``_events`` (the provider's events → the model
port's), and ``_headers`` where the API does not take a bearer token.

Why httpx and our own SSE parser rather than the official ``anthropic`` /
``openai`` SDKs: reading the same 20,000-delta answer from a local server,
the SDKs' streams (anthropic 2.14, openai 3.57, which parse every event
into typed objects) took 38 µs (Anthropic Messages), 186 µs (Responses)
and 167 µs (Chat Completions) of CPU per delta; these models took 15, 17
and 17 µs, a ratio of 0.39, 0.09 and 0.10 (``bench/provider_bench.py``,
both sides in one process, median of 5 rounds). The SDKs would also be
dependencies the app does not otherwise need.

Without a ``client`` argument each call makes its own
``httpx.AsyncClient``, because a client is bound to the event loop it
first ran in and Django may run async views in a new loop per request (the
TLS context, the costly part, is shared); pass a long-lived client to
reuse connections where the loop is one. Closing the event iterator closes
the response (and the client this object made).
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypedDict

import httpx

from ..protocol.sse import SSEEvent, SSEParser
from .failures import ModelConnectionError, ModelError, ModelHTTPError, ModelResponseError, ModelTimeoutError
from .messages import ModelMessage, ModelOptions, ToolSpec
from .model import ModelEvent

__all__ = ["HTTPModelBase", "HTTPOptions", "int_field", "json_object", "retry_after", "sse_events", "ssl_context"]


class HTTPOptions(TypedDict, total=False):
    """The keyword arguments every provider model takes (see
    ``HTTPModelBase``); a subclass's ``**options`` are typed with it."""

    base_url: str
    api_key: str | None
    client: httpx.AsyncClient | None
    timeout: float | httpx.Timeout
    max_retries: int
    retry_backoff: float
    max_retry_wait: float
    headers: Mapping[str, str] | None
    extra_body: Mapping[str, Any] | None
    sleep: Callable[[float], Awaitable[Any]]


class HTTPModelBase:
    """A streaming model over one JSON POST (see the module docstring).

    ``base_url`` is the API root the official SDKs use (ending in ``/v1``),
    ``default_base_url`` when not given; ``api_key`` goes out as the
    subclass's ``_headers`` say (a bearer token unless overridden);
    ``timeout`` is in seconds (connect capped at 10) or an
    ``httpx.Timeout``; ``max_retries`` bounds the retries of one call,
    ``retry_backoff`` doubling from its value, each wait capped at
    ``max_retry_wait``; ``headers`` and ``extra_body`` are added to every
    request; ``sleep`` is what waits between retries (a test passes a fake).
    """

    #: The path under ``base_url`` the requests go to.
    path = ""
    #: The API root when the caller gives no ``base_url``.
    default_base_url = ""
    #: The body key the API reads ``ModelOptions.max_tokens`` into.
    max_tokens_key = "max_tokens"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float | httpx.Timeout = 60.0,
        max_retries: int = 2,
        retry_backoff: float = 0.5,
        max_retry_wait: float = 20.0,
        headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self.model = model
        self.name = model
        root = base_url if base_url is not None else self.default_base_url
        if not root:
            raise TypeError(f"{type(self).__name__} needs a base_url")
        self.url = root.rstrip("/") + self.path
        self.api_key = api_key
        self.client = client
        self.timeout = (
            timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout, connect=min(timeout, 10))
        )
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.max_retry_wait = max_retry_wait
        self.headers = dict(headers or {})
        self.extra_body = dict(extra_body or {})
        self._sleep = sleep

    def request_body(
        self,
        messages: Sequence[ModelMessage],
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> dict[str, Any]:
        """The JSON body of one streaming request: the API's own
        (``api_body``), then ``extra_body``, then the call's ``options``
        (temperature, max tokens, tool choice when there are tools, and
        ``options.extra`` last, so the call wins)."""
        body = self.api_body(messages, tools)
        body.update(self.extra_body)
        if options is not None:
            if options.temperature is not None:
                body["temperature"] = options.temperature
            if options.max_tokens is not None:
                body[self.max_tokens_key] = options.max_tokens
            if options.tool_choice is not None and tools:
                body["tool_choice"] = self.tool_choice_to_wire(options.tool_choice)
            body.update(options.extra)
        return body

    def api_body(self, messages: Sequence[ModelMessage], tools: Sequence[ToolSpec]) -> dict[str, Any]:
        """The body the API reads for ``messages`` and ``tools`` (model,
        messages in its form, tool specs, the model's own settings), before
        ``extra_body`` and the call's options."""
        raise NotImplementedError

    def tool_choice_to_wire(self, choice: str) -> Any:
        """``ModelOptions.tool_choice`` (``"auto"``, ``"none"``,
        ``"required"`` or a tool's name) as the API takes it."""
        return choice

    def _headers(self) -> dict[str, str]:
        """The provider's own headers (authentication, version): by default
        the API key as a bearer token, as OpenAI's APIs take it."""
        return {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def _events(self, response: httpx.Response) -> AsyncIterator[ModelEvent]:
        raise NotImplementedError

    async def stream(
        self,
        messages: Sequence[ModelMessage],
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> AsyncGenerator[ModelEvent, None]:
        body = self.request_body(messages, tools, options)
        client = self.client if self.client is not None else httpx.AsyncClient(verify=ssl_context())
        attempt = 0
        try:
            while True:
                response = await self._open(client, body)
                started = False
                try:
                    async for event in self._events(response):
                        started = True
                        yield event
                    return
                except ModelError as exc:
                    # An in-band error that says "try again" (Anthropic's
                    # overloaded_error) before anything was yielded is as
                    # safe to retry as a 529 status.
                    if started or not exc.retryable or attempt >= self.max_retries:
                        raise
                finally:
                    await response.aclose()
                await self._sleep(min(self.retry_backoff * (2**attempt), self.max_retry_wait))
                attempt += 1
        finally:
            if client is not self.client:
                await client.aclose()

    async def _open(self, client: httpx.AsyncClient, body: dict[str, Any]) -> httpx.Response:
        """Send the request; retry 429/5xx and failed connects; return the
        open 2xx response, its body not yet read."""
        headers = {"accept": "text/event-stream", **self._headers(), **self.headers}
        content = json.dumps(body, ensure_ascii=False).encode()
        headers["content-type"] = "application/json"
        attempt = 0
        while True:
            request = client.build_request("POST", self.url, content=content, headers=headers, timeout=self.timeout)
            wait: float | None = None
            try:
                response = await client.send(request, stream=True)
            except httpx.ConnectTimeout as exc:
                if attempt >= self.max_retries:
                    raise ModelTimeoutError(f"connecting to {self.url} timed out") from exc
            except httpx.ConnectError as exc:
                if attempt >= self.max_retries:
                    raise ModelConnectionError(f"cannot connect to {self.url}: {exc}") from exc
            except httpx.TimeoutException as exc:
                raise ModelTimeoutError(f"{self.url} did not answer in time") from exc
            except httpx.TransportError as exc:
                raise ModelConnectionError(f"request to {self.url} failed: {exc}") from exc
            else:
                if response.is_success:
                    return response
                try:
                    text = (await response.aread()).decode("utf-8", "replace")
                except httpx.HTTPError:
                    text = ""
                finally:
                    await response.aclose()
                error = ModelHTTPError(response.status_code, text, secrets=(self.api_key,))
                if not error.retryable or attempt >= self.max_retries:
                    raise error
                wait = retry_after(response.headers)
            if wait is None:
                wait = self.retry_backoff * (2**attempt)
            attempt += 1
            await self._sleep(min(wait, self.max_retry_wait))


async def sse_events(response: httpx.Response) -> AsyncIterator[SSEEvent]:
    """The events of ``response`` as they complete, transport failures
    typed: a stall past the read timeout is ``ModelTimeoutError``, a
    dropped connection ``ModelConnectionError``."""
    parser = SSEParser()
    try:
        async for data in response.aiter_bytes():
            for event in parser.feed(data):
                yield event
            parser.comments.clear()
    except httpx.TimeoutException as exc:
        raise ModelTimeoutError("the model stream stalled past the read timeout") from exc
    except httpx.TransportError as exc:
        raise ModelConnectionError(f"the model stream broke off: {exc}") from exc


def json_object(payload: str, what: str = "event") -> dict[str, Any]:
    """One SSE ``data`` payload as the JSON object it must be; anything
    else is a ``ModelResponseError`` quoting the start of it (``what``
    names the API's word for one, "event" or "chunk")."""
    try:
        obj = json.loads(payload)
    except ValueError:
        raise ModelResponseError(f"a stream line is not JSON: {payload[:200]!r}") from None
    if not isinstance(obj, dict):
        raise ModelResponseError(f"a stream {what} is not an object: {payload[:200]!r}")
    return obj


def int_field(obj: Any, key: str) -> int | None:
    """``obj[key]`` when ``obj`` is a mapping holding an int there (a usage
    count), else ``None``."""
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, int) else None


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """One TLS context for the per-call clients: loading the CA bundle costs
    about 0.1 s, far more than a client; a context is not bound to a loop."""
    return httpx.create_ssl_context()


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds
    form; an HTTP date is ignored)."""
    for key, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(key)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue
        if seconds >= 0:
            return seconds
    return None
