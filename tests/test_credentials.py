"""`Limits.verify_credentials`: which credentials rank above anonymous callers in the bounds.

The check itself, with a clock moved by hand (its answers kept a minute per credential, the
accepted apart from the refused), and against a real server: a session stays bound to the
credentials that opened it, whatever account the check finds them to be."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import httpx
import pytest
from fastapi import FastAPI

from fastapi_mcp_routes import Limits, mcp_routes, mcp_tool
from fastapi_mcp_routes.store.base import Trust
from fastapi_mcp_routes.store.policy import holder_of
from fastapi_mcp_routes.transport.credentials import ANSWER_TTL_S, ANSWERS_KEPT, CredentialCheck
from tests.support.jsonrpc import open_session, rpc
from tests.support.servers import serve
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.anyio
HEADERS = frozenset({b"x-api-key", b"authorization"})
ACCOUNTS = {"a1": "acme", "a2": "acme", "own": True}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Counted:
    """The app's check: the account of a known key; it counts how often it is asked."""

    def __init__(self) -> None:
        self.asked: list[Mapping[str, str]] = []

    def __call__(self, headers: Mapping[str, str]) -> str | bool | None:
        self.asked.append(dict(headers))
        return ACCOUNTS.get(headers.get("x-api-key", ""))


def key(value: str) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """A request's headers carrying `value` as its key, and its credentials' canonical form."""
    return [(b"x-api-key", value.encode()), (b"cookie", b"c=1")], b"x-api-key=" + value.encode()


async def test_an_accepted_key_is_counted_per_account_and_a_refused_one_as_no_key() -> None:
    check = CredentialCheck(Counted(), HEADERS)
    first, second = await check.account(*key("a1")), await check.account(*key("a2"))
    assert first == second == b"named\x00acme"  # two keys of one account are one caller
    own = await check.account(*key("own"))
    assert own is not None
    assert own.startswith(b"credentials\x00")
    assert await check.account(*key("made-up")) is None
    assert holder_of(b"x-api-key=a1", "10.0.0.1", None, first).trust == Trust.CLAIMED
    assert holder_of(b"x-api-key=made-up", "10.0.0.1", None, None) == holder_of(b"", "10.0.0.1", None)


async def test_the_check_is_given_the_credential_headers_only_and_asked_once_a_minute_per_credential() -> None:
    clock, counted = Clock(), Counted()
    check = CredentialCheck(counted, HEADERS, clock)
    for _ in range(3):
        await check.account(*key("a1"))
        await check.account(*key("made-up"))
    assert counted.asked == [{"x-api-key": "a1"}, {"x-api-key": "made-up"}]  # no cookie
    clock.now += ANSWER_TTL_S
    await check.account(*key("a1"))
    assert len(counted.asked) == 3  # a revoked key keeps its rank a minute at most


async def test_a_flood_of_made_up_keys_pushes_out_no_accepted_answer() -> None:
    counted = Counted()
    check = CredentialCheck(counted, HEADERS)
    await check.account(*key("a1"))
    for n in range(ANSWERS_KEPT + 10):
        await check.account(*key(f"made-up-{n}"))
    asked = len(counted.asked)
    assert await check.account(*key("a1")) == b"named\x00acme"
    assert len(counted.asked) == asked


async def test_a_coroutine_check_is_awaited_and_a_failing_one_ranks_nobody_higher(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def known(headers: Mapping[str, str]) -> str | None:
        return "acme" if headers.get("x-api-key") == "a1" else None

    assert await CredentialCheck(known, HEADERS).account(*key("a1")) == b"named\x00acme"

    def broken(headers: Mapping[str, str]) -> bool:
        raise RuntimeError("the key service is down")

    failing = CredentialCheck(broken, HEADERS)
    with caplog.at_level(logging.ERROR, "fastapi_mcp_routes"):
        assert await failing.account(*key("a1")) is None
        assert await failing.account(*key("a2")) is None
    assert [record.message for record in caplog.records].count(
        "Limits.verify_credentials failed; its caller counts as anonymous"
    ) == 1  # once a minute, not once a key


def test_a_check_that_is_not_a_function_is_refused_at_startup() -> None:
    with pytest.raises(ValueError, match=r"Limits\.verify_credentials must be a function or None, got 'yes'"):
        Limits(verify_credentials="yes")  # type: ignore[arg-type]


def test_a_session_opened_with_one_key_is_not_found_with_another_key_of_the_same_account() -> None:
    app = FastAPI()
    app.include_router(mcp_routes(app, limits=Limits(verify_credentials=Counted())))

    @mcp_tool()
    @app.get("/small")
    def small() -> dict[str, bool]:
        return {"ok": True}

    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        opened = open_session(http, headers={"x-api-key": "a1"})
        assert http.post("/mcp", json=rpc("ping"), headers=opened).status_code == 200
        other_key = {**opened, "x-api-key": "a2"}
        assert http.post("/mcp", json=rpc("ping"), headers=other_key).status_code == 404


async def test_a_check_that_never_answers_ranks_nobody_higher_and_holds_no_request() -> None:
    # Found in review: an async check that hangs (a key service that accepts the connection
    # and never answers) held every keyed MCP request forever; nothing bounds the wait.
    import anyio

    async def hangs(headers: Mapping[str, str]) -> str:
        await anyio.sleep_forever()
        raise AssertionError

    with anyio.fail_after(WAIT_S):
        assert await CredentialCheck(hangs, HEADERS).account(*key("a1")) is None


async def test_a_burst_of_one_new_key_asks_the_check_once() -> None:
    # Found in review: concurrent requests with one credential not yet cached each ask the
    # app's check (no single flight), so a burst multiplies the load on the key service.
    import anyio

    asked: list[str] = []

    async def slow(headers: Mapping[str, str]) -> str:
        asked.append(headers["x-api-key"])
        await anyio.sleep(0.05)
        return "acme"

    check = CredentialCheck(slow, HEADERS)
    with anyio.fail_after(WAIT_S):
        async with anyio.create_task_group() as group:
            for _ in range(20):
                group.start_soon(check.account, *key("a1"))
    assert len(asked) == 1
