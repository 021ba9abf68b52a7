"""The app the resource, prompt and completion tests serve, in this process or as several
(`python -m uvicorn tests.resources_app:app`).

`notes_resources_app` builds a fresh app (its notes are its own); `app` is the one each uvicorn
process imports, taking what several processes share from the environment: the secret
(`FASTAPI_MCP_ROUTES_SECRET`, read by `mcp_routes` itself) and a Redis store when
`FASTAPI_MCP_ROUTES_REDIS_URL` names one.

Notes are resources (`notes://{note_id}`, read from `GET /notes/{note_id}`), so a write to
`/notes/{note_id}` over REST, or as the `write_note` tool, tells the note's subscribers. Two
routes are guarded by an API key as an app guards its REST routes (FastAPI's `APIKeyHeader`
refuses a request without one 401, a dependency on it refuses a wrong one 403), and one prompt
asks its client a question (`ToolContext`).
"""

from __future__ import annotations

import base64
import os
from typing import Annotated, Any, Final, Literal

from fastapi import Depends, FastAPI, HTTPException, Response, Security
from fastapi.responses import PlainTextResponse
from fastapi.security import APIKeyHeader

from fastapi_mcp_routes import (
    ToolCalls,
    ToolContext,
    mcp_completion,
    mcp_prompt,
    mcp_resource,
    mcp_routes,
    mcp_tool,
    notify_resource_updated,
)

REDIS_URL_VARIABLE: Final = "FASTAPI_MCP_ROUTES_REDIS_URL"
API_KEY: Final = "resources-test-key"
MISSING_KEY: Final = "Not authenticated"  # what FastAPI's APIKeyHeader answers, 401
WRONG_KEY: Final = "That API key does not open the vault."
# A 1x1 red pixel: a resource that is no text.
RED_PIXEL_PNG: Final = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
TOPICS: Final = ("gardening", "geology", "history")
CONTEXT_SCHEMA: Final = {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]}

Context = Annotated[ToolContext, Depends()]
api_key = APIKeyHeader(name="x-api-key")


def vault_key(key: Annotated[str, Security(api_key)]) -> None:
    """The app's own guard: no key is refused 401 by the scheme, a wrong one 403 here."""
    if key != API_KEY:
        raise HTTPException(403, WRONG_KEY)


def notes_resources_app(**options: Any) -> FastAPI:
    """A fresh app with two notes; `options` go to `mcp_routes`."""
    app = FastAPI(title="Resources")
    # A tool that writes is what this app shows, not confirming mutations.
    app.include_router(mcp_routes(app, tool_calls=ToolCalls(require_confirmation_for_mutations=False), **options))
    notes = {1: "first note", 2: "second note"}

    @mcp_resource("notes://{note_id}", description="One note, by its number.")
    @app.get("/notes/{note_id}", response_class=PlainTextResponse)
    def read_note(note_id: int) -> str:
        if note_id not in notes:
            raise HTTPException(404, f"No note {note_id}.")
        return notes[note_id]

    @mcp_tool()
    @app.put("/notes/{note_id}")
    def write_note(note_id: int, text: str) -> dict[str, Any]:
        """Write a note: its subscribers are told, whoever wrote it."""
        notes[note_id] = text
        return {"id": note_id, "text": text}

    @app.post("/notes/{note_id}/touch", status_code=204)
    async def touch_note(note_id: int) -> None:
        """A change the app announces itself: the path is not the note's."""
        await notify_resource_updated(app, f"notes://{note_id}")

    @mcp_completion(resource="notes://{note_id}", argument="note_id")
    @app.get("/complete/note-id")
    def complete_note_id(value: str) -> list[str]:
        return [str(number) for number in sorted(notes) if str(number).startswith(value)]

    @mcp_resource("about://readme", name="readme", title="Read me")
    @app.get("/readme", response_class=PlainTextResponse)
    def readme() -> str:
        return "Notes, as resources."

    @mcp_resource("about://logo", name="logo", mime_type="image/png")
    @app.get("/logo", response_class=Response)
    def logo() -> Response:
        return Response(RED_PIXEL_PNG, media_type="image/png")

    @mcp_resource("secrets://vault", name="vault")
    @app.get("/vault", response_class=PlainTextResponse, dependencies=[Depends(vault_key)])
    def vault() -> str:
        return "the vault's contents"

    @mcp_prompt(name="summarize_note", description="Summarize one note.")
    @app.get("/prompts/summarize")
    def summarize_note(note_id: int, style: Literal["short", "long"] = "short") -> str:
        return f"Summarize in a {style} way: {notes.get(note_id, '')}"

    @mcp_prompt(name="write_about")
    @app.get("/prompts/write-about")
    def write_about(topic: str) -> str:
        return f"Write about {topic}."

    @mcp_completion(prompt="write_about", argument="topic")
    @app.get("/complete/topic")
    def complete_topic(value: str) -> list[str]:
        return [topic for topic in TOPICS if topic.startswith(value)]

    @mcp_prompt(name="vault_prompt")
    @app.get("/prompts/vault", dependencies=[Depends(vault_key)])
    def vault_prompt() -> str:
        return "Tell me what is in the vault."

    @mcp_prompt(name="ask_context")
    @app.get("/prompts/ask-context")
    async def ask_context(ctx: Context) -> str:
        answer = await ctx.elicit("What context should the prompt use?", CONTEXT_SCHEMA, key="context")
        return f"Use this context: {(answer.content or {}).get('context')}"

    return app


def shared_store() -> dict[str, Any]:
    """`store=` for `mcp_routes`: Redis when `FASTAPI_MCP_ROUTES_REDIS_URL` names one, else nothing."""
    url = os.environ.get(REDIS_URL_VARIABLE)
    if not url:
        return {}
    # Imported only when asked for, so the app serves one process wherever RedisStore is missing.
    from fastapi_mcp_routes import RedisStore

    return {"store": RedisStore.from_url(url)}


app = notes_resources_app(**shared_store())
