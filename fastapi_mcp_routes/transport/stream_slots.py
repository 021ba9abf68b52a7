"""Bounds on the long-lived streams callers hold open: GET streams, resumes after
`Last-Event-ID`, and 2026-07-28 `subscriptions/listen` streams.

An idle stream costs little CPU (it waits to be woken), but it holds a socket, a task group and
buffers for as long as its client keeps it. So each open stream takes a slot in the Store's
pools (`Store.take_slots`), all or none: one of its caller's (`Limits.max_streams_per_caller`),
one of everyone's (`Limits.max_streams`) and, for a resume, one of its session's
(`Limits.max_resumes_per_session`). A stream renews its slots while it lives and gives them
back when it ends; the slots of a process that died lapse after `SLOT_TTL_RENEWALS` missed
renewals.

Past a caller's or a session's bound, the refusal is 429; past the total, 503; both with
Retry-After and a message naming the bound. The caller is a verified principal, else its
address (`holder_of`), named in the pool only by a keyed hash: the Store never holds a
credential. Of the total, callers the server trusts less hold only their share (`shares`), so
an anonymous flood leaves streams for callers with credentials.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Final

from fastapi_mcp_routes.options import Limits
from fastapi_mcp_routes.server.sealing.secret import Secret
from fastapi_mcp_routes.store.base import Holder, SlotStore, Trust
from fastapi_mcp_routes.store.policy import share_holders, shares
from fastapi_mcp_routes.transport.http import RETRY_AFTER_S
from fastapi_mcp_routes.wire.errors import HttpError, InvalidRequest
from fastapi_mcp_routes.wire.jsonrpc import RequestId

ALL_STREAMS: Final = "streams/all"
# A slot outlives two missed renewals (a stalled loop), not a dead process.
SLOT_TTL_RENEWALS: Final = 3


@dataclass(frozen=True, slots=True)
class _Pool:
    name: str
    limit: int
    status: int
    message: str


class StreamSlots:
    """Takes the slots of each new long-lived stream, or refuses it."""

    def __init__(self, store: SlotStore, limits: Limits, secret: Secret) -> None:
        self._store = store
        self._limits = limits
        # Processes sharing a Store share the secret too, or each would count a caller apart.
        self._secret = secret

    async def take(
        self, holder: Holder, renew_s: float, *, session_id: str | None = None, request_id: RequestId | None = None
    ) -> Slots:
        """Slots for one more stream of `holder` (for a resume, of `session_id` too), renewed
        every `renew_s`; raises the refusal (carrying `request_id`) when a bound is reached."""
        pools = [self._caller_pool(holder.owner), *self._all_pools(holder.trust)]
        if session_id is not None:
            pools.insert(0, self._session_pool(session_id))
        stream = secrets.token_urlsafe(16)
        ttl_s = SLOT_TTL_RENEWALS * renew_s
        limits = tuple((pool.name, pool.limit) for pool in pools)
        full = await self._store.take_slots(limits, stream, ttl_s)
        if full is not None:
            pool = next(pool for pool in pools if pool.name == full)
            retry = {"retry-after": str(RETRY_AFTER_S)}
            raise HttpError(pool.status, InvalidRequest(pool.message), retry, request_id=request_id)
        return Slots(self._store, limits, stream, ttl_s, renew_s)

    def _caller_pool(self, owner: bytes) -> _Pool:
        limit = self._limits.max_streams_per_caller
        name = "streams/caller/" + self._secret.mac("stream slots", owner).hex()
        message = (
            f"Too Many Requests: this caller already holds {limit} streams open, as many as it may "
            "(Limits.max_streams_per_caller); close one, or try again later."
        )
        return _Pool(name, limit, 429, message)

    def _session_pool(self, session_id: str) -> _Pool:
        limit = self._limits.max_resumes_per_session
        message = (
            f"Too Many Requests: this session is already resuming {limit} streams, as many as it may "
            "at once (Limits.max_resumes_per_session); try again later."
        )
        return _Pool(f"streams/resumes/{session_id}", limit, 429, message)

    def _all_pools(self, trust: Trust) -> list[_Pool]:
        pools = []
        for name, limit in shares(ALL_STREAMS, self._limits.max_streams, trust):
            holders = share_holders(name)
            whose = f" for {holders}" if holders else ""
            message = (
                f"Service Unavailable: the server already holds {limit} streams open{whose}, as many "
                "as it may (Limits.max_streams); try again later."
            )
            pools.append(_Pool(name, limit, 503, message))
        return pools


class Slots:
    """The slots one open stream holds: a `Lease` (all a subscription holds)."""

    __slots__ = ("_holder", "_pools", "_store", "_ttl_s", "renew_s")

    def __init__(
        self, store: SlotStore, pools: tuple[tuple[str, int], ...], holder: str, ttl_s: float, renew_s: float
    ) -> None:
        self._store = store
        self._pools = pools
        self._holder = holder
        self._ttl_s = ttl_s
        self.renew_s = renew_s

    async def renew(self) -> bool:
        """`False` once the slots lapsed (the loop stalled) and others took them."""
        return await self._store.take_slots(self._pools, self._holder, self._ttl_s) is None

    async def release(self) -> None:
        await self._store.free_slots([name for name, _ in self._pools], self._holder)
