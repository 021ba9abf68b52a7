"""`ResourceWrites`: the app's own successful writes notify the subscribers of what they changed.

A POST, PUT, PATCH or DELETE answered 2xx whose path is the path a resource is read from (`PUT
/notes/1` for `notes://{note_id}`, read from `GET /notes/{note_id}`) announces that resource's
update (server/resources/updates.py), whether a person sent it over REST or an agent as a tool call (which
runs through the app too). Every other request passes through untouched, and while nobody can
hear an update (no stream of this process listens, and no other process shares the store) a
write only costs the check: REST p50 with and without the library is in docs/benchmarks.md.
"""

from __future__ import annotations

from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fastapi_mcp_routes.server.resources.updates import ResourceUpdates

WRITES: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class ResourceWrites:
    """ASGI middleware: announce the resource a successful write changed."""

    def __init__(self, app: ASGIApp, updates: ResourceUpdates) -> None:
        self.app = app
        self._updates = updates

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in WRITES or not self._updates.may_be_heard:
            await self.app(scope, receive, send)
            return
        status = 0

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        await self.app(scope, receive, watched)
        if 200 <= status < 300:
            root_path = scope.get("root_path", "")
            path = scope["path"]
            await self._updates.written(path[len(root_path) :] if root_path and path.startswith(root_path) else path)
