"""Resources, prompts and completions as discovered: what a misdeclared route stops the app
with at startup, and what each definition says by default and when told."""

from __future__ import annotations

import enum
import re
from typing import Annotated, Any, Literal

import pytest
from fastapi import FastAPI, Header, Query
from fastapi.responses import HTMLResponse, PlainTextResponse
from pydantic import BaseModel

from fastapi_mcp_routes import mcp_completion, mcp_prompt, mcp_resource, mcp_tool
from fastapi_mcp_routes.tools.catalog.entries import PROMPT_REF, RESOURCE_REF, Catalog
from tests.support.discovery import registry_of


def catalog_of(app: FastAPI) -> Catalog:
    return registry_of(app).table().catalog


def refused(app: FastAPI, message: str) -> None:
    """Discovery stops with a `ValueError` whose message is exactly `message` (a prefix)."""
    with pytest.raises(ValueError, match=re.escape(message)):
        registry_of(app).table()


# -- what stops the app at startup -------------------------------------------------------------


def test_a_resource_on_a_route_that_is_not_get_is_refused_naming_the_route() -> None:
    app = FastAPI()

    @mcp_resource("notes://all")
    @app.post("/notes")
    def add_note() -> dict[str, str]:
        return {}

    refused(app, "route 'add_note' (POST /notes): only GET routes can be MCP resources")


def test_a_template_variable_that_names_no_parameter_is_refused_naming_the_route_and_parameters() -> None:
    app = FastAPI()

    @mcp_resource("notes://{nid}")
    @app.get("/notes/{note_id}")
    def read_note(note_id: int, verbose: bool = False) -> dict[str, int]:
        return {}

    refused(
        app,
        "route 'read_note' (GET /notes/{note_id}): the variable 'nid' of 'notes://{nid}' names no path or "
        "query parameter of the route (its parameters: ['note_id', 'verbose'])",
    )


def test_a_template_variable_naming_a_header_is_refused() -> None:
    app = FastAPI()

    @mcp_resource("notes://{x_tenant}")
    @app.get("/notes")
    def list_notes(x_tenant: Annotated[str, Header()]) -> list[str]:
        return []

    refused(app, "route 'list_notes' (GET /notes): the variable 'x_tenant' of 'notes://{x_tenant}' names no path")


def test_a_required_parameter_the_uri_cannot_fill_is_refused() -> None:
    app = FastAPI()

    @mcp_resource("notes://{note_id}")
    @app.get("/notes/{note_id}")
    def read_note(note_id: int, fields: str, verbose: bool = False) -> dict[str, int]:
        return {}

    refused(
        app,
        "route 'read_note' (GET /notes/{note_id}): the URI 'notes://{note_id}' cannot fill the route's "
        "required parameter(s) ['fields']",
    )


def test_two_routes_serving_one_resource_uri_are_refused_naming_the_second() -> None:
    app = FastAPI()

    @mcp_resource("notes://{note_id}")
    @app.get("/notes/{note_id}")
    def read_note(note_id: int) -> dict[str, int]:
        return {}

    @mcp_resource("notes://{note_id}")
    @app.get("/v2/notes/{note_id}")
    def read_note_v2(note_id: int) -> dict[str, int]:
        return {}

    refused(
        app,
        "route 'read_note_v2' (GET /v2/notes/{note_id}): another route already serves the resource 'notes://{note_id}'",
    )


def test_two_routes_serving_one_prompt_name_are_refused() -> None:
    app = FastAPI()

    @mcp_prompt(name="summarize")
    @app.get("/prompts/a")
    def first() -> str:
        return ""

    @mcp_prompt(name="summarize")
    @app.get("/prompts/b")
    def second() -> str:
        return ""

    refused(app, "route 'second' (GET /prompts/b): another route already serves the prompt 'summarize'")


@pytest.mark.parametrize("name", ["a b", "x" * 129, "a/b"], ids=["space", "129-chars", "slash"])
def test_an_invalid_prompt_name_is_refused(name: str) -> None:
    app = FastAPI()

    @mcp_prompt(name=name)
    @app.get("/prompt")
    def prompt() -> str:
        return ""

    refused(app, f"route 'prompt' (GET /prompt): the prompt name {name!r} must be 1-128 characters")


def test_a_prompt_named_after_an_empty_route_name_is_refused() -> None:
    app = FastAPI()

    @mcp_prompt()
    @app.get("/prompt", name="")
    def prompt() -> str:
        return ""

    refused(app, "route '' (GET /prompt): the prompt name '' must be 1-128 characters")


def test_a_prompt_whose_body_is_a_list_is_refused() -> None:
    app = FastAPI()

    @mcp_prompt()
    @app.post("/prompts/many")
    def many(lines: list[str]) -> str:
        return ""

    refused(app, "route 'many' (POST /prompts/many): a prompt's arguments are strings, so its route's body must")


class Draft(BaseModel):
    topic: str
    tone: str = "plain"


def test_a_prompt_whose_body_is_a_model_takes_its_fields_as_arguments() -> None:
    app = FastAPI()

    @mcp_prompt()
    @app.post("/prompts/draft")
    def draft(body: Draft) -> str:
        return ""

    arguments = catalog_of(app).prompts["draft"].definition["arguments"]
    assert arguments == [
        {"name": "topic", "title": "Topic", "required": True},
        {"name": "tone", "title": "Tone", "required": False},
    ]


def prompt_app() -> FastAPI:
    app = FastAPI()

    @mcp_prompt(name="summarize")
    @app.get("/prompts/summarize")
    def summarize(topic: str) -> str:
        return topic

    @mcp_resource("notes://{note_id}")
    @app.get("/notes/{note_id}")
    def read_note(note_id: str) -> dict[str, str]:
        return {}

    return app


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"prompt": "nope", "argument": "topic"}, "mcp_completion names the prompt 'nope', which no route serves"),
        ({"prompt": "summarize", "argument": "tone"}, "the prompt 'summarize' has no argument 'tone'"),
        (
            {"resource": "notes://{id}", "argument": "id"},
            "mcp_completion names the resource template 'notes://{id}', which no route serves",
        ),
        (
            {"resource": "notes://{note_id}", "argument": "id"},
            "the resource template 'notes://{note_id}' has no variable 'id'",
        ),
    ],
    ids=["unknown-prompt", "unknown-argument", "unknown-template", "unknown-variable"],
)
def test_a_completion_of_something_no_route_serves_is_refused(options: dict[str, str], message: str) -> None:
    app = prompt_app()

    @mcp_completion(**options)
    @app.get("/complete")
    def complete(value: str) -> list[str]:
        return []

    refused(app, f"route 'complete' (GET /complete): {message}")


def test_a_completion_route_without_a_value_parameter_is_refused() -> None:
    app = prompt_app()

    @mcp_completion(prompt="summarize", argument="topic")
    @app.get("/complete")
    def complete(typed: str) -> list[str]:
        return []

    refused(
        app, "route 'complete' (GET /complete): a completion route takes the typed text as a parameter named 'value'"
    )


def test_two_completions_of_one_argument_are_refused() -> None:
    app = prompt_app()

    @mcp_completion(prompt="summarize", argument="topic")
    @app.get("/complete/a")
    def first(value: str) -> list[str]:
        return []

    @mcp_completion(prompt="summarize", argument="topic")
    @app.get("/complete/b")
    def second(value: str) -> list[str]:
        return []

    refused(app, "route 'second' (GET /complete/b): another route already completes 'topic' of 'summarize'")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"argument": "x"}, "mcp_completion needs exactly one of prompt= or resource="),
        ({"argument": "x", "prompt": "p", "resource": "r://{x}"}, "mcp_completion needs exactly one of prompt="),
        ({"argument": "", "prompt": "p"}, "mcp_completion needs the name of the argument it completes"),
    ],
)
def test_a_completion_must_name_one_prompt_or_template_and_an_argument(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"mcp_completion(): {message}")):
        mcp_completion(**options)


def test_a_prompt_on_a_route_with_several_methods_is_refused() -> None:
    app = FastAPI()

    @mcp_prompt()
    @app.api_route("/prompt", methods=["GET", "POST"])
    def prompt() -> str:
        return ""

    refused(app, "route 'prompt' (GET, POST /prompt): an MCP prompt is served by a route with one method")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"uri": "notes://{id*}"}, "mcp_resource(): the URI template 'notes://{id*}' has the expression {id*}"),
        ({"uri": "notes://x", "priority": 2}, "MCP resource option 'priority' must be a number from 0 to 1, got 2"),
        ({"uri": "notes://x", "priority": True}, "MCP resource option 'priority' must be a number from 0 to 1"),
        ({"uri": "notes://x", "audience": ["robot"]}, "MCP resource option 'audience' must list ('user', 'assistant')"),
        ({"uri": "notes://x", "audience": "user"}, "MCP resource option 'audience' must list"),
        ({"uri": "notes://x", "size": -1}, "MCP resource option 'size' must be a number of bytes, got -1"),
        ({"uri": "notes://x", "name": 3}, "MCP resource option 'name' must be a string, got 3"),
        ({"uri": "notes://x", "meta": ["x"]}, "MCP resource option 'meta' must be a mapping"),
        ({"uri": "notes://x", "visible": "yes"}, "MCP resource option 'visible' must be a predicate"),
    ],
)
def test_bad_resource_options_are_refused_when_the_decorator_runs(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        mcp_resource(**options)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"name": 3}, "MCP prompt option 'name' must be a string, got 3"),
        ({"meta": ["x"]}, "MCP prompt option 'meta' must be a mapping, got ['x']"),
        ({"visible": True}, "MCP prompt option 'visible' must be a predicate, got True"),
    ],
)
def test_bad_prompt_options_are_refused_when_the_decorator_runs(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"mcp_prompt(): {message}")):
        mcp_prompt(**options)


# -- the openapi_extra forms -------------------------------------------------------------------


def test_openapi_extra_marks_a_resource_a_prompt_and_a_completion() -> None:
    app = FastAPI()

    @app.get("/notes/{note_id}", openapi_extra={"x-mcp-resource": {"uri": "notes://{note_id}", "title": "A note"}})
    def read_note(note_id: str) -> dict[str, str]:
        return {}

    @app.get("/config", openapi_extra={"x-mcp-resource": "config://app"})
    def config() -> dict[str, str]:
        return {}

    @app.get("/prompts/plain", openapi_extra={"x-mcp-prompt": True})
    def plain() -> str:
        return ""

    @app.get("/prompts/named", openapi_extra={"x-mcp-prompt": {"name": "named_prompt", "description": "Said."}})
    def named(topic: str) -> str:
        return ""

    @app.get("/complete", openapi_extra={"x-mcp-completion": {"prompt": "named_prompt", "argument": "topic"}})
    def complete(value: str) -> list[str]:
        return []

    @app.get(
        "/complete-note", openapi_extra={"x-mcp-completion": {"resource": "notes://{note_id}", "argument": "note_id"}}
    )
    def complete_note(value: str) -> list[str]:
        return []

    @app.get("/not-marked", openapi_extra={"x-mcp-prompt": False})
    def not_marked() -> str:
        return ""

    catalog = catalog_of(app)
    assert list(catalog.resources) == ["config://app"]
    assert [entry.definition for entry in catalog.templates] == [
        {"uriTemplate": "notes://{note_id}", "name": "read_note", "title": "A note", "mimeType": "application/json"}
    ]
    assert list(catalog.prompts) == ["named_prompt", "plain"]
    assert catalog.prompts["named_prompt"].definition["description"] == "Said."
    assert set(catalog.completions) == {
        (PROMPT_REF, "named_prompt", "topic"),
        (RESOURCE_REF, "notes://{note_id}", "note_id"),
    }


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"x-mcp-resource": {"uri": "notes://x", "mime": "text/plain"}}, "unknown option(s) ['mime'] in openapi_extra"),
        ({"x-mcp-resource": {"title": "no uri"}}, "openapi_extra['x-mcp-resource'] lacks a required option"),
        ({"x-mcp-resource": True}, "openapi_extra['x-mcp-resource'] must be a mapping, got True"),
        ({"x-mcp-resource": ["notes://x"]}, "openapi_extra['x-mcp-resource'] must be a mapping"),
        ({"x-mcp-prompt": {"nme": "x"}}, "unknown option(s) ['nme'] in openapi_extra['x-mcp-prompt']"),
        ({"x-mcp-prompt": "yes"}, "openapi_extra['x-mcp-prompt'] must be True or a mapping, got 'yes'"),
        ({"x-mcp-completion": {"prompt": "p"}}, "openapi_extra['x-mcp-completion'] lacks a required option"),
        ({"x-mcp-completion": True}, "openapi_extra['x-mcp-completion'] must be a mapping, got True"),
        ({"x-mcp-resource": {"uri": "notes://{a:2}"}}, "the URI template 'notes://{a:2}' has the expression {a:2}"),
    ],
)
def test_a_malformed_openapi_extra_form_is_refused_naming_the_route(extra: dict[str, Any], message: str) -> None:
    app = FastAPI()

    @app.get("/marked", openapi_extra=extra)
    def marked() -> str:
        return ""

    refused(app, "route 'marked' (GET /marked): ")
    refused(app, message)


def test_a_decorator_and_openapi_extra_on_one_route_are_refused() -> None:
    app = FastAPI()

    @mcp_prompt()
    @app.get("/prompt", openapi_extra={"x-mcp-prompt": True})
    def prompt() -> str:
        return ""

    refused(app, "route 'prompt' (GET /prompt): marked both by a decorator and openapi_extra['x-mcp-prompt']")


# -- marks side by side ------------------------------------------------------------------------


def test_one_route_can_be_a_tool_and_a_resource() -> None:
    app = FastAPI()

    @mcp_tool()
    @mcp_resource("notes://{note_id}")
    @app.get("/notes/{note_id}")
    def read_note(note_id: str) -> dict[str, str]:
        return {}

    table = registry_of(app).table()
    assert list(table.by_name) == ["read_note"]
    assert [entry.template.text for entry in table.catalog.templates] == ["notes://{note_id}"]


def test_the_decorators_work_above_and_below_the_route_decorator() -> None:
    app = FastAPI()

    @mcp_resource("notes://above")
    @app.get("/above")
    def above() -> str:
        return ""

    @app.get("/below")
    @mcp_resource("notes://below")
    def below() -> str:
        return ""

    @app.get("/prompt-below")
    @mcp_prompt()
    def prompt_below() -> str:
        return ""

    catalog = catalog_of(app)
    assert sorted(catalog.resources) == ["notes://above", "notes://below"]
    assert list(catalog.prompts) == ["prompt_below"]


def test_a_route_without_marks_is_not_a_resource_or_prompt() -> None:
    app = FastAPI()

    @app.get("/plain")
    def plain() -> str:
        return ""

    catalog = catalog_of(app)
    assert (catalog.resources, catalog.templates, catalog.prompts, catalog.completions) == ({}, (), {}, {})
    assert not catalog.completes


# -- what a definition says ---------------------------------------------------------------------


def test_the_mime_type_defaults_to_the_response_class_media_type() -> None:
    app = FastAPI()

    @mcp_resource("docs://text")
    @app.get("/text", response_class=PlainTextResponse)
    def text() -> str:
        return ""

    @mcp_resource("docs://json")
    @app.get("/json")
    def json_resource() -> dict[str, str]:
        return {}

    @mcp_resource("docs://html")
    @app.get("/html", response_class=HTMLResponse)
    def html() -> str:
        return ""

    @mcp_resource("docs://told", mime_type="text/markdown")
    @app.get("/told", response_class=PlainTextResponse)
    def told() -> str:
        return ""

    resources = catalog_of(app).resources
    assert {uri: entry.definition["mimeType"] for uri, entry in resources.items()} == {
        "docs://text": "text/plain",
        "docs://json": "application/json",
        "docs://html": "text/html",
        "docs://told": "text/markdown",
    }


def test_name_title_and_description_default_to_the_route_name_summary_and_docstring() -> None:
    app = FastAPI()

    @mcp_resource("notes://stats")
    @app.get("/stats")
    def note_stats() -> dict[str, int]:
        """How many notes there are, by tag."""
        return {}

    @mcp_prompt()
    @app.get("/prompts/review", summary="Review", description="Reviews a note.")
    def review_note() -> str:
        """Not the description: the route's own description wins."""
        return ""

    @mcp_resource("notes://bare")
    @app.get("/bare")
    def bare() -> str:
        return ""

    catalog = catalog_of(app)
    assert catalog.resources["notes://stats"].definition == {
        "uri": "notes://stats",
        "name": "note_stats",
        "description": "How many notes there are, by tag.",
        "mimeType": "application/json",
    }
    assert catalog.prompts["review_note"].definition == {
        "name": "review_note",
        "title": "Review",
        "description": "Reviews a note.",
    }
    assert catalog.resources["notes://bare"].definition == {
        "uri": "notes://bare",
        "name": "bare",
        "mimeType": "application/json",
    }


def test_explicit_name_title_description_size_and_meta_win() -> None:
    app = FastAPI()

    @mcp_resource(
        "notes://readme",
        name="readme",
        title="Read me",
        description="Start here.",
        size=120,
        meta={"example.com/kind": "doc"},
    )
    @app.get("/readme", summary="Ignored")
    def readme() -> str:
        """Ignored too."""
        return ""

    @mcp_prompt(name="greet", title="Greeting", description="Says hello.", meta={"example.com/v": 2})
    @app.get("/prompts/greet", summary="Ignored")
    def greet() -> str:
        return ""

    catalog = catalog_of(app)
    assert catalog.resources["notes://readme"].definition == {
        "uri": "notes://readme",
        "name": "readme",
        "title": "Read me",
        "description": "Start here.",
        "mimeType": "application/json",
        "size": 120,
        "_meta": {"example.com/kind": "doc"},
    }
    assert catalog.prompts["greet"].definition == {
        "name": "greet",
        "title": "Greeting",
        "description": "Says hello.",
        "_meta": {"example.com/v": 2},
    }


def test_a_template_has_no_size() -> None:
    app = FastAPI()

    @mcp_resource("notes://{note_id}", size=10)
    @app.get("/notes/{note_id}")
    def read_note(note_id: str) -> str:
        return ""

    assert "size" not in catalog_of(app).templates[0].definition


def test_annotations_carry_audience_priority_and_last_modified() -> None:
    app = FastAPI()

    @mcp_resource("notes://pinned", audience=["user", "assistant"], priority=0.8, last_modified="2026-01-02T03:04:05Z")
    @app.get("/pinned")
    def pinned() -> str:
        return ""

    @mcp_resource("notes://lowest", priority=0)
    @app.get("/lowest")
    def lowest() -> str:
        return ""

    resources = catalog_of(app).resources
    assert resources["notes://pinned"].definition["annotations"] == {
        "audience": ["user", "assistant"],
        "priority": 0.8,
        "lastModified": "2026-01-02T03:04:05Z",
    }
    assert resources["notes://lowest"].definition["annotations"] == {"priority": 0}


def test_prompt_arguments_carry_their_description_and_whether_required() -> None:
    app = FastAPI()

    @mcp_prompt()
    @app.get("/prompts/{style}/summarize")
    def summarize(
        style: str,
        topic: Annotated[str, Query(description="What to summarize.")],
        words: Annotated[int, Query(title="Word count", description="At most this many words.")] = 50,
    ) -> str:
        return ""

    assert catalog_of(app).prompts["summarize"].definition["arguments"] == [
        {"name": "style", "title": "Style", "required": True},
        {"name": "topic", "title": "Topic", "description": "What to summarize.", "required": True},
        {"name": "words", "title": "Word count", "description": "At most this many words.", "required": False},
    ]


def test_a_prompt_without_arguments_lists_none() -> None:
    app = FastAPI()

    @mcp_prompt()
    @app.get("/prompts/hello")
    def hello() -> str:
        return ""

    assert "arguments" not in catalog_of(app).prompts["hello"].definition


class Tone(enum.Enum):
    FORMAL = "formal"
    CASUAL = "casual"


def test_enum_and_literal_arguments_list_their_choices_for_completion() -> None:
    app = FastAPI()

    @mcp_prompt()
    @app.get("/prompts/write")
    def write(
        tone: Tone,
        length: Literal["short", "long"] = "short",
        only: Literal["one"] = "one",
        maybe: Literal["x", "y"] | None = None,
        topic: str = "",
    ) -> str:
        return ""

    @mcp_resource("reports://{period}")
    @app.get("/reports/{period}")
    def report(period: Literal["daily", "weekly"]) -> str:
        return ""

    catalog = catalog_of(app)
    assert catalog.prompts["write"].choices == {
        "tone": ("formal", "casual"),
        "length": ("short", "long"),
        "only": ("one",),
        "maybe": ("x", "y"),
    }
    assert catalog.templates[0].choices == {"period": ("daily", "weekly")}
    assert catalog.completes


# -- looking a URI up ----------------------------------------------------------------------------


def test_an_exact_uri_is_found_before_templates_and_templates_in_declaration_order() -> None:
    app = FastAPI()

    @mcp_resource("notes://{note_id}")
    @app.get("/notes/{note_id}")
    def read_note(note_id: str) -> str:
        return ""

    @mcp_resource("notes://{slug}")
    @app.get("/by-slug/{slug}")
    def by_slug(slug: str) -> str:
        return ""

    @mcp_resource("notes://latest")
    @app.get("/latest")
    def latest() -> str:
        return ""

    catalog = catalog_of(app)
    exact = catalog.resource("notes://latest")
    first = catalog.resource("notes://7")
    assert exact is not None
    assert (exact[0].template.text, exact[1]) == ("notes://latest", {})
    assert first is not None
    assert (first[0].template.text, first[1]) == ("notes://{note_id}", {"note_id": "7"})
    assert catalog.resource("other://7") is None


def test_a_write_to_a_resource_path_names_the_uri_it_changes() -> None:
    app = FastAPI()

    @mcp_resource("notes://{note_id}")
    @app.get("/notes/{note_id}")
    def read_note(note_id: str) -> str:
        return ""

    @mcp_resource("search://notes{?q}")
    @app.get("/search")
    def search(q: str = "") -> str:
        return ""

    @mcp_resource("config://app")
    @app.get("/config")
    def config() -> str:
        return ""

    catalog = catalog_of(app)
    assert catalog.written("/notes/a b") == ["notes://a%20b"]
    assert catalog.written("/config") == ["config://app"]
    assert catalog.written("/search") == []  # its variable is a query parameter: no path names it
    assert catalog.written("/elsewhere") == []
