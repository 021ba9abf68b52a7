"""The bytes this process holds for callers' answers, bounded per caller and in all.

A route's response captured for a tool call, a resource read or a prompt, the frames a streaming
tool's window keeps, a skill file read, and every answer until it is written (a client that reads
slowly, or not at all, keeps its answer in the process) are each bounded per request (`Limits.max_response_bytes`,
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
from fastapi_mcp_routes.wire.errors import ServerBusy

# An answer this small is not counted (`Holding`), nor one under an eighth of a caller's bound.
UNCOUNTED_BYTES: Final = 64 * 1024
_UNCOUNTED_PART: Final = 8
_PER_CALLER: Final = "Limits.max_answer_bytes_per_caller"
_TOTAL: Final = "Limits.max_answer_bytes"


class AnswerBudget:
    """Bytes of answers being built or written, per holder and in all (`Limits.max_answer_bytes`,
    `Limits.max_answer_bytes_per_caller`)."""

    __slots__ = ("_held", "_per_caller", "_tally", "total", "uncounted")

    def __init__(
        self, total: int = DEFAULT_MAX_ANSWER_BYTES, per_caller: int = DEFAULT_MAX_ANSWER_BYTES_PER_CALLER
    ) -> None:
        self.total = total
        self._per_caller = per_caller
        self.uncounted = min(UNCOUNTED_BYTES, per_caller // _UNCOUNTED_PART)  # `Holding` counts past it
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
        over = self._tally.take(holder.trust, size)
        if over is not None:
            return _total_refusal(over)
        self._held[owner] = mine
        return None

    def count(self, holder: Holder, size: int) -> None:
        """Count `size` bytes `holder` holds already, past the bounds if need be: an answer
        built and being written, which later requests must find taken."""
        owner = holder.owner
        self._held[owner] = self._held.get(owner, 0) + size
        self._tally.count(holder.trust, size)

    def hold_written(self, holder: Holder, answer: bytes | None) -> Holding | None:
        """An answer built, held for `holder` until it is written (`Holding.release`); `None` for
        one too small to count, as most are, which then costs no holding at all."""
        if answer is None or len(answer) <= self.uncounted:
            return None
        holding = Holding(self, holder)
        holding.written(answer)
        return holding

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
        self._tally.give(holder.trust, size)


def _total_refusal(bound: Bound) -> str:
    who, limit = bound_holders(bound), bound[2]
    if who is None:
        return f"the answers this server builds or writes at once would pass {limit:,} bytes ({_TOTAL})"
    held = f"the answers {who} have built or written at once would pass {limit:,} bytes"
    return f"{held} (the share of {_TOTAL} {who} may hold)"


class Holding:
    """What one request holds of an `AnswerBudget`: taken as its answer grows, given back at once
    when it is written or dropped. An answer counts once it passes the budget's `uncounted`,
    then from its first byte: smaller ones are many and brief, and the running calls' bounds
    bound them. The `Hold` a tool call's route is captured with (tools/invoke.py)."""

    __slots__ = ("budget", "holder", "size", "uncounted")

    def __init__(self, budget: AnswerBudget, holder: Holder) -> None:
        self.budget = budget
        self.holder = holder
        self.uncounted = budget.uncounted
        self.size = 0  # bytes held against the budget

    def hold(self, total: int) -> str | None:
        """The answer is `total` bytes now: hold what it grew by; `None` when held, else the
        refusal's reason."""
        if total <= self.uncounted:
            return None
        more = total - self.size
        if more <= 0:
            return None
        refused = self.budget.take(self.holder, more)
        if refused is None:
            self.size = total
        return refused

    def written(self, answer: bytes | None) -> None:
        """An answer built, held until it is written (`release`): counted whatever the bounds,
        since refusing it now would lose what ran; requests after it find its bytes taken."""
        size = len(answer) if answer is not None else 0
        if size > self.uncounted and size > self.size:
            self.budget.count(self.holder, size - self.size)
            self.size = size

    def release(self) -> None:
        if self.size:
            self.budget.give_back(self.holder, self.size)
            self.size = 0

    def __enter__(self) -> Holding:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def busy(reason: str) -> ServerBusy:
    """An answer not built because the budget has no room for it: 429 where the caller's own
    bound is full, 503 where the process's is."""
    status = 429 if _PER_CALLER in reason else 503
    return ServerBusy(f"Server busy: not answered, {reason}; send this request again later.", status)
