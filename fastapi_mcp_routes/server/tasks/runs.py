"""Routes as tasks (2026-07-28 tasks extension, SEP-2663): a `tools/call` the client polls.

A call of a tool marked `task="optional"` or `"required"`, from a request that declares the
extension, starts its route at once in the process's own task group (not the request's), and
the request waits `Tasks.after_s` for it. What answers sooner is answered directly, and so is a
question the route asks sooner: it is an ordinary `input_required` round, so the rounds of a
call come before its task, as the extension composes them, and so does the confirmation of a
mutation. A route that runs longer, or calls `ToolContext.start_task()`, becomes a task: its
record is kept in the `Store` first, then the `CreateTaskResult` goes back, and the route runs
on whether or not the client stays. From then on:
- a question is the task's: `tasks/get` shows it (`input_required`), `tasks/update` answers
  it, in part or whole, from any process; the route waits, and is never run again;
- progress becomes the task's `statusMessage` (the latest, saved at most every half second);
  log messages have nowhere to go (the extension forbids them on a listening stream) and are
  dropped;
- `tasks/cancel` ends the task `cancelled` at once and cancels the route's scope, in whichever
  process runs it (a message on that process's `Store` topic; a message lost on the way is
  made up for when the process next renews the task's lease, and reads the task again);
- the route's result, kept up to `Tasks.max_result_bytes`, ends it `completed` (an `isError`
  result too); a protocol error ends it `failed`; its time to live ending cancels the route.

A task belongs to the caller that made it: another caller's `tasks/get` is an unknown id. It
outlives its client, not its process: the running process holds a lease in the store, renewed
while the route runs, and a `tasks/get` that finds the lease lapsed ends the task `failed`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import anyio
from anyio.abc import TaskGroup, TaskStatus

from fastapi_mcp_routes.options import Tasks
from fastapi_mcp_routes.server.call import Emit, InputRequest, Ran, ToolCall, declares, lacking, refused_for_scope
from fastapi_mcp_routes.server.channel import ClientChannel
from fastapi_mcp_routes.server.deployment import Deployment
from fastapi_mcp_routes.server.tasks.records import (
    TaskBook,
    created,
    ended,
    now_ms,
)
from fastapi_mcp_routes.store.base import Holder, ResultBounds, TaskBounds, TaskRecord
from fastapi_mcp_routes.telemetry.current import task_ended, task_run, task_started
from fastapi_mcp_routes.tools.recipe import Tool
from fastapi_mcp_routes.wire.constants import TASKS_EXTENSION
from fastapi_mcp_routes.wire.errors import (
    CallCancelled,
    McpError,
    MissingClientCapability,
    StoreUnavailable,
    ToolContextError,
)
from fastapi_mcp_routes.wire.failures import error_result
from fastapi_mcp_routes.wire.json import dumps
from fastapi_mcp_routes.wire.jsonrpc import truncate

logger = logging.getLogger("fastapi_mcp_routes")

# Progress is saved as the task's statusMessage at most this often: a route may report
# progress thousands of times, and each save is a store round trip. What comes sooner is saved
# once the interval has passed (only the latest), so the status never stays behind the route.
PROGRESS_SAVE_S: Final = 0.5
# A waiting question reads its task again this often, so an answer whose wake-up message was
# lost (a store reconnecting) is still taken.
RECHECK_S: Final = 2.0
# Running tasks a full bound looks at for ones whose process stopped, oldest first.
REAPED_AT_ONCE: Final = 16
_TASK_ID_BYTES: Final = 18  # 144 bits, unguessable (SEP-2663, Security Considerations)
# What another process's `tasks/cancel` or `tasks/update` sends the process running the route.
CANCEL: Final = b"c"
ANSWERED: Final = b"a"
_REQUIRED: Final[dict[str, Any]] = {"extensions": {TASKS_EXTENSION: {}}}
_STOPPED: Final = "The server stopped before the task finished; start it again."
_LOST: Final = "The process running this task stopped before it finished; start it again."

Work = Callable[[], Awaitable[Ran]]
OnEnd = Callable[[Ran], Awaitable[None]]


def needs_tasks(what: str) -> MissingClientCapability:
    return MissingClientCapability(
        f"Missing required client capability: {what} needs the {TASKS_EXTENSION} extension.",
        {"requiredCapabilities": _REQUIRED},
    )


class _Run:
    """One call of a tool that may be a task, while its route runs in this process."""

    def __init__(self, call: ToolCall, channel: ClientChannel, tool: Tool, ttl_s: float) -> None:
        self.call = call
        self.channel = channel  # the request's own channel
        self.tool = tool
        self.ttl_s = ttl_s
        self.ended: Ran | BaseException | None = None  # how the route ended, once it has
        self.done = anyio.Event()
        self.decided = anyio.Event()  # the route ended, or asked to become a task
        self.detached = False  # the call is a task, or is being made one
        self.settled = anyio.Event()  # whether it was kept as a task is known
        self.task_id: str | None = None  # once kept
        self.wake = anyio.Event()  # an answer to its question came
        self.asked: dict[str, int] = {}  # how often the route asked each key, in its task
        self.progress_saved = 0.0  # when progress was last saved as the task's status message
        self.progress_text: str | None = None  # the latest progress, not saved yet
        self.progress_due = False  # a save of progress_text is scheduled

    def wire_key(self, key: str) -> str:
        """The key a question goes out under: the route's own the first time, numbered after."""
        times = self.asked[key] = self.asked.get(key, 0) + 1
        return key if times == 1 else f"{key}#{times}"


class TaskChannel:
    """The channel of a call that may become a task: the request's until then, the task's after."""

    def __init__(self, run: _Run, runs: TaskRuns) -> None:
        inner = run.channel
        self._run = run
        self._runs = runs
        self._inner = inner
        self.caller = inner.caller
        self.principal = inner.principal

    @property
    def emit(self) -> Emit | None:
        return self._runs.progress_sink(self._run) if self._run.detached else self._inner.emit

    @property
    def session_id(self) -> str | None:
        return None

    @property
    def client_info(self) -> Mapping[str, Any] | None:
        return self._inner.client_info

    @property
    def client_capabilities(self) -> Mapping[str, Any]:
        return self._inner.client_capabilities

    @property
    def owner(self) -> bytes:
        return self._inner.owner

    @property
    def holder(self) -> Holder:
        return self._inner.holder

    def wants_log(self, level: str) -> bool:
        return not self._run.detached and self._inner.wants_log(level)

    def hung_up(self) -> anyio.Event | None:
        # A task's client polls for its result: its request's connection says nothing of it.
        return None if self._run.detached else self._inner.hung_up()

    def cannot_ask(self, request: InputRequest) -> str | None:
        return self._inner.cannot_ask(request)

    async def ask(
        self, call: ToolCall, requests: Mapping[str, InputRequest], carry: Mapping[str, Any]
    ) -> dict[str, Mapping[str, Any]]:
        if self._run.detached:
            await self._run.settled.wait()
        if self._run.task_id is None:  # a round of the call, before any task
            return await self._inner.ask(call, requests, carry)
        return await self._runs.ask(self._run, requests)

    async def start_task(self, ttl_s: float | None) -> bool:
        run = self._run
        if ttl_s is not None and not run.detached:
            run.ttl_s = self._runs.clamp_ttl(ttl_s)
        run.decided.set()
        await run.settled.wait()
        return run.task_id is not None


class TaskRuns:
    """Starts calls as tasks and runs their routes in this process; tells whether the process
    running a task still does, and reaches its route (server/tasks/methods.py answers the
    extension's methods with these)."""

    def __init__(self, *, deployment: Deployment, options: Tasks) -> None:
        self.deployment = deployment
        self.store = deployment.store
        results = ResultBounds(options.max_result_bytes_per_caller, options.max_kept_result_bytes)
        self.book = TaskBook(deployment.store, results)
        self._options = options
        self._bounds = TaskBounds(options.max_per_caller, options.max_tasks)
        self._lease_s = options.lease_s
        # At least a millisecond: the extension wants a positive pollIntervalMs.
        self.poll_ms = max(1, round(options.poll_interval_s * 1000))
        self._me = deployment.secret.instance.hex()
        self._runs: dict[str, _Run] = {}  # tasks whose route runs here, by id
        self._group: TaskGroup | None = None

    # -- the process's side: where routes of tasks run ----------------------------------------

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run for the app's lifetime (its lifespan): routes of tasks run in here, and, with a
        shared store, cancellations and answers from other processes reach them. Started with
        `TaskGroup.start`, it is ready for tasks once that returns, before the first request."""
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                if self.store.shared:
                    group.start_soon(self._hear_other_processes)
                    group.start_soon(self._renew_leases)
                task_status.started()
                await anyio.sleep_forever()
            finally:
                self._group = None

    def clamp_ttl(self, ttl_s: float) -> float:
        return min(max(ttl_s, 1.0), self._options.max_ttl_s)

    async def start(self, call: ToolCall, channel: ClientChannel, tool: Tool, work: Work, on_end: OnEnd) -> Ran:
        """Run a call that may be a task: its answer if it comes within `Tasks.after_s` (or a
        question, or a refusal), else the `CreateTaskResult` of the task it became."""
        group = self._group
        if group is None:  # the app's lifespan is not running: nowhere for a task to outlive its request
            return await work()
        run = _Run(call, channel, tool, self._options.ttl_s)
        call.channel = TaskChannel(run, self)
        group.start_soon(self._drive, run, work, on_end)
        try:
            with anyio.move_on_after(self._options.after_s):
                await run.decided.wait()
            if run.ended is None and call.cancel_scope.cancel_called:
                # The call is already ending (a question for the next round, a capability the
                # client lacks, the client gone): however long its route takes to unwind, how it
                # ends is the request's answer, never a task's result.
                await run.done.wait()
            if run.ended is None or (tool.task == "required" and _own_result(run.ended)):
                became = await self._detach(run)
                if became is not None:
                    return became
                if tool.task == "required" and run.ended is None:
                    call.cancel_scope.cancel()
                    return Ran(error_result(self._full_text()), "refused")
                await run.done.wait()  # an optional task without room answers directly
        except BaseException:
            if not run.detached:
                call.cancel_scope.cancel()  # the request went: so does a call that is not a task
            raise
        if isinstance(run.ended, BaseException):
            raise run.ended
        assert run.ended is not None
        return run.ended

    async def _detach(self, run: _Run) -> Ran | None:
        """Make the call a task: its record kept first, then its `CreateTaskResult`; `None`
        when the store has no room for it."""
        run.detached = True  # before any await: a question asked from now on is the task's
        channel, call = run.channel, run.call
        now = now_ms()
        record = TaskRecord(
            id=secrets.token_urlsafe(_TASK_ID_BYTES),
            # Counted against the holder (credentials the endpoint cannot check are the client's
            # address, or made-up keys would each hold max_per_caller), seen by the credentials.
            owner=self.binding(channel.holder.owner),
            caller=self.binding(channel.owner),
            trust=channel.holder.trust,
            tool=run.tool.name,
            runner=self._me,
            status="working",
            created_ms=now,
            updated_ms=now,
            ttl_ms=max(1, round(run.ttl_s * 1000)),
        )
        # A required task that answered at once is kept, then ended with its result.
        finished = run.ended if isinstance(run.ended, Ran) else None
        try:
            refused = await self.store.put_task(record, self._bounds)
            if refused is not None and await self.reap(record.owner if refused == "owner" else None):
                refused = await self.store.put_task(record, self._bounds)
        except BaseException:
            run.detached = False
            run.settled.set()
            raise
        if refused is not None:
            run.detached = False
            run.settled.set()
            return None
        # Kept: the call is the task's from here on, before anything else can fail or wait.
        run.task_id = record.id
        task_started(record.id)
        if finished is not None:
            try:
                record = await self.book.keep_result(record.id, *self._kept_result(finished)) or record
            finally:
                run.settled.set()
            return Ran(created(record, self.poll_ms), "task")
        if not record.ended:
            self._runs[record.id] = run
            # The request no longer owns the call: the client going away cancels nothing, and
            # the call's running slot is given back when its route ends (`_drive`).
            channel.call_ended(call.request_id)
            call.outlives_request = True
            call.cancel_scope.deadline = anyio.current_time() + run.ttl_s
            if call.progress_token is None:
                call.progress_token = record.id  # progress is the task's status message
        run.settled.set()
        if not record.ended and self.store.shared:
            try:
                await self.store.claim(_lease(record.id), self._me, self._lease_s)
            except StoreUnavailable as down:
                # The task runs all the same; its lease is taken with the others' renewals.
                logger.warning("the lease of task %s could not be taken (%s)", truncate(record.id), down.reason)
        return Ran(created(record, self.poll_ms), "task")

    async def _drive(self, run: _Run, work: Work, on_end: OnEnd) -> None:
        """Run the route to its end, and keep that end in the task once the call is one; a
        task's running slot is given back when its route has returned (a sync route's thread
        too: anyio waits for the thread before a cancellation takes effect)."""
        try:
            with task_run(run.tool.name):  # a span of its own, linked to the call's (telemetry/)
                await self._drive_route(run, work, on_end)
        finally:
            call = run.call
            if call.outlives_request and call.slot is not None:
                call.slot.give_back()

    async def _drive_route(self, run: _Run, work: Work, on_end: OnEnd) -> None:
        outcome: Ran | BaseException
        try:
            outcome = await work()
        except anyio.get_cancelled_exc_class():
            # Only the app's shutdown cancels the task group a route runs in.
            if run.detached:
                with anyio.CancelScope(shield=True), anyio.move_on_after(self._lease_s / 2):
                    await self._end(run, McpError(_STOPPED))
            raise
        except (McpError, CallCancelled) as error:
            outcome = error
        except Exception as exc:  # the pipeline turns the route's failures into results
            logger.exception("task of tool %s failed", run.tool.name)
            outcome = exc
        run.ended = outcome
        run.done.set()
        run.decided.set()
        if not run.detached:
            return
        await run.settled.wait()
        if run.task_id is None or run.task_id not in self._runs:
            return
        await self._end(run, outcome)
        if isinstance(outcome, Ran):
            await on_end(outcome)
        else:  # the task's end in the audit too: cancelled, or a protocol error the call met
            await on_end(Ran({}, "cancelled" if isinstance(outcome, CallCancelled) else "refused"))

    async def _end(self, run: _Run, outcome: Ran | BaseException) -> None:
        task_id = run.task_id
        if task_id is None:
            return
        try:
            if isinstance(outcome, Ran):
                task_ended("completed")
                await self.book.keep_result(task_id, *self._kept_result(outcome))
            elif isinstance(outcome, CallCancelled):
                task_ended("cancelled")
                await self.book.change(task_id, lambda record: ended(record, "cancelled", None, None))
            else:
                error = outcome if isinstance(outcome, McpError) else McpError("Internal error.")
                failure = error.to_error()
                task_ended("failed")
                await self.book.change(task_id, lambda record: ended(record, "failed", failure, error.message))
        except StoreUnavailable:
            logger.warning("the end of task %s could not be kept: the store is out of reach", truncate(task_id))
        finally:
            self._runs.pop(task_id, None)
            if self.store.shared:
                # A store out of reach (a failover) lets the lease lapse on its own; raised, it
                # would end the task group every task of this process runs in.
                with (
                    anyio.CancelScope(shield=True),
                    anyio.move_on_after(self._lease_s / 2),
                    contextlib.suppress(StoreUnavailable),
                ):
                    await self.store.release(_lease(task_id), self._me)

    def _kept_result(self, ran: Ran) -> tuple[Mapping[str, Any], int]:
        """The result a task keeps, and its bytes as JSON (what it weighs among kept results)."""
        size = len(dumps(ran.result))
        if size <= self._options.max_result_bytes:
            return ran.result, size
        refusal = error_result(
            f"The tool's result ({size:,} bytes) is larger than a task keeps "
            f"({self._options.max_result_bytes:,} bytes, Tasks.max_result_bytes)."
        )
        return refusal, len(dumps(refusal))

    def _full_text(self) -> str:
        return (
            "This tool runs as a task, and this caller (or the server) holds as many running tasks as "
            f"it may ({self._options.max_per_caller} per caller, {self._options.max_tasks} in all: "
            "Tasks.max_per_caller, Tasks.max_tasks; callers without verified credentials hold at most three "
            "quarters of those in all, anonymous ones half, and callers with credentials leave a tenth to "
            "anonymous ones). Wait for one to finish, or cancel one."
        )

    # -- what a task's route does while it runs --------------------------------------------------

    async def ask(self, run: _Run, requests: Mapping[str, InputRequest]) -> dict[str, Mapping[str, Any]]:
        """Questions of a task: kept as its `inputRequests` until `tasks/update` answers them all."""
        task_id = run.task_id
        assert task_id is not None
        for request in requests.values():
            if not declares(run.channel.client_capabilities, request):
                await run.call.stop(lacking(request))
        # The extension wants a key never reused over a task's life, so a late answer to an
        # earlier round cannot answer this one: a key the route asks again is sent numbered.
        keys = {key: run.wire_key(key) for key in requests}
        questions = {keys[key]: request.as_wire() for key, request in requests.items()}

        def asking(record: TaskRecord) -> TaskRecord:
            return dataclasses.replace(
                record, status="input_required", questions=questions, answers=None, updated_ms=now_ms()
            )

        if await self.book.change(task_id, asking) is None:
            raise ToolContextError("the task ended before its question could be asked")
        while True:
            wake = run.wake = anyio.Event()
            record = await self.book.find(task_id)
            if record is None or record.ended:
                raise ToolContextError("the task ended while it waited for the client's answer")
            answers = record.answers or {}
            if all(wire in answers for wire in questions):
                await self.book.change(task_id, lambda kept: _taken(kept, questions))
                return {key: answers[wire] for key, wire in keys.items()}
            with anyio.move_on_after(RECHECK_S):
                await wake.wait()

    def progress_sink(self, run: _Run) -> Emit:
        async def sink(message: Mapping[str, Any]) -> None:
            params = message.get("params")
            if message.get("method") != "notifications/progress" or not isinstance(params, Mapping):
                return  # log messages of a task have nowhere to go
            await run.settled.wait()
            task_id, group = run.task_id, self._group
            if task_id is None:
                return
            run.progress_text = _progress_text(params)
            if run.progress_due:
                return  # the save already scheduled takes this text
            wait = run.progress_saved + PROGRESS_SAVE_S - anyio.current_time()
            if wait <= 0:
                await self._save_progress(run, task_id)
            elif group is not None:
                run.progress_due = True
                group.start_soon(self._save_progress_later, run, task_id, wait)

        return sink

    async def _save_progress(self, run: _Run, task_id: str) -> None:
        text, run.progress_text = run.progress_text, None
        run.progress_saved = anyio.current_time()
        if text is not None:  # None: what came since was saved already; an ended task is left as it ended
            await self.book.change(
                task_id, lambda record: dataclasses.replace(record, message=text, updated_ms=now_ms())
            )

    async def _save_progress_later(self, run: _Run, task_id: str, wait_s: float) -> None:
        """Save the latest progress once the interval has passed: a route that reports twice
        in a row, then works on quietly, shows the second."""
        await anyio.sleep(wait_s)
        run.progress_due = False
        try:
            await self._save_progress(run, task_id)
        except StoreUnavailable:
            logger.warning("the progress of task %s could not be kept: the store is out of reach", truncate(task_id))

    async def reap(self, owner: bytes | None) -> bool:
        """End `failed` the oldest running tasks (the owner's, or anyone's) whose process
        stopped, so that they no longer hold a bound they would hold until their time to live
        ended; whether any was."""
        reaped = False
        for task_id in await self.store.running_tasks(owner, REAPED_AT_ONCE):
            record = await self.book.find(task_id)
            if record is not None and not record.ended and not await self.alive(record):
                reaped = await self.lost(record) is not None or reaped
        return reaped

    async def lost(self, record: TaskRecord) -> TaskRecord | None:
        lost = McpError(_LOST).to_error()
        return await self.book.change(record.id, lambda kept: ended(kept, "failed", lost, _LOST))

    async def alive(self, record: TaskRecord) -> bool:
        """Whether the process running the task still does."""
        if record.runner == self._me:
            return record.id in self._runs
        if not self.store.shared:
            return True  # another process's memory: nothing here can tell
        if now_ms() - record.created_ms < self._lease_s * 1000:
            return True  # kept just now: its process may not have taken the lease yet
        if not await self.store.claim(_lease(record.id), f"check:{self._me}", self._lease_s):
            return True
        await self.store.release(_lease(record.id), f"check:{self._me}")
        return False

    async def signal(self, runner: str, verb: bytes, task_id: str) -> None:
        """Reach the route of a task where it runs: here directly, elsewhere through the store."""
        if runner == self._me:
            self._act(verb, task_id)
        elif self.store.shared:
            await self.store.publish(_inbox(runner), verb + task_id.encode())

    def _act(self, verb: bytes, task_id: str) -> None:
        run = self._runs.get(task_id)
        if run is None:
            return
        if verb == CANCEL:
            run.call.cancel_scope.cancel()
        else:
            run.wake.set()

    async def _hear_other_processes(self) -> None:
        """Take cancellations and answers for this process's tasks from other processes; while
        the store cannot be reached, listen again now and then (a waiting question also reads
        its task again every `RECHECK_S`)."""
        warned = False
        while True:
            try:
                async with self.store.subscribe(_inbox(self._me)) as inbox:
                    warned = False
                    async for message in inbox:
                        self._act(message[:1], message[1:].decode(errors="replace"))
            except StoreUnavailable as down:
                if not warned:  # once an outage, not every try
                    warned = True
                    logger.warning("tasks cannot hear other processes (%s); listening again shortly", down.reason)
            await anyio.sleep(RECHECK_S)

    async def _renew_leases(self) -> None:
        """Renew the lease of each task whose route runs here, and end the route of a task
        that ended elsewhere: a cancellation whose message was lost (the store reconnecting,
        this process not yet listening) still reaches its route, one renewal later."""
        while True:
            await anyio.sleep(self._lease_s / 3)
            for task_id in list(self._runs):
                try:
                    await self.store.claim(_lease(task_id), self._me, self._lease_s)
                    record = await self.book.find(task_id)
                except StoreUnavailable:
                    logger.warning("the lease of task %s could not be renewed: the store is out of reach", task_id)
                    continue
                if record is None or record.ended:
                    self._act(CANCEL, task_id)

    def binding(self, owner: bytes) -> bytes:
        return self.deployment.secret.mac("task binding", owner)


def _own_result(ended: Ran | BaseException) -> bool:
    """Whether a call ended with its route's result (not a round's question, a plan to
    confirm, or a refusal): a required task's quick answer is still kept as a task. A refusal
    for a missing scope is the request's, answered with the step-up challenge."""
    return (
        isinstance(ended, Ran)
        and ended.outcome in ("ok", "error", "crashed", "invalid_arguments")
        and not refused_for_scope(ended)
    )


def _taken(record: TaskRecord, questions: Mapping[str, Any]) -> TaskRecord:
    rest = {key: value for key, value in (record.answers or {}).items() if key not in questions}
    return dataclasses.replace(record, answers=rest or None, updated_ms=now_ms())


def _progress_text(params: Mapping[str, Any]) -> str:
    message = params.get("message")
    if isinstance(message, str) and message:
        return message
    total = params.get("total")
    progress = params.get("progress")
    return f"{progress}/{total}" if total is not None else f"{progress}"


def _lease(task_id: str) -> str:
    return f"task-lease/{task_id}"


def _inbox(runner: str) -> str:
    return f"tasks/{runner}"
