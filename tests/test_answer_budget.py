"""The answer budget alone: bytes held per caller and in all, shares for callers trusted less,
every byte given back."""

from __future__ import annotations

from fastapi_mcp_routes.server.budget import UNCOUNTED_BYTES, AnswerBudget, Holding
from fastapi_mcp_routes.store.base import Holder, Trust

ANONYMOUS = Holder(b"address\x00127.0.0.2", Trust.ANONYMOUS)
OTHER_ANONYMOUS = Holder(b"address\x00127.0.0.3", Trust.ANONYMOUS)
CLAIMED = Holder(b"address\x00127.0.0.4", Trust.CLAIMED)
VERIFIED = Holder(b"principal", Trust.VERIFIED)


def test_a_caller_past_its_bytes_is_refused_naming_the_bound_and_others_are_not() -> None:
    budget = AnswerBudget(total=1000, per_caller=100)
    assert budget.take(ANONYMOUS, 60) is None
    refused = budget.take(ANONYMOUS, 60)
    assert refused is not None
    assert "(Limits.max_answer_bytes_per_caller)" in refused
    assert budget.take(OTHER_ANONYMOUS, 60) is None
    assert budget.held(ANONYMOUS) == 60
    assert budget.held() == 120


def test_anonymous_callers_fill_only_half_and_leave_the_rest_to_callers_trusted_more() -> None:
    budget = AnswerBudget(total=1000, per_caller=400)
    assert budget.take(ANONYMOUS, 400) is None
    refused = budget.take(OTHER_ANONYMOUS, 200)
    assert refused is not None
    assert "(the share of Limits.max_answer_bytes anonymous callers may hold)" in refused
    assert budget.take(CLAIMED, 350) is None  # three quarters in all for callers without verified credentials
    claimed_refused = budget.take(CLAIMED, 50)
    assert claimed_refused is not None
    assert "callers without verified credentials" in claimed_refused
    assert budget.take(VERIFIED, 250) is None
    total_refused = budget.take(VERIFIED, 1)
    assert total_refused is not None
    assert "(Limits.max_answer_bytes)" in total_refused


def test_a_holding_gives_back_all_it_took_once_done() -> None:
    budget = AnswerBudget(total=80 * UNCOUNTED_BYTES, per_caller=16 * UNCOUNTED_BYTES)
    small = budget.uncounted
    assert small == UNCOUNTED_BYTES
    with Holding(budget, ANONYMOUS) as holding:
        assert holding.hold(small) is None
        assert budget.held() == 0  # small answers are not counted
        assert holding.hold(small + 1) is None  # past it, the whole answer is
        assert budget.held(ANONYMOUS) == small + 1
        assert holding.hold(17 * small) is not None  # refused: not counted
        assert budget.held(ANONYMOUS) == small + 1
    assert budget.held() == 0
    assert budget.held(ANONYMOUS) == 0
    assert budget.take(ANONYMOUS, 16 * small) is None


def test_the_uncounted_size_is_an_eighth_of_a_small_callers_bound() -> None:
    assert AnswerBudget(total=1000, per_caller=800).uncounted == 100


def test_an_answer_being_written_is_counted_past_the_bounds_and_later_takes_see_it() -> None:
    budget = AnswerBudget(total=80 * UNCOUNTED_BYTES, per_caller=4 * UNCOUNTED_BYTES)
    answer = b"x" * (6 * UNCOUNTED_BYTES)  # built already: counted whatever the bound, never refused
    with Holding(budget, ANONYMOUS) as writing:
        writing.written(answer)
        assert budget.held(ANONYMOUS) == len(answer)
        assert budget.take(ANONYMOUS, UNCOUNTED_BYTES) is not None  # the caller's next answer waits
        assert budget.take(OTHER_ANONYMOUS, UNCOUNTED_BYTES) is None  # another caller's does not
        budget.give_back(OTHER_ANONYMOUS, UNCOUNTED_BYTES)
        writing.written(b"small")  # an answer is counted once, at its largest
        assert budget.held(ANONYMOUS) == len(answer)
    assert budget.held() == 0
    with Holding(budget, ANONYMOUS) as writing:
        writing.written(b"x" * budget.uncounted)  # small answers are not counted
        assert budget.held() == 0
