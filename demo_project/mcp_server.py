"""The demo's MCP server: one tool, ``roll_die``, over stdio.

Written with the ``mcp`` SDK's own server API (``MCPServer``), so the demo's
``UISTREAM["MCP_SERVERS"]["demo"]`` talks to a real MCP server process: the
app starts it on the first request that needs its tools, keeps its session
for the process, and the demo model's "roll a die with N sides" calls it as
``demo__roll_die``. Run by hand: ``python demo_project/mcp_server.py`` (it
then reads JSON-RPC from stdin).
"""

from __future__ import annotations

import secrets

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("demo", instructions="The uistream demo's dice.")


@server.tool()
def roll_die(sides: int) -> int:
    """Roll a fair die with `sides` sides (2 to 1000): a number from 1 to sides."""
    if not 2 <= sides <= 1000:
        raise ToolError(f"A die has 2 to 1000 sides, not {sides}.")
    return secrets.randbelow(sides) + 1


if __name__ == "__main__":
    server.run()
