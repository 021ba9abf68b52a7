"""A real Sentinel deployment to test against: one primary, one replica (`redis-server
--replicaof`) and three sentinels (Debian's `redis-sentinel`), all on free 127.0.0.1 ports and
stopped at the end; and what a failover test does to it: kill the primary, wait until the
sentinels name the replica in its place.

The sentinels take a primary for down after `DOWN_AFTER_MS` without an answer, and may start
another failover after `FAILOVER_TIMEOUT_MS`: small, so that a failover takes a few seconds.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import redis
import redis.asyncio
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from tests.support.machine import HOST, free_port
from tests.support.processes import Running, start_process
from tests.support.redis import redis_pings
from tests.support.waits import WAIT_S

SERVICE: Final = "fastapi-mcp-routes"
SENTINELS: Final = 3
QUORUM: Final = 2  # sentinels that must agree the primary is down before one fails it over
DOWN_AFTER_MS: Final = 1000
FAILOVER_TIMEOUT_MS: Final = 3000
# Where Debian puts the binaries; `redis-sentinel` is a name `redis-server` answers to.
_FOLDERS: Final = ("/usr/bin", "/usr/sbin", "/usr/local/bin")
_POLL_S: Final = 0.05
HOW_TO_GET: Final = "The Sentinel tests need redis-sentinel: apt install redis-sentinel (or `make redis-sentinel`)."


# The variable that names the sentinels to an app in another process: "host:port,host:port,...".
SENTINELS_VARIABLE: Final = "FASTAPI_MCP_ROUTES_TEST_SENTINELS"
# What `RedisStore.from_url` bounds, for a client of the sentinels' primary: a Redis that does not
# answer is an error within seconds, and a dropped connection is tried once more, never a
# timed-out script (it may have run).
CLIENT_OPTIONS: Final[dict[str, Any]] = {
    "socket_timeout": 5.0,
    "socket_connect_timeout": 5.0,
    "retry": Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
}


def primary_client(sentinels: list[tuple[str, int]], service: str = SERVICE) -> redis.asyncio.Redis:
    """A client of whichever server the sentinels name primary of `service`, as an app makes one
    for `RedisStore(...)`: it asks the sentinels again once its connection fails."""
    bounds = {"socket_timeout": 1.0, "socket_connect_timeout": 1.0}  # a sentinel that does not answer
    return Sentinel(sentinels, sentinel_kwargs=bounds).master_for(service, **CLIENT_OPTIONS)


def sentinels_of(value: str) -> list[tuple[str, int]]:
    """The sentinels `SENTINELS_VARIABLE` names."""
    return [(host, int(port)) for host, port in (item.rsplit(":", 1) for item in value.split(","))]


class SentinelMissing(LookupError):
    """No redis-server or redis-sentinel to start here."""


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found is not None:
        return found
    candidates = (os.path.join(folder, name) for folder in _FOLDERS)
    return next((path for path in candidates if os.access(path, os.X_OK)), None)


def sentinel_missing() -> str | None:
    """Why no Sentinel deployment can be started here, and how to get one; `None` when it can."""
    if _binary("redis-server") is None:
        return "The Sentinel tests need redis-server: apt install redis-server redis-sentinel."
    if _binary("redis-sentinel") is None:
        return HOW_TO_GET
    return None


@dataclass
class SentinelDeployment:
    """The running deployment: the sentinels' addresses, the service they watch, and each Redis
    server's process by its port."""

    sentinels: list[tuple[str, int]]
    service: str
    servers: dict[int, Running]

    @property
    def sentinels_value(self) -> str:
        """The sentinels as `SENTINELS_VARIABLE` names them."""
        return ",".join(f"{host}:{port}" for host, port in self.sentinels)

    def _ask(self, port: int, *command: Any) -> Any:
        client = redis.Redis(HOST, port, socket_timeout=1, socket_connect_timeout=1, decode_responses=True)
        try:
            return client.execute_command(*command)
        finally:
            client.close()

    def named_primaries(self) -> set[int | None]:
        """The primary's port as each sentinel names it (`None` for one that does not answer)."""
        named: set[int | None] = set()
        for _, port in self.sentinels:
            try:
                address = self._ask(port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
            except redis.RedisError:
                address = None
            named.add(int(address[1]) if address else None)
        return named

    def primary_port(self) -> int:
        """The primary's port, as every sentinel names it."""
        (port,) = self.named_primaries()
        assert port is not None, "a sentinel does not answer"
        return port

    def kill_primary(self) -> int:
        """Kill the primary's process (SIGKILL: no goodbye to its replica or its clients); its port."""
        port = self.primary_port()
        os.killpg(self.servers[port].process.pid, signal.SIGKILL)
        return port

    def freeze_primary(self) -> int:
        """Stop the primary's process (SIGSTOP): its connections stay open and nothing answers,
        as when a network partition cuts it off; its port."""
        port = self.primary_port()
        os.killpg(self.servers[port].process.pid, signal.SIGSTOP)
        return port

    def thaw(self, port: int) -> None:
        """Let a frozen server run again (SIGCONT): it comes back as the primary it was, until
        the sentinels make it a replica of the new one."""
        os.killpg(self.servers[port].process.pid, signal.SIGCONT)

    def wait_until_replica(self, port: int) -> None:
        """Wait until the server on `port` is a replica in sync with the sentinels' primary."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.RedisError):
                role = self._ask(port, "ROLE")
                if role[0] == "slave" and role[3] == "connected":
                    return
            time.sleep(_POLL_S)
        raise RuntimeError(f"the server on port {port} did not become a replica within {WAIT_S} s")

    def wait_for_new_primary(self, old: int) -> int:
        """Wait until every sentinel names a primary other than `old`, and it takes writes; its port."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            named = self.named_primaries()
            if len(named) == 1 and None not in named and old not in named:
                (port,) = named
                assert port is not None
                if self._role(port) == "master":
                    return port
            time.sleep(_POLL_S)
        raise RuntimeError(f"the sentinels named no primary in place of port {old} within {WAIT_S} s: {named}")

    def _role(self, port: int) -> str | None:
        try:
            role: list[Any] = self._ask(port, "ROLE")
        except redis.RedisError:
            return None
        return str(role[0])

    def _ready(self) -> bool:
        """Whether every sentinel knows the primary, its replica (in sync) and the other sentinels,
        so that the primary's death would be noticed and acted on."""
        try:
            for _, port in self.sentinels:
                replicas = self._ask(port, "SENTINEL", "REPLICAS", self.service)
                peers = self._ask(port, "SENTINEL", "SENTINELS", self.service)
                if len(peers) != SENTINELS - 1 or len(replicas) != 1:
                    return False
                (fields,) = replicas  # redis-py reads each replica's fields into a dict
                if fields.get("master-link-status") != "ok" or "s_down" in fields.get("flags", ""):
                    return False
        except redis.RedisError:
            return False
        return True


def _sentinel_config(port: int, primary: int, directory: str) -> str:
    return "\n".join(
        [
            f"bind {HOST}",
            f"port {port}",
            f"dir {directory}",
            "sentinel resolve-hostnames no",
            f"sentinel monitor {SERVICE} {HOST} {primary} {QUORUM}",
            f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}",
            f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}",
            f"sentinel parallel-syncs {SERVICE} 1",
            "",
        ]
    )


@contextmanager
def sentinel_deployment() -> Iterator[SentinelDeployment]:
    """A primary, its replica and three sentinels watching them, ready for a failover; stopped
    (whatever is left of them) at the end. `SentinelMissing`, saying how to get it, without
    the binaries."""
    missing = sentinel_missing()
    if missing is not None:
        raise SentinelMissing(missing)
    server, sentinel = _binary("redis-server"), _binary("redis-sentinel")
    assert server is not None
    assert sentinel is not None
    with ExitStack() as stack:
        directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="fastapi-mcp-routes-sentinel-"))
        primary, replica = free_port(), free_port()
        servers: dict[int, Running] = {}
        for port, follows in ((primary, []), (replica, ["--replicaof", HOST, str(primary)])):
            own = Path(directory, str(port))
            own.mkdir()
            command = [server, "--bind", HOST, "--port", str(port), "--save", "", "--appendonly", "no"]
            running = stack.enter_context(start_process([*command, "--dir", str(own), *follows]))
            running.wait_until(lambda _, port=port: redis_pings(port), f"redis-server on port {port}")
            servers[port] = running
        sentinels = []
        for _ in range(SENTINELS):
            port = free_port()
            config = Path(directory, f"sentinel-{port}.conf")
            config.write_text(_sentinel_config(port, primary, directory))
            running = stack.enter_context(start_process([sentinel, str(config)]))
            running.wait_until(lambda _, port=port: redis_pings(port), f"redis-sentinel on port {port}")
            sentinels.append((HOST, port))
        deployment = SentinelDeployment(sentinels, SERVICE, servers)
        deadline = time.monotonic() + WAIT_S
        while not deployment._ready():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the sentinels did not all find the replica and each other within {WAIT_S} s")
            time.sleep(_POLL_S)
        yield deployment
