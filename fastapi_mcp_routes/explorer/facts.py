"""What the explorer tells a reader about the server itself: the options that decide how a
client talks to it, fixed when `mcp_routes` is called.

`tools/list` and `server/discover` say what the server offers; they do not say whether it keeps
sessions, what guards the endpoint, how long a confirmation lasts or how large a body may be.
Those are the options a person writing a client (or wondering why a call was refused) looks up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import params

from fastapi_mcp_routes.options import Limits, Sessions


@dataclass(frozen=True, slots=True)
class ServerFacts:
    """The server's identity and the options a reader of the explorer needs."""

    name: str
    version: str
    instructions: str | None
    protocol_versions: tuple[str, ...]  # every revision the endpoint speaks, sessions or not
    sessions: Sessions | None
    auth: str | None  # what guards every request to the endpoint (`auth=`), by name
    protected_resource: bool  # RFC 9728 metadata is served for the endpoint
    list_visible_only: bool
    confirm_mutations: bool
    confirmation_ttl_s: float
    rate_limit: str | None
    limits: Limits

    def as_json(self) -> dict[str, Any]:
        sessions = self.sessions
        return {
            "server": {"name": self.name, "version": self.version, "instructions": self.instructions},
            "protocolVersions": list(self.protocol_versions),
            "sessions": None
            if sessions is None
            else {
                "idleSeconds": sessions.idle_s,
                "maxLifeSeconds": sessions.max_life_s,
                "maxSessions": sessions.max_sessions,
                "maxPerCaller": sessions.max_per_caller,
            },
            "auth": {
                "endpoint": self.auth,
                "protectedResourceMetadata": self.protected_resource,
                "listVisibleOnly": self.list_visible_only,
            },
            "confirmation": {"mutations": self.confirm_mutations, "ttlSeconds": self.confirmation_ttl_s},
            "limits": {
                "maxBodyBytes": self.limits.max_body_bytes,
                "maxResponseBytes": self.limits.max_response_bytes,
                "pageSize": self.limits.page_size,
                "maxArgumentDepth": self.limits.max_argument_depth,
                "keepAliveSeconds": self.limits.keep_alive_s,
                "rateLimit": self.rate_limit,
            },
        }


def auth_name(auth: Any) -> str | None:
    """How the explorer names the endpoint's `auth=` dependency: its class or function name."""
    if auth is None:
        return None
    call = auth.dependency if isinstance(auth, params.Depends) else auth
    named = call if hasattr(call, "__name__") else type(call)
    return str(getattr(named, "__name__", repr(call)))
