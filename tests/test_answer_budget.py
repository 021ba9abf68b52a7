"""The answer budget alone: bytes held per caller and in all, shares for callers trusted less,
every byte given back."""

from __future__ import annotations

from fastapi_mcp_routes.server.budget import AnswerBudget, Holding
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
    budget = AnswerBudget(total=1000, per_caller=100)
    with Holding(budget, ANONYMOUS) as holding:
        assert holding.take(70) is None
        assert holding.take(70) is not None  # refused: not counted
        assert budget.held(ANONYMOUS) == 70
    assert budget.held() == 0
    assert budget.held(ANONYMOUS) == 0
    assert budget.take(ANONYMOUS, 100) is None
