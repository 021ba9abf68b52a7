"""Task records as the wire shows them, and every change to one, made by compare-and-set.

A task's record lives in the `Store` (store/base.py, `TaskRecord`), where any process can read
and change it: the process running the route (its status, its questions, its end) and the
process a client's `tasks/update` or `tasks/cancel` reached. Each change is read, changed,
saved against what was read, and tried again when another process changed it in between, so
two changes at once are both kept, and an ended task never changes again (SEP-2663: terminal
statuses are final). Every saved change is announced on the `Store` topic `TASK_TOPIC`, for
`subscriptions/listen` streams that name the task (`notifications/tasks`).

A result is kept within `Tasks.max_result_bytes_per_caller` and `Tasks.max_kept_result_bytes`
(`TaskBook.keep_result`, `Store.end_task`). Room for it is made by letting go of finished
results, not by dropping their tasks: a client polling a task whose result went learns why
(an `isError` result naming the bound), where an unknown id would read as an expiry or a
mistyped id; the record left weighs a few hundred bytes and still counts in `Tasks.max_tasks`.
The task stays `completed`, as a terminal status never changes.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from fastapi_mcp_routes.store.base import Refusal, ResultBounds, Store, TaskRecord, Trust
from fastapi_mcp_routes.wire.failures import error_result

# Where a saved change of any task is announced (its id), for listening streams.
TASK_TOPIC: Final = "tasks/status"
# Compare-and-set rounds before a change gives up: each lost round means another change was
# saved, and a task has only a handful of writers (its route, its client's update and cancel).
_ROUNDS: Final = 16

Change = Callable[[TaskRecord], TaskRecord | None]

_OWNER_BOUND: Final = "Tasks.max_result_bytes_per_caller"
# The total and, for each trust, the share of it its callers count in.
_TOTAL_BOUND: Final = {
    Trust.ANONYMOUS: "Tasks.max_kept_result_bytes, or the share of it anonymous callers may hold",
    Trust.CLAIMED: "Tasks.max_kept_result_bytes, or the share of it callers without verified credentials may hold",
    Trust.VERIFIED: "Tasks.max_kept_result_bytes, less the tenth kept for anonymous callers",
}


def _bound(refusal: Refusal | str, trust: Trust) -> str:
    return _OWNER_BOUND if refusal == "owner" else _TOTAL_BOUND[trust]


def let_go_text(record: TaskRecord) -> str:
    """What a task whose result was let go answers instead of it."""
    whose = "its caller's newer results" if record.released == "owner" else "newer results"
    return (
        f"This task's result was let go to make room for {whose}: the server keeps task results "
        f"up to a bound ({_bound(record.released or 'total', record.trust)}). Run the tool again."
    )


def no_room_text(refusal: Refusal, size: int, trust: Trust) -> str:
    """What a task whose result found no room ends with instead."""
    return (
        f"The tool's result ({size:,} bytes) was not kept: no room could be made for it among the "
        f"task results the server keeps ({_bound(refusal, trust)}). Run the tool again later."
    )


def now_ms() -> int:
    return int(time.time() * 1000)


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def detailed(record: TaskRecord, poll_interval_ms: int) -> dict[str, Any]:
    """The task as `tasks/get` and `notifications/tasks` show it: its status, and what goes
    with it (the questions while `input_required`, the result once `completed`, the JSON-RPC
    error once `failed`)."""
    task: dict[str, Any] = {
        "taskId": record.id,
        "status": record.status,
        "createdAt": _iso(record.created_ms),
        "lastUpdatedAt": _iso(record.updated_ms),
        "ttlMs": record.ttl_ms,
    }
    if not record.ended:
        task["pollIntervalMs"] = poll_interval_ms
    if record.message:
        task["statusMessage"] = record.message
    if record.status == "input_required":
        task["inputRequests"] = dict(record.questions or {})
    elif record.status == "completed":
        task["result"] = error_result(let_go_text(record)) if record.released else dict(record.outcome or {})
    elif record.status == "failed":
        task["error"] = dict(record.outcome or {})
    return task


def created(record: TaskRecord, poll_interval_ms: int) -> dict[str, Any]:
    """The `CreateTaskResult` a `tools/call` answers with once the task is kept."""
    task = detailed(record, poll_interval_ms)
    task.pop("inputRequests", None)  # a question is asked by tasks/get, never in the creation
    task.pop("result", None)
    task.pop("error", None)
    return {"resultType": "task", **task}


def ended(record: TaskRecord, status: str, outcome: Mapping[str, Any] | None, message: str | None) -> TaskRecord:
    """The record once the task ended with `status`."""
    return dataclasses.replace(
        record, status=status, outcome=outcome, message=message, questions=None, answers=None, updated_ms=now_ms()
    )


class TaskBook:
    """Reads and changes task records in the `Store`, and announces each change."""

    def __init__(self, store: Store, results: ResultBounds) -> None:
        self.store = store
        self.results = results

    async def find(self, task_id: str) -> TaskRecord | None:
        return await self.store.find_task(task_id)

    async def change(self, task_id: str, change: Change) -> TaskRecord | None:
        """Apply `change` to the task's record until it is saved; `change` returns `None` to
        leave the record as it is. Returns the record saved, or `None` when nothing was (the
        task is gone, ended, or `change` declined)."""
        for _ in range(_ROUNDS):
            record = await self.store.find_task(task_id)
            if record is None or record.ended:
                return None
            changed = change(record)
            if changed is None:
                return None
            if await self.store.save_task(changed, record):
                await self.store.publish(TASK_TOPIC, task_id.encode())
                return changed
        return None

    async def keep_result(self, task_id: str, result: Mapping[str, Any], size: int) -> TaskRecord | None:
        """End the task `completed` with `result` (`size` bytes as JSON), room made for it among
        the kept results; where none can be, with an `isError` result naming the bound. Returns
        the record saved, or `None` (the task is gone or ended)."""
        for _ in range(_ROUNDS):
            record = await self.store.find_task(task_id)
            if record is None or record.ended:
                return None
            changed = ended(record, "completed", result, None)
            saved = await self.store.end_task(changed, record, size, self.results)
            if saved is True:
                await self.store.publish(TASK_TOPIC, task_id.encode())
                return changed
            if saved is not False:  # no room: what stands in weighs nothing worth bounding
                result, size = error_result(no_room_text(saved, size, record.trust)), 0
        return None
