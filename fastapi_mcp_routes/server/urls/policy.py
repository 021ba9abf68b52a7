"""URL arguments on an allowlist: which server URLs a tool call may pass to a route.

A tool argument that is a URL lets a prompt-injected agent point the server at an internal
address (server-side request forgery): a metadata service, an admin port, a private network.
So every URL argument of a tool call must be under one of `allowed_server_urls`
(server/urls/match.py says what "under" means), checked in the pipeline before the
confirmation gate and the route: a refused call issues no confirmation token and runs nothing.
REST callers are not affected.

The default is secure: with no allowlist, URL arguments are refused, and one warning at
startup names the tools that take URLs. `allow_arbitrary_urls=True` turns the check off, with
a warning of its own; combined with an allowlist it is a contradiction, refused at startup.
The list may be seeded from the environment (`MCP_ALLOWED_SERVER_URLS`), read once, when
`mcp_routes` is called.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from fastapi_mcp_routes.server.urls.match import ServerUrl, UrlRefused, is_allowed, parse_server_url
from fastapi_mcp_routes.tools.recipe import Tool
from fastapi_mcp_routes.wire.errors import UrlNotAllowed

logger = logging.getLogger("fastapi_mcp_routes")

DEFAULT_ENV_VARIABLE: Final = "MCP_ALLOWED_SERVER_URLS"
# Entries in the environment variable are separated by commas, whitespace or both.
_ENV_SEPARATORS: Final = re.compile(r"[\s,]+")
# How much of a refused value the model is shown: enough to recognise it.
_VALUE_SHOWN: Final = 100
_HOW_TO_ALLOW: Final = (
    "list the servers they may reach in mcp_routes(tool_calls=ToolCalls(allowed_server_urls=[...])) (or in the "
    f"{DEFAULT_ENV_VARIABLE} environment variable, with allowed_server_urls_from_env=True), "
    "or accept any URL with allow_arbitrary_urls=True"
)


@dataclass(frozen=True, slots=True)
class UrlPolicy:
    """The server URLs tool calls may pass to routes; built once by `mcp_routes`.

    Args:
        allowed: URL prefixes a URL argument must be under; empty refuses every URL.
        arbitrary: skip the check altogether (`allow_arbitrary_urls=True`).
        env_variable: the environment variable the list was seeded from, if any.
    """

    allowed: tuple[ServerUrl, ...] = ()
    arbitrary: bool = False
    env_variable: str | None = None

    def check(self, tool: Tool, arguments: Mapping[str, Any]) -> None:
        """Refuse a call passing a URL that is not allowed: `UrlNotAllowed` names the
        argument, the value and the option that would allow it."""
        if tool.urls is None or self.arbitrary:
            return
        for where, value in tool.urls.values(arguments):
            reason = self._refusal_reason(value)
            if reason is not None:
                raise UrlNotAllowed(_refusal(tool.name, where, value, reason))

    def _refusal_reason(self, value: str) -> str | None:
        try:
            if is_allowed(value, self.allowed):
                return None
        except UrlRefused as refused:
            return str(refused)
        return "is not under any allowed server URL" if self.allowed else "is a URL, and no server URL is allowed"

    def log_startup(self, tools: Iterable[Tool]) -> None:
        """One warning at startup when URL arguments go unchecked, or are all refused."""
        taking = [_describe(tool) for tool in tools if tool.urls is not None]
        if self.arbitrary:
            named = f" Tools taking URLs: {', '.join(taking)}." if taking else ""
            logger.warning(
                "allow_arbitrary_urls=True: URL arguments of MCP tool calls are not checked, so an agent can "
                "make the server reach any address, internal ones included.%s",
                named,
            )
        elif not self.allowed and taking:
            empty = f" ({self.env_variable} is unset or empty)" if self.env_variable else ""
            logger.warning(
                "MCP tools take URL arguments and no server URL is allowed%s, so every call passing a URL is "
                "refused: %s. To allow them, %s.",
                empty,
                ", ".join(taking),
                _HOW_TO_ALLOW,
            )


def url_policy(
    allowed_server_urls: Iterable[str] | None,
    allow_arbitrary_urls: bool,
    allowed_server_urls_from_env: bool | str,
    environ: Mapping[str, str],
) -> UrlPolicy:
    """The policy `mcp_routes`' options describe; `ValueError` for options that contradict
    each other and for an entry that is not a plain `scheme://host[:port][/path]`."""
    if not isinstance(allow_arbitrary_urls, bool):
        raise ValueError(f"allow_arbitrary_urls must be True or False, got {allow_arbitrary_urls!r}")
    variable = _env_variable(allowed_server_urls_from_env)
    if allow_arbitrary_urls and (allowed_server_urls is not None or variable is not None):
        raise ValueError(
            "allow_arbitrary_urls=True accepts every URL, so an allowlist would be ignored: give either "
            "allow_arbitrary_urls=True or allowed_server_urls / allowed_server_urls_from_env, not both"
        )
    if isinstance(allowed_server_urls, str):
        raise ValueError(f"allowed_server_urls must be a list of URLs, got the single string {allowed_server_urls!r}")
    entries = [("allowed_server_urls", entry) for entry in allowed_server_urls or ()]
    if variable is not None:
        entries.extend((variable, entry) for entry in _ENV_SEPARATORS.split(environ.get(variable, "")) if entry)
    allowed = tuple(_allowed_url(source, entry) for source, entry in entries)
    return UrlPolicy(allowed, allow_arbitrary_urls, variable)


def _env_variable(option: bool | str) -> str | None:
    if option is True:
        return DEFAULT_ENV_VARIABLE
    if option is False:
        return None
    if isinstance(option, str) and option:
        return option
    raise ValueError(
        f"allowed_server_urls_from_env must be True, False or the name of an environment variable, got {option!r}"
    )


def _allowed_url(source: str, entry: object) -> ServerUrl:
    if not isinstance(entry, str):
        raise ValueError(f"{source} entries must be URL strings, got {entry!r}")
    try:
        url = parse_server_url(entry)
    except UrlRefused as refused:
        rule = f"{source} entries must be plain scheme://host[:port][/path] URLs"
        raise ValueError(f"{rule}; {entry!r} {refused}") from None
    if url.has_extras:
        raise ValueError(f"{source} entries cannot have a query or a fragment, got {entry!r}")
    return url


def _describe(tool: Tool) -> str:
    places = tool.urls.places() if tool.urls is not None else ()
    return f"{tool.name} ({', '.join(places)})"


def _refusal(tool: str, where: str, value: str, reason: str) -> str:
    shown = value if len(value) <= _VALUE_SHOWN else value[:_VALUE_SHOWN] + "…"
    return (
        f"The argument {where!r} of {tool} was refused: {shown!r} {reason}. The server passes on only the "
        "URLs its operator allows, with the mcp_routes option ToolCalls(allowed_server_urls=...) "
        "(allow_arbitrary_urls=True turns this check off)."
    )
