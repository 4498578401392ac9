"""An MCP server for tests/test_mcp.py, written with the ``mcp`` SDK's own
server API, with the tools that make a server misbehave: errors, a protocol
error, a crash, a slow call; and one that reports its progress, one that
changes the server's tools.

Every start appends its process id to the file ``MCP_TEST_STARTS`` names,
so a test counts the sessions the app opened. ``--http PORT`` serves
streamable HTTP on 127.0.0.1 instead of stdio.
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("tests")


@server.tool()
def whoami() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
def echo(text: str) -> str:
    """The text, as it came."""
    return text


@server.tool()
def fail(reason: str) -> str:
    """Fails as a tool: an isError result with the reason."""
    raise ToolError(f"fail says: {reason}")


@server.tool()
def strict(value: str) -> int:
    """Fails with pydantic's validation text, version and all, as the SDK
    answers arguments its own schema refuses."""
    import pydantic

    try:
        return pydantic.TypeAdapter(int).validate_python(value)
    except pydantic.ValidationError as exc:
        raise ToolError(str(exc)) from None


@server.tool()
def leak() -> str:
    """Fails quoting a credential, as a server that echoes its request does."""
    raise ToolError("upstream said 401 for Authorization: Bearer sk-proj-abcdefghijklmnopqrstuvwx")


@server.tool()
def protocol_error() -> str:
    """Answers with a JSON-RPC error instead of a result."""
    raise MCPError(-32602, "protocol_error refuses on purpose")


@server.tool()
def crash() -> str:
    """The process dies in the middle of the call."""
    os._exit(3)


@server.tool()
async def sleep(seconds: float) -> str:
    """Answers after `seconds`."""
    await anyio.sleep(seconds)
    return "awake"


@server.tool()
async def count(steps: int, ctx: Context) -> str:
    """Reports its progress `steps` times, then answers."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return "counted"


def grown() -> str:
    """A tool that exists only after `grow` ran."""
    return "grown here"


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `grown` and tells the client its tools changed."""
    server.add_tool(grown)
    await ctx.notify_tools_changed()
    return "grew"


if __name__ == "__main__":
    starts = os.environ.get("MCP_TEST_STARTS")
    if starts:
        with open(starts, "a") as log:
            log.write(f"{os.getpid()}\n")
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
