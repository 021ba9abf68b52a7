"""A small notes service: REST for people, the same routes as MCP tools, resources and prompts
for agents.

Run it with `make run` (`make run PORT=9000` for another port), then open
http://127.0.0.1:8000/docs (REST) or point an MCP client at http://127.0.0.1:8000/mcp. Writes
need the API key `demo-key` (header `x-api-key`); the stats route needs a JWT with the scope
`notes:stats`, which `make token` prints (see `auth.py`).
Tools that change notes run once the call is confirmed (`ToolCalls.require_confirmation_for_mutations`).

Each note is also the resource `notes://{note_id}` (read from `GET /notes/{note_id}`, so a PUT or
DELETE of the note tells its subscribers), the newest notes are `notes://recent`, and the prompt
`summarize_note` completes its `note_id` from the notes there are. `export_notes` takes a
while, so a client that speaks the 2026-07-28 tasks extension gets it as a task to poll, and
`follow_notes` is a live feed of note changes (SSE) that an agent samples for a window.

`NOTES_TELEMETRY=console make run` prints the spans of every MCP call and of the route it runs
(OpenTelemetry, `telemetry.py`) and serves metrics at http://127.0.0.1:8000/metrics; it needs
the OpenTelemetry SDK and `opentelemetry-instrumentation-fastapi` (the test extra has them).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import AsyncIterable, AsyncIterator
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Literal

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from fastapi import Depends, FastAPI, HTTPException, Path, Query, Security, status
from fastapi.security import APIKeyHeader
from fastapi.sse import EventSourceResponse
from pydantic import BaseModel, Field

from example_app.auth import AUDIENCE, ISSUER, SCOPES, public_key_pem
from fastapi_mcp_routes import (
    JWTBearer,
    Principal,
    PromptMessage,
    PromptResponse,
    ProtectedResource,
    ServerInfo,
    ToolContext,
    mcp_completion,
    mcp_prompt,
    mcp_resource,
    mcp_routes,
    mcp_tool,
    notify_resource_updated,
    resource_content,
    text_content,
)

API_KEY = os.environ.get("NOTES_API_KEY", "demo-key")

# Bearer JWTs from the (demo) authorization server, issued for this service's MCP endpoint.
jwt_bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=public_key_pem())

app = FastAPI(title="Notes", version="1.0.0", description="Notes with tags, exposed over REST and MCP.")
if os.environ.get("NOTES_TELEMETRY"):
    from example_app.telemetry import notes_telemetry

    telemetry = notes_telemetry(os.environ["NOTES_TELEMETRY"])
else:
    telemetry = None
# The routes below are found too: tools are discovered lazily.
app.include_router(
    mcp_routes(
        app,
        server=ServerInfo(instructions="Notes service: list, read and edit notes."),
        # Tells a client that got a 401 where tokens come from (RFC 9728).
        protected_resource=ProtectedResource(
            authorization_servers=[ISSUER], scopes_supported=list(SCOPES), resource=AUDIENCE
        ),
        telemetry=telemetry.options() if telemetry is not None else None,
        # One skill teaching the notes workflow, served beside the tools (SEP-2640).
        skills=os.path.join(os.path.dirname(__file__), "skills"),
    )
)
if telemetry is not None:
    telemetry.instrument(app)


class Priority(StrEnum):
    low = "low"
    normal = "normal"
    high = "high"


class NoteIn(BaseModel):
    title: str = Field(min_length=1, max_length=200, description="A short title.", examples=["Groceries"])
    body: str = Field(default="", max_length=10_000, description="The note's text.")
    tags: list[str] = Field(default_factory=list, description="Labels to find the note by.")
    priority: Priority = Priority.normal


class Note(NoteIn):
    id: int
    created_at: datetime
    revision: int = Field(description="Increases by one on every update.")


class NotePage(BaseModel):
    items: list[Note]
    total: int
    next_offset: int | None = Field(description="Pass as `offset` for the next page; null on the last.")


class Stats(BaseModel):
    notes: int
    by_priority: dict[Priority, int]


class NoteStore:
    """An in-memory store; a real service would use a database."""

    def __init__(self) -> None:
        self.notes: dict[int, Note] = {}
        self.next_id = 1

    def add(self, note: NoteIn) -> Note:
        created = Note(id=self.next_id, created_at=datetime.now(UTC), revision=1, **note.model_dump())
        self.notes[created.id] = created
        self.next_id += 1
        return created


store = NoteStore()
store.add(NoteIn(title="Welcome", body="This note was here from the start.", tags=["intro"]))


# A FastAPI security scheme rather than a plain Header(): the scheme shows in /docs, and an
# agent's call that lacks the header is refused before it is asked to confirm a change.
api_key_header = APIKeyHeader(name="x-api-key", description="The service's API key (demo: demo-key).")


def require_api_key(x_api_key: Annotated[str, Security(api_key_header)]) -> None:
    """Writes need the service's API key; agents send it as their own HTTP header."""
    if not secrets.compare_digest(x_api_key, API_KEY):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "A valid x-api-key header is required.")


def find_note(note_id: int) -> Note:
    note = store.notes.get(note_id)
    if note is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"Note {note_id} does not exist.")
    return note


NoteId = Annotated[int, Path(ge=1, description="The note's id.")]
RECENT_URI = "notes://recent"
RECENT_COUNT = 5


class NoteChange(BaseModel):
    change: Literal["created", "updated", "deleted"]
    note_id: int
    title: str


class NoteFeed:
    """Who follows note changes as they happen (`GET /feed/notes`): a bounded queue each, and a
    follower that does not keep up loses changes rather than holding up the writes."""

    def __init__(self) -> None:
        self.followers: set[MemoryObjectSendStream[NoteChange]] = set()

    def publish(self, change: NoteChange) -> None:
        for follower in list(self.followers):
            with contextlib.suppress(anyio.WouldBlock, anyio.BrokenResourceError):
                follower.send_nowait(change)

    @contextlib.asynccontextmanager
    async def follow(self) -> AsyncIterator[MemoryObjectReceiveStream[NoteChange]]:
        send, receive = anyio.create_memory_object_stream[NoteChange](100)
        self.followers.add(send)
        try:
            with send, receive:
                yield receive
        finally:
            self.followers.discard(send)


feed = NoteFeed()


async def notes_changed(change: Literal["created", "updated", "deleted"], note: Note) -> None:
    """Tell the feed's followers, and the subscribers of `notes://recent`: it is read from its own
    path, which no write goes to, so the writes that change it say so themselves. (A note's own
    resource needs nothing: its writes go to its path.)"""
    feed.publish(NoteChange(change=change, note_id=note.id, title=note.title))
    await notify_resource_updated(app, RECENT_URI)


# Before `/notes/{note_id}`, which would otherwise take "recent" for a note id.
@mcp_resource(RECENT_URI, description="The five newest notes, newest first, as JSON.")
@app.get("/notes/recent", response_model=list[Note], summary="The newest notes")
def recent_notes() -> list[Note]:
    """The five newest notes, newest first."""
    return sorted(store.notes.values(), key=lambda n: n.id, reverse=True)[:RECENT_COUNT]


@mcp_tool()
@mcp_resource("notes://{note_id}", description="One note, as JSON.")  # a tool and a resource template at once
@app.get("/notes/{note_id}", response_model=Note, summary="Get a note")
def get_note(note_id: NoteId) -> Note:
    """Fetch one note by its id."""
    return find_note(note_id)


@app.get("/notes", response_model=NotePage, summary="List notes", openapi_extra={"x-mcp": True})
def list_notes(
    limit: Annotated[int, Query(ge=1, le=100, description="Notes per page.")] = 20,
    offset: Annotated[int, Query(ge=0, description="How many notes to skip.")] = 0,
    tag: Annotated[list[str] | None, Query(description="Only notes with all of these tags.")] = None,
    priority: Priority | None = None,
) -> NotePage:
    """List notes, newest first, optionally filtered by tags and priority."""
    notes = sorted(store.notes.values(), key=lambda n: n.id, reverse=True)
    if tag:
        notes = [n for n in notes if set(tag) <= set(n.tags)]
    if priority is not None:
        notes = [n for n in notes if n.priority == priority]
    page = notes[offset : offset + limit]
    next_offset = offset + limit if offset + limit < len(notes) else None
    return NotePage(items=page, total=len(notes), next_offset=next_offset)


@app.post(
    "/notes",
    response_model=Note,
    status_code=status.HTTP_201_CREATED,
    summary="Create a note",
    dependencies=[Depends(require_api_key)],
)
@mcp_tool()
async def create_note(note: NoteIn) -> Note:
    """Create a note. Needs the API key."""
    created = store.add(note)
    await notes_changed("created", created)
    return created


class BulkResult(BaseModel):
    created: list[int]


@app.post(
    "/notes/bulk",
    response_model=BulkResult,
    status_code=status.HTTP_201_CREATED,
    summary="Create several notes",
    dependencies=[Depends(require_api_key)],
)
@mcp_tool()
async def create_notes(notes: list[NoteIn], ctx: Annotated[ToolContext, Depends()]) -> BulkResult:
    """Create several notes at once, reporting progress to an agent that asks for it."""
    created = []
    for done, note in enumerate(notes, 1):
        added = store.add(note)
        created.append(added.id)
        await notes_changed("created", added)
        await ctx.report_progress(done, total=len(notes), message=note.title)
    await ctx.log("info", {"created": len(created)}, logger="notes")
    return BulkResult(created=created)


@mcp_tool(name="update_note")
@app.put("/notes/{note_id}", response_model=Note, summary="Replace a note", dependencies=[Depends(require_api_key)])
async def replace_note(note_id: NoteId, note: NoteIn) -> Note:
    """Replace a note's title, body, tags and priority. Needs the API key."""
    current = find_note(note_id)
    updated = Note(id=note_id, created_at=current.created_at, revision=current.revision + 1, **note.model_dump())
    store.notes[note_id] = updated
    await notes_changed("updated", updated)
    return updated


@mcp_tool()
@app.delete(
    "/notes/{note_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a note",
    dependencies=[Depends(require_api_key)],
)
async def delete_note(note_id: NoteId) -> None:
    """Delete a note for good. Needs the API key."""
    deleted = find_note(note_id)
    del store.notes[note_id]
    await notes_changed("deleted", deleted)


@mcp_tool(title="Follow note changes")
@app.get("/feed/notes", response_class=EventSourceResponse, summary="Note changes as they happen")
async def follow_notes() -> AsyncIterable[NoteChange]:
    """Every note created, updated or deleted from now on, as server-sent events. An agent
    samples it for a window (`durationMs`, `maxFrames`) and gets the changes seen meanwhile."""
    async with feed.follow() as changes:
        async for change in changes:
            yield change


class NotesExport(BaseModel):
    markdown: str
    notes: int


# Stands in for real work (rendering, uploading): an export of many notes takes a while.
EXPORT_SECONDS_PER_NOTE = float(os.environ.get("NOTES_EXPORT_SECONDS_PER_NOTE", "0.5"))


@mcp_tool(task="optional", title="Export all notes")
@app.get("/exports/notes", response_model=NotesExport, summary="Export every note as Markdown")
async def export_notes(ctx: Annotated[ToolContext, Depends()]) -> NotesExport:
    """Render every note as one Markdown document, oldest first. It takes a while: an agent
    whose client speaks the tasks extension gets a task to poll, its progress as the status."""
    notes = sorted(store.notes.values(), key=lambda note: note.id)
    sections = []
    for done, note in enumerate(notes, 1):
        await anyio.sleep(EXPORT_SECONDS_PER_NOTE)
        tags = f"\n\nTags: {', '.join(note.tags)}" if note.tags else ""
        sections.append(f"## {note.title}\n\n{note.body}{tags}")
        await ctx.report_progress(done, total=len(notes), message=f"Exported {done} of {len(notes)} notes")
    return NotesExport(markdown="\n\n".join(sections), notes=len(notes))


@mcp_tool(title="Note statistics")
@app.get("/stats", response_model=Stats)
def note_stats(reader: Annotated[Principal, Security(jwt_bearer, scopes=["notes:stats"])]) -> Stats:
    """Count notes by priority. Needs a bearer JWT with the scope notes:stats."""
    counts = dict.fromkeys(Priority, 0)
    for note in store.notes.values():
        counts[note.priority] += 1
    return Stats(notes=len(store.notes), by_priority=counts)


Tone = Literal["short", "long"]


@mcp_prompt(description="Ask for a summary of one note: a sentence (short) or a paragraph (long).")
@app.get("/notes/{note_id}/summary-prompt", response_model=PromptResponse, summary="Summarize a note")
def summarize_note(
    note_id: NoteId, tone: Annotated[Tone, Query(description="A sentence, or a paragraph.")] = "short"
) -> PromptResponse:
    """Ask for a summary of one note. Over MCP the arguments arrive as strings ("1", "long")
    and this route's own validation converts them; `tone` completes from its two values."""
    note = find_note(note_id)
    length = "in one sentence" if tone == "short" else "in one paragraph, keeping every fact"
    return PromptResponse(
        description=f"Summarize the note {note.title!r}",
        messages=[
            PromptMessage(
                role="user",
                content=resource_content(f"notes://{note.id}", "application/json", text=note.model_dump_json()),
            ),
            PromptMessage(role="user", content=text_content(f"Summarize the note above {length}.")),
        ],
    )


def ids_starting_with(value: str) -> list[str]:
    """The ids of the notes that start with what the user typed so far."""
    return [str(note_id) for note_id in sorted(store.notes) if str(note_id).startswith(value)]


Typed = Annotated[str, Query(description="What the user typed so far.")]


@mcp_completion(prompt="summarize_note", argument="note_id")
@app.get("/completions/summarize-note/note-id", summary="Note ids for summarize_note")
def complete_prompt_note_id(value: Typed = "") -> list[str]:
    return ids_starting_with(value)


@app.get(
    "/completions/notes/note-id",
    summary="Note ids for notes://{note_id}",
    openapi_extra={"x-mcp-completion": {"resource": "notes://{note_id}", "argument": "note_id"}},
)
def complete_note_uri(value: Typed = "") -> list[str]:
    return ids_starting_with(value)


@app.get("/health")
def health() -> dict[str, str]:
    """A liveness probe for the load balancer; not a tool."""
    return {"status": "ok"}
