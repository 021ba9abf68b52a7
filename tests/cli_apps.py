"""Small apps the command-line tests point `fastapi-mcp-routes` at (`tests.cli_apps:<name>`),
each imported by a command run in a process of its own, never by a test module: one that is
served well (a prefix, a tool taking a header-mirrored argument, a route that asks its user),
one that streams, one whose routes' text holds a terminal's control sequences, and one for each
way an app can fail `check` or not be an MCP app at all."""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query
from fastapi.responses import PlainTextResponse
from fastapi.sse import EventSourceResponse

from fastapi_mcp_routes import ToolContext, mcp_resource, mcp_routes, mcp_tool

# -- served well -------------------------------------------------------------------------------

app = FastAPI(title="CLI")
app.include_router(mcp_routes(app, path="/agents"), prefix="/v1")


@mcp_tool()
@app.get("/regions/{zone}")
def region(zone: str, name: Annotated[str, Query(json_schema_extra={"x-mcp-header": "Region"})]) -> dict[str, str]:
    """Echo a region, whose name a 2026-07-28 client also sends as the Mcp-Param-Region header."""
    return {"zone": zone, "name": name}


@mcp_tool(confirm=False)
@app.post("/ask")
async def ask(ctx: Annotated[ToolContext, Depends()]) -> dict[str, Any]:
    """Ask the user for a colour and how many, and say what they answered."""
    schema = {
        "type": "object",
        "properties": {
            "colour": {"type": "string", "enum": ["teal", "plum"]},
            "count": {"type": "integer", "title": "How many"},
        },
        "required": ["colour"],
    }
    answer = await ctx.elicit("Which colour?", schema)
    return {"action": answer.action, "content": answer.content}


# -- a stream -------------------------------------------------------------------------------------

stream_app = FastAPI(title="Ticks")
stream_app.include_router(mcp_routes(stream_app))


@mcp_tool()
@stream_app.get("/ticks", response_class=EventSourceResponse)
async def ticks() -> AsyncIterable[dict[str, int]]:
    """Three ticks, then the stream ends."""
    for tick in range(1, 4):
        yield {"tick": tick}


# -- routes whose text holds a terminal's control sequences ------------------------------------

# A route's text is data someone else may have chosen: an OSC 52 clipboard write, a screen
# clear, a C1 control sequence introducer and a right-to-left override.
CONTROLS = "\x1b]52;c;cHduZWQ=\x07\x1b[2J\x9b31m\u202e"
controls_app = FastAPI(title="Controls")
controls_app.include_router(mcp_routes(controls_app))


@mcp_tool()
@controls_app.get("/controls", response_class=PlainTextResponse)
async def controls(ctx: Annotated[ToolContext, Depends()], fail: bool = False) -> str:
    """Answer text holding a terminal's control sequences (or fail with them), after a progress
    message and log messages holding them too."""
    await ctx.report_progress(1, 1, f"progress {CONTROLS}")
    await ctx.log("debug", "detail the command does not ask for")
    await ctx.log("info", f"log {CONTROLS}", logger="controls")
    if fail:
        raise HTTPException(404, f"detail {CONTROLS}")
    return f"text {CONTROLS}\nsecond line"


@mcp_tool(description=f"described {CONTROLS}")
@controls_app.get("/controls/structured")
def structured_controls() -> dict[str, str]:
    """Answer a structured result whose text holds a terminal's control sequences."""
    return {"title": CONTROLS}


@mcp_tool(confirm=False)
@controls_app.post("/controls/question")
async def controls_question(ctx: Annotated[ToolContext, Depends()]) -> dict[str, Any]:
    """Ask a question whose message and field hold a terminal's control sequences."""
    schema = {"type": "object", "properties": {"answer": {"type": "string", "description": CONTROLS}}}
    answer = await ctx.elicit(f"question {CONTROLS}", schema)
    return {"action": answer.action}


# -- a factory ---------------------------------------------------------------------------------


def build() -> FastAPI:
    """A factory: `--factory` calls it."""
    built = FastAPI(title="Built")
    built.include_router(mcp_routes(built))

    @mcp_tool()
    @built.get("/ping")
    def ping() -> dict[str, bool]:
        """Answer pong."""
        return {"pong": True}

    return built


# -- each fails check --------------------------------------------------------------------------

same_names = FastAPI()
same_names.include_router(mcp_routes(same_names))


@mcp_tool(name="lookup")
@same_names.get("/users/{user_id}")
def find_user(user_id: int) -> dict[str, int]:
    """Look a user up."""
    return {"id": user_id}


@mcp_tool(name="lookup")
@same_names.get("/teams/{team_id}")
def find_team(team_id: int) -> dict[str, int]:
    """Look a team up."""
    return {"id": team_id}


unknown_variable = FastAPI()
unknown_variable.include_router(mcp_routes(unknown_variable))


@mcp_resource("files://{name}")
@unknown_variable.get("/files/{file_id}")
def read_file(file_id: int) -> dict[str, int]:
    """A resource whose URI variable names no parameter of its route."""
    return {"id": file_id}


without_router = FastAPI()


@without_router.get("/plain")
def plain() -> dict[str, bool]:
    return {"plain": True}


included_twice = FastAPI()
_twice = mcp_routes(included_twice)
included_twice.include_router(_twice)
_versioned = APIRouter(prefix="/v2")
_versioned.include_router(_twice)
included_twice.include_router(_versioned)

not_an_app = {"routes": []}
