"""Who makes room for whom at a bound: the eviction policy of every store, decided here once.

Sessions, single-use tokens and tasks are each bounded per owner and in all. When a new record
would pass a bound, records are pushed out by the same rules in every backend:

- per owner: the owner's own oldest record (in the order they were made) goes first;
- in all: the oldest of the lowest trust goes first (`Trust`), never one trusted more than the
  newcomer; with nothing left that it may push out, the newcomer is refused;
- callers trusted less may fill only their share of a total (`shares`, `trust_shares`), so a
  flood of anonymous callers leaves room for the callers the server trusts more.

What differs from one family to another is data, an `Admission` made by `session_admission`,
`token_admission` or `task_admission`. A backend only executes it, with one routine for every
family: `MemoryStore` with `Ranks.admit` (store/memory.py), `RedisStore` with the Lua function
`admit` (store/redis/scripts.py), which gets the admission as script arguments
(`Admission.terms`). What "oldest" means in a total is the order a backend ranks the family's
records in: a session by its last use, a token by its keeping, a task by its ending.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from fastapi_mcp_routes.store.base import Holder, SessionBounds, SessionRecord, TaskBounds, TaskRecord, Trust

# Which bound refused a newcomer: its owner's, or a total (or a share of one).
Refusal = Literal["owner", "total"]

# The share of a total that callers of each trust, and those trusted less, may fill.
_SHARE: Final = {Trust.CLAIMED: (3, 4), Trust.ANONYMOUS: (1, 2)}
_UNVERIFIED: Final = "/unverified"
_ANONYMOUS: Final = "/anonymous"


def holder_of(identity: bytes, address: str, principal: object) -> Holder:
    """Whom what a caller holds counts against: a principal the endpoint verified, else the
    client's address. Credentials the endpoint cannot check (no `auth=`) do not widen what one
    address may hold, or made-up API keys would; they still rank above no credential at all."""
    if principal is not None:
        return Holder(identity, Trust.VERIFIED)
    return Holder(address_key(address), Trust.CLAIMED if identity else Trust.ANONYMOUS)


def address_key(address: str) -> bytes:
    """An anonymous caller's key: its network address."""
    return b"address\x00" + address.encode()


def trust_shares(total: int, trust: Trust) -> list[tuple[Trust, int]]:
    """The bounds a holder of `trust` is counted against, for a total of `total`: each pair is
    the highest trust whose records count, and how many such records may be held, for a holder
    of `trust` to be given one more. Anonymous callers may hold half of the total, they and
    callers with unchecked credentials three quarters."""
    pools = [(Trust.VERIFIED, total)]
    for level in (Trust.CLAIMED, Trust.ANONYMOUS):
        if trust <= level:
            numerator, denominator = _SHARE[level]
            pools.append((level, max(1, total * numerator // denominator)))
    return pools


def shares(pool: str, total: int, trust: Trust) -> list[tuple[str, int]]:
    """`trust_shares` as the slot pools `(name, limit)` a holder of `trust` takes a slot in for a
    total bound: the total, and the shares of it that callers trusted less may fill."""
    names = {Trust.VERIFIED: pool, Trust.CLAIMED: pool + _UNVERIFIED, Trust.ANONYMOUS: pool + _ANONYMOUS}
    return [(names[level], limit) for level, limit in trust_shares(total, trust)]


def share_holders(pool: str) -> str | None:
    """Who a pool of `shares` is the share of (for a refusal's message); `None` for the total."""
    if pool.endswith(_UNVERIFIED):
        return "callers without verified credentials"
    if pool.endswith(_ANONYMOUS):
        return "anonymous callers"
    return None


@dataclass(frozen=True, slots=True)
class Admission:
    """How one new record is let in under its family's bounds, for a backend to execute.

    First the owner's bound: while the owner holds `per_owner` records, its oldest goes (with
    `finished_only`, its oldest finished one; with none, the newcomer is refused: `"owner"`).
    Then each of `shares` in turn, `(highest, limit)`: while `limit` records of trust up to
    `highest` are kept, the family's lowest-ranked record goes, the oldest of the lowest trust,
    never one trusted more than `trust` (with none, refused: `"total"`). Without `until_room`,
    at most one record goes per full bound."""

    per_owner: int
    shares: tuple[tuple[Trust, int], ...]  # the total first, then the shares of it
    trust: Trust  # the newcomer's: a record trusted more is never pushed out for it
    finished_only: bool  # only finished records may go (a running task never does)
    until_room: bool

    def terms(self) -> tuple[int, ...]:
        """The admission as integers, in the order the Lua `admit` reads them."""
        pairs = (int(value) for share in self.shares for value in share)
        flags = (int(self.finished_only), int(self.until_room))
        return (self.per_owner, int(self.trust), *flags, len(self.shares), *pairs)


def session_admission(record: SessionRecord, bounds: SessionBounds) -> Admission:
    """A new session pushes out the owner's oldest past `max_per_owner`, then, past
    `max_sessions`, the least recently used session of the lowest trust."""
    total = ((Trust.VERIFIED, bounds.max_sessions),)
    return Admission(bounds.max_per_owner, total, record.trust, finished_only=False, until_room=True)


def token_admission(holder: Holder, bounds: tuple[int, int]) -> Admission:
    """A new token (`bounds` = per owner, in all) pushes out the owner's oldest, then the
    oldest kept token of the lowest trust."""
    per_owner, total = bounds
    return Admission(per_owner, ((Trust.VERIFIED, total),), holder.trust, finished_only=False, until_room=True)


def task_admission(record: TaskRecord, bounds: TaskBounds) -> Admission:
    """A new task pushes out only finished tasks: the owner's oldest, then the one of the lowest
    trust that finished first; callers trusted less fill only their share of `max_tasks`."""
    return Admission(
        bounds.max_per_owner,
        tuple(trust_shares(bounds.max_tasks, record.trust)),
        record.trust,
        finished_only=True,
        until_room=False,
    )
