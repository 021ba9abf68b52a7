"""Requests of the 2026-07-28 revision, which has no sessions: each one says who sends it."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.jsonrpc import HEADERS, rpc

STATELESS_VERSION = "2026-07-28"  # the revision without sessions: each request says who it is


def stateless_meta(capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `_meta` a 2026-07-28 request carries: the revision, the client's capabilities and name."""
    return {
        "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    }


def stateless_request(
    method: str, params: dict[str, Any] | None = None, meta: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A 2026-07-28 request: `params` with `meta` (by default `stateless_meta()`) as their `_meta`."""
    return rpc(method, {**(params or {}), "_meta": stateless_meta() if meta is None else meta})


def stateless_headers(method: str, name: str | None = None, **extra: str) -> dict[str, str]:
    """The routing headers a conforming 2026-07-28 client sends with `method` (and a tool's `name`)."""
    sent = {**HEADERS, "mcp-protocol-version": STATELESS_VERSION, "mcp-method": method}
    if name is not None:
        sent["mcp-name"] = name
    return {**sent, **extra}


def post_stateless(
    http: httpx.Client,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    meta: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """POST one 2026-07-28 request with the routing headers a conforming client sends, and
    `headers` besides (say a credential)."""
    sent = {**stateless_headers(method, (params or {}).get("name")), **(headers or {})}
    return http.post("/mcp", json=stateless_request(method, params, meta), headers=sent)
