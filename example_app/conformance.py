"""Fixtures for the official MCP conformance suite, as ordinary FastAPI routes.

Served as `example_app.conformance:app` by `scripts/conformance.sh`, by one process and then by
two behind nginx (docs/nginx.conf) that share a secret and a Redis store. Every fixture is a plain
route exposed through the library; none is a hand-written MCP handler. The scenarios that need
features not built yet are listed in `conformance/expected-failures.yml`.
"""

from __future__ import annotations

import base64
import json
import os
import struct
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any

import anyio
from fastapi import Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel, Field

from fastapi_mcp_routes import (
    ContentResponse,
    InputRequest,
    PromptMessage,
    PromptResponse,
    ToolCalls,
    ToolContext,
    image_content,
    mcp_completion,
    mcp_prompt,
    mcp_resource,
    mcp_routes,
    mcp_tool,
    resource_content,
    text_content,
)

if TYPE_CHECKING:
    from fastapi_mcp_routes import RedisStore

REDIS_URL_VARIABLE = "FASTAPI_MCP_ROUTES_REDIS_URL"
# Where a process announces a tool or prompt it added ("tool:3", "prompt:1"), so every process of
# the deployment adds it too.
TOOL_ADDED_CHANNEL = "fixtures/tool-added"


def shared_store() -> RedisStore | None:
    """`store=` for `mcp_routes`: Redis when `FASTAPI_MCP_ROUTES_REDIS_URL` names one (several
    processes serve the fixtures), else nothing (one process, its own memory)."""
    url = os.environ.get(REDIS_URL_VARIABLE)
    if not url:
        return None
    # Imported only when asked for, so the fixtures serve one process wherever redis is missing.
    from fastapi_mcp_routes import RedisStore

    return RedisStore.from_url(url)


store = shared_store()


@asynccontextmanager
async def every_process_adds_the_tools(_: FastAPI) -> AsyncIterator[None]:
    """With several processes, each adds the tools any of them added (a route table is each
    process's own, as in any FastAPI app), and each tells its own listeners of the change."""
    if store is None:
        yield
        return
    async with anyio.create_task_group() as tasks, store.subscribe(TOOL_ADDED_CHANNEL) as added:

        async def add_what_is_announced() -> None:
            async for announced in added:
                kind, number = announced.decode().split(":")
                add_dynamic(kind, int(number))

        tasks.start_soon(add_what_is_announced)
        yield
        tasks.cancel_scope.cancel()


app = FastAPI(title="fastapi-mcp-routes conformance fixtures", version="1.0.0", lifespan=every_process_adds_the_tools)
# The fixtures are protocol tests driven by a client that knows nothing of confirmation tokens,
# like a deployment whose own approval layer confirms calls. The secret that several processes
# share (FASTAPI_MCP_ROUTES_SECRET) is read by mcp_routes itself.
# The skills scenarios read `skill://pdf-processing/SKILL.md` and its references/ folder.
app.include_router(
    mcp_routes(
        app,
        tool_calls=ToolCalls(require_confirmation_for_mutations=False),
        store=store,
        skills=os.path.join(os.path.dirname(__file__), "conformance_skills"),
    )
)

# A 1x1 red pixel.
RED_PIXEL_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


def silent_wav(samples: int = 8, rate: int = 8000) -> bytes:
    """A tiny mono 8-bit PCM WAV file of silence."""
    data = b"\x80" * samples
    header = b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE"
    fmt = b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate, 1, 8)
    return header + fmt + b"data" + struct.pack("<I", len(data)) + data


@mcp_tool()
@app.get("/fixtures/simple-text", response_class=PlainTextResponse)
def test_simple_text() -> str:
    """Returns a simple text block."""
    return "This is a simple text response for testing."


@mcp_tool()
@app.get("/fixtures/image", response_class=Response)
def test_image_content() -> Response:
    """Returns a 1x1 red PNG image."""
    return Response(RED_PIXEL_PNG, media_type="image/png")


@mcp_tool()
@app.get("/fixtures/audio", response_class=Response)
def test_audio_content() -> Response:
    """Returns a short WAV clip of silence."""
    return Response(silent_wav(), media_type="audio/wav")


@mcp_tool()
@app.get("/fixtures/error")
def test_error_handling() -> None:
    """Always fails, so a client can see how a tool error looks."""
    raise HTTPException(400, "This tool intentionally returns an error for testing")


Context = Annotated[ToolContext, Depends()]
STEP_S = 0.05  # the scenarios ask for ~50 ms between messages


@mcp_tool()
@app.get("/fixtures/embedded-resource", response_class=ContentResponse)
def test_embedded_resource() -> ContentResponse:
    """Returns an embedded text resource."""
    resource = resource_content("test://embedded-resource", "text/plain", text="This is an embedded resource content.")
    return ContentResponse([resource])


@mcp_tool()
@app.get("/fixtures/mixed-content", response_class=ContentResponse)
def test_multiple_content_types() -> ContentResponse:
    """Returns text, an image and an embedded resource together."""
    return ContentResponse(
        [
            text_content("Multiple content types test:"),
            image_content(RED_PIXEL_PNG, "image/png"),
            resource_content("test://mixed-content-resource", "application/json", text='{"test":"data","value":123}'),
        ]
    )


@mcp_tool()
@app.get("/fixtures/logging", response_class=PlainTextResponse)
async def test_tool_with_logging(ctx: Context) -> str:
    """Sends three info log messages while it runs."""
    await ctx.log("info", "Tool execution started")
    await anyio.sleep(STEP_S)
    await ctx.log("info", "Tool processing data")
    await anyio.sleep(STEP_S)
    await ctx.log("info", "Tool execution completed")
    return "Logging test completed."


@mcp_tool()
@app.get("/fixtures/progress", response_class=PlainTextResponse)
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100 when the client asks for progress."""
    for step, progress in enumerate((0, 50, 100)):
        if step:
            await anyio.sleep(STEP_S)
        await ctx.report_progress(progress, total=100)
    return "Progress test completed."


class SamplingIn(BaseModel):
    prompt: str = Field(description="The prompt to send to the client's model.")


@mcp_tool()
@app.post("/fixtures/sampling", response_class=PlainTextResponse)
async def test_sampling(request: SamplingIn, ctx: Context) -> str:
    """Asks the client's model to complete a prompt."""
    message = {"role": "user", "content": {"type": "text", "text": request.prompt}}
    result = await ctx.sample([message], max_tokens=100)
    content = result.get("content")
    text = content.get("text") if isinstance(content, dict) else content
    return f"LLM response: {text}"


class ElicitationIn(BaseModel):
    message: str = Field(description="The message to show the user.")


@mcp_tool()
@app.post("/fixtures/elicitation", response_class=PlainTextResponse)
async def test_elicitation(request: ElicitationIn, ctx: Context) -> str:
    """Asks the user, through the client, for a username and an email address."""
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    answer = await ctx.elicit(request.message, schema)
    return f"User response: action={answer.action}, content={json.dumps(answer.content)}"


@mcp_tool()
@app.post("/fixtures/elicitation-defaults", response_class=PlainTextResponse)
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Asks for input with a default for every primitive type (SEP-1034)."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": True},
        },
    }
    answer = await ctx.elicit("Please review your details.", schema)
    return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}"


@mcp_tool()
@app.post("/fixtures/elicitation-enums", response_class=PlainTextResponse)
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Asks for input with every enum form (SEP-1330)."""
    titled = [{"const": f"value{i}", "title": f"{word} Option"} for i, word in enumerate(("First", "Second"), 1)]
    choices = [{"const": f"value{i}", "title": f"{word} Choice"} for i, word in enumerate(("First", "Second"), 1)]
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": titled},
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "items": {"anyOf": choices}},
        },
    }
    answer = await ctx.elicit("Please choose.", schema)
    return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}"


# -- Fixtures of the 2026-07-28 scenarios (suite 0.2.0-alpha): Multi Round-Trip Requests and
# the stateless diagnostics. The same routes work in a session, one question at a time.

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def _text_of(sampled: Mapping[str, Any]) -> str:
    content = sampled.get("content")
    return str(content.get("text")) if isinstance(content, Mapping) else str(content)


@mcp_tool()
@app.post("/fixtures/mrtr/elicitation", response_class=PlainTextResponse)
async def test_input_required_result_elicitation(ctx: Context) -> str:
    """Asks for the user's name, then greets them."""
    answer = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
    return f"Hello, {(answer.content or {}).get('name')}!"


@mcp_tool()
@app.post("/fixtures/mrtr/sampling", response_class=PlainTextResponse)
async def test_input_required_result_sampling(ctx: Context) -> str:
    """Asks the client's model a question and returns its answer."""
    question = {"role": "user", "content": {"type": "text", "text": "What is the capital of France?"}}
    return _text_of(await ctx.sample([question], max_tokens=100, key="capital_question"))


@mcp_tool()
@app.post("/fixtures/mrtr/roots", response_class=PlainTextResponse)
async def test_input_required_result_list_roots(ctx: Context) -> str:
    """Lists the client's roots."""
    roots = await ctx.list_roots(key="client_roots")
    return "Roots: " + ", ".join(str(root.get("uri")) for root in roots)


@mcp_tool()
@app.post("/fixtures/mrtr/request-state", response_class=PlainTextResponse)
async def test_input_required_result_request_state(ctx: Context) -> str:
    """Asks for a confirmation; the answer only arrives with a requestState that checked out."""
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    answer = await ctx.elicit("Please confirm", schema, key="confirm")
    return f"state-ok: confirmed={(answer.content or {}).get('ok')}"


@mcp_tool()
@app.post("/fixtures/mrtr/multiple", response_class=PlainTextResponse)
async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Asks three things at once: a name, a greeting from the model, and the roots."""
    greeting = {"role": "user", "content": {"type": "text", "text": "Generate a greeting"}}
    answers = await ctx.ask(
        {
            "user_name": InputRequest.elicitation("What is your name?", NAME_SCHEMA),
            "greeting": InputRequest.sampling([greeting], max_tokens=50),
            "client_roots": InputRequest.roots(),
        }
    )
    name = (answers["user_name"].get("content") or {}).get("name")
    return f"{_text_of(answers['greeting'])} {name} ({len(answers['client_roots'].get('roots') or [])} roots)"


@mcp_tool()
@app.post("/fixtures/mrtr/multi-round", response_class=PlainTextResponse)
async def test_input_required_result_multi_round(ctx: Context) -> str:
    """Asks two questions, one round each."""
    name = await ctx.elicit("Step 1: What is your name?", NAME_SCHEMA, key="step1")
    colour_schema = {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}
    colour = await ctx.elicit("Step 2: What is your favorite color?", colour_schema, key="step2")
    return f"{(name.content or {}).get('name')} likes {(colour.content or {}).get('color')}"


@mcp_tool()
@app.post("/fixtures/mrtr/tampered", response_class=PlainTextResponse)
async def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Asks one question; its requestState is sealed, so a tampered one is refused."""
    answer = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
    return f"Hello, {(answer.content or {}).get('name')}!"


@mcp_tool()
@app.post("/fixtures/mrtr/capabilities", response_class=PlainTextResponse)
async def test_input_required_result_capabilities(ctx: Context) -> str:
    """Asks only what the client can answer: the user if it elicits, else its model."""
    if "elicitation" in ctx.client_capabilities:
        answer = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
        return f"Hello, {(answer.content or {}).get('name')}!"
    question = {"role": "user", "content": {"type": "text", "text": "Suggest a name"}}
    return _text_of(await ctx.sample([question], max_tokens=20, key="suggestion"))


@mcp_tool()
@app.post("/fixtures/missing-capability", response_class=PlainTextResponse)
async def test_missing_capability(ctx: Context) -> str:
    """Needs the client's model: refused with -32021 when the client has no sampling."""
    question = {"role": "user", "content": {"type": "text", "text": "Say hi"}}
    return _text_of(await ctx.sample([question], max_tokens=10))


@mcp_tool()
@app.post("/fixtures/streaming-elicitation", response_class=PlainTextResponse)
async def test_streaming_elicitation(ctx: Context) -> str:
    """Reports progress, then asks the user something."""
    await ctx.report_progress(1, total=2)
    answer = await ctx.elicit("Continue?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
    return f"answered: {answer.action}"


@mcp_tool()
@app.get("/fixtures/logging-tool", response_class=PlainTextResponse)
async def test_logging_tool(ctx: Context) -> str:
    """Logs at info; a 2026-07-28 request without a log level gets no log messages."""
    await ctx.log("info", "test_logging_tool ran")
    return "logged"


# A hand-written JSON Schema 2020-12 body (openapi_extra): the tool's inputSchema keeps every
# keyword of it ($schema, $defs with $anchor, allOf/anyOf, if/then/else).
JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@mcp_tool(description="Tool with JSON Schema 2020-12 features")
@app.post(
    "/fixtures/json-schema-2020-12",
    response_class=PlainTextResponse,
    openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": JSON_SCHEMA_2020_12}}}},
)
async def json_schema_2020_12_tool(request: Request) -> str:
    body = await request.json()
    return f"ok: {sorted(body)}"


@mcp_tool()
@app.get("/fixtures/headers", response_class=PlainTextResponse)
def header_mirroring(
    region: Annotated[
        str, Query(description="Mirrored in Mcp-Param-Region.", json_schema_extra={"x-mcp-header": "Region"})
    ],
    priority: Annotated[int, Query(json_schema_extra={"x-mcp-header": "Priority"})] = 0,
) -> str:
    """Echoes arguments that 2026-07-28 clients also send as Mcp-Param-* headers."""
    return f"region={region} priority={priority}"


# What each process added at runtime, by kind ("tool", "prompt").
_added: dict[str, set[int]] = {"tool": set(), "prompt": set()}


@mcp_tool()
@app.post("/fixtures/trigger-tool-change", response_class=PlainTextResponse)
async def test_trigger_tool_change() -> str:
    """Adds a route at runtime, so the tool list changes and listeners hear of it: in this
    process, or, with several, in every one of them (each hears the announcement)."""
    return await add_everywhere("tool")


@mcp_tool()
@app.post("/fixtures/trigger-prompt-change", response_class=PlainTextResponse)
async def test_trigger_prompt_change() -> str:
    """Adds a prompt route at runtime, so the prompt list changes and listeners hear of it."""
    return await add_everywhere("prompt")


async def add_everywhere(kind: str) -> str:
    number = max(_added[kind], default=0) + 1
    if store is None:
        add_dynamic(kind, number)
    else:
        await store.publish(TOOL_ADDED_CHANNEL, f"{kind}:{number}".encode())
    return f"added dynamic_{kind}_{number}"


def add_dynamic(kind: str, number: int) -> None:
    if number in _added[kind]:
        return
    _added[kind].add(number)

    def dynamic() -> str:
        return f"dynamic {kind} {number}"

    mark = mcp_tool if kind == "tool" else mcp_prompt
    marked = mark(name=f"dynamic_{kind}_{number}", description=f"A {kind} added at runtime.")(dynamic)
    app.add_api_route(f"/fixtures/dynamic/{kind}/{number}", marked, methods=["GET"], response_class=PlainTextResponse)


# -- resources, prompts and completion ------------------------------------------------------


@mcp_resource(
    "test://static-text",
    name="static-text",
    title="Static Text Resource",
    description="A static text resource for testing",
)
@app.get("/fixtures/resources/static-text", response_class=PlainTextResponse)
def static_text_resource() -> str:
    return "This is the content of the static text resource."


@mcp_resource(
    "test://static-binary",
    name="static-binary",
    title="Static Binary Resource",
    description="A static binary resource (image) for testing",
    mime_type="image/png",
)
@app.get("/fixtures/resources/static-binary", response_class=Response)
def static_binary_resource() -> Response:
    return Response(RED_PIXEL_PNG, media_type="image/png")


@mcp_resource(
    "test://template/{id}/data",
    name="template",
    title="Resource Template",
    description="A resource template with parameter substitution",
)
@app.get("/fixtures/resources/template/{id}/data")
def template_resource(id: str) -> dict[str, Any]:
    return {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}


_watched = {"content": "Watched resource content"}


@mcp_resource(
    "test://watched-resource",
    name="watched-resource",
    title="Watched Resource",
    description="A resource a REST PUT changes; subscribers hear of it",
)
@app.get("/fixtures/resources/watched", response_class=PlainTextResponse)
def watched_resource() -> str:
    return _watched["content"]


@app.put("/fixtures/resources/watched", status_code=204)
def change_watched_resource(content: Annotated[str, Query()]) -> None:
    """A plain REST write: its subscribers are told, as they are of any write to the path."""
    _watched["content"] = content


@mcp_prompt(name="test_simple_prompt", title="Simple Test Prompt", description="A simple prompt without arguments")
@app.get("/fixtures/prompts/simple")
def simple_prompt() -> str:
    return "This is a simple prompt for testing."


@mcp_prompt(
    name="test_prompt_with_arguments", title="Prompt With Arguments", description="A prompt with required arguments"
)
@app.get("/fixtures/prompts/arguments")
def prompt_with_arguments(
    arg1: Annotated[str, Query(description="First test argument")],
    arg2: Annotated[str, Query(description="Second test argument")],
) -> str:
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@mcp_completion(prompt="test_prompt_with_arguments", argument="arg1")
@app.get("/fixtures/complete/arg1")
def complete_arg1(value: str) -> list[str]:
    return [choice for choice in ("test", "testValue1", "sample") if choice.startswith(value)]


@mcp_prompt(
    name="test_prompt_with_embedded_resource",
    title="Prompt With Embedded Resource",
    description="A prompt that includes an embedded resource",
)
@app.get("/fixtures/prompts/embedded-resource")
def prompt_with_embedded_resource(
    resource_uri: Annotated[str, Query(alias="resourceUri", description="URI of the resource to embed")],
) -> PromptResponse:
    embedded = resource_content(resource_uri, "text/plain", text="Embedded resource content for testing.")
    return PromptResponse(
        messages=[
            PromptMessage(role="user", content=embedded),
            PromptMessage(role="user", content=text_content("Please process the embedded resource above.")),
        ]
    )


@mcp_prompt(
    name="test_prompt_with_image", title="Prompt With Image", description="A prompt that includes image content"
)
@app.get("/fixtures/prompts/image")
def prompt_with_image() -> list[PromptMessage]:
    return [
        PromptMessage(role="user", content=image_content(RED_PIXEL_PNG, "image/png")),
        PromptMessage(role="user", content=text_content("Please analyze the image above.")),
    ]


@mcp_prompt(name="test_input_required_result_prompt", description="MRTR: prompt that requires elicitation input")
@app.get("/fixtures/prompts/input-required")
async def input_required_prompt(ctx: Context) -> str:
    schema = {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]}
    answer = await ctx.elicit("What context should the prompt use?", schema, key="user_context")
    return f"Use this context: {(answer.content or {}).get('context')}"


# -- tasks (the 2026-07-28 tasks extension): ordinary routes, marked with `task=` ----------------

CONFIRM_SCHEMA = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}


@mcp_tool()
@app.get("/fixtures/tasks/greet", response_class=PlainTextResponse)
def greet(name: str) -> str:
    """Greets by name, always at once (never a task)."""
    return f"Hello, {name}!"


@mcp_tool(task="optional")
@app.get("/fixtures/tasks/slow-compute", response_class=PlainTextResponse)
async def slow_compute(ctx: Context, seconds: Annotated[float, Query(ge=0, le=600)] = 1, label: str = "compute") -> str:
    """Works for `seconds`, reporting progress every half second: a task when the client can poll one."""
    elapsed = 0.0
    while elapsed < seconds:
        step = min(0.5, seconds - elapsed)
        await anyio.sleep(step)
        elapsed += step
        await ctx.report_progress(elapsed, seconds, f"{label}: {elapsed:g} of {seconds:g} s")
    return f"{label}: done after {seconds:g} s"


@mcp_tool(task="required")
@app.post("/fixtures/tasks/failing-job", response_class=PlainTextResponse)
async def failing_job() -> str:
    """Fails after a second of work; only ever runs as a task."""
    await anyio.sleep(1)
    raise HTTPException(status_code=409, detail="The job failed after a second of work.")


@mcp_tool(task="optional")
@app.post("/fixtures/tasks/protocol-error-job", response_class=PlainTextResponse)
async def protocol_error_job(ctx: Context) -> str:
    """Becomes a task, then needs the client's roots: a client that cannot list them ends the
    task `failed`, with the JSON-RPC error (-32021) the call met."""
    await ctx.start_task()
    roots = await ctx.list_roots(key="workspace_roots")
    return f"{len(roots)} roots"


@mcp_tool(task="optional")
@app.post("/fixtures/tasks/confirm-delete", response_class=PlainTextResponse)
async def confirm_delete(ctx: Context, filename: str) -> str:
    """Becomes a task, then asks the user to confirm the deletion (a question of the task)."""
    await ctx.start_task()
    answer = await ctx.elicit(f"Delete '{filename}'?", CONFIRM_SCHEMA, key="confirm_delete")
    confirmed = answer.action == "accept" and (answer.content or {}).get("confirm") is True
    return f"Deleted '{filename}'." if confirmed else f"Kept '{filename}'."


@mcp_tool(task="optional")
@app.post("/fixtures/tasks/multi-input", response_class=PlainTextResponse)
async def multi_input(ctx: Context) -> str:
    """Becomes a task, then asks two questions at once; either may be answered first."""
    await ctx.start_task()
    answers = await ctx.ask(
        {
            "name": InputRequest.elicitation("What is your name?", NAME_SCHEMA),
            "confirm": InputRequest.elicitation("Shall I go on?", CONFIRM_SCHEMA),
        }
    )
    name = (answers["name"].get("content") or {}).get("name")
    confirmed = (answers["confirm"].get("content") or {}).get("confirm")
    return f"name={name}, confirmed={confirmed}"


@mcp_tool(task="required")
@app.post("/fixtures/tasks/with-task", response_class=PlainTextResponse)
async def test_tool_with_task(ctx: Context) -> str:
    """Asks the user's name first (a round of the call, before any task), then works as a task."""
    answer = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
    await ctx.start_task()
    await anyio.sleep(0.5)
    return f"Hello, {(answer.content or {}).get('name')}! The task is done."
