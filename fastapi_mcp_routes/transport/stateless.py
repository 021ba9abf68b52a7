"""The stateless revision's side of the endpoint: one request per POST, no session.

A request is checked (envelope, routing headers, version), answered through the shared
dispatcher, and written as JSON or, once the call has something to say first, as SSE. Closing
the response stream cancels the call (spec 2026-07-28, basic/patterns/cancellation): the
response stream watches for the client going away (from `WATCH_AFTER_S` on: see
`response_stream`). `subscriptions/listen` holds a stream open for list-change notifications
and the updates of the resources it names, tagged with the subscription's id, woken by the
change (transport/listen.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from fastapi_mcp_routes.server.budget import AnswerBudget
from fastapi_mcp_routes.server.channel import StatelessChannel
from fastapi_mcp_routes.server.dispatch import Dispatcher
from fastapi_mcp_routes.server.envelope import META_SUBSCRIPTION_ID, status_for
from fastapi_mcp_routes.server.fanout import Watcher
from fastapi_mcp_routes.server.resources.updates import RESOURCE_UPDATED
from fastapi_mcp_routes.server.sessions.manager import uri_digest
from fastapi_mcp_routes.transport.http import BUSY_RETRY_AFTER_S, STORE_RETRY_AFTER_S
from fastapi_mcp_routes.transport.listen import Emit, ListenStream
from fastapi_mcp_routes.transport.response_stream import Header, KeepAlive, ResponseStream, SelfWritten
from fastapi_mcp_routes.transport.sse import sse_event
from fastapi_mcp_routes.transport.step_up import FORBIDDEN, StepUp
from fastapi_mcp_routes.transport.stream_slots import Slots
from fastapi_mcp_routes.wire import constants as c
from fastapi_mcp_routes.wire.errors import InsufficientScope, InvalidParams, McpError, ServerBusy, StoreUnavailable
from fastapi_mcp_routes.wire.failures import error_answer
from fastapi_mcp_routes.wire.json import dumps
from fastapi_mcp_routes.wire.jsonrpc import Request, encode_error, encode_result

SUBSCRIBE: Final = "subscriptions/listen"
TASK_STATUS: Final = "notifications/tasks"
ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"


class StatelessAnswer(SelfWritten):
    """Answers one 2026-07-28 request while its response is sent; the client's leaving cancels it."""

    def __init__(
        self,
        *,
        dispatcher: Dispatcher,
        request: Request,
        channel: StatelessChannel,
        sse: bool,
        json: bool,
        keep_alive: KeepAlive,
        step_up: StepUp,
        budget: AnswerBudget,
    ) -> None:
        super().__init__()  # the answer writes its own status and headers, JSON or SSE, once it knows which
        self._keep_alive = keep_alive
        self._dispatcher = dispatcher
        self._request = request
        self._channel = channel
        self._sse = sse
        self._json = json
        self._step_up = step_up
        self._budget = budget

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        channel = self._channel
        # The client leaving cancels the call (its context sees it), and nothing is sent.
        stream = ResponseStream(send, self._sse, self._json, self._keep_alive, receive=receive, listener=channel)
        async with stream:
            channel.emit = stream.emit if self._sse else None
            answer = await self._answer(channel, scope, stream)
            if answer is not None:
                body, status, headers = answer
                # Held against the answer budget until written: a client that reads slowly keeps it here.
                holding = self._budget.hold_written(channel.holder, body)
                try:
                    await stream.finish(body, answered_request=True, status=status, headers=headers)
                finally:
                    if holding is not None:
                        holding.release()
        if answer is not None and self.background is not None:
            await self.background()

    async def _answer(
        self, channel: StatelessChannel, scope: Scope, stream: ResponseStream
    ) -> tuple[bytes, int, tuple[Header, ...]] | None:
        """The body, its HTTP status, and the headers that go with the status."""
        request = self._request
        try:
            return encode_result(request.id, await self._dispatcher.request(request, channel)), 200, ()
        except InsufficientScope as refused:
            if stream.streaming:  # the status went out with the stream: the answer says it
                return self._step_up.in_answer(request.id, refused, scope), 200, ()
            return encode_error(request.id, refused), FORBIDDEN, self._step_up.headers(refused, scope)
        except Exception as exc:
            body = error_answer(request.id, exc)
            # An error with its own HTTP status in this revision (-32601 is 404, ...; the shared
            # store out of reach, 503; too many calls running, 429 or 503).
            if body is None:
                return None
            # A store out of reach, or too many calls running: a retry shortly after may cure it.
            if isinstance(exc, StoreUnavailable):
                return body, 503, _retry_after(STORE_RETRY_AFTER_S)
            if isinstance(exc, ServerBusy):
                return body, exc.status, _retry_after(BUSY_RETRY_AFTER_S)
            return body, status_for(exc) if isinstance(exc, McpError) else 200, ()


def _retry_after(seconds: int) -> tuple[Header, ...]:
    return ((b"retry-after", str(seconds).encode()),)


@dataclass(frozen=True, slots=True)
class ListenFilter:
    """What a `subscriptions/listen` asked for that the server honors."""

    honored: dict[str, Any]  # the acknowledgement's `notifications`
    sends: frozenset[str]  # the list-change notifications to pass on
    # Subscribed resources: a digest of the server's spelling -> the client's spelling (a digest,
    # so a stream holds each URI once: the client's, which its notifications repeat).
    resources: Mapping[str, str]
    tasks: frozenset[str] = frozenset()  # the caller's own tasks it named (`taskIds`)


async def listen_filter(
    dispatcher: Dispatcher, request: Request, channel: StatelessChannel, max_subscriptions: int, max_uri_chars: int
) -> ListenFilter:
    """The filter of a `subscriptions/listen`: the types this server has, and the resources
    that exist; -32602 for more resources than `Limits.max_subscriptions` or a malformed list,
    and the route's refusal for a resource whose guards turn the caller away."""
    wanted = request.params.get("notifications")
    wanted = wanted if isinstance(wanted, Mapping) else {}
    offered = dispatcher.capabilities()
    # The list changes the features declare, each honored while the server offers its capability.
    changes = {
        change.listen_name: change.notification
        for change in dispatcher.list_changes()
        if wanted.get(change.listen_name) is True and change.capability in offered
    }
    honored: dict[str, Any] = dict.fromkeys(changes, True)
    uris = wanted.get("resourceSubscriptions")
    resources: dict[str, str] = {}
    if uris is not None and "resources" in offered:
        if not isinstance(uris, list) or not all(
            isinstance(uri, str) and 0 < len(uri) <= max_uri_chars for uri in uris
        ):
            raise InvalidParams(
                f"Invalid params: 'resourceSubscriptions' must list URIs of at most {max_uri_chars} characters."
            )
        if len(uris) > max_subscriptions:
            raise InvalidParams(
                f"Invalid params: a stream may subscribe to {max_subscriptions} resources at most "
                "(Limits.max_subscriptions); open another for more."
            )
        listened = await dispatcher.listened.resources.listened(uris, request, channel)
        resources = {uri_digest(canonical): client for canonical, client in listened.items()}
        honored["resourceSubscriptions"] = list(resources.values())
    task_ids = wanted.get("taskIds")
    tasks: list[str] = []
    if task_ids is not None:  # the tasks extension's filter (SEP-2663, notifications/tasks)
        if not isinstance(task_ids, list) or not all(
            isinstance(task_id, str) and 0 < len(task_id) <= max_uri_chars for task_id in task_ids
        ):
            raise InvalidParams(f"Invalid params: 'taskIds' must list task ids of at most {max_uri_chars} characters.")
        if len(task_ids) > max_subscriptions:
            raise InvalidParams(
                f"Invalid params: a stream may follow {max_subscriptions} tasks at most "
                "(Limits.max_subscriptions); open another for more."
            )
        tasks = await dispatcher.listened.tasks.listened(task_ids, channel)
        honored["taskIds"] = tasks
    sends = frozenset(changes.values())
    return ListenFilter(honored, sends, resources, frozenset(tasks))


def subscription(
    dispatcher: Dispatcher, request: Request, wanted: ListenFilter, slots: Slots, keep_alive: KeepAlive
) -> Response:
    """The long-lived answer to `subscriptions/listen`, holding `slots`: an acknowledgement
    naming what will be sent, then those notifications only, each tagged with the
    subscription's id."""
    tag = {META_SUBSCRIPTION_ID: request.id}
    generation = dispatcher.listening_from()  # before the client can see the stream open
    acknowledged = anyio.Event()
    listened = dispatcher.listened
    # The stream opens, and its acknowledgement goes out, once its sources watch for their news.
    resources_watched, tasks_watched = anyio.Event(), anyio.Event()

    async def list_changes(emit: Emit) -> None:
        nonlocal generation
        params: dict[str, Any] = {"_meta": tag, "notifications": wanted.honored}
        await emit(_event({"jsonrpc": c.JSONRPC_VERSION, "method": ACKNOWLEDGED, "params": params}))
        acknowledged.set()
        if not wanted.sends:
            await anyio.sleep_forever()  # nothing to listen for here: the stream only stays open
        while True:
            generation, news = await dispatcher.changes_after(generation)
            for method in (note["method"] for note in news if note["method"] in wanted.sends):
                await emit(_event({"jsonrpc": c.JSONRPC_VERSION, "method": method, "params": {"_meta": tag}}))

    async def resource_updates(emit: Emit) -> None:
        with listened.updates.watching(Watcher(wanted.resources)) as watcher:
            resources_watched.set()
            await acknowledged.wait()  # the acknowledgement goes first (spec 2026-07-28)
            while True:
                for uri in await watcher.taken():
                    params = {"_meta": tag, "uri": wanted.resources.get(uri_digest(uri), uri)}
                    await emit(_event({"jsonrpc": c.JSONRPC_VERSION, "method": RESOURCE_UPDATED, "params": params}))

    async def task_changes(emit: Emit) -> None:
        with listened.tasks.watching(Watcher(wanted.tasks)) as watcher:
            tasks_watched.set()
            await acknowledged.wait()
            while True:
                for task in await listened.tasks.taken(watcher):
                    params = {**task, "_meta": tag}
                    await emit(_event({"jsonrpc": c.JSONRPC_VERSION, "method": TASK_STATUS, "params": params}))

    sources: list[Callable[[Emit], Awaitable[None]]] = [list_changes]
    watching: list[anyio.Event] = []
    if wanted.resources:
        sources.append(resource_updates)
        watching.append(resources_watched)
    if wanted.tasks:
        sources.append(task_changes)
        watching.append(tasks_watched)
    return ListenStream(sources, keep_alive, slots, listening=watching)


def _event(message: Mapping[str, Any]) -> bytes:
    return sse_event(dumps(message))
