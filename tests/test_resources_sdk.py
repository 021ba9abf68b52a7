"""Resources, resource templates, prompts and completion on a real uvicorn server, with the
official SDK client in both eras (a session, and the 2026-07-28 stateless revision), with raw
2026-07-28 requests where the SDK hides the wire, and across two processes sharing a Redis.

Subscriptions are heard the way a client hears them: a session's updates on its GET stream,
a `subscriptions/listen` stream's after its acknowledgement. A stream opens only once it
listens, so a test writes as soon as it sees the stream open (the SDK's GET answered 200, or
the acknowledgement read) and never waits on a timer.
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final

import anyio
import httpx
import httpx2
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp import Client, MCPError, types
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ResourceUpdated

from fastapi_mcp_routes import Limits
from tests.resources_app import API_KEY, MISSING_KEY, RED_PIXEL_PNG, WRONG_KEY, notes_resources_app
from tests.support.deployments import deployment_env
from tests.support.jsonrpc import SESSION_VERSION
from tests.support.processes import serve_processes
from tests.support.redis import redis_link
from tests.support.sdk import mcp_client
from tests.support.servers import serve
from tests.support.stateless import (
    STATELESS_VERSION,
    post_stateless,
    stateless_headers,
    stateless_meta,
    stateless_request,
)
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.anyio

RESOURCES_APP: Final = "tests.resources_app:app"
NOTE: Final = "notes://{note_id}"
SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
VERSIONS: Final = {"legacy": SESSION_VERSION, "auto": STATELESS_VERSION}
UPDATES_KEPT: Final = 16  # updates a test's client holds before it reads them
CAPABLE: Final = stateless_meta({"elicitation": {}})
LISTEN_HEADERS: Final = stateless_headers("subscriptions/listen")
FAR_FROM_REDIS_S: Final = 0.1  # how long each write between the first process and Redis takes


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    """A server whose notes no test writes (the tests that write serve an app of their own)."""
    with serve(notes_resources_app()) as url:
        yield url


@pytest.fixture(params=["legacy", "auto"])
def mode(request: pytest.FixtureRequest) -> str:
    """The SDK client's era: a session (`legacy`), or 2026-07-28 without one (`auto`)."""
    era: str = request.param
    return era


# -- both eras, with the SDK client ------------------------------------------------------------


async def test_resources_and_templates_are_listed_in_both_eras(base_url: str, mode: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, mode=mode) as client:
            assert client.protocol_version == VERSIONS[mode]
            assert client.server_capabilities.resources is not None
            assert client.server_capabilities.resources.subscribe is True
            resources = (await client.list_resources()).resources
            templates = (await client.list_resource_templates()).resource_templates
    # The vault is guarded by a security scheme: a caller without its key is not shown it.
    assert [(r.uri, r.name, r.mime_type) for r in resources] == [
        ("about://logo", "logo", "image/png"),
        ("about://readme", "readme", "text/plain"),
    ]
    assert [(t.uri_template, t.name, t.description) for t in templates] == [
        (NOTE, "read_note", "One note, by its number.")
    ]


async def test_reads_answer_text_a_blob_and_a_template_with_a_value(base_url: str, mode: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, mode=mode) as client:
            [readme] = (await client.read_resource("about://readme")).contents
            [logo] = (await client.read_resource("about://logo")).contents
            [note] = (await client.read_resource("notes://2")).contents
    assert isinstance(readme, types.TextResourceContents)
    assert (readme.uri, readme.mime_type, readme.text) == ("about://readme", "text/plain", "Notes, as resources.")
    assert isinstance(logo, types.BlobResourceContents)
    assert (logo.mime_type, base64.b64decode(logo.blob)) == ("image/png", RED_PIXEL_PNG)
    assert isinstance(note, types.TextResourceContents)
    assert (note.uri, note.text) == ("notes://2", "second note")


async def test_a_read_of_a_note_the_route_does_not_have_is_resource_not_found(base_url: str, mode: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, mode=mode) as client:
            with pytest.raises(MCPError) as missing:
                await client.read_resource("notes://99")
    assert missing.value.data == {"uri": "notes://99"}


async def test_prompts_are_listed_and_rendered_with_their_arguments(base_url: str, mode: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, mode=mode) as client:
            prompts = {prompt.name: prompt for prompt in (await client.list_prompts()).prompts}
            rendered = await client.get_prompt("summarize_note", {"note_id": "1", "style": "long"})
    assert sorted(prompts) == ["ask_context", "summarize_note", "write_about"]  # the vault's is guarded
    summarize = prompts["summarize_note"]
    assert summarize.description == "Summarize one note."
    assert [(a.name, a.required) for a in summarize.arguments or []] == [("note_id", True), ("style", False)]
    [message] = rendered.messages
    assert message.role == "user"
    assert isinstance(message.content, types.TextContent)
    assert message.content.text == "Summarize in a long way: first note"


async def test_completion_offers_prompt_arguments_and_template_variables(base_url: str, mode: str) -> None:
    topic = types.PromptReference(type="ref/prompt", name="write_about")
    summarize = types.PromptReference(type="ref/prompt", name="summarize_note")
    note = types.ResourceTemplateReference(type="ref/resource", uri=NOTE)
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, mode=mode) as client:
            by_route = (await client.complete(topic, {"name": "topic", "value": "ge"})).completion
            by_choices = (await client.complete(summarize, {"name": "style", "value": "l"})).completion
            variable = (await client.complete(note, {"name": "note_id", "value": ""})).completion
    assert (by_route.values, by_route.total, by_route.has_more) == (["geology"], 1, False)
    assert by_choices.values == ["long"]  # no route: the argument's Literal lists its values
    assert variable.values == ["1", "2"]


@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")  # resources/subscribe is session-era only
async def test_a_session_subscribes_and_unsubscribes() -> None:
    with serve(notes_resources_app()) as url:
        with anyio.fail_after(WAIT_S):
            async with listening_session(url) as (client, updates), httpx.AsyncClient(base_url=url) as rest:
                await client.subscribe_resource("notes://1")
                await put_note(rest, 1, "heard")
                assert await updates.receive() == "notes://1"
                await client.unsubscribe_resource("notes://1")
                await client.subscribe_resource("notes://2")
                await put_note(rest, 1, "not heard")
                await put_note(rest, 2, "heard")
                assert await next_updates(updates, until="notes://2") == ["notes://2"]


@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")
async def test_a_subscription_to_a_uri_no_resource_has_is_refused(base_url: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url) as client:
            with pytest.raises(MCPError) as refused:
                await client.subscribe_resource("about://nothing")
    assert refused.value.data == {"uri": "about://nothing"}


async def test_the_sdk_listens_for_resource_updates_without_a_session() -> None:
    with serve(notes_resources_app()) as url:
        with anyio.fail_after(WAIT_S):
            async with (
                mcp_client(url, mode="auto") as client,
                client.listen(resource_subscriptions=["notes://1", "about://nothing"]) as subscription,
                httpx.AsyncClient(base_url=url) as rest,
            ):
                await put_note(rest, 2, "not heard")
                await put_note(rest, 1, "heard")
                event = await anext(aiter(subscription))
    assert subscription.honored.resource_subscriptions == ["notes://1"]
    assert event == ResourceUpdated(uri="notes://1")


# -- guards: the route's own dependencies decide -----------------------------------------------


async def test_a_guarded_read_and_prompt_refuse_a_caller_without_the_key(base_url: str, mode: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, mode=mode) as client:
            with pytest.raises(MCPError) as read:
                await client.read_resource("secrets://vault")
            with pytest.raises(MCPError) as prompt:
                await client.get_prompt("vault_prompt")
        async with mcp_client(base_url, {"x-api-key": "not the key"}, mode=mode) as client:
            with pytest.raises(MCPError) as wrong_key:
                await client.read_resource("secrets://vault")
    for refused in (read, prompt):
        assert (refused.value.code, refused.value.data) == (-32602, {"status": 401})
        assert MISSING_KEY in refused.value.message
    assert wrong_key.value.data == {"status": 403}
    assert WRONG_KEY in wrong_key.value.message


async def test_a_guarded_read_and_prompt_serve_a_caller_with_the_key(base_url: str, mode: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, {"x-api-key": API_KEY}, mode=mode) as client:
            listed = [resource.uri for resource in (await client.list_resources()).resources]
            [vault] = (await client.read_resource("secrets://vault")).contents
            prompt = await client.get_prompt("vault_prompt")
    assert "secrets://vault" in listed
    assert isinstance(vault, types.TextResourceContents)
    assert vault.text == "the vault's contents"
    assert isinstance(prompt.messages[0].content, types.TextContent)
    assert prompt.messages[0].content.text == "Tell me what is in the vault."


@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")
async def test_a_guarded_resource_refuses_a_subscription_without_the_key(base_url: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url) as client:
            with pytest.raises(MCPError) as refused:
                await client.subscribe_resource("secrets://vault")
    assert refused.value.data == {"status": 401}


# -- the app's own writes notify a session's subscribers ---------------------------------------


@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")
async def test_a_rest_put_to_a_subscribed_note_reaches_the_session_and_another_note_does_not() -> None:
    with serve(notes_resources_app()) as url:
        with anyio.fail_after(WAIT_S):
            async with listening_session(url) as (client, updates), httpx.AsyncClient(base_url=url) as rest:
                await client.subscribe_resource("notes://1")
                await put_note(rest, 2, "another note")
                await put_note(rest, 1, "edited over REST")
                heard = await next_updates(updates, until="notes://1")
                [note] = (await client.read_resource("notes://1")).contents
    assert heard == ["notes://1"]
    assert isinstance(note, types.TextResourceContents)
    assert note.text == "edited over REST"


@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")
async def test_a_tool_call_that_writes_the_note_notifies_its_subscribers() -> None:
    with serve(notes_resources_app()) as url:
        with anyio.fail_after(WAIT_S):
            async with listening_session(url) as (client, updates):
                await client.subscribe_resource("notes://1")
                written = await client.call_tool("write_note", {"note_id": 1, "text": "by a tool"})
                heard = await next_updates(updates, until="notes://1")
    assert written.structured_content == {"id": 1, "text": "by a tool"}
    assert heard == ["notes://1"]


@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")
async def test_notify_resource_updated_from_app_code_notifies_its_subscribers() -> None:
    with serve(notes_resources_app()) as url:
        with anyio.fail_after(WAIT_S):
            async with listening_session(url) as (client, updates), httpx.AsyncClient(base_url=url) as rest:
                await client.subscribe_resource("notes://1")
                touched = await rest.post("/notes/1/touch")
                heard = await next_updates(updates, until="notes://1")
    assert touched.status_code == 204
    assert heard == ["notes://1"]


# -- 2026-07-28: subscriptions/listen on the wire ----------------------------------------------


async def test_listen_acknowledges_honored_uris_then_tags_the_update_of_a_rest_put() -> None:
    wanted = ["notes://1", "about://nothing"]  # a static URI no resource has is left out
    with serve(notes_resources_app()) as url, anyio.fail_after(WAIT_S):
        async with httpx.AsyncClient(base_url=url) as http, listen_stream(http, wanted, request_id=7) as events:
            acknowledged = await anext(events)
            await put_note(http, 2, "not heard")
            await put_note(http, 1, "heard")
            updated = await anext(events)
    assert acknowledged == {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": {SUBSCRIPTION_ID: 7}, "notifications": {"resourceSubscriptions": ["notes://1"]}},
    }
    assert updated == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"_meta": {SUBSCRIPTION_ID: 7}, "uri": "notes://1"},
    }


async def test_listen_for_more_uris_than_max_subscriptions_is_refused() -> None:
    app = notes_resources_app(limits=Limits(max_subscriptions=2))
    three = {"notifications": {"resourceSubscriptions": ["notes://1", "notes://2", "notes://3"]}}
    with serve(app) as url, anyio.fail_after(WAIT_S):
        async with httpx.AsyncClient(base_url=url) as http:
            refused = await http.post(
                "/mcp", json=stateless_request("subscriptions/listen", three), headers=LISTEN_HEADERS
            )
            async with listen_stream(http, ["notes://1", "notes://2"], request_id=2) as events:
                acknowledged = await anext(events)
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == -32602
    assert "max_subscriptions" in refused.json()["error"]["message"]
    assert acknowledged["params"]["notifications"] == {"resourceSubscriptions": ["notes://1", "notes://2"]}


# -- several processes sharing a secret and a Redis --------------------------------------------


@dataclass(frozen=True, slots=True)
class TwoProcesses:
    first: str  # reaches Redis over a slow link
    second: str


@pytest.fixture(scope="module")
def two_processes(redis_url: str) -> Iterator[TwoProcesses]:
    """Two processes sharing a secret and a Redis; the first reaches Redis over a slow link, so
    a stream of its own that opened before it listened would miss a write made on the second
    as soon as the client saw it open."""
    with (
        redis_link(redis_url, latency_s=FAR_FROM_REDIS_S) as far,
        serve_processes(RESOURCES_APP, env=deployment_env(far.url)) as first,
        serve_processes(RESOURCES_APP, env=deployment_env(redis_url)) as second,
    ):
        yield TwoProcesses(first, second)


@pytest.mark.processes
@pytest.mark.redis
@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")
async def test_a_put_on_one_process_reaches_a_session_whose_stream_another_holds(two_processes: TwoProcesses) -> None:
    # Its GET stream on the first process, every POST (its subscription too) on the second.
    steering = Steering(streams_to=two_processes.first, others_to=[two_processes.second])
    with anyio.fail_after(WAIT_S):
        async with (
            listening_session(two_processes.first, transport=steering) as (client, updates),
            httpx.AsyncClient(base_url=two_processes.second) as rest,
        ):
            await client.subscribe_resource("notes://1")
            await put_note(rest, 2, "not heard")
            await put_note(rest, 1, "written on the other process")
            heard = await next_updates(updates, until="notes://1")
    assert heard == ["notes://1"]
    assert steering.streams_went == {two_processes.first}
    assert steering.others_went == {two_processes.second}


@pytest.mark.processes
@pytest.mark.redis
@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")
async def test_subscriptions_sent_at_once_to_both_processes_are_all_kept(two_processes: TwoProcesses) -> None:
    both = [two_processes.first, two_processes.second]
    steering = Steering(streams_to=two_processes.first, others_to=both)
    uris = [f"notes://{number}" for number in range(1, 5)]
    with anyio.fail_after(WAIT_S):
        async with (
            listening_session(two_processes.first, transport=steering) as (client, updates),
            httpx.AsyncClient(base_url=two_processes.second) as rest,
        ):
            async with anyio.create_task_group() as subscribing:
                for uri in uris:
                    subscribing.start_soon(client.subscribe_resource, uri)
            for number in range(1, 5):
                await put_note(rest, number, "written once every subscription was taken")
            heard = [await updates.receive() for _ in uris]
    assert sorted(heard) == uris
    assert steering.others_went == set(both)


@pytest.mark.processes
@pytest.mark.redis
async def test_a_put_on_one_process_reaches_a_listen_stream_on_another(two_processes: TwoProcesses) -> None:
    with anyio.fail_after(WAIT_S):
        async with (
            httpx.AsyncClient(base_url=two_processes.first) as first,
            httpx.AsyncClient(base_url=two_processes.second) as second,
            listen_stream(first, ["notes://1"], request_id=3) as events,
        ):
            acknowledged = await anext(events)
            await put_note(second, 2, "not heard")
            await put_note(second, 1, "written on the other process")
            updated = await anext(events)
    assert acknowledged["params"]["notifications"] == {"resourceSubscriptions": ["notes://1"]}
    assert updated["params"] == {"_meta": {SUBSCRIPTION_ID: 3}, "uri": "notes://1"}


# -- a prompt whose route asks the client ------------------------------------------------------


async def test_a_prompt_that_asks_gets_the_sdk_clients_answer(base_url: str, mode: str) -> None:
    asked: list[str] = []

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"context": "geology"})

    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, mode=mode, elicitation_callback=on_elicit) as client:
            prompt = await client.get_prompt("ask_context")
    assert asked == ["What context should the prompt use?"]
    assert isinstance(prompt.messages[0].content, types.TextContent)
    assert prompt.messages[0].content.text == "Use this context: geology"


def test_a_stateless_prompt_that_asks_is_input_required_then_answered_on_retry(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        asked = post_stateless(http, "prompts/get", {"name": "ask_context"}, meta=CAPABLE).json()["result"]
        answer = {"context": {"action": "accept", "content": {"context": "history"}}}
        retry = {"name": "ask_context", "inputResponses": answer, "requestState": asked["requestState"]}
        answered = post_stateless(http, "prompts/get", retry, meta=CAPABLE).json()["result"]
    assert asked["resultType"] == "input_required"
    [(key, question)] = asked["inputRequests"].items()
    assert key == "context"
    assert question["method"] == "elicitation/create"
    assert question["params"]["message"] == "What context should the prompt use?"
    assert answered["resultType"] == "complete"
    assert answered["messages"] == [{"role": "user", "content": {"type": "text", "text": "Use this context: history"}}]


# -- helpers of this module --------------------------------------------------------------------


async def put_note(rest: httpx.AsyncClient, note_id: int, text: str) -> None:
    """Write a note over REST, as a person or another service would."""
    response = await rest.put(f"/notes/{note_id}", params={"text": text})
    assert response.status_code == 200, response.text


async def next_updates(updates: MemoryObjectReceiveStream[str], *, until: str) -> list[str]:
    """The URIs heard up to and including `until`, and any already heard after it: the
    updates of writes made before `until`'s are in the list if they reached the client."""
    heard = [await updates.receive()]
    while heard[-1] != until:
        heard.append(await updates.receive())
    while True:
        try:
            heard.append(updates.receive_nowait())
        except anyio.WouldBlock:
            return heard


@asynccontextmanager
async def listening_session(
    base_url: str, *, transport: httpx2.AsyncBaseTransport | None = None
) -> AsyncIterator[tuple[Client, MemoryObjectReceiveStream[str]]]:
    """A session-era SDK client whose GET stream is open (its server listens for it from
    then on), and the URIs of the `notifications/resources/updated` it hears there."""
    opened = anyio.Event()
    send, updates = anyio.create_memory_object_stream[str](UPDATES_KEPT)

    async def on_response(response: httpx2.Response) -> None:
        if response.request.method == "GET" and response.status_code == 200:
            opened.set()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            await send.send(str(message.params.uri))

    http = httpx2.AsyncClient(
        timeout=httpx2.Timeout(WAIT_S, read=None), transport=transport, event_hooks={"response": [on_response]}
    )
    session = Client(
        streamable_http_client(f"{base_url}/mcp", http_client=http), mode="legacy", message_handler=on_message
    )
    async with http, send, updates, session as client:
        await opened.wait()
        yield client, updates


class Steering(httpx2.AsyncBaseTransport):
    """Sends a client's GET stream to one process and its other requests (its POSTs, its
    DELETE) to the others in turn, as a balancer may, and remembers where each went."""

    def __init__(self, *, streams_to: str, others_to: Sequence[str]) -> None:
        self._streams_to = httpx2.URL(streams_to)
        self._others_to = itertools.cycle([httpx2.URL(base) for base in others_to])
        self._sender = httpx2.AsyncHTTPTransport()
        self.streams_went: set[str] = set()
        self.others_went: set[str] = set()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        stream = request.method == "GET"
        target = self._streams_to if stream else next(self._others_to)
        request.url = request.url.copy_with(host=target.host, port=target.port)
        (self.streams_went if stream else self.others_went).add(f"{target.scheme}://{target.host}:{target.port}")
        return await self._sender.handle_async_request(request)

    async def aclose(self) -> None:
        await self._sender.aclose()


@asynccontextmanager
async def listen_stream(
    http: httpx.AsyncClient, uris: list[str], *, request_id: int
) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
    """A raw 2026-07-28 `subscriptions/listen` for the updates of `uris`; yields its messages
    as they come."""
    message = stateless_request("subscriptions/listen", {"notifications": {"resourceSubscriptions": uris}})
    message["id"] = request_id
    async with http.stream("POST", "/mcp", json=message, headers=LISTEN_HEADERS) as stream:
        assert stream.status_code == 200
        yield messages_of(stream)


async def messages_of(stream: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    async for line in stream.aiter_lines():
        if line.startswith("data: {"):
            yield json.loads(line[len("data: ") :])
