"""The state that outlives a request, behind the `Store` protocol.

`MemoryStore` keeps it in one process (the default); `RedisStore` (store/redis/store.py, the `redis`
extra) shares it between every process serving the endpoint. Any object that implements
`Store` can be handed to `mcp_routes(store=...)`.

Writing a store backend
-----------------------

`Store` is one protocol per concern, implemented by one object:

- `SessionStore`: sessions, bounded per owner and in all, forgotten once idle;
- `ClaimStore`: names with at most one holder at a time, lapsing unless renewed, and names
  claimed once within a time to live, bounded in all (`claim_once`);
- `SlotStore`: bounded counts of things held open, taken in several pools at once;
- `StreamLogStore`: the events of resumable streams, bounded in events and bytes;
- `TokenLedger`: single-use tokens, each used at most once;
- `TaskStore`: tasks, kept for their time to live and saved by compare-and-set;
- `MessageBus`: publish/subscribe between requests and processes;

plus `shared` (whether every process sees the store) and `aclose`. Each method should be one
atomic step of the backend (a transaction, a script): several processes may call it at once.
Records are frozen dataclasses of plain values (`SessionRecord`, `TaskRecord`); a step the
backend cannot take now (it is unreachable) raises `StoreUnavailable`, which the endpoint
answers with 503.

Who is pushed out when a bound is reached is not the backend's to decide: `session_admission`,
`token_admission`, `task_admission` and `result_admission` (store/policy.py) say it as an
`Admission`, the same for every backend, which one routine of the backend executes for every
family (see `MemoryStore`'s `Ranks.admit`). `StoreFull` is what a session or token refused at a total
raises.

`fastapi_mcp_routes.store.testing` is the contract every store keeps, as pytest tests a
backend's own test suite runs against it (`StoreContract`).
"""

from __future__ import annotations

from fastapi_mcp_routes.store.base import (
    TASK_ENDS,
    USED,
    ClaimStore,
    Holder,
    Inbox,
    LogBounds,
    MessageBus,
    Refusal,
    ResultBounds,
    SessionBounds,
    SessionRecord,
    SessionStore,
    Shared,
    SlotStore,
    Store,
    StoreFull,
    StreamEvents,
    StreamLogStore,
    TaskBounds,
    TaskRecord,
    TaskStore,
    TokenLedger,
    Trust,
)
from fastapi_mcp_routes.store.memory import MemoryStore
from fastapi_mcp_routes.store.policy import (
    Admission,
    result_admission,
    session_admission,
    share_holders,
    shares,
    task_admission,
    token_admission,
    trust_shares,
)
from fastapi_mcp_routes.wire.errors import StoreUnavailable

__all__ = [
    "TASK_ENDS",
    "USED",
    "Admission",
    "ClaimStore",
    "Holder",
    "Inbox",
    "LogBounds",
    "MemoryStore",
    "MessageBus",
    "Refusal",
    "ResultBounds",
    "SessionBounds",
    "SessionRecord",
    "SessionStore",
    "Shared",
    "SlotStore",
    "Store",
    "StoreFull",
    "StoreUnavailable",
    "StreamEvents",
    "StreamLogStore",
    "TaskBounds",
    "TaskRecord",
    "TaskStore",
    "TokenLedger",
    "Trust",
    "result_admission",
    "session_admission",
    "share_holders",
    "shares",
    "task_admission",
    "token_admission",
    "trust_shares",
]
