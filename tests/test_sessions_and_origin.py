"""Sessions bound to their caller, with idle expiry and a cap; Origin and Host checks."""

from __future__ import annotations

import anyio
import pytest

from fastapi_mcp_routes.options import Sessions
from fastapi_mcp_routes.server.deployment import Deployment
from fastapi_mcp_routes.server.sealing.secret import Secret
from fastapi_mcp_routes.server.sessions.manager import SessionManager
from fastapi_mcp_routes.store.memory import MemoryStore
from fastapi_mcp_routes.transport.origin import OriginPolicy

VERSION = "2025-11-25"
IDLE_S = 60.0


class ManualClock:
    """A clock that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def manager_with(
    clock: ManualClock, max_sessions: int = 10, max_per_caller: int = 10
) -> tuple[SessionManager, MemoryStore]:
    store = MemoryStore(clock)
    options = Sessions(idle_s=IDLE_S, max_sessions=max_sessions, max_per_caller=max_per_caller)
    return SessionManager(options=options, deployment=Deployment(Secret([b"k" * 32], "random"), store)), store


# SessionManager over the MemoryStore

ALICE, BOB, MALLORY = b"Bearer alice", b"Bearer bob", b"Bearer mallory"


@pytest.mark.anyio
async def test_session_ids_are_unique_and_long() -> None:
    sessions, _ = manager_with(ManualClock(), max_sessions=1000, max_per_caller=1000)
    ids = {(await sessions.open(ALICE, VERSION))[1] for _ in range(200)}
    assert len(ids) == 200
    assert min(len(session_id) for session_id in ids) >= 43  # 16 random bytes and a 16-byte tag, at least


@pytest.mark.anyio
async def test_session_is_found_by_the_caller_that_opened_it() -> None:
    sessions, _ = manager_with(ManualClock())
    session, session_id = await sessions.open(ALICE, VERSION)
    found = await sessions.find(session_id, ALICE)
    assert found == session
    assert found is not None
    assert found.protocol_version == VERSION


def test_binding_depends_on_the_credentials_and_the_key() -> None:
    sessions, _ = manager_with(ManualClock())
    assert sessions.binding(ALICE) == sessions.binding(ALICE)
    assert sessions.binding(ALICE) != sessions.binding(BOB)
    other_key = SessionManager(options=Sessions(), deployment=Deployment(Secret([b"o" * 32], "random"), MemoryStore()))
    assert other_key.binding(ALICE) != sessions.binding(ALICE)
    assert b"alice" not in sessions.binding(ALICE)


@pytest.mark.anyio
async def test_foreign_session_is_answered_like_unknown() -> None:
    sessions, _ = manager_with(ManualClock())
    session, session_id = await sessions.open(ALICE, VERSION)
    assert await sessions.find(session_id, MALLORY) is None
    assert await sessions.find("no-such-session", MALLORY) is None
    # The probe neither ends nor steals the owner's session.
    assert await sessions.find(session_id, ALICE) == session


@pytest.mark.anyio
async def test_session_expires_after_its_idle_time() -> None:
    clock = ManualClock()
    sessions, store = manager_with(clock)
    session, session_id = await sessions.open(ALICE, VERSION)
    clock.advance(IDLE_S + 1)
    assert await sessions.find(session_id, ALICE) is None
    assert await store.find_session(session.id, IDLE_S) is None


@pytest.mark.anyio
async def test_use_keeps_a_session_alive() -> None:
    clock = ManualClock()
    sessions, _ = manager_with(clock)
    session, session_id = await sessions.open(ALICE, VERSION)
    for _ in range(5):
        clock.advance(IDLE_S - 1)
        assert await sessions.find(session_id, ALICE) == session


@pytest.mark.anyio
async def test_expired_sessions_are_evicted_when_a_new_one_opens() -> None:
    clock = ManualClock()
    sessions, store = manager_with(clock)
    first, _first_id = await sessions.open(ALICE, VERSION)
    second, _second_id = await sessions.open(BOB, VERSION)
    clock.advance(IDLE_S + 1)
    fresh, fresh_id = await sessions.open(ALICE, VERSION)
    # Looking with an idle time long enough to see stale records: they are gone, not hidden.
    assert await store.find_session(first.id, 10 * IDLE_S) is None
    assert await store.find_session(second.id, 10 * IDLE_S) is None
    assert await sessions.find(fresh_id, ALICE) == fresh


@pytest.mark.anyio
async def test_cap_evicts_the_least_recently_used_session() -> None:
    sessions, _ = manager_with(ManualClock(), max_sessions=2)
    first, first_id = await sessions.open(ALICE, VERSION)
    _second, second_id = await sessions.open(BOB, VERSION)
    assert await sessions.find(first_id, ALICE) == first  # now `second` is the least recently used
    third, third_id = await sessions.open(MALLORY, VERSION)
    assert await sessions.find(second_id, BOB) is None
    assert await sessions.find(first_id, ALICE) == first
    assert await sessions.find(third_id, MALLORY) == third


@pytest.mark.anyio
async def test_a_caller_past_its_own_cap_loses_its_own_oldest_session_and_nobody_elses() -> None:
    sessions, _ = manager_with(ManualClock(), max_sessions=100, max_per_caller=2)
    bobs, bobs_id = await sessions.open(BOB, VERSION)
    (_first, first_id), (second, second_id), (third, third_id) = [await sessions.open(ALICE, VERSION) for _ in range(3)]
    assert await sessions.find(first_id, ALICE) is None
    assert await sessions.find(second_id, ALICE) == second
    assert await sessions.find(third_id, ALICE) == third
    assert await sessions.find(bobs_id, BOB) == bobs


@pytest.mark.anyio
async def test_close_ends_the_session_and_cancels_its_calls() -> None:
    sessions, _ = manager_with(ManualClock())
    session, session_id = await sessions.open(ALICE, VERSION)
    scope = anyio.CancelScope()
    sessions.running(session.id)["call-1"] = scope
    await sessions.close(session)
    assert await sessions.find(session_id, ALICE) is None
    assert scope.cancel_called


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"idle_s": 0}, "Sessions.idle_s must be a positive, finite number of seconds, got 0"),
        ({"max_sessions": 0}, "Sessions.max_sessions must be a positive whole number, got 0"),
        ({"max_per_caller": True}, "Sessions.max_per_caller must be a positive whole number, got True"),
    ],
)
def test_session_option_errors_are_raised(options: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Sessions(**options)  # type: ignore[arg-type]


# OriginPolicy.origin_allowed

DEFAULT_POLICY = OriginPolicy.build(None, None)


def test_absent_origin_is_allowed() -> None:
    assert DEFAULT_POLICY.origin_allowed(None, "localhost:8000", "http")


@pytest.mark.parametrize(
    ("origin", "host", "scheme"),
    [
        ("http://localhost:8000", "localhost:8000", "http"),
        ("HTTP://LocalHost:8000/", "localhost:8000", "http"),
        ("https://api.example.com", "API.example.com", "https"),
    ],
)
def test_same_origin_is_allowed(origin: str, host: str, scheme: str) -> None:
    assert DEFAULT_POLICY.origin_allowed(origin, host, scheme)


@pytest.mark.parametrize(
    "origin",
    [
        "http://localhost:9000",
        "https://localhost:8000",
        "http://localhost:8000.evil.example",
        "http://evil-localhost:8000",
        "http://localhost",
        "null",
    ],
    ids=["other-port", "other-scheme", "look-alike-suffix", "look-alike-prefix", "no-port", "null"],
)
def test_other_origin_is_refused(origin: str) -> None:
    assert not DEFAULT_POLICY.origin_allowed(origin, "localhost:8000", "http")


def test_origin_is_refused_when_the_host_is_unknown() -> None:
    assert not DEFAULT_POLICY.origin_allowed("http://localhost:8000", None, "http")


def test_listed_origin_is_allowed() -> None:
    policy = OriginPolicy.build(["https://App.example.com/"], None)
    assert policy.origin_allowed("https://app.example.com", "localhost:8000", "http")
    assert not policy.origin_allowed("https://app.example.com:8443", "localhost:8000", "http")


def test_wildcard_origin_disables_the_check() -> None:
    policy = OriginPolicy.build(["*"], None)
    assert policy.origin_allowed("http://evil.example", "localhost:8000", "http")
    assert policy.origin_allowed("null", "localhost:8000", "http")


@pytest.mark.parametrize(
    ("origins", "hosts", "message"),
    [
        ("https://app.example.com", None, "allowed_origins must be a list of strings"),
        (None, "proxy.internal", "allowed_hosts must be a list of strings"),
        ([""], None, "allowed_origins must hold non-empty strings, got ''"),
        (None, [None], "allowed_hosts must hold non-empty strings, got None"),
    ],
)
def test_policy_configuration_errors_are_raised(origins: object, hosts: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        OriginPolicy.build(origins, hosts)  # type: ignore[arg-type]


# OriginPolicy.host_allowed


@pytest.mark.parametrize("host", ["localhost:8000", "LOCALHOST", "127.0.0.1:8000", "127.0.0.2", "[::1]:8000"])
def test_loopback_server_accepts_loopback_hosts(host: str) -> None:
    assert DEFAULT_POLICY.host_allowed(host, "127.0.0.1")


@pytest.mark.parametrize(
    "host",
    ["evil.example", "evil.example:8000", "127.0.0.1.evil.example", "localhost.evil.example", "localhost@evil.example"],
)
def test_loopback_server_refuses_other_hosts(host: str) -> None:
    assert not DEFAULT_POLICY.host_allowed(host, "127.0.0.1")
    assert not DEFAULT_POLICY.host_allowed(host, "::1")


def test_loopback_server_refuses_a_request_without_host() -> None:
    assert not DEFAULT_POLICY.host_allowed(None, "127.0.0.1")
    assert not DEFAULT_POLICY.host_allowed("", "127.0.0.1")


def test_loopback_server_accepts_listed_hosts() -> None:
    policy = OriginPolicy.build(None, ["Proxy.Internal"])
    assert policy.host_allowed("proxy.internal", "127.0.0.1")
    assert policy.host_allowed("proxy.internal:8443", "127.0.0.1")
    assert not policy.host_allowed("other.internal", "127.0.0.1")


def test_wildcard_host_lets_a_loopback_server_accept_any_host() -> None:
    assert OriginPolicy.build(None, ["*"]).host_allowed("evil.example", "127.0.0.1")


@pytest.mark.parametrize("server_address", ["10.0.0.5", "203.0.113.9", "0.0.0.0", None])
def test_non_loopback_server_accepts_any_host(server_address: str | None) -> None:
    assert DEFAULT_POLICY.host_allowed("evil.example", server_address)
