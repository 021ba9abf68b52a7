"""The example app on a real uvicorn server, driven by the official MCP Python SDK client."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, MCPError, types
from mcp.client.subscriptions import ResourceUpdated

from example_app.auth import mint
from example_app.main import API_KEY, app
from fastapi_mcp_routes.tools.confirmation import PENDING_META_KEY
from tests.support.confirmation import sdk_pending_of
from tests.support.sdk import mcp_client
from tests.support.servers import serve
from tests.support.stateless import stateless_headers, stateless_meta, stateless_request
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve(app) as url:
        yield url


async def confirmed_call(client: Client, name: str, arguments: dict[str, Any], **kwargs: Any) -> Any:
    """Call a tool that changes data: the first call returns a plan and a token, the second
    (same arguments plus the token) runs the route."""
    pending = await client.call_tool(name, arguments)
    token = sdk_pending_of(pending)["token"]  # nothing ran: an isError result with the plan
    return await client.call_tool(name, {**arguments, "confirmationToken": token}, **kwargs)


def rest(base_url: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        return http.request(method, path, **kwargs)


async def test_initialize_reports_the_app_identity_and_instructions(base_url: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url) as client:
            assert client.server_info is not None
            assert (client.server_info.name, client.server_info.version) == ("Notes", "1.0.0")
            assert client.instructions == "Notes service: list, read and edit notes."
            assert client.protocol_version == "2025-11-25"
            assert client.server_capabilities.tools is not None


async def test_only_marked_routes_are_listed(base_url: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, {"authorization": "Bearer anything"}) as client:
            tools = (await client.list_tools()).tools
    names = [tool.name for tool in tools]
    assert names == [
        "create_note",
        "create_notes",
        "delete_note",
        "export_notes",
        "follow_notes",
        "get_note",
        "list_notes",
        "note_stats",
        "update_note",
    ]
    by_name = {tool.name: tool for tool in tools}
    assert by_name["get_note"].annotations is not None
    assert by_name["get_note"].annotations.read_only_hint is True
    assert by_name["delete_note"].annotations is not None
    assert by_name["delete_note"].annotations.destructive_hint is True
    assert "x-api-key" not in by_name["create_note"].input_schema["properties"]


async def test_a_tool_behind_a_security_scheme_is_not_listed_to_a_caller_without_credentials(
    base_url: str,
) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            hidden_but_guarded = await client.call_tool("note_stats", {})
    assert "note_stats" not in names
    assert "get_note" in names
    # Visibility is not authorization: called by name, the route's own guard answers.
    assert hidden_but_guarded.is_error
    assert "401" in hidden_but_guarded.content[0].text


async def test_get_tool_result_equals_the_rest_response(base_url: str) -> None:
    expected = rest(base_url, "GET", "/notes/1").json()
    listed = rest(base_url, "GET", "/notes", params={"tag": ["intro"], "limit": 5}).json()
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url) as client:
            one = await client.call_tool("get_note", {"note_id": 1})
            many = await client.call_tool("list_notes", {"tag": ["intro"], "limit": 5})
    assert not one.is_error
    assert one.structured_content == expected
    assert many.structured_content == listed


async def test_post_tool_creates_through_the_route_with_the_callers_key(base_url: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, {"x-api-key": API_KEY}) as client:
            created = await confirmed_call(client, "create_note", {"title": "From an agent", "tags": ["mcp"]})
    assert not created.is_error
    note = created.structured_content
    assert note["title"] == "From an agent"
    assert rest(base_url, "GET", f"/notes/{note['id']}").json() == note


async def test_guarded_tool_refuses_without_credentials(base_url: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url) as client:
            # The route's API-key scheme refuses before any confirmation: no plan, no token.
            refused = await client.call_tool("create_note", {"title": "No key"})
            stats = await client.call_tool("note_stats", {})
    assert refused.is_error
    assert "401" in refused.content[0].text
    assert stats.is_error
    assert "401" in stats.content[0].text


async def test_a_jwt_guarded_tool_runs_with_the_agents_token_and_its_scope(base_url: str) -> None:
    token = mint(scopes=["notes:stats"])
    expected = rest(base_url, "GET", "/stats", headers={"authorization": f"Bearer {token}"}).json()
    unscoped = {"authorization": f"Bearer {mint(scopes=['notes:read'])}"}
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, {"authorization": f"Bearer {token}"}) as client:
            stats = await client.call_tool("note_stats", {})
        async with mcp_client(base_url, unscoped) as client:
            # HTTP 403 with the step-up challenge, which a client without OAuth cannot act on.
            with pytest.raises(MCPError, match="notes:stats"):
                await client.call_tool("note_stats", {})
    assert not stats.is_error
    assert stats.structured_content == expected


async def test_the_protected_resource_metadata_names_the_issuer(base_url: str) -> None:
    metadata = rest(base_url, "GET", "/.well-known/oauth-protected-resource/mcp").json()
    assert metadata["authorization_servers"] == ["http://127.0.0.1:8000/demo-issuer"]
    assert metadata["scopes_supported"] == ["notes:stats"]
    challenge = rest(base_url, "GET", "/stats").headers["www-authenticate"]
    assert challenge.startswith('Bearer resource_metadata="')


async def test_invalid_arguments_come_back_as_an_error_result_naming_the_field(base_url: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, {"x-api-key": API_KEY}) as client:
            # Refused by the route's model before any confirmation: no plan, no token.
            result = await client.call_tool("create_note", {"title": "", "priority": "urgent"})
    assert result.is_error
    assert result.meta is None or PENDING_META_KEY not in result.meta
    text = result.content[0].text
    assert "'title'" in text
    assert "'priority'" in text


async def test_update_and_delete_run_their_routes(base_url: str) -> None:
    headers = {"x-api-key": API_KEY}
    created = rest(base_url, "POST", "/notes", json={"title": "Temporary"}, headers=headers).json()
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, headers) as client:
            updated = await confirmed_call(client, "update_note", {"note_id": created["id"], "title": "Renamed"})
            deleted = await confirmed_call(client, "delete_note", {"note_id": created["id"]})
            missing = await client.call_tool("get_note", {"note_id": created["id"]})
    assert updated.structured_content["revision"] == 2
    assert not deleted.is_error
    assert deleted.content[0].text == f"DELETE /notes/{created['id']}: 204 No Content"  # not an empty result
    assert missing.is_error
    assert "404" in missing.content[0].text
    assert rest(base_url, "GET", f"/notes/{created['id']}").status_code == 404


async def test_bulk_create_reports_progress_through_the_tool_context(base_url: str) -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, {"x-api-key": API_KEY}) as client:
            result = await confirmed_call(
                client, "create_notes", {"body": [{"title": "a"}, {"title": "b"}]}, progress_callback=on_progress
            )
    assert len(result.structured_content["created"]) == 2
    assert seen == [1, 2]


async def test_the_stateless_sdk_client_uses_the_example_app_too(base_url: str) -> None:
    """The SDK v2 client in its default mode discovers 2026-07-28 and needs no session."""
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, {"x-api-key": API_KEY}, mode="auto") as client:
            assert client.protocol_version == "2026-07-28"
            names = [tool.name for tool in (await client.list_tools()).tools]
            note = await client.call_tool("get_note", {"note_id": 1})
            bulk = await confirmed_call(
                client, "create_notes", {"body": [{"title": "x"}, {"title": "y"}]}, progress_callback=on_progress
            )
    assert "get_note" in names
    assert note.structured_content == rest(base_url, "GET", "/notes/1").json()
    assert len(bulk.structured_content["created"]) == 2
    assert seen == [1, 2]


async def test_a_note_is_a_resource_read_through_its_route_and_recent_notes_are_listed(base_url: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url) as client:
            listed = (await client.list_resources()).resources
            templates = (await client.list_resource_templates()).resource_templates
            note = (await client.read_resource("notes://1")).contents[0]
            recent = (await client.read_resource("notes://recent")).contents[0]
            with pytest.raises(MCPError, match="Resource not found") as missing:
                await client.read_resource("notes://999999")
    assert [(r.uri, r.mime_type) for r in listed] == [("notes://recent", "application/json")]
    assert [(t.uri_template, t.mime_type) for t in templates] == [("notes://{note_id}", "application/json")]
    assert isinstance(note, types.TextResourceContents)
    assert note.text == rest(base_url, "GET", "/notes/1").text
    assert isinstance(recent, types.TextResourceContents)
    assert recent.text == rest(base_url, "GET", "/notes/recent").text
    assert (missing.value.code, missing.value.data) == (-32002, {"uri": "notes://999999"})


async def test_summarize_note_converts_its_string_arguments_through_the_route(base_url: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url) as client:
            prompt = (await client.list_prompts()).prompts[0]
            long = await client.get_prompt("summarize_note", {"note_id": "1", "tone": "long"})
            with pytest.raises(MCPError, match="tone") as refused:
                await client.get_prompt("summarize_note", {"note_id": "1", "tone": "medium"})
    assert prompt.name == "summarize_note"
    assert [(a.name, a.required) for a in prompt.arguments or ()] == [("note_id", True), ("tone", False)]
    embedded, ask = (message.content for message in long.messages)
    assert isinstance(embedded, types.EmbeddedResource)
    assert embedded.resource.uri == "notes://1"
    assert isinstance(ask, types.TextContent)
    assert "paragraph" in ask.text
    assert (refused.value.code, refused.value.data) == (-32602, {"status": 422})


async def test_note_ids_complete_for_the_prompt_and_the_template_and_tone_from_its_literal(base_url: str) -> None:
    prompt = types.PromptReference(type="ref/prompt", name="summarize_note")
    template = types.ResourceTemplateReference(type="ref/resource", uri="notes://{note_id}")
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url) as client:
            for_prompt = (await client.complete(prompt, {"name": "note_id", "value": "1"})).completion
            for_template = (await client.complete(template, {"name": "note_id", "value": "1"})).completion
            tone = (await client.complete(prompt, {"name": "tone", "value": "l"})).completion
    assert "1" in for_prompt.values
    assert all(value.startswith("1") for value in for_prompt.values)
    assert for_template.values == for_prompt.values
    assert tone.values == ["long"]


async def until_heard(heard: anyio.Event, write: Callable[[], object]) -> None:
    """Write until a listener hears of it: the listening stream may still be opening on the
    server when the first write lands (bounded by the caller's `fail_after`)."""
    while not heard.is_set():
        write()
        with anyio.move_on_after(0.2):
            await heard.wait()


@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")  # resources/subscribe is gone only in 2026-07-28
async def test_a_rest_put_of_a_note_tells_the_sessions_subscribed_to_it(base_url: str) -> None:
    headers = {"x-api-key": API_KEY}
    created = rest(base_url, "POST", "/notes", json={"title": "Watched"}, headers=headers).json()
    uri = f"notes://{created['id']}"
    heard = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification) and message.params.uri == uri:
            heard.set()

    def put() -> None:
        changed = rest(base_url, "PUT", f"/notes/{created['id']}", json={"title": "Changed"}, headers=headers)
        assert changed.status_code == 200

    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, message_handler=on_message) as client:
            await client.subscribe_resource(uri)
            await until_heard(heard, put)


async def test_a_new_note_reaches_a_2026_listener_of_notes_recent(base_url: str) -> None:
    heard = anyio.Event()

    def post() -> None:
        created = rest(base_url, "POST", "/notes", json={"title": "Fresh"}, headers={"x-api-key": API_KEY})
        assert created.status_code == 201

    async def wait_for_update(events: Any) -> None:
        async for event in events:
            if event == ResourceUpdated("notes://recent"):
                heard.set()
                return

    with anyio.fail_after(WAIT_S):
        async with (
            mcp_client(base_url, mode="auto") as client,
            client.listen(resource_subscriptions=["notes://recent"]) as events,
            anyio.create_task_group() as tasks,
        ):
            assert events.honored.resource_subscriptions == ["notes://recent"]
            tasks.start_soon(wait_for_update, events)
            await until_heard(heard, post)


async def test_the_export_is_a_task_for_a_client_of_the_tasks_extension_and_a_direct_answer_for_others(
    base_url: str,
) -> None:
    tasks = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    headers = stateless_headers("tools/call", "export_notes")
    with anyio.fail_after(WAIT_S):
        async with httpx.AsyncClient(base_url=base_url, timeout=WAIT_S) as http:
            call = stateless_request("tools/call", {"name": "export_notes", "arguments": {}}, stateless_meta(tasks))
            created = (await http.post("/mcp", json=call, headers=headers)).json()["result"]
            task_id = created["taskId"]
            poll = stateless_request("tasks/get", {"taskId": task_id}, stateless_meta(tasks))
            status = created["status"]
            while status not in ("completed", "failed", "cancelled"):
                await anyio.sleep(0.1)
                task = (await http.post("/mcp", json=poll, headers=stateless_headers("tasks/get", task_id))).json()
                status = task["result"]["status"]
            plain = stateless_request("tools/call", {"name": "export_notes", "arguments": {}})
            direct = (await http.post("/mcp", json=plain, headers=headers)).json()["result"]
    assert created["resultType"] == "task"
    assert status == "completed"
    exported = task["result"]["result"]["structuredContent"]
    assert exported["notes"] >= 1
    assert "## " in exported["markdown"]
    assert direct["resultType"] == "complete"
    assert direct["structuredContent"] == exported
