"""What langchain-mcp-adapters makes of a server's tools, run in the virtualenv that
`tests/test_client_schemas.py` gives it (the adapters need the MCP SDK 1.x, this project's tests
the 2.x one).

    python tests/langchain_schemas.py URL HEADERS_JSON

Loads the tools of the MCP endpoint at URL with `load_mcp_tools` (headers sent on every
request), converts each with `convert_to_openai_tool(tool, strict=True)`, and prints one JSON
object: for each tool, the schema the adapters gave it (`args`), and the OpenAI function it
became (`function`) or the error its conversion raised (`error`).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_mcp_adapters.tools import load_mcp_tools


async def converted(url: str, headers: dict[str, str]) -> dict[str, Any]:
    connection: Any = {"transport": "streamable_http", "url": url, "headers": headers}
    report: dict[str, Any] = {}
    for tool in await load_mcp_tools(None, connection=connection):
        entry: dict[str, Any] = {"args": tool.args_schema}
        try:
            entry["function"] = convert_to_openai_tool(tool, strict=True)["function"]
        except Exception as error:  # reported to the test, which names the tool
            entry["error"] = f"{type(error).__name__}: {error}"
        report[tool.name] = entry
    return report


if __name__ == "__main__":
    url, headers = sys.argv[1], json.loads(sys.argv[2])
    print(json.dumps(asyncio.run(converted(url, headers))))
