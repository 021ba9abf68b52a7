"""Routes as tasks (the 2026-07-28 tasks extension) on a real uvicorn server, with the official
SDK client: a small client extension of the test's own claims the `resultType: "task"` answer of
`tools/call` and follows the task through `tasks/get`, `tasks/update` and `tasks/cancel`, sent
through the SDK's session (which names the task in the `Mcp-Name` header).

The server runs in this process (a thread of its own), so what its routes observe is read
here directly; a route that must wait for the test waits on an event the test sets."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Annotated, Any, Final, Literal

import anyio
import pytest
from fastapi import Depends, FastAPI, HTTPException, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from mcp import MCPError, types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientRequestContext, ClientSession
from pydantic import TypeAdapter

from fastapi_mcp_routes import InputRequest, Tasks, ToolCalls, ToolContext, mcp_routes, mcp_tool
from tests.support.jsonrpc import SESSION_VERSION
from tests.support.sdk import mcp_client
from tests.support.servers import serve
from tests.support.stateless import STATELESS_VERSION
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.anyio

TASKS: Final = "io.modelcontextprotocol/tasks"
POLL_S: Final = 0.05  # the app's Tasks.poll_interval_s: the pollIntervalMs the client follows
TOKENS: Final = {"alice-token": "alice", "bob-token": "bob"}
ALICE: Final = {"Authorization": "Bearer alice-token"}
BOB: Final = {"Authorization": "Bearer bob-token"}
CONFIRM_SCHEMA: Final = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}
NAME_SCHEMA: Final = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
_INPUT_REQUEST: Final = TypeAdapter[types.InputRequest](types.InputRequest)
_ANY_RESULT: Final = TypeAdapter(dict[str, Any])


# -- the client side: the tasks extension, as a client implements it ---------------------------


class CreateTaskResult(types.Result):
    """What a `tools/call` answers once the call became a task."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str


class TaskRequest(types.Request[dict[str, Any], str]):
    """`tasks/get`, `tasks/update` or `tasks/cancel`: the SDK mirrors `taskId` into `Mcp-Name`."""

    name_param = "taskId"


async def task_request(session: ClientSession, method: str, task_id: str, **params: Any) -> dict[str, Any]:
    """One of the extension's methods about `task_id`, sent through the SDK's session."""
    request = TaskRequest(method=method, params={"taskId": task_id, **params})
    return await session.send_request(request, _ANY_RESULT)


class TasksExtension(ClientExtension):
    """Declares the tasks extension and resolves a task into the call's result: polls
    `tasks/get` (bounded by `WAIT_S`), answers each question through the client's own callbacks
    (one question per `tasks/update`, as a user answers them one after the other), raises the
    JSON-RPC error of a failed task, and returns the result of a completed one."""

    identifier = TASKS

    def __init__(self, on_status: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.on_status = on_status
        self.seen: list[dict[str, Any]] = []  # every tasks/get result, in order
        self.updates: list[dict[str, Any]] = []  # the inputResponses of every tasks/update

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self.resolve)]

    async def resolve(self, created: CreateTaskResult, ctx: ClaimContext) -> types.CallToolResult:
        session, task_id = ctx.session, created.task_id
        with anyio.fail_after(WAIT_S):
            while True:
                task = await task_request(session, "tasks/get", task_id)
                self.seen.append(task)
                if self.on_status is not None:
                    self.on_status(task)
                status = task["status"]
                if status == "completed":
                    return types.CallToolResult.model_validate(task["result"])
                if status == "failed":
                    raise MCPError(**task["error"])
                assert status in ("working", "input_required"), task
                if status == "working":
                    await anyio.sleep(task["pollIntervalMs"] / 1000)
                    continue
                key, question = next(iter(task["inputRequests"].items()))
                answer = await self.answer(session, key, question)
                await task_request(session, "tasks/update", task_id, inputResponses={key: answer})
                self.updates.append({key: answer})

    @staticmethod
    async def answer(session: ClientSession, key: str, question: Mapping[str, Any]) -> dict[str, Any]:
        """A question of the task, answered as the SDK answers an `input_required` round."""
        request = _INPUT_REQUEST.validate_python(question, by_name=False)
        context = ClientRequestContext(session=session, request_id=key)
        response = await session.dispatch_input_request(context, request)
        if isinstance(response, types.ErrorData):
            raise MCPError(response.code, response.message, response.data)
        answer: dict[str, Any] = response.model_dump(by_alias=True, mode="json", exclude_none=True)
        return answer


# -- the server side: an app with routes that may be tasks --------------------------------------


class Observed:
    """What the routes saw, read by the tests across the server's thread."""

    def __init__(self) -> None:
        self.gate = threading.Event()  # holds the `progress` route until the test saw its status
        self.endless_started = threading.Event()
        self.endless_ended = threading.Event()  # set by the `endless` route's `finally`
        self.endless_cancelled = threading.Event()

    def reset(self) -> None:
        for event in vars(self).values():
            event.clear()


observed = Observed()
bearer = HTTPBearer()
Context = Annotated[ToolContext, Depends()]


def caller(credentials: Annotated[HTTPAuthorizationCredentials, Security(bearer)]) -> str:
    """The app's own check of its callers' bearer tokens."""
    if credentials.credentials not in TOKENS:
        raise HTTPException(401, "Unknown token.")
    return TOKENS[credentials.credentials]


Caller = Annotated[str, Depends(caller)]


def tasks_app() -> FastAPI:
    """Routes that may be tasks; each needs a bearer token (the app's own dependency), so each
    token is a caller of its own, and tasks belong to one."""
    app = FastAPI(title="Tasks")
    tasks = Tasks(poll_interval_s=POLL_S)
    app.include_router(mcp_routes(app, tasks=tasks, tool_calls=ToolCalls(require_confirmation_for_mutations=False)))

    @mcp_tool(task="optional")
    @app.get("/progress")
    async def progress(ctx: Context, who: Caller) -> dict[str, bool]:
        await ctx.start_task()
        await ctx.report_progress(1, 3, "started")
        await ctx.report_progress(2, 3, "halfway there")  # sooner than a task saves progress again
        opened = await anyio.to_thread.run_sync(observed.gate.wait, WAIT_S)
        return {"opened": opened}

    @mcp_tool(task="optional")
    @app.post("/delete")
    async def delete(ctx: Context, who: Caller, filename: str) -> dict[str, Any]:
        await ctx.start_task()
        answer = await ctx.elicit(f"Delete {filename!r}?", CONFIRM_SCHEMA, key="confirm")
        return {"action": answer.action, "content": answer.content}

    @mcp_tool(task="optional")
    @app.post("/survey")
    async def survey(ctx: Context, who: Caller) -> dict[str, Any]:
        await ctx.start_task()
        asked = {
            "name": InputRequest.elicitation("Your name?", NAME_SCHEMA),
            "confirm": InputRequest.elicitation("Shall I go on?", CONFIRM_SCHEMA),
        }
        answers = await ctx.ask(asked)
        return {key: answer.get("content") for key, answer in answers.items()}

    @mcp_tool(task="optional")
    @app.get("/endless")
    async def endless(who: Caller) -> dict[str, bool]:
        observed.endless_started.set()
        try:
            await anyio.sleep_forever()  # a task once it runs longer than Tasks.after_s
        except anyio.get_cancelled_exc_class():
            observed.endless_cancelled.set()
            raise
        finally:
            observed.endless_ended.set()
        return {"finished": True}  # pragma: no cover - never reached

    @mcp_tool(task="optional")
    @app.get("/roots")
    async def roots(ctx: Context, who: Caller) -> dict[str, int]:
        await ctx.start_task()
        return {"roots": len(await ctx.list_roots())}  # a client that declared no roots: -32021

    @mcp_tool(task="optional")
    @app.post("/conflict")
    async def conflict(ctx: Context, who: Caller) -> None:
        await ctx.start_task()
        raise HTTPException(409, "The slot is already taken.")

    @mcp_tool(task="optional")
    @app.get("/whoami")
    async def whoami(ctx: Context, who: Caller) -> dict[str, Any]:
        return {"caller": who, "task": await ctx.start_task()}

    @mcp_tool(task="required")
    @app.get("/report")
    async def report(who: Caller) -> dict[str, str]:
        return {"report": f"for {who}"}

    return app


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve(tasks_app()) as url:
        yield url


@pytest.fixture(autouse=True)
def fresh_observations() -> None:
    observed.reset()


async def accept(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """The user accepts every question: "Ada" for a name, yes to anything else."""
    return types.ElicitResult(
        action="accept", content={"name": "Ada"} if params.message == "Your name?" else {"confirm": True}
    )


def statuses(seen: list[dict[str, Any]]) -> list[str]:
    return [task["status"] for task in seen]


# -- the tests ----------------------------------------------------------------------------------


async def test_a_task_shows_its_latest_progress_message_as_status_message_then_completes(base_url: str) -> None:
    def open_once_seen(task: dict[str, Any]) -> None:
        if task.get("statusMessage") == "halfway there":
            observed.gate.set()

    extension = TasksExtension(on_status=open_once_seen)
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, ALICE, mode="auto", extensions=[extension]) as client:
            assert client.protocol_version == STATELESS_VERSION
            result = await client.call_tool("progress", {})
    assert result.structured_content == {"opened": True}
    working = [task for task in extension.seen if task["status"] == "working"]
    assert working[-1]["statusMessage"] == "halfway there"
    assert statuses(extension.seen)[-1] == "completed"
    assert extension.seen[-1]["result"]["structuredContent"] == {"opened": True}


async def test_a_task_question_is_answered_by_tasks_update_and_the_result_carries_the_answer(base_url: str) -> None:
    extension = TasksExtension()
    with anyio.fail_after(WAIT_S):
        async with mcp_client(
            base_url, ALICE, mode="auto", extensions=[extension], elicitation_callback=accept
        ) as client:
            result = await client.call_tool("delete", {"filename": "notes.txt"})
    assert result.structured_content == {"action": "accept", "content": {"confirm": True}}
    [asked] = [task for task in extension.seen if task["status"] == "input_required"]
    assert asked["inputRequests"]["confirm"]["params"]["message"] == "Delete 'notes.txt'?"
    assert extension.updates == [{"confirm": {"action": "accept", "content": {"confirm": True}}}]


async def test_two_questions_answered_in_two_partial_updates_each_leave_the_task(base_url: str) -> None:
    extension = TasksExtension()
    with anyio.fail_after(WAIT_S):
        async with mcp_client(
            base_url, ALICE, mode="auto", extensions=[extension], elicitation_callback=accept
        ) as client:
            result = await client.call_tool("survey", {})
    assert result.structured_content == {"name": {"name": "Ada"}, "confirm": {"confirm": True}}
    assert [list(update) for update in extension.updates] == [["name"], ["confirm"]]
    outstanding = [list(task["inputRequests"]) for task in extension.seen if task["status"] == "input_required"]
    assert outstanding == [["name", "confirm"], ["confirm"]]  # the partial update answered `name` only


async def test_tasks_cancel_ends_a_running_task_cancelled_and_cancels_its_route(base_url: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, ALICE, mode="auto", extensions=[TasksExtension()]) as client:
            created = await client.session.call_tool("endless", {}, allow_claimed=True)
            assert isinstance(created, CreateTaskResult)
            assert created.status == "working"
            assert observed.endless_started.is_set()
            assert not observed.endless_ended.is_set()
            cancelled = await task_request(client.session, "tasks/cancel", created.task_id)
            task = await task_request(client.session, "tasks/get", created.task_id)
            ended = await anyio.to_thread.run_sync(observed.endless_ended.wait, WAIT_S)
            again = await task_request(client.session, "tasks/cancel", created.task_id)
    assert cancelled["resultType"] == "complete"
    assert "status" not in cancelled
    assert task["status"] == "cancelled"
    assert "result" not in task
    assert "error" not in task
    assert ended
    assert observed.endless_cancelled.is_set()
    assert again["resultType"] == "complete"  # cancelling an ended task is acknowledged alike


async def test_a_protocol_error_fails_the_task_and_an_http_exception_completes_it_as_an_error(base_url: str) -> None:
    extension = TasksExtension()
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, ALICE, mode="auto", extensions=[extension]) as client:
            with pytest.raises(MCPError) as failed:
                await client.call_tool("roots", {})
            failure = extension.seen[-1]
            conflict = await client.call_tool("conflict", {})
    assert failed.value.code == -32021
    assert failed.value.data == {"requiredCapabilities": {"roots": {}}}
    assert failure["status"] == "failed"
    assert failure["error"]["code"] == -32021
    assert failure["error"]["message"]
    assert "result" not in failure
    assert conflict.is_error
    [text] = conflict.content
    assert isinstance(text, types.TextContent)
    assert "The slot is already taken." in text.text
    assert extension.seen[-1]["status"] == "completed"
    assert extension.seen[-1]["result"]["isError"] is True


async def test_another_callers_task_is_an_unknown_id(base_url: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with (
            mcp_client(base_url, ALICE, mode="auto", extensions=[TasksExtension()]) as alice,
            mcp_client(base_url, BOB, mode="auto", extensions=[TasksExtension()]) as bob,
        ):
            created = await alice.session.call_tool("endless", {}, allow_claimed=True)
            assert isinstance(created, CreateTaskResult)
            refusals = []
            for method, params in (("tasks/get", {}), ("tasks/update", {"inputResponses": {}}), ("tasks/cancel", {})):
                with pytest.raises(MCPError) as refused:
                    await task_request(bob.session, method, created.task_id, **params)
                refusals.append(refused.value)
            still = await task_request(alice.session, "tasks/get", created.task_id)
            await task_request(alice.session, "tasks/cancel", created.task_id)
            assert await anyio.to_thread.run_sync(observed.endless_ended.wait, WAIT_S)
    assert [refusal.code for refusal in refusals] == [-32602] * 3
    assert all("Unknown task" in refusal.message for refusal in refusals)
    assert still["status"] == "working"  # bob's cancel did not reach alice's task


async def test_without_the_extension_an_optional_task_answers_directly_and_a_required_one_is_refused(
    base_url: str,
) -> None:
    extension = TasksExtension()
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, ALICE, mode="auto") as plain:
            direct = await plain.call_tool("whoami", {})
            with pytest.raises(MCPError) as refused:
                await plain.call_tool("report", {})
        async with mcp_client(base_url, ALICE, mode="auto", extensions=[extension]) as capable:
            as_task = await capable.call_tool("report", {})
    assert direct.structured_content == {"caller": "alice", "task": False}
    assert refused.value.code == -32021
    assert refused.value.data == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
    assert as_task.structured_content == {"report": "for alice"}
    assert statuses(extension.seen) == ["completed"]  # a required task kept even when it answers at once


async def test_a_session_era_client_gets_task_tools_answered_directly(base_url: str) -> None:
    extension = TasksExtension()
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, ALICE, mode="legacy", extensions=[extension]) as client:
            assert client.protocol_version == SESSION_VERSION
            optional = await client.call_tool("whoami", {})
            required = await client.call_tool("report", {})
    assert optional.structured_content == {"caller": "alice", "task": False}
    assert required.structured_content == {"report": "for alice"}
    assert extension.seen == []
