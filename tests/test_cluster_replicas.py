"""Replicas sharing a Redis Cluster: two single-worker processes behind the balancer, their
store named by a cluster URL in `FASTAPI_MCP_ROUTES_REDIS_URL`, as a deployment on a managed
Redis in cluster mode sets it. The flows of tests/test_replicas.py, on the Cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.cluster import RedisCluster
from tests.support.deployments import deployment_env
from tests.support.runs import assert_all_succeeded, sdk_confirmed_mutations, sdk_sessions
from tests.test_replicas import (
    ASKING_SESSIONS,
    CALLS,
    SESSIONS,
    Replicas,
    assert_answered,
    assert_cancelled,
    assert_resumed,
    replicas,
)

pytestmark = [pytest.mark.anyio, pytest.mark.processes, pytest.mark.redis]


@pytest.fixture(scope="module")
def replicas_on_a_cluster(cluster: RedisCluster) -> Iterator[Replicas]:
    with replicas(deployment_env(cluster.store_url)) as deployment:
        yield deployment


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_replicas_sharing_a_cluster_serve_sdk_sessions(replicas_on_a_cluster: Replicas, mode: str) -> None:
    tally = await sdk_sessions(replicas_on_a_cluster.balanced, mode, SESSIONS, CALLS)
    assert_all_succeeded(tally, processes=2)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_replicas_sharing_a_cluster_confirm_with_the_user(replicas_on_a_cluster: Replicas, mode: str) -> None:
    tally, asked = await sdk_confirmed_mutations(replicas_on_a_cluster.balanced, mode, ASKING_SESSIONS)
    assert_all_succeeded(tally, processes=2)
    assert asked == 3 * ASKING_SESSIONS


async def test_replicas_sharing_a_cluster_take_an_answer_given_to_the_other(replicas_on_a_cluster: Replicas) -> None:
    await assert_answered(replicas_on_a_cluster.first, replicas_on_a_cluster.second)


async def test_replicas_sharing_a_cluster_cancel_a_call_from_the_other(replicas_on_a_cluster: Replicas) -> None:
    await assert_cancelled(replicas_on_a_cluster.first, replicas_on_a_cluster.second)


async def test_replicas_sharing_a_cluster_resume_a_stream_on_the_other(replicas_on_a_cluster: Replicas) -> None:
    await assert_resumed(replicas_on_a_cluster.first, replicas_on_a_cluster.second)
