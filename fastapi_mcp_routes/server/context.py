"""What a route can do while it runs as a tool: `ToolContext`.

A route asks for `ctx: Annotated[ToolContext, Depends()]`. Over plain REST the same route runs
unchanged and the context is inert: progress and log calls do nothing, and asking the client
something raises `ToolContextError` saying why. During a tool call, the context reaches the
running call (server/call.py) and through it the client, in either protocol era.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from starlette.requests import Request

from fastapi_mcp_routes.server.call import CALL_SCOPE_KEY, InputRequest, ToolCall
from fastapi_mcp_routes.wire.constants import RESERVED_KEY_PREFIX
from fastapi_mcp_routes.wire.errors import ToolContextError

ELICITATION_ACTIONS: Final = ("accept", "decline", "cancel")

__all__ = ["ElicitationResult", "InputRequest", "ToolContext", "ToolContextError"]


@dataclass(frozen=True, slots=True)
class ElicitationResult:
    """The client's answer to `ToolContext.elicit`: `accept`, `decline` or `cancel`."""

    action: str
    content: dict[str, Any] | None


class ToolContext:
    """What a route can do when it runs as an MCP tool; inert over plain REST.

    Use it as a dependency: `ctx: Annotated[ToolContext, Depends()]`.
    """

    def __init__(self, request: Request) -> None:
        call = request.scope.get(CALL_SCOPE_KEY)
        self._call: ToolCall | None = call if isinstance(call, ToolCall) else None

    @property
    def is_tool_call(self) -> bool:
        """Whether the route runs as an MCP tool (else it serves a REST request)."""
        return self._call is not None

    @property
    def request_id(self) -> str | int | None:
        """The JSON-RPC id of the `tools/call` request."""
        return self._call.request_id if self._call else None

    @property
    def session_id(self) -> str | None:
        """The MCP session the call belongs to, when the endpoint uses sessions."""
        return self._call.channel.session_id if self._call else None

    @property
    def client_info(self) -> dict[str, Any] | None:
        """The client's `clientInfo`: from `initialize`, or from this request's envelope."""
        info = self._call.channel.client_info if self._call else None
        return dict(info) if info is not None else None

    @property
    def principal(self) -> Any:
        """What the endpoint's `auth` dependency returned for the caller (None without auth)."""
        return self._call.principal if self._call else None

    @property
    def cancelled(self) -> bool:
        """Whether the client cancelled the call; the route's next await raises as well."""
        return self._call is not None and self._call.cancel_scope.cancel_called

    async def start_task(self, *, ttl_s: float | None = None) -> bool:
        """Become a task now, when this call may be one (`mcp_tool(task=...)`, a 2026-07-28
        client that declared the tasks extension): the client gets the task to poll at once,
        and the route runs on; what it asks from here on is the task's question. Without this,
        a call becomes a task once it runs longer than `Tasks.after_s`. `ttl_s` asks to keep
        the task (and its result) this long, from 1 s up to `Tasks.max_ttl_s`; it must be a
        number (`ValueError`). Returns whether the call is a task; over REST, or when it cannot
        be one, nothing changes and this is `False`."""
        if ttl_s is not None and (isinstance(ttl_s, bool) or not isinstance(ttl_s, (int, float)) or math.isnan(ttl_s)):
            # Said here, where the route can act on it: NaN has no order, so no bound would hold it.
            raise ValueError(f"ttl_s must be a number of seconds, got {ttl_s!r}")
        return await self._call.channel.start_task(ttl_s) if self._call is not None else False

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send `notifications/progress` if the client asked for progress; values must increase.
        In a task, progress is the task's `statusMessage` (the message, else progress/total)."""
        if self._call is not None:
            await self._call.report_progress(progress, total, message)

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send `notifications/message` at an RFC 5424 level, honouring `logging/setLevel`."""
        if self._call is not None:
            await self._call.log(level, data, logger)

    @property
    def client_capabilities(self) -> dict[str, Any]:
        """What the client declared it can do (the session's, or this request's envelope)."""
        return dict(self._call.channel.client_capabilities) if self._call else {}

    async def ask(self, requests: Mapping[str, InputRequest]) -> dict[str, Mapping[str, Any]]:
        """Ask the client several things at once, by key; returns each raw answer by key.

        In the stateless revision the questions travel together in one `input_required`
        result and the route runs again with the answers; in a session they are asked one
        after the other on the call's stream."""
        return await self._ask(self._require_call("input requests"), requests)

    async def elicit(self, message: str, schema: Mapping[str, Any], *, key: str | None = None) -> ElicitationResult:
        """Ask the user, through the client, for input matching a flat object `schema`.

        `key` names the question in a stateless `input_required` result (default: numbered)."""
        call = self._require_call("elicitation/create")
        key = key or call.next_key("elicitation/create")
        result = (await self._ask(call, {key: InputRequest.elicitation(message, schema)}))[key]
        action = result.get("action")
        if action not in ELICITATION_ACTIONS:
            # Anything else is not an answer the spec allows (client/elicitation, ElicitResult):
            # taken as the user not answering, so a route's "decline" check cannot be bypassed.
            return ElicitationResult("cancel", None)
        content = result.get("content")
        return ElicitationResult(action, content if action == "accept" and isinstance(content, dict) else None)

    async def list_roots(self, *, key: str | None = None) -> list[dict[str, Any]]:
        """The roots the client exposes (`roots/list`)."""
        call = self._require_call("roots/list")
        key = key or call.next_key("roots/list")
        roots = (await self._ask(call, {key: InputRequest.roots()}))[key].get("roots")
        return [dict(root) for root in roots if isinstance(root, Mapping)] if isinstance(roots, list) else []

    async def sample(
        self,
        messages: Sequence[Mapping[str, Any]],
        max_tokens: int,
        *,
        system_prompt: str | None = None,
        temperature: float | None = None,
        key: str | None = None,
        **extra: Any,
    ) -> Mapping[str, Any]:
        """Ask the client's model for a completion (`sampling/createMessage`); returns its result."""
        if system_prompt is not None:
            extra["systemPrompt"] = system_prompt
        if temperature is not None:
            extra["temperature"] = temperature
        call = self._require_call("sampling/createMessage")
        key = key or call.next_key("sampling/createMessage")
        return (await self._ask(call, {key: InputRequest.sampling(messages, max_tokens, **extra)}))[key]

    @staticmethod
    async def _ask(call: ToolCall, requests: Mapping[str, InputRequest]) -> dict[str, Mapping[str, Any]]:
        reserved = sorted(key for key in requests if key.startswith(RESERVED_KEY_PREFIX))
        if reserved:
            raise ValueError(
                f"input request keys starting {RESERVED_KEY_PREFIX!r} are the library's own, got {reserved!r}"
            )
        return await call.ask(requests)

    def _require_call(self, method: str) -> ToolCall:
        if self._call is None:
            raise ToolContextError(f"{method} is only possible while the route runs as an MCP tool, not over REST")
        return self._call
