"""Sessions bound to their caller, with idle expiry and a cap; Origin and Host checks."""

from __future__ import annotations

import pytest

from fastapi_mcp_routes.server.sessions import SessionStore
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


def store_with(clock: ManualClock, max_sessions: int = 10) -> SessionStore:
    return SessionStore(idle_seconds=IDLE_S, max_sessions=max_sessions, key=b"k" * 32, clock=clock)


# SessionStore


def test_session_ids_are_unique_and_long() -> None:
    store = SessionStore(max_sessions=1000)
    binding = store.binding([b"Bearer alice"])
    ids = {store.open(binding, VERSION).id for _ in range(200)}
    assert len(ids) == 200
    assert min(len(session_id) for session_id in ids) >= 43  # 32 random bytes, base64url


def test_session_is_found_by_the_caller_that_opened_it() -> None:
    store = store_with(ManualClock())
    alice = store.binding([b"Bearer alice"])
    session = store.open(alice, VERSION)
    found = store.find(session.id, alice)
    assert found is session
    assert found.protocol_version == VERSION


def test_binding_depends_on_the_credentials_and_the_key() -> None:
    store = store_with(ManualClock())
    assert store.binding([b"Bearer alice"]) == store.binding([b"Bearer alice"])
    assert store.binding([b"Bearer alice"]) != store.binding([b"Bearer bob"])
    assert store.binding([b"ab", b"c"]) != store.binding([b"a", b"bc"])
    other_key = SessionStore(key=b"o" * 32)
    assert other_key.binding([b"Bearer alice"]) != store.binding([b"Bearer alice"])
    assert b"alice" not in store.binding([b"Bearer alice"])


def test_foreign_session_is_answered_like_unknown() -> None:
    store = store_with(ManualClock())
    alice, mallory = store.binding([b"Bearer alice"]), store.binding([b"Bearer mallory"])
    session = store.open(alice, VERSION)
    assert store.find(session.id, mallory) is None
    assert store.find("no-such-session", mallory) is None
    # The probe neither ends nor steals the owner's session.
    assert store.find(session.id, alice) is session


def test_session_expires_after_its_idle_time() -> None:
    clock = ManualClock()
    store = store_with(clock)
    alice = store.binding([b"Bearer alice"])
    session = store.open(alice, VERSION)
    clock.advance(IDLE_S + 1)
    assert store.find(session.id, alice) is None
    assert len(store) == 0


def test_use_keeps_a_session_alive() -> None:
    clock = ManualClock()
    store = store_with(clock)
    alice = store.binding([b"Bearer alice"])
    session = store.open(alice, VERSION)
    for _ in range(5):
        clock.advance(IDLE_S - 1)
        assert store.find(session.id, alice) is session


def test_expired_sessions_are_evicted_when_a_new_one_opens() -> None:
    clock = ManualClock()
    store = store_with(clock)
    alice = store.binding([b"Bearer alice"])
    store.open(alice, VERSION)
    store.open(alice, VERSION)
    clock.advance(IDLE_S + 1)
    fresh = store.open(alice, VERSION)
    assert len(store) == 1
    assert store.find(fresh.id, alice) is fresh


def test_cap_evicts_the_least_recently_used_session() -> None:
    store = store_with(ManualClock(), max_sessions=2)
    alice = store.binding([b"Bearer alice"])
    first = store.open(alice, VERSION)
    second = store.open(alice, VERSION)
    assert store.find(first.id, alice) is first  # now `second` is the least recently used
    third = store.open(alice, VERSION)
    assert len(store) == 2
    assert store.find(second.id, alice) is None
    assert store.find(first.id, alice) is first
    assert store.find(third.id, alice) is third


def test_close_ends_the_session() -> None:
    store = store_with(ManualClock())
    alice = store.binding([b"Bearer alice"])
    session = store.open(alice, VERSION)
    assert store.close(session.id, alice) is True
    assert store.find(session.id, alice) is None
    assert store.close(session.id, alice) is False


def test_close_by_a_foreign_caller_leaves_the_session_open() -> None:
    store = store_with(ManualClock())
    alice, mallory = store.binding([b"Bearer alice"]), store.binding([b"Bearer mallory"])
    session = store.open(alice, VERSION)
    assert store.close(session.id, mallory) is False
    assert store.find(session.id, alice) is session


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"idle_seconds": 0}, "session idle expiry must be a positive number of seconds, got 0"),
        ({"max_sessions": 0}, "the session cap must be at least 1, got 0"),
    ],
)
def test_store_configuration_errors_are_raised(options: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SessionStore(**options)  # type: ignore[arg-type]


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
