"""`skills/list`, `skills/get`, `resources/directory/read`, and the reads of skill files that
`resources/read` hands over.

A guarded directory (`Skills(dependencies=...)`) is asked first, on every request: the library
serves the skill files as a FastAPI route with those dependencies (mounting.py), and each MCP
request runs that route in process with the caller's credentials, as a resource read runs its
route, so the dependencies decide with everything FastAPI gives them. A caller they refuse is
answered with their refusal, and sees an empty `skills/list`, as lists hide what a caller
cannot use.
"""

from __future__ import annotations

import binascii
import json
from base64 import b64decode, urlsafe_b64encode
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import quote

from fastapi import FastAPI

from fastapi_mcp_routes.server.budget import AnswerBudget, Holding, busy
from fastapi_mcp_routes.server.channel import ClientChannel, Result
from fastapi_mcp_routes.server.skills.catalog import SCHEME, SkillCatalog
from fastapi_mcp_routes.tools.invoke import Caller, call_app, caller_request
from fastapi_mcp_routes.wire.errors import InvalidParams, ResourceNotFound
from fastapi_mcp_routes.wire.failures import internal_error
from fastapi_mcp_routes.wire.jsonrpc import Request, truncate

# The guards' request asks for no file (the route answers it 204): at most a refusal's detail
# comes back.
_GUARD_BYTES: Final = 64 * 1024
_CURSOR_PREFIX: Final = "skills:"
# What an answer adds to a file's own bytes: its URI, media type and the JSON-RPC envelope.
_ANSWER_OVERHEAD: Final = 4096


class SkillMethods:
    """Answers the skills extension's requests from one directory of skills."""

    def __init__(
        self,
        *,
        catalog: SkillCatalog,
        app: FastAPI,
        guard_path: str | None,
        page_size: int,
        max_uri_chars: int,
        budget: AnswerBudget | None = None,
    ) -> None:
        self._budget = budget if budget is not None else AnswerBudget()
        self.catalog = catalog
        self._app = app
        self._guard_path = guard_path  # None: nothing guards the skills but the endpoint
        self._page_size = page_size
        self._max_uri_chars = max_uri_chars

    @property
    def guarded(self) -> bool:
        """Whether dependencies of their own guard the skills."""
        return self._guard_path is not None

    def serves(self, uri: str) -> bool:
        """Whether `resources/read` hands `uri` over: a skill file this server reads, or, for a
        guarded directory, any `skill://` URI, so the guard answers before anyone learns
        whether the file exists."""
        return uri in self.catalog.files or (self.guarded and uri.startswith(SCHEME))

    async def read(self, request: Request, channel: ClientChannel, uri: str) -> Result:
        await self._guard(channel.caller)
        file = self.catalog.files.get(uri)
        if file is None:
            raise ResourceNotFound(truncate(uri, 200), channel.resource_not_found_code)
        # Room for the answer in the budget before it is built (base64 takes a third more); the
        # transport holds the answer itself until it is written.
        with Holding(self._budget, channel.holder) as holding:
            refused = holding.hold(len(file.data) * 4 // 3 + _ANSWER_OVERHEAD)
            if refused is not None:
                raise busy(refused)
            return {"contents": [file.contents()]}

    async def list(self, request: Request, channel: ClientChannel) -> Result:
        # The guard first: a cursor checked against the number of skills would count them for
        # a caller the guard refuses.
        try:
            await self._guard(channel.caller)
        except InvalidParams:
            return {"skills": []}  # a caller the guard refuses sees no skills
        start = _cursor_start(request.params.get("cursor"), len(self.catalog.skills))
        end = start + self._page_size
        result: dict[str, Any] = {"skills": [skill.entry() for skill in self.catalog.skills[start:end]]}
        if end < len(self.catalog.skills):
            result["nextCursor"] = urlsafe_b64encode(f"{_CURSOR_PREFIX}{end}".encode()).decode("ascii")
        return result

    async def get(self, request: Request, channel: ClientChannel) -> Result:
        uri = self._uri(request.params)
        # The guard first: a caller it refuses learns nothing of which skills exist.
        await self._guard(channel.caller)
        skill = self.catalog.by_uri.get(uri)
        if skill is None:
            raise InvalidParams(f"No skill is served at {truncate(uri)}.", {"uri": truncate(uri, 200)})
        return {"skill": skill.entry()}

    async def read_directory(self, request: Request, channel: ClientChannel) -> Result:
        uri = self._uri(request.params)
        await self._guard(channel.caller)
        children = self.catalog.folders.get(uri)
        if children is None:
            raise InvalidParams(f"{truncate(uri)} is not a directory resource.", {"uri": truncate(uri, 200)})
        # Every folder is listed whole: a skill holds 512 files and 512 folders at most.
        if request.params.get("cursor") is not None:
            raise InvalidParams("Invalid params: 'cursor' is not one this server gave.")
        return {"resources": [dict(child) for child in children]}

    def _uri(self, params: Mapping[str, Any]) -> str:
        uri = params.get("uri")
        if not isinstance(uri, str) or not uri:
            raise InvalidParams("Invalid params: 'uri' must be a non-empty string.")
        if len(uri) > self._max_uri_chars:
            raise InvalidParams(
                f"Invalid params: a URI may be {self._max_uri_chars} characters long at most (Limits.max_uri_chars)."
            )
        return uri

    async def _guard(self, caller: Caller) -> None:
        """Run the skills' dependencies as the caller: their refusal (4xx) is `InvalidParams`
        with the status, their failure an internal error."""
        if self._guard_path is None:
            return
        path = self._guard_path + "/"
        scope = caller_request(caller, "GET", path, quote(path))
        try:
            response = await call_app(self._app, scope, b"", _GUARD_BYTES)
        except Exception as exc:
            raise internal_error("the skills' guard failed", "the skills' guard raised", exc=exc) from None
        if response.status >= 500:
            raise internal_error("the skills' guard failed", "the skills' guard answered HTTP %d", response.status)
        if response.status >= 400:
            raise InvalidParams(_refusal(response.status, response.body), {"status": response.status})


def _refusal(status: int, body: bytes) -> str:
    """What the guard said, as a REST client would read it (FastAPI's `detail`)."""
    try:
        detail = json.loads(body).get("detail")
    except (ValueError, AttributeError):
        detail = None
    said = f": {truncate(str(detail), 200)}" if isinstance(detail, str) and detail else ""
    return f"The skills' guard refused the request (HTTP {status}){said}."


def _cursor_start(cursor: object, count: int) -> int:
    """Where a `skills/list` page starts; `InvalidParams` for a cursor this server did not give."""
    if cursor is None:
        return 0
    refused = InvalidParams("Invalid params: 'cursor' is not one this server gave.")
    if not isinstance(cursor, str) or len(cursor) > 64:
        raise refused
    try:
        text = b64decode(cursor.encode("ascii"), altchars=b"-_", validate=True).decode("ascii")
    except (binascii.Error, UnicodeError, ValueError):
        raise refused from None
    index = text.removeprefix(_CURSOR_PREFIX)
    if text == index or not index.isdigit() or not 0 < int(index) < count:
        raise refused
    return int(index)
