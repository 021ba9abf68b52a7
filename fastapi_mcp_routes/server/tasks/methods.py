"""The tasks extension's methods (2026-07-28, SEP-2663): `tasks/get`, `tasks/update`,
`tasks/cancel`, and `notifications/tasks` for a `subscriptions/listen` stream that names tasks.

They answer for tasks running in any process: the record is read and changed in the `Store`
(server/tasks/records.py), and a cancellation or an answer is sent on to the process running the
route (`TaskRuns.signal`, server/tasks/runs.py). Every method first asks whether the request declared
the extension (-32021 otherwise, before any task is looked up), then whether the task is the
caller's: an unknown id, another caller's task and an expired one are the same -32602.

Task changes reach the listening streams the way resource updates do: one task per process
reads the Store's `TASK_TOPIC` (`serve`) and hands each changed id to the streams that follow
that task (a `Fanout`, server/fanout.py). A stream keeps one pending notice per task and reads
the task when it sends it, so it sends the latest status, however many changes came meanwhile.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, Final, NoReturn

import anyio
from anyio.abc import TaskStatus

from fastapi_mcp_routes.server.channel import ClientChannel, Result
from fastapi_mcp_routes.server.fanout import Fanout, Watcher
from fastapi_mcp_routes.server.tasks.records import TASK_TOPIC, detailed, ended, now_ms
from fastapi_mcp_routes.server.tasks.runs import ANSWERED, CANCEL, RECHECK_S, TaskRuns, needs_tasks
from fastapi_mcp_routes.store.base import TaskRecord
from fastapi_mcp_routes.wire.errors import InvalidParams, StoreUnavailable
from fastapi_mcp_routes.wire.jsonrpc import Request, truncate

logger = logging.getLogger("fastapi_mcp_routes")

# Task changes the process's one reader of `TASK_TOPIC` may have waiting: it never awaits but
# its inbox, so only what is published between two of its turns waits.
INBOX_SIZE: Final = 4096


class TaskMethods:
    """Answers the extension's methods, for tasks whose routes `TaskRuns` runs in some process."""

    def __init__(self, runs: TaskRuns) -> None:
        self._runs = runs
        self._fanout = Fanout()

    # -- notifications/tasks on a subscriptions/listen stream ------------------------------------

    async def listened(self, task_ids: list[str], channel: ClientChannel) -> list[str]:
        """The ids a `subscriptions/listen` may hear of: the caller's own tasks (others are
        left out of the acknowledgement, as unknown ids are)."""
        if not channel.tasks_declared:
            raise needs_tasks("a subscription to tasks")
        owner = self._runs.binding(channel.owner)
        kept = []
        for task_id in dict.fromkeys(task_ids):
            record = await self._runs.book.find(task_id)
            if record is not None and record.seen_by == owner:
                kept.append(task_id)
        return kept

    def watching(self, watcher: Watcher) -> AbstractContextManager[Watcher]:
        """Hand `watcher` the changes of the task ids it watches while the context is open."""
        return self._fanout.watching(watcher)

    async def taken(self, watcher: Watcher) -> list[dict[str, Any]]:
        """The tasks that changed since the watcher's last turn, as `tasks/get` shows them now,
        once one did (a task gone meanwhile is left out)."""
        tasks = []
        for task_id in await watcher.taken():
            record = await self._runs.book.find(task_id)
            if record is not None:
                tasks.append(detailed(record, self._runs.poll_ms))
        return tasks

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> NoReturn:
        """Read the task changes for this process's streams, for the app's lifetime (started
        once it listens, or once it cannot for now); while the store cannot be reached, listen
        again every `RECHECK_S`."""
        started = False
        while True:
            try:
                async with self._runs.store.subscribe(TASK_TOPIC, capacity=INBOX_SIZE) as changes:
                    if not started:
                        started = True
                        task_status.started()
                    async for raw in changes:
                        if self._fanout:
                            task_id = raw.decode(errors="replace")
                            self._fanout.notify(task_id, task_id)
            except StoreUnavailable as down:
                logger.info("task changes cannot be heard now (%s); listening again shortly", down.reason)
            if not started:
                started = True
                task_status.started()
            await anyio.sleep(RECHECK_S)

    # -- tasks/get, tasks/update, tasks/cancel ---------------------------------------------------

    async def get(self, request: Request, channel: ClientChannel) -> Result:
        record = await self._owned(request, channel)
        if not record.ended and not await self._runs.alive(record):
            record = await self._runs.lost(record) or await self._owned(request, channel)
        return detailed(record, self._runs.poll_ms)

    async def update(self, request: Request, channel: ClientChannel) -> Result:
        record = await self._owned(request, channel)
        responses = request.params.get("inputResponses")
        if not isinstance(responses, Mapping):
            raise InvalidParams("Invalid params: 'inputResponses' must be an object.")
        # Unknown keys, answers to questions no longer asked, and values that are not answers are
        # ignored, as the extension asks; what answers a question is taken at once, so the next
        # tasks/get no longer shows it.
        if await self._runs.book.change(record.id, lambda kept: _answered(kept, responses)) is not None:
            await self._runs.signal(record.runner, ANSWERED, record.id)
        return {}

    async def cancel(self, request: Request, channel: ClientChannel) -> Result:
        record = await self._owned(request, channel)
        cancelled = await self._runs.book.change(record.id, lambda kept: ended(kept, "cancelled", None, None))
        if cancelled is not None:
            await self._runs.signal(record.runner, CANCEL, record.id)
        return {}  # the same acknowledgement for a task that had already ended

    async def _owned(self, request: Request, channel: ClientChannel) -> TaskRecord:
        """The caller's task the request names; an unknown id, another caller's task and an
        expired one are all the same -32602."""
        if not channel.tasks_declared:
            raise needs_tasks(request.method)
        task_id = request.params.get("taskId")
        if not isinstance(task_id, str):
            raise InvalidParams("Invalid params: 'taskId' must be a string.")
        record = await self._runs.book.find(task_id)
        if record is None or record.seen_by != self._runs.binding(channel.owner):
            hint = ""
            if self._runs.deployment.state_per_process:
                hint = f" ({self._runs.deployment.needs_store('a task reaching another process')})"
            raise InvalidParams(f"Unknown task: {truncate(task_id)!r}{hint}.")
        return record


def _answered(record: TaskRecord, responses: Mapping[str, Any]) -> TaskRecord | None:
    questions = record.questions or {}
    taken = {key: value for key, value in responses.items() if key in questions and isinstance(value, Mapping)}
    if record.status != "input_required" or not taken:
        return None
    rest = {key: value for key, value in questions.items() if key not in taken}
    return dataclasses.replace(
        record,
        questions=rest or None,
        answers={**(record.answers or {}), **taken},
        status="input_required" if rest else "working",
        updated_ms=now_ms(),
    )
