"""The Server Card (SEP-2127, experimental): a static description of the server at
`{path}/server-card`, for registries and gateways that look before they connect.

The card says what `server/discover` says, from the same values: the server's version and
name (as the card's title), and the versions the endpoint serves. Its own `name` is the
registry name the app gives (`ServerCard`). It is public by design, so no guard of the
endpoint applies, and any browser may read it (the CORS headers the draft names); clients
revalidate it with its `ETag` and get 304 while it is unchanged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from fastapi_mcp_routes.options import ServerCard
from fastapi_mcp_routes.server.dispatch import ServerIdentity
from fastapi_mcp_routes.wire.json import dumps

CARD_PATH: Final = "/server-card"  # after the endpoint's path, as the draft reserves it
CARD_MEDIA_TYPE: Final = "application/mcp-server-card+json"
CARD_SCHEMA: Final = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"
# A client revalidating the card sends its one tag (34 characters); a longer If-None-Match is not
# read, and gets the whole card, which a GET may always answer.
_IF_NONE_MATCH_MOST: Final = 8192
_TITLE_MOST: Final = 100  # the schema's bound on `title`; a longer app title is left out
# The draft's "CORS Requirements": public metadata, read-only. Its "Caching" is for the card
# alone: a refusal kept for an hour by a shared cache would refuse everyone it serves.
_CORS_HEADERS: Final = {
    "access-control-allow-origin": "*",
    "access-control-allow-methods": "GET",
    "access-control-allow-headers": "Content-Type, If-None-Match",
    "access-control-expose-headers": "ETag",
}
_CACHING: Final = "public, max-age=3600"
# A card whose URL is built from the request's Host says what that caller asked: a shared cache
# keyed without the Host would serve one caller's Host to everyone. Only the caller keeps it.
_CACHING_OWN: Final = "private, max-age=3600"


def card_document(card: ServerCard, identity: ServerIdentity, url: str, versions: Sequence[str]) -> dict[str, Any]:
    """The card for the endpoint at `url` serving `versions`, with the identity clients are told."""
    document: dict[str, Any] = {
        "$schema": CARD_SCHEMA,
        "name": card.name,
        "version": identity.version,
        "description": card.description,
    }
    if 1 <= len(identity.name) <= _TITLE_MOST:
        document["title"] = identity.name
    if card.website_url is not None:
        document["websiteUrl"] = card.website_url
    document["remotes"] = [{"type": "streamable-http", "url": url, "supportedProtocolVersions": list(versions)}]
    return document


def add_card_route(
    router: APIRouter,
    card: ServerCard,
    identity: ServerIdentity,
    endpoint_path: str,
    versions: Sequence[str],
    host_refusal: Callable[[Request], Response | None],
    over_rate_limit: Callable[[Request], Awaitable[Response | None]],
) -> None:
    """Serve the card at `{endpoint_path}/server-card`, with the CORS preflight a browser sends
    before a GET carrying `If-None-Match`; reads count against the endpoint's rate limit, as
    the draft asks a card's host to limit them. A Host the endpoint refuses is refused here
    too: the card's URL is built from it, and no Origin check stands in for it."""

    async def serve(request: Request) -> Response:
        if request.method == "OPTIONS":
            return Response(status_code=204, headers=_CORS_HEADERS)
        refusal = host_refusal(request) or await over_rate_limit(request)
        if refusal is not None:
            refusal.headers.update(_CORS_HEADERS)  # a page of another origin may read why
            return refusal
        if card.url is not None:
            url, caching = card.url, _CACHING
        else:
            url, caching = _endpoint_url(request, endpoint_path), _CACHING_OWN
        body = dumps(card_document(card, identity, url, versions))
        tag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        headers = {**_CORS_HEADERS, "cache-control": caching, "etag": tag}
        if _matches(request.headers.get("if-none-match"), tag):
            return Response(status_code=304, headers=headers)
        return Response(body, media_type=CARD_MEDIA_TYPE, headers=headers)

    router.add_route(endpoint_path + CARD_PATH, serve, methods=["GET", "OPTIONS"], include_in_schema=False)


def _endpoint_url(request: Request, endpoint_path: str) -> str:
    """The endpoint's URL, as the card beside it was asked for: under an include prefix, a
    mount and `root_path` too, which the request's path holds and the endpoint's does not."""
    asked = request.url.replace(query="", fragment="")
    path, root = asked.path, str(request.scope.get("root_path", ""))
    if not path.endswith(CARD_PATH):
        return str(request.base_url).rstrip("/") + endpoint_path
    if not path.startswith(root):  # FastAPI(root_path=...): the path arrives without it
        path = root.rstrip("/") + path
    return str(asked.replace(path=path.removesuffix(CARD_PATH)))


def _matches(if_none_match: str | None, tag: str) -> bool:
    """RFC 9110 If-None-Match: `*`, or a list of tags compared weakly."""
    if if_none_match is None or len(if_none_match) > _IF_NONE_MATCH_MOST:
        return False
    candidates = (candidate.strip().removeprefix("W/") for candidate in if_none_match.split(","))
    return any(candidate in ("*", tag) for candidate in candidates)
