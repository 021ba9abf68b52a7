"""`uvicorn --workers 2`: two processes behind one socket, each with its own memory, the kernel
choosing which takes each connection.

The workers share the secret that seals session ids, requestState and confirmation tokens
(`FASTAPI_MCP_ROUTES_SECRET`), so either accepts what the other issued: sessions used over a new
connection per request, the official client with its pool, stateless calls and their
confirmations all succeed, without a store and with Redis (`store=RedisStore...`). What crosses
processes only through a store (answers, cancellations, resumes) is tested on replicas, where
the test chooses the process (test_replicas.py). The flows are shown sound against one process
there too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import httpx
import pytest

from tests.support.deployments import deployment_env
from tests.support.processes import serve_process_group, serve_processes
from tests.support.redis import redis_pings
from tests.support.runs import (
    CONCURRENT_SESSIONS,
    FRESH_CONNECTIONS,
    WORKERS_APP,
    Tally,
    a_few_at_once,
    assert_all_succeeded,
    over_processes,
    sdk_sessions,
    sessions_over_fresh_connections,
    stateless_rounds,
)
from tests.support.waits import WAIT_S

pytestmark = [pytest.mark.anyio, pytest.mark.processes]

SESSIONS: Final = 25
CALLS: Final = 20


@pytest.fixture(scope="module")
def workers_without_store() -> Iterator[str]:
    with serve_processes(WORKERS_APP, workers=2, env=deployment_env()) as url:
        yield url


@pytest.fixture(scope="module")
def workers_with_redis(redis_url: str) -> Iterator[str]:
    with serve_processes(WORKERS_APP, workers=2, env=deployment_env(redis_url)) as url:
        yield url


# -- the harness: processes started, served and stopped ----------------------------------------


def test_a_process_that_cannot_start_is_reported_with_its_output() -> None:
    with (
        pytest.raises(RuntimeError, match=r'Could not import module "tests\.no_such_app"'),
        serve_processes("tests.no_such_app:app"),
    ):
        pass  # pragma: no cover - never reached


async def test_every_worker_serves_and_all_are_stopped_at_the_end() -> None:
    pids: set[int] = set()
    tally = Tally()
    with serve_processes(WORKERS_APP, workers=2, env=deployment_env()) as url:
        async with httpx.AsyncClient(base_url=url, timeout=WAIT_S, limits=FRESH_CONNECTIONS) as http:

            async def ask_twenty_times() -> None:
                for _ in range(20):
                    pids.add((await http.get("/process")).json()["pid"])

            await a_few_at_once(ask_twenty_times, CONCURRENT_SESSIONS, tally)
    assert not tally.failures, tally.report()
    assert len(pids) == 2
    assert [pid for pid in pids if alive(pid)] == []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie has exited, and waits for its parent to notice
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_each_worker_logs_the_first_line_the_readme_shows() -> None:
    # the docs' "Deploying with several workers or replicas": "The first log line of each process
    # says what it serves and where its state lives". A new user runs `uvicorn app --workers N`
    # as the docs say, with uvicorn's own logging and nothing more.
    with serve_process_group(WORKERS_APP, workers=2, env=deployment_env()) as (_, running):
        log = running.log()
    lines = [line for line in log.splitlines() if "MCP endpoint /mcp" in line]
    assert len(lines) == 2, f"no worker said what it serves and where its state lives:\n{log}"
    assert all("this process's memory" in line and "FASTAPI_MCP_ROUTES_SECRET" in line for line in lines)


@pytest.mark.redis
def test_the_redis_server_of_the_tests_answers(redis_url: str) -> None:
    address = urlsplit(redis_url)
    assert address.hostname is not None
    assert address.port is not None
    assert redis_pings(address.port, address.hostname)


# -- sharing the secret, without a store -------------------------------------------------------


async def test_two_workers_serve_sessions_on_fresh_connections(workers_without_store: str) -> None:
    tally = await over_processes(lambda: sessions_over_fresh_connections(workers_without_store, SESSIONS, CALLS), 2)
    assert_all_succeeded(tally, processes=2)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_two_workers_serve_sdk_sessions(workers_without_store: str, mode: str) -> None:
    tally = await over_processes(lambda: sdk_sessions(workers_without_store, mode, SESSIONS, CALLS), 2)
    assert_all_succeeded(tally, processes=2)


async def test_two_workers_serve_stateless_calls_and_confirmations(workers_without_store: str) -> None:
    tally = await over_processes(lambda: stateless_rounds(workers_without_store, SESSIONS), 2)
    assert_all_succeeded(tally, processes=2)


# -- sharing the secret and a Redis store ------------------------------------------------------


@pytest.mark.redis
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_two_workers_sharing_redis_serve_sdk_sessions(workers_with_redis: str, mode: str) -> None:
    tally = await over_processes(lambda: sdk_sessions(workers_with_redis, mode, SESSIONS, CALLS), 2)
    assert_all_succeeded(tally, processes=2)
