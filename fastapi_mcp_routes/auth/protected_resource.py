"""OAuth 2.0 Protected Resource Metadata (RFC 9728) for the MCP endpoint.

An MCP client that gets a 401 reads `resource_metadata` from the challenge, fetches this
document, and learns which authorization servers issue tokens for this resource (spec
2025-11-25, basic/authorization). It is served at the well-known root and path-inserted for
the endpoint (`/.well-known/oauth-protected-resource/mcp`), as RFC 9728 section 3.1 describes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import JSONResponse

from fastapi_mcp_routes.auth.jwt import WELL_KNOWN_RESOURCE


@dataclass(frozen=True, slots=True)
class ProtectedResource:
    """What the metadata document says about the endpoint.

    Args:
        authorization_servers: issuer URLs of the authorization servers (at least one).
        scopes_supported: the scopes the tools use.
        resource: this resource's identifier, the audience tokens must name; by default the
            endpoint's own URL.
    """

    authorization_servers: Sequence[str]
    scopes_supported: Sequence[str] = ()
    resource: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.authorization_servers, str) or not self.authorization_servers:
            raise ValueError(
                f"authorization_servers must list at least one issuer URL, got {self.authorization_servers!r}"
            )

    @property
    def metadata_url(self) -> str | None:
        """Where a client finds this document for `resource` (RFC 9728 section 3.1: the
        well-known path inserted between the host and the resource's path); `None` without one."""
        if self.resource is None:
            return None
        parts = urlsplit(self.resource)
        path = WELL_KNOWN_RESOURCE + parts.path.rstrip("/")
        return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))

    def document(self, request: Request, endpoint_path: str) -> dict[str, Any]:
        resource = self.resource or str(request.base_url).rstrip("/") + endpoint_path
        return {
            "resource": resource,
            "authorization_servers": list(self.authorization_servers),
            "scopes_supported": list(self.scopes_supported),
            "bearer_methods_supported": ["header"],
        }


def add_metadata_routes(router: APIRouter, metadata: ProtectedResource, endpoint_path: str) -> None:
    """Serve the document at the well-known root and path-inserted for the endpoint."""

    async def serve(request: Request) -> JSONResponse:
        return JSONResponse(metadata.document(request, endpoint_path))

    for path in (WELL_KNOWN_RESOURCE, WELL_KNOWN_RESOURCE + endpoint_path):
        router.add_route(path, serve, methods=["GET"], include_in_schema=False)
