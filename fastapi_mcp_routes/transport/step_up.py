"""A request a route refused for a scope the token lacks, answered as HTTP still allows.

Where nothing of the answer went out yet, the POST is answered HTTP 403 with
`WWW-Authenticate: Bearer error="insufficient_scope", scope="...", resource_metadata="..."` and
a JSON-RPC error naming the scopes in its `data` (the `DPoP` scheme in place of `Bearer` for a
caller that sent a DPoP-bound token), so the client can authorize again with them and retry
(spec 2025-11-25, basic/authorization "Scope Challenge Handling"). Once the answer is a stream
that has started (progress, a question, a keep-alive), or within a batch whose other
answers must not be lost to a retry, the status is no longer the call's alone: a tool call's
`isError` result carries the challenge in its `_meta`, and other requests get the error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from starlette.requests import HTTPConnection
from starlette.types import Scope

from fastapi_mcp_routes.wire.challenge import HEADER_WWW_AUTHENTICATE, challenge, scheme_of, with_challenge
from fastapi_mcp_routes.wire.errors import InsufficientScope
from fastapi_mcp_routes.wire.jsonrpc import RequestId, encode_error, encode_result

FORBIDDEN: Final = 403
_WWW_AUTHENTICATE: Final = HEADER_WWW_AUTHENTICATE.encode()

Header = tuple[bytes, bytes]


@dataclass(frozen=True, slots=True)
class StepUp:
    """How the endpoint answers a refusal for a missing scope.

    Args:
        metadata_path: where the endpoint's RFC 9728 metadata is served (path-inserted), named
            in the challenge; `None` when the endpoint serves none (`mcp_routes(protected_resource=...)`).
        metadata_url_given: the metadata's URL where the deployment says it (the endpoint's 401
            names it, or the resource identifier gives it), so that the request's `Host` header
            never makes it up, nor a proxy's address stand in for the public one.
    """

    metadata_path: str | None = None
    metadata_url_given: str | None = None

    def metadata_url(self, scope: Scope) -> str | None:
        if self.metadata_path is None:
            return None
        if self.metadata_url_given is not None:
            return self.metadata_url_given
        return str(HTTPConnection(scope).base_url).rstrip("/") + self.metadata_path

    def headers(self, refused: InsufficientScope, scope: Scope) -> tuple[Header, ...]:
        """The challenge of an HTTP 403."""
        value = challenge(refused.scopes, self.metadata_url(scope), _scheme(scope))
        return ((_WWW_AUTHENTICATE, value.encode()),)

    def in_answer(self, request_id: RequestId, refused: InsufficientScope, scope: Scope) -> bytes:
        """The answer where HTTP 403 can no longer be sent: a tool call's `isError` result with
        the challenge in its `_meta`, else the error, whose `data` names the scopes."""
        if refused.result is None:
            return encode_error(request_id, refused)
        answer = with_challenge(refused.result, refused.scopes, self.metadata_url(scope), _scheme(scope))
        return encode_result(request_id, answer)


def _scheme(scope: Scope) -> str:
    return scheme_of(HTTPConnection(scope).headers.get("authorization"))
