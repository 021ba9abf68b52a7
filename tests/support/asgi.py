"""A request as a server hands it to the app: the ASGI scope of an HTTP request from 127.0.0.1."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def http_scope(method: str, path: str, headers: Mapping[str, str]) -> dict[str, Any]:
    """The scope of a `method` request for `path` with `headers` (Host among them), from a client on
    127.0.0.1 to a server on 127.0.0.1:8000."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
