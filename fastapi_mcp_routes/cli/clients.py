"""`config`: what connects an MCP client to a running endpoint over Streamable HTTP, in the
form each client documents, and where it goes.

- Claude Desktop's `claude_desktop_config.json` only launches local commands, so its entry runs
  the `mcp-remote` bridge (`npx mcp-remote URL --header ...`). Header values go in the entry's
  `env` and reach the arguments as `${NAME}`, as mcp-remote advises: a space inside an argument
  is not passed whole on every platform, and the secret stays out of the argument list.
- Claude Code takes a command: `claude mcp add --transport http NAME URL --header 'K: V'`.
- Cursor: an `mcpServers` entry with `url` and `headers` in `mcp.json`.
- VS Code: a `servers` entry with `"type": "http"`, `url` and `headers` in `.vscode/mcp.json`.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import SplitResult, urlsplit

from fastapi_mcp_routes.cli.errors import CliError

CLIENTS: Final = ("claude-desktop", "claude-code", "cursor", "vscode")
# Hosts mcp-remote reaches over plain HTTP without --allow-http.
_LOCAL_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1"})


@dataclass(frozen=True, slots=True)
class Snippet:
    """What to paste, and one line saying where."""

    text: str
    where: str


def snippet(client: str, url: str, name: str | None, headers: tuple[tuple[str, str], ...]) -> Snippet:
    """The snippet that connects `client` to the endpoint at `url`, sending `headers`."""
    parts = _checked_url(url)
    name = name or parts.hostname or "mcp"
    if client == "claude-desktop":
        return _claude_desktop(url, name, headers, parts.scheme == "http" and parts.hostname not in _LOCAL_HOSTS)
    if client == "claude-code":
        command = ["claude", "mcp", "add", "--transport", "http", name, url]
        for header, value in headers:
            command += ["--header", f"{header}: {value}"]
        where = "Run it in a shell; add --scope user to use the server in every project, --scope project to share it."
        return Snippet(shlex.join(command), where)
    if client == "cursor":
        entry: dict[str, Any] = {"url": url, **_headers(headers)}
        where = "Merge it into ~/.cursor/mcp.json (every project) or .cursor/mcp.json (this project)."
        return Snippet(_json({"mcpServers": {name: entry}}), where)
    if client == "vscode":
        entry = {"type": "http", "url": url, **_headers(headers)}
        where = "Merge it into .vscode/mcp.json in the workspace (or the user mcp.json: MCP: Open User Configuration)."
        return Snippet(_json({"servers": {name: entry}}), where)
    raise CliError(f"CLIENT must be one of {', '.join(CLIENTS)}; got {client!r}.")


def _claude_desktop(url: str, name: str, headers: tuple[tuple[str, str], ...], plain_http: bool) -> Snippet:
    arguments = ["-y", "mcp-remote", url, "--transport", "http-only"]
    if plain_http:
        arguments.append("--allow-http")
    environment: dict[str, str] = {}
    for header, value in headers:
        variable = _variable(header, environment)
        environment[variable] = value
        arguments += ["--header", f"{header}:${{{variable}}}"]
    entry: dict[str, Any] = {"command": "npx", "args": arguments}
    if environment:
        entry["env"] = environment
    where = (
        "Merge it into claude_desktop_config.json (macOS: ~/Library/Application Support/Claude/, Windows: "
        "%APPDATA%\\Claude\\) and restart Claude Desktop; it needs Node.js for npx."
    )
    return Snippet(_json({"mcpServers": {name: entry}}), where)


def _variable(header: str, taken: dict[str, str]) -> str:
    """The environment variable that carries a header's value: its name in capitals."""
    variable = re.sub(r"[^A-Z0-9]", "_", header.upper())
    while variable in taken:
        variable += "_"
    return variable


def _headers(headers: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    return {"headers": dict(headers)} if headers else {}


def _checked_url(url: str) -> SplitResult:
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port that is not a number raises ValueError
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise CliError(
            f"URL must be the endpoint's http:// or https:// address, say http://127.0.0.1:8000/mcp; got {url!r}."
        )
    return parts


def _json(value: Any) -> str:
    return json.dumps(value, indent=2)
