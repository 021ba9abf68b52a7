"""The explorer in a real browser: headless Chromium (the system's) driven by Playwright against
a real uvicorn server of the example app, as a person uses the page. Each test leaves a
screenshot in .artifacts/explorer/."""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from playwright.sync_api import Browser
from pydantic import BaseModel, create_model

from example_app.auth import mint
from example_app.main import app as example_app
from example_app.main import store as example_notes
from fastapi_mcp_routes import ContentResponse, audio_content, image_content, mcp_routes, mcp_tool, text_content
from tests.support.apps import observed, streaming_app
from tests.support.browser import ExplorerPage
from tests.support.servers import serve
from tests.support.stateless import post_stateless
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.browser

API_KEY = "demo-key"  # the example's (header x-api-key)


@pytest.fixture(scope="module")
def example_url() -> Iterator[str]:
    with serve(example_app) as url:
        yield url


@contextmanager
def tab(browser: Browser, url: str, name: str) -> Iterator[ExplorerPage]:
    """The explorer of the app served at `url`, in a fresh tab (nothing kept from another
    test), not opened yet; a screenshot named `name` at the end, and no error in the page's
    console, or the test fails."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = ExplorerPage(context.new_page(), url)
        yield page
        page.screenshot(name)
        assert page.errors == []
    finally:
        context.close()


@pytest.fixture
def explorer(browser: Browser, example_url: str, request: pytest.FixtureRequest) -> Iterator[ExplorerPage]:
    """The example app's explorer in a fresh tab."""
    with tab(browser, example_url, request.node.name) as page:
        yield page


def listed_tools(url: str, headers: dict[str, str] | None = None) -> list[str]:
    """The tool names `tools/list` answers a 2026-07-28 client sending `headers`."""
    with httpx.Client(base_url=url, timeout=WAIT_S) as http:
        response = post_stateless(http, "tools/list", headers=headers)
    assert response.status_code == 200, response.text
    return [tool["name"] for tool in response.json()["result"]["tools"]]


def notes_titled(title: str) -> int:
    return sum(note.title == title for note in example_notes.notes.values())


def test_the_page_loads_without_errors_and_lists_what_tools_list_lists(explorer: ExplorerPage) -> None:
    explorer.open()
    assert explorer.tool_names() == listed_tools(explorer.url)
    assert explorer.page.locator("#server-name").inner_text() == "Notes"
    assert "2026-07-28" in explorer.page.locator("#options-list").inner_text()
    # Marked apart: MCP features, and the app's other routes from its OpenAPI document.
    assert explorer.page.locator("#routes .card", has_text="/health").locator(".rest-mark").count() == 1
    completion = explorer.page.locator("#routes .card", has_text="/completions/summarize-note/note-id")
    assert completion.locator(".tool-mark").inner_text().lower() == "completion"
    assert explorer.page.locator("#resources .card", has_text="notes://recent").count() == 1
    assert explorer.page.locator("#prompts .card", has_text="summarize_note").count() == 1


def test_a_guarded_tool_appears_only_with_the_credentials_it_needs(explorer: ExplorerPage) -> None:
    explorer.open()
    anonymous = explorer.tool_names()
    assert "create_note" not in anonymous
    assert "note_stats" not in anonymous
    explorer.authorize(x_api_key=API_KEY)
    with_key = explorer.tool_names()
    assert "create_note" in with_key
    assert with_key == listed_tools(explorer.url, {"x-api-key": API_KEY})
    bearer = mint()
    explorer.authorize(authorization=bearer)
    with_both = explorer.tool_names()
    assert "note_stats" in with_both
    assert with_both == listed_tools(explorer.url, {"x-api-key": API_KEY, "authorization": f"Bearer {bearer}"})
    # Kept for the tab only, as entered: a reload sends them again.
    explorer.page.reload()
    explorer.loaded()
    assert explorer.tool_names() == with_both


def test_an_anonymous_viewer_sees_guarded_tools_as_tools_that_need_credentials(explorer: ExplorerPage) -> None:
    explorer.open()
    routes = explorer.page.locator("#routes")
    for path in ("/notes/bulk", "/stats"):
        card = routes.locator(".card", has_text=path)
        assert card.locator(".hidden-mark").inner_text().lower() == "tool"
        assert card.locator(".rest-mark").count() == 0
    create = routes.locator(".card", has_text="POST").filter(has_text="Create a note")
    assert "Needs credentials (APIKeyHeader): enter them under Authorize." in create.locator(".needs").inner_text()
    stats = routes.locator(".card", has_text="/stats").locator(".needs").inner_text()
    assert stats == "Needs credentials (JWTBearer), with the scope notes:stats: enter them under Authorize."
    # Every marked route is a tool, a resource or a prompt to this viewer, never REST only.
    assert routes.locator(".card", has=explorer.page.locator(".rest-mark")).all_inner_texts() == [
        text for text in routes.locator(".card").all_inner_texts() if "/health" in text
    ]
    # Once a credential is sent, the lists show them (each route's guard decides a call), and
    # they are no longer among the other routes.
    explorer.authorize(x_api_key=API_KEY)
    assert {"create_notes", "note_stats"} <= set(explorer.tool_names())
    assert routes.locator(".card", has=explorer.page.locator(".hidden-mark")).count() == 0
    assert routes.locator(".card", has_text="/notes/bulk").count() == 0


def test_a_tool_called_through_its_form_shows_its_result(explorer: ExplorerPage) -> None:
    explorer.open()
    card = explorer.tool("get_note")
    card.locator("input[name='note_id']").fill("1")
    card.locator("button.call").click()
    result = card.locator(".call-result")
    result.wait_for()
    assert "is-error" not in (result.get_attribute("class") or "")
    assert '"title": "Welcome"' in result.locator("details.json pre").inner_text()
    # Its route, linked to its entry in /docs.
    assert card.locator(".route code").inner_text() == "GET /notes/{note_id}"
    assert card.locator("a.docs").get_attribute("href") == "/docs#/default/get_note_notes__note_id__get"


def test_an_error_result_is_marked_as_one(explorer: ExplorerPage) -> None:
    explorer.open()
    card = explorer.tool("get_note")
    card.locator("input[name='note_id']").fill("999999")
    card.locator("button.call").click()
    result = card.locator(".call-result.is-error")
    result.wait_for()
    assert "Note 999999 does not exist." in result.inner_text()


def test_a_gated_mutation_shows_its_plan_and_runs_once_when_confirmed(explorer: ExplorerPage) -> None:
    explorer.open()
    explorer.authorize(x_api_key=API_KEY)
    card = explorer.tool("create_note")
    # The token argument is for clients that cannot ask their user: this page asks.
    assert card.locator("input[name='confirmationToken']").count() == 0
    card.locator("input[name='title']").fill("Confirmed from the explorer")
    card.locator("button.call").click()
    question = card.locator(".confirmation")
    question.wait_for()
    assert "Allow create_note to run POST /notes" in question.inner_text()
    assert question.locator(".plan-route").inner_text() == "POST /notes"
    assert '"title": "Confirmed from the explorer"' in question.locator("pre.plan").inner_text()
    assert notes_titled("Confirmed from the explorer") == 0  # nothing ran before the answer
    question.locator(".confirm-yes").click()
    card.locator(".call-result").wait_for()
    assert "is-error" not in (card.locator(".call-result").get_attribute("class") or "")
    assert notes_titled("Confirmed from the explorer") == 1


def test_a_gated_mutation_cancelled_runs_nothing(explorer: ExplorerPage) -> None:
    explorer.open()
    explorer.authorize(x_api_key=API_KEY)
    card = explorer.tool("create_note")
    card.locator("input[name='title']").fill("Cancelled in the explorer")
    card.locator("button.call").click()
    card.locator(".confirm-no").click()
    card.locator(".call-result.is-error").wait_for()
    assert notes_titled("Cancelled in the explorer") == 0


def test_a_tool_that_reports_progress_shows_it_and_its_log_messages(explorer: ExplorerPage) -> None:
    explorer.open()
    explorer.authorize(x_api_key=API_KEY)
    card = explorer.tool("create_notes")
    # An array of objects, filled item by item.
    add = card.get_by_role("button", name="Add body item")
    add.click()
    add.click()
    card.locator("input[name='body[0].title']").fill("First of two")
    card.locator("input[name='body[1].title']").fill("Second of two")
    card.locator("button.call").click()
    card.locator(".confirm-yes").click()
    card.locator(".call-result").wait_for()
    progress = card.locator(".progress")
    assert progress.locator(".progress-text").inner_text() == "2 of 2 · Second of two"
    assert progress.locator("progress").get_attribute("value") == "2"
    assert '{"created":2}' in card.locator(".logs").inner_text()
    assert notes_titled("First of two") == notes_titled("Second of two") == 1


def test_the_filter_narrows_the_page_to_what_matches(explorer: ExplorerPage) -> None:
    explorer.open()
    explorer.page.fill("#filter", "feed")
    visible = explorer.page.locator(".card:visible")
    assert visible.count() == 1
    assert visible.get_attribute("data-name") == "follow_notes"


def test_arguments_can_be_written_as_json(explorer: ExplorerPage) -> None:
    explorer.open()
    card = explorer.tool("get_note")
    card.locator("select.mode").select_option("json")
    card.locator("textarea.raw").last.fill('{"note_id": 1}')
    card.locator("button.call").click()
    card.locator(".call-result").wait_for()
    assert '"title": "Welcome"' in card.locator(".call-result").inner_text()


def test_a_resource_is_read_and_a_prompt_rendered_from_the_page(explorer: ExplorerPage) -> None:
    explorer.open()
    resource = explorer.page.locator("#resources .card", has_text="notes://recent")
    resource.locator(":scope > summary").click()
    resource.get_by_role("button", name="Read").click()
    shown = json.loads(resource.locator(".resource-block pre").first.inner_text())
    assert shown == httpx.get(f"{explorer.url}/notes/recent", timeout=WAIT_S).json()  # the route's answer
    prompt = explorer.page.locator("#prompts .card", has_text="summarize_note")
    prompt.locator(":scope > summary").click()
    prompt.locator("input[name='note_id']").fill("1")
    prompt.get_by_role("button", name="Get").click()
    messages = prompt.locator(".output .message")
    messages.last.wait_for()
    assert "Summarize the note above in one sentence." in messages.last.inner_text()


def test_progress_shows_as_it_arrives_while_the_call_runs(browser: Browser) -> None:
    observed.gate.clear()  # the route reports step 1, then waits for the test
    with serve(streaming_app()) as url, tab(browser, url, "progress_as_it_arrives") as explorer:
        explorer.open()
        card = explorer.tool("gated")
        card.locator("button.call").click()
        progress = card.locator(".progress-text")
        progress.filter(has_text="1").wait_for()
        assert card.locator(".call-result").count() == 0  # read from the stream, before the end
        observed.gate.set()
        card.locator(".call-result").wait_for()
        assert progress.inner_text() == "2"
        assert '"opened": true' in card.locator(".call-result").inner_text()


def test_a_question_a_route_asks_of_its_own_is_shown_as_a_form(browser: Browser) -> None:
    with serve(streaming_app()) as url, tab(browser, url, "route_question") as explorer:
        explorer.open()
        card = explorer.tool("ask")
        card.locator("button.call").click()
        question = card.locator(".elicitation")
        question.wait_for()
        assert "Which colour?" in question.inner_text()
        question.locator("input[name='colour']").fill("teal")
        question.get_by_role("button", name="Send").click()
        card.locator(".call-result").wait_for()
        assert '"colour": "teal"' in card.locator(".call-result").inner_text()


def test_images_are_shown_and_audio_is_playable(browser: Browser) -> None:
    with serve(media_app()) as url, tab(browser, url, "media") as explorer:
        explorer.open()
        card = explorer.tool("media")
        card.locator("button.call").click()
        card.locator(".call-result").wait_for()
        image = card.locator("img.image-block")
        # Drawn: the page's policy lets a tool's data: image through.
        assert image.evaluate("image => image.complete && image.naturalWidth") == 1
        assert "null" not in card.inner_text()  # nothing missing is shown as a value
        audio = card.locator("audio.audio-block")
        assert audio.get_attribute("src", timeout=WAIT_S * 1000).startswith("data:audio/wav;base64,")
        assert audio.evaluate("audio => audio.controls") is True


def test_a_tool_taking_a_recursive_model_is_shown_and_edits_the_recursion_as_json(browser: Browser) -> None:
    with serve(recursive_app()) as url, tab(browser, url, "recursive_model") as explorer:
        explorer.open()
        assert explorer.tool_names() == ["chain", "ping"]
        card = explorer.tool("chain")
        # The model's fields, then the same model inside itself, where its form would never end.
        card.locator("input[name='value']").fill("1")
        card.locator("input[name='next.value']").fill("2")
        card.locator("textarea[name='next.next']").fill('{"value": 3}')
        card.locator("button.call").click()
        card.locator(".call-result").wait_for()
        assert '"length": 3' in card.locator(".call-result").inner_text()


def test_with_many_tools_a_tools_schemas_and_form_are_built_when_its_card_is_opened(browser: Browser) -> None:
    with serve(many_tools_app(MANY_TOOLS)) as url, tab(browser, url, "many_tools") as explorer:
        explorer.open()
        assert len(explorer.tool_names()) == MANY_TOOLS
        page = explorer.page
        assert page.locator("#tools .try").count() == 0
        # A few elements a card, whatever the size of its schema.
        assert page.evaluate("document.getElementsByTagName('*').length") < ELEMENTS_PER_CLOSED_CARD * MANY_TOOLS
        card = explorer.tool("tool_7")
        assert card.locator("input[name='field_29']").count() == 1
        assert page.locator("#tools .try").count() == 1


MANY_TOOLS = 400
ELEMENTS_PER_CLOSED_CARD = 20  # the summary's marks, name, title, method, path, badges, description, route


def many_tools_app(count: int) -> FastAPI:
    """An app of `count` tools, each taking a body of thirty fields."""
    app = FastAPI(title="Many")
    app.include_router(mcp_routes(app))
    fields: dict[str, Any] = {f"field_{index}": (str, "") for index in range(30)}
    body = create_model("Form", **fields)

    def add(index: int) -> None:
        def endpoint(item_id: int, form: Any) -> dict[str, int]:
            return {"tool": index}

        endpoint.__name__ = f"tool_{index}"
        endpoint.__annotations__ = {**endpoint.__annotations__, "form": body}  # a model made at run time
        app.post(f"/items{index}/{{item_id}}", summary=f"Tool {index}")(mcp_tool(confirm=False)(endpoint))

    for index in range(count):
        add(index)
    return app


class Link(BaseModel):
    """A linked list: a model that holds itself."""

    value: int
    next: Link | None = None


def recursive_app() -> FastAPI:
    """An app whose tool takes a recursive model, beside one that takes nothing."""
    app = FastAPI(title="Recursive")
    app.include_router(mcp_routes(app))

    @mcp_tool(confirm=False)
    @app.post("/chain")
    def chain(link: Link) -> dict[str, int]:
        length, current = 0, link
        while current is not None:
            length, current = length + 1, current.next
        return {"length": length}

    @mcp_tool()
    @app.get("/ping")
    def ping() -> dict[str, bool]:
        return {"pong": True}

    return app


def media_app() -> FastAPI:
    """An app whose one tool answers text, an image and a sound."""
    app = FastAPI(title="Media")
    app.include_router(mcp_routes(app))

    @mcp_tool()
    @app.get("/media", response_class=ContentResponse)
    def media() -> ContentResponse:
        return ContentResponse(
            [
                text_content("A pixel and a beep."),
                image_content(png_pixel(), "image/png"),
                audio_content(beep(), "audio/wav"),
            ]
        )

    return app


def png_pixel() -> bytes:
    """A 1x1 opaque PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00\x2b\x6c\xb0"))
        + chunk(b"IEND", b"")
    )


def beep() -> bytes:
    """A tenth of a second of 8-bit mono WAV."""
    rate = 8000
    samples = bytes(128 + (40 if (index // 8) % 2 else -40) for index in range(rate // 10))
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate, 1, 8)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(samples)) + samples
    return b"RIFF" + struct.pack("<I", len(body)) + body
