"""Who makes room for whom at a bound: the eviction policy of every store, decided here once.

Sessions, single-use tokens and tasks are each bounded per owner and in all. When a new record
would pass a bound, records are pushed out by the same rules in every backend:

- per owner: the owner's own oldest record (in the order they were made) goes first;
- in all: the oldest record of the most crowded trust (the most held for its share, the lower
  trust on a tie) goes first, never one trusted more than the newcomer; with nothing left that
  it may push out, the newcomer is refused;
- callers trusted less may fill only their share of a total (`trust_shares`), so a flood of
  anonymous callers leaves room for the callers the server trusts more;
- callers with credentials may fill all of a total but a floor kept for anonymous callers
  (`trust_bounds`), so no flood of credentials, real or not, locks anonymous callers out.

Only a credential the endpoint can check ranks above anonymous (`holder_of`): a principal of
`auth=`, or credentials `Limits.verify_credentials` accepts. Anything else a caller sends is
free to make up, so it weighs what no credential weighs.

Kept task results are bounded the same way in bytes: each record weighs its size
(`result_admission`), and what goes is a finished task's result, let go (the task stays, saying
so), never a running task.

What differs from one family to another is data, an `Admission` made by `session_admission`,
`token_admission`, `task_admission` or `result_admission`. A backend only executes it, with one routine for every
family: `MemoryStore` with `Ranks.admit` (store/memory.py), `RedisStore` with the Lua function
`admit` (store/redis/scripts.py), which gets the admission as script arguments
(`Admission.terms`). What "oldest" means in a total is the order a backend ranks the family's
records in: a session by its last use, a token by its keeping, a task by its ending.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from fastapi_mcp_routes.store.base import (
    Holder,
    ResultBounds,
    SessionBounds,
    SessionRecord,
    TaskBounds,
    TaskRecord,
    Trust,
)

# Records of trust `lowest` to `highest` that may be kept, at most `limit` (of their weight).
Bound = tuple[Trust, Trust, int]

# The share of a total that callers of each trust, and those trusted less, may fill.
_SHARE: Final = {Trust.CLAIMED: (3, 4), Trust.ANONYMOUS: (1, 2)}
# The part of a total kept for anonymous callers: a tenth, so a deployment where every caller
# signs in loses little, and anonymous callers always find room.
_FLOOR: Final = (1, 10)
_UNVERIFIED: Final = "/unverified"
_ANONYMOUS: Final = "/anonymous"
_CREDENTIALED: Final = "/credentialed"
_ACCOUNT: Final = b"account\x00"


def holder_of(identity: bytes, address: str, principal: object, account: bytes | None = None) -> Holder:
    """Whom what a caller holds counts against: a principal the endpoint verified; else the
    account `Limits.verify_credentials` found for its credentials; else the client's address.
    Credentials nobody checked rank as no credential at all: anyone can make them up."""
    if principal is not None:
        return Holder(identity, Trust.VERIFIED)
    if account is not None:
        return Holder(_ACCOUNT + account, Trust.CLAIMED)
    return Holder(address_key(address), Trust.ANONYMOUS)


def address_key(address: str) -> bytes:
    """An anonymous caller's key: its network address."""
    return b"address\x00" + address.encode()


def trust_shares(total: int, trust: Trust) -> list[tuple[Trust, int]]:
    """The caps on the less trusted a holder of `trust` is counted against, for a total of
    `total`: each pair is the highest trust whose records count, and how many such records may
    be held, for a holder of `trust` to be given one more. Anonymous callers may hold half of
    the total, they and callers with checked credentials three quarters. `trust_bounds` adds
    the floor kept for anonymous callers."""
    pools = [(Trust.VERIFIED, total)]
    for level in (Trust.CLAIMED, Trust.ANONYMOUS):
        if trust <= level:
            numerator, denominator = _SHARE[level]
            pools.append((level, max(1, total * numerator // denominator)))
    return pools


def credentialed_share(total: int) -> int:
    """How many of `total` callers with credentials (every trust above anonymous) may hold
    together: all but the floor kept for anonymous callers."""
    numerator, denominator = _FLOOR
    return total - total * numerator // denominator


def trust_bounds(total: int, trust: Trust) -> list[Bound]:
    """Every bound a holder of `trust` is counted against for a total of `total`, as
    `(lowest, highest, limit)`: `trust_shares`, from anonymous up; and for a holder with
    credentials, each of them again without anonymous callers, less the floor kept for them,
    so that no trust above anonymous can fill a share anonymous callers count in."""
    capped = trust_shares(total, trust)
    bounds = [(Trust.ANONYMOUS, highest, limit) for highest, limit in capped]
    floor = total - credentialed_share(total)
    if trust > Trust.ANONYMOUS and floor:
        bounds += [(Trust.CLAIMED, highest, limit - floor) for highest, limit in capped]
    return bounds


def shares(pool: str, total: int, trust: Trust) -> list[tuple[str, int]]:
    """`trust_bounds` as the slot pools `(name, limit)` a holder of `trust` takes a slot in for
    a total bound: the total, the shares of it that callers trusted less may fill, and the
    parts of those callers with credentials may fill."""
    names = {
        (Trust.ANONYMOUS, Trust.VERIFIED): pool,
        (Trust.ANONYMOUS, Trust.CLAIMED): pool + _UNVERIFIED,
        (Trust.ANONYMOUS, Trust.ANONYMOUS): pool + _ANONYMOUS,
        (Trust.CLAIMED, Trust.VERIFIED): pool + _CREDENTIALED,
        (Trust.CLAIMED, Trust.CLAIMED): pool + _UNVERIFIED + _CREDENTIALED,
    }
    return [(names[lowest, highest], limit) for lowest, highest, limit in trust_bounds(total, trust)]


# Who may fill the bound counting each range of trust (for a refusal's message).
_BOUND_HOLDERS: Final = {
    (Trust.ANONYMOUS, Trust.CLAIMED): "callers without verified credentials",
    (Trust.ANONYMOUS, Trust.ANONYMOUS): "anonymous callers",
    (Trust.CLAIMED, Trust.VERIFIED): "callers with credentials",
    (Trust.CLAIMED, Trust.CLAIMED): "callers with credentials but no verified principal",
}


def share_holders(pool: str) -> str | None:
    """Who a pool of `shares` is the share of (for a refusal's message); `None` for the total."""
    if pool.endswith(_UNVERIFIED + _CREDENTIALED):
        return _BOUND_HOLDERS[Trust.CLAIMED, Trust.CLAIMED]
    if pool.endswith(_CREDENTIALED):
        return _BOUND_HOLDERS[Trust.CLAIMED, Trust.VERIFIED]
    if pool.endswith(_UNVERIFIED):
        return _BOUND_HOLDERS[Trust.ANONYMOUS, Trust.CLAIMED]
    if pool.endswith(_ANONYMOUS):
        return _BOUND_HOLDERS[Trust.ANONYMOUS, Trust.ANONYMOUS]
    return None


def bound_holders(bound: Bound) -> str | None:
    """Who may fill `bound` (for a refusal's message); `None` for the total."""
    lowest, highest, _ = bound
    return _BOUND_HOLDERS.get((lowest, highest))


class Tally:
    """What one process holds of a total, by trust, against `trust_bounds`: the running calls,
    the bytes of answers. Process-local, touched only from the event loop, so plain integers."""

    __slots__ = ("_bounds", "_by_trust", "_clear", "_held")

    def __init__(self, total: int) -> None:
        # The narrowest first, so a refusal names the share the holder's kind filled.
        self._bounds = {trust: tuple(reversed(trust_bounds(total, trust))) for trust in Trust}
        # Held in all up to this, no bound of a trust can be passed: the usual case, one comparison.
        self._clear = {trust: min(limit for _, _, limit in self._bounds[trust]) for trust in Trust}
        self._by_trust = [0] * len(Trust)
        self._held = 0

    def take(self, trust: Trust, amount: int) -> Bound | None:
        """Count `amount` more for a holder of `trust`; the bound it would pass instead, if any."""
        if self._held + amount > self._clear[trust]:
            by_trust = self._by_trust
            for bound in self._bounds[trust]:
                lowest, highest, limit = bound
                if sum(by_trust[lowest : highest + 1]) + amount > limit:
                    return bound
        self._by_trust[trust] += amount
        self._held += amount
        return None

    def count(self, trust: Trust, amount: int) -> None:
        """Count `amount` more for a holder of `trust` whatever the bounds: something already
        held (an answer built), which later `take`s must see."""
        self._by_trust[trust] += amount
        self._held += amount

    def give(self, trust: Trust, amount: int) -> None:
        """Count `amount` less for a holder of `trust`."""
        self._by_trust[trust] -= amount
        self._held -= amount

    @property
    def held(self) -> int:
        return self._held


@dataclass(frozen=True, slots=True)
class Admission:
    """How one new record is let in under its family's bounds, for a backend to execute.

    Records weigh 1 each, or, for a family bounded in bytes, their size: the newcomer weighs
    `weight`. First the owner's bound: while what the owner holds and the newcomer would pass
    `per_owner`, its oldest record goes (with `finished_only`, its oldest finished one; with
    none, the newcomer is refused: `"owner"`). Then each of `bounds` in turn, `(lowest,
    highest, limit)`: while what records of trust `lowest` to `highest` weigh and the newcomer
    would pass `limit`, a record of that range goes, never one trusted more than `trust` (with
    none, refused: `"total"`). Of the trusts it may push out, the one holding the most for its
    quota goes first (`quotas`, by trust; the lower trust on a tie), its oldest record first.
    Without `until_room`, at most one record goes per full bound."""

    per_owner: int
    bounds: tuple[Bound, ...]  # the total first, then the shares of it
    quotas: tuple[int, ...]  # by trust: the most its records may fill, what crowding is measured by
    trust: Trust  # the newcomer's: a record trusted more is never pushed out for it
    finished_only: bool  # only finished records may go (a running task never does)
    until_room: bool
    weight: int = 1  # the newcomer's: 1 for a record counted, its bytes for a result

    def terms(self) -> tuple[int, ...]:
        """The admission as integers, in the order the Lua `admit` reads them."""
        triples = (int(value) for bound in self.bounds for value in bound)
        flags = (int(self.finished_only), int(self.until_room), self.weight)
        return (self.per_owner, int(self.trust), *flags, *self.quotas, len(self.bounds), *triples)


def crowded_first(counts: Mapping[Trust, int], quotas: Sequence[int], candidates: Iterable[Trust]) -> Trust | None:
    """Of `candidates`, the trust whose records fill the most of its quota (the lower trust on
    a tie): whose oldest record a full bound pushes out first. In integers, as Lua compares."""
    chosen: Trust | None = None
    for trust in candidates:
        if chosen is None or counts[trust] * quotas[chosen] > counts[chosen] * quotas[trust]:
            chosen = trust
    return chosen


def _bounds(total: int, trust: Trust, capped: bool) -> tuple[Bound, ...]:
    """The bounds of a total for a holder of `trust`: with `capped`, every `trust_bounds`;
    else the total and the part of it callers with credentials may fill (a family whose
    records are pushed out lowest trust first needs no cap on the less trusted)."""
    if capped:
        return tuple(trust_bounds(total, trust))
    return tuple(bound for bound in trust_bounds(total, trust) if bound[1] == Trust.VERIFIED)


def _quotas(total: int, capped: bool) -> tuple[int, ...]:
    """By trust, the most its records may fill of a total: the tightest bound counting them."""
    every = {bound for trust in Trust for bound in _bounds(total, trust, capped)}
    return tuple(min(limit for lowest, highest, limit in every if lowest <= trust <= highest) for trust in Trust)


def _admission(per_owner: int, total: int, trust: Trust, *, capped: bool, finished_only: bool) -> Admission:
    bounds = _bounds(total, trust, capped)
    return Admission(per_owner, bounds, _quotas(total, capped), trust, finished_only, until_room=not finished_only)


def session_admission(record: SessionRecord, bounds: SessionBounds) -> Admission:
    """A new session pushes out the owner's oldest past `max_per_owner`, then, past
    `max_sessions` (or the part of it callers with credentials may fill), the least recently
    used session of the most crowded trust."""
    return _admission(bounds.max_per_owner, bounds.max_sessions, record.trust, capped=False, finished_only=False)


def token_admission(holder: Holder, bounds: tuple[int, int]) -> Admission:
    """A new token (`bounds` = per owner, in all) pushes out the owner's oldest, then the
    oldest kept token of the most crowded trust."""
    per_owner, total = bounds
    return _admission(per_owner, total, holder.trust, capped=False, finished_only=False)


def task_admission(record: TaskRecord, bounds: TaskBounds) -> Admission:
    """A new task pushes out only finished tasks: the owner's oldest, then the one of the most
    crowded trust that finished first; callers trusted less fill only their share of
    `max_tasks`, callers with credentials all but the floor kept for anonymous callers."""
    return _admission(bounds.max_per_owner, bounds.max_tasks, record.trust, capped=True, finished_only=True)


def result_admission(record: TaskRecord, size: int, bounds: ResultBounds) -> Admission:
    """A task's result of `size` bytes is kept by letting go of finished results (every kept
    result is one): the owner's oldest past `max_per_owner`, then, past `max_total` or the
    share of it the owner's trust may fill, the oldest of the most crowded trust; callers
    trusted less fill only their share, callers with credentials all but the floor kept for
    anonymous callers, as for tasks."""
    bounds_of = _bounds(bounds.max_total, record.trust, capped=True)
    quotas = _quotas(bounds.max_total, capped=True)
    return Admission(bounds.max_per_owner, bounds_of, quotas, record.trust, False, until_room=True, weight=size)
