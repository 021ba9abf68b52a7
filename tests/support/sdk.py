"""The official MCP SDK client, on an endpoint a test serves."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


@asynccontextmanager
async def mcp_client(
    base_url: str, headers: dict[str, str] | None = None, *, mode: str = "legacy", **options: Any
) -> AsyncIterator[Client]:
    """The official MCP client on `{base_url}/mcp`, sending `headers` on every request; in a
    session (`legacy`) unless `mode` says otherwise; `options` are the client's callbacks."""
    http = create_mcp_http_client(headers=headers)
    transport = streamable_http_client(f"{base_url}/mcp", http_client=http)
    async with http, Client(transport, mode=mode, **options) as client:
        yield client
