"""The bytes this process holds for callers' answers, bounded per caller and in all.

A route's response captured for a tool call, the frames a streaming tool's window keeps and a
batch's answers waiting to be written are each bounded per request (`Limits.max_response_bytes`,
`Limits.max_batch_answer_bytes`); many requests at once would multiply that. Each draws its
bytes from one `AnswerBudget` of the process, against its caller (the channel's `holder`) and
against the total, where callers trusted less may fill only their share, with a floor kept for
anonymous callers (`trust_bounds`, as sessions, tasks and streams count). A request past a bound
is refused; what already runs keeps what it holds.

The budget is process-local and touched only from the event loop, so taking and giving back is
integer arithmetic on a dict, with no lock and no store round trip: cheap enough for every call.
"""

from __future__ import annotations

from typing import Final

from fastapi_mcp_routes.options import DEFAULT_MAX_ANSWER_BYTES, DEFAULT_MAX_ANSWER_BYTES_PER_CALLER
from fastapi_mcp_routes.store.base import Holder
from fastapi_mcp_routes.store.policy import Bound, Tally, bound_holders

_PER_CALLER: Final = "Limits.max_answer_bytes_per_caller"
_TOTAL: Final = "Limits.max_answer_bytes"


class AnswerBudget:
    """Bytes of answers being built or written, per holder and in all (`Limits.max_answer_bytes`,
    `Limits.max_answer_bytes_per_caller`)."""

    __slots__ = ("_held", "_per_caller", "_tally", "total")

    def __init__(
        self, total: int = DEFAULT_MAX_ANSWER_BYTES, per_caller: int = DEFAULT_MAX_ANSWER_BYTES_PER_CALLER
    ) -> None:
        self.total = total
        self._per_caller = per_caller
        self._held: dict[bytes, int] = {}
        self._tally = Tally(total)

    def held(self, holder: Holder | None = None) -> int:
        """Bytes held by `holder`, or by everyone."""
        return self._tally.held if holder is None else self._held.get(holder.owner, 0)

    def take(self, holder: Holder, size: int) -> str | None:
        """Hold `size` more bytes for `holder`; `None` when held, else why not, naming the bound."""
        owner = holder.owner
        mine = self._held.get(owner, 0) + size
        if mine > self._per_caller:
            return f"this caller's answers being built or written would pass {self._per_caller:,} bytes ({_PER_CALLER})"
        over = self._tally.over(holder.trust, size)
        if over is not None:
            return _total_refusal(over)
        self._held[owner] = mine
        self._tally.add(holder.trust, size)
        return None

    def give_back(self, holder: Holder, size: int) -> None:
        """Let go of `size` bytes `holder` took."""
        if not size:
            return
        owner = holder.owner
        left = self._held[owner] - size
        if left:
            self._held[owner] = left
        else:
            del self._held[owner]
        self._tally.add(holder.trust, -size)


def _total_refusal(bound: Bound) -> str:
    who, limit = bound_holders(bound), bound[2]
    if who is None:
        return f"the answers this server builds or writes at once would pass {limit:,} bytes ({_TOTAL})"
    held = f"the answers {who} have built or written at once would pass {limit:,} bytes"
    return f"{held} (the share of {_TOTAL} {who} may hold)"


class Holding:
    """What one request holds of an `AnswerBudget`: taken as its answer grows, given back at once
    when it is written or dropped."""

    __slots__ = ("budget", "holder", "size")

    def __init__(self, budget: AnswerBudget, holder: Holder) -> None:
        self.budget = budget
        self.holder = holder
        self.size = 0

    def take(self, size: int) -> str | None:
        """Hold `size` more bytes; `None` when held, else the refusal's reason."""
        refused = self.budget.take(self.holder, size)
        if refused is None:
            self.size += size
        return refused

    def release(self) -> None:
        self.budget.give_back(self.holder, self.size)
        self.size = 0

    def __enter__(self) -> Holding:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()
